"""Claude Code session JSONL: the shared fixtures (claude-code-log's, deliberately messy), the mapping
of records to messages, and the real-world mess a session file holds."""

from __future__ import annotations

import dataclasses
import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from sim.engine.dispatch import replay
from sim.importers import detect, get_importer, load_path
from sim.importers.common import ImportNotice
from sim.policies.base import make_policy
from sim.trace.codec import trace_to_dict
from sim.trace.rules import trace_problems
from sim.util.errors import TraceError
from sim.util.paths import traces_dir

FIXTURES = traces_dir() / "claude-code-fixtures"


def _sniff(path: Path) -> bool:
    # through the registry: importing the module directly would register it alone
    return get_importer("claude-code").sniff(path)


def shared(name: str) -> Path:
    path = FIXTURES / name
    if not path.is_file():
        pytest.skip(f"shared trace {path} not found (set CTXSIM_TRACES to the shared traces folder)")
    return path


def load_quiet(path: Path) -> list:
    with warnings.catch_warnings():
        warnings.simplefilter("error", ImportNotice)
        return list(load_path(path))


def check(t) -> None:
    """Valid, and raw replay reproduces every recorded input (the residuals carry what sizes cannot)."""
    assert trace_problems(trace_to_dict(t)) == []
    r = replay(t, make_policy("raw"), window=None)
    known = [k for k, c in enumerate(t.calls) if c.input_tokens is not None]
    assert np.array_equal(r.calls["input_tokens"][known], [t.calls[k].input_tokens for k in known])


# ------------------------------------------------------------------------------------------- fixtures
def test_representative_messages():
    path = shared("representative_messages.jsonl")
    assert detect(path).name == "claude-code"
    traces = load_quiet(path)
    # counted once: one sessionId (test_session); 11 user/assistant records, one message each
    # (5 assistant, 4 user text, 2 tool results); the closing summary record is not a message
    assert [(t.trace_id, len(t.calls), len(t.events)) for t in traces] == [("test_session", 5, 11)]
    t = traces[0]
    check(t)
    assert t.source_format == "claude-code"
    assert t.model == "claude-3-sonnet-20240229"
    assert t.agent == "claude-code 1.0.0"
    assert t.recorded_policy == {"name": "raw"}  # a summary record alone is no recorded compaction
    assert [s["leaf_uuid"] for s in t.outcome["summaries"]] == ["msg_011"]
    assert t.outcome["compact_boundaries"] == t.outcome["compact_summaries"] == 0
    kinds = [e.kind for e in t.events]
    assert kinds == ["user", "assistant", "user", "assistant", "tool_result", "assistant", "user"] + [
        "assistant",
        "tool_result",
        "assistant",
        "user",
    ]
    assert [e.tool_call_id for e in t.events if e.kind == "tool_result"] == ["tool_001", "tool_002"]
    assert t.events[3].tool_call_ids == ("tool_001",)
    assert json.loads(t.events[3].content)["name"] == "Edit"
    assert [c.input_tokens for c in t.calls] == [25, 45, 78, 25, 45]  # fixture numbers, not real ones
    assert all(c.usage_provenance == "provider" for c in t.calls)


def test_session_b():
    path = shared("session_b.jsonl")
    assert detect(path).name == "claude-code"
    traces = load_quiet(path)
    # counted once: user, assistant, user (one session)
    assert [(t.trace_id, len(t.calls), len(t.events)) for t in traces] == [("session_b", 1, 3)]
    check(traces[0])


def test_edge_cases():
    """The fixture mixes two sessions and broken records; the good ones import, the rest are named."""
    path = shared("edge_cases.jsonl")
    assert detect(path).name == "claude-code"
    with pytest.warns(ImportNotice, match="skipped records") as rec:
        traces = list(load_path(path))
    notice = " ".join(str(w.message) for w in rec)
    # line 10: "contenst" typo, line 11: message is a string -> no message content; lines 13-16: a JSON
    # string, {"silly": ...} (no type), 42, [1]
    assert "2 user record without a message object holding content (first at line 10)" in notice
    assert "3 not a JSON object (first at line 13)" in notice
    assert "1 no record type (first at line 14)" in notice
    # counted once: session edge_cases has 11 messages from 12 good records (edge_001..edge_011 and
    # edge_010 again with content ["wow error"], since its first copy was broken), 3 of them assistant;
    # a single TodoWrite assistant record names session todowrite_session
    assert [(t.trace_id, len(t.calls), len(t.events)) for t in traces] == [
        ("edge_cases", 3, 11),
        ("todowrite_session", 1, 1),
    ]
    edge, todo = traces
    for t in traces:
        check(t)
    assert edge.events[4].kind == "tool_result" and edge.events[4].tool_call_id == "tool_edge_001"
    assert edge.events[8].tool_call_ids == ("tool_edge_002",)  # text + tool_use blocks: one message
    assert "中文" in edge.events[9].content and "🎉" in edge.events[9].content
    assert edge.events[10].content == "wow error"
    assert [s["leaf_uuid"] for s in edge.outcome["summaries"]] == ["edge_011"]
    assert todo.model == "claude-sonnet-4"
    assert todo.calls[0].input_tokens == 168  # a usage block without cache fields


