"""The planners of ``strands_summarizing`` and ``adk_events_compaction`` (``plan_many``) against
``before_call`` (the reference): the conformance checker holds the batch path's records to the per-call
loop's for the defaults, the conformance settings and every ``size_grid`` setting, on the SWE-like
suite, the conformance corpora and traces where the policy fires often; and each plan equals, entry for
entry, the decisions the loop took."""

import itertools
import json
from dataclasses import replace

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


def sessions(n_invocations: int, tag: str = "s", needs: bool = False):
    """A session of user-initiated invocations (ADK's sliding window fires on each completed one): per
    invocation a user question, a call and its result, an answer; an empty user event in the second.
    ``needs``: result j provides fact f{j} and invocation j's call needs f{j-1} (a summary may lose it:
    the mock model re-reads it)."""
    events, calls = [ev(0, "system", "sys", 100)], []
    for j in range(n_invocations):
        b = len(events)
        events.append(ev(b, "user", f"q{j}", 20 + j))
        if j == 1:
            events.append(ev(b + 1, "user", "", 0))
            b += 1
        events += [
            ev(
                b + 1,
                "assistant",
                f"call {j}",
                10,
                tool_call_ids=(f"c{j}",),
                needs=(f"f{j - 1}",) if needs and j else (),
            ),
            ev(
                b + 2,
                "tool_result",
                "out" * (j + 1),
                100 + 7 * j,
                tool_call_id=f"c{j}",
                provides=(f"f{j}",) if needs else (),
            ),
            ev(b + 3, "assistant", f"answer {j}", 10),
        ]
        calls += [b + 1, b + 3]
    return calls_trace(f"{tag}{n_invocations}{'n' if needs else ''}", events, calls)


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
            entries.extend(
                (call, c.index, c.tokens, int(c.state)) for c in sorted(changes, key=lambda c: c.index)
            )
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


# ------------------------------------------------------------------ the batch path held to the loop
CASES = [(name, s) for name in NAMES for s in settings(name)]


@pytest.mark.parametrize(("name", "setting"), CASES, ids=[f"{n}-{json.dumps(s)}" for n, s in CASES])
def test_every_setting_conforms(name, setting, swe_suite, mini_traces, embedded):
    hand = swe_trace([("out\n" * 40, 300), ("x" * 120, 60), ("short", 5)] * 4)
    traces = [*swe_suite, hand, *mini_traces[:12], *embedded]
    assert check_policy(make_policy(name, **setting), traces) == []


ADK_OFTEN = (
    {"compaction_interval": 1, "overlap_size": 0, "summary_min_tokens": 10},
    {"compaction_interval": 1, "overlap_size": 2, "summary_min_tokens": 5},
    {"compaction_interval": 2, "overlap_size": 1, "summary_min_tokens": 10},
    {},
)


def test_adk_plans_equal_the_loops_decisions_where_the_window_fires_often(mini_traces, embedded):
    traces = [sessions(n) for n in range(1, 8)]
    for s in ADK_OFTEN:
        p = make_policy("adk_events_compaction", **s)
        assert same_as_loop(p, traces) == 0
        assert check_policy(p, traces) == [], s
        assert same_as_loop(p, mini_traces[:12] + embedded) >= 0


def test_adk_plan_of_a_session_entry_by_entry():
    # interval 1, overlap 0 on sessions(3): events 0 sys, 1 q0, 2 call, 3 result, 4 answer, 5 q1, 6 empty,
    # 7 call, 8 result, 9 answer, 10 q2, ... Before call 2 (q1 and the empty event arrive) invocation 0
    # (events 1-4: 20 + 10 + 100 + 10 = 140 tokens) is summarized (14, from the 169-token prompt + 140)
    # into event 4's slot; the empty event 5 starts invocation 1 on its own... it completes as event 6
    # arrives: summary 10 (min) in event 5's slot; event 6 DROPPED (empty, outside every range).
    plan = make_policy("adk_events_compaction", **ADK_OFTEN[0]).plan(sessions(3))
    entries, summaries = plan_entries(plan)
    S, D = int(ItemState.SUMMARIZED), int(ItemState.DROPPED)
    assert entries[:6] == [
        (2, 1, 0, S),
        (2, 2, 0, S),
        (2, 3, 0, S),
        (2, 4, 14, S),
        (2, 5, 10, S),
        (2, 6, 0, D),
    ]
    assert summaries[:2] == [(2, 309, 14), (2, 190, 10)]
    assert not plan.declined


def test_a_single_invocation_plans_nothing_without_the_token_trigger(swe_suite):
    plans = make_policy("adk_events_compaction").plan_many(swe_suite)
    assert plans.counts.tolist() == [0] * len(swe_suite) and plans.declined is None


