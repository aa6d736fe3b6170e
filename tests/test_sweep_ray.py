"""``executor=ray`` on a local Ray instance with 2 CPUs (started by the sweep itself): the same part
files and a byte-identical results.parquet as the in-process pool (workers=1 and workers=2), a seed-engine
grid's chunks replayed together as lanes (``sim.sweep.units.lane_units``) as the pool replays them; a ctxsim
error inside a Ray task is exit 2, as in the pool; a rerun of the finished sweep starts no Ray at all."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # starting a local Ray instance and its workers: ~25 s

ray = pytest.importorskip(
    "ray",
    reason=f"Ray is not installed for Python {sys.version.split()[0]} (no Ray wheel for this interpreter, "
    "or the optional extra ctxsim[ray] was not installed): executor=ray is not tested here",
)

from scenarios.swe_like import generate_suite  # noqa: E402
from sim.importers import load_paths  # noqa: E402
from sim.sweep.execute import run_sweep  # noqa: E402
from sim.sweep.spec import SweepSpec  # noqa: E402
from sim.trace.io import write_traces  # noqa: E402
from sim.util.errors import ConfigError  # noqa: E402
from sim.util.paths import EMBEDDED_SUITE  # noqa: E402


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("corpus") / "small.jsonl"
    traces = list(load_paths([EMBEDDED_SUITE / "closed_loop.jsonl"])) + generate_suite(7, 4)  # 8 runs
    write_traces(traces, out)
    return out


@pytest.fixture(scope="module")
def local_ray():
    """One local Ray instance with 2 CPUs for this module; sweeps use the connection as it is."""
    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="WARNING")
    try:
        yield ray
    finally:
        ray.shutdown()


def _spec(corpus: Path, out: Path, **kw) -> SweepSpec:
    base = dict(
        policy="observation_masking",
        grid=("policy.n=1,3,10",),
        scenario=str(corpus),
        pricing="claude-sonnet-4-5",
        results=str(out),
        chunk_size=3,
    )
    base.update(kw)
    return SweepSpec(**base)


def _tree(out: Path) -> dict[str, bytes]:
    files = {p.name: p.read_bytes() for p in sorted((out / "parts").glob("part-*.parquet"))}
    files["results.parquet"] = (out / "results.parquet").read_bytes()
    return files


def test_ray_writes_the_pools_parts_and_results_byte_for_byte(corpus, tmp_path, monkeypatch):
    """The sweep starts its own local Ray with `workers` = 2 CPUs, and stops it at the end."""
    import sim.sweep.rayexec as rayexec

    assert not ray.is_initialized()
    started: list[dict] = []
    real_init = ray.init

    def init(*args, **kw):
        started.append(kw)
        out = real_init(*args, **kw)
        started.append({"cpus": ray.cluster_resources().get("CPU")})
        return out

    monkeypatch.setattr(ray, "init", init)
    on_ray = tmp_path / "ray"
    run_sweep(_spec(corpus, on_ray, executor="ray"), workers=2, progress=False)
    assert [started[0]["address"], started[0]["num_cpus"], started[1]["cpus"]] == ["local", 2, 2]
    assert not ray.is_initialized()
    pool1 = tmp_path / "pool1"
    run_sweep(_spec(corpus, pool1), workers=1, progress=False)
    pool2 = tmp_path / "pool2"
    run_sweep(_spec(corpus, pool2), workers=2, progress=False)
    ray_files = _tree(on_ray)
    assert len(ray_files) == 3 * 3 + 1  # 8 traces in chunks of 3: 3 parts per setting, and results
    assert ray_files == _tree(pool1) == _tree(pool2)
    # a rerun of the finished sweep stops at the receipt: no Ray task, no Ray started
    monkeypatch.setattr(rayexec, "run_chunks", lambda *a: pytest.fail("Ray ran a chunk"))
    run_sweep(_spec(corpus, on_ray, executor="ray"), workers=2, progress=False)
    assert _tree(on_ray) == ray_files and len(started) == 2


def test_ray_runs_a_seed_engine_grids_chunks_together_as_lanes(corpus, tmp_path, monkeypatch, local_ray):
    """A Ray task is a lane unit: the chunks of one set of runs under several (limit, keep) settings go
    to one task and are replayed together, as the pool's workers replay them; the parts and
    results.parquet are the pool's at 1 and 2 workers, byte for byte."""
    import sim.sweep.rayexec as rayexec

    units: list[tuple[int, ...]] = []
    real = rayexec.lane_units

    def spy(todo, workers=0):
        out = real(todo, workers)
        units.append(tuple(len(u) for u in out))
        return out

    monkeypatch.setattr(rayexec, "lane_units", spy)
    grid = ("policy.context_token_limit=16000,32000,48000", "policy.keep_recent_tokens=2000,8000")
    kw = dict(policy="seed_engine", grid=grid, chunk_size=4)
    on_ray = tmp_path / "ray"
    run_sweep(_spec(corpus, on_ray, executor="ray", **kw), workers=2, progress=False)
    # 6 settings x 2 chunks of 4 runs: per set of runs 6 chunks, in units of 2 for 2 CPUs
    assert units == [(2, 2, 2, 2, 2, 2)]
    pool1, pool2 = tmp_path / "pool1", tmp_path / "pool2"
    run_sweep(_spec(corpus, pool1, **kw), workers=1, progress=False)
    run_sweep(_spec(corpus, pool2, **kw), workers=2, progress=False)
    ray_files = _tree(on_ray)
    assert len(ray_files) == 6 * 2 + 1
    assert ray_files == _tree(pool1) == _tree(pool2)


def test_a_ctxsim_error_in_a_ray_task_is_exit_2(corpus, tmp_path, local_ray):
    """A Ray worker loads the scenario itself: bytes other than the parent's (here a planned digest
    that no longer matches) stop the sweep with the worker's own message, as a ConfigError."""
    import dataclasses

    from sim.sweep.plan import plan
    from sim.sweep.rayexec import run_chunks

    runs = plan(_spec(corpus, tmp_path / "e"), log=lambda msg: None)
    chunk = dataclasses.replace(runs.chunks(())[0], scenario_digest="0" * 64)
    with pytest.raises(ConfigError, match="changed during the sweep") as exc:
        run_chunks([chunk], tmp_path / "e" / "parts", 2, None, lambda c, p: None)
    assert exc.value.exit_code == 2 and "Traceback" not in str(exc.value)
