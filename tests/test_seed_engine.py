"""seed_engine, rule by rule, on hand-built traces whose arithmetic is written out.

Trace ``six()``: events 0 system (3 bytes, 100 tokens), 1 task (10 bytes, 50 tokens), then six turns of
assistant ``cmd k`` (5 bytes, 10 tokens) + tool result ``x * 384`` (384 bytes, 100 tokens). Raw input of
call k = 150 + 110 k. Seed estimates (ceil((bytes + 16) / 4)): system 5, task 7, assistant 6, result 100,
the prune placeholder (35 bytes) 13. Calibrated bytes per token 4.0, so new text of b bytes weighs
ceil((b + 16) / 4) tokens too.
"""

import dataclasses

import pytest
from builders import swe_trace

from sim.engine import replay
from sim.errors import ConfigError
from sim.metrics import compute_metrics
from sim.policies.base import RunStatus, make_policy
from sim.policies.seed_engine import PRUNE_PLACEHOLDER, SUMMARY_PREFIX, envelope_overhead, split_head_tail
from sim.records import AGENT, GRACE, SUMMARY
from sim.types import ItemState


def six(**kw):
    return swe_trace([("x" * 384, 100)] * 6, **kw)


def seed(**knobs):
    base = {"run_status": "off", "completion_reserve_tokens": 100}
    return make_policy("seed_engine", **{**base, **knobs})


def inputs(r):
    return r.calls["input_tokens"].tolist()


def test_without_limit_or_budgets_it_is_raw():
    r = replay(six(), seed(), window=None)
    assert inputs(r) == [150, 260, 370, 480, 590, 700]
    assert compute_metrics(r)["compactions"] == 0 and r.finish_reason == "completed"


# ------------------------------------------------------------------------------------ tool-result bound
def test_envelope_exact_byte_split_never_cuts_a_character():
    # '{"truncatedToolResult":true,"originalBytes":400,"head":"","tail":""}' is 68 bytes
    assert envelope_overhead(400) == 68
    text = "é" * 200  # 400 bytes; 'é' = C3 A9, so odd byte offsets are inside a character
    # max 301: budget 233 -> head 116 (even: a boundary), tail 117 -> starts at 283, inside 'é' -> 284
    assert split_head_tail(text.encode(), 116, 117) == (116, 116)
    t = swe_trace([(text, 1000), ("ok", 5)])
    p = seed(tool_result_max_bytes=301)
    assert p.envelope_bytes(t, 3) == 68 + 116 + 116
    r = replay(t, p, window=None)
    # envelope tokens keep the content's own ratio: 1000 * (300 + 16) / (400 + 16) = 759.6 -> 760
    assert inputs(r) == [150, 150 + 10 + 760]
    assert r.item_state[3] == ItemState.BOUNDED
    assert r.compactions["kind"].tolist() == [0] and r.compactions["tokens_reclaimed"].tolist() == [240]


def test_results_within_the_bound_untouched_and_floor_enforced():
    r = replay(swe_trace([("y" * 300, 80)] * 2), seed(tool_result_max_bytes=300), window=None)
    assert (r.item_state == 0).all()
    with pytest.raises(ConfigError, match=r"tool_result_max_bytes=255 is not an integer >= 256"):
        seed(tool_result_max_bytes=255)


# -------------------------------------------------------------------------------------- trigger, prune
def test_prune_trigger_protected_tail_and_monotone_boundary():
    # limit 500, keep 250, reserve 100, mode prune.
    # call 0: 12 + 100 = 112; call 1: 150 + 106 + 100 = 356; call 2: 260 + 206 = 466 (no trigger)
    # call 3: 370 + 206 = 576 > 500 -> prune: r2, r1 protected (200 <= 250), r0 cleared (saves 100 - 13)
    #         -> 489, within the limit. View 480 - 100 + 13 = 393.
    # call 4: 393 + 206 = 599 -> clear r1 -> 512, still over but mode prune stops. View 416.
    # call 5: 416 + 206 = 622 -> clear r2. View 439.
    r = replay(six(), seed(context_token_limit=500, keep_recent_tokens=250, mode="prune"), window=None)
    assert inputs(r) == [150, 260, 370, 393, 416, 439]
    assert r.calls["first_changed"].tolist() == [-1, -1, -1, 3, 5, 7]
    m = compute_metrics(r)
    assert (m["compactions_prune"], m["tokens_reclaimed"], m["summary_calls"]) == (3, 3 * 87, 0)
    assert [r.item_state[i] for i in (3, 5, 7, 9)] == [2, 2, 2, 0]  # cleared stay cleared
    assert len(PRUNE_PLACEHOLDER.encode()) == 35


