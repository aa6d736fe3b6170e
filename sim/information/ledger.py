"""The information-loss ledger: for every item and fact of a run, what stayed verbatim, what became a
derived representation, what moved out of view behind a handle or a page, and what can no longer be
recovered.

Built from a run's record (the truth) and its trace. Entries: one ``add`` per admitted item, one per
change an operation made (truncate, prune, summarize, clear, spill, paginate), one per re-read
(refetch, retrieve, page). Totals describe the end of the run and reconcile by construction:
facts_verbatim + facts_derived + facts_spilled + facts_paginated + facts_not_retrieved + facts_stale +
facts_lost = facts_seen, and tokens_verbatim + tokens_derived + tokens_spilled + tokens_paginated +
tokens_lost = tokens_seen over the admitted items' original sizes (a representation counts as derived
up to the size of what it replaced; re-read copies are extra content and are not counted in the token
totals).

A fact's state at the end is its best holder's: verbatim (a provider in view whole, or the fact
re-read), derived (a cut or first page that shows the fact's bytes, or a summary that kept it),
paginated (in a later page of a paginated provider: exactly recoverable), spilled (behind a handle),
lost. ``not_retrieved`` replaces spilled when a retrieval of the fact missed and nothing re-read it;
``stale`` replaces every state, lost included, when an admitted event superseded the fact: an outdated
value is not available information wherever it sits, and nothing needs it any more (needs are on live
facts only: ``sim.information.state.live_needs``), so losing it loses nothing. ``facts_lost`` (and
``facts_lost_<kind>``) therefore count live facts only: each seen fact is stale or in exactly one of the
other categories, which is how the totals reconcile.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from sim.core.records import CALL_KINDS, COMPACTION_KINDS, PAGE, RETRIEVE, RunRecord
from sim.core.segments import concat, offsets, owners, value_starts
from sim.core.types import FACT_KINDS, ItemState, Trace

CATEGORIES = ("verbatim", "derived", "paginated", "spilled", "lost", "not_retrieved", "stale")
_DERIVED, _PAGED, _SPILL, _LOST, _MISSED, _STALE = 1, 2, 3, 4, 5, 6  # codes into CATEGORIES
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
    "fact_kinds",
    "facts_outcome",
)


class LedgerTotals(NamedTuple):
    """End-of-run totals (immutable; a tuple, so building one per run stays cheap)."""

    facts_seen: int
    facts_verbatim: int
    facts_derived: int
    facts_spilled: int
    facts_paginated: int
    facts_not_retrieved: int
    facts_stale: int
    facts_lost: int
    tokens_seen: int
    tokens_verbatim: int
    tokens_derived: int
    tokens_spilled: int
    tokens_paginated: int
    tokens_lost: int
    facts_seen_path: int
    facts_seen_identifier: int
    facts_seen_error: int
    facts_seen_value: int
    facts_seen_constraint: int
    facts_seen_goal: int
    facts_lost_path: int
    facts_lost_identifier: int
    facts_lost_error: int
    facts_lost_value: int
    facts_lost_constraint: int
    facts_lost_goal: int


_K = len(FACT_KINDS)


def _facts_before(trace: Trace) -> np.ndarray:
    """Per i: distinct facts provided by events [0, i), and (columns 1..) of each kind, and stale
    (superseded by an event before i) — rows 0 .. len(events)."""
    seen: set[str] = set()
    kind_of = trace.derived("fact_index", fact_index)
    out = np.zeros((len(trace.events) + 1, 1 + _K), dtype=np.int64)
    row = np.zeros(1 + _K, dtype=np.int64)
    for e in trace.events:
        for f in e.provides:
            if f not in seen:
                seen.add(f)
                row[0] += 1
                k = kind_of.kind[kind_of.ids[f]]
                if k >= 0:
                    row[1 + k] += 1
        out[e.index + 1] = row
    return out


_VERBATIM, _BOUNDED, _SUMMARIZED, _SPILLED, _PAGINATED = (
    int(ItemState.VERBATIM),
    int(ItemState.BOUNDED),
    int(ItemState.SUMMARIZED),
    int(ItemState.SPILLED),
    int(ItemState.PAGINATED),
)
_NEVER = np.iinfo(np.int64).max


class FactIndex(NamedTuple):
    """A trace's facts as integer tables: the facts each event provides and the providers of each fact,
    with each provider's byte span of the fact, each fact's kind, first provider and the first event
    that superseded it."""

    ids: dict[str, int]  # fact -> id, in order of first provider
    item_ptr: np.ndarray  # facts of event i: item_facts[item_ptr[i] : item_ptr[i + 1]]
    item_facts: np.ndarray
    fact_ptr: np.ndarray  # providers of fact f, ascending: fact_items[fact_ptr[f] : fact_ptr[f + 1]]
    fact_items: np.ndarray
    span_start: np.ndarray  # per provider (as fact_items): the fact's byte span in that provider
    span_end: np.ndarray
    kind: np.ndarray  # per fact: index in FACT_KINDS, -1: none
    first: np.ndarray  # per fact: its first provider
    stale_at: np.ndarray  # per fact: the first event that superseded it (int64 max: none)


def fact_index(trace: Trace) -> FactIndex:
    ids: dict[str, int] = {}
    item_ptr, item_facts, providers = [0], [], []
    kinds: list[int] = []
    for e in trace.events:
        spans = e.fact_spans or (None,) * len(e.provides)
        for j, f in enumerate(e.provides):
            fid = ids.get(f)
            if fid is None:
                fid = ids[f] = len(ids)
                providers.append([])
                k = e.fact_kinds[j] if e.fact_kinds else None
                kinds.append(FACT_KINDS.index(k) if k is not None else -1)
            item_facts.append(fid)
            if not providers[fid] or providers[fid][-1][0] != e.index:
                span = spans[j]
                providers[fid].append((e.index, *((0, e.bytes) if span is None else span)))
        item_ptr.append(len(item_facts))
    stale_at = np.full(len(ids), _NEVER, dtype=np.int64)
    for e in trace.events:
        for f in e.supersedes:
            fid = ids.get(f)
            if fid is not None and stale_at[fid] == _NEVER:
                stale_at[fid] = e.index
    fact_ptr = np.zeros(len(providers) + 1, dtype=np.int64)
    np.cumsum([len(p) for p in providers], out=fact_ptr[1:])
    flat = [x for p in providers for x in p]
    cols = [np.array([x[c] for x in flat], dtype=np.int64) for c in range(3)]
    return FactIndex(
        ids,
        np.array(item_ptr, dtype=np.int64),
        np.array(item_facts, dtype=np.int64),
        fact_ptr,
        *cols,
        np.array(kinds, dtype=np.int64),
        np.array([p[0][0] for p in providers], dtype=np.int64),
        stale_at,
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
    provider_start: np.ndarray  # ... and the fact's byte span in that item
    provider_end: np.ndarray
    fact_kind: np.ndarray  # per fact: index in FACT_KINDS (-1: none)
    stale: np.ndarray  # per fact: provided and superseded among its run's admitted items


def batch_facts(indexes: list[FactIndex], stops: np.ndarray) -> BatchFacts:
    item_off = offsets(stops)
    nfacts = [len(x.ids) for x in indexes]
    fact_off = offsets(nfacts)
    parts: list[list[np.ndarray]] = [[] for _ in range(6)]
    kinds, stale = [], []
    for x, s, i0, f0 in zip(indexes, stops.tolist(), item_off.tolist(), fact_off.tolist(), strict=True):
        end = int(x.item_ptr[s])  # facts of the admitted items [0, s)
        parts[0].append(owners(np.diff(x.item_ptr[: s + 1])) + i0)
        parts[1].append(x.item_facts[:end] + f0)
        inside = x.fact_items < s
        parts[2].append(owners(np.diff(x.fact_ptr))[inside] + f0)
        parts[3].append(x.fact_items[inside] + i0)
        parts[4].append(x.span_start[inside])
        parts[5].append(x.span_end[inside])
        kinds.append(x.kind)
        stale.append((x.stale_at < s) & (x.first < s))
    cat = [concat(p) for p in parts]
    return BatchFacts(
        tuple(indexes),
        fact_off,
        sum(nfacts),
        owners(nfacts),
        *cat,
        concat(kinds),
        concat(stale, bool),
    )


COUNT_COLUMNS = ("derived", "spilled", "paginated", "not_retrieved", "stale", "lost")  # then lost by kind


def fact_outcome_counts(
    b: BatchFacts | None,
    states: np.ndarray,
    kept: Sequence[tuple[str, ...]],
    reread: np.ndarray,
    shown: dict[int, tuple[tuple[int, int], ...]] | None = None,
    missed: Sequence[tuple[str, ...]] | None = None,
    recovered: Sequence[tuple[str, ...]] | None = None,
) -> np.ndarray:
    """Per run of ``b``: facts at the end in each of COUNT_COLUMNS, then lost facts of each kind
    (``states``: the runs' final item states laid end to end). ``kept``: each run's facts its last
    summary kept; ``reread``: the items the agent re-read (every fact they provide is back in view) or,
    when ``recovered`` is given, each run's facts re-read; ``shown``: global item -> the byte ranges its
    cut or first page shows (a fact outside them is not readable there); ``missed``: each run's facts a
    retrieval missed. Each fact takes its best holder's category (module docstring); stale facts,
    superseded within the run, count as stale whatever their holders (lost ones too: never lost)."""
    runs = len(kept)
    width = len(COUNT_COLUMNS) + _K
    out = np.zeros((runs, width), dtype=np.int64)
    if b is None:
        return out
    stale = b.stale
    touched = b.fact_of_pair[(states != 0)[b.item_of_pair]]  # facts of changed items
    seen = np.zeros(b.n_facts, dtype=bool)
    seen[touched] = True
    if stale.any():  # stale facts of unchanged items: verbatim, so stale
        out[:, 4] = np.bincount(b.fact_run[stale & ~seen], minlength=runs)
    if not len(touched):
        return out
    rows = seen[b.provider_fact]  # every provider of those facts
    prov, fact = b.provider_item[rows], b.provider_fact[rows]
    if not len(prov):
        return out
    s = states[prov]
    category = np.full(len(prov), _LOST, dtype=np.int64)
    category[s == _SPILLED] = _SPILL
    positional = (s == _BOUNDED) | (s == _PAGINATED)
    shows = positional.copy()
    if shown and positional.any():
        start, end = b.provider_start[rows], b.provider_end[rows]
        for r in np.flatnonzero(positional).tolist():
            ranges = shown.get(int(prov[r]))
            if ranges is not None:
                a, z = int(start[r]), int(end[r])
                shows[r] = any(lo <= a and z <= hi for lo, hi in ranges)
    category[positional & ~shows & (s == _PAGINATED)] = _PAGED
    derived = shows
    verbatim = s == _VERBATIM

    def ids_of(per_run: Sequence[tuple[str, ...]]) -> list[int]:
        return [
            int(b.fact_off[j]) + b.indexes[j].ids[f]
            for j, k in enumerate(per_run)
            if k
            for f in k
            if f in b.indexes[j].ids
        ]

    kept_ids = ids_of(kept) if any(kept) else []
    recovered_ids: list[int] | np.ndarray = []
    if recovered is not None:
        recovered_ids = ids_of(recovered) if any(recovered) else []
    elif len(reread):
        is_reread = np.zeros(len(states), dtype=bool)
        is_reread[reread] = True
        recovered_ids = b.fact_of_pair[is_reread[b.item_of_pair]]
    for chosen, mask, summarized_only in ((kept_ids, derived, True), (recovered_ids, verbatim, False)):
        if len(chosen):
            mark = np.zeros(b.n_facts, dtype=bool)
            mark[chosen] = True
            hit = mark[fact]
            mask |= (hit & (s == _SUMMARIZED)) if summarized_only else hit
    category[derived] = _DERIVED
    category[verbatim] = 0
    starts = np.flatnonzero(value_starts(fact))  # each fact's providers are consecutive
    best = np.minimum.reduceat(category, starts)
    facts = fact[starts]
    if missed is not None and any(missed):
        mark = np.zeros(b.n_facts, dtype=bool)
        mark[ids_of(missed)] = True
        best[(best == _SPILL) & mark[facts]] = _MISSED
    best[stale[facts]] = _STALE  # superseded: stale, never lost (module docstring)
    run = b.fact_run[facts]
    counts = np.bincount(run * len(CATEGORIES) + best, minlength=runs * len(CATEGORIES))
    counts = counts.reshape(runs, len(CATEGORIES))
    for col, code in enumerate((_DERIVED, _SPILL, _PAGED, _MISSED)):
        out[:, col] = counts[:, code]
    out[:, 4] += counts[:, _STALE]
    out[:, 5] = counts[:, _LOST]
    lost = best == _LOST
    kind = b.fact_kind[facts]
    has = lost & (kind >= 0)
    if has.any():
        out[:, 6:] = np.bincount(run[has] * _K + kind[has], minlength=runs * _K).reshape(runs, _K)
    return out


def provides_any(trace: Trace) -> np.ndarray:
    """Per event: does it provide any fact (read-only; from the trace's fact index)."""
    a = np.diff(trace.derived("fact_index", fact_index).item_ptr) > 0
    a.setflags(write=False)
    return a


def token_outcomes(
    original: np.ndarray, final: np.ndarray, states: np.ndarray, bounds: np.ndarray
) -> np.ndarray:
    """Tokens (derived, spilled, paginated, lost) of each run, for runs whose items are laid end to end:
    run j holds items [bounds[j], bounds[j + 1]). An item cut in place keeps what is left as derived and
    loses the rest (a spilled item's rest is behind its handle, a paginated item's in its later pages);
    a summary stands for its whole span: derived up to its size, the rest lost."""
    changed = np.flatnonzero(states)
    if not len(changed):
        return np.zeros((len(bounds) - 1, 4), dtype=np.int64)
    return changed_token_outcomes(changed, original[changed], final[changed], states[changed], bounds)


def changed_token_outcomes(
    changed: np.ndarray, original: np.ndarray, final: np.ndarray, states: np.ndarray, bounds: np.ndarray
) -> np.ndarray:
    """``token_outcomes`` from the changed items alone: their ids (ascending, each once) and their
    original sizes, final sizes and (non-verbatim) final states."""
    runs = len(bounds) - 1
    at = changed.searchsorted(bounds)  # run j's changed items: [at[j], at[j + 1]) (they ascend)

    def per_run(values: np.ndarray, where: np.ndarray | None = None) -> np.ndarray:
        # sums over each run's stretch as differences of one running sum (exact in int64: a wrapped
        # running sum still differs by the stretch's sum)
        if where is not None:
            if not where.any():
                return np.zeros(runs, dtype=np.int64)
            values = np.where(where, values, 0)
        running = np.zeros(len(values) + 1, dtype=np.int64)
        np.cumsum(values, out=running[1:])
        return running[at[1:]] - running[at[:-1]]

    summarized = states == _SUMMARIZED
    in_place = None if not summarized.any() else ~summarized
    kept = np.minimum(final, original)
    cut = original - kept
    derived, cut_total = per_run(kept, in_place), per_run(cut, in_place)
    spilled = per_run(cut, states == _SPILLED)
    paged = per_run(cut, states == _PAGINATED)
    lost = cut_total - spilled - paged
    if in_place is not None:
        covered, summary = per_run(original, summarized), per_run(final, summarized)
        in_summary = np.minimum(summary, covered)
        derived += in_summary
        lost += covered - in_summary
    out = np.empty((runs, 4), dtype=np.int64)
    out[:, 0], out[:, 1], out[:, 2], out[:, 3] = derived, spilled, paged, lost
    return out


def final_shown(r: RunRecord, offset: int = 0) -> dict[int, tuple[tuple[int, int], ...]]:
    """Item (plus ``offset``) -> the byte ranges its last cut or pagination shows, for items whose final
    state is still that cut or pagination."""
    out: dict[int, tuple[tuple[int, int], ...]] = {}
    states = r.item_state
    for _, i, ranges in r.cuts:
        if i < len(states) and states[i] in (_BOUNDED, _PAGINATED):
            out[i + offset] = ranges
    return out


def moved_totals(trace: Trace, t: LedgerTotals) -> LedgerTotals:
    """``t`` with what a what-if transform declared lost (``Trace.moved``): facts the source trace's
    events provided that no longer reach the parent (a report that left them out, a brokered result cut
    short) count as seen and lost, each once, by kind. A trace without transforms: ``t`` itself."""
    if not trace.moved:
        return t
    kinds: dict[str, str | None] = {}
    for m in trace.moved:
        for f, k in zip(m.facts_lost, m.fact_kinds_lost or (None,) * len(m.facts_lost), strict=True):
            kinds.setdefault(f, k)
    d = t._asdict()
    d["facts_seen"] += len(kinds)
    d["facts_lost"] += len(kinds)
    for k in kinds.values():
        if k is not None:
            d[f"facts_seen_{k}"] += 1
            d[f"facts_lost_{k}"] += 1
    return LedgerTotals(**d)


def totals(trace: Trace, r: RunRecord) -> LedgerTotals:
    """End-of-run totals of one replayed run (a batch replay computes them with ``totals_many``)."""
    n = len(r.item_state)
    a = trace.arrays
    tokens = token_outcomes(a.tokens[:n], r.item_tokens, r.item_state, np.array([0, n]))
    one = _tables(trace, n)
    facts = fact_outcome_counts(
        one, r.item_state, [r.summary_kept], _NONE, final_shown(r), [r.missed], [r.recovered]
    )
    return totals_many(
        [seen_facts(trace, n)], [seen_tokens(trace, n)], tokens, facts, [seen_kinds(trace, n)]
    )[0]


_NONE = np.zeros(0, dtype=np.int64)


def _tables(trace: Trace, n: int) -> BatchFacts | None:
    """The fact tables of a run that admits items [0, n) (None: no fact among them)."""
    if not seen_facts(trace, n):
        return None
    tables = trace.derived("batch_facts_by_stop", _no_tables)  # a run's items: usually all it admits
    one = tables.get(n)
    if one is None:
        one = tables[n] = batch_facts([trace.derived("fact_index", fact_index)], np.array([n]))
    return one


def _no_tables(trace: Trace) -> dict[int, BatchFacts]:
    return {}


def seen_facts(trace: Trace, n: int) -> int:
    """Distinct facts events [0, n) provide."""
    return int(trace.derived("facts_before", _facts_before)[n, 0])


def seen_kinds(trace: Trace, n: int) -> list[int]:
    """Distinct facts events [0, n) provide, of each kind (FACT_KINDS order)."""
    return trace.derived("facts_before", _facts_before)[n, 1:].tolist()


def seen_tokens(trace: Trace, n: int) -> int:
    """Recorded tokens of events [0, n)."""
    return int(trace.arrays.prefix[n])


def totals_many(
    facts_seen: list[int],
    tokens_seen: list[int],
    tokens: np.ndarray,
    facts: np.ndarray,
    kinds_seen: list[list[int]],
) -> list:
    """End-of-run totals of runs from what each saw (facts, tokens, facts of each kind) and its tokens
    (``token_outcomes``) and facts (``fact_outcome_counts``) by category: the rest of what was seen
    stayed verbatim."""
    out = []
    for fs, ts, f, t, ks in zip(
        facts_seen, tokens_seen, facts.tolist(), tokens.tolist(), kinds_seen, strict=True
    ):
        fd, fsp, fpg, fmiss, fst, fl = f[:6]
        td, tsp, tpg, tl = t
        out.append(
            LedgerTotals(
                fs,
                fs - fd - fsp - fpg - fmiss - fst - fl,
                fd,
                fsp,
                fpg,
                fmiss,
                fst,
                fl,
                ts,
                ts - td - tsp - tpg - tl,
                td,
                tsp,
                tpg,
                tl,
                *ks,
                *f[6:],
            )  # fmt: skip
        )
    return out


def totals_columns(
    facts_seen: list[int],
    tokens_seen: list[int],
    tokens: np.ndarray,
    facts: np.ndarray,
    kinds_seen: list[list[int]],
) -> dict[str, list[int]]:
    """``totals_many``'s numbers as columns, field name -> one int per run, without a tuple per run."""
    fs = np.asarray(facts_seen, dtype=np.int64)
    ts = np.asarray(tokens_seen, dtype=np.int64)
    f = np.asarray(facts, dtype=np.int64).reshape(len(fs), -1)
    t = np.asarray(tokens, dtype=np.int64).reshape(len(fs), 4)
    ks = np.asarray(kinds_seen, dtype=np.int64).reshape(len(fs), _K)
    # one block, a row per field in LedgerTotals order (one stack of the 1-D and 2-D pieces)
    out = np.vstack(
        [fs, fs - f[:, :6].sum(axis=1), f[:, :6].T, ts, ts - t.sum(axis=1), t.T, ks.T, f[:, 6:].T]
    )
    return dict(zip(LedgerTotals._fields, int_lists(out), strict=True))


def int_lists(columns: np.ndarray) -> list[list[int]]:
    """Each row of a 2-D int array as a list, a row of one value (a batch without facts has many all-zero
    columns) as that value repeated, without reading it element by element: the rows are found in one
    comparison over the whole array (numpy's per-call cost, paid per row, would be most of it)."""
    n = columns.shape[1]
    if not n:
        return [[] for _ in range(len(columns))]
    first = columns[:, 0]
    alike = (columns == first[:, None]).all(axis=1).tolist()
    return [
        [v] * n if same else row.tolist() for same, v, row in zip(alike, first.tolist(), columns, strict=True)
    ]


def entries(trace: Trace, r: RunRecord) -> list[dict]:
    """The ledger's rows: what each operation did to each item and its facts. A cut (truncate) keeps as
    derived the facts inside the bytes it shows and loses the rest; a pagination (paginate) shows the
    first page's facts as derived and hides the rest (``paginated``); a retrieval brings back what it
    finds (a miss is ``not_retrieved``), a page read the facts the pages read so far hold whole. A fact
    an operation takes out of view after an admitted event superseded it is ``stale``, never ``lost``."""
    from sim.information.state import inside, pages_of, span_of, superseded_at

    events, rows = trace.events, []
    view_end = trace.arrays.view_end.tolist()
    original = trace.arrays.tokens.tolist()
    kept_at = dict(r.summaries)
    n = len(r.item_state)
    call = 0
    for i in range(n):  # admissions
        while call < len(view_end) and view_end[call] <= i:
            call += 1
        rows.append(_row(r, trace, call, "add", i, 0, original[i], "verbatim"))
    outcome_of = {1: "lost", 3: "lost", 4: "spilled"}  # prune, clear, spill
    stale_at = trace.derived("superseded_at", superseded_at)

    def lost(f: str, k: int) -> str:
        """What an operation before call k does to a fact it takes out of view: a fact an admitted event
        already superseded is stale, never lost."""
        admitted = view_end[k] if 0 <= k < len(view_end) else n
        return "stale" if stale_at.get(f, admitted) < admitted else "lost"

    cuts = iter(r.cuts)
    shown: dict[int, tuple[tuple[int, int], ...]] = {}
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
            outcome = ";".join("derived" if f in kept else lost(f, k) for f in provides)
        elif op in ("truncate", "paginate"):
            _, _, ranges = next(cuts)
            shown[i] = ranges
            outcome = ";".join(
                "derived"
                if inside(span_of(trace, i, f), ranges)
                else (lost(f, k) if op == "truncate" else "paginated")
                for f in provides
            )
        else:
            outcome = ";".join(
                lost(f, k) if outcome_of[kind] == "lost" else outcome_of[kind] for f in provides
            )
        rows.append(_row(r, trace, k, op, i, after + reclaimed, after, outcome, raw=True))
    missed, back = set(r.missed), set(r.recovered)
    pages = iter(r.page_reads)
    read: dict[int, set[int]] = {}
    for k, kind, src, added in r.rereads:  # re-read content joins the conversation verbatim
        provides = events[src].provides
        if kind == RETRIEVE:
            outcome = ";".join("not_retrieved" if f in missed else "verbatim" for f in provides)
        elif kind == PAGE:
            _, _, page = next(pages)
            got = read.setdefault(src, {0})
            got.add(page)
            size, nbytes = shown[src][0][1], events[src].bytes
            outcome = ";".join(
                "verbatim" if set(pages_of(span_of(trace, src, f), size, nbytes)) <= got else "paginated"
                for f in provides
            )
        else:  # a refetch (or a ranged read): what came back through the policy's bound is verbatim
            outcome = ";".join("verbatim" if f in back else lost(f, k) for f in provides)
        rows.append(_row(r, trace, k, CALL_KINDS[kind], src, 0, added, outcome, raw=True))
    rows.extend(moved_entries(trace, r))
    return rows


def moved_entries(trace: Trace, r: RunRecord) -> list[dict]:
    """One row per what-if transform declaration (``Trace.moved``): operation ``<transform>`` on the
    call that now stands for the moved calls, ``item`` -1 (no single item), the tokens the parent held
    before and holds after, its facts kept (``derived``) and lost."""
    rows = []
    for m in trace.moved:
        facts = (*m.facts_kept, *m.facts_lost)
        where = "child" if m.child is not None else "call"
        rows.append(
            {
                "trace_id": r.trace_id,
                "policy": r.policy,
                "recorded_call": m.call,
                "operation": f"{m.transform}:calls {m.first}-{m.end - 1} to {where} "
                + (str(m.child) if m.child is not None else str(m.call)),
                "item": -1,
                "item_kind": "tool_result",
                "tokens_before": m.tokens_moved,
                "tokens_after": m.tokens_after,
                "facts": ";".join(facts),
                "fact_kinds": ";".join(k or "" for k in (*("",) * len(m.facts_kept), *m.fact_kinds_lost))
                if m.fact_kinds_lost
                else ";".join("" for _ in facts),
                "facts_outcome": ";".join(["derived"] * len(m.facts_kept) + ["lost"] * len(m.facts_lost)),
            }
        )
    return rows


def _row(r, trace, k, op, i, before, after, outcome, raw=False) -> dict:
    e = trace.events[i]
    provides = e.provides
    if not raw:
        outcome = ";".join(outcome for _ in provides)
    return {
        "trace_id": r.trace_id,
        "policy": r.policy,
        "recorded_call": k,
        "operation": op,
        "item": i,
        "item_kind": e.kind,
        "tokens_before": before,
        "tokens_after": after,
        "facts": ";".join(provides),
        "fact_kinds": ";".join(k or "" for k in e.fact_kinds)
        if e.fact_kinds
        else ";".join("" for _ in provides),
        "facts_outcome": outcome,
    }
