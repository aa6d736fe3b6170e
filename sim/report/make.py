"""``ctxsim report``: sweep results (``results.parquet``, one or more) as Markdown and self-contained HTML.

The report is built once as a list of blocks (headings, paragraphs, tables, figures) and rendered twice:
``report.md`` links the PNGs in ``figures/``; ``report.html`` embeds them as base64 data URIs, so it is one
file with no external assets. Nothing in it depends on the clock or the machine: the same inputs give
byte-identical Markdown (and, with matplotlib's Agg backend at a fixed DPI and no Software metadata,
identical PNGs).

Figures: cost vs completion per setting with its Pareto frontier; heatmaps of cost, completion and facts
lost over a 2-D grid of one policy; cumulative input tokens by call for one trace under ``raw`` and the
cheapest settings (replayed); the view's composition by item state under the recommended setting (replayed).
"""

from __future__ import annotations

import re
from functools import partial
from pathlib import Path
from typing import Any

from sim.analysis.published import checked_against, checked_against_text
from sim.report.compare import compare_section
from sim.report.conversation import conversation_section
from sim.report.document import Doc, render_html, render_md
from sim.report.figures import fig_child_spend, fig_heatmaps, fig_pareto, grid_candidate
from sim.report.formats import fmt_float, fmt_int, fmt_pct, fmt_usd
from sim.report.replays import choose_trace, find_trace
from sim.report.settings import (
    ReportSetting,
    check_mixed,
    child_spend,
    distinct,
    load_settings,
    pareto,
    recommended,
)
from sim.report.trace_section import trace_figures
from sim.report.verdict import sized_setting, sizing, trend_sentence, verdict_blocks
from sim.util import interrupts
from sim.util.atomicfile import atomic_path
from sim.util.errors import ConfigError


def verdict_of(md: Path) -> str | None:
    """The recommendation line a written report states (for ``report`` to print it as ``size`` does)."""
    m = re.search(r"\*\*(recommended: [^*]+)\.\*\*", md.read_text(encoding="utf-8"))
    return m.group(1) if m else None


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
    # the work takes seconds: say what it is doing
    step = partial(_step, progress or (lambda _msg: None))
    step("reading results")
    frames, settings = load_settings(paths)
    mixed = check_mixed(frames, paths, allow_mixed)
    doc = Doc()
    doc.h(1, "ctxsim sweep report")
    intro_at = len(doc.blocks)  # the intro counts the settings shown, known after the verdict
    doc.p(_versions_line(frames, mixed))
    doc.p(_mock_model_line(frames))
    for line in checked_against_text(checked_against()):
        doc.p(f"Checked against {line}.")
    step("sizing verdict (paired bootstrap)")
    sized = sizing(frames, paths)
    settings, hidden = _under_the_verdicts_mock(settings, sized)
    doc.blocks.insert(intro_at, ("p", _results_line(paths, frames, settings, hidden)))
    front = pareto(settings)
    rec = sized_setting(settings, sized[0], sized[1], sized[2]) if sized else None
    verdict_blocks(doc, sized, settings, paths)
    if rec is None:  # no verdict: the per-call figures show the best-completing, cheapest setting
        rec = recommended(settings)
    _summary_table(doc, settings, front, sized)
    step("figures: cost vs completion, heatmaps")
    _cost_section(doc, settings, front, sized)
    _heatmap_section(doc, settings)
    _child_spend_section(doc, settings)
    _one_trace_section(doc, frames, settings, rec, _shown_name(sized), trace_id, step)
    conversation_section(doc, frames, rec, step)
    if len(paths) >= 2:
        _compare_sections(doc, frames, settings, paths)
    return _write_report(doc, Path(out_dir))


def _step(said, msg: str) -> None:
    """Between steps: a swallowed Ctrl-C stops the report here (sim.util.interrupts); then say the step."""
    interrupts.check()
    said(msg)


def _versions_line(frames: list[Any], mixed: list[str]) -> str:
    from sim.util.versions import ctxsim_version

    versions = distinct(frames, "ctxsim_version")
    return (
        f"Results written by ctxsim {', '.join(versions) or 'unknown'}; "
        f"this report by ctxsim {ctxsim_version()}."
        + (f" **Mixed (--allow-mixed): {'; '.join(mixed)}.**" if mixed else "")
    )


