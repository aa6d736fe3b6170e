"""The paired bootstraps of ``size`` (``sim.analysis.paired``): every setting resampled on the same
draws (common random numbers), every resampled mean of every setting one matrix product, held to the
slow reference (each setting's differences indexed by the resamples and averaged) and to numpy's
percentile, and within the bare grid kernel's CPU."""

import sys
import time
from pathlib import Path

import numpy as np

from sim.analysis.paired import (
    BOOTSTRAP,
    PERCENTILES,
    RESAMPLES_KEY,
    Seeds,
    paired,
    paired_many,
    percentile_rows,
    resample_counts,
    resample_indices,
)
from sim.analysis.setting_results import SettingResult


def result(hashes, cost, tokens, lost, refetch, outcome=None, lim=16000, keep=2000) -> SettingResult:
    n = len(hashes)
    return SettingResult(
        lim,
        keep,
        tuple(hashes),
        np.asarray(cost, dtype=np.float64),
        np.asarray(tokens, dtype=np.float64),
        np.full(n, 20.0),
        np.asarray(lost, dtype=np.float64),
        np.asarray(refetch, dtype=np.float64),
        tuple(outcome or ["complete"] * n),
        np.ones(n, dtype=bool),
        0,
        np.full(n, 5000.0),
        np.zeros(n),
    )


def small_case(n: int = 37, settings: int = 9):
    """A baseline and ``settings`` settings over ``n`` traces, every figure moving in some of them (a
    setting's cost integer micro-USD, as the metrics give it) and one setting identical to the
    baseline."""
    rng = np.random.Generator(np.random.PCG64(40))
    hashes = [f"sha256:{i:064x}" for i in range(n)]

    def draw(lo, hi):
        return rng.integers(lo, hi, n).astype(np.float64)

    base = result(
        hashes, draw(100_000, 900_000), draw(10**5, 10**7), draw(0, 3), draw(0, 2), lim=None, keep=None
    )
    out = [result(hashes, base.cost, base.tokens, base.facts_lost, base.refetch, lim=96000)]  # never fires
    for j in range(settings - 1):
        lost = draw(0, 6) if j % 2 else base.facts_lost  # half lose no more facts: their interval [0, 0]
        outcome = ["complete"] * (n - j) + ["failed"] * j
        out.append(
            result(hashes, draw(50_000, 950_000), draw(10**5, 10**7), lost, draw(0, 4), outcome, 16000 + j)
        )
    return base, out


def slow_bounds(base: SettingResult, s: SettingResult) -> list[list[float]]:
    """The reference: each figure's per-trace differences indexed by the shared resamples, averaged per
    resample, numpy's percentiles of those means (the saving's in micro-USD, then in USD)."""
    idx = resample_indices(base.trace_hashes)
    diffs = (
        base.cost - s.cost,
        base.tokens - s.tokens,
        s.facts_lost - base.facts_lost,
        s.refetch - base.refetch,
    )
    out = []
    for f, v in enumerate(diffs):
        if not v.any():
            out.append([0.0, 0.0])
            continue
        lo, hi = np.percentile(v[idx].mean(axis=1), PERCENTILES)
        out.append([float(lo) / 1e6, float(hi) / 1e6] if f == 0 else [float(lo), float(hi)])
    return out


def test_the_vectorised_bootstrap_is_the_slow_reference_exactly():
    base, settings = small_case()
    got = paired_many(base, settings)
    for s, pr in zip(settings, got, strict=True):
        want = slow_bounds(base, s)
        rounded = [[round(x, dp) for x in b] for b, dp in zip(want, (6, 1, 3, 3), strict=True)]
        assert [pr["saving_ci"], pr["tokens_saving_ci"], pr["facts_lost_change"]["per_run_ci"]] == rounded[:3]
        assert pr["refetch_change"]["per_run_ci"] == rounded[3]
        # the point estimates as before: means of the per-trace differences
        assert pr["saving_usd"] == round(float(((base.cost - s.cost) / 1e6).mean()), 6)
        assert pr["runs_dearer"] == int((base.cost - s.cost < 0).sum())
        assert pr["outcome_change"]["failed"] == s.outcome.count("failed")
    assert got[0]["saving_ci"] == [0.0, 0.0] and got[0]["outcome_change"] == dict.fromkeys(
        got[0]["outcome_change"], 0
    )
    assert got[1]["facts_lost_change"]["per_run_ci"] == [0.0, 0.0]  # zero on every trace: not resampled
    assert got[2]["facts_lost_change"]["per_run_ci"] != [0.0, 0.0]


