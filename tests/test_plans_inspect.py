"""The four Inspect compaction policies' plans (``sim.policies.inspect_handler.plan_handler``) against
their per-call rule (``InspectCompaction.before_call``): the records ``check_policy`` compares (the batch
path against the loop), and the plan's entries and summary calls against the decisions ``before_call``
returns call by call in the loop, one for one (changes that change nothing included)."""

import itertools

import pytest
from builders import swe_trace

from sim.checks.conformance import check_policy
from sim.engine.dispatch import loop_one
from sim.engine.model import ReplayModel
from sim.policies.base import Decision, make_policy, registered

NAMES = ["inspect_compaction_auto", "inspect_compaction_edit", "inspect_compaction_summary",
         "inspect_compaction_trim"]  # fmt: skip
# small thresholds: the handler fires at many calls of a SWE-like run (some runs end
# compaction-insufficient: declined, the loop replays them)
MANY = {
    "inspect_compaction_edit": [
        {"threshold": 3000, "keep_tool_uses": 0, "keep_tool_inputs": False},
        {"threshold": 6000, "keep_tool_uses": 0, "keep_tool_inputs": False},
        {"threshold": 20000, "keep_tool_uses": 0},
        {"threshold": 6000, "keep_tool_uses": 1},
    ],
    "inspect_compaction_trim": [{"threshold": 6000, "preserve": 0.5}, {"threshold": 0.08, "preserve": 0.9}],
    "inspect_compaction_summary": [{"threshold": 5000, "summary_min_tokens": 10}, {"threshold": 0.05}],
    "inspect_compaction_auto": [{"threshold": 7000, "summary_ratio": 0.5, "summary_min_tokens": 10}],
}


def settings(name):
    """Defaults, conformance settings, every setting of the default size grid, and MANY."""
    cls = registered()[name]
    grid = [dict(zip(cls.size_grid, v, strict=True)) for v in itertools.product(*cls.size_grid.values())]
    return [{}, *cls.conformance_settings, *grid, *MANY[name]]


@pytest.fixture(scope="module")
def swe():
    from scenarios.swe_like import generate_suite

    return generate_suite(7, 12)


class Recorder:
    """The policy, with every decision ``before_call`` returns in the loop written down as the plan's
    entries and summary calls would say it."""

    def __init__(self, policy):
        self.__dict__.update(policy=policy, entries=[], summaries=[], stopped=False)

    def __getattr__(self, name):
        return getattr(self.policy, name)

    def before_call(self, trace, state, view, call, status):
        d = self.policy.before_call(trace, state, view, call, status)
        changes = d.changes if isinstance(d, Decision) else d
        self.entries.extend((call, c.index, c.tokens, int(c.state)) for c in changes)
        if isinstance(d, Decision):
            s = d.summary
            self.summaries.extend((call, x.input_tokens, x.output_tokens) for x in (s if isinstance(s, list)
                                  else [s] if s is not None else []))  # fmt: skip
            self.__dict__["stopped"] |= d.stop is not None
        return d


def loop_decisions(trace, policy):
    rec = Recorder(policy)
    loop_one(trace, rec, ReplayModel(trace), None, None, None)
    return rec.entries, rec.summaries, rec.stopped


def plan_decisions(trace, policy):
    p = policy.plan(trace)
    entries = [tuple(map(int, e)) for e in zip(p.call, p.index, p.tokens, p.state, strict=True)]
    return entries, [tuple(s) for s in p.summaries], p.declined


@pytest.mark.parametrize("name", NAMES)
def test_plan_is_before_calls_decisions_one_for_one(name, swe):
    fired = planned_calls = summaries = declined = 0
    for s in settings(name):
        policy = make_policy(name, **s)
        for t in swe:
            entries, sums, stopped = loop_decisions(t, policy)
            got, got_sums, got_declined = plan_decisions(t, policy)
            assert got_declined == stopped, (s, t.trace_id)  # no needs here: declined = stopped
            if stopped:
                declined += 1
                continue
            assert (got, got_sums) == (entries, sums), (s, t.trace_id)
            fired += bool(got)
            planned_calls += len({e[0] for e in got})
            summaries += len(got_sums)
    # the comparison is not vacuous: runs compact at many calls, summarize, and end insufficient
    assert fired >= 15 and planned_calls >= 150 and declined >= 10
    assert (summaries >= 50) == (name in ("inspect_compaction_summary", "inspect_compaction_auto"))


@pytest.mark.parametrize("name", NAMES)
def test_check_policy_on_swe_like_suite(name, swe):
    for s in settings(name):
        assert check_policy(make_policy(name, **s), swe) == [], s


@pytest.mark.parametrize("name", NAMES)
def test_check_policy_on_the_conformance_corpora(name, mini_traces):
    from sim.importers import load_paths
    from sim.util.paths import EMBEDDED_SUITE

    traces = [*mini_traces[:12], *list(load_paths([EMBEDDED_SUITE]))[:10]]
    hand = swe_trace([("out\n" * 40, 300), ("x" * 120, 60), ("short", 5)] * 4)
    cls = registered()[name]
    for s in [{}, *cls.conformance_settings, *MANY[name]]:
        assert check_policy(make_policy(name, **s), [*traces, hand]) == [], s


@pytest.mark.parametrize("name", NAMES)
def test_runs_with_needs_and_runs_the_handler_ends_are_declined(name, swe):
    from sim.importers import load_paths
    from sim.information.state import has_needs
    from sim.util.paths import EMBEDDED_SUITE

    # needs: a re-read adds tokens the planner's estimate does not see, whatever the threshold
    t = list(load_paths([EMBEDDED_SUITE]))[0]
    assert has_needs(t)
    assert make_policy(name).plan(t).declined and make_policy(name, threshold=100).plan(t).declined
    # a threshold below the task: the first compaction cannot get under it (compaction-insufficient)
    policy = make_policy(name, threshold=500)
    assert loop_one(swe[0], policy, ReplayModel(swe[0]), None, None, None).finish_reason == (
        "compaction-insufficient"
    )
    assert policy.plan(swe[0]).declined
    # a run that never reaches the threshold plans nothing
    p = make_policy(name, threshold=10**9).plan(swe[0])
    assert not p.declined and len(p.index) == 0 and not p.summaries
