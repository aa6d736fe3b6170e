"""ctxsim size: every setting against no compaction, paired on the same traces; a recommendation only
when the saving is clear of zero and the information cost within the tolerances."""

import json

import numpy as np
import pytest

from sim.analysis.paired import bootstrap_ci, paired
from sim.analysis.setting_results import SettingResult
from sim.analysis.verdict import recommendation_line, shipped, tied_text, verdict
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
        setting(96000, 8000, [500_000] * 8),  # costs $0.10 more on every run
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
    # the real reason: an interval wholly below zero costs more; one around zero spans it
    assert why[(48000, 8000)] == ["CI spans zero: -0.2250..0.2250"]
    assert why[(96000, 8000)] == ["costs more: CI -0.1000..-0.1000"]
    same = {(g["context_token_limit"], g["keep_recent_tokens"]): g["same_as"] for g in rec["grid"]}
    assert same[(64000, 8000)] == "24000/4000" and same[(24000, 4000)] is None
    assert rec["cost_reference"] is None  # no run overflows: no compaction is its own reference
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
    # the grid's highest limit at or below the highest safe limit, which never fires here
    assert rec["safety_net"] == {
        "low": 150000,
        "high": 193000,
        "fires_on_these_traces": False,
        "context_token_limit": 128000,
        "keep_recent_tokens": 2000,
        "pair_fires_on_these_traces": False,
    }
    assert rec["tied"] == [
        {"context_token_limit": 96000, "keep_recent_tokens": 2000},
        {"context_token_limit": 128000, "keep_recent_tokens": 2000},
    ]
    assert rec["advice"].startswith(
        "Compaction not needed. Your runs peak at 5k tokens (p99); with a 200k window compaction never "
        "needs to fire: any context_token_limit from 150000 to 193000 is a safety net that never fires on "
        "these traces. Ship context_token_limit=128000 with keep_recent_tokens=2000 as a safety net (the "
        "grid's highest safe limit: it never fires on these traces, it only stops a runaway). For "
        "comparison, the cheapest setting, 16000/2000, "
        "would save $0.0500 per run"
    )
    assert "(CI spans zero: " in rec["advice"] and "; facts lost +20.0% of facts seen > 5%)" in rec["advice"]
    assert recommendation_line(rec) == (
        "recommended: seed_engine without compaction (compaction-not-needed); safety net: "
        "context_token_limit=128000 keep_recent_tokens=2000"
    )
    # the tied settings share the no-compaction row of the table, which names them
    from sim.commands.size import grid_table

    rows = grid_table(rec)
    assert [(r["context_token_limit"], r["tied"]) for r in rows] == [
        ("none", "96000/2000, 128000/2000"),
        (16000, "-"),
    ]
    # every setting identical to the baseline: said so, and all named as tied; no window: the grid's
    # highest limit is the safety net
    same = verdict([BASE, results[2], results[3]], policy_name="seed_engine", target=0.95)
    assert "no setting of the grid changes any run: all 2 are tied with no compaction" in same["advice"]
    assert "tied with no compaction" in tied_text(same)
    assert recommendation_line(same).endswith(
        "safety net: context_token_limit=128000 keep_recent_tokens=2000"
    )
    assert same["grid"][0]["why_not"] == ["never compacts here (identical to no compaction)"]
    with pytest.raises(Exception, match="no no-compaction"):
        verdict(results[1:], policy_name="seed_engine", target=0.95)


