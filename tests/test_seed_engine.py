"""seed_engine, rule by rule, on hand-built traces whose arithmetic is written out.

Trace ``six()``: events 0 system ``sys`` (100 tokens), 1 task ``task\\nline2`` (50 tokens), then six turns
of assistant ``cmd k`` with call id ``ck`` (10 tokens) + tool result ``x * 384`` (100 tokens); output 7
tokens a call. Raw input of call k = 150 + 110 k. As effect-agent messages (ceil(JSON bytes / 4)): system
26 (102 bytes), the task 51 (its text escaped twice: 201 bytes), an assistant 85 (340), a result 162
(645), a cleared result 74 (296); a turn appends 85 + 162 = 247. The output contract adds 85 to every
trigger. ctxsim's sizes of new text at 4 bytes a token: the prune placeholder (35 bytes) 13 tokens, the
summary message prefix (57 bytes) 19.
"""

import dataclasses

import pytest
from builders import swe_trace

from sim.core.records import AGENT, GRACE, SUMMARY
from sim.core.types import ItemState
from sim.engine.dispatch import replay
from sim.metrics.compute import compute_metrics
from sim.policies.base import RunStatus, make_policy
from sim.policies.seed_engine import PRUNE_PLACEHOLDER, RUN_STATUS_WARNING, SUMMARY_PREFIX
from sim.policies.seed_messages import bound_result, estimate, stand_in
from sim.util.errors import ConfigError


def six(**kw):
    return swe_trace([("x" * 384, 100)] * 6, **kw)


def seed(**knobs):
    return make_policy("seed_engine", **{"run_status": "off", **knobs})


SUMMARIZE = dict(context_token_limit=700, keep_recent_tokens=300, mode="summarize", summary_min_tokens=20)


def inputs(r):
    return r.calls["input_tokens"].tolist()


def run_log(trace, policy, window=None):
    """The replay and the policy's per-turn decision log."""
    seen = {}
    r = replay(trace, policy, observer=lambda k, v: seen.setdefault("state", v.policy_state), window=window)
    return r, seen["state"].log


def test_without_limit_or_budgets_it_is_raw():
    r = replay(six(), seed(), window=None)
    assert inputs(r) == [150, 260, 370, 480, 590, 700]
    assert compute_metrics(r)["compactions"] == 0 and r.finish_reason == "completed"


# ------------------------------------------------------------------------------------ tool-result bound
def test_envelope_is_the_bound_on_the_json_text_with_its_shrink_loop():
    text = "é" * 200  # 400 bytes; its JSON text '"é…é"' is 402 (the quotes count)
    envelope = bound_result('"' + text + '"', 301)
    # minimal envelope '{"truncatedToolResult":true,"originalBytes":402,"head":"","tail":""}' = 68 bytes;
    # budget 233: head 116 -> 115 (not inside an 'é'), tail 117: both hold a quote, escaped in the envelope:
    # 68 + 116 + 118 = 302 > 301, so both shrink by ceil(1 / 2) = 1: head 115, tail 116 -> 115 + 1 = 300
    assert len(envelope.encode()) == 68 + 116 + 116
    assert envelope.startswith('{"truncatedToolResult":true,"originalBytes":402,"head":"\\"éé')
    t = swe_trace([(text, 1000), ("ok", 5)])
    r, log = run_log(t, seed(tool_result_max_bytes=301))
    # tokens keep the content's own ratio: 1000 * (300 + 16) / (400 + 16) = 759.6 -> 760
    assert inputs(r) == [150, 150 + 10 + 760]
    assert r.item_state[3] == ItemState.BOUNDED
    assert r.compactions["kind"].tolist() == [0] and r.compactions["tokens_reclaimed"].tolist() == [240]


def test_the_bound_counts_json_escapes():
    # 300 raw bytes, but every '"' and newline escapes: the JSON text is 402 bytes, over a 301 bound
    text = '"\n' * 100 + "y" * 100
    r = replay(swe_trace([(text, 80), ("ok", 5)]), seed(tool_result_max_bytes=301), window=None)
    assert r.item_state[3] == ItemState.BOUNDED
    r = replay(swe_trace([("y" * 299, 80)] * 2), seed(tool_result_max_bytes=301), window=None)
    assert (r.item_state == 0).all()  # 301 bytes of JSON text: within
    with pytest.raises(ConfigError, match=r"tool_result_max_bytes=255 is not an integer >= 256"):
        seed(tool_result_max_bytes=255)


