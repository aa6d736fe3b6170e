"""The grid path (sim.engine.fast.seed_grid, sim.engine.fast.seed_lanes): every setting of a seed_engine grid
replayed together, held to the per-call loop's records and metrics; what it declines goes to the loop."""

import dataclasses

import numpy as np
import pytest

from scenarios.swe_like import generate_run
from sim.analysis.size import evaluate
from sim.checks.conformance import check_grid
from sim.engine.fast.seed_grid import settings_decline, trace_declines
from sim.engine.model import ReplayModel
from sim.policies.base import make_policy

TRACES = [generate_run(7, i) for i in range(6)]
PRICE = "claude-sonnet-4-5"


def grid(**knobs):
    points = [(8000, 1000), (8000, 4000), (16000, 1000), (16000, 12000), (32000, 4000), (64000, 12000)]
    return [make_policy("seed_engine", **knobs)] + [
        make_policy("seed_engine", context_token_limit=lim, keep_recent_tokens=keep, **knobs)
        for lim, keep in points
    ]


@pytest.mark.parametrize("mode", ["prune-then-summarize", "prune", "summarize"])
@pytest.mark.parametrize("run_status", ["appended", "off"])
def test_grid_path_matches_the_loop(mode, run_status):
    assert check_grid(grid(mode=mode, run_status=run_status), TRACES, 200000, PRICE) == []


@pytest.mark.parametrize("mode", ["prune-then-summarize", "summarize"])
def test_lanes_advanced_call_by_call_match_the_loop(monkeypatch, mode):
    """The started lanes of a wide grid advance call position by call position (``_lockstep``); the
    checker's one-trace grids are narrow (blocks), so the call-by-call way is forced here."""
    import sim.engine.fast.seed_lanes

    monkeypatch.setattr(sim.engine.fast.seed_lanes, "LOCKSTEP_LANES", 0)
    assert check_grid(grid(mode=mode), TRACES, 200000, PRICE) == []
    assert check_grid(grid(tool_result_max_bytes=4096), TRACES, 30000, PRICE) == []


@pytest.mark.parametrize("window", [None, 30000])
@pytest.mark.parametrize("run_status", ["appended", "off"])
def test_blocks_and_call_by_call_give_the_same_figures_rows_and_summaries(monkeypatch, window, run_status):
    """Both ways the started lanes advance, on many runs at once (the checker replays one at a time):
    every figure, per-call row and summary call the same."""
    import sim.engine.fast.seed_lanes
    from sim.engine.common import rules_and_price

    traces = [generate_run(11, i) for i in range(24)]
    models = [ReplayModel(t) for t in traces]
    policies = grid(run_status=run_status, tool_result_max_bytes=4096)
    rules, price = rules_and_price(None, PRICE)
    got = []
    for lanes in (0, 1 << 40):
        monkeypatch.setattr(sim.engine.fast.seed_lanes, "LOCKSTEP_LANES", lanes)
        rows, out = [], {}
        ok, figures = sim.engine.fast.seed_lanes.grid_figures(
            traces, policies, models, [window] * len(traces), rules, price, rows, out
        )
        summaries = sorted(
            (int(k), int(lane), int(i), int(o))
            for ks, lanes_, s_in, s_out in out.get("summaries", [])
            for k, lane, i, o in zip(ks, lanes_, s_in, s_out, strict=True)
        )
        got.append((ok, figures, rows, out, summaries))
    (ok0, f0, r0, o0, s0), (ok1, f1, r1, o1, s1) = got
    assert np.array_equal(ok0, ok1) and s0 == s1 and len(s0) > 0
    assert all(np.array_equal(f0[name], f1[name]) for name in f0)
    assert all(np.array_equal(o0[name], o1[name]) for name in ("delta", "cleared", "cut", "summary_tokens"))
    assert len(r0) == len(r1) and all(
        a0 == a1 and all(np.array_equal(c0[name], c1[name]) for name in c0)
        for (a0, c0), (a1, c1) in zip(r0, r1, strict=True)
    )
    if window is not None:
        assert not ok0.all() and ok0.any()


