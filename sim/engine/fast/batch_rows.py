"""A batch's rows: their layout (``Rows``), the re-read rows inserted before the agent rows they precede
(``batch_rereads``, ``insert_rereads``), the plans' summary rows likewise (``batch_summaries``,
``insert_summaries``), each run's column totals (``ColumnSums``), the call table as one
block (``stack_columns``) and the loop's refusal of a run whose column sums could wrap int64
(``check_column_sums``). Used by ``sim.engine.fast.batch``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numpy as np

if TYPE_CHECKING:
    from sim.engine.fast.batch import Prepared

from sim.core.records import (
    CALL_COLUMNS,
    SUMMARY,
)
from sim.core.segments import offsets, owners, value_ends, value_starts
from sim.core.types import Trace
from sim.util.errors import TraceError
from sim.util.limits import run_sum_problem


class ColumnSums:
    """Each run's total of every call column, a column summed when first asked for (a batch's metrics
    read a few columns, a run's record all of them)."""

    __slots__ = ("_columns", "_rows", "_done", "_by_array")

    def __init__(self, columns: dict[str, np.ndarray], rows: Rows, done: dict[str, np.ndarray]) -> None:
        # ``columns``: name -> the column over the batch's rows; ``done``: name -> per-run totals known
        self._columns, self._rows, self._done = columns, rows, done
        self._by_array: dict[int, np.ndarray] = {}  # id of a column (held) -> its totals: columns that
        # are one array (no cache: uncached input is the input; read and write the same zeros) sum once

    def column(self, name: str) -> np.ndarray:
        """Per run: its total of column ``name``."""
        total = self._done.get(name)
        if total is None:
            col = self._columns[name]
            total = self._by_array.get(id(col))
            if total is None:
                rows = self._rows
                total = np.zeros(len(rows.bounds) - 1, dtype=np.int64)
                if len(rows.nonempty):
                    total[rows.nonempty] = np.add.reduceat(col, rows.nonempty_off)
                self._by_array[id(col)] = total
            self._done[name] = total
        return total

    def per_run(self) -> list[list[int]]:
        """Each run's totals, in CALL_COLUMNS order."""
        return np.array([self.column(n) for n in CALL_COLUMNS], dtype=np.int64).T.tolist()


def stack_columns(columns: dict[str, np.ndarray]) -> np.ndarray:
    table = np.empty((len(CALL_COLUMNS), len(columns["call"])), dtype=np.int64)
    for row, name in zip(table, CALL_COLUMNS, strict=True):  # row by row: np.stack is slower
        row[:] = columns[name]
    table.setflags(write=False)
    return table


def check_column_sums(
    table: np.ndarray, rows: Rows, rows_per_run: np.ndarray, traces: list[Trace], top: int | None = None
) -> None:
    """Refuse, as the loop does (``sim.engine.common.check_sums``), a run whose column sums could wrap
    int64:
    one bound on the whole batch (``top``: the largest magnitude in any column but cost, when known),
    and the runs only when it fails."""
    counts = table[:-1]  # every column but cost (sim.util.limits.run_sum_problem)
    if not counts.size:
        return
    if top is None:
        top = max(int(counts.max()), -int(counts.min()))
    if run_sum_problem(top, int(rows_per_run.max())) is None:
        return
    nonempty = rows.nonempty
    tops = np.maximum(
        np.maximum.reduceat(counts, rows.nonempty_off, axis=1),
        -np.minimum.reduceat(counts, rows.nonempty_off, axis=1),
    ).max(axis=0)
    for j, t in zip(nonempty.tolist(), tops.tolist(), strict=True):
        if (p := run_sum_problem(t, int(rows_per_run[j]))) is not None:
            trace = traces[j]
            raise TraceError(trace.source_file or "<trace>", p, record=trace.trace_id)


class Rows(NamedTuple):
    """A batch's row layout: a function of its rows per run alone (``batchmemo.shape_derived``)."""

    base: np.ndarray  # per row: its run's first row
    local: np.ndarray  # per row: its number within its run
    run: np.ndarray  # per row: its run
    bounds: np.ndarray  # each run's first row, then the number of rows
    bound_list: list[int]
    nonempty: np.ndarray  # the runs with rows
    nonempty_off: np.ndarray  # their first rows


