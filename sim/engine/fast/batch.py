"""The engine's fast path: many runs replayed at once as columns laid end to end.

For policies whose decisions are known ahead (settle-time transforms, a ``plan``; see
``sim.engine.dispatch``),
a request is the prefix sum of settled sizes up to its view's end plus the net change planned before
it. ``prepare_many`` gathers what each run says (its settle-time changes, its plan) and the mock
model's reactions to facts the plans hide: which needs are unmet is found for all runs' (call, fact)
pairs at once, and only the unmet ones are walked. ``replay_batch``
then computes every run's rows in a few array steps over the whole batch: item, call and plan-entry
arrays of all runs concatenated, with per-run offsets so sums restart at each run. Runs are short (tens
of calls) and numpy's per-operation cost is fixed, so one pass over a corpus replaces hundreds of small
ones; what depends only on the traces is kept for the next replay of the same batch. The per-call loop
in ``sim.engine.loop`` is the reference; the conformance checker holds the two to identical records.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from sim.core.growth import growth_exponents
from sim.core.records import (
    CALL_COLUMNS,
    CALL_KINDS,
    CHANGE_COLUMNS,
    COMPACTION_KINDS,
    KIND_OF_STATE,
    NO_CHANGES,
    NO_COMPACTIONS,
    Columns,
    GroupedCompactions,
    Primed,
)
from sim.core.segments import concat, offsets, owners, value_ends, value_starts
from sim.core.types import ItemState, Trace
from sim.cost.cache import CacheRules, split_runs
from sim.cost.pricing import Price
from sim.engine.common import Fenwick, per_call
from sim.engine.model import ReplayModel
from sim.information.ledger import (
    BatchFacts,
    LedgerTotals,
    batch_facts,
    changed_token_outcomes,
    fact_index,
    fact_outcome_counts,
    provides_any,
    seen_facts,
    seen_kinds,
    token_outcomes,
    totals_many,
)
from sim.information.state import (
    DEGRADE,
    FAIL,
    POSITIONAL,
    NeedPairs,
    choose_rereads,
    has_needs,
    need_pairs,
    reactions,
    reread_size,
    shown_ranges,
)
from sim.policies.base import Plans, Policy, View
from sim.util.batchmemo import batch_derived, shape_derived
from sim.util.errors import TraceError
from sim.util.limits import run_sum_problem

_VERBATIM, _BOUNDED, _SPILLED = int(ItemState.VERBATIM), int(ItemState.BOUNDED), int(ItemState.SPILLED)
_PAGINATED = int(ItemState.PAGINATED)
_POSITIONAL_CODES = np.array([int(x) for x in POSITIONAL], dtype=np.int64)


def _positional(states: np.ndarray) -> np.ndarray:
    """Which of the state codes show part of an item's bytes (cheaper than np.isin on two codes)."""
    return (states == _BOUNDED) | (states == _PAGINATED)


# compaction kind of each item state code (-1: verbatim is no compaction)
KIND_OF_CODE = np.array([KIND_OF_STATE.get(ItemState(c), -1) for c in range(len(ItemState))], dtype=np.int64)


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


# ------------------------------------------------------------------------------------------ per run
def settled_changes(trace: Trace, policy: Policy, stop: int) -> list:
    """The settle-time changes of events [0, stop), in index order (the batch applies them)."""
    changes = policy.settle_all(trace)
    if changes is not None:
        return [ch for ch in changes if ch.index < stop]
    # the policy wants to see the view as each event enters
    a = trace.arrays
    state = policy.start(trace)
    tokens = a.tokens.tolist()[:stop]
    states = [0] * stop
    view = View()
    view.tokens, view.state, view.nbytes = tokens, states, a.bytes.tolist()[:stop]
    total, changes = 0, []
    for i in range(stop):
        view.n, view.total = i + 1, total + tokens[i]
        ch = policy.settle(trace, state, i, view)
        if ch is not None:
            changes.append(ch)
            tokens[i], states[i] = ch.tokens, ch.state
        total += tokens[i]
    return changes


def prepare_many(
    traces: list[Trace], policy: Policy, models: list[ReplayModel], plans: Plans | None
) -> list[Prepared | None]:
    """Each run's inputs, or None for a run the loop must replay: its mock model would end it on a
    missing fact (``on_missing=fail``) or its step limit (``model.max_turns``), or it would react in a
    way the batch does not model (a page read, a retrieval that may miss: ``retrieval_recall`` < 1).
    ``plans``: the runs' plans, when the policy acts before calls."""
    needs = batch_derived(traces, "has_needs", _has_needs)
    if not policy.settles:  # nothing settles: a run reacts when its plan hides a needed fact
        if not any(needs) or (plans is None or not plans.counts.any()) and not policy.spills:
            # no run reacts: each as it is, the same for every setting of the batch (kept)
            return _limited(PlainRuns(traces, models), models)
        counts = plans.counts.tolist() if plans is not None else [0] * len(traces)
        spills = policy.spills
        runs = [
            (t, m, _NO_SETTLED, (n > 0 or spills) and hn)
            for t, m, n, hn in zip(traces, models, counts, needs, strict=True)
        ]
    else:
        key = policy.settle_key()
        if key is not None:  # the same for every replay of the batch whose policy settles alike (kept)
            kept = _kept_settled(traces, policy, key)
            if not any(needs):  # no run reacts: each as it is
                return _limited(PlainRuns(traces, models, kept), models)
            settled_of, positional_of = kept.per_run, kept.positional
        else:
            stops = _static(traces).stops.tolist()
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
        out = [_prepared((t, m, st, j, None, False, (), (), None)) for j, (t, m, st, _) in enumerate(runs)]
    else:
        reactions = _reactions_many(traces, runs, plans)
        out = []
        for j, (trace, model, settled, reacts) in enumerate(runs):
            if not reacts:
                p = _prepared((trace, model, settled, j, None, False, (), (), None))
            else:
                reacted = reactions[j]
                p = None if reacted is None else _prepared((trace, model, settled, j, *reacted))
            out.append(p)
    return _limited(out, models)


