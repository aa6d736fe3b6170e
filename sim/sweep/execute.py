"""Parameter sweeps: one policy over a grid of knob settings and a set of traces, resumable and parallel.

A sweep is many independent (setting, trace) runs. Each run is named by a ``run_key``: a sha256 over the
trace's content hash and everything that decides the run's numbers (policy, every knob, the mock model's
config, the pricing choice, ctxsim's version). Results are written in chunks, each chunk one Parquet file
under ``DIR/parts/`` that appears atomically (temporary name, then ``os.replace``), so after an
interruption at any moment, even SIGKILL, every part on disk is whole, and a rerun of the same command
skips every key it finds there and redoes only the unfinished chunks. ``DIR/results.parquet`` is merged
from the parts at the end and sorted by ``run_key``: its content does not depend on the worker count,
the chunk size or how often the sweep was interrupted. Several sweeps may share ``DIR`` at once, and a
damaged part is set aside and its runs redone (``sim.results.store``).

Chunks run in this process (``workers=1``), over a pool of forked processes (``workers=N``) or as Ray
tasks (``executor=ray``, ``sim.sweep.rayexec``). Whoever runs a chunk writes its part and hands back its run
keys with the table it wrote (``sim.results.store.Part``: Arrow IPC), so the merge of a first sweep reads no
part back; the traces' content hashes come from the parent (a forked worker inherits them, any other
worker loads the scenario, checks that its bytes are the parent's and takes the parent's hashes), and
the parent takes them from a canonical file's record of its hashes (``sim.trace.storedhashes``) when it has a
valid one, loading no trace to plan. A rerun of a finished sweep whose receipt still vouches for
results.parquet stops there (``sim.sweep.plandigest``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import re
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim.results.store import PARTS, RESULTS, KeyLabels
from sim.util.errors import ConfigError, CtxsimError, UnknownNameError
from sim.util.interrupts import ReportedInterrupt, remembered_interrupts
from sim.util.paths import CONF_DIR, EMBEDDED_SUITE, REPO

DEFAULT_CHUNK = 64
EXECUTORS = ("pool", "ray")  # a closed choice: a word on the command line never names code to run


# ------------------------------------------------------------------------------------------------ grid
def _split_override(ov: str) -> tuple[str, str]:
    key, sep, value = ov.partition("=")
    if not sep or not key:
        raise ConfigError(f"override '{ov}' is not KEY=VALUE")
    return key, value


def expand_grid(overrides: list[str]) -> list[list[str]]:
    """Hydra-style multirun values: ``policy.n=1,3,10`` stands for three settings; several such keys
    give the Cartesian product. Order is stable (keys as given, values as given; the last key varies
    fastest) because it decides chunk membership and the order of the progress line; results do not
    depend on it. A key given twice keeps its last value, as Hydra does."""
    keys: dict[str, list[str]] = {}
    for ov in overrides:
        key, value = _split_override(ov)
        values = value.split(",")
        if any(v == "" for v in values) and len(values) > 1:
            raise ConfigError(f"override '{ov}': empty value in the list")
        keys.pop(key, None)
        keys[key] = values
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


# ------------------------------------------------------------------------------------------------ spec
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


def load_experiment(name: str) -> SweepSpec:
    """A whole study as data: ``conf/experiment/NAME.yaml`` (or a path to such a file) with ``policy``,
    ``grid`` (key: list of values), optional fixed ``overrides``, ``scenario``, ``pricing``, ``results``,
    ``chunk_size``, ``csv``. Unknown keys are refused so a typo does not silently sweep the wrong thing;
    every value is type-checked, the policy is a plain name (``sim.config.compose.check_policy_name``) and no
    value
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
    return SweepSpec(
        policy=policy,
        grid=tuple(grid),
        scenario=text("scenario", "embedded"),
        pricing=text("pricing", "auto"),
        results=text("results", None, nullable=True),
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
        base = load_experiment(top["experiment"])
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
    if workers < 1 or chunk < 1:
        raise ConfigError("sweep: workers and chunk_size must be >= 1")
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
    )
    return spec, workers


