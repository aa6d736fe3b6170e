"""A firing's compaction for many lanes at once (``compact_lanes``): the prune to each lane's natural bound
(``prune_lanes``) and, where the mode says so and the cut moves, the summary, its transcript's length
(``elided_chars`` when the blocks pass the budget) and its call. The prune bound and the summary cut are
the seed engine's rules over lanes, ``sim.policies.seed_rules.lane_prune_bounds`` and
``lane_summarize_cuts`` (``tests/test_seed_rules.py`` holds them to the rules the policy calls); the rest
is prefix sums over the batch's tables (``sim.engine.fast.seed_lanes_tables.LaneBatch``).
"""

from __future__ import annotations

import numpy as np

from sim.cost.tokens import MESSAGE_OVERHEAD_BYTES
from sim.engine.fast.seed_lanes_tables import (
    BPT,
    CARRIER,
    COMP,
    CT,
    CT_T,
    DELTA,
    LANE,
    PEAK,
    RUN,
    S_BYTES,
    S_EST,
    S_OUT,
    S_TOK,
    SET,
    STT,
    STT_T,
    TOKENS,
    VE,
    LaneBatch,
)
from sim.engine.fast.seed_static import POW10
from sim.policies.seed_messages import (
    ELISION_RESERVE,
    INPUT_BUDGET,
    INSTRUCTION_CHARS,
    NO_SUMMARY,
    summary_message,
)
from sim.policies.seed_rules import lane_prune_bounds, lane_summarize_cuts

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


def elided_chars(w, lo, hi, budget, prev, bc) -> np.ndarray:
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
    marker = np.where(omitted > 0, _MARKER + np.searchsorted(POW10, omitted, side="right") + 1, 0)
    lines = has_prev + n_head + (omitted > 0) + n_tail
    text = np.where(has_prev, 19 + prev, 0) + (head - 2 * n_head) + marker + (tail - 2 * n_tail)
    return _TRANSCRIPT_FRAME + text + 2 * np.maximum(lines - 1, 0)


def prune_lanes(b: LaneBatch, r, k, keep, c0, a, stt_t):
    """The prune of lanes of runs ``r`` firing at calls ``k`` with keep ``keep``, bound ``c0`` (``a``: the
    first tool message at or past it) and summary cut's first tool message ``stt_t``: (natural bound,
    moved, the new ``a``, whether messages are cleared, their (saving, count, tokens), the first item
    changed or -1). The natural bound is ``LaneBatch.natural``'s (the seed engine's rule over lanes,
    ``sim.policies.seed_rules.lane_prune_bounds``): q, the first tool message it leaves in view."""
    top = b.top_by_call[k][r] if np.ndim(k) == 0 else b.top_by_call.reshape(-1)[k * b.R + r]
    t0 = b.to[r]
    q, natural = lane_prune_bounds(b.c, b.c_through[top], b.tmg, b.po[r], t0, top, keep)
    moved = natural > c0
    bb = np.where(moved, q, a)  # (the bound past tool message q - 1: q in ``tmg``)
    av = np.maximum(a, stt_t)
    has = moved & (bb > av)
    d = b.t_sums.take(bb, axis=1) - b.t_sums.take(av, axis=1)  # saving, count, tokens of those cleared
    firstF = np.where(has, b.t_first[np.minimum(av, len(b.t_first) - 1)], -1)
    return natural, moved, bb, has, d, firstF


def compact_lanes(
    b: LaneBatch, Sf: np.ndarray, fF: np.ndarray, k: int, settings, mode, ratio, smin, smax, bills, summaries
):
    """The lanes whose trigger fires at call ``k`` (``Sf``: their state, updated in place; ``fF``:
    their float state; ``settings``: the settings' limits and keeps): prune to the natural bound, then
    summarize where the mode says so and the cut moves. Returns the stable prefix each lane's change
    leaves, the first item changed (-1: none) and the summarized lanes with their summary call's input
    (None: no summary)."""
    nF = Sf.shape[1]
    r = Sf[RUN]
    pF, ph = b.po[r], b.ph[r]
    lane_limit, lane_keep = (v[Sf[SET]] for v in settings)
    veF = Sf[VE]
    d_old = Sf[DELTA].copy()
    dtok = np.zeros(nF, dtype=np.int64)
    firstF = np.full(nF, -1, dtype=np.int64)
    moved = np.zeros(nF, dtype=bool)
    summarized = np.zeros(nF, dtype=bool)
    summary_in = None
    if mode != "summarize":
        c0 = Sf[CT]
        natural, moved, bb, has, d, firstF = prune_lanes(b, r, k, lane_keep, c0, Sf[CT_T], Sf[STT_T])
        veF -= d[0] * has
        dtok += (ph * d[1] - d[2]) * has
        Sf[COMP] += has
        np.maximum(c0, natural, out=c0)
        Sf[CT_T] = bb
    if mode == "prune":
        G = np.zeros(0, dtype=np.int64)
    elif mode == "summarize":
        G = np.arange(nF)
    else:
        G = np.flatnonzero(~(moved & (veF <= lane_limit)))
    if len(G):
        Sg = Sf.take(G, axis=1)
        rg, c, stG = Sg[RUN], Sg[CT], Sg[STT]
        pg, keep = pF[G], lane_keep[G]
        M = b.msgs_by_call[k][rg] if np.ndim(k) == 0 else b.msgs_by_call.reshape(-1)[k[G] * b.R + rg]
        # the seed engine's cut over lanes (``sim.policies.seed_rules.lane_summarize_cuts``)
        cut, cM, ep_M, top = lane_summarize_cuts(b.ep, b.sv, b.dv, b.back, pg, M, c, keep, stG)
        m0 = np.maximum(stG, b.pe[rg])
        H = np.flatnonzero(cut > m0)
        if len(H):
            h = G[H]  # the summarizing lanes, as positions in Sf
            Sh = Sg.take(H, axis=1)
            spans = (rg[H], pg[H], cut[H], m0[H], c[H], cM[H], ep_M[H], top[H])
            s_in, out = _summarize_lanes(
                b, Sh, fF[BPT, h], spans, ph[h], (ratio, smin, smax), dtok, firstF, h
            )
            bills.add(Sh[LANE].copy(), s_in, 0, 0, out)
            Sf[:, h] = Sh
            summary_in = (h, s_in)
            if summaries is not None:  # (call, lanes, summary input, summary output)
                summaries.append((np.broadcast_to(k, nF)[h], Sh[LANE].copy(), s_in, out))
            summarized[h] = True
    stable_F = b.prefix[b.io[r] + np.maximum(firstF, 0)] + d_old * ~summarized
    Sf[DELTA] = d_old + dtok
    return stable_F, firstF, summary_in


