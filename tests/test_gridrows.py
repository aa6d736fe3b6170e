"""The lanes' result rows (sim.engine.fast.seed_rows): a seed engine with a limit replayed as lanes by
``replay_table`` (one setting: the runs are the lanes) and by a sweep's chunk of grid settings
(``replay_tables``), held to the per-call loop's rows by ``sim.checks.conformance.check_lanes``; what the
lanes decline or hand back is the loop's."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path

import pytest

from scenarios.swe_like import generate_run, generate_suite
from sim.checks.conformance import check_lanes
from sim.core.records import SUMMARY
from sim.engine.model import ReplayModel
from sim.importers import load_paths
from sim.policies.base import make_policy
from sim.util.paths import EMBEDDED_SUITE

PRICE = "claude-sonnet-4-5"
POINTS = [(8000, 1000), (16000, 4000), (16000, 12000), (32000, 4000), (64000, 12000)]
SWE = [generate_run(7, i) for i in range(10)]
WIDE = SWE + [generate_run(7, i) for i in range(10, 20)]  # 4.7 lanes a call position on average


def grid(**knobs):
    return [
        make_policy("seed_engine", context_token_limit=lim, keep_recent_tokens=keep, **knobs)
        for lim, keep in POINTS
    ]


def lane_counts(traces, policy, window, pricing=PRICE) -> tuple[int, int]:
    """(runs the lanes kept, runs they handed back to the loop) of one setting replayed alone."""
    from sim.engine.dispatch import replay_tables
    from sim.engine.fast.seed_rows import LaneGroup

    table = replay_tables(traces, [policy], [ReplayModel(t) for t in traces], window, pricing, min_width=0)[0]
    groups = [g for g in table.groups if isinstance(g, LaneGroup)]
    kept = sum(int(g.kept.sum()) for g in groups)
    return kept, sum(len(g.positions) for g in groups) - kept


@pytest.fixture(scope="module")
def embedded():
    """The embedded suite with its SWE-like runs' facts taken off: the lanes replay those 40 (they
    decline a trace with facts, and since the suite carries facts every one of them would go to the
    loop) and decline the 4 closed-loop scenarios, which keep theirs."""
    return [
        without_facts(t) if t.trace_id.startswith("swe-like") else t for t in load_paths([EMBEDDED_SUITE])
    ]


@pytest.mark.parametrize("mode", ["prune-then-summarize", "prune", "summarize"])
@pytest.mark.parametrize("run_status", ["appended", "off"])
def test_lane_rows_match_the_loop_on_the_embedded_suite(embedded, mode, run_status):
    policies = grid(mode=mode, run_status=run_status)
    assert check_lanes(policies, embedded, 200000, PRICE) == []
    kept, _ = lane_counts(embedded, policies[0], 200000)
    assert kept == 40 and len(embedded) == 44  # the lanes ran, and declined the traces with facts


@pytest.mark.parametrize("window", [20000, 30000])
def test_lanes_over_the_window_go_to_the_loop_and_the_rows_still_match(window):
    policies = grid(tool_result_max_bytes=4096)
    assert check_lanes(policies, SWE, window, PRICE) == []
    kept, handed = lane_counts(SWE, make_policy("seed_engine", context_token_limit=64000), window)
    assert kept > 0 and handed > 0  # some runs stayed on the lanes, some overflowed to the loop


@pytest.mark.parametrize("lanes", [0, 1 << 40])
def test_lane_rows_match_the_loop_whichever_way_the_lanes_advance(monkeypatch, lanes):
    """Started lanes call by call (``LOCKSTEP_LANES`` 0) or firing to firing in blocks (never call by
    call): the same rows as the loop's, windows and summaries included."""
    import sim.engine.fast.seed_lanes

    monkeypatch.setattr(sim.engine.fast.seed_lanes, "LOCKSTEP_LANES", lanes)
    assert check_lanes(grid(tool_result_max_bytes=4096), SWE, 30000, PRICE) == []
    assert check_lanes(grid(mode="summarize"), SWE[:5], 200000, PRICE) == []


