"""Framework policies (POLICIES.md §4) on hand-built traces whose arithmetic is written out.

Trace ``six()``: events 0 system (100 tokens), 1 task (50), then six turns of assistant ``cmd k`` (10
tokens; event 2 + 2k) and its tool result ``x * 384`` (100 tokens, one line; event 3 + 2k). Call k sees
events [0, 2 + 2k): raw input 150 + 110 k. Messages (system excluded): the task, then a_k, r_k: 1 + 2k in
view at call k. New text of b bytes weighs ceil((b + 16) / 4) tokens (4 bytes per token).
"""

import pytest
from builders import ev, swe_trace

from sim.core.records import AGENT, SUMMARY
from sim.core.types import Call, ItemState, Trace
from sim.engine.dispatch import replay
from sim.metrics.compute import compute_metrics
from sim.policies.base import make_policy
from sim.policies.llm_summary import SUMMARIZER_INSTRUCTION
from sim.util.errors import ConfigError

V, M, D, S = ItemState.VERBATIM, ItemState.MASKED, ItemState.DROPPED, ItemState.SUMMARIZED
INSTRUCTION = 61  # ceil((227 + 16) / 4): the summarizer instruction's tokens


def six():
    return swe_trace([("x" * 384, 100)] * 6)


def run(name, **knobs):
    return replay(six(), make_policy(name, **knobs), window=None)


def inputs(r):
    return r.calls["input_tokens"].tolist()


def states(r):
    return [ItemState(s) for s in r.item_state.tolist()]


def test_instruction_size():
    assert len(SUMMARIZER_INSTRUCTION.encode()) == 227


# ---------------------------------------------------------------------------------------- windows
def test_strands_sliding_window_per_turn_trims_to_a_tool_pair():
    # window 3, before every call: call 2 has 5 messages; from index 2 there is no plain user message,
    # so the trim falls back to the next tool call followed by its result (a1): task, a0, r0 deleted:
    # 370 - 160 = 210. Call 3 (4 messages): from index 1, the next tool call a2: a1, r1 deleted.
    r = run("strands_sliding_window", window_size=3, per_turn=True)
    assert inputs(r) == [150, 260, 210, 210, 210, 210]
    assert states(r) == [V] + [D] * 9 + [V, V]  # the system prompt stays; a4, r4 kept
    assert r.calls["first_changed"].tolist() == [-1, -1, 1, 4, 6, 8]
    # per_turn 2: every second model call (calls 1, 3, 5). Call 3 (7 messages): from index 4 the next tool
    # pair is a2: task .. r1 deleted, 210; call 4 untouched, 320; call 5: a2 .. r3 deleted, 210.
    assert inputs(run("strands_sliding_window", window_size=3, per_turn=2)) == [150, 260, 370, 210, 320, 210]


def test_strands_default_window_waits_for_the_end_of_an_invocation():
    # per_turn false (Strands' default): management runs after an invocation; a single task has one
    assert inputs(run("strands_sliding_window", window_size=3)) == [150, 260, 370, 480, 590, 700]


def two_turns() -> Trace:
    """0 system (100), 1 user (50), a 2 / r 3 (10 / 100), 4 answer (10), 5 user (50), a 6 / r 7, 8."""
    kinds = [("system", 100), ("user", 50), ("assistant", 10), ("tool_result", 100), ("assistant", 10),
             ("user", 50), ("assistant", 10), ("tool_result", 100), ("assistant", 10)]  # fmt: skip
    events = []
    for i, (kind, tok) in enumerate(kinds):
        ids = {"tool_call_ids": (f"c{i}",)} if i in (2, 6) else {}
        events.append(ev(i, kind, f"m{i}", tok, tool_call_id=f"c{i - 1}" if i in (3, 7) else None, **ids))
    prefix = [0]
    for e in events:
        prefix.append(prefix[-1] + e.tokens)
    calls = tuple(
        Call(index=j, event_index=a, view_end=a, input_tokens=prefix[a], output_tokens=7, residual_tokens=0)
        for j, a in enumerate((2, 4, 6, 8))
    )
    return Trace(trace_id="two", source_format="ctxsim-scenario", events=tuple(events), calls=calls,
                 bytes_per_token=4.0)  # fmt: skip


def test_strands_sliding_window_moves_the_trim_to_the_next_plain_user_message():
    # window 4, per_turn: call 2 has 5 messages (1..5); from index 1 the next plain user message is 5:
    # everything before it is deleted (one message over the window costs four). 100 + 50.
    t = two_turns()
    r = replay(t, make_policy("strands_sliding_window", window_size=4, per_turn=True), window=None)
    assert inputs(r) == [150, 260, 150, 260]
    assert states(r)[:6] == [V, D, D, D, D, V]
    # per_turn false, window 3: after the first invocation (before user 5), 4 messages: from index 1 no
    # plain user message, the tool pair a2: the task deleted (270); call 3 is mid-invocation: untouched.
    r = replay(t, make_policy("strands_sliding_window", window_size=3), window=None)
    assert inputs(r) == [150, 260, 270, 380]


