"""Benchmark (not a test): resume a finished sweep — the CPU time, wall time and peak resident memory of
``ctxsim sweep`` when every run is already on disk, median of a few repeats; and, for the first sweep,
how its CPU splits between the parent process and its workers.

    .venv/bin/python benchmarks/sweep_resume.py [--grid small|large|20x20] [--repeats 5] [--keep DIR]
        [--first-repeats N] [--workers 2] [--executor pool|ray] [--no-receipt] [--no-index] [--code DIR]

``small`` is ``experiment=size_seed_engine`` (6 x 6, 1,462 runs over the embedded suite); ``large`` adds
``policy.summary_ratio`` with 5 values (7,310 runs); ``20x20`` is the seed engine over 20 limits x 20
recent-history budgets (400 settings, all valid) and 500 SWE-like runs (``scenarios.swe_like``, seed
``scenarios.make_suite.SEED``): 200,000 runs in 3,200 parts at the default chunk size. The sweep runs
once (not timed as a resume), then the same command is repeated; each repeat is one process, measured on
its own (``os.wait4``: user + system CPU, wall, peak RSS). The first sweep runs in a driver process that
reports its own CPU (``RUSAGE_SELF``) beside its pool workers' (``RUSAGE_CHILDREN``); ``--first-repeats N``
runs it N times, each into an emptied store (with ``--keep``: the corpus is kept, the store remade), and
gives the medians; the resumes then use the last.

``--no-receipt`` deletes ``results.receipt.json`` before each repeat: the rerun of a store whose receipt is
missing or stale (another plan, ctxsim's code changed) takes the full path — compose, load and hash,
scan the parts, check results.parquet — and writes the receipt again. ``--no-index`` deletes the parts'
key index (``parts/index.json``) before each repeat too, as a store written by an older ctxsim has none.
``--code DIR`` runs another checkout's ``sim/`` (through ``PYTHONPATH``, from its folder), e.g. a
``git archive`` of main, to compare on the same store (with ``--keep``: the first sweep, a resume there,
writes that code's receipt).
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
LIMITS_20 = ",".join(str(24000 + 8000 * i) for i in range(20))  # 24000..176000
KEEPS_20 = ",".join(str(1000 * (i + 1)) for i in range(20))  # 1000..20000: every keep < every limit
GRIDS = {
    "small": ["experiment=size_seed_engine"],
    "large": ["experiment=size_seed_engine", "policy.summary_ratio=0.05,0.1,0.2,0.3,0.4"],
    "20x20": [
        "policy=seed_engine",
        f"policy.context_token_limit={LIMITS_20}",
        f"policy.keep_recent_tokens={KEEPS_20}",
        "pricing=claude-sonnet-4-5",
    ],
}
N_SWE = 500

DRIVER = """
import json, resource, sys, time
from sim.cli import main
t0 = time.perf_counter()
rc = main(sys.argv[1:])
wall = time.perf_counter() - t0
me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"rc": rc, "wall": wall, "self": me.ru_utime + me.ru_stime,
                  "children": kids.ru_utime + kids.ru_stime}), file=sys.stderr)
