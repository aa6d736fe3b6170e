"""Run metrics: one definition each, pure functions of a RunRecord. Names are result column names."""

from __future__ import annotations

import math
from collections.abc import Callable
from itertools import accumulate
from math import log

from sim.records import RunRecord


def calls(r: RunRecord) -> int:
    return r.n_calls


def cumulative_input_tokens(r: RunRecord) -> int:
    """Sum of input tokens over all calls: the quadratic quantity."""
    return int(r.calls["input_tokens"].sum())


def cumulative_output_tokens(r: RunRecord) -> int:
    return int(r.calls["output_tokens"].sum())


def peak_context_tokens(r: RunRecord) -> int:
    """Largest request of the run, in input tokens (what a window must hold before output)."""
    x = r.calls["input_tokens"]
    return int(x.max()) if len(x) else 0


def growth_exponent(r: RunRecord) -> float | None:
    """Slope of log(cumulative input) on log(call number) over the second half of the calls.

    Raw long runs approach 2 (each call re-sends a growing history); bounded views approach 1.
    None for runs of fewer than 4 calls, where a half has too few points for a slope.
    """
    n = r.n_calls
    if n < 4:
        return None
    lo = n // 2
    cum = list(accumulate(r.calls["input_tokens"].tolist()))[lo:]
    if cum[0] <= 0:  # cumulative sums only grow, so the first is the smallest
        return None
    # plain floats: a run's calls are few, and numpy's per-operation cost would dominate
    ys = [log(c) for c in cum]
    xs = [log(k) for k in range(lo + 1, n + 1)]
    m = n - lo
    xm, ym = sum(xs) / m, sum(ys) / m
    num = sum((x - xm) * (y - ym) for x, y in zip(xs, ys, strict=True))
    den = sum((x - xm) ** 2 for x in xs)
    slope = num / den
    return round(slope, 6) if math.isfinite(slope) else None


METRICS: dict[str, Callable[[RunRecord], object]] = {
    "calls": calls,
    "cumulative_input_tokens": cumulative_input_tokens,
    "cumulative_output_tokens": cumulative_output_tokens,
    "peak_context_tokens": peak_context_tokens,
    "growth_exponent": growth_exponent,
}


def compute_metrics(r: RunRecord) -> dict[str, object]:
    return {name: fn(r) for name, fn in METRICS.items()}
