"""The per-call replay loop (DESIGN.md "Replay semantics").

Per call: admit the events recorded since the previous call (settle-time transforms apply once, here);
let the policy transform the view, possibly through a metered summary call; price the request
incrementally (prefix sums of the original sizes plus the net effect of every change so far, never a
recount), with the run-status line if the policy appends one; refuse it if it exceeds the model's window
(the policy may compact once and retry); ask the mock model; account usage and let the policy check its
budgets (a grace call with tools forbidden, or a stop).

Two ways to run the same semantics. The per-call loop (``_replay_loop``) is the reference. When nothing
watches and the policy's decisions are known ahead (no pre-call transform, or a ``plan``; no budgets, no
status line, no recovery), requests are prefix sums of settled sizes plus planned changes, computed in a
few steps (``_replay_vectorised``); a run that hits the window is handed to the loop. The conformance
checker holds the two paths to identical records for every registered policy.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable
from itertools import accumulate

import numpy as np

from sim.model import ReplayModel
from sim.models import resolve_window
from sim.policies.base import Decision, Policy, RunStatus, View
from sim.records import AGENT, GRACE, KIND_OF_STATE, SUMMARY, RunRecord, compaction_table
from sim.traceio import trace_hash
from sim.types import Trace

Observer = Callable[[int, View], None]
AUTO = "auto"


def replay(
    trace: Trace,
    policy: Policy,
    model: ReplayModel | None = None,
    observer: Observer | None = None,
    window: int | str | None = AUTO,
) -> RunRecord:
    """Replay ``trace`` under ``policy`` with the scripted mock model; returns the run's record.

    ``window``: the provider's context window in tokens; ``"auto"`` looks up the trace's recorded model
    in ``conf/model/providers/`` (unknown models: no limit); None disables the check.
    ``observer(call, view)``, if given, sees each agent request's view (read-only) just before it is
    sent: the conformance checker and ``explain`` use it; replays for results leave it None.
    """
    model = model or ReplayModel(trace)
    if window == AUTO:
        window = resolve_window(trace.model)
    fast = (
        observer is None
        and (policy.plans or not policy.acts_before_call)
        and not (policy.recovers or policy.checks_after_call or policy.reports_status)
    )
    if fast:
        record = _replay_vectorised(trace, policy, model)
        if window is None or not (record.calls["input_tokens"] > window).any():
            return record
    return _replay_loop(trace, policy, model, observer, window)  # type: ignore[arg-type]


def _record(trace, policy, model, cols, item_state, events, finish="completed", warnings=(), rejections=0):
    return RunRecord(
        trace_id=trace.trace_id,
        trace_hash=trace.derived("trace_hash", trace_hash),
        policy=policy.name,
        params=policy.params(),
        model=model.name,
        finish_reason=finish,
        calls=cols,
        item_state=item_state,
        compactions=_compactions(events),
        warnings=tuple(warnings),
        rejections=rejections,
    )


def _compactions(events: list[tuple[int, int, int, int]]) -> dict[str, np.ndarray]:
    """Group change events (recorded call, kind, index, tokens reclaimed) into one row per (call, kind)."""
    groups: dict[tuple[int, int], list[int]] = {}
    for call, kind, index, reclaimed in events:
        g = groups.get((call, kind))
        if g is None:
            groups[(call, kind)] = [1, reclaimed, index]
        else:
            g[0] += 1
            g[1] += reclaimed
            g[2] = min(g[2], index)
    return compaction_table([(c, k, *v) for (c, k), v in sorted(groups.items())])


# ------------------------------------------------------------------------------------------ fast path
def _settled_sizes(trace: Trace, policy: Policy, state, stop: int):
    """Sizes and states of events [0, stop) after settle-time transforms, and the changes made."""
    tokens = trace.arrays.tokens.tolist()[:stop]
    states = [0] * stop
    changes = policy.settle_all(trace)
    if changes is None:  # the policy wants to see the view as each event enters
        view = View()
        view.tokens, view.state, view.nbytes = tokens, states, trace.arrays.bytes.tolist()[:stop]
        total, changes = 0, []
        for i in range(stop):
            view.n, view.total = i + 1, total + tokens[i]
            ch = policy.settle(trace, state, i, view)
            if ch is not None:
                changes.append(ch)
                tokens[i], states[i] = ch.tokens, ch.state
            total += tokens[i]
        return tokens, states, changes
    changes = [ch for ch in changes if ch.index < stop]
    for ch in changes:
        tokens[ch.index], states[ch.index] = ch.tokens, ch.state
    return tokens, states, changes


def _replay_vectorised(trace: Trace, policy: Policy, model: ReplayModel) -> RunRecord:
    a = trace.arrays
    ncalls = len(a.view_end)
    stop = int(a.view_end[-1]) if ncalls else 0
    firsts, nchanged = a.no_first, a.no_changes
    events: list[tuple[int, int, int, int]] = []
    tokens = states = None
    if policy.settles:
        tokens, states, settled = _settled_sizes(trace, policy, policy.start(trace), stop)
        if settled:
            original = a.tokens
            view_end = a.view_end.tolist()
            for ch in settled:  # a settled event belongs to the first call whose view admits it
                i = ch.index
                events.append(
                    (bisect_right(view_end, i), KIND_OF_STATE[ch.state], i, int(original[i]) - ch.tokens)
                )
        prefix = np.zeros(stop + 1, dtype=np.int64)
        np.cumsum(tokens, out=prefix[1:])
        view_tokens = prefix[a.view_end]
    else:  # nothing settles: the recorded views' sizes, computed once per trace
        view_tokens = a.recorded_view
    if policy.acts_before_call:
        p = policy.plan(trace)
        if p.index:
            if tokens is None:
                tokens, states = a.tokens.tolist()[:stop], [0] * stop
            view_tokens, firsts, nchanged = _apply_plan(p, tokens, states, view_tokens, ncalls, events)
    item_state = np.zeros(stop, dtype=np.int8) if states is None else np.array(states, dtype=np.int8)
    cols = {
        "call": a.call_index,
        "kind": a.no_changes,  # all agent rows (code 0)
        "recorded_call": a.call_index,
        "input_tokens": view_tokens + a.residual,
        "output_tokens": model.respond_all(),
        "view_tokens": view_tokens,
        "residual_tokens": a.residual,
        "status_tokens": a.no_changes,
        "recorded_input_tokens": a.recorded_input,
        "view_items": a.view_end,
        "first_changed": firsts,
        "items_changed": nchanged,
    }
    return _record(trace, policy, model, cols, item_state, events)


def _apply_plan(p, tokens: list[int], states: list[int], view_tokens: np.ndarray, ncalls: int, events: list):
    """Fold a plan into per-call columns; ``tokens``/``states`` are updated in place."""
    delta = [0] * ncalls  # net size change made before each call
    firsts = [-1] * ncalls
    nchanged = [0] * ncalls
    for k, i, t, s in zip(p.call, p.index, p.tokens, p.state, strict=True):
        d = t - tokens[i]
        delta[k] += d
        tokens[i], states[i] = t, s
        events.append((k, KIND_OF_STATE[s], i, -d))
        if firsts[k] < 0:
            firsts[k] = i
        nchanged[k] += 1
    return (
        view_tokens + np.fromiter(accumulate(delta), dtype=np.int64, count=ncalls),
        np.array(firsts, dtype=np.int64),
        np.array(nchanged, dtype=np.int64),
    )


# ------------------------------------------------------------------------------------------ the loop
def _per_call(trace: Trace) -> tuple[list[int], list[float]]:
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


def _replay_loop(
    trace: Trace, policy: Policy, model: ReplayModel, observer: Observer | None, window: int | None
) -> RunRecord:
    a = trace.arrays
    view_end = a.view_end.tolist()
    residual = a.residual.tolist()
    recorded_input = a.recorded_input.tolist()
    ncalls = len(view_end)
    stop = view_end[-1] if ncalls else 0
    tool_calls, elapsed = trace.derived("per_call", _per_call)
    # Items are laid out for every event the run will admit; only [0, view.n) is in view. The running
    # total is the prefix sum of original sizes plus ``delta``, the net effect of every change so far.
    view = View()
    view.tokens = vt = a.tokens.tolist()[:stop]
    view.nbytes = vb = a.bytes.tolist()[:stop]
    view.state = vs = [0] * stop
    prefix = list(accumulate(vt, initial=0))
    delta = 0
    state = policy.start(trace)
    status = RunStatus()
    settle, settles = policy.settle, policy.settles
    cols: dict[str, list[int]] = {c: [] for c in _LOOP_COLUMNS}
    events: list[tuple[int, int, int, int]] = []
    warnings: list[tuple[int, str]] = []
    finish, rejections = "completed", 0

    def admit(k: int, end: int) -> None:
        nonlocal delta
        if settles:
            for i in range(view.n, end):
                view.n, view.total = i + 1, prefix[i + 1] + delta
                ch = settle(trace, state, i, view)
                if ch is not None:
                    delta += ch.tokens - vt[i]
                    events.append((k, KIND_OF_STATE[ch.state], i, vt[i] - ch.tokens))
                    vt[i], vb[i], vs[i] = ch.tokens, ch.nbytes, ch.state
        view.n, view.total = end, prefix[end] + delta

    def apply(k: int, result) -> tuple[int, int]:
        """Apply a decision before request k; a summary call gets its own row. Returns (first, count)."""
        nonlocal delta
        if isinstance(result, Decision):
            changes, summary = result.changes, result.summary
        else:
            changes, summary = result, None
        if summary is not None:
            out = model.summarize(summary.input_tokens, summary.output_tokens)
            _row(cols, SUMMARY, k, summary.input_tokens, out, 0, 0, 0, -1, view.n, -1, 0)
            status.tokens += summary.input_tokens + out
        first = -1
        for ch in changes:
            i = ch.index
            delta += ch.tokens - vt[i]
            events.append((k, KIND_OF_STATE[ch.state], i, vt[i] - ch.tokens))
            vt[i], vb[i], vs[i] = ch.tokens, ch.nbytes, ch.state
            if first < 0 or i < first:
                first = i
        view.total = prefix[view.n] + delta
        return first, len(changes)

    for k in range(ncalls):
        admit(k, view_end[k])
        first, changed = -1, 0
        if policy.acts_before_call:
            first, changed = apply(k, policy.before_call(trace, state, view, k, status))
        st = policy.status_tokens(trace, state, k, status) if policy.reports_status else 0
        request = view.total + residual[k] + st
        if window is not None and request > window:
            rejections += 1
            retry = policy.on_overflow(trace, state, view, k, status) if policy.recovers else None
            if retry is not None:
                f2, c2 = apply(k, retry)
                if f2 >= 0 and (first < 0 or f2 < first):
                    first = f2
                changed += c2
                request = view.total + residual[k] + st
            if retry is None or request > window:
                finish = "context-overflow"
                break
        out = model.respond(k)
        _row(
            cols,
            AGENT,
            k,
            request,
            out,
            view.total,
            residual[k],
            st,
            recorded_input[k],
            view.n,
            first,
            changed,
        )
        status.turns, status.last_input = k + 1, request
        status.tool_calls += tool_calls[k]
        status.tokens += request + out
        status.elapsed_s = elapsed[k]
        if observer is not None:
            observer(k, view)
        if policy.checks_after_call:
            verdict = policy.after_call(trace, state, view, k, status)
            if verdict is not None:
                row = len(cols["kind"]) - 1
                warnings.extend((row, w) for w in verdict.warnings)
                if verdict.stop is not None and k + 1 < ncalls:
                    finish = verdict.stop
                    if verdict.grace:  # one final answer, tools forbidden, from what the view holds
                        g = k + 1
                        admit(g, view_end[g])
                        st = policy.status_tokens(trace, state, g, status) if policy.reports_status else 0
                        request = view.total + residual[g] + st
                        if window is not None and request > window:
                            rejections += 1
                            finish = "context-overflow"
                        else:
                            out = model.grace(g)
                            _row(cols, GRACE, g, request, out, view.total, residual[g], st, -1, view.n, -1, 0)
                            status.tokens += request + out
                    break

    cols["call"] = list(range(len(cols["kind"])))
    arrays = {c: np.array(v, dtype=np.int64) for c, v in cols.items()}
    return _record(
        trace,
        policy,
        model,
        arrays,
        np.array(vs[: view.n], dtype=np.int8),
        events,
        finish,
        warnings,
        rejections,
    )


_LOOP_COLUMNS = (
    "call",
    "kind",
    "recorded_call",
    "input_tokens",
    "output_tokens",
    "view_tokens",
    "residual_tokens",
    "status_tokens",
    "recorded_input_tokens",
    "view_items",
    "first_changed",
    "items_changed",
)


def _row(cols, kind, k, inp, out, view_tokens, residual, st, recorded, items, first, changed) -> None:
    cols["kind"].append(kind)
    cols["recorded_call"].append(k)
    cols["input_tokens"].append(inp)
    cols["output_tokens"].append(out)
    cols["view_tokens"].append(view_tokens)
    cols["residual_tokens"].append(residual)
    cols["status_tokens"].append(st)
    cols["recorded_input_tokens"].append(recorded)
    cols["view_items"].append(items)
    cols["first_changed"].append(first)
    cols["items_changed"].append(changed)
