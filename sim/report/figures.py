"""The report's figures, each a PNG drawn with matplotlib's Agg backend at a fixed DPI and without the
Software metadata, so the same inputs give identical bytes: cost vs completion with the Pareto frontier,
grid heatmaps (cost, completion, facts lost), cumulative input by call, the view by item state and by
working-set category, a conversation's growth run by run, and parent vs child spend."""

from __future__ import annotations

import math
from typing import Any

from sim.report.settings import ReportSetting

DPI = 110


STATE_COLOURS = {  # ItemState code -> (name, colour); DROPPED holds no tokens
    0: ("verbatim", "#4C72B0"),
    1: ("bounded", "#DD8452"),
    2: ("masked", "#C44E52"),
    4: ("summarized", "#8172B3"),
    5: ("spilled", "#55A868"),
    6: ("paginated", "#937860"),
}


def pyplot():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def png_bytes(fig) -> bytes:
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None}, bbox_inches="tight")
    pyplot().close(fig)
    return buf.getvalue()


RC = {
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "legend.fontsize": 8.5,
    "svg.hashsalt": "0",
}


def fig_pareto(settings: list[ReportSetting], front: set[str]) -> bytes:
    import matplotlib as mpl
    from matplotlib.ticker import FuncFormatter, PercentFormatter

    plt = pyplot()
    priced = [s for s in settings if s.summary["mean_cost_usd"] is not None]
    with mpl.rc_context(RC):
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
        return png_bytes(fig)


def grid_candidate(settings: list[ReportSetting]) -> tuple[list[ReportSetting], str, str] | None:
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


def fig_heatmaps(group: list[ReportSetting], kx: str, ky: str) -> bytes:
    import matplotlib as mpl
    import numpy as np

    from sim.results.summary import value_sort_key

    plt = pyplot()
    xs = sorted({s.knobs.get(kx) for s in group}, key=value_sort_key)
    ys = sorted({s.knobs.get(ky) for s in group}, key=value_sort_key)
    cost = np.full((len(ys), len(xs)), np.nan)
    done = np.full((len(ys), len(xs)), np.nan)
    lost = np.full((len(ys), len(xs)), np.nan)
    for s in group:
        i, j = ys.index(s.knobs.get(ky)), xs.index(s.knobs.get(kx))
        if s.summary["mean_cost_usd"] is not None:
            cost[i, j] = s.summary["mean_cost_usd"]
        done[i, j] = s.summary["answer_completed"]
        if s.summary.get("facts_lost") is not None:
            lost[i, j] = s.summary["facts_lost"]
    with mpl.rc_context(RC):
        # facts lost beside completion: under a mock that re-reads what it needs, completion can be 100%
        # in every compacting cell while the settings still differ in what they threw away
        fig, axes = plt.subplots(1, 3, figsize=(16, 4.6))
        panels = (
            (axes[0], cost, "viridis", "mean cost per run (USD)", lambda v: f"${v:.4f}"),
            (axes[1], done, "RdYlGn", "answer completion (share of runs)", lambda v: f"{100 * v:.0f}%"),
            (axes[2], lost, "RdYlGn_r", "facts lost (total over runs)", lambda v: f"{v:,.0f}"),
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
                    else ""
                    if m is lost
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
        fig.suptitle(f"{group[0].policy}: mean cost, completion and facts lost over the grid")
        fig.tight_layout()
        return png_bytes(fig)


def fig_cumulative(curves: list[tuple[str, Any]], trace_id: str) -> bytes:
    import matplotlib as mpl
    import numpy as np
    from matplotlib.ticker import FuncFormatter

    plt = pyplot()
    with mpl.rc_context(RC):
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
        return png_bytes(fig)


def fig_composition(calls: list[int], by_state: dict[int, list[int]], label: str, trace_id: str) -> bytes:
    import matplotlib as mpl
    import numpy as np

    plt = pyplot()
    with mpl.rc_context(RC):
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
        view_axes(ax, f"View composition by item state: trace {trace_id}\nunder {label}", calls)
        handles, labels = ax.get_legend_handles_labels()
        ax.legend(handles[::-1], labels[::-1], loc="upper left", title="item state")
        return png_bytes(fig)


def view_axes(ax, title: str, calls: list) -> None:
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


CATEGORY_COLUMN = {
    "instructions": "view_instructions_tokens",
    "tool definitions": "view_tool_definitions_tokens",
    "older conversation": "view_older_conversation_tokens",
    "recent conversation": "view_recent_conversation_tokens",
    "repository map": "view_repository_map_tokens",
    "file read": "view_file_read_tokens",
    "test output": "view_test_output_tokens",
}


def fig_working_set(
    calls: list[int], columns: dict[str, Any], label: str, trace_id: str, reserve: Any = None
) -> bytes:
    import matplotlib as mpl
    import numpy as np
    from matplotlib.patches import Patch

    plt = pyplot()
    with mpl.rc_context(RC):
        fig, ax = plt.subplots(figsize=(10, 5.2))
        names = [n for n, _ in CATEGORY_COLOURS]
        colour = dict(CATEGORY_COLOURS)
        layers = [np.asarray(columns[CATEGORY_COLUMN[n]]) / 1e3 for n in names]
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
        view_axes(ax, f"Working set by category: trace {trace_id}\nunder {label}", calls)
        ax.legend(
            handles=handles,
            loc="upper left",
            bbox_to_anchor=(1.01, 1.0),
            title="category (at the last call)",
            borderaxespad=0,
        )
        return png_bytes(fig)


def fig_conversation(lines: list[tuple[str, Any]], trace_id: str) -> bytes:
    import matplotlib as mpl

    plt = pyplot()
    with mpl.rc_context(RC):
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
        return png_bytes(fig)


def fig_child_spend(spend: list[tuple[str, int, int, float | None, float | None]]) -> bytes:
    import matplotlib as mpl
    from matplotlib.ticker import FuncFormatter

    plt = pyplot()
    priced = all(p is not None for *_, p, _c in spend)
    with mpl.rc_context(RC):
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
        return png_bytes(fig)
