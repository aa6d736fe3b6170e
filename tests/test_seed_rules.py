"""The seed engine's prune bound and summary cut: each vectorised copy (``sim.policies.seed_rules``:
the grid path's and the lanes') against the scalar rule the policy calls, on the same inputs, exactly.
Inputs: the messages the policy itself builds, call by call, on the shared real traces and SWE-like
runs, and generated message lists."""

from __future__ import annotations

import numpy as np
import pytest

from scenarios.swe_like import generate_run
from sim.engine.fast.seed_lanes_tables import LaneBatch
from sim.engine.fast.seed_static import GridStatic
from sim.importers import load_paths
from sim.policies.base import make_policy
from sim.policies.seed_rules import (
    grid_summarize_cut,
    lane_prune_bounds,
    lane_summarize_cuts,
    natural_prune_bounds,
    prune_bound,
    summarize_cut,
)
from sim.util.paths import traces_dir

KEEPS = np.array([1, 500, 1000, 2000, 4000, 8000, 20000, 60000], dtype=np.int64)


def _traces():
    shared = traces_dir() / "mini-swe-agent-gemini3pro" / "trajs"
    real = list(load_paths([shared]))[:12] if shared.is_dir() else []
    return real + [generate_run(5, i) for i in range(6)]


TRACES = _traces()


def _messages(st: GridStatic):
    """The static's messages as the policy's lists: roles, estimates, estimates cleared."""
    role = ["tool" if t else "other" for t in st.role_tool.tolist()]
    return role, st.est.tolist(), st.est_cleared.tolist()