def test_text_free_results_are_bounded_on_a_stand_in():
    assert stand_in(10, 3) == "ab\nde\ng\nij"  # ASCII, the newlines spread evenly
    t = swe_trace([("a\n" * 30000, 15000), ("ok", 5)])
    free = dataclasses.replace(t, events=tuple(dataclasses.replace(e, content=None) for e in t.events))
    # 60,000 bytes in 30,000 lines: the stand-in's 29,999 newlines make a 90,001-byte JSON text: bounded
    seen = {}
    replay(free, seed(), observer=lambda k, v: seen.update(n=list(v.nbytes), s=list(v.state)), window=None)
    assert seen["s"][3] == ItemState.BOUNDED and 40000 < seen["n"][3] <= 51200  # escapes escaped again


# -------------------------------------------------------------------------------------- trigger, prune
def test_trigger_is_anchored_on_the_last_call_plus_its_output_and_has_no_reserve():
    # call 0 estimates its whole view: 26 + 51 = 77; call k then 150 + 110 (k - 1) + 7 + 247
    _, log = run_log(six(), seed(context_token_limit=100000))
    assert [r["estimate"] for r in log] == [77, 404, 514, 624, 734, 844]
    assert [r["anchored"] for r in log] == [False] + [True] * 5
    assert log[1]["appended"] == 247 and log[1]["last_output"] == 7
    # 624 + 85 = 709: over 708, within 709
    assert run_log(six(), seed(context_token_limit=708, keep_recent_tokens=300))[1][3]["triggered"]
    quiet = seed(context_token_limit=844 + 85, keep_recent_tokens=300)
    assert not any(r["triggered"] for r in run_log(six(), quiet)[1])


def test_prune_keeps_the_newest_within_keep_and_stops_on_the_full_view():
    # limit 700, keep 300, mode prune. Call 3: 624 + 85 > 700 -> the newest result r2 spends 162 of the
    # 300, r1 (162) does not fit: bound after r1, r0 and r1 cleared (saves 2 x 87 tokens: view 306).
    # The full view, 77 + 3 x 85 + 3 x 162 = 818 before, is now 77 + 3 x 85 + 2 x 74 + 162 = 642 <= 700.
    # Call 4: 306 + 7 + 247 = 560 (+85 <= 700). Call 5: 416 + 7 + 247 + 85 = 755: r4 kept, r3 not:
    # r2 and r3 cleared (352); the full view 77 + 5 x 85 + 4 x 74 + 162 = 960 stays over: mode prune stops.
    r, log = run_log(six(), seed(context_token_limit=700, keep_recent_tokens=300, mode="prune"))
    assert inputs(r) == [150, 260, 370, 306, 416, 352]
    p3, p5 = log[3]["prune"], log[5]["prune"]
    assert (p3["from"], p3["to"], p3["cleared"], p3["after"], log[3]["before"]) == (0, 6, [3, 5], 642, 818)
    assert (p5["from"], p5["to"], p5["cleared"], p5["after"]) == (6, 10, [7, 9], 960)
    assert [r.item_state[i] for i in (3, 5, 7, 9, 11)] == [2, 2, 2, 2, 0]
    m = compute_metrics(r)
    assert (m["compactions_prune"], m["tokens_reclaimed"], m["summary_calls"]) == (2, 4 * 87, 0)
    assert len(PRUNE_PLACEHOLDER.encode()) == 35


def test_with_one_candidate_nothing_is_cleared():
    # keep 1: the newest alone spends it; but at call 1 r0 is the only result: nothing to clear
    _, log = run_log(six(), seed(context_token_limit=400, keep_recent_tokens=1, mode="prune"))
    assert log[1]["triggered"] and log[1]["prune"] is None
    assert log[2]["prune"]["cleared"] == [3]  # two candidates: the older is cleared


