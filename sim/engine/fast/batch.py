"""The engine's fast path: many runs replayed at once as columns laid end to end.

For policies whose decisions are known ahead (settle-time transforms, a ``plan``; see
``sim.engine.dispatch``), a request is the prefix sum of settled sizes up to its view's end plus the net
change planned before it. ``prepare_many`` gathers what each run says (its settle-time changes, its plan)
and the mock model's reactions to facts the plans hide: which needs are unmet is found for all runs'
(call, fact) pairs at once, and only the unmet ones are walked. ``replay_batch`` then computes every run's
rows in a few array steps over the whole batch: item, call and plan-entry arrays of all runs concatenated,
with per-run offsets so sums restart at each run. Runs are short (tens of calls) and numpy's per-operation
cost is fixed, so one pass over a corpus replaces hundreds of small ones; what depends only on the traces
is kept for the next replay of the same batch. The per-call loop in ``sim.engine.loop`` is the reference;
the conformance checker holds the two to identical records.

The pieces beside it: ``batch_static`` (what the traces alone give), ``batch_settled`` (settle-time
changes), ``batch_reactions`` (the mock model's re-reads), ``batch_changes`` (plans folded into calls,
compaction counts, change tables) and ``batch_rows`` (row layout, re-read rows, column totals)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from sim.core.growth import growth_exponents
from sim.core.records import (
    CALL_COLUMNS,
    CALL_KINDS,
    REFETCH,
    SUMMARY,
    Columns,
    Primed,
)
from sim.core.segments import offsets
from sim.core.types import Trace
from sim.cost.cache import CacheRules, split_runs
from sim.cost.pricing import Price
from sim.engine.fast.batch_changes import PlanPart, change_tables, compaction_counts, fold_plans
from sim.engine.fast.batch_reactions import reactions_many
from sim.engine.fast.batch_rows import (
    CALL_ROW,
    MEASURED_COLUMNS,
    TRACE_COLUMNS,
    ZERO_COLUMNS,
    ColumnSums,
    Rows,
    batch_rereads,
    batch_summaries,
    check_column_sums,
    insert_rereads,
    insert_summaries,
    row_layout,
    stack_columns,
)
from sim.engine.fast.batch_settled import (
    NO_CUTS,
    NO_ITEMS,
    NO_SETTLED,
    Settled,
    kept_settled,
    settle_columns,
    settle_cuts,
    settled_changes,
)
from sim.engine.fast.batch_static import BatchStatic, batch_static, model_outputs, outputs_top
from sim.engine.model import ReplayModel
from sim.information.ledger import (
    LedgerTotals,
    changed_token_outcomes,
    fact_outcome_counts,
    token_outcomes,
    totals_many,
)
from sim.information.state import (
    POSITIONAL,
    runs_have_needs,
)
from sim.policies.base import Plans, Policy
from sim.util.batchmemo import batch_derived, shape_derived
from sim.util.limits import run_sum_problem

_POSITIONAL_CODES = np.array([int(x) for x in POSITIONAL], dtype=np.int64)


class Prepared(NamedTuple):
    """One run's inputs to the batch."""

    trace: Trace
    model: ReplayModel
    settled: list  # settle-time changes (sim.policies.base.Change), in index order
    pos: int  # this run's place in the batch's plans (``replay_batch``'s ``plans``)
    recovered: tuple[str, ...] | None  # facts re-read (None: no needed fact can leave the view)
    degraded: bool
    rereads: tuple[tuple[int, int, int, int], ...]  # (call, row kind, event, tokens added): the record's
    reread_outputs: tuple[int, ...]  # output tokens of each re-read call
    answer_met: int | None  # needs of the final answer met at the end (None: all, no fact can be hidden)
    needed_lost: tuple[str, ...]  # facts an action needed while lost from view (the record's), sorted


class RunColumns(NamedTuple):
    """One run's share of the batch (views into its arrays, read-only)."""

    calls: Columns
    item_state: np.ndarray
    item_tokens: np.ndarray
    changes: Columns
    compactions: Columns
    ledger: LedgerTotals
    primed: Primed  # what the record's caches start with (its largest request among them)
    cuts: tuple  # (call, item, shown byte ranges) of each settle-time cut or pagination (the record's)


