"""Rules the OpenHands conformance runs (``frameworks.py openhands --traces ...``) found, pinned on
hand-built traces: each test states what OpenHands' own code does (openhands-ai 0.62.0's
``ConversationMemory``, the oracle's mapping of canonical events) and the exact sizes ctxsim gives."""

import dataclasses

from builders import swe_trace

from sim.engine.dispatch import replay
from sim.policies.base import make_policy
from sim.policies.openhands_memory import EV, PH, events_of, sends


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