class _Settled(NamedTuple):
    """A batch's settle-time changes under one ``Policy.settle_key`` (no trace: the batch memory keeps
    it): per run, and as arrays over the batch."""

    per_run: list[list]  # each run's changes (``Change``), in index order
    positional: list[bool]  # per run: does a change show part of its item (a cut, a first page)
    item: np.ndarray  # each change's global item, runs laid end to end
    cuts: list  # per run: (call, item, shown byte ranges) of each cut or pagination (the record's)
    columns: _SettledColumns | None  # the batch after the changes (None: there are none)


class _SettledColumns(NamedTuple):
    """A batch's columns after settle-time changes, before any plan: a function of the traces and the
    changes alone (kept with them: the settings of a sweep that settle alike share it). Read-only."""

    tok: np.ndarray  # item sizes (a replay copies them: its plans change some)
    states: np.ndarray  # item state codes (int8; copied likewise)
    prefix: np.ndarray  # prefix sums of ``tok`` over the batch
    view_tokens: np.ndarray  # per call: its view's size
    part: tuple  # the changes as a change part: (global call, kind, local index, reclaimed, after)
    summary: tuple | None  # ``_part_summary`` of it


def _settle_columns(st: _Static, g: np.ndarray, new: np.ndarray, code: np.ndarray) -> _SettledColumns:
    """The batch's columns once items ``g`` (global ids) have size ``new`` and state ``code``."""
    tok = st.original.copy()
    tok[g] = new
    states = np.zeros(len(tok), dtype=np.int8)
    states[g] = code
    prefix = np.zeros(len(tok) + 1, dtype=np.int64)  # of settled sizes, over the whole batch
    np.cumsum(tok, out=prefix[1:])
    view_tokens = prefix[st.view_end_global] - prefix[st.item_base]
    # a settled event belongs to the first call whose view admits it
    call = np.searchsorted(st.view_end_global, g, side="right")
    part = (call, KIND_OF_CODE[code], g - st.item_base[call], st.original[g] - new, new)
    summary = _part_summary(part, st.call_off, len(st.call_base))
    for a in (tok, states, prefix, view_tokens, *part, *(summary[1:] if summary is not None else ())):
        a.setflags(write=False)
    return _SettledColumns(tok, states, prefix, view_tokens, part, summary)


def _settle_cuts(st: _Static, j: int, changes: list) -> list:
    """Run j's (call, item, shown byte ranges) of each of its settle-time ``changes`` that is a cut or a
    pagination, as its record holds them."""
    c0, i0 = int(st.call_off[j]), int(st.item_off[j])
    admit = np.searchsorted(st.view_end_global, i0 + np.array([ch.index for ch in changes]), side="right")
    return [
        (int(c) - c0, ch.index, shown_ranges(ch.state, ch.kept, ch.nbytes))
        for ch, c in zip(changes, admit.tolist(), strict=True)
        if ch.state in POSITIONAL
    ]


SETTLED_KEEP = 4  # settle keys remembered per batch (a sweep of a settle-time knob moves on), oldest out


def _kept_settled(traces: Sequence[Trace], policy: Policy, key: str) -> _Settled:
    kept = batch_derived(traces, "settled", _new_memo)
    value = kept.get(key)
    if value is None:
        value = kept[key] = _batch_settled(policy, traces)
        while len(kept) > SETTLED_KEEP:
            kept.popitem(last=False)
    else:
        kept.move_to_end(key)
    return value


def _new_memo(_traces) -> OrderedDict:
    return OrderedDict()


def _batch_settled(policy: Policy, traces: Sequence[Trace]) -> _Settled:
    st = _static(traces)
    per_run = [settled_changes(t, policy, s) for t, s in zip(traces, st.stops.tolist(), strict=True)]
    flat = [
        (off + ch.index, ch.tokens, int(ch.state))
        for s, off in zip(per_run, st.item_off.tolist(), strict=True)
        for ch in s
    ]
    cuts: list = [_NO_CUTS] * len(traces)
    positional = [False] * len(traces)
    for j, s in enumerate(per_run):
        if s and any(ch.state in POSITIONAL for ch in s):
            positional[j] = True
            cuts[j] = _settle_cuts(st, j, s)
    if not flat:
        return _Settled(per_run, positional, _NONE, cuts, None)
    g, new, code = (np.array(c, dtype=np.int64) for c in zip(*flat, strict=True))
    g.setflags(write=False)
    return _Settled(per_run, positional, g, cuts, _settle_columns(st, g, new, code))


class PlainRuns(Sequence):
    """``prepare_many``'s answer for runs that react to nothing, settling nothing or what ``settled``
    holds: their traces and models, a ``Prepared`` per run only when one is asked for (the batch reads
    the lists whole)."""

    __slots__ = ("traces", "models", "settled")

    def __init__(self, traces: list[Trace], models: list[ReplayModel], settled: _Settled | None = None):
        self.traces, self.models, self.settled = traces, models, settled

    def _settled_of(self, j: int) -> list:
        return _NO_SETTLED if self.settled is None else self.settled.per_run[j]

    def __len__(self) -> int:
        return len(self.traces)

    def __getitem__(self, j):
        if isinstance(j, slice):
            return [self[i] for i in range(*j.indices(len(self)))]
        t, m, j = self.traces[j], self.models[j], j % len(self)
        return _prepared((t, m, self._settled_of(j), j, None, False, (), (), None))

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


