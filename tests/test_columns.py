"""Result rows and metrics straight from the batch's columns (``replay_table``), against the records."""

import json

import pytest
from builders import swe_trace
from test_conformance import settings_of

from sim.engine.dispatch import replay_many, replay_table
from sim.metrics.compute import compute_metric_columns, table_metric_columns
from sim.policies.base import make_policy, registered
from sim.results.tables import result_rows, table_columns, table_rows


def _embedded(n=None):
    from sim.importers import load_paths
    from sim.util.paths import EMBEDDED_SUITE

    return list(load_paths([EMBEDDED_SUITE]))[:n]


def test_hand_trace_metrics_from_columns():
    # events: system 100, task 50, then (assistant 10, result 100) x 4; calls see 150, 260, 370, 480.
    # n=1 masks result 3 before call 2 and result 5 before call 3; each placeholder is
    # "Old environment output: (1 lines omitted)" (41 bytes) -> ceil((41 + 19) / 4.0) = 15 tokens
    t = swe_trace([("x", 100)] * 4)
    table = replay_table([t], make_policy("observation_masking", n=1), pricing=None)
    assert not table.loop  # the batch path made it
    m = table_metric_columns(table)
    assert m["calls"] == [4]
    assert m["cumulative_input_tokens"] == [150 + 260 + (370 - 100 + 15) + (480 - 200 + 30)]  # 1005
    assert m["cumulative_output_tokens"] == [28]
    assert m["peak_context_tokens"] == [310]
    assert m["compactions"] == [2] and m["compactions_prune"] == [2]
    assert m["tokens_reclaimed"] == [2 * (100 - 15)]
    assert m["compaction_frequency"] == [50.0]
    assert m["cost_microusd"] == [None]
    assert m["answer_outcome"] == ["complete"] and m["answer_completed"] == [True]
    assert m == compute_metric_columns(table.records())


def test_rows_without_records(monkeypatch):
    """Rows of batch-path runs never build a run's record or its tables."""
    import sim.engine.dispatch

    traces = _embedded(8)
    want = result_rows(replay_many(traces, make_policy("observation_masking")), "v")

    def refuse(*a, **k):
        raise AssertionError("a record was built")

    monkeypatch.setattr(sim.engine.dispatch, "run_columns", refuse)
    monkeypatch.setattr(sim.engine.dispatch, "assemble_record", refuse)
    table = replay_table(traces, make_policy("observation_masking"))
    assert table_rows(table, "v") == want
    with pytest.raises(AssertionError, match="a record was built"):
        table.records()


def test_columns_are_the_rows_transposed():
    traces = _embedded(5)
    table = replay_table(traces, make_policy("tool_result_head_tail"))
    cols = table_columns(table, "v")
    rows = table_rows(table, "v")
    assert list(cols) == list(rows[0])
    assert [dict(zip(cols, r, strict=True)) for r in zip(*cols.values(), strict=True)] == rows


@pytest.mark.parametrize("name", sorted(registered()))
def test_rows_from_columns_equal_rows_from_records(name, mini_traces):
    """Byte-identical rows for every policy and setting, with a window that sends some runs back to the
    loop (mixed tables: loop records and batch columns interleaved), and unpriced."""
    traces = _embedded(12) + mini_traces[:6]
    for params in settings_of(name):
        policy = make_policy(name, **params)
        for window, pricing in (("auto", "auto"), (20000, None)):
            want = result_rows(replay_many(traces, policy, window=window, pricing=pricing), "v")
            got = table_rows(replay_table(traces, policy, window=window, pricing=pricing), "v")
            assert json.dumps(got) == json.dumps(want), (name, params, window)


def test_mixed_table_keeps_order():
    """A window between the runs' peaks: some runs go to the loop, the rest stay columns, in order."""
    traces = [swe_trace([("x" * 40, 900)] * 6, trace_id="big"), swe_trace([("x", 10)] * 3, trace_id="small")]
    traces += [swe_trace([("y", 20)] * 5, trace_id="small2")]
    policy = make_policy("raw")
    table = replay_table(traces, policy, window=2000, pricing=None)
    assert list(table.loop) == [0]  # "big" passes 2000 tokens: the loop says where it stops
    rows = table_rows(table, "v")
    assert [r["trace_id"] for r in rows] == ["big", "small", "small2"]
    assert [r["finish_reason"] for r in rows] == ["context-overflow", "completed", "completed"]
    assert rows == result_rows(replay_many(traces, policy, window=2000, pricing=None), "v")


def test_pipeline_of_batch_path_steps_stays_on_the_batch_path():
    from sim.engine.dispatch import batch_path, replay

    steps = [{"name": "tool_result_head_tail", "max_chars": 50, "head_chars": 20, "tail_chars": 10}]
    steps.append({"name": "observation_masking", "n": 1})
    policy = make_policy("pipeline", steps=steps)
    assert batch_path(policy) and policy.plans
    t = swe_trace([("x" * 120, 60), ("short", 5)] * 3)
    table = replay_table([t], policy, pricing=None)
    assert not table.loop  # columns, no loop record
    loop = replay(t, policy, pricing=None, observer=lambda k, v: None)  # an observer forces the loop
    assert table.records()[0].calls["input_tokens"].tolist() == loop.calls["input_tokens"].tolist()
    assert table_metric_columns(table) == compute_metric_columns([loop])
    # two pre-call steps: the second reads what the first left, so the loop replays them
    two = make_policy(
        "pipeline", steps=[{"name": "observation_masking"}, {"name": "openhands_observation_masking"}]
    )
    assert not batch_path(two)


@pytest.mark.parametrize("name", ["raw", "observation_masking", "seed_engine"])
def test_rows_from_columns_equal_rows_from_records_beyond_one_run(name):
    """A batch mixing what only the loop replays (a 5-run conversation, a trace with a child, a transform
    that moved calls) with what the batch path does (a plain trace, a transform that moved nothing) gives
    the same rows from its columns as from its records, the issue-25 columns included."""
    from test_children import WITH_CHILD

    from scenarios.conversation import conversation
    from sim.engine.model import ReplayModel
    from sim.transforms.base import apply_all, make_transform

    plain = _embedded(3)
    code_mode = [make_transform("code_mode", n=2)]
    moved = apply_all(plain[0], code_mode, ReplayModel(plain[0]))
    still = apply_all(plain[1], [make_transform("delegate_research", min_span=10_000)], ReplayModel(plain[1]))
    assert moved.moved and not still.moved and still.applied  # a label but nothing moved: a simple trace
    traces = [conversation(), plain[2], WITH_CHILD, moved, still]
    assert [t.is_simple for t in traces] == [False, True, False, False, True]
    policy = make_policy(name)
    table = replay_table(traces, policy, pricing="claude-sonnet-4-5")
    want = result_rows(table.records(), "v")
    got = table_rows(table, "v")
    assert json.dumps(got) == json.dumps(want)
    assert [r["runs"] for r in got] == [5, 1, 1, 1, 1]
    assert got[2]["child_calls"] > 0 and got[4]["transforms"].startswith("delegate_research")
