"""``ctxsim results``: a sweep's results summarised, one row per policy setting."""

from __future__ import annotations

import argparse
import sys

from sim.commands.common import format_table
from sim.util import interrupts


def add_parser(sub) -> None:
    """The ``results`` subcommand on the CLI's subparsers."""
    rs = sub.add_parser(
        "results",
        help="summarise a sweep: one row per policy setting",
        description="Summarise a sweep's results.parquet (PATH: the file or its folder): per policy setting "
        "the runs, median and mean cost, cumulative input tokens, cache hit rate, compactions per run, "
        "facts lost and the share of runs that completed their answer.",
    )
    rs.add_argument("path", metavar="PATH")
    rs.add_argument("--format", choices=("table", "json"), default="table")
    rs.set_defaults(func=cmd_results)


def cmd_results(args: argparse.Namespace) -> int:
    from sim.engine.model import UPPER_BOUND
    from sim.results.summary import SUMMARY_METRICS, summary, varying_columns
    from sim.results.tables import json_line

    rows = summary(args.path)
    interrupts.check()  # before any output (sim.util.interrupts)
    if args.format == "json":
        sys.stdout.write("".join(json_line(r) + "\n" for r in rows))
    else:
        shown = [
            {**r, "summarizer": f"{UPPER_BOUND} (upper bound)"} if r.get("summarizer") == UPPER_BOUND else r
            for r in rows
        ]
        print(format_table(shown, varying_columns(rows) + list(SUMMARY_METRICS)))
        if any(r.get("summarizer") == UPPER_BOUND for r in rows):
            print(
                f"{UPPER_BOUND}: the summarizer keeps what later actions need; an upper bound, not a harness"
            )
    return 0