def row_layout(rows_per_run: np.ndarray) -> Rows:
    off = offsets(rows_per_run)
    base = np.repeat(off, rows_per_run)
    bounds = np.append(off, int(rows_per_run.sum()))
    nonempty = np.flatnonzero(rows_per_run)
    rows = Rows(
        base,
        np.arange(len(base), dtype=np.int64) - base,
        owners(rows_per_run),
        bounds,
        bounds.tolist(),
        nonempty,
        off[nonempty],
    )
    for a in rows:
        if isinstance(a, np.ndarray):
            a.setflags(write=False)
    return rows


def batch_rereads(runs: list[Prepared], call_off: np.ndarray, item_off: np.ndarray):
    """The runs' re-reads laid end to end: (global call, row kind, global item, tokens added, output
    tokens) arrays, by call, and each run's number of them; None when there are none."""
    counts = [len(r.rereads) for r in runs]
    if not any(counts):
        return None
    rows = np.array([x for r in runs for x in r.rereads], dtype=np.int64).reshape(-1, 4).T
    run = owners(counts)
    outputs = np.array([o for r in runs for o in r.reread_outputs], dtype=np.int64)
    return rows[0] + call_off[run], rows[1], rows[2] + item_off[run], rows[3], outputs, np.array(counts)


def insert_rereads(cols, seam, rereads, call_base, dest: dict[str, np.ndarray]) -> np.ndarray:
    """Write the agent rows and, before the agent rows they precede, the re-read rows into ``dest`` (the
    call table's rows). Re-read content stays at the end of every later request of its run; a request
    that rewrites no old item reuses the whole previous one. Returns each row's global call."""
    K = len(call_base)
    rk, rkind, _, radded, rout = rereads  # by global call, in the walk's order
    m = len(rk)
    count = np.bincount(rk, minlength=K)
    # float weights are exact here: token counts stay far below 2**53
    extra_at = np.bincount(rk, radded, minlength=K).astype(np.int64)
    upto = np.zeros(K + 1, dtype=np.int64)
    np.cumsum(extra_at, out=upto[1:])
    extra_after = upto[1:] - upto[call_base]  # re-read tokens of the run through call k
    extra_before = extra_after - extra_at
    base_view = cols["view_tokens"]
    view = base_view + extra_after
    stable = cols["stable_prefix_tokens"]
    stable = stable + extra_before if seam is None else np.where(seam, stable, stable + extra_before)
    firsts, nchanged = cols["first_changed"].copy(), cols["items_changed"].copy()
    residual, view_end, local = cols["residual_tokens"], cols["view_items"], cols["recorded_call"]
    # a call's re-reads follow one another: each sees the view plus what the earlier ones added; the
    # first carries the call's seam, the others reuse the whole previous request
    is_first = value_starts(rk)
    before = offsets(radded)
    group_start = np.maximum.accumulate(np.where(is_first, np.arange(m), 0))
    total = base_view[rk] + extra_before[rk] + before - before[group_start]
    previous = np.empty(m, dtype=np.int64)
    previous[1:] = total[:-1]
    res = residual[rk]
    extra = (
        rkind,
        local[rk],
        total + res,
        rout,
        total,
        res,
        np.full(m, -1, dtype=np.int64),
        view_end[rk],
        np.where(is_first, firsts[rk], -1),
        np.where(is_first, nchanged[rk], 0),
        np.where(is_first, stable[rk], previous),
        rk,
    )
    is_last = value_ends(rk)  # the agent row follows the last re-read of its call
    last_k = rk[is_last]
    firsts[last_k], nchanged[last_k], stable[last_k] = -1, 0, total[is_last]
    names = (
        "kind",
        "recorded_call",
        "input_tokens",
        "output_tokens",
        "view_tokens",
        "residual_tokens",
        "recorded_input_tokens",
        "view_items",
        "first_changed",
        "items_changed",
        "stable_prefix_tokens",
        "global_call",
    )
    agent = (
        cols["kind"],
        local,
        view + residual,
        cols["output_tokens"],
        view,
        residual,
        cols["recorded_input_tokens"],
        view_end,
        firsts,
        nchanged,
        stable,
        np.arange(K, dtype=np.int64),
    )
    # agent row k lands after every re-read row of calls <= k; re-read rows fill the other places
    n = K + m
    agent_at = np.arange(K) + np.cumsum(count)
    is_reread = np.ones(n, dtype=bool)
    is_reread[agent_at] = False
    reread_at = np.flatnonzero(is_reread)
    row_call = np.empty(n, dtype=np.int64)
    for name, col, more in zip(names, agent, extra, strict=True):
        row = row_call if name == "global_call" else dest[name]
        row[agent_at] = col  # row by row, by position: a 2-D scatter across columns is far slower
        row[reread_at] = more
    return row_call


