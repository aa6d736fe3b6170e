"""Summaries of a sweep's ``results.parquet``: one row per policy setting, the numbers a study compares.

Totals are ratios of sums (cache hit rate = Σ cache reads ÷ Σ input), not means of per-run ratios, so a
long run weighs as much as the tokens it spends; cost is given as median and mean per run because its
distribution over runs is skewed.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from sim.util.errors import ConfigError

SUMMARY_METRICS = (
    "runs",
    "median_cost_usd",
    "mean_cost_usd",
    "cumulative_input_tokens",
    "cache_hit_rate",
    "compactions",
    "facts_lost",
    "answer_completed",
)


def plain_value(v: Any) -> Any:
    """A plain Python value for a table cell: missing → None, numpy scalars → int/float/bool."""
    import pandas as pd

    if v is None or v is pd.NA or v is pd.NaT:
        return None
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def exact_sum(col) -> int:
    """Σ of an integer column as a Python int: pandas sums int64 and wraps silently past 2^63 (a sweep
    of many long runs can get there); missing cells count 0."""
    values = col.dropna()
    if not len(values):
        return 0
    top = max(int(values.max()), -int(values.min()))
    if top * len(values) < 1 << 62:
        return int(values.sum())
    return sum(int(v) for v in values)


def value_sort_key(v: Any) -> tuple:
    """Numbers numerically, then strings, missing last: 16000 before 96000, never '16000' < '9000'."""
    if v is None:
        return (2, 0.0, "")
    if isinstance(v, bool | int | float):
        return (0, float(v), "")
    return (1, 0.0, str(v))


def results_file(path: str | Path) -> Path:
    """A sweep folder stands for its ``results.parquet``."""
    p = Path(path)
    if p.is_dir():
        p = p / "results.parquet"
    if not p.is_file():
        raise ConfigError(f"results: {p}: no such file (run `ctxsim sweep` first)")
    return p


# What a sweep's results.parquet holds that a summary reads: column -> "number" | "bool" | "text".
SUMMARY_COLUMNS = {
    "policy": "text",
    "cost_microusd": "number",
    "cumulative_input_tokens": "number",
    "cache_read_tokens": "number",
    "compactions": "number",
    "facts_lost": "number",
    "answer_completed": "bool",
}


def read_results(path: str | Path, required: dict[str, str] = SUMMARY_COLUMNS):
    """A sweep's results as a DataFrame, or ConfigError (exit 2) naming the file and what is wrong: not a
    Parquet file, a column missing, or a column of the wrong type (a summary would otherwise crash)."""
    import pandas as pd
    import pyarrow as pa

    f = results_file(path)
    try:
        # nullable dtypes keep int knobs with gaps as ints (a float 16000.0 would print and sort oddly)
        df = pd.read_parquet(f, dtype_backend="numpy_nullable")
    except (pa.ArrowException, OSError, ValueError) as exc:
        first = (str(exc).splitlines() or [type(exc).__name__])[0][:200]
        raise ConfigError(f"results: {f}: not a readable Parquet file of sweep results ({first})") from None
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise ConfigError(
            f"results: {f}: not sweep results (a results.parquet of `ctxsim sweep`): no column "
            + ", ".join(missing)
        )
    for col, kind in required.items():
        series = df[col]
        if kind == "text" or series.isna().all():
            continue
        ok = (
            pd.api.types.is_bool_dtype(series)
            if kind == "bool"
            else pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series)
        )
        if not ok:
            raise ConfigError(f"results: {f}: column {col}: expected {kind}s, got {series.dtype}")
    return df


def setting_columns(columns) -> list[str]:
    """What names a policy setting: the policy and every knob, in the file's order, and the mock model's
    summarizer and ``model.on_missing`` where the results record them (an ``oracle`` summary is an upper
    bound, never pooled with an ``extractive`` one; an agent that fails on a missing fact is never pooled
    with one that re-reads it)."""
    return [
        "policy",
        *(c for c in columns if c.startswith("policy.")),
        *(["summarizer"] if "summarizer" in columns else []),
        *(["model.on_missing"] if "model.on_missing" in columns else []),
    ]


def summary(path: str | Path) -> list[dict[str, Any]]:
    """Per policy setting (``policy`` + every ``policy.*`` column): ``runs``, ``median_cost_usd`` and
    ``mean_cost_usd`` (None when any run of the setting is unpriced: a partial sum would mislead),
    ``cumulative_input_tokens`` (sum), ``cache_hit_rate`` (Σ reads ÷ Σ input), ``compactions`` (mean per
    run), ``facts_lost`` (sum), ``answer_completed`` (share of runs). Sorted by the setting's values."""
    return summarize(read_results(path))


def summarize(df) -> list[dict[str, Any]]:
    """``summary`` of results already read (``read_results``)."""
    keys = setting_columns(df.columns)
    out: list[dict[str, Any]] = []
    for values, g in df.groupby(keys, dropna=False, sort=False):
        values = values if isinstance(values, tuple) else (values,)
        row: dict[str, Any] = {k: plain_value(v) for k, v in zip(keys, values, strict=True)}
        cost = g["cost_microusd"]
        priced = len(g) > 0 and not cost.isna().any()
        ci = exact_sum(g["cumulative_input_tokens"])
        row.update(
            {
                "runs": len(g),
                "median_cost_usd": float(cost.median()) / 1e6 if priced else None,
                "mean_cost_usd": float(cost.mean()) / 1e6 if priced else None,
                "cumulative_input_tokens": ci,
                "cache_hit_rate": exact_sum(g["cache_read_tokens"]) / ci if ci else None,
                "compactions": float(g["compactions"].mean()),
                "facts_lost": exact_sum(g["facts_lost"]),
                "answer_completed": float(g["answer_completed"].astype("float64").mean()),
            }
        )
        out.append(row)
    out.sort(key=lambda r: tuple(value_sort_key(r[k]) for k in keys))
    return out


def varying_columns(rows: list[dict[str, Any]]) -> list[str]:
    """The setting columns that differ between rows (plus ``policy``): what a table needs to show."""
    if not rows:
        return ["policy"]
    keys = setting_columns(rows[0])
    return ["policy", *(k for k in keys[1:] if len({repr(r.get(k)) for r in rows}) > 1)]