def test_newest_result_always_protected():
    # keep 50 < one result's estimate (100): the newest stays, every older result is cleared at once
    r = replay(six(), seed(context_token_limit=400, keep_recent_tokens=50, mode="prune"), window=None)
    # call 2: 260 + 206 = 466 > 400 -> r1 newest (kept), r0 cleared: 370 - 87 = 283
    # call 3: 283 + 206 = 489 -> r1 cleared: 393 - 87 = 306; and so on, one result per call
    assert inputs(r) == [150, 260, 283, 306, 329, 352]


# ------------------------------------------------------------------------------------------- summarize
def test_summarize_metered_call_incremental_and_pairs_kept():
    # limit 500, keep 150, mode summarize, summary size clamp(0.1 x covered, 20, 2048).
    # call 3 (576 > 500): walking back from r2: r2 100, a2 6, r1 100 -> 206 >= 150: cut at r1, moved to
    #   its call a1 (4). Covered: a0 + r0 = 110 tokens -> summary 20 tokens; the summary message weighs
    #   20 + ceil((56 + 16) / 4) = 38 in the slot of a0. Summarizer input: instruction 53 + 110 = 163.
    #   View 480 - 110 + 38 = 408.
    # call 4 (408 + 206 = 614): cut at a2 (6); covers a1 + r1 incrementally: 38 + 110 = 148 -> 20 again;
    #   input 53 + 38 (previous summary) + 110 = 201. View 518 - 110 = 408.
    r = replay(
        six(),
        seed(context_token_limit=500, keep_recent_tokens=150, mode="summarize", summary_min_tokens=20),
        window=None,
    )
    assert r.calls["kind"].tolist() == [AGENT] * 3 + [SUMMARY, AGENT] * 3
    assert inputs(r) == [150, 260, 370, 163, 408, 201, 408, 201, 408]
    assert r.calls["output_tokens"].tolist() == [7, 7, 7, 20, 7, 20, 7, 20, 7]
    assert len(SUMMARY_PREFIX.encode()) == 56
    assert r.compactions["tokens_reclaimed"].tolist() == [110 - 38, 110, 110]
    assert r.item_state.tolist()[:8] == [0, 0, 4, 4, 4, 4, 4, 4]  # block kept; pairs covered together
    m = compute_metrics(r)
    assert (m["summary_calls"], m["summary_tokens"], m["calls"]) == (3, 60, 9)
    assert m["cumulative_input_tokens"] == sum(inputs(r))  # summary calls are counted


def test_prune_then_summarize_summarizes_only_when_prune_is_not_enough():
    p = seed(context_token_limit=500, keep_recent_tokens=150, summary_min_tokens=20)
    r = replay(six(), p, window=None)
    # call 3: prune keeps r2 (100; r1 would make 200 > 150), clears r0, r1: 576 - 174 = 402 <= 500: stop.
    #   View 480 - 174 = 306.
    # call 4: 306 + 206 = 512 > 500: prune clears r2 -> 425, within: no summary. View 329.
    assert inputs(r)[:5] == [150, 260, 370, 306, 329]
    assert compute_metrics(r)["summary_calls"] == 0
    tight = replay(
        six(), seed(context_token_limit=300, keep_recent_tokens=150, summary_min_tokens=20), window=None
    )
    # limit 300: calls 1-4 are over, but after each prune the whole conversation after the block is still
    # under keep (e.g. call 2: r1 100 + a1 6 + r0' 13 + a0 6 = 125 < 150): nothing to summarize.
    # call 5: 535 -> prune r3 -> 448 -> the cut walks r4, a4, r3', a3, r2', a2, r1' = 157 >= 150, moves
    #   from r1 to a1: covers a0 (10) + r0' (13 tokens, 35 chars) -> summary 20, message 38;
    #   summarizer input 53 + 10 + 13 = 76; view 329 + 110 - 87 - 23 + 38 = 367.
    assert tight.calls["kind"].tolist() == [AGENT] * 5 + [SUMMARY, AGENT]
    assert inputs(tight) == [150, 260, 283, 306, 329, 76, 367]