def test_a_safety_net_that_would_fire_is_the_top_ranked_pair():
    """Where even the highest safe limit would fire on these traces, the grid's top-ranked setting
    (overflows, completion, facts lost, then cost) is named as the safety net to ship."""
    results = [
        BASE,
        setting(16000, 2000, [100_000, 600_000] * 4, lost=[2] * 8),
        setting(32000, 4000, [400_000] * 8, lost=[1] * 8),
        setting(48000, 8000, [410_000] * 8),  # loses nothing: first
    ]
    kw = dict(policy_name="seed_engine", target=0.95, window=64000, reserve=4000, summary=2048)
    rec = verdict(results, **kw, largest_request=60000)
    assert rec["verdict"] == "compaction-not-needed" and rec["recommended"] is None
    assert rec["safety_net"] == {
        "low": 57000,
        "high": 57000,
        "fires_on_these_traces": True,
        "context_token_limit": 48000,
        "keep_recent_tokens": 8000,
        "pair_fires_on_these_traces": True,
    }
    assert (
        "would fire on these traces. Ship context_token_limit=48000 with keep_recent_tokens=8000"
        in (rec["advice"])
    )
    assert recommendation_line(rec) == (
        "recommended: seed_engine context_token_limit=48000 keep_recent_tokens=8000 as a safety net "
        "(compaction-not-needed; it fires on these traces)"
    )
    # the worst completion over the mock behaviours comes before facts lost
    worst = verdict(results, **kw, largest_request=60000, worst_completion={(48000, 8000): 0.5})
    assert (worst["safety_net"]["context_token_limit"], worst["safety_net"]["keep_recent_tokens"]) == (
        32000,
        4000,
    )


def _required_grid():
    """No compaction overflows 2 of 8 runs (they stop early: it looks cheap); the same runs with no
    window cost $0.40."""
    base = setting(None, None, [200_000] * 8, done=[True] * 6 + [False] * 2, overflow=2)
    ref = setting(None, None, [400_000] * 8)
    return (
        base,
        ref,
        [
            base,
            setting(16000, 2000, [300_000] * 8, overflow=1),  # fewer overflows, meets both tolerances
            setting(24000, 4000, [450_000] * 8, done=[True] * 7 + [False]),  # completion 87.5%
            setting(32000, 4000, [500_000] * 8, lost=[1] * 8),  # facts lost 10% of facts seen
            setting(48000, 8000, [480_000] * 8, lost=[1] * 8),  # as 32000/4000, cheaper: first
            setting(64000, 8000, [200_000] * 8, overflow=2),  # overflows as many: not eligible
        ],
    )


def test_compaction_required_settings_within_the_facts_tolerance_tie_on_information():
    """Two settings both within the 5% facts-lost tolerance: the cheaper ships even though it loses a
    fact more (2 vs 1 of 80 facts seen: 2.5% and 1.25%); one beyond the tolerance ranks after both,
    by its facts lost, whatever its price."""
    base = setting(None, None, [200_000] * 8, done=[True] * 6 + [False] * 2, overflow=2)
    ref = setting(None, None, [400_000] * 8)
    results = [
        base,
        setting(24000, 12000, [480_000] * 8, lost=[1, 1] + [0] * 6),
        setting(24000, 20000, [590_000] * 8, lost=[1] + [0] * 7),
        setting(16000, 2000, [300_000] * 8, lost=[1] * 8),  # 10% lost: beyond the tolerance
    ]
    rec = verdict(results, policy_name="seed_engine", target=0.95, window=32000, reference=ref)
    assert rec["recommended"] == {"context_token_limit": 24000, "keep_recent_tokens": 12000}
    order = [(r["context_token_limit"], r["keep_recent_tokens"]) for r in rec["runners_up"]]
    assert order == [(24000, 20000), (16000, 2000)]
    # a tolerance of 0: facts lost decide before cost again
    rec = verdict(results, policy_name="seed_engine", target=0.95, max_facts_lost_increase=0.0, reference=ref)
    assert rec["recommended"] == {"context_token_limit": 24000, "keep_recent_tokens": 20000}


