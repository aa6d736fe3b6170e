"""Per-run figures of a conversation's replay: which run each request belongs to, each run's opening
prompt, its live context and the lifetime counter through it.

A trace may hold several runs of one conversation (``Trace.runs``, schema version 2). A row of the
replay's calls table belongs to the run of the recorded call it replays or precedes. These figures are
what ``--calls`` appends and what the report's conversation-growth figure draws; the result row keeps
one number each (``sim.metrics.compute``: ``runs``, ``max_opening_prompt_tokens``, ``live_context_tokens``).
"""

from __future__ import annotations

from typing import NamedTuple

from sim.core.records import AGENT, SUMMARY, RunRecord
from sim.core.types import Trace


class PerRun(NamedTuple):
    """Per run reached by the replay (index = run): the row numbers of its opening request and of its
    last agent step, its opening prompt (None for a trace of one run: not recorded), its live context
    (the input of its last agent step) and the cumulative input of every request through its end."""

    row_run: list[int]  # per calls-table row: its run
    opening_row: list[int | None]
    last_row: list[int]
    opening_prompt_tokens: list[int | None]
    live_context_tokens: list[int]
    cumulative_input_tokens: list[int]


def per_run(trace: Trace, r: RunRecord) -> PerRun:
    run_of_call = [c.run_index for c in trace.calls]
    recorded, kinds, inputs = r.column("recorded_call"), r.column("kind"), r.column("input_tokens")
    row_run = [run_of_call[k] for k in recorded]
    runs = row_run[-1] + 1 if row_run else 0
    starts = trace.run_starts
    opening_row: list[int | None] = [None] * runs
    last_row = [-1] * runs
    cumulative = [0] * runs
    for j, (k, kind, run) in enumerate(zip(recorded, kinds, row_run, strict=True)):
        if kind == AGENT and opening_row[run] is None and k == starts[run]:
            opening_row[run] = j
        if kind != SUMMARY:
            last_row[run] = j
        cumulative[run] += inputs[j]
    for run in range(1, runs):
        cumulative[run] += cumulative[run - 1]
    openings = list(r.opening_prompts[:runs]) + [None] * max(runs - len(r.opening_prompts), 0)
    return PerRun(
        row_run,
        opening_row,
        last_row,
        openings,
        [inputs[j] if j >= 0 else 0 for j in last_row],
        cumulative,
    )
