"""Benchmark (not a test): what each command costs before and around a tiny piece of work — the CPU
(user + system) and wall time of one ``ctxsim`` process, median of a few repeats, and which heavy
libraries it loaded. Every target measured end to end (streaming, a resume) pays this once.

    .venv/bin/python benchmarks/startup.py [--repeats 5] [--code DIR]

Commands: ``import`` (``from sim.cli import main`` and nothing else), ``run`` (the embedded closed-loop
suite under the seed engine with a limit), ``sweep-finished`` (a rerun of a finished 2-point sweep: it
stops at the receipt), ``sweep-plan`` (the same sweep's rerun without its receipt: settings composed,
traces loaded and hashed, parts scanned, nothing run) and ``size`` (a 2 x 2 grid over the same suite).
``--code DIR`` runs another checkout's ``sim/`` (e.g. ``git worktree`` or ``git archive`` of main) through
``PYTHONPATH`` and from its folder, to compare. The processes inherit this shell's environment: with
``PYTHONDONTWRITEBYTECODE=1`` every ctxsim module is compiled from source in each process (say so when
quoting numbers).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SUITE = "scenarios/suite/closed_loop.jsonl"
HEAVY = ("numpy", "pandas", "pyarrow", "hydra", "omegaconf", "datasets", "matplotlib", "yaml", "ray")
DRIVER = f"""
import json, sys
argv = sys.argv[1:]
rc = 0
if argv != ["import"]:
    from sim.cli import main
    rc = main(argv)
else:
    from sim.cli import main
print(json.dumps({{"rc": rc, "heavy": [m for m in {HEAVY!r} if m in sys.modules]}}), file=sys.stderr)
"""


def timed(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, dict]:
    """(CPU seconds user + system, wall seconds, the driver's report) of one child process."""
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, cwd=cwd, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        err.seek(0)
        text = err.read().decode(errors="replace")
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{text[-3000:]}")
    return usage.ru_utime + usage.ru_stime, wall, json.loads(text.strip().splitlines()[-1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--code", type=Path, help="a checkout whose sim/ runs instead (through PYTHONPATH)")
    args = p.parse_args()
    sys.path.insert(0, str(REPO))
    from sim.util import provenance

    # the commit of the sim/ that runs; the libraries the timed child processes load
    prov = provenance.start(repo=args.code, also=provenance.CHILD_LIBRARIES)
    env, cwd = dict(os.environ), REPO
    if args.code:  # its folder first on the path (a script's '' is the working folder)
        cwd = args.code.resolve()
        env["PYTHONPATH"] = str(cwd)
    folder = Path(tempfile.mkdtemp(prefix="ctxsim-startup-"))
    sweep = ["sweep", "policy=observation_masking", "policy.n=1,3", f"scenario={SUITE}", "chunk_size=2"]
    sweep.append(f"results.path={folder / 'sweep'}")
    commands = {
        "import": ["import"],
        "run": [
            "run",
            SUITE,
            "--policy",
            "seed_engine",
            "policy.context_token_limit=32000",
            "--format",
            "json",
        ],
        "sweep-finished": sweep,
        "sweep-plan": sweep,
        "size": ["size", SUITE, "--limits", "24000,48000", "--keeps", "2000,4000", "--format", "json"],
    }
    python = str(REPO / ".venv" / "bin" / "python")
    timed([python, "-c", DRIVER, *sweep], env, cwd)  # the sweep itself, not timed
    bytecode = env.get("PYTHONDONTWRITEBYTECODE", "")
    print(f"load average {os.getloadavg()[0]:.2f}; PYTHONDONTWRITEBYTECODE={bytecode!r}")
    for name, words in commands.items():
        cpus, walls, heavy = [], [], []
        for _ in range(args.repeats):
            if name == "sweep-plan":
                (folder / "sweep" / "results.receipt.json").unlink(missing_ok=True)
            cpu, wall, report = timed([python, "-c", DRIVER, *words], env, cwd)
            cpus.append(cpu)
            walls.append(wall)
            heavy = report["heavy"]
        cpu, spread = statistics.median(cpus), f"min {min(cpus):.3f}, max {max(cpus):.3f}"
        print(
            f"{name:15s} CPU median {cpu:.3f} s ({spread}), wall median {statistics.median(walls):.3f} s "
            f"(loaded); loads {', '.join(heavy) or 'none of them'}"
        )
    print(prov.text())
    shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
