"""The growth exponent's arithmetic over runs laid end to end (``sim.metrics.growth_exponent`` defines
the metric; a batch replay computes it for all its runs from its call table)."""

from __future__ import annotations

import numpy as np

from sim.rounding import round_all


def growth_exponents(inputs: np.ndarray, bounds: np.ndarray) -> list[float | None]:
    """``growth_exponent`` of runs laid end to end (run j: rows [bounds[j], bounds[j + 1])), in one pass.
    Least squares with x = log(call number) centred over the half: slope = sum(dx * y) / sum(dx^2)
    (sum(dx) = 0 drops y's mean). Sums run in row order, as a plain loop would add them."""
    n = np.diff(bounds)
    out: list[float | None] = [None] * len(n)
    runs = np.flatnonzero(n >= 4)
    if not len(runs):
        return out
    lo = n[runs] // 2
    half = n[runs] - lo  # rows in each run's second half
    seg = np.repeat(np.arange(len(runs)), half)
    offset = np.arange(len(seg)) - np.repeat(np.cumsum(half) - half, half)
    call_number = np.repeat(lo + 1, half) + offset
    running = np.zeros(len(inputs) + 1, dtype=np.int64)
    np.cumsum(inputs, out=running[1:])
    start = np.repeat(bounds[runs], half)
    cum = running[start + call_number] - running[start]  # cumulative input through each call
    x = np.log(call_number)
    dx = x - (np.bincount(seg, x) / half)[seg]
    sxx = np.bincount(seg, dx * dx)
    # log of a non-positive cumulative sum is NaN, and so is that run's slope: no exponent (sxx > 0, as
    # half >= 2 gives distinct x)
    log_cum = np.full(len(cum), np.nan)
    np.log(cum, out=log_cum, where=cum > 0)
    slope = np.bincount(seg, dx * log_cum) / sxx
    finite = np.isfinite(slope)
    for j, v in zip(runs[finite].tolist(), round_all(slope[finite], 6), strict=True):
        out[j] = v
    return out