def test_compaction_required_ranks_by_overflow_completion_facts_then_cost():
    base, ref, results = _required_grid()
    rec = verdict(results, policy_name="seed_engine", target=0.95, window=32000, reference=ref)
    assert rec["verdict"] == "compaction-required"
    assert rec["recommended"] == {"context_token_limit": 48000, "keep_recent_tokens": 8000}
    order = [(r["context_token_limit"], r["keep_recent_tokens"]) for r in rec["runners_up"]]
    assert order == [(32000, 4000), (24000, 4000), (16000, 2000)]  # the overflowing one last
    assert rec["eligible_settings"] == 4
    why = {(g["context_token_limit"], g["keep_recent_tokens"]): g for g in rec["grid"]}
    assert why[(64000, 8000)]["why_not"] == ["overflows 2 runs, no fewer than no compaction (2)"]
    assert why[(24000, 4000)]["eligible"] and why[(24000, 4000)]["shortfalls"] == ["completion 88% < 95%"]
    # the cost is compared with the same runs replayed with no window, not the runs that stopped early
    assert rec["paired"]["saving_ci"] == [-0.08, -0.08]
    assert rec["cost_reference"]["mean_cost_usd"] == 0.4 and rec["cost_reference"]["overflow_runs"] == 0
    assert (rec["baseline"]["completion"], rec["baseline"]["overflow_runs"]) == (0.75, 2)
    assert (rec["completion"], rec["mean_cost_usd"]) == (1.0, 0.48)
    assert rec["advice"].startswith(
        "Compaction required: without compaction 2 of 8 runs overflow the 32k window (answers completed "
        "75%). Ship context_token_limit=48000 with keep_recent_tokens=8000: 0 of 8 runs overflow, answers "
        "completed 100%; information cost: facts lost 8 (10.0% of facts seen, +10.0% vs the same runs with "
        "no window), refetch calls +0.00 per run; cost $0.4800 per run against $0.4000 for the same runs "
        "with no window (paired saving 95% CI -$0.0800 to -$0.0800; no compaction costs $0.2000"
    )
    assert rec["advice"].endswith(
        "it misses the 95% completion target and the +5% facts-lost tolerance (facts lost +10.0% of facts "
        "seen > 5%); 16000/2000 meets them but ranks lower."
    )
    assert (
        recommendation_line(rec)
        == "recommended: seed_engine context_token_limit=48000 keep_recent_tokens=8000"
    )
    # with the worst completion over the mock behaviours, 32000/4000 (90% at worst) beats 48000/8000
    worst = {(48000, 8000): 0.5, (32000, 4000): 0.9}
    rec = verdict(results, policy_name="seed_engine", target=0.95, reference=ref, worst_completion=worst)
    assert rec["recommended"] == {"context_token_limit": 32000, "keep_recent_tokens": 4000}
    assert [(r["context_token_limit"]) for r in rec["runners_up"]] == [24000, 48000, 16000]
    # without a reference the baseline stands in (a sweep's results), and cost_reference is null
    rec = verdict(results, policy_name="seed_engine", target=0.95)
    assert rec["cost_reference"] is None and rec["paired"]["saving_ci"] == [-0.28, -0.28]
    assert "against $0.2000 for no compaction" in rec["advice"]
    # nothing overflows fewer runs: no setting qualifies
    none = verdict([base, results[-1]], policy_name="seed_engine", target=0.95, reference=ref)
    assert none["verdict"] == "no-setting-qualifies" and none["recommended"] is None
    assert recommendation_line(none) == "recommended: seed_engine without compaction (no-setting-qualifies)"
    assert none["advice"].startswith(
        "No setting qualifies: without compaction 2 of 8 runs overflow the window, and no compacting "
        "setting overflows fewer"
    )


