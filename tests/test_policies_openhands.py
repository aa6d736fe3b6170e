"""OpenHands condensers on hand-built traces: exact request sizes and final item states.

swe_trace: system 100, task 50, then per step an assistant event (10 tokens) and its tool result;
call k sees events [0, 2 + 2k): 150 + (10 + result) x k tokens before any policy acts.
"""

import dataclasses

import pytest
from builders import swe_trace

from sim.core.types import Trace
from sim.cost.tokens import estimate_tokens
from sim.engine.dispatch import replay
from sim.policies.base import make_policy
from sim.policies.openhands_llm_summarizing import INSTRUCTION
from sim.util.errors import ConfigError

V, M, D, S = 0, 2, 3, 4  # VERBATIM, MASKED, DROPPED, SUMMARIZED


def run(trace, name, window=None, **knobs):
    r = replay(trace, make_policy(name, **knobs), window=window)
    return r.calls["input_tokens"].tolist(), r.calls["kind"].tolist(), r.item_state.tolist(), r


def browser(t: Trace, *at: tuple[int, str]) -> Trace:
    """``t`` with the results at these indices typed as OpenHands browser outputs of these pages."""
    pages = dict(at)
    typed = {
        i: dataclasses.replace(t.events[i], source_type="observation:browse", url=u) for i, u in pages.items()
    }
    events = tuple(typed.get(e.index, e) for e in t.events)
    return dataclasses.replace(t, events=events)


# ------------------------------------------------------------------------------ observation masking
def test_observation_masking_masks_old_observations_and_their_calls_go_unsent():
    t = swe_trace([("a" * 40, 40)] * 4)  # events: results at 3, 5, 7, 9
    inputs, kinds, states, r = run(t, "openhands_observation_masking", attention_window=2)
    # "<MASKED>": ceil((8 + 16) / 4) = 6 tokens, a user message without a tool call, so the action that
    # called the masked result is not sent either (OpenHands' ConversationMemory waits for its result).
    # Call 2 (6 events): result 3 (position 3 < 6 - 2) masked, its call 2 unsent: 250 - 40 + 6 - 10;
    # call 3 (8 events): results 3 and 5
    assert inputs == [150, 200, 206, 212]
    assert states == [V, V, M, M, M, M, V, V]
    assert r.item_tokens.tolist()[2:6] == [0, 6, 0, 6]


def test_observation_masking_default_window_is_five_events():
    t = swe_trace([("a", 40)] * 5)
    inputs, _, states, _ = run(t, "openhands_observation_masking")
    # call 3 (8 events): result 3 is at position 3, not < 8 - 5; call 4 (10 events): it is
    assert states == [V, V, M, M] + [V] * 6 and inputs == [150, 200, 250, 300, 350 - 40 + 6 - 10]


# --------------------------------------------------------------------------------- browser output
def test_browser_masking_only_browser_outputs_beyond_the_window():
    t = browser(swe_trace([("page one", 40), ("plain output", 40), ("page two", 40), ("x", 40)]),
                (3, "https://a.ex/1"), (7, "https://b.ex/2"))  # fmt: skip
    inputs, _, states, r = run(t, "openhands_browser_output_masking")
    # browser outputs 3 and 7 (by their OpenHands type); at call 3 (8 events) the newest one (7) stays,
    # 3 becomes "Visited URL https://a.ex/1\nContent omitted" (42 bytes: ceil(58 / 4) = 15 tokens), a user
    # message: its call 2 goes unsent
    assert inputs == [150, 200, 250, 300 - 40 + 15 - 10]
    assert states == [V, V, M, M, V, V, V, V]
    assert r.item_tokens.tolist()[2:4] == [0, 15]


def test_browser_masking_finds_outputs_by_type_not_by_text():
    t = swe_trace([("URL: https://a.ex/1", 40)] * 4)
    assert run(t, "openhands_browser_output_masking")[2].count(M) == 0  # a URL in the text is no type
    typed = browser(t, (3, "https://a.ex/1"), (5, "https://a.ex/1"))
    dark = dataclasses.replace(
        typed, events=tuple(dataclasses.replace(e, content=None) for e in typed.events)
    )

    inputs, _, states, _ = run(dark, "openhands_browser_output_masking")  # text-free: still found
    assert states[2:6] == [M, M, V, V] and inputs[3] == 300 - 40 + 15 - 10


# ----------------------------------------------------------------------------- amortized forgetting
def test_amortized_forgetting_keeps_head_and_newest_and_stays_forgotten():
    t = swe_trace([("a", 5)] * 10)
    inputs, kinds, states, _ = run(t, "openhands_amortized_forgetting", max_size=8, keep_first=1)
    # The system prompt is the view's first event. Tail = 8 // 2 - 1 = 3 events. Call 4 (10 events)
    # keeps the system prompt and 7, 8, 9; result 7's call is forgotten: it stays in the view, unsent,
    # and the task is re-sent second: 100 + 50 + 15. Counts restart from 4 events: the next cut is at
    # call 7 (10 events again), which keeps 13..15 (13 unsent)
    assert inputs == [150, 165, 180, 195, 165, 180, 195, 165, 180, 195]
    assert kinds == [0] * 10
    assert states == [V, V] + [D] * 11 + [M] + [V] * 6


