"""Benchmark (not a test): one sweep run three ways — the in-process pool, ``executor=ray`` (a local Ray
started by the sweep) and ``-m`` with Hydra's joblib launcher — each into a fresh folder; wall time
(loaded machine), CPU time of the whole process tree, and whether the three results.parquet are the
same bytes. docs/performance.md quotes its output.

    .venv/bin/python benchmarks/launchers.py [--repeats 3] [--workers 2] [--only pool,ray,joblib]

The sweep is ``experiment=size_seed_engine`` (the seed engine's 6 x 6 grid and the no-compaction points
over the embedded suite: 34 valid settings x 43 traces, 1,462 runs, priced as Sonnet 4.5). CPU time is the
sum over every process descended from the command (Ray's workers are children of its raylet, not of the
sweep, so a parent's own rusage would miss them), read from /proc every 0.1 s: a process's last tenth
of a second may be missed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CTXSIM = [str(REPO / ".venv" / "bin" / "python"), "-m", "sim.cli"]  # this tree's sim, run from REPO
LIMITS = "null,16000,24000,32000,48000,64000,96000"
KEEPS = "2000,4000,8000,12000,16000,20000"


def commands(out: Path, workers: int) -> dict[str, list[str]]:
    grid = [f"policy.context_token_limit={LIMITS}", f"policy.keep_recent_tokens={KEEPS}"]
    base = ["scenario=embedded", "pricing=claude-sonnet-4-5"]
    return {
        "pool": [
            *CTXSIM,
            "sweep",
            "experiment=size_seed_engine",
            f"workers={workers}",
            f"results.path={out}",
        ],
        "ray": [
            *CTXSIM,
            "sweep",
            "experiment=size_seed_engine",
            "executor=ray",
            f"workers={workers}",
            f"results.path={out}",
        ],
        "joblib": [
            *CTXSIM,
            "sweep",
            "--skip-invalid",  # as the experiment's skip_invalid: the 2 pairs with keep >= limit
            "-m",
            "policy=seed_engine",
            *grid,
            *base,
            f"results.path={out}",
            "hydra/launcher=joblib",
            f"hydra.launcher.n_jobs={workers}",
        ],
    }


_TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, CPU seconds user + system) of a live process."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / _TICK


def tree_cpu(cmd: list[str]) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds of the process tree, exit status) of one command."""
    cpu: dict[int, float] = {}
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    while proc.poll() is None:
        parents = {}
        for name in os.listdir("/proc"):
            if name.isdigit() and (got := _stat(int(name))) is not None:
                parents[int(name)] = got
        tree = {proc.pid}
        grew = True
        while grew:
            grew = False
            for pid, (ppid, _) in parents.items():
                if ppid in tree and pid not in tree:
                    tree.add(pid)
                    grew = True
        for pid in tree:
            if pid in parents:
                cpu[pid] = max(cpu.get(pid, 0.0), parents[pid][1])
        time.sleep(0.1)
    wall = time.perf_counter() - t0
    err = proc.stderr.read().decode(errors="replace")
    if proc.returncode != 0:
        sys.stderr.write(err[-3000:])
    return wall, sum(cpu.values()), proc.returncode


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--only", default="pool,ray,joblib")
    args = p.parse_args()
    sys.path.insert(0, str(REPO))
    from sim.util import provenance

    # the sweeps are child processes: the libraries they load, Ray and joblib's launcher among them
    also = (*provenance.CHILD_LIBRARIES, "ray", "joblib", "hydra-joblib-launcher")
    prov = provenance.start(also=also)
    root = Path(tempfile.mkdtemp(prefix="ctxsim-launchers-"))
    ways = args.only.split(",")
    walls: dict[str, list[float]] = {w: [] for w in ways}
    cpus: dict[str, list[float]] = {w: [] for w in ways}
    results: dict[str, bytes] = {}
    for rep in range(args.repeats):
        for way in ways:  # interleaved, so a change in the machine's load hits every way alike
            out = root / f"{way}-{rep}"
            wall, cpu, rc = tree_cpu(commands(out, args.workers)[way])
            if rc != 0:
                print(f"{way} failed (exit {rc})", file=sys.stderr)
                return rc
            walls[way].append(wall)
            cpus[way].append(cpu)
            results.setdefault(way, (out / "results.parquet").read_bytes())
            shutil.rmtree(out, ignore_errors=True)
    for way in ways:
        print(
            f"{way:7s} median of {args.repeats}: {statistics.median(walls[way]):6.1f} s wall (loaded; "
            f"min {min(walls[way]):.1f}), {statistics.median(cpus[way]):6.1f} s CPU of the process tree "
            f"(min {min(cpus[way]):.1f}, max {max(cpus[way]):.1f})"
        )
    first = results[ways[0]]
    same = [w for w in ways if results[w] == first]
    print(f"results.parquet byte-identical to {ways[0]}'s: {', '.join(same)}")
    print(prov.text())
    shutil.rmtree(root, ignore_errors=True)
    return 0 if len(same) == len(ways) else 1


if __name__ == "__main__":
    sys.exit(main())
