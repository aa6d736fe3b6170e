"""A gate's committed baseline: a JSON Lines file of per-run rows, checked row by row and matched to the
suite's traces by id and content hash, and rewritten only on purpose (``--update-baseline``)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from sim.gate.gatefile import MAX_METRICS, MEAN_METRICS, RATIO_METRICS, SHARE_METRICS, SUM_METRICS, Gate
from sim.util.errors import ConfigError
from sim.util.jsonl import json_lines
from sim.util.limits import MAX_COUNT


def _short(v: Any) -> str:
    """A value for one line of error: a 400-digit integer as its first digits and its length."""
    text = repr(v)
    return text if len(text) <= 40 else f"{text[:20]}... ({len(text)} digits)"


# Metrics a result row may leave empty (None): unpriced cost, growth below 4 calls, a 0/0 hit rate.
NULLABLE_METRICS = ("cost_microusd", "growth_exponent", "cache_hit_rate", "answer_fact_recall")


# never negative; tokens_reclaimed is a net sum: a placeholder larger than what it replaced counts below 0
_SIGNED_SUMS = ("tokens_reclaimed",)
_COUNT_FIELDS = tuple(m for m in (*SUM_METRICS, *MAX_METRICS) if m not in _SIGNED_SUMS)


_NUMBER_FIELDS = (*_COUNT_FIELDS, *_SIGNED_SUMS, *MEAN_METRICS, *RATIO_METRICS)
# Every per-run value ctxsim writes is a count below 2^53 (``sim.util.limits``), or a ratio or mean far
# smaller; a larger value cannot come from a run, and summed over a suite it could leave the doubles
# (10**400 does not convert; 1e308 sums to inf and a percentage of nan), so it is refused as out of range.
_MAX_ROW_VALUE = float(MAX_COUNT)


def check_baseline_row(row: dict[str, Any], where: str) -> None:
    """A committed baseline row holds what ``ctxsim run --format json`` writes: numbers where the gate
    aggregates numbers (finite; counts >= 0; empty only where a metric may be undefined), true/false for
    the share metrics, strings for the ids. ConfigError naming ``where`` (file and line) and the field."""
    for key in ("trace_id", "trace_hash", "finish_reason", "pricing"):
        v = row.get(key)
        if (v is not None and not isinstance(v, str)) or (key == "trace_id" and not v):
            raise ConfigError(f"{where}: field {key}: expected a string, got {v!r}")
    for key in _NUMBER_FIELDS:
        if key not in row:
            continue
        v = row[key]
        if v is None and key in NULLABLE_METRICS:
            continue
        if isinstance(v, bool) or not isinstance(v, int | float) or (isinstance(v, float) and math.isnan(v)):
            raise ConfigError(f"{where}: field {key}: expected a number, got {_short(v)}")
        if key in _COUNT_FIELDS and v < 0:
            raise ConfigError(f"{where}: field {key}: expected a number >= 0, got {_short(v)}")
        if not -_MAX_ROW_VALUE <= v <= _MAX_ROW_VALUE:  # exact for huge ints and infinities alike
            raise ConfigError(
                f"{where}: field {key}: {_short(v)} is out of range: expected a number in "
                f"(-2^53, 2^53) (the counts a run writes)"
            )
    for key in SHARE_METRICS:
        if key in row and not isinstance(row[key], bool):
            raise ConfigError(f"{where}: field {key}: expected true or false, got {row[key]!r}")


def read_baseline(gate: Gate, traces: list[Any]) -> list[dict[str, Any]]:
    """The committed baseline rows, matched to the suite's traces by id and content hash."""
    from sim.trace.codec import trace_hash

    path = gate.baseline_results
    assert path is not None
    if not path.is_file():
        raise ConfigError(
            f"{gate.display}: baseline results {gate.baseline_results_text}: no such file; write it on "
            f"purpose with `ctxsim gate {gate.display} --update-baseline`"
        )
    by_id: dict[str, dict[str, Any]] = {}
    for lineno, row, problem in json_lines(path):
        if problem is not None:
            raise ConfigError(f"{path.name}: line {lineno}: {problem}")
        if not isinstance(row, dict) or "trace_id" not in row:
            raise ConfigError(f"{path.name}: line {lineno}: not a result row (no trace_id)")
        check_baseline_row(row, f"{path.name}: line {lineno}")
        by_id[row["trace_id"]] = row
    rows = []
    hint = f"; if the suite changed on purpose, run `ctxsim gate {gate.display} --update-baseline`"
    for t in traces:
        row = by_id.get(t.trace_id)
        if row is None:
            raise ConfigError(f"{path.name}: no row for trace '{t.trace_id}' of the suite{hint}")
        if row.get("trace_hash") != trace_hash(t):
            raise ConfigError(f"{path.name}: trace '{t.trace_id}' has changed since the baseline{hint}")
        if gate.pricing not in ("auto",) and row.get("pricing") != (
            None if gate.pricing in ("none", "null") else gate.pricing
        ):
            raise ConfigError(
                f"{path.name}: trace '{t.trace_id}' was priced as {row.get('pricing')!r}, the gate prices "
                f"as {gate.pricing!r}{hint}"
            )
        rows.append(row)
    return rows


def write_baseline(rows: list[dict[str, Any]], path: Path) -> None:
    from sim.results.tables import write_rows

    path.parent.mkdir(parents=True, exist_ok=True)
    write_rows(rows, path)
