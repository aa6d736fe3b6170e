"""The AutoGen model contexts' messages as arrays of many runs laid end to end: what their planners
(``AutogenBuffered.plan_many``, ``AutogenHeadAndTail.plan_many``, ``AutogenTokenLimited.plan_many``) read.

Each context rebuilds the request from the full history at every call, so its decisions are functions of
the messages in view (their number, kinds and recorded sizes): the same tables serve every setting of a
sizing, made once per trace (``trace.derived``) and once per batch (``batch_derived``). The messages are
``strands_sliding_window.Turns`` (a turn's consecutive results are one message); ``MemberTable`` lays
their events end to end."""

from __future__ import annotations

from collections.abc import Sequence
from heapq import heappop, heappush
from typing import NamedTuple

import numpy as np

from sim.core.segments import concat, offsets, owners
from sim.core.types import Trace
from sim.policies.strands_sliding_window import frame, turns

NO_GROUP = -1


class Messages(NamedTuple):
    """One trace's messages as arrays (``messages``; read-only)."""

    count: np.ndarray  # per call: messages in its view
    start: np.ndarray  # per message position k (and one past the last): where message k starts in ``flat``
    flat: np.ndarray  # every message's events, message after message (ascending)
    result: np.ndarray  # per message: its first event is a tool result
    calls: np.ndarray  # per message: its first event issues tool calls
    prefix: np.ndarray  # per message position: the recorded tokens of the messages before it
    group: np.ndarray  # per ``flat`` entry: its call/result group (the issuing event), NO_GROUP if alone
    cross: np.ndarray  # per message boundary X: the first message >= X holding the result of a pair
    # whose call lies before X (a pair split by a cut at X, once that message is in view); past the end: none


def _messages(trace: Trace) -> Messages:
    from sim.policies.autogen_token_limited import member_table

    t, f, table, events = turns(trace), frame(trace), member_table(trace), trace.events
    n = len(t.first)
    msg_of = {}  # event -> its message position
    for k, m in enumerate(t.first):
        for i in t.members[m]:
            msg_of[i] = k
    group = [f.group[i][0] if i in f.group else NO_GROUP for i in table.flat]
    # cross[X]: min message of a result r over pairs (a, r) with msg(a) < X <= msg(r) (a heap sweep)
    pairs = sorted((msg_of[a], msg_of[r]) for r, a in f.issuer.items())
    cross, heap, p = [], [], 0
    for x in range(n + 1):
        while p < len(pairs) and pairs[p][0] < x:
            heappush(heap, pairs[p][1])
            p += 1
        while heap and heap[0] < x:
            heappop(heap)
        cross.append(heap[0] if heap else n + 1)
    out = Messages(
        np.searchsorted(np.asarray(t.first, dtype=np.int64), trace.arrays.view_end),
        np.asarray(table.start, dtype=np.int64),
        np.asarray(table.flat, dtype=np.int64),
        np.array([events[m].kind == "tool_result" for m in t.first], dtype=bool),
        np.array([bool(events[m].tool_call_ids) for m in t.first], dtype=bool),
        np.asarray(t.prefix, dtype=np.int64),
        np.asarray(group, dtype=np.int64),
        np.asarray(cross, dtype=np.int64),
    )
    for v in out:
        v.setflags(write=False)
    return out


def messages(trace: Trace) -> Messages:
    return trace.derived("autogen_plan_messages", _messages)


class Batch(NamedTuple):
    """``Messages`` of many runs laid end to end. Positions (``count``, ``start`` entries) stay local to
    their run; ``*_off`` say where each run's rows start in the laid-out arrays."""

    n_runs: int
    n_msgs: np.ndarray  # per run
    n_calls: np.ndarray  # per run
    call_run: np.ndarray  # per call: its run
    local_call: np.ndarray  # per call: its number within its run
    first_call: np.ndarray  # per run: its first call's row (its calls: [first_call, first_call + n_calls))
    count: np.ndarray  # per call: messages in its view
    msg_off: np.ndarray  # per run: where its messages start in ``result`` / ``calls`` / ``prefix``
    start_off: np.ndarray  # per run: where its rows of ``start`` (messages + 1) start
    flat_off: np.ndarray  # per run: where its events start in ``flat`` / ``group``
    start: np.ndarray  # global positions in ``flat`` (each run's local ``start`` + its flat_off)
    flat: np.ndarray  # local event indices
    result: np.ndarray
    calls: np.ndarray
    prefix: np.ndarray  # per run messages + 1 rows (at ``start_off``)
    group: np.ndarray
    cross: np.ndarray  # per run messages + 1 rows (at ``start_off``)
    event_prefix: np.ndarray  # per call: recorded tokens of events [0, view_end) (the whole request's)
    residual: np.ndarray  # per call: its recorded residual tokens


def _batch(traces: Sequence[Trace]) -> Batch:
    ms = [messages(t) for t in traces]
    n_msgs = np.array([len(m.result) for m in ms], dtype=np.int64)
    n_calls = np.array([len(m.count) for m in ms], dtype=np.int64)
    n_flat = np.array([len(m.flat) for m in ms], dtype=np.int64)
    flat_off = offsets(n_flat)
    start_off = offsets(n_msgs + 1)
    call_run = owners(n_calls)
    first_call = offsets(n_calls)
    start = concat([m.start for m in ms]) + np.repeat(flat_off, n_msgs + 1)
    arrays = [t.arrays for t in traces]
    event_prefix = concat([a.prefix[a.view_end] for a in arrays])
    out = Batch(
        len(traces),
        n_msgs,
        n_calls,
        call_run,
        np.arange(int(n_calls.sum()), dtype=np.int64) - first_call[call_run],
        first_call,
        concat([m.count for m in ms]),
        offsets(n_msgs),
        start_off,
        flat_off,
        start,
        concat([m.flat for m in ms]),
        concat([m.result for m in ms], bool),
        concat([m.calls for m in ms], bool),
        concat([m.prefix for m in ms]),
        concat([m.group for m in ms]),
        concat([m.cross for m in ms]),
        event_prefix,
        concat([a.residual for a in arrays]),
    )
    for v in out[1:]:
        v.setflags(write=False)
    return out


def batch(traces: Sequence[Trace]) -> Batch:
    from sim.util.batchmemo import batch_derived

    return batch_derived(traces, "autogen_plan_batch", _batch)


def previous_in_run(values: np.ndarray, b: Batch, first: np.ndarray | int) -> np.ndarray:
    """Per call: ``values`` of the call before it in its run; ``first`` (per run, or one value) at each
    run's first call."""
    out = np.empty_like(values)
    out[1:] = values[:-1]
    has = b.n_calls > 0
    firsts = b.first_call[has]
    out[firsts] = first[has] if isinstance(first, np.ndarray) else first
    return out


def running_max(values: np.ndarray, b: Batch, lift: int) -> np.ndarray:
    """Per call: the maximum of ``values`` (each in [0, lift)) over its run's calls so far."""
    lifted = values + b.call_run * lift
    np.maximum.accumulate(lifted, out=lifted)
    lifted -= b.call_run * lift
    return lifted


def ranges(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The integers of every [lo[j], hi[j]) laid end to end (hi >= lo)."""
    sizes = hi - lo
    total = int(sizes.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    return np.arange(total, dtype=np.int64) + np.repeat(lo - offsets(sizes), sizes)
