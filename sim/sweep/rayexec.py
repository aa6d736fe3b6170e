"""``ctxsim sweep … executor=ray [ray.address=auto|HOST:PORT|ray://HOST:PORT]``: a sweep's chunks as Ray
tasks, for a sweep larger than one machine.

Each task is one work unit of ``sim.sweep.units.lane_units``, as the in-process pool runs them: one chunk
(``sim.sweep.units.Chunk``: a setting and its (trace, run key, trace hash) triples, nothing big), or the
seed-engine chunks of the same runs whose settings differ only in the grid knobs, replayed together as
lanes. A task loads the scenario once per Ray worker process, checks that the scenario's bytes are the
ones the parent planned from, takes the parent's trace hashes, replays its unit and writes each chunk's
part into ``results.path/parts/`` itself, returning the parts' keys and tables. So the parts, and the
results.parquet merged from them, are the ones the in-process pool writes, byte for byte.
``results.path`` and the scenario must be readable (the parts folder writable) at the same paths on
every node, and every node must run the same ctxsim (checked per task). Without an address a local Ray
is started with ``workers`` CPUs and stopped at the end; an existing connection (``ray.is_initialized()``)
is used as it is.

Ray is an optional extra (``pip install 'ctxsim[ray]'``): this module is imported only by ``executor=ray``,
never by ``import sim``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from sim.sweep.unit_runner import run_and_save_unit
from sim.sweep.units import lane_units
from sim.util.errors import ConfigError, CtxsimError

IN_FLIGHT_PER_CPU = 4  # tasks submitted ahead of the results: enough to keep every CPU busy, bounded


def _task(unit: tuple[Any, ...], parts_dir: str, version: str) -> list[Any]:
    """One work unit on a Ray worker: replay its chunks, write their parts, return the parts (path, keys,
    stat), one a chunk."""
    from sim.util.versions import ctxsim_version

    if version != ctxsim_version():
        raise ConfigError(
            f"sweep: a Ray worker runs ctxsim {ctxsim_version()} but the sweep ctxsim {version}: install the "
            "same ctxsim on every node"
        )
    return run_and_save_unit(unit, parts_dir)


def _ray():
    try:
        import ray
    except ImportError:
        raise ConfigError(
            "sweep: executor=ray needs Ray, which is not installed here: pip install 'ctxsim[ray]' "
            "(or leave out executor=ray to run on this machine's processes)"
        ) from None
    return ray


def _get(ray, ref):
    """A task's result; a ctxsim error inside the task is raised as itself (exit 2, as in the pool)."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as exc:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, CtxsimError):
            raise ConfigError(str(cause)) from None
        last = (str(cause or exc).strip().splitlines() or [type(exc).__name__])[-1]
        raise RuntimeError(f"sweep: a Ray task failed: {last}") from None


def run_chunks(
    todo: list[Any], parts_dir: Path, workers: int, address: str | None, save: Callable[[Any, Any], None]
) -> None:
    """Run the chunks of ``todo`` as Ray tasks, one task a work unit (``sim.sweep.units.lane_units`` for the
    cluster's CPUs); ``save(chunk, part)`` for each chunk of a unit as the unit finishes."""
    from sim.util.versions import ctxsim_version

    ray = _ray()
    started = not ray.is_initialized()
    if started:
        kw: dict[str, Any] = {"include_dashboard": False, "logging_level": "WARNING"}
        if address is None:  # "local": a new instance even where `ray start` left one running
            ray.init(address="local", num_cpus=max(1, workers), **kw)
        else:
            ray.init(address=address, **kw)
    try:
        task = ray.remote(num_cpus=1)(_task)
        cpus = max(1, int(ray.cluster_resources().get("CPU", workers)))
        limit = IN_FLIGHT_PER_CPU * cpus
        queue = list(reversed(lane_units(todo, cpus)))
        pending: dict[Any, tuple[Any, ...]] = {}
        while queue or pending:
            while queue and len(pending) < limit:
                unit = queue.pop()
                pending[task.remote(unit, str(parts_dir), ctxsim_version())] = unit
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                unit = pending.pop(ref)
                for chunk, part in zip(unit, _get(ray, ref), strict=True):
                    save(chunk, part)
    finally:
        if started:
            ray.shutdown()
