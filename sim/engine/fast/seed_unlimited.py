"""A seed engine without a limit as lanes (``replay_unlimited``): it never compacts, only bounds results at
settle time and appends its status line, so every run is one lane of ``sim.engine.fast.seed_lanes`` (one
setting, no firing) and its record follows from the lanes' rows and the trace's settled items
(``sim.engine.fast.seed_static.GridStatic``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sim.core.records import AGENT, CALL_COLUMNS, change_table
from sim.engine.common import assemble_record
from sim.engine.fast.seed_grid import settings_decline
from sim.engine.fast.seed_lanes import grid_figures
from sim.engine.fast.seed_static import grid_static
from sim.engine.model import ReplayModel
from sim.policies.seed_engine import SeedEngine


def unlimited_declines(policy) -> str | None:
    """Why ``replay_unlimited`` cannot replay this policy (None: it can)."""
    if type(policy) is not SeedEngine or policy.context_token_limit is not None:
        return "not a seed engine without a limit"
    return settings_decline([policy])


def replay_unlimited(
    traces: Sequence, policy: SeedEngine, models: Sequence[ReplayModel], windows, rules, price
) -> list:
    """The records of ``policy`` (a seed engine without a limit: it never compacts, only bounds results
    at settle time and appends its status line) on these runs, all replayed as lanes at once; None for
    a run whose request exceeds its window (the loop says what follows). The records are the per-call
    loop's: the status line's tokens from digit counts, the cache and cost as the requests are made."""
    assert policy.context_token_limit is None
    rows: list = []
    ok, _ = grid_figures(traces, [policy], models, windows, rules, price, rows)
    R = len(traces)
    order = sorted(range(R), key=lambda r: -len(traces[r].calls))
    rank = {r: i for i, r in enumerate(order)}
    params = policy.params()
    tables = {name: np.zeros((R, len(rows)), dtype=np.int64) for name in rows[0][1]} if rows else {}
    for k, (Ar, table) in enumerate(rows):  # each column as a (run, call) table, runs longest first
        for name, v in table.items():
            tables[name][:Ar, k] = v[:, 0]
    out: list = []
    for r, (t, m) in enumerate(zip(traces, models, strict=True)):
        if not ok[0, r]:
            out.append(None)
            continue
        i, st = rank[r], grid_static(t, policy)
        K = st.K
        cols = {name: np.empty(K, dtype=np.int64) for name in CALL_COLUMNS}
        for name, table in tables.items():
            cols[name][:] = table[i, :K]
        cols["call"][:] = np.arange(K)
        cols["kind"][:] = AGENT
        cols["recorded_call"][:] = np.arange(K)
        cols["output_tokens"][:] = np.asarray(m.respond_all(), dtype=np.int64)
        cols["residual_tokens"][:] = st.residual
        cols["recorded_input_tokens"][:] = st.recorded_input
        cols["view_items"][:] = st.view_end
        cols["first_changed"][:] = -1
        cols["items_changed"][:] = 0
        # the settle-time envelopes: the rows before their admitting call's (one row a call)
        events = [(c, 0, j, before - after, after, c) for c, j, before, after in st.settled]
        out.append(
            assemble_record(
                t,
                policy,
                m,
                cols,
                st.state0.copy(),
                change_table(events),
                (rules, price),
                st.tok0.copy(),
                cuts=st.cuts,
                window=windows[r],
                params=params,
            )  # fmt: skip
        )
    return out