# ------------------------------------------------------------------------------------------- summarize
def test_summarize_cut_transcript_and_metered_call():
    # limit 700, keep 300, mode summarize. Call 3 (709): from the end r2 162, a2 85, r1 162 = 409 >= 300:
    # cut at r1, stepped back to its call a1. Covered: a0, r0. Transcript blocks "[assistant]\ncmd 0\n[tool
    # call bash {}]" (37) and "[tool]\n[tool result bash: " + 386 characters of JSON + "]" (413); the prompt:
    # instruction 442 + 15 + 37 + 2 + 413 + 14 = 923 characters -> ceil((923 + 16) / 4) = 235 tokens in.
    # Out: clamp(0.1 x 110, 20, 2048) = 20, 80 bytes of text; the summary message weighs 20 + 19 = 39
    # (view 480 - 110 + 39 = 409) and estimates (244 + 80) / 4 = 81.
    # Call 4 (409 + 7 + 247 + 85 = 748): cut at a2; covers a1, r1 after "[Previous summary]\n" + 80 bytes:
    # 442 + 15 + 99 + 2 + 37 + 2 + 413 + 14 = 1024 -> 260 in; covered 39 + 110 -> 20 out again.
    r, log = run_log(six(), seed(**SUMMARIZE))
    assert r.calls["kind"].tolist() == [AGENT] * 3 + [SUMMARY, AGENT] * 3
    assert inputs(r) == [150, 260, 370, 235, 409, 260, 409, 260, 409]
    assert r.calls["output_tokens"].tolist() == [7, 7, 7, 20, 7, 20, 7, 20, 7]
    s3, s4 = log[3]["summarize"], log[4]["summarize"]
    assert (s3["cut"], s3["covered"], s3["prompt_chars"], s3["after"]) == (4, [2, 4], 923, 77 + 81 + 494)
    assert (s4["cut"], s4["covered"], s4["prompt_chars"]) == (6, [4, 6], 1024)
    assert len(SUMMARY_PREFIX.encode()) == 57 and estimate(244 + 80) == 81
    assert r.item_state.tolist()[:8] == [0, 0, 4, 4, 4, 4, 4, 4]  # block kept; pairs covered together
    m = compute_metrics(r)
    assert (m["summary_calls"], m["summary_tokens"], m["calls"]) == (3, 60, 9)


def test_prune_then_summarize_summarizes_when_the_full_view_stays_over():
    # limit 600, keep 300: call 2 is within (514 + 85 = 599). Call 3 (709): prune r0, r1 -> the full
    # view 642 is still over 600: summarize. The cut walk counts cleared results at their placeholder
    # size: r2 162 + a2 85 + r1' 74 = 321 >= 300, cut at r1 -> a1: covers a0 and r0, whose transcript
    # block shows its original text (413 characters), not the placeholder.
    r, log = run_log(six(), seed(context_token_limit=600, keep_recent_tokens=300, summary_min_tokens=20))
    assert not log[2]["triggered"]
    assert log[3]["prune"]["cleared"] == [3, 5] and log[3]["prune"]["after"] == 642
    assert log[3]["summarize"]["covered"] == [2, 4] and log[3]["summarize"]["prompt_chars"] == 923


def test_summarizer_input_clips_messages_and_elides_the_middle():
    t = swe_trace([("z" * 5000, 1000), ("a", 5), ("b", 5), ("c", 5)])
    # call 2: the cut steps back to a1 (keep 5): a0 and r0 are covered; r0's block is clipped: "[tool]\n" +
    # 2,000 characters ("[tool result bash: " + 1,981 of its JSON text) + "…" = 2,008 characters
    p = seed(context_token_limit=1100, keep_recent_tokens=5, mode="summarize", summary_min_tokens=10)
    _, log = run_log(t, p)
    s = next(x["summarize"] for x in log if x["summarize"])
    assert s["prompt_chars"] == 442 + 15 + 37 + 2 + 2008 + 14 and s["elided"] == 0
    many = swe_trace([("w" * 2500, 500)] * 60 + [("end", 5)])
    _, log = run_log(many, seed(context_token_limit=30000, keep_recent_tokens=10, mode="summarize"))
    s = next(x["summarize"] for x in log if x["summarize"])
    # 2 x (covered turns) blocks of 37 and 2,008 characters exceed 80,000 - 442 - 128: the middle goes
    assert s["elided"] > 0 and s["prompt_chars"] < 80000


# -------------------------------------------------------------------------------------------- overflow
def test_overflow_without_recovery_ends_the_run():
    r = replay(six(), make_policy("raw"), window=400)
    assert inputs(r) == [150, 260, 370] and r.finish_reason == "context-overflow" and r.rejections == 1
    r = replay(six(), seed(), window=400)  # seed engine without context_token_limit: no recovery
    assert r.finish_reason == "context-overflow" and r.n_calls == 3


def test_overflow_recovery_summarizes_without_pruning_and_retries_once():
    # limit 10000 never triggers; window 420: call 3 (480) is rejected, a forced summary (no prune) covers
    # a0 + r0 and the retry sends 409
    p = seed(context_token_limit=10000, keep_recent_tokens=300, summary_min_tokens=20)
    r, log = run_log(six(), p, window=420)
    assert inputs(r)[:5] == [150, 260, 370, 235, 409]
    assert log[3]["overflow"]["summarize"]["covered"] == [2, 4] and log[3]["overflow"]["prune"] is None
    assert r.rejections >= 1
    r = replay(six(), p, window=300)  # a window the retry cannot meet: the second rejection ends the run
    assert r.finish_reason == "context-overflow"


