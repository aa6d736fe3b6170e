"""OpenTelemetry GenAI spans (OTLP JSON): detection, runs, messages, usage, facts, errors, mutations.

The samples in tests/data/exports/ were written by the OpenTelemetry SDK (benchmarks/make_export_samples.py):
``otel_genai_spans.jsonl`` with messages on span attributes (latest conventions), ``otel_genai_events.jsonl``
with per-message log events (the OpenAI instrumentation's default conventions)."""

from __future__ import annotations

import json
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from export_mutations import run_cases

from sim.cli import main
from sim.engine.dispatch import replay
from sim.importers import detect, load_path
from sim.importers.common import ImportNotice
from sim.importers.request_log import Conversation, Msg
from sim.policies.base import make_policy
from sim.trace.codec import trace_to_dict
from sim.trace.rules import trace_problems
from sim.util.errors import TraceError

DATA = Path(__file__).parent / "data" / "exports"
SPANS = DATA / "otel_genai_spans.jsonl"
EVENTS = DATA / "otel_genai_events.jsonl"


def load(path: Path) -> list:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ImportNotice)
        return list(load_path(path))


def chat_spans(path: Path) -> list[dict]:
    """The file's chat spans in start order, attributes as a plain dict: the expected values."""
    out = []
    for line in path.read_text().splitlines():
        for rs in json.loads(line).get("resourceSpans", []):
            for ss in rs["scopeSpans"]:
                for s in ss["spans"]:
                    a = {kv["key"]: next(iter(kv["value"].values())) for kv in s["attributes"]}
                    if a.get("gen_ai.operation.name") == "chat":
                        out.append({**s, "attrs": a})
    return sorted(out, key=lambda s: int(s["startTimeUnixNano"]))


def test_both_samples_are_detected_and_import_one_trace_per_agent_run():
    for path in (SPANS, EVENTS):
        assert detect(path).name == "otel-genai"
        traces = load(path)
        assert len(traces) == 2  # two invoke_agent roots
        for t in traces:
            assert trace_problems(trace_to_dict(t)) == []
            assert t.source_format == "otel-genai" and t.model == "gpt-4o-mini-2024-07-18"
            assert t.agent == "support-bot" and t.recorded_policy == {"name": "raw"}
            assert [e.kind for e in t.events if e.kind != "tools"] == [
                "system",
                "user",
                "assistant",
                "tool_result",
                "assistant",
                "tool_result",
                "assistant",
            ]
    t1, t2 = load(SPANS)
    assert t1.trace_id == "conv-support-1"  # gen_ai.conversation.id names the run
    assert len(t2.trace_id) == 32  # else the OTel trace id
    assert t1.events[1].kind == "tools" and '"name": "search_orders"' in t1.events[1].content


def test_every_call_keeps_the_exports_tokens_and_raw_replay_reproduces_them():
    for path in (SPANS, EVENTS):
        spans = chat_spans(path)
        calls = [c for t in load(path) for c in t.calls]
        assert [c.input_tokens for c in calls] == [
            int(s["attrs"]["gen_ai.usage.input_tokens"]) for s in spans
        ]
        assert [c.output_tokens for c in calls] == [
            int(s["attrs"]["gen_ai.usage.output_tokens"]) for s in spans
        ]
        for t in load(path):
            r = replay(t, make_policy("raw"), window=None)
            assert np.array_equal(r.calls["input_tokens"], [c.input_tokens for c in t.calls])
    # cached tokens, where the export has them (the latest conventions' attribute)
    assert [c.cache_read_tokens for c in load(SPANS)[0].calls] == [None, 128, 128]
    assert [109, 190, 188] == [c.input_tokens for c in load(SPANS)[0].calls]


def test_calls_issue_their_tool_calls_and_results_answer_them():
    t = load(SPANS)[0]
    a, r = t.events[3], t.events[4]
    assert a.content == 'search_orders({"customer": "alice", "latest": true})'
    assert a.tool_call_ids == ("call_you0",) and r.tool_call_id == "call_you0"
    assert r.content == '[{"order_id": "ORD-7731", "total": 129.95, "status": "lost in transit"}]'


def test_facts_found_on_tool_results_are_needed_by_later_calls():
    t1, t2 = load(SPANS)
    assert t1.events[4].provides == ("identifier:ORD-7731@4", "value:129.95@4")
    assert set(t1.events[5].needs) == {"identifier:ORD-7731@4", "value:129.95@4"}  # the refund call
    assert "identifier:RF-55120@6" in t1.events[7].needs  # the answer names the refund id
    assert t2.events[4].provides == ("error@4",) and t2.events[5].needs == ("error@4",)
    assert "value:8080@6" in t2.events[7].needs


