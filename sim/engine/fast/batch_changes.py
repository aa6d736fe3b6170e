"""A batch's changes as column parts (settle-time changes, then the plans' ``PlanPart``): folding the
runs' plans into their calls (``fold_plans``: view sizes, seams, stable prefixes), and from the parts each
run's compactions per kind (``compaction_counts``, without building any run's tables) and its change
and compaction tables (``change_tables``, for a record). Used by ``sim.engine.fast.batch``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sim.core.records import (
    CHANGE_COLUMNS,
    COMPACTION_KINDS,
    KIND_OF_STATE,
    NO_CHANGES,
    NO_COMPACTIONS,
    Columns,
    GroupedCompactions,
)
from sim.core.segments import concat, value_starts
from sim.core.types import ItemState
from sim.engine.common import Fenwick
from sim.engine.fast.batch_static import BatchStatic

_VERBATIM = int(ItemState.VERBATIM)

# compaction kind of each item state code (-1: verbatim is no compaction)
KIND_OF_CODE = np.array([KIND_OF_STATE.get(ItemState(c), -1) for c in range(len(ItemState))], dtype=np.int64)


def fold_plans(
    entries,
    st: BatchStatic,
    tok,
    states,
    prefix,
    view_tokens,
    change_parts,
    counts=None,
    promised=(False, None),
):
    """Fold the runs' plan entries (``Plans.laid_out``) into their calls (``tok``, ``states`` in place;
    each call's first changed item and count of changes in the part appended to ``change_parts``). A
    call that changes items from position q on reuses only the prefix before q: its size is the settled
    prefix sum plus the changes earlier calls of its run made below q. When positions only grow (a
    moving boundary, as in masking) those are all its run's earlier changes; otherwise a Fenwick tree
    sums them. ``counts``: the entries of each call, when the plans know them. ``promised``: (ascending,
    one state) as the plans promise them (``Plans.ascending``, ``Plans.one_state``; else checked here).
    Returns (view tokens, the seam calls as a mask over the calls (None: no seam), and per call its
    stable prefix, meaningful at the seams)."""
    call, index, new, state = entries  # global calls (non-decreasing; None: ``counts`` says) and item ids
    item_base = st.item_base
    K, m = len(item_base), len(index)
    ascending = promised[0] or m < 2 or bool((index[1:] > index[:-1]).all())
    d = new - tok[index]
    last = None  # each item's last entry, when a later call changes an item again (else every entry)
    if not ascending:
        d, last = _again(index, new, d)
    done = np.zeros(m + 1, dtype=np.int64)  # done[i]: net change of the batch's first i entries
    np.cumsum(d, out=done[1:])
    if counts is None:
        counts = np.bincount(call, minlength=K)  # entries of each call (calls ascend)
    ends = counts.cumsum()
    starts = ends - counts
    through = done[ends]
    # per call: its run's net change through it
    through -= np.repeat(done[starts[st.first_calls]], st.run_calls)
    view_tokens = view_tokens + through
    has = counts > 0
    first_item = index[np.minimum(starts, m - 1)]  # per call with entries: its first changed item
    first = first_item - item_base
    firsts = np.where(has, first, -1)
    seam = has & st.later_call & (first < st.prev_items)  # rewrites what was sent before
    stable_at = None
    if not seam.any():
        seam = None
    elif ascending:
        # a seam reuses the settled sizes before its first changed item and the changes of its run
        # before it, which (a seam is no run's first call) are those through the call before; computed
        # for every call and kept at the seams (a masking run's calls are mostly seams: gathering them
        # one by one costs more)
        stable_at = prefix[first_item]
        stable_at -= np.repeat(prefix[st.item_off], st.ncalls)
        stable_at[1:] += through[:-1]
    else:
        at = np.flatnonzero(seam)
        entry_call = call if call is not None else np.repeat(np.arange(K, dtype=np.int64), counts)
        below = _changes_below(
            index, d, starts[at], index[starts[at]], item_base[at], len(tok), through[at - 1],
            (entry_call, at, st.call_base[at]),
        )  # (a seam is never its run's first call: the call before is its run's)  # fmt: skip
        stable_at = np.zeros(K, dtype=np.int64)
        stable_at[at] = prefix[index[starts[at]]] - prefix[item_base[at]] + below
    if last is None:
        tok[index] = new
    else:
        tok[index[last]] = new[last]
    one_state = promised[1]
    if one_state is None:
        one_state = int(state[0]) if state.min() == state.max() else None
    if one_state is not None:
        states[index] = one_state
    elif last is None:
        states[index] = state
    else:
        states[index[last]] = state[last]
    kind = -1 if one_state is None or one_state == _VERBATIM else int(KIND_OF_CODE[one_state])
    change_parts.append(
        PlanPart(call, state, index, d, new, item_base, counts, ends, done, kind, ascending, firsts)
    )
    return view_tokens, seam, stable_at


class PlanPart:
    """The plans' share of a batch's changes: its columns (global call, kind, local index, reclaimed,
    after) made only when asked (a run's record asks; the batch's counts mostly do not need them)."""

    __slots__ = ("_call", "state", "index", "d", "new", "item_base", "counts", "ends", "done", "_cols")
    __slots__ += ("kind", "ascending", "firsts")

    def __init__(self, call, state, index, d, new, item_base, counts, ends, done, kind, ascending, firsts):
        self._call, self.state, self.index, self.d, self.new = call, state, index, d, new
        # per call: its entries, and the entries through it; per entry: the batch's net change up to it
        self.item_base, self.counts, self.ends, self.done = item_base, counts, ends, done
        self.kind = kind if kind >= 0 else None  # the compaction kind of every entry, when they share one
        self.ascending: bool = ascending  # every entry changes another item, in ascending order
        self.firsts = firsts  # per call: its first changed item (local id; -1: none)
        self._cols = None

    @property
    def call(self) -> np.ndarray:
        if self._call is None:
            self._call = np.repeat(np.arange(len(self.counts), dtype=np.int64), self.counts)
        return self._call

    def cols(self) -> tuple:
        """(global call, kind, local index, reclaimed, after) of the entries that are compactions: an
        entry back to VERBATIM is a change but no change-table row, as in the loop's ``changes_before``."""
        if self._cols is None:
            c = self.call
            kind = KIND_OF_CODE[self.state]
            cols = (c, kind, self.index - self.item_base[c], -self.d, self.new)
            if self.kind is None and len(kind) and kind.min() < 0:
                keep = kind >= 0
                cols = tuple(col[keep] for col in cols)
            self._cols = cols
        return self._cols