# --------------------------------------------------------------------------------- synthetic sessions
def rec(kind: str, uuid: str, content, session="S", **extra) -> dict:
    d = {
        "type": kind,
        "timestamp": "2025-06-14T10:00:00Z",
        "parentUuid": None,
        "isSidechain": False,
        "sessionId": session,
        "version": "1.0.24",
        "uuid": uuid,
        "message": {"role": kind, "content": content},
    }
    d.update(extra)
    return d


def asst(uuid: str, content, mid=None, u=None, session="S", model="claude-sonnet-4-5") -> dict:
    d = rec("assistant", uuid, content, session)
    d["message"].update({"id": mid or f"msg_{uuid}", "type": "message", "model": model})
    if u is not None:
        d["message"]["usage"] = u
    return d


def usage(inp, out, read=0, write=0) -> dict:
    return {
        "input_tokens": inp,
        "output_tokens": out,
        "cache_read_input_tokens": read,
        "cache_creation_input_tokens": write,
    }


def text(s: str) -> list:
    return [{"type": "text", "text": s}]


def tool_use(tid: str, name="Bash", **inp) -> dict:
    return {"type": "tool_use", "id": tid, "name": name, "input": inp}


def tool_result(tid: str, content="ok") -> list:
    return [{"type": "tool_result", "tool_use_id": tid, "content": content}]


def write(tmp_path: Path, records, name="session.jsonl") -> Path:
    p = tmp_path / name
    p.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return p


def test_blocks_of_one_response_merge_into_one_call(tmp_path):
    """Claude Code writes one record per content block (same message.id): one assistant message, one
    call, with the last usage written for the response; tool results written between stay after it."""
    records = [
        rec("user", "u1", "Fix the bug."),
        asst("a1", text("Let me look."), mid="msg_1", u=usage(3, 1, read=1000, write=200)),
        asst("a2", [tool_use("t1", command="ls")], mid="msg_1", u=usage(3, 1, read=1000, write=200)),
        rec("user", "u2", tool_result("t1", "a.py")),
        asst("a3", [tool_use("t2", command="cat a.py")], mid="msg_1", u=usage(3, 40, read=1000, write=200)),
        rec("user", "u3", tool_result("t2", [{"type": "text", "text": "print(1)"}])),
        asst("a4", text("Done."), mid="msg_2", u=usage(5, 3, read=1200, write=60)),
    ]
    t = load_quiet(write(tmp_path, records))[0]
    assert [e.kind for e in t.events] == ["user", "assistant", "tool_result", "tool_result", "assistant"]
    first = t.events[1]
    assert first.tool_call_ids == ("t1", "t2")
    assert first.content.splitlines()[0] == "Let me look."
    assert len(t.calls) == 2
    # Anthropic semantics: input + cache read + cache write; the last block's output count
    assert (t.calls[0].input_tokens, t.calls[0].output_tokens) == (1203, 40)
    assert (t.calls[0].cache_read_tokens, t.calls[0].cache_write_tokens) == (1000, 200)
    assert t.calls[1].input_tokens == 1265
    assert t.events[3].content == "print(1)"
    assert t.model == "claude-sonnet-4-5"
    check(t)


def test_sessions_split_in_order_of_first_appearance(tmp_path):
    records = [
        rec("user", "b1", "hi B", session="B"),
        rec("user", "a1", "hi A", session="A"),
        asst("a2", text("hello A"), u=usage(10, 2), session="A"),
        asst("b2", text("hello B"), u=usage(11, 2), session="B"),
    ]
    traces = load_quiet(write(tmp_path, records))
    assert [t.trace_id for t in traces] == ["B", "A"]
    assert [t.events[0].content for t in traces] == ["hi B", "hi A"]


