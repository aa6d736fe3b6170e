"""ctxsim size: every setting against no compaction, paired on the same traces; a recommendation only
when the saving is clear of zero and the information cost within the tolerances."""

import json

import numpy as np
import pytest

from sim.analysis.paired import bootstrap_ci, paired
from sim.analysis.setting_results import SettingResult
from sim.analysis.verdict import recommendation_line, tied_text, verdict
from sim.cli import main

HASHES = tuple(f"sha256:{i:02d}" for i in range(8))


def setting(lim, keep, costs, lost=None, done=None, outcome=None, refetch=None, overflow=0):
    n = len(costs)
    done = [True] * n if done is None else done
    return SettingResult(
        lim,
        keep,
        HASHES[:n],
        np.array(costs, dtype=float),
        np.array(costs, dtype=float) * 10,  # tokens follow cost
        np.full(n, 10.0),  # 10 facts seen a run
        np.array(lost or [0] * n, dtype=float),
        np.array(refetch or [0] * n, dtype=float),
        tuple(outcome or ["complete" if d else "failed" for d in done]),
        np.array(done),
        overflow,
        np.array([5000.0] * n),
        np.zeros(n),
    )


BASE = setting(None, None, [400_000] * 8)


def test_recommends_the_cheapest_setting_whose_saving_is_clear_of_zero():
    results = [
        BASE,
        setting(16000, 2000, [100_000] * 8, lost=[5] * 8),  # cheapest, loses half the facts: ineligible
        setting(24000, 4000, [300_000] * 8),  # saves $0.10 on every run
        setting(32000, 4000, [350_000] * 8),  # saves $0.05 on every run
        setting(48000, 8000, [100_000, 700_000] * 4),  # saves $0.00 on average: CI spans zero
        setting(64000, 8000, [300_000] * 8),  # identical to 24000/4000 on every trace: tied
    ]
    rec = verdict(results, policy_name="seed_engine", target=0.95)
    assert rec["verdict"] == "compact"
    assert rec["recommended"] == {"context_token_limit": 64000, "keep_recent_tokens": 8000}
    assert rec["tied"] == [{"context_token_limit": 24000, "keep_recent_tokens": 4000}]
    assert "tied with the recommendation" in tied_text(rec)
    assert (rec["mean_cost_usd"], rec["completion"]) == (0.3, 1.0)
    assert rec["paired"]["saving_ci"] == [0.1, 0.1] and rec["paired"]["tokens_saving_ci"] == [1e6, 1e6]
    assert rec["paired"]["outcome_change"] == {"complete": 0, "grace": 0, "degraded": 0, "failed": 0}
    assert [(r["context_token_limit"], r["eligible"]) for r in rec["runners_up"]] == [(32000, True)]
    assert rec["baseline"]["mean_cost_usd"] == 0.4 and rec["eligible_settings"] == 3
    why = {(g["context_token_limit"], g["keep_recent_tokens"]): g["why_not"] for g in rec["grid"]}
    assert why[(16000, 2000)] == ["facts lost +50.0% of facts seen > 5%"]
    assert why[(48000, 8000)] == ["saving CI includes zero"]
    assert rec["advice"].startswith(
        "Ship context_token_limit=64000 with keep_recent_tokens=8000: $0.3000 per run against $0.4000 "
        "without compaction, saving $0.1000 per run (paired 95% CI $0.1000 to $0.1000; 0 of 8 runs dearer)"
    )
    assert recommendation_line(rec) == (
        "recommended: seed_engine context_token_limit=64000 keep_recent_tokens=8000"
    )
    # a looser tolerance on facts lost admits the cheapest
    loose = verdict(results, policy_name="seed_engine", target=0.95, max_facts_lost_increase=0.5)
    assert loose["recommended"] == {"context_token_limit": 16000, "keep_recent_tokens": 2000}
    assert loose["paired"]["facts_lost_change"]["share_of_facts_seen"] == 0.5


