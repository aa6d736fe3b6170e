"""The blocks mode of the lanes (``sim.engine.fast.seed_lanes``) on its own terms: one setting's lanes start
at their runs' first calls (no pristine lane) and give what the pristine route gives; the status line's fixed
point, solved again only for the lanes whose line moved, is the plain iteration's; the digit counts, metric
ratios and the batch's decline look are the reference arithmetic's."""

from __future__ import annotations

import numpy as np
import pytest

from scenarios.swe_like import generate_run
from sim.engine.model import ReplayModel
from sim.policies.base import make_policy

PRICE = "claude-sonnet-4-5"
TRACES = [generate_run(11, i) for i in range(24)]


def _figures(policies, window, rules, price):
    from sim.engine.fast.seed_lanes import grid_figures

    models = [ReplayModel(t) for t in TRACES]
    rows, out = [], {}
    ok, figures = grid_figures(TRACES, policies, models, [window] * len(TRACES), rules, price, rows, out)
    return ok, figures, rows, out


@pytest.mark.parametrize("mode", ["prune-then-summarize", "prune", "summarize"])
@pytest.mark.parametrize("window", [None, 30000])
@pytest.mark.parametrize("run_status", ["appended", "off"])
def test_one_setting_without_a_pristine_lane_gives_the_pristine_routes_figures_rows_and_summaries(
    mode, window, run_status
):
    """A setting alone (its lanes start at call 0) and twice over (two settings: the pristine route,
    lanes starting where their trigger first fires): the same figures, rows, final state and summary
    calls for each copy."""
    from sim.engine.common import rules_and_price

    rules, price = rules_and_price(None, PRICE)
    policy = make_policy(
        "seed_engine", context_token_limit=12000, keep_recent_tokens=3000, mode=mode, run_status=run_status
    )
    ok1, f1, r1, o1 = _figures([policy], window, rules, price)
    ok2, f2, r2, o2 = _figures([policy, policy], window, rules, price)
    R = len(TRACES)
    for s in (0, 1):
        assert np.array_equal(ok1[0], ok2[s])
        for name in f1:
            assert np.array_equal(f1[name][0], f2[name][s]), name
        for name in ("delta", "cleared", "cut", "summary_tokens"):
            assert np.array_equal(o1[name], o2[name].reshape(R, 2)[:, s]), name
        assert len(r1) == len(r2)
        for (a1, c1), (a2, c2) in zip(r1, r2, strict=True):
            assert a1 == a2 and all(np.array_equal(c1[n][:, 0], c2[n][:, s]) for n in c1)

    def summaries(out, S, s):
        return sorted(
            (int(k), int(lane) // S, int(i), int(o))
            for ks, lanes, s_in, s_out in out.get("summaries", [])
            for k, lane, i, o in zip(ks, lanes, s_in, s_out, strict=True)
            if int(lane) % S == s
        )

    assert summaries(o1, 1, 0) == summaries(o2, 2, 0) == summaries(o2, 2, 1)
    assert (mode == "prune") == (not summaries(o1, 1, 0))
    assert f1["compactions"].sum() > 0
    if window is not None and mode == "prune":  # (pruning alone leaves some runs over the window)
        assert not ok1.all() and ok1.any()


def _plain_fixed_point(base, out, fixed, bpt, tok0, last0, width, stok, passes):
    """The iteration over every lane each pass, call by call in Python."""
    n, N = len(width), len(base)
    head = np.concatenate([[0], np.cumsum(width)[:-1]]).astype(int)
    lane = np.repeat(np.arange(n), width)
    stok = stok.copy()
    req = tokens = last = None
    for _ in range(passes):
        req = np.maximum(base + stok, 0)
        tokens, last = np.zeros(N, dtype=np.int64), np.zeros(N, dtype=np.int64)
        for i in range(N):
            first = i == head[lane[i]]
            tokens[i] = tok0[lane[i]] if first else tokens[i - 1] + req[i - 1] + out[i - 1]
            last[i] = last0[lane[i]] if first else req[i - 1]
        digits = np.array([len(str(v)) - 1 if v > 0 else 0 for v in tokens]) + np.array(
            [len(str(v)) - 1 if v > 0 else 0 for v in last]
        )
        new = np.ceil((digits + fixed) / bpt).astype(np.int64)
        if np.array_equal(new, stok):
            break
        stok = new
    return req, tokens, last, stok


@pytest.mark.parametrize("seed", range(6))
def test_the_status_fixed_point_passing_only_moved_lanes_again_is_the_plain_iteration(monkeypatch, seed):
    import sim.engine.fast.seed_lanes_blocks

    real, calls = sim.engine.fast.seed_lanes_blocks.status_fixed_point, []

    def counted(*a):
        calls.append(len(a[0]))
        return real(*a)

    monkeypatch.setattr(sim.engine.fast.seed_lanes_blocks, "status_fixed_point", counted)
    rng = np.random.default_rng(seed)
    n = 40
    width = rng.integers(1, 300, n)
    N = int(width.sum())
    base = rng.integers(-50, 40000, N)
    out = rng.integers(0, 3000, N)
    fixed = rng.integers(60, 90, N)
    bpt = np.repeat(rng.choice([3.0, 3.7, 4.0], n), width)
    tok0, last0 = rng.integers(0, 10**7, n), rng.integers(0, 10**5, n)
    poor = np.ceil(fixed / bpt).astype(np.int64)  # a poor first guess: several passes of every lane
    passes = int(width.max()) + 1
    want = _plain_fixed_point(base, out, fixed, bpt, tok0, last0, width, poor, passes)
    # and the answer but for a few lanes' lines: those lanes pass again on their own
    near = want[3].copy()
    few = np.repeat(np.isin(np.arange(n), rng.choice(n, 3, replace=False)), width)
    near[few] += 1
    for guess in (poor, near):
        calls.clear()
        got = counted(base, out, fixed, bpt, tok0, last0, width, guess, passes)
        for g, w in zip(got, want, strict=True):
            assert np.array_equal(g, w)
    assert len(calls) > 1 and calls[1] == few.sum()  # (the second pass: the few lanes' calls only)


def test_digit_counts_of_long_arrays_are_the_search_over_powers_of_ten():
    from sim.engine.fast.seed_lanes_blocks import digit_counts
    from sim.engine.fast.seed_static import POW10

    rng = np.random.default_rng(3)
    edges = [0, 1, 9, 10, 99, 100, 999, 10**6 - 1, 10**6, 10**17 - 1, 10**17, 10**18 - 1, 10**18, 2**63 - 1]
    for hi in (10, 10**4, 10**9, 2**62):
        v = np.concatenate([rng.integers(-3, hi, 5000, dtype=np.int64), np.array(edges, dtype=np.int64)])
        assert np.array_equal(digit_counts(v), np.searchsorted(POW10, v, "right"))
    short = np.array(edges, dtype=np.int64)
    assert digit_counts(short).tolist() == [0, 0, 0, 1, 1, 2, 2, 5, 6, 16, 17, 17, 18, 18]


def test_metric_ratios_are_pythons_division_of_the_ints():
    from sim.engine.fast.seed_rows import exact_ratios

    num = np.array([0, 1, 2, 7, 5, 3], dtype=np.int64)
    den = [3, 3, 0, 9, 5, 7]
    got = exact_ratios(num, den)
    want = [a / b if b else None for a, b in zip(num.tolist(), den, strict=True)]
    assert [None if q != q else q for q in got] == want
    big = np.array([2**60 + 1, 3], dtype=np.int64)  # past 2**53: Python's exact division
    assert exact_ratios(big, [3, 2**55 + 1]) == [(2**60 + 1) / 3, 3 / (2**55 + 1)]


def test_the_batchs_decline_look_is_each_runs():
    from sim.engine.dispatch import lanes_accept, lanes_decline

    traces = list(TRACES[:4])
    models = [ReplayModel(t) for t in traces]
    assert lanes_accept(traces, models) == [True] * 4
    limited = models[:2] + [ReplayModel(traces[2], max_turns=3)] + models[3:]
    assert lanes_accept(traces, limited) == [
        lanes_decline(t, m) is None for t, m in zip(traces, limited, strict=True)
    ]
    assert lanes_accept(traces, limited) == [True, True, False, True]
