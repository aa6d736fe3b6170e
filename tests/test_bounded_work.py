"""Issue 41, items 4 and 5: the work a config asks for is bounded (a grid's runs, the processes it
forks), and ctxsim writes only where the user points (paths in gate and experiment files; temporary
files of a killed writer removed by the next one)."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest
from builders import swe_trace

import sim.util.forkmap as forkmap
from sim.cli import main
from sim.trace.io import write_traces


def _errors(capsys) -> list[str]:
    return [ln for ln in capsys.readouterr().err.splitlines() if ln.strip() and "warning:" not in ln]


@pytest.fixture
def scenario(tmp_path) -> Path:
    path = tmp_path / "s.jsonl"
    write_traces([swe_trace([("x\n" * 5, 40)] * 4, trace_id=f"t{i}") for i in range(3)], path)
    return path


# ------------------------------------------------------------------------------------- grid bounds
def test_experiment_file_of_6_knobs_x_60_values_is_refused_before_expanding(tmp_path, scenario, capsys):
    """2 KB of YAML asking for 60^6 = 46,656,000,000 settings: refused from the value counts alone (it
    expanded the product and exited 3 at 2.8 GB), in well under a second of CPU."""
    lines = ["policy: seed_engine", f"scenario: {scenario}", f"results: {tmp_path / 'r'}", "grid:"]
    for knob in ("context_token_limit", "keep_recent_tokens", "k1", "k2", "k3", "k4"):
        lines.append(f"  policy.{knob}: [{', '.join(str(1000 + i) for i in range(60))}]")
    exp = tmp_path / "big.yaml"
    exp.write_text("\n".join(lines) + "\n")
    assert exp.stat().st_size < 2600
    start = time.process_time()
    assert main(["sweep", f"experiment={exp}"]) == 2
    assert time.process_time() - start < 5
    assert _errors(capsys) == [
        "ctxsim: error: sweep: the grid is 46,656,000,000 settings (each run on at least one trace), "
        "over the limit of 1,000,000 runs (--max-settings N raises it)"
    ]
    assert not (tmp_path / "r").exists()


def test_multirun_range_is_refused_before_hydra_expands_it(tmp_path, scenario, capsys):
    start = time.process_time()
    code = main(
        ["sweep", "-m", "policy=observation_masking", "policy.n=range(1,100000000)", f"scenario={scenario}",
         f"results.path={tmp_path / 'r'}"]
    )  # fmt: skip
    assert code == 2 and time.process_time() - start < 10
    assert _errors(capsys) == [
        "ctxsim: error: sweep -m: the grid is 99,999,999 settings (each run on at least one trace), "
        "over the limit of 1,000,000 runs (--max-settings N raises it)"
    ]
    assert not (tmp_path / "r").exists()


def test_max_settings_counts_settings_times_traces(tmp_path, scenario, capsys):
    argv = ["sweep", "policy=observation_masking", "policy.n=1,2,3", f"scenario={scenario}"]
    assert main([*argv, f"results.path={tmp_path / 'a'}", "--max-settings", "8"]) == 2
    assert _errors(capsys) == [
        "ctxsim: error: sweep: the grid is 3 settings x 3 traces = 9 runs, over the limit of 8 runs "
        "(--max-settings N raises it)"
    ]
    assert not (tmp_path / "a").exists()
    assert main([*argv, f"results.path={tmp_path / 'b'}", "--max-settings", "9"]) == 0
    capsys.readouterr()
    assert main([*argv, f"results.path={tmp_path / 'c'}", "max_settings=0"]) == 2
    assert _errors(capsys) == ["ctxsim: error: sweep: max_settings=0: expected an integer in [1, 2^53)"]


# ------------------------------------------------------------------------------------- worker caps
def test_sweep_workers_capped_at_the_cores(tmp_path, scenario, capsys, monkeypatch):
    """``workers=60`` on 2 cores forked 60 processes; now 2, with one warning, and the same results."""
    import pandas as pd

    monkeypatch.setattr(forkmap, "usable_cores", lambda: 2)
    monkeypatch.setattr(forkmap, "_CAPPED", set())
    argv = ["sweep", "policy=observation_masking", "policy.n=1,2", f"scenario={scenario}", "chunk_size=1"]
    assert main([*argv, f"results.path={tmp_path / 'one'}"]) == 0
    capsys.readouterr()
    assert main([*argv, f"results.path={tmp_path / 'many'}", "workers=60"]) == 0
    warnings = [ln for ln in capsys.readouterr().err.splitlines() if "capped" in ln]
    assert warnings == ["ctxsim: warning: workers=60 capped at the 2 usable cores"]
    one = pd.read_parquet(tmp_path / "one" / "results.parquet")
    many = pd.read_parquet(tmp_path / "many" / "results.parquet")
    pd.testing.assert_frame_equal(one, many)


def test_forked_map_runs_no_more_processes_than_cores(monkeypatch, capsys):
    monkeypatch.setattr(forkmap, "usable_cores", lambda: 1)
    monkeypatch.setattr(forkmap, "_CAPPED", set())
    assert forkmap.forked_map(lambda _j: os.getpid(), list(range(6)), 8) == [os.getpid()] * 6
    assert forkmap.forked_map(lambda _j: os.getpid(), list(range(6)), 8) == [os.getpid()] * 6
    err = capsys.readouterr().err.splitlines()
    assert err == ["ctxsim: warning: workers=8 capped at the 1 usable cores"]  # once a process
    if forkmap.can_fork():
        monkeypatch.setattr(forkmap, "usable_cores", lambda: 2)
        pids = forkmap.forked_map(lambda _j: os.getpid(), list(range(6)), 8)
        assert len(set(pids)) == 2 and pids[0] == os.getpid()


def test_multirun_joblib_n_jobs_capped(tmp_path, scenario, capsys, monkeypatch):
    monkeypatch.setattr(forkmap, "usable_cores", lambda: 1)
    monkeypatch.setattr(forkmap, "_CAPPED", set())
    code = main(
        ["sweep", "-m", "policy=observation_masking", "policy.n=1", f"scenario={scenario}",
         f"results.path={tmp_path / 'r'}", "hydra/launcher=joblib", "hydra.launcher.n_jobs=60"]
    )  # fmt: skip
    assert code == 0
    err = capsys.readouterr().err.splitlines()
    assert "ctxsim: warning: hydra.launcher.n_jobs=60 capped at the 1 usable cores" in err
    assert (tmp_path / "r" / "results.parquet").is_file()


def test_usable_cores_is_this_process_affinity():
    if hasattr(os, "sched_getaffinity"):
        assert forkmap.usable_cores() == len(os.sched_getaffinity(0))
    assert forkmap.cap_workers(1) == 1
    assert re.fullmatch(r"\d+", str(forkmap.usable_cores()))


# ----------------------------------------------------------------------------- writes where pointed
GATE = """\
suite: {suite}
pricing: claude-sonnet-4-5
baseline:
  results: {results}
