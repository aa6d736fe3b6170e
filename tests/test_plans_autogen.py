"""The AutoGen contexts' planners (``plan_many`` of autogen_buffered, autogen_head_and_tail,
autogen_token_limited) against their ``before_call``: a plan's entries are exactly the changes
``before_call`` returns call by call (sorted by index), on the SWE-like suite, the conformance corpus
and traces where the contexts act at nearly every call; and the conformance checker holds the batch
path's records to the loop's."""

from __future__ import annotations

import pytest
from builders import swe_trace

from sim.checks.conformance import check_policy
from sim.engine.dispatch import loop_one
from sim.engine.model import ReplayModel
from sim.policies.base import Decision, make_policy, registered

NAMES = ("autogen_buffered", "autogen_head_and_tail")


def before_call_entries(policy, trace):
    """(call, index, tokens, state) of every change ``before_call`` returns in the per-call loop, sorted by
    index within each call, and the calls the loop asked."""
    seen, asked = [], []

    class Recording(type(policy)):
        def before_call(self, trace, state, view, call, status=None):
            out = super().before_call(trace, state, view, call, status)
            changes = out.changes if isinstance(out, Decision) else out
            asked.append(call)
            ordered = sorted(changes, key=lambda c: c.index)
            seen.extend((call, c.index, c.tokens, int(c.state)) for c in ordered)
            return out

    Recording.__name__ = type(policy).__name__
    loop_one(trace, Recording(**policy.params()), ReplayModel(trace), None, None, None)
    return seen, asked


def plan_entries(plan, asked):
    calls = set(asked)
    rows = zip(*(list(map(int, plan[f])) for f in range(4)), strict=True)
    return [r for r in rows if r[0] in calls]


def settings(name):
    cls = registered()[name]
    grid = [{}, *cls.conformance_settings]
    (knob, values), *rest = cls.size_grid.items()
    if not rest:
        grid += [{knob: v} for v in values]
    else:
        ((knob2, values2),) = rest
        grid += [{knob: v, knob2: v2} for v in values for v2 in values2]
    return grid


@pytest.fixture(scope="module")
def swe():
    from scenarios.swe_like import generate_suite

    return generate_suite(7, 12)


def tight(name):
    """Settings under which the policy acts at nearly every call of a small trace."""
    return {
        "autogen_buffered": [{"buffer_size": 1}, {"buffer_size": 2}, {"buffer_size": 3}],
        "autogen_head_and_tail": [
            {"head_size": 1, "tail_size": 1},
            {"head_size": 2, "tail_size": 1},
            {"head_size": 2, "tail_size": 3},
        ],
        "autogen_token_limited": [{"token_limit": 200}, {"token_limit": 700}, {"token_limit": 60}],
    }[name]  # fmt: skip


def small_traces():
    """Hand traces: long tool loops of varied sizes, so every boundary moves often."""
    return [
        swe_trace([("out\n" * 40, 300), ("x" * 120, 60), ("short", 5)] * 4),
        swe_trace([("y" * 384, 100)] * 9),
        swe_trace([("z" * 40, 10 + 37 * (i % 5)) for i in range(15)]),
    ]


@pytest.mark.parametrize("name", NAMES)
def test_plan_is_before_calls_changes_on_the_swe_suite(name, swe):
    policy0 = make_policy(name)
    assert policy0.plans
    for params in settings(name):
        policy = make_policy(name, **params)
        plans = policy.plan_many(swe)
        for j, t in enumerate(swe):
            seen, asked = before_call_entries(policy, t)
            assert plan_entries(plans[j], asked) == seen, (name, params, t.trace_id)


@pytest.mark.parametrize("name", NAMES)
def test_plan_is_before_calls_changes_where_it_acts_often(name, mini_traces):
    traces = small_traces() + mini_traces[:12]
    for params in [*tight(name), {}, *registered()[name].conformance_settings]:
        policy = make_policy(name, **params)
        plans = policy.plan_many(traces)
        for j, t in enumerate(traces):
            seen, asked = before_call_entries(policy, t)
            assert plan_entries(plans[j], asked) == seen, (name, params, t.trace_id)
            assert plan_entries(policy.plan(t), asked) == seen  # one run alone: the same


def conformance_traces(swe, mini_traces):
    return [*swe, *mini_traces[:12], *small_traces()]


@pytest.mark.parametrize("name", NAMES)
def test_batch_path_records_equal_the_loops(name, swe, mini_traces):
    traces = conformance_traces(swe, mini_traces)
    for params in [*settings(name), *tight(name)]:
        assert check_policy(make_policy(name, **params), traces) == [], (name, params)