def without_facts(t):
    facts = {"provides": (), "needs": (), "fact_spans": (), "fact_kinds": (), "supersedes": ()}
    return replace(t, events=tuple(replace(e, **facts) for e in t.events))


def test_lane_rows_match_the_loop_on_real_runs_unpriced(mini_traces):
    """The shared real traces: with their facts they are the loop's (declined); without, the lanes'."""
    policies = grid(tool_result_max_bytes=2048)
    assert check_lanes(policies, mini_traces[:10], "auto", None) == []
    assert lane_counts(mini_traces[:10], policies[0], "auto", None) == (0, 0)
    bare = [without_facts(t) for t in mini_traces[:10]]
    assert check_lanes(policies, bare, "auto", None) == []
    assert lane_counts(bare, policies[1], "auto", None)[0] == 10


@pytest.mark.parametrize("folder", ["swe-agent", "openhands-v0", "tau-bench", "claude-code-fixtures"])
def test_lane_rows_match_the_loop_on_every_shared_format(folder, mini_dir):
    """Each recorded format's text (facts stripped, so the lanes take them) at small limits, where
    summaries happen, with the recorded model's window and price."""
    import warnings

    from sim.util.paths import traces_dir

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # import notices about files no format recognises
        traces = [without_facts(t) for t in load_paths([traces_dir() / folder])][:30]
    points = [(4000, 500), (8000, 1000), (16000, 4000)]
    for knobs in ({}, {"mode": "summarize", "tool_result_max_bytes": 1024}):
        policies = [
            make_policy("seed_engine", context_token_limit=a, keep_recent_tokens=b, **knobs)
            for a, b in points
        ]
        assert check_lanes(policies, traces, "auto", "auto") == []
    assert lane_counts(traces, policies[0], "auto", "auto")[0] > 0


def test_the_checker_catches_a_wrong_column(monkeypatch):
    import sim.engine.fast.seed_rows

    real = sim.engine.fast.seed_rows.metric_lists

    def off_by_one(*a, **k):
        out = real(*a, **k)
        out["tokens_lost"] = [v + 1 for v in out["tokens_lost"]]
        return out

    monkeypatch.setattr(sim.engine.fast.seed_rows, "metric_lists", off_by_one)
    problems = check_lanes(grid()[:2], SWE[:3], 200000, PRICE)
    assert len(problems) == 2 * 2 * 3 and all("column tokens_lost" in p for p in problems)


def test_replay_table_of_a_limited_seed_engine_runs_no_loop(monkeypatch):
    """A batch of runs the lanes accept: the rows come from the lanes (the loop never runs), the same as
    the loop's rows; ``records()`` still gives the loop's records."""
    import sim.engine.dispatch
    from sim.checks.conformance import record_diff
    from sim.engine.dispatch import replay_many, replay_table
    from sim.results.tables import result_rows, table_rows

    policy = make_policy("seed_engine", context_token_limit=16000, keep_recent_tokens=4000)
    want_records = replay_many(WIDE, policy, window=200000, pricing=PRICE)
    want = result_rows(want_records, "test")
    assert sum(r.kind_count(SUMMARY) for r in want_records) > 0  # summaries made: not a vacuous comparison
    real_loop = sim.engine.dispatch.replay_loop

    def no_loop(*a, **k):
        raise AssertionError("the per-call loop ran")

    monkeypatch.setattr(sim.engine.dispatch, "replay_loop", no_loop)
    table = replay_table(WIDE, policy, window=200000, pricing=PRICE)
    assert json.dumps(table_rows(table, "test")) == json.dumps(want)
    monkeypatch.setattr(sim.engine.dispatch, "replay_loop", real_loop)
    assert all(record_diff(a, b) == [] for a, b in zip(table.records(), want_records, strict=True))


