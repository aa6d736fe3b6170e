"""The OpenHands condensers' plans (``sim.policies.openhands_plan``) against ``before_call``: each plan's
entries are the changes ``before_call`` returns at each call, sorted by index, its summaries the calls
it meters, and a run it stops is declined; ``check_policy`` holds the batch path's records (which replay
the plans) to the per-call loop's. Over the SWE-like suite, the conformance corpora, hand-built traces
(call ids reused, a chat before the tools) and settings that condense at nearly every call."""

import dataclasses
import itertools

import pytest
from builders import swe_trace
from test_conformance_openhands import chat_then_tools, reused_ids

from sim.checks.conformance import check_policy
from sim.engine.dispatch import loop_one, replay_table
from sim.engine.model import ReplayModel
from sim.policies import openhands_plan
from sim.policies.base import Decision, make_policy, registered
from sim.policies.openhands_plan import groups_of

NAMES = [
    "openhands_amortized_forgetting",
    "openhands_hard_context_reset",
    "openhands_llm_summarizing",
    "openhands_recent_events",
]
# settings that condense at nearly every call, or where the head and the tail meet
HARSH = {
    "openhands_amortized_forgetting": [
        {"max_size": 3, "keep_first": 0}, {"max_size": 4, "keep_first": 1}, {"max_size": 20, "keep_first": 9},
    ],
    "openhands_llm_summarizing": [
        {"max_size": 5, "keep_first": 0}, {"max_size": 9, "keep_first": 3}, {"max_size": 12, "keep_first": 0},
        {"max_size": 20, "keep_first": 9},
    ],
    "openhands_recent_events": [
        {"max_events": 1, "keep_first": 0}, {"max_events": 2, "keep_first": 3},
        {"max_events": 6, "keep_first": 5}, {"max_events": 10, "keep_first": 0},
    ],
    "openhands_hard_context_reset": [],
}  # fmt: skip


def settings(name):
    """The defaults, the conformance settings, every setting of the default grid, the harsh ones."""
    cls = registered()[name]
    grid = [
        dict(zip(cls.size_grid, vals, strict=True)) for vals in itertools.product(*cls.size_grid.values())
    ]
    return [{}, *cls.conformance_settings, *grid, *HARSH[name]]


def decisions(policy, t, window=None):
    """What ``before_call`` decided at each call of the loop's replay of ``t``: (entries as (call, index,
    tokens, state) sorted by index within a call, summaries as (call, input, output), stopped?)."""
    cls = type(policy)
    real = cls.before_call
    entries, summaries, stopped = [], [], []

    def recorded(self, trace, state, view, call, status):
        d = real(self, trace, state, view, call, status)
        changes, summary = (d.changes, d.summary) if isinstance(d, Decision) else (d, None)
        stopped.append(isinstance(d, Decision) and d.stop is not None)
        for c in sorted(changes, key=lambda c: c.index):
            entries.append((call, c.index, c.tokens, int(c.state)))
        for s in summary if isinstance(summary, list) else [summary] if summary else []:
            summaries.append((call, s.input_tokens, s.output_tokens))
        return d

    cls.before_call = recorded
    try:
        loop_one(t, policy, ReplayModel(t), None, window, "claude-sonnet-4-5")
    finally:
        cls.before_call = real
    return entries, summaries, any(stopped)


def plan_problems(policy, traces):
    """Where ``policy.plan`` differs from ``before_call`` (a declined run: only where the loop stops it,
    or where the planner says it cannot read the trace)."""
    out = []
    for t in traces:
        entries, summaries, stopped = decisions(policy, t)
        p = policy.plan(t)
        if p.declined:
            if not stopped and not _declines(policy, t):
                out.append(f"{t.trace_id}: declined")
            continue
        if stopped:
            out.append(f"{t.trace_id}: not declined, though before_call stops the run")
        got = list(zip(*(list(map(int, f)) for f in p[:4]), strict=True))
        if got != entries:
            out.append(f"{t.trace_id}: entries differ")
        if list(map(tuple, p.summaries)) != summaries:
            out.append(f"{t.trace_id}: summaries differ")
    return out