def _column_values(frames: list[Any], col: str) -> str:
    vs = sorted({"none" if v is None or v != v else str(v) for f in frames if col in f for v in f[col]})
    return ", ".join(vs) or "unknown"


def _mock_model_line(frames: list[Any]) -> str:
    mock = [
        f"{label} {_column_values(frames, col)}"
        for label, col in (
            ("window", "model.window"),
            ("on_missing", "model.on_missing"),
            ("summarizer", "summarizer"),
            ("retrieval_recall", "model.retrieval_recall"),
            ("max_turns", "model.max_turns"),
            ("reread_margin_tokens", "model.reread_margin_tokens"),
        )
    ]
    return (
        f"Assumed mock model: {'; '.join(mock)} (window none: each trace's recorded model's; max_turns "
        "none: no step limit)."
    )


def _other_mock(s: ReportSetting, sized: tuple[int, str, dict]) -> bool:
    """Whether ``s`` is a setting of the sized grid under another mock behaviour than the verdict's."""
    i, policy, srec = sized
    want = srec["mock_model"]
    got = {"on_missing": s.summary.get("model.on_missing"), "summarizer": s.summary.get("summarizer")}
    return s.source == i and s.policy == policy and any(got[k] != v for k, v in want.items())


def _under_the_verdicts_mock(
    settings: list[ReportSetting], sized: tuple[int, str, dict] | None
) -> tuple[list[ReportSetting], int]:
    """The settings shown, and how many are hidden: the other mock behaviours of the sized grid are in
    the sensitivity table only. The ids are numbered again over the settings shown."""
    if not (sized and "sensitivity" in sized[2]):
        return settings, 0
    hidden = sum(_other_mock(s, sized) for s in settings)
    settings = [s for s in settings if not _other_mock(s, sized)]
    for n, s in enumerate(settings, 1):
        s.sid = f"S{n}"
    return settings, hidden


def _results_line(paths: list[Path], frames: list[Any], settings: list[ReportSetting], hidden: int) -> str:
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
    return (
        f"Results: {src}. Scenario: {', '.join(f'`{s}`' for s in scen) or 'unknown'}; priced as "
        f"{', '.join(f'`{p}`' for p in pricing) or 'unpriced'}. {len(settings)} policy settings, "
        f"ids S1–S{len(settings)} as in the table below"
        + (
            f" (under the verdict's mock model; {hidden} settings under the other mock behaviours are "
            "in the sensitivity table only)."
            if hidden
            else "."
        )
    )


def _shown_name(sized: tuple[int, str, dict] | None) -> str:
    """What the setting the per-call figures show is called."""
    return (
        "recommended setting"
        if sized and sized[2].get("recommended")
        else ("no-compaction setting (the verdict)" if sized else "best-completing, cheapest setting")
    )


