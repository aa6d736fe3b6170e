"""The growth exponent's arithmetic over runs laid end to end (``sim.metrics.compute.growth_exponent`` defines
the metric; a batch replay computes it for all its runs from its call table)."""

from __future__ import annotations

import numpy as np

from sim.core.rounding import round_all
from sim.core.segments import owners, positions
from sim.util.batchmemo import shape_derived


def growth_exponents(inputs: np.ndarray, bounds: np.ndarray) -> list[float | None]:
    """``growth_exponent`` of runs laid end to end (run j: rows [bounds[j], bounds[j + 1])), in one pass.
    Least squares with x = log(call number) centred over the half: slope = sum(dx * y) / sum(dx^2)
    (sum(dx) = 0 drops y's mean). Sums run in row order, as a plain loop would add them."""
    out: list[float | None] = [None] * (len(bounds) - 1)
    x = shape_derived("growth", bounds, _x_side)
    if x is None:
        return out
    runs, seg, start, through, dx, sxx = x
    running = np.zeros(len(inputs) + 1, dtype=np.int64)
    np.cumsum(inputs, out=running[1:])
    cum = running[through] - running[start]  # cumulative input through each call
    # log of a non-positive cumulative sum is NaN, and so is that run's slope: no exponent (sxx > 0, as
    # half >= 2 gives distinct x)
    if len(cum) and cum.min() > 0:
        log_cum = np.log(cum)
    else:
        log_cum = np.full(len(cum), np.nan)
        np.log(cum, out=log_cum, where=cum > 0)
    slope = np.bincount(seg, dx * log_cum) / sxx
    finite = np.isfinite(slope)
    if len(runs) == len(out) and finite.all():  # every run has its slope
        return round_all(slope, 6)
    for j, v in zip(runs[finite].tolist(), round_all(slope[finite], 6), strict=True):
        out[j] = v
    return out


def _x_side(bounds: np.ndarray) -> tuple | None:
    """What the slopes need besides the inputs, a function of the run bounds only (so kept for the next
    batch with the same bounds): the runs with a slope, each second-half row's run (its segment), the
    rows its cumulative sum starts before and runs through, and the centred log call numbers with
    their sum of squares per run."""
    n = np.diff(bounds)
    runs = np.flatnonzero(n >= 4)
    x_side = None
    if len(runs):
        lo = n[runs] // 2
        half = n[runs] - lo  # rows in each run's second half
        seg = owners(half)
        call_number = np.repeat(lo + 1, half) + positions(half)
        start = np.repeat(bounds[runs], half)
        x = np.log(call_number)
        dx = x - (np.bincount(seg, x) / half)[seg]
        x_side = (runs, seg, start, start + call_number, dx, np.bincount(seg, dx * dx))
        for a in x_side:
            a.setflags(write=False)
    return x_side
