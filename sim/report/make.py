"""``ctxsim report``: sweep results (``results.parquet``, one or more) as Markdown and self-contained HTML.

The report is built once as a list of blocks (headings, paragraphs, tables, figures) and rendered twice:
``report.md`` links the PNGs in ``figures/``; ``report.html`` embeds them as base64 data URIs, so it is one
file with no external assets. Nothing in it depends on the clock or the machine: the same inputs give
byte-identical Markdown (and, with matplotlib's Agg backend at a fixed DPI and no Software metadata,
identical PNGs).

Figures: cost vs completion per setting with its Pareto frontier; heatmaps of cost and completion over a
2-D grid of one policy; cumulative input tokens by call for one trace under ``raw`` and the cheapest
settings (replayed); the view's composition by item state under the recommended setting (replayed).
"""

from __future__ import annotations

import base64
import html
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sim.engine.model import UPPER_BOUND
from sim.util import interrupts
from sim.util.atomicfile import atomic_path
from sim.util.errors import ConfigError, CtxsimError

DPI = 110
MAX_CURVES = 6
STATE_COLOURS = {  # ItemState code -> (name, colour); DROPPED holds no tokens
    0: ("verbatim", "#4C72B0"),
    1: ("bounded", "#DD8452"),
    2: ("masked", "#C44E52"),
    4: ("summarized", "#8172B3"),
    5: ("spilled", "#55A868"),
    6: ("paginated", "#937860"),
}
COMPARE_METRICS = (  # (label, column or special, formatter kind)
    ("mean cost per run (USD)", "cost_usd", "usd"),
    ("mean cumulative input tokens", "cumulative_input_tokens", "int"),
    ("cache hit rate (Σ reads ÷ Σ input)", "cache_hit_rate", "pct"),
    ("compactions per run", "compactions", "float"),
    ("facts lost per run", "facts_lost", "float"),
    ("answer completion (share of runs)", "answer_completed", "pct"),
)


# ----------------------------------------------------------------------------------------------- blocks
@dataclass
class _Doc:
    blocks: list[tuple] = field(default_factory=list)
    figures: list[tuple[str, bytes]] = field(default_factory=list)  # (file name, PNG bytes)

    def h(self, level: int, text: str) -> None:
        self.blocks.append(("h", level, text))

    def p(self, text: str) -> None:
        self.blocks.append(("p", text))

    def table(self, columns: list[str], rows: list[list[str]], right: list[bool]) -> None:
        self.blocks.append(("table", columns, rows, right))

    def figure(self, name: str, png: bytes, alt: str, caption: str) -> None:
        self.figures.append((name, png))
        self.blocks.append(("fig", name, alt, caption))


def _md_cell(s: str) -> str:
    return s.replace("|", "\\|")


def _render_md(doc: _Doc) -> str:
    out: list[str] = []
    for b in doc.blocks:
        if b[0] == "h":
            out.append("#" * b[1] + " " + b[2])
        elif b[0] == "p":
            out.append(b[1])
        elif b[0] == "table":
            _, cols, rows, right = b
            out.append("| " + " | ".join(_md_cell(c) for c in cols) + " |")
            out.append("|" + "|".join("---:" if r else "---" for r in right) + "|")
            out.extend("| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows)
        elif b[0] == "fig":
            _, name, alt, caption = b
            out.append(f"![{alt}](figures/{name})\n\n*{caption}*")
        out.append("")
    return "\n".join(out)


_CODE = re.compile(r"`([^`]+)`")
_BOLD = re.compile(r"\*\*([^*]+)\*\*")


def _inline(text: str) -> str:
    s = html.escape(text)
    s = _CODE.sub(r"<code>\1</code>", s)
    return _BOLD.sub(r"<strong>\1</strong>", s)


_CSS = (
    "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;max-width:1100px;margin:2em auto;"
    "padding:0 1em;color:#222;line-height:1.45}table{border-collapse:collapse;margin:1em 0;font-size:.9em}"
    "th,td{border:1px solid #ccc;padding:.25em .6em}th{background:#f2f2f2}td.r{text-align:right}"
    "figure{margin:1.5em 0}img{max-width:100%;height:auto}figcaption{font-style:italic;color:#444}"
    "code{background:#f4f4f4;padding:0 .2em}"
)


def _render_html(doc: _Doc, title: str) -> str:
    pngs = dict(doc.figures)
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title>",
        f"<style>{_CSS}</style></head><body>",
    ]
    for b in doc.blocks:
        if b[0] == "h":
            out.append(f"<h{b[1]}>{_inline(b[2])}</h{b[1]}>")
        elif b[0] == "p":
            text = b[1]
            if len(text) > 2 and text[0] == text[-1] == "_":  # a note in Markdown italics: the same here
                out.append(f"<p><em>{_inline(text[1:-1])}</em></p>")
            else:
                out.append(f"<p>{_inline(text)}</p>")
        elif b[0] == "table":
            _, cols, rows, right = b
            out.append(
                "<table><thead><tr>" + "".join(f"<th>{_inline(c)}</th>" for c in cols) + "</tr></thead>"
            )
            out.append("<tbody>")
            for row in rows:
                cells = "".join(
                    f'<td class="r">{_inline(c)}</td>' if r else f"<td>{_inline(c)}</td>"
                    for c, r in zip(row, right, strict=True)
                )
                out.append(f"<tr>{cells}</tr>")
            out.append("</tbody></table>")
        elif b[0] == "fig":
            _, name, alt, caption = b
            data = base64.b64encode(pngs[name]).decode("ascii")
            out.append(
                f'<figure><img src="data:image/png;base64,{data}" alt="{html.escape(alt)}">'
                f"<figcaption>{_inline(caption)}</figcaption></figure>"
            )
    out.append("</body></html>")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------- formats
def _usd(v: float | None) -> str:
    return "-" if v is None else f"${v:,.4f}"


def _int(v: float | None) -> str:
    return "-" if v is None else f"{round(v):,}"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def _flt(v: float | None) -> str:
    return "-" if v is None else f"{v:,.2f}"


_FMT = {"usd": _usd, "int": _int, "pct": _pct, "float": _flt}


def _change(before: float | None, after: float | None, kind: str = "") -> str:
    if before is None or after is None:
        return "-"
    if kind == "pct":  # shares change in percentage points
        return f"{100 * (after - before):+.1f} pp"
    if before == 0:
        return "0.0%" if after == 0 else "n/a (baseline 0)"
    return f"{100 * (after - before) / abs(before):+.1f}%"


def _n(k: int, noun: str) -> str:
    return f"{k} {noun}" + ("" if k == 1 else "s")


# ---------------------------------------------------------------------------------------------- loading
@dataclass
class _Setting:
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
    from sim.results.summary import _py

    return tuple(repr(_py(v)) for v in values)


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


def _load(paths: list[Path]) -> tuple[list[Any], list[_Setting]]:
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
                _Setting("", i, str(row["policy"]), overrides, label, row, knobs, g.reset_index(drop=True))
            )
    for n, s in enumerate(settings, 1):
        s.sid = f"S{n}"
    return frames, settings


