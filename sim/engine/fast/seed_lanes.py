"""The grid path over many traces at once: every (setting, run) pair of a ``seed_engine`` grid is a lane,
and the lanes advance as array operations from one firing of their trigger to the next.

``sim.engine.fast.seed_grid`` replays the settings of one trace together and builds their records; this
module is
the same arithmetic with the runs laid side by side too, for the figures a sizing reads (cost, input
and output totals, the largest request, compactions). Per-run tables are laid end to end with offsets
(``sim.engine.fast.seed_grid._Static`` of each trace: message estimates, tool-message prefix sums, transcript
blocks), so a lane's prune bound, summary cut and the sums they move are ``searchsorted`` and prefix
sums over the whole batch. The natural prune bound of a (run, keep, call) is looked up for the lanes
that fire (the bound only moves forward for a fixed keep). Runs are ordered by length, longest first.

Between two firings a lane's view only grows by what each call appends: its estimates, requests, cache
entries and cost are prefix sums and running maxima over its run's per-call tables, shifted by the
lane's net change so far (``_Trajectory``; the status line's tokens, which count the tokens so far, are
solved to their fixed point, a pass or two, the later passes only for the lanes whose line moved). So a
lane's calls up to its next firing are one block of array operations, the firing found by one search
over it, and a firing only adds its compaction (``_compact``): the firing call is then the first of
the lane's next block.

Until its trigger first fires, a lane is its run's replay without a limit: each run has one *pristine*
lane standing for all its lanes that have not fired, replayed for all its calls in one block, and a
lane starts on its own (a copy of the pristine lane's state there) at the call its trigger first fires,
where the pristine estimate's running maximum first passes it; in a sizing grid most lanes never fire
or fire late. With one setting there is nothing to share: each run's
only lane starts at its first call, its first block the whole run. The started lanes then advance in
blocks (``_Lanes.advance``: each lane's next block twice its last gap, or to its run's end once few
calls are left, so that every round fires; a round also carries the prune-only firings the last
round's blocks foresee, ``_Chain``), or, where they are thousands (a wide grid: a call
position's arrays are long already and blocks would compute past many firings), call position by call
position (``_Lanes._lockstep``). The lanes' state is one integer array (a row per
quantity, a column per lane) so starting, gathering and dropping lanes are single operations. The
calls' token counts are priced in a few large passes, each call rounded on its own, so no call table is
kept.

Rare events take the long way: a summary whose transcript must be elided (over the 80,000-character
budget) is measured by ``prompt_units`` lane by lane; a lane whose request would exceed the window
leaves the grid (``ok`` is False) and the caller replays it with the per-call loop. ``sim.checks.conformance``
and the tests hold these figures to the per-call loop's metrics.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property, partial

import numpy as np

from sim.cost.cache import CacheRules
from sim.cost.pricing import Price
from sim.cost.tokens import MESSAGE_OVERHEAD_BYTES, SEED_BYTES_PER_TOKEN
from sim.engine.fast.seed_grid import NO_LIMIT, _Static, status_base_len
from sim.engine.model import ReplayModel
from sim.policies.seed_engine import SeedEngine
from sim.policies.seed_messages import (
    ELISION_RESERVE,
    INPUT_BUDGET,
    INSTRUCTION_CHARS,
    NO_SUMMARY,
    OUTPUT_CONTRACT_TOKENS,
    summary_message,
)
from sim.util.batchmemo import batch_derived

_POW10 = np.array([10**p for p in range(1, 19)], dtype=np.int64)
_SUMMARY_FIXED = summary_message(0)  # the summary message's bytes but for its text
_TRANSCRIPT_FRAME = INSTRUCTION_CHARS + len("\n\n<transcript>\n") + len("\n</transcript>")


def _clip(a, lo, hi) -> np.ndarray:
    """``np.clip`` (minimum(maximum(a, lo), hi)) without its dispatch, which costs more than the
    arithmetic on a call position's few lanes."""
    return np.minimum(np.maximum(a, lo), hi)


def _ceil_tokens(nbytes: np.ndarray, bpt: np.ndarray) -> np.ndarray:
    """``sim.cost.tokens.estimate_tokens`` over arrays (the same float division and ceiling)."""
    return np.ceil((nbytes + MESSAGE_OVERHEAD_BYTES) / bpt).astype(np.int64)


_MARKER = len("[…  messages omitted from summary input …]")  # the elision marker but for its number


def _elided_chars(w, lo, hi, budget, prev, bc) -> np.ndarray:
    """``prompt_units`` of covered spans whose blocks pass the budget (``lo``, ``hi``: the span's
    messages in the batch's per-message arrays; ``w``: prefix sums of block length + joiner, ``bc``: of
    blocks): the head takes whole blocks up to half the budget, the tail whole blocks from the end up to
    the rest, and a marker counts the blocks left out between them."""
    half = budget // 2
    head_end = _clip(np.searchsorted(w, w[lo] + half, side="right") - 1, lo, hi)
    head = w[head_end] - w[lo]
    tail_start = _clip(np.searchsorted(w, w[hi] - (budget - head), side="left"), head_end, hi)
    tail = w[hi] - w[tail_start]
    n_head, n_tail = bc[head_end] - bc[lo], bc[hi] - bc[tail_start]
    omitted = bc[tail_start] - bc[head_end]
    has_prev = prev >= 0
    marker = np.where(omitted > 0, _MARKER + np.searchsorted(_POW10, omitted, side="right") + 1, 0)
    lines = has_prev + n_head + (omitted > 0) + n_tail
    text = np.where(has_prev, 19 + prev, 0) + (head - 2 * n_head) + marker + (tail - 2 * n_tail)
    return _TRANSCRIPT_FRAME + text + 2 * np.maximum(lines - 1, 0)


class _Batch:
    """The runs' tables laid end to end: per-run offsets into flat arrays, per-call tables padded."""

    def __init__(self, statics: list[_Static], bpts: list[float], windows: list[int | None], keeps) -> None:
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
        # the natural prune bound of (run, keep, call) over the first T tool messages at call k: the
        # older ones are kept, newest first, while their estimates' sum stays within keep less the
        # newest's; in prefix sums C of the estimates, the first one not kept is the last i < T - 1
        # with C[i] < C[T-1] - budget (``sim.engine.fast.seed_grid._Static.natural_bounds``, one message at a
        # time).
        # ``_compact`` looks it up for the lanes that trigger (a few in a hundred); ``natural`` is
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
        c, T, newest = self.c, self.tools_at, self.newest
        t0 = self.to[:, None]
        top = np.maximum(t0 + T - 1, t0)
        budget = self.keeps[:, None, None] - newest[top][None]  # (keep, run, call)
        x = c[top][None] - budget
        p = np.clip(np.searchsorted(c, x, side="left"), t0[None], top[None]) - t0[None]
        bound = self.tmg[np.maximum(t0[None] + p - 1, 0)] - self.po[:, None][None] + 1
        nb = np.where((T[None] > 1) & (p > 0), bound, 0)
        return np.ascontiguousarray(nb.transpose(1, 0, 2))  # (run, keep, call)


# the rows of the lanes' integer state, one column a lane: what a lane is (its run, its place in the
# (run, setting) figures, its trigger, its setting), then what its replay moves (the run's and the
# setting's other numbers are looked up by the few lanes that fire: fewer rows to move)
(_RUN, _LANE, _TRIG, _SET) = range(4)
(_CT, _STT, _VE, _DELTA, _S_BYTES, _S_EST, _S_TOK, _CARRIER) = range(4, 12)
# (_START: the call position a lane started at)
(_TOKENS, _S_OUT, _START, _PEAK, _COMP, _CACHED, _LAST, _PREV, _OK) = range(12, 21)
# the first tool message at or past the prune bound and past the summary cut (``searchsorted`` of
# each in ``_Batch.tmg``), kept as the bound and cut move
_CT_T, _STT_T = 21, 22
_ROWS = 23
_EXPIRES, _BPT = 0, 1  # the float rows
_FIGURE_ROWS = np.array([_RUN, _LANE, _TOKENS, _S_OUT, _START, _PEAK, _COMP, _OK, _DELTA, _CT, _STT, _S_TOK])
# the per-run tables of a call position, stacked so one gather serves a lane's run: what was appended,
# the last call's output, the settled prefix, the residual, the status line's fixed length, the output,
# the provider's window
_T_APP, _T_OPREV, _T_PREFIX, _T_RESID, _T_FIXED, _T_OUT, _T_WIN = range(7)


