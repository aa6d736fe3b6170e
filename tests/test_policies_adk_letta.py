"""Google ADK events compaction and Letta partial eviction (POLICIES.md §4) on ``six()``.

Trace ``six()``: events 0 system (100 tokens), 1 task (50), then six turns of assistant ``cmd k`` (10
tokens; event 2 + 2k) and its tool result (100 tokens; event 3 + 2k). Call k sees events [0, 2 + 2k):
raw input 150 + 110 k. The summarizer instruction weighs 61 tokens.
"""

import dataclasses

import pytest
from builders import swe_trace

from sim.engine import replay
from sim.errors import ConfigError
from sim.policies.base import make_policy
from sim.records import AGENT, SUMMARY
from sim.types import ItemState

V, S, P = ItemState.VERBATIM, ItemState.SUMMARIZED, ItemState.SPILLED
INSTRUCTION = 61
A, SU = AGENT, SUMMARY


def six(**kw):
    return swe_trace([("x" * 384, 100)] * 6, **kw)


def inputs(r):
    return r.calls["input_tokens"].tolist()


def states(r):
    return [ItemState(s) for s in r.item_state.tolist()]


def test_adk_interval_with_overlap():
    # interval 2: fires before call 2 (turns 0, 1 done): a0 r0 a1 r1 (220) -> summary clamp(22) in a0's
    # slot, r0 a1 r1 spilled behind 4-token handles: 150 + 22 + 12 = 184. Before call 4 (turns 2, 3):
    # overlap 1 re-summarizes turn 1's raw events (a1 r1, 110) with the new span a2 r2 a3 r3 (220):
    # summary round(0.1 x 330) = 33 in a2's slot; input 61 + 110 + 220. Request 150 + 34 + 45 = 229.
    r = replay(
        six(), make_policy("adk_events_compaction", compaction_interval=2, summary_min_tokens=10), window=None
    )
    assert r.calls["kind"].tolist() == [A, A, SU, A, A, SU, A, A]
    assert inputs(r) == [150, 260, INSTRUCTION + 220, 184, 294, INSTRUCTION + 330, 229, 339]
    assert r.calls["output_tokens"].tolist() == [7, 7, 22, 7, 7, 33, 7, 7]
    assert states(r) == [V, V, S, P, P, P, S, P, P, P, V, V]
    assert r.item_tokens.tolist()[2:10] == [22, 4, 4, 4, 33, 4, 4, 4]


def test_adk_token_threshold_keeps_retention_events():
    # threshold 300 on the previous request: call 2 was 370, so before call 3 all but the newest 2
    # messages (a2 r2) are compacted: events 2..5 (220) -> 22 + 3 x 4; 150 + 34 + 110 = 294. Call 4's 404
    # fires again before call 5: events 6..9 -> a second summary (22) in a2's slot: 150 + 2 x 34 + 110.
    p = make_policy(
        "adk_events_compaction",
        compaction_interval=1000,
        token_threshold=300,
        event_retention_size=2,
        summary_min_tokens=10,
    )
    r = replay(six(), p, window=None)
    assert r.calls["kind"].tolist() == [A, A, A, SU, A, A, SU, A]
    assert inputs(r) == [150, 260, 370, INSTRUCTION + 220, 294, 404, INSTRUCTION + 220, 328]
    assert states(r) == [V, V, S, P, P, P, S, P, P, P, V, V]


def test_adk_defaults_fire_every_five_turns():
    r = replay(swe_trace([("y", 20)] * 12), make_policy("adk_events_compaction"), window=None)
    kinds = r.calls["kind"].tolist()
    assert [i for i, k in enumerate(kinds) if k == SU] == [5, 11]  # before calls 5 and 10


def test_letta_evicts_oldest_tokens_keeping_the_last_messages():
    # window 400. Call 3's view (480) is over: buffer = the 7 messages (380), goal 0.75 x 380 = 285, but
    # at most 7 - 3 = 4 messages (task a0 r0 a1); keeping r1 without a1 would split a pair, so
    # task a0 r0 (160) are evicted: summary 16 in the task's slot, a0 r0 spilled (4 each):
    # 100 + 24 + 220 = 344. Call 4 (454): buffer 16 + 330, a1 r1 (110) evicted recursively: summary
    # round(0.1 x 126) = 13, input 61 + 16 + 110; 100 + 13 + 16 + 220 = 349. Call 5 (459): a2 r2: 12.
    r = replay(
        six(), make_policy("letta_partial_evict", context_window=400, summary_min_tokens=10), window=None
    )
    assert r.calls["kind"].tolist() == [A, A, A, SU, A, SU, A, SU, A]
    assert inputs(r) == [
        150,
        260,
        370,
        INSTRUCTION + 160,
        344,
        INSTRUCTION + 126,
        349,
        INSTRUCTION + 123,
        356,
    ]
    assert r.calls["output_tokens"].tolist() == [7, 7, 7, 16, 7, 13, 7, 12, 7]
    assert states(r) == [V, S, P, P, P, P, P, P, V, V, V, V]
    assert r.item_tokens.tolist()[:8] == [100, 12, 4, 4, 4, 4, 4, 4]
    # memory-pressure warning once over 300 (75%), again after each eviction that stays over
    assert r.warnings == tuple((row, "memory-pressure") for row in (2, 4, 6, 8))


def test_letta_on_overflow_without_a_known_window():
    t = six()
    assert t.context_window is None
    p = make_policy("letta_partial_evict", summary_min_tokens=10)
    r = replay(t, p, window=400)
    assert r.calls["kind"].tolist() == [A, A, A, SU, A, SU, A, SU, A]
    assert r.warnings == ()  # no known window: no warning level
    r2 = replay(dataclasses.replace(t, context_window=400), p, window=None)  # the trace's window
    assert inputs(r2) == inputs(r)


@pytest.mark.parametrize(
    ("name", "knobs", "message"),
    [
        ("adk_events_compaction", {"compaction_interval": 0}, r"compaction_interval=0 is not an integer"),
        ("adk_events_compaction", {"token_threshold": 100}, r"must be set together"),
        ("adk_events_compaction", {"summary_ratio": 2}, r"summary_ratio=2 is not a number in \(0, 1\]"),
        ("letta_partial_evict", {"evict_fraction": 0}, r"evict_fraction=0 is not a number in \(0, 1\]"),
        ("letta_partial_evict", {"keep_last_messages": -1}, r"keep_last_messages=-1 is not an integer"),
    ],
)
def test_knob_errors(name, knobs, message):
    with pytest.raises(ConfigError, match=message):
        make_policy(name, **knobs)
