"""The per-call replay loop (DESIGN.md "Replay semantics").

Per call: admit the events recorded since the previous call (settle-time transforms apply once, here);
let the policy transform the view; price the request incrementally (running total of cached per-item
sizes, never a recount); ask the mock model. Seams for budgets, overflow, cache and ledger sit where
marked; they come with their issues.
"""

from __future__ import annotations

import numpy as np

from sim.model import ReplayModel
from sim.policies.base import Policy, View
from sim.records import CALL_COLUMNS, RunRecord
from sim.types import Trace


def replay(trace: Trace, policy: Policy, model: ReplayModel | None = None) -> RunRecord:
    """Replay ``trace`` under ``policy`` with the scripted mock model; returns the run's record."""
    model = model or ReplayModel(trace)
    a = trace.arrays
    tokens = a.tokens.tolist()
    view_end = a.view_end.tolist()
    residual = a.residual.tolist()
    ncalls = len(view_end)
    cols = {c: np.empty(ncalls, dtype=np.int64) for c in CALL_COLUMNS}
    c_input, c_output, c_view = cols["input_tokens"], cols["output_tokens"], cols["view_tokens"]
    c_first, c_changed, c_items = cols["first_changed"], cols["items_changed"], cols["view_items"]

    view = View()
    vt, vs = view.tokens, view.state
    state = policy.start(trace)
    settles, acts = policy.settles, policy.acts_before_call
    total = 0
    for k in range(ncalls):
        # 1. new events enter the store and the view; settle-time transforms apply once
        end = view_end[k]
        n = view.n
        if n < end:
            if settles:
                for i in range(n, end):
                    t = tokens[i]
                    vt.append(t)
                    vs.append(0)
                    view.n = i + 1
                    total += t
                    ch = policy.settle(trace, state, i, view)
                    if ch is not None:
                        total += ch.tokens - vt[i]
                        vt[i] = ch.tokens
                        vs[i] = ch.state
            else:
                new = tokens[n:end]
                vt.extend(new)
                vs.extend([0] * (end - n))
                total += sum(new)
                view.n = end
        # 2. pre-call seam: the policy may transform items already in view
        first, changed = -1, 0
        if acts:
            view.total = total
            for ch in policy.before_call(trace, state, view, k):
                i = ch.index
                total += ch.tokens - vt[i]
                vt[i] = ch.tokens
                vs[i] = ch.state
                changed += 1
                if first < 0 or i < first:
                    first = i
        # 3. the request: view + the recorded call's residual  (seams: run-status line, overflow, cache)
        c_view[k] = total
        c_input[k] = total + residual[k]
        c_first[k] = first
        c_changed[k] = changed
        c_items[k] = end
        # 5. the mock model answers  (seam: budgets after accounting)
        c_output[k] = model.respond(k)
    view.total = total
    cols["call"] = np.arange(ncalls, dtype=np.int64)
    cols["residual_tokens"] = np.asarray(residual, dtype=np.int64)
    cols["recorded_input_tokens"] = a.recorded_input.copy()
    return RunRecord(
        trace_id=trace.trace_id,
        trace_hash=trace.trace_hash,
        policy=policy.name,
        params=policy.params(),
        model=model.name,
        finish_reason="completed",
        calls=cols,
        item_state=np.asarray(vs, dtype=np.int8),
    )