candidate:
  policy: raw
thresholds:
  cost_microusd: {{max_increase_pct: 5}}
"""


@pytest.mark.parametrize("how", ["absolute", "dotdot"])
def test_gate_file_chooses_no_place_outside_its_folder(tmp_path, scenario, capsys, monkeypatch, how):
    """A gate file's ``baseline.results`` (absolute, or ``../..``) made ``--update-baseline`` write (and
    create folders) wherever the file said; now exit 2 naming the file, line, key and path, nothing
    created; the command line's ``--baseline-results`` may name any place."""
    gates = tmp_path / "repo" / "gates"
    gates.mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "repo")
    target = tmp_path / "elsewhere" / "new" / "base.jsonl"
    text = str(target) if how == "absolute" else "../../elsewhere/new/base.jsonl"
    gate = gates / "g.yaml"
    gate.write_text(GATE.format(suite=scenario, results=text))
    assert main(["gate", str(gate), "--update-baseline"]) == 2
    assert _errors(capsys) == [
        f"ctxsim: error: {gate}: line 4: key 'baseline.results': {text!r} is outside the gate file's "
        "folder and the current folder; a gate file chooses no place outside them (name it on the command "
        "line: --baseline-results PATH)"
    ]
    assert not (tmp_path / "elsewhere").exists()
    assert main(["gate", str(gate), "--update-baseline", "--baseline-results", str(target)]) == 0
    assert target.is_file()
    # inside the gate file's folder, or the current one: as before
    gate.write_text(GATE.format(suite=scenario, results="sub/base.jsonl"))
    assert main(["gate", str(gate), "--update-baseline"]) == 0 and (gates / "sub" / "base.jsonl").is_file()
    gate.write_text(GATE.format(suite=scenario, results="../out/base.jsonl"))  # in the current folder
    assert main(["gate", str(gate), "--update-baseline"]) == 0
    assert (tmp_path / "repo" / "out" / "base.jsonl").is_file()


