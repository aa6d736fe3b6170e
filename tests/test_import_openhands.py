"""OpenHands importers: V0 evaluation output, V0 event lists, SDK v1 conversation folders.

The shared samples must import, validate, be auto-detected and, where the provider's per-call usage is
recorded, replay under ``raw`` to the recorded input of every call exactly. Hand-made files cover the
mess real runs leave behind. Counts are literals, counted once from the files (see each comment).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from sim.engine.dispatch import replay
from sim.importers import detect, expand_paths, load_path
from sim.importers.common import ImportNotice
from sim.policies.base import make_policy
from sim.trace.codec import trace_to_dict
from sim.trace.rules import trace_problems
from sim.util.errors import TraceError
from sim.util.paths import traces_dir

V0 = traces_dir() / "openhands-v0"
SDK = traces_dir() / "openhands-sdk-v1"
EVAL_OUTPUT = V0 / "multi_swe_bench_llama4maverick" / "output.jsonl"
RESOLVER_OUTPUT = V0 / "resolver_mock_output" / "output.jsonl"
RUNTIME = V0 / "runtime_test_trajs"
SDK_PARENT = SDK / "event_persistence_gpt-4o-mini"


def need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"real traces not found at {path} (set CTXSIM_TRACES to the shared traces folder)")
    return path


def load_all(path: Path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ImportNotice)  # the event lists' unrecorded usage, tested below
        return list(load_path(path))


def valid(t) -> None:
    assert trace_problems(trace_to_dict(t)) == [], t.trace_id


def assert_raw_exact(t) -> None:
    r = replay(t, make_policy("raw"), window=None)
    recorded = [c.input_tokens for c in t.calls]
    got = r.calls["input_tokens"].tolist()
    assert [g for g, k in zip(got, recorded, strict=True) if k is not None] == [
        k for k in recorded if k is not None
    ]
    assert np.array_equal(
        [
            g
            for g, c in zip(r.calls["output_tokens"].tolist(), t.calls, strict=True)
            if c.output_tokens is not None
        ],
        [c.output_tokens for c in t.calls if c.output_tokens is not None],
    )


# ------------------------------------------------------------------------------ shared samples
def test_v0_evaluation_output_imports_validates_and_replays_exactly():
    path = need(EVAL_OUTPUT)
    assert detect(path).name == "openhands-v0-output"
    traces = load_all(path)
    # (instance id, events, calls). Calls = agent actions with tool_call_metadata, one per entry of
    # metrics.token_usages (23, 33, 49: the MANIFEST's "23-49 calls"). Events = history length + 1: the
    # system event gives two messages (prompt, tools); the recall action is a never-sent event of 0 tokens.
    assert [(t.trace_id, len(t.events), len(t.calls)) for t in traces] == [
        ("ponylang__ponyc-4595", 50, 23),
        ("ponylang__ponyc-4593", 71, 33),
        ("ponylang__ponyc-4588", 104, 49),
    ]
    for t in traces:
        valid(t)
        assert t.source_format == "openhands-v0-output"
        assert t.model == "openai/openrouter-llama-4-maverick"
        assert t.agent == "OpenHands CodeActAgent 0.35.0"
        assert t.recorded_policy["name"] == "raw" and t.recorded_policy["max_message_chars"] == 30000
        # task, recall action (0 tokens, nothing sent), workspace context; each with its OpenHands type
        assert [e.kind for e in t.events[:5]] == ["system", "tools", "user", "user", "user"]
        assert [e.source_type for e in t.events[:5]] == [
            "action:system", "action:system", "action:message", "action:recall", "observation:recall",
        ]  # fmt: skip
        assert (t.events[3].tokens, t.events[3].content) == (0, "")
        assert {e.source_type for e in t.events if e.kind == "tool_result"} <= {
            "observation:run", "observation:read", "observation:edit", "observation:think",
        }  # fmt: skip
        assert all(c.usage_provenance == "provider" for c in t.calls)
        assert_raw_exact(t)
    # per-call prompt tokens add up to the run's accumulated_token_usage
    assert [sum(c.input_tokens for c in t.calls) for t in traces] == [565158, 410169, 938015]
    # two runs hit a tool-parameter error raised while parsing the response: a user message, as sent
    errors = [
        e for t in traces for e in t.events if "[Error occurred in processing last action]" in e.content
    ]
    assert len(errors) == 2 and all(e.kind == "user" for e in errors)
    # every tool result answers the assistant call issued before it
    for t in traces:
        issued = {i for e in t.events for i in e.tool_call_ids}
        assert all(e.tool_call_id in issued for e in t.events if e.kind == "tool_result")


def test_resolver_output_imports_with_costs_only():
    path = need(RESOLVER_OUTPUT)
    assert detect(path).name == "openhands-v0-output"  # same shape: one run per line, history + metrics
    traces = load_all(path)
    # history entries: 8 and 44 = the task + (action, observation) pairs + the final finish;
    # calls = agent actions = entries of metrics.costs (4 and 22)
    assert [(t.trace_id, len(t.events), len(t.calls)) for t in traces] == [
        ("neubig/pr-viewer#5", 8, 4),
        ("neubig/pr-viewer#1", 44, 22),
    ]
    for t in traces:
        valid(t)
        assert all(c.input_tokens is None and c.usage_provenance == "none" for c in t.calls)
        assert t.outcome["success"] is True
    assert sum(c.recorded_cost_usd for c in traces[0].calls) == pytest.approx(0.070713)
    assert sum(c.recorded_cost_usd for c in traces[1].calls) == pytest.approx(1.152933)
    assert "<execute_bash>\ntouch LICENSE\n</execute_bash>" in traces[0].events[1].content


# file -> (events, calls, calls with provider usage). Counted from the lists: null and agent-state
# events are skipped; agent messages without tool_call_metadata carry no usage (basic_gui_mode's closing
# message, basic_interactions' two replies).
RUNTIME_COUNTS = {
    "basic.json": (4, 2, 2),
    "basic_gui_mode.json": (10, 5, 4),
    "basic_interactions.json": (6, 3, 1),
    "wrong_initial_state.json": (8, 4, 4),
}


def test_v0_event_lists_import_validate_and_replay_exactly():
    need(RUNTIME)
    for name, counts in RUNTIME_COUNTS.items():
        path = RUNTIME / name
        assert detect(path).name == "openhands-v0-events"
        (t,) = load_all(path)
        valid(t)
        assert t.trace_id == path.stem
        assert (len(t.events), len(t.calls), sum(c.input_tokens is not None for c in t.calls)) == counts
        assert_raw_exact(t)


def test_v0_event_list_anthropic_cache_fields_are_inside_prompt_tokens():
    (t,) = load_all(need(RUNTIME / "basic.json"))
    # call 2: prompt_tokens 4646 with cache_read_input_tokens 3482 and cache_creation_input_tokens 1158
    # (4646 >= 3482 + 1158, and 4646 - 3486 ~ the 1,135 tokens the first call output): inside
    c = t.calls[1]
    assert (c.input_tokens, c.cache_read_tokens, c.cache_write_tokens, c.output_tokens) == (
        4646,
        3482,
        1158,
        177,
    )


def test_v0_event_lists_with_missing_usage_warn():
    with pytest.warns(ImportNotice, match="2 of 3 calls have no recorded usage"):
        list(load_path(need(RUNTIME / "basic_interactions.json")))


def test_sdk_conversation_folder_imports_validates_and_replays_exactly():
    parent = need(SDK_PARENT)
    paths = expand_paths([parent])
    assert len(paths) == 1 and paths[0].name == "cd94562403b9487ebdd4018e3f531dfd" and paths[0].is_dir()
    assert detect(paths[0]).name == "openhands-sdk-v1"
    (t,) = load_all(paths[0])
    valid(t)
    # 8 event files: system prompt (-> system + tools), user, action, observation, action (finish),
    # observation, user, assistant message = 9 events; 3 model calls (the three llm_response_ids)
    assert (len(t.events), len(t.calls)) == (9, 3)
    assert [e.kind for e in t.events] == [
        "system",
        "tools",
        "user",
        "assistant",
        "tool_result",
        "assistant",
        "tool_result",
        "user",
        "assistant",
    ]
    assert [c.input_tokens for c in t.calls] == [3778, 3869, 3936]  # base_state.json token_usages
    assert [c.cache_read_tokens for c in t.calls] == [0, 3712, 3840]
    assert sum(c.recorded_cost_usd for c in t.calls) == pytest.approx(0.00122745)  # accumulated_cost
    assert (t.trace_id, t.model, t.context_window) == (
        "cd945624-03b9-487e-bdd4-018e3f531dfd",
        "openai/gpt-4o-mini",
        128000,
    )
    assert t.recorded_policy == {"name": "raw", "max_message_chars": 30000}
    assert t.events[4].content.endswith("[Command finished with exit code 0]")
    assert_raw_exact(t)


# ---------------------------------------------------------------------------- hand-made mess
def _resp(rid: str, tcid: str | None, text: str, usage: dict | None, name: str = "execute_bash") -> dict:
    tool_calls = (
        [] if tcid is None else [{"id": tcid, "function": {"name": name, "arguments": '{"command": "ls"}'}}]
    )
    r = {
        "id": rid,
        "created": 1700000000,
        "choices": [{"message": {"content": text, "tool_calls": tool_calls}}],
    }
    if usage is not None:
        r["usage"] = usage
    return r


def _action(eid: int, tcid: str, rid: str, usage: dict | None, text: str = "Listing.") -> dict:
    return {
        "id": eid,
        "timestamp": "2025-01-01T00:00:00",
        "source": "agent",
        "message": "Running command: ls",
        "action": "run",
        "args": {"command": "ls", "thought": text},
        "tool_call_metadata": {"tool_call_id": tcid, "model_response": _resp(rid, tcid, text, usage)},
    }


def _obs(eid: int, cause: int | None, tcid: str | None, content: str, **extras) -> dict:
    e = {
        "id": eid,
        "timestamp": "2025-01-01T00:00:01",
        "source": "agent",
        "message": "done",
        "observation": "run",
        "content": content,
        "extras": {"command": "ls", **extras},
    }
    if cause is not None:
        e["cause"] = cause
    if tcid is not None:
        e["tool_call_metadata"] = {"tool_call_id": tcid}
    return e


def _user(eid: int, text: str = "Fix the bug.") -> dict:
    return {
        "id": eid,
        "timestamp": "2025-01-01T00:00:00",
        "source": "user",
        "message": text,
        "action": "message",
        "args": {"content": text},
    }


U = {"prompt_tokens": 100, "completion_tokens": 10}


def _write_events(tmp_path: Path, events: list, name: str = "run.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(events))
    return p


def test_v0_missing_usage_on_some_calls_warns_and_keeps_the_call(tmp_path):
    events = [
        _user(0),
        _action(1, "t1", "r1", U),
        _obs(2, 1, "t1", "a.py"),
        _action(3, "t2", "r2", None),  # the response was kept without its usage
        _obs(4, 3, "t2", "b.py"),
    ]
    p = _write_events(tmp_path, events)
    assert detect(p).name == "openhands-v0-events"
    with pytest.warns(ImportNotice, match="1 of 2 calls have no recorded usage"):
        (t,) = load_path(p)
    valid(t)
    assert [c.input_tokens for c in t.calls] == [100, None]
    assert [c.usage_provenance for c in t.calls] == ["provider", "none"]
    assert_raw_exact(t)


def test_v0_observation_whose_action_is_absent_warns_and_stays_unpaired(tmp_path):
    events = [
        _user(0),
        _action(1, "t1", "r1", U),
        _obs(2, 1, "t1", "a.py"),
        _obs(3, 42, None, "stray output"),
    ]
    with pytest.warns(ImportNotice, match="1 tool results answer no earlier tool call; kept unpaired"):
        (t,) = load_path(_write_events(tmp_path, events))
    valid(t)
    assert (t.events[-1].kind, t.events[-1].tool_call_id, t.events[-1].content) == (
        "tool_result",
        None,
        "stray output",
    )
    assert t.events[-2].tool_call_id == "t1"


def test_v0_empty_content_imports(tmp_path):
    empty_action = _action(1, "t1", "r1", U, text="")
    empty_action["tool_call_metadata"]["model_response"]["choices"][0]["message"]["content"] = None
    events = [_user(0, ""), empty_action, _obs(2, 1, "t1", ""), _user(3, "")]
    with warnings.catch_warnings():
        warnings.simplefilter("error", ImportNotice)  # nothing odd to report
        (t,) = load_path(_write_events(tmp_path, events))
    valid(t)
    assert [e.content for e in t.events] == [
        "",
        '{"name": "execute_bash", "arguments": "{\\"command\\": \\"ls\\"}"}',
        "",
        "",
    ]
    assert all(e.tokens >= 0 for e in t.events)
    assert_raw_exact(t)


def _output_line(history: list, max_chars: int = 30000, condenser: str = "noop") -> str:
    return json.dumps(
        {
            "instance_id": "org__repo-1",
            "test_result": {"git_patch": ""},
            "instruction": "Fix the bug.",
            "metadata": {
                "agent_class": "CodeActAgent",
                "llm_config": {"model": "openai/test-model", "max_message_chars": max_chars},
                "condenser_config": {"type": condenser},
            },
            "history": history,
            "metrics": {"accumulated_cost": 0.0, "token_usages": [], "costs": []},
            "error": None,
        }
    )


def test_v0_output_invalid_json_line_names_file_and_line(tmp_path):
    good = _output_line([_user(0), _action(1, "t1", "r1", U), _obs(2, 1, "t1", "a.py")])
    p = tmp_path / "output.jsonl"
    p.write_text(good + "\n" + good[:-20] + "\n")
    assert detect(p).name == "openhands-v0-output"
    traces = load_path(p)
    assert next(traces).trace_id == "org__repo-1"
    with pytest.raises(TraceError) as exc:
        next(traces)
    assert exc.value.file == "output.jsonl" and exc.value.record == "line 2"
    assert "invalid JSON" in str(exc.value)


def test_v0_output_cuts_long_observations_as_openhands_did(tmp_path):
    long = "x" * 150
    md = {"exit_code": 0, "working_dir": "/w", "prefix": "", "suffix": ""}
    line = _output_line(
        [_user(0), _action(1, "t1", "r1", U), _obs(2, 1, "t1", long, metadata=md)], max_chars=100
    )
    p = tmp_path / "output.jsonl"
    p.write_text(line + "\n")
    (t,) = load_path(p)
    valid(t)
    obs = t.events[-1]
    # the observation with its metadata lines is cut to its first and last 50 characters with the notice
    assert obs.bounded and obs.content.startswith(
        "x" * 50 + "\n[... Observation truncated due to length ...]\n"
    )
    assert obs.content.endswith("[Command finished with exit code 0]")
    assert t.recorded_policy["max_message_chars"] == 100 and t.recorded_policy["name"] == "raw"


def test_sniffs_leave_other_json_alone(tmp_path):
    canonical = tmp_path / "canonical.jsonl"
    canonical.write_text('{"schema_version": 1, "trace_id": "x"}\n')
    other = tmp_path / "preds.jsonl"
    other.write_text('{"instance_id": "a__b-1", "model_patch": ""}\n')
    listing = tmp_path / "list.json"
    listing.write_text('[{"role": "user", "content": "hi"}]')
    from sim.importers import registered

    reg = registered()
    for p in (canonical, other, listing):
        assert not reg["openhands-v0-output"].sniff(p)
        assert not reg["openhands-v0-events"].sniff(p)
    assert not reg["openhands-sdk-v1"].sniff(tmp_path)


# ------------------------------------------------------------------------------------ SDK mess
def _sdk_folder(tmp_path: Path, events: list[dict], token_usages: list[dict]) -> Path:
    conv = tmp_path / "conv"
    (conv / "events").mkdir(parents=True)
    state = {
        "id": "conv-1",
        "agent": {"kind": "Agent", "llm": {"model": "openai/gpt-4o-mini", "max_message_chars": 30000}},
        "stats": {"usage_to_metrics": {"agent": {"token_usages": token_usages, "costs": []}}},
    }
    (conv / "base_state.json").write_text(json.dumps(state))
    for k, e in enumerate(events):
        (conv / "events" / f"event-{k:05d}-{e['id']}.json").write_text(json.dumps(e))
    return conv


def _sdk_user(eid: str, text: str) -> dict:
    return {
        "id": eid,
        "timestamp": "2026-01-01T00:00:00",
        "source": "user",
        "kind": "MessageEvent",
        "llm_message": {"role": "user", "content": [{"type": "text", "text": text}]},
    }


def _sdk_action(eid: str, tcid: str, rid: str) -> dict:
    return {
        "id": eid,
        "timestamp": "2026-01-01T00:00:01",
        "source": "agent",
        "kind": "ActionEvent",
        "thought": [{"type": "text", "text": "Run it."}],
        "tool_name": "terminal",
        "tool_call_id": tcid,
        "tool_call": {"id": tcid, "name": "terminal", "arguments": '{"command": "ls"}'},
        "llm_response_id": rid,
        "action": {"command": "ls", "kind": "TerminalAction"},
    }


def _sdk_obs(eid: str, tcid: str, text: str) -> dict:
    return {
        "id": eid,
        "timestamp": "2026-01-01T00:00:02",
        "source": "environment",
        "kind": "ObservationEvent",
        "tool_name": "terminal",
        "tool_call_id": tcid,
        "action_id": "?",
        "observation": {
            "kind": "TerminalObservation",
            "content": [{"type": "text", "text": text}],
            "metadata": {"exit_code": 0},
        },
    }


def test_sdk_missing_usage_and_orphan_observation_warn(tmp_path):
    events = [
        _sdk_user("u1", "List files."),
        _sdk_action("a1", "c1", "r1"),
        _sdk_obs("o1", "c1", "a.py"),
        _sdk_action("a2", "c2", "r2"),  # r2 has no token_usages entry
        _sdk_obs("o2", "c2", "b.py"),
        _sdk_obs("o3", "c9", "stray"),  # answers a call that is not in the conversation
    ]
    conv = _sdk_folder(tmp_path, events, [{"prompt_tokens": 50, "completion_tokens": 5, "response_id": "r1"}])
    assert detect(conv).name == "openhands-sdk-v1" and expand_paths([tmp_path]) == [conv]
    with pytest.warns(ImportNotice) as record:
        (t,) = load_path(conv)
    messages = " | ".join(str(w.message) for w in record)
    assert "1 of 2 calls have no recorded usage" in messages and "kept unpaired" in messages
    valid(t)
    assert [c.input_tokens for c in t.calls] == [50, None]
    assert (
        t.events[-1].tool_call_id is None
        and t.events[2].content == "a.py\n[Command finished with exit code 0]"
    )
    assert_raw_exact(t)


def test_sdk_events_follow_their_file_number_and_bad_json_names_the_file(tmp_path):
    reply = _sdk_user("yyy", "third")  # a model call: a conversation without one is refused (issue 41)
    reply["source"], reply["llm_message"]["role"] = "agent", "assistant"
    events = [_sdk_user("zzz", "first"), _sdk_user("aaa", "second"), reply]
    events[0]["timestamp"] = "2026-01-01T00:00:09"  # timestamps can disagree; the number decides
    conv = _sdk_folder(tmp_path, events, [])
    (t,) = load_path(conv)
    assert [e.content for e in t.events] == ["first", "second", "third"]
    bad = conv / "events" / "event-00003-bbb.json"
    bad.write_text('{"id": "bbb", "kind": ')
    with pytest.raises(TraceError) as exc:
        list(load_path(conv))
    assert exc.value.file == "conv/events/event-00003-bbb.json" and "invalid JSON" in str(exc.value)


def test_v0_output_run_without_history_is_skipped_with_a_warning(tmp_path):
    failed = json.loads(_output_line([]))
    failed["error"] = "RuntimeError: runtime failed to start"
    p = tmp_path / "output.jsonl"
    p.write_text(json.dumps(failed) + "\n" + _output_line([_user(0), _action(1, "t1", "r1", U)]) + "\n")
    with pytest.warns(ImportNotice, match="line 1: no conversation in its history"):
        traces = list(load_path(p))
    assert [len(t.calls) for t in traces] == [1]


def test_v0_parallel_tool_calls_of_one_response_are_one_call(tmp_path):
    first, second = _action(1, "t1", "r1", U), _action(3, "t2", "r1", U)
    msg = first["tool_call_metadata"]["model_response"]["choices"][0]["message"]
    msg["tool_calls"].append(
        {"id": "t2", "function": {"name": "execute_bash", "arguments": '{"command": "pwd"}'}}
    )
    second["tool_call_metadata"]["model_response"] = first["tool_call_metadata"]["model_response"]
    events = [
        _user(0),
        first,
        _obs(2, 1, "t1", "a.py"),
        second,
        _obs(4, 3, "t2", "/w"),
        _action(5, "t3", "r2", U),
    ]
    (t,) = load_path(_write_events(tmp_path, events))
    valid(t)
    assert [e.kind for e in t.events] == ["user", "assistant", "tool_result", "tool_result", "assistant"]
    assert t.events[1].tool_call_ids == ("t1", "t2") and t.events[1].content.count('"name"') == 2
    assert [e.tool_call_id for e in t.events[2:4]] == ["t1", "t2"]
    assert len(t.calls) == 2


def test_v0_keeps_openhands_types_the_recall_action_and_browser_pages(tmp_path):
    recall = {"id": 1, "timestamp": "2025-01-01T00:00:00", "source": "user", "action": "recall",
              "args": {"recall_type": "workspace_context", "query": "Fix the bug."}}  # fmt: skip
    empty = {"id": 2, "timestamp": "2025-01-01T00:00:00", "source": "environment", "observation": "recall",
             "cause": 1, "content": "", "extras": {"recall_type": "workspace_context"}}  # fmt: skip
    page = _obs(4, 3, "t1", "<html>page</html>", url="https://example.org/a")
    page["observation"] = "browse"
    events = [_user(0), recall, empty, _action(3, "t1", "r1", {"prompt_tokens": 400, "completion_tokens": 9}),
              page, _action(5, "t2", "r2", {"prompt_tokens": 500, "completion_tokens": 9})]  # fmt: skip
    (t,) = load_path(_write_events(tmp_path, events))
    valid(t)
    # the recall action and an empty workspace context: events OpenHands' condensers count, never sent,
    # 0 tokens and no share of the provider's count
    assert [(e.kind, e.source_type, e.tokens) for e in t.events[:3]] == [
        ("user", "action:message", t.events[0].tokens),
        ("user", "action:recall", 0),
        ("user", "observation:recall", 0),
    ]
    assert t.events[0].tokens == t.calls[0].input_tokens == 400  # the first call saw the task alone
    assert (t.events[4].source_type, t.events[4].url) == ("observation:browse", "https://example.org/a")
    assert_raw_exact(t)
    # written and read back; redacted, the page address keeps only its length (the placeholder's size)
    from sim.trace.codec import trace_from_dict
    from sim.trace.io import redact

    d = trace_to_dict(t)
    assert d["events"][4]["url"] == "https://example.org/a" and "url" not in d["events"][0]
    assert trace_from_dict(d, "x", "y") == t
    assert redact(t).events[4].url == "x" * len("https://example.org/a")
