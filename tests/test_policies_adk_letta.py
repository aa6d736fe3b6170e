"""Google ADK events compaction (google-adk 2.13.0) and Letta compaction (letta 0.16.8) on hand traces.

Trace ``six()``: events 0 system (100 tokens), 1 task (50), then six turns of assistant ``cmd k`` (10
tokens; event 2 + 2k) and its tool result (100 tokens; event 3 + 2k). Call k sees events [0, 2 + 2k):
raw input 150 + 110 k; every call answers 7 tokens. ADK's summarizer prompt template weighs
ceil((657 + 16) / 4) = 169 tokens, ctxsim's summarizer instruction (Letta) 61.
"""

import pytest
from builders import invocations, swe_trace

from sim.core.records import AGENT, SUMMARY
from sim.core.types import ItemState
from sim.engine.dispatch import replay
from sim.policies.base import make_policy
from sim.util.errors import ConfigError

V, S = ItemState.VERBATIM, ItemState.SUMMARIZED
A, SU = AGENT, SUMMARY
TEMPLATE, INSTRUCTION = 169, 61
TOKEN_MODE = {"compaction_interval": None, "overlap_size": None}


def six(**kw):
    return swe_trace([("x" * 384, 100)] * 6, **kw)


def run(trace, name, **knobs):
    return replay(trace, make_policy(name, **knobs), window=None)


def inputs(r):
    return r.calls["input_tokens"].tolist()


def test_adk_token_threshold_keeps_one_rolling_summary():
    # threshold 300 on the last reported prompt: call 2's 370 fires before call 3. The 7 events after no
    # compaction, the newest 2 kept (a2 r2; the split keeps r2 with its call): task a0 r0 a1 r1 (270) ->
    # summary 27, the task included; 100 + 27 + 110 = 237. Call 4's report (347) fires before call 5:
    # a2 r2 a3 r3 (220) plus the previous summary (27) as the seed -> round(24.7) = 25, one summary over
    # events 1..9 that replaces the first: 100 + 25 + 110 = 235.
    r = run(six(), "adk_events_compaction", **TOKEN_MODE, token_threshold=300, event_retention_size=2,
            summary_min_tokens=10)  # fmt: skip
    assert r.calls["kind"].tolist() == [A, A, A, SU, A, A, SU, A]
    assert inputs(r) == [150, 260, 370, TEMPLATE + 270, 237, 347, TEMPLATE + 247, 235]
    assert r.calls["output_tokens"].tolist() == [7, 7, 7, 27, 7, 7, 25, 7]
    assert r.item_state.tolist() == [V] + [S] * 9 + [V, V]
    # the summary sits at the end of its range (event 9), the superseded one's slot (event 5) went to 0
    assert r.item_tokens.tolist() == [100, 0, 0, 0, 0, 0, 0, 0, 0, 25, 10, 100]


def test_adk_sliding_window_counts_user_initiated_invocations():
    # interval 2, overlap 1. When u2 arrives (before call 4) invocations 0 and 1 have completed: events
    # 1..8 (280) -> summary 28 at event 8; 100 + 28 + u2 = 148. When u3 arrives only invocation 2 is new:
    # nothing. The summarizer gets the events as listed: 169 + 280.
    r = run(
        invocations(4), "adk_events_compaction", compaction_interval=2, overlap_size=1, summary_min_tokens=10
    )
    assert r.calls["kind"].tolist() == [A, A, A, A, SU, A, A, A, A]
    assert inputs(r) == [120, 230, 260, 370, TEMPLATE + 280, 148, 258, 288, 398]
    assert r.item_tokens.tolist()[:9] == [100, 0, 0, 0, 0, 0, 0, 0, 28]


def test_adk_sliding_window_never_fires_within_one_task():
    # a single-task run is one invocation: ADK compacts it only after it has completed
    r = run(swe_trace([("y", 20)] * 12), "adk_events_compaction", compaction_interval=1, overlap_size=0)
    assert SU not in r.calls["kind"].tolist()