_NO_SETTLED: list = []  # shared by runs without settle-time changes (never written)
_NO_CUTS: tuple = ()


def _has_needs(traces: Sequence[Trace]) -> list[bool]:
    return [t.derived("has_needs", has_needs) for t in traces]


class _NeedTables(NamedTuple):
    """The (call, fact) need pairs of a batch's runs laid end to end (``need_pairs`` of each run), with
    global ids (items, calls, facts) where runs' ids would clash."""

    pairs: tuple[NeedPairs, ...]
    pair_off: list[int]  # run j's pairs: [pair_off[j], pair_off[j + 1])
    provider: np.ndarray  # global item id of each pair's providers in view
    provider_start: np.ndarray  # the fact's byte span in each of those
    provider_end: np.ndarray
    owner: np.ndarray  # global pair id of each of those
    at_call: np.ndarray  # global call at which each is looked at
    run: np.ndarray  # per pair: its run
    call: np.ndarray  # per pair: its global call
    source: np.ndarray  # per pair: its source's global item id (-1: none)
    source_tool: np.ndarray
    source_added: np.ndarray
    source_call: np.ndarray  # per pair: the global call its re-read re-issues (-1: none)
    answer: np.ndarray  # per pair: a need of its run's final answer
    answers: list[int]  # per run: needs of its final answer
    fact: np.ndarray  # per pair: its fact's global id in the batch's fact tables (-1: provided by none)


def _need_tables(traces: Sequence[Trace]) -> _NeedTables:
    st = _static(traces)
    pairs = tuple(t.derived("need_pairs", need_pairs) for t in traces)
    n_pairs = [len(p.facts) for p in pairs]
    pair_off = offsets(n_pairs)
    n_prov = [len(p.provider) for p in pairs]
    owner = concat([p.pair_of_provider for p in pairs]) + np.repeat(pair_off, n_prov)
    pair_call = concat([p.call for p in pairs]) + np.repeat(st.call_off, n_pairs)
    run = owners(n_pairs)

    def shift(values: np.ndarray, offsets: np.ndarray) -> np.ndarray:  # -1 stays -1
        return np.where(values >= 0, values + offsets[run], -1)

    fact = np.full(len(run), -1, dtype=np.int64)
    if st.facts is not None:
        ids = [t.derived("fact_index", fact_index).ids for t in traces]
        fact = shift(
            np.array([i.get(f, -1) for i, p in zip(ids, pairs, strict=True) for f in p.facts], np.int64),
            st.facts.fact_off,
        )
    tables = _NeedTables(
        pairs,
        pair_off.tolist() + [int(sum(n_pairs))],
        concat([p.provider for p in pairs]) + np.repeat(st.item_off, n_prov),
        concat([p.provider_start for p in pairs]),
        concat([p.provider_end for p in pairs]),
        owner,
        pair_call[owner],
        run,
        pair_call,
        shift(concat([p.source_item for p in pairs]), st.item_off),
        concat([p.source_tool for p in pairs], bool),
        concat([p.source_added for p in pairs]),
        shift(concat([p.source_call for p in pairs]), st.call_off),
        np.arange(len(run)) - pair_off[run] >= np.array([p.answer_from for p in pairs], np.int64)[run],
        [len(p.facts) - p.answer_from for p in pairs],
        fact,
    )
    for v in tables:
        if isinstance(v, np.ndarray):
            v.setflags(write=False)
    return tables