def test_lanes_that_fire_at_the_first_call_match_the_loop():
    """Limits below the first request: those lanes leave their run's pristine lane at call 0 (the
    calls before a lane starts are its run's, none here), the others later or never."""
    points = [(1500, 100), (2000, 500), (3000, 1000), (6000, 500), (200000, 1000)]
    policies = [make_policy("seed_engine")] + [
        make_policy("seed_engine", context_token_limit=lim, keep_recent_tokens=keep) for lim, keep in points
    ]
    from sim.engine.fast.seed_static import GridStatic
    from sim.policies.seed_messages import OUTPUT_CONTRACT_TOKENS

    first = min(int(GridStatic(t, policies[1]).appended[0]) for t in TRACES)  # the first call's estimate
    assert first > 2000 - OUTPUT_CONTRACT_TOKENS  # (over the two lowest limits' triggers)
    assert check_grid(policies, TRACES, 200000, PRICE) == []


@pytest.mark.parametrize("window", [20000, 30000])
def test_lanes_that_would_overflow_leave_the_grid_and_the_rest_still_match(window):
    policies = grid(tool_result_max_bytes=4096)
    assert check_grid(policies, TRACES, window, PRICE) == []
    from sim.engine.common import rules_and_price
    from sim.engine.fast.seed_lanes import grid_figures

    rules, price = rules_and_price(None, PRICE)
    ok, _ = grid_figures(TRACES, policies, [ReplayModel(t) for t in TRACES], [window] * 6, rules, price)
    assert not ok.all() and ok.any()  # some lanes left the grid, some stayed


def test_checker_catches_a_wrong_figure(monkeypatch):
    import sim.engine.fast.seed_lanes

    real = sim.engine.fast.seed_lanes.grid_figures

    def off_by_one(*a, **k):
        ok, figures = real(*a, **k)
        figures["input_tokens"] = figures["input_tokens"] + 1
        return ok, figures

    monkeypatch.setattr(sim.engine.fast.seed_lanes, "grid_figures", off_by_one)
    problems = check_grid(grid(), TRACES[:1], 200000, PRICE)
    assert len(problems) == len(grid()) and "input_tokens" in problems[0]


def test_the_grid_path_declines_what_it_does_not_model():
    assert settings_decline(grid()) is None
    assert settings_decline(grid() + [make_policy("observation_masking")]) == "not seed_engine"
    assert settings_decline(grid(max_turns=5)) == "budgets"
    assert "other than" in settings_decline(
        [make_policy("seed_engine"), make_policy("seed_engine", mode="prune")]
    )
    assert trace_declines(TRACES[0], ReplayModel(TRACES[0], max_turns=3)) is not None
    from sim.importers import load_paths
    from sim.util.paths import EMBEDDED_SUITE

    with_facts = [t for t in load_paths([EMBEDDED_SUITE]) if any(e.needs for e in t.events)]
    assert with_facts and trace_declines(with_facts[0], ReplayModel(with_facts[0])) == "facts"


def test_size_gives_the_same_results_on_and_off_the_grid():
    from sim.importers import load_paths
    from sim.util.paths import EMBEDDED_SUITE

    traces = TRACES + list(load_paths([EMBEDDED_SUITE]))[:4]  # the suite's traces with facts: the loop
    args = (traces, "seed_engine", [16000, 32000, 200000], [2000, 8000], 200000, PRICE)
    on, off = evaluate(*args), evaluate(*args, grid=False)
    assert len(on) == len(off) == 7
    for a, b in zip(on, off, strict=True):
        for f in (
            "cost",
            "tokens",
            "facts_seen",
            "facts_lost",
            "refetch",
            "completed",
            "peak",
            "compactions",
            "output",
        ):
            assert np.array_equal(getattr(a, f), getattr(b, f)), f
        assert (a.label, a.outcome, a.overflow_runs) == (b.label, b.outcome, b.overflow_runs)
    assert any(s.compactions.sum() > 0 for s in on[1:])  # the grid compacts: not a vacuous comparison