# NamedTuple._make skips the generated __new__'s argument handling: one of each per run
_prepared = Prepared._make
_run_columns = RunColumns._make
_primed = Primed._make


def prepare_many(
    traces: list[Trace], policy: Policy, models: list[ReplayModel], plans: Plans | None
) -> list[Prepared | None]:
    """Each run's inputs, or None for a run the loop must replay: its mock model would end it on a
    missing fact (``on_missing=fail``) or its step limit (``model.max_turns``), or it would react in a
    way the batch does not model (a page read, a retrieval that may miss: ``retrieval_recall`` < 1, a
    refetch the policy bounds: ``Policy.reread_bound``).
    ``plans``: the runs' plans, when the policy acts before calls."""
    needs = runs_have_needs(traces)
    if plans is not None and (plans.declined is not None or plans.summaries is not None):
        return _declined(_prepare(traces, policy, models, plans, needs), plans, needs)
    return _prepare(traces, policy, models, plans, needs)


def _declined(out, plans: Plans, needs: list[bool]) -> list:
    """``out`` with None for each run its planner declined (``Plan.declined``), and for each run whose plan
    summarizes and that has needs: what a summary keeps of the facts it covers is the loop's to say (the
    batch's ledger keeps no summary), and the batch writes re-read or summary rows, not both."""
    out = list(out)
    declined = plans.declined.tolist() if plans.declined is not None else [False] * len(out)
    summaries = plans.summaries or [()] * len(out)
    for j, p in enumerate(out):
        if p is not None and (declined[p.pos] or (summaries[p.pos] and needs[j])):
            out[j] = None
    return out


def _prepare(traces, policy: Policy, models, plans: Plans | None, needs: list[bool]) -> list:
    """``prepare_many``'s answer before declined runs are taken out."""
    if not policy.settles:  # nothing settles: a run reacts when its plan hides a needed fact
        if not any(needs) or (plans is None or not plans.counts.any()) and not policy.spills:
            # no run reacts: each as it is, the same for every setting of the batch (kept)
            return _limited(PlainRuns(traces, models), models)
        counts = plans.counts.tolist() if plans is not None else [0] * len(traces)
        spills = policy.spills
        runs = [
            (t, m, NO_SETTLED, (n > 0 or spills) and hn)
            for t, m, n, hn in zip(traces, models, counts, needs, strict=True)
        ]
    else:
        key = policy.settle_key()
        if key is not None:  # the same for every replay of the batch whose policy settles alike (kept)
            kept = kept_settled(traces, policy, key)
            if not any(needs):  # no run reacts: each as it is
                return _limited(PlainRuns(traces, models, kept), models)
            settled_of, positional_of = kept.per_run, kept.positional
        else:
            stops = batch_static(traces).stops.tolist()
            settled_of = [settled_changes(t, policy, s) for t, s in zip(traces, stops, strict=True)]
            positional_of = [any(ch.state in POSITIONAL for ch in s) for s in settled_of]
        counts = plans.counts.tolist() if plans is not None else [0] * len(traces)
        runs = []  # (trace, model, settled, reacts?)
        for trace, model, n, hn, settled, cut in zip(
            traces, models, counts, needs, settled_of, positional_of, strict=True
        ):
            hides = n > 0 or policy.spills or cut
            runs.append((trace, model, settled, hides and hn))
    if not any(r[3] for r in runs):  # no run reacts: each as it is
        out = [
            _prepared((t, m, st, j, None, False, (), (), None, ())) for j, (t, m, st, _) in enumerate(runs)
        ]
    else:
        reactions = reactions_many(traces, runs, plans)
        out = []
        for j, (trace, model, settled, reacts) in enumerate(runs):
            if not reacts:
                p = _prepared((trace, model, settled, j, None, False, (), (), None, ()))
            else:
                reacted = reactions[j]
                bounded = reacted is not None and _bounds_rereads(policy, trace, reacted[2])
                p = None if reacted is None or bounded else _prepared((trace, model, settled, j, *reacted))
            out.append(p)
    return _limited(out, models)


