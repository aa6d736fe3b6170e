"""The report's input: each results file read, its runs grouped into policy settings (ids S1, S2, … in
table order, with the label figures and tables show), and the choices among them (the Pareto frontier,
the best-completing cheapest setting, the cheapest ones)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim.engine.model import UPPER_BOUND
from sim.util.errors import ConfigError


@dataclass
class ReportSetting:
    sid: str  # S1, S2, ... in table order
    source: int  # index of the results file
    policy: str
    overrides: str  # the row's `setting` column: the overrides as given to the sweep
    label: str  # what figures and tables show
    summary: dict[str, Any]
    knobs: dict[str, Any]  # policy.<knob> -> value
    frame: Any  # this setting's rows (pandas DataFrame)


_DEFAULT_MOCK = ("model.on_missing=refetch", "model.summarizer=extractive")


def _key(values) -> tuple:
    from sim.results.summary import plain_value

    return tuple(repr(plain_value(v)) for v in values)


def _report_columns() -> dict[str, str]:
    from sim.results.summary import SUMMARY_COLUMNS

    # beyond a summary's: which trace each row ran (figures replay one) and how many calls it made
    return {
        **SUMMARY_COLUMNS,
        "trace_id": "text",
        "trace_hash": "text",
        "scenario": "text",
        "calls": "number",
    }


REPORT_COLUMNS = _report_columns()


def load_settings(paths: list[Path]) -> tuple[list[Any], list[ReportSetting]]:
    """Each results file's frame, and every setting (per file, in ``summary`` order) with its rows."""
    from sim.results.summary import read_results, results_file, setting_columns, summarize

    frames, settings = [], []
    for i, path in enumerate(paths):
        f = results_file(path)
        df = read_results(f, REPORT_COLUMNS)  # a non-results file or a missing column: exit 2, one line
        if df.empty:
            raise ConfigError(f"report: {f} holds no runs")
        frames.append(df)
        keys = setting_columns(df.columns)
        groups = {_key(v if isinstance(v, tuple) else (v,)): g for v, g in df.groupby(keys, dropna=False)}
        for row in summarize(df):
            g = groups[_key([row[k] for k in keys])]
            ovs = sorted({str(s) for s in g["setting"].dropna()}) if "setting" in g else []
            overrides = ovs[0] if len(ovs) == 1 else " / ".join(ovs)
            # the default mock behaviour goes without saying; any other is part of the label
            shown = (
                " ".join(o.removeprefix("policy.") for o in overrides.split() if o not in _DEFAULT_MOCK)
                or "(defaults)"
            )
            label = f"{row['policy']} {shown}"
            if row.get("summarizer") == UPPER_BOUND:
                label += f" [{UPPER_BOUND} summarizer: upper bound]"
            if len(paths) > 1:
                label = f"[{i + 1}] {label}"
            knobs = {k: row[k] for k in keys[1:] if row.get(k) is not None}
            settings.append(
                ReportSetting(
                    "", i, str(row["policy"]), overrides, label, row, knobs, g.reset_index(drop=True)
                )
            )
    for n, s in enumerate(settings, 1):
        s.sid = f"S{n}"
    return frames, settings


def pareto(settings: list[ReportSetting]) -> set[str]:
    """Settings no other setting beats on both mean cost (lower) and completion (higher)."""
    pts = [(s.sid, s.summary["mean_cost_usd"], s.summary["answer_completed"]) for s in settings]
    pts = [p for p in pts if p[1] is not None]
    front = set()
    for sid, c, a in pts:
        if not any((c2 <= c and a2 >= a) and (c2 < c or a2 > a) for _, c2, a2 in pts):
            front.add(sid)
    return front


def recommended(settings: list[ReportSetting]) -> ReportSetting:
    """The best completion, then the lowest mean cost (or cumulative input when unpriced), then order."""

    def rank(s: ReportSetting):
        cost = s.summary["mean_cost_usd"]
        return (
            -s.summary["answer_completed"],
            cost if cost is not None else math.inf,
            s.summary["cumulative_input_tokens"] / max(1, s.summary["runs"]),
            int(s.sid[1:]),
        )

    return min(settings, key=rank)


def overflow_runs(s: ReportSetting) -> int:
    """Runs of the setting that stopped on a context overflow (their cost is of a run cut short)."""
    f = s.frame
    return int((f["finish_reason"] == "context-overflow").sum()) if "finish_reason" in f else 0


def cheapest(settings: list[ReportSetting], n: int) -> list[ReportSetting]:
    """The ``n`` cheapest settings, those whose runs all finished first: a setting whose runs overflow
    looks cheap only because they stopped early (the verdict counts overflows first for that reason)."""

    def rank(s: ReportSetting):
        cost = s.summary["mean_cost_usd"]
        return (
            overflow_runs(s) > 0,
            cost if cost is not None else math.inf,
            s.summary["cumulative_input_tokens"] / max(1, s.summary["runs"]),
            int(s.sid[1:]),
        )

    return sorted(settings, key=rank)[:n]


def distinct(frames: list[Any], column: str) -> list[str]:
    return sorted({str(v) for f in frames if column in f for v in f[column].dropna()})


def check_mixed(frames: list[Any], paths: list[Path], allow_mixed: bool) -> list[str]:
    """The ctxsim versions, scenarios and pricing the files mix: refused unless ``allow_mixed`` (then
    said in the report). Comparing runs of different code, traces or prices would mislead silently."""
    mixed = []
    for column, what in (
        ("ctxsim_version", "ctxsim versions"),
        ("scenario", "suites"),
        ("pricing", "pricing"),
    ):
        values = distinct(frames, column)
        if len(values) > 1:
            mixed.append(f"{what} {', '.join(values)}")
    if mixed and not allow_mixed:
        raise ConfigError(
            f"report: the results mix {'; '.join(mixed)} ({', '.join(str(p) for p in paths)}); "
            "report them separately, or pass --allow-mixed"
        )
    return mixed


def child_spend(settings: list[ReportSetting]) -> list[tuple[str, int, int, float | None, float | None]]:
    """Per setting: (id, parent input, child input, parent cost USD, child cost USD) summed over its
    runs; empty unless some run had children (results without the columns: none)."""
    from sim.results.summary import exact_sum

    cols = ("child_calls", "child_input_tokens", "child_cost_microusd", "parent_input_tokens")
    if not all(c in s.frame for s in settings for c in cols):
        return []
    if not any(exact_sum(s.frame["child_calls"]) for s in settings):
        return []
    out = []
    for s in settings:
        f = s.frame
        priced = not f["cost_microusd"].isna().any() and not f["child_cost_microusd"].isna().any()
        child_cost = exact_sum(f["child_cost_microusd"]) / 1e6 if priced else None
        cost = exact_sum(f["cost_microusd"]) / 1e6 - child_cost if child_cost is not None else None
        out.append(
            (s.sid, exact_sum(f["parent_input_tokens"]), exact_sum(f["child_input_tokens"]), cost, child_cost)
        )
    return out
