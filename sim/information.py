"""Where each fact is during a replay: in view, kept by a summary, behind a spill handle, or lost.

A fact is **available** to a request when an item that provides it is in view verbatim or bounded (a
head/tail cut is assumed to keep what the agent used; see DESIGN deviations), or a summary kept it, or
the agent re-read it (refetch / retrieve) earlier in the run. It is **recoverable** when an item that
provides it is spilled: the handle is in view and a retrieval call brings it back. Otherwise it is
**lost** from view (masked, pruned, dropped, or covered by a summary that did not keep it).
"""

from __future__ import annotations

from sim.types import ItemState, Trace

VISIBLE = (ItemState.VERBATIM, ItemState.BOUNDED)


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
            if s in VISIBLE:
                return "view"
            if s == ItemState.SPILLED:
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
