"""Inspect eval logs (``.json`` and ``.eval``): the shared samples, usage normalisation, messy input.

The browser log has per-call provider usage, so raw replay must reproduce every call's input exactly;
the ``.eval`` sample comes from a hard-coded test model (no usage), a format sample only.
"""

from __future__ import annotations

import copy
import json
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest

from sim.cli import main
from sim.engine.dispatch import replay
from sim.importers import detect, get_importer, load_path
from sim.importers.common import ImportNotice
from sim.policies.base import make_policy
from sim.trace.codec import trace_to_dict
from sim.trace.rules import trace_problems
from sim.util.errors import TraceError
from sim.util.paths import traces_dir

INSPECT = traces_dir() / "inspect-ai"
BROWSER = INSPECT / "2025-05-12T20-27-36-04-00_browser.json"
DEDUP = INSPECT / "log_message_deduplication.eval"


def shared(path: Path) -> Path:
    if not path.is_file():
        pytest.skip(f"shared trace {path} not found (set CTXSIM_TRACES to the shared traces folder)")
    return path


def load_quiet(path: Path) -> list:
    """Import with ImportNotice as an error: the shared samples import without any notice."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", ImportNotice)
        return list(load_path(path))


def raw_replay_exact(t) -> bool:
    r = replay(t, make_policy("raw"), window=None)
    return np.array_equal(r.calls["input_tokens"], [c.input_tokens for c in t.calls])


# ------------------------------------------------------------------------------------------ shared samples
def test_browser_json_imports_validates_and_is_detected():
    path = shared(BROWSER)
    assert detect(path).name == "inspect-json"
    traces = load_quiet(path)
    # counted once: 1 sample x 1 epoch; 5 model events; events = 1 tools event (8 browser tools) +
    # the sample's 10 messages (user, 4 x (assistant tool call + tool result), final assistant answer)
    assert len(traces) == 1
    t = traces[0]
    assert (len(t.calls), len(t.events)) == (5, 11)
    assert trace_problems(trace_to_dict(t)) == []
    assert t.trace_id == "browser/1/1"
    assert t.source_format == "inspect-json"
    assert t.model == "openai/gpt-4o-mini"
    assert t.recorded_policy == {"name": "raw"}
    assert t.outcome["scores"] == {"includes": "C"}
    assert [e.kind for e in t.events] == ["tools", "user"] + ["assistant", "tool_result"] * 4 + ["assistant"]
    # every tool result answers the call just before it
    for e in t.events:
        if e.kind == "tool_result":
            assert e.tool_call_id == t.events[e.index - 1].tool_call_ids[0]
    # attachments resolved: no "attachment://" reference is left in any content
    assert not any("attachment://" in (e.content or "") for e in t.events)
    assert t.events[-1].content.startswith("The AI Security Institute (AISI)")


def test_browser_usage_is_the_providers_with_cache_reads_inside():
    path = shared(BROWSER)
    t = load_quiet(path)[0]
    assert [c.input_tokens for c in t.calls] == [1124, 1568, 2732, 3896, 5915]
    assert [c.output_tokens for c in t.calls] == [23, 17, 17, 17, 207]
    assert [c.cache_read_tokens for c in t.calls] == [0, 1024, 1536, 2688, 3840]
    assert all(c.usage_provenance == "provider" for c in t.calls)
    # The evidence: each model event keeps OpenAI's raw response; prompt_tokens (which counts cached
    # tokens inside) equals Inspect's input_tokens, so cache reads are inside and nothing is added.
    data = json.loads(path.read_text())
    raw = [e["call"]["response"]["usage"] for e in data["samples"][0]["events"] if e["event"] == "model"]
    assert [u["prompt_tokens"] for u in raw] == [c.input_tokens for c in t.calls]
    assert [u["prompt_tokens_details"]["cached_tokens"] for u in raw] == [
        c.cache_read_tokens for c in t.calls
    ]
    # and the log's own totals agree: input 15,235 of which 9,088 cache reads
    stats = data["stats"]["model_usage"]["openai/gpt-4o-mini"]
    assert sum(c.input_tokens for c in t.calls) == stats["input_tokens"] == 15235
    assert sum(c.cache_read_tokens for c in t.calls) == stats["input_tokens_cache_read"] == 9088


def test_browser_raw_replay_reproduces_every_recorded_input_exactly():
    t = load_quiet(shared(BROWSER))[0]
    r = replay(t, make_policy("raw"), window=None)
    assert np.array_equal(r.calls["input_tokens"], [c.input_tokens for c in t.calls])
    assert np.array_equal(r.calls["output_tokens"], [c.output_tokens for c in t.calls])
    # every input is the running conversation extended: the visible events explain all of it
    assert t.outcome["non_prefix_inputs"] == 0
    assert all(c.residual_tokens == 0 for c in t.calls)


def test_eval_archive_imports_as_a_format_sample():
    path = shared(DEDUP)
    assert detect(path).name == "inspect-eval"
    traces = load_quiet(path)
    # counted once: 1 sample x 1 epoch; 6 model events (5 `ls` tool calls, then "done"); events =
    # 1 tools event (bash, python) + 12 messages (summaries.json: message_count 12)
    assert len(traces) == 1
    t = traces[0]
    assert (len(t.calls), len(t.events)) == (6, 13)
    assert trace_problems(trace_to_dict(t)) == []
    assert t.trace_id == "inspect_test_utils/guess_number/0/1"
    assert t.source_format == "inspect-eval"
    assert t.model == "hardcoded/hardcoded"
    assert t.recorded_policy == {"name": "raw"}
    # a hard-coded test model: no usage anywhere, every size an estimate
    assert all(c.usage_provenance == "none" and c.input_tokens is None for c in t.calls)
    assert {e.tokens_provenance for e in t.events} == {"estimate"}
    assert [e.tool_call_id for e in t.events if e.kind == "tool_result"] == [
        f"hardcoded_{i}" for i in range(5)
    ]
    assert t.events[-1].content == "done"
    assert "Use the python function" in t.events[0].content  # a tool description held as an attachment


def test_eval_message_pool_alone_rebuilds_the_conversation(tmp_path):
    """Model events of the .eval carry only ``input_refs`` into ``message_pool``: with the sample's own
    ``messages`` emptied, the conversation comes out the same (the last answer from the output)."""
    src = shared(DEDUP)
    with zipfile.ZipFile(src) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    sample = json.loads(members["samples/0_epoch_1.json"])
    assert all(e["input"] == [] and e["input_refs"] for e in sample["events"] if e["event"] == "model")
    sample["messages"] = []
    members["samples/0_epoch_1.json"] = json.dumps(sample).encode()
    out = tmp_path / "pool_only.eval"
    with zipfile.ZipFile(out, "w") as zf:
        for n, b in members.items():
            zf.writestr(n, b)
    a, b = load_quiet(src)[0], load_quiet(out)[0]
    assert [(e.kind, e.content) for e in a.events] == [(e.kind, e.content) for e in b.events]


# ------------------------------------------------------------------------------------- synthetic logs
U1 = {"id": "u1", "role": "user", "content": "List the files."}
A1 = {
    "id": "a1",
    "role": "assistant",
    "content": "",
    "tool_calls": [{"id": "c1", "function": "bash", "arguments": {"cmd": "ls"}}],
}
T1 = {"id": "t1", "role": "tool", "tool_call_id": "c1", "function": "bash", "content": "a.py\nb.py\n"}
A2 = {"id": "a2", "role": "assistant", "content": "Two files."}


def usage(inp, out, read=None, write=None, total=None):
    u = {"input_tokens": inp, "output_tokens": out}
    if read is not None:
        u["input_tokens_cache_read"] = read
    if write is not None:
        u["input_tokens_cache_write"] = write
    if total is not None:
        u["total_tokens"] = total
    return u


def model_event(inp, out_msg, u=None, span="s1"):
    ev = {
        "event": "model",
        "span_id": span,
        "timestamp": "2025-05-12T20:27:38.462180-04:00",
        "model": "openai/gpt-4o-mini",
        "input": inp,
        "tools": [{"name": "bash", "description": "Run a command.", "parameters": {}}],
        "output": {"model": "gpt-4o-mini", "choices": [{"message": out_msg, "stop_reason": "stop"}]},
    }
    if u is not None:
        ev["output"]["usage"] = u
    return ev


def two_calls(u1=None, u2=None):
    return [
        {"event": "span_begin", "id": "s1", "type": "solver", "name": "generate"},
        model_event([U1], A1, u1),
        model_event([U1, A1, T1], A2, u2),
    ]


def inspect_log(events, messages=(), steps=None, attachments=None) -> dict:
    return {
        "version": 2,
        "status": "success",
        "eval": {
            "eval_id": "E",
            "run_id": "R",
            "task": "demo",
            "model": "openai/gpt-4o-mini",
            "packages": {"inspect_ai": "0.3.95"},
        },
        "plan": {"name": "plan", "steps": steps or [{"solver": "generate", "params": {}}]},
        "samples": [
            {
                "id": "s",
                "epoch": 2,
                "messages": list(messages),
                "events": events,
                "attachments": attachments or {},
            }
        ],
    }


def write_log(tmp_path: Path, log: dict, name: str = "log.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(log))
    return p


def write_eval(tmp_path: Path, log: dict, extra: dict[str, bytes] | None = None, name="log.eval") -> Path:
    header = {k: v for k, v in log.items() if k != "samples"}
    p = tmp_path / name
    with zipfile.ZipFile(p, "w") as zf:
        zf.writestr("header.json", json.dumps(header))
        for s in log["samples"]:
            zf.writestr(f"samples/{s['id']}_epoch_{s['epoch']}.json", json.dumps(s))
        for n, b in (extra or {}).items():
            zf.writestr(n, b)
    return p


def test_synthetic_log_json_and_eval_give_the_same_trace(tmp_path):
    log = inspect_log(two_calls(usage(50, 5, 0, total=55), usage(80, 4, 0, total=84)))
    j, e = write_log(tmp_path, log), write_eval(tmp_path, log)
    assert detect(j).name == "inspect-json" and detect(e).name == "inspect-eval"
    tj, te = load_quiet(j)[0], load_quiet(e)[0]
    assert tj.trace_id == te.trace_id == "demo/s/2"
    assert [ev.kind for ev in tj.events] == ["tools", "user", "assistant", "tool_result", "assistant"]
    assert trace_to_dict(tj)["events"] == trace_to_dict(te)["events"]
    assert trace_problems(trace_to_dict(te)) == []
    assert raw_replay_exact(tj)


@pytest.mark.parametrize(
    "u, expected, notice",
    [
        (usage(1000, 10, read=900, total=1010), 1000, False),  # OpenAI via Inspect: reads inside
        (usage(100, 10, read=900, write=50, total=1060), 1050, False),  # Anthropic via Inspect: beside
        (usage(1000, 10, read=900, total=1030), 1000, False),  # total counts reasoning too (Google)
        (usage(100, 10, read=0, total=110), 100, False),  # no cache: nothing to decide
        (usage(100, 10, read=900, total=0), 1000, False),  # a read above the input cannot be inside it
        (usage(1000, 10, read=900), 1900, True),  # no total: assumed beside, with a notice
    ],
)
def test_cache_accounting_is_read_from_total_tokens(tmp_path, u, expected, notice):
    if u.get("total_tokens") == 1030:
        u["reasoning_tokens"] = 20
    log = inspect_log(two_calls(u, usage(2000, 5)))
    path = write_log(tmp_path, log)
    if notice:
        with pytest.warns(ImportNotice, match="assumed beside"):
            t = list(load_path(path))[0]
    else:
        t = load_quiet(path)[0]
    assert t.calls[0].input_tokens == expected
    assert t.calls[0].cache_read_tokens == u.get("input_tokens_cache_read")


def test_missing_usage_on_some_calls_warns(tmp_path):
    path = write_log(tmp_path, inspect_log(two_calls(usage(50, 5), None)))
    with pytest.warns(ImportNotice, match="1 of 2 calls have no recorded usage"):
        t = list(load_path(path))[0]
    assert [c.usage_provenance for c in t.calls] == ["provider", "none"]
    assert trace_problems(trace_to_dict(t)) == []


def test_tool_result_without_its_call_warns_and_stays_unpaired(tmp_path):
    orphan = dict(T1, id="t9", tool_call_id="ghost")
    events = [model_event([U1], A1, usage(50, 5)), model_event([U1, A1, orphan], A2, usage(90, 5))]
    path = write_log(tmp_path, inspect_log(events))
    with pytest.warns(ImportNotice, match="1 tool results answer no earlier tool call"):
        t = list(load_path(path))[0]
    res = [e for e in t.events if e.kind == "tool_result"]
    assert len(res) == 1 and res[0].tool_call_id is None
    assert trace_problems(trace_to_dict(t)) == []


def test_empty_content_imports(tmp_path):
    u, a = dict(U1, content=""), dict(A2, content=[])
    path = write_log(tmp_path, inspect_log([model_event([u], a, usage(20, 1))]))
    t = load_quiet(path)[0]
    assert [(e.kind, e.content, e.bytes) for e in t.events[1:]] == [("user", "", 0), ("assistant", "", 0)]
    assert trace_problems(trace_to_dict(t)) == []


def test_input_that_is_not_the_conversation_extended_goes_to_the_residual(tmp_path):
    """Inspect may trim or edit earlier messages: here the second request drops the tool call and its
    result and adds a new user turn. Nothing is removed from the trace; the residual carries it."""
    u2 = {"id": "u2", "role": "user", "content": "Just answer."}
    events = [
        model_event([U1], A1, usage(500, 5)),
        model_event([U1, A1, T1], A2, usage(900, 5)),
        model_event([U1, u2], {"id": "a3", "role": "assistant", "content": "ok"}, usage(520, 1)),
    ]
    path = write_log(tmp_path, inspect_log(events))
    with pytest.warns(ImportNotice, match="1 model calls' input is not the running conversation extended"):
        t = list(load_path(path))[0]
    assert t.outcome["non_prefix_inputs"] == 1
    assert [e.kind for e in t.events][-2:] == ["user", "assistant"]
    # the dropped messages still sit in the append-only view: the provider count falls, residuals carry it
    assert any(c.residual_tokens != 0 for c in t.calls)
    assert trace_problems(trace_to_dict(t)) == []
    assert raw_replay_exact(t)


def test_scorer_model_calls_are_not_the_agents(tmp_path):
    events = two_calls(usage(50, 5), usage(80, 4)) + [
        {"event": "span_begin", "id": "sc", "type": "scorer", "name": "model_graded_qa"},
        model_event(
            [{"id": "g", "role": "user", "content": "Grade it."}], A2 | {"id": "g2"}, usage(9, 1), "sc"
        ),
    ]
    t = load_quiet(write_log(tmp_path, inspect_log(events)))[0]
    assert len(t.calls) == 2
    assert "Grade it." not in [e.content for e in t.events]


def test_attachments_resolve_and_recorded_policy_follows_the_plan(tmp_path):
    long = "x" * 5000
    a2 = dict(A2, content="attachment://h1")
    steps = [{"solver": "react", "params": {"truncation": "auto"}}]
    log = inspect_log([model_event([U1], a2, usage(20, 1))], steps=steps, attachments={"h1": long})
    t = load_quiet(write_log(tmp_path, log))[0]
    assert t.events[-1].content == long
    assert t.recorded_policy == {"name": "inspect_truncation", "truncation": "auto"}
    assert t.agent == "inspect_ai 0.3.95 (react)"


def test_missing_attachment_warns(tmp_path):
    a2 = dict(A2, content="attachment://nowhere")
    path = write_log(tmp_path, inspect_log([model_event([U1], a2, usage(20, 1))]))
    with pytest.warns(ImportNotice, match="1 attachment references have no attachment"):
        list(load_path(path))


def test_log_without_samples_is_an_error(tmp_path):
    log = inspect_log([])
    log["samples"] = []
    with pytest.raises(TraceError, match="no samples"):
        list(load_path(write_log(tmp_path, log)))


def test_sniff_is_specific(tmp_path):
    """Other JSON (a list, an object without the eval spec) is not claimed as an Inspect log."""
    _sniff_json, _sniff_eval = (get_importer(n).sniff for n in ("inspect-json", "inspect-eval"))
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"version": 1, "trajectory_format": "mini-swe-agent-1", "messages": []}))
    assert not _sniff_json(other)
    other.write_text("[1, 2]")
    assert not _sniff_json(other)
    assert not _sniff_eval(tmp_path / "absent.eval")  # never raises


# ------------------------------------------------------------------------------------- damaged archives
def assert_cli_refuses(tmp_path: Path, bad: Path, monkeypatch) -> None:
    """``ctxsim import`` exits 2 and writes nothing: no output file, nothing extracted anywhere."""
    monkeypatch.chdir(tmp_path)  # a relative extraction would land here
    before = sorted(tmp_path.rglob("*"))
    out = tmp_path / "out.jsonl"
    assert main(["import", str(bad), "-o", str(out)]) == 2
    assert not out.exists()
    assert sorted(tmp_path.rglob("*")) == before  # no temporary output left, nothing extracted


@pytest.mark.parametrize(
    "content", [b"PK\x03\x04 truncated, not really a zip", b"plain text, not an archive"]
)
def test_archive_that_is_not_a_zip(tmp_path, monkeypatch, content):
    bad = tmp_path / "broken.eval"
    bad.write_bytes(content)
    with pytest.raises(TraceError):
        list(load_path(bad))
    if content.startswith(b"PK"):  # claimed by its magic: the loader names the damage
        with pytest.raises(TraceError, match="not a valid archive"):
            list(load_path(bad))
    assert_cli_refuses(tmp_path, bad, monkeypatch)


@pytest.mark.parametrize("kind", ["absolute", "dotdot"])
def test_archive_member_outside_the_archive_is_refused(tmp_path, monkeypatch, kind):
    log = inspect_log(two_calls(usage(50, 5), usage(80, 4)))
    escaped = tmp_path / "escaped.json" if kind == "absolute" else tmp_path.parent / "escaped.json"
    member = str(escaped) if kind == "absolute" else "../escaped.json"
    bad = write_eval(tmp_path, copy.deepcopy(log), extra={member: b'{"pwned": true}'}, name=f"{kind}.eval")
    with zipfile.ZipFile(bad) as zf:
        assert member in zf.namelist()  # the name really is absolute / climbs out
    with pytest.raises(TraceError, match="has an absolute path|has a '..' path"):
        list(load_path(bad))
    assert_cli_refuses(tmp_path, bad, monkeypatch)
    assert not escaped.exists()