# --------------------------------------------------------------------------------------------- budgets
def test_turn_budget_grace_turn_and_warning():
    r, log = run_log(six(), seed(max_turns=3))
    # turn 3 is the last allowed: turn 4 is the grace turn, tools forbidden, with the view of call 3
    # (480) and the recording's final output (7 tokens); the batch of turn 3 ran. Warning at 5 x 3 >= 4 x 3.
    assert r.calls["kind"].tolist() == [AGENT, AGENT, AGENT, GRACE]
    assert inputs(r) == [150, 260, 370, 480]
    assert r.finish_reason == "budget-exhausted:turns" and r.warnings == ((2, "turns"),)
    assert log[3]["grace"] and (r.item_state[7] == ItemState.VERBATIM)
    m = compute_metrics(r)
    assert m["exhausted"] is True and m["warnings"] == 1
    r = replay(six(), seed(max_turns=3, on_exhaustion="fail"), window=None)
    assert inputs(r) == [150, 260, 370] and r.finish_reason == "budget-exhausted:turns"


def test_tool_call_budget_is_strict_and_rejects_the_batch_over_it():
    # 2 tool calls are allowed: the third (turn 3) goes over; its batch never runs: result r2 is the
    # engine's rejection ({"_tag", "limit": "tool-calls", "message"}: 271 bytes -> 72 tokens at 4 a token)
    r = replay(six(), seed(max_tool_calls=2), window=None)
    assert r.calls["kind"].tolist() == [AGENT, AGENT, AGENT, GRACE]
    assert inputs(r) == [150, 260, 370, 370 + 10 + 72]
    assert r.item_state[7] == ItemState.MASKED and r.finish_reason == "budget-exhausted:tool_calls"
    assert r.warnings == ((1, "tool_calls"),)  # 5 x 2 >= 4 x 2 after the second call
    r = replay(six(), seed(max_tool_calls=2, on_exhaustion="fail"), window=None)
    assert r.n_calls == 3 and r.finish_reason == "budget-exhausted:tool_calls"


def test_token_budget_breach_rejects_the_batch_and_a_final_answer_completes():
    # cumulative input + output: 157, 424, 801: 801 > 600 (strict) at call 2 -> the grace turn
    r = replay(six(), seed(token_budget=600), window=None)
    assert r.calls["kind"].tolist() == [AGENT, AGENT, AGENT, GRACE]
    assert r.finish_reason == "budget-exhausted:tokens" and r.warnings == ((2, "tokens"),)
    assert r.item_state[7] == ItemState.MASKED  # the batch of the breaching call was rejected
    # 2,592 tokens in all (2,550 in, 42 out): a budget of 2,591 is breached by the final answer, which
    # completes the run exhausted; 2,592 is not breached (strict)
    r = replay(six(), seed(token_budget=2591), window=None)
    assert r.n_calls == 6 and r.finish_reason == "budget-exhausted:tokens" and r.warnings == ((5, "tokens"),)
    assert replay(six(), seed(token_budget=2592), window=None).finish_reason == "completed"


def test_duration_stops_before_the_turn_that_would_start_late():
    t = six()
    stamps = [100.0, 104.0, 109.0, 115.0, 120.0, 130.0]
    t = dataclasses.replace(
        t, calls=tuple(dataclasses.replace(c, timestamp=s) for c, s in zip(t.calls, stamps, strict=True))
    )
    r = replay(t, seed(max_duration_s=10), window=None)  # final-answer, but duration never gets a grace turn
    # turns start at 0, 4, 9, 15 s: the fourth would start at 15 >= 10, so three calls
    assert r.calls["kind"].tolist() == [AGENT] * 3
    assert r.finish_reason == "budget-exhausted:duration" and r.warnings == ()


def test_budget_reached_on_the_last_recorded_call_completes():
    r = replay(six(), seed(max_turns=6), window=None)
    assert r.finish_reason == "completed" and r.n_calls == 6 and r.warnings == ((4, "turns"),)


