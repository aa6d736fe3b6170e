"""Baseline vs candidate: with two results files, each candidate setting's means against the baseline
setting of the same policy and overrides, over the traces both files ran."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sim.report.document import Doc
from sim.report.formats import FORMATS, change_text, counted
from sim.report.settings import ReportSetting

COMPARE_METRICS = (  # (label, column or special, formatter kind)
    ("mean cost per run (USD)", "cost_usd", "usd"),
    ("mean cumulative input tokens", "cumulative_input_tokens", "int"),
    ("cache hit rate (Σ reads ÷ Σ input)", "cache_hit_rate", "pct"),
    ("compactions per run", "compactions", "float"),
    ("facts lost per run", "facts_lost", "float"),
    ("answer completion (share of runs)", "answer_completed", "pct"),
)


def _means(df) -> dict[str, float | None]:
    n = len(df)
    if n == 0:
        return {m: None for _, m, _ in COMPARE_METRICS}
    cost = df["cost_microusd"]
    from sim.results.summary import exact_sum

    ci = float(exact_sum(df["cumulative_input_tokens"]))
    return {
        "cost_usd": None if cost.isna().any() else float(cost.astype("float64").mean()) / 1e6,
        "cumulative_input_tokens": ci / n,
        "cache_hit_rate": exact_sum(df["cache_read_tokens"]) / ci if ci else None,
        "compactions": float(df["compactions"].astype("float64").mean()),
        "facts_lost": float(df["facts_lost"].astype("float64").mean()),
        "answer_completed": float(df["answer_completed"].astype("float64").mean()),
    }


def compare_section(doc: Doc, frames: list[Any], settings: list[ReportSetting], paths: list[Path]) -> None:
    base_sets = [s for s in settings if s.source == 0]
    cand_sets = [s for s in settings if s.source == 1]
    doc.h(2, "Baseline vs candidate")
    base_hashes = set(frames[0]["trace_hash"].astype(str))
    cand_hashes = set(frames[1]["trace_hash"].astype(str))
    common = base_hashes & cand_hashes
    if common:
        note = f"Means are over the {len(common)} traces (by content hash) both files ran" + (
            f"; {len(base_hashes | cand_hashes) - len(common)} traces in only one file are left out."
            if len(base_hashes | cand_hashes) > len(common)
            else "."
        )
    else:
        note = "The two files share no trace (by content hash): means are over each file's own runs."
    doc.p(
        f"Baseline: `{paths[0]}` ({counted(len(base_sets), 'setting')}); candidate: `{paths[1]}` "
        f"({counted(len(cand_sets), 'setting')}). Each candidate setting is compared with the baseline "
        f"setting of the same policy and "
        f"overrides when there is one, else with the baseline's only setting, else with all baseline runs "
        f"pooled. {note} Change is (candidate − baseline) ÷ baseline; "
        f"for shares (cache hit rate, completion) it is the difference in percentage points (pp)."
    )

    def restrict(df):
        return df[df["trace_hash"].astype(str).isin(common)] if common else df

    by_label = {(s.policy, s.overrides): s for s in base_sets}
    for c in cand_sets:
        b = by_label.get((c.policy, c.overrides))
        if b is not None:
            bdf, bname = b.frame, f"{b.sid} {b.label}"
        elif len(base_sets) == 1:
            bdf, bname = base_sets[0].frame, f"{base_sets[0].sid} {base_sets[0].label}"
        else:
            bdf, bname = frames[0], "all baseline runs"
        before, after = _means(restrict(bdf)), _means(restrict(c.frame))
        doc.h(3, f"{c.sid} {c.label} vs {bname}")
        rows = [
            [label, FORMATS[kind](before[m]), FORMATS[kind](after[m]), change_text(before[m], after[m], kind)]
            for label, m, kind in COMPARE_METRICS
        ]
        doc.table(["metric", "baseline", "candidate", "change"], rows, [False, True, True, True])