def test_no_compaction_needed_names_the_safety_net_and_the_ties():
    results = [
        BASE,
        setting(16000, 2000, [100_000, 600_000] * 4, lost=[2] * 8),
        setting(96000, 2000, [400_000] * 8),  # never fires
        setting(128000, 2000, [400_000] * 8),
    ]
    rec = verdict(results, policy_name="seed_engine", target=0.95, window=200000, reserve=4000, summary=2048)
    assert rec["verdict"] == "compaction-not-needed" and rec["recommended"] is None and rec["paired"] is None
    assert rec["safety_net"] == {"low": 150000, "high": 193000, "fires_on_these_traces": False}
    assert rec["tied"] == [
        {"context_token_limit": 96000, "keep_recent_tokens": 2000},
        {"context_token_limit": 128000, "keep_recent_tokens": 2000},
    ]
    assert rec["advice"].startswith(
        "Compaction not needed. Your runs peak at 5k tokens (p99); with a 200k window compaction never "
        "needs to fire: set context_token_limit=150000–193000 as a safety net (it never fires on these "
        "traces); the cheapest setting, 16000/2000, would save $0.0500 per run"
    )
    assert "saving CI includes zero; facts lost +20.0% of facts seen > 5%" in rec["advice"]
    assert recommendation_line(rec) == "recommended: seed_engine without compaction (compaction-not-needed)"
    # every setting identical to the baseline: said so, and all named as tied
    same = verdict([BASE, results[2], results[3]], policy_name="seed_engine", target=0.95)
    assert "no setting of the grid changes any run: all 2 are tied with no compaction" in same["advice"]
    assert "tied with no compaction" in tied_text(same)
    with pytest.raises(Exception, match="no no-compaction"):
        verdict(results[1:], policy_name="seed_engine", target=0.95)


def test_paired_bootstrap_is_seeded_from_the_traces_not_a_global_seed():
    a = setting(16000, 2000, [100_000, 700_000, 300_000, 500_000, 250_000, 450_000, 380_000, 90_000])
    np.random.seed(1)
    first = paired(BASE, a)
    np.random.seed(2)
    assert paired(BASE, a) == first  # no global state
    lo, hi = first["saving_ci"]
    assert lo < first["saving_usd"] < hi and first["runs_dearer"] == 3
    v = np.array([1.0, 2.0, 3.0, 10.0])
    x = bootstrap_ci(v, np.random.Generator(np.random.PCG64(1)))
    assert x == bootstrap_ci(v, np.random.Generator(np.random.PCG64(1))) and x[0] <= v.mean() <= x[1]


def test_size_on_the_shared_runs_200k_needs_no_compaction(capsys, mini_dir):
    args = ["size", str(mini_dir), "--model", "claude-sonnet-4-5", "--window", "200000"]
    assert main([*args, "--format", "json"]) == 0
    first = capsys.readouterr().out
    rec = json.loads(first)
    assert rec["verdict"] == "compaction-not-needed" and rec["recommended"] is None
    # limit 200000 leaves no room for the output and a summary
    assert rec["baseline"]["peak_context_tokens_p99"] == 62157 and rec["grid_limits_left_out"] == [200000]
    assert rec["safety_net"] == {"low": 150000, "high": 192000, "fires_on_these_traces": False}
    assert (rec["settings"], rec["eligible_settings"], rec["never_fire"], rec["traces"]) == (47, 0, 18, 40)
    assert (rec["budgets"]["token_budget"], rec["budgets"]["cost_budget_microusd"]) == (6_200_000, 3_100_000)
    # load-bearing: results a later live need reads (a need on a superseded fact is none: 165 before)
    assert rec["keep_check"] == {"load_bearing_results": 151, "p90_tokens": 1075, "max_tokens": 3241}
    cheapest = min(rec["grid"], key=lambda g: g["mean_cost_usd"])
    assert (cheapest["context_token_limit"], cheapest["keep_recent_tokens"]) == (16000, 2000)
    assert cheapest["saving_ci"][0] < 0 < cheapest["saving_ci"][1] and not cheapest["eligible"]
    assert {"mean_cost_usd", "completion", "runners_up", "baseline", "paired", "cost_ci"} <= set(rec)
    assert main([*args, "--format", "json"]) == 0
    assert capsys.readouterr().out == first  # deterministic
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "Compaction not needed. Your runs peak at 62k tokens (p99); with a 200k window" in text
    assert "tied with no compaction (they never compact here), identical on every trace (18)" in text


