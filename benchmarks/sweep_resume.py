"""Benchmark (not a test): resume a finished sweep — the wall time and peak resident memory of
``ctxsim sweep`` when every run is already on disk, median of a few repeats.

    .venv/bin/python benchmarks/sweep_resume.py [--grid small|large] [--repeats 5] [--keep DIR]

``small`` is ``experiment=size_seed_engine`` (6 x 6, 1,462 runs over the embedded suite); ``large`` adds
``policy.summary_ratio`` with 5 values (7,310 runs). The sweep runs once (``workers=2``, not timed), then
the same command is repeated; each repeat is one process, measured on its own (``os.wait4``).
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
GRIDS = {
    "small": [],
    "large": ["policy.summary_ratio=0.05,0.1,0.2,0.3,0.4"],
}


def timed(cmd: list[str]) -> tuple[float, float, int]:
    """(wall seconds, peak RSS in MiB, exit status) of one child process; its stderr is shown if it fails."""
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            sys.stderr.write(err.read().decode(errors="replace")[-4000:])
    return wall, usage.ru_maxrss / 1024, proc.returncode  # Linux: ru_maxrss in KiB


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--grid", choices=sorted(GRIDS), default="small")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--keep", type=Path, help="sweep into this folder and keep it (reused when present)")
    args = p.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="ctxsim-resume-"))
    cmd = [
        str(REPO / ".venv" / "bin" / "ctxsim"),
        "sweep",
        "experiment=size_seed_engine",
        *GRIDS[args.grid],
        f"results.path={folder}",
    ]
    wall, rss, rc = timed([*cmd, "workers=2"])
    if rc != 0:
        print(f"the first sweep failed (exit {rc}): {' '.join(cmd)}", file=sys.stderr)
        return rc
    print(f"{args.grid} grid: first sweep {wall:.1f} s, peak RSS {rss:,.0f} MiB")
    walls, peaks = [], []
    for _ in range(args.repeats):
        wall, rss, rc = timed(cmd)
        if rc != 0:
            print(f"a resume failed (exit {rc})", file=sys.stderr)
            return rc
        walls.append(wall)
        peaks.append(rss)
    print(
        f"resume of the finished sweep, median of {args.repeats}: {statistics.median(walls):.2f} s "
        f"(min {min(walls):.2f}, max {max(walls):.2f}), peak RSS {statistics.median(peaks):,.0f} MiB "
        f"(min {min(peaks):,.0f}, max {max(peaks):,.0f})"
    )
    if not args.keep:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
