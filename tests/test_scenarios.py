"""The embedded scenario suite: deterministic, equal to its generator, and shaped like SWE-agent runs.

The statistics are recomputed here from the traces (not through ``suite_stats``), so a mistake in the
generator's own bookkeeping cannot hide a suite that misses its targets.
"""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from scenarios import make_suite
from scenarios.swe_like import BYTES_PER_TOKEN, generate_run, generate_suite
from sim.core.types import Trace
from sim.importers import detect, load_paths
from sim.trace.codec import CANONICAL_FORMAT, trace_from_dict, trace_to_dict
from sim.trace.io import iter_jsonl, write_traces

ROOT = Path(__file__).resolve().parent.parent

SUITE_DIR = ROOT / "scenarios" / "suite"
SUITE_FILE = SUITE_DIR / make_suite.SUITE_FILE


@pytest.fixture(scope="module")
def suite() -> list[Trace]:
    return list(iter_jsonl(SUITE_FILE))


# ------------------------------------------------------------------------------------------ determinism
def test_same_seed_gives_identical_bytes(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write_traces(generate_suite(7, 6), a)
    write_traces(generate_suite(7, 6), b)
    assert a.read_bytes() == b.read_bytes()


def test_different_seed_gives_different_suite(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write_traces(generate_suite(7, 6), a)
    write_traces(generate_suite(8, 6), b)
    assert a.read_bytes() != b.read_bytes()
    assert [len(t.calls) for t in generate_suite(7, 6)] != [len(t.calls) for t in generate_suite(8, 6)]


def test_run_depends_only_on_seed_and_index():
    suite = generate_suite(11, 5)
    assert generate_run(11, 3) == suite[3]
    assert generate_suite(11, 3) == suite[:3]  # a longer suite extends a shorter one


def test_committed_suite_equals_fresh_generation(tmp_path):
    make_suite.write_suite(tmp_path)
    assert (tmp_path / make_suite.SUITE_FILE).read_bytes() == SUITE_FILE.read_bytes(), (
        "scenarios/suite drifted from the generator; run `python -m scenarios.make_suite`"
    )
    assert (tmp_path / "README.md").read_bytes() == (SUITE_DIR / "README.md").read_bytes()
    loop = make_suite.CLOSED_LOOP_FILE
    assert (tmp_path / loop).read_bytes() == (SUITE_DIR / loop).read_bytes()


def test_committed_suite_is_small():
    assert SUITE_FILE.stat().st_size < 2_000_000


# ----------------------------------------------------------------------------------------- statistics
def test_turns_per_run(suite):
    turns = [len(t.calls) for t in suite]
    assert 40 <= statistics.fmean(turns) <= 60
    assert 22 <= statistics.median(turns) <= 38
    assert max(turns) > 150
    assert min(turns) >= 5 and max(turns) <= 250


def test_input_tokens_per_call(suite):
    # Complexity Trap definition: each run's mean input per call, then the mean over runs
    run_means = [statistics.fmean(c.input_tokens for c in t.calls) for t in suite]
    assert 16_000 <= statistics.fmean(run_means) <= 24_000
    assert any(max(c.input_tokens for c in t.calls) > 100_000 for t in suite)


def test_observation_share_and_tail(suite):
    obs = [e.tokens for t in suite for e in t.events if e.kind == "tool_result"]
    asst = [e.tokens for t in suite for e in t.events if e.kind == "assistant"]
    assert 0.80 <= sum(obs) / (sum(obs) + sum(asst)) <= 0.88
    assert max(obs) >= 20_000
    assert statistics.median(obs) < 1_000  # heavy tail: a typical result is small


def test_output_tokens_per_call(suite):
    run_means = [statistics.fmean(c.output_tokens for c in t.calls) for t in suite]
    assert 70 <= statistics.fmean(run_means) <= 150


def test_timestamps_increase(suite):
    for t in suite:
        calls = [c.timestamp for c in t.calls]
        assert all(b > a for a, b in zip(calls, calls[1:], strict=False)), t.trace_id
        events = [e.timestamp for e in t.events]
        assert all(b >= a for a, b in zip(events, events[1:], strict=False)), t.trace_id
        assert all(b > a for a, b in zip(events[1:], events[2:], strict=False)), t.trace_id
        assert all(c.timestamp == t.events[c.event_index].timestamp for c in t.calls)


# ------------------------------------------------------------------------------------------ structure
def test_runs_are_shaped_like_swe_agent(suite):
    for t in suite:
        ev, calls = t.events, t.calls
        assert [e.kind for e in ev[:2]] == ["system", "user"]
        assert 1000 <= ev[0].tokens <= 2000 and 1000 <= ev[1].tokens <= 3000
        assert [e.kind for e in ev[2:]] == ["assistant", "tool_result"] * len(calls)
        assert t.bytes_per_token == BYTES_PER_TOKEN
        assert t.recorded_policy == {"name": "raw"}
        assert t.outcome["exit_status"] == "Submitted"
        in_view = 0
        for k, c in enumerate(calls):
            a, r = ev[c.event_index], ev[c.event_index + 1]
            assert c.event_index == c.view_end == 2 + 2 * k
            assert a.tool_call_ids == (f"call-{k}",) and r.tool_call_id == f"call-{k}"
            assert c.input_tokens == sum(e.tokens for e in ev[: c.view_end]) > in_view
            in_view = c.input_tokens
            assert c.residual_tokens == 0 and c.usage_provenance == "synthetic"
            assert c.output_tokens == a.tokens
            assert c.cache_read_tokens is None and c.cache_write_tokens is None
        for e in ev:
            assert e.content is None and e.tokens_provenance == "synthetic"
            assert e.chars == e.bytes and e.lines >= 1
            assert abs(e.bytes / e.tokens - BYTES_PER_TOKEN) < 2  # framing bytes matter only for tiny events


def test_suite_validates_and_loads_as_canonical(suite):
    for t in suite:
        assert trace_from_dict(trace_to_dict(t)) == t, t.trace_id
    assert detect(SUITE_FILE).name == CANONICAL_FORMAT
    loaded = list(load_paths([SUITE_DIR]))  # closed_loop.jsonl sorts before swe_like.jsonl
    assert [t.trace_id for t in loaded[:4]] == ["grep_and_read", "working_set_16k", "needle", "spill"]
    assert loaded[4:] == suite and len(suite) == make_suite.N_RUNS
    assert [t.trace_id for t in suite] == [f"swe-like-{i:04d}" for i in range(make_suite.N_RUNS)]
