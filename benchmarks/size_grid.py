"""``ctxsim size`` over a 20 x 20 grid of N SWE-like traces, as run by default (the no-compaction
baseline and the paired bootstraps included, no --sensitivity; ``--workers`` its default, 2): CPU time
(user + sys of the command *and its workers*: ``RUSAGE_CHILDREN`` counts every descendant that has ended
and been waited for, and ``size`` reaps its forked workers) and wall time of each repeat, their medians,
the load average, and whether the answer is the per-call loop's. ``sim`` is byte-compiled first, as an
installed package is (a checkout run under ``PYTHONDONTWRITEBYTECODE`` would otherwise compile every
module on every run, ~0.3 s). In the same run, on the same traces and grid:
the bare kernel's CPU (``benchmarks/kernel.py``: the arithmetic of the grid, nothing else; timed after each
run of the command, each round's ratio printed) and the paired
bootstraps' CPU (``sim.analysis.paired.paired_many`` of every setting against no compaction, in this
process), each beside the command's as a ratio to the kernel (issue 40: the command <= 10x the kernel, the
bootstraps <= 1x).

    python benchmarks/size_grid.py [N_TRACES] [REPEATS] [--loop] [--workers N]
    python benchmarks/size_grid.py [N_TRACES] --policies [NAME,...]

``--policies`` times ``size --policy NAME`` on its default grid for every policy that declares one (or
the names given) against ``size`` on the seed engine's default grid, in the same session, each the CPU of
one run (workers included) and its ratio to the seed engine's (issue 40: each <= 3x).

``--workers N`` passes ``--workers N`` to ``size`` (1: one process) and checks that the answer is the
default run's byte for byte.

The traces are ``scenarios.swe_like.generate_run(7, i)`` written to a temporary folder; limits 16k to 168k by
8k, keeps 1k to 20k by 1k, priced as claude-sonnet-4-5 with its 200k window. ``--loop`` also runs the sizing
once with the grid path off (``sim.analysis.size.evaluate(grid=False)``: every run on the per-call loop;
minutes) and compares the two JSON answers byte for byte."""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIMITS = ",".join(str(v) for v in range(16000, 168001, 8000))
KEEPS = ",".join(str(v) for v in range(1000, 20001, 1000))
LOOP = (
    "import sys, sim.analysis.size as s\n"
    "real = s.evaluate\n"
    "s.evaluate = lambda *a, **k: real(*a, **{**k, 'grid': False})\n"
    "from sim.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


def run(cmd: list[str], out: Path) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    with out.open("w") as f:
        subprocess.run(cmd, stdout=f, stderr=subprocess.DEVNULL, check=True, cwd=ROOT)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, wall


def kernel_timer(n: int):
    """A function giving the CPU seconds of one run of the bare kernel (``benchmarks/kernel.py``) over the
    same traces and grid; its inputs are built once here and not timed, as ``kernel.py`` times it. Timed
    once after each run of the command (a loaded machine drifts over minutes: each ratio is of a pair
    taken together)."""
    import numpy as np
    from kernel import Inputs, grid_20x20, kernel

    from scenarios.swe_like import generate_run
    from sim.engine.model import ReplayModel

    traces = [generate_run(7, i) for i in range(n)]
    limits, keeps = grid_20x20()
    x = Inputs(traces, [ReplayModel(t) for t in traces], keeps)
    keeps_arr = np.asarray(keeps)
    kernel(x, limits, keeps_arr)  # once untimed: its first run pays for allocations the others reuse

    def timed() -> float:
        t0 = time.process_time()
        kernel(x, limits, keeps_arr)
        return time.process_time() - t0

    return timed


def bootstrap_cpu(corpus: Path, repeats: int) -> tuple[float, int]:
    """The median CPU seconds of the paired bootstraps of every setting of the grid against no
    compaction (``paired_many``, one process), and how many settings: the figures ``size`` bootstraps."""
    from sim.analysis.paired import paired_many
    from sim.analysis.size import evaluate
    from sim.importers import load_paths

    traces = list(load_paths([str(corpus)]))
    limits = [int(v) for v in LIMITS.split(",")]
    keeps = [int(v) for v in KEEPS.split(",")]
    results = evaluate(traces, "seed_engine", limits, keeps, None, "claude-sonnet-4-5")
    times = []
    for _ in range(repeats):
        t0 = time.process_time()
        paired_many(results[0], results[1:])
        times.append(time.process_time() - t0)
    return statistics.median(times), len(results) - 1


def policies(corpus: Path, tmp: Path, names: list[str]) -> None:
    """``size --policy NAME`` (default grid) against ``size`` (the seed engine's default grid): CPU each."""
    from sim.policies.base import registered

    names = names or [n for n, c in registered().items() if c.size_grid and n != "seed_engine"]
    size = [sys.executable, "-m", "sim.cli", "size", str(corpus), "--model", "claude-sonnet-4-5"]
    size += ["--format", "json"]
    seed, _ = run(size, tmp / "seed.json")
    print(f"seed_engine (default grid): CPU {seed:.2f} s (load average {os.getloadavg()[0]:.2f})", flush=True)
    for name in names:
        c, _ = run([*size, "--policy", name], tmp / f"{name}.json")
        print(
            f"{name}: CPU {c:.2f} s, {c / seed:.2f}x the seed engine's "
            f"(load average {os.getloadavg()[0]:.2f})",
            flush=True,
        )


def main() -> None:
    argv = sys.argv[1:]
    names = None
    if "--policies" in argv:
        at = argv.index("--policies")
        given = argv[at + 1] if at + 1 < len(argv) and not argv[at + 1].isdigit() else ""
        names = [v for v in given.split(",") if v]
        del argv[at : at + (2 if given else 1)]
    workers = None
    if "--workers" in argv:
        at = argv.index("--workers")
        workers = argv[at + 1]
        del argv[at : at + 2]
    args = [a for a in argv if not a.startswith("--")]
    n = int(args[0]) if args else 500
    repeats = int(args[1]) if len(args) > 1 else 3
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "benchmarks"))
    # an installed package is byte-compiled (pip writes __pycache__); a checkout run with
    # PYTHONDONTWRITEBYTECODE would compile every module on every run: compiled once here, not timed
    import compileall

    compileall.compile_dir(str(ROOT / "sim"), quiet=1)
    from scenarios.swe_like import generate_run
    from sim.trace.io import write_traces
    from sim.util import provenance

    prov = provenance.start(also=provenance.CHILD_LIBRARIES)  # the timed commands are child processes

    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "swe_like.jsonl"
        write_traces([generate_run(7, i) for i in range(n)], corpus)
        if names is not None:
            policies(corpus, Path(tmp), names)
            print(prov.text())
            return
        size = ["size", str(corpus), "--model", "claude-sonnet-4-5", "--limits", LIMITS, "--keeps", KEEPS]
        size += ["--format", "json"]
        env_python = [sys.executable, "-m", "sim.cli", *size]
        timed = env_python + (["--workers", workers] if workers is not None else [])
        kernel_once = kernel_timer(n)
        cpu, wall, bare_cpu = [], [], []
        for _ in range(repeats):
            c, w = run(timed, Path(tmp) / "grid.json")
            k = kernel_once()
            cpu.append(c)
            wall.append(w)
            bare_cpu.append(k)
            print(
                f"grid path: CPU {c:.2f} s, wall {w:.2f} s; bare kernel beside it: CPU {k:.3f} s, "
                f"{c / k:.1f}x (load average {os.getloadavg()[0]:.2f})",
                flush=True,
            )
        print(
            f"median of {repeats}: CPU {statistics.median(cpu):.2f} s, wall {statistics.median(wall):.2f} s"
            f" (workers {workers or 'default'}; load average {os.getloadavg()[0]:.2f})"
        )
        bare = statistics.median(bare_cpu)
        boot, settings = bootstrap_cpu(corpus, repeats)
        command = statistics.median(cpu)
        ratios = sorted(c / k for c, k in zip(cpu, bare_cpu, strict=True))
        print(
            f"bare kernel (same traces and grid): CPU {bare:.3f} s; command / kernel {command / bare:.1f}x "
            f"(medians; each round's ratio {', '.join(f'{r:.1f}x' for r in ratios)})"
        )
        print(
            f"paired bootstraps of {settings} settings: CPU {boot:.3f} s; "
            f"bootstraps / kernel {boot / bare:.1f}x"
        )
        if workers is not None:
            run(env_python, Path(tmp) / "default.json")
            same = (Path(tmp) / "grid.json").read_bytes() == (Path(tmp) / "default.json").read_bytes()
            print(f"same answer as the default workers: {same}")
        if "--loop" in sys.argv:
            c, w = run([sys.executable, "-c", LOOP, *size], Path(tmp) / "loop.json")
            same = (Path(tmp) / "grid.json").read_bytes() == (Path(tmp) / "loop.json").read_bytes()
            print(f"per-call loop: CPU {c:.2f} s, wall {w:.2f} s; same answer: {same}")
        print(prov.text())


if __name__ == "__main__":
    main()
