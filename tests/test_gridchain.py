"""The blocks mode's foreseen prune-only firings (``sim.engine.fast.seed_lanes_blocks.Chain``): a round that
carries the firings the last round's blocks foresee gives what a round a firing gives (figures, rows, final
state, summary calls), in fewer rounds; a wrong guess (estimates perturbed) costs rounds, never a figure; and
the lanes' rows with the chain are the per-call loop's (``sim.checks.conformance.check_lanes``)."""

from __future__ import annotations

import numpy as np
import pytest

import sim.engine.fast.seed_lanes
from scenarios.swe_like import generate_run
from sim.checks.conformance import check_lanes
from sim.engine.model import ReplayModel
from sim.policies.base import make_policy

PRICE = "claude-sonnet-4-5"
TRACES = [generate_run(11, i) for i in range(24)]


class _NoChain:
    """A chain that foresees nothing: every round stops at its lanes' first firing (the old rounds)."""

    at = np.zeros(0, dtype=np.int64)

    def __init__(self, *args) -> None:
        pass


def _replay(policy, window, monkeypatch, chain=None):
    """(ok, figures, rows, lanes_out, rounds) of ``policy``'s lanes on TRACES, ``chain`` standing for
    ``Chain`` (None: the real one)."""
    from sim.engine.common import rules_and_price

    rules, price = rules_and_price(None, PRICE)
    rounds = []
    real = sim.engine.fast.seed_lanes.Trajectory

    def counted(*a, **k):
        rounds.append(1)
        return real(*a, **k)

    with monkeypatch.context() as m:
        m.setattr(sim.engine.fast.seed_lanes, "Trajectory", counted)
        if chain is not None:
            m.setattr(sim.engine.fast.seed_lanes, "Chain", chain)
        models = [ReplayModel(t) for t in TRACES]
        rows, out = [], {}
        ok, figures = sim.engine.fast.seed_lanes.grid_figures(
            TRACES, [policy], models, [window] * len(TRACES), rules, price, rows, out
        )
    return ok, figures, rows, out, len(rounds)


def _same(a, b) -> None:
    ok1, f1, r1, o1, _ = a
    ok2, f2, r2, o2, _ = b
    assert np.array_equal(ok1, ok2)
    for name in f1:
        assert np.array_equal(f1[name], f2[name]), name
    for name in ("order", "delta", "cleared", "cut", "summary_tokens"):
        assert np.array_equal(o1[name], o2[name]), name
    assert len(r1) == len(r2)
    for (n1, c1), (n2, c2) in zip(r1, r2, strict=True):
        assert n1 == n2 and all(np.array_equal(c1[n], c2[n]) for n in c1)

    def summaries(out):
        return sorted(
            (int(k), int(lane), int(i), int(o))
            for ks, lanes, s_in, s_out in out.get("summaries", [])
            for k, lane, i, o in zip(ks, lanes, s_in, s_out, strict=True)
        )

    assert summaries(o1) == summaries(o2)


@pytest.mark.parametrize("mode", ["prune-then-summarize", "prune"])
@pytest.mark.parametrize("window", [None, 30000])
@pytest.mark.parametrize("run_status", ["appended", "off"])
def test_foreseen_prune_only_firings_give_the_rounds_results_in_fewer_rounds(
    mode, window, run_status, monkeypatch
):
    policy = make_policy(
        "seed_engine", context_token_limit=12000, keep_recent_tokens=3000, mode=mode, run_status=run_status
    )
    old = _replay(policy, window, monkeypatch, _NoChain)
    new = _replay(policy, window, monkeypatch)
    _same(new, old)
    assert new[1]["compactions"].sum() > 0
    assert new[4] < old[4]  # (the streaks of prune-only firings took a round each)


@pytest.mark.parametrize("seed", range(3))
def test_a_wrong_guess_costs_rounds_never_a_figure(seed, monkeypatch):
    """The estimates the chain reads shifted at random (some firings foreseen where none comes, some
    missed): the same results as without a chain."""
    rng = np.random.default_rng(seed)
    real = sim.engine.fast.seed_lanes.Chain

    def guessing(lanes, s, pos, w, pred):
        est = pred[0] + rng.integers(-3000, 3000, len(pred[0]))
        return real(lanes, s, pos, w, (est, *pred[1:]))

    policy = make_policy("seed_engine", context_token_limit=12000, keep_recent_tokens=3000)
    _same(_replay(policy, 30000, monkeypatch, guessing), _replay(policy, 30000, monkeypatch, _NoChain))


def test_lanes_with_the_chain_are_the_loops_rows():
    """Settings whose lanes fire in long prune-only streaks, each alone (one setting a batch, replayed
    again under the next: the whole runs' block kept with the batch) and together."""
    settings = (
        (24000, 4000, "prune-then-summarize"),
        (16000, 8000, "prune-then-summarize"),
        (24000, 4000, "prune"),
    )
    policies = [
        make_policy("seed_engine", context_token_limit=lim, keep_recent_tokens=keep, mode=mode)
        for lim, keep, mode in settings
    ]
    assert check_lanes(policies, TRACES[:12], 30000, PRICE) == []