def test_size_errors(capsys, tmp_path):
    assert main(["size", "--policy", "observation_masking", str(tmp_path)]) == 2
    assert "no context_token_limit / keep_recent_tokens knobs" in capsys.readouterr().err
    assert main(["size", "--model", "gpt-9", str(tmp_path)]) == 2
    assert main(["size", "--max-facts-lost-increase", "2", str(tmp_path)]) == 2
    assert "--max-facts-lost-increase 2.0 is not in [0, 1]" in capsys.readouterr().err


def test_demo_size_and_report_print_the_same_recommendation(capsys, tmp_path):
    """One recommendation function: the demo's sweeps, `size` on the same traces and `report` on the
    demo's sweeps state the same verdict."""
    from sim.commands.demo import DEMO_STUDY
    from sim.util.paths import EMBEDDED_SUITE

    suite = str(EMBEDDED_SUITE / "closed_loop.jsonl")
    out = tmp_path / "latest"
    assert main(["demo", suite, "--out", str(out), "--workers", "1"]) == 0
    demo = [x for x in capsys.readouterr().out.splitlines() if x.startswith("recommended: ")]
    grid = dict(w.split("=", 1) for w in dict(DEMO_STUDY)["seed_engine"])
    limits = ",".join(v for v in grid["policy.context_token_limit"].split(",") if v != "null")
    args = ["size", suite, "--model", "claude-sonnet-4-5", "--limits", limits]
    assert main([*args, "--keeps", grid["policy.keep_recent_tokens"]]) == 0
    size = [x for x in capsys.readouterr().out.splitlines() if x.startswith("recommended: ")]
    sweeps = [str(out / "sweeps" / p) for p, _ in DEMO_STUDY]
    assert main(["report", *sweeps, "-o", str(tmp_path / "r")]) == 0
    report = [x for x in capsys.readouterr().out.splitlines() if x.startswith("recommended: ")]
    assert len(demo) == 1 and demo == size == report
    md = (tmp_path / "r" / "report.md").read_text(encoding="utf-8")
    assert "| on_missing | summarizer | verdict | recommended |" in md  # the demo sweeps the behaviours
    assert md.count("| refetch | extractive |") == 1
    assert ("The verdict holds under all 6 mock behaviours." in md) or ("does NOT hold" in md)


def test_size_prints_every_assumption(capsys):
    from sim import __version__
    from sim.analysis.assumptions import traces_hash
    from sim.importers import load_paths
    from sim.trace.codec import trace_hash
    from sim.util.paths import EMBEDDED_SUITE

    suite = EMBEDDED_SUITE / "closed_loop.jsonl"
    args = ["size", str(suite), "--model", "claude-sonnet-4-5", "--limits", "16000", "--keeps", "2000"]
    assert main([*args, "--format", "json", "--on-missing", "fail"]) == 0
    out, err = capsys.readouterr()
    a = json.loads(out)["assumptions"]
    traces = list(load_paths([suite]))
    recorded = sorted({t.model or "" for t in traces})
    assert a["traces"] == {
        "count": len(traces),
        "sources": [str(suite)],
        "hash": traces_hash([trace_hash(t) for t in reversed(traces)]),  # order does not matter
    }
    assert a["recorded_models"] == recorded
    assert a["priced_model"] == {"model": "claude-sonnet-4-5", "price_table_as_of": "2025-11"}
    assert a["window"] == 200000 and a["ctxsim_version"] == __version__
    assert a["cache_rules"][0]["family"] == "anthropic" and a["cache_rules"][0]["writes"] is True
    assert a["mock_model"] == {
        "on_missing": "fail",
        "summary_fact_tokens": 40,
        "summarizer": "extractive",
        "retrieval_recall": 1.0,
        "max_turns": None,
    }
    assert a["retrieval_recall"] == 1.0
    # the recorded model is not the priced one: said on standard error and in the JSON
    assert len(a["warnings"]) == len(recorded) and f"the traces record model {recorded[0]!r}" in err
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "  priced as: claude-sonnet-4-5 (price table as of 2025-11)\n  window: 200,000 tokens\n" in text
    assert "  mock model: on_missing=refetch, summary_fact_tokens=40, summarizer=extractive" in text
    assert f"  ctxsim {__version__}\n" in text