def _pareto(settings: list[_Setting]) -> set[str]:
    """Settings no other setting beats on both mean cost (lower) and completion (higher)."""
    pts = [(s.sid, s.summary["mean_cost_usd"], s.summary["answer_completed"]) for s in settings]
    pts = [p for p in pts if p[1] is not None]
    front = set()
    for sid, c, a in pts:
        if not any((c2 <= c and a2 >= a) and (c2 < c or a2 > a) for _, c2, a2 in pts):
            front.add(sid)
    return front


def _recommended(settings: list[_Setting]) -> _Setting:
    """The best completion, then the lowest mean cost (or cumulative input when unpriced), then order."""

    def rank(s: _Setting):
        cost = s.summary["mean_cost_usd"]
        return (
            -s.summary["answer_completed"],
            cost if cost is not None else math.inf,
            s.summary["cumulative_input_tokens"] / max(1, s.summary["runs"]),
            int(s.sid[1:]),
        )

    return min(settings, key=rank)


def _cheapest(settings: list[_Setting], n: int) -> list[_Setting]:
    def rank(s: _Setting):
        cost = s.summary["mean_cost_usd"]
        return (
            cost if cost is not None else math.inf,
            s.summary["cumulative_input_tokens"] / max(1, s.summary["runs"]),
            int(s.sid[1:]),
        )

    return sorted(settings, key=rank)[:n]


# -------------------------------------------------------------------------------------------- matplotlib
def _plt():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _png(fig) -> bytes:
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None}, bbox_inches="tight")
    _plt().close(fig)
    return buf.getvalue()


_RC = {
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "legend.fontsize": 8.5,
    "svg.hashsalt": "0",
}


def _fig_pareto(settings: list[_Setting], front: set[str]) -> bytes:
    import matplotlib as mpl
    from matplotlib.ticker import FuncFormatter, PercentFormatter

    plt = _plt()
    priced = [s for s in settings if s.summary["mean_cost_usd"] is not None]
    with mpl.rc_context(_RC):
        fig, ax = plt.subplots(figsize=(8, 5))
        policies = sorted({s.policy for s in priced})
        cmap = plt.get_cmap("tab10")
        for j, pol in enumerate(policies):
            pts = [s for s in priced if s.policy == pol]
            ax.scatter(
                [s.summary["mean_cost_usd"] for s in pts],
                [s.summary["answer_completed"] for s in pts],
                s=46,
                color=cmap(j % 10),
                label=pol,
                zorder=3,
                edgecolor="white",
                linewidth=0.6,
            )
        # only the frontier's points are labelled (every id is in the table): dozens of settings at the
        # same completion would otherwise overprint; the frontier's labels alternate above and below
        on_front = sorted((s for s in priced if s.sid in front), key=lambda s: s.summary["mean_cost_usd"])
        for n, s in enumerate(on_front):
            ax.annotate(
                s.sid,
                (s.summary["mean_cost_usd"], s.summary["answer_completed"]),
                textcoords="offset points",
                xytext=(6, 7 if n % 2 == 0 else -14),
                fontsize=9,
                fontweight="bold",
            )
        fr = sorted(
            (s for s in priced if s.sid in front),
            key=lambda s: (s.summary["mean_cost_usd"], s.summary["answer_completed"]),
        )
        if fr:
            xs = [s.summary["mean_cost_usd"] for s in fr]
            ys = [s.summary["answer_completed"] for s in fr]
            ax.step(
                xs,
                ys,
                where="post",
                color="black",
                linestyle="--",
                linewidth=1.2,
                zorder=2,
                label="Pareto frontier",
            )
            ax.scatter(xs, ys, s=140, facecolor="none", edgecolor="black", linewidth=1.2, zorder=4)
            ax.annotate(
                "Pareto frontier",
                (xs[0], ys[0]),
                textcoords="offset points",
                xytext=(0, -30),
                ha="center",
                fontsize=8.5,
                fontstyle="italic",
                arrowprops={"arrowstyle": "-", "color": "black", "linewidth": 0.6},
            )
        ax.set_xlabel("mean cost per run (USD)")
        ax.set_ylabel("answer completion (share of runs)")
        ax.set_title("Cost vs answer completion per policy setting")
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"${x:,.3f}"))
        ax.yaxis.set_major_formatter(PercentFormatter(1.0))
        # a y-range that shows the differences: from just under the lowest completion to 100%; when
        # every setting completes alike there is no difference to show, and the axis says so
        done = [s.summary["answer_completed"] for s in priced]
        low = min(done)
        if low == max(done):
            ax.set_ylim(low - 0.02, low + 0.02)
            ax.set_yticks([low])  # one tick: no 101% beside a 100% that nothing exceeds
            ax.text(
                0.01, 0.03, f"every setting completes {low:.1%} of runs: only cost separates them",
                transform=ax.transAxes, fontsize=8.5, color="grey",
            )  # fmt: skip
        else:
            floor = max(0.0, min(low - 0.05, 0.9))
            ax.set_ylim(floor, 1.0 + (1.0 - floor) * 0.06)
            if floor > 0:
                ax.text(
                    0.01, 0.01, f"y axis from {floor:.0%}", transform=ax.transAxes, fontsize=8, color="grey"
                )
        lo = min(s.summary["mean_cost_usd"] for s in priced)
        hi = max(s.summary["mean_cost_usd"] for s in priced)
        pad = (hi - lo) * 0.08 or max(hi * 0.05, 1e-4)
        ax.set_xlim(max(0.0, lo - pad), hi + pad * 1.6)
        ax.grid(True, alpha=0.3)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), title="policy", borderaxespad=0)
        return _png(fig)


def _grid_candidate(settings: list[_Setting]) -> tuple[list[_Setting], str, str] | None:
    """The first (file, policy) group whose settings vary in exactly two knobs."""
    seen: list[tuple[int, str]] = []
    for s in settings:
        if (s.source, s.policy) not in seen:
            seen.append((s.source, s.policy))
    for src, pol in seen:
        group = [s for s in settings if s.source == src and s.policy == pol]
        if len(group) < 2:
            continue
        keys = sorted(
            {k for s in group for k in s.knobs},
            key=lambda k: list(group[0].summary).index(k) if k in group[0].summary else 0,
        )
        varying = [k for k in keys if len({repr(s.knobs.get(k)) for s in group}) > 1]
        if len(varying) == 2:
            return group, varying[0], varying[1]
    return None


