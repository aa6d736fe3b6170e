"""What ``ctxsim size`` adds beside its verdict on the seed engine's settings: runaway budgets from the runs
without compaction, and whether ``keep_recent_tokens`` holds the tool results a later action needs."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from sim.analysis.paired import percentile_rows
from sim.analysis.setting_results import SettingResult
from sim.core.types import Trace


def _round_up(v: float) -> int:
    """Up to two significant digits: a budget is a round number a harness engineer can type."""
    if v <= 0:
        return 0
    step = 10 ** max(int(math.floor(math.log10(v))) - 1, 0)
    return int(math.ceil(v / step) * step)


def runaway_budgets(base: SettingResult) -> dict:
    """``token_budget`` and ``cost_budget_microusd`` as runaway stops: twice the p99 of the runs without
    compaction (every call's input + output, as the seed engine counts; and the cost), rounded up, with
    how many of these runs each would stop (none, unless a run is far beyond the rest)."""
    tokens = base.tokens + (base.output if base.output is not None else 0)
    p99 = percentile_rows(np.array([tokens, base.cost], dtype=np.float64), (99,))[0]  # np.percentile's
    p99_tokens, p99_cost = float(p99[0]), float(p99[1])
    tb, cb = _round_up(2 * p99_tokens), _round_up(2 * p99_cost)
    return {
        "token_budget": tb,
        "cost_budget_microusd": cb,
        "p99_tokens": round(p99_tokens),
        "p99_cost_microusd": round(p99_cost),
        "runs_stopped_by_token_budget": int((tokens > tb).sum()),
        "runs_stopped_by_cost_budget": int((base.cost > cb).sum()),
    }


def load_bearing_results(traces: Sequence[Trace]) -> list[int]:
    """Sizes (tokens) of the tool results that provide a fact a later event needs: what a compaction's
    recent window must hold whole for the next action to find its fact without a re-read."""
    from sim.information.state import has_needs, live_needs

    sizes = []
    for t in traces:
        # nothing needed, nothing load-bearing (a trace read as columns knows it without its events)
        if isinstance(t, Trace) and not t.derived("has_needs", has_needs):
            continue
        needed: set[str] = set()
        live = t.derived("live_needs", live_needs)  # a need on a superseded fact is none
        for e in reversed(t.events):
            if e.kind == "tool_result" and any(f in needed for f in e.provides):
                sizes.append(int(e.tokens))
            needed.update(live[e.index])
    return sizes


def keep_check(sizes: Sequence[int], keep: int | None) -> dict | None:
    """Whether ``keep_recent_tokens`` holds the p90 load-bearing result whole (None without results)."""
    if not sizes:
        return None
    p90 = int(np.percentile(np.array(sizes, dtype=np.float64), 90))
    out = {"load_bearing_results": len(sizes), "p90_tokens": p90, "max_tokens": int(max(sizes))}
    if keep is not None:
        out["keep_recent_tokens"] = keep
        out["holds_p90"] = keep >= p90
    return out


def rules_text(budgets: dict, keep: dict | None) -> str:
    """The seed's sizing rules as a few lines for people."""
    lines = [
        f"runaway stops: token_budget={budgets['token_budget']} and cost_budget_microusd="
        f"{budgets['cost_budget_microusd']} (${budgets['cost_budget_microusd'] / 1e6:.2f}): twice the p99 "
        f"of these runs without compaction ({budgets['p99_tokens']:,} tokens, "
        f"${budgets['p99_cost_microusd'] / 1e6:.4f}); they would stop "
        f"{budgets['runs_stopped_by_token_budget']} and {budgets['runs_stopped_by_cost_budget']} of these "
        "runs"
    ]
    if keep is not None and "holds_p90" in keep:
        lines.append(
            f"keep_recent_tokens={keep['keep_recent_tokens']} "
            + ("holds" if keep["holds_p90"] else "does NOT hold")
            + f" the p90 load-bearing tool result whole ({keep['p90_tokens']:,} tokens; largest "
            f"{keep['max_tokens']:,}; {keep['load_bearing_results']:,} results a later action needs)"
        )
    elif keep is not None:
        lines.append(
            f"load-bearing tool results: p90 {keep['p90_tokens']:,} tokens, largest {keep['max_tokens']:,} "
            f"({keep['load_bearing_results']:,} results a later action needs): a keep_recent_tokens below "
            "the p90 cannot hold the latest one whole"
        )
    return "\n".join(lines)
