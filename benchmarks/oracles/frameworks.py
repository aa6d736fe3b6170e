"""Drive a framework's real compaction code over the goldens' traces and compare it with ctxsim's policy.

    .venv/bin/python benchmarks/oracles/frameworks.py FRAMEWORK [--write] [--setting NAME]

FRAMEWORK: adk, letta, inspect, autogen, strands or langchain.

Runs ``benchmarks/oracles/<framework>/oracle.py`` in that framework's own virtual environment
(``benchmarks/oracles/<framework>/.venv``, made by ``make oracle-<framework>`` from its pinned
``requirements.txt``) on the traces of ``tests/framework_oracle.py``; prints per setting the calls
compared, the per-call agreement with ctxsim's policy and the cumulative token difference (ctxsim -
real); ``--write`` rewrites ``tests/golden/frameworks/<framework>/``. Exit 1 when a setting disagrees.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(REPO / "tests"))

import framework_oracle as fo  # noqa: E402

FULL_TEXT = {
    "langchain",
    "strands",
}  # oracles that read whole contents (LangChain's trim keeps a message's last lines)
VERSIONS = {
    "adk": "google-adk 2.13.0",
    "letta": "letta 0.16.8",
    "inspect": "inspect-ai 0.3.285",
    "autogen": "autogen-core 0.7.5",
    "strands": "strands-agents 1.62.0",
    "langchain": "langchain 1.5.2, langchain-core 1.8.3, langgraph 1.2.24",
}


def run_oracle(framework: str, settings: dict) -> dict:
    """The real library's vectors: {setting: {trace_id: {finish, calls}}}."""
    corpora = {c for c, *_ in settings.values()}
    traces = {name: fo.corpus(name) for name in sorted(corpora)}
    job = {
        "summary": fo.SUMMARY_RULE,
        "settings": [{"name": s, "corpus": c, "config": cfg} for s, (c, _, _, cfg) in settings.items()],
        "corpora": {
            name: [fo.export(t, full_text=framework in FULL_TEXT) for t in ts] for name, ts in traces.items()
        },
    }
    python = HERE / framework / ".venv" / "bin" / "python"
    if not python.exists():
        sys.exit(f"frameworks.py: {python} not found; run `make oracle-{framework}`")
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "in.json", Path(tmp) / "out.json"
        src.write_text(json.dumps(job))
        subprocess.run([str(python), str(HERE / framework / "oracle.py"), str(src), str(out)], check=True)
        return json.loads(out.read_text()), traces


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("framework", choices=sorted(fo.SETTINGS))
    ap.add_argument("--write", action="store_true", help="rewrite tests/golden/frameworks/<framework>/")
    ap.add_argument("--setting", action="append", help="only this setting (repeatable)")
    args = ap.parse_args(argv)
    settings = {k: v for k, v in fo.SETTINGS[args.framework].items() if not args.setting or k in args.setting}
    real, traces = run_oracle(args.framework, settings)
    bad = 0
    print(f"{'setting':28s} {'policy':28s} {'calls':>6s} {'agree':>7s} {'tokens ctxsim-real':>19s}")
    for name, (corpus, policy, knobs, config) in settings.items():
        checks = [(policy, knobs)]
        if (also := fo.ALSO.get((args.framework, name))) is not None:
            checks.append(also)
        for pol, kn in checks:
            n = same = tc = tr = 0
            for t in traces[corpus]:
                want = real[name][t.trace_id]
                got = fo.vectors(t, pol, kn, window=config.get("window"))
                a, b, c, d = fo.agreement(got, want)
                full = pol == policy  # the policy itself must also stop where the framework did
                if full and (len(got["calls"]) != len(want["calls"]) or got["finish"] != want["finish"]):
                    b = min(b, a - 1)
                n, same, tc, tr = n + a, same + b, tc + c, tr + d
            bad += same != n
            pct = 100.0 * (tc - tr) / tr if tr else 0.0
            print(f"{name:28s} {pol:28s} {n:6d} {100.0 * same / n:6.1f}% {pct:+18.2f}%")
        if args.write:
            path = fo.golden_path(args.framework, name)
            path.parent.mkdir(parents=True, exist_ok=True)
            golden = {
                "framework": VERSIONS[args.framework],
                "setting": name,
                "corpus": corpus,
                "policy": policy,
                "knobs": knobs,
                "config": config,
                "summary": fo.SUMMARY_RULE,
                "runs": real[name],
            }
            path.write_text(json.dumps(golden, indent=1) + "\n")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