def test_amortized_forgetting_cut_between_pairs_sends_them_whole():
    t = swe_trace([("a", 5)] * 6)
    inputs, _, states, _ = run(t, "openhands_amortized_forgetting", max_size=6, keep_first=1)
    # tail = 6 // 2 - 1 = 2 events: call 3 (8 events) keeps 6, 7; call 5 (7 events) keeps 10, 11
    assert inputs == [150, 165, 180, 165, 180, 165]
    assert states == [V, V] + [D] * 8 + [V] * 2


def test_amortized_forgetting_knobs_are_openhands_own():
    assert make_policy("openhands_amortized_forgetting").params() == {"keep_first": 0, "max_size": 100}
    with pytest.raises(ConfigError, match="keep_first=4 is not below max_size // 2 = 4"):
        make_policy("openhands_amortized_forgetting", max_size=8, keep_first=4)
    with pytest.raises(ConfigError, match="keep_first=-1"):
        make_policy("openhands_amortized_forgetting", keep_first=-1)


def test_amortized_forgetting_cannot_shrink_a_small_view_on_a_rejection():
    t = swe_trace([("a" * 40, 50)] * 3)
    inputs, _, _, r = run(t, "openhands_amortized_forgetting", window=200, max_size=20, keep_first=1)
    # call 1: 210 > 200; the request's condensation keeps 20 // 2 - 1 = 9 newest: nothing to forget
    # (OpenHands raises there): the run ends, named
    assert inputs == [150] and r.finish_reason == "condensation-insufficient" and r.rejections == 1


# ------------------------------------------------------------------------------- LLM summarizing
def test_llm_summarizing_v0_incremental_summary_in_the_first_covered_slot():
    t = swe_trace([("a" * 40, 50)] * 10)
    inputs, kinds, states, r = run(t, "openhands_llm_summarizing", keep_first=1, max_size=8)
    instr = estimate_tokens(len(INSTRUCTION.encode()), 4.0)
    # call 4: 10 events > 8: head = the system prompt, tail = 8 // 2 - 1 - 1 = 2 (events 8, 9); the
    # summary covers the task and 2..7 (230 tokens): output clamp(23, 256, 2048) = 256, in view 256 + 4
    # framing = 260 in slot 2. The task is re-sent second: 100 + 50 + 260 + 60. Call 7: system, summary,
    # 8..15 = 10 events: covers 8..13 with the previous summary (260 + 180)
    assert kinds == [0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0]
    assert inputs == [150, 210, 270, 330, instr + 230, 470, 530, 590,
                      instr + 260 + 180, 470, 530, 590]  # fmt: skip
    assert r.calls["output_tokens"].tolist()[4] == 256
    assert states == [V, V] + [S] * 12 + [V] * 6
    assert r.item_tokens.tolist()[1:5] == [50, 260, 0, 0]


def test_llm_summarizing_clips_each_covered_event_at_max_event_length():
    t = swe_trace([("a" * 40, 50)] * 5)
    inputs, kinds, states, _ = run(
        t, "openhands_llm_summarizing", keep_first=1, max_size=6, max_event_length=20
    )
    instr = estimate_tokens(len(INSTRUCTION.encode()), 4.0)
    # call 3 (8 events) covers the task and 2..6 (tail 6 // 2 - 2 = 1: result 7, whose call is covered:
    # in the view, unsent). Results clipped to 20 of 40 characters -> 25 tokens each; the task and the
    # 5-character actions whole
    assert kinds[3] == 1 and inputs[3] == instr + 50 + 3 * 10 + 2 * 25
    assert inputs[4] == 150 + 260 and states[7] == M


def test_llm_summarizing_sdk_v1_token_trigger_and_hard_context_reset():
    t = swe_trace([("a" * 40, 50)] * 8)
    knobs = {"variant": "sdk_v1", "max_tokens": 400, "summary_min_tokens": 20, "summary_max_tokens": 20}
    inputs, kinds, states, r = run(t, "openhands_llm_summarizing", **knobs)
    # call 5: 450 > 400. Head = system + task (keep_first 2). To fit 400 // 2 the SDK forgets the shortest
    # prefix of the rest weighing more than 450 - 200 = 250 tokens: all ten events (the first nine weigh
    # exactly 250); the summary (20 + 4) goes where they were
    assert kinds == [0, 0, 0, 0, 0, 1, 0, 0, 0]
    assert inputs[:5] == [150, 210, 270, 330, 390] and inputs[6:] == [174, 234, 294]
    assert states == [V, V] + [S] * 10 + [V] * 4 and r.item_tokens.tolist()[2] == 24
    # minimum progress 0.9: 10 of 12 events is too little; token pressure is a hard reason, so the SDK
    # resets hard: every event after the system prompt, the task too, is summarized
    inputs, kinds, states, _ = run(t, "openhands_llm_summarizing", **knobs, minimum_progress=0.9)
    assert kinds[5] == 1 and inputs[6:] == [124, 184, 244] and states[:3] == [V, S, S]


