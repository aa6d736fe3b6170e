"""What a batch of runs holds before any policy acts (``BatchStatic``: offsets, recorded sizes and their
prefix sums, per-call tables, the runs' fact tables and what each saw), and the models' output tokens:
the same for every replay of the same traces in the same order, so kept with the batch
(``sim.util.batchmemo``). ``sim.engine.fast.batch`` replays over it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from sim.core.segments import concat, offsets
from sim.core.types import Trace
from sim.engine.common import per_call
from sim.engine.model import ReplayModel
from sim.information.ledger import (
    BatchFacts,
    batch_facts,
    fact_index,
    provides_any,
    seen_facts,
    seen_kinds,
)
from sim.util.batchmemo import batch_derived


class BatchStatic(NamedTuple):
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


def batch_static(traces: Sequence[Trace]) -> BatchStatic:
    return batch_derived(traces, "fastpath", _build_static)


def _build_static(traces: Sequence[Trace]) -> BatchStatic:
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
    static = BatchStatic(
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


def model_outputs(models: list[ReplayModel]) -> np.ndarray:
    """The models' output tokens for every call, runs laid end to end (kept for the same models: a
    model's script does not change)."""
    return batch_derived(models, "outputs", _read_only_outputs)


def outputs_top(models: list[ReplayModel]) -> int:
    out = model_outputs(models)
    return max(int(out.max()), -int(out.min())) if len(out) else 0


def _read_only_outputs(models: list[ReplayModel]) -> np.ndarray:
    out = concat([m.respond_all() for m in models])
    out.setflags(write=False)
    return out


def elapsed_array(trace: Trace) -> np.ndarray:
    """Each call's recorded time since the run started (seconds), read-only."""
    a = np.array(trace.derived("per_call", per_call)[1], dtype=np.float64)
    a.setflags(write=False)
    return a
