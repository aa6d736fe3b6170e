"""What a sweep is: its spec (policy, grid, scenario, pricing, where results go, how chunks run), from the
command line's ``KEY=VALUE`` words or an experiment file, and the grid's expansion into settings.

Everything here is checked before any run: an unknown key, a bad value or an unknown executor is exit 2
with one line, so a typo never sweeps the wrong thing.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim.util.errors import ConfigError, CtxsimError, UnknownNameError
from sim.util.forkmap import check_workers
from sim.util.paths import CONF_DIR, outside

DEFAULT_CHUNK = 64


EXECUTORS = ("pool", "ray")  # a closed choice: a word on the command line never names code to run


def _split_override(ov: str) -> tuple[str, str]:
    key, sep, value = ov.partition("=")
    if not sep or not key:
        raise ConfigError(f"override '{ov}' is not KEY=VALUE")
    return key, value


# The most runs (settings x traces) a sweep plans unless --max-settings (max_settings=N) raises it: each
# run holds a key, a label and a result row in memory and in the store, so a few kilobytes of experiment
# file (6 knobs x 60 values: 4.7e10 settings) could ask for more than any machine holds. Checked before
# the grid is expanded (its settings alone, from the value counts) and again once the traces are counted.
MAX_SETTINGS = 1_000_000


def _grid_keys(overrides: list[str]) -> dict[str, list[str]]:
    """Each key's values, as ``expand_grid`` takes them (a key given twice keeps its last values)."""
    keys: dict[str, list[str]] = {}
    for ov in overrides:
        key, value = _split_override(ov)
        values = value.split(",")
        if any(v == "" for v in values) and len(values) > 1:
            raise ConfigError(f"override '{ov}': empty value in the list")
        keys.pop(key, None)
        keys[key] = values
    return keys


def grid_size(overrides: list[str]) -> int:
    """How many settings ``expand_grid(overrides)`` gives, without making them."""
    return math.prod(len(v) for v in _grid_keys(overrides).values())


def check_grid_size(settings: int, traces: int | None, limit: int, where: str = "sweep") -> None:
    """A grid of ``settings`` over ``traces`` (None: not counted yet, at least one) is within ``limit``
    runs, else ConfigError naming both counts, the limit and the flag that raises it."""
    runs = settings * (traces or 1)
    if runs > limit:
        what = (
            f"{settings:,} settings (each run on at least one trace)"
            if traces is None
            else f"{settings:,} settings x {traces:,} traces = {runs:,} runs"
        )
        raise ConfigError(
            f"{where}: the grid is {what}, over the limit of {limit:,} runs (--max-settings N raises it)"
        )


def expand_grid(overrides: list[str]) -> list[list[str]]:
    """Hydra-style multirun values: ``policy.n=1,3,10`` stands for three settings; several such keys
    give the Cartesian product. Order is stable (keys as given, values as given; the last key varies
    fastest) because it decides chunk membership and the order of the progress line; results do not
    depend on it. A key given twice keeps its last value, as Hydra does."""
    keys = _grid_keys(overrides)
    if not keys:
        return [[]]
    return [
        [f"{k}={v}" for k, v in zip(keys, combo, strict=True)] for combo in itertools.product(*keys.values())
    ]


