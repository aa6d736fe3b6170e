"""The Complexity Trap's side: figures computed from its per-task CSVs, nothing modelled.

Definitions (the same for every strategy): a task's cumulative input is ``turn_count x
mean_prompt_tokens`` (the agent's calls; summary calls are not in it), its cost is ``cost +
summary_cost`` (the CSV's ``cost`` is the agent alone), the effective price per input token of a set of
tasks is their total cost over their total cumulative input. Comparisons with raw pair the tasks both
runs attempted (``instance_id`` in both experiments): ratios are of sums over those tasks, changes are
means of per-task differences. The published 95% intervals come from ``paired_ci_diffs_vs_raw.csv``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

TASKS_CSV = "experiment_instance_costs_sweagent.csv"
PAIRED_CSV = "paired_ci_diffs_vs_raw.csv"
COLUMNS = ("experiment", "strategy", "instance_id", "cost", "summary_cost", "summary_count", "turn_count",
           "mean_prompt_tokens", "mean_completion_tokens", "outcome")  # fmt: skip


@dataclass(frozen=True)
class Model:
    key: str  # the benchmark's name for it (JSON ``model``)
    label: str  # as the paper names it
    prefix: str  # its experiments' names start with this
    group: str  # its rows in the paired-differences CSV
    cache: bool  # billed with a provider's prompt cache (Gemini) or at a flat local price (Qwen)


MODELS = (
    Model("gemini-2.5-flash", "Gemini 2.5 Flash", "gemini_2.5_flash-agent", "(a) Gemini 2.5 Flash", True),
    Model(
        "gemini-2.5-flash-thinking",
        "Gemini 2.5 Flash (thinking)",
        "gemini_2.5_flash_thinking-agent",
        "(b) Gemini 2.5 Flash (Thinking)",
        True,
    ),
    Model(
        "qwen3-coder-480b", "Qwen3-Coder-480B", "local-Qwen3-Coder_480B_A35B", "(c) Qwen3-Coder 480B", False
    ),
    Model("qwen3-32b", "Qwen3-32B", "local-qwen3-32b-", "(d) Qwen3-32B", False),
    Model(
        "qwen3-32b-thinking",
        "Qwen3-32B (thinking)",
        "local-Qwen3-32B_thinking",
        "(e) Qwen3-32B (Thinking)",
        False,
    ),
)
STRATEGIES = {"raw": "Raw Agent", "masking": "Observation Masking", "summary": "LLM-Summary"}


def model_named(key: str) -> Model:
    for m in MODELS:
        if m.key == key:
            return m
    raise KeyError(key)


def read_tasks(folder: Path) -> pd.DataFrame:
    """The per-task rows of the five models' raw, masking and summary runs, with ``model`` and
    ``strategy_key`` columns (the 50-task hybrid runs are left out: no raw run pairs with them)."""
    df = pd.read_csv(Path(folder) / TASKS_CSV, usecols=list(COLUMNS))
    by_strategy = {v: k for k, v in STRATEGIES.items()}
    df["strategy_key"] = df["strategy"].map(by_strategy)
    df["model"] = None
    for m in MODELS:
        df.loc[df["experiment"].str.startswith(m.prefix), "model"] = m.key
    df = df[df["model"].notna() & df["strategy_key"].notna()].copy()
    df["cumulative_input"] = df["turn_count"] * df["mean_prompt_tokens"]
    df["cumulative_output"] = df["turn_count"] * df["mean_completion_tokens"]
    df["total_cost"] = df["cost"] + df["summary_cost"]
    return df.reset_index(drop=True)


def read_paired(folder: Path) -> pd.DataFrame:
    return pd.read_csv(Path(folder) / PAIRED_CSV)


def strategy_rows(df: pd.DataFrame, model: str, strategy: str) -> pd.DataFrame:
    return df[(df["model"] == model) & (df["strategy_key"] == strategy)]


def figures(rows: pd.DataFrame) -> dict[str, float]:
    """Per-task means and the effective price of one strategy's tasks."""
    cum, cost = float(rows["cumulative_input"].sum()), float(rows["total_cost"].sum())
    return {
        "tasks": len(rows),
        "turns": float(rows["turn_count"].mean()),
        "cumulative_input": float(rows["cumulative_input"].mean()),
        "cost": float(rows["total_cost"].mean()),
        "price_per_input_token": cost / cum * 1e6 if cum else float("nan"),  # USD per million
        "summary_cost_share": float(rows["summary_cost"].sum()) / cost if cost else 0.0,
        "solve_rate": float(rows["outcome"].mean()),
    }


