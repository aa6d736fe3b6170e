"""Where each fact is during a replay: in view, kept by a summary, behind a spill handle, or lost.

A fact is **available** to a request when an item that provides it is in view verbatim or bounded (a
head/tail cut is assumed to keep what the agent used; see DESIGN deviations), or a summary kept it, or
the agent re-read it (refetch / retrieve) earlier in the run. It is **recoverable** when an item that
provides it is spilled: the handle is in view and a retrieval call brings it back. Otherwise it is
**lost** from view (masked, pruned, dropped, or covered by a summary that did not keep it).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple

import numpy as np

from sim.records import REFETCH, RETRIEVE
from sim.types import ItemState, Trace

VISIBLE = (ItemState.VERBATIM, ItemState.BOUNDED)
_VISIBLE = frozenset(int(s) for s in VISIBLE)  # plain ints: enum member lookups are slow in hot loops
_SPILLED = int(ItemState.SPILLED)


def providers(trace: Trace) -> dict[str, list[int]]:
    """Fact -> indices of the events that provide it, ascending."""
    out: dict[str, list[int]] = {}
    for e in trace.events:
        for f in e.provides:
            out.setdefault(f, []).append(e.index)
    return out


def last_need(trace: Trace) -> dict[str, int]:
    """Fact -> index of the last event that needs it (so: still needed after position p iff >= p)."""
    out: dict[str, int] = {}
    for e in trace.events:
        for f in e.needs:
            out[f] = e.index
    return out


def issuer_of(trace: Trace) -> dict[int, int]:
    """tool_result index -> the assistant event that issued its call (by tool call id)."""
    by_id: dict[str, int] = {}
    out: dict[int, int] = {}
    for e in trace.events:
        for cid in e.tool_call_ids:
            by_id[cid] = e.index
        if e.tool_call_id is not None and e.tool_call_id in by_id:
            out[e.index] = by_id[e.tool_call_id]
    return out


def has_needs(trace: Trace) -> bool:
    return any(e.needs for e in trace.events)


class FactState:
    """Per-run availability of facts; the engine updates it as items change and facts are re-read."""

    __slots__ = ("providers", "kept", "recovered")

    def __init__(self, trace: Trace) -> None:
        self.providers = trace.derived("fact_providers", providers)
        self.kept: set[str] = set()  # facts the current summary holds
        self.recovered: set[str] = set()  # facts re-read into the view by refetch or retrieval

    def where(self, fact: str, state: list[int], n: int) -> str:
        """'view', 'summary', 'recovered', 'spilled' or 'lost' for a request holding items [0, n)."""
        spilled = False
        for i in self.providers.get(fact, ()):
            if i >= n:
                break
            s = state[i]
            if s in _VISIBLE:
                return "view"
            if s == _SPILLED:
                spilled = True
        if fact in self.kept:
            return "summary"
        if fact in self.recovered:
            return "recovered"
        return "spilled" if spilled else "lost"

    def source(self, fact: str, n: int) -> int | None:
        """The newest event before n that provides the fact: what a refetch re-runs."""
        best = None
        for i in self.providers.get(fact, ()):
            if i < n:
                best = i
        return best


def missing_sources(facts, events, needs, states, n, on_missing) -> tuple[dict[int, int], bool] | None:
    """For an action needing ``needs`` with items [0, n) in ``states``: the events to re-read (event ->
    row kind, refetch or retrieve) and whether it goes ahead without some fact; None: the model fails."""
    if not needs:  # most actions need no fact
        return {}, False
    return choose_rereads(_missing(facts, needs, states, n), events, on_missing)


def _missing(facts: FactState, needs, states, n) -> Iterator[tuple[bool, int | None]]:
    for f in needs:
        where = facts.where(f, states, n)
        if where == "spilled" or where == "lost":
            yield where == "spilled", facts.source(f, n)


FAIL, DEGRADE = -1, -2  # reactions besides the re-read row kinds REFETCH and RETRIEVE


def reaction(spilled: bool, tool_source: bool, on_missing: str) -> int:
    """The mock model's answer to one needed fact missing from view: RETRIEVE it through its spill
    handle; or, lost, FAIL the run (``on_missing=fail``), DEGRADE (go on without it: told to, or
    nothing to re-run, e.g. a user's words or a summary's input), or REFETCH (re-run the tool call)."""
    if spilled:
        return RETRIEVE
    if on_missing == "fail":
        return FAIL
    if on_missing == "degrade" or not tool_source:
        return DEGRADE
    return REFETCH


def reactions(
    spilled: np.ndarray, tool_source: np.ndarray, fail: np.ndarray, degrade: np.ndarray
) -> np.ndarray:
    """``reaction`` of many needs at once (``fail`` / ``degrade``: whether each need's model has
    on_missing fail / degrade)."""
    return np.where(
        spilled, RETRIEVE, np.where(fail, FAIL, np.where(degrade | ~tool_source, DEGRADE, REFETCH))
    )


def choose_rereads(
    missing: Iterable[tuple[bool, int | None]], events, on_missing: str
) -> tuple[dict[int, int], bool] | None:
    """What the mock model does about an action's needed facts that are neither in view, in the summary
    nor re-read before: ``missing`` gives (spilled?, newest provider in view) of each, in need order.
    Returns (event to re-read -> row kind, went ahead without a fact?), or None: the model fails. A
    source needed twice is re-read once, as the first need asked."""
    sources: dict[int, int] = {}
    degraded = False
    for spilled, src in missing:
        r = reaction(spilled, src is not None and events[src].kind == "tool_result", on_missing)
        if r == FAIL:
            return None
        if r == DEGRADE:
            degraded = True
        else:
            sources.setdefault(src, r)  # type: ignore[arg-type]
    return sources, degraded


class NeedPairs(NamedTuple):
    """A trace's (call, needed fact) pairs in call order, each with the fact's providers in that call's
    view: what a batch needs to find, for all calls at once, the needs a policy's states leave unmet."""

    calls: tuple[int, ...]  # per pair: the call whose action needs the fact
    facts: tuple[str, ...]  # per pair: the fact
    source: tuple[int | None, ...]  # per pair: its newest provider in view (what a refetch re-runs)
    call: np.ndarray  # ``calls`` as an array
    provider: np.ndarray  # the pairs' providers in view, pair after pair, ascending within a pair
    pair_of_provider: np.ndarray  # the pair each of those belongs to
    answer_from: int  # the first pair of the last call: the final answer's needs
    source_item: np.ndarray  # ``source`` as an array (-1: none)
    source_tool: np.ndarray  # per pair: its source is a tool result (something to re-run)
    source_added: np.ndarray  # per pair: tokens a re-read of its source adds (``reread_cost``)
    source_call: np.ndarray  # ... and the call it re-issues (-1: none)


