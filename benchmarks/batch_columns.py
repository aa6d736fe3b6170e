"""Benchmark (not a test): one-setting replay on the batch path, CPU time in this process, medians.

    .venv/bin/python benchmarks/batch_columns.py [--runs 500] [--repeats 7]

Corpus: the SWE-like generator's runs ``generate_run(SEED, i)`` for i < ``--runs``, built once. Each
measurement replays the whole corpus in one batch and keeps what a sweep keeps: the metric columns
(``metrics``) or the result rows (``rows``), under ``observation_masking`` (defaults) and a pipeline of
two batch-path steps (settle-time head/tail cuts, then masking). Prints calls/s (simulated model calls
per CPU second) per route, the routes timed in turn. Traces are built before timing (loading is
``benchmarks/load_traces.py``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from scenarios.make_suite import SEED  # noqa: E402
from scenarios.swe_like import generate_run  # noqa: E402
from sim.policies.base import make_policy  # noqa: E402
from sim.util import provenance  # noqa: E402

PIPELINE = [
    {"name": "tool_result_head_tail", "max_chars": 2000, "head_chars": 800, "tail_chars": 800},
    {"name": "observation_masking"},
]


def routes():
    """(name, replay function) of this checkout: from the batch's columns where it has them, else the
    records (the code before columns, for before/after numbers)."""
    from sim.engine import dispatch as engine
    from sim.results import tables

    if hasattr(engine, "replay_table"):
        from sim.metrics.compute import table_metric_columns

        return {
            "metrics": lambda ts, p: table_metric_columns(engine.replay_table(ts, p)),
            "rows": lambda ts, p: tables.table_rows(engine.replay_table(ts, p), "bench"),
        }
    from sim.metrics.compute import compute_metric_columns

    return {
        "metrics": lambda ts, p: compute_metric_columns(engine.replay_many(ts, p)),
        "rows": lambda ts, p: tables.result_rows(engine.replay_many(ts, p), "bench"),
    }


def cpu_median(fn, repeats: int, min_seconds: float = 0.3) -> float:
    """Median CPU seconds of one call over ``repeats`` timed repeats, each long enough to time."""
    return cpu_medians([fn], repeats, min_seconds)[0]


def cpu_medians(fns, repeats: int, min_seconds: float = 0.3) -> list[float]:
    """``cpu_median`` of each of ``fns``, their repeats taken in turn: a neighbour's burst on a shared
    machine then slows every route's few samples, not all the samples of the one route it meets."""
    passes = []
    for fn in fns:
        t0 = time.process_time()
        fn()  # warm-up: fills per-trace and per-batch caches, as a sweep's later settings find them
        passes.append(max(1, int(min_seconds / max(time.process_time() - t0, 1e-6))))
    samples: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for fn, n, got in zip(fns, passes, samples, strict=True):
            t0 = time.process_time()
            for _ in range(n):
                fn()
            got.append((time.process_time() - t0) / n)
    return [statistics.median(got) for got in samples]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=500)
    p.add_argument("--repeats", type=int, default=7)
    args = p.parse_args()
    prov = provenance.start()
    traces = [generate_run(SEED, i) for i in range(args.runs)]
    calls = sum(len(t.calls) for t in traces)
    print(f"corpus: {args.runs} SWE-like runs, {calls:,} calls; CPU time, median of {args.repeats}")
    policies = {
        "observation_masking": make_policy("observation_masking"),
        "pipeline(head_tail, masking)": make_policy("pipeline", steps=PIPELINE),
    }
    cases = [(pname, route, pol, fn) for pname, pol in policies.items() for route, fn in routes().items()]
    fns = [lambda fn=fn, policy=policy: fn(traces, policy) for *_, policy, fn in cases]
    for (pname, route, *_), s in zip(cases, cpu_medians(fns, args.repeats), strict=True):
        print(f"{pname:30s} {route:8s} {calls / s:>12,.0f} calls/s  ({s * 1e3:.2f} ms per corpus)")
    print(prov.text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