def test_compaction_is_the_recorded_policy(tmp_path):
    records = [
        rec("user", "u1", "Start."),
        asst("a1", text("Working."), u=usage(5, 1, read=20000)),
        {"type": "system", "subtype": "compact_boundary", "sessionId": "S", "uuid": "c0",
         "compactMetadata": {"trigger": "auto", "preTokens": 150000}},
        rec("user", "u2", "This session is being continued from a previous conversation...",
            isCompactSummary=True),
        asst("a2", text("Continuing."), u=usage(5, 1, read=3000)),
    ]  # fmt: skip
    t = load_quiet(write(tmp_path, records))[0]
    assert t.recorded_policy == {"name": "claude_code_auto_compact"}
    assert (t.outcome["compact_boundaries"], t.outcome["compact_summaries"]) == (1, 1)
    assert t.outcome["compact_triggers"] == ["auto"]
    assert t.events[2].kind == "user" and t.events[2].content.startswith("This session is being continued")
    # the compacted history is still in the append-only view: the count falls, residuals carry it
    assert any(c.residual_tokens != 0 for c in t.calls)
    check(t)


def test_missing_usage_on_some_calls_warns(tmp_path):
    records = [rec("user", "u1", "Hi."), asst("a1", text("Hello."), u=usage(10, 2)),
               rec("user", "u2", "Again."), asst("a2", text("Hello again."))]  # fmt: skip
    with pytest.warns(ImportNotice, match="1 of 2 calls have no recorded usage"):
        t = list(load_path(write(tmp_path, records)))[0]
    assert [c.usage_provenance for c in t.calls] == ["provider", "none"]
    check(t)


def test_tool_result_without_its_tool_use_warns_and_stays_unpaired(tmp_path):
    records = [rec("user", "u1", "Go."), asst("a1", text("Sure."), u=usage(10, 2)),
               rec("user", "u2", tool_result("toolu_ghost", "stray output")),
               asst("a2", text("Hm."), u=usage(30, 2))]  # fmt: skip
    with pytest.warns(ImportNotice, match="1 tool results answer no earlier tool call; kept unpaired"):
        t = list(load_path(write(tmp_path, records)))[0]
    e = t.events[2]
    assert (e.kind, e.tool_call_id, e.content) == ("tool_result", None, "stray output")
    check(t)


def test_empty_content_imports(tmp_path):
    records = [rec("user", "u1", []), rec("user", "u2", ""), asst("a1", [], u=usage(10, 0)),
               rec("user", "u3", tool_result("x", ""))]  # fmt: skip
    with pytest.warns(ImportNotice, match="answer no earlier tool call"):  # "x" was never issued
        t = list(load_path(write(tmp_path, records)))[0]
    assert [(e.kind, e.content) for e in t.events] == [
        ("user", ""),
        ("user", ""),
        ("assistant", ""),
        ("tool_result", ""),
    ]
    check(t)


def test_non_utf8_bytes_in_a_line_warn_and_import(tmp_path):
    p = tmp_path / "latin1.jsonl"
    good = json.dumps(rec("user", "u1", "placeholder")).encode()
    bad_line = good.replace(b"placeholder", b"caf\xe9 na\xefve")  # Latin-1 bytes in a JSON string
    p.write_bytes(bad_line + b"\n" + json.dumps(asst("a1", text("ok"), u=usage(10, 1))).encode() + b"\n")
    assert detect(p).name == "claude-code"
    with pytest.warns(ImportNotice, match="not valid UTF-8"):
        t = list(load_path(p))[0]
    assert t.events[0].content == "caf\ufffd na\ufffdve"
    check(t)


def test_duplicates_other_records_and_an_unspawned_sidechain_are_skipped(tmp_path):
    records = [
        {"type": "file-history-snapshot", "messageId": "m", "snapshot": {}},
        rec("user", "u1", "Main task."),
        rec("user", "s1", "Sub-agent prompt.", isSidechain=True),
        asst("s2", text("Sub-agent answer."), u=usage(7, 1)) | {"isSidechain": True},
        asst("a1", text("Main answer."), u=usage(9, 1)),
        rec("user", "u1", "Main task."),  # a resumed session repeats an earlier record
        {"type": "system", "sessionId": "S", "uuid": "y", "content": "hook ran", "level": "info"},
        '{"type": "user", "truncated',  # a line cut off mid-write
    ]
    with pytest.warns(ImportNotice) as w:
        t = list(load_path(write(tmp_path, records)))[0]
    notices = " ".join(str(x.message) for x in w)
    # the sidechain begins before the session's first call: no call spawned it
    assert "2 sidechain (sub-agent) records imported as 1 child of their sessions" in notices
    assert "session S: sidechain 0 begins before any call; skipped" in notices
    assert t.children == ()
    assert "1 repeats an earlier record's uuid (first at line 6)" in notices
    assert "1 not valid JSON (first at line 8)" in notices
    assert [e.content for e in t.events] == ["Main task.", "Main answer."]
    assert t.outcome["ignored_records_in_file"] == {"file-history-snapshot": 1, "system": 1}
    check(t)