def _reactions_many(traces: Sequence[Trace], runs: list, plans: Plans | None) -> list:
    """What the mock model does about needed facts the settled states and plans hide, for runs laid end
    to end: per run (facts re-read, degraded?, re-reads, their output tokens, needs of the final answer
    met), or None when it fails the run. Which needs are unmet ignoring re-reads is found for every
    (call, fact) pair at once: a pair is met when one of the fact's providers in its call's view is
    visible at that call, i.e. in the state of the last plan entry for that item at or before the call
    (or its settled state). A re-read makes its facts available from then on, so runs whose unmet
    needs span several calls are walked call by call (``_walk``); where they all fall on one call, no
    re-read can come before them, and the runs are answered together (``_one_call_reactions``)."""
    st, nt = _static(traces), batch_derived(traces, "needs", _need_tables)
    provider, owner, pair_off = nt.provider, nt.owner, nt.pair_off
    item_off, call_off = st.item_off, st.call_off
    settled = [
        (off + ch.index, int(ch.state)) for r, off in zip(runs, item_off.tolist(), strict=True) for ch in r[2]
    ]
    shown = {
        off + ch.index: shown_ranges(ch.state, ch.kept, ch.nbytes)
        for r, off in zip(runs, item_off.tolist(), strict=True)
        for ch in r[2]
        if ch.state in POSITIONAL
    }
    defer = np.zeros(len(runs), dtype=bool)  # runs only the loop can replay
    if settled:
        state = np.zeros(len(st.original), dtype=np.int64)  # settled states of every item
        g, code = zip(*settled, strict=True)
        state[list(g)] = code
        s = state[provider]
    else:
        s = np.zeros(len(provider), dtype=np.int64)
    entries = None if plans is None else plans.laid_out(list(range(len(runs))), call_off, item_off)
    if entries is not None:  # each provider's state at its call: that of the last plan entry for it up to it
        e_call, e_item, _, e_state = entries
        width = len(st.call_base) + 1
        key = e_item * width + e_call
        order = np.argsort(key, kind="stable")  # entries of one (item, call) keep their order: the last wins
        last = key[order].searchsorted(provider * width + nt.at_call, side="right") - 1
        hit = np.flatnonzero(last >= 0)
        entry = order[last[hit]]
        same = e_item[entry] == provider[hit]
        s[hit[same]] = e_state[entry[same]]
        planned = _positional(e_state)  # a plan's cut declares no ranges: the loop's
        if planned.any():
            defer[np.searchsorted(call_off, e_call[planned], side="right") - 1] = True
    n_pairs = pair_off[-1]
    positional = _positional(s)
    shows = positional.copy()  # a cut or a first page shows the fact: it is in view
    for q in np.flatnonzero(positional).tolist():
        ranges = shown.get(int(provider[q]))
        if ranges is not None:
            a, b = int(nt.provider_start[q]), int(nt.provider_end[q])
            shows[q] = any(lo <= a and b <= hi for lo, hi in ranges)
    met = np.bincount(owner[(s == _VERBATIM) | shows], minlength=n_pairs) > 0
    spilled = np.bincount(owner[s == _SPILLED], minlength=n_pairs) > 0
    paged = np.bincount(owner[(s == _PAGINATED) & ~shows], minlength=n_pairs) > 0
    reacts = np.array([r[3] for r in runs], dtype=bool)
    unmet = np.flatnonzero(~met)
    unmet = unmet[reacts[nt.run[unmet]]]  # runs that cannot react keep their needs unmet
    # a page read, or a retrieval that may miss, is the loop's to make
    exact = np.array([r[1].retrieval_recall >= 1 for r in runs], dtype=bool)
    defer[nt.run[unmet[paged[unmet] | (spilled[unmet] & ~exact[nt.run[unmet]])]]] = True
    if defer.any():
        unmet = unmet[~defer[nt.run[unmet]]]
    out: list = [
        ((), False, (), (), nt.answers[j]) if r[3] and not defer[j] else None for j, r in enumerate(runs)
    ]  # no unmet need: nothing to do
    if not len(unmet):
        return out
    ur = nt.run[unmet]
    starts = np.flatnonzero(value_starts(ur))
    ends = np.append(starts[1:], len(ur))
    calls = nt.call[unmet]
    one_call = (calls[starts] == calls[ends - 1]) & (  # every unmet need of the run at one call ...
        np.minimum.reduceat(nt.source[unmet], starts) >= 0  # ... and with a source to re-read
    )
    simple = np.zeros(len(runs), dtype=bool)
    simple[ur[starts[one_call]]] = True
    at = simple[ur]
    if at.any():
        _one_call_reactions(runs, st, nt, unmet[at], spilled, out)
    spilled_l = spilled.tolist()
    for lo, hi in zip(starts[~one_call].tolist(), ends[~one_call].tolist(), strict=True):
        j = int(ur[lo])
        trace, model = runs[j][0], runs[j][1]
        p, off = nt.pairs[j], pair_off[j]
        local = (unmet[lo:hi] - off).tolist()
        recovered: set[str] = set()
        walked = _walk(trace, model, p, local, spilled_l[off : pair_off[j + 1]], recovered)
        if walked is None:
            out[j] = None
            continue
        lost = 0
        if local[-1] >= p.answer_from:  # some of the final answer's needs were unmet
            lost = sum(
                1
                for q in local
                if q >= p.answer_from and not spilled_l[off + q] and p.facts[q] not in recovered
            )
        out[j] = (tuple(sorted(recovered)), *walked, nt.answers[j] - lost)
    return out


def _outputs(models: list[ReplayModel]) -> np.ndarray:
    """The models' output tokens for every call, runs laid end to end (kept for the same models: a
    model's script does not change)."""
    return batch_derived(models, "outputs", _read_only_outputs)


def _outputs_top(models: list[ReplayModel]) -> int:
    out = _outputs(models)
    return max(int(out.max()), -int(out.min())) if len(out) else 0


def _read_only_outputs(models: list[ReplayModel]) -> np.ndarray:
    out = concat([m.respond_all() for m in models])
    out.setflags(write=False)
    return out