def _declines(policy, t):
    """The runs a planner declines by design though the loop replays them to the end: the SDK's (its
    token reasons read the view), a hard reset's on a trace reusing call ids."""
    if getattr(policy, "variant", "v0") == "sdk_v1":
        return True
    return policy.name == "openhands_hard_context_reset" and groups_of(t) is None


def swe_suite():
    from scenarios.swe_like import generate_suite

    return generate_suite(7, 12)


def embedded():
    from sim.importers import load_paths
    from sim.util.paths import EMBEDDED_SUITE

    return list(load_paths([EMBEDDED_SUITE]))[:10]


def hand_traces():
    t = swe_trace([("out\n" * 40, 300), ("x" * 120, 60), ("short", 5)] * 4)
    return [reused_ids(), chat_then_tools(), t, parallel_calls()]


def parallel_calls():
    """swe_trace whose third assistant event issues three calls at once, answered by three results, the
    second call's result arriving a call later (the walk holds the action back until then)."""
    t = swe_trace([("a" * 40, 40)] * 8)
    ev = list(t.events)
    a, r = ev[4], ev[5]
    ev[4] = dataclasses.replace(a, tool_call_ids=(*a.tool_call_ids, "p2", "p3"))
    ev[5] = dataclasses.replace(r, tool_call_id="p3")
    ev[9] = dataclasses.replace(ev[9], tool_call_id="p2")
    ev[7] = dataclasses.replace(ev[7], tool_call_id=a.tool_call_ids[0])
    return dataclasses.replace(t, events=tuple(ev))


@pytest.mark.parametrize("name", NAMES)
def test_plans_equal_before_call_on_the_swe_like_suite_and_hand_traces(name):
    traces = [*swe_suite(), *hand_traces()]
    for params in settings(name):
        assert plan_problems(make_policy(name, **params), traces) == [], params


@pytest.mark.parametrize("name", NAMES)
def test_plans_equal_before_call_on_the_conformance_corpora(name, mini_traces):
    traces = [*mini_traces[:10], *embedded()]
    for params in settings(name):
        assert plan_problems(make_policy(name, **params), traces) == [], params


@pytest.mark.parametrize("name", NAMES)
def test_batch_path_records_equal_the_loops_on_the_swe_like_suite_and_hand_traces(name):
    # (not the trace reusing call ids: the checker pairs calls and results by id, so OpenHands' own
    # pairing by order reads as split pairs there, in the loop's views alike; its plans are held to
    # before_call above)
    traces = [*swe_suite(), *hand_traces()[1:]]
    for params in settings(name):
        assert check_policy(make_policy(name, **params), traces) == [], params


@pytest.mark.parametrize("name", NAMES)
def test_batch_path_records_equal_the_loops_on_the_conformance_corpora(name, mini_traces):
    traces = [*mini_traces[:10], *embedded()]
    for params in settings(name):
        assert check_policy(make_policy(name, **params), traces) == [], params


@pytest.mark.parametrize("name", NAMES)
def test_swe_like_runs_take_the_batch_path(name):
    traces = swe_suite()
    policy = make_policy(name, **settings(name)[1])
    table = replay_table(traces, policy, window=None, pricing="claude-sonnet-4-5")
    assert not table.loop  # every run planned (none declined, none summarizing with needs)


def test_a_run_the_condenser_gives_up_on_is_declined():
    # keep_first = max_size // 2 - 1 leaves LLMSummarizingCondenser no tail: the first condensation
    # finds nothing to forget and the run ends (condensation-insufficient) before call 3 (events 0-6)
    policy = make_policy("openhands_llm_summarizing", max_size=6, keep_first=2)
    t = swe_trace([("a" * 40, 40)] * 6)
    _, _, stopped = decisions(policy, t)
    assert stopped and policy.plan(t).declined
    assert check_policy(policy, [t]) == []
    table = replay_table([t], policy, window=None, pricing="claude-sonnet-4-5")
    assert list(table.loop) == [0]
    assert table.records()[0].finish_reason == "condensation-insufficient"


