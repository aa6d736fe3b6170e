"""``ctxsim report``: a Markdown and a self-contained HTML report of one or more sweeps' results, with
figures (``sim.report.make`` writes them)."""

from __future__ import annotations

import argparse
import sys
from functools import partial
from pathlib import Path

from sim.util.errors import ConfigError


def add_parser(sub) -> None:
    """The ``report`` subcommand on the CLI's subparsers."""
    rp = sub.add_parser(
        "report",
        help="write a Markdown and a self-contained HTML report of sweep results, with figures",
        description="Write DIR/report.md, DIR/report.html (figures embedded, no external assets) and "
        "DIR/figures/*.png from one or more sweeps' results.parquet (the file or its folder): per-setting "
        "table, cost vs completion with the Pareto frontier, heatmaps over a 2-D grid, cumulative input "
        "tokens by call for one trace under raw and the cheapest settings, and the view's composition "
        "under the recommended setting. With two RESULTS, the second (candidate) is compared with the "
        "first (baseline).",
        epilog="example: ctxsim report outputs/sweeps/raw outputs/sweeps/seed_engine -o reports/seed",
    )
    rp.add_argument("paths", nargs="+", metavar="RESULTS")
    rp.add_argument("-o", "--output", required=True, metavar="DIR", help="output folder")
    rp.add_argument("--trace", metavar="ID", help="trace of the per-call figures (default: most calls)")
    rp.add_argument(
        "--allow-mixed",
        action="store_true",
        help="report results of different ctxsim versions, suites or pricing together (said in the report)",
    )
    rp.add_argument(
        "--progress",
        action="store_true",
        help="say each step on standard error even when it is not a terminal (on a terminal it is said)",
    )
    rp.set_defaults(func=cmd_report)


def report_step(msg: str, show: bool = False) -> None:
    """A step of the report on stderr, on a terminal or with ``--progress`` (make_report checks for a
    Ctrl-C at each step, ``sim.util.interrupts``)."""
    if show or sys.stderr.isatty():
        print(f"report: {msg}", file=sys.stderr, flush=True)


def cmd_report(args: argparse.Namespace) -> int:
    from sim.report.make import make_report, verdict_of
    from sim.results.summary import results_file

    paths = [results_file(p) for p in args.paths]  # a missing file: ConfigError, exit 2, nothing written
    out = Path(args.output)
    for part in (out, *out.parents):  # the folder the report goes in: not a file, nor below one
        if part.exists() and not part.is_dir():
            raise ConfigError(f"report: --out {out}: {part} is not a folder")
    md, page = make_report(
        paths,
        Path(args.output),
        trace_id=args.trace,
        allow_mixed=args.allow_mixed,
        progress=partial(report_step, show=args.progress),
    )
    if rec := verdict_of(md):
        print(rec)
    print(md)
    print(page)
    return 0
