"""Config composition with Hydra's Compose API: our own argument parsing and exit codes, no outputs/.

Policies are built from a config's ``_target_`` only when it names a registered policy class (or a
module the user allow-lists): a config file never selects arbitrary code to run.
"""

from __future__ import annotations

from typing import Any

from sim.errors import ConfigError
from sim.paths import CONF_DIR
from sim.policies.base import Policy, make_policy, policy_class, registered


def _target_of(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def compose(policy: str, overrides: list[str]) -> dict[str, Any]:
    """Compose the root config with ``policy=<policy>`` and ``policy.KEY=VALUE`` overrides."""
    cls = policy_class(policy)  # unknown names fail here, listing the registered ones
    if not (CONF_DIR / "policy" / f"{policy}.yaml").is_file():
        raise ConfigError(f"policy '{policy}' is registered but has no config file conf/policy/{policy}.yaml")
    knob_names = [f for f in cls.__dataclass_fields__]
    for ov in overrides:
        key, sep, _ = ov.partition("=")
        key = key.lstrip("+~")
        if not sep:
            raise ConfigError(f"override '{ov}' is not KEY=VALUE")
        group, _, knob = key.partition(".")
        if group != "policy" or not knob:
            raise ConfigError(f"override '{ov}': only policy.KEY=VALUE overrides are accepted here")
        if knob not in knob_names:
            raise ConfigError(
                f"override '{ov}': policy '{policy}' has no knob '{knob}'; "
                f"knobs: {', '.join(knob_names) or 'none'}"
            )
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
            cfg = hydra_compose(config_name="config", overrides=[f"policy={policy}", *overrides])
    except (HydraException, OmegaConfBaseException) as exc:
        first = str(exc).strip().splitlines()[0]
        raise ConfigError(f"config: {first}") from None
    return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]


def build_policy(cfg: dict[str, Any], allow_modules: tuple[str, ...] = ()) -> Policy:
    """Instantiate the policy of a composed config, by registry only."""
    pcfg = dict(cfg.get("policy") or {})
    target = pcfg.pop("_target_", None)
    by_target = {_target_of(c): name for name, c in registered().items()}
    if target not in by_target:
        if target and any(target.startswith(m + ".") for m in allow_modules):
            import importlib

            mod, _, attr = target.rpartition(".")
            cls = getattr(importlib.import_module(mod), attr)
            return cls(**pcfg)
        raise ConfigError(
            f"policy _target_ {target!r} is not a registered policy class; registered: "
            + ", ".join(sorted(by_target))
        )
    return make_policy(by_target[target], **pcfg)