# ----------------------------------------------------------------------------------------- run status
def test_run_status_line():
    p = seed(run_status="appended")
    s = RunStatus()
    assert p.status_line(s) == (
        "<run-status>turn 1 · tool-calls 0 · tokens 0/unbounded · last-context 0 · elapsed 0s</run-status>"
    )
    r = replay(six(), p, window=None)
    st = r.calls["status_tokens"].tolist()
    # 101 bytes (each ' · ' is 4) -> ceil(117 / 4) = 30 tokens at call 0; later lines carry longer numbers
    assert len(p.status_line(s).encode()) == 101 and st[0] == 30
    assert inputs(r) == [v + s for v, s in zip([150, 260, 370, 480, 590, 700], st, strict=True)]
    s.turns, s.tool_calls, s.tokens, s.last_input, s.elapsed_s = 2, 11, 84210, 23480, 74.9
    budgets = {"max_turns": 12, "max_tool_calls": 24, "max_duration_s": 300}
    assert seed(run_status="appended", token_budget=200000, **budgets).status_line(s) == (
        "<run-status>turn 3/12 · tool-calls 11/24 · tokens 84210/200000 · last-context 23480 · "
        "elapsed 74s/300s</run-status>"
    )
    s.turns = 9  # turn 10 of 12: 50 >= 48
    assert seed(run_status="appended", **budgets).status_line(s) == (
        "<run-status>turn 10/12 · tool-calls 11/24 · tokens 84210/unbounded · last-context 23480 · "
        f"elapsed 74s/300s{RUN_STATUS_WARNING}</run-status>"
    )


def test_last_context_after_a_summary_is_the_summarizers_input():
    _, log = run_log(six(), seed(run_status="appended", **SUMMARIZE))
    s = next(x for x in log if x["summarize"])
    assert f"last-context {s['summarize']['input_tokens']} " in s["status"]


# ---------------------------------------------------------------------------------------- bad config
@pytest.mark.parametrize(
    "knobs,message",
    [
        ({"context_token_limit": -1}, "context_token_limit=-1 is not null or an integer >= 1"),
        (
            {"context_token_limit": 8000, "keep_recent_tokens": 8000},
            "keep_recent_tokens=8000 is not below context_token_limit: an integer in [1, 7999]",
        ),
        ({"keep_recent_tokens": 0}, "keep_recent_tokens=0 is not an integer >= 1"),
        ({"mode": "squash"}, "mode='squash' is not one of prune, summarize, prune-then-summarize"),
        ({"on_exhaustion": "retry"}, "on_exhaustion='retry' is not one of final-answer, fail"),
        ({"max_turns": 0}, "max_turns=0 is not null (off) or an integer >= 1"),
        ({"repeated_failure_limit": -1}, "repeated_failure_limit=-1 is not an integer >= 0 (0: off)"),
        ({"summary_ratio": 1.5}, "summary_ratio=1.5 is not a number in (0, 1]"),
    ],
)
def test_bad_config_refused(knobs, message):
    with pytest.raises(ConfigError) as exc:
        make_policy("seed_engine", **knobs)
    assert str(exc.value) == f"policy 'seed_engine': {message}"


def test_no_output_reserve_knob():
    with pytest.raises(ConfigError, match="has no knob 'completion_reserve_tokens'"):
        make_policy("seed_engine", completion_reserve_tokens=0)


# -------------------------------------------------------------------------------------------- explain
def test_explain_shows_seed_estimates_trigger_terms_and_original_bytes(tmp_path, capsys):
    from sim.cli import main
    from sim.trace.io import write_traces

    t = swe_trace([("x" * 384, 100)] * 3 + [("é" * 250, 1000), ("ok", 5)])
    write_traces([t], tmp_path / "t.jsonl")
    args = ["explain", str(tmp_path / "t.jsonl"), "--policy", "seed_engine", "policy.run_status=off"]
    knobs = [
        "policy.context_token_limit=700",
        "policy.keep_recent_tokens=300",
        "policy.tool_result_max_bytes=400",
    ]
    assert main([*args, *knobs, "--call", "3"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split()[-2:] == ["seed_estimate", "original_bytes"]
    assert lines[2].split()[-2:] == ["26", "-"]  # the system message
    # call 3 (709 > 700): r0, r1 cleared (74 each as sent), r2 kept (162)
    assert [lines[2 + i].split()[-2] for i in (3, 5, 7)] == ["74", "74", "162"]
    assert "seed estimate 624 = last input 370 + its output 7 + appended 247; + output contract 85" in out
    assert "= 709 > context_token_limit 700: compaction (view estimate 818)" in out
    assert "prune: bound 0 -> 6, 2 results cleared, full view 642" in out
    assert main([*args, *knobs, "--call", "4"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[2 + 9].split()[-1] == "502"  # the bounded result's originalBytes
    assert "vs context_token_limit 700: within, no compaction" in out
