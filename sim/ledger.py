"""The information-loss ledger: for every item and fact of a run, what stayed verbatim, what became a
derived representation, what moved out of view behind a handle, and what can no longer be recovered.

Built from a run's record (the truth) and its trace. Entries: one ``add`` per admitted item, one per
change an operation made (truncate, prune, summarize, clear, spill), one per re-read (refetch,
retrieve). Totals describe the end of the run and reconcile by construction:
facts_verbatim + facts_derived + facts_spilled + facts_lost = facts_seen, and the same in tokens over the
admitted items' original sizes (a representation counts as derived up to the size of what it replaced;
re-read copies are extra content and are not counted in the token totals).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from sim.records import CALL_KINDS, COMPACTION_KINDS, RunRecord
from sim.segments import concat, offsets, owners, value_starts
from sim.types import ItemState, Trace

CATEGORIES = ("verbatim", "derived", "spilled", "lost")
LEDGER_COLUMNS = (
    "trace_id",
    "policy",
    "recorded_call",
    "operation",
    "item",
    "item_kind",
    "tokens_before",
    "tokens_after",
    "facts",
    "facts_outcome",
)


class LedgerTotals(NamedTuple):
    """End-of-run totals (immutable; a tuple, so building one per run stays cheap)."""

    facts_seen: int
    facts_verbatim: int
    facts_derived: int
    facts_spilled: int
    facts_lost: int
    tokens_seen: int
    tokens_verbatim: int
    tokens_derived: int
    tokens_spilled: int
    tokens_lost: int


def _facts_before(trace: Trace) -> list[int]:
    """Number of distinct facts provided by events [0, i), for every i."""
    seen: set[str] = set()
    out = [0]
    for e in trace.events:
        seen.update(e.provides)
        out.append(len(seen))
    return out


_VERBATIM, _BOUNDED, _SUMMARIZED, _SPILLED = (
    int(ItemState.VERBATIM),
    int(ItemState.BOUNDED),
    int(ItemState.SUMMARIZED),
    int(ItemState.SPILLED),
)


class FactIndex(NamedTuple):
    """A trace's facts as integer tables: the facts each event provides and the providers of each fact."""

    ids: dict[str, int]  # fact -> id, in order of first provider
    item_ptr: np.ndarray  # facts of event i: item_facts[item_ptr[i] : item_ptr[i + 1]]
    item_facts: np.ndarray
    fact_ptr: np.ndarray  # providers of fact f, ascending: fact_items[fact_ptr[f] : fact_ptr[f + 1]]
    fact_items: np.ndarray


def fact_index(trace: Trace) -> FactIndex:
    ids: dict[str, int] = {}
    item_ptr, item_facts, providers = [0], [], []
    for e in trace.events:
        for f in e.provides:
            fid = ids.get(f)
            if fid is None:
                fid = ids[f] = len(ids)
                providers.append([])
            item_facts.append(fid)
            if not providers[fid] or providers[fid][-1] != e.index:
                providers[fid].append(e.index)
        item_ptr.append(len(item_facts))
    fact_ptr = np.zeros(len(providers) + 1, dtype=np.int64)
    np.cumsum([len(p) for p in providers], out=fact_ptr[1:])
    return FactIndex(
        ids,
        np.array(item_ptr, dtype=np.int64),
        np.array(item_facts, dtype=np.int64),
        fact_ptr,
        np.array([i for p in providers for i in p], dtype=np.int64),
    )


class BatchFacts(NamedTuple):
    """The fact tables of runs laid end to end (``batch_facts``), as (item, fact) pairs over the runs'
    admitted items: what ``fact_outcome_counts`` needs besides the runs' final states, the same for
    every replay of the same traces. Item and fact ids are global (run j's start at its offsets)."""

    indexes: tuple[FactIndex, ...]
    fact_off: np.ndarray  # run j's facts: [fact_off[j], fact_off[j] + its facts)
    n_facts: int
    fact_run: np.ndarray  # per fact: its run
    item_of_pair: np.ndarray  # every (item, fact it provides) pair, by item
    fact_of_pair: np.ndarray
    provider_fact: np.ndarray  # every (fact, admitted item providing it) pair, by fact then item
    provider_item: np.ndarray


