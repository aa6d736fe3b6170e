"""A Fenwick tree: counts kept so that a join over a span of records costs a logarithm, not a scan."""

from __future__ import annotations

from collections.abc import Sequence


class Fenwick:
    """Counts at positions ``0 .. n-1`` (a Fenwick tree): add to one, sum a range, find the position of
    the ``k``-th unit, each in a logarithm of ``n``. For joins that would otherwise scan a span of
    records for every record (issue 41: importers stay linear in their input)."""

    def __init__(self, values: Sequence[int]) -> None:
        n = len(values)
        tree = [0] * (n + 1)
        for i, v in enumerate(values, 1):  # linear: each node adds itself to its parent once complete
            tree[i] += v
            j = i + (i & -i)
            if j <= n:
                tree[j] += tree[i]
        self.n, self.tree = n, tree

    def add(self, p: int, d: int) -> None:
        p += 1
        while p <= self.n:
            self.tree[p] += d
            p += p & -p

    def prefix(self, p: int) -> int:
        """The sum of positions ``0 .. p-1``."""
        total = 0
        while p > 0:
            total += self.tree[p]
            p -= p & -p
        return total

    def find(self, k: int) -> int:
        """The position of the ``k``-th unit (from 0) when every count is 0 or 1; ``n`` if there are fewer."""
        pos, left, step = 0, k + 1, 1 << self.n.bit_length()
        while step:
            if pos + step <= self.n and self.tree[pos + step] < left:
                pos += step
                left -= self.tree[pos]
            step >>= 1
        return pos
