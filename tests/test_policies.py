import dataclasses

import pytest
from builders import ev, swe_trace

from sim.core.types import ItemState
from sim.engine.dispatch import replay
from sim.policies.base import make_policy
from sim.policies.observation_masking import placeholder
from sim.util.errors import ConfigError, UnknownNameError


def five_obs():
    return swe_trace([("a\nb\nc", 100)] * 5)


def test_raw_reproduces_recorded_input():
    t = five_obs()
    r = replay(t, make_policy("raw"))
    assert r.calls["input_tokens"].tolist() == [150, 260, 370, 480, 590]
    assert r.calls["output_tokens"].tolist() == [7] * 5
    assert (r.calls["first_changed"] == -1).all()


def test_placeholder_text_and_size():
    assert placeholder(3) == "Old environment output: (3 lines omitted)"
    assert len(placeholder(3).encode()) == 41


def test_observation_masking_exact_arithmetic():
    # n=2: with L observations (task + tool results) in view, observations 1 .. L-3 are masked.
    # Placeholder: 41 bytes -> ceil((41 + 16) / 4) = 15 tokens instead of 100.
    r = replay(five_obs(), make_policy("observation_masking", n=2))
    assert r.calls["input_tokens"].tolist() == [150, 260, 370, 480 - 85, 590 - 2 * 85]
    assert r.calls["first_changed"].tolist() == [-1, -1, -1, 3, 5]
    assert r.calls["items_changed"].tolist() == [0, 0, 0, 1, 1]
    # the task (observation 0) is never masked; the newest results stay verbatim
    assert r.item_state[1] == ItemState.VERBATIM
    assert [r.item_state[i] for i in (3, 5, 7, 9)] == [2, 2, 0, 0]  # result 11 came after the last call


def test_observation_masking_polling_moves_boundary_every_polling_steps():
    r = replay(five_obs(), make_policy("observation_masking", n=2, polling=2))
    assert r.calls["input_tokens"].tolist() == [150, 260, 370, 395, 505]


def test_observation_masking_never_masks_first_observation_even_if_n_small():
    r = replay(swe_trace([("x", 40)] * 4, task=500), make_policy("observation_masking", n=1))
    assert r.item_state[1] == ItemState.VERBATIM
    assert r.calls["input_tokens"].tolist()[-1] < 600 + 3 * 50


def test_head_tail_cuts_at_settle_once_with_exact_bytes():
    text = "é" * 600 + "x" * 400  # 1000 characters, 1600 bytes
    t = swe_trace([(text, 1000), ("short", 10)])
    p = make_policy("tool_result_head_tail", max_chars=100, head_chars=10, tail_chars=5)
    # cut text: 10 x "é" (20 bytes) + notice (16 + 22 + 16 = 54 bytes for 985 elided) + "xxxxx" (5) = 79
    assert p.cut_bytes(t, 3) == 79
    r = replay(t, p)
    # size scales with the content's own ratio: 1000 * (79 + 16) / (1600 + 16) = 58.8 -> 59
    assert r.calls["input_tokens"].tolist() == [150, 150 + 10 + 59]
    assert r.item_state[3] == ItemState.BOUNDED
    assert r.calls["first_changed"].tolist() == [-1, -1]  # settle-time: nothing sent is rewritten


def test_head_tail_never_recuts_already_bounded_content():
    t = swe_trace([("y" * 500, 300)])
    e = dataclasses.replace(t.events[3], bounded=True)
    t = dataclasses.replace(t, events=t.events[:3] + (e,))
    p = make_policy("tool_result_head_tail", max_chars=100, head_chars=10, tail_chars=5)
    assert p.settle(t, None, 3, None) is None


def test_head_tail_text_free_event_is_cut_proportionally():
    t = swe_trace([("z" * 1000, 500)])
    e = dataclasses.replace(t.events[3], content=None)
    t = dataclasses.replace(t, events=t.events[:3] + (e,))
    p = make_policy("tool_result_head_tail", max_chars=100, head_chars=10, tail_chars=5)
    assert p.cut_bytes(t, 3) == 15 + len("\n<elided_chars>\n985 characters elided\n</elided_chars>\n")


def test_knob_errors_name_knob_value_and_range():
    with pytest.raises(ConfigError, match=r"n=0 is not an integer >= 1"):
        make_policy("observation_masking", n=0)
    with pytest.raises(ConfigError, match="has no knob 'm'; knobs: n, polling"):
        make_policy("observation_masking", m=3)
    with pytest.raises(ConfigError, match="must not exceed max_chars"):
        make_policy("tool_result_head_tail", max_chars=10, head_chars=6, tail_chars=6)


def test_unknown_policy_lists_registered_and_closest():
    with pytest.raises(UnknownNameError) as exc:
        make_policy("observation_mask")
    msg = str(exc.value)
    assert msg.startswith("unknown policy 'observation_mask'; registered: ")
    assert "observation_masking, raw, seed_engine" in msg or "raw, seed_engine" in msg
    assert msg.endswith("did you mean 'observation_masking'?")


def test_builder_event_consistency():
    e = ev(0, "user", "a\nb", 3)
    assert (e.bytes, e.chars, e.lines) == (3, 3, 2)
