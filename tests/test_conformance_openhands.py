"""Rules the OpenHands conformance runs (``frameworks.py openhands --traces ...``) found, pinned on
hand-built traces: each test states what OpenHands' own code does (openhands-ai 0.62.0's
``ConversationMemory``, the oracle's mapping of canonical events) and the exact sizes ctxsim gives."""

import dataclasses

import pytest
from builders import ev, swe_trace

from sim.core.types import Call, Trace
from sim.engine.dispatch import replay
from sim.policies.base import make_policy
from sim.policies.openhands_memory import EV, PH, events_of, sends
from sim.util.errors import ConfigError

V, M, D, S = 0, 2, 3, 4  # ItemState.VERBATIM, MASKED, DROPPED, SUMMARIZED


def reused_ids():
    """swe_trace whose first two calls share one tool call id (SWE-agent's traces do): events 0 system,
    1 task, 2/3 call x and its result, 4/5 call x again and its result, 6/7 call c2, results 40 tokens."""
    t = swe_trace([("a" * 40, 40)] * 3)
    ids = {2: ("x",), 3: "x", 4: ("x",), 5: "x"}
    events = tuple(
        dataclasses.replace(e, tool_call_ids=ids[e.index])
        if e.kind == "assistant" and e.index in ids
        else dataclasses.replace(e, tool_call_id=ids[e.index])
        if e.index in ids
        else e
        for e in t.events
    )
    return dataclasses.replace(t, events=events)


def test_a_reused_call_id_answers_the_older_pending_call_only():
    # ConversationMemory checks its pending actions one after another: when result 3 is a placeholder,
    # result 5 (id x) completes call 2, is sent with it and popped, and call 4 waits for an answer that
    # never comes (not sent). ctxsim's sends() did them all at once and raised KeyError.
    t = reused_ids()
    entries = [(EV, 0), (EV, 1), (EV, 2), (PH, 3, 6, 8), (EV, 4), (EV, 5)]
    assert sends(events_of(t), entries) == {0: 1, 1: 1, 2: 1, 5: 1}


def test_observation_masking_replays_a_trace_reusing_call_ids():
    t = reused_ids()
    r = replay(t, make_policy("openhands_observation_masking", attention_window=2))
    # call 2 (events 0-5): result 3 (position 3 < 6 - 2) is "<MASKED>" (6 tokens), a user message; result
    # 5 answers call 2, so call 4 goes unsent: 100 + 50 + 10 + 6 + 40
    assert r.calls["input_tokens"].tolist() == [150, 200, 206]


def chat_then_tools():
    """tau-bench's shape: 0 system (100), 1 task (50), 2 assistant reply (10), 3 user follow-up (20), then
    three tool steps 4/5, 6/7, 8/9 (call 10, result 40); one call per assistant event."""
    events = [ev(0, "system", "sys", 100), ev(1, "user", "task", 50), ev(2, "assistant", "ok", 10)]
    events.append(ev(3, "user", "more", 20))
    for k in range(3):
        a = len(events)
        events.append(ev(a, "assistant", f"cmd {k}", 10, tool_call_ids=(f"c{k}",)))
        events.append(ev(a + 1, "tool_result", "r" * 40, 40, tool_call_id=f"c{k}"))
    ends = [2, 4, 6, 8]
    calls = tuple(
        Call(index=j, event_index=a, view_end=a, input_tokens=0, output_tokens=7, residual_tokens=0)
        for j, a in enumerate(ends)
    )
    return Trace(trace_id="chat", source_format="ctxsim-scenario", events=tuple(events), calls=calls,
                 bytes_per_token=4.0)  # fmt: skip


def test_recent_events_sends_the_first_user_message_again_once_the_second_event_is_not_one():
    # keep_first 1, max_events 4 (RecentEventsCondenser: head + the newest 3). Call 0 (events 0-1): head
    # and tail overlap, the system prompt goes twice and the task is re-inserted second: 2 x 100 + 2 x 50.
    # Call 2 (0-5) keeps 0, 3, 4, 5: the second is the user's follow-up, so ConversationMemory re-inserts
    # nothing and the task is not sent: 100 + 20 + 10 + 40. Call 3 (0-7) keeps 0, 5, 6, 7: the second is
    # an observation, so the task is sent again, and 5 (its call 4 left out) is not: 100 + 50 + 10 + 40.
    # ctxsim took the task, once left out, as forgotten for good (150 at call 3).
    t = chat_then_tools()
    r = replay(t, make_policy("openhands_recent_events", keep_first=1, max_events=4))
    assert r.calls["input_tokens"].tolist() == [300, 180, 170, 200]
    assert r.item_state.tolist() == [V, V, D, D, D, M, V, V]


