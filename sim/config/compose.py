"""Config composition as Hydra's Compose API composes (our own argument parsing and exit codes, no
outputs/): plain files and override values are merged here to the very dict Hydra gives, without
importing it (``plain_compose``, ``plain_overrides``); anything else goes through Hydra.

This is the trust boundary of configuration: a configuration never selects code to run.

- A policy is named by a plain name (``^[A-Za-z0-9_]+$``): a registered policy (built in, or declared by
  an installed package under the ``ctxsim.policies`` entry-point group) or a preset file directly in
  ``conf/policy/``. A name with a path separator or ``..`` is refused, so no YAML elsewhere on disk can be
  composed.
- Every policy file, and each file of its ``defaults`` chain, is checked before Hydra reads it
  (``check_policy_file``): Hydra would otherwise honour a ``# @package _global_`` directive or a
  ``hydra:`` key in it and instantiate whatever ``_target_`` it puts under ``hydra.callbacks``.
- ``build_policy`` builds a registered policy class, or a ``Policy`` subclass of a module allow-listed
  *on the command line*; the composed config has no say in what may be imported.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sim.util.errors import ConfigError, UnknownNameError
from sim.util.limits import MAX_COUNT
from sim.util.paths import CONF_DIR

if TYPE_CHECKING:
    from sim.policies.base import Policy


def registered() -> dict[str, type[Policy]]:
    """``sim.policies.base.registered``, imported when first asked: naming a preset, loading an
    experiment or a finished sweep's resume need no policy module (nor numpy)."""
    from sim.policies.base import registered as policies

    return policies()


POLICY_NAME = re.compile(r"[A-Za-z0-9_]+")  # fullmatch: no path separator, no '..', no '@package'
MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_HEADER_DIRECTIVE = re.compile(r"\s*#\s*@")  # Hydra reads '# @package X' (any '# @KEY VALUE') headers
INTERPOLATION = "${"
_FILE_KEYS_HELP = (
    "allowed: _target_ (a registered policy class, or a class of a module allowed on the command line "
    "with --allow-module / allow_modules=), defaults (names of files in conf/policy/, _self_) and the "
    "policy's knobs"
)


