"""The Complexity Trap benchmark (benchmarks/published/): the paper's side is arithmetic on the published
CSV and is held exactly on a slice of it; the calibrated generator, the bill fit and the summary size
are held on inputs made here; the committed summary that `size` and `report` print is held to a fresh
run. The CSVs are read from reference/ beside the shared traces (CTXSIM_TRACES, or
CTXSIM_COMPLEXITY_TRAP); tests that need them skip when they are absent."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # benchmarks/ is no installed package

from benchmarks.published import complexity_trap as ct  # noqa: E402
from benchmarks.published import paper  # noqa: E402
from benchmarks.published.replays import Bill, Rates, RunTotals, replay_totals  # noqa: E402
from scenarios.calibrated import (  # noqa: E402
    PROFILE,
    TaskShape,
    calibrated_run,
    calibrated_suite,
    fixed_head,
    observation_profile,
    shape_with_turns,
)
from sim.analysis.published import checked_against, checked_against_text  # noqa: E402
from sim.policies.llm_summary import summaries_in  # noqa: E402
from sim.util.errors import ConfigError  # noqa: E402

REFERENCE = ct.REFERENCE_DEFAULT
needs_csv = pytest.mark.skipif(
    not (REFERENCE / paper.TASKS_CSV).is_file(), reason=f"the paper's CSVs are not in {REFERENCE}"
)
SLICE = ("astropy__astropy-12907", "django__django-11099", "sympy__sympy-20590")
FLASH = "gemini-2.5-flash"


@pytest.fixture(scope="module")
def sliced():
    df = paper.read_tasks(REFERENCE)
    return df[(df["model"] == FLASH) & df["instance_id"].isin(SLICE)]


@needs_csv
def test_paper_figures_on_a_slice_are_the_csv_arithmetic(sliced):
    raw = paper.strategy_rows(sliced, FLASH, "raw")
    masked = paper.strategy_rows(sliced, FLASH, "masking")
    summary = paper.strategy_rows(sliced, FLASH, "summary")
    # the rows, from the CSV: (turns, mean prompt, cost[, summary cost], outcome)
    raw_cum = 14 * 5154 + 23 * 32700 + 38 * 11291
    raw_cost = 0.0535 + 0.1547 + 0.1082
    f = paper.figures(raw)
    assert f["tasks"] == 3
    assert f["cumulative_input"] == pytest.approx(raw_cum / 3, rel=1e-12)
    assert f["price_per_input_token"] == pytest.approx(raw_cost / raw_cum * 1e6, rel=1e-12)
    assert f["solve_rate"] == pytest.approx(1 / 3)

    m = paper.paired(raw, masked)
    mask_cum = 46 * 9210 + 66 * 8455 + 60 * 7239
    mask_cost = 0.1822 + 0.1937 + 0.2013
    assert m["common_tasks"] == 3
    assert m["cumulative_input_vs_raw"] == pytest.approx(mask_cum / raw_cum, rel=1e-12)
    assert m["cost_vs_raw"] == pytest.approx(mask_cost / raw_cost, rel=1e-12)
    assert m["price_per_input_token_vs_raw"] == pytest.approx((mask_cost / raw_cost) / (mask_cum / raw_cum))
    assert m["turns_vs_raw"] == pytest.approx((46 + 66 + 60) / (14 + 23 + 38))
    assert m["solve_change"] == pytest.approx(-1 / 3)

    s = paper.paired(raw, summary)
    sum_cum = 6 * 1836 + 137 * 16067 + 17 * 4985
    sum_cost = 0.0071 + (0.5248 + 0.0594) + 0.0674  # the summary calls' cost counts
    assert s["cumulative_input_vs_raw"] == pytest.approx(sum_cum / raw_cum, rel=1e-12)
    assert s["cost_vs_raw"] == pytest.approx(sum_cost / raw_cost, rel=1e-12)
    assert s["solve_change"] == pytest.approx(1 / 3)
    assert paper.figures(summary)["summary_cost_share"] == pytest.approx(0.0594 / sum_cost, rel=1e-12)


@needs_csv
def test_published_interval_and_flat_price():
    ci = paper.read_paired(REFERENCE)
    lo, hi = paper.published_ci(ci, paper.model_named(FLASH), "masking")
    assert (round(lo, 6), round(hi, 6)) == (-0.008, 0.064)
    df = paper.read_tasks(REFERENCE)
    pin, pout = paper.flat_price(df, "qwen3-32b")
    # Qwen3-32B's bills are $0.70 / $2.80 per million tokens, rounded to 4 decimals per task
    assert (round(pin, 2), round(pout, 2)) == (0.70, 2.79)


def test_calibrated_run_matches_its_row():
    shape = TaskShape("t", 40, 12_000.0, 60.0)
    run = calibrated_run(shape, 3, 7, fixed_tokens=2_000)
    calls = run.calls
    assert len(calls) == 40
    assert calls[0].input_tokens == 2_000  # the head alone
    assert all(e.tokens == 60 for e in run.events if e.kind == "assistant")
    mean = sum(c.input_tokens for c in calls) / len(calls)
    assert abs(mean - 12_000) <= 0.5 * 40  # each observation rounded to a whole token
    # appended history: each request is the previous one plus the turn in between
    sizes = [e.tokens for e in run.events]
    for c in calls:
        assert c.input_tokens == sum(sizes[: c.view_end])
    assert calibrated_run(shape, 3, 7, fixed_tokens=2_000) == run  # a pure function of its inputs


def test_calibrated_observations_follow_the_profile():
    shape = TaskShape("t", 200, 60_000.0, 80.0)
    obs = [e.tokens for e in calibrated_run(shape, 0, 1, 3_000).events if e.kind == "tool_result"]
    first, last = np.mean(obs[:20]), np.mean(obs[-40:-20])
    assert first > 1.5 * last  # PROFILE's first tenth (649) against its ninth (218), under lognormal noise


def test_shapes_and_head():
    assert fixed_head([10, 20, 30], [3_000, 5_000, 7_000]) == 1_000
    s = shape_with_turns("x", 11, 6_000.0, 50.0, 21, 1_000)
    # growth per turn 2 * (6000 - 1000) / 10 = 1000; 21 turns average 1000 + 1000 * 20 / 2
    assert s == TaskShape("x", 21, 11_000.0, 50.0)
    # a task whose mean prompt is below the fixed head keeps its own size (the head is then the prompt)
    assert shape_with_turns("y", 5, 800.0, 30.0, 9, 1_000) == TaskShape("y", 9, 800.0, 30.0)
    flat = calibrated_run(TaskShape("y", 9, 800.0, 30.0), 0, 0, 1_000)
    assert [c.input_tokens for c in flat.calls] == [800 + 2 * k for k in range(9)]
    runs = calibrated_suite([TaskShape("a", 0, 1.0, 1.0), TaskShape("b", 1, 900.0, 10.0)], 0, 500)
    assert [r.trace_id for r in runs] == ["calibrated-b"]
    assert runs[0].calls[0].input_tokens == 500


def test_profile_is_measured_on_the_shared_runs():
    from sim.importers import load_paths
    from sim.util.paths import traces_dir

    folder = traces_dir() / "mini-swe-agent-gemini3pro" / "trajs"
    if not folder.is_dir():
        pytest.skip(f"shared traces not found at {folder}")
    assert observation_profile(list(load_paths([folder]))).tolist() == PROFILE.tolist()


def _totals(**cols) -> RunTotals:
    n = len(next(iter(cols.values())))
    zero = np.zeros(n)
    names = ("agent_calls", "agent_input", "agent_read", "agent_output", "summary_calls", "summary_input",
             "summary_output", "agent_sqrt_input", "summary_sqrt_input")  # fmt: skip
    base = dict.fromkeys(names, zero)
    base.update({k: np.asarray(v, dtype=float) for k, v in cols.items()})
    return RunTotals(trace_ids=tuple(map(str, range(n))), completed=np.ones(n, bool), **base)


def test_bill_fit_recovers_the_parameters_it_was_made_with():
    rates = Rates(0.30, 2.50, 0.075, "test")
    t = _totals(
        agent_calls=[5, 20, 80, 200],
        agent_input=[20_000, 200_000, 2_000_000, 12_000_000],
        agent_read=[9_000, 150_000, 1_700_000, 10_500_000],
        agent_output=[300, 1_200, 5_000, 14_000],
        agent_sqrt_input=[300, 2_000, 12_000, 40_000],
    )
    made = Bill(rates, read_scale=0.7, hidden_per_sqrt_input=3.25)
    rows = pd.DataFrame({"total_cost": t.cost(made)})
    got = ct.fit_bill(rows, t, rates, reuse=0.87)
    assert got.hidden_per_sqrt_input == 3.25
    assert got.read_scale == pytest.approx(0.7, rel=1e-9)
    # mean hidden output per call: 3.25 x 54,300 / 305 calls
    assert t.hidden_output(made) == pytest.approx(3.25 * 54_300 / 305)
    # the reuse fraction stays <= 1: a scale above 1 / reuse is cut there
    more = pd.DataFrame({"total_cost": t.cost(Bill(rates, read_scale=1.5))})
    assert ct.fit_bill(more, t, rates, reuse=0.87).read_scale == pytest.approx(1 / 0.87)


def test_summary_size_from_the_summary_bills():
    rates = Rates(0.30, 2.50, 0.075, "test")
    rows = pd.DataFrame({"summary_cost": [0.02, 0.0], "summary_count": [2, 0]})
    t = _totals(summary_calls=[3, 1], summary_input=[30_000, 10_000], summary_sqrt_input=[300, 100])
    # one summary: $0.01; its input 10,000 tokens x $0.30/M = $0.003; its hidden output 1.0 x 400 / 4 calls:
    # (0.01 - 0.003) / 2.5e-6 - 100
    assert ct.summary_size(rows, t, Bill(rates, hidden_per_sqrt_input=1.0)) == 2_700
    assert ct.summary_size(rows, _totals(summary_calls=[0], summary_input=[0]), Bill(rates)) == 2048


def test_summary_count_rule_is_the_policys_trigger():
    # summaries_in (used to fit the trigger to the paper's counts) against the policy's own replay
    for turns in (1, 12, 31, 32, 52, 53, 100, 250):
        run = calibrated_run(TaskShape("t", turns, 200.0 + 300.0 * turns, 40.0), 0, 3, 200)
        for n, m in ((21, 10), (27, 10), (5, 2)):
            got = replay_totals([run], "llm_summary", {"n": n, "m": m}, None, "degrade").summary_calls[0]
            assert got == summaries_in(turns, n, m), (turns, n, m)


def test_summary_trigger_matches_the_published_count():
    # every 27 turns with 10 kept: summaries before calls 38, 65, 92 (n=26 would fire at 37, n=28 not by 38)
    rows = pd.DataFrame({"turn_count": [37, 38, 64, 65, 92, 0], "summary_count": [0, 1, 1, 2, 3, 0]})
    assert [summaries_in(t, 27, 10) for t in (37, 38, 64, 65, 92)] == [0, 1, 1, 2, 3]
    assert ct.summary_trigger(rows, 10) == 27


def test_row_verdicts():
    assert ct.Row("m", "masking", "cost_vs_raw", "c", 0.9, 1.05, 0.25).within is False  # other side of 1
    assert ct.Row("m", "masking", "cost_vs_raw", "c", 0.9, 0.8, 0.25).within is True
    assert ct.Row("m", "masking", "cumulative_input_vs_raw", "c", 0.2, 0.26, 0.25).within is False
    r = ct.Row("m", "masking", "solve_or_completion_change", "c", 0.03, 0.0, [-0.01, 0.06])
    assert (r.within, r.ratio) is not None and r.within is True and r.ratio is None
    assert (
        ct.Row("m", "masking", "solve_or_completion_change", "c", -0.09, 0.0, [-0.13, -0.05]).within is False
    )


@needs_csv
def test_json_rows_have_the_documented_keys(capsys):
    assert ct.main(["--models", FLASH, "--tasks", "40", "--format", "json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    keys = {
        "model",
        "strategy",
        "quantity",
        "corpus",
        "paper",
        "ctxsim",
        "ratio",
        "tolerance",
        "within",
        "note",
    }
    assert all(set(r) == keys for r in rows)
    assert {r["corpus"] for r in rows} <= {"calibrated_suite", "shared_swe_agent", "shared_mini_swe_agent"}
    assert "calibrated_suite" in {r["corpus"] for r in rows}
    quantities = {r["quantity"] for r in rows}
    for q in (
        "price_per_input_token_vs_raw",
        "cumulative_input_vs_raw",
        "cost_vs_raw",
        "solve_or_completion_change",
    ):
        assert q in quantities
    assert all(math.isfinite(r["paper"]) for r in rows)


def test_missing_csvs_exit_2(tmp_path, capsys):
    assert ct.main(["--reference", str(tmp_path)]) == 2
    assert paper.TASKS_CSV in capsys.readouterr().err


@needs_csv
@pytest.mark.slow
def test_committed_summary_is_a_fresh_run():
    """conf/published/complexity_trap.yaml (what `size` and `report` print) is what the benchmark gives now,
    and its must-holds hold: price per input token within 15%, cumulative input and cost within 25%."""
    df = paper.read_tasks(REFERENCE)
    m = paper.model_named(FLASH)
    rows, info, _, _ = ct.calibrated(m, df, ct.GEMINI_FLASH_2025, ct.GEMINI_CACHE, None)
    fresh = ct.summary(rows, {FLASH: info})
    (committed,) = [d for d in checked_against() if d["command"] == "benchmarks/published/complexity_trap.py"]
    assert fresh == committed
    assert all(r["within"] for r in committed["results"])


@needs_csv
@pytest.mark.slow
def test_issue_must_holds():
    """Every must-hold of the calibrated suite: price per input token masked and summary ÷ raw within 15%
    for both Gemini models (the ones billed with a cache); cumulative input masked ÷ raw within 25% and
    cost masked ÷ raw within 25% (on the same side of 1) for Gemini 2.5 Flash and Qwen3-Coder-480B."""
    df = paper.read_tasks(REFERENCE)
    want = {
        "gemini-2.5-flash-thinking": {("masking", "price_per_input_token_vs_raw"),
                                      ("summary", "price_per_input_token_vs_raw")},
        "qwen3-coder-480b": {("masking", "cumulative_input_vs_raw"), ("masking", "cost_vs_raw")},
    }  # fmt: skip
    for key, quantities in want.items():
        m = paper.model_named(key)
        if m.cache:
            rates, cache = ct.GEMINI_FLASH_2025, ct.GEMINI_CACHE
        else:
            pin, pout = paper.flat_price(df, key)
            rates, cache = Rates(pin, pout, pin, "flat"), None
        rows, _, _, _ = ct.calibrated(m, df, rates, cache, None, "degrade")
        got = {(r.strategy, r.quantity): r for r in rows if (r.strategy, r.quantity) in quantities}
        assert set(got) == quantities
        assert all(r.within for r in got.values()), [(r.quantity, r.paper, r.ctxsim) for r in got.values()]


def test_checked_against_reads_and_refuses(tmp_path, monkeypatch):
    import sim.analysis.published as pub

    entries = checked_against()
    assert any(d["benchmark"] == "The Complexity Trap" for d in entries)
    line = checked_against_text(entries)[0]
    assert line.startswith("The Complexity Trap (arXiv 2508.21433")
    assert "price per input token masked ÷ raw: ctxsim" in line
    (tmp_path / "bad.yaml").write_text("benchmark: x\nresults: []\n")
    monkeypatch.setattr(pub, "PUBLISHED_DIR", tmp_path)
    with pytest.raises(ConfigError, match="bad.yaml: source: missing"):
        checked_against()


def test_make_suite_writes_a_calibrated_suite_per_experiment(tmp_path):
    from scenarios.make_suite import write_calibrated
    from sim.trace.io import iter_jsonl

    csv = tmp_path / "tasks.csv"
    pd.DataFrame(
        {
            "experiment": ["e1"] * 3 + ["e1-mask"],
            "strategy": ["Raw Agent"] * 3 + ["Observation Masking"],
            "instance_id": ["a", "b", "c", "a"],
            "turn_count": [10, 20, 0, 5],
            "mean_prompt_tokens": [3_000, 5_000, 0, 2_000],
            "mean_completion_tokens": [50, 60, 0, 40],
        }
    ).to_csv(csv, index=False)
    assert write_calibrated(csv, tmp_path / "out") == [("e1.jsonl", 2)]
    runs = list(iter_jsonl(tmp_path / "out" / "e1.jsonl"))
    assert [len(r.calls) for r in runs] == [10, 20]
    assert [r.trace_id for r in runs] == ["e1-a", "e1-b"]
    # the head: the raw rows' intercept over the runs with turns, (10, 3000) and (20, 5000)
    assert runs[0].calls[0].input_tokens == 1_000


def test_calibrated_runs_carry_facts_like_the_real_runs():
    run = calibrated_run(TaskShape("t", 300, 90_000.0, 70.0), 0, 5, 3_000)
    provider = {f: e.index for e in run.events for f in e.provides}
    results = [e for e in run.events if e.kind == "tool_result"]
    assert all(
        e.kind == "tool_result" and e.fact_kinds[0] in ("path", "error") for e in run.events if e.provides
    )
    assert 0.33 < sum(bool(e.provides) for e in results) / len(results) < 0.50  # FACTS.provide_share 0.41
    needing = [e for e in run.events if e.needs]
    assert 10 < len(needing) < 50  # 9.3% of 300 actions need a fact
    for e in needing:
        assert e.kind == "assistant" and all(provider[f] < e.index for f in e.needs)
    bare = calibrated_run(TaskShape("t", 50, 9_000.0, 70.0), 0, 5, 3_000, facts=None)
    assert not any(e.needs or e.provides for e in bare.events)


def test_masking_can_lose_what_a_calibrated_run_needs():
    """The information model can fail on the suite: under on_missing=fail, masking n=1 stops the run at the
    first action needing an observation older than the last one, and raw completes."""
    from sim.engine.dispatch import replay
    from sim.engine.model import ReplayModel
    from sim.policies.base import make_policy

    run = calibrated_run(TaskShape("t", 120, 40_000.0, 70.0), 1, 3, 3_000)
    turn_of = {f"obs@{2 * j + 3}": j for j in range(120)}
    first = min(k for k, e in enumerate(e for e in run.events if e.kind == "assistant")
                if any(turn_of[f] <= k - 2 for f in e.needs))  # fmt: skip
    model = ReplayModel(run, on_missing="fail")
    assert replay(run, make_policy("raw"), model).finish_reason == "completed"
    masked = replay(run, make_policy("observation_masking", n=1), model)
    assert masked.finish_reason == "missing-information"
    assert int((masked.calls["kind"] == 0).sum()) == first


def test_fact_profile_is_measured_on_the_shared_runs():
    from scenarios.calibrated import FACTS, fact_profile
    from sim.importers import load_paths
    from sim.util.paths import traces_dir

    folder = traces_dir() / "mini-swe-agent-gemini3pro" / "trajs"
    if not folder.is_dir():
        pytest.skip(f"shared traces not found at {folder}")
    assert fact_profile(list(load_paths([folder]))) == FACTS


def test_bad_arguments_exit_2_naming_the_choices(capsys):
    with pytest.raises(SystemExit) as e:
        ct.main(["--models", "gemini-9"])
    assert e.value.code == 2 and "unknown gemini-9; known: gemini-2.5-flash" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        ct.main(["--tasks", "0"])
    assert e.value.code == 2 and "--tasks: expected an integer >= 1, got 0" in capsys.readouterr().err