def test_runaway_budgets_and_the_keep_check():

    from sim.analysis.sizing_checks import keep_check, load_bearing_results, runaway_budgets

    base = setting(None, None, [1_000_000, 2_000_000, 3_000_000, 4_000_000])
    base = SettingResult(**{**base.__dict__, "output": np.array([1000.0, 2000.0, 3000.0, 4000.0])})
    b = runaway_budgets(base)
    # input tokens are 10x cost: 10M..40M, + output; p99 by linear interpolation: 39.7M + 3970
    assert (b["p99_tokens"], b["p99_cost_microusd"]) == (39_703_970, 3_970_000)
    assert (b["token_budget"], b["cost_budget_microusd"]) == (80_000_000, 8_000_000)
    assert (b["runs_stopped_by_token_budget"], b["runs_stopped_by_cost_budget"]) == (0, 0)

    from builders import ev

    from sim.core.types import Trace

    events = (
        ev(0, "tool_result", "", 500, provides=("a",)),
        ev(1, "tool_result", "", 3000, provides=("b",)),  # nobody needs b
        ev(2, "assistant", "", 10, needs=("a",)),
        ev(3, "tool_result", "", 1500, provides=("c",)),
        ev(4, "assistant", "", 10, needs=("c",)),
        ev(5, "tool_result", "", 700, provides=("d",)),
        ev(6, "tool_result", "", 40, supersedes=("d",)),  # d is stale from here: a later need on it is none
        ev(7, "assistant", "", 10, needs=("d",)),
    )
    trace = Trace("t", "ctxsim-scenario", events, ())  # only the events are read
    assert load_bearing_results([trace]) == [1500, 500]
    assert keep_check([1500, 500], 1000) == {
        "load_bearing_results": 2,
        "p90_tokens": 1400,
        "max_tokens": 1500,
        "keep_recent_tokens": 1000,
        "holds_p90": False,
    }
    assert keep_check([], 1000) is None


def test_sensitivity_recomputes_the_verdict_under_every_mock_behaviour(capsys):
    from sim.util.paths import EMBEDDED_SUITE

    suite = str(EMBEDDED_SUITE / "closed_loop.jsonl")
    args = ["size", suite, "--model", "claude-sonnet-4-5", "--limits", "16000", "--keeps", "2000,8000"]
    assert main([*args, "--format", "json", "--sensitivity"]) == 0
    sens = json.loads(capsys.readouterr().out)["sensitivity"]
    assert [(r["on_missing"], r["summarizer"]) for r in sens["rows"]] == [
        (om, sm) for om in ("refetch", "fail", "degrade") for sm in ("extractive", "oracle")
    ]
    for row in sens["rows"]:  # each row is the verdict `size` gives under that behaviour alone
        one = ["--on-missing", row["on_missing"], "--summarizer", row["summarizer"], "--format", "json"]
        assert main([*args, *one]) == 0
        rec = json.loads(capsys.readouterr().out)
        assert (row["verdict"], row["mean_cost_usd"], row["completion"]) == (
            rec["verdict"],
            rec["mean_cost_usd"],
            rec["completion"],
        )
    keys = {(r["verdict"], r["context_token_limit"], r["keep_recent_tokens"]) for r in sens["rows"]}
    assert sens["holds"] == (len(keys) == 1)
    assert main([*args, "--sensitivity"]) == 0
    text = capsys.readouterr().out
    assert "sensitivity to the mock model (model.on_missing x model.summarizer):" in text
    assert "verdict under the mock model on_missing=refetch, summarizer=extractive" in text