def _target_of(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def registered_name(target: Any) -> str | None:
    """The registered policy whose class ``target`` (``module.Class``) is, or None. A built-in's target
    is checked by importing its module alone; any other target against every registered class."""
    from sim.policies.base import builtin_class

    if not isinstance(target, str):
        return None
    module, _, _ = target.rpartition(".")
    if module.startswith("sim.policies."):
        cls = builtin_class(module.removeprefix("sim.policies."))
        if cls is not None and _target_of(cls) == target:
            return cls.name
    return next((name for name, c in registered().items() if _target_of(c) == target), None)


def policy_dir() -> Path:
    return CONF_DIR / "policy"


def policy_names() -> list[str]:
    """Selectable with ``--policy``: registered policies and presets (``conf/policy/NAME.yaml``)."""
    presets = (p.stem for p in policy_dir().glob("*.yaml") if POLICY_NAME.fullmatch(p.stem))
    return sorted({*registered(), *presets})


def check_policy_name(name: Any) -> str:
    """``name`` if it is a plain name of a registered policy or a preset; otherwise UnknownNameError
    listing the choices (a path, ``..`` or anything but ``[A-Za-z0-9_]`` is never a policy name)."""
    if isinstance(name, str) and POLICY_NAME.fullmatch(name) and (policy_dir() / f"{name}.yaml").is_file():
        return name  # a preset by definition: no need to import every policy module to say so
    names = policy_names()
    if not isinstance(name, str) or not POLICY_NAME.fullmatch(name) or name not in names:
        raise UnknownNameError("policy", str(name), names)
    return name


def check_allow_modules(modules: Iterable[str], option: str = "--allow-module") -> tuple[str, ...]:
    """Module names given on the command line: dotted Python identifiers only."""
    out = tuple(modules)
    for m in out:
        if not isinstance(m, str) or not MODULE_NAME.fullmatch(m):
            raise ConfigError(f"{option} {m!r}: not a module name (dotted Python identifiers)")
    return out


def _allowed(target: str, allow_modules: Sequence[str]) -> bool:
    return any(target == m or target.startswith(m + ".") for m in allow_modules)


def check_value(text: str, where: str) -> None:
    """An override value or a config string may not interpolate (``${hydra:runtime.cwd}``,
    ``${oc.env:HOME}``, ``${policy.n}``): OmegaConf would resolve it while composing."""
    if INTERPOLATION in text:
        raise ConfigError(f"{where}: '${{...}}' interpolation is not allowed; give the value itself")


def read_config_text(path: Path, source: str) -> str:
    """A config file's text, refused (ConfigError naming ``source``) above the YAML size cap or when it
    is not UTF-8, before it is read whole."""
    from sim.util.limits import MAX_YAML_BYTES

    try:
        if path.stat().st_size > MAX_YAML_BYTES:
            raise ConfigError(f"{source}: larger than {MAX_YAML_BYTES:,} bytes; not read")
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{source}: not UTF-8 text") from None
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read ({exc.strerror or exc})") from None


_COMMENT = "#[\t\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]*"  # YAML's printable
_PLAIN_LINE = re.compile(
    f"(?:{_COMMENT}|([a-z_][a-z0-9_]*): (true|false|0|[1-9][0-9]{{0,15}})(?: +{_COMMENT})?|)"
)
_PLAIN_VALUES = {"true": True, "false": False}


def plain_mapping(text: str) -> dict[str, Any] | None:
    """The mapping of a file made only of ``key: value`` lines (an integer or true/false, a comment may
    follow), comment lines and blank lines, read without the YAML parser: what ``sim.util.safeyaml.load_yaml``
    gives for it, None for anything else. Not folded into that reader: importing it (PyYAML and the
    bounded loader) costs 57-62 ms CPU, a fifth of a finished sweep's resume, which reads only
    conf/sweep/default.yaml."""
    out: dict[str, Any] = {}
    for line in text.split("\n"):
        m = _PLAIN_LINE.fullmatch(line)
        if m is None:
            return None
        key, value = m.groups()
        if key is None:
            continue
        if key in out:
            return None
        out[key] = _PLAIN_VALUES[value] if value in _PLAIN_VALUES else int(value)
    return out or None


def _walk(value: Any, path: str, source: str) -> None:
    """Below the top level: no ``_target_`` key, no interpolation in any key or string (explicit stack)."""
    stack = [(value, path)]
    while stack:
        v, p = stack.pop()
        if isinstance(v, dict):
            for k, sub in v.items():
                kp = f"{p}.{k}" if p else str(k)
                if k == "_target_":
                    raise ConfigError(
                        f"{source}: key '{kp}': a nested _target_ is not allowed; only the policy's own "
                        "_target_, at the top level"
                    )
                if isinstance(k, str) and INTERPOLATION in k:
                    raise ConfigError(f"{source}: key '{kp}': '${{...}}' interpolation is not allowed")
                stack.append((sub, kp))
        elif isinstance(v, list):
            stack.extend((sub, f"{p}[{i}]") for i, sub in enumerate(v))
        elif isinstance(v, str) and INTERPOLATION in v:
            raise ConfigError(f"{source}: key '{p}': '${{...}}' interpolation is not allowed; give the value")


def check_policy_file(name: str, allow_modules: Sequence[str] = ()) -> None:
    """Check ``conf/policy/NAME.yaml`` and every file of its ``defaults`` chain before Hydra reads them:
    a mapping; no ``# @package`` directive; no ``hydra`` or ``allow_modules`` key; ``defaults`` entries
    only ``_self_`` or names of other files in conf/policy/; a top-level ``_target_`` that is a registered
    policy class or in a module of ``allow_modules`` (the command line's); no nested ``_target_``; no
    ``${...}`` interpolation. ConfigError naming the file, the key and what is allowed."""
    from sim.util.safeyaml import load_yaml

    todo, seen = [name], set()
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        source = f"conf/policy/{n}.yaml"
        text = read_config_text(policy_dir() / f"{n}.yaml", source)
        for lineno, line in enumerate(text.splitlines(), 1):
            if _HEADER_DIRECTIVE.match(line.lstrip("\ufeff")):
                raise ConfigError(
                    f"{source}: line {lineno}: a '# @package' directive is not allowed: a policy file "
                    "configures its policy only"
                )
        data = load_yaml(text, source)
        if data is None:
            continue
        if not isinstance(data, dict):
            raise ConfigError(
                f"{source}: expected a mapping of knobs, got {type(data).__name__}; {_FILE_KEYS_HELP}"
            )
        for key in data:
            if not isinstance(key, str) or key in ("hydra", "allow_modules"):
                raise ConfigError(f"{source}: key '{key}' is not allowed in a policy file; {_FILE_KEYS_HELP}")
        defaults = data.get("defaults", [])
        if not isinstance(defaults, list):
            raise ConfigError(
                f"{source}: key 'defaults': expected a list of conf/policy file names and _self_"
            )
        for entry in defaults:
            if entry == "_self_":
                continue
            if not (
                isinstance(entry, str)
                and POLICY_NAME.fullmatch(entry)
                and (policy_dir() / f"{entry}.yaml").is_file()
            ):
                raise ConfigError(
                    f"{source}: key 'defaults': entry {entry!r} is not allowed; allowed: _self_ and names of "
                    "files in conf/policy/ (no paths, packages, groups or overrides)"
                )
            todo.append(entry)
        if "_target_" in data:
            target = data["_target_"]
            known = registered_name(target) is not None
            if not isinstance(target, str) or not (known or _allowed(target, allow_modules)):
                raise ConfigError(
                    f"{source}: key '_target_': {target!r} is not a registered policy class; a policy of "
                    "your own needs its module allowed on the command line (--allow-module MODULE, or "
                    "sweep allow_modules=MODULE)"
                )
        _walk({k: v for k, v in data.items() if k != "_target_"}, "", source)


def _store_registered(name: str) -> None:
    """A registered policy without a file of its own (an entry point of an installed package): its
    defaults as a node of Hydra's ConfigStore, so ``policy=NAME`` composes like a file would."""
    from hydra.core.config_store import ConfigStore

    from sim.policies.base import knobs

    cls = registered()[name]
    node: dict[str, Any] = {"_target_": _target_of(cls)}
    for f in knobs(cls):
        if f.default is not dataclasses.MISSING:
            node[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            node[f.name] = f.default_factory()
    try:
        ConfigStore.instance().store(group="policy", name=name, node=node)
    except Exception as exc:  # noqa: BLE001 - OmegaConf refuses a default it cannot hold
        raise ConfigError(f"policy '{name}': its knob defaults cannot be composed ({exc})") from None


def prepare_policy(name: str, allow_modules: Sequence[str] = ()) -> None:
    """Everything a policy name must pass before Hydra composes it (``compose`` and ``sweep -m``)."""
    check_policy_name(name)
    if (policy_dir() / f"{name}.yaml").is_file():
        check_policy_file(name, allow_modules)
    else:
        _store_registered(name)


def compose(policy: str, overrides: list[str], allow_modules: Sequence[str] = ()) -> dict[str, Any]:
    """Compose the root config with ``policy=<policy>`` and ``policy.KEY=VALUE`` / ``model.KEY=VALUE``
    overrides. ``policy`` names a registered policy or a preset file in ``conf/policy/`` (checked with
    ``check_policy_file``; ``allow_modules``, the command line's, lets its ``_target_`` name your class).
    The files are merged without Hydra when they and the overrides are plain (``plain_compose``), the very
    dict Hydra gives; anything else Hydra composes."""
    check_policy_name(policy)
    parsed = []
    for ov in overrides:
        key, sep, value = ov.partition("=")
        if not sep:
            raise ConfigError(f"override '{ov}' is not KEY=VALUE")
        group, _, knob = key.lstrip("+~").partition(".")
        if group not in ("policy", "model") or not knob:
            raise ConfigError(f"override '{ov}': only policy.KEY=VALUE and model.KEY=VALUE overrides")
        check_value(value, f"override '{ov}'")
        parsed.append((ov, group, knob))
    prepare_policy(policy, allow_modules)
    base = plain_compose(policy)
    if base is None:
        base = hydra_compose(policy, [])
    knob_names = [k for k in base["policy"] if k != "_target_"]
    model_keys = list(base.get("model") or {})
    parsed, overrides = _renamed_overrides(base, parsed, knob_names)
    for ov, group, knob in parsed:
        known = knob_names if group == "policy" else model_keys
        if knob not in known:
            raise ConfigError(
                f"override '{ov}': {group} '{policy if group == 'policy' else base['model'].get('name')}' "
                f"has no {'knob' if group == 'policy' else 'key'} '{knob}'; "
                f"{'knobs' if group == 'policy' else 'keys'}: {', '.join(known) or 'none'}"
            )
    if not overrides:
        return base
    cfg = plain_overrides(base, overrides)
    if cfg is None:
        cfg = hydra_compose(policy, overrides)
    # an override's value may be a mapping (policy.steps=[{...}]): no _target_ may hide in it
    _walk({k: v for k, v in (cfg.get("policy") or {}).items() if k != "_target_"}, "policy", "config")
    return cfg


def _renamed_overrides(base: dict[str, Any], parsed: list, knob_names: list[str]) -> tuple[list, list[str]]:
    """``policy.OLD=V`` of a knob renamed to the library's name (``Policy.knob_aliases``) as
    ``policy.NEW=V'``, with the deprecation warning ``make_policy`` gives for the same old name."""
    from sim.policies.base import policy_class, renamed_knobs

    name = registered_name(base["policy"].get("_target_"))
    aliases = policy_class(name).knob_aliases if name is not None else {}
    out, texts = [], []
    for ov, group, knob in parsed:
        if group == "policy" and knob not in knob_names and knob in aliases:
            key, _, value = ov.partition("=")
            ((new, mapped),) = renamed_knobs(policy_class(name), {knob: value}).items()
            ov = f"{key[: len(key) - len(knob)]}{new}={mapped}"
            knob = new
        out.append((ov, group, knob))
        texts.append(ov)
    return out, texts


def hydra_compose(policy: str, overrides: list[str]) -> dict[str, Any]:
    """The root config with ``policy=<policy>`` and ``overrides`` as Hydra's Compose API composes it (no
    checks here: ``compose`` made them)."""
    from hydra import compose as compose_api
    from hydra import initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
            cfg = compose_api(config_name="config", overrides=[f"policy={policy}", *overrides])
    except (HydraException, OmegaConfBaseException) as exc:
        first = str(exc).strip().splitlines()[0]
        raise ConfigError(f"config: {first}") from None
    return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]


# ------------------------------------------------------------------------------------------ plain compose
# Hydra's compose costs ~0.3 s of CPU a call (most of it composing Hydra's own ``hydra:`` node, which is
# dropped) and its import ~0.25 s, the bulk of a `ctxsim run`'s start. conf/ is small and checked, so
# within the subset below a plain merge of the YAML files gives the very dict Hydra gives (the same keys
# in the same order, the same values and types); outside it these return None and Hydra composes.
# tests/test_config.py holds both equal for every policy and preset and many override values.
# Not OmegaConf.create/merge without Hydra: importing omegaconf alone costs 83-107 ms CPU (its grammar
# parser), against 13-17 ms for this whole compose of a policy (measured; a merge itself is ~5 ms).
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PLAIN_TAGS = {f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null", "map", "seq")}
_UNSURE_START = tuple("-+.0123456789")  # plain text OmegaConf's YAML loader may read as a number (1e3)
_INT = re.compile(r"-?(?:0|[1-9][0-9]*)")
_FLOAT = re.compile(r"-?(?:0|[1-9][0-9]*)\.[0-9]+")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")  # one ID token of Hydra's grammar: a string
_WORDS = {"true": True, "false": False, "null": None}
_HYDRA_WORDS = ("true", "false", "null", "inf", "nan")  # Hydra's grammar reads these in any case


class _NotPlain(Exception):
    """Outside what the plain merge is sure to give as Hydra does."""


def _plain_file(path: Path, source: str) -> dict[str, Any]:
    """A conf file's mapping when OmegaConf reads the same values from it: no ``# @`` header, keys plain
    unique names, no plain scalar PyYAML leaves as text that OmegaConf may read as a number, no
    timestamp or other tag, no ``${``, no ``???``."""
    import yaml

    from sim.util.safeyaml import compose_yaml, load_yaml

    text = read_config_text(path, source)
    if any(_HEADER_DIRECTIVE.match(line.lstrip("\ufeff")) for line in text.splitlines()):
        raise _NotPlain
    stack = [compose_yaml(text, source)]
    while stack:
        node = stack.pop()
        if node is None:
            raise _NotPlain  # an empty file: Hydra may leave its group out
        if node.tag not in _PLAIN_TAGS:
            raise _NotPlain
        if isinstance(node, yaml.MappingNode):
            keys = [k.value for k, _ in node.value]
            if len(set(keys)) != len(keys):
                raise _NotPlain
            for k, v in node.value:
                if k.tag != "tag:yaml.org,2002:str" or not _KEY.fullmatch(k.value):
                    raise _NotPlain
                stack.append(v)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
        elif node.tag == "tag:yaml.org,2002:str" and (
            (node.style is None and node.value.startswith(_UNSURE_START))
            or INTERPOLATION in node.value
            or node.value == "???"
        ):
            raise _NotPlain
    data = load_yaml(text, source)
    if not isinstance(data, dict):
        raise _NotPlain
    return data


def _merge(into: dict[str, Any], data: dict[str, Any]) -> None:
    """OmegaConf's merge of untyped configs: mappings merge key by key (a new key goes last), anything
    else replaces. A mapping meeting a non-mapping is not plain."""
    for k, v in data.items():
        if isinstance(v, dict):
            if k in into and not isinstance(into[k], dict):
                raise _NotPlain
            _merge(into.setdefault(k, {}), v)
        else:
            if isinstance(into.get(k), dict):
                raise _NotPlain
            into[k] = _copy(v)


def _copy(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _copy(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_copy(x) for x in v]
    return v


def _plain_group(group: str, name: str, chain: tuple[str, ...] = ()) -> dict[str, Any]:
    """``conf/GROUP/NAME.yaml`` merged with its ``defaults`` (names of files of the same group and one
    ``_self_``), in order."""
    path = CONF_DIR / group / f"{name}.yaml"
    if name in chain or not POLICY_NAME.fullmatch(name) or not path.is_file():
        raise _NotPlain
    data = _plain_file(path, f"conf/{group}/{name}.yaml")
    defaults = data.pop("defaults", None)
    if defaults is None:
        return data
    if not isinstance(defaults, list) or defaults.count("_self_") != 1:
        raise _NotPlain  # without _self_ Hydra decides where the file's own keys go
    out: dict[str, Any] = {}
    for entry in defaults:
        if entry == "_self_":
            _merge(out, data)
        elif isinstance(entry, str):
            _merge(out, _plain_group(group, entry, (*chain, name)))
        else:
            raise _NotPlain
    return out


def plain_compose(policy: str) -> dict[str, Any] | None:
    """``hydra_compose(policy, [])`` without Hydra: the root config's groups (``policy`` set to
    ``policy``) merged in its defaults' order; None when anything is not plain (a registered policy
    without a file of its own included)."""
    try:
        root = _plain_file(CONF_DIR / "config.yaml", "conf/config.yaml")
        defaults = root.pop("defaults", None)
        if root or not isinstance(defaults, list) or defaults[-1:] != ["_self_"]:
            raise _NotPlain
        out: dict[str, Any] = {}
        for entry in defaults[:-1]:
            if not (isinstance(entry, dict) and len(entry) == 1):
                raise _NotPlain
            ((group, name),) = entry.items()
            if group not in ("policy", "model") or group in out or not isinstance(name, str):
                raise _NotPlain
            out[group] = _plain_group(group, policy if group == "policy" else name)
        if "policy" not in out:
            raise _NotPlain
        return out
    except _NotPlain:
        return None


def _plain_value(text: str) -> Any:
    """An override's value as Hydra's grammar types it, for the plain forms: an integer, a decimal
    number, true / false / null in lower case, a word (letters, digits, ``_``, ``-``)."""
    if text in _WORDS:
        return _WORDS[text]
    if text.lower() in _HYDRA_WORDS:
        raise _NotPlain
    if _INT.fullmatch(text):
        return int(text)
    if _FLOAT.fullmatch(text):
        return float(text)
    if _WORD.fullmatch(text):
        return text
    raise _NotPlain


def plain_overrides(base: dict[str, Any], overrides: Sequence[str]) -> dict[str, Any] | None:
    """``base`` (a composed config) with ``group.knob=value`` overrides of existing scalar keys, typed as
    Hydra types them, in order: what Hydra composes for them. None for any other override (a list or
    mapping value, quotes, ``+``/``~``, a nested key, a new key): Hydra composes those."""
    cfg = _copy(base)
    try:
        for ov in overrides:
            key, _, text = ov.partition("=")
            group, _, knob = key.partition(".")
            section = cfg.get(group)
            if group not in ("policy", "model") or not isinstance(section, dict) or not _KEY.fullmatch(knob):
                raise _NotPlain
            if knob not in section or knob == "_target_" or isinstance(section[knob], dict | list):
                raise _NotPlain
            section[knob] = _plain_value(text)
    except _NotPlain:
        return None
    return cfg


def build_policy(cfg: dict[str, Any], allow_modules: Sequence[str] = ()) -> Policy:
    """Instantiate the policy of a composed config: a registered policy class, or a Policy subclass from a
    module the user allow-listed on the command line (``--allow-module``, ``sweep allow_modules=``). The
    config itself never widens that list (an ``allow_modules`` key in it is ignored), and a ``_target_``
    nested in a knob's value is refused: a config's ``_target_`` alone never selects code to run."""
    from sim.policies.base import Policy, make_policy

    pcfg = dict(cfg.get("policy") or {})
    target = pcfg.pop("_target_", None)
    _walk(pcfg, "policy", "config")
    name = registered_name(target)
    if name is None:
        if isinstance(target, str) and _allowed(target, tuple(allow_modules)):
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
            + ", ".join(sorted(_target_of(c) for c in registered().values()))
            + " (a class of your own: allow its module with --allow-module MODULE)"
        )
    return make_policy(name, **pcfg)


def model_window(cfg: dict[str, Any]) -> int | str:
    """The window to replay with: the config's number, or "auto" (the trace's recorded model's)."""
    window = (cfg.get("model") or {}).get("window")
    if window is None:
        return "auto"
    if isinstance(window, bool) or not isinstance(window, int) or not 1 <= window <= MAX_COUNT:
        shown = (
            repr(window)
            if len(repr(window)) <= 40
            else f"{repr(window)[:20]}... ({len(repr(window))} digits)"
        )
        raise ConfigError(
            f"model.window={shown} is not null (the recorded model's) or an integer in [1, 2^53)"
        )
    return window


def model_behaviour(cfg: dict[str, Any]) -> dict[str, Any]:
    """The mock model's knobs (``on_missing``, ``summary_fact_tokens``, ``summarizer``,
    ``retrieval_recall``, ``max_turns``, ``reread_margin_tokens``), checked before any run."""
    from sim.engine.model import REREAD_MARGIN_TOKENS, check_behaviour

    m = cfg.get("model") or {}
    out = {
        "on_missing": m.get("on_missing", "refetch"),
        "summary_fact_tokens": m.get("summary_fact_tokens", 40),
        "summarizer": m.get("summarizer", "extractive"),
        "retrieval_recall": m.get("retrieval_recall", 1.0),
        "max_turns": m.get("max_turns"),
        "reread_margin_tokens": m.get("reread_margin_tokens", REREAD_MARGIN_TOKENS),
    }
    check_behaviour(**out)
    return out
