"""LangChain's planners against the per-call loop: ``langchain_clear_tool_uses`` and
``langchain_summarization`` state their rule twice, call by call (``before_call``, the reference) and for
whole runs (``plan_many``); ``check_policy`` holds the batch path's records made from the plans to the
loop's, table for table, for the defaults, the conformance settings and every setting of the default
grid, on the SWE-like suite, the hand trace and the real runs the conformance tests use (their needs
taken off, or the plans decline them all), and on runs where the policies act on most calls.

The hand trace ``six()`` (tests/test_conformance_langchain.py): 0 system (100 tokens), 1 task (50),
then six turns of assistant ``cmd k`` (10) + tool result (100): results 3, 5, .. 13; call k sees events
[0, 2 + 2k), raw input 150 + 110 k; "[cleared]" weighs 7 tokens."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest
from builders import ev, swe_trace
from test_conformance_langchain import six

from sim.checks.conformance import check_policy
from sim.core.types import ItemState, Trace
from sim.engine.dispatch import loop_one, replay_table
from sim.engine.model import ReplayModel
from sim.information.state import has_needs
from sim.policies.base import Decision, make_policy, registered
from sim.policies.langchain_clear_tool_uses import answered_flags, answered_results, tool_results

M, V = int(ItemState.MASKED), int(ItemState.VERBATIM)
CLEAR = "langchain_clear_tool_uses"


def settings(name: str) -> list[dict]:
    """The defaults, the conformance settings and every setting of the default grid."""
    cls = registered()[name]
    grid = cls.size_grid
    return [
        {},
        *cls.conformance_settings,
        *(dict(zip(grid, v, strict=True)) for v in itertools.product(*grid.values())),
    ]


def without_needs(t: Trace) -> Trace:
    """``t`` with no needs: the mock model never re-reads, so the plans speak for the run."""
    return dataclasses.replace(t, events=tuple(dataclasses.replace(e, needs=()) for e in t.events))


def wobbled(t: Trace, amp: int) -> Trace:
    """``t`` with a provider residual of 0, amp, 2 amp, 0, .. on its calls: a request's whole count
    (the model's) falls back under a trigger now and then."""
    calls = tuple(
        dataclasses.replace(
            c, residual_tokens=c.index % 3 * amp, input_tokens=(c.input_tokens or 0) + c.index % 3 * amp
        )
        for c in t.calls
    )
    return dataclasses.replace(t, calls=calls)


@pytest.fixture(scope="module")
def corpora(mini_traces):
    from scenarios.swe_like import generate_suite

    hand = swe_trace([("out\n" * 40, 300), ("x" * 120, 60), ("short", 5)] * 4)
    return {
        "swe": generate_suite(7, 12),
        "hand": [hand],
        "real": [without_needs(t) for t in mini_traces[:12]],
    }


def entries(plan) -> list[tuple[int, int, int, int]]:
    return list(zip(*(np.asarray(x).tolist() for x in plan[:4]), strict=True))


class Recorder:
    """``policy`` as the loop sees it, writing down each call's decision as a plan states it."""

    def __init__(self, policy) -> None:
        self.policy, self.entries, self.summaries = policy, [], []

    def __getattr__(self, name):
        return getattr(self.policy, name)

    def before_call(self, trace, state, view, call, status=None):
        out = self.policy.before_call(trace, state, view, call, status)
        changes, summary = (out.changes, out.summary) if isinstance(out, Decision) else (out, None)
        self.entries += [(call, c.index, c.tokens, int(c.state)) for c in sorted(changes)]
        if summary is not None:
            self.summaries.append((call, summary.input_tokens, summary.output_tokens))
        return out


def decisions(policy, trace: Trace) -> tuple[list, tuple]:
    """What ``before_call`` decided at each call of the loop's replay of ``trace``, as plan entries and
    summaries."""
    recorder = Recorder(policy)
    loop_one(trace, recorder, ReplayModel(trace), None, None, "claude-sonnet-4-5")
    return recorder.entries, tuple(recorder.summaries)


@pytest.mark.parametrize(
    ("name", "knobs"),
    [
        (CLEAR, {"trigger": 3000, "keep": 1}),
        (CLEAR, {"trigger": 3000, "keep": 1, "token_count_method": "model", "clear_tool_inputs": True}),
        ("langchain_summarization", {"trigger": 3000, "keep": 4}),
        (
            "langchain_summarization",
            {"trigger": ["tokens", 3000], "keep": ["tokens", 800], "token_count": "provider"},
        ),
    ],
    ids=str,
)
def test_plans_of_conversations_are_the_loops_decisions(name, knobs):
    # a conversation of five runs: the engine replays it call by call, so the plan is held to the
    # decisions themselves (compaction carries from run to run)
    from scenarios.conversation import conversation

    policy = make_policy(name, **knobs)
    for seed in range(3):
        t = without_needs(conversation(seed))
        assert t.runs == 5
        want, summaries = decisions(policy, t)
        plan = policy.plan(t)
        assert entries(plan) == want and tuple(plan.summaries) == summaries and len(want) > 20


# ------------------------------------------------------------------------- langchain_clear_tool_uses
@pytest.mark.parametrize("knobs", settings(CLEAR), ids=str)
def test_clear_plans_give_the_loops_records(knobs, corpora):
    policy = make_policy(CLEAR, **knobs)
    for traces in corpora.values():
        assert check_policy(policy, traces) == []
        assert not replay_table(traces, policy, window=None, pricing="claude-sonnet-4-5").loop


@pytest.mark.parametrize(
    "knobs",
    [
        {"trigger": 20000, "keep": 1, "token_count_method": "model"},
        {"trigger": 10000, "keep": 0, "token_count_method": "model"},
        {
            "trigger": 20000,
            "keep": 2,
            "clear_at_least": 2000,
            "clear_tool_inputs": True,
            "token_count_method": "model",
        },
        {"trigger": 3000, "keep": 2, "clear_at_least": 3000, "exclude_tools": ["cat"]},
    ],
    ids=str,
)
def test_clear_plans_that_clear_on_most_calls_and_restore(knobs):
    from scenarios.swe_like import generate_suite

    traces = [wobbled(t, 2000) for t in generate_suite(7, 12)]
    policy = make_policy(CLEAR, **knobs)
    assert check_policy(policy, traces) == []
    plans = policy.plan_many(traces)
    state = plans.state
    assert (state == M).sum() > 1000  # clears re-issued call after call
    if knobs.get("token_count_method") == "model":
        assert (
            state == V
        ).sum() > 100  # restores: a call under the trigger sends the last copy's clears whole


def test_clear_plan_restores_what_a_call_under_the_trigger_sends_whole():
    # trigger 600, keep 2, the model's count: call 3 = 480 + 200 over: clear result 3; call 4 = 590
    # under: result 3 back (100 tokens); call 5 = 700 over: clear 3, 5, 7 (the copy re-issued whole).
    # With clear_at_least 1 (the plan for any knobs): the first clear is enough, call 5 clears 3 only
    t = six([0, 0, 0, 200, 0, 0])
    whole = [(3, 3, 7, M), (4, 3, 100, V), (5, 3, 7, M), (5, 5, 7, M), (5, 7, 7, M)]
    for at_least, want in ((0, whole), (1, whole[:3])):
        policy = make_policy(CLEAR, trigger=600, keep=2, token_count_method="model", clear_at_least=at_least)
        plan = policy.plan(t)
        assert entries(plan) == want and not plan.declined and plan.summaries == ()
        assert check_policy(policy, [t]) == []


def test_clear_plan_declines_a_run_with_needs(mini_traces):
    t = mini_traces[1]
    assert has_needs(t)
    for knobs in ({"trigger": 800, "keep": 2}, {"trigger": 800, "keep": 1, "clear_tool_inputs": True}):
        policy = make_policy(CLEAR, **knobs)
        plan = policy.plan_many([t, without_needs(t)])
        assert plan[0].declined and len(plan[0].index) == 0
        assert not plan[1].declined and len(plan[1].index) > 0
        table = replay_table([t, without_needs(t)], policy, window=None, pricing="claude-sonnet-4-5")
        assert sorted(table.loop) == [0]  # the loop replays the run with needs
        assert check_policy(policy, [t]) == []


def test_answered_flags_read_from_columns_are_answered_results(corpora):
    # the columns' reading (only assistants issue calls) and the events' own rule (another event does)
    odd = (
        ev(0, "system", "sys", 100),
        ev(1, "user", "task", 50, tool_call_ids=("c0",)),
        ev(2, "assistant", "cmd 0", 10, tool_call_ids=("c0",)),
        ev(3, "tool_result", "r", 100, tool_call_id="c0"),
        ev(4, "tool_result", "s", 100, tool_call_id="c0", tool_call_ids=("c0",)),
        ev(5, "assistant", "cmd 1", 10, tool_call_ids=("c1",)),
        ev(6, "tool_result", "t", 100, tool_call_id="c1"),
    )
    traces = [*itertools.chain(*corpora.values()), dataclasses.replace(six(), events=odd, calls=())]
    checked = 0
    for t in traces:
        results = np.asarray(tool_results(t), dtype=np.int64)
        got = answered_flags(t, results)
        assert results[got].tolist() == sorted(answered_results(t))
        checked += len(results)
    assert checked > 500
    assert answered_flags(traces[-1], np.array([3, 4, 6])).tolist() == [True, False, True]


# --------------------------------------------------------------------------- langchain_summarization
SUMMARIZE = "langchain_summarization"
S, D = int(ItemState.SUMMARIZED), int(ItemState.DROPPED)


@pytest.mark.parametrize("knobs", settings(SUMMARIZE), ids=str)
def test_summarization_plans_give_the_loops_records(knobs, corpora):
    policy = make_policy(SUMMARIZE, **knobs)
    for traces in corpora.values():
        assert check_policy(policy, traces) == []
        assert not replay_table(traces, policy, window=None, pricing="claude-sonnet-4-5").loop


@pytest.mark.parametrize(
    "knobs",
    [
        {"trigger": 800, "keep": 4, "summary_min_tokens": 32},
        {"trigger": 5000, "keep": 3, "trim_tokens_to_summarize": 50},  # mostly the fixed text
        {"trigger": {"messages": 10}, "keep": 4, "trim_tokens_to_summarize": None},
        {"trigger": [["messages", 12], {"tokens": 3000, "messages": 6}], "keep": ["fraction", 0.01]},
        {
            "trigger": ["tokens", 6000],
            "keep": ["tokens", 2000],
            "trim_tokens_to_summarize": 1500,
            "token_count": "provider",
        },
    ],  # fmt: skip
    ids=str,
)
def test_summarization_plans_that_summarize_again_and_again(knobs, corpora):
    from scenarios.swe_like import generate_suite

    policy = make_policy(SUMMARIZE, **knobs)
    # the provider's reported totals (request + output) reach the trigger before the local count does
    # when the residual is large
    traces = [wobbled(t, 1500) for t in generate_suite(7, 12)] + corpora["real"]
    assert check_policy(policy, traces) == []
    plans = policy.plan_many(traces)
    assert plans.declined is None
    calls = {(j, c) for j, p in enumerate(plans) for c in np.asarray(p.call).tolist()}
    assert len(calls) > 100  # summarized at more than 100 calls, the carrier resized each time
    assert sum(len(s) for s in plans.summaries or ()) > 80 or knobs.get("trim_tokens_to_summarize") == 50


def test_summarization_plan_of_the_hand_trace():
    # tests/test_policies_vendors.py's two cases. trim 150: call 3 summarizes the task (cut to 40
    # tokens), call 2 and result 3 (150 tokens given: a 20-token summary + 16 of prefix in the task's
    # slot); calls 4 and 5 summarize the summary and the next turn (36 + 10 + 100). trim 100: nothing
    # human is left of what fits, so each time the fixed text (28 tokens) and the rest DROPPED.
    t = six()
    prompt = 63  # the summary prompt: 236 bytes
    policy = make_policy(SUMMARIZE, trigger=350, keep=3, trim_tokens_to_summarize=150, summary_min_tokens=20)
    plan = policy.plan(t)
    assert entries(plan) == [
        (c, i, 36 if i == 1 else 0, S) for c, j in ((3, 2), (4, 4), (5, 6)) for i in (1, j, j + 1)
    ]
    assert plan.summaries == ((3, prompt + 150, 20), (4, prompt + 146, 20), (5, prompt + 146, 20))
    policy = make_policy(SUMMARIZE, trigger=350, keep=3, trim_tokens_to_summarize=100)
    plan = policy.plan(t)
    assert entries(plan) == [
        (c, i, 28 if i == 1 else 0, S if i == 1 else D)
        for c, j in ((3, 2), (4, 4), (5, 6))
        for i in (1, j, j + 1)
    ]
    assert plan.summaries == () and not plan.declined
    for knobs in (
        {"trim_tokens_to_summarize": 150, "summary_min_tokens": 20},
        {"trim_tokens_to_summarize": 100},
    ):
        assert check_policy(make_policy(SUMMARIZE, trigger=350, keep=3, **knobs), [t]) == []


def test_summarization_plan_declines_runs_with_needs_or_unrecorded_outputs(mini_traces):
    t = mini_traces[1]
    assert has_needs(t)
    policy = make_policy(SUMMARIZE, trigger=800, keep=4)
    plans = policy.plan_many([t, without_needs(t)])
    assert plans[0].declined and not plans[1].declined and len(plans[1].index) > 0
    table = replay_table([t, without_needs(t)], policy, window=None, pricing="claude-sonnet-4-5")
    assert sorted(table.loop) == [0]
    assert check_policy(policy, [t]) == []
    # the provider's totals hold the mock model's outputs: where the trace does not record one, the
    # plan cannot say them (the local count needs none)
    blind = dataclasses.replace(
        six(), calls=tuple(dataclasses.replace(c, output_tokens=None) for c in six().calls)
    )
    provider = make_policy(SUMMARIZE, trigger=["tokens", 400], keep=3, token_count="provider")
    assert provider.plan(blind).declined and not provider.plan(six()).declined
    assert not make_policy(SUMMARIZE, trigger=400, keep=3).plan(blind).declined
    assert check_policy(provider, [blind]) == []
    # switched off: nothing to plan, nothing declined
    off = make_policy(SUMMARIZE).plan(t)
    assert len(off.index) == 0 and not off.declined
