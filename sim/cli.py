"""``ctxsim``: a thin command line over the Python API. It parses and dispatches only; each command's
logic is its own module in ``sim.commands`` (which also adds the command's parser). Exit status 2 for
bad input or config (``sim.util.exitcodes``)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from sim.commands import (
    bench,
    conformance,
    demo,
    explain,
    fidelity,
    policies,
    report,
    results,
    run,
    size,
    sweep,
    trace_files,
)
from sim.commands.common import is_override
from sim.util.errors import CtxsimError
from sim.util.exitcodes import run_command

TRANSFORM_COMMANDS = ("run", "size", "sweep")  # they take --transform NAME [transform.KEY=V ...]
OVERRIDE_COMMANDS = ("run", "explain", "size", "sweep")  # KEY=VALUE words may follow their options


def build_parser() -> argparse.ArgumentParser:
    """Every subcommand's parser, each added by its command's module, in the order ``--help`` lists them."""
    from sim.gate.args import add_parser as add_gate_parser  # exit 0 pass, 1 regression, 2 config error
    from sim.util.versions import ctxsim_version

    p = argparse.ArgumentParser(
        prog="ctxsim",
        description="Replay recorded LLM-agent traces against context-management policies; "
        "measure what each policy costs.",
    )
    p.add_argument(
        "--debug", action="store_true", help="on an internal error (exit 3), print the traceback too"
    )
    p.add_argument("--version", action="version", version=f"ctxsim {ctxsim_version()}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run.add_parser(sub)
    trace_files.add_parsers(sub)  # import, validate
    policies.add_parser(sub)
    demo.add_parser(sub)
    explain.add_parser(sub)
    fidelity.add_parser(sub)
    bench.add_parser(sub)
    size.add_parser(sub)
    sweep.add_parser(sub)
    results.add_parser(sub)
    report.add_parser(sub)
    conformance.add_parser(sub)
    add_gate_parser(sub)
    return p


def unknown_arguments(parser: argparse.ArgumentParser, command: str, extra: list[str]) -> None:
    """Exit 2 with the subcommand's usage and, per unknown flag, the closest flags it takes."""
    import difflib

    sub = next(a.choices[command] for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    flags = sorted({o for a in sub._actions for o in a.option_strings if o.startswith("--")})
    hints = []
    for x in extra:
        name = x.split("=", 1)[0]
        close = difflib.get_close_matches(name, flags, n=2, cutoff=0.6) if name.startswith("-") else []
        hints.append(f"{x!r}" + (f" (did you mean {' or '.join(close)}?)" if close else ""))
    sub.error(f"unrecognized arguments: {', '.join(hints)}")


def show_notice(message, category, filename, lineno, file=None, line=None) -> None:
    """A notice (``sim.util.notices``) as one ``ctxsim: warning:`` line, without Python's file and line."""
    print(f"ctxsim: warning: {message}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    import warnings

    from sim.util.notices import ImportNotice, KnobDeprecation

    warnings.simplefilter("always", ImportNotice)
    warnings.simplefilter("default", KnobDeprecation)
    warnings.showwarning = show_notice
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv  # accepted anywhere on the line, not only before the command
    argv = [a for a in argv if a != "--debug"]
    transforms: list = []
    if argv[:1] and argv[0] in TRANSFORM_COMMANDS:  # --transform NAME [transform.KEY=V ...]
        from sim.config.transforms import take_transforms

        try:
            argv, transforms = take_transforms(argv, loose=argv[0] == "sweep")
        except CtxsimError as exc:
            print(f"ctxsim: error: {exc}", file=sys.stderr)
            return exc.exit_code
    # `run PATH... --policy X policy.n=10`: overrides may follow options, which argparse leaves over
    args, extra = parser.parse_known_args(argv)
    if extra:
        if args.command in OVERRIDE_COMMANDS and all(is_override(x) for x in extra):
            args.items.extend(extra)
        else:
            unknown_arguments(parser, args.command, extra)
    args.transforms = transforms
    return run_command(args.func, args, debug=debug)


if __name__ == "__main__":
    sys.exit(main())
