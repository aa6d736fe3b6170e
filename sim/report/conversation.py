"""Conversation growth, run by run: drawn only when some result row is a conversation of several runs,
the opening prompt each run is handed and its live context against the lifetime cumulative input."""

from __future__ import annotations

from typing import Any

from sim.report.document import Doc
from sim.report.figures import fig_conversation
from sim.report.replays import find_trace, pricing_of, replay_setting
from sim.report.settings import ReportSetting
from sim.util.errors import ConfigError


def conversation_section(doc: Doc, frames: list[Any], rec: ReportSetting, step) -> None:
    """Conversation-level growth, drawn only when some result row is a conversation of several runs:
    the first such trace (by id) of the shown setting's rows, replayed under raw, that setting and, for a
    policy with a durable compaction record, the setting without it."""
    from sim.results.summary import plain_value

    if not any("runs" in f and (f["runs"].dropna() > 1).any() for f in frames):
        return
    doc.h(2, "Conversation growth, run by run")
    frame = rec.frame
    ids = sorted(
        str(t)
        for t, n in zip(frame["trace_id"], frame["runs"], strict=True)
        if plain_value(n) is not None and n > 1
    )
    trace = find_trace(frames, ids[0]) if ids else None
    if trace is None:
        doc.p(
            f"_Not drawn: no conversation of several runs among the rows of {rec.sid}, or its scenario "
            "cannot be read._"
        )
        return
    step(f"figures: replaying conversation {trace.trace_id}")
    from sim.metrics.conversation import per_run

    pricing = pricing_of(rec.frame["pricing_setting"].iloc[0]) if "pricing_setting" in rec.frame else "auto"
    lines: list[tuple[str, Any]] = []
    variants = [("raw", "raw", ""), (f"{rec.sid} {rec.label}", rec.policy, rec.overrides)]
    if (
        "policy.persist_compaction" in frame
        and plain_value(frame["policy.persist_compaction"].iloc[0]) is True
    ):
        label = f"{rec.sid} without the durable compaction record"
        variants.append((label, rec.policy, f"{rec.overrides} policy.persist_compaction=false".strip()))
    for label, policy, overrides in variants:
        try:
            lines.append((label, per_run(trace, replay_setting(trace, policy, overrides, pricing))))
        except ConfigError as exc:
            doc.p(f"_{label} not drawn: {exc}._")
    if len(lines) < 2:
        return
    shown = lines[1][1]
    last = len(shown.live_context_tokens)
    doc.figure(
        "conversation_growth.png",
        fig_conversation(lines, trace.trace_id),
        f"Opening prompt per run, and live context against the lifetime cumulative input, conversation "
        f"{trace.trace_id}",
        f"Conversation `{trace.trace_id}` ({trace.runs} runs). Left: the opening prompt each run is handed "
        f"(every prior run's records as the carried compaction renders them, plus the run's own task); "
        f"under raw it grows by every run's raw output. Right, for {rec.sid}: the live context (the last "
        f"input of each run) is {shown.live_context_tokens[-1]:,} tokens in run {last} while the "
        f"lifetime cumulative input reaches {shown.cumulative_input_tokens[-1]:,}: the live number is what "
        f"a window must hold, the lifetime one what is paid.",
    )
