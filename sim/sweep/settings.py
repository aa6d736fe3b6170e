"""The grid's settings: each point composed into a config and a built policy (the refused ones skipped
with a note or exit 2), small and picklable, so a worker rebuilds the policy from it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sim.sweep.spec import SweepSpec, check_grid_size, expand_grid, grid_size
from sim.util.errors import ConfigError


@dataclass(frozen=True)
class Setting:
    """One point of the grid: its overrides and the composed config (small and picklable)."""

    overrides: tuple[str, ...]
    cfg: dict[str, Any]
    name: str  # the registered policy (a preset resolves to it)
    params: dict[str, Any]  # every knob, as the result row's policy.<knob> columns hold them
    allow_modules: tuple[str, ...] = ()  # from the command line: modules a _target_ may name


def compose_fast(policy: str, base: dict[str, Any], ovs: list[str]) -> dict[str, Any] | None:
    """The composed config of ``base`` plus plain ``group.key=value`` overrides of existing keys, typed by
    Hydra's own override parser, without a full Hydra compose per grid point (~0.3 s each, most of a
    small sweep's time). None when an override is anything else: the caller then composes for real.
    Plain values (numbers, words, true/false/null) are typed without importing Hydra at all
    (``sim.config.compose.plain_overrides``)."""
    import copy

    from sim.config.compose import plain_overrides

    cfg = plain_overrides(base, ovs)
    if cfg is not None:
        return cfg
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import OverrideType

    try:
        parsed = OverridesParser.create().parse_overrides(ovs)
    except Exception:
        return None
    cfg = copy.deepcopy(base)
    for o in parsed:
        group, _, knob = o.key_or_group.partition(".")
        if o.type != OverrideType.CHANGE or o.package or o.is_sweep_override():
            return None
        section = cfg.get(group)
        if not isinstance(section, dict) or not knob or knob not in section or knob == "_target_":
            return None
        value = o.value()
        if not (value is None or isinstance(value, bool | int | float | str)):
            return None
        section[knob] = value
    return cfg


def grid_settings(
    spec: SweepSpec, log: Callable[[str], None], grid: list[list[str]] | None = None
) -> list[Setting]:
    """Compose every grid point; skip (with a note) the ones the policy refuses, e.g. keep >= limit.
    A bad key or unknown policy is an error for every point, so it stops the sweep before any run.
    ``grid``: the points already expanded (``sweep -m`` expands Hydra's sweep syntax with Hydra's own
    parser); default ``expand_grid(spec.grid)``."""
    from sim.config.compose import build_policy, compose, model_behaviour, model_window

    allow = spec.allow_modules
    if spec.composed is not None:  # a Hydra job: Hydra composed this grid point already
        policy = build_policy(spec.composed, allow)
        model_window(spec.composed)
        model_behaviour(spec.composed)
        one = [Setting(tuple(spec.grid), spec.composed, policy.name, dict(policy.params()), allow)]
        return _with_transforms(spec, one)
    if grid is None:
        check_grid_size(grid_size(list(spec.grid)), None, spec.max_settings)  # before expanding it
        grid = expand_grid(list(spec.grid))
    base = compose(spec.policy, [], allow)
    out = []
    for i, ovs in enumerate(grid):
        # the first point always goes through compose: it checks every key against the config
        cfg = (None if i == 0 else compose_fast(spec.policy, base, ovs)) or compose(spec.policy, ovs, allow)
        try:
            policy = build_policy(cfg, allow)
            model_window(cfg)
            model_behaviour(cfg)
        except ConfigError as exc:
            if not spec.skip_invalid:  # as `run` refuses it: exit 2 before any run
                raise ConfigError(
                    f"sweep: setting {' '.join(ovs) or '(defaults)'}: {exc}; pass --skip-invalid (an "
                    "experiment: skip_invalid: true) to skip the settings the policy refuses"
                ) from None
            log(f"skipping setting {' '.join(ovs) or '(defaults)'}: {exc}")
            continue
        out.append(Setting(tuple(ovs), cfg, policy.name, dict(policy.params()), allow))
    if not out:
        raise ConfigError(f"sweep: none of the {len(grid)} settings is valid")
    return _with_transforms(spec, out)


def _with_transforms(spec: SweepSpec, settings: list[Setting]) -> list[Setting]:
    """The same transforms before every setting: in its config, so in its run keys."""
    if not spec.transforms:
        return settings
    from sim.config.transforms import transform_steps

    steps = transform_steps(spec.transforms)
    return [dataclasses.replace(s, cfg={**s.cfg, "transforms": steps}) for s in settings]


def check_settings(
    spec: SweepSpec, grid: list[list[str]], log: Callable[[str], None] = lambda _m: None
) -> int:
    """How many of ``grid``'s points ``spec.policy`` accepts; a refused point raises ConfigError (exit 2)
    unless ``spec.skip_invalid``, as in a plain sweep. ``sweep -m`` calls it before Hydra runs a job."""
    return len(grid_settings(spec, log, grid))