@pytest.mark.parametrize("i", range(len(TRACES)))
def test_the_prune_bound_copies_are_the_rule(i):
    trace = TRACES[i]
    st = GridStatic(trace, make_policy("seed_engine"))
    est = st.est.tolist()
    b = LaneBatch([st], [trace.bytes_per_token], [None], KEEPS)
    table = b.natural[0]  # (keep, call)
    checked = 0
    for k in range(st.K):
        T = st.tools_at[k]
        tm = st.tm[:T]
        grid = natural_prune_bounds(st.tm, st.tm_est, T, KEEPS)
        top = max(T - 1, 0)
        _, lanes = lane_prune_bounds(b.c, b.c_through[top], b.tmg, 0, 0, top, KEEPS)
        for j, keep in enumerate(KEEPS.tolist()):
            natural = prune_bound(est, tm, 0, keep)
            assert grid[j] == natural and int(lanes[j]) == natural and int(table[j, k]) == natural
            for ct in {0, natural, *tm[:: max(1, T // 4)], (tm[-1] + 1 if tm else 0)}:  # a bound already set
                assert prune_bound(est, tm, ct, keep) == max(ct, natural)
            checked += 1
    assert checked


@pytest.mark.parametrize("i", range(len(TRACES)))
def test_the_summary_cut_copies_are_the_rule(i):
    trace = TRACES[i]
    st = GridStatic(trace, make_policy("seed_engine"))
    role, est, est_cleared = _messages(st)
    b = LaneBatch([st], [trace.bytes_per_token], [None], ())
    rng = np.random.default_rng(i)
    cases = []
    for k in range(st.K):
        M = st.msgs_at[k]
        for _ in range(3):
            c = int(rng.integers(0, M + 2))
            stt = int(rng.integers(0, M + 1)) if rng.random() < 0.5 else 0
            cases.append((M, c, stt, int(rng.choice(KEEPS))))
    for M, c, stt, keep in cases:
        want = summarize_cut(role[:M], est[:M], est_cleared[:M], c, stt, keep)
        assert grid_summarize_cut(st.ep, st.sv, st.dv, st.back, M, c, keep, stt)[0] == want
    M, c, stt, keep = (np.array(v, dtype=np.int64) for v in zip(*cases, strict=True))
    cut = lane_summarize_cuts(b.ep, b.sv, b.dv, b.back, np.zeros_like(M), M, c, keep, stt)[0]
    want = [summarize_cut(role[:m], est[:m], est_cleared[:m], x, s, p) for m, x, s, p in cases]
    assert cut.tolist() == want


@pytest.mark.parametrize("seed", range(20))
def test_the_copies_are_the_rules_on_generated_messages(seed):
    """Random roles and estimates, runs laid end to end as the lanes lay them (a run's tables offset by
    the runs before it)."""
    rng = np.random.default_rng(seed)
    runs = []
    for _ in range(3):
        M = int(rng.integers(1, 60))
        role = ["tool" if rng.random() < 0.5 else "other" for _ in range(M)]
        est = rng.integers(1, 3000, M).tolist()
        est_cleared = [
            min(e, int(rng.integers(1, 40))) if r == "tool" else e for r, e in zip(role, est, strict=True)
        ]
        runs.append((role, est, est_cleared))
    # per run: prefix sums as GridStatic builds them (ep, sv, dv, back) and the tool messages' (c, tm)
    tables = []
    for role, est, est_cleared in runs:
        M = len(role)
        ep = [0, *np.cumsum(est).tolist()]
        sv = [
            0,
            *np.cumsum(
                [e - v if r == "tool" else 0 for r, e, v in zip(role, est, est_cleared, strict=True)]
            ).tolist(),
        ]
        dv = [a - b for a, b in zip(ep, sv, strict=True)]
        back, last = [], 0
        for m in range(M):
            if role[m] != "tool":
                last = m
            back.append(last if role[m] == "tool" else m)
        tm = [m for m in range(M) if role[m] == "tool"]
        tables.append((ep, sv, dv, back + [0], tm))
    po = np.cumsum([0] + [len(r[0]) + 1 for r in runs])[:-1]
    to = np.cumsum([0] + [len(t[4]) + 1 for t in tables])[:-1]

    # chained prefix sums: each run's continue the last's, as LaneBatch chains them
    def chained(parts):
        base = np.cumsum([0] + [p[-1] - p[0] for p in parts[:-1]])
        return np.concatenate([np.array(p) + b for p, b in zip(parts, base, strict=True)])

    ep_all, sv_all = chained([t[0] for t in tables]), chained([t[1] for t in tables])
    dv_all = ep_all - sv_all
    back_all = np.concatenate([np.array(t[3]) for t in tables])
    c_all = chained([[0, *np.cumsum([runs[j][1][m] for m in t[4]]).tolist()] for j, t in enumerate(tables)])
    newest = np.concatenate(
        [np.append([runs[j][1][m] for m in t[4]], 0) for j, t in enumerate(tables)]
    ).astype(np.int64)
    tmg = np.concatenate(
        [np.array(t[4] + [len(runs[j][0])], dtype=np.int64) + po[j] for j, t in enumerate(tables)]
    )
    c_through = c_all + newest
    for j, ((role, est, est_cleared), (ep, sv, dv, back, tm)) in enumerate(zip(runs, tables, strict=True)):
        tm_est = np.array([est[m] for m in tm], dtype=np.int64)
        for T in range(len(tm) + 1):
            grid = natural_prune_bounds(tm, tm_est, T, KEEPS)
            top = to[j] + max(T - 1, 0)
            _, lanes = lane_prune_bounds(c_all, c_through[top], tmg, po[j], to[j], top, KEEPS)
            want = [prune_bound(est, tm[:T], 0, keep) for keep in KEEPS.tolist()]
            assert grid == want and lanes.tolist() == want
        for M in range(len(role) + 1):
            for c in range(0, M + 2, 3):
                for stt in (0, M // 2):
                    for keep in KEEPS.tolist():
                        want = summarize_cut(role[:M], est[:M], est_cleared[:M], c, stt, keep)
                        assert grid_summarize_cut(ep, sv, dv, back, M, c, keep, stt)[0] == want
                        got = lane_summarize_cuts(ep_all, sv_all, dv_all, back_all, po[j], M, c, keep, stt)[0]
                        assert int(got) == want


def test_the_lane_copies_are_the_rules_on_runs_laid_end_to_end():
    """One ``LaneBatch`` over several runs, as the lanes lay them: every run through its own offsets
    (``po``, ``to``), and the first tool message the bound leaves in view (``q``, which the lanes keep as
    the next prune's start) as well as the bound."""
    from bisect import bisect_left

    statics = [GridStatic(t, make_policy("seed_engine")) for t in TRACES]
    b = LaneBatch(statics, [t.bytes_per_token for t in TRACES], [None] * len(TRACES), KEEPS)
    rng = np.random.default_rng(7)
    checked = 0
    for r, st in enumerate(statics):
        po, t0 = int(b.po[r]), int(b.to[r])
        assert po > 0 or r == 0  # the runs really are laid end to end
        role, est, est_cleared = _messages(st)
        for k in range(st.K):
            T, top = st.tools_at[k], int(b.top_by_call[k][r])
            tm = st.tm[:T]
            q, natural = lane_prune_bounds(b.c, b.c_through[top], b.tmg, po, t0, top, KEEPS)
            for j, keep in enumerate(KEEPS.tolist()):
                want = prune_bound(est, tm, 0, keep)
                assert int(natural[j]) == want and int(b.natural[r][j, k]) == want
                assert int(q[j]) == t0 + bisect_left(tm, want)
            M = st.msgs_at[k]
            c, stt = int(rng.integers(0, M + 2)), int(rng.integers(0, M + 1))
            keep = int(rng.choice(KEEPS))
            cut = lane_summarize_cuts(
                b.ep,
                b.sv,
                b.dv,
                b.back,
                np.array([po]),
                np.array([M]),
                np.array([c]),
                np.array([keep]),
                np.array([stt]),
            )[0]
            assert int(cut[0]) == summarize_cut(role[:M], est[:M], est_cleared[:M], c, stt, keep)
            checked += 1
    assert checked > 100