def test_runs_with_needs_are_planned_from_the_structure():
    from sim.information.state import has_needs

    traces = [t for t in embedded() if has_needs(t)]
    assert traces
    for name in ("openhands_recent_events", "openhands_amortized_forgetting", "openhands_hard_context_reset"):
        policy = make_policy(name, **settings(name)[1])
        assert not any(policy.plan(t).declined for t in traces if groups_of(t) is not None), name
        table = replay_table(traces, policy, window=None, pricing="claude-sonnet-4-5")
        assert len(table.loop) < len(traces), name  # some on the batch path, with their re-reads
        assert check_policy(policy, traces) == [], name


def test_sdk_variant_and_reused_call_ids_are_declined():
    sdk = make_policy("openhands_llm_summarizing", variant="sdk_v1", keep_first=2, max_size=10)
    t = swe_suite()[0]
    assert sdk.plan(t).declined
    reused = reused_ids()
    assert groups_of(reused) is None
    assert make_policy("openhands_hard_context_reset").plan(reused).declined
    assert not make_policy("openhands_recent_events").plan(reused).declined  # step at every call


def test_groups_hold_each_action_with_the_results_of_its_calls():
    t = parallel_calls()
    members = groups_of(t)
    # action 4's calls in order: its own id (answered by 7), p2 (by 9), p3 (by 5)
    assert members[4] == members[5] == members[7] == members[9] == (4, 7, 9, 5)
    n = len(t.events)
    assert members[6] == (6, n) and members[8] == (8, n)  # their calls never answered
    assert members[0] is None and members[1] is None  # the system prompt and the task: messages


def test_rolling_plans_skip_the_calls_that_change_nothing(monkeypatch):
    # max_size 200: most SWE-like runs never condense; each is stepped at its first call and where it
    # condenses (15 steps for the 632 calls of the 12 runs), and the plan is the loop's all the same
    steps = []
    real = openhands_plan._Run.step

    def counted(self, k, n):
        steps.append(k)
        return real(self, k, n)

    monkeypatch.setattr(openhands_plan._Run, "step", counted)
    traces = swe_suite()
    policy = make_policy("openhands_amortized_forgetting", max_size=200, keep_first=1)
    assert plan_problems(policy, traces) == []
    assert sum(len(t.calls) for t in traces) == 632 and len(steps) == 15


def test_recent_events_plans_take_their_shortcuts(monkeypatch):
    # max_events 40, keep_first 2 on the SWE-like suite: every run is stepped at its first call only
    # (while the tail holds every entry the calls change nothing: ``quiet``), and the 8 runs whose view
    # outgrows 42 entries have their tail planned at once after the first call with head and tail apart
    steps, tails = [], []
    real_step, real_tail = openhands_plan._Run.step, openhands_plan._Run.tail_at_once

    def step(self, k, n):
        steps.append(k)
        return real_step(self, k, n)

    def tail(self, *args):
        tails.append(real_tail(self, *args))
        return tails[-1]

    monkeypatch.setattr(openhands_plan._Run, "step", step)
    monkeypatch.setattr(openhands_plan._Run, "tail_at_once", tail)
    traces = swe_suite()
    policy = make_policy("openhands_recent_events", max_events=40, keep_first=2)
    assert plan_problems(policy, traces) == []
    assert steps == [0] * 12 and tails == [True] * 8


@pytest.mark.parametrize(
    "params", [{}, {"max_events": 5, "keep_first": 2}, {"max_events": 40, "keep_first": 1}]
)
def test_recent_events_plans_of_many_runs_are_each_runs_own(params):
    # plan_many plans the tails of all runs together (tail_entries): each run's plan as planned alone
    policy = make_policy("openhands_recent_events", **params)
    traces = [*swe_suite(), *hand_traces(), *embedded()]
    many = policy.plan_many(traces)
    assert len(many) == len(traces)
    for j, t in enumerate(traces):
        alone = policy.plan(t)
        assert [list(map(int, f)) for f in many[j][:4]] == [list(map(int, f)) for f in alone[:4]], j
        assert many[j].declined == alone.declined
    entries, _, _ = decisions(policy, traces[4])  # the longest SWE-like run: 195 calls
    assert list(zip(*(list(map(int, f)) for f in many[4][:4]), strict=True)) == entries
