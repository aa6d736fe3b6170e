"""Sweeps: grid order, run keys, worker-count independence, resuming after SIGKILL/SIGINT, summaries.

A small corpus (the 3 closed-loop scenarios and 5 SWE-like runs) keeps the whole file fast."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest

from scenarios.swe_like import generate_suite
from sim.importers import load_paths
from sim.results.summary import summary
from sim.sweep.execute import run_sweep
from sim.sweep.keys import run_key
from sim.sweep.spec import SweepSpec, expand_grid, load_experiment, spec_from_args
from sim.trace.io import write_traces
from sim.util.errors import ConfigError
from sim.util.paths import EMBEDDED_SUITE, REPO


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("corpus") / "small.jsonl"
    traces = list(load_paths([EMBEDDED_SUITE / "closed_loop.jsonl"])) + generate_suite(7, 4)  # 8 runs
    write_traces(traces, out)
    return out


def _spec(corpus: Path, out: Path, **kw) -> SweepSpec:
    base = dict(
        policy="observation_masking",
        grid=("policy.n=1,3,10",),
        scenario=str(corpus),
        pricing="claude-sonnet-4-5",
        results=str(out),
        chunk_size=5,
    )
    base.update(kw)
    return SweepSpec(**base)


def _read(path: Path) -> pd.DataFrame:
    return pd.read_parquet(path)


# ------------------------------------------------------------------------------------------------ grid
def test_expand_grid_order():
    assert expand_grid([]) == [[]]
    assert expand_grid(["policy.n=1,3,10"]) == [["policy.n=1"], ["policy.n=3"], ["policy.n=10"]]
    assert expand_grid(["policy.a=1,2", "model.on_missing=fail", "policy.b=x,y"]) == [
        ["policy.a=1", "model.on_missing=fail", "policy.b=x"],
        ["policy.a=1", "model.on_missing=fail", "policy.b=y"],
        ["policy.a=2", "model.on_missing=fail", "policy.b=x"],
        ["policy.a=2", "model.on_missing=fail", "policy.b=y"],
    ]
    with pytest.raises(ConfigError):
        expand_grid(["policy.n"])


def test_run_key_stable_and_sensitive():
    args = (
        "sha256:abc",
        "seed_engine",
        {"a": 1, "b": None},
        {"window": None, "on_missing": "refetch"},
        "auto",
        "1",
    )
    key = run_key(*args)
    assert key == run_key(*args)
    assert key == run_key("sha256:abc", "seed_engine", {"b": None, "a": 1}, dict(args[3]), "auto", "1")
    assert len(key) == 64 and int(key, 16) >= 0
    variants = [
        ("sha256:abd", *args[1:]),
        (args[0], "raw", *args[2:]),
        (*args[:2], {"a": 2, "b": None}, *args[3:]),
        (*args[:3], {"window": 1000, "on_missing": "refetch"}, *args[4:]),
        (*args[:4], "claude-sonnet-4-5", args[5]),
        (*args[:5], "2"),
    ]
    assert len({key, *(run_key(*v) for v in variants)}) == len(variants) + 1
    # the same in another interpreter: no per-process salt
    code = f"from sim.sweep.keys import run_key; print(run_key(*{args!r}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == key


def test_experiment_and_args():
    spec = load_experiment("size_seed_engine")
    assert spec.policy == "seed_engine" and spec.scenario == "embedded"
    assert len(expand_grid(list(spec.grid))) == 42  # 6 x 6 pairs and 6 with the limit unset (no compaction)
    spec2, workers = spec_from_args(
        ["experiment=size_seed_engine", "workers=2", "results.path=/tmp/x"], csv=True
    )
    assert workers == 2 and spec2.results_dir == Path("/tmp/x") and spec2.csv and spec2.grid == spec.grid
    spec3, workers = spec_from_args(["policy=observation_masking", "policy.n=1,3", "scenario=embedded"])
    assert spec3.grid == ("policy.n=1,3",) and workers == 1
    with pytest.raises(ConfigError):
        spec_from_args(["policy=raw", "bogus=1"])


# ----------------------------------------------------------------------------------------- sweep runs
def test_sweep_rows_and_invalid_settings_skipped(corpus, tmp_path, capsys):
    grid = ("policy.context_token_limit=16000,32000", "policy.keep_recent_tokens=4000,20000")
    refused = _spec(corpus, tmp_path / "r", policy="seed_engine", grid=grid)
    with pytest.raises(ConfigError, match="keep_recent_tokens=20000 is not below .*--skip-invalid"):
        run_sweep(refused, progress=False)  # as `run` refuses it: exit 2, nothing run
    assert not (tmp_path / "r").exists()
    spec = _spec(corpus, tmp_path / "s", policy="seed_engine", grid=grid, skip_invalid=True)
    df = _read(run_sweep(spec, progress=False))
    assert "skipping setting policy.context_token_limit=16000 policy.keep_recent_tokens=20000" in (
        capsys.readouterr().err
    )
    assert len(df) == 3 * 8 and df["run_key"].is_unique
    assert list(df["run_key"]) == sorted(df["run_key"])
    for col in (
        "scenario",
        "pricing_setting",
        "model.window",
        "model.on_missing",
        "policy.keep_recent_tokens",
    ):
        assert col in df.columns
    assert set(df["scenario"]) == {str(corpus)} and set(df["model.on_missing"]) == {"refetch"}


def test_workers_do_not_change_results(corpus, tmp_path):
    one = _read(run_sweep(_spec(corpus, tmp_path / "w1"), workers=1, progress=False))
    two = _read(run_sweep(_spec(corpus, tmp_path / "w2", chunk_size=3), workers=2, progress=False))
    assert len(one) == 3 * 8
    pd.testing.assert_frame_equal(one, two)


def test_rerun_is_a_no_op(corpus, tmp_path, monkeypatch):
    import sim.sweep.unit_runner as runner

    first = _read(run_sweep(_spec(corpus, tmp_path / "r"), progress=False))
    monkeypatch.setattr(runner, "run_chunk", lambda chunk: pytest.fail("a finished run was redone"))
    pd.testing.assert_frame_equal(first, _read(run_sweep(_spec(corpus, tmp_path / "r"), progress=False)))


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT])
def test_interrupted_sweep_resumes(corpus, tmp_path, monkeypatch, sig):
    import sim.sweep.unit_runner as runner

    out = tmp_path / "int"
    kw = dict(chunk_size=1, grid=("policy.n=1,2,3,5,10",))
    # a slowed-down copy of the sweep in a subprocess: chunks of one run, 40 runs, ~0.05 s each for the
    # first 12, then one that waits for the signal
    code = textwrap.dedent(
        f"""
        import time
        import sim.sweep.execute as s
        import sim.sweep.unit_runner as runner
        _orig = runner.run_chunk
        ran = [0]
        def slow(chunk):
            ran[0] += 1
            time.sleep(0.05 if ran[0] <= 12 else 60)  # cannot finish before the signal, however loaded
            return _orig(chunk)
        runner.run_chunk = slow
        spec = s.SweepSpec(policy="observation_masking", grid={kw["grid"]!r}, scenario={str(corpus)!r},
                           pricing="claude-sonnet-4-5", results={str(out)!r}, chunk_size=1)
        s.run_sweep(spec, progress=False)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not list((out / "parts").glob("part-*.parquet")):
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.monotonic() < deadline
        time.sleep(0.005)
    time.sleep(0.12)  # a few more parts, and likely mid-write
    assert proc.poll() is None, "the sweep finished before it could be interrupted"
    os.kill(proc.pid, sig)
    rc = proc.wait(timeout=30)
    stderr = proc.stderr.read().decode()
    assert rc != 0
    if sig == signal.SIGINT:
        assert "interrupted" in stderr and "rerun the same command" in stderr
    assert not (out / "results.parquet").exists()
    saved = len(list((out / "parts").glob("part-*.parquet")))
    assert 1 <= saved < 40

    ran = []
    orig = runner.run_chunk
    monkeypatch.setattr(runner, "run_chunk", lambda chunk: ran.append(len(chunk.runs)) or orig(chunk))
    resumed = _read(run_sweep(_spec(corpus, out, **kw), progress=False))
    assert sum(ran) == 40 - saved  # only unfinished runs were redone
    assert not list((out / "parts").glob(".*"))  # no temporary file left behind
    clean = _read(run_sweep(_spec(corpus, tmp_path / "clean", **kw), progress=False))
    pd.testing.assert_frame_equal(resumed, clean)