def test_grid_path_matches_the_loop_on_real_runs(mini_traces):
    """Recorded text (JSON escapes, non-ASCII, bounded results) and the recorded model's window."""
    from dataclasses import replace

    from sim.cost.models import resolve_window

    def without_facts(t):
        facts = {"provides": (), "needs": (), "fact_spans": (), "fact_kinds": (), "supersedes": ()}
        return replace(t, events=tuple(replace(e, **facts) for e in t.events))

    traces = [without_facts(t) for t in mini_traces[:8]]
    assert all(trace_declines(t, ReplayModel(t)) is None for t in traces)
    window = resolve_window(traces[0].model)
    policies = grid(tool_result_max_bytes=2048) + [
        make_policy(
            "seed_engine", context_token_limit=4000, keep_recent_tokens=500, tool_result_max_bytes=2048
        )
    ]
    assert check_grid(policies, traces, window) == []


def test_the_bare_kernel_gives_the_grid_paths_cumulative_input():
    from sim.commands.engine_speed import load_kernel
    from sim.engine.common import rules_and_price
    from sim.engine.fast.seed_lanes import grid_figures

    kernel = load_kernel()
    limits, keeps = np.array([8000, 16000, 16000, 64000]), np.array([1000, 1000, 12000, 4000])
    models = [ReplayModel(t) for t in TRACES]
    got = kernel.kernel(kernel.Inputs(TRACES, models, keeps), limits, keeps)
    policies = [
        make_policy(
            "seed_engine",
            context_token_limit=int(a),
            keep_recent_tokens=int(b),
            mode="prune",
            run_status="off",
        )
        for a, b in zip(limits, keeps, strict=True)
    ]
    assert check_grid(policies, TRACES, None, PRICE) == []
    rules, price = rules_and_price(None, PRICE)
    _, figures = grid_figures(TRACES, policies, models, [None] * len(TRACES), rules, price)
    assert np.array_equal(got, figures["input_tokens"]) and got.shape == (4, 6)


def test_bench_grid_reports_both_rates_and_their_ratio(capsys):
    from sim.cli import main

    assert main(["bench", "--grid", "--traces", "3", "--repeats", "1", "--format", "json"]) == 0
    import json

    row = json.loads(capsys.readouterr().out)
    assert row["same_cumulative_input"] is True and row["settings"] == 395
    assert row["grid_calls_per_s"] > 0 and row["ratio"] == round(
        row["grid_calls_per_s"] / row["kernel_calls_per_s"], 4
    )
    assert main(["bench", "--grid", "--traces", "0"]) == 2


def test_the_elided_transcript_length_is_prompt_units():
    """The grid's arithmetic for a summarizer transcript over its budget, against the function."""
    from sim.engine.fast.seed_lanes_compact import elided_chars
    from sim.policies.seed_messages import ELISION_RESERVE, INPUT_BUDGET, INSTRUCTION_CHARS, prompt_units

    rng = np.random.default_rng(3)
    blocks = [None if rng.random() < 0.2 else int(rng.integers(5, 2004)) for _ in range(400)]
    bl = np.concatenate([[0], np.cumsum([b or 0 for b in blocks])])
    bc = np.concatenate([[0], np.cumsum([b is not None for b in blocks])])
    checked = 0
    for _ in range(300):
        lo, hi = sorted(int(x) for x in rng.integers(0, 401, 2))
        prev = int(rng.choice([-1, int(rng.integers(1, 9000))]))
        shown = [b for b in blocks[lo:hi] if b is not None]
        fixed = (0 if prev < 0 else 19 + prev + 2) + INSTRUCTION_CHARS
        budget = INPUT_BUDGET - fixed - ELISION_RESERVE
        if sum(shown) + 2 * len(shown) <= budget:
            continue
        got = elided_chars(
            bl + 2 * bc, np.array([lo]), np.array([hi]), np.array([budget]), np.array([prev]), bc
        )
        assert int(got[0]) == prompt_units(shown, None if prev < 0 else prev)[0]
        checked += 1
    assert checked > 50