def test_summarizer_input_clips_messages_and_caps_the_whole():
    big = "z" * 5000
    t = swe_trace([(big, 1000), ("a", 5), ("b", 5), ("c", 5)])
    # call 2: 1160 + 6 + 5 + 100 = 1271 > 1200; the tail r1 (estimate 5) meets keep 5, the cut moves to
    # its call a1, so a0 and r0 are covered
    p = seed(context_token_limit=1200, keep_recent_tokens=5, mode="summarize", summary_min_tokens=10)
    r = replay(t, p, window=None)
    k = r.calls["kind"].tolist().index(SUMMARY)
    # covered: a0 (10 tokens, 5 chars) and r0 (1000 tokens, 5000 chars -> clipped to 2000: 400 tokens)
    assert r.calls["input_tokens"][k] == 53 + 10 + 400
    assert r.calls["output_tokens"][k] == 101  # clamp(0.1 x 1010)
    many = swe_trace([("w" * 2500, 500)] * 50 + [("end", 5)])
    r = replay(many, seed(context_token_limit=24000, keep_recent_tokens=10, mode="summarize"), window=None)
    k = r.calls["kind"].tolist().index(SUMMARY)
    # first trigger at call 47 (input 150 + 510 k); the newest pair stays, the 46 turns before it are
    # covered, each result clipped to 2,000 characters (400 tokens)
    assert r.calls["recorded_call"][k] == 47
    chars = sum(len(f"cmd {k}") for k in range(46)) + 46 * 2000  # 92,266
    tokens = 46 * (10 + 400)
    assert chars > 80000  # so the whole is scaled to 80,000 characters
    assert r.calls["input_tokens"][k] == 53 + round(tokens * 80000 / chars)


# -------------------------------------------------------------------------------------------- overflow
def test_overflow_without_recovery_ends_the_run():
    r = replay(six(), make_policy("raw"), window=400)
    assert inputs(r) == [150, 260, 370] and r.finish_reason == "context-overflow" and r.rejections == 1
    r = replay(six(), seed(), window=400)  # seed engine without context_token_limit: no recovery
    assert r.finish_reason == "context-overflow" and r.n_calls == 3


def test_overflow_recovery_forces_a_summary_and_retries_once():
    # limit 10000 never triggers; window 400: call 3 (480) is rejected, a forced summary covers
    # a0 + r0 (cut at a1 with keep 150) and the retry sends 408.
    p = seed(context_token_limit=10000, keep_recent_tokens=150, summary_min_tokens=20)
    r = replay(six(), p, window=420)
    assert inputs(r)[:5] == [150, 260, 370, 163, 408]
    assert r.rejections >= 1
    # a window the retry cannot meet: the second rejection ends the run
    r = replay(six(), p, window=300)
    assert r.finish_reason == "context-overflow"


# --------------------------------------------------------------------------------------------- budgets
def test_turn_budget_grace_call_and_warning():
    r = replay(six(), seed(max_turns=3), window=None)
    # turns 3 >= 3 after call 2 (warning at 2.4 fires at the same call): one grace call with the view
    # of call 3 (480) answering with the recording's final output (7 tokens)
    assert r.calls["kind"].tolist() == [AGENT, AGENT, AGENT, GRACE]
    assert inputs(r) == [150, 260, 370, 480]
    assert r.finish_reason == "budget-exhausted:turns" and r.warnings == ((2, "turns"),)
    m = compute_metrics(r)
    assert m["exhausted"] is True and m["warnings"] == 1
    r = replay(six(), seed(max_turns=3, on_exhaustion="fail"), window=None)
    assert inputs(r) == [150, 260, 370] and r.finish_reason == "budget-exhausted:turns"