def _yaml_value(v: Any) -> str:
    """A YAML scalar as Hydra override text (null/true/false, numbers and strings as written)."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, list | tuple | dict):
        raise ConfigError(f"grid value {v!r}: only scalars can be swept")
    return str(v)


@dataclass(frozen=True)
class SweepSpec:
    """What to sweep. ``grid`` holds overrides as given (``policy.n=1,3,10``; single values are fixed
    overrides). ``scenario``: ``embedded`` (the repository's suite), a trace file or folder, or
    ``dataset:NAME_OR_PATH`` (canonical traces through Hugging Face ``datasets``)."""

    policy: str
    grid: tuple[str, ...] = ()
    scenario: str = "embedded"
    pricing: str = "auto"
    results: str | None = None  # default outputs/sweeps/<name or policy>
    chunk_size: int = DEFAULT_CHUNK
    csv: bool = False
    name: str | None = None
    composed: dict | None = None  # one setting already composed (a Hydra job): used as is, no grid
    allow_modules: tuple[str, ...] = ()  # modules whose Policy subclasses a policy _target_ may name
    skip_invalid: bool = False  # skip a grid point the policy refuses (with a note) instead of exit 2
    # what-if transforms before the policy (sim.transforms): (name, its transform.KEY=VALUE words)
    transforms: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # how chunks run; never a number of the results: "pool" (this machine's processes) or "ray"
    executor: str = "pool"
    ray_address: str | None = None  # executor=ray: "auto" or a cluster's address; None: a local Ray
    # the most runs (settings x traces) it plans: the command line's --max-settings, never a file's
    max_settings: int = MAX_SETTINGS

    @property
    def results_dir(self) -> Path:
        return Path(self.results) if self.results else Path("outputs") / "sweeps" / (self.name or self.policy)


def sweep_defaults() -> dict[str, Any]:
    """``conf/sweep/default.yaml``: workers, chunk_size, csv, for the command line to fill in."""
    from sim.config.compose import plain_mapping, read_config_text

    path, source = CONF_DIR / "sweep" / "default.yaml", "conf/sweep/default.yaml"
    data = None
    if path.is_file():
        text = read_config_text(path, source)
        data = plain_mapping(text)
        if data is None:  # not plain key: value lines: the YAML parser reads it
            from sim.util.safeyaml import load_yaml

            data = load_yaml(text, source)
    out: dict[str, Any] = {"workers": 1, "chunk_size": DEFAULT_CHUNK, "csv": False}
    if data is None:
        return out
    if not isinstance(data, dict) or sorted(set(data) - set(out)):
        raise ConfigError(f"conf/sweep/default.yaml: expected a mapping with keys {', '.join(out)}")
    for key in ("workers", "chunk_size"):
        v = data.get(key, out[key])
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ConfigError(f"conf/sweep/default.yaml: key '{key}': {v!r} is not an integer >= 1")
        out[key] = v
    if not isinstance(data.get("csv", False), bool):
        raise ConfigError(f"conf/sweep/default.yaml: key 'csv': {data['csv']!r} is not true or false")
    out["csv"] = data.get("csv", False)
    return out


EXPERIMENT_KEYS = (
    "name",
    "description",
    "policy",
    "grid",
    "overrides",
    "scenario",
    "pricing",
    "results",
    "chunk_size",
    "csv",
    "skip_invalid",
)


def load_experiment(name: str, results_given: bool = False) -> SweepSpec:
    """A whole study as data: ``conf/experiment/NAME.yaml`` (or a path to such a file) with ``policy``,
    ``grid`` (key: list of values), optional fixed ``overrides``, ``scenario``, ``pricing``, ``results``,
    ``chunk_size``, ``csv``. Unknown keys are refused so a typo does not silently sweep the wrong thing; every
    value is type-checked, the policy is a plain name (``sim.config.compose.check_policy_name``) and no value
    interpolates (``${...}``). An experiment file cannot allow modules: that is the command line's."""
    from sim.config.compose import check_policy_name, check_value
    from sim.util.safeyaml import load_yaml_file

    path = Path(name)
    if not (path.suffix in (".yaml", ".yml") and path.is_file()):
        path = CONF_DIR / "experiment" / f"{name}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in (CONF_DIR / "experiment").glob("*.yaml"))
        raise ConfigError(f"experiment '{name}': no such file; known: {', '.join(known) or 'none'}")
    src = f"experiment {path.name}"
    data = load_yaml_file(path, src)
    data = {} if data is None else data
    if not isinstance(data, dict):
        raise ConfigError(f"{src}: expected a mapping with keys {', '.join(EXPERIMENT_KEYS)}")
    extra = sorted(str(k) for k in set(data) - set(EXPERIMENT_KEYS))
    if extra:
        raise ConfigError(
            f"{src}: unknown keys {', '.join(extra)}; allowed: " + ", ".join(sorted(EXPERIMENT_KEYS))
        )
    if "policy" not in data:
        raise ConfigError(f"{src}: no 'policy'")

    def text(key: str, default: str | None = None, nullable: bool = False) -> str | None:
        v = data.get(key, default)
        if v is None and nullable:
            return None
        if not isinstance(v, str) or not v:
            raise ConfigError(f"{src}: key '{key}': expected a non-empty string, got {v!r}")
        check_value(v, f"{src}: key '{key}'")
        return v

    policy = text("policy")
    try:
        check_policy_name(policy)
    except CtxsimError as exc:
        raise ConfigError(f"{src}: key 'policy': {exc}") from None
    overrides = data.get("overrides") or []
    if not isinstance(overrides, list) or not all(isinstance(o, str) for o in overrides):
        raise ConfigError(f"{src}: key 'overrides': expected a list of KEY=VALUE strings")
    grid = []
    for o in overrides:
        check_value(o, f"{src}: key 'overrides': '{o}'")
        grid.append(o)
    grid_map = data.get("grid") or {}
    if not isinstance(grid_map, dict):
        raise ConfigError(f"{src}: key 'grid': expected a mapping of KEY: [VALUES]")
    for key, values in grid_map.items():
        values = values if isinstance(values, list) else [values]
        if not values:
            raise ConfigError(f"{src}: grid key '{key}' has no values")
        if not isinstance(key, str) or any(isinstance(v, str) and "${" in v for v in values):
            raise ConfigError(f"{src}: grid key '{key}': '${{...}}' interpolation is not allowed")
        try:
            grid.append(f"{key}=" + ",".join(_yaml_value(v) for v in values))
        except ConfigError as exc:
            raise ConfigError(f"{src}: grid key '{key}': {exc}") from None
    defaults = sweep_defaults()
    chunk = data.get("chunk_size", defaults["chunk_size"])
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
        raise ConfigError(f"{src}: key 'chunk_size': {chunk!r} is not an integer >= 1")
    csv = data.get("csv", defaults["csv"])
    if not isinstance(csv, bool):
        raise ConfigError(f"{src}: key 'csv': {csv!r} is not true or false")
    skip = data.get("skip_invalid", False)
    if not isinstance(skip, bool):
        raise ConfigError(f"{src}: key 'skip_invalid': {skip!r} is not true or false")
    if not isinstance(data.get("description", ""), str):
        raise ConfigError(f"{src}: key 'description': expected a string")
    results = text("results", None, nullable=True)
    # an experiment file (shared, downloaded) chooses no folder to create outside its own folder and the
    # current one; the command line's results.path= may name any (``results_given``)
    if results is not None and not results_given and outside(Path(results), [path.parent, Path.cwd()]):
        raise ConfigError(
            f"{src}: key 'results': {results!r} is outside the experiment file's folder and the current "
            "folder; an experiment file chooses no place outside them (name it on the command line: "
            "results.path=DIR)"
        )
    return SweepSpec(
        policy=policy,
        grid=tuple(grid),
        scenario=text("scenario", "embedded"),
        pricing=text("pricing", "auto"),
        results=results,
        chunk_size=chunk,
        csv=csv,
        name=text("name", None, nullable=True) or path.stem,
        skip_invalid=skip,
    )


SPEC_KEYS = (
    "scenario",
    "policy",
    "results.path",
    "workers",
    "experiment",
    "pricing",
    "chunk_size",
    "allow_modules",
    "executor",
    "ray.address",
    "max_settings",
)


_RAY_ADDRESS = re.compile(r"(ray://)?([A-Za-z0-9.-]+|\[[0-9A-Fa-f:]+\]):[0-9]{1,5}\Z")


def check_executor(executor: str, address: str | None) -> None:
    """``executor=`` is one of EXECUTORS (else exit 2 with the choices and the closest); ``ray.address=``
    is ``auto``, ``HOST:PORT`` or ``ray://HOST:PORT``, and only with ``executor=ray``."""
    if executor not in EXECUTORS:
        raise UnknownNameError("executor", executor, EXECUTORS)
    if address is None:
        return
    if executor != "ray":
        raise ConfigError(f"sweep: 'ray.address={address}' needs executor=ray")
    if address != "auto" and not _RAY_ADDRESS.match(address):
        raise ConfigError(
            f"sweep: 'ray.address={address}': expected auto, HOST:PORT or ray://HOST:PORT "
            "(leave it out to start a local Ray)"
        )


def transform_specs(items: Iterable[str]) -> list[tuple[str, list[str]]]:
    """The ``transform=NAME`` words of a sweep, each with the ``transform.KEY=VALUE`` words after it, in
    order (repeatable); the other words are left for the caller."""
    transforms: list[tuple[str, list[str]]] = []
    for it in items:
        key, value = _split_override(it)
        if key == "transform":
            transforms.append((value, []))
        elif key.startswith("transform."):
            if not transforms:
                raise ConfigError(f"sweep: '{it}': a transform.KEY=VALUE follows the transform=NAME it sets")
            transforms[-1][1].append(it)
    return transforms


def spec_from_args(
    items: Iterable[str], csv: bool = False, skip_invalid: bool = False
) -> tuple[SweepSpec, int]:
    """The command line's ``KEY=VALUE`` words (``scenario=``, ``policy=``, ``results.path=``,
    ``workers=``, ``experiment=``, ``pricing=``, ``chunk_size=``, ``executor=pool|ray``,
    ``ray.address=``; ``policy.*``/``model.*`` are grid overrides) into a spec and a worker count. Words
    given next to ``experiment=`` override or extend the experiment file, so one study can be rerun with
    a different scenario or more values. ``allow_modules=MOD,...`` is the only way a sweep lets a policy
    ``_target_`` name code of yours. With ``executor=ray`` and no address, ``workers`` is the local
    Ray's CPU count."""
    from sim.config.compose import check_allow_modules, check_policy_name, check_value

    defaults = sweep_defaults()
    top: dict[str, str] = {}
    grid: list[str] = []
    transforms = transform_specs(items)
    for it in items:
        key, value = _split_override(it)
        check_value(value, f"sweep: '{it}'")
        if key == "transform" or key.startswith("transform."):
            continue  # transform_specs read them
        elif key in SPEC_KEYS:
            top[key] = value
        elif key.lstrip("+~").split(".", 1)[0] in ("policy", "model"):
            grid.append(it)
        else:
            raise ConfigError(
                f"sweep: '{it}' is not one of {', '.join(k + '=' for k in SPEC_KEYS)} or a "
                "policy.KEY=V1,V2 / model.KEY=V override"
            )
    if "experiment" in top:
        base = load_experiment(top["experiment"], results_given="results.path" in top)
    elif "policy" in top:
        base = SweepSpec(
            policy=top["policy"], chunk_size=int(defaults["chunk_size"]), csv=bool(defaults["csv"])
        )
    else:
        raise ConfigError("sweep: give policy=NAME or experiment=NAME")
    try:
        workers = int(top.get("workers", defaults["workers"]))
        chunk = int(top.get("chunk_size", base.chunk_size))
    except ValueError as exc:
        raise ConfigError(f"sweep: workers and chunk_size are integers ({exc})") from None
    check_workers(workers, as_word=True)  # the rule --workers is held to (sim.util.forkmap)
    max_settings = MAX_SETTINGS
    if "max_settings" in top:
        text = top["max_settings"]
        if not (text.isdigit() and 1 <= int(text) <= 2**53 - 1):
            raise ConfigError(f"sweep: max_settings={text[:40]}: expected an integer in [1, 2^53)")
        max_settings = int(text)
    if chunk < 1:
        raise ConfigError("sweep: chunk_size must be >= 1")
    if "policy" in top:
        check_policy_name(top["policy"])
    allow = check_allow_modules(
        (m for m in top.get("allow_modules", "").split(",") if m), "sweep: allow_modules="
    )
    executor, address = top.get("executor", "pool"), top.get("ray.address")
    check_executor(executor, address)
    spec = SweepSpec(
        policy=top.get("policy", base.policy),
        grid=(*base.grid, *grid),
        scenario=top.get("scenario", base.scenario),
        pricing=top.get("pricing", base.pricing),
        results=top.get("results.path", base.results),
        chunk_size=chunk,
        csv=csv or base.csv,
        name=base.name,
        allow_modules=allow,
        skip_invalid=skip_invalid or base.skip_invalid,
        transforms=tuple((name, tuple(ovs)) for name, ovs in transforms),
        executor=executor,
        ray_address=address,
        max_settings=max_settings,
    )
    check_grid_size(grid_size(list(spec.grid)), None, max_settings)  # before anything is expanded
    return spec, workers
