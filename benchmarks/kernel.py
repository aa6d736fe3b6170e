"""The bare kernel: cumulative input tokens of the prune-only seed engine (``mode=prune``,
``run_status=off``) over a grid of (context_token_limit, keep_recent_tokens), in as few numpy operations
as the arithmetic allows. It is the yardstick for ``ctxsim size``'s grid path (``ctxsim bench --grid``
reports the grid path's calls per second as a share of this kernel's): no records, no cache or cost, no
summaries, status line or window, only the trigger, the prune bound and the request's size.

Its inputs are the per-run tables ``sim.engine.fast.seed_lanes_tables`` lays out (message estimates,
tool-message prefix sums, the natural prune bound of each (run, keep, call)), built once and not timed. Per
call position, for every (run, setting) lane at once: the seed engine's estimate (the last input and output
plus what was appended), the lanes over the limit move their bound to max(bound, natural bound) and take the
placeholder's size for the results cleared, and the request is the settled prefix plus the lane's net change
plus the residual.

    python benchmarks/kernel.py [N_TRACES]   # kernel vs grid path on N SWE-like traces, same answer
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sim.engine.fast.seed_lanes_tables import LaneBatch  # noqa: E402
from sim.engine.fast.seed_static import grid_static  # noqa: E402
from sim.policies.base import make_policy  # noqa: E402
from sim.policies.seed_messages import OUTPUT_CONTRACT_TOKENS  # noqa: E402
from sim.util import provenance  # noqa: E402


class Inputs:
    """A batch's tables, runs longest first, as plain arrays."""

    def __init__(self, traces, models, keeps) -> None:
        proto = make_policy("seed_engine", mode="prune", run_status="off")
        order = sorted(range(len(traces)), key=lambda r: -len(traces[r].calls))
        self.order = np.array(order)
        statics = [grid_static(traces[r], proto) for r in order]
        b = LaneBatch(
            statics, [traces[r].bytes_per_token for r in order], [None] * len(order), sorted(set(keeps))
        )
        self.K, self.ncalls = b.K, b.ncalls
        self.appended, self.prefix_at, self.residual = b.appended, b.prefix_at, b.residual
        self.outputs = np.zeros_like(b.appended)
        for i, r in enumerate(order):
            o = np.asarray(models[r].respond_all(), dtype=np.int64)
            self.outputs[i, : len(o)] = o
        self.natural, self.keeps = b.natural, b.keeps
        self.tmg, self.po, self.ph = b.tmg, b.po, b.ph
        self.saving, self.count, self.tok = b.t_saving, b.t_count, b.t_tok
        self.running = np.array([int((b.ncalls > k).sum()) for k in range(b.K)])
        self.calls = int(b.ncalls.sum())


def kernel(x: Inputs, limits: np.ndarray, keeps: np.ndarray) -> np.ndarray:
    """Cumulative input tokens of each (setting, run): an (S, R) array, runs in their given order."""
    R, S = len(x.ncalls), len(limits)
    keep_at = np.searchsorted(x.keeps, keeps)
    trigger = limits - OUTPUT_CONTRACT_TOKENS
    bound = np.zeros((R, S), dtype=np.int64)
    view_est = np.zeros((R, S), dtype=np.int64)
    delta = np.zeros((R, S), dtype=np.int64)
    total = np.zeros((R, S), dtype=np.int64)
    last = np.zeros((R, S), dtype=np.int64)
    for k in range(x.K):
        A = x.running[k]
        ve = view_est[:A]
        app = x.appended[:A, k, None]
        ve += app
        if k:
            li = last[:A]
            est = np.where(li > 0, li + (x.outputs[:A, k - 1, None] + app), ve)
        else:
            est = ve
        r, s = np.nonzero(est > trigger)
        if len(r):
            c0 = bound[r, s]
            new = np.maximum(c0, x.natural[r, keep_at[s], k])
            po = x.po[r]
            a, b = np.searchsorted(x.tmg, po + c0), np.searchsorted(x.tmg, po + new)
            view_est[r, s] -= x.saving[b] - x.saving[a]
            delta[r, s] += x.ph[r] * (x.count[b] - x.count[a]) - (x.tok[b] - x.tok[a])
            bound[r, s] = new
        req = np.maximum(delta[:A] + (x.prefix_at[:A, k] + x.residual[:A, k])[:, None], 0)
        total[:A] += req
        last[:A] = req
    out = np.empty((R, S), dtype=np.int64)
    out[x.order] = total
    return out.T


def grid_20x20() -> tuple[np.ndarray, np.ndarray]:
    """The benchmark's grid: 20 limits (16k to 168k) x 20 keeps (1k to 20k), the pairs with keep < limit."""
    pairs = [(a, b) for a in range(16000, 168001, 8000) for b in range(1000, 20001, 1000) if b < a]
    return np.array([a for a, _ in pairs]), np.array([b for _, b in pairs])


def main() -> None:
    from scenarios.swe_like import generate_run
    from sim.engine.common import rules_and_price
    from sim.engine.fast.seed_lanes import grid_figures
    from sim.engine.model import ReplayModel

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    prov = provenance.start()
    traces = [generate_run(7, i) for i in range(n)]
    models = [ReplayModel(t) for t in traces]
    limits, keeps = grid_20x20()
    x = Inputs(traces, models, keeps)
    t0 = time.process_time()
    cum = kernel(x, limits, keeps)
    dt = time.process_time() - t0
    policies = [
        make_policy(
            "seed_engine",
            context_token_limit=int(a),
            keep_recent_tokens=int(b),
            mode="prune",
            run_status="off",
        )
        for a, b in zip(limits, keeps, strict=True)
    ]
    rules, price = rules_and_price(None, "claude-sonnet-4-5")
    _, figures = grid_figures(traces, policies, models, [None] * n, rules, price)
    same = np.array_equal(cum, figures["input_tokens"])
    rate = x.calls * len(limits) / dt / 1e6
    print(f"kernel: {rate:.1f}M grid-calls/s; same cumulative input as the grid path: {same}")
    print(prov.text())


if __name__ == "__main__":
    main()
