"""``ctxsim size``: which ``context_token_limit`` and ``keep_recent_tokens`` to ship, from the user's own
traces. Grid search over the two knobs (the seed engine's by default); every setting replays every trace;
the recommendation is the cheapest setting whose answers complete in at least the target share of runs
and that never overflows the window, with bootstrap confidence intervals over traces (resampling whole
traces with a fixed-seed generator of this function's own, so the same inputs give the same intervals).
An Optuna search is not used: the grid is small and exhaustive, and its answer does not depend on a sampler.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from sim.errors import ConfigError
from sim.types import Trace

DEFAULT_LIMITS = (16000, 24000, 32000, 48000, 64000, 96000, 128000, 200000)
DEFAULT_KEEPS = (2000, 4000, 8000, 12000, 16000, 20000)
BOOTSTRAP = 1000
SEED = 20261130


@dataclass(frozen=True)
class SettingResult:
    context_token_limit: int
    keep_recent_tokens: int
    cost: np.ndarray  # per trace, micro-USD
    completed: np.ndarray  # per trace, bool
    overflow_runs: int

    @property
    def mean_cost_usd(self) -> float:
        return float(self.cost.mean()) / 1e6

    @property
    def completion(self) -> float:
        return float(self.completed.mean())


def evaluate(
    traces: Sequence[Trace],
    policy_name: str,
    limits: Sequence[int],
    keeps: Sequence[int],
    window: int | str | None,
    pricing: str | None,
    progress: Callable[[int, int], None] | None = None,
    on_missing: str = "refetch",
) -> list[SettingResult]:
    from sim.engine import replay_many
    from sim.metrics import compute_metrics_many
    from sim.model import ReplayModel
    from sim.policies.base import make_policy

    grid = [(lim, keep) for lim in limits for keep in keeps if keep < lim]
    if not grid:
        raise ConfigError("size: no setting with keep_recent_tokens < context_token_limit in the grid")
    out = []
    for n, (lim, keep) in enumerate(grid, start=1):
        policy = make_policy(policy_name, context_token_limit=lim, keep_recent_tokens=keep)
        costs, done, overflow = [], [], 0
        models = [ReplayModel(t, on_missing=on_missing) for t in traces]
        records = replay_many(traces, policy, models, window=window, pricing=pricing)
        for t, r, m in zip(traces, records, compute_metrics_many(records), strict=True):
            if m["cost_microusd"] is None:
                raise ConfigError(
                    f"size: trace {t.trace_id} (model {t.model!r}) has no price; choose one with --model"
                )
            costs.append(m["cost_microusd"])
            done.append(bool(m["answer_completed"]))
            overflow += r.finish_reason == "context-overflow"
        out.append(SettingResult(lim, keep, np.array(costs, dtype=np.float64), np.array(done), overflow))
        if progress:
            progress(n, len(grid))
    return out


def bootstrap_ci(values: np.ndarray, rng: np.random.Generator, n: int = BOOTSTRAP) -> tuple[float, float]:
    """95% percentile interval of the mean, resampling traces with replacement."""
    idx = rng.integers(0, len(values), size=(n, len(values)))
    means = values[idx].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return float(lo), float(hi)


def recommend(results: list[SettingResult], target: float, policy_name: str) -> dict:
    """The cheapest eligible setting, its intervals, the runners-up and one sentence of advice."""
    eligible = [r for r in results if r.completion >= target and r.overflow_runs == 0]
    ranked = sorted(
        eligible, key=lambda r: (r.mean_cost_usd, -r.completion, r.context_token_limit, r.keep_recent_tokens)
    )
    if not ranked:
        best_c = max(results, key=lambda r: (r.completion, -r.mean_cost_usd))
        return {
            "policy": policy_name,
            "recommended": None,
            "advice": (
                f"No setting completes {target:.0%} of answers without overflow; the best completes "
                f"{best_c.completion:.0%} (context_token_limit={best_c.context_token_limit}, "
                f"keep_recent_tokens={best_c.keep_recent_tokens}). Widen the grid or lower the target."
            ),
            "target_completion": target,
            "settings": len(results),
        }
    best = ranked[0]
    rng = np.random.Generator(np.random.PCG64(SEED))
    cost_ci = tuple(round(v / 1e6, 6) for v in bootstrap_ci(best.cost, rng))
    completion_ci = tuple(round(v, 4) for v in bootstrap_ci(best.completed.astype(np.float64), rng))

    def brief(r: SettingResult) -> dict:
        return {
            "context_token_limit": r.context_token_limit,
            "keep_recent_tokens": r.keep_recent_tokens,
            "mean_cost_usd": round(r.mean_cost_usd, 6),
            "completion": round(r.completion, 4),
        }

    runners = [brief(r) for r in ranked[1:4]]
    saving = ""
    if len(ranked) > 1 and ranked[1].mean_cost_usd > 0:
        saving = f", {1 - best.mean_cost_usd / ranked[1].mean_cost_usd:.1%} cheaper than the runner-up"
    advice = (
        f"Ship context_token_limit={best.context_token_limit} with keep_recent_tokens="
        f"{best.keep_recent_tokens}: ${best.mean_cost_usd:.4f} per run (95% CI ${cost_ci[0]:.4f}-"
        f"${cost_ci[1]:.4f}), answers completed in {best.completion:.0%} of runs (95% CI "
        f"{completion_ci[0]:.0%}-{completion_ci[1]:.0%}){saving}."
    )
    return {
        "policy": policy_name,
        "recommended": {
            "context_token_limit": int(best.context_token_limit),
            "keep_recent_tokens": int(best.keep_recent_tokens),
        },
        "mean_cost_usd": round(best.mean_cost_usd, 6),
        "completion": round(best.completion, 4),
        "cost_ci": list(cost_ci),
        "completion_ci": list(completion_ci),
        "runners_up": runners,
        "advice": advice,
        "target_completion": target,
        "settings": len(results),
        "eligible_settings": len(eligible),
        "traces": int(len(best.cost)),
    }


def settings_from_results(path) -> list[SettingResult]:
    """The per-setting arrays of a sweep's results.parquet over the two knobs (rows in trace order)."""
    import pandas as pd

    df = pd.read_parquet(path)
    keys = ["policy.context_token_limit", "policy.keep_recent_tokens"]
    if not set(keys) <= set(df.columns):
        raise ConfigError(f"{path}: not a sweep over context_token_limit and keep_recent_tokens")
    if df["cost_microusd"].isna().any():
        raise ConfigError(f"{path}: some runs have no cost (unpriced model); sweep with pricing=MODEL")
    out = []
    for (lim, keep), g in df.sort_values(["trace_hash", "trace_id"]).groupby(keys, sort=True):
        out.append(
            SettingResult(
                int(lim),
                int(keep),
                g["cost_microusd"].to_numpy(dtype=np.float64),
                g["answer_completed"].to_numpy(dtype=bool),
                int((g["finish_reason"] == "context-overflow").sum()),
            )
        )
    return out
