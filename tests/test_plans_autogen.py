"""The AutoGen contexts' planners (``plan_many`` of autogen_buffered, autogen_head_and_tail,
autogen_token_limited) against their ``before_call``: a plan's entries are exactly the changes
``before_call`` returns call by call (sorted by index), on the SWE-like suite, the conformance corpus
and traces where the contexts act at nearly every call; and the conformance checker holds the batch
path's records to the loop's."""

from __future__ import annotations

import numpy as np
import pytest
from builders import calls_trace, ev, swe_trace

from sim.checks.conformance import check_policy
from sim.core.types import Trace
from sim.engine.dispatch import loop_one
from sim.engine.model import ReplayModel
from sim.policies.autogen_plan import messages
from sim.policies.base import Decision, make_policy, registered

NAMES = ("autogen_buffered", "autogen_head_and_tail", "autogen_token_limited")


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
        "autogen_token_limited": [
            {"token_limit": 200},
            {"token_limit": 700},
            {"token_limit": 60},
            {"token_limit": 700, "token_count": "provider"},
        ],
    }[name]  # fmt: skip


def mixed_trace(trace_id: str, opening_result: bool = False) -> Trace:
    """A tool loop with what the message tables must get right: turns of parallel calls (their results
    one message), a user message between a call and its result (a pair two messages apart), a result
    no call issued, and (``opening_result``) a first message that is a tool result."""
    spec = [("system", 100, (), None)]
    if opening_result:
        spec.append(("tool_result", 40, (), "orphan"))
    spec.append(("user", 50, (), None))
    for k in range(14):
        if k % 4 == 1:  # two parallel calls
            spec += [("assistant", 12, (f"c{k}", f"d{k}"), None), ("tool_result", 30 + k, (), f"c{k}"),
                     ("tool_result", 70, (), f"d{k}")]  # fmt: skip
        elif k % 4 == 2:  # a user message before the result
            spec += [
                ("assistant", 9, (f"c{k}",), None),
                ("user", 15, (), None),
                ("tool_result", 90, (), f"c{k}"),
            ]
        elif k == 7:
            spec += [("assistant", 8, (f"c{k}",), None), ("tool_result", 25, (), "nobody")]
        else:
            spec += [("assistant", 10, (f"c{k}",), None), ("tool_result", 20 + 11 * k, (), f"c{k}")]
    spec.append(("assistant", 10, (), None))
    events = [
        ev(i, kind, f"m{i}", tok, tool_call_ids=ids, tool_call_id=cid)
        for i, (kind, tok, ids, cid) in enumerate(spec)
    ]
    return calls_trace(trace_id, events, [e.index for e in events if e.kind == "assistant"])


def small_traces():
    """Hand traces: long tool loops of varied sizes, so every boundary moves often."""
    return [
        swe_trace([("out\n" * 40, 300), ("x" * 120, 60), ("short", 5)] * 4),
        swe_trace([("y" * 384, 100)] * 9),
        swe_trace([("z" * 40, 10 + 37 * (i % 5)) for i in range(15)]),
        mixed_trace("mixed"),
        mixed_trace("opening-result", opening_result=True),
    ]


@pytest.mark.parametrize("name", NAMES)
def test_plan_is_before_calls_changes_on_the_swe_suite(name, swe):
    policy0 = make_policy(name)
    assert policy0.plans
    for params in settings(name):
        policy = make_policy(name, **params)
        plans = policy.plan_many(swe)
        for j, t in enumerate(swe):
            if plans[j].declined:  # the loop replays it: its entries are not used
                continue
            seen, asked = before_call_entries(policy, t)
            assert plan_entries(plans[j], asked) == seen, (name, params, t.trace_id)


