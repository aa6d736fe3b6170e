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
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from sim.core.types import Trace, policy_json
from sim.engine.dispatch import replay_table
from sim.importers import load_paths
from sim.metrics.compute import table_metric_columns
from sim.policies.base import make_policy, registered
from sim.util.paths import EMBEDDED_SUITE, traces_dir

# Policies whose defaults leave the shared runs alone (a trigger off or out of reach, management only
# between invocations) are measured at an active setting as well, the one their goldens hold
# (tests/golden/frameworks/): a benchmark of a policy that never acts would say little.
ACTIVE_KNOBS: dict[str, dict] = {
    "autogen_token_limited": {"token_limit": 16000},
    "langchain_clear_tool_uses": {"trigger": 8000},
    "langchain_summarization": {"trigger": 16000, "keep": 10},
    "strands_sliding_window": {"window_size": 10, "per_turn": True},
    "strands_summarizing": {"context_window": 16000, "proactive_compression": {"compression_threshold": 0.7}},
}


def corpora() -> dict[str, Callable[[], list[Trace]]]:
    return {
        "shared": lambda: list(load_paths([traces_dir() / "mini-swe-agent-gemini3pro" / "trajs"])),
        "embedded": lambda: list(load_paths([EMBEDDED_SUITE])),
    }


@contextmanager
def one_core() -> Iterator[None]:
    """Measure one core: the process pinned to the first CPU it may use (where the OS allows) for the
    block, and given back every CPU it had afterwards: a bench run in-process (the API, a test session)
    left the process on one core for good, and everything it forked later capped at that one core
    (``sim.util.forkmap.cap_workers``)."""
    before = set(os.sched_getaffinity(0)) if hasattr(os, "sched_setaffinity") else None
    if before:
        os.sched_setaffinity(0, {min(before)})
    try:
        yield
    finally:
        if before:
            os.sched_setaffinity(0, before)


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
    with one_core():
        return _run_bench(policies, corpus_names, repeats, log)


def _run_bench(policies: list[str] | None, corpus_names: list[str] | None, repeats: int, log) -> list[dict]:
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


# ------------------------------------------------------------------------------------------ --grid
def load_kernel():
    """``benchmarks/kernel.py`` of this source tree (the bare kernel is a benchmark, not part of the
    package): None when the tree has no benchmarks folder (an installed package)."""
    import importlib.util

    from sim.util.paths import REPO, SOURCE_CHECKOUT

    path = REPO / "benchmarks" / "kernel.py"
    if not SOURCE_CHECKOUT or not path.is_file():  # installed: never a benchmarks/ in site-packages
        return None
    spec = importlib.util.spec_from_file_location("ctxsim_bench_kernel", path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def run_grid_bench(n_traces: int = 200, repeats: int = 5, log=print) -> dict:
    """``_run_grid_bench`` on one core (``one_core``)."""
    with one_core():
        return _run_grid_bench(n_traces, repeats, log)


def _run_grid_bench(n_traces: int, repeats: int, log) -> dict:
    """``ctxsim size``'s grid path (``sim.engine.fast.seed_lanes`` over a 20 x 20 grid of the seed engine's
    defaults) and the bare kernel (``benchmarks/kernel.py``, prune only) on the same SWE-like traces, in this
    run: grid-calls per CPU second of each (median of ``repeats``; settings x calls per second) and their
    ratio. The kernel's cumulative input is checked against the grid path's prune-only figures first."""
    import numpy as np

    from scenarios.swe_like import generate_run
    from sim.analysis.size import GRID_BATCH
    from sim.engine.common import rules_and_price
    from sim.engine.fast.seed_lanes import grid_figures
    from sim.engine.model import ReplayModel
    from sim.util.errors import ConfigError

    kernel = load_kernel()
    if kernel is None:
        raise ConfigError("bench --grid: benchmarks/kernel.py not found (run from a source checkout)")
    traces = [generate_run(7, i) for i in range(n_traces)]
    models = [ReplayModel(t) for t in traces]
    limits, keeps = kernel.grid_20x20()
    rules, price = rules_and_price(None, "claude-sonnet-4-5")
    calls = sum(len(t.calls) for t in traces)

    def grid_pass(**knobs) -> dict:
        policies = [
            make_policy("seed_engine", context_token_limit=int(a), keep_recent_tokens=int(b), **knobs)
            for a, b in zip(limits, keeps, strict=True)
        ]
        out: dict = {}
        for lo in range(0, n_traces, GRID_BATCH):
            ts, ms = traces[lo : lo + GRID_BATCH], models[lo : lo + GRID_BATCH]
            _, f = grid_figures(ts, policies, ms, [None] * len(ts), rules, price)
            out.setdefault("input_tokens", []).append(f["input_tokens"])
        return {k: np.concatenate(v, axis=1) for k, v in out.items()}

    x = kernel.Inputs(traces, models, keeps)
    same = np.array_equal(
        kernel.kernel(x, limits, keeps), grid_pass(mode="prune", run_status="off")["input_tokens"]
    )
    if not same:
        log("bench --grid: the kernel's cumulative input differs from the grid path's (prune only)")

    def rate(fn) -> float:
        times = []
        for _ in range(repeats):
            t0 = time.process_time()
            fn()
            times.append(time.process_time() - t0)
        return calls * len(limits) / statistics.median(times)

    grid_rate = rate(grid_pass)
    kernel_rate = rate(lambda: kernel.kernel(x, limits, keeps))
    return {
        "traces": n_traces,
        "calls": calls,
        "settings": len(limits),
        "grid_calls_per_s": round(grid_rate),
        "kernel_calls_per_s": round(kernel_rate),
        "ratio": round(grid_rate / kernel_rate, 4),
        "same_cumulative_input": same,
        "repeats": repeats,
    }
