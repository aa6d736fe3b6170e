"""The per-trace tables and shortcuts that make the slowest policies' decisions cheap enough to size on
(``ctxsim size --policy``, issue 40): each gives the very decisions of the walk it stands for. Where
a shortcut sits beside the rule it restates (LangChain's plain clears, the OpenHands message walk
resumed from the last call's), the records are compared byte for byte with the rule alone."""

import pytest

from sim.checks.conformance import record_diff
from sim.engine.dispatch import loop_one
from sim.engine.model import ReplayModel
from sim.policies import openhands_memory
from sim.policies.autogen_token_limited import member_table
from sim.policies.base import make_policy
from sim.policies.langchain_clear_tool_uses import LangchainClearToolUses, answered_tables
from sim.policies.openhands_memory import EV, PH, SUM, event_ids
from tests.builders import swe_trace


@pytest.fixture(scope="module")
def traces():
    from scenarios.swe_like import generate_run

    return [generate_run(3, i) for i in range(6)]


def records(traces, policy, window=200000):
    return [
        loop_one(t, policy, ReplayModel(t), None, window, "claude-sonnet-4-5") for t in traces
    ]  # the per-call loop: the reference every sizing is held to


def same_records(a, b):
    for ra, rb in zip(a, b, strict=True):
        assert record_diff(ra, rb) == [], (ra.trace_id, record_diff(ra, rb))


@pytest.mark.parametrize(
    "knobs",
    [
        {"trigger": 40000, "keep": 1},
        {"trigger": 60000, "keep": 3},
        {"trigger": 2000, "keep": 0},
        {"trigger": 30000, "keep": 5, "token_count_method": "model"},
    ],
)
def test_langchain_plain_clears_from_tables_equal_the_walk(traces, knobs, monkeypatch):
    policy = make_policy("langchain_clear_tool_uses", **knobs)
    assert policy._plain()
    fast = records(traces, policy)
    assert sum(len(r.changes["index"]) for r in fast) > 0  # the trigger fired: there is something to hold
    monkeypatch.setattr(LangchainClearToolUses, "_plain", lambda self: False)  # the walk of candidates
    same_records(fast, records(traces, policy))


def test_langchain_tables_hand_trace():
    # system, task, then (assistant, result) x 4: the results are events 3, 5, 7, 9, each answered
    t = swe_trace([("a" * 40, 100), ("b" * 40, 100), ("c" * 40, 100), ("d" * 40, 100)])
    results, count, cleared = answered_tables(t, 3, 9)
    assert results == (3, 5, 7, 9)
    assert count == [0, 1, 2, 3, 4]
    assert [i for i, _ in cleared] == [3, 5, 7, 9]
    assert cleared[0][1] == (3, 2, 3, 9, "clear", None)  # MASKED (2) at the placeholder's 3 tokens, 9 bytes


@pytest.mark.parametrize(
    "name, knobs",
    [
        ("openhands_amortized_forgetting", {"max_size": 50, "keep_first": 1}),
        ("openhands_amortized_forgetting", {"max_size": 9, "keep_first": 2}),
        ("openhands_llm_summarizing", {"max_size": 50, "keep_first": 4}),
        ("openhands_recent_events", {"max_events": 10, "keep_first": 2}),
    ],
)
def test_openhands_walk_resumed_from_the_last_call_equals_a_fresh_walk(traces, name, knobs, monkeypatch):
    policy = make_policy(name, **knobs)
    resumed = records(traces, policy, 60000)
    real = openhands_memory._walk
    resumes = []

    def fresh(info, entries):
        resumes.append(info.scan is not None and entries[: len(info.scan[0])] == info.scan[0])
        info.scan = None  # nothing to go on from: every walk from the first entry
        return real(info, entries)

    monkeypatch.setattr(openhands_memory, "_walk", fresh)
    same_records(resumed, records(traces, policy, 60000))
    if name != "openhands_recent_events":  # its view slides every call: it seldom starts the same
        assert sum(resumes) > len(resumes) // 2  # the shortcut is taken on most calls