def test_tool_call_and_token_budgets():
    r = replay(six(), seed(max_tool_calls=2, on_exhaustion="fail"), window=None)
    assert r.n_calls == 2 and r.finish_reason == "budget-exhausted:tool_calls"
    # cumulative input + output: 157, 424, 801 -> call 2 crosses 80% (480) and 600 at once
    r = replay(six(), seed(token_budget=600), window=None)
    assert inputs(r) == [150, 260, 370, 480] and r.finish_reason == "budget-exhausted:tokens"
    assert r.warnings == ((2, "tokens"),)


def test_duration_always_fails():
    t = six()
    stamps = [100.0, 104.0, 109.0, 115.0, 120.0, 130.0]
    t = dataclasses.replace(
        t, calls=tuple(dataclasses.replace(c, timestamp=s) for c, s in zip(t.calls, stamps, strict=True))
    )
    r = replay(t, seed(max_duration_s=10), window=None)  # final-answer, but duration never gets a grace turn
    # elapsed 0, 4, 9 (>= 8: warning), 15 (>= 10: stop)
    assert r.calls["kind"].tolist() == [AGENT] * 4
    assert r.finish_reason == "budget-exhausted:duration" and r.warnings == ((2, "duration"),)


def test_budget_reached_on_the_last_recorded_call_completes():
    r = replay(six(), seed(max_turns=6), window=None)
    assert r.finish_reason == "completed" and r.n_calls == 6 and r.warnings == ((4, "turns"),)


# ----------------------------------------------------------------------------------- run status, reserve
def test_run_status_line_counts_in_every_call():
    p = seed(run_status="appended")
    s = RunStatus()
    assert (
        p.status_line(s)
        == "<run-status>turn 1 · tool-calls 0 · tokens 0 · last-context 0 · elapsed 0s</run-status>"
    )
    r = replay(six(), p, window=None)
    st = r.calls["status_tokens"].tolist()
    # 91 bytes (each ' · ' is 4) -> ceil(107 / 4) = 27 tokens at call 0; later lines carry longer numbers
    assert len(p.status_line(s).encode()) == 91 and st[0] == 27
    assert inputs(r) == [v + s for v, s in zip([150, 260, 370, 480, 590, 700], st, strict=True)]
    s.turns, s.tool_calls, s.tokens, s.last_input, s.elapsed_s = 2, 11, 84210, 23480, 74.9
    budgets = seed(
        run_status="appended", max_turns=12, max_tool_calls=24, max_duration_s=300, token_budget=200000
    )
    assert budgets.status_line(s) == (
        "<run-status>turn 3/12 · tool-calls 11/24 · tokens 84210/200000 · last-context 23480 · "
        "elapsed 74s/300s</run-status>"
    )


def test_completion_reserve():
    assert make_policy("seed_engine").output_reserve == 4096
    assert make_policy("seed_engine", token_budget=10000).output_reserve == 2000
    assert make_policy("seed_engine", token_budget=100000).output_reserve == 4096
    assert make_policy("seed_engine", completion_reserve_tokens=512).output_reserve == 512


# ---------------------------------------------------------------------------------------- bad config
@pytest.mark.parametrize(
    "knobs,message",
    [
        ({"context_token_limit": -1}, "context_token_limit=-1 is not null or an integer >= 1"),
        (
            {"context_token_limit": 8000, "keep_recent_tokens": 8000},
            "keep_recent_tokens=8000 is not below context_token_limit: an integer in [0, 7999]",
        ),
        ({"mode": "squash"}, "mode='squash' is not one of prune, summarize, prune-then-summarize"),
        ({"on_exhaustion": "retry"}, "on_exhaustion='retry' is not one of final-answer, fail"),
        ({"max_turns": 0}, "max_turns=0 is not null (off) or an integer >= 1"),
        ({"summary_ratio": 1.5}, "summary_ratio=1.5 is not a number in (0, 1]"),
    ],
)
def test_bad_config_refused(knobs, message):
    with pytest.raises(ConfigError) as exc:
        make_policy("seed_engine", **knobs)
    assert str(exc.value) == f"policy 'seed_engine': {message}"