@pytest.mark.parametrize("run_status", ["appended", "off"])
def test_seed_engine_without_a_limit_stays_off_the_loop(monkeypatch, run_status):
    """No limit, no budgets: the runs are lanes (sim.engine.fast.seed_unlimited.replay_unlimited), the loop's
    records."""
    import sim.engine.dispatch
    from sim.checks.conformance import record_diff
    from sim.cost.cache import CostModel
    from sim.engine.common import rules_and_price
    from sim.engine.dispatch import replay_many

    policy = make_policy("seed_engine", run_status=run_status, tool_result_max_bytes=4096)
    rules, price = rules_and_price(None, PRICE)
    models = [ReplayModel(t) for t in TRACES]
    want = [
        sim.engine.dispatch.replay_loop(t, policy, m, None, 200000, CostModel(rules, price))
        for t, m in zip(TRACES, models, strict=True)
    ]

    def no_loop(*a, **k):
        raise AssertionError("the per-call loop ran")

    monkeypatch.setattr(sim.engine.dispatch, "replay_loop", no_loop)
    got = replay_many(TRACES, policy, models, window=200000, pricing=PRICE)
    assert all(record_diff(a, b) == [] for a, b in zip(want, got, strict=True))
    assert sum(r.n_calls for r in got) == sum(len(t.calls) for t in TRACES)
    assert any(len(r.changes["kind"]) for r in got)  # some results were bounded at settle time


def test_grid_path_declines_conversations_and_size_answers_as_the_loop():
    """A conversation of several runs is the loop's (the durable record across runs is not on the grid):
    the grid path declines it by name, and size's figures over it are the loop's."""
    from scenarios.conversation import conversation

    conv = conversation()
    assert conv.runs == 5
    assert trace_declines(conv, ReplayModel(conv)) == "several runs, children or transforms"
    traces = [conv, generate_run(7, 3)]
    on = evaluate(traces, "seed_engine", [16000, 32000], [4000], window=None, pricing="claude-sonnet-4-5")
    off = evaluate(traces, "seed_engine", [16000, 32000], [4000], None, "claude-sonnet-4-5", grid=False)
    assert len(on) == len(off) == 3  # the baseline and the two settings
    for a, b in zip(on, off, strict=True):
        for f in dataclasses.fields(a):
            x, y = getattr(a, f.name), getattr(b, f.name)
            assert np.array_equal(x, y) if isinstance(x, np.ndarray) else x == y, f.name
    assert on[1].compactions[0] > 0  # the conversation compacts at 16k: not a vacuous comparison


def test_a_trace_read_as_columns_says_whether_it_has_facts_without_its_events(mini_dir, tmp_path):
    """trace_declines reads the flags the column reader fills (no Event objects built); the answer is
    the events' own, on the suite (with facts), SWE-like runs written without them and recorded runs."""
    from sim.core.types import Lazy
    from sim.engine.fast.seed_grid import has_facts
    from sim.importers import load_paths
    from sim.trace.io import write_traces
    from sim.util.paths import EMBEDDED_SUITE

    write_traces([generate_run(7, i) for i in range(4)], tmp_path / "bare.jsonl")
    traces = [*load_paths([EMBEDDED_SUITE]), *load_paths([tmp_path / "bare.jsonl"]), *load_paths([mini_dir])]
    lazy = [type(t.__dict__["events"]) is Lazy for t in traces]
    fast = [has_facts(t) for t in traces]
    assert all(type(t.__dict__["events"]) is Lazy for t, was in zip(traces, lazy, strict=True) if was)
    slow = [any(e.needs or e.provides or e.supersedes for e in t.events) for t in traces]
    assert fast == slow and any(lazy) and any(fast) and not all(fast)


def test_the_grid_lanes_benchmark_reports_the_pass_and_the_lanes_compactions():
    """``benchmarks/grid_lanes.py`` (where the bench's grid pass spends its time): its counts are the
    grid's own (3 traces x 395 settings), its compactions the figures' less the settle-time ones."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    got = subprocess.run(
        [sys.executable, str(root / "benchmarks" / "grid_lanes.py"), "3", "1"],
        capture_output=True, text=True, check=True, cwd=root,
    )  # fmt: skip
    first, second = got.stdout.splitlines()[:2]
    calls = sum(len(generate_run(7, i).calls) for i in range(3))
    longest = max(len(generate_run(7, i).calls) for i in range(3))
    assert first.startswith(f"3 traces, {calls} calls, 395 settings: grid pass ")
    assert first.endswith(f"longest run {longest} calls (the lockstep's call positions)")
    assert second.startswith("lanes 1185: ") and "compact at least once" in second
