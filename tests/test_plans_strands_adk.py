"""The planners of ``strands_summarizing`` and ``adk_events_compaction`` (``plan_many``) against
``before_call`` (the reference): the conformance checker holds the batch path's records to the per-call
loop's for the defaults, the conformance settings and every ``size_grid`` setting, on the SWE-like
suite, the conformance corpora and traces where the policy fires often; and each plan equals, entry for
entry, the decisions the loop took."""

import itertools

import pytest
from builders import calls_trace, ev, swe_trace

from sim.checks.conformance import check_policy
from sim.core.types import ItemState
from sim.engine.dispatch import loop_one
from sim.engine.model import ReplayModel
from sim.policies.base import Decision, make_policy, registered

NAMES = ("adk_events_compaction", "strands_summarizing")


def grid_settings(name):
    grid = registered()[name].size_grid
    return [dict(zip(grid, values, strict=True)) for values in itertools.product(*grid.values())]


def settings(name):
    return [{}, *registered()[name].conformance_settings, *grid_settings(name)]


@pytest.fixture(scope="module")
def swe_suite():
    from scenarios.swe_like import generate_suite

    return generate_suite(7, 12)


@pytest.fixture(scope="module")
def embedded():
    from sim.importers import load_paths
    from sim.util.paths import EMBEDDED_SUITE

    return list(load_paths([EMBEDDED_SUITE]))[:10]


def sessions(n_invocations: int, tag: str = "s"):
    """A session of user-initiated invocations (ADK's sliding window fires on each completed one): per
    invocation a user question, a call and its result, an answer; an empty user event in the second."""
    events, calls = [ev(0, "system", "sys", 100)], []
    for j in range(n_invocations):
        b = len(events)
        events.append(ev(b, "user", f"q{j}", 20 + j))
        if j == 1:
            events.append(ev(b + 1, "user", "", 0))
            b += 1
        events += [
            ev(b + 1, "assistant", f"call {j}", 10, tool_call_ids=(f"c{j}",)),
            ev(b + 2, "tool_result", "out" * (j + 1), 100 + 7 * j, tool_call_id=f"c{j}"),
            ev(b + 3, "assistant", f"answer {j}", 10),
        ]
        calls += [b + 1, b + 3]
    return calls_trace(f"{tag}{n_invocations}", events, calls)


def loop_decisions(policy, trace):
    """What ``before_call`` decided at each call of the loop's replay (window off: no overflow), as a
    plan's entries and summaries."""
    cls, entries, summaries = type(policy), [], []

    class Recording(cls):
        def before_call(self, trace, state, view, call, status=None):
            got = cls.before_call(self, trace, state, view, call, status)
            changes, made = (got.changes, got.summary) if isinstance(got, Decision) else (got, None)
            for s in made if isinstance(made, list) else () if made is None else (made,):
                summaries.append((call, s.input_tokens, s.output_tokens))
            entries.extend((call, c.index, c.tokens, int(c.state)) for c in sorted(changes, key=lambda c: c.index))
            return got

    rec = object.__new__(Recording)
    rec.__dict__.update(policy.__dict__)
    loop_one(trace, rec, ReplayModel(trace), None, None, "auto")
    return entries, summaries


def plan_entries(plan):
    cols = [list(map(int, c)) for c in plan[:4]]
    return list(zip(*cols, strict=True)), [tuple(s) for s in plan.summaries]


def same_as_loop(policy, traces):
    plans = policy.plan_many(traces)
    assert len(plans) == len(traces)
    declined = 0
    for t, plan in zip(traces, plans, strict=True):
        if plan.declined:
            declined += 1
            continue
        assert plan_entries(plan) == loop_decisions(policy, t), (policy.params(), t.trace_id)
    return declined