def _tick(v) -> str:
    """A knob value on an axis: an unset limit is no compaction (the baseline), not 'None'."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "unset\n(no compaction)"
    return f"{int(v):,}" if isinstance(v, int | float) and float(v).is_integer() else str(v)


def _fig_heatmaps(group: list[_Setting], kx: str, ky: str) -> bytes:
    import matplotlib as mpl
    import numpy as np

    from sim.results.summary import _sort_key

    plt = _plt()
    xs = sorted({s.knobs.get(kx) for s in group}, key=_sort_key)
    ys = sorted({s.knobs.get(ky) for s in group}, key=_sort_key)
    cost = np.full((len(ys), len(xs)), np.nan)
    done = np.full((len(ys), len(xs)), np.nan)
    for s in group:
        i, j = ys.index(s.knobs.get(ky)), xs.index(s.knobs.get(kx))
        if s.summary["mean_cost_usd"] is not None:
            cost[i, j] = s.summary["mean_cost_usd"]
        done[i, j] = s.summary["answer_completed"]
    with mpl.rc_context(_RC):
        fig, axes = plt.subplots(1, 2, figsize=(11, 4.6))
        panels = (
            (axes[0], cost, "viridis", "mean cost per run (USD)", lambda v: f"${v:.4f}"),
            (axes[1], done, "RdYlGn", "answer completion (share of runs)", lambda v: f"{100 * v:.0f}%"),
        )
        for ax, m, cmap, title, fmt in panels:
            masked = np.ma.masked_invalid(m)
            # the colour scale spans the grid's own range, and its label says how small that range is
            lo_v, hi_v = (float(np.nanmin(m)), float(np.nanmax(m))) if masked.count() else (0.0, 1.0)
            if hi_v > lo_v:
                vmin, vmax = lo_v, hi_v
            elif m is done:  # one value: the usual 0-100% scale, so 100% is green
                vmin, vmax = 0.0, 1.0
            else:
                vmin, vmax = lo_v * 0.99, hi_v * 1.01 + 1e-9
            im = ax.imshow(masked, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto", origin="lower")
            ax.set_xticks(range(len(xs)), [_tick(v) for v in xs])
            ax.set_yticks(range(len(ys)), [_tick(v) for v in ys])
            ax.set_xlabel(kx.removeprefix("policy.") + " (tokens)" * ("token" in kx))
            ax.set_ylabel(ky.removeprefix("policy.") + " (tokens)" * ("token" in ky))
            ax.set_title(title)
            cb = fig.colorbar(im, ax=ax, shrink=0.85)
            span = (
                f"all {fmt(lo_v)}: no difference"
                if hi_v == lo_v
                else f"range {fmt(lo_v)}–{fmt(hi_v)}"
                + (
                    f" ({100 * (hi_v - lo_v):.1f} pp)"
                    if m is done
                    else f" ({(hi_v - lo_v) / hi_v:.1%} of the top)"
                )
            )
            cb.set_label(f"{title}\n{span}".replace("$", r"\$"))  # a literal $, not mathtext
            lo, hi = lo_v, hi_v
            for i in range(len(ys)):
                for j in range(len(xs)):
                    v = m[i, j]
                    if np.isnan(v):
                        ax.text(j, i, "n/a", ha="center", va="center", fontsize=9, color="grey")
                        continue
                    frac = 0.5 if hi == lo else (v - lo) / (hi - lo)
                    dark = frac < 0.55 if cmap == "viridis" else (frac < 0.2 or frac > 0.85)
                    ax.text(
                        j, i, fmt(v), ha="center", va="center", fontsize=8, color="white" if dark else "black"
                    )
        fig.suptitle(f"{group[0].policy}: mean cost and completion over the grid")
        fig.tight_layout()
        return _png(fig)


def _fig_cumulative(curves: list[tuple[str, Any]], trace_id: str) -> bytes:
    import matplotlib as mpl
    import numpy as np
    from matplotlib.ticker import FuncFormatter

    plt = _plt()
    with mpl.rc_context(_RC):
        fig, ax = plt.subplots(figsize=(9, 5.2))
        for j, (label, tokens) in enumerate(curves):
            cum = np.cumsum(np.asarray(tokens, dtype=np.float64))
            raw = label == "raw"
            ax.plot(
                np.arange(1, len(cum) + 1),
                cum / 1e6,
                label=f"{label} (total {cum[-1] / 1e6:,.2f}M)" if len(cum) else label,
                color="black" if raw else plt.get_cmap("tab10")(j % 10),
                linewidth=2.4 if raw else 1.6,
                linestyle="--" if raw else "-",
            )
        ax.set_xlabel("model call number (agent, summary and other calls, in order)")
        ax.set_ylabel("cumulative input tokens (millions of tokens)")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:,.2f}M"))
        ax.set_title(f"Cumulative input tokens by call: trace {trace_id}")
        ax.grid(True, alpha=0.3)
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
        # below the axes, never over the curves
        ax.legend(loc="upper left", bbox_to_anchor=(0.0, -0.14), ncol=1, frameon=False, fontsize=8.5)
        return _png(fig)


def _fig_composition(calls: list[int], by_state: dict[int, list[int]], label: str, trace_id: str) -> bytes:
    import matplotlib as mpl
    import numpy as np

    plt = _plt()
    with mpl.rc_context(_RC):
        fig, ax = plt.subplots(figsize=(9, 5.2))
        codes = [c for c in STATE_COLOURS if any(by_state[c])]
        ax.stackplot(
            np.asarray(calls) + 1,
            *[np.asarray(by_state[c]) / 1e3 for c in codes],
            labels=[STATE_COLOURS[c][0] for c in codes],
            colors=[STATE_COLOURS[c][1] for c in codes],
            alpha=0.9,
            linewidth=0,
        )
        _view_axes(ax, f"View composition by item state: trace {trace_id}\nunder {label}", calls)
        handles, labels = ax.get_legend_handles_labels()
        ax.legend(handles[::-1], labels[::-1], loc="upper left", title="item state")
        return _png(fig)


def _view_axes(ax, title: str, calls: list) -> None:
    """The axes the two per-call view figures share: calls along x, thousands of tokens up y."""
    from matplotlib.ticker import FuncFormatter

    ax.set_xlabel("agent call number (recorded call)")
    ax.set_ylabel("tokens in view (thousands)")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:,.0f}k"))
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.set_xlim(1, max(1, calls[-1] + 1) if calls else 1)
    ax.set_ylim(bottom=0)


CATEGORY_COLOURS = (  # the working set's seven view categories (sim.metrics.working_set), bottom to top
    ("instructions", "#4C72B0"),
    ("tool definitions", "#64B5CD"),
    ("older conversation", "#8C8C8C"),
    ("recent conversation", "#CCB974"),
    ("repository map", "#55A868"),
    ("file read", "#DD8452"),
    ("test output", "#C44E52"),
)
_CATEGORY_COLUMN = {
    "instructions": "view_instructions_tokens",
    "tool definitions": "view_tool_definitions_tokens",
    "older conversation": "view_older_conversation_tokens",
    "recent conversation": "view_recent_conversation_tokens",
    "repository map": "view_repository_map_tokens",
    "file read": "view_file_read_tokens",
    "test output": "view_test_output_tokens",
}


def _fig_working_set(
    calls: list[int], columns: dict[str, Any], label: str, trace_id: str, reserve: Any = None
) -> bytes:
    import matplotlib as mpl
    import numpy as np
    from matplotlib.patches import Patch

    plt = _plt()
    with mpl.rc_context(_RC):
        fig, ax = plt.subplots(figsize=(10, 5.2))
        names = [n for n, _ in CATEGORY_COLOURS]
        colour = dict(CATEGORY_COLOURS)
        layers = [np.asarray(columns[_CATEGORY_COLUMN[n]]) / 1e3 for n in names]
        has_reserve = reserve is not None and len(reserve) and (np.asarray(reserve) >= 0).all()
        if has_reserve:  # the eighth category: the window's free room, on top
            layers.append(np.asarray(reserve) / 1e3)
        ax.stackplot(
            np.asarray(calls) + 1,
            *layers,
            colors=[colour[n] for n in names] + (["#EEEEEE"] if has_reserve else []),
            alpha=0.9,
            linewidth=0,
        )
        last = {n: float(v[-1]) if len(v) else 0.0 for n, v in zip(names, layers, strict=False)}
        # all eight in the legend, each with its size at the last call (0 too: absent, not forgotten)
        handles = [
            Patch(color="#EEEEEE", label=f"reserve (free window) {layers[-1][-1]:,.1f}k")
            if has_reserve
            else Patch(facecolor="white", edgecolor="grey", label="reserve: no window set")
        ]
        handles += [Patch(color=colour[n], label=f"{n} {last[n]:,.1f}k") for n in reversed(names)]
        _view_axes(ax, f"Working set by category: trace {trace_id}\nunder {label}", calls)
        ax.legend(
            handles=handles,
            loc="upper left",
            bbox_to_anchor=(1.01, 1.0),
            title="category (at the last call)",
            borderaxespad=0,
        )
        return _png(fig)


# ------------------------------------------------------------------------------------------------ replay
def _pricing(value: Any) -> str | None:
    return None if value in (None, "none", "null") else str(value)


def _find_trace(frames: list[Any], trace_id: str):
    from sim.sweep.execute import _traces
    from sim.trace.codec import trace_hash

    for df in frames:
        rows = df[df["trace_id"] == trace_id]
        for scenario, h in sorted({(str(r.scenario), str(r.trace_hash)) for r in rows.itertuples()}):
            if scenario.startswith("dataset:") and not Path(scenario.removeprefix("dataset:")).exists():
                continue  # a results file never makes the report fetch a hub dataset over the network
            try:
                traces = _traces(scenario)
            except CtxsimError:  # gone, moved or damaged since the sweep: the figure says it is not drawn
                continue
            for t in traces:
                if t.trace_id == trace_id and trace_hash(t) == h:
                    return t
    return None


def _replay(trace, policy_name: str, overrides: str, pricing: str | None, observer=None):
    from sim.config.compose import build_policy, compose, model_behaviour, model_window
    from sim.engine.dispatch import replay
    from sim.engine.model import ReplayModel

    cfg = compose(policy_name, overrides.split())
    policy = build_policy(cfg)
    return replay(
        trace,
        policy,
        ReplayModel(trace, **model_behaviour(cfg)),
        observer=observer,
        window=model_window(cfg),
        pricing=pricing,
    )


def _choose_trace(settings: list[_Setting]) -> str | None:
    """The trace with the most calls among those every setting ran (ties: the smallest id)."""
    common = None
    for s in settings:
        ids = set(s.frame["trace_id"].astype(str))
        common = ids if common is None else common & ids
    if not common:
        return None
    calls: dict[str, int] = {}
    for s in settings:
        for tid, n in zip(s.frame["trace_id"].astype(str), s.frame["calls"], strict=True):
            if tid in common:
                calls[tid] = max(calls.get(tid, 0), int(n))
    return min(common, key=lambda t: (-calls.get(t, 0), t))


# ---------------------------------------------------------------------------------------------- compare
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


def _compare(doc: _Doc, frames: list[Any], settings: list[_Setting], paths: list[Path]) -> None:
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
        f"Baseline: `{paths[0]}` ({_n(len(base_sets), 'setting')}); candidate: `{paths[1]}` "
        f"({_n(len(cand_sets), 'setting')}). Each candidate setting is compared with the baseline "
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
            [label, _FMT[kind](before[m]), _FMT[kind](after[m]), _change(before[m], after[m], kind)]
            for label, m, kind in COMPARE_METRICS
        ]
        doc.table(["metric", "baseline", "candidate", "change"], rows, [False, True, True, True])


# ------------------------------------------------------------------------------------------------ report
def _distinct(frames: list[Any], column: str) -> list[str]:
    return sorted({str(v) for f in frames if column in f for v in f[column].dropna()})


def _check_mixed(frames: list[Any], paths: list[Path], allow_mixed: bool) -> list[str]:
    """The ctxsim versions, scenarios and pricing the files mix: refused unless ``allow_mixed`` (then
    said in the report). Comparing runs of different code, traces or prices would mislead silently."""
    mixed = []
    for column, what in (
        ("ctxsim_version", "ctxsim versions"),
        ("scenario", "suites"),
        ("pricing", "pricing"),
    ):
        values = _distinct(frames, column)
        if len(values) > 1:
            mixed.append(f"{what} {', '.join(values)}")
    if mixed and not allow_mixed:
        raise ConfigError(
            f"report: the results mix {'; '.join(mixed)} ({', '.join(str(p) for p in paths)}); "
            "report them separately, or pass --allow-mixed"
        )
    return mixed


def _sizing(frames: list[Any], paths: list[Path]) -> tuple[int, str, dict] | None:
    """The sizing verdict (``sim.analysis.size.verdict``, as ``size`` and ``demo`` compute it) of the first
    policy
    swept over context_token_limit x keep_recent_tokens with a no-compaction setting (limit unset)."""
    from sim.analysis.size import verdict_from_frame

    keys = ("policy.context_token_limit", "policy.keep_recent_tokens")
    for i, df in enumerate(frames):
        if not set(keys) <= set(df.columns):
            continue
        for policy in sorted({str(v) for v in df["policy"]}):
            g = df[df["policy"] == policy]
            limit = g[keys[0]]
            if limit.isna().any() and limit.notna().any() and g["cost_microusd"].notna().all():
                return i, policy, verdict_from_frame(g, str(paths[i]), policy)
    return None


def _sized_setting(settings: list[_Setting], source: int, policy: str, rec: dict) -> _Setting | None:
    """The table's setting the verdict names: the recommendation, or no compaction without one."""
    want = rec.get("recommended") or {"context_token_limit": None}
    for s in settings:
        if s.source != source or s.policy != policy:
            continue
        if all(_knob(s, f"policy.{k}") == v for k, v in want.items()):
            return s
    return None


