"""A batch's settle-time changes: each run's (``settled_changes``), and under one ``Policy.settle_key`` the
batch's columns after them (``Settled``, ``SettledColumns``), kept with the batch for the settings of a
sweep that settle alike (``kept_settled``). Used by ``sim.engine.fast.batch``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from sim.core.types import Trace
from sim.engine.fast.batch_changes import KIND_OF_CODE, part_summary
from sim.engine.fast.batch_static import BatchStatic, batch_static
from sim.information.state import (
    POSITIONAL,
    shown_ranges,
)
from sim.policies.base import Policy, View
from sim.util.batchmemo import batch_derived


def settled_changes(trace: Trace, policy: Policy, stop: int) -> list:
    """The settle-time changes of events [0, stop), in index order (the batch applies them)."""
    changes = policy.settle_all(trace)
    if changes is not None:
        return [ch for ch in changes if ch.index < stop]
    # the policy wants to see the view as each event enters
    a = trace.arrays
    state = policy.start(trace)
    tokens = a.tokens.tolist()[:stop]
    states = [0] * stop
    view = View()
    view.tokens, view.state, view.nbytes = tokens, states, a.bytes.tolist()[:stop]
    total, changes = 0, []
    for i in range(stop):
        view.n, view.total = i + 1, total + tokens[i]
        ch = policy.settle(trace, state, i, view)
        if ch is not None:
            changes.append(ch)
            tokens[i], states[i] = ch.tokens, ch.state
        total += tokens[i]
    return changes


class Settled(NamedTuple):
    """A batch's settle-time changes under one ``Policy.settle_key`` (no trace: the batch memory keeps
    it): per run, and as arrays over the batch."""

    per_run: list[list]  # each run's changes (``Change``), in index order
    positional: list[bool]  # per run: does a change show part of its item (a cut, a first page)
    item: np.ndarray  # each change's global item, runs laid end to end
    cuts: list  # per run: (call, item, shown byte ranges) of each cut or pagination (the record's)
    columns: SettledColumns | None  # the batch after the changes (None: there are none)


class SettledColumns(NamedTuple):
    """A batch's columns after settle-time changes, before any plan: a function of the traces and the
    changes alone (kept with them: the settings of a sweep that settle alike share it). Read-only."""

    tok: np.ndarray  # item sizes (a replay copies them: its plans change some)
    states: np.ndarray  # item state codes (int8; copied likewise)
    prefix: np.ndarray  # prefix sums of ``tok`` over the batch
    view_tokens: np.ndarray  # per call: its view's size
    part: tuple  # the changes as a change part: (global call, kind, local index, reclaimed, after)
    summary: tuple | None  # ``part_summary`` of it


def settle_columns(st: BatchStatic, g: np.ndarray, new: np.ndarray, code: np.ndarray) -> SettledColumns:
    """The batch's columns once items ``g`` (global ids) have size ``new`` and state ``code``."""
    tok = st.original.copy()
    tok[g] = new
    states = np.zeros(len(tok), dtype=np.int8)
    states[g] = code
    prefix = np.zeros(len(tok) + 1, dtype=np.int64)  # of settled sizes, over the whole batch
    np.cumsum(tok, out=prefix[1:])
    view_tokens = prefix[st.view_end_global] - prefix[st.item_base]
    # a settled event belongs to the first call whose view admits it
    call = np.searchsorted(st.view_end_global, g, side="right")
    part = (call, KIND_OF_CODE[code], g - st.item_base[call], st.original[g] - new, new)
    summary = part_summary(part, st.call_off, len(st.call_base))
    for a in (tok, states, prefix, view_tokens, *part, *(summary[1:] if summary is not None else ())):
        a.setflags(write=False)
    return SettledColumns(tok, states, prefix, view_tokens, part, summary)


def settle_cuts(st: BatchStatic, j: int, changes: list) -> list:
    """Run j's (call, item, shown byte ranges) of each of its settle-time ``changes`` that is a cut or a
    pagination, as its record holds them."""
    c0, i0 = int(st.call_off[j]), int(st.item_off[j])
    admit = np.searchsorted(st.view_end_global, i0 + np.array([ch.index for ch in changes]), side="right")
    return [
        (int(c) - c0, ch.index, shown_ranges(ch.state, ch.kept, ch.nbytes))
        for ch, c in zip(changes, admit.tolist(), strict=True)
        if ch.state in POSITIONAL
    ]


SETTLED_KEEP = 4  # settle keys remembered per batch (a sweep of a settle-time knob moves on), oldest out


def kept_settled(traces: Sequence[Trace], policy: Policy, key: str) -> Settled:
    kept = batch_derived(traces, "settled", _new_memo)
    value = kept.get(key)
    if value is None:
        value = kept[key] = batch_settled(policy, traces)
        while len(kept) > SETTLED_KEEP:
            kept.popitem(last=False)
    else:
        kept.move_to_end(key)
    return value


def _new_memo(_traces) -> OrderedDict:
    return OrderedDict()


def batch_settled(policy: Policy, traces: Sequence[Trace]) -> Settled:
    st = batch_static(traces)
    per_run = [settled_changes(t, policy, s) for t, s in zip(traces, st.stops.tolist(), strict=True)]
    flat = [
        (off + ch.index, ch.tokens, int(ch.state))
        for s, off in zip(per_run, st.item_off.tolist(), strict=True)
        for ch in s
    ]
    cuts: list = [NO_CUTS] * len(traces)
    positional = [False] * len(traces)
    for j, s in enumerate(per_run):
        if s and any(ch.state in POSITIONAL for ch in s):
            positional[j] = True
            cuts[j] = settle_cuts(st, j, s)
    if not flat:
        return Settled(per_run, positional, NO_ITEMS, cuts, None)
    g, new, code = (np.array(c, dtype=np.int64) for c in zip(*flat, strict=True))
    g.setflags(write=False)
    return Settled(per_run, positional, g, cuts, settle_columns(st, g, new, code))


NO_SETTLED: list = []  # shared by runs without settle-time changes (never written)
NO_CUTS: tuple = ()

NO_ITEMS = np.zeros(0, dtype=np.int64)
NO_ITEMS.setflags(write=False)