# ------------------------------------------------------------------------------------------------- key
def _key_blob(
    trace_hash: str, policy_name: str, params: dict[str, Any], model_cfg: dict, pricing, version: str
) -> str:
    """The canonical JSON a run key hashes (sorted keys, no whitespace)."""
    return json.dumps(
        {
            "trace_hash": trace_hash,
            "policy": policy_name,
            "params": params,
            "model": model_cfg,
            "pricing": pricing,
            "version": version,
        },
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
    )


def run_key(
    trace_hash: str,
    policy_name: str,
    params: dict[str, Any],
    model_cfg: dict[str, Any],
    pricing: str | None,
    version: str,
) -> str:
    """The identity of one run: sha256 over canonical JSON (sorted keys, no whitespace). Never Python's
    ``hash()``, which is salted per process: keys must agree across workers, reruns and machines."""
    blob = _key_blob(trace_hash, policy_name, params, model_cfg, pricing, version)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def run_keys(
    trace_hashes: list[str],
    policy_name: str,
    params: dict[str, Any],
    model_cfg: dict[str, Any],
    pricing: str | None,
    version: str,
    encoded: list[bytes] | None = None,
) -> list[str]:
    """``run_key`` of each trace hash under one setting, byte for byte the same blob, without encoding
    the setting again per trace: the canonical JSON is the same up to the trace hash, so its sha256 state
    before the hash is computed once and copied (200,000 keys: 3 s down to ~0.3 s). ``encoded``: the
    hashes as ``encoded_hashes`` gives them, when the caller keys many settings over the same traces."""
    template = _key_blob("", policy_name, params, model_cfg, pricing, version)
    # sorted keys: "trace_hash" is the last key but "version" (a plain string), so the last occurrence
    # of its empty value is the top-level one even if a knob's value holds the same text
    head, mark, tail = template.rpartition('"trace_hash":""')
    if not mark:  # json.dumps always writes the key; this would be a bug, not bad input
        raise RuntimeError(f"run_keys: no trace_hash in {template[:200]}")
    start = hashlib.sha256((head + '"trace_hash":').encode("utf-8"))
    end = tail.encode("utf-8")
    out = []
    for h in encoded_hashes(trace_hashes) if encoded is None else encoded:
        d = start.copy()
        d.update(h)
        d.update(end)
        out.append(d.hexdigest())
    return out


def encoded_hashes(trace_hashes: list[str]) -> list[bytes]:
    """Each trace hash as its run key's JSON holds it (the same for every setting)."""
    return [json.dumps(h, ensure_ascii=False).encode("utf-8") for h in trace_hashes]


# -------------------------------------------------------------------------------------------- scenario
def load_scenario(scenario: str) -> Iterator[Any]:
    """The traces a scenario names, in a fixed order (the order indices in work units refer to)."""
    if scenario == "embedded":
        from sim.importers import load_paths

        return load_paths([EMBEDDED_SUITE])
    if scenario == "conversation":  # the generator's 5-run conversation, as `run --scenario conversation`
        from scenarios.conversation import conversation

        return iter([conversation()])
    if scenario.startswith("dataset:"):
        from sim.trace.io import load_dataset_traces

        return load_dataset_traces(scenario.removeprefix("dataset:"))
    path = Path(scenario)
    if not path.exists() and not path.is_absolute() and (REPO / path).exists():
        path = REPO / path
    if not path.exists():
        raise ConfigError(
            f"scenario '{scenario}': not 'embedded', 'conversation', 'dataset:NAME_OR_PATH' or an existing "
            "file or folder"
        )
    from sim.importers import load_paths

    return load_paths([path])


_TRACES: dict[str, tuple[str | None, list[Any]]] = {}


