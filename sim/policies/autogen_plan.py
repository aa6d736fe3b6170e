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
from itertools import accumulate, chain
from typing import NamedTuple

import numpy as np

from sim.core.segments import concat, offsets, owners
from sim.core.types import KIND_CODE, Trace
from sim.policies.strands_sliding_window import frame, turns

NO_GROUP = -1


class MemberTable:
    """A trace's messages (``Turns``) as flat tables, made once per trace for the policies that walk
    every message in view at every call: ``flat`` every message's events laid end to end in message order,
    ``start[k]`` where message k's start (``flat[:start[n]]``: the events of the first n messages),
    ``members[k]`` message k's events; ``results``/``issuers`` the paired tool results ascending and the
    assistant event that issued each (``Frame.issuer`` in order)."""

    __slots__ = ("flat", "start", "members", "results", "issuers")

    def __init__(self, trace: Trace) -> None:
        t, f = turns(trace), frame(trace)
        self.members = [t.members[m] for m in t.first]
        self.flat = list(chain.from_iterable(self.members))
        self.start = [0, *accumulate(map(len, self.members))]
        pairs = sorted(f.issuer.items())
        self.results = [r for r, _ in pairs]
        self.issuers = [a for _, a in pairs]


def member_table(trace: Trace) -> MemberTable:
    return trace.derived("autogen_member_table", MemberTable)


class Messages(NamedTuple):
    """One trace's messages as arrays (``messages``; read-only)."""

    count: np.ndarray  # per call: messages in its view
    start: np.ndarray  # per message position k (and one past the last): where message k starts in ``flat``
    flat: np.ndarray  # every message's events, message after message (ascending)
    result: np.ndarray  # per message: its first event is a tool result
    calls: np.ndarray  # per message: its first event issues tool calls
    prefix: np.ndarray  # per message position: the recorded tokens of the messages before it
    group: np.ndarray  # per ``flat`` entry: its call/result group (the issuing event), NO_GROUP if alone
    tokens: np.ndarray  # per ``flat`` entry: its event's recorded tokens
    long_pairs: bool  # some call and its result lie more than one message apart
    cross: np.ndarray  # per message boundary X: the first message >= X holding the result of a pair
    # whose call lies before X (a pair split by a cut at X, once that message is in view); past the end: none


_KIND = {k: KIND_CODE[k] for k in ("system", "tools", "assistant", "tool_result")}


def _messages(trace: Trace) -> Messages:
    """``Messages`` from the trace's columns and tool links (``sim.trace.column_links``: what the column
    reader fills without building events): the same tables as ``messages_of_events`` wherever only
    assistant events issue tool call ids (Frame's rule links a result to the latest earlier event naming
    its id, whatever its kind); elsewhere that one, from the events."""
    from sim.trace.column_links import tool_links

    a = trace.arrays
    links = trace.derived("tool_links", tool_links)
    kind, tokens, issuer = a.kind, a.tokens, links.issuer
    if (links.ids_n[kind != _KIND["assistant"]] > 0).any():
        return messages_of_events(trace)
    msg = np.flatnonzero((kind != _KIND["system"]) & (kind != _KIND["tools"]))  # every message event
    res = kind == _KIND["tool_result"]
    # a result joins the message before it when it directly follows a result of the same turn
    joins = np.zeros(len(msg), dtype=bool)
    if len(msg) > 1:
        m, prev = msg[1:], msg[:-1]
        joins[1:] = res[m] & (prev == m - 1) & res[prev] & (issuer[m] >= 0) & (issuer[m] == issuer[prev])
    firsts = np.flatnonzero(~joins)  # each message's place in ``msg``
    first = msg[firsts]
    n = len(first)
    msg_of = np.full(len(kind), -1, dtype=np.int64)
    msg_of[msg] = np.cumsum(~joins) - 1
    prefix = np.zeros(n + 1, dtype=np.int64)
    if n:
        np.cumsum(np.add.reduceat(tokens[msg], firsts), out=prefix[1:])
    paired = np.flatnonzero(res & (issuer >= 0))
    group = np.full(len(kind), NO_GROUP, dtype=np.int64)
    group[issuer[paired]] = issuer[paired]
    group[paired] = issuer[paired]
    ma, mr = msg_of[issuer[paired]], msg_of[paired]
    long_pairs = bool((mr - ma > 1).any())
    if long_pairs:
        cross = _cross(sorted(zip(ma.tolist(), mr.tolist(), strict=True)), n)
    else:  # each pair is two adjacent messages: it crosses only the boundary before its result
        cross = np.full(n + 1, n + 1, dtype=np.int64)
        cross[mr] = mr
    out = Messages(
        np.searchsorted(first, a.view_end),
        np.append(firsts, len(msg)).astype(np.int64),
        msg.astype(np.int64),
        res[first],
        links.ids_n[first] > 0,
        prefix,
        group[msg],
        tokens[msg].astype(np.int64),
        long_pairs,
        cross,
    )
    for v in out:
        if isinstance(v, np.ndarray):
            v.setflags(write=False)
    return out


def _cross(pairs: list[tuple[int, int]], n: int) -> np.ndarray:
    """cross[X], X in [0, n]: the least result message over ``pairs`` (call message, result message;
    sorted) with call < X <= result; n + 1 where none (a heap sweep)."""
    cross, heap, p = [], [], 0
    for x in range(n + 1):
        while p < len(pairs) and pairs[p][0] < x:
            heappush(heap, pairs[p][1])
            p += 1
        while heap and heap[0] < x:
            heappop(heap)
        cross.append(heap[0] if heap else n + 1)
    return np.asarray(cross, dtype=np.int64)


def messages_of_events(trace: Trace) -> Messages:
    """``Messages`` from the events (``Turns``, ``Frame``, ``MemberTable``: the rule's own tables)."""
    t, f, table, events = turns(trace), frame(trace), member_table(trace), trace.events
    n = len(t.first)
    msg_of = {}  # event -> its message position
    for k, m in enumerate(t.first):
        for i in t.members[m]:
            msg_of[i] = k
    group = [f.group[i][0] if i in f.group else NO_GROUP for i in table.flat]
    pairs = sorted((msg_of[a], msg_of[r]) for r, a in f.issuer.items())
    out = Messages(
        np.searchsorted(np.asarray(t.first, dtype=np.int64), trace.arrays.view_end),
        np.asarray(table.start, dtype=np.int64),
        np.asarray(table.flat, dtype=np.int64),
        np.array([events[m].kind == "tool_result" for m in t.first], dtype=bool),
        np.array([bool(events[m].tool_call_ids) for m in t.first], dtype=bool),
        np.asarray(t.prefix, dtype=np.int64),
        np.asarray(group, dtype=np.int64),
        np.asarray([events[i].tokens for i in table.flat], dtype=np.int64),
        any(r - a > 1 for a, r in pairs),
        _cross(pairs, n),
    )
    for v in out:
        if isinstance(v, np.ndarray):
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
    tokens: np.ndarray
    long_pairs: np.ndarray  # per run
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
        concat([m.tokens for m in ms]),
        np.array([m.long_pairs for m in ms], dtype=bool),
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