def _knob(s: _Setting, key: str):
    v = s.summary.get(key)
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    return int(v)


def _verdict_blocks(doc: _Doc, sized: tuple[int, str, dict] | None, settings: list[_Setting], paths) -> None:
    from sim.analysis.size import recommendation_line, tied_text

    doc.h(2, "Sizing verdict")
    if sized is None:
        doc.p(
            "_No sizing verdict: no results file holds a policy swept over `context_token_limit` × "
            "`keep_recent_tokens` with a no-compaction setting (`policy.context_token_limit=null`) to "
            "compare with._"
        )
        return
    i, policy, rec = sized
    doc.p(
        f"From `{paths[i]}`: `{policy}`'s {rec['settings'] - 1} compacting settings against no compaction, "
        f"paired on the same {rec['traces']} traces (target completion {rec['target_completion']:.0%}, "
        f"facts lost at most +{rec['max_facts_lost_increase']:.0%} of facts seen; the same verdict as "
        f"`ctxsim size` and `ctxsim demo`). **{recommendation_line(rec)}.** {rec['advice']}"
    )
    if line := tied_text(rec):
        doc.p(line[0].upper() + line[1:] + ".")
    base = rec["baseline"]
    if rec.get("recommended"):
        pr = rec["paired"]
        fl, rf = pr["facts_lost_change"], pr["refetch_change"]
        ci = pr["saving_ci"]
        tci = pr["tokens_saving_ci"]
        rows = [
            [
                "mean cost per run (USD)",
                _usd(base["mean_cost_usd"]),
                _usd(rec["mean_cost_usd"]),
                f"saving {_usd(base['mean_cost_usd'] - rec['mean_cost_usd'])} (95% CI {_usd(ci[0])} to "
                f"{_usd(ci[1])})",
            ],
            ["cumulative input tokens per run", "", "", f"saving {_int(tci[0])} to {_int(tci[1])} (95% CI)"],
            [
                "facts lost (total)",
                _int(base["facts_lost"]),
                next(_int(g["facts_lost"]) for g in rec["grid"] if _same(g, rec["recommended"])),
                f"{fl['per_run']:+.3f} per run (95% CI {fl['per_run_ci'][0]:+.3f} to "
                f"{fl['per_run_ci'][1]:+.3f}); {fl['share_of_facts_seen']:+.1%} of facts seen",
            ],
            [
                "refetch calls (total)",
                _int(base["refetch_calls"]),
                next(_int(g["refetch_calls"]) for g in rec["grid"] if _same(g, rec["recommended"])),
                f"{rf['per_run']:+.3f} per run (95% CI {rf['per_run_ci'][0]:+.3f} to "
                f"{rf['per_run_ci'][1]:+.3f})",
            ],
            ["answer completion", _pct(base["completion"]), _pct(rec["completion"]), ""],
            [
                "runs by answer_outcome (change)",
                "",
                "",
                ", ".join(f"{o} {n:+d}" for o, n in pr["outcome_change"].items()),
            ],
        ]
        doc.table(
            ["metric", "no compaction", "recommended", "paired difference"], rows, [False, True, True, False]
        )
    _sensitivity_blocks(doc, rec)