def batch_facts(indexes: list[FactIndex], stops: np.ndarray) -> BatchFacts:
    item_off = offsets(stops)
    nfacts = [len(x.ids) for x in indexes]
    fact_off = offsets(nfacts)
    item_parts, fact_parts, pf_parts, pi_parts = [], [], [], []
    for x, s, i0, f0 in zip(indexes, stops.tolist(), item_off.tolist(), fact_off.tolist(), strict=True):
        end = int(x.item_ptr[s])  # facts of the admitted items [0, s)
        item_parts.append(owners(np.diff(x.item_ptr[: s + 1])) + i0)
        fact_parts.append(x.item_facts[:end] + f0)
        inside = x.fact_items < s
        pf_parts.append(owners(np.diff(x.fact_ptr))[inside] + f0)
        pi_parts.append(x.fact_items[inside] + i0)
    cat = [concat(p) for p in (item_parts, fact_parts, pf_parts, pi_parts)]
    return BatchFacts(
        tuple(indexes),
        fact_off,
        sum(nfacts),
        owners(nfacts),
        *cat,
    )


def fact_outcome_counts(
    b: BatchFacts | None,
    states: np.ndarray,
    kept: Sequence[tuple[str, ...]],
    reread: np.ndarray,
) -> np.ndarray:
    """Facts (derived, spilled, lost) at the end of each run of ``b`` (``states``: the runs' final item
    states laid end to end). ``kept``: each run's facts its last summary kept; ``reread``: the items
    the agent re-read (their facts are back in view). Only facts of changed items can be anything but
    verbatim; each takes its best holder's category: a verbatim provider (or a re-read) keeps it
    verbatim, a bounded one (or a summary that kept it) derived, a spilled one is behind a handle,
    anything else lost."""
    runs = len(kept)
    out = np.zeros((runs, 3), dtype=np.int64)
    if b is None:
        return out
    touched = b.fact_of_pair[(states != 0)[b.item_of_pair]]  # facts of changed items
    if not len(touched):
        return out
    seen = np.zeros(b.n_facts, dtype=bool)
    seen[touched] = True
    rows = seen[b.provider_fact]  # every provider of those facts
    prov, fact = b.provider_item[rows], b.provider_fact[rows]
    s = states[prov]
    category = np.full(len(prov), 3, dtype=np.int64)  # codes index CATEGORIES: 3 is lost
    category[s == _SPILLED] = 2
    derived = s == _BOUNDED
    verbatim = s == _VERBATIM
    kept_ids = []
    if any(kept):
        kept_ids = [
            int(b.fact_off[j]) + b.indexes[j].ids[f]
            for j, k in enumerate(kept)
            if k
            for f in k
            if f in b.indexes[j].ids
        ]
    recovered_ids: list[int] | np.ndarray = []
    if len(reread):
        is_reread = np.zeros(len(states), dtype=bool)
        is_reread[reread] = True
        recovered_ids = b.fact_of_pair[is_reread[b.item_of_pair]]
    for chosen, mask, summarized_only in ((kept_ids, derived, True), (recovered_ids, verbatim, False)):
        if len(chosen):
            mark = np.zeros(len(seen), dtype=bool)
            mark[chosen] = True
            hit = mark[fact]
            mask |= (hit & (s == _SUMMARIZED)) if summarized_only else hit
    category[derived] = 1
    category[verbatim] = 0
    starts = np.flatnonzero(value_starts(fact))  # each fact's providers are consecutive
    best = np.minimum.reduceat(category, starts)
    out[:] = np.bincount(b.fact_run[fact[starts]] * 4 + best, minlength=runs * 4).reshape(runs, 4)[:, 1:]
    return out


def provides_any(trace: Trace) -> np.ndarray:
    """Per event: does it provide any fact (read-only; from the trace's fact index)."""
    a = np.diff(trace.derived("fact_index", fact_index).item_ptr) > 0
    a.setflags(write=False)
    return a


def token_outcomes(
    original: np.ndarray, final: np.ndarray, states: np.ndarray, bounds: np.ndarray
) -> np.ndarray:
    """Tokens (derived, spilled, lost) of each run, for runs whose items are laid end to end: run j holds
    items [bounds[j], bounds[j + 1]). An item cut in place keeps what is left as derived and loses (or
    spills) the rest; a summary stands for its whole span: derived up to its size, the rest lost."""
    runs = len(bounds) - 1
    changed = np.flatnonzero(states)
    if not len(changed):
        return np.zeros((runs, 3), dtype=np.int64)
    original, final, states = original[changed], final[changed], states[changed]
    run = bounds.searchsorted(changed, side="right") - 1

    def per_run(values: np.ndarray, where: np.ndarray | None = None) -> np.ndarray:
        # float weights are exact here: token counts stay far below 2**53
        if where is None:
            return np.bincount(run, values, minlength=runs).astype(np.int64)
        return np.bincount(run[where], values[where], minlength=runs).astype(np.int64)

    summarized = states == _SUMMARIZED
    in_place = None if not summarized.any() else ~summarized
    kept = np.minimum(final, original)
    cut = original - kept
    derived, cut_total = per_run(kept, in_place), per_run(cut, in_place)
    spilled_items = states == _SPILLED
    spilled = per_run(cut, spilled_items) if spilled_items.any() else np.zeros(runs, dtype=np.int64)
    lost = cut_total - spilled
    if in_place is not None:
        covered, summary = per_run(original, summarized), per_run(final, summarized)
        in_summary = np.minimum(summary, covered)
        derived += in_summary
        lost += covered - in_summary
    out = np.empty((runs, 3), dtype=np.int64)
    out[:, 0], out[:, 1], out[:, 2] = derived, spilled, lost
    return out


