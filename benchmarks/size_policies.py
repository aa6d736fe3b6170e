"""``ctxsim size --policy NAME`` on its default grid against ``ctxsim size`` on the seed engine's default
grid, over the same N SWE-like traces in one session (issue 40: each policy <= 3x the seed engine's).

Each figure is the CPU time (user + sys) of one run of the command, its workers included
(``RUSAGE_CHILDREN`` counts every descendant that has ended and been waited for; ``size`` reaps its
forked workers), with ``--model claude-sonnet-4-5 --format json`` and the default ``--workers``. The seed
engine is timed before and after each policy (a loaded machine drifts over minutes); each ratio is to
the mean of the two runs beside it. The header names the commit, the versions, the machine and its load.

    python benchmarks/size_policies.py [N_TRACES] [NAME,...]

The traces are ``scenarios.swe_like.generate_run(7, i)``, i < N, written to a temporary folder (as
``benchmarks/size_grid.py --policies``, which times the same commands without the table)."""

from __future__ import annotations

import os
import platform
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 3.0  # issue 40: each policy's sizing within 3x the seed engine's


def cpu_of(cmd: list[str], out: Path) -> float:
    """CPU seconds of one child process and its workers."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with out.open("w") as f:
        subprocess.run(cmd, stdout=f, stderr=subprocess.DEVNULL, check=True, cwd=ROOT)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def header() -> str:
    """Commit, versions, machine and load: what a figure needs to be read later."""
    import numpy
    import pyarrow

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], capture_output=True, text=True, cwd=ROOT).stdout.strip()

    dirty = " (with uncommitted changes)" if git("status", "--porcelain", "--untracked-files=no") else ""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.partition(":")[2].strip()
                break
    except OSError:
        pass
    return (
        f"commit {git('rev-parse', '--short', 'HEAD')}{dirty}; Python {platform.python_version()}, "
        f"numpy {numpy.__version__}, pyarrow {pyarrow.__version__}; {os.cpu_count()} cores, {cpu}; "
        f"load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}"
    )


def main() -> None:
    args = sys.argv[1:]
    n = int(args[0]) if args and args[0].isdigit() else 500
    given = [a for a in args if not a.isdigit()]
    sys.path.insert(0, str(ROOT))
    from scenarios.swe_like import generate_run
    from sim.policies.base import registered
    from sim.trace.io import write_traces

    names = given[0].split(",") if given else [
        name for name, cls in registered().items() if cls.size_grid and name != "seed_engine"
    ]  # fmt: skip
    print(header(), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "swe_like.jsonl"
        write_traces([generate_run(7, i) for i in range(n)], corpus)
        size = [sys.executable, "-m", "sim.cli", "size", str(corpus), "--model", "claude-sonnet-4-5"]
        size += ["--format", "json"]
        seeds = [cpu_of(size, Path(tmp) / "seed.json")]  # before each policy, and once after the last
        print(f"seed_engine (default grid): CPU {seeds[-1]:.2f} s", flush=True)
        cpu = {}
        for name in names:
            cpu[name] = cpu_of([*size, "--policy", name], Path(tmp) / f"{name}.json")
            seeds.append(cpu_of(size, Path(tmp) / "seed.json"))
            print(
                f"{name}: CPU {cpu[name]:.2f} s; seed engine {seeds[-1]:.2f} s "
                f"(load {os.getloadavg()[0]:.2f})",
                flush=True,
            )
    print(
        f"\n{n} SWE-like traces; seed: the seed engine's default grid, the mean of the runs before and after"
    )
    print(f"{'policy':36} {'CPU s':>7} {'seed s':>7} {'ratio':>6}  within {LIMIT:g}x")
    for k, (name, c) in enumerate(cpu.items()):
        seed = (seeds[k] + seeds[k + 1]) / 2
        print(f"{name:36} {c:7.2f} {seed:7.2f} {c / seed:6.2f}  {'yes' if c / seed <= LIMIT else 'NO'}")
    print(header())


if __name__ == "__main__":
    main()