def _sensitivity_blocks(doc: _Doc, rec: dict) -> None:
    """The verdict's mock behaviour, and the table of verdicts under every behaviour the results hold."""
    mock = ", ".join(f"{k}={v}" for k, v in rec.get("mock_model", {}).items())
    if "sensitivity" in rec:
        from sim.analysis.size import sensitivity_text

        sens = rec["sensitivity"]
        doc.p(
            f"The verdict above assumes the mock model {mock}. The same verdict under every mock behaviour "
            "the results hold (`model.on_missing` × `model.summarizer`; oracle is an upper bound):"
        )
        doc.table(
            [
                "on_missing",
                "summarizer",
                "verdict",
                "recommended",
                "mean cost (USD)",
                "completion",
                "saving 95% CI",
            ],
            [
                [
                    r["on_missing"],
                    r["summarizer"],
                    r["verdict"],
                    f"{r['context_token_limit']}/{r['keep_recent_tokens']}"
                    if r["context_token_limit"]
                    else "—",
                    _usd(r["mean_cost_usd"]),
                    _pct(r["completion"]),
                    "—"
                    if r["saving_ci"] is None
                    else f"{_usd(r['saving_ci'][0])} to {_usd(r['saving_ci'][1])}",
                ]
                for r in sens["rows"]
            ],
            [False, False, False, False, True, True, True],
        )
        doc.p(sensitivity_text(sens))
    else:
        doc.p(
            f"The verdict assumes the mock model {mock or 'of the results'}; the results hold no other mock "
            "behaviour, so its sensitivity is not shown (sweep `model.on_missing=refetch,fail,degrade "
            "model.summarizer=extractive,oracle` too, or run `ctxsim size --sensitivity`)."
        )


def verdict_of(md: Path) -> str | None:
    """The recommendation line a written report states (for ``report`` to print it as ``size`` does)."""
    m = re.search(r"\*\*(recommended: [^*]+)\.\*\*", md.read_text(encoding="utf-8"))
    return m.group(1) if m else None


def _same(g: dict, want: dict) -> bool:
    return all(g.get(k) == v for k, v in want.items())


def _trend_sentence(settings: list[_Setting], sized: tuple[int, str, dict] | None) -> str:
    """What the sized grid's table shows from its most to its least aggressive compacting setting, in
    its own numbers (never a fixed claim the table could contradict)."""
    if sized is None:
        return ""
    grid = sized[2]["grid"]
    most = min(grid, key=lambda g: (g["context_token_limit"], g["keep_recent_tokens"]))
    least = max(grid, key=lambda g: (g["context_token_limit"], g["keep_recent_tokens"]))
    if most is least:
        return ""
    base = sized[2]["baseline"]
    return (
        f" In `{sized[1]}`'s grid the most aggressive setting ({most['context_token_limit']}/"
        f"{most['keep_recent_tokens']}) costs {_usd(most['mean_cost_usd'])} per run and loses "
        f"{most['facts_lost']:,} facts; the least ({least['context_token_limit']}/"
        f"{least['keep_recent_tokens']}) {_usd(least['mean_cost_usd'])} and {least['facts_lost']:,}; "
        f"no compaction {_usd(base['mean_cost_usd'])} and {base['facts_lost']:,}."
    )


