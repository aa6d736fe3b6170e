"""The planners of llm_summary, hybrid, anthropic_clear_tool_uses and the compactions that
``sim.policies.sparse_plans`` plans (``plan_many``) against
``before_call`` through the per-call loop: each run's plan must be exactly the changes and summarizer
calls the loop's ``before_call`` decides, call by call; the conformance checker then holds the batch
path's records to the loop's (``check_policy``)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from builders import swe_trace

from scenarios.facts import REAL_RUNS
from scenarios.swe_like import generate_run, generate_suite
from sim.checks.conformance import check_policy
from sim.engine.dispatch import loop_one
from sim.engine.model import ReplayModel
from sim.information.state import POSITIONAL, has_needs, issuer_of
from sim.policies.base import Decision, make_policy, registered
from sim.policies.llm_summary import cut_valid, turn_starts
from sim.policies.sparse_plans import result_issuers
from sim.policies.strands_sliding_window import Frame

POLICIES = (
    "llm_summary",
    "hybrid",
    "anthropic_clear_tool_uses",
    "anthropic_server_compaction",
    "codex_auto_compact",
    "claude_code_auto_compact",
)
# settings where the policy fires many times in a SWE-like run
MANY = {
    "llm_summary": [{"n": 1, "m": 0, "summary_min_tokens": 1}, {"n": 1, "m": 1}, {"n": 2, "m": 3}],
    "hybrid": [
        {"n": 1, "m": 0, "mask_n": 1, "summary_min_tokens": 1},
        {"n": 1, "m": 1, "mask_n": 3},
        {"n": 4, "m": 2, "mask_n": 1},
    ],
    "anthropic_clear_tool_uses": [
        {"trigger_tokens": 2000, "keep": 0},
        {"trigger_tokens": 3000, "keep": 1, "clear_tool_inputs": True},
        {"trigger_tokens": 3000, "keep": 2, "clear_at_least": 2000},
        {"trigger_tokens": 1000, "keep": 1, "exclude_tools": ["cmd 1", "cmd 3"], "clear_tool_inputs": True},
    ],
    "anthropic_server_compaction": [
        {"trigger_tokens": 50000, "summary_ratio": 1, "summary_max_tokens": 40000}
    ],
    "codex_auto_compact": [
        {"auto_compact_token_limit": 3000},
        {"auto_compact_token_limit": 2500, "user_message_max_tokens": 0, "summary_min_tokens": 1},
        {"auto_compact_token_limit": 1500, "summary_ratio": 1, "summary_max_tokens": 5000},
    ],
    "claude_code_auto_compact": [
        {"context_window": 4000, "max_output_tokens": 0, "buffer_tokens": 1000},
        {
            "context_window": 3000,
            "max_output_tokens": 500,
            "buffer_tokens": 0,
            "restore_file_max_tokens": 300,
        },
        {"context_window": 2000, "max_output_tokens": 0, "buffer_tokens": 0, "summary_ratio": 1},
    ],
}


def settings(name: str) -> list[dict]:
    """The defaults, the conformance settings, every setting of the default grid, the harsh ones."""
    cls = registered()[name]
    (k1, v1), *rest = cls.size_grid.items()
    grid = [{k1: a} for a in v1] if not rest else [{k1: a, rest[0][0]: b} for a in v1 for b in rest[0][1]]
    return [{}, *cls.conformance_settings, *grid, *MANY[name]]


def loop_decisions(policy, trace, monkeypatch) -> tuple[list, list]:
    """The loop's ``before_call`` decisions of one run: plan entries (call, index, tokens, state), sorted by
    index within a call, and summarizer calls (call, input, output)."""
    entries, summaries = [], []
    cls = type(policy)
    before = cls.before_call

    def spy(self, trace, state, view, call, status=None):
        d = before(self, trace, state, view, call, status)
        changes, summary = (d.changes, d.summary) if isinstance(d, Decision) else (d, None)
        entries.extend(sorted((call, c.index, c.tokens, int(c.state)) for c in changes))
        for s in summary if isinstance(summary, list) else [summary] if summary is not None else []:
            summaries.append((call, s.input_tokens, s.output_tokens))
        return d

    with monkeypatch.context() as m:
        m.setattr(cls, "before_call", spy)
        loop_one(trace, policy, ReplayModel(trace), None, None, None)
    return entries, summaries


def assert_plans_match(policy, traces, monkeypatch) -> int:
    """Every run's plan equals the loop's decisions; returns how many entries the plans held (a test that
    never plans anything proves nothing)."""
    plans = policy.plan_many(traces)
    assert len(plans) == len(traces)
    total = 0
    for t, plan in zip(traces, plans, strict=True):
        if has_needs(t):  # declined: the loop replays it
            assert plan.declined, t.trace_id
            continue
        entries, summaries = loop_decisions(policy, t, monkeypatch)
        # a planner declines a run without needs only where the policy cuts an item (sparse_plans)
        assert plan.declined == any(e[3] in POSITIONAL for e in entries), t.trace_id
        if plan.declined:
            continue
        got = list(zip(*(np.asarray(plan[f]).tolist() for f in range(4)), strict=True))
        assert got == entries, (policy, t.trace_id)
        assert [tuple(s) for s in plan.summaries] == summaries, (policy, t.trace_id)
        total += len(entries) + len(summaries)
    return total


@pytest.fixture(scope="module")
def swe():
    return generate_suite(7, 12)


def hand_traces():
    return [
        swe_trace([("out\n" * 40, 300), ("x" * 120, 60), ("short", 5)] * 4),
        swe_trace([("line\n" * 200, 1500), ("y" * 50, 30)] * 9),
    ]


@pytest.mark.parametrize("name", POLICIES)
def test_plans_equal_the_loop_on_swe_like_runs(name, swe, monkeypatch):
    fired = 0
    for s in settings(name):
        fired += assert_plans_match(make_policy(name, **s), swe, monkeypatch)
    assert fired > 0


def without_needs(t):
    """The run with its needs taken out: the planners decline every real run that records needs, and the
    structure of real runs is worth planning too."""
    return dataclasses.replace(t, events=tuple(dataclasses.replace(e, needs=()) for e in t.events))


@pytest.fixture(scope="module")
def real(mini_traces):
    return [*mini_traces[:4], *map(without_needs, mini_traces[:12])]


@pytest.mark.parametrize("name", POLICIES)
def test_plans_equal_the_loop_on_hand_traces_and_real_runs(name, real, monkeypatch):
    fired = 0
    for s in settings(name):
        fired += assert_plans_match(make_policy(name, **s), [*hand_traces(), *real], monkeypatch)
    assert fired > 0


@pytest.mark.parametrize("name", POLICIES)
def test_many_firings_plan_many_entries(name, swe, monkeypatch):
    """The harsh settings fire several times a run: the plans hold many entries (a summarizer several
    summaries in one run), and match the loop."""
    big = [swe[i] for i in (3, 4, 7, 8)]  # the longest runs (69k-109k tokens)
    for s in MANY[name]:
        p = make_policy(name, **s)
        assert assert_plans_match(p, big, monkeypatch) > 4 * 20
        if name != "anthropic_clear_tool_uses":
            assert max(map(len, p.plan_many(big).summaries)) > 2


@pytest.mark.parametrize("name", POLICIES)
def test_a_run_with_needs_is_declined(name, swe):
    with_needs = [generate_run(7, 0, REAL_RUNS), generate_run(7, 1, REAL_RUNS)]
    plans = make_policy(name).plan_many([swe[0], *with_needs, swe[1]])
    assert plans.declined is not None and plans.declined.tolist() == [False, True, True, False]


def test_a_run_whose_user_message_codex_cuts_is_declined():
    """A cut (BOUNDED) shows byte ranges, which a plan cannot hold: that run goes to the loop."""
    t = hand_traces()[1]  # its task (50 tokens) is cut to 20
    p = make_policy("codex_auto_compact", auto_compact_token_limit=3000, user_message_max_tokens=20)
    q = make_policy("codex_auto_compact", auto_compact_token_limit=3000, user_message_max_tokens=50)
    assert p.plan_many([t]).declined.tolist() == [True]
    assert q.plan_many([t]).declined is None and len(q.plan(t).summaries) > 1
    assert check_policy(p, [t]) == [] and check_policy(q, [t]) == []


@pytest.mark.parametrize("name", POLICIES)
def test_conformance_through_the_batch_path(name, swe, real):
    traces = [*hand_traces(), *swe[:6], *real[:2], *real[-6:], generate_run(7, 0, REAL_RUNS)]
    for s in settings(name):
        assert check_policy(make_policy(name, **s), traces) == []


def test_the_planners_tables_read_from_columns_equal_the_event_rules(swe, real):
    """``turn_starts``, ``cut_valid`` and ``result_issuers`` read the columns (no event objects); they
    must say what the rules over events say (``Frame.valid``, ``issuer_of``), also where an event other
    than an assistant lists a tool call id (the fallback to the event rules)."""
    t = hand_traces()[0]
    events = list(t.events)
    # a result that lists an id, and a later result answering it: the event rules pair the two results
    events[3] = dataclasses.replace(events[3], tool_call_ids=("x",))
    events[5] = dataclasses.replace(events[5], tool_call_id="x")
    odd = dataclasses.replace(t, events=tuple(events))
    for tr in [*hand_traces(), odd, *swe, *real]:
        assert turn_starts(tr) == [e.index for e in tr.events if e.kind == "assistant"]
        f = Frame(tr)
        assert cut_valid(tr) == [f.valid(i) for i in range(len(tr.events))], tr.trace_id
        by = issuer_of(tr)
        want = [by.get(e.index, -1) if e.kind == "tool_result" else -1 for e in tr.events]
        assert result_issuers(tr).tolist() == want, tr.trace_id
    assert cut_valid(odd) != cut_valid(t)  # the fallback made a difference: the test reaches it
