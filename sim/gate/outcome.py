"""A gate's outcome: each metric aggregated over the suite, each threshold checked, and the result that
says pass or which metrics regressed."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from sim.gate.formats import junit_xml, metric_change, summary_markdown, value_text
from sim.gate.gatefile import METRIC_KIND, RATIO_METRICS, Gate, Threshold


def aggregate(rows: list[dict[str, Any]], metric: str) -> float | int | None:
    """One number for the suite: see METRIC_KIND. None when a needed value is missing (unpriced)."""
    kind = METRIC_KIND[metric]
    if kind == "overflow":
        return sum(1 for r in rows if r.get("finish_reason") == "context-overflow")
    if kind == "share":
        return sum(1 for r in rows if r.get(metric)) / len(rows) if rows else None
    if kind == "ratio":
        num, den, scale = RATIO_METRICS[metric]
        d = sum(r.get(den) or 0 for r in rows)
        return scale * sum(r.get(num) or 0 for r in rows) / d if d else None
    values = [r.get(metric) for r in rows]
    if kind == "mean":
        present = [v for v in values if v is not None]
        return sum(present) / len(present) if present else None
    if any(v is None for v in values):
        return None
    if kind == "max":
        return max(values) if values else None
    return sum(values)


@dataclass(frozen=True)
class Check:
    threshold: Threshold
    baseline: float | int | None
    candidate: float | int | None
    change: float | None  # in the rule's unit: absolute, percent or percentage points
    passed: bool
    note: str = ""


def check(t: Threshold, base: float | int | None, cand: float | int | None) -> Check:
    if base is None or cand is None:
        return Check(t, base, cand, None, False, "no value (unpriced or empty runs)")
    delta = cand - base
    if t.rule in ("max_drop_points", "max_rise_points"):
        points = 100.0 * delta
        change = -points if t.rule == "max_drop_points" else points
        return Check(t, base, cand, points, _le(change, t.limit))
    if t.rule.endswith("_pct"):
        if base == 0:
            pct = 0.0 if delta == 0 else math.copysign(math.inf, delta)
        else:
            pct = 100.0 * delta / abs(base)
        change = pct if t.rule == "max_increase_pct" else -pct
        return Check(t, base, cand, pct, _le(change, t.limit))
    change = delta if t.rule == "max_increase" else -delta
    return Check(t, base, cand, float(delta), _le(change, t.limit))


def _le(change: float, limit: float) -> bool:
    return change <= limit + 1e-9 * max(1.0, abs(limit))


@dataclass(frozen=True)
class MetricResult:
    """Every threshold of one metric: one table row, one JUnit testcase."""

    metric: str
    checks: tuple[Check, ...]

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def baseline(self) -> Any:
        return self.checks[0].baseline

    @property
    def candidate(self) -> Any:
        return self.checks[0].candidate

    def threshold_text(self) -> str:
        return ", ".join(c.threshold.text() for c in self.checks)

    def change_text(self) -> str:
        return metric_change(self.metric, self.baseline, self.candidate)

    def message(self) -> str:
        m = self.metric
        broken = ", ".join(c.threshold.text() for c in self.checks if not c.passed)
        notes = sorted({c.note for c in self.checks if c.note})
        base, cand = value_text(m, self.baseline), value_text(m, self.candidate)
        return f"{m}: baseline {base}, candidate {cand}, change {self.change_text()}; exceeds {broken}" + (
            f" ({'; '.join(notes)})" if notes else ""
        )


@dataclass
class GateResult:
    gate: Gate
    checks: list[Check]
    baseline_rows: list[dict[str, Any]]
    candidate_rows: list[dict[str, Any]]
    baseline_label: str

    @property
    def metrics(self) -> list[MetricResult]:
        """One entry per metric, in the gate file's order."""
        order: dict[str, list[Check]] = {}
        for c in self.checks:
            order.setdefault(c.threshold.metric, []).append(c)
        return [MetricResult(m, tuple(cs)) for m, cs in order.items()]

    @property
    def failures(self) -> list[MetricResult]:
        return [m for m in self.metrics if not m.passed]

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    def failing_metrics(self) -> list[str]:
        return [m.metric for m in self.failures]

    def summary(self) -> str:
        return summary_markdown(self)

    def junit(self) -> str:
        return junit_xml(self)
