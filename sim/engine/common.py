"""Pieces the reference loop (``sim.engine.dispatch``) and the fast paths (``sim.engine.fast``) share.

They sit below both so that the reference replay imports nothing from a fast path."""

from __future__ import annotations

from sim.core.types import Trace


class Fenwick:
    """Prefix sums of per-item size changes, O(log n) per update and query."""

    __slots__ = ("tree",)

    def __init__(self, n: int) -> None:
        self.tree = [0] * (n + 1)

    def add(self, i: int, d: int) -> None:
        i += 1
        tree = self.tree
        while i < len(tree):
            tree[i] += d
            i += i & -i

    def query(self, i: int) -> int:
        """Sum over items [0, i)."""
        s, tree = 0, self.tree
        while i > 0:
            s += tree[i]
            i -= i & -i
        return s


def per_call(trace: Trace) -> tuple[list[int], list[float]]:
    """Tool calls each recorded call issued, and its recorded time since the run started (seconds)."""
    tool_calls = [len(trace.events[c.event_index].tool_call_ids) for c in trace.calls]
    stamps = [e.timestamp for e in trace.events if e.timestamp is not None]
    stamps += [c.timestamp for c in trace.calls if c.timestamp is not None]
    start = min(stamps) if stamps else None
    elapsed, last = [], 0.0
    for c in trace.calls:
        if c.timestamp is not None and start is not None:
            last = c.timestamp - start
        elapsed.append(last)
    return tool_calls, elapsed
