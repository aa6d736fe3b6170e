"""AutoGen conformance cases the oracle runs over the shared families turned up (``frameworks.py autogen
--traces ...``), on hand-built traces whose arithmetic is written out; the goldens on those families
(``tests/golden/frameworks/autogen/*-ohv0.json``, ``*-claude.json``) hold the rest.

Trace ``swe_trace``: events 0 system (100 tokens), 1 task (50), then per turn an assistant call (10) and
its tool result (100); call k sees events [0, 2 + 2k).
"""

from builders import ev, swe_trace

from sim.core.types import Call, ItemState, Trace
from sim.engine.dispatch import replay
from sim.policies.base import make_policy

V, M, D = ItemState.VERBATIM, ItemState.MASKED, ItemState.DROPPED


def inputs(r):
    return r.calls["input_tokens"].tolist()


def states(r):
    return [ItemState(s) for s in r.item_state.tolist()]


def parallel(result: str | None = None) -> Trace:
    """0 system (100), 1 task (50), a0 2 (10) calls c0 and c1, results 3 and 4 (100 each), a1 5 (one
    call), result 6, a2 7 (two calls), results 8 and 9, 10 the answer; calls at 2, 5, 7, 10. AutoGen's
    (and Strands') messages: task, a0, R0 = [3, 4], a1, R1 = [6], a2, R2 = [8, 9]. ``result``: the
    results' text (else ``m<event>``)."""
    r = "tool_result"
    spec = [("system", 100, (), None), ("user", 50, (), None),
            ("assistant", 10, ("c0", "c1"), None), (r, 100, (), "c0"), (r, 100, (), "c1"),
            ("assistant", 10, ("c2",), None), (r, 100, (), "c2"),
            ("assistant", 10, ("c3", "c4"), None), (r, 100, (), "c3"), (r, 100, (), "c4"),
            ("assistant", 10, (), None)]  # fmt: skip
    events = tuple(
        ev(
            i,
            kind,
            result if result is not None and kind == r else f"m{i}",
            tok,
            tool_call_ids=ids,
            tool_call_id=cid,
        )
        for i, (kind, tok, ids, cid) in enumerate(spec)
    )
    calls = tuple(
        Call(index=j, event_index=a, view_end=a, input_tokens=sum(e.tokens for e in events[:a]),
             output_tokens=7, residual_tokens=0)
        for j, a in enumerate((2, 5, 7, 10))
    )  # fmt: skip
    return Trace(trace_id="par", source_format="ctxsim-scenario", events=events, calls=calls,
                 bytes_per_token=4.0)  # fmt: skip


def test_buffered_one_message_sends_none_in_a_tool_loop():
    # buffer 1: the last message before every call after the first is a tool result, which AutoGen drops
    # as a first FunctionExecutionResultMessage: the request is the system message alone (100). ctxsim
    # kept the whole history there (the cut ran past the end and nothing was dropped).
    r = replay(swe_trace([("x" * 384, 100)] * 6), make_policy("autogen_buffered", buffer_size=1), window=None)
    assert inputs(r) == [150, 100, 100, 100, 100, 100]


def test_a_turns_parallel_results_are_one_message():
    # buffer 2: call 1 holds task, a0, R0: a0 and R0 (310); call 2: a1, R1 (210); call 3: a2, R2 (310).
    # Counting each result as a message, call 1's last two were r3, r4: both results, all kept (360).
    r = replay(parallel(), make_policy("autogen_buffered", buffer_size=2), window=None)
    assert inputs(r) == [150, 310, 210, 310]
    assert states(r) == [V] + [D] * 6 + [V] * 3
    # head 1, tail 2: call 2 (5 messages) skips a0 and R0: "Skipped 2 messages." (19 bytes, 9 tokens) in
    # a0's slot, R0 masked with it: 100 + 50 + 9 + 10 + 100 = 269; call 3 skips 4 (a1 and R1 dropped)
    r = replay(parallel(), make_policy("autogen_head_and_tail", head_size=1, tail_size=2), window=None)
    assert inputs(r) == [150, 360, 269, 369]
    assert states(r) == [V, V, M, M, M, D, D, V, V, V]
    # token limit 300: call 2 (370) pops the middle message R0 whole (200) -> 170; call 3 (580) pops a1,
    # R1 and R0 -> 270, with the system message 370
    r = replay(parallel(), make_policy("autogen_token_limited", token_limit=300), window=None)
    assert inputs(r) == [150, 360, 270, 370]
    assert states(r) == [V, V, V, D, D, D, D, V, V, V]


def test_token_limited_without_a_limit_pops_against_the_models_window():
    # token_limit null: AutoGen asks the client's remaining_tokens (the model's window minus the count)
    # and pops while it is negative, i.e. while the count exceeds the window: the pops of token_limit =
    # the window. Window 400 (the context's messages, no system message): call 4 (490 of messages) pops
    # r1 -> 390, sent with the system message: 490; call 5 (600) pops a2, r2, r1 -> 390: 490.
    t = swe_trace([("x" * 384, 100)] * 6, context_window=400)
    unlimited = replay(t, make_policy("autogen_token_limited"), window=None)
    limited = replay(t, make_policy("autogen_token_limited", token_limit=400), window=None)
    assert inputs(unlimited) == inputs(limited)
    assert inputs(unlimited) == [150, 260, 370, 480, 490, 490]
    # no recorded window (every shared family but OpenHands SDK): nothing is popped
    bare = replay(swe_trace([("x" * 384, 100)] * 6), make_policy("autogen_token_limited"), window=None)
    assert inputs(bare) == [150, 260, 370, 480, 590, 700]