"""


def timed(cmd: list[str], code: Path | None = None) -> tuple[float, float, float, int, str]:
    """(CPU seconds user + system, wall seconds, peak RSS in MiB, exit status, stderr) of one child;
    ``code``: the checkout whose sim/ it runs."""
    env = dict(os.environ, PYTHONPATH=str(code)) if code else None
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, cwd=code or REPO, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        rc = os.waitstatus_to_exitcode(status)
        err.seek(0)
        text = err.read().decode(errors="replace")
    if rc != 0:
        sys.stderr.write(text[-4000:])
    return usage.ru_utime + usage.ru_stime, wall, usage.ru_maxrss / 1024, rc, text  # Linux: KiB


def swe_corpus(folder: Path) -> Path:
    path = folder / f"swe_like_{N_SWE}.jsonl"
    if not path.is_file():
        sys.path.insert(0, str(REPO))
        from scenarios.make_suite import SEED
        from scenarios.swe_like import generate_suite
        from sim.trace.io import write_traces

        write_traces(generate_suite(SEED, N_SWE), path)
    return path


def main() -> int:
    import json

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--grid", choices=sorted(GRIDS), default="small")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument(
        "--first-repeats", type=int, default=0, help="first sweeps, each into an emptied store (0: one)"
    )
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--executor", choices=("pool", "ray"), default="pool", help="for the first sweep")
    p.add_argument("--keep", type=Path, help="sweep into this folder and keep it (reused when present)")
    p.add_argument("--no-receipt", action="store_true", help="delete the receipt before each repeat")
    p.add_argument("--no-index", action="store_true", help="delete the parts index before each repeat")
    p.add_argument("--code", type=Path, help="a checkout whose sim/ runs instead (PYTHONPATH)")
    args = p.parse_args()
    sys.path.insert(0, str(REPO))
    from sim.util import provenance

    # the commit of the sim/ that runs; the libraries the timed sweeps (child processes) load
    prov = provenance.start(repo=args.code, also=provenance.CHILD_LIBRARIES)
    folder = args.keep or Path(tempfile.mkdtemp(prefix="ctxsim-resume-"))
    folder.mkdir(parents=True, exist_ok=True)
    words = ["sweep", *GRIDS[args.grid], f"results.path={folder / 'sweep'}"]
    if args.grid == "20x20":
        words.append(f"scenario={swe_corpus(folder)}")
    python = str(REPO / ".venv" / "bin" / "python")
    first = [*words, f"workers={args.workers}"]
    if args.executor == "ray":
        first.append("executor=ray")
    store = folder / "sweep"
    firsts = []
    for _ in range(max(1, args.first_repeats)):
        if args.first_repeats:  # each a first sweep: into an empty store
            shutil.rmtree(store, ignore_errors=True)
        cpu, wall, rss, rc, err = timed([python, "-c", DRIVER, *first], args.code)
        if rc != 0:
            print(f"the first sweep failed (exit {rc}): ctxsim {' '.join(first)}", file=sys.stderr)
            return rc
        split = json.loads(err.strip().splitlines()[-1])
        firsts.append((cpu, wall, rss, split["self"], split["children"]))
        print(
            f"{args.grid} grid: first sweep ({args.executor}, workers={args.workers}) {wall:.1f} s wall "
            f"(loaded), {cpu:.1f} s CPU, peak RSS {rss:,.0f} MiB; parent {split['self']:.1f} s CPU, pool "
            f"workers {split['children']:.1f} s CPU: parent share {split['self'] / max(cpu, 1e-9):.1%}"
        )
    if len(firsts) > 1:
        cpu, wall, rss, me, kids = (statistics.median(col) for col in zip(*firsts, strict=True))
        print(
            f"first sweep, median of {len(firsts)}: {cpu:.2f} s CPU (min {min(f[0] for f in firsts):.2f}, "
            f"max {max(f[0] for f in firsts):.2f}), parent {me:.2f} s CPU, pool workers {kids:.2f} s CPU, "
            f"{wall:.2f} s wall (loaded), peak RSS {rss:,.0f} MiB"
        )
    gone = [store / "results.receipt.json"] if args.no_receipt else []
    gone += [store / "parts" / "index.json"] if args.no_index else []
    what = " and ".join(p.name for p in gone) or "nothing"
    print(f"load average {os.getloadavg()[0]:.2f}; deleted before each repeat: {what}")
    print(f"running the sim/ of {args.code or REPO}")
    cpus, walls, peaks = [], [], []
    for _ in range(args.repeats):
        for path in gone:
            path.unlink(missing_ok=True)
        cpu, wall, rss, rc, err = timed([python, "-m", "sim.cli", *words], args.code)
        if rc != 0:
            print("a resume failed", file=sys.stderr)
            return rc
        if "resuming" not in err:
            print(f"a resume ran something: {err[-2000:]}", file=sys.stderr)
            return 1
        cpus.append(cpu)
        walls.append(wall)
        peaks.append(rss)
    print(
        f"resume of the finished sweep, median of {args.repeats}: {statistics.median(cpus):.2f} s CPU "
        f"(min {min(cpus):.2f}, max {max(cpus):.2f}), {statistics.median(walls):.2f} s wall (loaded), "
        f"peak RSS {statistics.median(peaks):,.0f} MiB (min {min(peaks):,.0f}, max {max(peaks):,.0f})"
    )
    print(prov.text())
    if not args.keep:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