def _kept_from(m, at, cM, ep_M, top) -> np.ndarray:
    """Rendered estimate of messages [m, M) (``at``: the message sums at m): whole past the prune bound
    ``cM``, cleared before it."""
    return np.where(m >= cM, ep_M - at[3], top - at[4])


def _summarize_lanes(b: LaneBatch, Sh, bpt, spans, ph_h, knobs, dtok, firstF, h):
    """The summaries of lanes ``Sh`` (their state, updated in place; ``h`` their places in ``dtok`` and
    ``firstF``, which take their net change and first item changed) covering messages [m0, cut) of
    ``spans``: (the summary calls' input, their output)."""
    rh, qh, cut, m0, c, cM, ep_M, top = spans
    ratio, smin, smax = knobs
    at_m0, at_cut = (
        b.m_sums.take(qh + m0, axis=1),
        b.m_sums.take(qh + cut, axis=1),
    )  # m_tok bc bl ep dv first tok
    j0 = np.searchsorted(b.tmg, qh + m0)
    j1 = np.searchsorted(b.tmg, qh + np.minimum(cut, c))
    cleared = j1 > j0
    covered = at_cut[0] - at_m0[0]
    t = b.t_sums.take(j1, axis=1) - b.t_sums.take(j0, axis=1)
    covered += (ph_h * t[1] - t[2]) * cleared
    s_tok = Sh[S_TOK].copy()
    covered_tokens = s_tok + covered
    chars = _transcript_chars(b, Sh[S_BYTES].copy(), qh, m0, cut, at_m0, at_cut)
    s_in = _ceil_tokens(chars, bpt)
    out = _clip(np.rint(ratio * covered_tokens), smin, smax).astype(np.int64)
    text = np.rint(out * bpt).astype(np.int64)
    text[text == 0] = len(NO_SUMMARY)
    new_est = -(-(_SUMMARY_FIXED + text) // 4)
    Sh[VE] -= (
        _kept_from(m0, at_m0, cM, ep_M, top) - _kept_from(cut, at_cut, cM, ep_M, top) + Sh[S_EST] - new_est
    )
    Sh[S_BYTES], Sh[S_EST] = text, new_est
    Sh[STT] = cut
    Sh[STT_T] = np.searchsorted(b.tmg, qh + cut)
    msg_tokens = out + b.prefix_tokens[rh]
    car = Sh[CARRIER]
    fresh = car < 0
    cleared_head = cleared & (b.tmg[np.minimum(j0, len(b.tmg) - 1)] == qh + m0)
    old_new = np.where(cleared_head, ph_h, at_m0[6])
    old_car = np.where(fresh, old_new, s_tok)
    others = covered - old_new * fresh
    np.copyto(car, at_m0[5], where=fresh)
    Sh[S_TOK] = msg_tokens
    dtok[h] += msg_tokens - old_car - others
    firstF[h] = car
    Sh[TOKENS] += s_in + out
    Sh[S_OUT] += out
    np.maximum(Sh[PEAK], s_in, out=Sh[PEAK])
    Sh[COMP] += 1
    return s_in, out


def _transcript_chars(b: LaneBatch, prev, qh, m0, cut, at_m0, at_cut) -> np.ndarray:
    """The summarizer's message length (``prompt_units``) of each lane's covered messages [m0, cut)
    after its previous summary (``prev``: its bytes, -1: none): from the blocks' prefix sums while they
    fit the transcript's budget, else by ``elided_chars``."""
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
        chars[elide] = elided_chars(
            b.w, qh[elide] + m0[elide], qh[elide] + cut[elide], budget[elide], prev[elide], b.bc
        )
    return chars
