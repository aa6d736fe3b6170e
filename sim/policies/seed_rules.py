"""The seed engine's two compaction choices, each written once as the policy applies it, with beside it
every vectorised copy the fast paths run instead.

- The prune bound (effect-agent's ``choosePruneBound``): ``prune_bound``, which ``SeedEngine`` calls;
  ``natural_prune_bounds`` (one trace, every keep of a grid: ``sim.engine.fast.seed_grid.replay_grid``)
  and ``lane_prune_bounds`` (lanes of many runs at once: ``sim.engine.fast.seed_lanes_compact`` and the
  (run, keep, call) table ``sim.engine.fast.seed_lanes_tables.LaneBatch.natural``).
- The summarize cut (``chooseSummarizeCut``): ``summarize_cut``, which ``SeedEngine`` calls;
  ``grid_summarize_cut`` (one lane, from the trace's prefix sums: ``replay_grid``) and
  ``lane_summarize_cuts`` (many lanes: ``sim.engine.fast.seed_lanes_compact.compact_lanes``).

The copies exist for speed: the scalar rules walk messages one by one in Python, the copies answer from
prefix sums with one search, over arrays of lanes. ``tests/test_seed_rules.py`` holds every copy to its
scalar rule on the shared traces and on generated cases, exactly; a change to a rule changes its copies
in this module, with that test.

Why the prefix sums give the walks' answers. Prune: the newest unprotected tool message always spends
``keep``, and an older message i is kept while the estimates from i to the newest sum to at most
``keep``; with C the prefix sums of the tool messages' estimates, the first message not kept from the
newest is the last i < T - 1 with C[i] < C[T] - keep (one ``searchsorted``). The walk also stops at the
first message already cleared, so with a bound already at b it gives max(b, the bound with nothing
cleared): the *natural* bound, which for a fixed keep only moves forward. Cut: the kept tail [m, M)
grows as m moves back, so the messages from which it reaches ``keep`` are a prefix [0, lo) of the
messages, found by one search over the prefix sums of the estimates as rendered (whole past the prune
bound, cleared before it); the cut is lo - 1 stepped back over tool messages (``back``).
"""

from __future__ import annotations

from bisect import bisect_right

import numpy as np


# ---------------------------------------------------------------------------------------- prune bound
def prune_bound(est: list[int], tool_msgs: list[int], cleared_through: int, keep: int) -> int:
    """choosePruneBound: the new ``cleared_through`` over the unprotected tool messages ``tool_msgs``
    (ascending), newest first, ``est`` each message's estimate. The scalar rule; its copies:
    ``natural_prune_bounds``, ``lane_prune_bounds`` (tests/test_seed_rules.py)."""
    tm = tool_msgs
    if len(tm) <= 1:
        return cleared_through
    budget = keep - est[tm[-1]]  # the newest always spends the budget
    for pos in range(len(tm) - 2, -1, -1):
        m = tm[pos]
        cost = est[m]
        if budget - cost >= 0 and m >= cleared_through:
            budget -= cost
            continue
        return max(cleared_through, m + 1)
    return cleared_through


def natural_prune_bounds(tm: list[int], tm_est: np.ndarray, T: int, keeps: np.ndarray) -> list[int]:
    """``prune_bound`` with nothing cleared yet over the first T tool messages (``tm``, their estimates
    ``tm_est``), for each keep (0: none cleared). With a bound already at b the rule gives max(b, this):
    it stops at the first message not kept or already cleared, whichever comes first from the newest."""
    if T <= 1:
        return [0] * len(keeps)
    budget = keeps - int(tm_est[T - 1])  # the newest always spends the budget
    spent = np.cumsum(tm_est[: T - 1][::-1])  # the older ones, newest first
    kept = np.searchsorted(spent, budget, side="right")  # kept while budget - spent >= 0
    bound = np.array(tm, dtype=np.int64)[T - 2 - np.minimum(kept, T - 2)] + 1
    return np.where(kept >= T - 1, 0, bound).tolist()


