"""Where each fact is during a replay: in view, kept by a summary, behind a spill handle, or lost.

A fact is **available** to a request when an item that provides it is in view verbatim or bounded (a
head/tail cut is assumed to keep what the agent used; see DESIGN deviations), or a summary kept it, or
the agent re-read it (refetch / retrieve) earlier in the run. It is **recoverable** when an item that
provides it is spilled: the handle is in view and a retrieval call brings it back. Otherwise it is
**lost** from view (masked, pruned, dropped, or covered by a summary that did not keep it).
"""

from __future__ import annotations

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
    sources: dict[int, int] = {}
    degraded = False
    for f in needs:
        where = facts.where(f, states, n)
        if where == "spilled":
            sources.setdefault(facts.source(f, n), RETRIEVE)
        elif where == "lost":
            if on_missing == "fail":
                return None
            src = facts.source(f, n)
            if on_missing == "degrade" or events[src].kind != "tool_result":
                degraded = True  # nothing to re-run (a user's words, a summary's input): go on without
                continue
            sources.setdefault(src, REFETCH)
    return sources, degraded


def reread_size(trace: Trace, src: int, outputs: list[int]) -> tuple[int, int]:
    """(tokens added to the conversation, output tokens of the re-read call) for re-reading event src:
    the agent re-issues the call that produced it (or reads its spill handle), whose result then stays."""
    issuer = trace.derived("issuers", issuer_of).get(src, src)
    calls = trace.derived("call_of_event", call_of_event)
    out = outputs[calls[issuer]] if issuer in calls else 0
    original = trace.arrays.tokens
    added = int(original[issuer]) + int(original[src]) if issuer != src else int(original[src])
    return added, out


def call_of_event(trace: Trace) -> dict[int, int]:
    """Event index of each recorded call's assistant turn -> the call."""
    return {c.event_index: c.index for c in trace.calls}