def _one_call_reactions(runs, st: _Static, nt: _NeedTables, unmet: np.ndarray, spilled, out) -> None:
    """``_reactions_many`` for runs whose unmet needs (``unmet``: global pair ids, by run) all fall on one
    call: each need's ``reactions``, then each run's re-reads, one per source (the first need of a
    source decides its kind), by source, as ``choose_rereads`` makes them. Fills ``out``."""
    ur = nt.run[unmet]
    on_missing = [m.on_missing for _, m, *_ in runs]
    fail = np.array([om == "fail" for om in on_missing], dtype=bool)
    degrade = np.array([om == "degrade" for om in on_missing], dtype=bool)
    sp = spilled[unmet]
    kind = reactions(sp, nt.source_tool[unmet], fail[ur], degrade[ur])
    runs_n = len(runs)
    failed = np.bincount(ur[kind == FAIL], minlength=runs_n) > 0
    degraded = (np.bincount(ur[kind == DEGRADE], minlength=runs_n) > 0).tolist()
    take = kind >= 0  # a re-read row kind
    src = nt.source[unmet][take]
    src, first = np.unique(src, return_index=True)  # global items: in run order, then by source
    picked = np.flatnonzero(take)[first]
    rr = ur[picked]
    outputs = _outputs([m for _, m, *_ in runs])
    call = nt.source_call[unmet[picked]]
    rows = (
        (nt.call[unmet[picked]] - st.call_off[rr]).tolist(),
        kind[picked].tolist(),
        (src - st.item_off[rr]).tolist(),
        nt.source_added[unmet[picked]].tolist(),
        np.where(call >= 0, outputs[np.maximum(call, 0)], 0).tolist(),
    )
    # the final answer's needs that stay lost: not spilled, and no re-read of the run brought them back
    lost = nt.answer[unmet] & ~sp
    if lost.any() and len(src) and st.facts is not None:
        b = st.facts
        is_src = np.zeros(len(st.original), dtype=bool)
        is_src[src] = True
        back = np.zeros(b.n_facts + 1, dtype=bool)  # the last entry stands for "provided by none"
        back[b.fact_of_pair[is_src[b.item_of_pair]]] = True
        lost &= ~back[nt.fact[unmet]]
    lost_n = np.bincount(ur[lost], minlength=runs_n).tolist()
    bounds = rr.searchsorted(np.arange(runs_n + 1)).tolist()
    rereads = list(zip(*rows[:4], strict=True))
    outs = rows[4]
    for j in np.unique(ur).tolist():
        if failed[j]:
            out[j] = None
            continue
        lo, hi = bounds[j], bounds[j + 1]
        events = runs[j][0].events
        recovered = {f for i in rows[2][lo:hi] for f in events[i].provides}
        out[j] = (
            tuple(sorted(recovered)),
            degraded[j],
            tuple(rereads[lo:hi]),
            tuple(outs[lo:hi]),
            nt.answers[j] - lost_n[j],
        )


def _walk(
    trace: Trace, model: ReplayModel, p: NeedPairs, unmet: list[int], spilled: list[bool], recovered: set[str]
):
    """The re-reads for a run's pairs left unmet by its states (local pair ids, ascending): (degraded?,
    re-reads, their calls' output tokens), or None when the model fails; ``recovered`` collects the
    facts re-read."""
    events, calls, facts, source = trace.events, p.calls, p.facts, p.source
    tool = p.source_tool.tolist()
    degraded, rereads, outs, outputs = False, [], [], model.respond_all()
    i, n = 0, len(unmet)
    while i < n:
        k = calls[unmet[i]]
        j = i
        while j < n and calls[unmet[j]] == k:
            j += 1
        missing = ((spilled[q], source[q], tool[q]) for q in unmet[i:j] if facts[q] not in recovered)
        found = choose_rereads(missing, model.on_missing)
        if found is None:
            return None
        sources, worse = found
        degraded |= worse
        for src, kind in sorted(sources.items()):
            added, out = reread_size(trace, src, outputs)
            rereads.append((k, kind, src, added))
            outs.append(out)
            recovered.update(events[src].provides)
        i = j
    return degraded, tuple(rereads), tuple(outs)


# ------------------------------------------------------------------------------------------ the batch
class _Static(NamedTuple):
    """What a batch's columns hold before any policy acts: the same for every replay of the same traces
    in the same order (a sweep replays each chunk of runs under every setting)."""

    ncalls: np.ndarray
    stops: np.ndarray  # items each run admits
    call_off: np.ndarray  # global call id of each run's first call
    item_off: np.ndarray  # global item id of each run's first item
    call_base: np.ndarray  # per global call: its run's first call
    item_base: np.ndarray  # ... and its run's first item
    first_call: np.ndarray  # per global call: is it its run's first
    later_call: np.ndarray  # ... and its negation
    first_calls: np.ndarray  # the global ids of those calls
    run_calls: np.ndarray  # the calls of the runs with calls
    original: np.ndarray  # recorded sizes of every run's items
    prefix: np.ndarray  # their prefix sums over the batch
    view_end: np.ndarray  # per call: its view's end (local item id)
    view_end_global: np.ndarray  # ... as a global item id (non-decreasing over the batch)
    recorded_view: np.ndarray  # per call: its recorded view's size
    prev_items: np.ndarray  # per call: items the previous request of its run held
    local_call: np.ndarray
    residual: np.ndarray
    recorded_input: np.ndarray
    elapsed: np.ndarray
    facts: BatchFacts | None  # the runs' fact tables (None: no fact anywhere)
    facts_seen: list[int]  # per run: distinct facts its admitted items provide
    tokens_seen: list[int]  # ... and their recorded tokens
    kinds_seen: list[list[int]]  # ... and its facts of each kind
    seen: tuple  # (facts_seen, tokens_seen, kinds_seen) as arrays (``sim.information.ledger.totals_columns``)
    column_sums: dict  # call column -> per run, its total, for the columns the traces alone fill
    column_top: int  # the largest magnitude in those columns


def _static(traces: Sequence[Trace]) -> _Static:
    return batch_derived(traces, "fastpath", _build_static)