def make_report(
    results_paths: list[Path],
    out_dir: Path,
    trace_id: str | None = None,
    allow_mixed: bool = False,
    progress=None,
) -> tuple[Path, Path]:
    """Write ``out_dir/report.md``, ``out_dir/report.html`` (self-contained) and ``out_dir/figures/*.png``
    from one or more sweep results (a ``results.parquet`` or its folder). With two paths the second is
    compared with the first (baseline vs candidate). ``trace_id`` picks the trace of the per-call figures
    (default: the trace with the most calls among those every setting ran). Returns (md, html)."""
    paths = [Path(p) for p in results_paths]
    if not paths:
        raise ConfigError("report: give at least one results file or sweep folder")
    said = progress or (lambda _msg: None)  # the work takes seconds: say what it is doing

    def step(msg: str) -> None:
        interrupts.check()  # between steps: a swallowed Ctrl-C stops the report here (sim.util.interrupts)
        said(msg)

    step("reading results")
    frames, settings = _load(paths)
    mixed = _check_mixed(frames, paths, allow_mixed)
    out_dir = Path(out_dir)
    doc = _Doc()
    doc.h(1, "ctxsim sweep report")
    src = "; ".join(
        f"[{i + 1}] `{p}` ({len(f)} runs)" for i, (p, f) in enumerate(zip(paths, frames, strict=True))
    )
    scen = (
        sorted({str(v) for f in frames for v in f["scenario"].dropna()})
        if all("scenario" in f for f in frames)
        else []
    )
    pricing = (
        sorted({str(v) for f in frames for v in f["pricing"].dropna()})
        if all("pricing" in f for f in frames)
        else []
    )
    intro_at = len(doc.blocks)  # the intro counts the settings shown, known after the verdict
    from sim.util.versions import ctxsim_version

    versions = _distinct(frames, "ctxsim_version")
    doc.p(
        f"Results written by ctxsim {', '.join(versions) or 'unknown'}; "
        f"this report by ctxsim {ctxsim_version()}."
        + (f" **Mixed (--allow-mixed): {'; '.join(mixed)}.**" if mixed else "")
    )

    def values(col: str) -> str:
        vs = sorted({"none" if v is None or v != v else str(v) for f in frames if col in f for v in f[col]})
        return ", ".join(vs) or "unknown"

    mock = [
        f"{label} {values(col)}"
        for label, col in (
            ("window", "model.window"),
            ("on_missing", "model.on_missing"),
            ("summarizer", "summarizer"),
            ("retrieval_recall", "model.retrieval_recall"),
            ("max_turns", "model.max_turns"),
        )
    ]
    doc.p(
        f"Assumed mock model: {'; '.join(mock)} (window none: each trace's recorded model's; max_turns "
        "none: no step limit)."
    )
    step("sizing verdict (paired bootstrap)")
    sized = _sizing(frames, paths)
    hidden = 0
    if sized and "sensitivity" in sized[2]:  # the other mock behaviours are in the sensitivity table only
        i, policy, srec = sized
        want = srec["mock_model"]

        def other(s: _Setting) -> bool:
            got = {"on_missing": s.summary.get("model.on_missing"), "summarizer": s.summary.get("summarizer")}
            return s.source == i and s.policy == policy and any(got[k] != v for k, v in want.items())

        hidden = sum(map(other, settings))
        settings = [s for s in settings if not other(s)]
        for n, s in enumerate(settings, 1):
            s.sid = f"S{n}"
    doc.blocks.insert(
        intro_at,
        (
            "p",
            f"Results: {src}. Scenario: {', '.join(f'`{s}`' for s in scen) or 'unknown'}; priced as "
            f"{', '.join(f'`{p}`' for p in pricing) or 'unpriced'}. {len(settings)} policy settings, "
            f"ids S1–S{len(settings)} as in the table below"
            + (
                f" (under the verdict's mock model; {hidden} settings under the other mock behaviours are "
                "in the sensitivity table only)."
                if hidden
                else "."
            ),
        ),
    )
    front = _pareto(settings)
    rec = _sized_setting(settings, sized[0], sized[1], sized[2]) if sized else None
    _verdict_blocks(doc, sized, settings, paths)
    if rec is None:  # no verdict: the per-call figures show the best-completing, cheapest setting
        rec = _recommended(settings)
    rec_name = (
        "recommended setting"
        if sized and sized[2].get("recommended")
        else ("no-compaction setting (the verdict)" if sized else "best-completing, cheapest setting")
    )

    # ---- table (figure 5)
    doc.h(2, "Per-setting summary")
    cols = [
        "id",
        "setting",
        "runs",
        "mean cost (USD)",
        "median cost (USD)",
        "cumulative input tokens",
        "cache hit rate",
        "compactions / run",
        "facts lost (total)",
        "completion",
        "Pareto",
    ]
    rows = []
    for s in settings:
        r = s.summary
        rows.append(
            [
                s.sid,
                s.label,
                str(r["runs"]),
                _usd(r["mean_cost_usd"]),
                _usd(r["median_cost_usd"]),
                _int(r["cumulative_input_tokens"]),
                _pct(r["cache_hit_rate"]),
                _flt(r["compactions"]),
                _int(r["facts_lost"]),
                _pct(r["answer_completed"]),
                "yes" if s.sid in front else "",
            ]
        )
    doc.table(cols, rows, [False, False, True, True, True, True, True, True, True, True, False])
    doc.p(
        "Cumulative input tokens and facts lost are sums over the setting's runs; the cache hit rate is "
        "Σ cache reads ÷ Σ input tokens; completion is the share of runs that reached their final answer "
        "with every needed fact." + _trend_sentence(settings, sized)
    )

    # ---- figure 1
    step("figures: cost vs completion, heatmaps")
    doc.h(2, "Cost vs answer completion")
    if any(s.summary["mean_cost_usd"] is not None for s in settings):
        names = ", ".join(s.sid for s in settings if s.sid in front)
        doc.figure(
            "cost_vs_completion.png",
            _fig_pareto(settings, front),
            "Mean cost per run against answer completion, one point per setting, Pareto frontier dashed",
            f"Each point is a policy setting (ids as in the table); the dashed step line is the Pareto "
            f"frontier ({names}): no other setting is both cheaper and completes more often, and settings "
            f"to its right pay more for no completion gain. Only the frontier's points are labelled; every "
            f"id is in the table."
            + (
                f" The sizing verdict chooses within `{sized[1]}`'s grid against its own no-compaction "
                "setting; a frontier point of another policy is a choice of policy, not of its size."
                if sized
                else ""
            ),
        )
    else:
        doc.p("_Not drawn: no setting is priced (every `cost_microusd` is empty); rerun with `pricing=`._")

    # ---- figure 2
    doc.h(2, "Grid heatmaps")
    grid = _grid_candidate(settings)
    if grid is None:
        doc.p(
            "_Not drawn: the results hold no 2-D grid (a policy whose settings vary in exactly two knobs)._"
        )
    else:
        group, kx, ky = grid
        doc.figure(
            "grid_heatmaps.png",
            _fig_heatmaps(group, kx, ky),
            f"Heatmaps of mean cost and completion over {kx} and {ky}",
            f"Mean cost per run (left) and answer completion (right) of `{group[0].policy}` over "
            f"`{kx}` × `{ky}`; cells marked n/a were not run (e.g. refused settings). Look for the "
            f"cheapest cell whose completion stays green: that pair of knobs trades least information for "
            f"cost.",
        )

    # ---- parent vs child spend: only when some run had children (sub-agents)
    spend = _child_spend(settings)
    if spend:
        doc.h(2, "Parent vs child spend")
        doc.figure(
            "parent_vs_child_spend.png",
            _fig_child_spend(spend),
            "Input tokens and cost of the parents' own calls and of their children's, per setting",
            "Each bar is a policy setting (ids as in the table), summed over its runs: the parents' own "
            "calls (`parent_input_tokens`; cost `cost_microusd` − `child_cost_microusd`) and their "
            "children's, the sub-agents' (`child_input_tokens`, `child_cost_microusd`). The table's "
            "cumulative input and cost include both. A large child share says delegation moved the work; "
            "whether it saved any is the whole bar against the setting without it.",
        )

    # ---- figures 3 and 4: replays of one trace
    doc.h(2, "One trace, call by call")
    tid = trace_id or _choose_trace(settings)
    trace = _find_trace(frames, tid) if tid else None
    if trace_id and trace is None:
        raise ConfigError(
            f"report: trace '{trace_id}' is not in the results (or its scenario cannot be read)"
        )
    if trace is None:
        doc.p(
            "_Not drawn: no trace ran under every setting, or its scenario cannot be read; choose one with "
            "`--trace ID`._"
        )
    else:
        step(f"figures: replaying trace {trace.trace_id}")
        _trace_figures(doc, trace, settings, rec, rec_name)

    # ---- conversations of several runs (only when the results hold one)
    _conversation_section(doc, frames, rec, step)

    # ---- baseline vs candidate
    if len(paths) >= 2:
        _compare(doc, frames, settings, paths)
        if len(paths) > 2:
            doc.p(
                f"_Only the first two results files are compared; the other {len(paths) - 2} "
                f"{'is' if len(paths) == 3 else 'are'} in the table and figures only._"
            )

    interrupts.check()
    out_dir.mkdir(parents=True, exist_ok=True)
    figs = out_dir / "figures"
    figs.mkdir(exist_ok=True)
    # each file whole or not at all, report.md last: an interrupted report leaves no new report.md
    for name, png in doc.figures:
        with atomic_path(figs / name) as tmp:
            tmp.write_bytes(png)
    page = out_dir / "report.html"
    with atomic_path(page) as tmp:
        tmp.write_text(_render_html(doc, "ctxsim sweep report"), encoding="utf-8")
    md = out_dir / "report.md"
    with atomic_path(md) as tmp:
        tmp.write_text(_render_md(doc), encoding="utf-8")
    return md, page