def lane_prune_bounds(c, c_through, tmg, po, t0, top, keep) -> tuple[np.ndarray, np.ndarray]:
    """``natural_prune_bounds`` of lanes (arrays that broadcast together): ``c``, the prefix sums of the
    tool messages' estimates of runs laid end to end; ``tmg``, those tool messages as positions among
    the runs' messages laid end to end (``po``: each lane's run's first); ``t0``, each lane's run's first
    tool message; ``top``, its newest in view; ``c_through``, ``c`` through it. Returns (q, the natural
    bound): q is the first tool message the bound leaves in view (``t0``: none cleared)."""
    q = np.minimum(np.maximum(np.searchsorted(c, c_through - keep), t0), top)
    return q, (tmg[q - 1] - po + 1) * (q > t0)


# -------------------------------------------------------------------------------------- summarize cut
def rendered_estimate(
    role: list[str], est: list[int], est_cleared: list[int], cleared_through: int, m: int
) -> int:
    """Message m's estimate as the view renders it: a tool message below the prune bound
    (``cleared_through``) with its results cleared, any other whole."""
    return est_cleared[m] if m < cleared_through and role[m] == "tool" else est[m]


def summarize_cut(
    role: list[str],
    est: list[int],
    est_cleared: list[int],
    cleared_through: int,
    summarized_through: int,
    keep: int,
) -> int:
    """chooseSummarizeCut over messages ``role``/``est`` (``est_cleared``: a tool message's estimate
    with its results cleared, as it renders below ``cleared_through``): keep a tail of at least
    ``keep`` tokens, results with their calls, never below ``summarized_through``. The scalar rule; its
    copies: ``grid_summarize_cut``, ``lane_summarize_cuts`` (tests/test_seed_rules.py)."""
    kept, cut = 0, 0
    for m in range(len(role) - 1, -1, -1):
        kept += rendered_estimate(role, est, est_cleared, cleared_through, m)
        if kept >= keep:
            cut = m
            break
    while cut > 0 and role[cut] == "tool":
        cut -= 1
    return max(cut, summarized_through)


def grid_summarize_cut(ep, sv, dv, back, M: int, c: int, keep: int, summarized: int) -> tuple[int, int, int]:
    """``summarize_cut`` of the first M messages from prefix sums (Python lists, M + 1 entries or more):
    ``ep`` of the estimates, ``sv`` of what clearing saves (tool messages), ``dv`` = ep - sv; ``back``,
    each message stepped back over tool messages. ``c``: the prune bound. Returns (cut, min(c, M), the
    rendered estimate of the whole view), the last two for the caller's sums."""
    cM = min(c, M)
    top = ep[M] - sv[cM]  # rendered estimate of the whole view: cleared at the placeholder
    # the kept tail grows as its start moves back: the messages from which it reaches keep are a prefix
    # [0, lo); past the bound estimates are whole, before it rendered
    if cM < M and ep[M] - ep[cM] >= keep:
        lo = bisect_right(ep, ep[M] - keep, cM, M)
    else:
        lo = bisect_right(dv, top - keep, 0, cM)
    cut = back[lo - 1] if lo > 1 else 0
    return max(cut, summarized), cM, top


def lane_summarize_cuts(ep, sv, dv, back, pg, M, c, keep, summarized) -> tuple:
    """``grid_summarize_cut`` of lanes (arrays): ``ep``, ``sv``, ``dv``, ``back`` of runs laid end to
    end (M + 1 entries a run), ``pg`` each lane's run's first entry, ``M`` its messages in view, ``c`` its
    prune bound. Returns (cut, min(c, M), ep through M, the rendered estimate of the whole view)."""
    cM = np.minimum(c, M)
    gM, gcM = pg + M, pg + cM
    ep_M, ep_cM = ep[gM], ep[gcM]
    top = ep_M - sv[gcM]
    whole = (cM < M) & (ep_M - ep_cM >= keep)
    lo_whole = np.minimum(np.maximum(np.searchsorted(ep, ep_M - keep, side="right"), gcM), gM)
    lo_part = np.minimum(np.maximum(np.searchsorted(dv, top - keep, side="right"), pg), gcM)
    lo = np.where(whole, lo_whole, lo_part) - pg
    cut = back[pg + np.maximum(lo - 1, 0)] * (lo > 1)
    return np.maximum(cut, summarized), cM, ep_M, top
