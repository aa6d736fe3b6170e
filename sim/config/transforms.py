"""``--transform NAME [transform.KEY=VALUE ...]``: transforms composed from the Hydra group ``transform/``.

Data only: NAME must be a registered transform (``sim.transforms.base.registered``; its file
``conf/transform/NAME.yaml`` holds the knobs' defaults and nothing else), and each override a knob of it
with a plain value (no interpolation). Composed with Hydra's Compose API, one transform at a time, so
the same transform may be given twice with different knobs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

from sim.util.errors import ConfigError, UnknownNameError
from sim.util.paths import CONF_DIR

if TYPE_CHECKING:  # the transforms themselves (numpy, the model) only when one is composed
    from sim.transforms.base import Transform

Spec = tuple[str, list[str]]  # (name, its transform.KEY=VALUE overrides)


def take_transforms(argv: Sequence[str], loose: bool = False) -> tuple[list[str], list[Spec]]:
    """Split ``--transform NAME`` (or ``--transform=NAME``) and the ``transform.KEY=VALUE`` words after
    it (until the next ``--transform``) out of a command line: (the other words, the specs in order).
    ``loose`` (sweep, whose own ``transform=NAME`` words take overrides too): a ``transform.KEY=VALUE``
    before any ``--transform`` stays among the other words instead of being an error."""
    rest: list[str] = []
    specs: list[Spec] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--transform" or a.startswith("--transform="):
            if a == "--transform":
                if i + 1 >= len(argv) or argv[i + 1].startswith("-"):
                    from sim.transforms.base import registered

                    raise ConfigError("--transform needs a NAME; registered: " + ", ".join(registered()))
                name, i = argv[i + 1], i + 2
            else:
                name, i = a.partition("=")[2], i + 1
            specs.append((name, []))
            continue
        if a.startswith("transform.") and "=" in a and (specs or not loose):
            if not specs:
                raise ConfigError(
                    f"override '{a}': a transform.KEY=VALUE follows the --transform NAME it sets"
                )
            specs[-1][1].append(a)
        else:
            rest.append(a)
        i += 1
    return rest, specs


def compose_transforms(specs: Sequence[Spec]) -> list[Transform]:
    """Each spec composed (``+transform=NAME`` and its overrides) and built, in order."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    from sim.config.compose import check_value
    from sim.transforms.base import make_transform, registered

    out = []
    reg = registered()
    for name, overrides in specs:
        if name not in reg:
            raise UnknownNameError("transform", name, reg)
        known = [f.name for f in dataclasses.fields(reg[name])]
        for ov in overrides:
            key, sep, value = ov.partition("=")
            knob = key.partition(".")[2]
            if not sep or knob not in known:
                raise ConfigError(
                    f"override '{ov}': transform '{name}' has no knob '{knob}'; knobs: {', '.join(known)}"
                )
            check_value(value, f"override '{ov}'")
        try:
            with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
                cfg = hydra_compose(config_name="config", overrides=[f"+transform={name}", *overrides])
        except (HydraException, OmegaConfBaseException) as exc:
            first = str(exc).strip().splitlines()[0]
            raise ConfigError(f"transform '{name}': {first}") from None
        knobs = OmegaConf.to_container(cfg, resolve=False)["transform"]  # type: ignore[index]
        out.append(make_transform(name, **knobs))  # type: ignore[arg-type]
    return out


def transform_steps(specs: Sequence[Spec]) -> list[dict]:
    """``compose_transforms`` as a setting's config holds them (and its run keys hash them): each step's
    registered name and every knob, in order."""
    return [{"name": t.name, **t.params()} for t in compose_transforms(specs)]