def _bounds_rereads(policy: Policy, trace: Trace, rereads) -> bool:
    """Does the policy bound a refetch the run makes (``Policy.reread_bound``)? Such a run goes to the
    loop: the batch's re-reads bring results back whole, the loop's through the bound and ranged reads
    (where no refetch is bounded, the two make the same re-reads)."""
    return any(kind == REFETCH and policy.reread_bound(trace, src) is not None for _, kind, src, _ in rereads)


class PlainRuns(Sequence):
    """``prepare_many``'s answer for runs that react to nothing, settling nothing or what ``settled``
    holds: their traces and models, a ``Prepared`` per run only when one is asked for (the batch reads
    the lists whole)."""

    __slots__ = ("traces", "models", "settled")

    def __init__(self, traces: list[Trace], models: list[ReplayModel], settled: Settled | None = None):
        self.traces, self.models, self.settled = traces, models, settled

    def _settled_of(self, j: int) -> list:
        return NO_SETTLED if self.settled is None else self.settled.per_run[j]

    def __len__(self) -> int:
        return len(self.traces)

    def __getitem__(self, j):
        if isinstance(j, slice):
            return [self[i] for i in range(*j.indices(len(self)))]
        t, m, j = self.traces[j], self.models[j], j % len(self)
        return _prepared((t, m, self._settled_of(j), j, None, False, (), (), None, ()))

    def __contains__(self, value) -> bool:
        # no run is None (``replay_table`` asks): Sequence's own would build every run's Prepared to say so
        return value is not None and super().__contains__(value)


def _limited(out: list, models: list[ReplayModel]) -> list:
    """``out`` with None for each run its agent's step limit ends (the loop says where)."""
    if batch_derived(models, "step_limited", _step_limited):
        out = list(out)
        for j, (p, model) in enumerate(zip(out, models, strict=True)):
            limit = model.max_turns
            if p is not None and limit is not None and len(p.trace.calls) + len(p.rereads) > limit:
                out[j] = None  # the agent's step limit ends this run: the loop says where
    return out  # type: ignore[return-value]


def _step_limited(models: Sequence[ReplayModel]) -> bool:
    return any(m.max_turns is not None for m in models)


class Batch(NamedTuple):
    """A batch's replay as columns over all its runs (``replay_batch``): what every run's metrics read,
    per run in arrays, and what its record needs (``run_columns`` builds those only when asked)."""

    runs: list[Prepared]
    columns: dict[str, np.ndarray]  # CALL_COLUMNS name -> that column of every run's rows (read-only)
    table: np.ndarray | None  # the same as one block, a row per column, when the replay made it
    rows: Rows
    rows_per_run: np.ndarray
    sums: ColumnSums  # each run's total of every call column
    peaks: np.ndarray  # per run: its largest request
    kinds: np.ndarray  # (runs, CALL_KINDS): rows of each kind
    compactions: np.ndarray  # (runs, COMPACTION_KINDS): compactions of each kind
    reclaimed: np.ndarray  # per run: tokens its compactions reclaimed
    growth: list  # per run: its growth exponent (None: under 4 calls)
    ledger: tuple  # (facts seen, tokens seen, token outcomes, fact outcomes, kinds seen, the first, second
    # and last as arrays): sim.information.ledger's totals_many and totals_columns
    states: np.ndarray  # final item states, runs laid end to end
    tok: np.ndarray  # final item sizes
    item_bounds: np.ndarray  # run j's items: [item_bounds[j], item_bounds[j + 1])
    changes: tuple  # (change parts, call_base, call_off, ncalls, first_row): ``change_tables``
    cuts: list  # per run: its settle-time cuts and paginations


def _prime_allocator() -> None:
    """glibc's malloc hands a chunk above its mmap threshold back to the OS when freed, and trims the
    heap's free top past twice that threshold; it raises the threshold to the size of the largest such
    chunk freed. A replay's temporaries (a few MB of arrays, all freed at its end) would otherwise be
    unmapped or trimmed after each replay and faulted in again by the next: measured ~170 page faults
    and ~0.8 ms of kernel time per replay of 500 runs, a tenth of it. Freeing one large array once
    raises the threshold as a large replay's own would. Other allocators: no effect."""
    global _PRIMED
    if not _PRIMED:
        _PRIMED = True
        np.empty(_PRIME_BYTES, dtype=np.uint8)  # never touched: no page is faulted in