def need_pairs(trace: Trace) -> NeedPairs:
    provs = trace.derived("fact_providers", providers)
    ends = trace.arrays.view_end.tolist()
    events = trace.events
    call: list[int] = []
    facts: list[str] = []
    source: list[int | None] = []
    provider: list[int] = []
    owner: list[int] = []
    answer_from = 0
    for c in trace.calls:
        answer_from = len(call)  # ends as the last call's first pair
        n = ends[c.index]
        for f in events[c.event_index].needs:
            newest = None
            for i in provs.get(f, ()):
                if i >= n:
                    break
                provider.append(i)
                owner.append(len(call))
                newest = i
            call.append(c.index)
            facts.append(f)
            source.append(newest)
    costs = [(0, -1) if i is None else reread_cost(trace, i) for i in source]
    arrays = [
        np.array(v, dtype=dtype)
        for v, dtype in (
            (call, np.int64),
            (provider, np.int64),
            (owner, np.int64),
            ([-1 if i is None else i for i in source], np.int64),
            ([i is not None and events[i].kind == "tool_result" for i in source], bool),
            ([a for a, _ in costs], np.int64),
            ([k for _, k in costs], np.int64),
        )
    ]
    for v in arrays:
        v.setflags(write=False)
    return NeedPairs(tuple(call), tuple(facts), tuple(source), *arrays[:3], answer_from, *arrays[3:])


def reread_cost(trace: Trace, src: int) -> tuple[int, int]:
    """(tokens a re-read of event src adds to the conversation, the recorded call it re-issues, -1:
    none): the agent re-issues the call that produced it (or reads its spill handle), whose result then
    stays."""
    known = trace.derived("reread_sizes", _no_sizes)  # filled as re-reads of this trace's events come up
    hit = known.get(src)
    if hit is None:
        issuer = trace.derived("issuers", issuer_of).get(src, src)
        original = trace.arrays.tokens
        added = int(original[issuer]) + int(original[src]) if issuer != src else int(original[src])
        hit = known[src] = (added, trace.derived("call_of_event", call_of_event).get(issuer, -1))
    return hit


def reread_size(trace: Trace, src: int, outputs: Sequence[int] | np.ndarray) -> tuple[int, int]:
    """(tokens added to the conversation, output tokens of the re-read call) for re-reading event src."""
    added, call = reread_cost(trace, src)
    return added, (int(outputs[call]) if call >= 0 else 0)


def _no_sizes(trace: Trace) -> dict[int, tuple[int, int]]:
    return {}


def call_of_event(trace: Trace) -> dict[int, int]:
    """Event index of each recorded call's assistant turn -> the call."""
    return {c.event_index: c.index for c in trace.calls}
