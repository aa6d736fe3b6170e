"""Every framework oracle on every shared trace family, at each policy's defaults and at drawn settings:
the table of docs/conformance.md ("Measured").

    .venv/bin/python benchmarks/oracles/everywhere.py OUT_DIR [--framework F]... [--family NAME]...
        [--draw 20] [--seed 0] [--limit 10]

Runs ``frameworks.py FRAMEWORK --traces FAMILY --format json`` once for the defaults and once with
``--draw N`` per (framework, family), each in its own process, writes each run's JSON lines to
``OUT_DIR/<framework>-<family>-{defaults,draws}.jsonl`` and prints, per policy and family, the calls,
agreement and token difference of the defaults and of the draws pooled (with the worst drawn setting's
agreement). mini-swe-agent and tau-bench are cut to their first ``--limit`` runs. Exit 1 when any
setting disagrees, 3 when a run fails.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from frameworks import FRAMEWORKS  # noqa: E402

from sim.util.paths import traces_dir  # noqa: E402

FAMILIES = {
    "mini": "mini-swe-agent-gemini3pro/trajs",
    "swe": "swe-agent",
    "tau": "tau-bench/historical_trajectories/gpt-4o-airline.json",
    "ohv0": "openhands-v0",
    "ohsdk": "openhands-sdk-v1",
    "inspect": "inspect-ai",
    "claude": "claude-code-fixtures",
}
LIMITED = {"mini", "tau"}


def run(framework: str, family: str, extra: list[str], limit: int, out: Path) -> tuple[list[dict], float]:
    argv = [
        sys.executable,
        str(HERE / "frameworks.py"),
        framework,
        "--traces",
        str(traces_dir() / FAMILIES[family]),
    ]
    argv += ["--format", "json", *extra] + (["--limit", str(limit)] if family in LIMITED else [])
    start = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True)
    seconds = time.monotonic() - start
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"{framework} {family} {extra}: exit {proc.returncode}\n{proc.stderr[-2000:]}")
    out.write_text(proc.stdout)
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()], seconds


def pooled(rows: list[dict]) -> tuple[int, float, float, float]:
    """(calls, agreement, token difference, worst setting's agreement) over several settings' rows."""
    calls = sum(r["calls"] for r in rows)
    same = sum(round(r["agreement"] * r["calls"]) for r in rows)
    ctx, real = sum(r["tokens_ctxsim"] for r in rows), sum(r["tokens_real"] for r in rows)
    worst = min((r["agreement"] for r in rows), default=1.0)
    return calls, same / calls if calls else 1.0, (ctx - real) / real if real else 0.0, worst


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--framework", action="append", choices=FRAMEWORKS)
    ap.add_argument("--family", action="append", choices=sorted(FAMILIES))
    ap.add_argument("--draw", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--limit", type=int, default=10)
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    bad = 0
    print(
        "| framework | policy | family | defaults: calls, agreement, tokens "
        "| draws: calls, agreement (worst setting), tokens | seconds |"
    )
    print("|---|---|---|---|---|---:|")
    for framework in args.framework or FRAMEWORKS:
        for family in args.family or FAMILIES:
            base, s1 = run(
                framework, family, [], args.limit, args.out / f"{framework}-{family}-defaults.jsonl"
            )
            drawn, s2 = run(
                framework, family, ["--draw", str(args.draw), "--seed", str(args.seed)], args.limit,
                args.out / f"{framework}-{family}-draws.jsonl",
            )  # fmt: skip
            for policy in dict.fromkeys(r["policy"] for r in base + drawn):
                d = [r for r in base if r["policy"] == policy]
                n = [r for r in drawn if r["policy"] == policy]
                dc, da, dt, _ = pooled(d)
                nc, na, nt, worst = pooled(n)
                bad += any(r["agreement"] != 1.0 or r["token_difference"] != 0.0 for r in d + n)
                print(
                    f"| {framework} | {policy} | {family} | {dc}, {100 * da:.2f}%, {100 * dt:+.3f}% | {nc}, "
                    f"{100 * na:.2f}% ({100 * worst:.2f}%), {100 * nt:+.3f}% | {s1 + s2:.0f} |",
                    flush=True,
                )
    return 1 if bad else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except RuntimeError as exc:  # a run exited 2 or 3: its command and the end of its standard error
        print(f"everywhere.py: {exc}", file=sys.stderr)
        sys.exit(3)
