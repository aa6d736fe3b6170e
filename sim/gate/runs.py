"""The gate's runs: its suite loaded (a path relative to the gate file), and a baseline or candidate
policy built from its spec and replayed over the suite, one result row per trace. A refusal names the
gate file's line and key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sim.gate.gatefile import Gate, GateError, PolicySpec
from sim.util.errors import ConfigError, CtxsimError


def _resolve_suite(gate: Gate) -> str:
    """``embedded``, ``dataset:…``, or a path relative to the gate file, else to the repository."""
    s = gate.suite
    if s == "embedded" or s.startswith("dataset:") or Path(s).is_absolute():
        return s
    beside = gate.path.parent / s
    return str(beside) if beside.exists() else s


def build_spec(gate: Gate, spec: PolicySpec, allow_modules: tuple[str, ...]):
    """The policy and config of a spec; any refusal is reported at the spec's line and key."""
    from sim.config.compose import build_policy, compose, model_behaviour, model_window

    def at(sub: str) -> tuple[int, str]:
        return spec.lines.get(sub, spec.line), f"{spec.key}.{sub}"

    try:
        where = at("_target_" if spec.target is not None else "policy")
        if spec.target is not None:
            if not any(spec.target == m or spec.target.startswith(m + ".") for m in allow_modules):
                raise ConfigError(
                    f"_target_ {spec.target!r} names code outside ctxsim's registry: allow its module "
                    "with --allow-module MODULE"
                )
            cfg = compose("raw", [], allow_modules)
            cfg["policy"] = {"_target_": spec.target, **spec.params}
        else:
            cfg = compose(spec.name, [], allow_modules)
            where = (spec.lines.get("params", spec.line), f"{spec.key}.params" if spec.params else spec.key)
            knobs = [k for k in cfg["policy"] if k != "_target_"]
            for k, v in spec.params.items():
                if k not in knobs:
                    where = at(f"params.{k}")
                    raise ConfigError(
                        f"policy '{spec.name}' has no knob '{k}'; knobs: {', '.join(knobs) or 'none'}"
                    )
                cfg["policy"][k] = v
        where = (spec.lines.get("params", spec.line), f"{spec.key}.params" if spec.params else spec.key)
        model = cfg.get("model") or {}
        for k, v in gate.model.items():
            if k not in model:
                where = (gate.lines.get("model") or spec.line, f"model.{k}")
                raise ConfigError(f"model has no key '{k}'; keys: {', '.join(model) or 'none'}")
            model[k] = v
        cfg["model"] = model
        policy = build_policy(cfg, allow_modules)
        return policy, model_window(cfg), model_behaviour(cfg)
    except CtxsimError as exc:
        raise GateError(gate.display, where[0], where[1], str(exc)) from None


def run_policy(gate: Gate, spec: PolicySpec, traces: list[Any], allow_modules=()) -> list[dict[str, Any]]:
    """One result row per trace of the suite (``sim.results.tables.result_row``), in suite order."""
    from sim.engine.dispatch import replay_table
    from sim.engine.model import ReplayModel
    from sim.results.tables import table_rows
    from sim.util.versions import ctxsim_version

    policy, window, behaviour = build_spec(gate, spec, tuple(allow_modules))
    pricing = None if gate.pricing in ("none", "null") else gate.pricing
    models = [ReplayModel(t, **behaviour) for t in traces]
    return table_rows(replay_table(traces, policy, models, window=window, pricing=pricing), ctxsim_version())


def load_suite(gate: Gate) -> list[Any]:
    from sim.sweep.scenario import load_scenario

    try:
        if gate.pricing not in ("auto", "none", "null"):
            from sim.cost.pricing import price_named

            price_named(gate.pricing)
        traces = list(load_scenario(_resolve_suite(gate)))
    except CtxsimError as exc:
        key = "pricing" if "pric" in str(exc).lower() and gate.pricing != "auto" else "suite"
        raise GateError(gate.display, gate.lines.get(key), key, str(exc)) from None
    if not traces:
        raise GateError(gate.display, gate.lines.get("suite"), "suite", f"'{gate.suite}' holds no traces")
    ids = [t.trace_id for t in traces]
    if len(set(ids)) != len(ids):
        raise GateError(gate.display, gate.lines.get("suite"), "suite", "trace ids repeat in the suite")
    return traces
