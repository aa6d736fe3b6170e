"""Run metrics: one definition each, pure functions of a RunRecord. Names are result column names."""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache
from itertools import accumulate
from math import log

from sim.records import COMPACTION_KINDS, REFETCH, RETRIEVE, SUMMARY, RunRecord


def calls(r: RunRecord) -> int:
    return r.n_calls


def cumulative_input_tokens(r: RunRecord) -> int:
    """Sum of input tokens over all calls: the quadratic quantity."""
    return sum(r.column("input_tokens"))


def cumulative_output_tokens(r: RunRecord) -> int:
    return sum(r.column("output_tokens"))


def peak_context_tokens(r: RunRecord) -> int:
    """Largest request of the run, in input tokens (what a window must hold before output)."""
    return max(r.column("input_tokens"), default=0)


def growth_exponent(r: RunRecord) -> float | None:
    """Slope of log(cumulative input) on log(call number) over the second half of the calls.

    Raw long runs approach 2 (each call re-sends a growing history); bounded views approach 1.
    None for runs of fewer than 4 calls, where a half has too few points for a slope.
    """
    n = r.n_calls
    if n < 4:
        return None
    lo = n // 2
    cum = list(accumulate(r.column("input_tokens")))[lo:]
    if cum[0] <= 0:  # cumulative sums only grow, so the first is the smallest
        return None
    dx, sxx = _centred_log_calls(lo, n)
    # slope = sum(dx * (y - ym)) / sum(dx^2), and sum(dx) = 0 drops ym; plain floats: a run's calls
    # are few, and numpy's per-operation cost would dominate
    slope = sum(d * log(c) for d, c in zip(dx, cum, strict=True)) / sxx
    return round(slope, 6) if math.isfinite(slope) else None


@lru_cache(maxsize=4096)
def _centred_log_calls(lo: int, n: int) -> tuple[tuple[float, ...], float]:
    """log(call number) for calls lo+1 .. n, centred, and their sum of squares (depends on n only)."""
    xs = [log(k) for k in range(lo + 1, n + 1)]
    xm = sum(xs) / len(xs)
    dx = tuple(x - xm for x in xs)
    return dx, sum(d * d for d in dx)


def cache_read_tokens(r: RunRecord) -> int:
    """Input tokens read from the prompt cache (modelled, sim.cache)."""
    return sum(r.column("cache_read_tokens"))


def cache_write_tokens(r: RunRecord) -> int:
    """Input tokens written to the cache at the write price (families with explicit writes)."""
    return sum(r.column("cache_write_tokens"))


def uncached_input_tokens(r: RunRecord) -> int:
    return sum(r.column("uncached_input_tokens"))


def cache_hit_rate(r: RunRecord) -> float | None:
    """cache_read_tokens / cumulative_input_tokens."""
    total = cumulative_input_tokens(r)
    return round(cache_read_tokens(r) / total, 6) if total else None


def cost_microusd(r: RunRecord) -> int | None:
    """Cache-aware cost in micro-USD at the priced model's rates; None when the model has no price."""
    c = r.column("cost_microusd")
    return None if r.pricing is None or min(c, default=0) < 0 else sum(c)


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
    return r.column("kind").count(REFETCH)


def retrieve_calls(r: RunRecord) -> int:
    """Extra calls reading spilled content back through its handle."""
    return r.column("kind").count(RETRIEVE)


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
    return r.column("kind").count(SUMMARY)


def summary_tokens(r: RunRecord) -> int:
    """Output tokens of the summary calls: the summaries' own size."""
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


def compute_metrics(r: RunRecord) -> dict[str, object]:
    return {name: fn(r) for name, fn in METRICS.items()}
