"""The mock model's reactions to needed facts that a batch's settled states and plans hide
(``reactions_many``): which (call, fact) needs are unmet is found for every run at once; the runs whose
unmet needs fall on one call are answered together, the others walked call by call. The re-reads it
makes are the per-call loop's (``sim.information.state.choose_rereads``). ``sim.engine.fast.batch``'s
``prepare_many`` asks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from sim.core.segments import concat, offsets, owners, value_starts
from sim.core.types import ItemState, Trace
from sim.engine.fast.batch_static import BatchStatic, batch_static, model_outputs
from sim.engine.model import ReplayModel
from sim.information.ledger import (
    fact_index,
)
from sim.information.state import (
    DEGRADE,
    FAIL,
    POSITIONAL,
    NeedPairs,
    choose_rereads,
    need_pairs,
    reactions,
    reread_size,
    shown_ranges,
)
from sim.policies.base import Plans
from sim.util.batchmemo import batch_derived

_VERBATIM, _BOUNDED, _SPILLED = int(ItemState.VERBATIM), int(ItemState.BOUNDED), int(ItemState.SPILLED)
_PAGINATED = int(ItemState.PAGINATED)


def _positional(states: np.ndarray) -> np.ndarray:
    """Which of the state codes show part of an item's bytes (cheaper than np.isin on two codes)."""
    return (states == _BOUNDED) | (states == _PAGINATED)


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
    st = batch_static(traces)
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


def reactions_many(traces: Sequence[Trace], runs: list, plans: Plans | None) -> list:
    """What the mock model does about needed facts the settled states and plans hide, for runs laid end
    to end: per run (facts re-read, degraded?, re-reads, their output tokens, needs of the final answer
    met, facts needed while lost from view), or None when it fails the run. Which needs are unmet
    ignoring re-reads is found for every (call, fact) pair at once: a pair is met when one of the fact's
    providers in its call's view is visible at that call, i.e. in the state of the last plan entry for
    that item at or before the call (or its settled state). A re-read makes its facts available from
    then on, so runs whose unmet needs span several calls are walked call by call (``_walk``); where
    they all fall on one call, no re-read can come before them, and the runs are answered together
    (``_one_call_reactions``)."""
    st, nt = batch_static(traces), batch_derived(traces, "needs", _need_tables)
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
        ((), False, (), (), nt.answers[j], ()) if r[3] and not defer[j] else None for j, r in enumerate(runs)
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
        needed_lost: set[str] = set()
        walked = _walk(trace, model, p, local, spilled_l[off : pair_off[j + 1]], recovered, needed_lost)
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
        out[j] = (tuple(sorted(recovered)), *walked, nt.answers[j] - lost, tuple(sorted(needed_lost)))
    return out


def _one_call_reactions(runs, st: BatchStatic, nt: _NeedTables, unmet: np.ndarray, spilled, out) -> None:
    """``reactions_many`` for runs whose unmet needs (``unmet``: global pair ids, by run) all fall on one
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
    outputs = model_outputs([m for _, m, *_ in runs])
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
    # the facts needed while lost from view: every unmet need not behind a spill handle (no re-read
    # comes before the run's one call)
    needed_lost: dict[int, set[str]] = {}
    gone = unmet[~sp]
    for q, j in zip(gone.tolist(), nt.run[gone].tolist(), strict=True):
        needed_lost.setdefault(j, set()).add(nt.pairs[j].facts[q - nt.pair_off[j]])
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
            tuple(sorted(needed_lost.get(j, ()))),
        )


def _walk(
    trace: Trace,
    model: ReplayModel,
    p: NeedPairs,
    unmet: list[int],
    spilled: list[bool],
    recovered: set[str],
    needed_lost: set[str],
):
    """The re-reads for a run's pairs left unmet by its states (local pair ids, ascending): (degraded?,
    re-reads, their calls' output tokens), or None when the model fails; ``recovered`` collects the
    facts re-read, ``needed_lost`` those needed while lost from view (not spilled, not re-read before)."""
    events, calls, facts, source = trace.events, p.calls, p.facts, p.source
    tool = p.source_tool.tolist()
    degraded, rereads, outs, outputs = False, [], [], model.respond_all()
    i, n = 0, len(unmet)
    while i < n:
        k = calls[unmet[i]]
        j = i
        while j < n and calls[unmet[j]] == k:
            j += 1
        missing = [(spilled[q], source[q], tool[q]) for q in unmet[i:j] if facts[q] not in recovered]
        needed_lost.update(facts[q] for q in unmet[i:j] if not spilled[q] and facts[q] not in recovered)
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
