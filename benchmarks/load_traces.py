"""Benchmark (not a test): CPU time to load canonical traces, medians.

    .venv/bin/python benchmarks/load_traces.py [--runs 500] [--repeats 5]

Writes the SWE-like generator's runs ``generate_run(SEED, i)``, i < ``--runs``, as canonical JSON Lines
and Parquet in a temporary folder, then times, in this process: reading them as a run does (the
importers, ``load_paths``: read as columns, ``sim.trace.columns``), through ``--dataset``
(``load_dataset_traces``, streaming), with each trace's content hash (which every result row carries;
the column reader stores it at load), and the record-by-record reference reader (every record parsed and
built by ``trace_from_dict``, hashed by re-encoding) for comparison. Also prints one masking replay of
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
from sim.trace.codec import NULLABLE_TOP, trace_from_dict, trace_hash  # noqa: E402
from sim.trace.io import load_dataset_traces, write_traces  # noqa: E402
from sim.trace.read_parquet import parquet_rows  # noqa: E402
from sim.util import provenance  # noqa: E402


def reference(f: Path) -> list:
    """The record-by-record reader: each record parsed, validated and built by ``trace_from_dict``."""
    from sim.util.jsonl import json_lines

    if f.suffix == ".jsonl":
        return [trace_from_dict(d, f.name, f"line {n}", text_checked=True) for n, d, _ in json_lines(f)]
    rows = parquet_rows(f)
    return [
        trace_from_dict(
            {k: v for k, v in d.items() if v is not None or k in NULLABLE_TOP}, f.name, f"row {r}", True
        )
        for r, d in rows
    ]


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
    prov = provenance.start()
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
                (
                    "load_paths + hash",
                    lambda f=f: [t.derived("trace_hash", trace_hash) for t in load_paths([f])],
                ),
                ("reference + trace_hash", lambda f=f: [trace_hash(t) for t in reference(f)]),
            ):
                s = cpu_median(fn, args.repeats)
                print(f"{suffix:9s} {label:26s} {s * 1e3:9.1f} ms  ({calls / s:>10,.0f} calls/s)")
    from sim.engine.dispatch import replay_many
    from sim.policies.base import make_policy
    from sim.results.tables import result_rows

    policy = make_policy("observation_masking")
    result_rows(replay_many(traces, policy), "bench")
    s = cpu_median(lambda: result_rows(replay_many(traces, policy), "bench"), args.repeats)
    print(f"for scale: one masking replay of them with result rows, {s * 1e3:.1f} ms")
    print(prov.text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