def grid_figures(
    traces: Sequence,
    policies: Sequence[SeedEngine],
    models: Sequence[ReplayModel],
    windows: Sequence[int | None],
    rules: CacheRules,
    price: Price | None,
    rows: list | None = None,
    lanes_out: dict | None = None,
    row_columns: Sequence[str] | None = None,
    keep_batch: bool = False,
    call_tables: bool = False,
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(ok, figures) of every (setting, run): ``ok[s, r]`` False where the lane left the grid (replay
    it with the loop); figures ``cost_microusd``, ``input_tokens``, ``output_tokens``, ``peak``,
    ``compactions``, each an (S, R) array. Every trace must pass ``sim.engine.fast.seed_grid.trace_declines``
    and the
    settings ``settings_decline``; all runs priced alike (``rules``, ``price``). ``rows``: a list to
    receive each call position's agent rows, (runs still going, {column: (run, setting) table}), runs
    longest first (``replay_unlimited``: settings without a limit, which never summarize). ``lanes_out``:
    a dict to receive the lanes' summary calls (call, lanes, input, output: one call a lane) and final
    state, lane j being sorted run j // S, setting j % S (``sim.engine.fast.seed_rows``), and with ``rows``
    the same
    columns as (lane, call) tables (``calls``). ``row_columns``: the columns ``rows`` receives (None: all
    of them; each costs a (lane, call) table). ``keep_batch``: the batch's tables are kept for its next
    replay (a sweep replays a chunk of runs under many settings; ``size`` replays each batch once).
    ``call_tables``: ``lanes_out`` receives the (lane, call) tables without a ``rows`` list.

    Until its trigger first fires a lane is its run's replay without a limit: the lanes of a run share
    one *pristine* lane (a lane whose trigger never fires) until then, and only the lanes that have
    fired are replayed on their own. A setting's lane starts where the pristine estimate first passes
    its trigger, as a copy of the pristine lane there. Most lanes of a sizing grid never fire (limits
    above the run's largest estimate) or fire late, so this replays a small share of the (setting, run)
    calls on their own, and those from firing to firing."""
    proto = policies[0]
    S, R = len(policies), len(traces)
    # runs longest first, each run's settings side by side: the runs still going are a prefix
    order = batch_derived(traces, "longest_first", _longest_first)
    traces = [traces[r] for r in order]
    statics = batch_derived(traces, f"grid_statics_{proto.tool_result_max_bytes}", partial(_statics, proto))
    tabled = rows is not None or (call_tables and lanes_out is not None)
    batch_windows = [windows[r] for r in order]

    def build(_) -> _Batch:  # no keeps: ``_compact`` reads each lane's own (only ``natural`` tables them)
        return _Batch(statics, [t.bytes_per_token for t in traces], batch_windows, ())

    if keep_batch:
        key = f"grid_batch:{proto.tool_result_max_bytes}:{batch_windows}"
        b = batch_derived(traces, key, build)
    else:
        b = build(traces)
    K = b.K
    status_on = proto.reports_status
    status_base = status_base_len(proto) if status_on else None
    outputs, tabs, by_call = b.call_tables([models[r] for r in order], statics, status_base)
    lanes = _Lanes(
        b, tabs, by_call, status_on, rules, price, (proto.mode, proto.summary_ratio,
        proto.summary_min_tokens, proto.summary_max_tokens), lanes_out is not None,
    )  # fmt: skip
    lanes.status_base = status_base
    L = S * R
    lane_run = np.repeat(np.arange(R), S)
    limit = np.array([NO_LIMIT if p.context_token_limit is None else p.context_token_limit for p in policies])
    set_keep = np.array([p.keep_recent_tokens for p in policies], dtype=np.int64)
    set_trig = np.where(limit < NO_LIMIT, limit - OUTPUT_CONTRACT_TOKENS, NO_LIMIT)
    lanes.settings = (limit, set_keep)

    pristine_cost = None  # (run, call): the pristine lanes' calls' cost (None: no pristine lane)
    p_sums = np.zeros((3, R), dtype=np.int64)  # each run's pristine tokens, peak and window check
    if S == 1 and R < _LOCKSTEP_LANES:
        # one setting: a run's pristine lane is its only lane, so it shares nothing; every lane starts
        # at its first call, its first block its whole run (as the pristine lane's), in blocks mode
        if tabled:
            names = _ROW_NAMES if row_columns is None else tuple(row_columns)
            lanes.tables = {name: np.zeros((R, K), dtype=np.int64) for name in names}
        state, fstate = _unstarted(b, set_trig)
        lanes.advance(state, fstate, first_fires=False)
    else:
        # the pristine lanes (one a run, never firing): every call of a few hundred runs in one block
        pristine_cost = np.zeros((R, K), dtype=np.int64)
        if tabled:
            lanes.tables = {}  # (lane, call): every lane as its run's pristine lane until it starts
        step = max(1, _BLOCK_ENTRIES // max(K, 1))
        parts = [
            _pristine(lanes, np.arange(lo, min(R, hi)), S, set_trig, pristine_cost, p_sums, row_columns)
            for lo, hi in ((lo, lo + step) for lo in range(0, R, step))
        ]
        state = np.concatenate([p[0] for p in parts], axis=1)
        fstate = np.concatenate([p[1] for p in parts], axis=1)
        rs, k0 = state[_RUN].copy(), state[_START].copy()
        lanes.advance(state, fstate)  # the started lanes, firing to firing

    # figures: a lane not started is its run's pristine lane
    tokens, peak, ok = (np.repeat(v, S) for v in p_sums)
    s_out = np.zeros(L, dtype=np.int64)
    compactions = np.zeros(L, dtype=np.int64)
    delta = np.zeros(L, dtype=np.int64)
    cleared = np.zeros(L, dtype=np.int64)
    cut = np.zeros(L, dtype=np.int64)
    s_tokens = np.zeros(L, dtype=np.int64)
    lane = state[_LANE]
    for v, row in (
        (tokens, _TOKENS), (s_out, _S_OUT), (peak, _PEAK), (compactions, _COMP), (ok, _OK), (delta, _DELTA),
        (cleared, _CT), (cut, _STT), (s_tokens, _S_TOK),
    ):  # fmt: skip
        v[lane] = state[row]
    if lanes_out is not None:
        lanes_out.update(order=order, delta=delta, cleared=cleared, cut=cut, summary_tokens=s_tokens)
        if lanes.summaries:
            lanes_out["summaries"] = lanes.summaries
    if tabled and lanes_out is not None:
        lanes_out["calls"] = lanes.tables  # the same columns as (lane, call) tables, 0 past a run's end
    if rows is not None:
        running = (R - np.searchsorted(np.sort(b.ncalls), np.arange(K), side="right")).tolist()
        full = {name: v.reshape(R, S, K) for name, v in lanes.tables.items()}
        rows.extend((Ar, {name: v[:Ar, :, k] for name, v in full.items()}) for k, Ar in enumerate(running))
    # a lane's cost: its run's pristine calls before it started, then its own calls
    if pristine_cost is None:  # (every lane started at its first call)
        cost = np.zeros(L, dtype=np.int64)
        cost[lane] = lanes.own_costs()
    else:
        before = np.zeros((R, K + 1), dtype=np.int64)
        np.cumsum(pristine_cost, axis=1, out=before[:, 1:])
        cost = np.repeat(before[np.arange(R), b.ncalls], S)
        cost[lane] = before[rs, k0] + lanes.own_costs()
    # back to (setting, run) order, runs as given
    out_total = outputs.sum(axis=1)[lane_run] + s_out
    figures = {
        "cost_microusd": cost,
        "input_tokens": tokens - out_total,
        "output_tokens": out_total,
        "peak": peak,
        "compactions": compactions + b.bound_calls[lane_run],
    }
    back = np.argsort(order)
    out_figs = {name: v.reshape(R, S)[back].T for name, v in figures.items()}
    return (ok > 0).reshape(R, S)[back].T, out_figs


def _longest_first(traces: Sequence) -> list[int]:
    return sorted(range(len(traces)), key=lambda r: -len(traces[r].calls))


def _statics(proto: SeedEngine, traces: Sequence) -> list[_Static]:
    key = f"grid_static_{proto.tool_result_max_bytes}"
    return [t.derived(key, lambda t: _Static(t, proto)) for t in traces]


_LOCKSTEP_LANES = 2048  # started lanes from which they advance call position by call position
_MIN_BLOCK = 8  # call positions a block takes at least
_BLOCK = 1 << 16  # (lane, call) entries the started lanes' first blocks take (each lane's first width)
_BLOCK_ENTRIES = 1 << 18  # (lane, call) entries a block computes at most: bounds its memory
_LOWEST = np.iinfo(np.int64).min
_REST_ENTRIES = 1 << 14  # (lane, call) entries left from which every block runs to its run's end


def _full(v, n: int) -> np.ndarray:
    return np.full(n, v, dtype=np.int64) if np.ndim(v) == 0 else v


def _digits(v: np.ndarray) -> np.ndarray:
    """``np.searchsorted(_POW10, v, "right")`` (the digits past the first of each count), by a
    comparison with each power of ten between the array's least and largest values where the array is
    long (a search per value costs more than the few passes)."""
    if len(v) < 4096:
        return np.searchsorted(_POW10, v, "right")
    lo, hi = np.searchsorted(_POW10, (v.min(), v.max()), "right").tolist()
    count = np.zeros(len(v), dtype=np.int8)  # (at most 18: small counts add fastest)
    for p in _POW10[lo:hi].tolist():
        count += v >= p
    return count.astype(np.int64) + lo


def _status_fixed_point(base, out, fixed, bpt, tok0, last0, width, stok, passes: int):
    """(requests, tokens so far, last requests, status tokens) of lanes' blocks (``width`` calls each,
    laid end to end; ``tok0``, ``last0``: each lane's tokens and last request before its block) whose
    status line counts the tokens so far: from the guess ``stok``, passes until nothing changes (at most
    ``passes``). The lanes are independent, so after a pass only those whose line still moved pass
    again, on their own calls (a block's few late digit changes need not redo every lane)."""
    n = len(width)
    head = np.zeros(n, dtype=np.int64)
    np.cumsum(width[:-1], out=head[1:])
    N = len(base)
    last = np.empty(N, dtype=np.int64)
    tok0 = np.repeat(tok0, width)
    req = tokens = stok
    for p in range(passes):
        req = np.maximum(base + stok, 0)
        x = req + out
        tokens = np.cumsum(x)
        before = np.zeros(n, dtype=np.int64)
        before[1:] = tokens[head[1:] - 1]
        tokens += tok0 - np.repeat(before, width) - x
        last[1:] = req[:-1]
        last[head] = last0
        digits = _digits(tokens) + _digits(last)
        digits += fixed
        new = np.ceil(digits / bpt).astype(np.int64)
        moved = new != stok
        if not moved.any():
            break
        stok = new
        again = (np.add.reduceat(moved, np.minimum(head, N - 1)) > 0) & (width > 0)
        sel = np.repeat(again, width)
        if p + 1 < passes and 2 * int(width[again].sum()) < N:
            got = _status_fixed_point(
                base[sel], out[sel], fixed[sel], bpt[sel], tok0[head[again]], last0[again], width[again],
                new[sel], passes - p - 1,
            )  # fmt: skip
            req, tokens, last, stok = req.copy(), tokens.copy(), last.copy(), new.copy()
            for v, g in zip((req, tokens, last, stok), got, strict=True):
                v[sel] = g
            break
    return req, tokens, last, stok


class _Trajectory:
    """Lanes' calls over blocks of call positions as if no trigger fired in them, laid end to end (lane
    ``i``'s block: ``width[i]`` calls from ``pos[i]``, entries ``off[i]:off[i + 1]``). Between two firings
    a lane's view only grows by what each call appends, so its estimates, requests, cache and cost are
    prefix sums and running maxima over the run's per-call tables; only the status line's tokens feed
    back (they count the tokens so far), solved by iterating to the fixed point."""

    def __init__(
        self, lanes: _Lanes, s: np.ndarray, fs: np.ndarray, pos: np.ndarray, width: np.ndarray, plan=None
    ):
        K = lanes.K
        n = s.shape[1]
        off = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(width, out=off[1:])
        N = int(off[-1])
        self.off, self.first, self.width = off, off[:-1], width
        head_at = np.repeat(off[:-1], width)  # each entry's lane's first entry
        self.rel = rel = np.arange(N) - head_at  # each entry's place in its lane's block
        self.kk = kk = rel + np.repeat(pos, width)
        b = lanes.b
        if n == len(b.ncalls) and N == b.calls and np.array_equal(s[_RUN], b.runs) and not pos.any():
            # one lane a run, each over its whole run: the tables as they lie, runs end to end
            tabs, self.t = b.laid_end_to_end(lanes.tabs, lanes.status_base)
            self.idx = None
        else:
            self.idx = idx = np.repeat(s[_RUN] * K, width) + kk
            tabs, self.t = lanes.tabs[:6].take(idx, axis=1), lanes.elapsed.take(idx)
        app, oprev, prefix_at, resid, fixed, out = tabs[:6]
        self.app, self.out = app, out
        self.ve = ve = self.cumsum(app)
        ve += np.repeat(s[_VE], width)
        self.dtot = dtot = np.repeat(s[_DELTA], width)  # each entry's net change
        if plan is not None:  # prune-only firings inside the blocks (``_Chain``): their changes
            at, d_delta, d_ve = plan[:3]
            step = np.zeros(N, dtype=np.int64)
            step[at] = d_delta
            dtot = self.dtot = dtot + self.cumsum(step)
            step[at] = d_ve
            ve += self.cumsum(step)
        total = prefix_at + dtot
        base = total + resid
        tok0 = np.repeat(s[_TOKENS], width)
        last = np.empty(N, dtype=np.int64)
        head = off[:-1]
        if lanes.status_on:
            bpt = np.repeat(fs[_BPT], width)
            d0 = np.searchsorted(_POW10, s[_TOKENS], "right") + np.searchsorted(_POW10, s[_LAST], "right")
            stok = np.ceil((np.repeat(d0, width) + fixed) / bpt).astype(np.int64)  # first guess
            passes = int(width.max(initial=0)) + 1  # each pass settles one more call at least
            req, tokens, last, stok = _status_fixed_point(
                base, out, fixed, bpt, s[_TOKENS], s[_LAST], width, stok, passes
            )
        else:
            stok = np.zeros(N, dtype=np.int64)
            req = np.maximum(base, 0)
            tokens = self.cumsum(req + out)
            tokens += tok0
            tokens -= req + out
            last[1:] = req[:-1]
            last[head] = s[_LAST]
        self.req, self.total, self.stok, self.tokens, self.last = req, total, stok, tokens, last
        # (None: no lane has a window, none is ever over it)
        if not lanes.windowed:
            self.over = None
        else:
            self.over = req > (tabs[6] if self.idx is None else lanes.tabs[6].take(self.idx))
        self.est = np.where(last > 0, last + (oprev + app), ve)
        # the cache: the entry the last cacheable request left, if alive and the prefix long enough
        stable = np.empty(N, dtype=np.int64)
        stable[1:] = total[:-1]
        stable[head] = s[_PREV]
        if plan is not None:  # (a firing's stable prefix: what its change leaves, ``_compact``)
            stable[plan[3]] = plan[4]
        self.stable = stable
        rules = lanes.rules
        cacheable = total >= rules.min_prefix_tokens
        lc = np.where(cacheable, np.arange(N), -1)
        np.maximum.accumulate(lc, out=lc)
        self.lc = lc  # the last cacheable entry up to each (before the lane's block: none)
        lcb = np.empty(N, dtype=np.int64)
        lcb[1:] = lc[:-1]
        lcb[head] = -1
        some = lcb >= head_at
        lcb0 = np.maximum(lcb, 0)
        cached = np.where(some, total[lcb0], np.repeat(s[_CACHED], width))
        expires = np.where(some, self.t[lcb0] + rules.lifetime_s, np.repeat(fs[_EXPIRES], width))
        self.cached_before, self.expires_before = cached, expires
        hit = (self.t <= expires) & (stable >= rules.min_prefix_tokens)
        reusable = np.minimum(stable, cached)
        if rules.reuse_fraction != 1.0:
            reusable = np.floor(reusable * rules.reuse_fraction).astype(np.int64)
        if rules.granularity != 1:
            reusable = reusable // rules.granularity * rules.granularity
        read = np.minimum(reusable, req) * hit
        if rules.writes:
            write = np.maximum(np.minimum(total, req) - read, 0) * cacheable
        else:
            write = np.zeros(N, dtype=np.int64)
        self.read, self.write = read, write
        self.uncached = req - read - write

    def net_free_estimates(self) -> np.ndarray:
        """Each entry's estimate but for the net change it was made with (its last request's), what
        ``_Chain`` shifts by a lane's net change; a lane's first call's (the view's estimate): none."""
        est = self.__dict__.get("_net_free")
        if est is None:
            est = self.est.copy()
            est[1:] -= self.dtot[:-1]
            est[self.last <= 0] = _LOWEST
            if not self.est.flags.writeable:  # (a kept block: kept with it)
                self._net_free = est
        return est

    def whole_sums(self, lanes: _Lanes, names) -> tuple:
        """A block of every run from its first call (``_Lanes._whole_runs``), as (run, call) tables:
        the prefix sums of tokens, over-window calls and cost over each run's first calls ((R, K + 1)),
        the running maximum of the requests ((R, K)), and the row columns ``names`` ((R, K), 0 past a
        run's end). Kept with the block, one for each price and set of names."""
        memo = self.__dict__.setdefault("_whole_sums", {})
        key = (lanes.price, names)
        got = memo.get(key)
        if got is not None:
            return got
        b = lanes.b
        R, K = len(b.ncalls), b.K
        in_run = np.arange(K)[None, :] < b.ncalls[:, None]

        def table(v: np.ndarray) -> np.ndarray:
            out = np.zeros((R, K), dtype=np.int64)
            out[in_run] = v  # (the runs end to end, in order)
            return out

        def prefix(v: np.ndarray) -> np.ndarray:
            out = np.zeros((R, K + 1), dtype=np.int64)
            np.cumsum(table(v), axis=1, out=out[:, 1:])
            return out

        cost = lanes.cost(self.uncached, self.read, self.write, self.out)
        over = np.zeros(self.req.shape, dtype=np.int64) if self.over is None else self.over.astype(np.int64)
        peak = np.maximum.accumulate(table(self.req), axis=1)
        cols = {} if names is None else self.row_columns(lanes.cost, list(names))
        got = memo[key] = (
            prefix(self.req + self.out),
            prefix(over),
            prefix(cost),
            peak,
            cols and {name: table(v) for name, v in cols.items()},
        )
        return got

    def cumsum(self, v: np.ndarray) -> np.ndarray:
        """Each lane's running sums over its block."""
        c = np.cumsum(v)
        before = np.zeros(len(self.first), dtype=np.int64)
        before[1:] = c[self.first[1:] - 1]
        c -= np.repeat(before, self.width)
        return c

    def row_columns(self, cost, names) -> dict[str, np.ndarray]:
        cols = {
            "input_tokens": self.req, "view_tokens": self.total, "status_tokens": self.stok,
            "stable_prefix_tokens": self.stable, "cache_read_tokens": self.read,
            "cache_write_tokens": self.write, "uncached_input_tokens": self.uncached,
        }  # fmt: skip
        if names is None or "cost_microusd" in names:
            cols["cost_microusd"] = cost(self.uncached, self.read, self.write, self.out)
        return cols if names is None else {name: cols[name] for name in names}


class _Chain:
    """A round's foreseen prune-only firings: where each lane's estimate, as the last round's block
    computed it (``pred``: estimates but for the net change, the block's offsets, start calls and
    widths), passes its trigger once shifted by the lane's net change so far, and the prune there
    (``_prune``) leaves the view within the limit, so that the firing only prunes. For a fixed keep the
    natural bound only moves forward, so each firing of a streak prunes from the last one's bound: the
    streak is found firing by firing over the lanes together (a few operations each), and the round's
    blocks (``_Trajectory``'s ``plan``) carry the changes. ``advance`` keeps the blocks up to the first
    call where the lanes' firings differ from the foreseen ones, so a wrong guess costs a round, never a
    figure."""

    def __init__(self, lanes: _Lanes, s: np.ndarray, pos: np.ndarray, w: np.ndarray, pred) -> None:
        b, K = lanes.b, lanes.K
        est, off_t, pos_t, w_t = pred
        n = len(pos)
        lim = np.minimum(pos_t + w_t, pos + w)
        cnt = np.maximum(lim - pos - 1, 0)  # the calls past each lane's first that the last block holds
        off = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(w, out=off[1:])
        rec: list = []
        C = np.flatnonzero(cnt)
        if len(C):
            cc = cnt[C]
            sstart = np.zeros(len(C) + 1, dtype=np.int64)
            np.cumsum(cc, out=sstart[1:])
            sl = np.repeat(np.arange(len(C)), cc)
            p0 = pos[C]
            at0 = sstart[:-1] - p0 - 1  # (lane i's call k: entry at0[i] + k of the calls searched)
            sE = est[(np.repeat(off_t[C] - pos_t[C] - at0, cc) + np.arange(int(sstart[-1])))]
            r = s[_RUN, C]
            trig, D = s[_TRIG, C], s[_DELTA, C].copy()
            c0, a, stt, comp = s[_CT, C].copy(), s[_CT_T, C].copy(), s[_STT_T, C], s[_COMP, C].copy()
            limit, keep = (v[s[_SET, C]] for v in lanes.settings)
            appc = lanes.app_prefix
            ve0 = s[_VE, C] - appc[r * (K + 1) + p0]  # the view's estimate before the block
            thr = trig - D  # (a lane whose streak ended: a threshold no estimate passes)
            nxt = sstart[:-1].copy()  # each lane's first entry not yet searched
            ends = sstart[1:]
            while True:
                hits = np.flatnonzero(sE > thr[sl])
                if not len(hits):
                    break
                p = np.searchsorted(hits, nxt)
                h = hits[np.minimum(p, len(hits) - 1)]
                L = np.flatnonzero((p < len(hits)) & (h < ends))
                if not len(L):
                    break
                e = h[L]
                k = e - at0[L]
                rL = r[L]
                natural, moved, bb, has, d, first = _prune(b, rL, k, keep[L], c0[L], a[L], stt[L])
                if lanes.mode == "prune":
                    G, o = L, slice(None)
                else:  # (prune-then-summarize: a summary follows unless the prune is enough)
                    only = moved & (ve0[L] + appc[rL * (K + 1) + k + 1] - d[0] * has <= limit[L])
                    thr[L[~only]] = NO_LIMIT
                    o = np.flatnonzero(only)
                    G = L[o]
                    if not len(G):
                        continue
                    k, rL, has, d, first, e = k[o], rL[o], has[o], d[:, o], first[o], e[o]
                d_delta = (b.ph[rL] * d[1] - d[2]) * has
                d_ve = -d[0] * has
                use = (first >= 0) & (first < b.view_end.reshape(-1)[rL * K + k - 1])
                stable = b.prefix[b.io[rL] + np.maximum(first, 0)] + D[G]
                D[G] += d_delta
                ve0[G] += d_ve
                thr[G] -= d_delta
                c0[G] = np.maximum(c0[G], natural[o])
                a[G] = bb[o]
                comp[G] += has
                nxt[G] = e + 1
                lane = C[G]
                rec.append((lane, off[lane] + k - pos[lane], k - pos[lane], d_delta, d_ve, use, stable,
                            D[G], c0[G], a[G], comp[G]))  # fmt: skip
        if rec:
            lane, at, rel, d_delta, d_ve, use, stable, *after = (
                np.concatenate(v) for v in zip(*rec, strict=True)
            )
        else:
            lane = at = rel = d_delta = d_ve = stable = np.zeros(0, dtype=np.int64)
            use = np.zeros(0, dtype=bool)
            after = [lane] * 4
        self.n, self.lane, self.at, self.rel, self.after = n, lane, at, rel, after
        self.plan = (at, d_delta, d_ve, at[use], stable[use])

    def settle(self, s: np.ndarray, j: np.ndarray) -> None:
        """The lanes' state past the foreseen firings among the first ``j`` calls of their blocks."""
        made = np.flatnonzero(self.rel < j[self.lane])
        if not len(made):
            return
        last = np.full(self.n, -1, dtype=np.int64)
        np.maximum.at(last, self.lane[made], made)  # (each lane's firings in order: its last made)
        lanes = np.flatnonzero(last >= 0)
        at = last[lanes]
        for row, v in zip((_DELTA, _CT, _CT_T, _COMP), self.after, strict=True):
            s[row, lanes] = v[at]


class _Lanes:
    """The started lanes' replay, firing to firing: a firing position is one call's work for the lanes
    that fire there (``_compact`` and the request), the calls between are blocks (``_Trajectory``)."""

    def __init__(self, b, tabs, by_call, status_on, rules, price, summary_knobs, keep_summaries) -> None:
        self.b, self.K, self.tabs, self.by_call, self.elapsed = b, b.K, tabs, by_call, b.elapsed.reshape(-1)
        self.status_on, self.rules, self.price = status_on, rules, price
        self.windowed = bool((b.window < NO_LIMIT).any())  # (False: no request is ever refused)
        self.mode, self.ratio, self.smin, self.smax = summary_knobs
        self.summaries: list | None = [] if keep_summaries else None
        self.tables: dict[str, np.ndarray] | None = None  # (lane, call) row columns, when rows are asked
        self.settings: tuple = ()
        self.calls: list = []  # the started lanes' calls to price: (lanes, uncached, read, write, output)

    def _whole_runs(self, s, fs, pos, w) -> _Trajectory:
        """The block of one setting's lanes over their whole runs, before any firing: the runs' replays
        without a limit, which no setting changes (the lanes' triggers only read it), so it is kept with
        the batch for the next setting or replay, as the call tables are (read-only: a round only reads
        its block)."""
        memo = self.b.__dict__.setdefault("_call_tables", {})
        key = ("whole_runs", self.status_base, self.rules)
        tr = memo.get(key)
        if tr is None:
            tr = memo[key] = _Trajectory(self, s, fs, pos, w)
            for v in vars(tr).values():
                if isinstance(v, np.ndarray):
                    v.flags.writeable = False
        return tr

    @cached_property
    def app_prefix(self) -> np.ndarray:
        """Each run's appended estimates summed to each call, flat (run * (K + 1) + calls so far)."""
        b = self.b
        memo = b.__dict__.setdefault("_call_tables", {})
        got = memo.get("app_prefix")
        if got is None:
            got = np.zeros((len(b.ncalls), self.K + 1), dtype=np.int64)
            np.cumsum(b.appended, axis=1, out=got[:, 1:])
            got = memo["app_prefix"] = got.reshape(-1)
        return got

    def cost(self, uncached, read, write, output) -> np.ndarray:
        """``cost_microusd`` of each call (-1 each when unpriced), each rounded on its own."""
        if self.price is None:
            return np.full(np.shape(uncached), -1, dtype=np.int64)
        shape = np.shape(uncached)
        u, r, w, o = (np.broadcast_to(v, shape) for v in (uncached, read, write, output))
        return self.price.cost_all(u, r, w, o)

    def add(self, lanes, uncached, read, write, output) -> None:
        """A summary call of each of these lanes (``_compact``): billed to the lane."""
        n = len(lanes)
        self.calls.append((self._at[lanes], uncached, _full(read, n), _full(write, n), output))

    def own_costs(self) -> np.ndarray:
        """Each started lane's own calls' cost: priced in one pass, each call rounded on its own."""
        own = self.own
        if self.calls:
            at, *cols = (np.concatenate(v) for v in zip(*self.calls, strict=True))
            np.add.at(own, at, self.cost(*cols))
        return own[:-1]

    def advance(self, state: np.ndarray, fstate: np.ndarray, first_fires: bool = True) -> None:
        """Replay the started lanes (``state``, ``fstate``: one column a lane, each at the call its trigger
        first fires, ``_START``) to their runs' ends, in place. ``first_fires`` False: the lanes are at
        their runs' first calls (``_unstarted``), their first block each run's whole length."""
        n = state.shape[1]
        self.n = n
        self.own = np.zeros(n + 1, dtype=np.int64)  # each lane's own calls' cost (the last: no lane's)
        self._at = np.full(len(self.b.ncalls) * len(self.settings[0]) + 1, -1, dtype=np.int64)
        self._at[state[_LANE]] = np.arange(n)
        if n >= _LOCKSTEP_LANES:
            self._lockstep(state, fstate)
            return
        ncalls = self.b.ncalls
        A = np.arange(n)
        pos = state[_START].copy()
        firing = np.full(n, first_fires, dtype=bool)
        # each lane's next block: twice its last gap (at first as wide as the lanes are few)
        if first_fires:
            width = np.full(n, min(self.K, max(_MIN_BLOCK, _BLOCK // max(n, 1))), dtype=np.int64)
        else:
            width = ncalls[state[_RUN]].copy()
        chained = self.mode != "summarize"  # (the modes whose firings may only prune)
        pred = None  # the last round's blocks past each lane's place: where it may fire next (``_chain``)
        while len(A):
            F = np.flatnonzero(firing)
            if len(F):  # their compactions; each firing call is then its lane's next block's first
                self._fire(state, fstate, A[F], pos[F])
            s, fs = state[:, A], fstate[:, A]
            rest = ncalls[s[_RUN]] - pos
            if rest.sum() <= _REST_ENTRIES:  # few calls left: blocks to the runs' ends (a round's
                w = rest  # array operations cost more than its entries, so no round without a firing)
            else:
                w = np.minimum(width[A], rest)
                np.minimum(w, max(_MIN_BLOCK, _BLOCK_ENTRIES // len(A)), out=w)
            chain = None if pred is None else _Chain(self, s, pos, w, pred)
            if chain is not None and not len(chain.at):
                chain = None
            whole = pred is None and not first_fires and int(w.sum()) == self.b.calls
            if whole:  # (the first round: every run from its first call)
                tr = self._whole_runs(s, fs, pos, w)
            else:
                tr = _Trajectory(self, s, fs, pos, w, None if chain is None else chain.plan)
            fire = tr.est > np.repeat(s[_TRIG], w)
            fire[tr.first[F]] = False  # (a firing call has compacted: it fires no more)
            if tr.over is not None:
                over_before = tr.cumsum(tr.over) - tr.over
                fire &= over_before == 0  # a lane over its window no longer fires
            if chain is None:
                wrong = fire
            else:  # the blocks hold while the lanes fire where the chain said, and only there
                wrong = fire.copy()
                wrong[chain.at] = ~fire[chain.at] | (tr.last[chain.at] <= 0)
            fi = np.flatnonzero(wrong)
            if len(fi):
                p = np.searchsorted(fi, tr.first)
                c = fi[np.minimum(p, len(fi) - 1)]
                found = (p < len(fi)) & (c < tr.off[1:])
                fires = found & fire[c]  # (else a firing the chain foresaw that does not come)
                j = np.where(found, c - tr.first, w)  # the calls made before it
            else:
                fires, j = np.zeros(len(A), dtype=bool), w
            if chain is not None:
                chain.settle(s, j)
            if whole:
                self._commit_whole(state, fstate, s, fs, tr, j)
            else:
                self._commit(state, fstate, A, s, fs, tr, w, j)
            if chained:
                pred = (tr.net_free_estimates(), tr.first, pos.copy(), w)
            pos += j
            width[A] = np.where(fires, np.maximum(2 * j, _MIN_BLOCK), np.minimum(2 * w, self.K))
            going = pos < ncalls[s[_RUN]]  # (a lane that fires has that call to make)
            if going.all():
                firing = fires
            else:
                A, pos, firing = A[going], pos[going], fires[going]
                if pred is not None:
                    pred = tuple(v if i == 0 else v[going] for i, v in enumerate(pred))

    def _lockstep(self, state: np.ndarray, fstate: np.ndarray) -> None:
        """``advance`` call position by call position: many started lanes make each position's arrays
        long, so its per-position work is small beside the lanes' own (and there are no blocks to
        compute past a firing). The lanes are ordered by the call they start at, so the lanes going are
        a prefix; lanes whose runs ended stay in it (their figures taken, never firing, billed to no
        lane) until they are many."""
        n = state.shape[1]
        if not n:
            return
        order = np.argsort(state[_START], kind="stable")
        st, fs = state[:, order], fstate[:, order]
        ident = order.copy()  # each column's lane, as ``state`` has them
        starts = st[_START].copy()
        ends = self.b.ncalls[st[_RUN]]
        dead = np.zeros(n, dtype=bool)  # (lanes of ended runs: all started, so in the prefix)
        n_dead = 0
        K = self.K
        for k in range(int(starts[0]), K + 1):
            gone = np.flatnonzero(ends == k)  # runs that end here: their lanes' figures are final
            if len(gone):
                state[:, ident[gone]] = st[:, gone]
                fstate[:, ident[gone]] = fs[:, gone]
                st[_TRIG, gone] = NO_LIMIT
                dead[gone] = True
                n_dead += len(gone)
            if k == K:
                break
            m = int(np.searchsorted(starts, k, side="right"))
            if 4 * n_dead > m:  # (the rest keep their order)
                keep = np.flatnonzero(~dead)
                st, fs, ident, starts, ends, dead = (
                    st[:, keep], fs[:, keep], ident[keep], starts[keep], ends[keep], dead[keep]
                )  # fmt: skip
                m = int(np.searchsorted(starts, k, side="right"))
                n_dead = 0
            Sv, fv = st[:, :m], fs[:, :m]
            X = self.by_call[k].take(Sv[_RUN], axis=1)
            last = Sv[_LAST]
            ve = Sv[_VE] + X[_T_APP]
            est = np.where(last > 0, last + (X[_T_OPREV] + X[_T_APP]), ve) if k else ve
            self._call(Sv, fv, ident[:m], k, est > Sv[_TRIG], dead[:m] if n_dead else None, X)

    def _commit(self, state, fstate, A, s, fs, tr: _Trajectory, w, j) -> None:
        """The first ``j`` calls of each lane's block are made: its state moves past them."""
        m = tr.rel < np.repeat(j, w)
        first = tr.first
        s[_TOKENS] += np.add.reduceat(np.where(m, tr.req + tr.out, 0), first)
        np.maximum(s[_PEAK], np.maximum.reduceat(np.where(m, tr.req, 0), first), out=s[_PEAK])
        self._past_last(s, fs, tr, j)
        over = None if tr.over is None else np.add.reduceat(tr.over & m, first) > 0
        if over is not None and over.any():  # refused by the provider: the loop replays what follows
            s[_OK, over] = 0
            s[_TRIG, over] = NO_LIMIT
        self.calls.append((np.repeat(A, w)[m], tr.uncached[m], tr.read[m], tr.write[m], tr.out[m]))
        if self.tables is not None:
            cols = tr.row_columns(self.cost, list(self.tables))
            flat = (np.repeat(s[_LANE] * self.K, w) + tr.kk)[m]
            for name, v in cols.items():
                self.tables[name].reshape(-1)[flat] = v[m]
        state[:, A] = s
        fstate[:, A] = fs

    def _past_last(self, s, fs, tr: _Trajectory, j) -> None:
        """What a commit reads from each lane's last call made (the ``j``-th of its block, if any): the
        last request, the view and its estimate, and the cache the last cached call left."""
        has = j > 0
        first = tr.first
        last = first + np.maximum(j - 1, 0)
        for r_, v in ((_LAST, tr.req), (_PREV, tr.total), (_VE, tr.ve)):
            s[r_] = np.where(has, v[last], s[r_])
        lc = tr.lc[last]
        moved = has & (lc >= first)
        lc0 = np.maximum(lc, 0)
        s[_CACHED] = np.where(moved, tr.total[lc0], s[_CACHED])
        fs[_EXPIRES] = np.where(moved, tr.t[lc0] + self.rules.lifetime_s, fs[_EXPIRES])

    def _commit_whole(self, state, fstate, s, fs, tr: _Trajectory, j) -> None:
        """``_commit`` of the first round's block (one lane a run, every run from its first call, kept
        with the batch): each lane's sums over its first ``j`` calls are differences of the block's
        prefix sums, its calls' rows the block's tables (a later round writes those past ``j`` again:
        every call is made once)."""
        names = None if self.tables is None else tuple(self.tables)
        tok, over_p, cost, peak, tables = tr.whole_sums(self, names)
        R = len(j)
        runs = s[_RUN]  # (0, 1, ...: the lanes are the runs, in order)
        s[_TOKENS] += tok[runs, j]
        np.maximum(s[_PEAK], np.where(j > 0, peak[runs, np.maximum(j - 1, 0)], 0), out=s[_PEAK])
        self._past_last(s, fs, tr, j)
        if tr.over is not None:
            over = over_p[runs, j] > 0
            if over.any():  # refused by the provider: the loop replays what follows
                s[_OK, over] = 0
                s[_TRIG, over] = NO_LIMIT
        self.own[:R] += cost[runs, j]
        if self.tables is not None:
            for name, v in self.tables.items():
                np.copyto(v, tables[name])
        state[:] = s
        fstate[:] = fs

    def _fire(self, state, fstate, F, k) -> None:
        """The lanes ``F`` compact before their calls ``k``; the calls themselves are the first of the
        lanes' next blocks (their cache sees the stable prefix the change leaves, their status line a
        summary call's input as the last request)."""
        b = self.b
        Sf, fF = state[:, F], fstate[:, F]
        idx = Sf[_RUN] * self.K + k
        app = self.tabs[_T_APP].take(idx)
        Sf[_VE] += app  # (what the call appends is in the view the compaction sees)
        stable_F, firstF, summary_in = _compact(
            b, Sf, fF, k, self.settings, self.mode, self.ratio, self.smin, self.smax, self, self.summaries
        )
        Sf[_VE] -= app  # (the block adds it)
        prev_items = np.where(k > 0, b.view_end.reshape(-1)[np.maximum(idx - 1, 0)], 0)
        np.copyto(Sf[_PREV], stable_F, where=(firstF >= 0) & (firstF < prev_items))
        if summary_in is not None:
            Sf[_LAST, summary_in[0]] = summary_in[1]
        state[:, F] = Sf
        fstate[:, F] = fF

    def _call(self, Sf, fF, ids, k, fires, dead, X=None) -> None:
        """The lanes ``Sf``, ``fF`` (their state, updated in place; ``ids``: their places in the bills)
        make their calls at call position ``k`` (the lockstep's: blocks take ``_Trajectory``): those that
        ``fires`` (None: all) compact first. ``dead``: lanes past their runs' ends (None: none), neither
        billed nor tabled. ``X``: the lanes' per-run tables at ``k`` when the caller has them."""
        b, rules = self.b, self.rules
        r = Sf[_RUN]
        X = self.by_call[k].take(r, axis=1) if X is None else X  # (one position: contiguous tables)
        t = b.elapsed_by_call[k].take(r)

        def prev_items(H):  # the items the lanes' last calls had in view
            return b.view_end_by_call[k - 1].take(r[H]) if k else 0

        Sf[_VE] += X[_T_APP]
        n = Sf.shape[1]
        if fires is None:
            stable_F, firstF, summary_in = _compact(
                b, Sf, fF, k, self.settings, self.mode, self.ratio, self.smin, self.smax, self, self.summaries
            )
        else:
            G = np.flatnonzero(fires)
            stable_F = firstF = summary_in = None
            if len(G):
                Sg, fg = Sf[:, G], fF[:, G]
                sg, fgi, summary_in = _compact(
                    b, Sg, fg, k, self.settings, self.mode, self.ratio, self.smin,
                    self.smax, self, self.summaries,
                )  # fmt: skip
                Sf[:, G] = Sg
                stable_F, firstF = sg, fgi
                if summary_in is not None:
                    summary_in = (G[summary_in[0]], summary_in[1])
        total = Sf[_DELTA] + X[_T_PREFIX]
        if self.status_on:  # the line's length from its numbers' digits: the rest of its text is fixed
            last = Sf[_LAST]
            if summary_in is not None:
                last = last.copy()
                last[summary_in[0]] = summary_in[1]
            digits = np.searchsorted(_POW10, Sf[_TOKENS], "right") + np.searchsorted(_POW10, last, "right")
            digits += X[_T_FIXED]
            stok = np.ceil(digits / fF[_BPT]).astype(np.int64)  # estimate_tokens of the line
            req = total + X[_T_RESID] + stok
        else:
            stok = np.zeros(n, dtype=np.int64)
            req = total + X[_T_RESID]
        np.maximum(req, 0, out=req)
        over = req > X[_T_WIN]
        if over.any():  # refused by the provider: the loop replays what follows
            Sf[_OK, over] = 0
            Sf[_TRIG, over] = NO_LIMIT
        stable = Sf[_PREV].copy()
        if firstF is not None:  # (``stable_F``, ``firstF``: of the lanes ``G``, or of all when None)
            H = np.arange(n) if fires is None else G
            use = (firstF >= 0) & (firstF < prev_items(H))
            stable[H[use]] = stable_F[use]
        expires = fF[_EXPIRES]
        hit = (t <= expires) & (stable >= rules.min_prefix_tokens)
        reusable = np.minimum(stable, Sf[_CACHED])
        if rules.reuse_fraction != 1.0:
            reusable = np.floor(reusable * rules.reuse_fraction).astype(np.int64)
        if rules.granularity != 1:
            reusable = reusable // rules.granularity * rules.granularity
        read = np.minimum(reusable, req) * hit
        cacheable = total >= rules.min_prefix_tokens
        if rules.writes:
            write = np.maximum(np.minimum(total, req) - read, 0) * cacheable
        else:
            write = np.zeros(n, dtype=np.int64)
        np.copyto(Sf[_CACHED], total, where=cacheable)
        np.copyto(expires, t + rules.lifetime_s, where=cacheable)
        o = X[_T_OUT]
        uncached = req - read - write
        billed = ids if dead is None else np.where(dead, self.n, ids)
        self.own[billed] += self.cost(uncached, read, write, o)  # (a position's lanes are many: priced now)
        if self.tables is not None:
            cols = {
                "input_tokens": req, "view_tokens": total, "status_tokens": stok,
                "stable_prefix_tokens": stable, "cache_read_tokens": read, "cache_write_tokens": write,
                "uncached_input_tokens": uncached,
            }  # fmt: skip
            if "cost_microusd" in self.tables:
                cols["cost_microusd"] = self.cost(uncached, read, write, o)
            flat = Sf[_LANE] * self.K + k
            live = slice(None) if dead is None else ~dead
            for name, v in self.tables.items():
                v.reshape(-1)[flat[live]] = np.broadcast_to(cols[name], n)[live]
        np.maximum(Sf[_PEAK], req, out=Sf[_PEAK])
        Sf[_TOKENS] += req + o
        Sf[_LAST] = req
        Sf[_PREV] = total


# ``_Trajectory.row_columns``' names, in its order
_ROW_NAMES = (
    "input_tokens", "view_tokens", "status_tokens", "stable_prefix_tokens", "cache_read_tokens",
    "cache_write_tokens", "uncached_input_tokens", "cost_microusd",
)  # fmt: skip


def _unstarted(b: _Batch, set_trig: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The state of one setting's lanes (one a run) before their runs' first calls: what ``_pristine``
    copies from the pristine lane at call 0."""
    R = len(b.ncalls)
    runs = np.arange(R, dtype=np.int64)
    state = np.zeros((_ROWS, R), dtype=np.int64)
    state[_RUN] = state[_LANE] = runs
    state[_TRIG] = set_trig[0]
    state[_S_BYTES] = state[_CARRIER] = -1
    state[_OK] = 1
    state[_CT_T] = state[_STT_T] = b.to
    fstate = np.empty((2, R), dtype=np.float64)
    fstate[_EXPIRES], fstate[_BPT] = -1.0, b.bpt
    return state, fstate


def _pristine(lanes: _Lanes, runs, S: int, set_trig, cost_out, sums_out, row_columns):
    """The pristine lanes of ``runs`` (consecutive) over all their calls: their calls' cost into
    ``cost_out`` (run, call), their tokens, peak and window check into ``sums_out``, their row columns
    into ``lanes.tables`` (when asked); returns the state of each (run, setting) lane at the call its
    trigger first fires (a copy of the pristine lane's state there), lanes that never fire left out."""
    b, K = lanes.b, lanes.K
    n = len(runs)
    pstate = np.zeros((_ROWS, n), dtype=np.int64)
    pstate[_RUN] = runs
    pstate[_LANE] = -1
    pstate[_TRIG] = NO_LIMIT
    pstate[_S_BYTES] = pstate[_CARRIER] = -1
    pstate[_OK] = 1
    pstate[_CT_T] = pstate[_STT_T] = b.to[runs]
    pf = np.zeros((2, n), dtype=np.float64)
    pf[_EXPIRES], pf[_BPT] = -1.0, b.bpt[runs]
    tr = _Trajectory(lanes, pstate, pf, np.zeros(n, dtype=np.int64), b.ncalls[runs])
    first = tr.first
    local = np.repeat(np.arange(n) * K, b.ncalls[runs]) + tr.kk  # (run, call) of each entry, flat

    def per_call(v: np.ndarray, fill: int = 0) -> np.ndarray:  # (run, call), ``fill`` past a run's end
        out = np.full(n * K, fill, dtype=v.dtype)
        out[local] = v
        return out.reshape(n, K)

    cost_out[runs] = per_call(lanes.cost(tr.uncached, tr.read, tr.write, tr.out))
    sums_out[0, runs] = np.add.reduceat(tr.req + tr.out, first)
    sums_out[1, runs] = np.maximum.reduceat(tr.req, first)
    sums_out[2, runs] = 1 if tr.over is None else np.add.reduceat(tr.over, first) == 0
    if lanes.tables is not None:
        for name, v in tr.row_columns(lanes.cost, row_columns).items():
            table = lanes.tables.get(name)
            if table is None:
                table = lanes.tables[name] = np.zeros((len(b.ncalls) * S, K), dtype=np.int64)
            table.reshape(-1, S, K)[runs] = per_call(v)[:, None, :]
    # each setting's lanes start (their trigger first fires) where the pristine estimate first passes it,
    # while the pristine lane is still within its window (a lane starts at a call it could make)
    if tr.over is None:
        est = per_call(tr.est, _LOWEST)
    else:
        over_before = tr.cumsum(tr.over) - tr.over > 0
        est = per_call(np.where(over_before, _LOWEST, tr.est), _LOWEST)
    np.maximum.accumulate(est, axis=1, out=est)
    start = np.empty((n, S), dtype=np.int64)
    for r in range(n):  # (S searches a run)
        start[r] = np.searchsorted(est[r], set_trig, side="right")
    has = start < b.ncalls[runs][:, None]
    rl, ss = np.nonzero(has)
    k0 = start[rl, ss]
    rs = runs[rl]
    m = len(rs)
    state = np.zeros((_ROWS, m), dtype=np.int64)
    fstate = np.zeros((2, m), dtype=np.float64)
    state[_RUN] = rs
    state[_LANE] = rs * S + ss
    state[_TRIG] = set_trig[ss]
    state[_SET] = ss
    state[_START] = k0
    state[_S_BYTES] = state[_CARRIER] = -1
    state[_OK] = 1
    state[_CT_T] = state[_STT_T] = b.to[rs]
    at = first[rl] + k0  # the pristine lane's entry at the lane's first call
    state[_VE] = tr.ve[at] - tr.app[at]
    state[_TOKENS] = tr.tokens[at]
    state[_LAST] = tr.last[at]
    state[_PREV] = tr.stable[at]
    state[_CACHED] = tr.cached_before[at]
    peak_before = np.zeros((n, K), dtype=np.int64)
    np.maximum.accumulate(per_call(tr.req)[:, :-1], axis=1, out=peak_before[:, 1:])
    state[_PEAK] = peak_before[rl, k0]
    fstate[_EXPIRES] = tr.expires_before[at]
    fstate[_BPT] = b.bpt[rs]
    return state, fstate


def _prune(b: _Batch, r, k, keep, c0, a, stt_t):
    """The prune of lanes of runs ``r`` firing at calls ``k`` with keep ``keep``, bound ``c0`` (``a``: the
    first tool message at or past it) and summary cut's first tool message ``stt_t``: (natural bound,
    moved, the new ``a``, whether messages are cleared, their (saving, count, tokens), the first item
    changed or -1). The natural bound is ``_Batch.natural``'s: q, the first tool message it leaves in
    view."""
    top = b.top_by_call[k][r] if np.ndim(k) == 0 else b.top_by_call.reshape(-1)[k * b.R + r]
    t0 = b.to[r]
    q = np.minimum(np.maximum(np.searchsorted(b.c, b.c_through[top] - keep), t0), top)
    natural = (b.tmg[q - 1] - b.po[r] + 1) * (q > t0)
    moved = natural > c0
    bb = np.where(moved, q, a)  # (the bound past tool message q - 1: q in ``tmg``)
    av = np.maximum(a, stt_t)
    has = moved & (bb > av)
    d = b.t_sums.take(bb, axis=1) - b.t_sums.take(av, axis=1)  # saving, count, tokens of those cleared
    firstF = np.where(has, b.t_first[np.minimum(av, len(b.t_first) - 1)], -1)
    return natural, moved, bb, has, d, firstF


def _compact(
    b: _Batch, Sf: np.ndarray, fF: np.ndarray, k: int, settings, mode, ratio, smin, smax, bills, summaries
):
    """The lanes whose trigger fires at call ``k`` (``Sf``: their state, updated in place; ``fF``:
    their float state; ``settings``: the settings' limits and keeps): prune to the natural bound, then
    summarize where the mode says so and the cut moves. Returns the stable prefix each lane's change
    leaves, the first item changed (-1: none) and the summarized lanes with their summary call's input
    (None: no summary)."""
    nF = Sf.shape[1]
    r = Sf[_RUN]
    pF, ph = b.po[r], b.ph[r]
    lane_limit, lane_keep = (v[Sf[_SET]] for v in settings)
    veF = Sf[_VE]
    d_old = Sf[_DELTA].copy()
    dtok = np.zeros(nF, dtype=np.int64)
    firstF = np.full(nF, -1, dtype=np.int64)
    moved = np.zeros(nF, dtype=bool)
    summarized = np.zeros(nF, dtype=bool)
    summary_in = None
    if mode != "summarize":
        c0 = Sf[_CT]
        natural, moved, bb, has, d, firstF = _prune(b, r, k, lane_keep, c0, Sf[_CT_T], Sf[_STT_T])
        veF -= d[0] * has
        dtok += (ph * d[1] - d[2]) * has
        Sf[_COMP] += has
        np.maximum(c0, natural, out=c0)
        Sf[_CT_T] = bb
    if mode == "prune":
        G = np.zeros(0, dtype=np.int64)
    elif mode == "summarize":
        G = np.arange(nF)
    else:
        G = np.flatnonzero(~(moved & (veF <= lane_limit)))
    if len(G):
        Sg = Sf.take(G, axis=1)
        rg, c, stG = Sg[_RUN], Sg[_CT], Sg[_STT]
        pg, keep = pF[G], lane_keep[G]
        M = b.msgs_by_call[k][rg] if np.ndim(k) == 0 else b.msgs_by_call.reshape(-1)[k[G] * b.R + rg]
        cM = np.minimum(c, M)
        gM, gcM = pg + M, pg + cM
        ep_M, ep_cM = b.ep[gM], b.ep[gcM]
        top = ep_M - b.sv[gcM]
        whole = (cM < M) & (ep_M - ep_cM >= keep)
        lo_whole = _clip(np.searchsorted(b.ep, ep_M - keep, side="right"), gcM, gM)
        lo_part = _clip(np.searchsorted(b.dv, top - keep, side="right"), pg, gcM)
        lo = np.where(whole, lo_whole, lo_part) - pg
        cut = b.back[pg + np.maximum(lo - 1, 0)] * (lo > 1)
        cut = np.maximum(cut, stG)
        m0 = np.maximum(stG, b.pe[rg])
        H = np.flatnonzero(cut > m0)
        if len(H):
            h = G[H]  # the summarizing lanes, as positions in Sf
            Sh = Sg.take(H, axis=1)
            rh, qh, cut, m0, c, cM, ep_M, top = rg[H], pg[H], cut[H], m0[H], c[H], cM[H], ep_M[H], top[H]
            at_m0, at_cut = (
                b.m_sums.take(qh + m0, axis=1),
                b.m_sums.take(qh + cut, axis=1),
            )  # m_tok bc bl ep dv first tok

            def kept_from(m, at):
                return np.where(m >= cM, ep_M - at[3], top - at[4])

            ph_h = ph[h]
            j0 = np.searchsorted(b.tmg, qh + m0)
            j1 = np.searchsorted(b.tmg, qh + np.minimum(cut, c))
            cleared = j1 > j0
            covered = at_cut[0] - at_m0[0]
            t = b.t_sums.take(j1, axis=1) - b.t_sums.take(j0, axis=1)
            covered += (ph_h * t[1] - t[2]) * cleared
            s_tok = Sh[_S_TOK].copy()
            covered_tokens = s_tok + covered
            prev = Sh[_S_BYTES].copy()
            has_prev = prev >= 0
            count = at_cut[1] - at_m0[1]
            total = at_cut[2] - at_m0[2]
            shown_prev = (19 + prev) * has_prev  # the previous summary's line
            lines = count + has_prev
            chars = _TRANSCRIPT_FRAME + total + shown_prev
            chars += 2 * np.maximum(lines - 1, 0)
            budget = (INPUT_BUDGET - ELISION_RESERVE - INSTRUCTION_CHARS) - (shown_prev + 2 * has_prev)
            elide = np.flatnonzero(total + 2 * count > budget)
            if len(elide):  # over the transcript budget: whole blocks from both ends
                chars[elide] = _elided_chars(
                    b.w, qh[elide] + m0[elide], qh[elide] + cut[elide], budget[elide], prev[elide], b.bc
                )
            bpt = fF[_BPT, h]
            s_in = _ceil_tokens(chars, bpt)
            out = _clip(np.rint(ratio * covered_tokens), smin, smax).astype(np.int64)
            text = np.rint(out * bpt).astype(np.int64)
            text[text == 0] = len(NO_SUMMARY)
            new_est = -(-(_SUMMARY_FIXED + text) // 4)
            Sh[_VE] -= kept_from(m0, at_m0) - kept_from(cut, at_cut) + Sh[_S_EST] - new_est
            Sh[_S_BYTES], Sh[_S_EST] = text, new_est
            Sh[_STT] = cut
            Sh[_STT_T] = np.searchsorted(b.tmg, qh + cut)
            msg_tokens = out + b.prefix_tokens[rh]
            car = Sh[_CARRIER]
            fresh = car < 0
            cleared_head = cleared & (b.tmg[np.minimum(j0, len(b.tmg) - 1)] == qh + m0)
            old_new = np.where(cleared_head, ph_h, at_m0[6])
            old_car = np.where(fresh, old_new, s_tok)
            others = covered - old_new * fresh
            np.copyto(car, at_m0[5], where=fresh)
            Sh[_S_TOK] = msg_tokens
            dtok[h] += msg_tokens - old_car - others
            firstF[h] = car
            Sh[_TOKENS] += s_in + out
            Sh[_S_OUT] += out
            np.maximum(Sh[_PEAK], s_in, out=Sh[_PEAK])
            bills.add(Sh[_LANE].copy(), s_in, 0, 0, out)
            Sh[_COMP] += 1
            Sf[:, h] = Sh
            summary_in = (h, s_in)
            if summaries is not None:  # (call, lanes, summary input, summary output)
                summaries.append((np.broadcast_to(k, nF)[h], Sh[_LANE].copy(), s_in, out))
            summarized[h] = True
    stable_F = b.prefix[b.io[r] + np.maximum(firstF, 0)] + d_old * ~summarized
    Sf[_DELTA] = d_old + dtok
    return stable_F, firstF, summary_in


def unlimited_declines(policy) -> str | None:
    """Why ``replay_unlimited`` cannot replay this policy (None: it can)."""
    from sim.engine.fast.seed_grid import settings_decline

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
    from sim.core.records import AGENT, CALL_COLUMNS, change_table
    from sim.engine.common import assemble_record

    assert policy.context_token_limit is None
    rows: list = []
    ok, _ = grid_figures(traces, [policy], models, windows, rules, price, rows)
    R = len(traces)
    order = sorted(range(R), key=lambda r: -len(traces[r].calls))
    rank = {r: i for i, r in enumerate(order)}
    proto_key = f"grid_static_{policy.tool_result_max_bytes}"
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
        i, st = rank[r], t.derived(proto_key, lambda t: _Static(t, policy))
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
