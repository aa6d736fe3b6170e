"""Data derived from a batch of traces, or from a batch's shape, remembered for the next replay.

``Trace.derived`` keeps what one trace determines; this keeps what a batch of traces in a given order
determines (offsets of runs laid end to end, their arrays concatenated), so a sweep, which replays each
chunk of runs under every setting, builds it once per chunk. Entries hold what the builders return
(arrays, never the traces): the traces are referenced weakly, and a hit checks they are still the same
objects, so ids reused by new traces never match and streaming a corpus keeps memory bound.

``shape_derived`` keeps what a batch's shape alone determines (e.g. its rows per run): replays of the
same runs under settings that add no rows, or under the same setting again, share it.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from sim.types import Trace

KEEP = 8  # batches remembered, least recently used dropped first

_BATCHES: OrderedDict[tuple[int, ...], tuple[tuple[weakref.ref, ...], dict[str, Any]]] = OrderedDict()


def batch_derived(traces: Sequence[Trace], key: str, build: Callable[[Sequence[Trace]], Any]) -> Any:
    """``build(traces)``, computed once per batch (the same trace objects in the same order) and key."""
    ids = tuple(map(id, traces))
    hit = _BATCHES.get(ids)
    if hit is None or not all(ref() is t for ref, t in zip(hit[0], traces, strict=True)):
        hit = _BATCHES[ids] = (tuple(weakref.ref(t) for t in traces), {})
        while len(_BATCHES) > KEEP:
            _BATCHES.popitem(last=False)
    else:
        _BATCHES.move_to_end(ids)
    store = hit[1]
    value = store.get(key)
    if value is None:
        value = store[key] = build(traces)
    return value


def remembered() -> int:
    """Batches currently remembered."""
    return len(_BATCHES)


SHAPES_KEEP = 64
_SHAPES: OrderedDict[tuple[str, bytes], Any] = OrderedDict()


def shape_derived(key: str, shape: np.ndarray, build: Callable[[np.ndarray], Any]) -> Any:
    """``build(shape)``, computed once per key and equal ``shape`` array (integer sizes of a batch)."""
    k = (key, shape.tobytes())
    if k in _SHAPES:
        _SHAPES.move_to_end(k)
        return _SHAPES[k]
    value = _SHAPES[k] = build(shape)
    while len(_SHAPES) > SHAPES_KEEP:
        _SHAPES.popitem(last=False)
    return value