_PRIMED = False
_PRIME_BYTES = 16 << 20  # within glibc's bound on the raised threshold (32 MiB on 64-bit)


def replay_batch(
    runs: list[Prepared], rules: CacheRules, price: Price | None, plans: Plans | None = None
) -> Batch:
    """The batch's rows and per-run totals, priced under one cache family and price, as columns.
    ``plans``: the plans ``prepare_many`` was given (each run's ``pos`` is its place in them)."""
    _prime_allocator()
    plain = isinstance(runs, PlainRuns)  # nothing settled, nothing re-read
    traces = runs.traces if plain else [r.trace for r in runs]
    models = runs.models if plain else [r.model for r in runs]
    st = batch_static(traces)
    settled, cuts = _settled(runs, st, plain)
    change_parts = []  # (global call, kind, local index, reclaimed, after): settle-time first
    summaries: list = []  # ``part_summary`` of the parts known before the plans (kept with them)
    if settled is not None:
        tok, states = settled.tok.copy(), settled.states.copy()  # sizes and states, then after the plans
        prefix, view_tokens = settled.prefix, settled.view_tokens
        change_parts.append(settled.part)
        summaries.append(settled.summary)
    else:
        tok, states = st.original.copy(), np.zeros(len(st.original), dtype=np.int8)
        prefix, view_tokens = st.prefix, st.recorded_view
    view_tokens, seam, firsts, nchanged, stable = _planned(
        runs, plans, st, tok, states, prefix, view_tokens, change_parts
    )
    zeros = np.zeros(len(st.call_base), dtype=np.int64)  # kind (every call an agent turn) and status
    cols = {
        "kind": zeros,
        "recorded_call": st.local_call,
        "view_tokens": view_tokens,
        "residual_tokens": st.residual,
        "output_tokens": model_outputs(models),
        "recorded_input_tokens": st.recorded_input,
        "view_items": st.view_end,
        "first_changed": firsts,
        "items_changed": nchanged,
        "stable_prefix_tokens": stable,
    }
    rereads = None if plain else batch_rereads(runs, st.call_off, st.item_off)
    summary_rows = batch_summaries(runs, plans, st.call_off)  # (``prepare_many``: never with re-reads)
    cols, table, rows, rows_per_run, first_row = _rows_and_cost(
        st, cols, seam, rereads, zeros, len(runs), rules, price, summary_rows
    )
    if table is not None:
        check_column_sums(table, rows, rows_per_run, traces)
        table.setflags(write=False)
    else:
        cols = {name: cols[name] for name in CALL_COLUMNS}
        for col in cols.values():
            col.setflags(write=False)
        _bound_columns(cols, st, models, rows, rows_per_run, traces)
    tok.setflags(write=False)
    states.setflags(write=False)
    return _totals(
        runs, st, cols, table, rows, rows_per_run, tok, states, settled is not None, cuts, rereads,
        change_parts, summaries, first_row,
    )  # fmt: skip


def _settled(runs, st: BatchStatic, plain: bool) -> tuple:
    """(the batch after its settle-time changes, None: there are none; each run's settle-time cuts and
    paginations, as the record's: runs without share one)."""
    settled = None
    cuts: list = [NO_CUTS] * len(runs)
    if plain:
        kept = runs.settled
        if kept is not None and kept.columns is not None:
            settled, cuts = kept.columns, kept.cuts
        return settled, cuts
    flat = [
        (off + ch.index, ch.tokens, ch.state)
        for r, off in zip(runs, st.item_off.tolist(), strict=True)
        for ch in r.settled
    ]
    if flat:
        settled = settle_columns(st, *(np.array(c, dtype=np.int64) for c in zip(*flat, strict=True)))
        for j, r in enumerate(runs):
            if r.settled and any(ch.state in POSITIONAL for ch in r.settled):
                cuts[j] = settle_cuts(st, j, r.settled)
    return settled, cuts


