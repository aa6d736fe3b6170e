"""The tables of a batch of runs laid end to end for the lanes (``LaneBatch``), and the layout of the
lanes' state (one integer array, a row per quantity and a column per lane: ``RUN`` ... ``STT_T``; the
float rows ``EXPIRES``, ``BPT``; the per-call tables' rows ``T_APP`` ... ``T_WIN``).

``sim.engine.fast.seed_lanes`` replays the lanes over these; each run's tables are its
``sim.engine.fast.seed_static.GridStatic``'s ``lane_arrays``, with per-run offsets so that a lane's prune
bound, summary cut and the sums they move are ``searchsorted`` and prefix sums over the whole batch.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from sim.cost.tokens import MESSAGE_OVERHEAD_BYTES, SEED_BYTES_PER_TOKEN
from sim.engine.fast.seed_static import NO_LIMIT, GridStatic
from sim.policies.seed_rules import lane_prune_bounds

LOWEST = np.iinfo(np.int64).min  # an estimate no trigger is below


class LaneBatch:
    """The runs' tables laid end to end: per-run offsets into flat arrays, per-call tables padded."""

    def __init__(
        self, statics: list[GridStatic], bpts: list[float], windows: list[int | None], keeps
    ) -> None:
        R = len(statics)
        self.K = K = max(s.K for s in statics)
        self.ncalls = np.array([s.K for s in statics], dtype=np.int64)
        self.calls, self.runs = int(self.ncalls.sum()), np.arange(R)
        arrays = [s.lane_arrays() for s in statics]
        in_run = np.arange(K)[None, :] < self.ncalls[:, None]

        def joined(name: str) -> np.ndarray:
            return np.concatenate([a[name] for a in arrays])

        def padded(name: str, dtype=np.int64) -> np.ndarray:
            out = np.zeros((R, K), dtype=dtype)
            out[in_run] = joined(name)  # row by row: each run's calls, then zeros
            return out

        def chained(name: str) -> np.ndarray:
            parts = [a[name] for a in arrays]
            base = np.zeros(R, dtype=np.int64)
            np.cumsum([int(v[-1]) - int(v[0]) for v in parts[:-1]], out=base[1:])
            return np.concatenate(parts) + np.repeat(base, [len(v) for v in parts])

        self.prefix_at = padded("prefix_at")
        self.residual = padded("residual")
        self.appended = padded("appended")
        self.elapsed = padded("elapsed", np.float64)
        self.view_end = padded("view_end")
        self.msgs_at = padded("msgs_at")
        self.bpt = np.array([SEED_BYTES_PER_TOKEN if b is None else b for b in bpts], dtype=np.float64)
        self.window = np.array([NO_LIMIT if w is None else w for w in windows], dtype=np.int64)
        self.ph = np.array([s.ph_tokens for s in statics], dtype=np.int64)
        self.prefix_tokens = np.array([s.prefix_tokens for s in statics], dtype=np.int64)
        self.bound_calls = np.array([s.bound_calls for s in statics], dtype=np.int64)
        # per-message prefix arrays (M + 1 entries a run, each run's continuing the last's values)
        msgs = np.array([len(a["ep"]) for a in arrays], dtype=np.int64)
        self.po = np.zeros(R, dtype=np.int64)
        self.po[1:] = np.cumsum(msgs)[:-1]
        self.ep = chained("ep")
        self.sv = chained("sv")
        self.dv = self.ep - self.sv
        self.bl = chained("bl")
        self.bc = chained("bc")
        self.w = self.bl + 2 * self.bc  # block lengths with their joiners (the transcript's budget)
        self.mo_items = chained("m_off")  # items of messages (counts)
        self.m_tok = chained("m_tok")
        # per-message arrays get one filler entry a run, so they share the offsets
        self.back = joined("back")
        self.first_item = joined("first_item")
        self.tok_first = joined("tok_first")
        self.pe = np.array([s.protected_end for s in statics], dtype=np.int64)
        # per-tool-message arrays: T + 1 entries a run; tm positions as global message positions
        tms = np.array([len(a["tm_end"]) for a in arrays], dtype=np.int64)
        self.to = np.zeros(R, dtype=np.int64)
        self.to[1:] = np.cumsum(tms)[:-1]
        # (the past-the-end filler keeps the array ascending)
        self.tmg = joined("tm_end") + np.repeat(self.po, tms)
        self.t_count = chained("t_count")
        self.t_tok = chained("t_tok")
        self.t_saving = chained("t_saving")
        self.t_first = joined("t_first")
        self.io = np.zeros(R, dtype=np.int64)  # items' settled prefix sums, per run
        self.io[1:] = np.cumsum([len(s.prefix) for s in statics])[:-1]
        self.prefix = np.concatenate([s.prefix for s in statics])
        # the natural prune bound of (run, keep, call) over the first T tool messages at call k
        # (``sim.policies.seed_rules.lane_prune_bounds``, from the prefix sums ``c`` of the estimates):
        # ``prune_lanes`` looks it up for the lanes that trigger (a few in a hundred); ``natural`` is
        # the whole table for ``keeps`` (``benchmarks/kernel.py``; the grid path passes none)
        self.keeps = np.asarray(keeps, dtype=np.int64)
        self.statics = statics
        self.c = chained("c")
        self.tools_at = padded("tools_at")
        self.newest = joined("newest")
        # what the firing lanes gather, laid out for few gathers: by call, then run; the newest tool
        # message in view and the estimates' sum through it; per message and per tool message stacked
        self.R = R
        self.top_by_call = np.ascontiguousarray((self.to[:, None] + np.maximum(self.tools_at - 1, 0)).T)
        self.view_end_by_call = np.ascontiguousarray(self.view_end.T)
        self.elapsed_by_call = np.ascontiguousarray(self.elapsed.T)
        self.msgs_by_call = np.ascontiguousarray(self.msgs_at.T)
        self.c_through = self.c + self.newest
        self.t_sums = np.stack([self.t_saving, self.t_count, self.t_tok])
        self.m_sums = np.stack(
            [self.m_tok, self.bc, self.bl, self.ep, self.dv, self.first_item, self.tok_first]
        )

    def call_tables(self, models, statics, status_base: int | None) -> tuple[np.ndarray, np.ndarray]:
        """(outputs, tables): the calls' output tokens per (run, call), and the per-run tables of every
        (run, call) flat (run * K + call, so a block of lanes gathers them at once): what was appended,
        the last call's output, the settled prefix, the residual, the status line's fixed length, the
        output, the window. Kept with the batch, one for each status line's length (``status_base``;
        None: no status line): a replay model's outputs are its trace's recorded ones."""
        memo = self.__dict__.setdefault("_call_tables", {})
        got = memo.get(status_base)
        if got is not None:
            return got
        R, K = len(self.ncalls), self.K
        outputs = np.zeros((R, K), dtype=np.int64)
        for i, m in enumerate(models):
            o = np.asarray(m.respond_all(), dtype=np.int64)
            outputs[i, : len(o)] = o
        fixed = np.zeros((R, K), dtype=np.int64)
        if status_base is not None:
            for r, st_r in enumerate(statics):
                fixed[r, : st_r.K] = np.array(st_r.status_fixed(status_base)) + MESSAGE_OVERHEAD_BYTES
        oprev = np.zeros((R, K), dtype=np.int64)
        oprev[:, 1:] = outputs[:, :-1]
        window = np.broadcast_to(self.window[:, None], (R, K))
        tabs = np.stack([self.appended, oprev, self.prefix_at, self.residual, fixed, outputs, window])
        # (and by call position, for the lanes advancing position by position)
        got = memo[status_base] = (
            outputs,
            tabs.reshape(7, R * K),
            np.ascontiguousarray(tabs.transpose(2, 0, 1)),
        )
        return got

    def laid_end_to_end(self, tabs: np.ndarray, status_base: int | None) -> tuple[np.ndarray, np.ndarray]:
        """``tabs`` (``call_tables``' flat tables for ``status_base``) and the calls' times at every run's
        calls, runs end to end: the block of one setting's lanes over their whole runs reads them as
        they lie (kept with the batch, as the tables are)."""
        memo = self.__dict__.setdefault("_call_tables", {})
        got = memo.get(("laid", status_base))
        if got is None:
            in_run = (np.arange(self.K)[None, :] < self.ncalls[:, None]).reshape(-1)
            got = memo["laid", status_base] = (tabs[:, in_run], self.elapsed.reshape(-1)[in_run])
            for v in got:  # (a block reads them as they lie: nothing may write to them)
                v.flags.writeable = False
        return got

    @cached_property
    def natural(self) -> np.ndarray:
        """The natural prune bound of every (run, keep, call): an (R, keeps, K) table."""
        R, K = len(self.ncalls), self.K
        if not len(self.keeps):  # no lane has a limit: nothing is ever pruned
            return np.zeros((R, 0, K), dtype=np.int64)
        t0 = self.to[:, None]
        top = np.maximum(t0 + self.tools_at - 1, t0)  # each (run, call)'s newest tool message in view
        _, nb = lane_prune_bounds(
            self.c,
            self.c_through[top][None],
            self.tmg,
            self.po[:, None][None],
            t0[None],
            top[None],
            self.keeps[:, None, None],
        )
        return np.ascontiguousarray(nb.transpose(1, 0, 2))  # (run, keep, call)


# the rows of the lanes' integer state, one column a lane: what a lane is (its run, its place in the
# (run, setting) figures, its trigger, its setting), then what its replay moves (the run's and the
# setting's other numbers are looked up by the few lanes that fire: fewer rows to move)
(RUN, LANE, TRIG, SET) = range(4)
(CT, STT, VE, DELTA, S_BYTES, S_EST, S_TOK, CARRIER) = range(4, 12)
# (START: the call position a lane started at)
(TOKENS, S_OUT, START, PEAK, COMP, CACHED, LAST, PREV, OK) = range(12, 21)
# the first tool message at or past the prune bound and past the summary cut (``searchsorted`` of
# each in ``LaneBatch.tmg``), kept as the bound and cut move
CT_T, STT_T = 21, 22
ROWS = 23
EXPIRES, BPT = 0, 1  # the float rows
# the per-run tables of a call position, stacked so one gather serves a lane's run: what was appended,
# the last call's output, the settled prefix, the residual, the status line's fixed length, the output,
# the provider's window
T_APP, T_OPREV, T_PREFIX, T_RESID, T_FIXED, T_OUT, T_WIN = range(7)