def test_sensitivity_lists_every_behaviour_with_its_grid_and_says_whether_it_holds():
    from sim.analysis.verdict import add_sensitivity, sensitivity_grid, sensitivity_text, worst_completions

    base, ref, results = _required_grid()
    fail = [*results[:4], setting(48000, 8000, [480_000] * 8, lost=[1] * 8, done=[True] * 4 + [False] * 4)]
    fail.append(results[-1])
    per = [
        ({"on_missing": "refetch", "summarizer": "extractive"}, results),
        ({"on_missing": "fail", "summarizer": "extractive"}, fail),
    ]
    w = worst_completions([r for _, r in per])
    assert w[(48000, 8000)] == 0.5 and w[(32000, 4000)] == 1.0 and w[(None, None)] == 0.75
    rec = verdict(results, policy_name="seed_engine", target=0.95, reference=ref, worst_completion=w)
    assert rec["recommended"] == {"context_token_limit": 32000, "keep_recent_tokens": 4000}
    own = [(b, verdict(r, policy_name="seed_engine", target=0.95, reference=ref), r) for b, r in per]
    add_sensitivity(rec, own)
    sens = rec["sensitivity"]
    assert [(x["on_missing"], x["verdict"], x["recommended"]["context_token_limit"]) for x in sens] == [
        ("refetch", "compaction-required", 48000),
        ("fail", "compaction-required", 32000),
    ]
    assert sens[1]["grid"][4] == {
        "context_token_limit": 48000,
        "keep_recent_tokens": 8000,
        "completion": 0.5,
        "facts_lost": 8,
        "mean_cost_usd": 0.48,
        "overflow_runs": 0,
    }
    assert rec["sensitivity_holds"] is False
    assert sensitivity_text(rec) == (
        "The verdict does NOT hold under every mock behaviour (refetch/extractive: compaction-required, "
        "48000/8000; fail/extractive: compaction-required, 32000/4000)."
    )
    table = sensitivity_grid(sens)
    assert table[4] == {
        "setting": "48000/8000",
        "refetch/extractive": 1.0,
        "fail/extractive": 0.5,
        "worst": 0.5,
    }
    assert table[0]["setting"] == "none"


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
    net = rec["safety_net"]
    assert (net["low"], net["high"], net["fires_on_these_traces"]) == (150000, 192000, False)
    assert net["context_token_limit"] == 192000 and net["keep_recent_tokens"] in (
        2000,
        4000,
        8000,
        12000,
        16000,
        20000,
    )
    assert rec["cost_reference"] is None
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
    # the 18 share the no-compaction row of the table
    assert "  baseline  " in text and text.count("96000/all keeps, 128000/all keeps, 192000/all keeps") == 1
    assert "\n96,000 " not in text
    assert text.rstrip().splitlines()[-1] == (
        "recommended: seed_engine without compaction (compaction-not-needed); safety net: "
        f"context_token_limit=192000 keep_recent_tokens={net['keep_recent_tokens']}"
    )


def test_size_on_the_shared_runs_32k_requires_compaction(capsys, mini_dir):
    """9 of the 40 runs overflow 32k without compaction: a setting below 32k that overflows none and
    completes more is shipped, with its information cost, against the same runs with no window."""
    args = ["size", str(mini_dir), "--model", "claude-sonnet-4-5", "--window", "32000", "--format", "json"]
    assert main(args) == 0
    rec = json.loads(capsys.readouterr().out)
    base, ref = rec["baseline"], rec["cost_reference"]
    assert rec["verdict"] == "compaction-required" and base["overflow_runs"] > 0
    best = rec["recommended"]
    assert best["context_token_limit"] < 32000 and best["keep_recent_tokens"] < best["context_token_limit"]
    g = next(
        g
        for g in rec["grid"]
        if g["context_token_limit"] == best["context_token_limit"]
        and g["keep_recent_tokens"] == best["keep_recent_tokens"]
    )
    assert g["overflow_runs"] == 0 and g["completion"] > base["completion"] and g["eligible"]
    # no eligible setting overflows fewer runs or completes more than the one shipped
    eligible = [x for x in rec["grid"] if x["eligible"]]
    assert all((x["overflow_runs"], -x["completion"]) >= (0, -g["completion"]) for x in eligible)
    # the reference did not stop early: no overflow, and it costs more than the runs that stopped
    assert ref["overflow_runs"] == 0 and ref["mean_cost_usd"] > base["mean_cost_usd"]
    assert rec["completion"] == g["completion"] and rec["mean_cost_usd"] == g["mean_cost_usd"]
    n = base["overflow_runs"]
    assert f"Compaction required: without compaction {n} of 40 runs overflow the 32k window" in rec["advice"]
    assert f"information cost: facts lost {g['facts_lost']:,} (" in rec["advice"]
    # no interval wholly below zero is called "includes zero"
    for x in rec["grid"]:
        assert not any("includes zero" in w for w in x["why_not"])