def _build_static(traces: Sequence[Trace]) -> _Static:
    traces = tuple(traces)
    arrays = [t.arrays for t in traces]
    ncalls = np.array([len(a.view_end) for a in arrays], dtype=np.int64)
    stops = np.array([int(a.view_end[-1]) if len(a.view_end) else 0 for a in arrays], dtype=np.int64)
    stop_list = stops.tolist()
    call_off, item_off = offsets(ncalls), offsets(stops)
    K = int(ncalls.sum())
    call_base = np.repeat(call_off, ncalls)
    item_base = np.repeat(item_off, ncalls)
    first_call = np.zeros(K, dtype=bool)
    first_call[call_off[ncalls > 0]] = True
    original = concat([a.tokens[:s] for a, s in zip(arrays, stop_list, strict=True)])
    prefix = np.zeros(len(original) + 1, dtype=np.int64)
    np.cumsum(original, out=prefix[1:])
    view_end = concat([a.view_end for a in arrays])
    prev_items = np.empty(K, dtype=np.int64)
    prev_items[:1] = 0
    prev_items[1:] = view_end[:-1]
    prev_items[first_call] = 0
    facts = None
    if any(t.derived("provides_any", provides_any)[:s].any() for t, s in zip(traces, stop_list, strict=True)):
        facts = batch_facts([t.derived("fact_index", fact_index) for t in traces], stops)
    static = _Static(
        ncalls,
        stops,
        call_off,
        item_off,
        call_base,
        item_base,
        first_call,
        ~first_call,
        call_off[ncalls > 0],
        ncalls[ncalls > 0],
        original,
        prefix,
        view_end,
        view_end + item_base,
        prefix[view_end + item_base] - prefix[item_base],
        prev_items,
        np.arange(K, dtype=np.int64) - call_base,
        concat([a.residual for a in arrays]),
        concat([a.recorded_input for a in arrays]),
        concat([t.derived("elapsed", elapsed_array) for t in traces], np.float64),
        facts,
        [seen_facts(t, n) for t, n in zip(traces, stop_list, strict=True)],
        (prefix[item_off + stops] - prefix[item_off]).tolist(),
        [seen_kinds(t, n) for t, n in zip(traces, stop_list, strict=True)],
        (),
        {},
        0,
    )
    # without re-read rows, these columns hold what the traces say: their totals and bound are kept
    by_trace = {
        "call": static.local_call,
        "recorded_call": static.local_call,
        "residual_tokens": static.residual,
        "recorded_input_tokens": static.recorded_input,
        "view_items": view_end,
    }
    nonempty = np.flatnonzero(ncalls)
    column_sums = {}
    for name, col in by_trace.items():
        total = np.zeros(len(traces), dtype=np.int64)
        if len(nonempty):
            total[nonempty] = np.add.reduceat(col, call_off[nonempty])
        total.setflags(write=False)
        column_sums[name] = total
    top = max((max(int(c.max()), -int(c.min())) for c in by_trace.values() if len(c)), default=0)
    static = static._replace(
        seen=(
            np.array(static.facts_seen, dtype=np.int64),
            np.array(static.tokens_seen, dtype=np.int64),
            np.array(static.kinds_seen, dtype=np.int64).reshape(len(traces), -1),
        ),
        column_sums=column_sums,
        column_top=top,
    )
    for v in (*static, *static.seen):
        if isinstance(v, np.ndarray):
            v.setflags(write=False)
    return static


class ColumnSums:
    """Each run's total of every call column, a column summed when first asked for (a batch's metrics
    read a few columns, a run's record all of them)."""

    __slots__ = ("_columns", "_rows", "_done", "_by_array")

    def __init__(self, columns: dict[str, np.ndarray], rows: _Rows, done: dict[str, np.ndarray]) -> None:
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


