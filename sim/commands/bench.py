"""``ctxsim bench``: the command's flags and output. The measuring is ``sim.commands.engine_speed``, imported
only when the command runs (it loads the engine). Every figure comes with where it was measured
(``sim.util.provenance``: the commit, the libraries, the machine and its load): the ``provenance`` key of
each JSON row, two lines after the table."""

from __future__ import annotations

import argparse
import sys

from sim.commands.common import format_table, warn
from sim.util import interrupts, provenance
from sim.util.errors import ConfigError


def add_parser(sub) -> None:
    """The ``bench`` subcommand on the CLI's subparsers."""
    b = sub.add_parser(
        "bench",
        help="engine speed: simulated calls per second per policy",
        description="Benchmark the replay engine: simulated calls per second for each "
        "built-in policy over the 40 shared real runs (corpus shared, from CTXSIM_TRACES) and "
        "the "
        "embedded suite (corpus embedded); the median of several repeats on one pinned core.",
    )
    b.add_argument("--format", choices=("table", "json"), default="table")
    b.add_argument("--repeats", type=int, default=7, help="timed repeats per (policy, corpus); default 7")
    b.add_argument("--policy", action="append", help="only this policy (repeatable); default all registered")
    b.add_argument("--corpus", action="append", choices=("shared", "embedded"), help="only this corpus")
    b.add_argument(
        "--grid",
        action="store_true",
        help="calls/s of size's grid path (20 x 20 seed_engine settings) and its ratio to the bare kernel "
        "(benchmarks/kernel.py), both measured in this run",
    )
    b.add_argument("--traces", type=int, default=200, help="SWE-like traces for --grid (default 200)")
    b.set_defaults(func=cmd_bench)


def grid_bench(args: argparse.Namespace) -> int:
    """``bench --grid``: size's grid path against the bare kernel; exit 3 if they disagree."""
    from sim.commands.engine_speed import run_grid_bench
    from sim.results.tables import json_line

    if args.traces < 1 or args.repeats < 1:
        raise ConfigError(f"bench --grid: --traces {args.traces} and --repeats {args.repeats} must be >= 1")
    prov = provenance.start()
    row = run_grid_bench(args.traces, args.repeats, log=lambda m: warn(m))
    interrupts.check()  # before any output (sim.util.interrupts)
    if args.format == "json":
        sys.stdout.write(json_line({**row, "provenance": prov.finish()}) + "\n")
    else:
        print(format_table([row], list(row)))
        print(
            f"size's grid path: {row['grid_calls_per_s'] / 1e6:.1f}M grid-calls/s, "
            f"{row['ratio']:.1%} of the bare kernel's {row['kernel_calls_per_s'] / 1e6:.1f}M "
            f"(CPU time, median of {row['repeats']}, one core pinned)"
        )
        print(prov.text())
    return 0 if row["same_cumulative_input"] else 3


def cmd_bench(args: argparse.Namespace) -> int:
    from sim.commands.engine_speed import run_bench
    from sim.policies.base import policy_class
    from sim.results.tables import json_line

    for name in args.policy or []:
        policy_class(name)
    if args.grid:
        return grid_bench(args)
    prov = provenance.start()
    rows = run_bench(args.policy, args.corpus, args.repeats, log=lambda m: warn(m))
    interrupts.check()
    if args.format == "json":
        sys.stdout.write("".join(json_line({**r, "provenance": prov.finish()}) + "\n" for r in rows))
    else:
        print(format_table(rows, ["policy", "knobs", "corpus", "calls", "calls_per_s", "repeats"]))
        if rows:
            print(f"median of {args.repeats} repeats, one core pinned; machine has {rows[0]['cores']} cores")
        print(prov.text())
    return 0
