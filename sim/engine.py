"""The per-call replay loop (DESIGN.md "Replay semantics").

Per call: admit the events recorded since the previous call (settle-time transforms apply once, here);
let the policy transform the view; price the request incrementally (running total of cached per-item
sizes, never a recount); ask the mock model. Seams for budgets, overflow, cache and ledger sit where
marked; they come with their issues.

Two ways to run the same semantics. The per-call loop (``_replay_loop``) is the reference: it asks the
policy before every call and lets an observer watch each request. When nothing watches and the policy's
decisions are known ahead (no pre-call transform, or a ``plan``), requests are prefix sums of settled
sizes plus the planned changes, computed in a few vectorised steps (``_replay_vectorised``). The
conformance checker holds the two to identical records for every registered policy.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from sim.model import ReplayModel
from sim.policies.base import Policy, View
from sim.records import RunRecord
from sim.traceio import trace_hash
from sim.types import Trace

Observer = Callable[[int, View], None]


def replay(
    trace: Trace, policy: Policy, model: ReplayModel | None = None, observer: Observer | None = None
) -> RunRecord:
    """Replay ``trace`` under ``policy`` with the scripted mock model; returns the run's record.

    ``observer(call, view)``, if given, sees each request's view (read-only) just before it is sent:
    the conformance checker and ``explain`` use it; replays for results leave it None.
    """
    model = model or ReplayModel(trace)
    if observer is None and (policy.plans or not policy.acts_before_call):
        return _replay_vectorised(trace, policy, model)
    return _replay_loop(trace, policy, model, observer)


def _record(trace, policy, model, cols, item_state) -> RunRecord:
    a = trace.arrays
    cols["call"] = a.call_index
    cols["residual_tokens"] = a.residual
    cols["recorded_input_tokens"] = a.recorded_input
    cols["view_items"] = a.view_end
    return RunRecord(
        trace_id=trace.trace_id,
        trace_hash=trace.derived("trace_hash", trace_hash),
        policy=policy.name,
        params=policy.params(),
        model=model.name,
        finish_reason="completed",
        calls=cols,
        item_state=item_state,
    )


def _settled_sizes(trace: Trace, policy: Policy, state, stop: int) -> tuple[list[int], list[int]]:
    """Sizes and states of events [0, stop) after their settle-time transforms."""
    tokens = trace.arrays.tokens.tolist()[:stop]
    states = [0] * stop
    changes = policy.settle_all(trace)
    if changes is None:  # the policy wants to see the view as each event enters
        view = View()
        view.tokens, view.state = tokens, states
        total = 0
        for i in range(stop):
            view.n, view.total = i + 1, total + tokens[i]
            ch = policy.settle(trace, state, i, view)
            if ch is not None:
                tokens[i], states[i] = ch.tokens, ch.state
            total += tokens[i]
        return tokens, states
    for ch in changes:
        if ch.index < stop:
            tokens[ch.index], states[ch.index] = ch.tokens, ch.state
    return tokens, states


def _replay_vectorised(trace: Trace, policy: Policy, model: ReplayModel) -> RunRecord:
    a = trace.arrays
    ncalls = len(a.view_end)
    stop = int(a.view_end[-1]) if ncalls else 0
    firsts, nchanged = a.no_first, a.no_changes
    if policy.settles:
        tokens, states = _settled_sizes(trace, policy, policy.start(trace), stop)
        prefix = np.zeros(stop + 1, dtype=np.int64)
        np.cumsum(tokens, out=prefix[1:])
        view_tokens = prefix[a.view_end]
    else:  # nothing settles: the recorded views' sizes, computed once per trace
        tokens, states = None, None
        view_tokens = a.recorded_view
    if policy.acts_before_call:
        p = policy.plan(trace)
        if p.index:
            if tokens is None:
                tokens, states = a.tokens.tolist()[:stop], [0] * stop
            view_tokens, firsts, nchanged = _apply_plan(p, tokens, states, view_tokens, ncalls)
    item_state = np.zeros(stop, dtype=np.int8) if states is None else np.array(states, dtype=np.int8)
    cols = {
        "input_tokens": view_tokens + a.residual,
        "output_tokens": model.respond_all(),
        "view_tokens": view_tokens,
        "first_changed": firsts,
        "items_changed": nchanged,
    }
    return _record(trace, policy, model, cols, item_state)


def _apply_plan(p, tokens: list[int], states: list[int], view_tokens: np.ndarray, ncalls: int):
    """Fold a plan into per-call columns; ``tokens``/``states`` are updated in place."""
    delta = [0] * ncalls  # net size change made before each call
    firsts = [-1] * ncalls
    nchanged = [0] * ncalls
    for k, i, t, s in zip(p.call, p.index, p.tokens, p.state, strict=True):
        delta[k] += t - tokens[i]
        tokens[i], states[i] = t, s
        if firsts[k] < 0:
            firsts[k] = i
        nchanged[k] += 1
    running, acc = 0, []
    for d in delta:
        running += d
        acc.append(running)
    return (
        view_tokens + np.array(acc, dtype=np.int64),
        np.array(firsts, dtype=np.int64),
        np.array(nchanged, dtype=np.int64),
    )


def _replay_loop(trace: Trace, policy: Policy, model: ReplayModel, observer: Observer | None) -> RunRecord:
    a = trace.arrays
    view_end = a.view_end.tolist()
    ncalls = len(view_end)
    stop = view_end[-1] if ncalls else 0
    # The view's per-item lists are laid out for every event the run will admit; only [0, view.n) is
    # in view. The running total is the prefix sum of original sizes plus the net effect of every
    # change so far (``delta``), so admitting events costs nothing per item.
    prefix = [0]
    for t in a.tokens.tolist()[:stop]:
        prefix.append(prefix[-1] + t)
    view = View()
    view.tokens = vt = a.tokens.tolist()[:stop]
    view.state = vs = [0] * stop
    deltas = np.zeros(ncalls, dtype=np.int64)  # net size change made at each call
    firsts, nchanged = np.full(ncalls, -1, dtype=np.int64), np.zeros(ncalls, dtype=np.int64)
    state = policy.start(trace)
    settle, before_call, settles = policy.settle, policy.before_call, policy.settles
    delta = 0
    for k in range(ncalls):
        d0 = delta
        # 1. new events enter the store and the view; settle-time transforms apply once
        end = view_end[k]
        if settles:
            for i in range(view.n, end):
                view.n = i + 1
                view.total = prefix[i + 1] + delta
                ch = settle(trace, state, i, view)
                if ch is not None:
                    delta += ch.tokens - vt[i]
                    vt[i], vs[i] = ch.tokens, ch.state
        view.n = end
        view.total = prefix[end] + delta
        # 2. pre-call seam: the policy may transform items already in view
        changes = before_call(trace, state, view, k)
        if changes:
            first = changes[0].index
            for ch in changes:
                i = ch.index
                delta += ch.tokens - vt[i]
                vt[i], vs[i] = ch.tokens, ch.state
                if i < first:
                    first = i
            firsts[k], nchanged[k] = first, len(changes)
            view.total = prefix[end] + delta
        if delta != d0:
            deltas[k] = delta - d0
        # 3. the request: view + the recorded call's residual  (seams: run-status line, overflow, cache)
        if observer is not None:
            observer(k, view)
        # 5. the mock model answers: a replay's script cannot change, so its outputs come as one column
        #    (seam: budgets after accounting; models that react to the view answer per call)
    view_tokens = np.asarray(prefix, dtype=np.int64)[a.view_end] + np.cumsum(deltas)
    cols = {
        "input_tokens": view_tokens + a.residual,
        "output_tokens": model.respond_all(),
        "view_tokens": view_tokens,
        "first_changed": firsts,
        "items_changed": nchanged,
    }
    return _record(trace, policy, model, cols, np.asarray(vs, dtype=np.int8))