@pytest.mark.parametrize("name", NAMES)
def test_plan_is_before_calls_changes_where_it_acts_often(name, mini_traces):
    traces = small_traces() + mini_traces[:12]
    for params in [*tight(name), {}, *registered()[name].conformance_settings]:
        policy = make_policy(name, **params)
        plans = policy.plan_many(traces)
        for j, t in enumerate(traces):
            if plans[j].declined:
                continue
            seen, asked = before_call_entries(policy, t)
            assert plan_entries(plans[j], asked) == seen, (name, params, t.trace_id)
            assert plan_entries(policy.plan(t), asked) == seen  # one run alone: the same


def conformance_traces(swe, mini_traces):
    return [*swe, *mini_traces[:12], *small_traces()]


@pytest.mark.parametrize(
    "name, params", [(name, params) for name in NAMES for params in [*settings(name), *tight(name)]]
)
def test_batch_path_records_equal_the_loops(name, params, swe, mini_traces):
    traces = conformance_traces(swe, mini_traces)
    if not registered()[name].splits_pairs:
        # a call two messages before its result: the buffered and head-and-tail cuts may fall between
        # them, in the loop as in the plan, and these policies do not declare splits_pairs (AutoGen's
        # own agent never puts a message there); the plan tests above hold them on such a trace
        traces = [t for t in traces if not messages(t).long_pairs]
    assert check_policy(make_policy(name, **params), traces) == []


def test_token_limited_counts_split_requests_as_the_loop(swe, mini_traces):
    # the planner counts the requests that split a pair as unpaired_requests does (Plans.unpaired: the
    # batch path's records carry it)
    traces = conformance_traces(swe, mini_traces)
    for params in [*settings("autogen_token_limited"), *tight("autogen_token_limited")]:
        policy = make_policy("autogen_token_limited", **params)
        plans, unpaired = policy.planned(traces)
        declined = plans.declined if plans.declined is not None else [False] * len(traces)
        carried = plans.unpaired if plans.unpaired is not None else [0] * len(traces)
        for t, u, d, c in zip(traces, unpaired.tolist(), declined, carried, strict=True):
            loop = loop_one(t, policy, ReplayModel(t), None, None, None).unpaired_tool_messages
            if not messages(t).long_pairs:
                assert u == loop, (params, t.trace_id)
            if not d:
                assert c == loop, (params, t.trace_id)  # what the batch path's record says


def test_message_tables_from_columns_equal_those_from_events(swe, mini_traces):
    from sim.policies.autogen_plan import _messages, messages_of_events

    for t in conformance_traces(swe, mini_traces):
        a, b = _messages(t), messages_of_events(t)
        for f in a._fields:
            assert np.array_equal(getattr(a, f), getattr(b, f)), (t.trace_id, f)


@pytest.mark.parametrize(
    "name, params",
    [
        ("autogen_buffered", {"buffer_size": 3}),
        ("autogen_head_and_tail", {"head_size": 1, "tail_size": 2}),
        ("autogen_token_limited", {"token_limit": 1500}),
        ("autogen_token_limited", {"token_limit": 1500, "token_count": "provider"}),
    ],
)
def test_runs_with_needs_stay_on_the_batch_path(name, params):
    # the contexts count messages and their recorded sizes, never what a re-read adds to the request, so
    # a run whose mock model re-reads a hidden fact needs no decline: its plan holds (check_policy), and
    # only the runs the planner declines (token_limited: those that split a pair) take the loop
    from sim.engine.dispatch import replay_table
    from sim.importers import load_paths
    from sim.information.state import has_needs
    from sim.util.paths import EMBEDDED_SUITE

    traces = list(load_paths([EMBEDDED_SUITE]))[:20]
    assert all(map(has_needs, traces))
    policy = make_policy(name, **params)
    assert check_policy(policy, traces) == []
    table = replay_table(traces, policy, window=None, pricing="claude-sonnet-4-5")
    declined = policy.plan_many(traces).declined
    assert sorted(table.loop) == ([] if declined is None else np.flatnonzero(declined).tolist())
    records = table.records()
    assert sum(len(records[j].rereads) for j in range(len(traces)) if j not in table.loop) > 0