def test_workers_give_the_same_answer_byte_for_byte(capsys):
    """--workers deals the grid batches, the loop's settings and the bootstraps to forked processes:
    the answer is the one-process answer whatever their number (traces with facts take the loop)."""
    from sim.util.paths import EMBEDDED_SUITE

    args = ["size", str(EMBEDDED_SUITE), "--model", "claude-sonnet-4-5", "--format", "json"]
    args += ["--limits", "16000,24000,32000,64000", "--keeps", "1000,2000,4000,8000"]
    outs = []
    for workers in ("1", "2", "3"):
        assert main([*args, "--workers", workers]) == 0
        outs.append(capsys.readouterr().out)
    assert outs[0] == outs[1] == outs[2]
    rec = json.loads(outs[0])
    assert rec["settings"] == 17 and rec["traces"] == 44 and len(rec["grid"]) == 16
    assert main([*args, "--workers", "0"]) == 2
    assert "--workers 0 is not in [1, 64]" in capsys.readouterr().err


def test_evaluate_and_paired_many_split_over_workers_are_the_one_process_results():
    from scenarios.swe_like import generate_run
    from sim.analysis.paired import paired_many
    from sim.analysis.size import evaluate
    from sim.importers import load_paths
    from sim.util.paths import EMBEDDED_SUITE

    traces = [generate_run(7, i) for i in range(5)] + list(load_paths([EMBEDDED_SUITE]))[:3]
    args = (traces, "seed_engine", [16000, 32000], [2000, 8000], 200000, "claude-sonnet-4-5")
    one, two = evaluate(*args), evaluate(*args, workers=2)
    for a, b in zip(one, two, strict=True):
        assert a.label == b.label and a.outcome == b.outcome and a.overflow_runs == b.overflow_runs
        for f in ("cost", "tokens", "facts_seen", "facts_lost", "refetch", "completed", "peak", "output"):
            assert np.array_equal(getattr(a, f), getattr(b, f)), f
    want = [paired(one[0], s) for s in one[1:]]  # one setting at a time
    assert paired_many(one[0], one[1:]) == paired_many(one[0], one[1:], workers=3) == want
    assert any(w["saving_ci"] != [0.0, 0.0] for w in want)  # resampled, not all zero


def test_the_seeds_are_the_sha256_of_the_hashes_and_the_key():
    import hashlib

    from sim.analysis.paired import Seeds, seeded_rng

    hashes = [f"sha256:{i:064x}" for i in range(5)]
    digest = hashlib.sha256(("\n".join(hashes) + "\n" + "16000/2000").encode()).digest()
    want = np.random.Generator(np.random.PCG64(int.from_bytes(digest[:16], "big"))).integers(0, 5, 50)
    seeds = Seeds(hashes)
    assert np.array_equal(seeds("16000/2000").integers(0, 5, 50), want)
    assert np.array_equal(seeds("16000/2000").integers(0, 5, 50), want)  # each key a fresh copy
    assert np.array_equal(seeded_rng(hashes, "16000/2000").integers(0, 5, 50), want)


def test_load_bearing_results_skip_only_traces_that_need_nothing(mini_traces):
    """A trace read as columns knows it needs no fact without building its events: the same sizes."""
    from sim.analysis.sizing_checks import load_bearing_results
    from sim.importers import load_paths
    from sim.information.state import needs_of
    from sim.util.paths import EMBEDDED_SUITE

    for traces in (list(load_paths([EMBEDDED_SUITE])), mini_traces):
        fast = load_bearing_results(traces)
        slow = []
        for t in traces:
            needed: set[str] = set()
            for e in reversed(t.events):
                if e.kind == "tool_result" and any(f in needed for f in e.provides):
                    slow.append(int(e.tokens))
                needed.update(needs_of(t, e.index))  # live needs only
        assert fast == slow and fast