def test_strands_sliding_window_truncates_the_oldest_result_on_overflow():
    # results of 1000 characters (100 tokens); window 600: call 5 (700) is refused. should_truncate_results
    # cuts r0 to 200 + 200 characters around a 48-byte notice: 448 bytes, round(100 x 464 / 1016) = 46:
    # 646, refused again; r0 is cut already, so the window is trimmed from index 2 to the tool pair a1:
    # task, a0, r0 deleted -> 540.
    t = swe_trace([("x" * 1000, 100)] * 6)
    r = replay(t, make_policy("strands_sliding_window"), window=600)
    assert inputs(r) == [150, 260, 370, 480, 590, 540] and r.rejections == 2
    assert states(r)[:4] == [V, D, D, D]
    off = replay(t, make_policy("strands_sliding_window", should_truncate_results=False), window=600)
    assert inputs(off) == inputs(r) and off.rejections == 1


def test_autogen_buffered_last_n_messages():
    # buffer 4: call 2 has 5 messages, the last 4 start at a0 (a valid boundary): the task is dropped.
    # call 3: 7 messages, the last 4 start at a1: a0, r0 dropped. 320 from then on.
    r = run("autogen_buffered", buffer_size=4)
    assert inputs(r) == [150, 260, 320, 320, 320, 320]
    assert states(r) == [V] + [D] * 7 + [V] * 4
    # buffer 3 starts on a result at call 2: it is dropped with its call, as Strands' window does
    assert inputs(run("autogen_buffered", buffer_size=3)) == [150, 260, 210, 210, 210, 210]


def test_autogen_head_and_tail_placeholder():
    # head 1 (the task), tail 2. call 2: 5 messages, 2 skipped: a0 + r0 -> "Skipped 2 messages." (19 bytes,
    # ceil(35 / 4) = 9 tokens) in a0's slot, r0 masked with it: 370 - 110 + 9 = 269. Later calls skip
    # two more messages each (DROPPED); the placeholder's count grows, its size stays 9.
    r = run("autogen_head_and_tail", head_size=1, tail_size=2)
    assert inputs(r) == [150, 260, 269, 269, 269, 269]
    assert states(r) == [V, V, M, M] + [D] * 6 + [V, V]
    assert r.item_tokens.tolist()[:4] == [100, 50, 9, 0]
    assert r.calls["first_changed"].tolist() == [-1, -1, 2, 4, 6, 8]


def test_autogen_head_never_ends_on_a_tool_call():
    # head 2 would end on a0, whose result is skipped: the head loses a0 (AutoGen's rule)
    r = run("autogen_head_and_tail", head_size=2, tail_size=2)
    assert inputs(r) == [150, 260, 269, 269, 269, 269]
    assert states(r)[:4] == [V, V, M, M]


def test_autogen_token_limited_pops_single_messages():
    # AutoGen counts the context's messages only (the system message is the agent's): limit 400. call 4
    # (490, 9 messages): pops r1 (index 4) -> 390: a1 is sent without its result. call 5 (600, from all 11
    # messages again): pops a2, r2, r1 -> 390: a1 still unpaired.
    r = run("autogen_token_limited", token_limit=400)
    assert inputs(r) == [150, 260, 370, 480, 490, 490]
    assert states(r) == [V, V, V, V, V, D, D, D, V, V, V, V]
    assert r.unpaired_tool_messages == 2 and compute_metrics(r)["unpaired_tool_messages"] == 2
    # the provider's scope counts the system message too (100): the same pops at a limit 100 higher
    p = run("autogen_token_limited", token_limit=500, token_count="provider")
    assert inputs(p) == inputs(r) and states(p) == states(r) and p.unpaired_tool_messages == 2


def test_autogen_token_limited_recomputes_from_the_full_history():
    # r2 weighs 300, limit 300. call 3 (580: task a0 r0 a1 r1 a2 r2): pops a1, r1, r0, a0, a2, r2 -> the
    # task alone (150 with the system message). call 4 (690, 9 messages): pops r1, a2, a1, r2 -> 270:
    # a0 and r0, popped for call 3, are sent again. call 5 (800): pops a2, r2, r1, a3, a1, r3 -> 270.
    t = swe_trace([("x" * 384, s) for s in (100, 100, 300, 100, 100, 100)])
    seen = []
    r = replay(t, make_policy("autogen_token_limited", token_limit=300), window=None,
               observer=lambda k, v: seen.append(tuple(ItemState(s) for s in v.state[: v.n])))  # fmt: skip
    assert inputs(r) == [150, 260, 370, 150, 370, 370]
    assert seen[3] == (V, V) + (D,) * 6
    assert seen[4] == (V,) * 4 + (D,) * 4 + (V, V)
    assert seen[5] == (V,) * 4 + (D,) * 6 + (V, V)
    assert r.unpaired_tool_messages == 0


