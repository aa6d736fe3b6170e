"""``ctxsim conformance``: hold ctxsim's model of a framework to that framework's installed code on your own
traces and settings. It runs the differential oracles of a source checkout
(``benchmarks/oracles/frameworks.py``), which build the framework's pinned environment on first use; the
comparison itself is theirs, so this module only finds them and passes the arguments on."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from sim.util.errors import ConfigError

# the oracles frameworks.py drives (its FRAMEWORKS; tests/test_conformance_runner.py holds the two equal)
FRAMEWORKS = ("adk", "autogen", "effect_agent", "inspect", "langchain", "letta", "openhands", "strands")


def runner() -> Path:
    """``benchmarks/oracles/frameworks.py`` beside the ``sim`` package (an editable install or a checkout)."""
    return Path(__file__).resolve().parent.parent.parent / "benchmarks" / "oracles" / "frameworks.py"


def add_parser(sub) -> None:
    c = sub.add_parser(
        "conformance",
        help="hold a framework policy to the framework's real code on your traces (needs a source checkout)",
        description="Replay TRACES with the framework's own code (its pinned environment is built on first "
        "use) and with ctxsim's policy at each setting; print per setting and trace the calls compared, "
        "per-call agreement, the cumulative-token difference (ctxsim - real) and the first differing call. "
        "Exit 0 when every call agrees, 1 on any disagreement, 2 on bad input, 3 when an oracle fails. "
        "Runs benchmarks/oracles/frameworks.py of a source checkout (docs/conformance.md).",
    )
    c.add_argument("framework", choices=FRAMEWORKS)
    c.add_argument(
        "traces", nargs="+", metavar="TRACES", help="trace files or folders (any importable format)"
    )
    c.add_argument("--policy", help="one of the framework's policies (default: every one its oracle holds)")
    c.add_argument(
        "--setting",
        action="append",
        metavar="'KEY=V ...'",
        help="one setting, by ctxsim's knob names (a framework policy's are the library's own); repeatable",
    )
    c.add_argument(
        "--draw", type=int, default=0, metavar="N", help="add N settings drawn across the knobs' ranges"
    )
    c.add_argument("--seed", type=int, default=0, help="seed of --draw (default 0)")
    c.add_argument("--limit", type=int, metavar="N", help="only the first N traces")
    c.add_argument("--format", choices=("table", "json"), default="table")
    c.set_defaults(func=cmd_conformance)


def cmd_conformance(args: argparse.Namespace) -> int:
    script = runner()
    if not script.is_file():
        raise ConfigError(
            "ctxsim conformance runs the framework oracles of a source checkout (benchmarks/oracles/), which "
            "this installation does not have: clone the repository and install it with `pip install -e .`"
        )
    argv = [sys.executable, str(script), args.framework, "--traces", *args.traces]
    if args.policy:
        argv += ["--policy", args.policy]
    for s in args.setting or []:
        argv += ["--setting", s]
    argv += ["--draw", str(args.draw), "--seed", str(args.seed), "--format", args.format]
    if args.limit is not None:
        argv += ["--limit", str(args.limit)]
    return subprocess.run(argv).returncode
