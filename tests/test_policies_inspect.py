"""Inspect's compaction strategies (inspect-ai 0.3.285) under its compaction() handler, on ``six()``:
events 0 system (100 tokens), 1 task (50), then assistant ``cmd k`` (10; event 2 + 2k) and its result
(100; event 3 + 2k); call k sees [0, 2 + 2k), raw 150 + 110 k. The handler's estimate is the last
reported input plus the messages since; the check after a compaction counts the view (no residual).
"(Tool result removed)" weighs ceil(37 / 4) = 10; the text an assistant gains for a removed call (63
bytes) ceil(63 / 4) = 16; the summary's framing ceil(291 / 4) = 73, the summary prompt ceil(6106 / 4)."""

import pytest
from builders import swe_trace

from sim.core.records import AGENT, SUMMARY
from sim.core.types import ItemState
from sim.engine.dispatch import replay
from sim.policies.base import make_policy
from sim.util.errors import ConfigError

V, M, D, S = ItemState.VERBATIM, ItemState.MASKED, ItemState.DROPPED, ItemState.SUMMARIZED
A, SU = AGENT, SUMMARY
PROMPT = 1527


def six():
    return swe_trace([("x" * 384, 100)] * 6)


def run(name, **knobs):
    return replay(six(), make_policy(name, **knobs), window=None)


def test_edit_clears_old_results_then_ends_the_run_when_that_is_not_enough():
    # call 3: 370 + 110 = 480 > 400: r0 cleared (r1, r2 kept): 480 - 100 + 10 = 390. Call 4: 390 + 110 =
    # 500: r0 r1 cleared: 410, a second pass changes nothing: "Compaction insufficient", call 4 not sent.
    r = run("inspect_compaction_edit", threshold=400, keep_tool_uses=2)
    assert r.finish_reason == "compaction-insufficient"
    assert r.calls["input_tokens"].tolist() == [150, 260, 370, 390]
    assert r.item_state.tolist() == [V, V, V, M, V, V, V, V, V, V]


def test_edit_without_tool_inputs_removes_the_pair():
    # the result is deleted and its assistant gains the placeholder text: 480 - 100 + 16 = 396
    r = run("inspect_compaction_edit", threshold=400, keep_tool_uses=2, keep_tool_inputs=False)
    assert r.calls["input_tokens"].tolist()[3] == 396
    assert r.item_state.tolist()[2:4] == [M, D] and r.item_tokens.tolist()[2:4] == [26, 0]


def test_trim_keeps_system_input_and_the_newest_share():
    # call 3: conversation a0 .. r2 (6), preserve 0.5: from int(3.0) = 3 on: r1 a2 r2, r1 dropped (its
    # call is gone): 100 + 50 + 110 = 260. Call 5 (370 + 110 = 480): again from 3 of a2 .. r4.
    r = run("inspect_compaction_trim", threshold=400, preserve=0.5)
    assert r.finish_reason == "completed"
    assert r.calls["input_tokens"].tolist() == [150, 260, 370, 260, 370, 260]
    assert r.item_state.tolist() == [V, V] + [D] * 8 + [V, V]


def test_summary_keeps_the_task_and_one_summary():
    # call 3: a0 .. r2 (330) -> 33 + 73 framing = 106 after system and task: 256. Call 5's summary covers
    # the previous one (106) and a3 .. r4 (220): round(32.6) = 33 again, in the same slot.
    r = run("inspect_compaction_summary", threshold=400, summary_min_tokens=10)
    assert r.calls["kind"].tolist() == [A, A, A, SU, A, A, SU, A]
    assert r.calls["input_tokens"].tolist() == [
        150,
        260,
        370,
        150 + 330 + PROMPT,
        256,
        366,
        150 + 326 + PROMPT,
        256,
    ]
    assert r.item_state.tolist() == [V, V] + [S] * 10 and r.item_tokens.tolist()[2] == 106


def test_summary_over_the_threshold_is_summarized_again_then_fails():
    # threshold 200, call 1 (260): a0 r0 (110) -> 11 + 73 = 84: 234 > 200; again: round(8.4) -> 10 + 73 =
    # 83 (233, progress); again: 83, no progress -> insufficient. The three summarizer calls are metered.
    r = run("inspect_compaction_summary", threshold=200, summary_min_tokens=10)
    assert r.finish_reason == "compaction-insufficient"
    assert r.calls["kind"].tolist() == [A, SU, SU, SU]
    assert r.calls["input_tokens"].tolist() == [150, 260 + PROMPT, 234 + PROMPT, 233 + PROMPT]
    assert r.item_state.tolist() == [V, V, V, V]  # nothing applied


def test_auto_falls_back_to_summary():
    a = run("inspect_compaction_auto", threshold=400, summary_min_tokens=10)
    s = run("inspect_compaction_summary", threshold=400, summary_min_tokens=10)
    assert a.calls["input_tokens"].tolist() == s.calls["input_tokens"].tolist()


def test_fractional_threshold_is_a_share_of_the_window():
    import dataclasses

    t = dataclasses.replace(six(), context_window=500)  # 0.8 x 500 = 400: as threshold=400
    r = replay(t, make_policy("inspect_compaction_edit", threshold=0.8, keep_tool_uses=2), window=None)
    assert r.finish_reason == "compaction-insufficient" and len(r.calls["kind"]) == 4


@pytest.mark.parametrize(
    ("name", "knobs", "message"),
    [
        ("inspect_compaction_edit", {"threshold": 0}, r"threshold=0 is not a token count"),
        ("inspect_compaction_edit", {"keep_tool_uses": -1}, r"keep_tool_uses=-1 is not an integer"),
        ("inspect_compaction_trim", {"preserve": 1.5}, r"preserve=1.5 is not a number in \[0, 1\]"),
        ("inspect_compaction_summary", {"threshold": True}, r"threshold=True is not"),
    ],
)
def test_knob_errors(name, knobs, message):
    with pytest.raises(ConfigError, match=message):
        make_policy(name, **knobs)