def _planned(runs, plans: Plans | None, st: BatchStatic, tok, states, prefix, view_tokens, change_parts):
    """The plans folded into the calls (``fold_plans``; ``tok``, ``states`` in place): (view tokens,
    the seam calls as a mask (None: no seam), per call its first changed item (-1: none), its items
    changed, its stable prefix)."""
    call_off, item_off = st.call_off, st.item_off
    K = len(st.call_base)
    seam = None
    entries = per_call = None
    promised = (False, None)  # (ascending, one state): what the plans promise of the entries laid out
    if plans is not None and runs:
        # runs keep their order: as many as the plans have is all of them, in order
        pos = None if len(runs) == len(plans) else [r.pos for r in runs]
        per_call = plans.call_counts if pos is None else None
        if per_call is not None and len(per_call) != K:
            per_call = None
        if per_call is None:
            entries = plans.laid_out(pos, call_off, item_off)
        elif len(plans.index):  # every run, entries by call: their calls are not needed as an array
            entries = (None, plans.index + np.repeat(item_off, plans.counts), plans.tokens, plans.state)
            # runs in order, each run's items after the last one's: the plans' promises hold for the batch
            promised = (plans.ascending, plans.one_state)
    if entries is not None:
        view_tokens, seam, stable_at = fold_plans(
            entries, st, tok, states, prefix, view_tokens, change_parts, per_call, promised
        )
        firsts, nchanged = change_parts[-1].firsts, change_parts[-1].counts
    else:
        firsts, nchanged = np.full(K, -1, dtype=np.int64), np.zeros(K, dtype=np.int64)
    stable = np.empty(K, dtype=np.int64)  # a request reuses the whole previous one, unless at a seam
    stable[:1] = 0
    stable[1:] = view_tokens[:-1]
    stable[st.first_calls] = 0
    if seam is not None:
        np.copyto(stable, stable_at, where=seam)
    return view_tokens, seam, firsts, nchanged, stable


def _rows_and_cost(
    st: BatchStatic, cols: dict, seam, rereads, zeros, n_runs: int, rules, price, summaries=None
) -> tuple:
    """The rows (the agent rows, and the re-read or summary rows before the agent rows they precede),
    their input and their cache and cost columns: (columns, the call table as one block when extra rows
    made one (else None), the row layout, rows per run, per global call the row (in its run) its changes
    are listed at: the first of its requests, after its summaries)."""
    ncalls, call_base = st.ncalls, st.call_base
    K = len(call_base)
    elapsed = st.elapsed
    rows_per_run = ncalls
    first_row = st.local_call  # per global call: the first row (in its run) of its requests
    table = None  # the call table as one block: made here only with extra rows (else ``batch_table``)
    is_summary = None
    if summaries is not None:
        table = np.empty((len(CALL_COLUMNS), K + len(summaries[0])), dtype=np.int64)  # a row per column
        out = dict(zip(CALL_COLUMNS, table, strict=True))
        row_call, agent_at = insert_summaries(cols, summaries, call_base, out)
        elapsed = elapsed[row_call]
        rows_per_run = ncalls + summaries[3]
        first_row = agent_at - offsets(rows_per_run)[np.repeat(np.arange(n_runs), ncalls)]
        cols = out
        np.maximum(cols["input_tokens"], 0, out=cols["input_tokens"])  # as the loop: input >= 0
        rows = shape_derived("rows", rows_per_run, row_layout)
        cols["call"][:] = rows.local
        cols["status_tokens"][:] = 0
        is_summary = cols["kind"] == SUMMARY
    elif rereads is not None:
        table = np.empty((len(CALL_COLUMNS), K + len(rereads[0])), dtype=np.int64)  # a row per column
        out = dict(zip(CALL_COLUMNS, table, strict=True))
        row_call = insert_rereads(cols, seam, rereads[:5], call_base, out)
        elapsed = elapsed[row_call]
        rows_per_run = ncalls + rereads[5]
        at = np.searchsorted(row_call, np.arange(K, dtype=np.int64))
        first_row = at - offsets(rows_per_run)[np.repeat(np.arange(n_runs), ncalls)]
        cols = out
        np.maximum(
            cols["input_tokens"], 0, out=cols["input_tokens"]
        )  # as the loop: input >= 0 (sim.cost.cache)
        rows = shape_derived("rows", rows_per_run, row_layout)
        cols["call"][:] = rows.local
        cols["status_tokens"][:] = 0
    else:  # the columns as they are (no block: copying each into one costs as much as the arithmetic)
        inputs = cols["view_tokens"] + st.residual
        np.maximum(inputs, 0, out=inputs)  # as the loop: input >= 0 (sim.cost.cache)
        rows = shape_derived("rows", rows_per_run, row_layout)
        cols.update(call=rows.local, input_tokens=inputs, status_tokens=zeros)
    split = split_runs(
        rules, price, elapsed, cols["input_tokens"], cols["view_tokens"], cols["stable_prefix_tokens"],
        cols["output_tokens"], rows.base, is_summary,
    )  # fmt: skip
    if table is not None:
        for name, col in zip(CALL_COLUMNS[-4:], split, strict=True):
            cols[name][:] = col
    else:
        cols.update(zip(CALL_COLUMNS[-4:], split, strict=True))
    return cols, table, rows, rows_per_run, first_row


