"""Arrays of many runs laid end to end, each run a segment: the few questions the batch code asks of
them again and again (where a segment starts, which segment an element is in, its place there, where
a new value begins), answered in one place."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def offsets(sizes: Sequence[int] | np.ndarray) -> np.ndarray:
    """Where each segment starts, from the segments' sizes."""
    a = np.asarray(sizes, dtype=np.int64)
    return np.cumsum(a) - a


def owners(sizes: Sequence[int] | np.ndarray) -> np.ndarray:
    """The segment of each element."""
    return np.repeat(np.arange(len(sizes)), sizes)


def positions(sizes: Sequence[int] | np.ndarray) -> np.ndarray:
    """Each element's place within its segment."""
    sizes = np.asarray(sizes, dtype=np.int64)
    return np.arange(int(sizes.sum())) - np.repeat(offsets(sizes), sizes)


def value_starts(values: np.ndarray) -> np.ndarray:
    """Where a new value begins, in values whose equal entries are adjacent (the first always does)."""
    out = np.empty(len(values), dtype=bool)
    out[:1] = True
    np.not_equal(values[1:], values[:-1], out=out[1:])
    return out


def value_ends(values: np.ndarray) -> np.ndarray:
    """Where a value ends, in values whose equal entries are adjacent (the last always does)."""
    out = np.empty(len(values), dtype=bool)
    out[-1:] = True
    np.not_equal(values[:-1], values[1:], out=out[:-1])
    return out


def concat(parts: Sequence[np.ndarray], dtype=np.int64) -> np.ndarray:
    """The parts laid end to end (an empty array of ``dtype`` for no parts)."""
    return np.concatenate(parts) if len(parts) else np.zeros(0, dtype=dtype)
