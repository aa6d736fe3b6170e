"""Data derived from a batch of traces, or from a batch's shape, remembered for the next replay.

``Trace.derived`` keeps what one trace determines; this keeps what a batch of traces in a given order
determines (offsets of runs laid end to end, their arrays concatenated), so a sweep, which replays each
chunk of runs under every setting, builds it once per chunk. Entries hold what the builders return
(arrays, never the traces): the traces are referenced weakly and an entry is dropped as soon as one of
its traces is, so ids reused by new traces never match and streaming a corpus keeps memory bound.

``shape_derived`` keeps what a batch's shape alone determines (e.g. its rows per run): replays of the
same runs under settings that add no rows, or under the same setting again, share it.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np

KEEP = 8  # batches remembered, least recently used dropped first


class BatchKey:
    """The ids of a batch's objects in order, hashed once (a lookup then costs no pass over the ids)."""

    __slots__ = ("ids", "_hash")

    def __init__(self, objects: Sequence[Any]) -> None:
        self.ids = tuple(map(id, objects))
        self._hash = hash(self.ids)

    @classmethod
    def derived(cls, tag: str, base: BatchKey) -> BatchKey:
        """The key of the batch of objects ``tag`` names, made one for one from ``base``'s (a trace
        batch's default replay models): its hash and comparisons read no id of theirs. Sound while each
        such object holds its source (an id is not reused while its entry lives) and is the same for the
        same source."""
        key = cls.__new__(cls)
        key.ids = (tag, base)  # never equal to a key of ids (a tuple of ints)
        key._hash = hash(key.ids)
        return key

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return self is other or (isinstance(other, BatchKey) and self.ids == other.ids)


class Keyed(tuple):
    """A batch's objects, in order, with their ``BatchKey`` made once: a replay asks the memory for the
    same batch several times, and each ask would otherwise read every object's id (a tuple: the key
    stays true)."""

    def __new__(cls, objects, key: BatchKey | None = None):
        self = super().__new__(cls, objects)
        self.key = BatchKey(self) if key is None else key
        return self

    def __reduce__(self):
        return Keyed, (tuple(self),)  # a copy or an unpickled one keys its own objects, never these ids


_BATCHES: OrderedDict[BatchKey, tuple[tuple[weakref.ref, ...], dict[str, Any], BatchKey]] = OrderedDict()


def batch_derived(traces: Sequence[Any], key: str, build: Callable[[Sequence[Any]], Any]) -> Any:
    """``build(traces)``, computed once per batch (the same objects in the same order: traces, or other
    immutable per-run objects such as default replay models) and key."""
    keyed = type(traces) is Keyed
    ids = traces.key if keyed else BatchKey(traces)
    hit = _BATCHES.get(ids)
    if hit is None:
        # when any of the objects goes, its batch goes with it: an id is never reused while the entry
        # holding it lives, so a hit needs no identity check
        drop = partial(_drop, ids)
        hit = _BATCHES[ids] = (tuple(weakref.ref(t, drop) for t in traces), {}, ids)
        while len(_BATCHES) > KEEP:
            _BATCHES.popitem(last=False)
    else:
        _BATCHES.move_to_end(ids)
        if keyed:  # the batch's next asks find the entry's own key: the dict then compares no ids
            traces.key = hit[2]
    store = hit[1]
    value = store.get(key)
    if value is None:
        value = store[key] = build(traces)
    return value


def _drop(ids: BatchKey, _ref: weakref.ref, batches: OrderedDict = _BATCHES) -> None:
    batches.pop(ids, None)  # the dict bound here: callbacks may run while the module is torn down


def remembered() -> int:
    """Batches currently remembered."""
    return len(_BATCHES)


SHAPES_KEEP = 16
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
