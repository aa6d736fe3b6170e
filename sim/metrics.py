"""Run metrics: one definition each, pure functions of a RunRecord. Names are result column names."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from sim.records import COMPACTION_KINDS, REFETCH, RETRIEVE, SUMMARY, RunRecord


def calls(r: RunRecord) -> int:
    return r.n_calls


def cumulative_input_tokens(r: RunRecord) -> int:
    """Sum of input tokens over all calls: the quadratic quantity."""
    return r.total("input_tokens")


def cumulative_output_tokens(r: RunRecord) -> int:
    return r.total("output_tokens")


def peak_context_tokens(r: RunRecord) -> int:
    """Largest request of the run, in input tokens (what a window must hold before output)."""
    return r.largest("input_tokens")


def growth_exponent(r: RunRecord) -> float | None:
    """Slope of log(cumulative input) on log(call number) over the second half of the calls.

    Raw long runs approach 2 (each call re-sends a growing history); bounded views approach 1.
    None for runs of fewer than 4 calls, where a half has too few points for a slope.
    """
    return growth_exponents(r.calls["input_tokens"], np.array([0, r.n_calls]))[0]


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
    positive = cum[np.cumsum(half) - half] > 0  # cumulative sums only grow: the first is the smallest
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = np.bincount(seg, dx * np.log(cum)) / sxx
    for j, v, ok in zip(runs.tolist(), slope.tolist(), positive.tolist(), strict=True):
        if ok and math.isfinite(v):
            out[j] = round(v, 6)
    return out


def cache_read_tokens(r: RunRecord) -> int:
    """Input tokens read from the prompt cache (modelled, sim.cache)."""
    return r.total("cache_read_tokens")


def cache_write_tokens(r: RunRecord) -> int:
    """Input tokens written to the cache at the write price (families with explicit writes)."""
    return r.total("cache_write_tokens")


def uncached_input_tokens(r: RunRecord) -> int:
    return r.total("uncached_input_tokens")


def cache_hit_rate(r: RunRecord) -> float | None:
    """cache_read_tokens / cumulative_input_tokens."""
    total = cumulative_input_tokens(r)
    return round(cache_read_tokens(r) / total, 6) if total else None


def cost_microusd(r: RunRecord) -> int | None:
    """Cache-aware cost in micro-USD at the priced model's rates; None when the model has no price
    (the engine prices every row of a priced run, and none of an unpriced one)."""
    return None if r.pricing is None else r.total("cost_microusd")


def _ledger(field: str) -> Callable[[RunRecord], int]:
    def value(r: RunRecord) -> int:
        return getattr(r.ledger, field)

    value.__name__ = field
    value.__doc__ = f"Ledger total {field} at the end of the run (sim.ledger)."
    return value


LEDGER_FIELDS = (
    "facts_seen",
    "facts_verbatim",
    "facts_derived",
    "facts_spilled",
    "facts_lost",
    "tokens_seen",
    "tokens_verbatim",
    "tokens_derived",
    "tokens_spilled",
    "tokens_lost",
)


def refetch_calls(r: RunRecord) -> int:
    """Extra calls re-running a tool call whose result the view had lost (trajectory elongation)."""
    return r.kind_count(REFETCH)


def retrieve_calls(r: RunRecord) -> int:
    """Extra calls reading spilled content back through its handle."""
    return r.kind_count(RETRIEVE)


def answer_fact_recall(r: RunRecord) -> float:
    """Share of the final answer's needed facts available or recoverable when it was given."""
    return round(r.answer_needs_met / r.answer_needs, 6) if r.answer_needs else 1.0


def answer_completed(r: RunRecord) -> bool:
    """Reached the final answer within budgets, no action went ahead blind, every needed fact there."""
    return r.finish_reason == "completed" and not r.degraded and r.answer_needs_met == r.answer_needs


def compactions(r: RunRecord) -> int:
    """Compactions: one per (call, kind) in which a policy transformed items (settle-time cuts included)."""
    return len(r.compactions["kind"])


def _compactions_of(kind: str) -> Callable[[RunRecord], int]:
    code = COMPACTION_KINDS.index(kind)

    def count(r: RunRecord) -> int:
        return r.compactions["kind"].tolist().count(code)

    count.__name__ = f"compactions_{kind}"
    count.__doc__ = f"Compactions of kind {kind}."
    return count


def compaction_frequency(r: RunRecord) -> float:
    """Compactions per 100 calls."""
    return round(100 * compactions(r) / r.n_calls, 4) if r.n_calls else 0.0


def tokens_reclaimed(r: RunRecord) -> int:
    """Tokens the compactions took out of the view when they happened (summaries net of their size)."""
    return sum(r.compactions["tokens_reclaimed"].tolist())


def summary_calls(r: RunRecord) -> int:
    return r.kind_count(SUMMARY)


def summary_tokens(r: RunRecord) -> int:
    """Output tokens of the summary calls: the summaries' own size."""
    if not r.kind_count(SUMMARY):
        return 0
    return sum(o for k, o in zip(r.column("kind"), r.column("output_tokens"), strict=True) if k == SUMMARY)


def exhausted(r: RunRecord) -> bool:
    """The run stopped on a budget (turns, tool calls, tokens, cost or duration)."""
    return r.finish_reason.startswith("budget-exhausted")


def warnings(r: RunRecord) -> int:
    """Budget warnings (one per dimension, at 80%)."""
    return len(r.warnings)


METRICS: dict[str, Callable[[RunRecord], object]] = {
    "calls": calls,
    "cumulative_input_tokens": cumulative_input_tokens,
    "cumulative_output_tokens": cumulative_output_tokens,
    "peak_context_tokens": peak_context_tokens,
    "growth_exponent": growth_exponent,
    "cache_read_tokens": cache_read_tokens,
    "cache_write_tokens": cache_write_tokens,
    "uncached_input_tokens": uncached_input_tokens,
    "cache_hit_rate": cache_hit_rate,
    "cost_microusd": cost_microusd,
    "compactions": compactions,
    **{f"compactions_{k}": _compactions_of(k) for k in COMPACTION_KINDS},
    "compaction_frequency": compaction_frequency,
    "tokens_reclaimed": tokens_reclaimed,
    "summary_calls": summary_calls,
    "summary_tokens": summary_tokens,
    "exhausted": exhausted,
    "warnings": warnings,
    **{f: _ledger(f) for f in LEDGER_FIELDS},
    "refetch_calls": refetch_calls,
    "retrieve_calls": retrieve_calls,
    "answer_completed": answer_completed,
    "answer_fact_recall": answer_fact_recall,
}


# metrics with a form computed over many records at once (name -> records -> one value per record)
BATCHED: dict[str, Callable[[Sequence[RunRecord]], list]] = {
    "growth_exponent": lambda rs: growth_exponents(
        np.concatenate([r.calls["input_tokens"] for r in rs]),
        np.cumsum([0] + [r.n_calls for r in rs]),
    ),
}


def compute_metrics(r: RunRecord) -> dict[str, object]:
    return {name: fn(r) for name, fn in METRICS.items()}


def compute_metrics_many(records: Sequence[RunRecord]) -> list[dict[str, object]]:
    """``[compute_metrics(r) for r in records]``, with the BATCHED metrics computed for all at once."""
    records = list(records)
    if not records:
        return []
    batched = {name: f(records) for name, f in BATCHED.items()}
    plan = [(name, None if name in batched else fn) for name, fn in METRICS.items()]
    return [
        {name: batched[name][j] if fn is None else fn(r) for name, fn in plan} for j, r in enumerate(records)
    ]