def test_autogen_token_limited_default_is_the_trace_window():
    assert inputs(run("autogen_token_limited")) == [150, 260, 370, 480, 590, 700]  # window unknown
    import dataclasses

    t = dataclasses.replace(six(), context_window=400)
    r = replay(t, make_policy("autogen_token_limited"), window=None)
    # messages only: call 4 (490) pops r1 -> 390; call 5 (600) pops r2, a3, r1 -> 390
    assert inputs(r) == [150, 260, 370, 480, 490, 490]


# -------------------------------------------------------------------------------------- summaries
def test_llm_summary_every_n_turns_keeping_m():
    # n 2, m 1: fires once 3 unsummarized turns completed (before call 3): a0 r0 a1 r1 (220 tokens) are
    # covered, a2 r2 kept. Summary clamp(0.1 x 220, 10, 2048) = 22 in a0's slot: 480 - 220 + 22 = 282.
    # Summarizer input: 61 + 220. Next at call 5 (a2, a3, a4 completed): a2 r2 a3 r3 covered
    # incrementally: clamp(0.1 x (22 + 220)) = 24, input 61 + 22 + 220; 700 - 440 + 24 = 284.
    r = run("llm_summary", n=2, m=1, summary_min_tokens=10)
    assert r.calls["kind"].tolist() == [AGENT] * 3 + [SUMMARY, AGENT, AGENT, SUMMARY, AGENT]
    assert inputs(r) == [150, 260, 370, INSTRUCTION + 220, 282, 392, INSTRUCTION + 242, 284]
    assert r.calls["output_tokens"].tolist() == [7, 7, 7, 22, 7, 7, 24, 7]
    assert states(r) == [V, V] + [S] * 8 + [V, V]
    assert r.item_tokens.tolist()[2:4] == [24, 0]


def test_llm_summary_defaults_fire_after_turn_31():
    r = replay(swe_trace([("y" * 40, 20)] * 40), make_policy("llm_summary"), window=None)
    kinds = r.calls["kind"].tolist()
    assert kinds.index(SUMMARY) == 31  # after 31 agent calls (turns 1..31 completed)
    assert kinds.count(SUMMARY) == 1  # the next would need 21 more turns (turn 52)


def test_hybrid_masks_between_summaries():
    # mask_n 1: all but the newest tool result become "Old environment output: (1 lines omitted)"
    # (41 bytes, 15 tokens): call 2 masks r0: 370 - 85 = 285. Call 3 masks r1, and 3 turns completed:
    # a0 r0' a1 r1' (10 + 15 + 10 + 15 = 50) covered -> summary 10 (min), input 61 + 50;
    # 480 - 220 + 10 = 270. Call 4 masks r2: 590 - 220 + 10 - 85 = 295. Call 5 masks r3 and summarizes
    # a2 r2' a3 r3' (50) over the previous summary (10): input 61 + 60; 700 - 440 + 10 = 270.
    r = run("hybrid", n=2, m=1, mask_n=1, summary_min_tokens=10)
    assert r.calls["kind"].tolist() == [AGENT] * 3 + [SUMMARY, AGENT, AGENT, SUMMARY, AGENT]
    assert inputs(r) == [150, 260, 285, INSTRUCTION + 50, 270, 295, INSTRUCTION + 60, 270]
    assert states(r) == [V, V] + [S] * 8 + [V, V]


def test_hybrid_default_masks_like_observation_masking_until_the_first_summary():
    t = swe_trace([("y\n" * 30, 40)] * 30)
    hybrid = replay(t, make_policy("hybrid"), window=None)
    masking = replay(t, make_policy("observation_masking", n=10), window=None)
    assert inputs(hybrid) == inputs(masking)  # 30 turns: no summary before turn 53
    assert hybrid.item_state.tolist() == masking.item_state.tolist()


