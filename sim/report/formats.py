"""How the report writes its numbers: dollars, counts, shares, changes. One place, so every table and
sentence writes the same value the same way."""

from __future__ import annotations


def fmt_usd(v: float | None) -> str:
    return "-" if v is None else f"${v:,.4f}"


def fmt_int(v: float | None) -> str:
    return "-" if v is None else f"{round(v):,}"


def fmt_pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def fmt_float(v: float | None) -> str:
    return "-" if v is None else f"{v:,.2f}"


FORMATS = {"usd": fmt_usd, "int": fmt_int, "pct": fmt_pct, "float": fmt_float}


def change_text(before: float | None, after: float | None, kind: str = "") -> str:
    if before is None or after is None:
        return "-"
    if kind == "pct":  # shares change in percentage points
        return f"{100 * (after - before):+.1f} pp"
    if before == 0:
        return "0.0%" if after == 0 else "n/a (baseline 0)"
    return f"{100 * (after - before) / abs(before):+.1f}%"


def counted(k: int, noun: str) -> str:
    return f"{k} {noun}" + ("" if k == 1 else "s")