def test_a_request_that_left_messages_out_hides_them_from_that_call_on():
    """The agent of conv-support-1 sent only the task and the latest round trip at its last call."""
    with pytest.warns(ImportNotice, match="1 calls' requests are not the running conversation extended"):
        t = list(load_path(SPANS))[0]
    assert t.outcome == {"non_prefix_inputs": 1}
    # the residual carries what the hidden events no longer weigh: the replay stays exact (above)
    assert t.calls[2].residual_tokens != 0 or t.calls[1].residual_tokens != 0
    c = Conversation("f")
    sys_, user, res = Msg("system", "s"), Msg("user", "u"), Msg("tool_result", "lost 42 here", (), "c1")
    c.call([sys_, user], Msg("assistant", "", (("c1", "look", "{}"),)), None, None)
    first = Msg("assistant", "", (("c1", "look", "{}"),))
    c.call([sys_, user, first, res], Msg("assistant", "a"), None, None)  # the conversation extended
    c.call([sys_, user, Msg("user", "summary")], Msg("assistant", "b"), None, None)  # a compaction
    kinds = [(m.kind, m.hidden_from) for m in c.messages]
    assert kinds == [  # the last call (message 6) no longer held messages 2-4
        ("system", None),
        ("user", None),
        ("assistant", 6),
        ("tool_result", 6),
        ("assistant", 6),
        ("user", None),
        ("assistant", None),
    ]
    assert c.not_prefix == 1


def _rewrite(path: Path, out: Path, fn) -> Path:
    lines = []
    for line in path.read_text().splitlines():
        d = json.loads(line)
        for rs in d.get("resourceSpans", []):
            for ss in rs["scopeSpans"]:
                for s in ss["spans"]:
                    fn(s)
        lines.append(json.dumps(d))
    out.write_text("\n".join(lines) + "\n")
    return out


def test_spans_without_content_take_tool_calls_and_results_from_execute_tool_spans(tmp_path):
    content = {
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.system_instructions",
        "gen_ai.tool.definitions",
    }

    def strip(s):
        s["attributes"] = [kv for kv in s["attributes"] if kv["key"] not in content]

    p = _rewrite(SPANS, tmp_path / "bare.jsonl", strip)
    t1, t2 = load(p)
    assert [e.kind for e in t2.events] == [
        "assistant",
        "tool_result",
        "assistant",
        "tool_result",
        "assistant",
    ]
    assert t2.events[0].content == 'read_file({"path": "config.yaml"})'
    assert (
        t2.events[1].content == "Error: file not found: config.yaml"
        and t2.events[1].tool_call_id == "call_you0"
    )
    assert t2.events[2].needs == ("error@1",)
    assert "identifier:ORD-7731@1" in t1.events[2].needs  # the refund call's arguments
    assert [c.input_tokens for c in t1.calls] == [109, 190, 188]


def test_a_conversation_id_joins_spans_across_traces_and_roots_split_runs(tmp_path):
    def split(s):  # every span of the second run into the first run's conversation, own trace ids
        a = {kv["key"]: kv["value"] for kv in s["attributes"]}
        if a.get("gen_ai.agent.name") and "gen_ai.conversation.id" not in a:
            s["attributes"].append(
                {"key": "gen_ai.conversation.id", "value": {"stringValue": "conv-support-1"}}
            )

    assert [t.trace_id for t in load(_rewrite(SPANS, tmp_path / "joined.jsonl", split))] == ["conv-support-1"]

    def orphan(s):  # no conversation ids and no parents: each span its own root, one run per chat span
        s["attributes"] = [kv for kv in s["attributes"] if kv["key"] != "gen_ai.conversation.id"]
        s.pop("parentSpanId", None)

    traces = load(_rewrite(SPANS, tmp_path / "roots.jsonl", orphan))
    assert len(traces) == 6 and all("/" in t.trace_id for t in traces)


def test_calls_are_in_start_time_order_whatever_the_file_order(tmp_path):
    lines = []
    for line in SPANS.read_text().splitlines():
        d = json.loads(line)
        for rs in d.get("resourceSpans", []):
            for ss in rs["scopeSpans"]:
                ss["spans"].reverse()
            rs["scopeSpans"].reverse()
        lines.append(json.dumps(d))
    p = tmp_path / "reversed.jsonl"
    p.write_text("\n".join(lines) + "\n")
    assert [trace_to_dict(t) | {"source_file": None} for t in load(p)] == [
        trace_to_dict(t) | {"source_file": None} for t in load(SPANS)
    ]