def _traces(scenario: str, digest: str | None = None) -> list[Any]:
    """One load per process and scenario content: a forked worker inherits the parent's traces (and
    their hashes); any other process loads them itself. With ``digest`` (``sim.sweep.plandigest``: the bytes
    the parent read), the scenario's bytes must still be those after the load, else the scenario
    changed during the sweep (exit 2): then the parent's hashes are the hashes of these traces."""
    from sim.sweep.plandigest import scenario_digest

    held = _TRACES.get(scenario)
    if held is not None and (digest is None or held[0] == digest):
        return held[1]
    traces = list(load_scenario(scenario))
    if digest is not None and scenario_digest(scenario) != digest:
        raise ConfigError(f"scenario {scenario}: its files changed during the sweep; run the sweep again")
    _TRACES[scenario] = (digest, traces)
    return traces


# ----------------------------------------------------------------------------------------------- units
@dataclass(frozen=True)
class Setting:
    """One point of the grid: its overrides and the composed config (small and picklable)."""

    overrides: tuple[str, ...]
    cfg: dict[str, Any]
    name: str  # the registered policy (a preset resolves to it)
    params: dict[str, Any]  # every knob, as the result row's policy.<knob> columns hold them
    allow_modules: tuple[str, ...] = ()  # from the command line: modules a _target_ may name


@dataclass(frozen=True)
class Chunk:
    """A work unit: a setting and the (trace index, run key) pairs it runs. Nothing big inside."""

    scenario: str
    pricing: str
    setting: Setting
    runs: tuple[tuple[int, str, str], ...]  # (trace index, run key, expected trace hash)
    scenario_digest: str | None = None  # the bytes of the scenario the hashes are of (sim.sweep.plandigest)


def _compose_fast(policy: str, base: dict[str, Any], ovs: list[str]) -> dict[str, Any] | None:
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