def test_file_without_conversation_is_an_error(tmp_path):
    p = write(tmp_path, [{"type": "summary", "summary": "A title.", "leafUuid": "x"}])
    with pytest.raises(TraceError, match="no Claude Code user or assistant records"):
        list(load_path(p))


def test_sniff_refuses_canonical_and_openhands_jsonl(tmp_path):
    from builders import swe_trace

    from sim.trace.io import write_traces

    canonical = tmp_path / "canonical.jsonl"
    write_traces([swe_trace([("ls", 10)])], canonical)
    assert canonical.read_text().startswith('{"schema_version"')
    assert not _sniff(canonical)
    assert detect(canonical).name == "ctxsim-canonical"
    openhands = tmp_path / "output.jsonl"
    openhands.write_text(
        json.dumps({"instance_id": "x__y-1", "instruction": "fix", "history": [], "metrics": {}}) + "\n"
    )
    assert not _sniff(openhands)
    assert not _sniff(tmp_path / "absent.jsonl")  # never raises


def sidechain_session() -> list:
    """A session whose first call runs a Task: its sub-agent's records (a sidechain: prompt, a Grep,
    its result, the report) are written before the Task's result reaches the session."""
    return [
        rec("user", "u1", "Where is parse_config defined?"),
        asst("a1", [tool_use("t1", name="Task", prompt="Find parse_config")], u=usage(100, 10)),
        rec("user", "s1", "Find parse_config", isSidechain=True),
        asst("s2", [tool_use("g1", name="Grep", pattern="def parse_config")], u=usage(50, 5))
        | {"isSidechain": True, "parentUuid": "s1"},
        rec("user", "s3", tool_result("g1", "src/config.py:12:def parse_config(path):"), isSidechain=True)
        | {"parentUuid": "s2"},
        asst("s4", text("parse_config is at src/config.py:12"), u=usage(80, 8))
        | {"isSidechain": True, "parentUuid": "s3"},
        rec("user", "u2", tool_result("t1", "parse_config is at src/config.py:12")),
        asst("a2", text("It is defined in src/config.py, line 12."), u=usage(130, 4)),
    ]


def test_sidechains_import_as_children_and_their_tokens_join_the_parents_totals(tmp_path):
    """Issue 25 item 2: a sub-agent's own records become a child (parent_call: the Task call; its own
    events, calls and usage); the parent keeps only the Task's result; replayed, the child's tokens and
    cost are the parent's too (exact: raw replay reproduces recorded inputs)."""
    from sim.engine.dispatch import replay
    from sim.metrics.compute import compute_metrics
    from sim.policies.base import make_policy
    from sim.trace.io import iter_jsonl, write_traces

    with pytest.warns(ImportNotice, match="4 sidechain .sub-agent. records imported as 1 child"):
        t = list(load_path(write(tmp_path, sidechain_session())))[0]
    assert [e.kind for e in t.events] == ["user", "assistant", "tool_result", "assistant"]
    assert [c.input_tokens for c in t.calls] == [100, 130]
    (child,) = t.children
    assert (child.parent_call, child.tool_call_id) == (0, "t1")
    kid = child.trace
    assert kid.trace_id == "S/sidechain-0" and kid.model == "claude-sonnet-4-5"
    assert [e.kind for e in kid.events] == ["user", "assistant", "tool_result", "assistant"]
    assert [(c.input_tokens, c.output_tokens) for c in kid.calls] == [(50, 5), (80, 8)]
    check(t)
    check(kid)
    out = tmp_path / "canonical.jsonl"
    write_traces([t], out)
    (back,) = iter_jsonl(out)
    assert back.children[0].trace.events == kid.events and back.children[0].parent_call == 0
    m = compute_metrics(replay(back, make_policy("raw")))
    own = compute_metrics(replay(dataclasses.replace(back, children=()), make_policy("raw")))
    alone = compute_metrics(replay(kid, make_policy("raw")))
    assert (m["parent_input_tokens"], m["child_input_tokens"], m["cumulative_input_tokens"]) == (
        230,
        130,
        360,
    )
    assert (m["calls"], m["child_calls"], m["cumulative_output_tokens"]) == (2, 2, 27)
    assert own["cumulative_input_tokens"] == 230 and own["child_calls"] == 0
    assert m["child_cost_microusd"] == alone["cost_microusd"] > 0
    assert m["cost_microusd"] == own["cost_microusd"] + alone["cost_microusd"]