SUMMARY_TABLE_COLUMNS = [
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


def _summary_table(
    doc: Doc, settings: list[ReportSetting], front: set[str], sized: tuple[int, str, dict] | None
) -> None:
    """The per-setting table (figure 5) and what its columns mean."""
    doc.h(2, "Per-setting summary")
    rows = []
    for s in settings:
        r = s.summary
        rows.append(
            [
                s.sid,
                s.label,
                str(r["runs"]),
                fmt_usd(r["mean_cost_usd"]),
                fmt_usd(r["median_cost_usd"]),
                fmt_int(r["cumulative_input_tokens"]),
                fmt_pct(r["cache_hit_rate"]),
                fmt_float(r["compactions"]),
                fmt_int(r["facts_lost"]),
                fmt_pct(r["answer_completed"]),
                "yes" if s.sid in front else "",
            ]
        )
    right = [False, False, True, True, True, True, True, True, True, True, False]
    doc.table(list(SUMMARY_TABLE_COLUMNS), rows, right)
    doc.p(
        "Cumulative input tokens and facts lost are sums over the setting's runs; the cache hit rate is "
        "Σ cache reads ÷ Σ input tokens; completion is the share of runs that reached their final answer "
        "with every needed fact." + trend_sentence(settings, sized)
    )


def _cost_section(
    doc: Doc, settings: list[ReportSetting], front: set[str], sized: tuple[int, str, dict] | None
) -> None:
    """Figure 1: cost vs answer completion, with the Pareto frontier."""
    doc.h(2, "Cost vs answer completion")
    if not any(s.summary["mean_cost_usd"] is not None for s in settings):
        doc.p("_Not drawn: no setting is priced (every `cost_microusd` is empty); rerun with `pricing=`._")
        return
    names = ", ".join(s.sid for s in settings if s.sid in front)
    doc.figure(
        "cost_vs_completion.png",
        fig_pareto(settings, front),
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


def _heatmap_section(doc: Doc, settings: list[ReportSetting]) -> None:
    """Figure 2: heatmaps of cost, completion and facts lost over the first 2-D grid of one policy."""
    doc.h(2, "Grid heatmaps")
    grid = grid_candidate(settings)
    if grid is None:
        doc.p(
            "_Not drawn: the results hold no 2-D grid (a policy whose settings vary in exactly two knobs)._"
        )
        return
    group, kx, ky = grid
    doc.figure(
        "grid_heatmaps.png",
        fig_heatmaps(group, kx, ky),
        f"Heatmaps of mean cost, completion and facts lost over {kx} and {ky}",
        f"Mean cost per run (left), answer completion (middle) and facts lost (right) of "
        f"`{group[0].policy}` over `{kx}` × `{ky}`; cells marked n/a were not run (e.g. refused "
        f"settings). A cheap cell is worth shipping only where completion stays green and few facts are "
        f"lost; the verdict above weighs the three, with overflow first, and may pick another cell.",
    )


def _child_spend_section(doc: Doc, settings: list[ReportSetting]) -> None:
    """Parent vs child spend: only when some run had children (sub-agents)."""
    spend = child_spend(settings)
    if not spend:
        return
    doc.h(2, "Parent vs child spend")
    doc.figure(
        "parent_vs_child_spend.png",
        fig_child_spend(spend),
        "Input tokens and cost of the parents' own calls and of their children's, per setting",
        "Each bar is a policy setting (ids as in the table), summed over its runs: the parents' own "
        "calls (`parent_input_tokens`; cost `cost_microusd` − `child_cost_microusd`) and their "
        "children's, the sub-agents' (`child_input_tokens`, `child_cost_microusd`). The table's "
        "cumulative input and cost include both. A large child share says delegation moved the work; "
        "whether it saved any is the whole bar against the setting without it.",
    )


def _one_trace_section(
    doc: Doc,
    frames: list[Any],
    settings: list[ReportSetting],
    rec: ReportSetting,
    rec_name: str,
    trace_id: str | None,
    step,
) -> None:
    """Figures 3 and 4: replays of one trace (``trace_id``, else the one ``choose_trace`` picks)."""
    doc.h(2, "One trace, call by call")
    tid = trace_id or choose_trace(settings)
    trace = find_trace(frames, tid) if tid else None
    if trace_id and trace is None:
        raise ConfigError(
            f"report: trace '{trace_id}' is not in the results (or its scenario cannot be read)"
        )
    if trace is None:
        doc.p(
            "_Not drawn: no trace ran under every setting, or its scenario cannot be read; choose one with "
            "`--trace ID`._"
        )
        return
    step(f"figures: replaying trace {trace.trace_id}")
    trace_figures(doc, trace, settings, rec, rec_name)


def _compare_sections(doc: Doc, frames: list[Any], settings: list[ReportSetting], paths: list[Path]) -> None:
    """Baseline vs candidate: the first two results files."""
    compare_section(doc, frames, settings, paths)
    if len(paths) > 2:
        doc.p(
            f"_Only the first two results files are compared; the other {len(paths) - 2} "
            f"{'is' if len(paths) == 3 else 'are'} in the table and figures only._"
        )


def _write_report(doc: Doc, out_dir: Path) -> tuple[Path, Path]:
    """The figures, report.html and report.md, each file whole or not at all, report.md last: an
    interrupted report leaves no new report.md."""
    interrupts.check()
    out_dir.mkdir(parents=True, exist_ok=True)
    figs = out_dir / "figures"
    figs.mkdir(exist_ok=True)
    for name, png in doc.figures:
        with atomic_path(figs / name) as tmp:
            tmp.write_bytes(png)
    page = out_dir / "report.html"
    with atomic_path(page) as tmp:
        tmp.write_text(render_html(doc, "ctxsim sweep report"), encoding="utf-8")
    md = out_dir / "report.md"
    with atomic_path(md) as tmp:
        tmp.write_text(render_md(doc), encoding="utf-8")
    return md, page