def test_one_pretty_printed_document_reads_as_the_lines_do(tmp_path):
    doc = json.loads(SPANS.read_text().splitlines()[0])
    p = tmp_path / "export.json"
    p.write_text(json.dumps(doc, indent=2))
    assert detect(p).name == "otel-genai"
    assert [trace_to_dict(t)["calls"] for t in load(p)] == [trace_to_dict(t)["calls"] for t in load(SPANS)]


def test_import_validate_run_redact_and_size_through_the_command_line(tmp_path, capsys):
    out = tmp_path / "otel.jsonl"
    assert main(["import", str(SPANS), "-o", str(out)]) == 0
    assert main(["validate", str(out)]) == 0
    assert main(["run", str(out), "--policy", "raw", "--calls", str(tmp_path / "calls.csv")]) == 0
    import csv

    rows = list(csv.DictReader((tmp_path / "calls.csv").open()))
    assert [int(r["input_tokens"]) for r in rows] == [109, 190, 188, 99, 163, 229]
    assert main(["import", "--redact", str(EVENTS), "-o", str(tmp_path / "r.jsonl")]) == 0
    assert "Alice" not in (tmp_path / "r.jsonl").read_text()
    assert main(["validate", str(tmp_path / "r.jsonl")]) == 0
    capsys.readouterr()
    assert main(["validate", str(EVENTS)]) == 0
    assert "format otel-genai (2 traces)" in capsys.readouterr().out
    assert main(["size", str(SPANS), "--format", "json"]) in (0,)


@pytest.mark.parametrize(
    ("edit", "record", "field"),
    [
        (
            lambda s: s["attributes"].append(
                {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "-3"}}
            ),
            "spans[0]",
            "gen_ai.usage.input_tokens",
        ),
        (lambda s: s.__setitem__("startTimeUnixNano", "soon"), "spans[0]", "startTimeUnixNano"),
        (lambda s: s.__setitem__("spanId", 7), "spans[0]", "spanId"),
        (lambda s: s.__setitem__("attributes", {"a": 1}), "spans[0]", "attributes"),
    ],
)
def test_bad_values_exit_2_naming_file_record_and_field(tmp_path, capsys, edit, record, field):
    done = []

    def once(s):
        if not done:
            s["attributes"] = [kv for kv in s["attributes"] if kv["key"] != "gen_ai.usage.input_tokens"]
            edit(s)
            done.append(1)

    p = _rewrite(SPANS, tmp_path / "bad.jsonl", once)
    with pytest.raises(TraceError) as exc:
        load(p)
    msg = str(exc.value)
    assert msg.startswith("bad.jsonl: record line 1") and record in msg and field in msg
    assert main(["validate", str(p)]) == 2
    out, err = capsys.readouterr()
    assert "bad.jsonl" in out + err and field in out + err and "Traceback" not in out + err


def test_damaged_json_and_invalid_message_json_are_named(tmp_path):
    lines = SPANS.read_text().splitlines()
    p = tmp_path / "cut.jsonl"
    p.write_text(lines[0] + "\n" + lines[0][:50] + "\n")
    with pytest.raises(TraceError, match=r"cut.jsonl: record line 2: invalid JSON"):
        load(p)

    def garble(s):
        for kv in s["attributes"]:
            if kv["key"] == "gen_ai.input.messages":
                kv["value"] = {"stringValue": "[{"}

    p = _rewrite(SPANS, tmp_path / "garbled.jsonl", garble)
    with pytest.raises(TraceError, match=r"field attributes.gen_ai.input.messages: not valid JSON"):
        load(p)


def test_a_file_with_no_model_calls_is_an_error(tmp_path):
    def drop(s):
        s["attributes"] = [kv for kv in s["attributes"] if kv["key"] != "gen_ai.operation.name"]
        s["attributes"] = [kv for kv in s["attributes"] if not kv["key"].startswith("gen_ai.usage")]

    with pytest.raises(TraceError, match="no GenAI model-call spans"):
        load(_rewrite(SPANS, tmp_path / "none.jsonl", drop))


def test_sniff_leaves_other_json_alone(tmp_path):
    p = tmp_path / "plain.json"
    p.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "GET /"}]}]}]}))
    with pytest.raises(TraceError, match="unknown format"):
        detect(p)


@pytest.mark.parametrize("sample", [SPANS, EVENTS], ids=["spans", "events"])
def test_200_mutations_exit_0_or_2_without_a_traceback(tmp_path, capsys, sample):
    t0 = time.process_time()
    assert run_cases(sample, tmp_path, 200, "otel", capsys) == []
    assert time.process_time() - t0 < 20
