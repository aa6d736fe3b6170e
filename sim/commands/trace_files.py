"""``ctxsim import`` and ``ctxsim validate``: the commands on trace files themselves. ``import`` converts
source files (any supported format) into one canonical file; ``validate`` lists every problem of every
record against the canonical schema, without stopping at the first."""

from __future__ import annotations

import argparse
import itertools
import sys
from collections.abc import Iterator
from pathlib import Path

from sim.util.errors import TraceError
from sim.util.jsonl import json_lines


def add_parsers(sub) -> None:
    """The ``import`` and ``validate`` subcommands on the CLI's subparsers."""
    i = sub.add_parser(
        "import",
        help="convert source files into one canonical trace file",
        description="Convert any number of source files (auto-detected formats) into one "
        "canonical file; the format follows OUT's extension (.jsonl or .parquet).",
    )
    i.add_argument("paths", nargs="+", metavar="PATH")
    i.add_argument("-o", "--output", required=True, metavar="OUT")
    i.add_argument(
        "--redact",
        action="store_true",
        help="write text-free traces: sizes, provenance, usage and hashed fact ids only (no content)",
    )
    i.set_defaults(func=cmd_import)

    v = sub.add_parser(
        "validate",
        help="list every problem in trace files",
        description="Check files against the canonical schema (scenarios/SCHEMA.md) and list "
        "every problem with file, record and field. Exit 2 if any.",
    )
    v.add_argument("paths", nargs="+", metavar="PATH")
    v.set_defaults(func=cmd_validate)


# ---------------------------------------------------------------------------------------------- import
def cmd_import(args: argparse.Namespace) -> int:
    from sim.importers import load_paths
    from sim.trace.io import write_traces

    traces = load_paths(args.paths)
    first = next(traces, None)
    if first is None:  # every record was skipped (the warnings say why): an empty file is not a result
        raise TraceError(", ".join(map(str, args.paths)), "no traces to import (see the warnings above)")
    traces = itertools.chain([first], traces)
    if args.redact:
        from sim.trace.io import redact

        traces = map(redact, traces)
    n = write_traces(traces, Path(args.output))
    print(f"wrote {n} traces to {args.output}", file=sys.stderr)
    return 0


# -------------------------------------------------------------------------------------------- validate
def _record_problems(path: Path, record: str, d, rules) -> Iterator[str]:
    trace_problems, record_name = rules
    for field, msg in trace_problems(d):
        yield f"{path.name}: record {record_name(record, d)}: field {field}: {msg}"


def canonical_problems(path: Path) -> Iterator[str]:
    """Every problem of every record of a canonical file (does not stop at the first)."""
    from sim.trace.codec import record_name
    from sim.trace.rules import trace_problems

    rules = (trace_problems, record_name)  # imported once a file, not once a record
    if path.suffix.lower() == ".parquet":
        from sim.trace.read_parquet import parquet_rows

        try:
            for row, d in parquet_rows(path):
                d = {
                    k: v
                    for k, v in d.items()
                    if v is not None or k not in ("recorded_policy", "outcome", "children")
                }
                yield from _record_problems(path, f"row {row}", d, rules)
        except TraceError as exc:  # a damaged file: its rows up to the damage are checked, then this
            yield str(exc)
        return
    for lineno, d, problem in json_lines(path):
        if problem is not None:
            yield f"{path.name}: record line {lineno}: {problem}"
        else:
            yield from _record_problems(path, f"line {lineno}", d, rules)


def cmd_validate(args: argparse.Namespace) -> int:
    from sim.importers import detect, expand_paths, load_path
    from sim.trace.codec import CANONICAL_FORMAT, trace_to_dict
    from sim.trace.rules import trace_problems

    bad = 0
    total: int | None = 0  # traces of the source files; None once a canonical file is read (not counted)
    for f in expand_paths(args.paths):
        try:
            imp = detect(f)
        except TraceError as exc:
            print(str(exc))
            bad += 1
            continue
        problems: list[str] = []
        count = 0
        if imp.name.startswith(CANONICAL_FORMAT):
            problems = list(canonical_problems(f))
            count = None
        else:
            try:
                for t in load_path(f):
                    count += 1
                    problems.extend(
                        f"{f.name}: record {t.trace_id}: field {fld}: {msg}"
                        for fld, msg in trace_problems(trace_to_dict(t))
                    )
            except TraceError as exc:
                problems.append(str(exc))
        if problems:
            bad += 1
            print("\n".join(problems))
        else:
            what = f" ({count} traces)" if count is not None else ""
            print(f"{f.name}: ok, format {imp.name}{what}")
            total = None if total is None or count is None else total + count
    if not bad and total == 0:  # as import and run refuse it: no model call, nothing to import or replay
        print(f"{', '.join(map(str, args.paths))}: no traces (see the warnings above)")
        return 2
    return 2 if bad else 0
