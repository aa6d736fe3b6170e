"""A run's plan from a policy's own ``before_call``, driven call by call over a bare view: the planner of
policies whose decisions follow a sequential rule too involved to restate in array steps (a summary
that covers the previous summary, a trigger on the reported usage). The rule stays in one place, the
reference; what the plan saves is the engine's per-call work (the view's bookkeeping, cache and cost
rows), which the batch path does in array steps for many runs at once.

The bare view holds what the engine's would on a run whose sizes the mock model cannot change (no
needs: the caller declines those): each call's events at their recorded sizes, as the decisions so far
left them. The status holds what the engine reports after each call: the request (the view plus the
call's residual, as the engine sends it) and the recorded output. Used by ``strands_summarizing`` and
``adk_events_compaction``; held to the loop by tests/test_plans_strands_adk.py.
"""

from __future__ import annotations

from itertools import accumulate

from sim.core.types import ItemState, Trace
from sim.policies.base import Decision, Plan, Policy, RunStatus, View

DECLINED = Plan((), (), (), (), (), True)
VERBATIM = int(ItemState.VERBATIM)


def driven_plan(policy: Policy, trace: Trace, reads_output: bool = False) -> Plan:
    """``policy.before_call``'s decisions at every call of ``trace``, as a ``Plan`` (entries of a call
    sorted by index, its summaries in the order made). Declined: a ``Decision.stop`` (the loop says how
    the run ends), a run of several runs, and with ``reads_output`` a call whose output the recording
    lacks (the mock model estimates it)."""
    a = trace.arrays
    outputs = a.output_tokens.tolist()
    if trace.runs > 1 or (reads_output and min(outputs, default=0) < 0):
        return DECLINED
    residual = a.residual.tolist()
    state, view, status = policy.start(trace), View(), RunStatus()
    view.policy_state = state
    view.tokens, view.nbytes = a.tokens.tolist(), a.bytes.tolist()
    view.state = [VERBATIM] * len(view.tokens)
    prefix = [0, *accumulate(view.tokens)]
    delta = 0  # what the changes so far took from the recorded sizes of the items
    calls: list[int] = []
    index: list[int] = []
    tokens: list[int] = []
    states: list[int] = []
    summaries: list[tuple[int, int, int]] = []
    for k, c in enumerate(trace.calls):
        view.n = n = c.view_end
        view.total = prefix[n] + delta
        got = policy.before_call(trace, state, view, k, status)
        changes, made = (got.changes, got.summary) if isinstance(got, Decision) else (got, None)
        if isinstance(got, Decision) and got.stop is not None:
            return DECLINED
        for s in made if isinstance(made, list) else () if made is None else (made,):
            summaries.append((k, s.input_tokens, s.output_tokens))
        for ch in sorted(changes, key=lambda ch: ch.index):
            i = ch.index
            delta += ch.tokens - view.tokens[i]
            view.state[i], view.tokens[i], view.nbytes[i] = int(ch.state), ch.tokens, ch.nbytes
            calls.append(k)
            index.append(i)
            tokens.append(ch.tokens)
            states.append(int(ch.state))
        status.turns = k + 1
        status.last_input = max(prefix[n] + delta + residual[k], 0)
        status.last_output = outputs[k]
    return Plan(calls, index, tokens, states, tuple(summaries))