def _conversation_section(doc: _Doc, frames: list[Any], rec: _Setting, step) -> None:
    """Conversation-level growth, drawn only when some result row is a conversation of several runs:
    the first such trace (by id) of the shown setting's rows, replayed under raw, that setting and, for a
    policy with a durable compaction record, the setting without it."""
    from sim.results.summary import _py

    if not any("runs" in f and (f["runs"].dropna() > 1).any() for f in frames):
        return
    doc.h(2, "Conversation growth, run by run")
    frame = rec.frame
    ids = sorted(
        str(t) for t, n in zip(frame["trace_id"], frame["runs"], strict=True) if _py(n) is not None and n > 1
    )
    trace = _find_trace(frames, ids[0]) if ids else None
    if trace is None:
        doc.p(
            f"_Not drawn: no conversation of several runs among the rows of {rec.sid}, or its scenario "
            "cannot be read._"
        )
        return
    step(f"figures: replaying conversation {trace.trace_id}")
    from sim.metrics.conversation import per_run

    pricing = _pricing(rec.frame["pricing_setting"].iloc[0]) if "pricing_setting" in rec.frame else "auto"
    lines: list[tuple[str, Any]] = []
    variants = [("raw", "raw", ""), (f"{rec.sid} {rec.label}", rec.policy, rec.overrides)]
    if "policy.persist_compaction" in frame and _py(frame["policy.persist_compaction"].iloc[0]) is True:
        label = f"{rec.sid} without the durable compaction record"
        variants.append((label, rec.policy, f"{rec.overrides} policy.persist_compaction=false".strip()))
    for label, policy, overrides in variants:
        try:
            lines.append((label, per_run(trace, _replay(trace, policy, overrides, pricing))))
        except ConfigError as exc:
            doc.p(f"_{label} not drawn: {exc}._")
    if len(lines) < 2:
        return
    shown = lines[1][1]
    last = len(shown.live_context_tokens)
    doc.figure(
        "conversation_growth.png",
        _fig_conversation(lines, trace.trace_id),
        f"Opening prompt per run, and live context against the lifetime cumulative input, conversation "
        f"{trace.trace_id}",
        f"Conversation `{trace.trace_id}` ({trace.runs} runs). Left: the opening prompt each run is handed "
        f"(every prior run's records as the carried compaction renders them, plus the run's own task); "
        f"under raw it grows by every run's raw output. Right, for {rec.sid}: the live context (the last "
        f"input of each run) is {shown.live_context_tokens[-1]:,} tokens in run {last} while the "
        f"lifetime cumulative input reaches {shown.cumulative_input_tokens[-1]:,}: the live number is what "
        f"a window must hold, the lifetime one what is paid.",
    )


def _fig_conversation(lines: list[tuple[str, Any]], trace_id: str) -> bytes:
    import matplotlib as mpl

    plt = _plt()
    with mpl.rc_context(_RC):
        fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.6))
        for j, (label, pr) in enumerate(lines):
            runs = list(range(1, len(pr.opening_prompt_tokens) + 1))
            values = [0 if v is None else v / 1e3 for v in pr.opening_prompt_tokens]
            raw = label == "raw"
            ax.plot(
                runs,
                values,
                marker="o",
                label=label,
                color="black" if raw else plt.get_cmap("tab10")(j % 10),
                linestyle="--" if raw else "-",
            )
        ax.set_xlabel("run of the conversation")
        ax.set_ylabel("opening prompt (thousands of tokens)")
        ax.set_title(f"Opening prompt per run: {trace_id}")
        ax.grid(True, alpha=0.3)
        ax.set_ylim(bottom=0)
        ax.legend(loc="upper left", bbox_to_anchor=(0.0, -0.14), frameon=False, fontsize=8.5)
        label, pr = lines[1]
        runs = list(range(1, len(pr.live_context_tokens) + 1))
        bx.plot(runs, [v / 1e3 for v in pr.live_context_tokens], marker="o", color="tab:blue")
        bx.set_ylabel("live context: last input of the run (thousands)", color="tab:blue")
        bx.set_ylim(bottom=0)
        cx = bx.twinx()
        cx.plot(runs, [v / 1e6 for v in pr.cumulative_input_tokens], marker="s", color="tab:red")
        cx.set_ylabel("lifetime cumulative input (millions)", color="tab:red")
        cx.set_ylim(bottom=0)
        bx.set_xlabel("run of the conversation")
        bx.set_title(f"Live context vs lifetime input: {label.split()[0]}")
        bx.grid(True, alpha=0.3)
        for a in (ax, bx):
            a.set_xticks(runs)
        fig.tight_layout()
        return _png(fig)


def _child_spend(settings: list[_Setting]) -> list[tuple[str, int, int, float | None, float | None]]:
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