def _again(index: np.ndarray, new: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """Entries that change an item an earlier entry (an earlier call) already changed: each one's net
    change is from that entry's size, not the settled one. Returns (net changes, the positions of each
    item's last entry; None when no item is changed twice)."""
    order = np.argsort(index, kind="stable")  # by item, each item's entries in call order
    si = index[order]
    again = si[1:] == si[:-1]
    if not again.any():
        return d, None
    at = np.flatnonzero(again) + 1  # sorted positions whose entry follows one of the same item
    d = d.copy()
    d[order[at]] = new[order[at]] - new[order[at - 1]]
    is_last = np.ones(len(si), dtype=bool)
    is_last[:-1] = ~again
    return d, order[is_last]


def _columns(part) -> tuple:
    return part.cols() if isinstance(part, PlanPart) else part


def _changes_below(index, d, starts, firsts, bases, n, earlier, calls=None) -> np.ndarray:
    """For each seam: the net change its run's entries before ``start`` made to items in [base, first).
    ``earlier``: per seam, the net change of all its run's entries before it (its run's earlier calls);
    ``calls``: (each entry's global call, each seam's, its run's first call), for ``_dense_below``."""
    # Two kinds of seam are answered in array steps, the tree sums the others: one none of whose run's
    # earlier entries lies below its first item has none (a plan that re-issues its oldest change every
    # call, e.g. LangChain's per-call copy); one all of whose run's earlier entries lie below it has
    # them all (a moving boundary behind earlier summaries, e.g. hybrid's masks). A run's earlier entries
    # are those before ``start`` at or above ``base`` (earlier runs' items lie below it, later runs'
    # entries come after ``start``).
    out = np.zeros(len(starts), dtype=np.int64)
    opened = np.sort(index).searchsorted(bases)  # each seam's run's first entry
    inside = opened < starts
    if inside.any():
        pairs = np.empty(2 * int(inside.sum()), dtype=np.int64)
        pairs[0::2], pairs[1::2] = opened[inside], starts[inside]
        lowest = np.minimum.reduceat(index, pairs)[0::2]  # over [opened, start) of each such seam
        highest = np.maximum.reduceat(index, pairs)[0::2]
        f = firsts[inside]
        below = highest < f
        out[np.flatnonzero(inside)[below]] = earlier[inside][below]
        inside[inside] = (lowest < f) & ~below
    if not inside.any():
        return out
    at = np.flatnonzero(inside)
    if calls is None:
        out[at] = _tree_below(index, d, starts[at], firsts[at], bases[at], n)
    else:
        entry_call, seam_call, call_base = calls
        out[at] = _dense_below(
            index, d, entry_call, opened[at], starts[at], firsts[at], bases[at], seam_call[at],
            call_base[at], n,
        )  # fmt: skip
    return out


DENSE_CELLS = 1 << 20  # a run's (calls x items) table summed densely up to this many cells, else the tree


def _dense_below(index, d, entry_call, opened, starts, firsts, bases, seam_call, call_base, n) -> np.ndarray:
    """``_changes_below`` of the given seams (ascending; a run's seams together), run by run: its entries'
    net changes in a (call, item) table summed along both axes, so a seam at call k with first item f
    reads the changes of calls before k to items below f in one look-up (numpy steps per run, not a tree
    step per entry). A run whose table would pass ``DENSE_CELLS`` takes the tree; held to the tree by
    tests/test_batch_summaries.py."""
    out = np.zeros(len(starts), dtype=np.int64)
    bounds = np.flatnonzero(np.diff(bases)) + 1  # where the next run's seams begin
    for lo, hi in zip([0, *bounds.tolist()], [*bounds.tolist(), len(starts)], strict=True):
        a, b, base, c0 = int(opened[lo]), int(starts[hi - 1]), int(bases[lo]), int(call_base[lo])
        items = index[a:b] - base
        rows = entry_call[a:b] - c0 + 1  # a row of zeros above the run's first call
        k, f = seam_call[lo:hi] - c0, firsts[lo:hi] - base
        width = max(int(items.max()) + 1, int(f.max())) + 1  # a column of zeros before item 0
        height = int(max(rows.max(), k.max())) + 1
        if height * width > DENSE_CELLS:
            out[lo:hi] = _tree_below(index, d, starts[lo:hi], firsts[lo:hi], bases[lo:hi], n)
            continue
        table = np.bincount(rows * width + items + 1, d[a:b], minlength=height * width)
        # float weights are exact here: token counts stay far below 2**53
        table = table.reshape(height, width).cumsum(0).cumsum(1).astype(np.int64)
        out[lo:hi] = table[k, f]  # calls < k (rows <= k), items < f (columns <= f)
    return out


def _tree_below(index, d, starts, firsts, bases, n) -> np.ndarray:
    """``_changes_below`` of the given seams, by a Fenwick tree of the entries in turn."""
    fen, out, j = Fenwick(n), [], 0
    index, d = index.tolist(), d.tolist()
    for start, first, base in zip(starts.tolist(), firsts.tolist(), bases.tolist(), strict=True):
        while j < start:
            fen.add(index[j], d[j])
            j += 1
        out.append(fen.query(first) - fen.query(base))
    return np.array(out, dtype=np.int64)


def _sorted_changes(parts) -> list[np.ndarray]:
    """The batch's change parts as one set of columns, sorted by global call (settle-time changes of a
    call before its plan's)."""
    parts = [_columns(p) for p in parts]
    cols = parts[0]
    if len(parts) > 1:
        cols = [concat(list(c)) for c in zip(*parts, strict=True)]
        order = np.argsort(cols[0], kind="stable")
        cols = [c[order] for c in cols]
    return list(cols)


def compaction_counts(
    parts, call_off, runs: int, calls: int = -1, known: Sequence = ()
) -> tuple[np.ndarray, np.ndarray]:
    """Each run's compactions per kind, (runs, COMPACTION_KINDS), and the tokens they reclaimed, from the
    batch's changes without building any run's tables: one compaction per distinct (call, kind).
    ``calls``: the batch's calls (-1: not given); ``known``: the summaries of the first parts, when known."""
    width = len(COMPACTION_KINDS)
    if not parts:
        return np.zeros((runs, width), dtype=np.int64), np.zeros(runs, dtype=np.int64)
    summaries = [None]
    if calls >= 0:
        summaries = [*known, *(part_summary(p, call_off, calls) for p in parts[len(known) :])]
    if all(s is not None for s in summaries):
        # each part of one kind: a compaction per call with an entry of a part of that kind
        bounds = np.append(call_off, calls)  # run j's calls: [bounds[j], bounds[j + 1])
        nonempty = np.flatnonzero(bounds[1:] > bounds[:-1])
        by_kind = np.zeros((runs, width), dtype=np.int64)
        reclaimed = np.zeros(runs, dtype=np.int64)
        for k in sorted({s[0] for s in summaries}):
            has = None
            for kind, part_has, _ in summaries:
                if kind == k:
                    has = part_has if has is None else has | part_has
            if len(nonempty):  # calls with entries, per run
                by_kind[nonempty, k] = np.add.reduceat(has, call_off[nonempty], dtype=np.int64)
        for _, _, part_reclaimed in summaries:
            reclaimed += part_reclaimed
        return by_kind, reclaimed
    call, kind, _, reclaimed, _ = _sorted_changes(parts)
    key = call * width + kind
    if len(key) > 1 and not (key[1:] >= key[:-1]).all():  # kinds interleave within a call
        key = np.sort(key)
    group = key[value_starts(key)]
    # a run without calls shares its offset with the next run: "right" picks the last, the one with calls
    group_run = np.searchsorted(call_off, group // width, side="right") - 1
    by_kind = np.bincount(group_run * width + group % width, minlength=runs * width).reshape(runs, width)
    change_run = np.searchsorted(call_off, call, side="right") - 1
    # float weights are exact here: token counts stay far below 2**53
    return by_kind, np.bincount(change_run, reclaimed, minlength=runs).astype(np.int64)


def part_summary(part, call_off: np.ndarray, calls: int):
    """(kind, per call: has an entry, per run: tokens reclaimed) of a change part whose entries share
    one compaction kind and ascend by call; None otherwise."""
    if isinstance(part, PlanPart):
        if (k := part.kind) is None:
            return None
        at = np.full(len(call_off) + 1, len(part.index), dtype=np.int64)  # each run's first entry, then
        inside = call_off < calls  # the number of entries (a run without calls: the next run's first)
        first = call_off[inside]
        at[:-1][inside] = part.ends[first] - part.counts[first]
        return k, part.counts > 0, part.done[at[:-1]] - part.done[at[1:]]
    call, kind, _, reclaimed, _ = part
    if not len(kind) or kind.min() != kind.max() or kind[0] < 0:
        return None
    if len(call) > 1 and not (call[1:] >= call[:-1]).all():
        return None
    has = np.zeros(calls, dtype=bool)
    has[call] = True
    running = np.zeros(
        len(call) + 1, dtype=np.int64
    )  # exact in int64, as in sim.information.ledger.token_outcomes
    np.cumsum(reclaimed, out=running[1:])
    at = np.append(call.searchsorted(call_off), len(call))
    return int(kind[0]), has, running[at[1:]] - running[at[:-1]]


def change_tables(parts, call_base, call_off, ncalls, first_row):
    """Each run's change and compaction tables, from the batch's changes. Runs without changes share one
    empty table. ``first_row``: per global call, the first row of the run's calls table that sees its
    changes."""
    runs = len(call_off)
    if not parts:
        return [NO_CHANGES] * runs, [NO_COMPACTIONS] * runs
    call, kind, index, reclaimed, after = _sorted_changes(parts)
    changes = np.empty((len(CHANGE_COLUMNS), len(call)), dtype=np.int64)  # row by row: np.stack is slow
    columns = (call - call_base[call], kind, index, reclaimed, after, first_row[call])
    for row, col in zip(changes, columns, strict=True):
        row[:] = col
    changes_of = _split_changes(
        changes,
        call.searchsorted(call_off).tolist(),
        call.searchsorted(call_off + ncalls).tolist(),
    )
    compactions_of = [NO_COMPACTIONS if c is NO_CHANGES else GroupedCompactions(c) for c in changes_of]
    return changes_of, compactions_of


def _split_changes(block, starts, ends) -> list[Columns]:
    """Each run's rows [start, end) of the batch's change block; runs without rows share the empty one."""
    block.setflags(write=False)
    row = NO_CHANGES._row
    return [
        Columns(CHANGE_COLUMNS, block[:, lo:hi], row) if hi > lo else NO_CHANGES
        for lo, hi in zip(starts, ends, strict=True)
    ]