def test_the_unrounded_bounds_are_the_reference_bit_for_bit():
    """Before rounding: the matrix product's sums of integer differences are exact, so the means, their
    order and numpy's interpolation are the reference's to the last bit."""
    from sim.analysis.paired import _paired_bounds, _paired_diffs

    base, settings = small_case(n=53, settings=12)
    bounds = _paired_bounds(base.trace_hashes, _paired_diffs(base, settings))
    for j, s in enumerate(settings):
        assert bounds[:, j].tolist() == slow_bounds(base, s)


def test_every_setting_draws_the_same_resamples_from_one_stream():
    base, settings = small_case()
    n = len(base.cost)
    want = Seeds(base.trace_hashes)(RESAMPLES_KEY).integers(0, n, size=(BOOTSTRAP, n))
    assert np.array_equal(resample_indices(base.trace_hashes), want)
    counts = resample_counts(base.trace_hashes)
    assert counts.shape == (BOOTSTRAP, n) and (counts.sum(axis=1) == n).all()
    assert np.array_equal(counts[5], np.bincount(want[5], minlength=n))
    # a setting's interval does not depend on the settings beside it, nor on their order
    alone = [paired(base, s) for s in settings]
    assert paired_many(base, settings) == alone
    assert paired_many(base, settings[::-1]) == alone[::-1]
    np.random.seed(3)  # no global state
    assert paired_many(base, settings[2:4]) == alone[2:4]


def test_percentile_rows_is_numpys_percentile_bit_for_bit():
    rng = np.random.Generator(np.random.PCG64(2))
    for width in (1, 2, 3, 40, 41, 1999, 2000):
        for q in (PERCENTILES, (0.0, 100.0), (50.0,), (0.1, 33.3, 99.9)):
            a = rng.normal(size=(17, width)) * 1e6
            a[:5] = np.round(a[:5])  # ties of integer values too
            a[5] = 7.0
            want = np.percentile(a, q, axis=1)
            assert np.array_equal(percentile_rows(a.copy(), q), want), (width, q)


def test_nothing_moves_nothing_drawn():
    base, settings = small_case(settings=1)
    assert paired_many(base, settings)[0]["tokens_saving_ci"] == [0.0, 0.0]
    assert paired_many(base, []) == []


def test_the_bootstraps_of_400_settings_stay_within_the_bare_kernels_cpu():
    """Issue 40: the paired bootstraps of 400 settings <= 1x the bare kernel's CPU on the same traces
    (``benchmarks/size_grid.py`` measures 500 runs). Here 300 SWE-like runs, each side the least CPU of
    three, and a generous 2x: the ratio is measured in one process, so load slows both sides alike."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    from kernel import Inputs, grid_20x20, kernel

    from scenarios.swe_like import generate_run
    from sim.engine.model import ReplayModel

    traces = [generate_run(7, i) for i in range(300)]
    limits, keeps = grid_20x20()
    x = Inputs(traces, [ReplayModel(t) for t in traces], keeps)
    cum = kernel(x, limits, np.asarray(keeps)).astype(np.float64)  # (settings, runs) cumulative input
    hashes = [f"sha256:{i:064x}" for i in range(len(traces))]
    top = cum.max(axis=0)
    base = result(hashes, top * 3, top, np.zeros(len(top)), np.zeros(len(top)), lim=None, keep=None)
    settings = [result(hashes, c * 3, c, np.zeros(len(c)), np.zeros(len(c))) for c in cum]
    assert len(settings) >= 395

    def least(job) -> float:
        times = []
        for _ in range(3):
            t0 = time.process_time()
            job()
            times.append(time.process_time() - t0)
        return min(times)

    bare = least(lambda: kernel(x, limits, np.asarray(keeps)))
    boot = least(lambda: paired_many(base, settings))
    assert boot <= 2.0 * bare, f"bootstraps {boot:.3f} s, kernel {bare:.3f} s: {boot / bare:.2f}x"
