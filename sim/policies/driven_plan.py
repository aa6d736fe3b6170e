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

from sim.core.types import ItemState, Trace
from sim.information.state import POSITIONAL
from sim.policies.base import Decision, Plan, Policy, RunStatus, View

DECLINED = Plan((), (), (), (), (), True)
VERBATIM = int(ItemState.VERBATIM)


class BareRun:
    """A run's bare view and the plan made of it so far: the policy's own ``before_call`` asked at the
    calls a planner chooses (``ask``), its changes applied to the view (recorded sizes, as the changes
    so far left them) and listed as the plan's entries, its summary calls as the plan's. Shared by
    ``driven_plan`` (every call) and ``sim.policies.sparse_plans`` (the calls that reach a trigger)."""

    __slots__ = ("policy", "trace", "state", "view", "view_end", "prefix", "delta", "entries", "summaries")

    def __init__(self, policy: Policy, trace: Trace) -> None:
        a = trace.arrays
        self.policy, self.trace = policy, trace
        self.state, self.view = policy.start(trace), View()
        self.view.policy_state = self.state
        self.view.tokens, self.view.nbytes = a.tokens.tolist(), a.bytes.tolist()
        self.view.state = [VERBATIM] * len(self.view.tokens)
        self.view_end, self.prefix = a.view_end.tolist(), a.prefix.tolist()
        self.delta = 0  # what the changes so far took from the recorded sizes of the items
        self.entries: tuple[list[int], list[int], list[int], list[int]] = ([], [], [], [])
        self.summaries: list[tuple[int, int, int]] = []

    def request(self, k: int) -> int:
        """The view's tokens before call k's decisions (what the call admits, as the changes left it)."""
        return self.prefix[self.view_end[k]] + self.delta

    def ask(self, k: int, status: RunStatus | None) -> bool:
        """``before_call`` at call k, its decisions applied and listed; False when the plan cannot say what
        follows: a ``Decision.stop`` (the loop says how the run ends) or a cut (a plan holds no byte
        ranges)."""
        view = self.view
        view.n = self.view_end[k]
        view.total = self.request(k)
        got = self.policy.before_call(self.trace, self.state, view, k, status)
        changes, made = (got.changes, got.summary) if isinstance(got, Decision) else (got, None)
        if isinstance(got, Decision) and got.stop is not None:
            return False
        for s in made if isinstance(made, list) else () if made is None else (made,):
            self.summaries.append((k, s.input_tokens, s.output_tokens))
        calls, index, tokens, states = self.entries
        for ch in sorted(changes, key=lambda ch: ch.index):
            if ch.state in POSITIONAL:
                return False
            i = ch.index
            self.delta += ch.tokens - view.tokens[i]
            view.state[i], view.tokens[i], view.nbytes[i] = int(ch.state), ch.tokens, ch.nbytes
            calls.append(k), index.append(i), tokens.append(ch.tokens), states.append(int(ch.state))
        return True

    def plan(self) -> Plan:
        return Plan(*self.entries, tuple(self.summaries))


def driven_plan(policy: Policy, trace: Trace, reads_output: bool = False) -> Plan:
    """``policy.before_call``'s decisions at every call of ``trace``, as a ``Plan`` (entries of a call
    sorted by index, its summaries in the order made). Declined: a ``Decision.stop`` (the loop says how
    the run ends), a cut, a run of several runs, and with ``reads_output`` a call whose output the
    recording lacks (the mock model estimates it)."""
    a = trace.arrays
    outputs = a.output_tokens.tolist()
    if trace.runs > 1 or (reads_output and min(outputs, default=0) < 0):
        return DECLINED
    residual = a.residual.tolist()
    run, status = BareRun(policy, trace), RunStatus()
    for k in range(len(outputs)):
        if not run.ask(k, status):
            return DECLINED
        status.turns = k + 1
        status.last_input = max(run.request(k) + residual[k], 0)
        status.last_output = outputs[k]
    return run.plan()
