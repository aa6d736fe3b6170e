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


# ------------------------------------------------------------------------------------------------ facts
def test_facts_leave_the_sizes_alone_and_are_off_by_default():
    """Facts are drawn from streams of their own: the same run with and without them has the same sizes,
    calls and times; without a profile a run carries none."""
    from dataclasses import replace

    from scenarios.facts import REAL_RUNS

    bare, full = generate_run(7, 2), generate_run(7, 2, REAL_RUNS)
    assert not any(e.provides or e.needs or e.supersedes for e in bare.events)
    assert full.calls == bare.calls
    plain = tuple(
        replace(e, provides=(), needs=(), supersedes=(), fact_kinds=(), fact_spans=()) for e in full.events
    )
    assert plain == bare.events
    assert generate_suite(7, 3, REAL_RUNS)[2] == full


def test_the_suite_carries_facts_like_the_real_runs(suite):
    """Kinds and places as the real importers give them; the shares near the shared runs' (the README
    table beside them)."""
    from scenarios.facts import fact_stats

    for t in suite:
        ev = t.events
        assert (ev[0].provides, ev[0].fact_kinds) == (("constraint@0",), ("constraint",))
        assert (ev[1].provides, ev[1].fact_kinds) == (("goal@1",), ("goal",))
        final = ev[t.calls[-1].event_index]
        assert final.needs[-2:] == ("constraint@0", "goal@1")  # the final answer needs the task and rules
        provided: dict[str, int] = {"constraint@0": 0, "goal@1": 1}
        for e in ev[2:]:
            if e.kind == "tool_result":
                assert e.provides in ((), (f"obs@{e.index}",))
                assert set(e.fact_kinds) <= {"path", "error"}
                assert all(provided[f] < e.index for f in e.supersedes)  # only what came before
                provided.update({f: e.index for f in e.provides})
            else:
                assert not e.provides and not e.supersedes
                assert all(provided[f] < e.index for f in e.needs)
        assert not ev[-1].supersedes  # the submission's diff makes nothing stale
    s = fact_stats(suite)
    assert 0.36 <= s["fact_provide_share"] <= 0.46  # real 0.412
    assert 0.18 <= s["fact_error_share"] <= 0.30  # real 0.234
    assert 0.06 <= s["actions_needing_share"] <= 0.12  # real 0.093
    assert 0.45 <= s["path_superseded_share"] <= 0.62  # real 0.572
    assert 0.38 <= s["error_superseded_share"] <= 0.58  # real 0.483
    assert sum(len(e.supersedes) for t in suite for e in t.events) > 300
    assert 0.25 <= s["error_at_start_share"] <= 0.50  # real 0.383
    for e in (e for t in suite for e in t.events if e.provides and e.kind == "tool_result"):
        if e.fact_kinds == ("error",):  # the line that shows the failure, inside the result
            ((a, b),) = e.fact_spans
            assert 0 <= a < b <= e.bytes and b - a <= 184
        else:  # a path fact: the file as printed, the whole result
            assert e.fact_spans == ()


def test_supersession_draws_follow_the_profile():
    """A fact is superseded by a later observation, never the last one, at a distance within the kind's
    deciles; a share of 1 supersedes every fact with room, 0 none."""
    import numpy as np

    from scenarios.facts import SupersessionProfile, draw_supersession

    provides = ["path", None, "error", "path", "path", None, "error", "path"]
    every = SupersessionProfile(1.0, 1.0, (1.0, 3.0), (2.0, 2.0))
    stale = draw_supersession(provides, np.random.default_rng(0), every)
    by = {j: k for k, js in enumerate(stale) for j in js}
    assert stale[-1] == () and sorted(by) == [0, 2, 3, 4]  # 6 has no room for 2 turns, 7 none at all
    assert by[2] == 4 and all(1 <= by[j] - j <= 3 for j in (0, 3, 4))
    none = SupersessionProfile(0.0, 0.0, (1.0, 3.0), (2.0, 2.0))
    assert draw_supersession(provides, np.random.default_rng(0), none) == [()] * len(provides)
    assert draw_supersession(provides, np.random.default_rng(0), None) == [()] * len(provides)


def test_supersession_profile_is_measured_on_the_shared_runs():
    from scenarios.facts import SUPERSESSION, supersession_profile
    from sim.util.paths import traces_dir

    folder = traces_dir() / "mini-swe-agent-gemini3pro" / "trajs"
    if not folder.is_dir():
        pytest.skip(f"shared traces not found at {folder}")
    assert supersession_profile(list(load_paths([folder]))) == SUPERSESSION


def test_error_spans_sit_at_the_start_or_near_the_end():
    from scenarios.facts import ERROR_SPANS, draw_error_span

    assert draw_error_span(1000, (0.0, 0.5, 0.5), ERROR_SPANS) == (0, 30)  # the median line, at the start
    assert draw_error_span(1000, (0.9, 0.5, 0.5), ERROR_SPANS) == (890, 920)  # 80 bytes after it
    assert draw_error_span(20, (0.9, 1.0, 1.0), ERROR_SPANS) == (0, 20)  # never outside a small result


def test_error_span_profile_is_measured_on_the_shared_runs():
    from scenarios.facts import ERROR_SPANS, error_span_profile
    from sim.util.paths import traces_dir

    folder = traces_dir() / "mini-swe-agent-gemini3pro" / "trajs"
    if not folder.is_dir():
        pytest.skip(f"shared traces not found at {folder}")
    assert error_span_profile(list(load_paths([folder]))) == ERROR_SPANS


def test_calibrated_keeps_its_names_and_its_runs():
    """``scenarios.calibrated`` still exports the fact profile it measured (now in ``scenarios.facts``)."""
    import scenarios.calibrated as cal
    import scenarios.facts as facts

    assert (
        cal.FACTS is facts.FACTS and cal.FactProfile is facts.FactProfile and cal._facts is facts.draw_facts
    )