def _bound_columns(cols: dict, st: BatchStatic, models, rows: Rows, rows_per_run, traces) -> None:
    """Without re-read rows: the columns the traces fill are bounded once per batch, the others by a
    pass over each; the runs' column sums are checked one by one only if that bound fails."""
    if not len(st.call_base):
        return
    top = {name: st.column_top for name in TRACE_COLUMNS}  # (their largest, over all of them)
    top["output_tokens"] = batch_derived(models, "outputs_top", outputs_top)
    measured: dict[int, int] = {}  # id of a column -> its bound (read and write may be one array)
    for name in MEASURED_COLUMNS:
        col = cols[name]
        if id(col) not in measured:
            measured[id(col)] = max(int(col.max()), -int(col.min()))
        top[name] = measured[id(col)]
    # input = max(view + residual, 0) and uncached = input - read - write: bounded by theirs
    top["input_tokens"] = top["view_tokens"] + top["residual_tokens"]
    top["uncached_input_tokens"] = top["input_tokens"] + top["cache_read_tokens"] + top["cache_write_tokens"]
    if run_sum_problem(max(top.values()), int(rows_per_run.max())) is not None:
        check_column_sums(stack_columns(cols), rows, rows_per_run, traces)


def _totals(
    runs, st: BatchStatic, cols, table, rows: Rows, rows_per_run, tok, states, has_settled: bool, cuts,
    rereads, change_parts, summaries, first_row,
) -> Batch:  # fmt: skip
    """The ``Batch`` of these rows: each run's peaks, compactions, ledger, column totals, row kinds and
    growth exponent."""
    call_off, item_off = st.call_off, st.item_off
    K = len(st.call_base)
    nonempty = rows.nonempty
    peaks = np.zeros(len(runs), dtype=np.int64)
    if len(nonempty):
        peaks[nonempty] = np.maximum.reduceat(cols["input_tokens"], rows.nonempty_off)
    compaction_totals, reclaimed = compaction_counts(change_parts, call_off, len(runs), K, summaries)
    bounds = np.append(item_off, len(tok))
    shown = (  # only facts read it
        {
            int(item_off[j]) + i: ranges
            for j, cs in enumerate(cuts)
            for _, i, ranges in cs
            if states[int(item_off[j]) + i] in _POSITIONAL_CODES
        }
        if has_settled and st.facts is not None
        else {}
    )
    only = None  # the plans' part, when it made every change, each item once, in ascending order
    if len(change_parts) == 1 and isinstance(change_parts[0], PlanPart):
        part = change_parts[0]
        only = part if part.kind is not None and part.ascending else None
    ledger = _ledger(st, tok, states, bounds, NO_ITEMS if rereads is None else rereads[2], shown, only)
    if table is None:  # column by column when asked (a 2-D reduceat is slower), the traces' as kept
        zero = np.zeros(len(runs), dtype=np.int64)
        sums = ColumnSums(cols, rows, {**st.column_sums, **dict.fromkeys(ZERO_COLUMNS, zero)})
    else:
        matrix = np.zeros((len(runs), len(CALL_COLUMNS)), dtype=np.int64)  # per run, per column
        if len(nonempty):
            matrix[nonempty] = np.add.reduceat(table, rows.nonempty_off, axis=1).T
        sums = ColumnSums(cols, rows, dict(zip(CALL_COLUMNS, matrix.T, strict=True)))
    width = len(CALL_KINDS)
    if table is not None and table.shape[1] > K:  # re-read rows: count kinds per run
        kinds = np.bincount(rows.run * width + cols["kind"], minlength=len(runs) * width).reshape(-1, width)
    else:
        kinds = np.zeros((len(runs), width), dtype=np.int64)
        kinds[:, 0] = rows_per_run
    growth = growth_exponents(cols["input_tokens"], rows.bounds)
    return Batch(
        runs, cols, table, rows, rows_per_run, sums, peaks, kinds, compaction_totals, reclaimed, growth,
        ledger, states, tok, bounds, (change_parts, st.call_base, call_off, st.ncalls, first_row), cuts,
    )  # fmt: skip


