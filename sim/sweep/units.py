"""Work units: the chunks a sweep runs, and which of them are replayed together as lanes (seed-engine
settings of the same runs that differ only in the grid knobs). The pool and Ray run the same units."""

from __future__ import annotations

import json
from dataclasses import dataclass

from sim.engine.lane_rules import lane_setting_key, lanes_per_unit
from sim.sweep.settings import Setting


@dataclass(frozen=True)
class Chunk:
    """A work unit: a setting and the (trace index, run key) pairs it runs. Nothing big inside."""

    scenario: str
    pricing: str
    setting: Setting
    runs: tuple[tuple[int, str, str], ...]  # (trace index, run key, expected trace hash)
    scenario_digest: str | None = None  # the bytes of the scenario the hashes are of (sim.sweep.plandigest)


def _lane_key(chunk: Chunk) -> str | None:
    """What chunks replayed together as lanes share: the runs, and every part of the config but what the
    dispatcher lets lanes differ in (``sim.engine.lane_rules.lane_setting_key``; None: a chunk the lanes
    never take, replayed on its own)."""
    cfg = chunk.setting.cfg
    policy = lane_setting_key(chunk.setting.name, cfg.get("policy") or {}, bool(cfg.get("transforms")))
    if policy is None:
        return None
    rest = {k: v for k, v in cfg.items() if k != "policy"}
    runs = [index for index, _, _ in chunk.runs]
    shared = [chunk.scenario, chunk.pricing, chunk.scenario_digest, chunk.setting.allow_modules, runs]
    return json.dumps([shared, policy, rest], sort_keys=True, default=repr)


def lane_units(todo: list[Chunk], workers: int = 0) -> list[tuple[Chunk, ...]]:
    """The chunks as work units: seed-engine chunks of the same runs whose settings differ only in the
    grid knobs go together (up to ``sim.engine.lane_rules.lanes_per_unit`` settings a unit, and at least two
    units a worker while there are enough), every other chunk on its own. Order: each unit at its first
    chunk's place. Which chunks may share a unit is the dispatcher's rule, not restated here."""
    groups: dict[str, list[Chunk]] = {}
    units: list[list[Chunk]] = []
    for c in todo:
        key = _lane_key(c)
        if key is None:
            units.append([c])
        elif key in groups:
            groups[key].append(c)
        else:
            groups[key] = [c]
            units.append(groups[key])
    out: list[tuple[Chunk, ...]] = []
    for u in units:
        size = lanes_per_unit(len(u[0].runs))
        if workers > 1:  # enough units to keep every worker busy
            size = min(size, max(1, -(-len(u) // (2 * workers))))
        out.extend(tuple(u[j : j + size]) for j in range(0, len(u), size))
    return out
