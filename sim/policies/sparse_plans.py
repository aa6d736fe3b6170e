"""Plans of policies that act only when the request reaches a token trigger, and then read the view
(``anthropic_server_compaction``, ``codex_auto_compact``, ``claude_code_auto_compact``): their own
``before_call``, asked only at the calls where it can act.

Why this holds: such a ``before_call`` returns nothing and touches no state while the request (the
view's tokens plus the call's residual) is below its trigger (``fires_at``), and between two of its
actions the view changes only by the events the calls admit. So the request before call k is the
recorded one (``prefix[view_end[k]] + residual[k]``) less what the actions so far reclaimed: the next
call that reaches the trigger is found by one array comparison, and only there is a view built
(incrementally: the items' sizes and states as the actions left them) and ``before_call`` asked. A
run's cost is O(items + actions x items in view), not a step per call. The sizes are the recorded
ones only when the mock model re-reads nothing: runs with needs are declined (the loop replays them),
and so are runs where the policy cuts an item (BOUNDED: a plan holds no byte ranges) or stops.
Held to the loop by tests/test_plans_summary.py and the conformance checker. ``sim.policies.driven_plan``
drives a ``before_call`` at every call, for rules with no trigger to skip to."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sim.core.types import KIND_CODE, Trace
from sim.information.state import issuer_of, runs_have_needs
from sim.policies.base import Plan, Plans, Policy
from sim.policies.driven_plan import DECLINED, BareRun
from sim.trace.column_links import tool_links

_NONE = Plan((), (), (), ())


def result_issuers(trace: Trace) -> np.ndarray:
    """Per event: the assistant event that issued this tool result (-1: none, or not a result), as
    ``issuer_of`` pairs them, from the tool links the column reader keeps (``tool_links``: no event
    objects). The two agree unless an event other than an assistant lists tool call ids (``issuer_of``
    takes an id from any event): then ``issuer_of``'s own answer."""
    links = trace.derived("tool_links", tool_links)
    kind = trace.arrays.kind
    if not links.ids_n[kind != KIND_CODE["assistant"]].any():
        return links.issuer
    out = np.full(len(kind), -1, dtype=np.int64)
    for r, a in trace.derived("issuers", issuer_of).items():
        if kind[r] == KIND_CODE["tool_result"]:
            out[r] = a
    return out


def recorded_requests(trace: Trace) -> np.ndarray:
    """Per call: the request as recorded, before any policy acts (its view's tokens plus the residual)."""
    a = trace.arrays
    out = a.prefix[a.view_end] + a.residual
    out.setflags(write=False)
    return out


def sparse_plans(policy: Policy, traces: Sequence[Trace], fires_at: int) -> Plans:
    """The plans of ``policy``, whose ``before_call`` does nothing while the request is below
    ``fires_at`` tokens (module docstring)."""
    needs = runs_have_needs(traces)
    return Plans.of(
        [
            DECLINED if declined else _plan(policy, t, fires_at)
            for t, declined in zip(traces, needs, strict=True)
        ]
    )


def _plan(policy: Policy, trace: Trace, fires_at: int) -> Plan:
    requests = trace.derived("recorded_requests", recorded_requests)
    hits = np.flatnonzero(requests >= fires_at)
    if not len(hits):
        return _NONE
    run = BareRun(policy, trace)
    k, ncalls = int(hits[0]), len(requests)
    while True:
        if not run.ask(k, None):
            return DECLINED
        nxt = np.flatnonzero(requests[k + 1 :] >= fires_at - run.delta)
        if not len(nxt):
            break
        k += 1 + int(nxt[0])
        if k >= ncalls:
            break
    return run.plan()