def paired(raw: pd.DataFrame, other: pd.DataFrame) -> dict[str, float]:
    """``other`` against raw on their common tasks."""
    j = raw.merge(other, on="instance_id", suffixes=("_raw", "_other"))
    sums = {k: (float(j[f"{k}_other"].sum()), float(j[f"{k}_raw"].sum())) for k in
            ("cumulative_input", "total_cost", "turn_count")}  # fmt: skip
    ratio = {k: o / r if r else float("nan") for k, (o, r) in sums.items()}
    return {
        "common_tasks": len(j),
        "cumulative_input_vs_raw": ratio["cumulative_input"],
        "cost_vs_raw": ratio["total_cost"],
        "turns_vs_raw": ratio["turn_count"],
        "price_per_input_token_vs_raw": ratio["total_cost"] / ratio["cumulative_input"],
        "solve_change": float((j["outcome_other"] - j["outcome_raw"]).mean()),
        "cost_change": float((j["total_cost_other"] - j["total_cost_raw"]).mean()),
    }


def published_ci(paired_df: pd.DataFrame, model: Model, strategy: str) -> tuple[float, float] | None:
    """The paper's bootstrapped 95% interval of the solve-rate change, as a fraction."""
    r = paired_df[(paired_df["group"] == model.group) & (paired_df["strategy"] == STRATEGIES[strategy])]
    if r.empty:
        return None
    return float(r["solve_rate_lo"].iloc[0]), float(r["solve_rate_hi"].iloc[0])


def raw_fit(rows: pd.DataFrame) -> tuple[float, float]:
    """(intercept, slope) of mean prompt tokens against turns over a strategy's tasks with turns: the
    intercept is the history's fixed head (system prompt + task), 2 x slope its growth per turn."""
    g = rows[rows["turn_count"] > 0]
    slope, intercept = np.polyfit(g["turn_count"].to_numpy(float), g["mean_prompt_tokens"].to_numpy(float), 1)
    return float(intercept), float(slope)


OUTPUT_TO_INPUT = 4.0  # Qwen3-32B's bills are exactly $0.70 in / $2.80 out per million (R^2 = 1.000)


def flat_price(df: pd.DataFrame, model: str) -> tuple[float, float]:
    """(input, output) USD per million tokens that the model's raw and masking bills imply at one flat
    price with output at ``OUTPUT_TO_INPUT`` x input: the least-squares scale of each task's cost on
    its cumulative input + 4 x output (the summary runs are left out: their summary calls' tokens are
    not in the CSV). Two free prices are not identifiable on Qwen3-Coder's bills, which are not flat
    (docs/published.md)."""
    rows = df[(df["model"] == model) & df["strategy_key"].isin(["raw", "masking"]) & (df["turn_count"] > 0)]
    x = (rows["cumulative_input"] + OUTPUT_TO_INPUT * rows["cumulative_output"]).to_numpy(float) / 1e6
    y = rows["cost"].to_numpy(float)
    a = float(x @ y) / float(x @ x)
    return a, OUTPUT_TO_INPUT * a


def nonnegative_fit(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least squares with two non-negative coefficients (the unconstrained fit, else the best single one)."""
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    if (coef >= 0).all():
        return coef
    best = None
    for i in range(2):
        c = np.zeros(2)
        c[i] = max(float(x[:, i] @ y) / float(x[:, i] @ x[:, i]), 0.0)
        err = float(((x @ c - y) ** 2).sum())
        if best is None or err < best[0]:
            best = (err, c)
    return best[1]
