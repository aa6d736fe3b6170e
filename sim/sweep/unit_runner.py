"""Running one work unit where it runs (this process, a pool worker or a Ray task): replay its chunks and
write each chunk's part, handing back the parts (path, keys, stat, table). Below both the in-process
executor (``sim.sweep.execute``) and the Ray one (``sim.sweep.rayexec``), which run units the same way."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sim.sweep.scenario import scenario_traces
from sim.sweep.units import Chunk
from sim.util.errors import ConfigError


def _hashed(traces: list[Any], chunk: Chunk) -> list[Any]:
    """The chunk's traces, each holding the parent's content hash: inherited under fork, taken from the
    chunk when the scenario's bytes were checked against the parent's, computed only without a digest
    (a ``dataset:`` scenario). A trace that holds another hash changed during the sweep (exit 2)."""
    from sim.trace.codec import trace_hash

    out = []
    for index, _, expected in chunk.runs:
        t = traces[index]
        got = t.derived("trace_hash", (lambda _t, h=expected: h) if chunk.scenario_digest else trace_hash)
        if got != expected:
            raise ConfigError(f"scenario {chunk.scenario}: trace {index} changed during the sweep")
        out.append(t)
    return out


def _chunk_inputs(chunk: Chunk) -> tuple[list[Any], list[Any], int | str, str | None]:
    """What replaying a chunk takes besides its policy: its traces (each holding the parent's hash),
    their models, the window and the pricing, the setting's transforms applied."""
    from sim.config.compose import model_behaviour, model_window
    from sim.engine.model import ReplayModel

    cfg = chunk.setting.cfg
    window, behaviour = model_window(cfg), model_behaviour(cfg)
    pricing = None if chunk.pricing in ("none", "null") else chunk.pricing
    batch = _hashed(scenario_traces(chunk.scenario, chunk.scenario_digest), chunk)
    models = [ReplayModel(t, **behaviour) for t in batch]  # _hashed checked each trace's hash
    if cfg.get("transforms"):
        from sim.transforms.base import apply_all, make_transform

        steps = [make_transform(**step) for step in cfg["transforms"]]
        batch = [apply_all(t, steps, m) for t, m in zip(batch, models, strict=True)]
        models = [m.like(t) for t, m in zip(batch, models, strict=True)]
    return batch, models, window, pricing


def run_chunk(chunk: Chunk) -> list[dict[str, Any]]:
    """Replay one chunk and return its rows. Runs in a worker process when workers > 1."""
    from sim.config.compose import build_policy
    from sim.engine.dispatch import replay_table

    policy = build_policy(chunk.setting.cfg, chunk.setting.allow_modules)
    batch, models, window, pricing = _chunk_inputs(chunk)
    return _chunk_rows(chunk, replay_table(batch, policy, models, window=window, pricing=pricing))


def _run_lane_chunks(chunks: tuple[Chunk, ...]) -> list[list[dict[str, Any]]]:
    """Replay chunks of one lane unit (``lane_units``: the same runs, seed-engine settings that differ
    only in ``context_token_limit`` / ``keep_recent_tokens``, no transforms) together: every setting's
    lanes advance at once (``sim.engine.dispatch.replay_tables``). Each chunk's rows are the ones
    ``run_chunk`` gives it."""
    from sim.config.compose import build_policy
    from sim.engine.dispatch import replay_tables

    policies = [build_policy(c.setting.cfg, c.setting.allow_modules) for c in chunks]
    batch, models, window, pricing = _chunk_inputs(chunks[0])  # the unit's chunks share all of it
    tables = replay_tables(batch, policies, models, window=window, pricing=pricing)
    return [_chunk_rows(c, t) for c, t in zip(chunks, tables, strict=True)]


def _chunk_rows(chunk: Chunk, replays) -> list[dict[str, Any]]:
    """A chunk's result rows from its replays (a ``sim.engine.dispatch.ReplayTable``): run key, scenario, the
    pricing setting, the model knobs and the setting beside each run's row."""
    from sim.results.tables import table_rows
    from sim.util.versions import ctxsim_version

    cfg = chunk.setting.cfg
    rows = []
    for (_, key, _), result in zip(chunk.runs, table_rows(replays, ctxsim_version()), strict=True):
        row = {"run_key": key, **result}
        row["scenario"] = chunk.scenario
        row["pricing_setting"] = chunk.pricing
        for k, v in (cfg.get("model") or {}).items():
            row[f"model.{k}"] = v
        row["setting"] = " ".join(chunk.setting.overrides)
        rows.append(row)
    return rows


def _run_and_save(chunk: Chunk, parts_dir: str):
    """Run one chunk and write its part where it runs; the part's path, keys, stat and table travel back
    (a worker used to send every row as Python dicts, and the parent wrote every part one at a time)."""
    from sim.results import store as store

    return store.write_part(Path(parts_dir), run_chunk(chunk))


def run_and_save_unit(unit: tuple[Chunk, ...], parts_dir: str) -> list:
    """``_run_and_save`` of each chunk of a lane unit (``lane_units``), replayed together: the same
    parts, one a chunk."""
    from sim.results import store as store

    if len(unit) == 1:
        return [_run_and_save(unit[0], parts_dir)]
    return [store.write_part(Path(parts_dir), rows) for rows in _run_lane_chunks(unit)]
