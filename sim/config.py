"""Config composition with Hydra's Compose API: our own argument parsing and exit codes, no outputs/.

Policies are built from a config's ``_target_`` only when it names a registered policy class (or a
module the user allow-lists): a config file never selects arbitrary code to run.
"""

from __future__ import annotations

from typing import Any

from sim.errors import ConfigError, UnknownNameError
from sim.paths import CONF_DIR
from sim.policies.base import Policy, make_policy, registered


def _target_of(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def policy_names() -> list[str]:
    """Selectable with ``--policy``: registered policies and presets (any ``conf/policy/*.yaml``)."""
    return sorted({*registered(), *(p.stem for p in (CONF_DIR / "policy").glob("*.yaml"))})


def compose(policy: str, overrides: list[str]) -> dict[str, Any]:
    """Compose the root config with ``policy=<policy>`` and ``policy.KEY=VALUE`` / ``model.KEY=VALUE``
    overrides. ``policy`` names a registered policy or a preset file in ``conf/policy/``."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    if not (CONF_DIR / "policy" / f"{policy}.yaml").is_file():
        if policy in registered():
            raise ConfigError(f"policy '{policy}' is registered but has no conf/policy/{policy}.yaml")
        raise UnknownNameError("policy", policy, policy_names())

    def run(ovs: list[str]) -> dict[str, Any]:
        try:
            with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
                cfg = hydra_compose(config_name="config", overrides=[f"policy={policy}", *ovs])
        except (HydraException, OmegaConfBaseException) as exc:
            first = str(exc).strip().splitlines()[0]
            raise ConfigError(f"config: {first}") from None
        return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]

    base = run([])
    knob_names = [k for k in base["policy"] if k != "_target_"]
    model_keys = list(base.get("model") or {})
    for ov in overrides:
        key, sep, _ = ov.partition("=")
        key = key.lstrip("+~")
        if not sep:
            raise ConfigError(f"override '{ov}' is not KEY=VALUE")
        group, _, knob = key.partition(".")
        known = {"policy": knob_names, "model": model_keys}.get(group)
        if known is None or not knob:
            raise ConfigError(f"override '{ov}': only policy.KEY=VALUE and model.KEY=VALUE overrides")
        if knob not in known:
            raise ConfigError(
                f"override '{ov}': {group} '{policy if group == 'policy' else base['model'].get('name')}' "
                f"has no {'knob' if group == 'policy' else 'key'} '{knob}'; "
                f"{'knobs' if group == 'policy' else 'keys'}: {', '.join(known) or 'none'}"
            )
    return run(overrides) if overrides else base


def build_policy(cfg: dict[str, Any], allow_modules: tuple[str, ...] = ()) -> Policy:
    """Instantiate the policy of a composed config: a registered policy class, or a Policy subclass from a
    module the user allow-listed (``--allow-module``, or ``allow_modules`` in the config). A config's
    ``_target_`` alone never selects code to run."""
    pcfg = dict(cfg.get("policy") or {})
    target = pcfg.pop("_target_", None)
    allowed = (*allow_modules, *(cfg.get("allow_modules") or ()))
    by_target = {_target_of(c): name for name, c in registered().items()}
    if target not in by_target:
        if isinstance(target, str) and any(target == m or target.startswith(m + ".") for m in allowed):
            import importlib

            mod, _, attr = target.rpartition(".")
            try:
                cls = getattr(importlib.import_module(mod), attr)
            except (ImportError, AttributeError) as exc:
                raise ConfigError(f"policy _target_ {target!r}: cannot import ({exc})") from None
            if not (isinstance(cls, type) and issubclass(cls, Policy)):
                raise ConfigError(f"policy _target_ {target!r} is not a sim.policies.base.Policy subclass")
            try:
                return cls(**pcfg)
            except TypeError as exc:
                raise ConfigError(f"policy {target}: {exc}") from None
        raise ConfigError(
            f"policy _target_ {target!r} is not a registered policy class; registered: "
            + ", ".join(sorted(by_target))
        )
    return make_policy(by_target[target], **pcfg)


def model_window(cfg: dict[str, Any]) -> int | str:
    """The window to replay with: the config's number, or "auto" (the trace's recorded model's)."""
    window = (cfg.get("model") or {}).get("window")
    if window is None:
        return "auto"
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise ConfigError(f"model.window={window!r} is not null (the recorded model's) or an integer >= 1")
    return window


def model_behaviour(cfg: dict[str, Any]) -> dict[str, Any]:
    """The mock model's knobs (``on_missing``, ``summary_fact_tokens``), checked before any run."""
    from sim.model import ON_MISSING

    m = cfg.get("model") or {}
    out = {
        "on_missing": m.get("on_missing", "refetch"),
        "summary_fact_tokens": m.get("summary_fact_tokens", 40),
    }
    if out["on_missing"] not in ON_MISSING:
        raise ConfigError(f"model.on_missing={out['on_missing']!r} is not one of {', '.join(ON_MISSING)}")
    sft = out["summary_fact_tokens"]
    if isinstance(sft, bool) or not isinstance(sft, int) or sft < 1:
        raise ConfigError(f"model.summary_fact_tokens={sft!r} is not an integer >= 1")
    return out