def test_size_on_the_shared_runs_64k_names_a_concrete_pair(capsys, mini_dir):
    args = ["size", str(mini_dir), "--model", "claude-sonnet-4-5", "--window", "64000", "--format", "json"]
    assert main(args) == 0
    rec = json.loads(capsys.readouterr().out)
    net = rec["safety_net"]
    assert rec["verdict"] in ("compaction-not-needed", "compact") and rec["baseline"]["overflow_runs"] == 0
    if rec["verdict"] == "compaction-not-needed":
        assert net["fires_on_these_traces"] and net["context_token_limit"] <= net["high"] < 64000
        pair = (
            f"context_token_limit={net['context_token_limit']} keep_recent_tokens={net['keep_recent_tokens']}"
        )
        line = f"recommended: seed_engine {pair} as a safety net (compaction-not-needed; it fires on these "
        line += "traces)"
        chosen = next(
            g
            for g in rec["grid"]
            if g["context_token_limit"] == net["context_token_limit"]
            and g["keep_recent_tokens"] == net["keep_recent_tokens"]
        )
        assert chosen["overflow_runs"] == 0
        assert chosen["completion"] == max(g["completion"] for g in rec["grid"] if not g["overflow_runs"])
    else:
        best = rec["recommended"]
        line = "recommended: seed_engine " + " ".join(f"{k}={v}" for k, v in best.items())
    assert main(args[:-2]) == 0
    assert capsys.readouterr().out.rstrip().splitlines()[-1] == line


def test_size_refuses_a_window_below_one_as_run_does(capsys, tmp_path):
    for bad in ("0", "-5"):
        assert main(["size", str(tmp_path), "--model", "claude-sonnet-4-5", "--window", bad]) == 2
        assert f"--window {bad} is not an integer >= 1" in capsys.readouterr().err
        assert main(["run", str(tmp_path), "--window", bad]) == 2
        assert f"--window {bad} is not an integer >= 1" in capsys.readouterr().err