def batch_table(b: Batch) -> np.ndarray:
    """The batch's call table as one block, a row per CALL_COLUMNS entry (read-only): a run's record
    reads its slice."""
    return stack_columns(b.columns) if b.table is None else b.table


def run_columns(b: Batch) -> list[RunColumns]:
    """Each run's share of a batch, with its record's tables: one ``RunColumns`` per run."""
    changes_of, compactions_of = change_tables(*b.changes)
    ledger = totals_many(*b.ledger[:5])
    sums = b.sums.per_run()
    kinds = [tuple(k) for k in b.kinds.tolist()]
    counts = [(tuple(k), r) for k, r in zip(b.compactions.tolist(), b.reclaimed.tolist(), strict=True)]
    item_bounds = b.item_bounds.tolist()
    row_bounds = b.rows.bound_list
    peaks_l = b.peaks.tolist()
    rows_l = b.rows_per_run.tolist()
    table, states, tok, growth, cuts = batch_table(b), b.states, b.tok, b.growth, b.cuts
    out = []
    for j in range(len(b.runs)):
        i0, i1 = item_bounds[j], item_bounds[j + 1]
        out.append(
            _run_columns(
                (
                    Columns(CALL_COLUMNS, table[:, row_bounds[j] : row_bounds[j + 1]], CALL_ROW),
                    states[i0:i1],
                    tok[i0:i1],
                    changes_of[j],
                    compactions_of[j],
                    ledger[j],
                    _primed(
                        (
                            dict(zip(CALL_COLUMNS, sums[j], strict=True)),
                            rows_l[j],
                            peaks_l[j],
                            kinds[j],
                            counts[j],
                            growth[j],
                        )
                    ),
                    tuple(cuts[j]),
                )
            )
        )
    return out


def _ledger(st: BatchStatic, tok, states, bounds, reread: np.ndarray, shown: dict, only=None) -> tuple:
    """What each run's ledger totals are made of (``sim.information.ledger.totals_many`` or
    ``totals_columns`` of it):
    its tokens and facts by category over what it saw (``reread``: the items re-read, global ids;
    ``shown``: global item -> the byte ranges its cut or first page shows). ``only``: the plans' part when
    it made every change, each item once, in ascending order (the changed items are its entries)."""
    runs = len(st.ncalls)
    tokens = np.zeros((runs, 4), dtype=np.int64)
    changed = only is not None and len(only.index) > 0
    if only is None:
        changed = bool(states.any())
    if changed or (st.facts is not None and st.facts.stale.any()):  # stale counts whatever the states
        facts = fact_outcome_counts(st.facts, states, [()] * runs, reread, shown)  # no summaries: none kept
    else:
        facts = fact_outcome_counts(None, states, [()] * runs, reread)
    if only is not None and changed:
        tokens = changed_token_outcomes(only.index, only.new - only.d, only.new, only.state, bounds)
    elif changed:
        tokens = token_outcomes(st.original, tok, states, bounds)
    return st.facts_seen, st.tokens_seen, tokens, facts, st.kinds_seen, st.seen