def _fig_child_spend(spend: list[tuple[str, int, int, float | None, float | None]]) -> bytes:
    import matplotlib as mpl
    from matplotlib.ticker import FuncFormatter

    plt = _plt()
    priced = all(p is not None for *_, p, _c in spend)
    with mpl.rc_context(_RC):
        fig, axes = plt.subplots(
            1, 2 if priced else 1, figsize=(9 if priced else 5.5, 0.5 * len(spend) + 1.8)
        )
        axes = list(axes) if priced else [axes]
        ids = [s[0] for s in spend]
        y = list(range(len(spend)))
        panels = [("input tokens", [s[1] for s in spend], [s[2] for s in spend], lambda v, _p: f"{v:,.0f}")]
        if priced:
            panels.append(
                (
                    "cost (USD)",
                    [s[3] for s in spend],
                    [s[4] for s in spend],
                    # a few cents still read: four decimals below a dollar
                    (lambda v, _p: f"{v:,.2f}")
                    if max(p + c for *_, p, c in spend) >= 1  # type: ignore[operator]
                    else (lambda v, _p: f"{v:,.4f}"),
                )
            )
        for ax, (title, parent, child, fmt) in zip(axes, panels, strict=True):
            ax.barh(y, parent, color="#4c72b0", label="parent's own calls")
            ax.barh(y, child, left=parent, color="#dd8452", label="children (sub-agents)")
            ax.set_yticks(y, ids)
            ax.invert_yaxis()
            ax.set_xlabel(title)
            ax.xaxis.set_major_formatter(FuncFormatter(fmt))
            ax.grid(axis="x", alpha=0.3)
        axes[0].legend(loc="lower right")
        fig.suptitle("Parent vs child spend, summed over each setting's runs")
        return _png(fig)


def _trace_figures(doc: _Doc, trace, settings: list[_Setting], rec: _Setting, rec_name: str) -> None:
    tid = trace.trace_id
    pricing = _pricing(rec.frame["pricing_setting"].iloc[0]) if "pricing_setting" in rec.frame else "auto"
    curves: list[tuple[str, Any]] = []
    skipped: list[str] = []
    chosen = _cheapest([s for s in settings if not (s.policy == "raw" and not s.overrides)], MAX_CURVES)
    with_rec = rec not in chosen and not (rec.policy == "raw" and not rec.overrides)
    if with_rec:  # the setting the verdict ships is the curve a reader looks for
        chosen = [*chosen[: MAX_CURVES - 1], rec]
    try:
        curves.append(("raw", _replay(trace, "raw", "", pricing).calls["input_tokens"]))
    except ConfigError as exc:
        skipped.append(f"raw ({exc})")
    for s in chosen:
        try:
            rec_s = _replay(trace, s.policy, s.overrides, pricing)
        except ConfigError as exc:
            skipped.append(f"{s.sid} ({exc})")
            continue
        curves.append((f"{s.sid} {s.label}", rec_s.calls["input_tokens"]))
    left_out = len(settings) - len(chosen) - any(s.policy == "raw" and not s.overrides for s in settings)
    if curves:
        raw_total = sum(int(v) for v in curves[0][1]) if curves[0][0] == "raw" else None
        others = [sum(int(v) for v in c) for label, c in curves if label != "raw"]
        ratio = (
            f" The smallest total among the settings is {min(others) / raw_total:.0%} of raw's."
            if raw_total and others
            else ""
        )
        doc.figure(
            "cumulative_input_tokens.png",
            _fig_cumulative(curves, tid),
            f"Cumulative input tokens by call for trace {tid}, raw and policy settings",
            f"Trace `{tid}` ({len(trace.calls)} recorded calls) replayed under `raw` (dashed) and "
            + (
                f"the {len(chosen) - with_rec} cheapest settings"
                + (f" and the {rec_name} {rec.sid}" if with_rec else "")
                if left_out > 0
                else "every setting"
            )
            + ": raw "
            f"resends the whole history each call, so its cumulative input bends upward (quadratic); a "
            f"policy that bounds the view grows close to linearly, and the gap is what it saves.{ratio}",
        )
    if skipped:
        doc.p("_Left out of the curves: " + "; ".join(skipped) + "._")

    calls: list[int] = []
    by_state: dict[int, list[int]] = {c: [] for c in STATE_COLOURS}

    def observe(k: int, view) -> None:
        calls.append(k)
        sums = dict.fromkeys(STATE_COLOURS, 0)
        for st, tok in zip(view.state[: view.n], view.tokens[: view.n], strict=True):
            if st in sums:
                sums[st] += tok
        for c in STATE_COLOURS:
            by_state[c].append(sums[c])

    try:
        record = _replay(trace, rec.policy, rec.overrides, pricing, observer=observe)
    except ConfigError as exc:
        doc.p(f"_View composition not drawn: {rec.sid} cannot be replayed ({exc})._")
        return
    if not calls:
        doc.p("_View composition not drawn: the replay made no agent call._")
        return
    present = [STATE_COLOURS[c][0] for c in STATE_COLOURS if any(by_state[c])]
    last = {STATE_COLOURS[c][0]: by_state[c][-1] for c in STATE_COLOURS}
    final = sum(last.values())
    doc.figure(
        "view_composition.png",
        _fig_composition(calls, by_state, f"{rec.sid} {rec.label}", tid),
        f"Stacked tokens in view by item state per agent call, trace {tid}, setting {rec.sid}",
        f"What each agent request of `{tid}` held under the {rec_name} {rec.sid}, by item state "
        f"({', '.join(present)}). Drops in the stack are compactions; at the last call "
        f"{_pct(last['verbatim'] / final if final else None)} of the view's {final:,} tokens are verbatim.",
    )
    from sim.core.records import AGENT
    from sim.metrics.working_set import working_set

    ws = working_set(trace, record)
    agent = record.calls["kind"] == AGENT
    columns = {name: ws[name][agent] for name in _CATEGORY_COLUMN.values()}
    at_last = {n: int(columns[_CATEGORY_COLUMN[n]][-1]) for n, _ in CATEGORY_COLOURS}
    reserve = int(ws["reserve_tokens"][agent][-1])
    biggest = max(at_last, key=lambda n: (at_last[n], n))
    doc.figure(
        "working_set.png",
        _fig_working_set(
            record.calls["recorded_call"][agent].tolist(),
            columns,
            f"{rec.sid} {rec.label}",
            tid,
            ws["reserve_tokens"][agent],
        ),
        f"Stacked tokens in view by working-set category per agent call, trace {tid}, setting {rec.sid}",
        "The same requests by the eight categories of a context ledger "
        "(rules in `sim/metrics/working_set.py`: "
        f"file reads, test output and repository listings by the command that produced them; recent "
        f"conversation is what entered within the last 5 calls). At the last call the largest category "
        f"is {biggest} ({at_last[biggest]:,} tokens)"
        + (
            f"; {reserve:,} tokens of the window are left (free room, the output included)."
            if reserve >= 0
            else "."
        )
        + (
            " This trace is text-free: no command to classify, so its tool results count as conversation."
            if all(e.content is None for e in trace.events if e.kind == "assistant")
            else ""
        ),
    )
