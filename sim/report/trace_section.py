"""The section "One trace, call by call": one trace replayed under raw and the cheapest settings
(cumulative input by call), then under the shown setting, by item state and by working-set category."""

from __future__ import annotations

from typing import Any

from sim.report.document import Doc
from sim.report.figures import (
    CATEGORY_COLOURS,
    CATEGORY_COLUMN,
    STATE_COLOURS,
    fig_composition,
    fig_cumulative,
    fig_working_set,
)
from sim.report.formats import fmt_pct
from sim.report.replays import pricing_of, replay_setting
from sim.report.settings import ReportSetting, cheapest
from sim.util.errors import ConfigError

MAX_CURVES = 6


def trace_figures(doc: Doc, trace, settings: list[ReportSetting], rec: ReportSetting, rec_name: str) -> None:
    """The section's three figures of ``trace``: cumulative input under raw and the cheapest settings,
    then the view under ``rec`` (the setting ``rec_name`` names) by item state and by working-set
    category."""
    pricing = pricing_of(rec.frame["pricing_setting"].iloc[0]) if "pricing_setting" in rec.frame else "auto"
    _cumulative_figure(doc, trace, settings, rec, rec_name, pricing)
    by_state = ViewByState()
    try:
        record = replay_setting(trace, rec.policy, rec.overrides, pricing, observer=by_state)
    except ConfigError as exc:
        doc.p(f"_View composition not drawn: {rec.sid} cannot be replayed ({exc})._")
        return
    if not by_state.calls:
        doc.p("_View composition not drawn: the replay made no agent call._")
        return
    _composition_figure(doc, trace, rec, rec_name, by_state)
    _working_set_figure(doc, trace, rec, record)


def _is_plain_raw(s: ReportSetting) -> bool:
    return s.policy == "raw" and not s.overrides


def _cumulative_figure(
    doc: Doc, trace, settings: list[ReportSetting], rec: ReportSetting, rec_name: str, pricing: str | None
) -> None:
    """Cumulative input tokens by call under raw, the cheapest settings and ``rec``."""
    tid = trace.trace_id
    curves: list[tuple[str, Any]] = []
    skipped: list[str] = []
    chosen = cheapest([s for s in settings if not _is_plain_raw(s)], MAX_CURVES)
    with_rec = rec not in chosen and not _is_plain_raw(rec)
    if with_rec:  # the setting the verdict ships is the curve a reader looks for
        chosen = [*chosen[: MAX_CURVES - 1], rec]
    try:
        curves.append(("raw", replay_setting(trace, "raw", "", pricing).calls["input_tokens"]))
    except ConfigError as exc:
        skipped.append(f"raw ({exc})")
    for s in chosen:
        try:
            rec_s = replay_setting(trace, s.policy, s.overrides, pricing)
        except ConfigError as exc:
            skipped.append(f"{s.sid} ({exc})")
            continue
        curves.append((f"{s.sid} {s.label}", rec_s.calls["input_tokens"]))
    left_out = len(settings) - len(chosen) - any(_is_plain_raw(s) for s in settings)
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
            fig_cumulative(curves, tid),
            f"Cumulative input tokens by call for trace {tid}, raw and policy settings",
            f"Trace `{tid}` ({len(trace.calls)} recorded calls) replayed under `raw` (dashed) and "
            + (
                f"the {len(chosen) - with_rec} cheapest settings (those with no run cut by an overflow first)"
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


class ViewByState:
    """A replay observer: per agent call, the tokens in view by item state (``STATE_COLOURS``' codes)."""

    def __init__(self) -> None:
        self.calls: list[int] = []
        self.by_state: dict[int, list[int]] = {c: [] for c in STATE_COLOURS}

    def __call__(self, k: int, view) -> None:
        self.calls.append(k)
        sums = dict.fromkeys(STATE_COLOURS, 0)
        for st, tok in zip(view.state[: view.n], view.tokens[: view.n], strict=True):
            if st in sums:
                sums[st] += tok
        for c in STATE_COLOURS:
            self.by_state[c].append(sums[c])


def _composition_figure(doc: Doc, trace, rec: ReportSetting, rec_name: str, seen: ViewByState) -> None:
    """The view under ``rec`` by item state, call by call."""
    tid = trace.trace_id
    by_state = seen.by_state
    present = [STATE_COLOURS[c][0] for c in STATE_COLOURS if any(by_state[c])]
    last = {STATE_COLOURS[c][0]: by_state[c][-1] for c in STATE_COLOURS}
    final = sum(last.values())
    verbatim = fmt_pct(last["verbatim"] / final if final else None)
    doc.figure(
        "view_composition.png",
        fig_composition(seen.calls, by_state, f"{rec.sid} {rec.label}", tid),
        f"Stacked tokens in view by item state per agent call, trace {tid}, setting {rec.sid}",
        f"What each agent request of `{tid}` held under the {rec_name} {rec.sid}, by item state "
        f"({', '.join(present)}). Drops in the stack are compactions; at the last call "
        f"{verbatim} of the view's {final:,} tokens are verbatim.",
    )


def _working_set_figure(doc: Doc, trace, rec: ReportSetting, record) -> None:
    """The same requests by working-set category (``sim.metrics.working_set``), the window's free room on
    top."""
    from sim.core.records import AGENT
    from sim.metrics.working_set import working_set

    tid = trace.trace_id
    ws = working_set(trace, record)
    agent = record.calls["kind"] == AGENT
    columns = {name: ws[name][agent] for name in CATEGORY_COLUMN.values()}
    at_last = {n: int(columns[CATEGORY_COLUMN[n]][-1]) for n, _ in CATEGORY_COLOURS}
    reserve = int(ws["reserve_tokens"][agent][-1])
    biggest = max(at_last, key=lambda n: (at_last[n], n))
    doc.figure(
        "working_set.png",
        fig_working_set(
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