def _settings(
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
    grid = expand_grid(list(spec.grid)) if grid is None else grid
    base = compose(spec.policy, [], allow)
    out = []
    for i, ovs in enumerate(grid):
        # the first point always goes through compose: it checks every key against the config
        cfg = (None if i == 0 else _compose_fast(spec.policy, base, ovs)) or compose(spec.policy, ovs, allow)
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
    return len(_settings(spec, log, grid))


def _hashed(traces: list[Any], chunk: Chunk) -> list[Any]:
    """The chunk's traces, each holding the parent's content hash: inherited under fork, taken from the
    chunk when the scenario's bytes were checked against the parent's, computed only without a digest
    (a ``dataset:`` scenario). A trace that holds another hash changed during the sweep (exit 2)."""
    from sim.trace.codec import trace_hash

    out = []
    for index, _, expected in chunk.runs:
        t = traces[index]
        got = t.derived("trace_hash", (lambda _t, h=expected: h) if chunk.scenario_digest else trace_hash)
        if got != expected:
            raise ConfigError(f"scenario {chunk.scenario}: trace {index} changed during the sweep")
        out.append(t)
    return out


def _chunk_inputs(chunk: Chunk) -> tuple[list[Any], list[Any], int | str, str | None]:
    """What replaying a chunk takes besides its policy: its traces (each holding the parent's hash),
    their models, the window and the pricing, the setting's transforms applied."""
    from sim.config.compose import model_behaviour, model_window
    from sim.engine.model import ReplayModel

    cfg = chunk.setting.cfg
    window, behaviour = model_window(cfg), model_behaviour(cfg)
    pricing = None if chunk.pricing in ("none", "null") else chunk.pricing
    batch = _hashed(_traces(chunk.scenario, chunk.scenario_digest), chunk)
    models = [ReplayModel(t, **behaviour) for t in batch]  # _hashed checked each trace's hash
    if cfg.get("transforms"):
        from sim.transforms.base import apply_all, make_transform

        steps = [make_transform(**step) for step in cfg["transforms"]]
        batch = [apply_all(t, steps, m) for t, m in zip(batch, models, strict=True)]
        models = [m.like(t) for t, m in zip(batch, models, strict=True)]
    return batch, models, window, pricing


def _run_chunk(chunk: Chunk) -> list[dict[str, Any]]:
    """Replay one chunk and return its rows. Runs in a worker process when workers > 1."""
    from sim.config.compose import build_policy
    from sim.engine.dispatch import replay_table

    policy = build_policy(chunk.setting.cfg, chunk.setting.allow_modules)
    batch, models, window, pricing = _chunk_inputs(chunk)
    return _chunk_rows(chunk, replay_table(batch, policy, models, window=window, pricing=pricing))


def _run_lane_chunks(chunks: tuple[Chunk, ...]) -> list[list[dict[str, Any]]]:
    """Replay chunks of one lane unit (``lane_units``: the same runs, seed-engine settings that differ
    only in ``context_token_limit`` / ``keep_recent_tokens``, no transforms) together: every setting's
    lanes advance at once (``sim.engine.dispatch.replay_tables``). Each chunk's rows are the ones
    ``_run_chunk``
    gives it."""
    from sim.config.compose import build_policy
    from sim.engine.dispatch import replay_tables

    policies = [build_policy(c.setting.cfg, c.setting.allow_modules) for c in chunks]
    batch, models, window, pricing = _chunk_inputs(chunks[0])  # the unit's chunks share all of it
    tables = replay_tables(batch, policies, models, window=window, pricing=pricing)
    return [_chunk_rows(c, t) for c, t in zip(chunks, tables, strict=True)]


def _chunk_rows(chunk: Chunk, replays) -> list[dict[str, Any]]:
    """A chunk's result rows from its replays (a ``sim.engine.dispatch.ReplayTable``): run key, scenario, the
    pricing setting, the model knobs and the setting beside each run's row."""
    from sim.results.tables import table_rows
    from sim.util.versions import ctxsim_version

    cfg = chunk.setting.cfg
    rows = []
    for (_, key, _), result in zip(chunk.runs, table_rows(replays, ctxsim_version()), strict=True):
        row = {"run_key": key, **result}
        row["scenario"] = chunk.scenario
        row["pricing_setting"] = chunk.pricing
        for k, v in (cfg.get("model") or {}).items():
            row[f"model.{k}"] = v
        row["setting"] = " ".join(chunk.setting.overrides)
        rows.append(row)
    return rows


def _run_and_save(chunk: Chunk, parts_dir: str):
    """Run one chunk and write its part where it runs; the part's path, keys, stat and table travel back
    (a worker used to send every row as Python dicts, and the parent wrote every part one at a time)."""
    from sim.results import store as store

    return store.write_part(Path(parts_dir), _run_chunk(chunk))


def _run_and_save_unit(unit: tuple[Chunk, ...], parts_dir: str) -> list:
    """``_run_and_save`` of each chunk of a lane unit (``lane_units``), replayed together: the same
    parts, one a chunk."""
    from sim.results import store as store

    if len(unit) == 1:
        return [_run_and_save(unit[0], parts_dir)]
    return [store.write_part(Path(parts_dir), rows) for rows in _run_lane_chunks(unit)]


LANE_GRID_KNOBS = ("context_token_limit", "keep_recent_tokens")  # sim.engine.fast.seed_grid.GRID_KNOBS


def _lane_key(chunk: Chunk) -> str | None:
    """What chunks replayed together as lanes share: the runs and every part of the config but the grid
    knobs (None: a chunk the lanes never take, replayed on its own)."""
    cfg = chunk.setting.cfg
    if chunk.setting.name != "seed_engine" or cfg.get("transforms"):
        return None
    policy = {k: v for k, v in (cfg.get("policy") or {}).items() if k not in LANE_GRID_KNOBS}
    rest = {k: v for k, v in cfg.items() if k != "policy"}
    runs = [index for index, _, _ in chunk.runs]
    shared = [chunk.scenario, chunk.pricing, chunk.scenario_digest, chunk.setting.allow_modules, runs]
    return json.dumps([shared, policy, rest], sort_keys=True, default=repr)


def lane_units(todo: list[Chunk], workers: int = 0) -> list[tuple[Chunk, ...]]:
    """The chunks as work units: seed-engine chunks of the same runs whose settings differ only in the
    grid knobs go together (up to ``sim.engine.dispatch.LANES`` lanes a unit, and at least two units a worker
    while there are enough), every other chunk on its own. Order: each unit at its first chunk's place."""
    from sim.engine.dispatch import LANES

    groups: dict[str, list[Chunk]] = {}
    units: list[list[Chunk]] = []
    for c in todo:
        key = _lane_key(c)
        if key is None:
            units.append([c])
        elif key in groups:
            groups[key].append(c)
        else:
            groups[key] = [c]
            units.append(groups[key])
    out: list[tuple[Chunk, ...]] = []
    for u in units:
        size = max(1, LANES // max(len(u[0].runs), 1))
        if workers > 1:  # enough units to keep every worker busy
            size = min(size, max(1, -(-len(u) // (2 * workers))))
        out.extend(tuple(u[j : j + size]) for j in range(0, len(u), size))
    return out


# -------------------------------------------------------------------------------------------- progress
class Progress:
    """``done/total``, rate and ETA on stderr: one line redrawn with ``\\r`` on a terminal, otherwise a
    line every ~10% so logs of long sweeps show progress without flooding."""

    def __init__(self, total: int, done: int, enabled: bool = True, stream=None) -> None:
        self.total, self.done, self.start_done = total, done, done
        self.stream = stream or sys.stderr
        self.enabled = enabled and total > 0
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.t0 = time.monotonic()
        self.next_mark = done + max(1, total // 10)

    def line(self) -> str:
        elapsed = time.monotonic() - self.t0
        ran = self.done - self.start_done
        rate = ran / elapsed if elapsed > 0 else 0.0
        eta = (self.total - self.done) / rate if rate > 0 else float("nan")
        eta_s = f"{eta:,.0f}s" if eta == eta else "?"
        return f"sweep: {self.done}/{self.total} runs, {rate:,.1f} runs/s, ETA {eta_s}"

    def update(self, n: int) -> None:
        self.done += n
        if not self.enabled:
            return
        if self.tty:
            end = "\n" if self.done >= self.total else ""
            print("\r" + self.line(), end=end, file=self.stream, flush=True)
        elif self.done >= self.next_mark or self.done >= self.total:
            print(self.line(), file=self.stream, flush=True)
            self.next_mark = self.done + max(1, self.total // 10)


def _note(msg: str) -> None:
    print(f"ctxsim: sweep: {msg}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------------------------- sweep
@dataclass(frozen=True)
class SweepRuns:
    """Every run of a sweep in grid order: per valid setting, its (trace index, run key, trace hash)."""

    spec: SweepSpec
    settings: tuple[tuple[Setting, tuple[tuple[int, str, str], ...]], ...]
    scenario_digest: str | None = None  # the scenario's bytes the hashes are of (sim.sweep.plandigest)
    notes: tuple[str, ...] = ()  # what planning said (settings skipped), for a rerun to say again

    def keys(self) -> list[str]:
        """Every run key in grid order; a key repeats when trace content and config are identical."""
        return [key for _, runs in self.settings for _, key, _ in runs]

    def labels(self) -> KeyLabels:
        """(scenario, setting) of each key, from the first setting that names it: what this sweep writes
        into results.parquet, whichever writer's part the row's numbers come from
        (``sim.results.store.KeyLabels``: a key's label, or a whole column's at once)."""
        texts = [(self.spec.scenario, " ".join(s.overrides)) for s, _ in self.settings]
        which = [i for i, (_, runs) in enumerate(self.settings) for _ in runs]
        return KeyLabels(self.keys(), which, texts)

    def chunks(self, done: Iterable[str]) -> list[Chunk]:
        """The runs whose keys are not in ``done``, ``chunk_size`` at a time within a setting; a key that
        repeats is run once."""
        seen = set(done)
        todo: list[Chunk] = []
        for s, runs in self.settings:
            pending = []
            for run in runs:
                if run[1] not in seen:
                    seen.add(run[1])
                    pending.append(run)
            for j in range(0, len(pending), self.spec.chunk_size):
                todo.append(
                    Chunk(
                        self.spec.scenario,
                        self.spec.pricing,
                        s,
                        tuple(pending[j : j + self.spec.chunk_size]),
                        self.scenario_digest,
                    )
                )
        return todo


def plan(spec: SweepSpec, log: Callable[[str], None] = _note, digest: str | None = None) -> SweepRuns:
    """The sweep's runs: settings composed (invalid ones skipped with a note), run keys computed. Every
    check that can fail for the whole sweep fails here, before any run. ``digest``: the scenario's
    ``scenario_digest`` when the caller took it already."""
    from sim.cost.pricing import price_named
    from sim.sweep.plandigest import scenario_digest
    from sim.trace.codec import trace_hash
    from sim.util.versions import ctxsim_version

    if spec.pricing not in ("auto", "none", "null"):
        price_named(spec.pricing)  # an unknown model name fails before any run
    if spec.chunk_size < 1:
        raise ConfigError("sweep: chunk_size must be >= 1")
    check_executor(spec.executor, spec.ray_address)
    notes: list[str] = []
    settings = _settings(spec, lambda msg: notes.append(msg) or log(msg))
    digest = digest or scenario_digest(spec.scenario)
    hashes = recorded_hashes(spec.scenario, digest)
    if hashes is None:  # memoised on each trace: forked workers inherit them instead of hashing again
        hashes = [t.derived("trace_hash", trace_hash) for t in _traces(spec.scenario, digest)]
    if not hashes:
        raise ConfigError(f"scenario '{spec.scenario}' holds no traces")
    encoded = encoded_hashes(hashes)  # once, not once per setting
    out = []
    for s in settings:
        model = s.cfg.get("model") or {}
        # a setting with transforms keys its runs by them too (without, the keys are as they were)
        params = {**s.params, "transforms": s.cfg["transforms"]} if s.cfg.get("transforms") else s.params
        keys = run_keys(hashes, s.name, params, model, spec.pricing, ctxsim_version(), encoded)
        out.append((s, tuple(zip(range(len(hashes)), keys, hashes, strict=True))))
    return SweepRuns(spec, tuple(out), digest, tuple(notes))


def recorded_hashes(scenario: str, digest: str | None) -> list[str] | None:
    """The trace hashes of a scenario that is one canonical trace file with a valid record of its hashes
    (``sim.trace.storedhashes``), taken without loading a trace: planning needs only the hashes (loading 500
    traces for them cost ~1.5 s of a 4.4 s receipt-less rerun), and whoever runs a chunk loads the
    traces then. The record vouches only for the bytes it was written for, and ``digest`` (the
    scenario's ``sim.sweep.plandigest`` digest the plan is keyed by) must be of those very bytes too, read
    through the same handle. None otherwise (a folder, another format, no or a stale record): load."""
    from sim.sweep.plandigest import open_file_digest, scenario_path
    from sim.trace.io import iter_jsonl, iter_parquet
    from sim.trace.storedhashes import stored_hashes

    path = None if digest is None else scenario_path(scenario)
    if path is None or not path.is_file():
        return None
    from sim.importers import detect

    try:
        if detect(path).load not in (iter_jsonl, iter_parquet):  # the importer loading would take
            return None
        with open(path, "rb") as f:
            hashes = stored_hashes(path, f)
            if hashes is None or open_file_digest(path.name, f) != digest:
                return None
    except (OSError, CtxsimError):  # unreadable or no format: loading says so
        return None
    return hashes


def _init_worker(scenario: str, digest: str | None) -> None:
    """Worker start: load the scenario once (inherited for free under fork)."""
    _traces(scenario, digest)


_MERGE_ROUNDS = 3  # a part found damaged only at the merge's full read: its runs are redone, then merged


def _finished(spec: SweepSpec, plan_id: str | None) -> Path | None:
    """results.parquet when its receipt vouches that it is this plan's finished merge (nothing to
    compose, load, hash, read or write); the plan's notes are said again, as a full rerun says them."""
    from sim.results import store as store

    if plan_id is None:
        return None
    receipt = store.receipt_vouches(spec.results_dir, plan_id)
    if receipt is None:
        return None
    for msg in receipt.get("notes", ()):
        _note(str(msg))
    total, repeats = int(receipt.get("total", 0)), int(receipt.get("repeats", 0))
    if repeats:
        _note(f"{repeats} runs repeat another run exactly (same trace content and config)")
    _note(f"resuming: {total} of {total} runs already in {spec.results_dir / PARTS}")
    results = spec.results_dir / RESULTS
    if spec.csv:
        from sim.results.tables import write_rows

        write_rows(store.read_rows(results), spec.results_dir / "results.csv")
    return results


def run_sweep(spec: SweepSpec, workers: int = 1, progress: bool = True, merge: bool = True) -> Path:
    """Run every (setting, trace) pair of ``spec`` not already finished under ``spec.results_dir``;
    returns the path of the merged ``results.parquet``. Interrupt it at any moment and run it again
    with the same spec: finished chunks are kept, the rest is redone. Other sweeps may write the same
    folder at the same time; a rerun of a finished sweep whose results.parquet is current only checks."""
    with remembered_interrupts() as check:  # a Ctrl-C swallowed by a finalizer still stops the sweep
        return _run_sweep(spec, workers, progress, merge, check)


def _run_sweep(spec: SweepSpec, workers: int, progress: bool, merge: bool, check: Callable[[], None]) -> Path:
    from sim.results import store as store
    from sim.sweep.plandigest import plan_digest, scenario_digest
    from sim.util.versions import ctxsim_version

    check_executor(spec.executor, spec.ray_address)
    out = spec.results_dir
    parts_dir = out / PARTS
    scenario = scenario_digest(spec.scenario)  # read once: the receipt and the plan both need it
    plan_id = plan_digest(spec, ctxsim_version(), scenario) if merge else None
    done = _finished(spec, plan_id)
    if done is not None:
        return done
    runs = plan(spec, digest=scenario)
    all_keys = runs.keys()
    wanted = set(all_keys)
    total = len(wanted)
    repeats = len(all_keys) - total
    if repeats:
        _note(f"{repeats} runs repeat another run exactly (same trace content and config)")
    facts = {"total": total, "repeats": repeats, "notes": list(runs.notes)}
    parts, _ = store.scan(out, _note)
    todo = runs.chunks(store.done_keys(parts))
    n_done = total - sum(len(c.runs) for c in todo)
    if n_done:
        _note(f"resuming: {n_done} of {total} runs already in {parts_dir}")
    results = out / RESULTS
    labels = runs.labels()
    if merge and not todo:
        sources = store.holders(parts, wanted)
        sha = store.current_sha256(results, wanted, labels, sources)
        if sha is not None:
            if plan_id is not None:
                store.write_receipt(out, plan_id, sha, sources, facts)
            if spec.csv:
                from sim.results.tables import write_rows

                write_rows(store.read_rows(results), out / "results.csv")
            return results
    prog = Progress(total, n_done, progress)

    def save(chunk: Chunk, part) -> None:
        parts.append(part)
        prog.update(len(part.keys))
        check()

    for _ in range(_MERGE_ROUNDS):
        try:
            if todo and spec.executor == "ray":
                from sim.sweep.rayexec import run_chunks

                run_chunks(todo, parts_dir, workers, spec.ray_address, save)
            elif workers <= 1 or len(todo) <= 1:
                for unit in lane_units(todo):
                    for chunk, part in zip(unit, _run_and_save_unit(unit, str(parts_dir)), strict=True):
                        save(chunk, part)
            else:
                _run_parallel(todo, workers, spec.scenario, runs.scenario_digest, parts_dir, save)
            check()
        except KeyboardInterrupt:
            if prog.tty:
                print(file=sys.stderr)
            _note(
                f"interrupted: {prog.done} of {total} runs saved in {parts_dir}; "
                "rerun the same command to resume"
            )
            raise ReportedInterrupt from None
        if not merge:  # a Hydra job: the multirun's end merges every job's parts (merge_parts)
            return parts_dir
        pieces, missing = store.collect(parts, wanted, _note)
        if not missing:
            break
        # parts that vanished or failed a full read since the scan: run their runs again
        parts = [p for p in parts if p.path.exists()]
        prog.done -= len(missing)
        todo = runs.chunks(wanted - missing)
    else:
        raise ConfigError(f"sweep: {len(missing)} runs have no result after the sweep")
    others = len(store.done_keys(parts) - wanted)
    if others:
        _note(f"{parts_dir} also holds {others} runs of other settings; results.parquet leaves them out")
    merged = store.merged(pieces, labels)
    n = merged.num_rows
    unpriced = merged.column("cost_microusd").null_count if "cost_microusd" in merged.schema.names else n
    if unpriced:
        from sim.cost.pricing import price_table

        choices = ", ".join(sorted(p.model for p in price_table().values()))
        _note(
            f"warning: {unpriced} of {n} runs are unpriced (their traces' recorded model has no "
            f"price): their cost is empty; price them with pricing=MODEL (or --pricing MODEL), one of "
            f"{choices}"
        )
    check()
    sha = store.write_table(merged, results)
    present = [p for p in parts if p.path.exists()]
    store.write_index(parts_dir, present)  # the next scan takes these parts' keys from it
    if plan_id is not None:
        store.write_receipt(out, plan_id, sha, store.holders(present, wanted), facts)
    if spec.csv:
        from sim.results.tables import write_rows

        write_rows(merged.to_pylist(), out / "results.csv")
    return results


def _run_parallel(
    todo: list[Chunk], workers: int, scenario: str, digest: str | None, parts_dir: Path, save
) -> None:
    """Chunks over a process pool; each worker writes its chunks' parts and sends them back (keys, stat,
    the table written)."""
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    if multiprocessing.get_start_method() == "fork":  # loaded once here, inherited by every worker
        _traces(scenario, digest)
    pool = ProcessPoolExecutor(max_workers=workers, initializer=_init_worker, initargs=(scenario, digest))
    try:
        units = lane_units(todo, workers)
        pending = {pool.submit(_run_and_save_unit, u, str(parts_dir)): u for u in units}
        while pending:
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in finished:
                unit = pending.pop(fut)
                for chunk, part in zip(unit, fut.result(), strict=True):
                    save(chunk, part)
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


def merge_parts(results_dir: Path, csv: bool = False) -> Path:
    """Every finished run under ``results_dir/parts`` into ``results.parquet`` (sorted by run key, one
    row per key): how a Hydra multirun, whose jobs each write their own parts, ends. Skipped when
    results.parquet is current."""
    from sim.results import store as store

    results, written = store.merge_all(Path(results_dir), _note)
    if csv:
        from sim.results.tables import write_rows

        rows = written.to_pylist() if written is not None else store.read_rows(results)
        write_rows(rows, Path(results_dir) / "results.csv")
    return results