def test_llm_summarizing_variant_defaults_and_knob_checks():
    v0 = make_policy("openhands_llm_summarizing")
    assert (v0.first, v0.size) == (1, 100)
    v1 = make_policy("openhands_llm_summarizing", variant="sdk_v1")
    assert (v1.first, v1.size) == (2, 240)
    with pytest.raises(ConfigError, match="variant='v2'"):
        make_policy("openhands_llm_summarizing", variant="v2")
    with pytest.raises(ConfigError, match="max_tokens=1000 needs variant sdk_v1"):
        make_policy("openhands_llm_summarizing", max_tokens=1000)
    with pytest.raises(ConfigError, match="minimum_progress=1"):
        make_policy("openhands_llm_summarizing", minimum_progress=1)


# ---------------------------------------------------------------------------- conversation window
def test_conversation_window_halves_on_each_overflow_only():
    t = swe_trace([("a" * 40, 50)] * 10)
    inputs, _, states, r = run(t, "openhands_conversation_window", window=400)
    # call 5: 450 > 400 rejected; 10 events after the essentials, keep the newest 5 moved past result 7:
    # 8..11 (120). Call 8: 450 again; of 8..17 keep 14..17
    assert inputs == [150, 210, 270, 330, 390, 270, 330, 390, 270, 330]
    assert r.rejections == 2 and r.finish_reason == "completed"
    assert states == [V, V] + [D] * 12 + [V] * 6
    assert run(t, "openhands_conversation_window")[0] == [150 + 60 * k for k in range(10)]


def test_conversation_window_keeps_halving_until_the_request_fits():
    t = swe_trace([("a" * 40, 50)] * 3 + [("b" * 1600, 400), ("c", 5)])
    inputs, _, states, r = run(t, "openhands_conversation_window", window=500)
    # call 4 sees 150 + 3 x 60 + 10 + 400 = 740 > 500: keep the newest 4 of 8 (620, rejected again),
    # then 2 (560, again), then 1 moved past the result: nothing. OpenHands asks after each rejection
    assert inputs == [150, 210, 270, 330, 150] and r.rejections == 3 and r.finish_reason == "completed"
    assert states == [V, V] + [D] * 8


def test_conversation_window_gives_up_when_the_essentials_overflow():
    t = swe_trace([("a" * 40, 50)] * 3)
    inputs, _, _, r = run(t, "openhands_conversation_window", window=160)
    # every later call: 210 > 160; the newest of (action, result) moved past the result keeps nothing
    assert inputs == [150, 150, 150] and r.rejections == 2 and r.finish_reason == "completed"
    inputs, _, _, r = run(t, "openhands_conversation_window", window=140)  # system + task alone: 150
    # nothing but the essentials to forget: OpenHands' condensation forgets nothing, the request never
    # fits: a named end
    assert inputs == [] and r.rejections == 1 and r.finish_reason == "condensation-insufficient"


# ------------------------------------------------------------------------------ recent events
def test_recent_events_keeps_head_and_newest_and_sends_the_head_twice_while_short():
    t = swe_trace([("a", 5)] * 6)
    inputs, _, states, r = run(t, "openhands_recent_events", keep_first=1, max_events=6)
    # while the view has < 6 events, head + view[-5:] holds the system prompt twice, and the task is
    # re-inserted before the second copy: both sent twice (call 0: 2 x 150; call 1: + 15). Call 2 (6
    # events): no overlap, 180. From call 3 (8 events): the system prompt and the newest 5, led by a
    # result whose call left (unsent), and the task re-sent: 100 + 50 + 3 x 10 ... = 180 again
    assert inputs == [300, 315, 180, 180, 180, 180]
    assert states == [V, V] + [D] * 5 + [M] + [V] * 4
    assert r.compactions["kind"].size > 0 and r.item_tokens.tolist()[:2] == [100, 50]


# --------------------------------------------------------------------------- SDK hard context reset
def test_hard_context_reset_summarizes_all_after_the_system_prompt_on_a_rejection():
    t = swe_trace([("a" * 40, 50)] * 6)
    knobs = {"summary_min_tokens": 20, "summary_max_tokens": 20}
    inputs, kinds, states, r = run(t, "openhands_hard_context_reset", window=300, **knobs)
    # call 3: 330 > 300: the task and 2..7 become one summary (20 + 4 framing) after the system prompt
    assert kinds == [0, 0, 0, 1, 0, 0, 0] and inputs[4:] == [124, 184, 244]
    assert states == [V] + [S] * 7 + [V] * 4 and r.rejections == 1
    # at the default size rule the summary (256 + 4) makes the request 360, larger than the 330 it
    # replaced: no progress, the run ends (the summarizer call still metered)
    inputs, kinds, _, r = run(t, "openhands_hard_context_reset", window=300)
    assert kinds == [0, 0, 0, 1] and r.finish_reason == "condensation-insufficient" and r.rejections == 1
