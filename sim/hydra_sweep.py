"""``ctxsim sweep -m``: the same sweep through Hydra's multirun, so Hydra's launchers run it: ``basic``
(sequential), ``joblib`` (local cores; ``hydra/launcher=joblib hydra.launcher.n_jobs=2``), and, with their
plugins installed, ``ray`` or ``submitit_slurm`` for clusters (docs/launchers.md).

Each Hydra job is one grid point: it rebuilds the sweep spec from its own overrides and runs it with the
engine of ``sim.sweep`` (same run keys, same part files, so results do not depend on the launcher, and an
interrupted multirun resumes by running the same command). The ``MergeResults`` callback merges every
part into ``results.parquet`` when the multirun ends. Policies are built from ctxsim's registry only.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from hydra.experimental.callback import Callback

from sim.errors import ConfigError
from sim.paths import CONF_DIR

# ctxsim sweep words -> keys of conf/sweep_app.yaml (``pricing`` is a folder of price tables in conf/)
_RENAME = {"pricing": "price_as"}
_DROPPED = ("workers",)  # the launcher decides parallelism under Hydra


class MergeResults(Callback):
    """At the end of a multirun (or a single run): merge the jobs' parts into results.parquet."""

    def _merge(self, config) -> None:
        from sim.sweep import merge_parts

        path = merge_parts(Path(config.results.path), csv=bool(config.get("csv", False)))
        print(f"results: {path}", file=sys.stderr)

    def on_multirun_end(self, config, **kwargs) -> None:
        self._merge(config)

    def on_run_end(self, config, **kwargs) -> None:
        self._merge(config)


def _job(cfg) -> None:
    import dataclasses

    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    from sim.sweep import SweepSpec, run_sweep

    composed = OmegaConf.to_container(cfg, resolve=True)
    task = [
        o
        for o in HydraConfig.get().overrides.task
        if o.partition("=")[0].lstrip("+~").startswith(("policy.", "model."))
    ]
    spec = SweepSpec(
        policy=HydraConfig.get().runtime.choices.get("policy", "raw"),
        grid=tuple(task),
        scenario=str(cfg.scenario),
        pricing=str(cfg.price_as),
        results=str(cfg.results.path),
        chunk_size=int(cfg.chunk_size),
        composed={"policy": composed["policy"], "model": composed["model"]},
    )
    try:
        run_sweep(dataclasses.replace(spec), workers=1, progress=False, merge=False)
    except ConfigError as exc:  # e.g. keep_recent_tokens >= context_token_limit: skip this grid point
        print(f"ctxsim: sweep: skipping setting {' '.join(task)}: {exc}", file=sys.stderr)


def translate(items: Sequence[str]) -> list[str]:
    """``ctxsim sweep`` words -> Hydra overrides."""
    out = []
    for it in items:
        key, sep, value = it.partition("=")
        if key in _DROPPED:
            continue
        out.append(f"{_RENAME.get(key, key)}{sep}{value}")
    return out


def main(items: Sequence[str]) -> int:
    import hydra

    app = hydra.main(config_path=str(CONF_DIR), config_name="sweep_app", version_base=None)(_job)
    argv = sys.argv
    sys.argv = ["ctxsim-sweep", "-m", *translate(items)]
    try:
        app()
    finally:
        sys.argv = argv
    return 0