# --------------------------------------------------------------------------------------------- summary
def test_summary_matches_pandas(corpus, tmp_path):
    path = run_sweep(_spec(corpus, tmp_path / "sum"), progress=False)
    df = pd.read_parquet(path)
    rows = summary(path)
    assert [r["policy.n"] for r in rows] == [1, 3, 10]
    assert summary(tmp_path / "sum") == rows
    for r in rows:
        g = df[df["policy.n"] == r["policy.n"]]
        assert r["policy"] == "observation_masking"
        assert r["runs"] == len(g) == 8
        assert r["median_cost_usd"] == pytest.approx(g["cost_microusd"].median() / 1e6)
        assert r["mean_cost_usd"] == pytest.approx(g["cost_microusd"].mean() / 1e6)
        assert r["cumulative_input_tokens"] == g["cumulative_input_tokens"].sum()
        assert r["cache_hit_rate"] == pytest.approx(
            g["cache_read_tokens"].sum() / g["cumulative_input_tokens"].sum()
        )
        assert r["compactions"] == pytest.approx(g["compactions"].mean())
        assert r["facts_lost"] == g["facts_lost"].sum()
        assert r["answer_completed"] == pytest.approx(g["answer_completed"].mean())
    assert rows[0]["median_cost_usd"] is not None


def test_summary_cost_none_when_unpriced(corpus, tmp_path):
    rows = summary(run_sweep(_spec(corpus, tmp_path / "u", pricing="auto"), progress=False))
    assert all(r["median_cost_usd"] is None and r["mean_cost_usd"] is None for r in rows)


