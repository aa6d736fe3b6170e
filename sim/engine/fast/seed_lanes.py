"""The grid path over many traces at once: every (setting, run) pair of a ``seed_engine`` grid is a lane, and
the lanes advance as array operations from one firing of their trigger to the next.

``sim.engine.fast.seed_grid`` replays the settings of one trace together and builds their records; this
module is the same arithmetic with the runs laid side by side too, for the figures a sizing reads (cost,
input and output totals, the largest request, compactions). Per-run tables are laid end to end with offsets
(``sim.engine.fast.seed_static.GridStatic`` of each trace: message estimates, tool-message prefix sums,
transcript blocks; laid out by ``sim.engine.fast.seed_lanes_tables.LaneBatch``), so a lane's prune bound,
summary cut and the sums they move are ``searchsorted`` and prefix sums over the whole batch. The natural
prune bound of a (run, keep, call) is looked up for the lanes that fire (the bound only moves forward for a
fixed keep). Runs are ordered by length, longest first.

Between two firings a lane's view only grows by what each call appends: its estimates, requests, cache entries
and cost are prefix sums and running maxima over its run's per-call tables, shifted by the lane's net change
so far (``sim.engine.fast.seed_lanes_blocks.Trajectory``; the status line's tokens, which count the tokens so
far, are solved to their fixed point, a pass or two, the later passes only for the lanes whose line moved). So
a lane's calls up to its next firing are one block of array operations, the firing found by one search over
it, and a firing only adds its compaction (``sim.engine.fast.seed_lanes_compact.compact_lanes``): the firing
call is then the first of the lane's next block.

Until its trigger first fires, a lane is its run's replay without a limit: each run has one *pristine* lane
standing for all its lanes that have not fired, replayed for all its calls in one block, and a lane starts
on its own (a copy of the pristine lane's state there) at the call its trigger first fires, where the
pristine estimate's running maximum first passes it; in a sizing grid most lanes never fire or fire late.
With one setting there is nothing to share: each run's only lane starts at its first call, its first block
the whole run. The started lanes then advance in blocks (``Lanes.advance``: each lane's next block twice its
last gap, or to its run's end once few calls are left, so that every round fires; a round also carries the
prune-only firings the last round's blocks foresee, ``seed_lanes_blocks.Chain``), or, where they are
thousands (a wide grid: a call position's arrays are long already and blocks would compute past many
firings), call position by call position (``Lanes._lockstep``). The lanes' state is one integer array (a row
per quantity, a column per lane) so starting, gathering and dropping lanes are single operations. The calls'
token counts are priced in a few large passes, each call rounded on its own, so no call table is kept.

Rare events take the long way: a summary whose transcript must be elided (over the 80,000-character budget)
is measured by ``prompt_units`` lane by lane; a lane whose request would exceed the window leaves the grid
(``ok`` is False) and the caller replays it with the per-call loop. ``sim.checks.conformance`` and the tests
hold these figures to the per-call loop's metrics.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property, partial

import numpy as np

from sim.cost.cache import CacheRules
from sim.cost.pricing import Price
from sim.engine.fast.seed_lanes_blocks import Chain, Trajectory, digit_counts
from sim.engine.fast.seed_lanes_compact import compact_lanes
from sim.engine.fast.seed_lanes_tables import (
    BPT,
    CACHED,
    CARRIER,
    COMP,
    CT,
    CT_T,
    DELTA,
    EXPIRES,
    LANE,
    LAST,
    LOWEST,
    OK,
    PEAK,
    PREV,
    ROWS,
    RUN,
    S_BYTES,
    S_OUT,
    S_TOK,
    SET,
    START,
    STT,
    STT_T,
    T_APP,
    T_FIXED,
    T_OPREV,
    T_OUT,
    T_PREFIX,
    T_RESID,
    T_WIN,
    TOKENS,
    TRIG,
    VE,
    LaneBatch,
)
from sim.engine.fast.seed_static import NO_LIMIT, GridStatic, grid_statics, status_base_len
from sim.engine.model import ReplayModel
from sim.policies.seed_engine import SeedEngine
from sim.policies.seed_messages import OUTPUT_CONTRACT_TOKENS
from sim.util.batchmemo import batch_derived


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
    """(ok, figures) of every (setting, run): ``ok[s, r]`` False where the lane left the grid (replay it with
    the loop); figures ``cost_microusd``, ``input_tokens``, ``output_tokens``, ``peak``, ``compactions``, each
    an (S, R) array. Every trace must pass ``sim.engine.fast.seed_grid.trace_declines`` and the settings
    ``settings_decline``; all runs priced alike (``rules``, ``price``). ``rows``: a list to receive each call
    position's agent rows, (runs still going, {column: (run, setting) table}), runs longest first
    (``sim.engine.fast.seed_unlimited.replay_unlimited``: settings without a limit, which never summarize).
    ``lanes_out``: a dict to receive the lanes' summary calls (call, lanes, input, output: one call a lane)
    and final state, lane j being sorted run j // S, setting j % S (``sim.engine.fast.seed_rows``), and with
    ``rows`` the same columns as (lane, call) tables (``calls``). ``row_columns``: the columns ``rows``
    receives (None: all of them; each costs a (lane, call) table). ``keep_batch``: the batch's tables are kept
    for its next replay (a sweep replays a chunk of runs under many settings; ``size`` replays each batch
    once). ``call_tables``: ``lanes_out`` receives the (lane, call) tables without a ``rows`` list.

    Until its trigger first fires a lane is its run's replay without a limit: the lanes of a run share
    one *pristine* lane (a lane whose trigger never fires) until then, and only the lanes that have
    fired are replayed on their own. A setting's lane starts where the pristine estimate first passes
    its trigger, as a copy of the pristine lane there. Most lanes of a sizing grid never fire (limits
    above the run's largest estimate) or fire late, so this replays a small share of the (setting, run)
    calls on their own, and those from firing to firing."""
    proto = policies[0]
    S = len(policies)
    # runs longest first, each run's settings side by side: the runs still going are a prefix
    order = batch_derived(traces, "longest_first", _longest_first)
    traces = [traces[r] for r in order]
    statics = batch_derived(traces, f"grid_statics_{proto.tool_result_max_bytes}", partial(_statics, proto))
    tabled = rows is not None or (call_tables and lanes_out is not None)
    batch_windows = [windows[r] for r in order]
    # no keeps: ``compact_lanes`` reads each lane's own (only ``natural`` tables them)
    build = partial(_lane_batch, statics, batch_windows)
    if keep_batch:
        key = f"grid_batch:{proto.tool_result_max_bytes}:{batch_windows}"
        b = batch_derived(traces, key, build)
    else:
        b = build(traces)
    status_on = proto.reports_status
    status_base = status_base_len(proto) if status_on else None
    outputs, tabs, by_call = b.call_tables([models[r] for r in order], statics, status_base)
    lanes = Lanes(
        b, tabs, by_call, status_on, rules, price, (proto.mode, proto.summary_ratio,
        proto.summary_min_tokens, proto.summary_max_tokens), lanes_out is not None,
    )  # fmt: skip
    lanes.status_base = status_base
    limit = np.array([NO_LIMIT if p.context_token_limit is None else p.context_token_limit for p in policies])
    set_keep = np.array([p.keep_recent_tokens for p in policies], dtype=np.int64)
    set_trig = np.where(limit < NO_LIMIT, limit - OUTPUT_CONTRACT_TOKENS, NO_LIMIT)
    lanes.settings = (limit, set_keep)
    state, pristine, p_sums = _replay_lanes(lanes, S, set_trig, tabled, row_columns)
    return _figures(
        lanes, S, order, outputs, state, pristine, p_sums, rows, lanes_out if tabled else None, lanes_out
    )


def _lane_batch(statics: list[GridStatic], windows: list, traces: Sequence) -> LaneBatch:
    return LaneBatch(statics, [t.bytes_per_token for t in traces], windows, ())


def _replay_lanes(lanes: Lanes, S: int, set_trig: np.ndarray, tabled: bool, row_columns):
    """Every lane's replay (``grid_figures``): (the lanes' final state, one column a started lane; the
    pristine lanes' calls' cost with each started lane's run and first call, None when there is no
    pristine lane; each run's pristine tokens, peak and window check)."""
    b = lanes.b
    R, K = len(b.ncalls), b.K
    pristine = None
    p_sums = np.zeros((3, R), dtype=np.int64)  # each run's pristine tokens, peak and window check
    if S == 1 and R < LOCKSTEP_LANES:
        # one setting: a run's pristine lane is its only lane, so it shares nothing; every lane starts
        # at its first call, its first block its whole run (as the pristine lane's), in blocks mode
        if tabled:
            names = _ROW_NAMES if row_columns is None else tuple(row_columns)
            lanes.tables = {name: np.zeros((R, K), dtype=np.int64) for name in names}
        state, fstate = _unstarted(b, set_trig)
        lanes.advance(state, fstate, first_fires=False)
        return state, pristine, p_sums
    # the pristine lanes (one a run, never firing): every call of a few hundred runs in one block
    pristine_cost = np.zeros((R, K), dtype=np.int64)  # (run, call): the pristine lanes' calls' cost
    if tabled:
        lanes.tables = {}  # (lane, call): every lane as its run's pristine lane until it starts
    step = max(1, _BLOCK_ENTRIES // max(K, 1))
    parts = [
        _pristine(lanes, np.arange(lo, min(R, hi)), S, set_trig, pristine_cost, p_sums, row_columns)
        for lo, hi in ((lo, lo + step) for lo in range(0, R, step))
    ]
    state = np.concatenate([p[0] for p in parts], axis=1)
    fstate = np.concatenate([p[1] for p in parts], axis=1)
    pristine = (pristine_cost, state[RUN].copy(), state[START].copy())
    lanes.advance(state, fstate)  # the started lanes, firing to firing
    return state, pristine, p_sums


def _figures(lanes: Lanes, S: int, order, outputs, state, pristine, p_sums, rows, tables_out, lanes_out):
    """``grid_figures``' answer from the lanes' final state (a lane not started is its run's pristine
    lane), in (setting, run) order, runs as given; fills ``rows`` and ``lanes_out`` when given
    (``tables_out``: ``lanes_out`` when it receives the (lane, call) tables)."""
    b = lanes.b
    R, K = len(b.ncalls), b.K
    L = S * R
    lane_run = np.repeat(np.arange(R), S)
    tokens, peak, ok = (np.repeat(v, S) for v in p_sums)
    s_out = np.zeros(L, dtype=np.int64)
    compactions = np.zeros(L, dtype=np.int64)
    delta = np.zeros(L, dtype=np.int64)
    cleared = np.zeros(L, dtype=np.int64)
    cut = np.zeros(L, dtype=np.int64)
    s_tokens = np.zeros(L, dtype=np.int64)
    lane = state[LANE]
    for v, row in (
        (tokens, TOKENS), (s_out, S_OUT), (peak, PEAK), (compactions, COMP), (ok, OK), (delta, DELTA),
        (cleared, CT), (cut, STT), (s_tokens, S_TOK),
    ):  # fmt: skip
        v[lane] = state[row]
    if lanes_out is not None:
        lanes_out.update(order=order, delta=delta, cleared=cleared, cut=cut, summary_tokens=s_tokens)
        if lanes.summaries:
            lanes_out["summaries"] = lanes.summaries
    if tables_out is not None:
        tables_out["calls"] = lanes.tables  # the same columns as (lane, call) tables, 0 past a run's end
    if rows is not None:
        running = (R - np.searchsorted(np.sort(b.ncalls), np.arange(K), side="right")).tolist()
        full = {name: v.reshape(R, S, K) for name, v in lanes.tables.items()}
        rows.extend((Ar, {name: v[:Ar, :, k] for name, v in full.items()}) for k, Ar in enumerate(running))
    # a lane's cost: its run's pristine calls before it started, then its own calls
    if pristine is None:  # (every lane started at its first call)
        cost = np.zeros(L, dtype=np.int64)
        cost[lane] = lanes.own_costs()
    else:
        pristine_cost, rs, k0 = pristine
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
    return sorted(range(len(traces)), key=lambda r: -len(traces[r].arrays.view_end))  # its calls (not built)


def _statics(proto: SeedEngine, traces: Sequence) -> list[GridStatic]:
    return grid_statics(traces, proto)


LOCKSTEP_LANES = 2048  # started lanes from which they advance call position by call position
_MIN_BLOCK = 8  # call positions a block takes at least
_BLOCK = 1 << 16  # (lane, call) entries the started lanes' first blocks take (each lane's first width)
_BLOCK_ENTRIES = 1 << 18  # (lane, call) entries a block computes at most: bounds its memory
_REST_ENTRIES = 1 << 14  # (lane, call) entries left from which every block runs to its run's end
_PRICE_ENTRIES = 1 << 16  # calls ``Lanes.bill`` holds before it prices them (their arrays stay in cache)


def _full(v, n: int) -> np.ndarray:
    return np.full(n, v, dtype=np.int64) if np.ndim(v) == 0 else v


class Lanes:
    """The started lanes' replay, firing to firing: a firing position is one call's work for the lanes
    that fire there (``compact_lanes`` and the request), the calls between are blocks (``Trajectory``)."""

    def __init__(self, b, tabs, by_call, status_on, rules, price, summary_knobs, keep_summaries) -> None:
        self.b, self.K, self.tabs, self.by_call, self.elapsed = b, b.K, tabs, by_call, b.elapsed.reshape(-1)
        self.status_on, self.rules, self.price = status_on, rules, price
        self.windowed = bool((b.window < NO_LIMIT).any())  # (False: no request is ever refused)
        self.mode, self.ratio, self.smin, self.smax = summary_knobs
        self.summaries: list | None = [] if keep_summaries else None
        self.tables: dict[str, np.ndarray] | None = None  # (lane, call) row columns, when rows are asked
        self.settings: tuple = ()
        self.calls: list = []  # the started lanes' calls to price: (lanes, uncached, read, write, output)
        self._pending = 0  # entries in ``calls`` (``bill``)

    def _whole_runs(self, s, fs, pos, w) -> Trajectory:
        """The block of one setting's lanes over their whole runs, before any firing: the runs' replays
        without a limit, which no setting changes (the lanes' triggers only read it), so it is kept with
        the batch for the next setting or replay, as the call tables are (read-only: a round only reads
        its block)."""
        memo = self.b.__dict__.setdefault("_call_tables", {})
        key = ("whole_runs", self.status_base, self.rules)
        tr = memo.get(key)
        if tr is None:
            tr = memo[key] = Trajectory(self, s, fs, pos, w)
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
        """A summary call of each of these lanes (``compact_lanes``): billed to the lane."""
        n = len(lanes)
        self.calls.append((self._at[lanes], uncached, _full(read, n), _full(write, n), output))

    def bill(self, at, uncached, read, write, output) -> None:
        """Calls billed to the started lanes at ``at`` (the last place: no lane's), priced with the
        calls before them once they are many (a call position's few thousand lanes cost less to price
        together than one at a time: ``Price.cost_all`` is a dozen array operations)."""
        self.calls.append((at, uncached, read, write, output))
        self._pending += len(at)
        if self._pending >= _PRICE_ENTRIES:
            self._price_calls()

    def _price_calls(self) -> None:
        if self.calls:
            at, *cols = (np.concatenate(v) for v in zip(*self.calls, strict=True))
            np.add.at(self.own, at, self.cost(*cols))
        self.calls, self._pending = [], 0

    def own_costs(self) -> np.ndarray:
        """Each started lane's own calls' cost: priced in a few passes, each call rounded on its own."""
        self._price_calls()
        return self.own[:-1]

    def advance(self, state: np.ndarray, fstate: np.ndarray, first_fires: bool = True) -> None:
        """Replay the started lanes (``state``, ``fstate``: one column a lane, each at the call its trigger
        first fires, ``START``) to their runs' ends, in place. ``first_fires`` False: the lanes are at
        their runs' first calls (``_unstarted``), their first block each run's whole length."""
        n = state.shape[1]
        self.n = n
        self.own = np.zeros(n + 1, dtype=np.int64)  # each lane's own calls' cost (the last: no lane's)
        self._at = np.full(len(self.b.ncalls) * len(self.settings[0]) + 1, -1, dtype=np.int64)
        self._at[state[LANE]] = np.arange(n)
        if n >= LOCKSTEP_LANES:
            self._lockstep(state, fstate)
            return
        ncalls = self.b.ncalls
        A = np.arange(n)
        pos = state[START].copy()
        firing = np.full(n, first_fires, dtype=bool)
        # each lane's next block: twice its last gap (at first as wide as the lanes are few)
        if first_fires:
            width = np.full(n, min(self.K, max(_MIN_BLOCK, _BLOCK // max(n, 1))), dtype=np.int64)
        else:
            width = ncalls[state[RUN]].copy()
        chained = self.mode != "summarize"  # (the modes whose firings may only prune)
        pred = None  # the last round's blocks past each lane's place: where it may fire next (``_chain``)
        while len(A):
            F = np.flatnonzero(firing)
            if len(F):  # their compactions; each firing call is then its lane's next block's first
                self._fire(state, fstate, A[F], pos[F])
            s, fs = state[:, A], fstate[:, A]
            rest = ncalls[s[RUN]] - pos
            if rest.sum() <= _REST_ENTRIES:  # few calls left: blocks to the runs' ends (a round's
                w = rest  # array operations cost more than its entries, so no round without a firing)
            else:
                w = np.minimum(width[A], rest)
                np.minimum(w, max(_MIN_BLOCK, _BLOCK_ENTRIES // len(A)), out=w)
            chain = None if pred is None else Chain(self, s, pos, w, pred)
            if chain is not None and not len(chain.at):
                chain = None
            whole = pred is None and not first_fires and int(w.sum()) == self.b.calls
            if whole:  # (the first round: every run from its first call)
                tr = self._whole_runs(s, fs, pos, w)
            else:
                tr = Trajectory(self, s, fs, pos, w, None if chain is None else chain.plan)
            fire = tr.est > np.repeat(s[TRIG], w)
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
            going = pos < ncalls[s[RUN]]  # (a lane that fires has that call to make)
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
        order = np.argsort(state[START], kind="stable")
        st, fs = state[:, order], fstate[:, order]
        ident = order.copy()  # each column's lane, as ``state`` has them
        starts = st[START].copy()
        ends = self.b.ncalls[st[RUN]]
        dead = np.zeros(n, dtype=bool)  # (lanes of ended runs: all started, so in the prefix)
        n_dead = 0
        K = self.K
        for k in range(int(starts[0]), K + 1):
            gone = np.flatnonzero(ends == k)  # runs that end here: their lanes' figures are final
            if len(gone):
                state[:, ident[gone]] = st[:, gone]
                fstate[:, ident[gone]] = fs[:, gone]
                st[TRIG, gone] = NO_LIMIT
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
            X = self.by_call[k].take(Sv[RUN], axis=1)
            last = Sv[LAST]
            ve = Sv[VE] + X[T_APP]
            est = np.where(last > 0, last + (X[T_OPREV] + X[T_APP]), ve) if k else ve
            self._call(Sv, fv, ident[:m], k, est > Sv[TRIG], dead[:m] if n_dead else None, X)

    def _commit(self, state, fstate, A, s, fs, tr: Trajectory, w, j) -> None:
        """The first ``j`` calls of each lane's block are made: its state moves past them."""
        m = tr.rel < np.repeat(j, w)
        first = tr.first
        s[TOKENS] += np.add.reduceat(np.where(m, tr.req + tr.out, 0), first)
        np.maximum(s[PEAK], np.maximum.reduceat(np.where(m, tr.req, 0), first), out=s[PEAK])
        self._past_last(s, fs, tr, j)
        over = None if tr.over is None else np.add.reduceat(tr.over & m, first) > 0
        if over is not None and over.any():  # refused by the provider: the loop replays what follows
            s[OK, over] = 0
            s[TRIG, over] = NO_LIMIT
        self.calls.append((np.repeat(A, w)[m], tr.uncached[m], tr.read[m], tr.write[m], tr.out[m]))
        if self.tables is not None:
            cols = tr.row_columns(self.cost, list(self.tables))
            flat = (np.repeat(s[LANE] * self.K, w) + tr.kk)[m]
            for name, v in cols.items():
                self.tables[name].reshape(-1)[flat] = v[m]
        state[:, A] = s
        fstate[:, A] = fs

    def _past_last(self, s, fs, tr: Trajectory, j) -> None:
        """What a commit reads from each lane's last call made (the ``j``-th of its block, if any): the
        last request, the view and its estimate, and the cache the last cached call left."""
        has = j > 0
        first = tr.first
        last = first + np.maximum(j - 1, 0)
        for r_, v in ((LAST, tr.req), (PREV, tr.total), (VE, tr.ve)):
            s[r_] = np.where(has, v[last], s[r_])
        lc = tr.lc[last]
        moved = has & (lc >= first)
        lc0 = np.maximum(lc, 0)
        s[CACHED] = np.where(moved, tr.total[lc0], s[CACHED])
        fs[EXPIRES] = np.where(moved, tr.t[lc0] + self.rules.lifetime_s, fs[EXPIRES])

    def _commit_whole(self, state, fstate, s, fs, tr: Trajectory, j) -> None:
        """``_commit`` of the first round's block (one lane a run, every run from its first call, kept
        with the batch): each lane's sums over its first ``j`` calls are differences of the block's
        prefix sums, its calls' rows the block's tables (a later round writes those past ``j`` again:
        every call is made once)."""
        names = None if self.tables is None else tuple(self.tables)
        tok, over_p, cost, peak, tables = tr.whole_sums(self, names)
        R = len(j)
        runs = s[RUN]  # (0, 1, ...: the lanes are the runs, in order)
        s[TOKENS] += tok[runs, j]
        np.maximum(s[PEAK], np.where(j > 0, peak[runs, np.maximum(j - 1, 0)], 0), out=s[PEAK])
        self._past_last(s, fs, tr, j)
        if tr.over is not None:
            over = over_p[runs, j] > 0
            if over.any():  # refused by the provider: the loop replays what follows
                s[OK, over] = 0
                s[TRIG, over] = NO_LIMIT
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
        idx = Sf[RUN] * self.K + k
        app = self.tabs[T_APP].take(idx)
        Sf[VE] += app  # (what the call appends is in the view the compaction sees)
        stable_F, firstF, summary_in = compact_lanes(
            b, Sf, fF, k, self.settings, self.mode, self.ratio, self.smin, self.smax, self, self.summaries
        )
        Sf[VE] -= app  # (the block adds it)
        prev_items = np.where(k > 0, b.view_end.reshape(-1)[np.maximum(idx - 1, 0)], 0)
        np.copyto(Sf[PREV], stable_F, where=(firstF >= 0) & (firstF < prev_items))
        if summary_in is not None:
            Sf[LAST, summary_in[0]] = summary_in[1]
        state[:, F] = Sf
        fstate[:, F] = fF

    def _call(self, Sf, fF, ids, k, fires, dead, X=None) -> None:
        """The lanes ``Sf``, ``fF`` (their state, updated in place; ``ids``: their places in the bills)
        make their calls at call position ``k`` (the lockstep's: blocks take ``Trajectory``): those that
        ``fires`` (None: all) compact first. ``dead``: lanes past their runs' ends (None: none), neither
        billed nor tabled. ``X``: the lanes' per-run tables at ``k`` when the caller has them."""
        b, rules = self.b, self.rules
        r = Sf[RUN]
        X = self.by_call[k].take(r, axis=1) if X is None else X  # (one position: contiguous tables)
        t = b.elapsed_by_call[k].take(r)

        def prev_items(H):  # the items the lanes' last calls had in view
            return b.view_end_by_call[k - 1].take(r[H]) if k else 0

        Sf[VE] += X[T_APP]
        n = Sf.shape[1]
        if fires is None:
            stable_F, firstF, summary_in = compact_lanes(
                b, Sf, fF, k, self.settings, self.mode, self.ratio, self.smin, self.smax, self, self.summaries
            )
        else:
            G = np.flatnonzero(fires)
            stable_F = firstF = summary_in = None
            if len(G):
                Sg, fg = Sf[:, G], fF[:, G]
                sg, fgi, summary_in = compact_lanes(
                    b, Sg, fg, k, self.settings, self.mode, self.ratio, self.smin,
                    self.smax, self, self.summaries,
                )  # fmt: skip
                Sf[:, G] = Sg
                stable_F, firstF = sg, fgi
                if summary_in is not None:
                    summary_in = (G[summary_in[0]], summary_in[1])
        total = Sf[DELTA] + X[T_PREFIX]
        if self.status_on:  # the line's length from its numbers' digits: the rest of its text is fixed
            last = Sf[LAST]
            if summary_in is not None:
                last = last.copy()
                last[summary_in[0]] = summary_in[1]
            digits = digit_counts(Sf[TOKENS]) + digit_counts(last)
            digits += X[T_FIXED]
            stok = np.ceil(digits / fF[BPT]).astype(np.int64)  # estimate_tokens of the line
            req = total + X[T_RESID] + stok
        else:
            stok = np.zeros(n, dtype=np.int64)
            req = total + X[T_RESID]
        np.maximum(req, 0, out=req)
        over = req > X[T_WIN]
        if over.any():  # refused by the provider: the loop replays what follows
            Sf[OK, over] = 0
            Sf[TRIG, over] = NO_LIMIT
        stable = Sf[PREV].copy()
        if firstF is not None:  # (``stable_F``, ``firstF``: of the lanes ``G``, or of all when None)
            H = np.arange(n) if fires is None else G
            use = (firstF >= 0) & (firstF < prev_items(H))
            stable[H[use]] = stable_F[use]
        expires = fF[EXPIRES]
        hit = (t <= expires) & (stable >= rules.min_prefix_tokens)
        reusable = np.minimum(stable, Sf[CACHED])
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
        np.copyto(Sf[CACHED], total, where=cacheable)
        np.copyto(expires, t + rules.lifetime_s, where=cacheable)
        o = X[T_OUT]
        uncached = req - read - write
        billed = ids if dead is None else np.where(dead, self.n, ids)
        self.bill(billed, uncached, read, write, o.copy())  # (``o``: a row of ``X``, which is not kept)
        if self.tables is not None:
            cols = {
                "input_tokens": req, "view_tokens": total, "status_tokens": stok,
                "stable_prefix_tokens": stable, "cache_read_tokens": read, "cache_write_tokens": write,
                "uncached_input_tokens": uncached,
            }  # fmt: skip
            if "cost_microusd" in self.tables:
                cols["cost_microusd"] = self.cost(uncached, read, write, o)
            flat = Sf[LANE] * self.K + k
            live = slice(None) if dead is None else ~dead
            for name, v in self.tables.items():
                v.reshape(-1)[flat[live]] = np.broadcast_to(cols[name], n)[live]
        np.maximum(Sf[PEAK], req, out=Sf[PEAK])
        Sf[TOKENS] += req + o
        Sf[LAST] = req
        Sf[PREV] = total


# ``Trajectory.row_columns``' names, in its order
_ROW_NAMES = (
    "input_tokens", "view_tokens", "status_tokens", "stable_prefix_tokens", "cache_read_tokens",
    "cache_write_tokens", "uncached_input_tokens", "cost_microusd",
)  # fmt: skip


def _unstarted(b: LaneBatch, set_trig: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The state of one setting's lanes (one a run) before their runs' first calls: what ``_pristine``
    copies from the pristine lane at call 0."""
    R = len(b.ncalls)
    runs = np.arange(R, dtype=np.int64)
    state = np.zeros((ROWS, R), dtype=np.int64)
    state[RUN] = state[LANE] = runs
    state[TRIG] = set_trig[0]
    state[S_BYTES] = state[CARRIER] = -1
    state[OK] = 1
    state[CT_T] = state[STT_T] = b.to
    fstate = np.empty((2, R), dtype=np.float64)
    fstate[EXPIRES], fstate[BPT] = -1.0, b.bpt
    return state, fstate


def _pristine(lanes: Lanes, runs, S: int, set_trig, cost_out, sums_out, row_columns):
    """The pristine lanes of ``runs`` (consecutive) over all their calls: their calls' cost into
    ``cost_out`` (run, call), their tokens, peak and window check into ``sums_out``, their row columns
    into ``lanes.tables`` (when asked); returns the state of each (run, setting) lane at the call its
    trigger first fires (a copy of the pristine lane's state there), lanes that never fire left out."""
    b, K = lanes.b, lanes.K
    n = len(runs)
    pstate = np.zeros((ROWS, n), dtype=np.int64)
    pstate[RUN] = runs
    pstate[LANE] = -1
    pstate[TRIG] = NO_LIMIT
    pstate[S_BYTES] = pstate[CARRIER] = -1
    pstate[OK] = 1
    pstate[CT_T] = pstate[STT_T] = b.to[runs]
    pf = np.zeros((2, n), dtype=np.float64)
    pf[EXPIRES], pf[BPT] = -1.0, b.bpt[runs]
    tr = Trajectory(lanes, pstate, pf, np.zeros(n, dtype=np.int64), b.ncalls[runs])
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
        est = per_call(tr.est, LOWEST)
    else:
        over_before = tr.cumsum(tr.over) - tr.over > 0
        est = per_call(np.where(over_before, LOWEST, tr.est), LOWEST)
    np.maximum.accumulate(est, axis=1, out=est)
    start = np.empty((n, S), dtype=np.int64)
    for r in range(n):  # (S searches a run)
        start[r] = np.searchsorted(est[r], set_trig, side="right")
    has = start < b.ncalls[runs][:, None]
    rl, ss = np.nonzero(has)
    k0 = start[rl, ss]
    rs = runs[rl]
    m = len(rs)
    state = np.zeros((ROWS, m), dtype=np.int64)
    fstate = np.zeros((2, m), dtype=np.float64)
    state[RUN] = rs
    state[LANE] = rs * S + ss
    state[TRIG] = set_trig[ss]
    state[SET] = ss
    state[START] = k0
    state[S_BYTES] = state[CARRIER] = -1
    state[OK] = 1
    state[CT_T] = state[STT_T] = b.to[rs]
    at = first[rl] + k0  # the pristine lane's entry at the lane's first call
    state[VE] = tr.ve[at] - tr.app[at]
    state[TOKENS] = tr.tokens[at]
    state[LAST] = tr.last[at]
    state[PREV] = tr.stable[at]
    state[CACHED] = tr.cached_before[at]
    peak_before = np.zeros((n, K), dtype=np.int64)
    np.maximum.accumulate(per_call(tr.req)[:, :-1], axis=1, out=peak_before[:, 1:])
    state[PEAK] = peak_before[rl, k0]
    fstate[EXPIRES] = tr.expires_before[at]
    fstate[BPT] = b.bpt[rs]
    return state, fstate