def totals(trace: Trace, r: RunRecord) -> LedgerTotals:
    """End-of-run totals of one replayed run (a batch replay computes them with ``totals_many``)."""
    n = len(r.item_state)
    a = trace.arrays
    tokens = token_outcomes(a.tokens[:n], r.item_tokens, r.item_state, np.array([0, n]))
    one = None
    if r.item_state.any():
        tables = trace.derived("batch_facts_by_stop", _no_tables)  # a run's items: usually all it admits
        one = tables.get(n)
        if one is None:
            one = tables[n] = batch_facts([trace.derived("fact_index", fact_index)], np.array([n]))
    reread = np.array([src for _, _, src, _ in r.rereads], dtype=np.int64)
    facts = fact_outcome_counts(one, r.item_state, [r.summary_kept], reread)
    return totals_many([seen_facts(trace, n)], [seen_tokens(trace, n)], tokens, facts)[0]


def _no_tables(trace: Trace) -> dict[int, BatchFacts]:
    return {}


def seen_facts(trace: Trace, n: int) -> int:
    """Distinct facts events [0, n) provide."""
    return trace.derived("facts_before", _facts_before)[n]


def seen_tokens(trace: Trace, n: int) -> int:
    """Recorded tokens of events [0, n)."""
    return int(trace.arrays.prefix[n])


def totals_many(facts_seen: list[int], tokens_seen: list[int], tokens: np.ndarray, facts: np.ndarray) -> list:
    """End-of-run totals of runs from what each saw and its (derived, spilled, lost) tokens and facts
    (``token_outcomes``, ``fact_outcome_counts``): the rest of what was seen stayed verbatim."""
    return [
        LedgerTotals(fs, fs - fd - fsp - fl, fd, fsp, fl, ts, ts - td - tsp - tl, td, tsp, tl)
        for fs, ts, (fd, fsp, fl), (td, tsp, tl) in zip(
            facts_seen, tokens_seen, facts.tolist(), tokens.tolist(), strict=True
        )
    ]


def entries(trace: Trace, r: RunRecord) -> list[dict]:
    """The ledger's rows: what each operation did to each item and its facts."""
    events, rows = trace.events, []
    view_end = trace.arrays.view_end.tolist()
    original = trace.arrays.tokens.tolist()
    kept_at = dict(r.summaries)
    n = len(r.item_state)
    call = 0
    for i in range(n):  # admissions
        while call < len(view_end) and view_end[call] <= i:
            call += 1
        rows.append(_row(r, call, "add", i, events[i].kind, 0, original[i], events[i].provides, "verbatim"))
    outcome_of = {0: "derived", 1: "lost", 3: "lost", 4: "spilled"}  # truncate, prune, clear, spill
    ch = r.changes
    for k, kind, i, reclaimed, after in zip(
        ch["recorded_call"].tolist(),
        ch["kind"].tolist(),
        ch["index"].tolist(),
        ch["tokens_reclaimed"].tolist(),
        ch["tokens_after"].tolist(),
        strict=True,
    ):
        op = COMPACTION_KINDS[kind]
        provides = events[i].provides
        if op == "summarize":
            kept = set(kept_at.get(k, ()))
            outcome = ";".join("derived" if f in kept else "lost" for f in provides)
        else:
            outcome = ";".join(outcome_of[kind] for _ in provides)
        rows.append(_row(r, k, op, i, events[i].kind, after + reclaimed, after, provides, outcome, raw=True))
    for k, kind, src, added in r.rereads:  # re-read content joins the conversation verbatim
        provides = events[src].provides
        rows.append(_row(r, k, CALL_KINDS[kind], src, events[src].kind, 0, added, provides, "verbatim"))
    return rows


def _row(r, k, op, i, kind, before, after, provides, outcome, raw=False) -> dict:
    if not raw:
        outcome = ";".join(outcome for _ in provides)
    return {
        "trace_id": r.trace_id,
        "policy": r.policy,
        "recorded_call": k,
        "operation": op,
        "item": i,
        "item_kind": kind,
        "tokens_before": before,
        "tokens_after": after,
        "facts": ";".join(provides),
        "facts_outcome": outcome,
    }