def test_experiment_file_chooses_no_place_outside_its_folder(tmp_path, scenario, capsys, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    exp = tmp_path / "exps" / "e.yaml"
    exp.parent.mkdir()
    far = tmp_path / "far" / "away"
    exp.write_text(f"policy: raw\nscenario: {scenario}\nresults: {far}\n")
    assert main(["sweep", f"experiment={exp}"]) == 2
    assert _errors(capsys) == [
        f"ctxsim: error: experiment e.yaml: key 'results': {str(far)!r} is outside the experiment file's "
        "folder and the current folder; an experiment file chooses no place outside them (name it on the "
        "command line: results.path=DIR)"
    ]
    assert not (tmp_path / "far").exists()
    assert main(["sweep", f"experiment={exp}", f"results.path={far}"]) == 0  # the user named it
    assert (far / "results.parquet").is_file()
    exp.write_text(f"policy: raw\nscenario: {scenario}\nresults: out/r\n")  # relative: the current folder
    assert main(["sweep", f"experiment={exp}"]) == 0 and (work / "out" / "r" / "results.parquet").is_file()


# ---------------------------------------------------------------------------------- temporary files
def test_a_killed_writers_temporary_is_removed_by_the_next_write(tmp_path, scenario, capsys):
    """A SIGKILLed ``import -o o.jsonl`` left ``.o.jsonl.<writer>.<random>.tmp`` for good; the next write
    of ``o.jsonl`` removes the temporaries of that target whose writer is gone and that are older than
    the process. A live writer's temporary, a newer one and another target's are left."""
    import signal
    import subprocess
    import sys

    out = tmp_path / "o.jsonl"
    killed = subprocess.run(
        [sys.executable, "-c",
         "import os, signal, sys\nfrom sim.util.atomicfile import atomic_path\n"
         "with atomic_path(sys.argv[1]) as tmp:\n"
         "    tmp.write_bytes(b'half a file' * 1000)\n"
         "    os.kill(os.getpid(), signal.SIGKILL)\n", str(out)],
    )  # fmt: skip
    assert killed.returncode == -signal.SIGKILL
    (left,) = tmp_path.glob(".o.jsonl.*.tmp")
    assert left.stat().st_size == 11000 and not out.exists()
    # another target's leftover (same dead writer), and one written after this process started
    other = tmp_path / left.name.replace(".o.jsonl.", ".p.jsonl.", 1)
    other.write_bytes(b"x")
    newer = tmp_path / left.name.replace(".tmp", "x.tmp")
    newer.write_bytes(b"x")
    os.utime(newer, (time.time() + 3600, time.time() + 3600))  # as if written after the next run started
    # the next run: a process of its own, started after the killed writer's last write (by more than the
    # ~10 ms to which a process's start time is known)
    time.sleep(0.2)
    nxt = subprocess.run(
        [sys.executable, "-m", "sim.cli", "import", str(scenario), "-o", str(out)], capture_output=True
    )
    assert nxt.returncode == 0, nxt.stderr
    assert out.is_file() and not left.exists()
    assert other.exists() and newer.exists()
    assert sorted(p.name for p in tmp_path.glob(".*.tmp")) == sorted([other.name, newer.name])


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity on this platform")
def test_bench_gives_the_process_its_cores_back(monkeypatch):
    """``bench`` measures on one core; run in-process it left the process pinned to that core for good,
    and every later fork capped at it (a test session's sweeps and sizings then ran on one process)."""
    import sim.commands.engine_speed as es

    before = os.sched_getaffinity(0)
    seen = []
    monkeypatch.setattr(es, "corpora", lambda: {"tiny": lambda: [swe_trace([("x", 10)] * 3)]})
    monkeypatch.setattr(es, "measure", lambda *a, **k: seen.append(os.sched_getaffinity(0)) or {})
    es.run_bench(["raw"], ["tiny"], repeats=1)
    assert seen == [{min(before)}] and os.sched_getaffinity(0) == before