def test_letta_sliding_window_cut_after_the_step():
    # window 400: trigger int(0.9 x 400) = 360 on prompt + completion. Call 2: 370 + 7 -> compact before
    # call 3 over [system, task, a0, r0, a1, r1, a2, r2] (8): the cut grows from 0.3 by 0.1: round(3.2)=3
    # -> back to a0 (system + 330 = 430), round(4.0)=4 -> a1 (320), round(4.8)=5 -> a1, round(5.6)=6 -> a2
    # (210 < 0.7 x 400). Task a0 r0 a1 r1 (270) -> summary 27: 100 + 27 + 110 = 237. Call 5: 457 + 7 > 360,
    # but no call follows.
    r = run(six(), "letta_partial_evict", context_window=400, summary_min_tokens=10)
    assert r.calls["kind"].tolist() == [A, A, A, SU, A, A, A]
    assert inputs(r) == [150, 260, 370, INSTRUCTION + 270, 237, 347, 457]
    assert r.item_state.tolist() == [V] + [S] * 5 + [V] * 6
    assert r.item_tokens.tolist()[:2] == [100, 27]


def test_letta_cut_rounds_like_python_and_folds_the_previous_summary():
    # sliding_window_percentage 0.05: goal 0.95 x 400 = 380. Before call 3: round(1.2)=1 finds no
    # assistant (continue), round(2.0)=2 -> a0 (430), round(2.8)=3 -> a0, round(3.6)=4 -> a1 (320): task a0
    # r0 (160) -> 16. Before call 5 over [system, summary, a1 .. r4] (10): round(1.5)=2 -> a1 (540),
    # round(2.5)=2, round(3.5)=4 -> a2 (430), round(4.5)=4, round(5.5)=6 -> a3 (320): the summary (16) and
    # a1 r1 a2 r2 (220) -> round(23.6) = 24, in the same slot.
    r = run(
        six(),
        "letta_partial_evict",
        context_window=400,
        sliding_window_percentage=0.05,
        summary_min_tokens=10,
    )
    assert r.calls["kind"].tolist() == [A, A, A, SU, A, A, SU, A]
    assert inputs(r) == [150, 260, 370, INSTRUCTION + 160, 336, 446, INSTRUCTION + 236, 344]
    assert r.item_tokens.tolist()[:8] == [100, 24, 0, 0, 0, 0, 0, 0]


def test_letta_mode_all_keeps_only_the_system_prompt():
    r = run(six(), "letta_partial_evict", context_window=400, mode="all", summary_min_tokens=10)
    assert inputs(r)[3:5] == [INSTRUCTION + 380, 100 + 38]


def test_letta_on_overflow_without_a_known_window():
    t = six()
    assert t.context_window is None
    r = replay(t, make_policy("letta_partial_evict", summary_min_tokens=10), window=400)
    assert r.finish_reason == "completed" and r.rejections > 0
    assert max(inputs(r)[i] for i, k in enumerate(r.calls["kind"].tolist()) if k == A) <= 400


@pytest.mark.parametrize(
    ("name", "knobs", "message"),
    [
        ("adk_events_compaction", {"compaction_interval": 0}, r"compaction_interval=0 is not an integer"),
        ("adk_events_compaction", {"token_threshold": 100}, r"must be set together"),
        (
            "adk_events_compaction",
            {"compaction_interval": None, "overlap_size": None},
            r"at least one trigger",
        ),
        ("adk_events_compaction", {"summary_ratio": 2}, r"summary_ratio=2 is not a number in \(0, 1\]"),
        ("letta_partial_evict", {"mode": "self_compact_all"}, r"mode='self_compact_all' is not one of"),
        ("letta_partial_evict", {"sliding_window_percentage": 1.5}, r"sliding_window_percentage=1.5 is not"),
    ],
)
def test_knob_errors(name, knobs, message):
    with pytest.raises(ConfigError, match=message):
        make_policy(name, **knobs)
