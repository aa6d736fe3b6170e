"""The lanes' calls between two firings, as blocks of array operations (``Trajectory``), and the prune-only
firings a round foresees from the last round's blocks (``Chain``).

Between two firings a lane's view only grows by what each call appends: its estimates, requests, cache
entries and cost are prefix sums and running maxima over its run's per-call tables, shifted by the
lane's net change so far. Only the status line's tokens feed back (they count the tokens so far):
``status_fixed_point`` solves them, a pass or two, the later passes only for the lanes whose line moved
(its length from digit counts, ``digit_counts``). ``sim.engine.fast.seed_lanes.Lanes`` makes the rounds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from sim.engine.fast.seed_lanes_compact import prune_lanes
from sim.engine.fast.seed_lanes_tables import (
    BPT,
    CACHED,
    COMP,
    CT,
    CT_T,
    DELTA,
    EXPIRES,
    LAST,
    LOWEST,
    PREV,
    RUN,
    SET,
    STT_T,
    TOKENS,
    TRIG,
    VE,
)
from sim.engine.fast.seed_static import NO_LIMIT, POW10

if TYPE_CHECKING:
    from sim.engine.fast.seed_lanes import Lanes


def digit_counts(v: np.ndarray) -> np.ndarray:
    """``np.searchsorted(POW10, v, "right")`` (the digits past the first of each count), by a
    comparison with each power of ten between the array's least and largest values where the array is
    long (a search per value costs more than the few passes)."""
    if len(v) < 4096:
        return np.searchsorted(POW10, v, "right")
    lo, hi = np.searchsorted(POW10, (v.min(), v.max()), "right").tolist()
    count = np.zeros(len(v), dtype=np.int8)  # (at most 18: small counts add fastest)
    for p in POW10[lo:hi].tolist():
        count += v >= p
    return count.astype(np.int64) + lo


def status_fixed_point(base, out, fixed, bpt, tok0, last0, width, stok, passes: int):
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
        digits = digit_counts(tokens) + digit_counts(last)
        digits += fixed
        new = np.ceil(digits / bpt).astype(np.int64)
        moved = new != stok
        if not moved.any():
            break
        stok = new
        again = (np.add.reduceat(moved, np.minimum(head, N - 1)) > 0) & (width > 0)
        sel = np.repeat(again, width)
        if p + 1 < passes and 2 * int(width[again].sum()) < N:
            got = status_fixed_point(
                base[sel], out[sel], fixed[sel], bpt[sel], tok0[head[again]], last0[again], width[again],
                new[sel], passes - p - 1,
            )  # fmt: skip
            req, tokens, last, stok = req.copy(), tokens.copy(), last.copy(), new.copy()
            for v, g in zip((req, tokens, last, stok), got, strict=True):
                v[sel] = g
            break
    return req, tokens, last, stok


class Trajectory:
    """Lanes' calls over blocks of call positions as if no trigger fired in them, laid end to end (lane
    ``i``'s block: ``width[i]`` calls from ``pos[i]``, entries ``off[i]:off[i + 1]``). Between two firings
    a lane's view only grows by what each call appends, so its estimates, requests, cache and cost are
    prefix sums and running maxima over the run's per-call tables; only the status line's tokens feed
    back (they count the tokens so far), solved by iterating to the fixed point."""

    def __init__(
        self, lanes: Lanes, s: np.ndarray, fs: np.ndarray, pos: np.ndarray, width: np.ndarray, plan=None
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
        if n == len(b.ncalls) and N == b.calls and np.array_equal(s[RUN], b.runs) and not pos.any():
            # one lane a run, each over its whole run: the tables as they lie, runs end to end
            tabs, self.t = b.laid_end_to_end(lanes.tabs, lanes.status_base)
            self.idx = None
        else:
            self.idx = idx = np.repeat(s[RUN] * K, width) + kk
            tabs, self.t = lanes.tabs[:6].take(idx, axis=1), lanes.elapsed.take(idx)
        app, oprev, prefix_at, resid, fixed, out = tabs[:6]
        self.app, self.out = app, out
        self.ve = ve = self.cumsum(app)
        ve += np.repeat(s[VE], width)
        self.dtot = dtot = np.repeat(s[DELTA], width)  # each entry's net change
        if plan is not None:  # prune-only firings inside the blocks (``Chain``): their changes
            at, d_delta, d_ve = plan[:3]
            step = np.zeros(N, dtype=np.int64)
            step[at] = d_delta
            dtot = self.dtot = dtot + self.cumsum(step)
            step[at] = d_ve
            ve += self.cumsum(step)
        total = prefix_at + dtot
        base = total + resid
        tok0 = np.repeat(s[TOKENS], width)
        last = np.empty(N, dtype=np.int64)
        head = off[:-1]
        if lanes.status_on:
            bpt = np.repeat(fs[BPT], width)
            d0 = np.searchsorted(POW10, s[TOKENS], "right") + np.searchsorted(POW10, s[LAST], "right")
            stok = np.ceil((np.repeat(d0, width) + fixed) / bpt).astype(np.int64)  # first guess
            passes = int(width.max(initial=0)) + 1  # each pass settles one more call at least
            req, tokens, last, stok = status_fixed_point(
                base, out, fixed, bpt, s[TOKENS], s[LAST], width, stok, passes
            )
        else:
            stok = np.zeros(N, dtype=np.int64)
            req = np.maximum(base, 0)
            tokens = self.cumsum(req + out)
            tokens += tok0
            tokens -= req + out
            last[1:] = req[:-1]
            last[head] = s[LAST]
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
        stable[head] = s[PREV]
        if plan is not None:  # (a firing's stable prefix: what its change leaves, ``compact_lanes``)
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
        cached = np.where(some, total[lcb0], np.repeat(s[CACHED], width))
        expires = np.where(some, self.t[lcb0] + rules.lifetime_s, np.repeat(fs[EXPIRES], width))
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
        ``Chain`` shifts by a lane's net change; a lane's first call's (the view's estimate): none."""
        est = self.__dict__.get("_net_free")
        if est is None:
            est = self.est.copy()
            est[1:] -= self.dtot[:-1]
            est[self.last <= 0] = LOWEST
            if not self.est.flags.writeable:  # (a kept block: kept with it)
                self._net_free = est
        return est

    def whole_sums(self, lanes: Lanes, names) -> tuple:
        """A block of every run from its first call (``Lanes._whole_runs``), as (run, call) tables:
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


class Chain:
    """A round's foreseen prune-only firings: where each lane's estimate, as the last round's block
    computed it (``pred``: estimates but for the net change, the block's offsets, start calls and
    widths), passes its trigger once shifted by the lane's net change so far, and the prune there
    (``prune_lanes``) leaves the view within the limit, so that the firing only prunes. For a fixed keep the
    natural bound only moves forward, so each firing of a streak prunes from the last one's bound: the
    streak is found firing by firing over the lanes together (a few operations each), and the round's
    blocks (``Trajectory``'s ``plan``) carry the changes. ``advance`` keeps the blocks up to the first
    call where the lanes' firings differ from the foreseen ones, so a wrong guess costs a round, never a
    figure."""

    def __init__(self, lanes: Lanes, s: np.ndarray, pos: np.ndarray, w: np.ndarray, pred) -> None:
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
            r = s[RUN, C]
            trig, D = s[TRIG, C], s[DELTA, C].copy()
            c0, a, stt, comp = s[CT, C].copy(), s[CT_T, C].copy(), s[STT_T, C], s[COMP, C].copy()
            limit, keep = (v[s[SET, C]] for v in lanes.settings)
            appc = lanes.app_prefix
            ve0 = s[VE, C] - appc[r * (K + 1) + p0]  # the view's estimate before the block
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
                natural, moved, bb, has, d, first = prune_lanes(b, rL, k, keep[L], c0[L], a[L], stt[L])
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
        for row, v in zip((DELTA, CT, CT_T, COMP), self.after, strict=True):
            s[row, lanes] = v[at]
