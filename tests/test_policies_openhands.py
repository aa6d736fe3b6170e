"""OpenHands condensers on hand-built traces: exact request sizes and final item states.

swe_trace: system 100, task 50, then per step an assistant event (10 tokens) and its tool result;
call k sees events [0, 2 + 2k): 150 + (10 + result) x k tokens before any policy acts.
"""

import dataclasses

import pytest
from builders import swe_trace

from sim.engine import replay
from sim.errors import ConfigError
from sim.policies.base import make_policy
from sim.policies.openhands_llm_summarizing import INSTRUCTION
from sim.tokens import estimate_tokens
from sim.types import Trace

V, M, D, S = 0, 2, 3, 4  # VERBATIM, MASKED, DROPPED, SUMMARIZED


def run(trace, name, window=None, **knobs):
    r = replay(trace, make_policy(name, **knobs), window=window)
    return r.calls["input_tokens"].tolist(), r.calls["kind"].tolist(), r.item_state.tolist(), r


# ------------------------------------------------------------------------------ observation masking
def test_observation_masking_keeps_observations_in_the_attention_window():
    t = swe_trace([("a" * 40, 40)] * 4)  # events: results at 3, 5, 7, 9
    inputs, kinds, states, r = run(t, "openhands_observation_masking", attention_window=2)
    # "<MASKED>": ceil((8 + 16) / 4) = 6 tokens. Call 2 (n=6) masks result 3 (index < 6 - 2),
    # call 3 (n=8) result 5 too; assistant actions and the task are never masked
    assert inputs == [150, 200, 250 - 34, 300 - 68]
    assert states == [V, V, V, M, V, M, V, V]
    assert r.item_tokens.tolist()[3] == 6


def test_observation_masking_default_window_is_five_events():
    t = swe_trace([("a", 40)] * 5)
    inputs, _, states, _ = run(t, "openhands_observation_masking")
    # call 3 (n=8): no result before index 3; call 4 (n=10): result 3 masked, result 5 is in the window
    assert states == [V, V, V, M] + [V] * 6 and inputs == [150, 200, 250, 300, 350 - 34]


# --------------------------------------------------------------------------------- browser output
def test_browser_masking_only_browser_outputs_beyond_the_window():
    t = swe_trace(
        [
            ("URL: https://a.ex/1\nbody", 40),
            ("plain output", 40),
            ("https://b.ex/2 page\nbody", 40),
            ("x", 40),
        ]
    )
    inputs, _, states, r = run(t, "openhands_browser_output_masking")
    # browser outputs 3 and 7; at call 3 (n=8) the newest one (7) stays, 3 becomes
    # "Visited URL https://a.ex/1\nContent omitted" (42 bytes: ceil(58 / 4) = 15 tokens)
    assert inputs == [150, 200, 250, 300 - 40 + 15]
    assert states == [V, V, V, M, V, V, V, V]
    assert r.item_tokens.tolist()[3] == 15


def test_browser_masking_changes_nothing_without_text():
    t = swe_trace([("URL: https://a.ex/1", 40)] * 4)
    dark = Trace(
        trace_id="dark",
        source_format=t.source_format,
        events=tuple(dataclasses.replace(e, content=None) for e in t.events),
        calls=t.calls,
        bytes_per_token=4.0,
    )
    assert run(t, "openhands_browser_output_masking")[2].count(M) == 2
    inputs, _, states, _ = run(dark, "openhands_browser_output_masking")
    assert inputs == [150, 200, 250, 300] and states.count(M) == 0


# ----------------------------------------------------------------------------- amortized forgetting
def test_amortized_forgetting_keeps_head_and_newest_and_stays_forgotten():
    t = swe_trace([("a", 5)] * 10)
    inputs, kinds, states, _ = run(t, "openhands_amortized_forgetting", max_size=8)
    # tail = 8 // 2 - 1 - 1 = 2 events. Call 4 (9 events: 1..9) keeps the task and events 8, 9;
    # counts restart from 3 events, so the next cut is at call 7 (9 events again: 1, 8..15)
    assert inputs == [150, 165, 180, 195, 165, 180, 195, 165, 180, 195]
    assert kinds == [0] * 10
    assert states == [V, V] + [D] * 12 + [V] * 6


def test_amortized_forgetting_never_leaves_a_result_without_its_call():
    t = swe_trace([("a", 5)] * 6)
    inputs, _, states, _ = run(t, "openhands_amortized_forgetting", max_size=6)
    # tail = 6 // 2 - 2 = 1 event: result 7, whose call 6 is forgotten, goes too: only the task is left
    assert inputs == [150, 165, 180, 150, 165, 180]
    assert states == [V, V] + [D] * 6 + [V] * 4