def test_sensitivity_at_32k_gives_each_behaviour_its_own_grid(capsys, mini_dir):
    args = ["size", str(mini_dir), "--model", "claude-sonnet-4-5", "--window", "32000", "--limits", "16000"]
    assert main([*args, "--keeps", "2000,12000", "--sensitivity", "--format", "json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    sens = rec["sensitivity"]
    assert [(x["on_missing"], x["summarizer"]) for x in sens] == [
        (om, sm) for om in ("refetch", "fail", "degrade") for sm in ("extractive", "oracle")
    ]
    by = {
        (x["on_missing"], x["summarizer"]): {
            (g["context_token_limit"], g["keep_recent_tokens"]): g for g in x["grid"]
        }
        for x in sens
    }
    refetch, fail = by[("refetch", "extractive")][(16000, 2000)], by[("fail", "extractive")][(16000, 2000)]
    assert refetch["completion"] > fail["completion"]  # the dependence the old table hid
    assert set(sens[0]["grid"][0]) == {
        "context_token_limit",
        "keep_recent_tokens",
        "completion",
        "facts_lost",
        "mean_cost_usd",
        "overflow_runs",
    }
    assert rec["sensitivity_holds"] == all(
        (x["verdict"], x["ships"]) == (rec["verdict"], shipped(rec)) for x in sens
    )
    # the ranking reads each setting's worst completion over the behaviours
    worst = {k: min(by[b][k]["completion"] for b in by) for k in by[("refetch", "extractive")]}
    best = rec["recommended"]
    grid = by[("refetch", "extractive")]
    fewest = min(g["overflow_runs"] for k, g in grid.items() if k[0] is not None)
    assert grid[(best["context_token_limit"], best["keep_recent_tokens"])]["overflow_runs"] == fewest
    assert worst[(best["context_token_limit"], best["keep_recent_tokens"])] == max(
        v for k, v in worst.items() if k[0] is not None and grid[k]["overflow_runs"] == fewest
    )


def test_size_errors(capsys, tmp_path):
    assert main(["size", "--policy", "raw", str(tmp_path)]) == 2
    assert "policy 'raw' has no numeric knobs to size (no default grid)" in capsys.readouterr().err
    assert main(["size", "--policy", "observation_masking", "--limits", "1000", str(tmp_path)]) == 2
    assert "--limits/--keeps are seed_engine's shorthand" in capsys.readouterr().err
    assert main(["size", "--policy", "observation_masking", "--grid", "nope=1,2", str(tmp_path)]) == 2
    assert "--grid nope: policy 'observation_masking' has no such knob" in capsys.readouterr().err
    assert main(["size", "--policy", "observation_masking", "--grid", "n=1,x", str(tmp_path)]) == 2
    assert "--grid n='x': expected a number" in capsys.readouterr().err
    assert main(["size", "--policy", "observation_masking", "--grid", "n=1,1", str(tmp_path)]) == 2
    assert "expected distinct numbers" in capsys.readouterr().err
    three = ["--grid", "n=1", "--grid", "polling=1", "--grid", "n=2"]
    assert main(["size", "--policy", "observation_masking", *three, str(tmp_path)]) == 2
    assert "--grid takes one or two knobs, not 3" in capsys.readouterr().err
    assert main(["size", "--grid", "max_turns=1", str(tmp_path)]) == 2
    assert "seed_engine is sized on context_token_limit and keep_recent_tokens" in capsys.readouterr().err
    assert main(["size", "--model", "gpt-9", str(tmp_path)]) == 2
    assert main(["size", "--max-facts-lost-increase", "2", str(tmp_path)]) == 2
    assert "--max-facts-lost-increase 2.0 is not in [0, 1]" in capsys.readouterr().err


def test_demo_size_and_report_print_the_same_recommendation(capsys, tmp_path):
    """One recommendation function: the demo's sweeps, `size` on the same traces at the demo's window and
    `report` on the demo's sweeps state the same verdict."""
    from sim.commands.demo import DEMO_LIMITS, DEMO_STUDY, DEMO_WINDOW
    from sim.util.paths import EMBEDDED_SUITE

    suite = str(EMBEDDED_SUITE / "closed_loop.jsonl")
    out = tmp_path / "latest"
    assert main(["demo", suite, "--out", str(out), "--workers", "1"]) == 0
    demo = [x for x in capsys.readouterr().out.splitlines() if x.startswith("recommended: ")]
    grid = dict(w.split("=", 1) for w in dict(DEMO_STUDY)["seed_engine"])
    limits = ",".join(str(v) for v in DEMO_LIMITS)  # size cuts them by the window as the demo does
    args = ["size", suite, "--model", "claude-sonnet-4-5", "--window", str(DEMO_WINDOW), "--limits", limits]
    assert main([*args, "--keeps", grid["policy.keep_recent_tokens"]]) == 0
    size = [x for x in capsys.readouterr().out.splitlines() if x.startswith("recommended: ")]
    sweeps = [str(out / "sweeps" / p) for p, _ in DEMO_STUDY]
    assert main(["report", *sweeps, "-o", str(tmp_path / "r")]) == 0
    report = [x for x in capsys.readouterr().out.splitlines() if x.startswith("recommended: ")]
    assert len(demo) == 1 and demo == size == report
    md = (tmp_path / "r" / "report.md").read_text(encoding="utf-8")
    assert "| on_missing | summarizer | verdict | recommended |" in md  # the demo sweeps the behaviours
    assert md.count("| refetch | extractive |") == 1
    assert ("The verdict holds under all 6 mock behaviours: " in md) or ("does NOT hold" in md)
    assert "| setting | refetch/extractive | refetch/oracle |" in md  # each setting under each behaviour


def test_size_on_the_embedded_suite_at_the_demos_window_recommends_compacting(capsys):
    """Issue 39's must-hold: at the demo's tight window some runs of the embedded suite overflow without
    compaction, and `size` ships a compacting setting that finishes them at an information cost (the
    suite's runs carry facts). Exact: 4 of the 44 runs overflow 64k under the seed engine with no limit
    (6 under raw: `ctxsim run scenarios/suite --policy raw model.window=64000`); the highest safe limit,
    64000 - output reserve 517 - largest summary 2048 rounded down to 61000, stands in for 64000."""
    from sim.commands.demo import DEMO_LIMITS, DEMO_STUDY, DEMO_WINDOW
    from sim.util.paths import EMBEDDED_SUITE

    grid = dict(w.split("=", 1) for w in dict(DEMO_STUDY)["seed_engine"])
    args = ["size", str(EMBEDDED_SUITE), "--model", "claude-sonnet-4-5", "--window", str(DEMO_WINDOW)]
    args += ["--limits", ",".join(str(v) for v in DEMO_LIMITS), "--keeps", grid["policy.keep_recent_tokens"]]
    assert main([*args, "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    base = out["baseline"]
    assert out["verdict"] == "compaction-required" and out["grid_limits_left_out"] == [64000]
    assert (base["overflow_runs"], base["completion"]) == (4, round(40 / 44, 4))
    assert out["recommended"] == {"context_token_limit": 61000, "keep_recent_tokens": 16000}
    best = next(
        g for g in out["grid"] if g["context_token_limit"] == 61000 and g["keep_recent_tokens"] == 16000
    )
    assert (best["overflow_runs"], best["completion"]) == (0, 1.0)
    # what finishing the long runs costs in information (the README's quick start quotes the share)
    assert (base["facts_lost"], best["facts_lost"], best["facts_lost_change_share"]) == (1, 87, 0.0916)
    assert best["shortfalls"] == ["facts lost +9.2% of facts seen > 5%"]
    lost = {g["facts_lost"] for g in out["grid"]}
    assert len(lost) > 10  # the grid's settings tell apart by what they lose


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
        "reread_margin_tokens": 50,  # a ranged read's margin (re-reads pass the policy's bound)
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
    rec = json.loads(capsys.readouterr().out)
    sens = rec["sensitivity"]
    assert [(r["on_missing"], r["summarizer"]) for r in sens] == [
        (om, sm) for om in ("refetch", "fail", "degrade") for sm in ("extractive", "oracle")
    ]
    for row in sens:  # each row is the verdict `size` gives under that behaviour alone, and its grid
        one = ["--on-missing", row["on_missing"], "--summarizer", row["summarizer"], "--format", "json"]
        assert main([*args, *one]) == 0
        alone = json.loads(capsys.readouterr().out)
        assert (row["verdict"], row["recommended"]) == (alone["verdict"], alone["recommended"])
        assert [g["completion"] for g in row["grid"][1:]] == [g["completion"] for g in alone["grid"]]
        assert [g["mean_cost_usd"] for g in row["grid"][1:]] == [g["mean_cost_usd"] for g in alone["grid"]]
    keys = {(r["verdict"], str(r["ships"])) for r in sens}
    assert rec["sensitivity_holds"] == (keys == {(rec["verdict"], str(shipped(rec)))})
    assert main([*args, "--sensitivity"]) == 0
    text = capsys.readouterr().out
    assert (
        "sensitivity to the mock model (model.on_missing x model.summarizer), completion per setting:" in text
    )
    assert "setting     refetch/extractive  refetch/oracle  fail/extractive" in text
    assert "verdict under the mock model on_missing=refetch, summarizer=extractive" in text


def test_workers_give_the_same_answer_byte_for_byte(capsys, monkeypatch):
    """--workers deals the grid batches and the loop's settings to forked processes (here whatever
    their size): the answer is the one-process answer whatever their number (traces with facts take the
    loop)."""
    import sim.analysis.size
    from sim.util.paths import EMBEDDED_SUITE

    monkeypatch.setattr(sim.analysis.size, "FORK_LANES", 0)
    monkeypatch.setattr(sim.analysis.size, "FORK_LOOP_RUNS", 0)

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


def test_evaluate_over_workers_and_paired_many_are_the_one_process_and_one_setting_results(monkeypatch):
    import os

    import sim.analysis.size
    from scenarios.swe_like import generate_run
    from sim.analysis.paired import paired_many
    from sim.analysis.size import evaluate
    from sim.importers import load_paths
    from sim.util.paths import EMBEDDED_SUITE

    traces = [generate_run(7, i) for i in range(5)] + list(load_paths([EMBEDDED_SUITE]))[:3]
    args = (traces, "seed_engine", [16000, 32000], [2000, 8000], 200000, "claude-sonnet-4-5")
    one = evaluate(*args)
    real_fork, forks = os.fork, []

    def fork():
        forks.append(1)
        return real_fork()

    monkeypatch.setattr(os, "fork", fork)
    monkeypatch.setattr(sim.analysis.size, "GRID_BATCH", 4)  # two batches
    assert (
        evaluate(*args, workers=2)[0].tokens.tolist() == one[0].tokens.tolist() and forks == []
    )  # too small
    monkeypatch.setattr(sim.analysis.size, "FORK_LANES", 0)
    monkeypatch.setattr(sim.analysis.size, "FORK_LOOP_RUNS", 0)
    two = evaluate(*args, workers=2)
    assert forks  # dealt to a forked worker
    for a, b in zip(one, two, strict=True):
        assert a.label == b.label and a.outcome == b.outcome and a.overflow_runs == b.overflow_runs
        for f in ("cost", "tokens", "facts_seen", "facts_lost", "refetch", "completed", "peak", "output"):
            assert np.array_equal(getattr(a, f), getattr(b, f)), f
    want = [paired(one[0], s) for s in one[1:]]  # one setting at a time: the shared resamples
    assert paired_many(one[0], one[1:]) == want
    assert paired_many(one[0], one[:0:-1]) == want[::-1]  # a setting's interval whatever sits beside it
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


def test_progress_is_shown_when_asked_and_only_then(capsys):
    """Off when standard error is not a terminal; ``--progress`` shows it there too, a line every ~10%."""
    from sim.commands.common import progress
    from sim.util.paths import EMBEDDED_SUITE

    for i in range(1, 41):
        progress(i, 40, "size: runs on the grid path", show=True)
    lines = capsys.readouterr().err.splitlines()
    assert lines == [f"size: runs on the grid path {i}/40" for i in range(4, 41, 4)]
    progress(40, 40, "quiet")  # not a terminal: nothing unless asked
    assert capsys.readouterr().err == ""
    args = ["size", str(EMBEDDED_SUITE / "closed_loop.jsonl"), "--model", "claude-sonnet-4-5"]
    args += ["--limits", "16000", "--keeps", "2000,8000", "--format", "json"]
    assert main(args) == 0
    quiet = capsys.readouterr()
    assert "size: " not in quiet.err
    assert main([*args, "--progress"]) == 0
    loud = capsys.readouterr()
    assert loud.out == quiet.out  # the same answer
    assert [x for x in loud.err.splitlines() if x.startswith("size: ")][
        -1
    ] == "size: settings on the per-call loop 3/3"


def test_the_demo_compares_the_best_setting_of_each_policy():
    """Issue 40: the demo puts the best setting of several policies side by side on the same traces,
    window and prices, each as `size --policy` ships it (the seed engine on the demo's own grid, so its
    row is the sweep's verdict): masking keeps the most recent observations whole and loses most."""
    import argparse

    from sim.commands.demo import DEMO_WINDOW, best_of_policies, study_limits

    args = argparse.Namespace(paths=[], window=DEMO_WINDOW, pricing="claude-sonnet-4-5", workers=1)
    rows = best_of_policies(args, study_limits("embedded", DEMO_WINDOW))
    got = [(r["policy"], r["verdict"], r["ships"], r["overflow_runs"], r["facts_lost"]) for r in rows]
    assert got == [
        ("seed_engine", "compaction-required", "context_token_limit=61000 keep_recent_tokens=16000", 0, 87),
        ("observation_masking", "compaction-required", "n=10", 0, 302),
        ("openhands_llm_summarizing", "compaction-required", "max_size=100 keep_first=4", 0, 71),
    ]
    assert [r["answers_completed"] for r in rows] == [1.0, 1.0, 1.0]
    assert [r["mean_cost_usd"] for r in rows] == [0.52157, 1.15009, 0.537243]
    # each row says what its figures rest on, the same for all three
    assert {(r["priced_as"], r["window"], r["mock_model"]) for r in rows} == {
        ("claude-sonnet-4-5 (price table as of 2025-11)", 64000, "on_missing=refetch summarizer=extractive")
    }
    assert len({r["traces_hash"] for r in rows}) == 1


def test_grid_batches_are_cut_again_by_run_length_priced_alike_together():
    """``_alike_lengths``: each batch holds runs of like length, longest first (a pass costs per call
    position up to its longest run), ``size`` runs a batch, runs priced alike together."""
    from types import SimpleNamespace

    from sim.analysis.size import _alike_lengths

    calls = [3, 9, 1, 9, 5, 2, 7]
    runs = [SimpleNamespace(arrays=SimpleNamespace(view_end=list(range(c)))) for c in calls]
    a, b = (object(), None), (object(), object())
    batches = [(*a, [0, 1, 2]), (*b, [3, 4]), (*a, [5, 6])]
    assert _alike_lengths(batches, runs, 2) == [
        (*a, [1, 6]), (*a, [0, 5]), (*a, [2]), (*b, [3, 4]),
    ]  # fmt: skip
    assert _alike_lengths(batches[:1], runs, 2) == batches[:1]  # one batch: as it is
