"""The OpenHands differential oracle, ctxsim's side: feeds canonical traces to OpenHands' own condensers
(``driver.py``, in the oracle's virtual environment), compares their per-call decisions with the
``openhands_*`` policies' and writes the goldens.

    python benchmarks/oracles/openhands/feed.py [--write] [--settings A,B] [--python ORACLE_PYTHON]

Prints, per setting, the calls whose state vectors agree (every original event's state, the inserted
placeholders and summaries with their sizes, the copies, the view's tokens) and the cumulative request
tokens of both sides. ``--write`` rewrites ``tests/golden/frameworks/openhands/`` from the oracle's side
(``make oracle-openhands``); ``tests/test_openhands_oracle.py`` then holds the policies to it without
OpenHands. Corpora and settings are in ``tests/openhands_oracle.py``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent.parent
sys.path.insert(0, str(REPO / "tests"))

import openhands_oracle as oo  # noqa: E402

from sim.core.types import Trace  # noqa: E402
from sim.cost.tokens import MESSAGE_OVERHEAD_BYTES  # noqa: E402

VERSIONS = {"openhands-ai": "0.62.0", "openhands-sdk": "1.58.2"}


def oracle_trace(t: Trace) -> dict:
    """A trace as the driver reads it: structure, OpenHands types and ctxsim's sizes; no text."""
    never, empty = ("action:recall",), "observation:recall"  # never sent; sent unless it holds nothing
    events = [
        {
            "index": e.index, "kind": e.kind, "tokens": e.tokens, "ids": list(e.tool_call_ids),
            "id": e.tool_call_id, "source_type": e.source_type, "url": e.url,
            "sent": e.source_type not in never and not (e.source_type == empty and e.tokens == 0),
        }
        for e in t.events
    ]  # fmt: skip
    calls = [{"view_end": c.view_end, "residual": c.residual_tokens} for c in t.calls]
    return {"id": t.trace_id, "bpt": t.bytes_per_token or 4.0, "overhead": MESSAGE_OVERHEAD_BYTES,
            "events": events, "calls": calls}  # fmt: skip


def run_oracle(python: str, runs: list[dict], traces: dict[str, Trace]) -> dict[tuple, dict]:
    """Runs OpenHands' condensers: ``runs`` are ``{"key": [...], "trace": trace key, "framework": "v0" |
    "sdk", "setting": {"steps": [...], "window": int | None}}`` over ``traces`` (key -> trace); returns
    key (a tuple) -> the driver's result (states run-length coded, as the goldens keep them)."""
    exported = {}
    for r in runs:
        if r["trace"] not in exported:
            exported[r["trace"]] = oracle_trace(traces[r["trace"]])
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "in.json", Path(tmp) / "out.json"
        src.write_text(json.dumps({"traces": exported, "runs": runs}))
        subprocess.run([python, str(HERE / "driver.py"), str(src), str(dst)], check=True)
        results = json.loads(dst.read_text())["results"]
    out: dict[tuple, dict] = {}
    for r in results:
        for c in r["calls"]:
            c["states"], c["inserted"] = oo.rle(c["states"]), oo.grouped(c["inserted"])
        out[tuple(r["key"])] = {
            "calls": r["calls"], "finish": r["finish"], "summaries": r["summaries"],
            "condensations": r["condensations"], "requests": r["requests"],
        }  # fmt: skip
    return out


def golden_runs(settings: list[str], shared: list[Trace]) -> tuple[list[dict], dict[str, Trace]]:
    """The goldens' runs (``tests/openhands_oracle.py`` SETTINGS on their corpora), keyed by setting and
    trace id."""
    traces, runs = {}, []
    for name in settings:
        framework, steps, window, corpus = oo.SETTINGS[name]
        for t in oo.corpus(corpus, shared):
            traces.setdefault(t.trace_id, t)
            runs.append({"key": [name, t.trace_id], "trace": t.trace_id, "framework": framework,
                         "setting": {"steps": steps, "window": window}})  # fmt: skip
    return runs, traces


def compare(real: dict, ctx: dict, residuals: list[int]) -> tuple[int, int, int, int]:
    """(calls agreeing, calls, cumulative tokens real, ctxsim); a call missing on one side disagrees."""
    same = 0
    n = max(len(real["calls"]), len(ctx["calls"]))
    tr = tc = 0
    for k in range(n):
        a = real["calls"][k] if k < len(real["calls"]) else None
        b = ctx["calls"][k] if k < len(ctx["calls"]) else None
        if a is not None:
            tr += max(a["view"] + residuals[k], 0)
        if b is not None:
            tc += max(b["view"] + residuals[k], 0)
        same += a is not None and a == b
    return same, n, tr, tc


def goldens(python: str, settings: list[str], write: bool = False) -> int:
    """The goldens' settings (default: all): prints each one's agreement; ``write`` rewrites its golden
    from the oracle's side. 1 when a call or a finish differs."""
    settings = settings or list(oo.SETTINGS)
    shared = oo.shared_traces()
    real = run_oracle(python, *golden_runs(settings, shared))
    print(
        f"{'setting':36} {'calls agree':>14} {'tokens real':>12} {'ctxsim':>12} {'diff':>7}  finish differs"
    )
    bad = 0
    for name in settings:
        framework, steps, window, corpus = oo.SETTINGS[name]
        same = n = tr = tc = 0
        bad_finish = []
        traces = oo.corpus(corpus, shared)
        for t in traces:
            ctx, gold = oo.ctxsim_run(t, steps, window), real[(name, t.trace_id)]
            s, m, a, b = compare(gold, ctx, [c.residual_tokens for c in t.calls])
            same, n, tr, tc = same + s, n + m, tr + a, tc + b
            if ctx["finish"] != gold["finish"]:
                bad_finish.append(f"{t.trace_id}: {gold['finish']} vs {ctx['finish']}")
        bad += same != n or bool(bad_finish)
        diff = 100.0 * (tc - tr) / tr if tr else 0.0
        share = 100 * same / n if n else 100.0
        row = f"{name:36} {same:>6}/{n:<6} {share:5.1f}% {tr:>12} {tc:>12} {diff:+6.2f}%  "
        print(row + "; ".join(bad_finish))
        if write:
            oo.GOLDEN.mkdir(parents=True, exist_ok=True)
            doc = {"setting": name, "framework": framework, "steps": steps, "window": window,
                   "corpus": corpus, "versions": VERSIONS,
                   "traces": {t.trace_id: real[(name, t.trace_id)] for t in traces}}  # fmt: skip
            oo.golden_path(name).write_text(oo.dumps(doc))
    return 1 if bad else 0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--write", action="store_true", help="rewrite the goldens from the oracle's side")
    ap.add_argument("--settings", default="", help="comma-separated setting names (default: all)")
    ap.add_argument(
        "--python", default=str(HERE / ".venv" / "bin" / "python"), help="the oracle venv's python"
    )
    args = ap.parse_args()
    sys.exit(goldens(args.python, [s for s in args.settings.split(",") if s], args.write))


if __name__ == "__main__":
    main()