def test_sdk_view_leaves_out_an_observation_answering_a_reused_call_id():
    # the SDK's View enforces its properties: ObservationUniquenessProperty keeps the first observation
    # per tool call id, so result 5 (id x again) is left out (DROPPED) and call 4 stays (result 3 answers
    # its id, ToolCallMatchingProperty): call 2 (events 0-5) sends 100 + 50 + 10 + 40 + 10. Both SDK
    # policies apply it every call; ctxsim sent result 5 (250).
    for name, knobs in (
        ("openhands_llm_summarizing", {"variant": "sdk_v1"}),
        ("openhands_hard_context_reset", {}),
    ):
        r = replay(reused_ids(), make_policy(name, **knobs))
        assert r.calls["input_tokens"].tolist() == [150, 200, 210]
        assert r.item_state.tolist()[5] == D


def test_sdk_tools_without_a_system_prompt_are_the_system_prompt_event():
    # a trace with tools and no system prompt (Inspect's): the SDK's SystemPromptEvent carries the tools,
    # so it is the view's first event, counted and never forgotten. keep_first 1, max_size 6 (tail
    # 6 // 2 - 1 - 1 = 1): call 3 (8 events) forgets events 1-6 from the first cut after the system
    # prompt, the task included, a 260-token summary in their place: 100 (tools) + 260. ctxsim left the
    # tools out of the SDK's view, so keep_first kept the task (410).
    t = swe_trace([("a" * 40, 40)] * 6)
    t = dataclasses.replace(t, events=(dataclasses.replace(t.events[0], kind="tools"), *t.events[1:]))
    r = replay(t, make_policy("openhands_llm_summarizing", variant="sdk_v1", keep_first=1, max_size=6))
    agent = r.calls["kind"] == 0  # the summarizer's calls are rows too
    assert r.calls["input_tokens"][agent].tolist() == [150, 200, 250, 360, 410, 460]


def backend():
    """``benchmarks/oracles/openhands/backend.py`` as ``frameworks.py`` loads it (by path)."""
    import importlib.util
    import sys
    from pathlib import Path

    here = Path(__file__).resolve().parent.parent / "benchmarks" / "oracles"
    sys.path.insert(0, str(here))
    spec = importlib.util.spec_from_file_location("oh_backend_test", here / "openhands" / "backend.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_backend_config_is_the_drivers_setting_and_refuses_what_openhands_cannot_take():
    b = backend()
    assert b.config("openhands_amortized_forgetting", {"max_size": 40, "keep_first": 1}, 12000) == {
        "framework": "v0",
        "steps": [{"name": "openhands_amortized_forgetting", "max_size": 40, "keep_first": 1}],
        "window": 12000,
    }
    # the SDK's condenser for variant sdk_v1 (ctxsim's side needs the variant, the driver drops it)
    assert b.config("openhands_llm_summarizing", {"variant": "sdk_v1", "max_tokens": 9000}, None) == {
        "framework": "sdk",
        "steps": [{"name": "openhands_llm_summarizing", "max_tokens": 9000, "variant": "sdk_v1"}],
        "window": None,
    }
    assert b.config("openhands_hard_context_reset", {}, 20000)["framework"] == "sdk"
    with pytest.raises(ConfigError, match="takes no max_tokens"):
        b.config("openhands_llm_summarizing", {"max_tokens": 9000}, None)  # V0's has none


def test_backend_results_by_name_come_back_in_the_settings_order():
    # every policy at "defaults" (no --policy): frameworks.py looks each setting up by its shared name
    b = backend()
    got = b.InOrder([("defaults", ["a"]), ("x=1", ["b"]), ("defaults", ["c"])])
    assert [got["defaults"], got["x=1"], got["defaults"], got["defaults"]] == [["a"], ["b"], ["c"], ["c"]]


def test_v0_summary_never_sits_in_the_slot_of_a_re_created_system_prompt():
    # V0 keep_first 0, max_size 6 (tail 6 // 2 - 0 - 1 = 2): call 3 (8 events) summarizes events 0-5, the
    # system prompt among them; ConversationMemory re-creates the system prompt and re-inserts the task,
    # so the request is 100 + 50 + 260 (summary) + 10 + 40. ctxsim put the summary in the system prompt's
    # slot and so did not send it (360).
    r = replay(
        swe_trace([("a" * 40, 40)] * 5), make_policy("openhands_llm_summarizing", keep_first=0, max_size=6)
    )
    agent = r.calls["kind"] == 0
    assert r.calls["input_tokens"][agent].tolist() == [150, 200, 250, 460, 510]
    assert r.item_state.tolist()[:3] == [V, V, S]
