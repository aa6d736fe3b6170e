"""``ctxsim fidelity``: the modelled tokens and cost of each trace with provider usage against the
providers' recorded numbers, per call, with overall figures on the traces held back from fitting."""

from __future__ import annotations

import argparse
import sys

from sim.commands.common import format_table, warn
from sim.util.errors import ConfigError

FIDELITY_COLUMNS = [
    "trace_id",
    "split",
    "calls",
    "input_exact_share",
    "cached_predicted_over_reported",
    "cached_median_abs_pct_err",
    "cached_p95_abs_pct_err",
    "cached_zero_reported_calls",
    "cost_predicted_over_recorded",
    "cost_median_abs_pct_err",
    "cost_p95_abs_pct_err",
    "text_estimate_median_abs_pct_err",
]


def add_parser(sub) -> None:
    """The ``fidelity`` subcommand on the CLI's subparsers."""
    f = sub.add_parser(
        "fidelity",
        help="compare modelled tokens and cost with the providers' recorded numbers",
        description="Replay each trace with provider usage under its recorded policy and compare, per call, "
        "the modelled input, cached and output tokens and cost with the recorded ones (median and p95 "
        "absolute % error per trace; overall figures on the traces held back from fitting).",
    )
    f.add_argument("paths", nargs="+", metavar="PATH")
    f.add_argument("--format", choices=("table", "json"), default="table")
    f.set_defaults(func=cmd_fidelity)


def overall_text(o: dict) -> str:
    """The overall figures under the per-trace table."""
    return (
        f"\noverall: {o['calls']:,} calls; input exact on {o['input_exact_share']:.2%}\n"
        f"held back: cached predicted/reported {o['cached_predicted_over_reported']}, per call |error| "
        f"median {o['cached_median_abs_pct_err']}% p95 {o['cached_p95_abs_pct_err']}% over calls "
        f"reporting a hit; {o['cached_zero_reported_calls']} calls reported 0 cached "
        f"({o['cached_zero_reported_predicted_calls']} of them predicted > 0)\n"
        f"held back: cost predicted/recorded {o['cost_predicted_over_recorded']}, per call |error| "
        f"median {o['cost_median_abs_pct_err']}% p95 {o['cost_p95_abs_pct_err']}%, per run median "
        f"{o['cost_run_median_abs_pct_err']}% p95 {o['cost_run_p95_abs_pct_err']}%\n"
        f"held back: text-only input estimate (shipped calibration) median |error| "
        f"{o['text_estimate_median_abs_pct_err']}%\nsplit: {o['split']}\n"
        f"held back ({len(o['held_back'])}): {', '.join(o['held_back']) or 'none'}"
    )


def cmd_fidelity(args: argparse.Namespace) -> int:
    from sim.analysis.fidelity import evaluate
    from sim.importers import load_paths
    from sim.results.tables import json_line

    report = evaluate(list(load_paths(args.paths)))
    if not report["per_trace"]:
        raise ConfigError("fidelity: none of the given traces has provider-reported usage")
    for line in report["overall"]["model_fallbacks"]:
        warn(line)
    if args.format == "json":
        sys.stdout.write(json_line(report) + "\n")
    else:
        print(format_table(report["per_trace"], FIDELITY_COLUMNS))
        print(overall_text(report["overall"]))
    return 0