def test_event_ids_reads_events_and_keeps_the_others_in_order():
    entries = [(EV, 1), (EV, 2), (PH, 3, 5, 6), (EV, 2), (SUM, 4, 7, 8)]
    assert event_ids(entries) == ({1, 2}, [(PH, 3, 5, 6), (SUM, 4, 7, 8)])
    assert event_ids([(EV, 0), (EV, 0), (EV, 5)]) == ({0, 5}, [])
    assert event_ids([]) == (set(), [])


def test_member_table_lays_messages_end_to_end():
    # system (not a message), task, then (assistant, result) x 2: messages 1, 2, 3, 4, 5, one event each
    t = swe_trace([("x", 10), ("y", 10)])
    table = member_table(t)
    assert table.flat == [1, 2, 3, 4, 5]
    assert table.start == [0, 1, 2, 3, 4, 5]
    assert table.results == [3, 5] and table.issuers == [2, 4]


def sizing_records(traces, policies, behaviours=({},), window=60000):
    """Every setting's records, setting after setting over the same trace objects (as a sizing replays
    them: a per-trace table made by one setting is read by the next)."""
    return [
        loop_one(t, p, ReplayModel(t, **b), None, window, "claude-sonnet-4-5")
        for b in behaviours
        for p in policies
        for t in traces
    ]


@pytest.mark.parametrize("name", ["openhands_amortized_forgetting", "openhands_llm_summarizing"])
def test_openhands_idle_decisions_shared_by_settings_equal_each_settings_own(name, monkeypatch):
    from scenarios.swe_like import generate_run

    cls = type(make_policy(name))
    assert cls.shares_idle
    policies = [make_policy(name, max_size=m, keep_first=k) for m in (200, 50, 100) for k in (1, 4)]
    # the same condenser after another step, which changes the view: its views are its own
    policies.append(
        make_policy(
            "pipeline", steps=[{"name": "observation_masking", "n": 3}, {"name": name, "max_size": 40}]
        )
    )
    behaviours = ({}, {"on_missing": "degrade", "summarizer": "oracle"})
    shared = sizing_records([generate_run(5, i) for i in range(8)], policies, behaviours)
    monkeypatch.setattr(cls, "shares_idle", False)  # each setting decides every call itself
    same_records(shared, sizing_records([generate_run(5, i) for i in range(8)], policies, behaviours))


def test_openhands_idle_table_is_read_by_the_second_setting(monkeypatch):
    from scenarios.swe_like import generate_run

    traces = [generate_run(5, i) for i in (0, 1, 3)]  # 124, 30 and 60 events: none over 200
    decided = []
    real = openhands_memory.V0Condenser._decide

    def counted(self, t, st, view, request):
        decided.append(self.max_size)
        return real(self, t, st, view, request)

    monkeypatch.setattr(openhands_memory.V0Condenser, "_decide", counted)
    first = make_policy("openhands_amortized_forgetting", max_size=200, keep_first=0)
    second = make_policy("openhands_amortized_forgetting", max_size=200, keep_first=4)
    sizing_records(traces, [first], window=None)
    calls = sum(len(t.calls) for t in traces)
    assert decided.count(200) == calls  # the first setting decides every call (none over 200 events)
    decided.clear()
    sizing_records(traces, [second], window=None)
    assert decided == []  # the second reads every call's decision from the table


@pytest.mark.parametrize(
    "name, knobs",
    [
        ("langchain_clear_tool_uses", {"trigger": 30000, "keep": 2}),
        ("openhands_recent_events", {"max_events": 10}),
        ("autogen_token_limited", {"token_limit": 16000}),
        ("llm_summary", {}),
        ("tool_result_head_tail", {}),  # cuts: a change that goes through ``change`` itself
    ],
)
def test_loop_changes_before_equals_change_one_by_one(traces, name, knobs, monkeypatch):
    from sim.engine import loop

    policy = make_policy(name, **knobs)
    fast = records(traces, policy, 60000)

    def one_by_one(self, k, changes):  # the reference: ``_Run.change`` for each, in order
        first = -1
        for ch in changes:
            self.change(k, ch)
            if first < 0 or ch.index < first:
                first = ch.index
        return first

    monkeypatch.setattr(loop._Run, "changes_before", one_by_one)
    same_records(fast, records(traces, policy, 60000))