class Batch(NamedTuple):
    """A batch's replay as columns over all its runs (``replay_batch``): what every run's metrics read,
    per run in arrays, and what its record needs (``run_columns`` builds those only when asked)."""

    runs: list[Prepared]
    columns: dict[str, np.ndarray]  # CALL_COLUMNS name -> that column of every run's rows (read-only)
    table: np.ndarray | None  # the same as one block, a row per column, when the replay made it
    rows: _Rows
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
    changes: tuple  # (change parts, call_base, call_off, ncalls, first_row): ``_change_tables``
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
    st = _static(traces)
    ncalls, call_off, item_off = st.ncalls, st.call_off, st.item_off
    call_base = st.call_base
    view_end = st.view_end
    K = len(call_base)
    change_parts = []  # (global call, kind, local index, reclaimed, after): settle-time first
    summaries: list = []  # ``_part_summary`` of the parts known before the plans (kept with them)
    settled = None  # the batch after settle-time changes (None: there are none)
    # each run's settle-time cuts and paginations, as the record's (runs without share one)
    cuts: list = [_NO_CUTS] * len(runs)
    if plain:
        kept = runs.settled
        if kept is not None and kept.columns is not None:
            settled, cuts = kept.columns, kept.cuts
    else:
        flat = [
            (off + ch.index, ch.tokens, ch.state)
            for r, off in zip(runs, item_off.tolist(), strict=True)
            for ch in r.settled
        ]
        if flat:
            settled = _settle_columns(st, *(np.array(c, dtype=np.int64) for c in zip(*flat, strict=True)))
            for j, r in enumerate(runs):
                if r.settled and any(ch.state in POSITIONAL for ch in r.settled):
                    cuts[j] = _settle_cuts(st, j, r.settled)
    if settled is not None:
        tok, states = settled.tok.copy(), settled.states.copy()  # sizes and states, then after the plans
        prefix, view_tokens = settled.prefix, settled.view_tokens
        change_parts.append(settled.part)
        summaries.append(settled.summary)
    else:
        tok, states = st.original.copy(), np.zeros(len(st.original), dtype=np.int8)
        prefix, view_tokens = st.prefix, st.recorded_view

    firsts = nchanged = None  # per call: first item changed (-1: none), and items changed
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
        view_tokens, seam, stable_at = _fold_plans(
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

    zeros = np.zeros(K, dtype=np.int64)  # kind (every call an agent turn) and, without re-reads, status
    cols = {
        "kind": zeros,
        "recorded_call": st.local_call,
        "view_tokens": view_tokens,
        "residual_tokens": st.residual,
        "output_tokens": _outputs(models),
        "recorded_input_tokens": st.recorded_input,
        "view_items": view_end,
        "first_changed": firsts,
        "items_changed": nchanged,
        "stable_prefix_tokens": stable,
    }
    elapsed = st.elapsed
    rereads = None if plain else _batch_rereads(runs, call_off, item_off)
    rows_per_run = ncalls
    first_row = st.local_call  # per global call: the first row (in its run) of its requests
    table = None  # the call table as one block: made here only with re-read rows (else ``batch_table``)
    if rereads is not None:
        table = np.empty((len(CALL_COLUMNS), K + len(rereads[0])), dtype=np.int64)  # a row per column
        out = dict(zip(CALL_COLUMNS, table, strict=True))
        row_call = _insert_rereads(cols, seam, rereads[:5], call_base, out)
        elapsed = elapsed[row_call]
        rows_per_run = ncalls + rereads[5]
        at = np.searchsorted(row_call, np.arange(K, dtype=np.int64))
        first_row = at - offsets(rows_per_run)[np.repeat(np.arange(len(runs)), ncalls)]
        cols = out
        np.maximum(
            cols["input_tokens"], 0, out=cols["input_tokens"]
        )  # as the loop: input >= 0 (sim.cost.cache)
        rows = shape_derived("rows", rows_per_run, _rows)
        cols["call"][:] = rows.local
        cols["status_tokens"][:] = 0
    else:  # the columns as they are (no block: copying each into one costs as much as the arithmetic)
        inputs = cols["view_tokens"] + st.residual
        np.maximum(inputs, 0, out=inputs)  # as the loop: input >= 0 (sim.cost.cache)
        rows = shape_derived("rows", rows_per_run, _rows)
        cols.update(call=rows.local, input_tokens=inputs, status_tokens=zeros)
    split = split_runs(
        rules, price, elapsed, cols["input_tokens"], cols["view_tokens"], cols["stable_prefix_tokens"],
        cols["output_tokens"], rows.base,
    )  # fmt: skip
    if table is not None:
        for name, col in zip(CALL_COLUMNS[-4:], split, strict=True):
            cols[name][:] = col
        _check_sums(table, rows, rows_per_run, traces)
        table.setflags(write=False)
    else:
        cols.update(zip(CALL_COLUMNS[-4:], split, strict=True))
        cols = {name: cols[name] for name in CALL_COLUMNS}
        for col in cols.values():
            col.setflags(write=False)
        if K:  # the columns the traces fill are bounded once per batch; the block only if that fails
            top = {name: st.column_top for name in _TRACE_COLUMNS}  # (their largest, over all of them)
            top["output_tokens"] = batch_derived(models, "outputs_top", _outputs_top)
            measured: dict[int, int] = {}  # id of a column -> its bound (read and write may be one array)
            for name in _MEASURED_COLUMNS:
                col = cols[name]
                if id(col) not in measured:
                    measured[id(col)] = max(int(col.max()), -int(col.min()))
                top[name] = measured[id(col)]
            # input = max(view + residual, 0) and uncached = input - read - write: bounded by theirs
            top["input_tokens"] = top["view_tokens"] + top["residual_tokens"]
            top["uncached_input_tokens"] = (
                top["input_tokens"] + top["cache_read_tokens"] + top["cache_write_tokens"]
            )
            if run_sum_problem(max(top.values()), int(rows_per_run.max())) is not None:
                _check_sums(_stack(cols), rows, rows_per_run, traces)
    tok.setflags(write=False)
    states.setflags(write=False)
    nonempty = rows.nonempty
    peaks = np.zeros(len(runs), dtype=np.int64)
    if len(nonempty):
        peaks[nonempty] = np.maximum.reduceat(cols["input_tokens"], rows.nonempty_off)
    compaction_counts, reclaimed = _compaction_counts(change_parts, call_off, len(runs), K, summaries)
    bounds = np.append(item_off, len(tok))
    shown = (  # only facts read it
        {
            int(item_off[j]) + i: ranges
            for j, cs in enumerate(cuts)
            for _, i, ranges in cs
            if states[int(item_off[j]) + i] in _POSITIONAL_CODES
        }
        if settled is not None and st.facts is not None
        else {}
    )
    only = None  # the plans' part, when it made every change, each item once, in ascending order
    if len(change_parts) == 1 and isinstance(change_parts[0], _PlanPart):
        part = change_parts[0]
        only = part if part.kind is not None and part.ascending else None
    ledger = _ledger(st, tok, states, bounds, _NONE if rereads is None else rereads[2], shown, only)

    if table is None:  # column by column when asked (a 2-D reduceat is slower), the traces' as kept
        zero = np.zeros(len(runs), dtype=np.int64)
        sums = ColumnSums(cols, rows, {**st.column_sums, **dict.fromkeys(_ZERO_COLUMNS, zero)})
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
        runs, cols, table, rows, rows_per_run, sums, peaks, kinds, compaction_counts, reclaimed, growth,
        ledger, states, tok, bounds, (change_parts, call_base, call_off, ncalls, first_row), cuts,
    )  # fmt: skip


def batch_table(b: Batch) -> np.ndarray:
    """The batch's call table as one block, a row per CALL_COLUMNS entry (read-only): a run's record
    reads its slice."""
    return _stack(b.columns) if b.table is None else b.table


def _stack(columns: dict[str, np.ndarray]) -> np.ndarray:
    table = np.empty((len(CALL_COLUMNS), len(columns["call"])), dtype=np.int64)
    for row, name in zip(table, CALL_COLUMNS, strict=True):  # row by row: np.stack is slower
        row[:] = columns[name]
    table.setflags(write=False)
    return table


