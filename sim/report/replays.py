"""A trace of the results read back and replayed under a setting, for the per-call figures: found by id
and content hash in the scenario the sweep ran (never fetched from the network), and the trace every
setting ran with the most calls chosen when none is asked for."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sim.report.settings import ReportSetting
from sim.util.errors import CtxsimError


def pricing_of(value: Any) -> str | None:
    return None if value in (None, "none", "null") else str(value)


def find_trace(frames: list[Any], trace_id: str):
    from sim.sweep.scenario import scenario_traces
    from sim.trace.codec import trace_hash

    for df in frames:
        rows = df[df["trace_id"] == trace_id]
        for scenario, h in sorted({(str(r.scenario), str(r.trace_hash)) for r in rows.itertuples()}):
            if scenario.startswith("dataset:") and not Path(scenario.removeprefix("dataset:")).exists():
                continue  # a results file never makes the report fetch a hub dataset over the network
            try:
                traces = scenario_traces(scenario)
            except CtxsimError:  # gone, moved or damaged since the sweep: the figure says it is not drawn
                continue
            for t in traces:
                if t.trace_id == trace_id and trace_hash(t) == h:
                    return t
    return None


def replay_setting(trace, policy_name: str, overrides: str, pricing: str | None, observer=None):
    from sim.config.compose import build_policy, compose, model_behaviour, model_window
    from sim.engine.dispatch import replay
    from sim.engine.model import ReplayModel

    cfg = compose(policy_name, overrides.split())
    policy = build_policy(cfg)
    return replay(
        trace,
        policy,
        ReplayModel(trace, **model_behaviour(cfg)),
        observer=observer,
        window=model_window(cfg),
        pricing=pricing,
    )


def choose_trace(settings: list[ReportSetting]) -> str | None:
    """The trace with the most calls among those every setting ran (ties: the smallest id)."""
    common = None
    for s in settings:
        ids = set(s.frame["trace_id"].astype(str))
        common = ids if common is None else common & ids
    if not common:
        return None
    calls: dict[str, int] = {}
    for s in settings:
        for tid, n in zip(s.frame["trace_id"].astype(str), s.frame["calls"], strict=True):
            if tid in common:
                calls[tid] = max(calls.get(tid, 0), int(n))
    return min(common, key=lambda t: (-calls.get(t, 0), t))
