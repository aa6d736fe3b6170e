"""The grid path over many traces at once: every (setting, run) pair of a ``seed_engine`` grid is a lane,
and all lanes advance together, call position by call position, as array operations.

``sim.gridpath`` replays the settings of one trace together and builds their records; this module is
the same arithmetic with the runs laid side by side too, for the figures a sizing reads (cost, input
and output totals, the largest request, compactions). Per-run tables are laid end to end with offsets
(``sim.gridpath._Static`` of each trace: message estimates, tool-message prefix sums, transcript
blocks), so a lane's prune bound, summary cut and the sums they move are ``searchsorted`` and prefix
sums over the whole batch. The natural prune bound of every (run, keep, call) is a precomputed table: the
bound only moves forward for a fixed keep. The cache and cost of each request are computed as it is made
(``sim.cache.CostModel.step`` over the lanes), so no call table is kept. Lanes are ordered by their
run's length, longest first, so the lanes still running at a call position are a prefix of the arrays.

Rare events take the long way: a summary whose transcript must be elided (over the 80,000-character
budget) is measured by ``prompt_units`` lane by lane; a lane whose request would exceed the window
leaves the grid (``ok`` is False) and the caller replays it with the per-call loop. ``sim.conformance``
and the tests hold these figures to the per-call loop's metrics.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sim.cache import CacheRules
from sim.gridpath import NO_LIMIT, _Static, status_base_len
from sim.model import ReplayModel
from sim.policies.seed_engine import SeedEngine
from sim.pricing import Price
from sim.seed_messages import (
    ELISION_RESERVE,
    INPUT_BUDGET,
    INSTRUCTION_CHARS,
    NO_SUMMARY,
    OUTPUT_CONTRACT_TOKENS,
    summary_message,
)
from sim.tokens import MESSAGE_OVERHEAD_BYTES, SEED_BYTES_PER_TOKEN

_POW10 = np.array([10**p for p in range(1, 19)], dtype=np.int64)
_SUMMARY_FIXED = summary_message(0)  # the summary message's bytes but for its text
_TRANSCRIPT_FRAME = INSTRUCTION_CHARS + len("\n\n<transcript>\n") + len("\n</transcript>")


def _ceil_tokens(nbytes: np.ndarray, bpt: np.ndarray) -> np.ndarray:
    """``sim.tokens.estimate_tokens`` over arrays (the same float division and ceiling)."""
    return np.ceil((nbytes + MESSAGE_OVERHEAD_BYTES) / bpt).astype(np.int64)


_MARKER = len("[…  messages omitted from summary input …]")  # the elision marker but for its number


def _elided_chars(w, lo, hi, budget, prev, bc) -> np.ndarray:
    """``prompt_units`` of covered spans whose blocks pass the budget (``lo``, ``hi``: the span's
    messages in the batch's per-message arrays; ``w``: prefix sums of block length + joiner, ``bc``: of
    blocks): the head takes whole blocks up to half the budget, the tail whole blocks from the end up to
    the rest, and a marker counts the blocks left out between them."""
    half = budget // 2
    head_end = np.clip(np.searchsorted(w, w[lo] + half, side="right") - 1, lo, hi)
    head = w[head_end] - w[lo]
    tail_start = np.clip(np.searchsorted(w, w[hi] - (budget - head), side="left"), head_end, hi)
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

        def padded(get, dtype=np.int64) -> np.ndarray:
            out = np.zeros((R, K), dtype=dtype)
            for r, s in enumerate(statics):
                v = get(s)
                out[r, : len(v)] = v
            return out

        self.prefix_at = padded(lambda s: s.prefix[s.view_end])
        self.residual = padded(lambda s: s.residual)
        self.appended = padded(lambda s: s.appended)
        self.elapsed = padded(lambda s: s.elapsed, np.float64)
        self.view_end = padded(lambda s: np.array(s.view_end, dtype=np.int64))
        self.msgs_at = padded(lambda s: np.array(s.msgs_at, dtype=np.int64))
        self.bpt = np.array([SEED_BYTES_PER_TOKEN if b is None else b for b in bpts], dtype=np.float64)
        self.window = np.array([NO_LIMIT if w is None else w for w in windows], dtype=np.int64)
        self.ph = np.array([s.ph_tokens for s in statics], dtype=np.int64)
        self.prefix_tokens = np.array([s.prefix_tokens for s in statics], dtype=np.int64)
        self.bound_calls = np.array([s.bound_calls for s in statics], dtype=np.int64)
        # per-message prefix arrays (M + 1 entries a run, each run's continuing the last's values)
        msgs = np.array([len(s.ep) for s in statics], dtype=np.int64)
        self.po = np.zeros(R, dtype=np.int64)
        self.po[1:] = np.cumsum(msgs)[:-1]

        def chained(lists) -> np.ndarray:
            parts, base = [], 0
            for v in lists:
                a = np.asarray(v, dtype=np.int64)
                parts.append(a + base)
                base += int(a[-1]) - int(a[0])
            return np.concatenate(parts)

        self.ep = chained([s.ep for s in statics])
        self.sv = chained([s.sv for s in statics])
        self.dv = self.ep - self.sv
        self.bl = chained([s.bl for s in statics])
        self.bc = chained([s.bc for s in statics])
        self.w = self.bl + 2 * self.bc  # block lengths with their joiners (the transcript's budget)
        self.mo_items = chained([s.m_off_l for s in statics])  # items of messages (counts)
        self.m_tok = chained([s.m_tok for s in statics])
        pad = [0]  # per-message arrays get one filler entry a run, so they share the offsets
        self.back = np.concatenate([np.array(s.back + pad, dtype=np.int64) for s in statics])
        self.first_item = np.concatenate([np.array(list(s.first) + pad, dtype=np.int64) for s in statics])
        self.tok_first = np.concatenate(
            [np.append(s.tok0[np.array(s.first, dtype=np.int64)], 0) for s in statics]
        )
        self.pe = np.array([s.protected_end for s in statics], dtype=np.int64)
        # per-tool-message arrays: T + 1 entries a run; tm positions as global message positions
        tms = np.array([len(s.tm) + 1 for s in statics], dtype=np.int64)
        self.to = np.zeros(R, dtype=np.int64)
        self.to[1:] = np.cumsum(tms)[:-1]
        self.tmg = np.concatenate(  # the past-the-end filler keeps the array ascending
            [np.array(s.tm + [len(s.ep) - 1]) + po for s, po in zip(statics, self.po.tolist(), strict=True)]
        )
        self.t_count = chained([s.tm_off_l for s in statics])
        self.t_tok = chained([s.tm_tok for s in statics])
        self.t_saving = chained([s.tm_saving_l for s in statics])
        self.t_first = np.concatenate(
            [np.array([s.first[m] for m in s.tm] + pad, dtype=np.int64) for s in statics]
        )
        self.io = np.zeros(R, dtype=np.int64)  # items' settled prefix sums, per run
        self.io[1:] = np.cumsum([len(s.prefix) for s in statics])[:-1]
        self.prefix = np.concatenate([s.prefix for s in statics])
        # the natural prune bound of (run, keep, call) over the first T tool messages at call k: the
        # older ones are kept, newest first, while their estimates' sum stays within keep less the
        # newest's; in prefix sums C of the estimates, the first one not kept is the last i < T - 1
        # with C[i] < C[T-1] - budget (``sim.gridpath._Static.natural_bounds``, one message at a time)
        self.keeps = np.asarray(keeps, dtype=np.int64)
        self.statics = statics
        if not len(self.keeps):  # no lane has a limit: nothing is ever pruned
            self.natural = np.zeros((R, 0, K), dtype=np.int64)
            return
        c = chained([[0, *np.cumsum(s.tm_est).tolist()] for s in statics])
        T = padded(lambda s: np.array(s.tools_at, dtype=np.int64))
        newest = np.array([int(x) for s in statics for x in s.tm_est.tolist() + [0]], dtype=np.int64)
        t0 = self.to[:, None]
        top = np.maximum(t0 + T - 1, t0)
        budget = self.keeps[:, None, None] - newest[top][None]  # (keep, run, call)
        x = c[top][None] - budget
        p = np.clip(np.searchsorted(c, x, side="left"), t0[None], top[None]) - t0[None]
        bound = self.tmg[np.maximum(t0[None] + p - 1, 0)] - self.po[:, None][None] + 1
        nb = np.where((T[None] > 1) & (p > 0), bound, 0)
        self.natural = np.ascontiguousarray(nb.transpose(1, 0, 2))  # (run, keep, call)
        self.statics = statics


def grid_figures(
    traces: Sequence,
    policies: Sequence[SeedEngine],
    models: Sequence[ReplayModel],
    windows: Sequence[int | None],
    rules: CacheRules,
    price: Price | None,
    rows: list | None = None,
    lanes_out: dict | None = None,
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(ok, figures) of every (setting, run): ``ok[s, r]`` False where the lane left the grid (replay
    it with the loop); figures ``cost_microusd``, ``input_tokens``, ``output_tokens``, ``peak``,
    ``compactions``, each an (S, R) array. Every trace must pass ``sim.gridpath.trace_declines`` and the
    settings ``settings_decline``; all runs priced alike (``rules``, ``price``). ``rows``: a list to
    receive each call position's agent rows, (runs still going, {column: (run, setting) table}), runs
    longest first (``replay_unlimited``: settings without a limit, which never summarize). ``lanes_out``:
    a dict to receive the lanes' summary calls and final state, in lane order (``sim.gridrows``)."""
    proto = policies[0]
    S, R = len(policies), len(traces)
    # runs longest first, each run's settings side by side: the lanes still running are a prefix
    order = sorted(range(R), key=lambda r: -len(traces[r].calls))
    traces = [traces[r] for r in order]
    statics = [
        t.derived(f"grid_static_{proto.tool_result_max_bytes}", lambda t: _Static(t, proto)) for t in traces
    ]
    keep_values = sorted({p.keep_recent_tokens for p in policies if p.context_token_limit is not None})
    b = _Batch(statics, [t.bytes_per_token for t in traces], [windows[r] for r in order], keep_values)
    outputs = np.zeros((R, b.K), dtype=np.int64)
    for i, r in enumerate(order):
        o = np.asarray(models[r].respond_all(), dtype=np.int64)
        outputs[i, : len(o)] = o
    status_on = proto.reports_status
    fixed = np.zeros((R, b.K), dtype=np.int64)
    if status_on:
        base = status_base_len(proto)
        for r, st_r in enumerate(statics):
            fixed[r, : st_r.K] = np.array(st_r.status_fixed(base)) + MESSAGE_OVERHEAD_BYTES
    L = S * R
    lane_run = np.repeat(np.arange(R), S)
    lane_set = np.tile(np.arange(S), R)
    limit = np.array([NO_LIMIT if p.context_token_limit is None else p.context_token_limit for p in policies])
    keep_at = np.searchsorted(np.array(keep_values, dtype=np.int64), [p.keep_recent_tokens for p in policies])
    keep_at = np.minimum(keep_at, max(len(keep_values) - 1, 0))  # (a lane without a limit never looks)
    lane_limit = limit[lane_set]
    lane_keep = np.array([p.keep_recent_tokens for p in policies], dtype=np.int64)[lane_set]
    lane_keep_at = keep_at[lane_set]
    trigger = np.where(lane_limit < NO_LIMIT, lane_limit - OUTPUT_CONTRACT_TOKENS, NO_LIMIT)
    running = [int((b.ncalls > k).sum()) for k in range(b.K)]  # runs still going at call k
    mode, ratio = proto.mode, proto.summary_ratio
    smin, smax = proto.summary_min_tokens, proto.summary_max_tokens
    po, io = b.po[lane_run], b.io[lane_run]
    bpt, ph = b.bpt[lane_run], b.ph[lane_run]
    bpt_col, window_col = b.bpt[:, None], b.window[:, None]
    z = np.zeros(L, dtype=np.int64)
    ct, stt, view_est, delta = z.copy(), z.copy(), z.copy(), z.copy()
    s_bytes, s_est, s_tokens, carrier = np.full(L, -1), z.copy(), z.copy(), np.full(L, -1)
    tokens, s_out, cost, peak, compactions, cached = (
        z.copy(),
        z.copy(),
        z.copy(),
        z.copy(),
        z.copy(),
        z.copy(),
    )
    expires = np.full(L, -1.0)
    ok = np.ones(L, dtype=bool)
    # the same state as (run, setting) tables: the per-call work broadcasts each run's numbers
    ve2, d2, tok2, cost2, peak2 = (x.reshape(R, S) for x in (view_est, delta, tokens, cost, peak))
    cached2, exp2, ok2, trig2 = (x.reshape(R, S) for x in (cached, expires, ok, trigger))
    last2 = np.zeros((R, S), dtype=np.int64)  # the last agent request (the previous call's, by reference)
    prev2 = np.zeros((R, S), dtype=np.int64)  # the last request's view tokens
    minp, life, frac, gran, writes = (
        rules.min_prefix_tokens, rules.lifetime_s, rules.reuse_fraction, rules.granularity, rules.writes
    )  # fmt: skip

    def price_of(uncached, read, write, out) -> np.ndarray:
        if price is None:
            return np.full(np.shape(uncached), -1, dtype=np.int64)
        return price.cost_all(uncached, read, write, out)

    for k in range(b.K):
        Ar = running[k]
        app = b.appended[:Ar, k, None]
        ve = ve2[:Ar]
        ve += app
        if k == 0:
            est_now = ve
        else:
            li = last2[:Ar]
            est_now = np.where(li > 0, li + (outputs[:Ar, k - 1, None] + app), ve)
        F = np.flatnonzero(est_now > trig2[:Ar])
        summary_in = None
        prev_items = b.view_end[:, k - 1] if k else np.zeros(R, dtype=np.int64)
        if len(F):
            r = F // S
            pF = po[F]
            c0, st0 = ct[F], stt[F]
            veF = view_est[F]
            d_old = delta[F]
            dtok = np.zeros(len(F), dtype=np.int64)
            firstF = np.full(len(F), -1, dtype=np.int64)
            moved = np.zeros(len(F), dtype=bool)
            summarized = np.zeros(len(F), dtype=bool)
            if mode != "summarize":
                bound = np.maximum(c0, b.natural[r, lane_keep_at[F], k])
                moved = bound > c0
                a = np.searchsorted(b.tmg, pF + c0)
                bb = np.searchsorted(b.tmg, pF + bound)
                av = np.maximum(a, np.searchsorted(b.tmg, pF + st0))
                has = moved & (bb > av)
                veF = veF - np.where(has, b.t_saving[bb] - b.t_saving[av], 0)
                cnt = b.t_count[bb] - b.t_count[av]
                dtok += np.where(has, ph[F] * cnt - (b.t_tok[bb] - b.t_tok[av]), 0)
                firstF = np.where(has, b.t_first[np.minimum(av, len(b.t_first) - 1)], -1)
                compactions[F] += has
                ct[F] = np.where(moved, bound, c0)
            if mode == "prune":
                summ = np.zeros(len(F), dtype=bool)
            elif mode == "summarize":
                summ = np.ones(len(F), dtype=bool)
            else:
                summ = ~(moved & (veF <= lane_limit[F]))
            G = np.flatnonzero(summ)
            if len(G):
                g = F[G]
                rg, pg = r[G], pF[G]
                c = ct[g]
                M = b.msgs_at[rg, k]
                cM = np.minimum(c, M)
                gM, gcM = pg + M, pg + cM
                keep = lane_keep[g]
                top = b.ep[gM] - b.sv[gcM]
                whole = (cM < M) & (b.ep[gM] - b.ep[gcM] >= keep)
                lo_whole = np.clip(np.searchsorted(b.ep, b.ep[gM] - keep, side="right"), gcM, gM)
                lo_part = np.clip(np.searchsorted(b.dv, top - keep, side="right"), pg, gcM)
                lo = np.where(whole, lo_whole, lo_part) - pg
                cut = np.where(lo > 1, b.back[pg + np.maximum(lo - 1, 0)], 0)
                cut = np.maximum(cut, stt[g])
                m0 = np.maximum(stt[g], b.pe[rg])
                H = np.flatnonzero(cut > m0)
                if len(H):
                    h = g[H]
                    rh, qh, cut, m0, c, cM, gM = rg[H], pg[H], cut[H], m0[H], c[H], cM[H], gM[H]
                    top = top[H]

                    def kept_from(m, qh=qh, cM=cM, gM=gM, top=top):
                        return np.where(m >= cM, b.ep[gM] - b.ep[qh + m], top - b.dv[qh + m])

                    j0 = np.searchsorted(b.tmg, qh + m0)
                    j1 = np.searchsorted(b.tmg, qh + np.minimum(cut, c))
                    cleared = j1 > j0
                    covered = b.m_tok[qh + cut] - b.m_tok[qh + m0]
                    covered += np.where(
                        cleared, ph[h] * (b.t_count[j1] - b.t_count[j0]) - (b.t_tok[j1] - b.t_tok[j0]), 0
                    )
                    covered_tokens = s_tokens[h] + covered
                    prev = s_bytes[h]
                    has_prev = prev >= 0
                    count = b.bc[qh + cut] - b.bc[qh + m0]
                    total = b.bl[qh + cut] - b.bl[qh + m0]
                    fixed_len = np.where(has_prev, 19 + prev + 2, 0) + INSTRUCTION_CHARS
                    lines = count + has_prev
                    chars = (
                        _TRANSCRIPT_FRAME
                        + total
                        + np.where(has_prev, 19 + prev, 0)
                        + 2 * np.maximum(lines - 1, 0)
                    )
                    budget = INPUT_BUDGET - fixed_len - ELISION_RESERVE
                    elide = np.flatnonzero(total + 2 * count > budget)
                    if len(elide):  # over the transcript budget: whole blocks from both ends
                        chars[elide] = _elided_chars(
                            b.w,
                            qh[elide] + m0[elide],
                            qh[elide] + cut[elide],
                            budget[elide],
                            prev[elide],
                            b.bc,
                        )
                    s_in = _ceil_tokens(chars, bpt[h])
                    out = np.clip(np.rint(ratio * covered_tokens), smin, smax).astype(np.int64)
                    text = np.rint(out * bpt[h]).astype(np.int64)
                    text = np.where(text == 0, len(NO_SUMMARY), text)
                    new_est = -(-(_SUMMARY_FIXED + text) // 4)
                    vh = veF[G][H] - (kept_from(m0) - kept_from(cut) + s_est[h]) + new_est
                    veF[G[H]] = vh
                    s_bytes[h], s_est[h] = text, new_est
                    stt[h] = cut
                    msg_tokens = out + b.prefix_tokens[rh]
                    fresh = carrier[h] < 0
                    car_new = b.first_item[qh + m0]
                    cleared_head = cleared & (b.tmg[np.minimum(j0, len(b.tmg) - 1)] == qh + m0)
                    old_new = np.where(cleared_head, ph[h], b.tok_first[qh + m0])
                    old_car = np.where(fresh, old_new, s_tokens[h])
                    others = np.where(fresh, covered - old_new, covered)
                    carrier[h] = np.where(fresh, car_new, carrier[h])
                    s_tokens[h] = msg_tokens
                    dtok[G[H]] += msg_tokens - old_car - others
                    firstF[G[H]] = carrier[h]
                    tokens[h] += s_in + out
                    s_out[h] += out
                    np.maximum.at(peak, h, s_in)
                    zeros = np.zeros(len(h), dtype=np.int64)
                    cost[h] += price_of(s_in, zeros, zeros, out)
                    compactions[h] += 1
                    summary_in = (h, s_in)
                    if lanes_out is not None:  # (call, lanes, summary input, summary output)
                        lanes_out.setdefault("summaries", []).append((k, h, s_in, out))
                    summarized[G[H]] = True
            view_est[F] = veF
            delta[F] = d_old + dtok
            stable_F = b.prefix[io[F] + np.maximum(firstF, 0)] + np.where(summarized, 0, d_old)
        total = d2[:Ar] + b.prefix_at[:Ar, k, None]
        if status_on:  # the line's length from its numbers' digits: the rest of its text is fixed
            last = last2[:Ar]
            if summary_in is not None:
                last = last.copy()
                last.ravel()[summary_in[0]] = summary_in[1]
            digits = np.searchsorted(_POW10, tok2[:Ar], "right") + np.searchsorted(_POW10, last, "right")
            digits += fixed[:Ar, k, None]
            stok = np.ceil(digits / bpt_col[:Ar]).astype(np.int64)  # estimate_tokens of the line
            req = total + b.residual[:Ar, k, None] + stok
        else:
            stok = 0
            req = total + b.residual[:Ar, k, None]
        np.maximum(req, 0, out=req)
        over = req > window_col[:Ar]
        if over.any():  # refused by the provider: the loop replays what follows
            ok2[:Ar] &= ~over
            trig2[:Ar][over] = NO_LIMIT
        stable = prev2[:Ar].copy()
        if len(F):
            use = (firstF >= 0) & (firstF < prev_items[F // S])
            stable.ravel()[F[use]] = stable_F[use]
        # the cache: the entry the last cacheable request left, if alive and the prefix long enough
        t = b.elapsed[:Ar, k, None]
        read = 0
        hit = (t <= exp2[:Ar]) & (stable >= minp)
        if hit.any():
            reusable = np.minimum(stable, cached2[:Ar])
            if frac != 1.0:
                reusable = np.floor(reusable * frac).astype(np.int64)
            if gran != 1:
                reusable = reusable // gran * gran
            read = np.where(hit, np.minimum(reusable, req), 0)
        cacheable = total >= minp
        write = np.where(cacheable, np.maximum(np.minimum(total, req) - read, 0), 0) if writes else 0
        np.copyto(cached2[:Ar], total, where=cacheable)
        np.copyto(exp2[:Ar], t + life, where=cacheable)
        o = outputs[:Ar, k, None]
        uncached = req - read - write
        c_row = price_of(
            uncached,
            np.broadcast_to(read, req.shape),
            np.broadcast_to(write, req.shape),
            np.broadcast_to(o, req.shape),
        )
        cost2[:Ar] += c_row
        if rows is not None:
            rows.append((Ar, {
                "input_tokens": req, "view_tokens": total, "status_tokens": np.broadcast_to(stok, req.shape),
                "stable_prefix_tokens": stable, "cache_read_tokens": np.broadcast_to(read, req.shape),
                "cache_write_tokens": np.broadcast_to(write, req.shape), "uncached_input_tokens": uncached,
                "cost_microusd": c_row,
            }))  # fmt: skip
        np.maximum(peak2[:Ar], req, out=peak2[:Ar])
        tk = tok2[:Ar]
        tk += req
        tk += o
        last2 = req
        prev2 = total
    if lanes_out is not None:  # lane j: sorted run j // S, setting j % S
        lanes_out.update(order=order, delta=delta, cleared=ct, cut=stt, summary_tokens=s_tokens)
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
    return ok.reshape(R, S)[back].T, out_figs


def unlimited_declines(policy) -> str | None:
    """Why ``replay_unlimited`` cannot replay this policy (None: it can)."""
    from sim.gridpath import settings_decline

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
    from sim.engine import _record
    from sim.records import AGENT, CALL_COLUMNS, change_table

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
            _record(
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
