"""Engine speed: simulated calls per second per policy and corpus, median of repeats, on one core.

A benchmark, not a test: numbers depend on the machine. Corpora: ``shared`` (the 40 real mini-swe-agent
runs under CTXSIM_TRACES) and ``embedded`` (the committed scenario suite). Traces are loaded once;
each repeat replays every trace of the corpus in one batch (``replay_table``), metrics included, as
``ctxsim run`` and sweeps do (from the batch's columns: no record per run).
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable

from sim.engine import replay_table
from sim.importers import load_paths
from sim.metrics import table_metric_columns
from sim.paths import EMBEDDED_SUITE, traces_dir
from sim.policies.base import make_policy, registered
from sim.types import Trace, policy_json

# Policies whose defaults leave the shared runs alone (a trigger off or out of reach, management only
# between invocations) are measured at an active setting as well, the one their goldens hold
# (tests/golden/frameworks/): a benchmark of a policy that never acts would say little.
ACTIVE_KNOBS: dict[str, dict] = {
    "autogen_token_limited": {"token_limit": 16000},
    "langchain_clear_tool_uses": {"trigger_tokens": 8000},
    "langchain_summarization": {"trigger": 16000, "keep": 10},
    "strands_sliding_window": {"window_size": 10, "per_turn": True},
    "strands_summarizing": {"context_window": 16000, "proactive_compression": {"compression_threshold": 0.7}},
}


def corpora() -> dict[str, Callable[[], list[Trace]]]:
    return {
        "shared": lambda: list(load_paths([traces_dir() / "mini-swe-agent-gemini3pro" / "trajs"])),
        "embedded": lambda: list(load_paths([EMBEDDED_SUITE])),
    }


def pin_one_core() -> None:
    """Measure one core: pin the process to the first CPU it may use (where the OS allows)."""
    if hasattr(os, "sched_setaffinity"):
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpus[0]})


def measure(
    traces: list[Trace], policy_name: str, repeats: int, min_seconds: float = 0.2, knobs: dict | None = None
) -> dict:
    """Median calls/s over ``repeats`` timed repeats; each repeat replays the corpus as many times as
    it takes to last ``min_seconds`` (calibrated once), so timer noise stays small."""
    policy = make_policy(policy_name, **(knobs or {}))
    calls = sum(len(t.calls) for t in traces)

    def one_pass() -> float:
        t0 = time.perf_counter()
        table_metric_columns(replay_table(traces, policy))
        return time.perf_counter() - t0

    passes = max(1, int(min_seconds / max(one_pass(), 1e-6)))  # warm-up pass also fills per-trace caches
    rates = []
    for _ in range(repeats):
        elapsed = sum(one_pass() for _ in range(passes))
        rates.append(calls * passes / elapsed)
    return {
        "policy": policy_name,
        "knobs": policy_json(knobs) if knobs else "",
        "corpus": None,
        "calls": calls,
        "calls_per_s": round(statistics.median(rates)),
        "repeats": repeats,
    }


def run_bench(
    policies: list[str] | None = None, corpus_names: list[str] | None = None, repeats: int = 7, log=print
) -> list[dict]:
    pin_one_core()
    available = corpora()
    rows = []
    for cname in corpus_names or list(available):
        try:
            traces = available[cname]()
        except Exception as exc:  # a missing shared folder: say so and go on with the other corpus
            log(f"corpus {cname} skipped: {exc}")
            continue
        for pname in policies or list(registered()):
            for knobs in [None] + ([ACTIVE_KNOBS[pname]] if pname in ACTIVE_KNOBS else []):
                row = measure(traces, pname, repeats, knobs=knobs)
                row["corpus"] = cname
                row["cores"] = os.cpu_count()
                rows.append(row)
    return rows
