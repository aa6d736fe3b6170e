"""What every framework oracle (``benchmarks/oracles/<framework>/oracle.py``) shares: the job file it is
given and the per-call state string it writes back. Standard library only: it runs inside each
framework's own virtual environment, where ctxsim is not installed.

A job (written by ``frameworks.py``) is ``{"settings": [{name, corpus, config[, summary]}], "corpora":
{name: [canonical trace dicts]}, "summary": {...}}``: a setting's own ``summary`` rule (its policy's
scripted-summarizer knobs) wins over the job's. The answer is ``{setting: {trace_id: replay result}}``.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from collections.abc import Awaitable, Callable
from typing import Any

_RUN = re.compile(r"(.)\1*")


def rle(s: str) -> str:
    """Run-length code of a per-event state string ("vvvvpd" -> "4v1p1d"): goldens stay small."""
    return "".join(f"{len(m.group(0))}{m.group(0)[0]}" for m in _RUN.finditer(s))


def run_job(replay: Callable[[dict, dict, dict], Awaitable[Any]], argv: list[str] | None = None) -> int:
    """``oracle.py JOB.json OUT.json``: replay every trace of every setting with the framework's code."""
    job_path, out_path = (sys.argv[1:] if argv is None else argv)[:2]
    with open(job_path, encoding="utf-8") as f:
        job = json.load(f)
    out: dict = {}
    for s in job["settings"]:
        rule = s.get("summary", job["summary"])
        out[s["name"]] = {
            t["trace_id"]: asyncio.run(replay(t, s["config"], rule)) for t in job["corpora"][s["corpus"]]
        }
        print(f"oracle: {s['name']} done", file=sys.stderr, flush=True)
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(out, f)
    return 0
