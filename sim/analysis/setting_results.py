"""One sizing setting's per-trace figures (``SettingResult``), from a replay of the grid
(``sim.analysis.size.evaluate``) or from a sweep's results (``settings_from_results``): what the paired
comparisons (``sim.analysis.paired``) and the verdict (``sim.analysis.verdict``) read."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.util.errors import ConfigError

# sim.metrics.compute.ANSWER_OUTCOMES, without importing it
OUTCOMES = ("complete", "grace", "degraded", "failed")


@dataclass(frozen=True)
class SettingResult:
    """One setting's per-trace figures, traces in the same order for every setting of a sizing."""

    context_token_limit: int | None  # None: the baseline (no compaction)
    keep_recent_tokens: int | None
    trace_hashes: tuple[str, ...]
    cost: np.ndarray  # micro-USD
    tokens: np.ndarray  # cumulative input tokens
    facts_seen: np.ndarray
    facts_lost: np.ndarray
    refetch: np.ndarray  # refetch_calls
    outcome: tuple[str, ...]  # answer_outcome
    completed: np.ndarray  # bool
    overflow_runs: int
    peak: np.ndarray  # peak_context_tokens
    compactions: np.ndarray
    output: np.ndarray | None = None  # cumulative output tokens (None: not read)
    # another policy's setting (``size --policy``): its grid knobs and values, in the grid's order (all
    # None: its baseline); empty for the seed engine's (limit, keep)
    knobs: tuple[tuple[str, int | float | None], ...] = ()
    # per grid knob, a number that grows as the setting acts less (the value, or minus it for a knob of
    # ``size_harsher``); empty for the seed engine's, whose (limit, keep) it is
    gentle: tuple[float, ...] = ()

    @property
    def is_baseline(self) -> bool:
        if self.knobs:
            return all(v is None for _, v in self.knobs)
        return self.context_token_limit is None

    @property
    def setting(self) -> dict:
        """The knobs as the JSON names them: the policy's own (the seed engine's limit and keep)."""
        if self.knobs:
            return dict(self.knobs)
        return {
            "context_token_limit": self.context_token_limit,
            "keep_recent_tokens": self.keep_recent_tokens,
        }

    @property
    def gentleness(self) -> tuple[float, ...]:
        """Larger acts less: the ranking's last tie-break prefers the gentler setting."""
        if self.knobs:
            return self.gentle
        return (self.context_token_limit or 0, self.keep_recent_tokens or 0)

    @property
    def label(self) -> str:
        if self.is_baseline:
            return "no compaction"
        return "/".join(str(v) for v in self.setting.values())

    @property
    def mean_cost_usd(self) -> float:
        return float(self.cost.mean()) / 1e6

    @property
    def completion(self) -> float:
        return float(self.completed.mean())

    @property
    def facts_lost_share(self) -> float:
        seen = float(self.facts_seen.sum())
        return float(self.facts_lost.sum()) / seen if seen else 0.0

    def same_as(self, other: SettingResult) -> bool:
        """Identical on every trace: cost, tokens, facts lost, refetches and outcome."""
        return (
            np.array_equal(self.cost, other.cost)
            and np.array_equal(self.tokens, other.tokens)
            and np.array_equal(self.facts_lost, other.facts_lost)
            and np.array_equal(self.refetch, other.refetch)
            and self.outcome == other.outcome
        )


def settings_from_results(path) -> list[SettingResult]:
    """The baseline (rows with context_token_limit unset) and every (limit, keep) of a sweep's
    results.parquet, rows in the order ``evaluate`` uses (trace hash, then id)."""
    import pandas as pd

    df = pd.read_parquet(path)
    return settings_from_frame(df, str(path))


def settings_from_frame(df, where: str) -> list[SettingResult]:
    keys = ["policy.context_token_limit", "policy.keep_recent_tokens"]
    if not set(keys) <= set(df.columns):
        raise ConfigError(f"{where}: not a sweep over context_token_limit and keep_recent_tokens")
    if df["cost_microusd"].isna().any():
        raise ConfigError(f"{where}: some runs have no cost (unpriced model); sweep with pricing=MODEL")
    df = df.sort_values(["trace_hash", "trace_id"], kind="stable")

    def one(g, lim, keep) -> SettingResult:
        def col(name: str) -> np.ndarray:
            return g[name].fillna(0).to_numpy(dtype=np.float64) if name in g else np.zeros(len(g))

        outcome = (
            tuple(str(v) for v in g["answer_outcome"])
            if "answer_outcome" in g
            else tuple("complete" if c else "failed" for c in g["answer_completed"])
        )
        return SettingResult(
            lim,
            keep,
            tuple(str(h) for h in g["trace_hash"]),
            col("cost_microusd"),
            col("cumulative_input_tokens"),
            col("facts_seen"),
            col("facts_lost"),
            col("refetch_calls"),
            outcome,
            g["answer_completed"].to_numpy(dtype=bool),
            int((g["finish_reason"] == "context-overflow").sum()),
            col("peak_context_tokens"),
            col("compactions"),
            col("cumulative_output_tokens"),
        )

    unset = df[keys[0]].isna()
    base_rows = df[unset]
    if base_rows.empty:
        raise ConfigError(
            f"{where}: no no-compaction setting (policy.context_token_limit=null) to compare with"
        )
    # the limit unset, keep_recent_tokens has no effect: one baseline (the first keep value)
    first_keep = sorted(base_rows[keys[1]].dropna().unique().tolist())[:1]
    if first_keep:
        base_rows = base_rows[base_rows[keys[1]] == first_keep[0]]
    out = [one(base_rows, None, None)]
    for (lim, keep), g in df[~unset].groupby(keys, sort=True):
        out.append(one(g, int(lim), int(keep)))
    return out
