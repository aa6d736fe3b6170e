"""Benchmark (not a test): ``seed_engine`` one-setting replay, CPU time in this process, medians.

    .venv/bin/python benchmarks/seed_one_setting.py [--runs 500] [--repeats 5] [--loop]

Corpus: the SWE-like generator's runs ``generate_run(SEED, i)`` for i < ``--runs``, built once. Each
measurement replays the whole corpus under one seed-engine setting (a limit set: the lanes of
``sim.engine.fast.seed_rows``, one lane a run) and keeps what ``ctxsim run`` and a sweep keep: the metric
columns (``metrics``) or the result rows (``rows``). ``--loop`` also times the per-call loop on the same
setting (``replay_table(..., lanes=False)``), the route every limited seed engine took before. Prints calls/s
(simulated model calls per CPU second) per setting and route, pinned to one core."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from batch_columns import cpu_median  # noqa: E402

from scenarios.make_suite import SEED  # noqa: E402
from scenarios.swe_like import generate_run  # noqa: E402
from sim.policies.base import make_policy  # noqa: E402
from sim.util import provenance  # noqa: E402

SETTINGS = [(32000, 10000), (64000, 20000), (128000, 20000)]  # (context_token_limit, keep_recent_tokens)


def main() -> int:
    from sim.engine.dispatch import replay_table
    from sim.metrics.compute import table_metric_columns
    from sim.results.tables import table_rows

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=500)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--loop", action="store_true", help="time the per-call loop too")
    args = p.parse_args()
    prov = provenance.start()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    traces = [generate_run(SEED, i) for i in range(args.runs)]
    calls = sum(len(t.calls) for t in traces)
    print(f"corpus: {args.runs} SWE-like runs, {calls:,} calls; CPU time, median of {args.repeats}")
    routes = {
        "metrics": lambda p, lanes: table_metric_columns(replay_table(traces, p, lanes=lanes)),
        "rows": lambda p, lanes: table_rows(replay_table(traces, p, lanes=lanes), "bench"),
    }
    for limit, keep in SETTINGS:
        policy = make_policy("seed_engine", context_token_limit=limit, keep_recent_tokens=keep)
        for lanes in (True, False) if args.loop else (True,):
            for route, fn in routes.items():
                s = cpu_median(lambda fn=fn, p=policy, lanes=lanes: fn(p, lanes), args.repeats)
                where = "lanes" if lanes else "loop"
                label = f"seed_engine {limit}/{keep} {where:5} {route:7}"
                print(f"{label} {calls / s:>12,.0f} calls/s  ({s:.4f} s)")
    print(prov.text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