def run_columns(b: Batch) -> list[RunColumns]:
    """Each run's share of a batch, with its record's tables: one ``RunColumns`` per run."""
    changes_of, compactions_of = _change_tables(*b.changes)
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
                    Columns(CALL_COLUMNS, table[:, row_bounds[j] : row_bounds[j + 1]], _CALL_ROW),
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


def _check_sums(
    table: np.ndarray, rows: _Rows, rows_per_run: np.ndarray, traces: list[Trace], top: int | None = None
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


class _Rows(NamedTuple):
    """A batch's row layout: a function of its rows per run alone (``batchmemo.shape_derived``)."""

    base: np.ndarray  # per row: its run's first row
    local: np.ndarray  # per row: its number within its run
    run: np.ndarray  # per row: its run
    bounds: np.ndarray  # each run's first row, then the number of rows
    bound_list: list[int]
    nonempty: np.ndarray  # the runs with rows
    nonempty_off: np.ndarray  # their first rows


def _rows(rows_per_run: np.ndarray) -> _Rows:
    off = offsets(rows_per_run)
    base = np.repeat(off, rows_per_run)
    bounds = np.append(off, int(rows_per_run.sum()))
    nonempty = np.flatnonzero(rows_per_run)
    rows = _Rows(
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


def _ledger(st: _Static, tok, states, bounds, reread: np.ndarray, shown: dict, only=None) -> tuple:
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


def _fold_plans(
    entries, st: _Static, tok, states, prefix, view_tokens, change_parts, counts=None, promised=(False, None)
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
    d = new - tok[index]
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
    ascending = promised[0] or m < 2 or bool((index[1:] > index[:-1]).all())
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
        below = _changes_below(index, d, starts[at], index[starts[at]], item_base[at], len(tok))
        stable_at = np.zeros(K, dtype=np.int64)
        stable_at[at] = prefix[index[starts[at]]] - prefix[item_base[at]] + below
    tok[index] = new
    one_state = promised[1]
    if one_state is None:
        one_state = int(state[0]) if state.min() == state.max() else None
    states[index] = state if one_state is None else one_state
    kind = -1 if one_state is None or one_state == _VERBATIM else int(KIND_OF_CODE[one_state])
    change_parts.append(
        _PlanPart(call, state, index, d, new, item_base, counts, ends, done, kind, ascending, firsts)
    )
    return view_tokens, seam, stable_at


class _PlanPart:
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
        if self._cols is None:
            c = self.call
            self._cols = (c, KIND_OF_CODE[self.state], self.index - self.item_base[c], -self.d, self.new)
        return self._cols


def _columns(part) -> tuple:
    return part.cols() if isinstance(part, _PlanPart) else part


def _changes_below(index, d, starts, firsts, bases, n) -> np.ndarray:
    """For each seam: the net change its run's entries before ``start`` made to items in [base, first)."""
    fen, out, j = Fenwick(n), [], 0
    index, d = index.tolist(), d.tolist()
    for start, first, base in zip(starts.tolist(), firsts.tolist(), bases.tolist(), strict=True):
        while j < start:
            fen.add(index[j], d[j])
            j += 1
        out.append(fen.query(first) - fen.query(base))
    return np.array(out, dtype=np.int64)


_NONE = np.zeros(0, dtype=np.int64)
_NONE.setflags(write=False)


def _batch_rereads(runs: list[Prepared], call_off: np.ndarray, item_off: np.ndarray):
    """The runs' re-reads laid end to end: (global call, row kind, global item, tokens added, output
    tokens) arrays, by call, and each run's number of them; None when there are none."""
    counts = [len(r.rereads) for r in runs]
    if not any(counts):
        return None
    rows = np.array([x for r in runs for x in r.rereads], dtype=np.int64).reshape(-1, 4).T
    run = owners(counts)
    outputs = np.array([o for r in runs for o in r.reread_outputs], dtype=np.int64)
    return rows[0] + call_off[run], rows[1], rows[2] + item_off[run], rows[3], outputs, np.array(counts)


def _insert_rereads(cols, seam, rereads, call_base, dest: dict[str, np.ndarray]) -> np.ndarray:
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


def _compaction_counts(
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
        summaries = [*known, *(_part_summary(p, call_off, calls) for p in parts[len(known) :])]
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


def _part_summary(part, call_off: np.ndarray, calls: int):
    """(kind, per call: has an entry, per run: tokens reclaimed) of a change part whose entries share
    one compaction kind and ascend by call; None otherwise."""
    if isinstance(part, _PlanPart):
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


def _change_tables(parts, call_base, call_off, ncalls, first_row):
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


_CALL_ROW = {n: i for i, n in enumerate(CALL_COLUMNS)}
# without re-read rows: the columns the traces fill (kept per batch), those that are all 0, and the
# others but cost (bounded per replay)
_TRACE_COLUMNS = ("call", "recorded_call", "residual_tokens", "recorded_input_tokens", "view_items")
_ZERO_COLUMNS = ("kind", "status_tokens")
# ... of which these are bounded by a pass over each (output as kept; input and uncached from others')
_MEASURED_COLUMNS = (
    "view_tokens",
    "first_changed",
    "items_changed",
    "stable_prefix_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
)


def elapsed_array(trace: Trace) -> np.ndarray:
    """Each call's recorded time since the run started (seconds), read-only."""
    a = np.array(trace.derived("per_call", per_call)[1], dtype=np.float64)
    a.setflags(write=False)
    return a
