"""Which settings the seed engine's lanes replay together, and how many at once: the dispatcher's rule
(``sim.engine.dispatch``), which a sweep's work units follow too (``sim.sweep.units``).

It sits apart from the dispatcher, which loads numpy and the fast paths, so that a sweep groups its
chunks without importing the engine: a finished sweep's rerun loads nothing heavy."""

from __future__ import annotations

from collections.abc import Mapping

from sim.policies.seed_knobs import GRID_KNOBS

LANES = 4096  # lanes (settings x runs) advanced together at most: bounds the rows they keep


def lane_setting_key(policy_name: str, knobs: Mapping[str, object], transformed: bool) -> dict | None:
    """What settings must share to be replayed together as lanes (``replay_tables``): the policy's knobs
    other than the grid knobs (``GRID_KNOBS``); None for a setting the lanes never take (not the seed
    engine, or traces a transform changed), replayed on its own."""
    if policy_name != "seed_engine" or transformed:
        return None
    return {k: v for k, v in knobs.items() if k not in GRID_KNOBS}


def lanes_per_unit(runs: int) -> int:
    """How many settings over ``runs`` runs advance together as lanes at most (``LANES`` lanes)."""
    return max(1, LANES // max(runs, 1))
