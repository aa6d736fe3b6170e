"""The gate's two written forms, the Markdown summary and the JUnit XML, and the metric texts they share.
They depend only on the inputs: no timestamps, no absolute paths, stable ordering, so two runs on the same
inputs give byte-identical files."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sim.gate.gatefile import METRIC_KIND, number_text

if TYPE_CHECKING:
    from sim.gate.outcome import GateResult


def value_text(metric: str, v: Any) -> str:
    if v is not None and METRIC_KIND[metric] == "share":
        return f"{100.0 * v:.1f}%"
    return number_text(v)


def _signed(v: float, unit: str = "") -> str:
    if math.isinf(v):
        return ("+" if v > 0 else "-") + "∞" + unit
    text = number_text(abs(v)) if not unit else f"{abs(v):,.2f}"
    if v == 0:
        return "±0" + unit
    sign = "+" if v > 0 else "-"
    return f"{sign}{text}{unit}"


def metric_change(metric: str, base: Any, cand: Any) -> str:
    """Absolute change and percent (values), or percentage points (shares)."""
    if base is None or cand is None:
        return "–"
    delta = cand - base
    if METRIC_KIND[metric] == "share":
        return _signed(100.0 * delta, " pts")
    if delta == 0:
        return "±0"
    if base == 0:
        return _signed(delta)
    return f"{_signed(delta)} ({_signed(100.0 * delta / abs(base), '%')})"


def _cost_key(rows: list[dict[str, Any]]) -> str:
    return (
        "cost_microusd"
        if all(r.get("cost_microusd") is not None for r in rows)
        else "cumulative_input_tokens"
    )


def _shown(path: Path) -> str:
    """The gate file as the summary names it: relative to the repository when inside it, else its name,
    so the summary does not depend on the working directory or the machine."""
    from sim.util.paths import REPO

    try:
        return path.resolve().relative_to(REPO).as_posix()
    except ValueError:
        return path.name


def summary_markdown(res: GateResult) -> str:
    g = res.gate
    fails = res.failing_metrics()
    verdict = "PASS" if res.passed else f"FAIL ({', '.join(fails)})"
    out = [
        f"# ctxsim gate `{g.name}`: {verdict}",
        "",
        f"- gate file: `{_shown(g.path)}`",
        f"- suite: `{g.suite}` ({len(res.candidate_rows)} traces); pricing: `{g.pricing}`",
        f"- baseline: {res.baseline_label}",
        f"- candidate: `{g.candidate.label()}`",
        "",
        "| metric | baseline | candidate | change | threshold | verdict |",
        "|---|---:|---:|---:|---|---|",
    ]
    for mr in res.metrics:
        m = mr.metric
        v = "pass" if mr.passed else "**FAIL**"
        notes = sorted({c.note for c in mr.checks if c.note})
        if notes:
            v += f" ({'; '.join(notes)})"
        out.append(
            f"| {m} | {value_text(m, mr.baseline)} | {value_text(m, mr.candidate)} | {mr.change_text()} | "
            f"{mr.threshold_text()} | {v} |"
        )
    key = _cost_key(res.baseline_rows + res.candidate_rows)
    diffs = []
    for b, c in zip(res.baseline_rows, res.candidate_rows, strict=True):
        d = (c.get(key) or 0) - (b.get(key) or 0)
        if d:
            diffs.append((-abs(d), b["trace_id"], b, c, d))
    diffs.sort(key=lambda x: (x[0], x[1]))
    what = "cost (micro-USD)" if key == "cost_microusd" else "cumulative input tokens (runs are unpriced)"
    out += ["", f"## Traces that changed most by {what}", ""]
    if not diffs:
        out.append("No trace changed.")
    elif g.top_traces == 0:
        out.append(f"{len(diffs)} traces changed.")
    else:
        out += [
            "| trace | baseline | candidate | change | finish reason (baseline → candidate) |",
            "|---|---:|---:|---:|---|",
        ]
        for _, tid, b, c, _d in diffs[: g.top_traces]:
            fr = b.get("finish_reason")
            fr_text = fr if fr == c.get("finish_reason") else f"{fr} → {c.get('finish_reason')}"
            out.append(
                f"| {tid} | {number_text(b.get(key))} | {number_text(c.get(key))} | "
                f"{metric_change(key, b.get(key), c.get(key))} | {fr_text} |"
            )
        if len(diffs) > g.top_traces:
            out += ["", f"… and {len(diffs) - g.top_traces} more changed traces."]
    return "\n".join(out) + "\n"


def junit_xml(res: GateResult) -> str:
    """JUnit XML: one testsuite, one testcase per metric, a <failure> for each regressed metric."""
    import xml.etree.ElementTree as ET

    g = res.gate
    metrics = res.metrics
    root = ET.Element("testsuites")
    suite = ET.SubElement(
        root,
        "testsuite",
        {
            "name": f"ctxsim gate {g.name}",
            "tests": str(len(metrics)),
            "failures": str(len(res.failures)),
            "errors": "0",
            "skipped": "0",
        },
    )
    for mr in metrics:
        case = ET.SubElement(suite, "testcase", {"classname": f"ctxsim.gate.{g.name}", "name": mr.metric})
        if not mr.passed:
            msg = mr.message()
            fail = ET.SubElement(case, "failure", {"message": msg, "type": "regression"})
            fail.text = msg
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
