"""Strands conformance cases the oracle runs over the shared families turned up (``frameworks.py strands
--traces ...``), on hand-built traces whose arithmetic is written out; the goldens on those families
(``tests/golden/frameworks/strands/*-ohv0.json``, ``*-claude.json``) hold the rest.

Trace ``swe_trace``: events 0 system (100 tokens), 1 task (50), then per turn an assistant call (10) and
its tool result; call k sees events [0, 2 + 2k). 4 bytes per token.
"""

from builders import ev, swe_trace
from test_conformance_autogen import parallel

from sim.core.types import Call, ItemState, Trace
from sim.cost.tokens import scale_tokens
from sim.engine.dispatch import replay
from sim.policies.base import make_policy
from sim.policies.strands_sliding_window import truncated_text

V, M, D, S = ItemState.VERBATIM, ItemState.MASKED, ItemState.DROPPED, ItemState.SUMMARIZED


def test_a_truncation_that_keeps_the_size_is_no_loop():
    # A 448-character result cut by should_truncate_results comes back 447 characters long (200 + 200
    # around the notice for 48 removed): round(100 x 463 / 464) = 100 tokens, the request as large as
    # before. Strands' state still changed (the notice is in), so the next overflow trims instead of
    # cutting again: no endless loop (the oracle once took the equal size for the same state).
    text = truncated_text("x" * 448)
    assert len(text) == 447 and scale_tokens(100, 448, 447) == 100
    t = swe_trace([("x" * 448, 100)] * 6)
    r = replay(t, make_policy("strands_sliding_window"), window=600)
    # call 5: 700 > 600 refused; r0 cut (still 700) refused again; r0 is cut already, so the window is
    # trimmed from index 2 to the tool pair a1: task, a0, r0 deleted -> 540
    assert r.calls["input_tokens"].tolist() == [150, 260, 370, 480, 590, 540]
    assert r.rejections == 2 and r.finish_reason == "completed"
    assert [ItemState(s) for s in r.item_state.tolist()[:5]] == [V, D, D, D, V]


def answers_without_users() -> Trace:
    """0 system (100), 1 task (50), a 2 / r 3 (10 / 100), 4 answer (10), a 5 / r 6, 7 answer, 8 a call:
    no user message after the task; calls at 2, 4, 5, 7, 8."""
    kinds = [("system", 100), ("user", 50), ("assistant", 10), ("tool_result", 100), ("assistant", 10),
             ("assistant", 10), ("tool_result", 100), ("assistant", 10), ("assistant", 10)]  # fmt: skip
    events = []
    for i, (kind, tok) in enumerate(kinds):
        ids = {"tool_call_ids": (f"c{i}",)} if i in (2, 5) else {}
        events.append(ev(i, kind, f"m{i}", tok, tool_call_id=f"c{i - 1}" if i in (3, 6) else None, **ids))
    calls = tuple(
        Call(index=j, event_index=a, view_end=a, input_tokens=sum(e.tokens for e in events[:a]),
             output_tokens=7, residual_tokens=0)
        for j, a in enumerate((2, 4, 5, 7, 8))
    )  # fmt: skip
    return Trace(trace_id="answers", source_format="ctxsim-scenario", events=tuple(events), calls=calls,
                 bytes_per_token=4.0)  # fmt: skip


def test_an_answer_without_tool_calls_ends_the_invocation():
    # Strands' invocation ends when the model answers without tool use (end_turn): apply_management runs
    # then, before the next call, with no user message between (the oracle opens the next invocation
    # with agent()). Window 3: call 2 (after answer 4) has 4 messages; from index 1 no plain user message,
    # so the tool pair a2 (index 1): the task deleted, 260 - 50 + 10 = 220. Call 3 is mid-loop: 330.
    # Call 4 (after answer 7): 6 messages, from index 3 the tool pair a5: a2, r3 and answer 4 deleted,
    # 100 + 10 + 100 + 10 = 220. (Before: no management without a user message, 270, 380, 390.)
    r = replay(answers_without_users(), make_policy("strands_sliding_window", window_size=3), window=None)
    assert r.calls["input_tokens"].tolist() == [150, 260, 220, 330, 220]
    # event 8 is the last call's own answer: not in its view
    assert [ItemState(s) for s in r.item_state.tolist()] == [V, D, D, D, D, V, V, V]


def test_a_turns_parallel_results_are_one_message():
    # Strands holds a turn's results in one user message (``parallel()``: task, a0, R0 = [3, 4], a1, R1,
    # a2, R2 = [8, 9]). Window 2 before every call: call 1 (task, a0, R0) trims from index 1 to the tool
    # pair a0 + R0: the task deleted, 310 (counting each result as a message, no pair from index 2: 360);
    # call 2: a0, R0 deleted, 210; call 3: a1, R1 deleted, 310.
    r = replay(parallel(), make_policy("strands_sliding_window", window_size=2, per_turn=True), window=None)
    assert r.calls["input_tokens"].tolist() == [150, 310, 210, 310]
    assert [ItemState(s) for s in r.item_state.tolist()] == [V] + [D] * 6 + [V] * 3
    # results of 1000 characters (100 tokens), window 600: call 3 (680) is refused; the oldest message with
    # results is R0, and Strands cuts both: 448 bytes each, round(100 x 464 / 1016) = 46, 680 - 108 = 572
    r = replay(parallel("x" * 1000), make_policy("strands_sliding_window"), window=600)
    assert r.calls["input_tokens"].tolist() == [150, 360, 470, 572] and r.rejections == 1
    assert [ItemState(s) for s in r.item_state.tolist()][3:5] == [M, M]
    # summarizing, window 500, ratio 0.8, 2 kept: call 3 (680, 7 messages) summarizes int(5.6) = 5: task,
    # a0, R0, a1, R1 (370 -> 37) and keeps a2, R2: 100 + 37 + 10 + 200 = 347 (the summarizer's input 61 +
    # 370 = 431). Counting each result as a message the split (7 of 9) fell inside R2 and moved past the
    # end: no reduction, the run ended (context-overflow).
    knobs = {"preserve_recent_messages": 2, "summary_min_tokens": 10, "summary_ratio": 0.8}
    r = replay(parallel(), make_policy("strands_summarizing", **knobs), window=500)
    assert r.calls["input_tokens"].tolist() == [150, 360, 470, 431, 347] and r.finish_reason == "completed"
    assert [ItemState(s) for s in r.item_state.tolist()] == [V] + [S] * 6 + [V] * 3