# ------------------------------------------------------------------------------------------- knobs
@pytest.mark.parametrize(
    "name, knobs, message",
    [
        ("strands_sliding_window", {"window_size": -1}, r"window_size=-1 is not an integer >= 0"),
        ("strands_sliding_window", {"per_turn": 0}, r"per_turn=0 is not an integer >= 1"),
        ("strands_summarizing", {"proactive_compression": 0.7}, r"proactive_compression=0.7 is not null"),
        (
            "strands_summarizing",
            {"proactive_compression": {"compression_threshold": 1.5}},
            r"not a number in",
        ),
        ("autogen_buffered", {"buffer_size": -1}, r"buffer_size=-1 is not an integer >= 1"),
        ("autogen_head_and_tail", {"tail_size": "x"}, r"tail_size='x' is not an integer >= 1"),
        ("autogen_token_limited", {"token_limit": 0}, r"token_limit=0 is not an integer >= 1"),
        ("autogen_token_limited", {"token_count": "model"}, r"token_count='model' is not one of"),
        ("autogen_head_and_tail", {"head_size": 0}, r"head_size=0 is not an integer >= 1"),
        ("autogen_head_and_tail", {"tail_size": 0}, r"tail_size=0 is not an integer >= 1"),
        ("autogen_buffered", {"buffer_size": 0}, r"buffer_size=0 is not an integer >= 1"),
        ("llm_summary", {"n": 0}, r"n=0 is not an integer >= 1"),
        ("llm_summary", {"summary_ratio": 0}, r"summary_ratio=0 is not a number in \(0, 1\]"),
        ("hybrid", {"mask_n": 0}, r"mask_n=0 is not an integer >= 1"),
        ("hybrid", {"summary_min_tokens": 50, "summary_max_tokens": 10}, r"summary_max_tokens=10"),
    ],
)
def test_knob_errors(name, knobs, message):
    with pytest.raises(ConfigError, match=message):
        make_policy(name, **knobs)


def test_strands_summarizing_proactive_at_threshold():
    # window 400, proactive at 0.7 (280) of the projected input: the newest reported usage (request + 7)
    # plus the messages after it. call 2: 267 + r1 (100) = 367: 5 messages, int(0.3 x 5) = 1: the task
    # (50) is summarized -> 10 (min) in its slot, input 61 + 50; 370 - 50 + 10 = 330. call 3 (337 + 100):
    # summary + 6 messages, 2 to cover: the summary and a0; the split (r0) is moved past the result:
    # a0 r0 (110) covered, incrementally: clamp(0.1 x 120) = 12, input 61 + 120; 480 - 160 + 12 = 332.
    r = run("strands_summarizing", context_window=400, preserve_recent_messages=2, summary_min_tokens=10,
            proactive_compression={"compression_threshold": 0.7})  # fmt: skip
    assert r.calls["kind"].tolist() == [AGENT] * 2 + [SUMMARY, AGENT] * 4
    assert inputs(r) == [150, 260, 111, 330, 181, 332, 183, 332, 183, 332]
    assert states(r) == [V] + [S] * 7 + [V] * 4
    assert r.params["proactive_compression.compression_threshold"] == 0.7
    assert "proactive_compression" not in r.params


def test_strands_summarizing_is_off_before_an_overflow_by_default():
    r = run("strands_summarizing", context_window=400, preserve_recent_messages=2, summary_min_tokens=10)
    assert inputs(r) == [150, 260, 370, 480, 590, 700]
    assert r.params["proactive_compression.compression_threshold"] is None


def test_strands_summarizing_clamps_the_ratio():
    # Strands clamps summary_ratio to [0.1, 0.8]: 0.95 summarizes like 0.8
    knobs = {"context_window": 400, "preserve_recent_messages": 2, "summary_min_tokens": 10,
             "proactive_compression": True}  # fmt: skip
    assert inputs(run("strands_summarizing", summary_ratio=0.95, **knobs)) == inputs(
        run("strands_summarizing", summary_ratio=0.8, **knobs)
    )
    assert inputs(run("strands_summarizing", summary_ratio=0.95, **knobs)) != inputs(
        run("strands_summarizing", **knobs)
    )


def test_strands_summarizing_ends_an_endless_resummarizing_loop():
    # window 350, preserve 4, summaries of at least 200: call 2 (370) is refused; 5 messages: the task
    # alone is summarized (200): 520, refused; the summary alone is summarized again (200): the same
    # state refused twice -> Strands would loop forever: compaction-loop, after 2 summaries.
    p = make_policy("strands_summarizing", preserve_recent_messages=4, summary_min_tokens=200)
    r = replay(six(), p, window=350)
    assert r.finish_reason == "compaction-loop"
    assert r.calls["kind"].tolist() == [AGENT, AGENT, SUMMARY, SUMMARY]


def test_strands_summarizing_on_overflow_only_without_a_window():
    p = make_policy("strands_summarizing", preserve_recent_messages=2, summary_min_tokens=10)
    assert inputs(replay(six(), p, window=None)) == [150, 260, 370, 480, 590, 700]
    r = replay(six(), p, window=400)
    assert r.calls["kind"].tolist().count(SUMMARY) >= 1 and r.finish_reason == "completed"
    assert max(inputs(r)) <= 400
