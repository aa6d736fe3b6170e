"""Benchmark (not a test): CPU time to load canonical traces, medians.

    .venv/bin/python benchmarks/load_traces.py [--runs 500] [--repeats 5]

Writes the SWE-like generator's runs ``generate_run(SEED, i)``, i < ``--runs``, as canonical JSON Lines
and Parquet in a temporary folder, then times, in this process: reading them as a run does (the
importers, ``load_paths``), through ``--dataset`` (``load_dataset_traces``, streaming), and hashing
the loaded traces (``trace_hash``, which every result row carries). Also prints one masking replay of
the same traces (metrics included) for scale.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from scenarios.make_suite import SEED  # noqa: E402
from scenarios.swe_like import generate_run  # noqa: E402
from sim.importers import load_paths  # noqa: E402
from sim.traceio import load_dataset_traces, trace_hash, write_traces  # noqa: E402


def cpu_median(fn, repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        t0 = time.process_time()
        fn()
        samples.append(time.process_time() - t0)
    return statistics.median(samples)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=500)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    traces = [generate_run(SEED, i) for i in range(args.runs)]
    calls = sum(len(t.calls) for t in traces)
    print(f"{args.runs} SWE-like runs, {calls:,} calls; CPU time, median of {args.repeats}")
    with tempfile.TemporaryDirectory(prefix="ctxsim-load-") as tmp:
        for suffix in (".jsonl", ".parquet"):
            f = Path(tmp) / f"corpus{suffix}"
            write_traces(traces, f)
            list(load_dataset_traces(f, streaming=True))  # imports (datasets, pyarrow) before timing
            for label, fn in (
                ("load_paths", lambda f=f: list(load_paths([f]))),
                ("--dataset --streaming", lambda f=f: list(load_dataset_traces(f, streaming=True))),
                ("load_paths + trace_hash", lambda f=f: [trace_hash(t) for t in load_paths([f])]),
            ):
                s = cpu_median(fn, args.repeats)
                print(f"{suffix:9s} {label:26s} {s * 1e3:9.1f} ms  ({calls / s:>10,.0f} calls/s)")
    from sim.engine import replay_many
    from sim.policies.base import make_policy
    from sim.tables import result_rows

    policy = make_policy("observation_masking")
    result_rows(replay_many(traces, policy), "bench")
    s = cpu_median(lambda: result_rows(replay_many(traces, policy), "bench"), args.repeats)
    print(f"for scale: one masking replay of them with result rows, {s * 1e3:.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
