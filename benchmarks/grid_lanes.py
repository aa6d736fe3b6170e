"""Where the time of ``ctxsim bench --grid`` goes: ``size``'s 20 x 20 grid of the seed engine's defaults over
N SWE-like traces, replayed by ``sim.engine.fast.seed_lanes.grid_figures`` as the bench does. Prints the grid
pass's CPU time (median of REPEATS) and grid-calls per CPU second, how the lanes' compactions are spread (the
lanes that compact often set how many call positions the lockstep must take one by one, whatever the rest do),
and the functions that take the most CPU time in one pass (cProfile, process time).

    python benchmarks/grid_lanes.py [N_TRACES] [REPEATS]
"""

from __future__ import annotations

import cProfile
import pstats
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scenarios.swe_like import generate_run  # noqa: E402
from sim.commands.engine_speed import load_kernel  # noqa: E402
from sim.engine.common import rules_and_price  # noqa: E402
from sim.engine.fast.seed_lanes import grid_figures  # noqa: E402
from sim.engine.model import ReplayModel  # noqa: E402
from sim.policies.base import make_policy  # noqa: E402
from sim.util import provenance  # noqa: E402


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    prov = provenance.start()
    traces = [generate_run(7, i) for i in range(n)]
    models = [ReplayModel(t) for t in traces]
    limits, keeps = load_kernel().grid_20x20()  # (the bench's grid)
    rules, price = rules_and_price(None, "claude-sonnet-4-5")
    policies = [
        make_policy("seed_engine", context_token_limit=int(a), keep_recent_tokens=int(b))
        for a, b in zip(limits, keeps, strict=True)
    ]
    windows = [None] * n
    calls = sum(len(t.calls) for t in traces)

    def grid_pass(lanes_out=None):
        return grid_figures(traces, policies, models, windows, rules, price, lanes_out=lanes_out)

    grid_pass()  # (the traces' settled tables are built once, as in the bench's first pass)
    times = []
    for _ in range(repeats):
        t0 = time.process_time()
        grid_pass()
        times.append(time.process_time() - t0)
    cpu = statistics.median(times)
    print(
        f"{n} traces, {calls} calls, {len(policies)} settings: grid pass {cpu:.3f} s CPU (median of "
        f"{repeats}), {calls * len(policies) / cpu / 1e6:.1f}M grid-calls/s; longest run "
        f"{max(len(t.calls) for t in traces)} calls (the lockstep's call positions)"
    )

    # each lane's own compactions: the grid's less its run's settle-time ones (a lane without a limit)
    out: dict = {}
    _, figures = grid_pass(out)
    _, bare = grid_figures(traces, [make_policy("seed_engine")], models, windows, rules, price)
    own = (figures["compactions"] - bare["compactions"]).reshape(-1)
    summaries = np.zeros(len(own), dtype=np.int64)
    for _, lanes, _, _ in out.get("summaries", []):
        np.add.at(summaries, lanes, 1)
    busy = own[own > 0]
    print(
        f"lanes {len(own)}: {len(busy)} compact at least once; compactions per such lane: median "
        f"{np.median(busy):.0f}, 90th percentile {np.percentile(busy, 90):.0f}, max {busy.max()}; lanes "
        f"over 25 / 50 / 100: {(busy > 25).sum()} / {(busy > 50).sum()} / {(busy > 100).sum()}; summary "
        f"calls {summaries.sum()}, at most {summaries.max()} a lane"
    )

    profile = cProfile.Profile(time.process_time)
    profile.enable()
    grid_pass()
    profile.disable()
    pstats.Stats(profile).sort_stats("tottime").print_stats(12)
    print(prov.text())


if __name__ == "__main__":
    main()