def test_narrow_batches_stay_on_the_loop():
    """Lanes pay each call position's arrays: a batch with fewer than ``LANES_MIN_WIDTH`` lanes a
    position on average (its calls over its longest run's) is faster on the loop, and stays there."""
    from sim.engine.dispatch import LANES_MIN_WIDTH, replay_table

    policy = make_policy("seed_engine", context_token_limit=16000, keep_recent_tokens=4000)
    longest = max(SWE, key=lambda t: len(t.calls))
    short = sorted(SWE, key=lambda t: len(t.calls))[:2]
    narrow = [longest, *short]
    assert sum(len(t.calls) for t in narrow) < LANES_MIN_WIDTH * len(longest.calls)
    assert len(replay_table(narrow, policy).loop) == 3
    assert sum(len(t.calls) for t in WIDE) >= LANES_MIN_WIDTH * len(longest.calls)
    assert len(replay_table(WIDE, policy).loop) == 0


# ------------------------------------------------------------------------------------------------ sweep
@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    from sim.trace.io import write_traces

    out = tmp_path_factory.mktemp("corpus") / "small.jsonl"
    write_traces(list(load_paths([EMBEDDED_SUITE / "closed_loop.jsonl"])) + generate_suite(7, 9), out)
    return out


def _sweep(corpus: Path, out: Path, workers: int, chunk_size: int) -> str:
    from sim.sweep.execute import SweepSpec, run_sweep

    spec = SweepSpec(
        policy="seed_engine",
        grid=("policy.context_token_limit=16000,32000", "policy.keep_recent_tokens=2000,8000"),
        scenario=str(corpus),
        pricing=PRICE,
        results=str(out),
        chunk_size=chunk_size,
    )
    return hashlib.sha256(run_sweep(spec, workers=workers, progress=False).read_bytes()).hexdigest()


def test_a_seed_engine_sweep_runs_a_chunks_settings_as_lanes_with_the_same_bytes(
    corpus, tmp_path, monkeypatch
):
    import sim.engine.dispatch
    import sim.engine.fast.seed_rows

    settings_together: list[int] = []
    real = sim.engine.fast.seed_rows.lane_columns

    def spy(traces, policies, *a, **k):
        settings_together.append(len(policies))
        return real(traces, policies, *a, **k)

    monkeypatch.setattr(sim.engine.fast.seed_rows, "lane_columns", spy)
    lanes = _sweep(corpus, tmp_path / "lanes", 1, 6)
    assert settings_together and max(settings_together) == 4  # a chunk's four settings at once
    assert _sweep(corpus, tmp_path / "lanes2", 2, 4) == lanes  # other chunks, two workers: same bytes
    monkeypatch.setattr(
        sim.engine.dispatch,
        "_replay_lanes",
        lambda t, policies, *a, **k: ([[] for _ in policies], [{} for _ in policies]),
    )
    assert _sweep(corpus, tmp_path / "loop", 1, 6) == lanes  # the per-call loop's results.parquet


def test_lane_units_group_a_grids_chunks_of_the_same_runs():
    from sim.sweep.settings import Setting
    from sim.sweep.units import Chunk, lane_units

    def chunk(name, limit, runs, **extra):
        cfg = {"policy": {"context_token_limit": limit, "keep_recent_tokens": 100, **extra}, "model": {}}
        setting = Setting((f"policy.context_token_limit={limit}",), cfg, name, cfg["policy"])
        return Chunk("s", "auto", setting, tuple((i, f"k{limit}{i}", "h") for i in runs))

    a, b = chunk("seed_engine", 1000, [0, 1]), chunk("seed_engine", 2000, [0, 1])
    c = chunk("seed_engine", 3000, [2])  # other runs
    d = chunk("seed_engine", 4000, [0, 1], mode="prune")  # another knob differs
    e = chunk("observation_masking", 5000, [0, 1])
    assert lane_units([a, c, b, d, e]) == [(a, b), (c,), (d,), (e,)]
    assert lane_units([a, b], workers=2) == [(a,), (b,)]  # a unit each worker while there are few
