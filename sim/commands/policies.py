"""``ctxsim policies``: every registered policy with its knobs, their defaults and one line of what it
does."""

from __future__ import annotations

import argparse
import sys


def add_parser(sub) -> None:
    """The ``policies`` subcommand on the CLI's subparsers."""
    po = sub.add_parser("policies", help="list registered policies with their knobs and defaults")
    po.add_argument("--format", choices=("table", "json"), default="table")
    po.set_defaults(func=cmd_policies)


def cmd_policies(args: argparse.Namespace) -> int:
    import dataclasses

    from sim.policies.base import knobs, registered
    from sim.results.tables import json_line

    out = []
    for name, cls in registered().items():
        ks = {f.name: (None if f.default is dataclasses.MISSING else f.default) for f in knobs(cls)}
        doc = (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""
        out.append({"policy": name, "knobs": ks, "description": doc})
    if args.format == "json":
        sys.stdout.write("".join(json_line(o) + "\n" for o in out))
    else:
        for o in out:
            ks = " ".join(f"{k}={v}" for k, v in o["knobs"].items()) or "(no knobs)"
            print(f"{o['policy']}\n    knobs: {ks}\n    {o['description']}")
    return 0