ADK_TOKENS = (
    {"compaction_interval": None, "overlap_size": None, "token_threshold": 300, "event_retention_size": 2,
     "summary_min_tokens": 10},
    {"token_threshold": 400, "event_retention_size": 0, "summary_min_tokens": 10},
    {"compaction_interval": 1, "overlap_size": 1, "token_threshold": 250, "event_retention_size": 3,
     "summary_min_tokens": 5},
    {"compaction_interval": None, "overlap_size": None, "token_threshold": 3000, "event_retention_size": 4},
)  # fmt: skip


@pytest.mark.parametrize("setting", ADK_TOKENS, ids=json.dumps)
def test_adk_token_trigger_plans_equal_the_loops_decisions(setting, swe_suite):
    # the trigger reads the previous request as the engine sends it (residual included), or, after a
    # compaction with no call since, the request's contents
    traces = [*swe_suite[:4], *(sessions(n, "t") for n in (2, 5, 7))]
    p = make_policy("adk_events_compaction", **setting)
    assert same_as_loop(p, traces) == 0
    assert sum(len(plan.summaries) for plan in p.plan_many(traces)) >= len(traces)  # it fires
    assert check_policy(p, traces) == []


def test_a_run_with_needs_is_declined_where_it_may_act(mini_traces):
    from sim.information.state import has_needs
    from sim.policies.adk_events_compaction import trace_acts

    adk = make_policy("adk_events_compaction", compaction_interval=1, overlap_size=0, summary_min_tokens=10)
    traces = [sessions(n, needs=True) for n in (2, 3, 6)]
    assert all(map(has_needs, traces)) and all(map(trace_acts, traces))
    assert [p.declined for p in adk.plan_many(traces)] == [True, True, True]
    assert check_policy(adk, traces) == []
    # the real traces carry needs but hold one invocation each: the window never acts, nothing declined
    plans = adk.plan_many(mini_traces[:12])
    assert plans.declined is None and plans.counts.sum() == 0
    # the token trigger may act on any run: each with needs declined
    token = make_policy("adk_events_compaction", **ADK_TOKENS[0])
    assert token.plan_many(mini_traces[:12]).declined.tolist() == [True] * 12
    assert check_policy(token, traces + mini_traces[:12]) == []


def test_strands_plans_nothing_without_proactive_compression(swe_suite):
    off = make_policy("strands_summarizing")
    plans = off.plan_many(swe_suite)
    assert plans.counts.tolist() == [0] * len(swe_suite) and plans.declined is None
    assert same_as_loop(off, swe_suite) == 0  # before_call never acts without proactive compression


STRANDS_OFTEN = (
    {"context_window": 2000, "preserve_recent_messages": 2, "summary_min_tokens": 10,
     "proactive_compression": {"compression_threshold": 0.3}},
    {"context_window": 5000, "summary_ratio": 0.5, "preserve_recent_messages": 3,
     "proactive_compression": True},
    {"context_window": 1000, "summary_ratio": 0.1, "preserve_recent_messages": 0, "summary_min_tokens": 5,
     "proactive_compression": {"compression_threshold": 0.5}},
)  # fmt: skip


@pytest.mark.parametrize("setting", STRANDS_OFTEN, ids=json.dumps)
def test_strands_proactive_plans_equal_the_loops_decisions(setting, swe_suite):
    traces = [*swe_suite, *(sessions(n, "p") for n in (3, 6, 7))]
    p = make_policy("strands_summarizing", **setting)
    assert same_as_loop(p, traces) == 0
    assert sum(len(plan.summaries) for plan in p.plan_many(traces)) >= len(traces)  # it fires
    assert check_policy(p, traces) == []


def test_strands_proactive_declines_needs_and_missing_outputs():
    p = make_policy("strands_summarizing", **STRANDS_OFTEN[0])
    plain, needs = sessions(4, "d"), sessions(4, "d", needs=True)
    lacking = replace(plain, calls=(replace(plain.calls[0], output_tokens=None), *plain.calls[1:]))
    assert [plan.declined for plan in p.plan_many([plain, needs, lacking])] == [False, True, True]
    assert check_policy(p, [plain, needs, lacking]) == []


def test_strands_overflowing_runs_take_the_loop_and_agree():
    # a 300-token window: every run overflows, the engine hands it to the loop, whose on_overflow
    # summarizes; the fast path's record equals the loop's (an observer forces the loop)
    from sim.checks.conformance import record_diff
    from sim.engine.dispatch import replay

    p = make_policy("strands_summarizing", preserve_recent_messages=2, summary_min_tokens=10)
    finished = []
    for n in (3, 5, 7):
        t = sessions(n, "w")
        loop = replay(t, p, observer=lambda k, view: None, window=300)
        assert loop.rejections > 0
        assert record_diff(loop, replay(t, p, window=300)) == []
        finished.append(loop.finish_reason)
    assert finished == ["completed", "completed", "compaction-loop"]