def test_amortized_forgetting_knobs_are_checked():
    with pytest.raises(ConfigError, match="max_size=5 is not an integer >= 2 x keep_first \\+ 4 = 6"):
        make_policy("openhands_amortized_forgetting", max_size=5)
    with pytest.raises(ConfigError, match="keep_first=-1"):
        make_policy("openhands_amortized_forgetting", keep_first=-1)


# ------------------------------------------------------------------------------- LLM summarizing
def test_llm_summarizing_v0_incremental_summary_in_the_first_covered_slot():
    t = swe_trace([("a" * 40, 50)] * 10)
    inputs, kinds, states, r = run(t, "openhands_llm_summarizing", keep_first=1, max_size=8)
    instr = estimate_tokens(len(INSTRUCTION.encode()), 4.0)
    # call 4: 9 events > 8: head = task, tail = events 8, 9 (8 // 2 - 1 - 1), the summary covers 2..7
    # (180 tokens): output clamp(18, 256, 2048) = 256, in view 256 + 4 framing = 260 in slot 2.
    # call 7: task, summary, 8..15 = 10 events: covers 8..13 with the previous summary (260 + 180)
    assert kinds == [0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0]
    assert inputs == [150, 210, 270, 330, instr + 180, 150 + 260 + 60, 530, 590,
                      instr + 260 + 180, 150 + 260 + 60, 530, 590]  # fmt: skip
    assert r.calls["output_tokens"].tolist()[4] == 256
    assert states == [V, V] + [S] * 12 + [V] * 6
    assert r.item_tokens.tolist()[2:5] == [260, 0, 0]


def test_llm_summarizing_clips_each_covered_event_at_max_event_length():
    t = swe_trace([("a" * 40, 50)] * 5)
    inputs, kinds, _, _ = run(t, "openhands_llm_summarizing", keep_first=1, max_size=6, max_event_length=20)
    instr = estimate_tokens(len(INSTRUCTION.encode()), 4.0)
    # call 3 covers 2..7 (the tail's first event, result 7, goes with its call 6): results clipped to
    # 20 of 40 characters -> 25 tokens each; the 5-character assistant events are whole
    assert kinds[3] == 1 and inputs[3] == instr + 3 * (10 + 25)
    assert inputs[4] == 150 + 260


def test_llm_summarizing_sdk_v1_token_trigger_and_minimum_progress():
    t = swe_trace([("a" * 40, 50)] * 8)
    knobs = {"variant": "sdk_v1", "max_tokens": 400, "summary_min_tokens": 20, "summary_max_tokens": 20}
    inputs, kinds, states, r = run(t, "openhands_llm_summarizing", **knobs)
    # call 5: 450 > 400. Head = task + first action (keep_first 2), so result 3 stays with it; the tail
    # is the newest events within 200 tokens (6..11, 180); the summary covers 4, 5 (60 tokens): 20 + 4
    # Each later call is over 400 again (414 + 60): the summary then covers the two oldest events after
    # the kept result 3 with the previous summary (input 271 instruction + 24 + 60), same size in view
    instr = estimate_tokens(len(INSTRUCTION.encode()), 4.0)
    assert kinds == [0, 0, 0, 0, 0, 1, 0, 1, 0, 1, 0]
    assert inputs == [150, 210, 270, 330, 390, instr + 60, 450 - 60 + 24,
                      instr + 24 + 60, 414, instr + 24 + 60, 414]  # fmt: skip
    assert states == [V, V, V, V] + [S] * 6 + [V] * 6
    assert r.item_tokens.tolist()[4] == 24
    # minimum progress 0.5: 60 of 450 tokens is too little, nothing is condensed
    inputs, kinds, _, _ = run(t, "openhands_llm_summarizing", **knobs, minimum_progress=0.5)
    assert 1 not in kinds and inputs == [150 + 60 * k for k in range(8)]


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
    # call 5: 450 > 400 rejected; 10 events after the task, keep the newest 5 moved past result 7:
    # 8..11 (120). Call 8: 450 again; of 8..17 keep 14..17
    assert inputs == [150, 210, 270, 330, 390, 270, 330, 390, 270, 330]
    assert r.rejections == 2 and r.finish_reason == "completed"
    assert states == [V, V] + [D] * 12 + [V] * 6
    assert run(t, "openhands_conversation_window")[0] == [150 + 60 * k for k in range(10)]


def test_conversation_window_gives_up_when_the_essentials_overflow():
    t = swe_trace([("a" * 40, 50)] * 3)
    inputs, _, _, r = run(t, "openhands_conversation_window", window=160)
    # every later call: 210 > 160; the newest of (action, result) moved past the result keeps nothing
    assert inputs == [150, 150, 150] and r.rejections == 2 and r.finish_reason == "completed"
    inputs, _, _, r = run(t, "openhands_conversation_window", window=140)  # system + task alone: 150
    assert inputs == [] and r.rejections == 1 and r.finish_reason == "context-overflow"
