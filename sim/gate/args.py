"""The ``gate`` subcommand's arguments, apart from ``sim.gate.check``: the command line builds every parser at
start, and the gate's own module (metrics, numpy) is imported only when ``ctxsim gate`` runs. ``main`` is the
same command on its own (``python -m sim.gate``)."""

from __future__ import annotations

import sys


def cmd_gate(args) -> int:
    from sim.gate.check import cmd_gate as run_gate

    return run_gate(args)


def add_parser(sub) -> None:
    """The ``gate`` subcommand on the CLI's subparsers (``sim/cli.py`` calls this)."""
    g = sub.add_parser(
        "gate",
        help="regression gate: candidate policy vs baseline on a suite, per-metric thresholds",
        description="Replay a gate file's suite under its candidate policy, compare each metric with the "
        "baseline (a committed results file or a policy run) and check the thresholds. Exit 0 pass, "
        "1 regression (each failing metric named on stderr), 2 usage or config error, 3 internal error. "
        "See docs/gate.md.",
        epilog="example: ctxsim gate gates/ci.yaml --summary gate.md --junit gate.xml",
    )
    g.add_argument("gate_file", metavar="GATE_FILE")
    g.add_argument(
        "--update-baseline",
        action="store_true",
        help="rewrite baseline.results from the baseline policy (or the candidate when the baseline names "
        "no policy), then check",
    )
    g.add_argument(
        "--baseline-results",
        metavar="PATH.jsonl",
        help="the baseline results file, instead of the gate file's baseline.results (which must lie in "
        "the gate file's folder or the current one)",
    )
    g.add_argument("--summary", metavar="OUT.md", help="also write the Markdown summary here")
    g.add_argument("--junit", metavar="OUT.xml", help="write JUnit XML: one testcase per threshold")
    g.add_argument(
        "--allow-module",
        action="append",
        metavar="MODULE",
        help="let a policy's _target_ name a Policy subclass from this module of yours (repeatable)",
    )
    g.set_defaults(func=cmd_gate)


def main(argv: list[str] | None = None) -> int:
    """``python -m sim.gate GATE_FILE ...``: the ``ctxsim gate`` command on its own (same exit codes)."""
    import argparse

    from sim.util.exitcodes import run_command

    parser = argparse.ArgumentParser(prog="ctxsim")
    add_parser(parser.add_subparsers(dest="command", required=True, metavar="COMMAND"))
    words = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(["gate", *(w for w in words if w != "--debug")])
    return run_command(args.func, args, debug="--debug" in words)