def batch_summaries(runs: list, plans, call_off: np.ndarray):
    """The metered summary calls the plans make (``Plans.summaries``) for the batch's runs laid end to
    end: (global call, input tokens, output tokens) arrays by call, in the order made, and each run's
    number of them; None when there are none."""
    if plans is None or plans.summaries is None:
        return None
    per_run = [plans.summaries[r.pos] for r in runs]
    counts = [len(s) for s in per_run]
    if not any(counts):
        return None
    rows = np.array([x for s in per_run for x in s], dtype=np.int64).reshape(-1, 3).T
    call = rows[0] + call_off[owners(counts)]
    if len(call) > 1 and not (call[1:] >= call[:-1]).all():
        raise ValueError("a plan's summary calls must not go back in calls")  # a planner's bug
    return call, rows[1], rows[2], np.array(counts, dtype=np.int64)


def insert_summaries(
    cols, summaries, call_base, dest: dict[str, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """Write the agent rows and, before the agent rows they precede, the summary rows into ``dest`` (the
    call table's rows), as the loop writes a summary's row (``_Run.apply``): its input and output, no view,
    the items in view, and no cache (``split_runs`` is told which rows they are). The agent row keeps its
    call's seam: the changes follow the summary. Returns (each row's global call, each agent row's row)."""
    K = len(call_base)
    sk, sin, sout = summaries[:3]
    m = len(sk)
    count = np.bincount(sk, minlength=K)
    agent_at = np.arange(K) + np.cumsum(count)  # agent row k follows every summary row of calls <= k
    is_summary = np.ones(K + m, dtype=bool)
    is_summary[agent_at] = False
    summary_at = np.flatnonzero(is_summary)
    zero, none = np.zeros(m, dtype=np.int64), np.full(m, -1, dtype=np.int64)
    view, residual = cols["view_tokens"], cols["residual_tokens"]
    summary_rows = {
        "kind": np.full(m, SUMMARY, dtype=np.int64),
        "recorded_call": cols["recorded_call"][sk],
        "input_tokens": sin,
        "output_tokens": sout,
        "view_tokens": zero,
        "residual_tokens": zero,
        "recorded_input_tokens": none,
        "view_items": cols["view_items"][sk],
        "first_changed": none,
        "items_changed": zero,
        "stable_prefix_tokens": zero,
    }
    agent_rows = {name: cols[name] for name in summary_rows if name != "input_tokens"}
    agent_rows["input_tokens"] = view + residual
    row_call = np.empty(K + m, dtype=np.int64)
    row_call[agent_at], row_call[summary_at] = np.arange(K, dtype=np.int64), sk
    for name, col in agent_rows.items():
        row = dest[name]
        row[agent_at] = col  # row by row, by position: a 2-D scatter across columns is far slower
        row[summary_at] = summary_rows[name]
    return row_call, agent_at


CALL_ROW = {n: i for i, n in enumerate(CALL_COLUMNS)}
# without re-read rows: the columns the traces fill (kept per batch), those that are all 0, and the
# others but cost (bounded per replay)
TRACE_COLUMNS = ("call", "recorded_call", "residual_tokens", "recorded_input_tokens", "view_items")
ZERO_COLUMNS = ("kind", "status_tokens")
# ... of which these are bounded by a pass over each (output as kept; input and uncached from others')
MEASURED_COLUMNS = (
    "view_tokens",
    "first_changed",
    "items_changed",
    "stable_prefix_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
)