def test_fast_compose_equals_hydra_compose():
    from sim.config.compose import compose
    from sim.sweep.settings import compose_fast

    base = compose("seed_engine", [])
    for ovs in (
        ["policy.context_token_limit=16000", "policy.keep_recent_tokens=2000"],
        ["policy.mode=prune", "model.window=1000", "model.on_missing=fail"],
        ["policy.token_budget=null", "policy.summary_ratio=0.2", "policy.run_status=off"],
    ):
        assert compose_fast("seed_engine", base, ovs) == compose("seed_engine", ovs)
    assert compose_fast("seed_engine", base, ["policy.no_such_knob=1"]) is None
    assert compose_fast("seed_engine", base, ["+policy.extra=1"]) is None


def test_hydra_multirun_equals_in_process_sweep(tmp_path):
    """`ctxsim sweep -m` (Hydra basic launcher, one job per grid point) gives the in-process results."""
    import pandas as pd

    from sim.cli import main
    from sim.util.paths import EMBEDDED_SUITE

    scenario = str(EMBEDDED_SUITE / "closed_loop.jsonl")
    words = ["policy=observation_masking", "policy.n=1,3", f"scenario={scenario}", "pricing=gpt-4o"]
    assert main(["sweep", "-m", *words, f"results.path={tmp_path / 'hydra'}"]) == 0
    assert main(["sweep", *words, f"results.path={tmp_path / 'pool'}"]) == 0
    a = pd.read_parquet(tmp_path / "hydra" / "results.parquet")
    b = pd.read_parquet(tmp_path / "pool" / "results.parquet")
    assert len(a) == 8 and a.equals(b)


def test_hydra_multirun_refuses_a_setting_before_any_job_or_skips_it(tmp_path, capsys):
    """`sweep -m` treats a setting the policy refuses as plain `sweep` does: exit 2 before any job runs
    (nothing written), or with --skip-invalid the other points run and the refused one is named."""
    import pandas as pd

    from sim.cli import main
    from sim.util.paths import EMBEDDED_SUITE

    scenario = str(EMBEDDED_SUITE / "closed_loop.jsonl")
    words = [
        "policy=seed_engine",
        "policy.context_token_limit=16000,32000",
        "policy.keep_recent_tokens=4000,20000",
        f"scenario={scenario}",
    ]
    out = tmp_path / "refused"
    assert main(["sweep", "-m", *words, f"results.path={out}"]) == 2
    err = capsys.readouterr().err
    assert "setting policy.context_token_limit=16000 policy.keep_recent_tokens=20000" in err
    assert "--skip-invalid" in err and not out.exists()
    out = tmp_path / "skipped"
    assert main(["sweep", "-m", "--skip-invalid", *words, f"results.path={out}"]) == 0
    assert "skipping setting policy.context_token_limit=16000 policy.keep_recent_tokens=20000" in (
        capsys.readouterr().err
    )
    df = pd.read_parquet(out / "results.parquet")
    got = sorted(set(zip(df["policy.context_token_limit"], df["policy.keep_recent_tokens"], strict=True)))
    assert got == [(16000, 4000), (32000, 4000), (32000, 20000)]


def test_hydra_multirun_takes_transforms_as_the_in_process_sweep(tmp_path):
    """`sweep -m transform=NAME transform.KEY=V` applies the same transform before every grid point, as
    the in-process sweep does: the same rows, transforms named in each."""
    import pandas as pd

    from sim.cli import main
    from sim.util.paths import EMBEDDED_SUITE

    scenario = str(EMBEDDED_SUITE / "closed_loop.jsonl")
    words = ["policy=observation_masking", "policy.n=1,3", f"scenario={scenario}", "pricing=gpt-4o"]
    words += ["transform=code_mode", "transform.n=2"]
    assert main(["sweep", "-m", *words, f"results.path={tmp_path / 'hydra'}"]) == 0
    assert main(["sweep", *words, f"results.path={tmp_path / 'pool'}"]) == 0
    a = pd.read_parquet(tmp_path / "hydra" / "results.parquet")
    b = pd.read_parquet(tmp_path / "pool" / "results.parquet")
    assert len(a) == 8 and a.equals(b)
    assert set(a["transforms"]) == {"code_mode(n=2,max_result_bytes=51200)"}


def test_sweep_refuses_a_model_and_a_pricing_that_disagree(tmp_path, capsys):
    """`sweep --model X --pricing Y` is refused as `run` refuses it, instead of pricing as Y with X's
    window; `--model X` alone gives X's pricing and window."""
    from sim.cli import build_parser, main
    from sim.commands.sweep import sweep_flags

    out = tmp_path / "s"
    argv = ["sweep", "policy=raw", "scenario=embedded", f"results.path={out}", "--model", "claude-sonnet-4-5"]
    assert main([*argv, "--pricing", "gpt-4o"]) == 2
    assert "disagree" in capsys.readouterr().err and not out.exists()
    args = build_parser().parse_args(["sweep", "--model", "claude-sonnet-4-5"])
    assert sweep_flags(args) == ["pricing=claude-sonnet-4-5", "model.window=200000"]
