"""``ctxsim sweep -m``: the same sweep through Hydra's multirun, so Hydra's launchers run it: ``basic``
(sequential), ``joblib`` (local cores; ``hydra/launcher=joblib hydra.launcher.n_jobs=2``), and, with their
plugins installed, ``ray`` or ``submitit_slurm`` for clusters (docs/launchers.md).

Each Hydra job is one grid point: it rebuilds the sweep spec from its own overrides and runs it with the
engine of ``sim.sweep.execute`` (same run keys, same part files, so results do not depend on the launcher, and
an interrupted multirun resumes by running the same command). When the multirun ends, ``main`` merges every
part into ``results.parquet`` (``merge_results``). Policies are built from ctxsim's registry only.

The command line is an allow-list (``check_words``): Hydra would otherwise accept ``hydra/callbacks=...``,
``hydra.callbacks.x._target_=...``, ``+hydra...``, a logging config or a run directory, and instantiate
any ``_target_`` they name. Before Hydra runs, the policy files are checked (``sim.config.compose``) and the
whole Hydra config is composed once with the Compose API and compared with ctxsim's own
(``verify_hydra_config``): only the launcher may differ, and only to a launcher plugin Hydra discovers.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sim.util.errors import ConfigError, CtxsimError
from sim.util.paths import CONF_DIR

# ctxsim sweep words -> keys of conf/sweep_app.yaml (``pricing`` is a folder of price tables in conf/)
_RENAME = {"pricing": "price_as"}


def merge_results(results_dir: Path, csv: bool) -> Path:
    """The multirun's end: merge every job's parts into results.parquet. Done by ``main`` after Hydra
    returns, not by a Hydra callback: Hydra catches a callback's exception and only warns, so a failed
    merge would still exit 0."""
    from sim.sweep.execute import merge_parts

    path = merge_parts(Path(results_dir), csv=csv)
    print(f"results: {path}", file=sys.stderr)
    return path


def _task_allow_modules(task: Sequence[str]) -> tuple[str, ...]:
    """``allow_modules`` as the command line gave it (Hydra's record of the task overrides), never as a
    composed config says: a config file cannot widen what may be imported."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from sim.config.compose import check_allow_modules

    out: tuple[str, ...] = ()
    for o in task:
        if o.partition("=")[0] == "allow_modules":
            value = OverridesParser.create().parse_override(o).value()
            out = tuple(value if isinstance(value, list) else [value])
    return check_allow_modules(out, "allow_modules=")


def _steps(value: str) -> dict:
    """The transforms ``check_words`` composed (``transform_steps``), as a setting's config holds them:
    each a registered transform's name and knobs (``sim.transforms.base.make_transform`` builds them)."""
    steps = json.loads(value) if value else []
    return {"transforms": steps} if steps else {}


def _job(cfg) -> None:
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    from sim.sweep.execute import run_sweep
    from sim.sweep.spec import SweepSpec

    hc = HydraConfig.get()
    composed = OmegaConf.to_container(cfg, resolve=True)
    task = [
        o for o in hc.overrides.task if o.partition("=")[0].lstrip("+~").startswith(("policy.", "model."))
    ]
    spec = SweepSpec(
        policy=hc.runtime.choices.get("policy", "raw"),
        grid=tuple(task),
        scenario=str(cfg.scenario),
        pricing=str(cfg.price_as),
        results=str(cfg.results.path),
        chunk_size=int(cfg.chunk_size),
        composed={"policy": composed["policy"], "model": composed["model"], **_steps(cfg.transform_steps)},
        allow_modules=_task_allow_modules(hc.overrides.task),
    )
    try:
        run_sweep(spec, workers=1, progress=False, merge=False)
    except ConfigError as exc:  # e.g. keep_recent_tokens >= context_token_limit (``check_grid`` ran first)
        if not cfg.skip_invalid:
            raise ConfigError(f"sweep -m: setting {' '.join(task)}: {exc}") from None
        print(f"ctxsim: sweep: skipping setting {' '.join(task)}: {exc}", file=sys.stderr)
    except CtxsimError as exc:  # bad input (a damaged trace): exit 2 for the whole multirun
        # as a ConfigError of one argument: a launcher pickles it back from another process
        raise ConfigError(str(exc)) from None


# ------------------------------------------------------------------------------------------ the words
_PLAIN = re.compile(r"[A-Za-z0-9_]+")
_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_TOP_WORDS = (
    "scenario", "results.path", "pricing", "chunk_size", "csv", "skip_invalid", "allow_modules", "workers",
    "max_settings",
)  # fmt: skip
ALLOWED_WORDS = (
    "policy=NAME[,NAME...], policy.KEY=V, model.KEY=V, scenario=, results.path=, pricing=, chunk_size=, "
    "csv=, skip_invalid=, allow_modules=MOD[,MOD...], workers=, max_settings=, transform=NAME, "
    "transform.KEY=V, hydra/launcher=NAME, hydra.launcher.KEY=V"
)


@dataclass(frozen=True)
class Words:
    """The checked words of ``ctxsim sweep -m``."""

    overrides: tuple[str, ...]  # for Hydra, translated (pricing -> price_as, allow_modules as a list)
    policies: tuple[str, ...]  # the policy choices (``policy=a,b`` sweeps over both)
    allow_modules: tuple[str, ...]
    launcher: tuple[str, ...]  # hydra/launcher=NAME and hydra.launcher.KEY=V
    knobs: tuple[tuple[str, str, str], ...]  # (word, "policy" | "model", first key after the group)
    top: dict  # scenario, results.path, pricing, chunk_size, csv as given
    transforms: tuple[str, ...] = ()  # transform=NAME and transform.KEY=V words, in order


def _refuse(word: str, why: str) -> ConfigError:
    return ConfigError(f"sweep -m: '{word}': {why}; allowed: {ALLOWED_WORDS}")


def check_words(items: Sequence[str]) -> Words:
    """Every word of ``sweep -m`` against the allow-list; anything else under ``hydra`` (callbacks,
    logging, run/sweep dirs, sweeper, search path), ``+``/``~`` keys, a ``_target_`` anywhere, a policy
    given by path and ``${...}`` interpolation are refused (ConfigError, exit 2) before Hydra sees them."""
    from sim.config.compose import check_allow_modules, check_policy_name, check_value

    out: list[str] = []
    policies: tuple[str, ...] = ("raw",)
    allow: tuple[str, ...] = ()
    launcher: list[str] = []
    knobs: list[tuple[str, str, str]] = []
    top: dict[str, str] = {}
    transform_words: list[str] = []
    for it in items:
        key, sep, value = it.partition("=")
        if key.startswith(("+", "~")):
            raise _refuse(it, "adding (+) or deleting (~) config keys is not allowed")
        if not sep or not key:
            raise _refuse(it, "not KEY=VALUE")
        check_value(value, f"sweep -m: '{it}'")
        if "_target_" in it:
            raise _refuse(it, "a _target_ is not allowed on the command line")
        if key == "transform" or key.startswith("transform."):
            # the same transforms before every grid point (a transform's knobs are fixed across a
            # multirun, as in `sweep`): composed below and handed to each job as one value
            if any(c in it for c in "\"'\\"):
                raise _refuse(it, "quotes and backslashes are not allowed in a transform word")
            if key != "transform" and not _DOTTED.fullmatch(key.removeprefix("transform.")):
                raise _refuse(it, f"'{key}' is not a transform key")
            transform_words.append(it)
        elif key == "policy":
            policies = tuple(value.split(","))
            for name in policies:
                check_policy_name(name)  # a plain name of a registered policy or a preset; never a path
            out.append(it)
        elif key.startswith(("policy.", "model.")):
            group, _, rest = key.partition(".")
            if not _DOTTED.fullmatch(rest):
                raise _refuse(it, f"'{rest}' is not a {group} key")
            knobs.append((it, group, rest.split(".", 1)[0]))
            out.append(it)
        elif key in _TOP_WORDS:
            if key == "workers":
                continue  # the launcher decides parallelism under Hydra
            if key == "max_settings":  # checked by check_grid, before Hydra expands the grid
                top[key] = value
                continue
            if key == "allow_modules":
                allow = check_allow_modules((m for m in value.split(",") if m), "sweep -m: allow_modules=")
                out.append(f"allow_modules=[{','.join(allow)}]")  # a list value: Hydra must not sweep it
                continue
            top[key] = value
            out.append(f"{_RENAME.get(key, key)}={value}")
        elif key == "hydra/launcher":
            if not _PLAIN.fullmatch(value):
                raise _refuse(it, "a launcher is a plain name (basic, joblib, ray, submitit_slurm, ...)")
            launcher.append(it)
            out.append(it)
        elif key.startswith("hydra.launcher."):
            if not _DOTTED.fullmatch(key.removeprefix("hydra.launcher.")):
                raise _refuse(it, "not a launcher key")
            launcher.append(it)
            out.append(it)
        else:
            raise _refuse(it, "not allowed")
    if transform_words:
        from sim.config.transforms import transform_steps
        from sim.sweep.spec import transform_specs

        # composed here, once (a job cannot compose: Hydra is running it), as `sweep` composes them; an
        # unknown name or knob exits 2 before any job. Handed to every job as one JSON string value.
        steps = transform_steps(transform_specs(transform_words))
        out.append(f"transform_steps='{json.dumps(steps, separators=(',', ':'))}'")
    return Words(tuple(out), policies, allow, tuple(launcher), tuple(knobs), top, tuple(transform_words))


def translate(items: Sequence[str]) -> list[str]:
    """``ctxsim sweep`` words -> Hydra overrides (checked with ``check_words``)."""
    return list(check_words(items).overrides)


# --------------------------------------------------------------------------------- before Hydra runs
_VARYING = ("launcher", "overrides", "runtime")  # parts of the hydra config a legitimate run changes


def _nested_targets(value, path: str) -> list[str]:
    found, stack = [], [(value, path)]
    while stack:
        v, p = stack.pop()
        if isinstance(v, dict):
            for k, sub in v.items():
                if k == "_target_" and p != path:
                    found.append(f"{p}._target_")
                stack.append((sub, f"{p}.{k}"))
        elif isinstance(v, list):
            stack.extend((sub, f"{p}[{i}]") for i, sub in enumerate(v))
    return sorted(found)


def _first_difference(a, b, path: str) -> str | None:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            d = _first_difference(a.get(k), b.get(k), f"{path}.{k}")
            if d:
                return d
        return None
    return None if a == b else path


def launcher_targets() -> set[str]:
    """The classes of the Launcher plugins Hydra discovers (basic, joblib, and any installed one)."""
    from hydra.core.plugins import Plugins
    from hydra.plugins.launcher import Launcher

    return {f"{c.__module__}.{c.__qualname__}" for c in Plugins.instance().discover(Launcher)}


_JOBLIB = "hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher"


def _check_joblib(cfg: dict) -> list[str]:
    """The joblib launcher's settings, as its ``launch`` hands them to ``joblib.Parallel`` (backend loky,
    the same number conversions), checked before Hydra starts: joblib's refusal of a combination
    (``require=sharedmem`` with ``prefer=processes``) or a value is exit 2 naming the launcher's keys,
    not an internal error from inside Hydra. More jobs than cores are capped at the cores with a warning
    (the words returned, for Hydra's command line), as ``workers`` is: results do not depend on it."""
    from hydra_plugins.hydra_joblib_launcher._core import process_joblib_cfg
    from joblib import Parallel

    from sim.util.forkmap import cap_workers, usable_cores

    params = {k: v for k, v in cfg.items() if k != "_target_"}
    params["backend"] = "loky"
    process_joblib_cfg(params)
    try:
        Parallel(**params)
    except (TypeError, ValueError) as exc:
        given = ", ".join(f"{k}={cfg[k]}" for k in ("n_jobs", "prefer", "require", "backend") if k in cfg)
        raise ConfigError(f"sweep -m: hydra.launcher ({given}): joblib refuses it: {exc}") from None
    n_jobs = params.get("n_jobs")
    if isinstance(n_jobs, int) and not isinstance(n_jobs, bool) and n_jobs > usable_cores():
        return [f"hydra.launcher.n_jobs={cap_workers(n_jobs, 'hydra.launcher.n_jobs')}"]
    return []


def verify_hydra_config(words: Words) -> tuple[dict[str, dict[str, list[str]]], dict, list[str]]:
    """Compose the multirun's config once per policy choice with the Compose API (with its Hydra part)
    and compare it with ctxsim's own: no callbacks, logging the ``none`` configs, and everything else
    under ``hydra`` as ctxsim sets it, but the launcher, whose ``_target_`` must be a discovered
    Launcher plugin with no nested ``_target_``. Returns each choice's knob names (``policy`` and
    ``model``) so the words can be checked against them, and the app's own top-level defaults."""
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    composed = {}
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
            ref = compose("sweep_app", [], return_hydra_config=True)
            for p in words.policies:
                composed[p] = compose("sweep_app", [*words.launcher, f"policy={p}"], return_hydra_config=True)
    except (HydraException, OmegaConfBaseException) as exc:
        raise ConfigError(f"sweep -m: {str(exc).strip().splitlines()[0]}") from None
    want = OmegaConf.to_container(ref, resolve=False)
    none_logging = {"version": 1, "root": None, "disable_existing_loggers": False}
    if (
        want["hydra"]["callbacks"]
        or want["hydra"]["job_logging"] != none_logging
        or want["hydra"]["hydra_logging"] != none_logging
    ):
        raise ConfigError("sweep -m: conf/sweep_app.yaml: hydra callbacks or logging are not ctxsim's own")
    launchers = launcher_targets()
    knob_names = {}
    capped: list[str] = []  # hydra.launcher.n_jobs at the cores (``_check_joblib``)
    for p, cfg in composed.items():
        got = OmegaConf.to_container(cfg, resolve=False)
        hydra_got = {k: v for k, v in got.pop("hydra").items() if k not in _VARYING}
        hydra_want = {k: v for k, v in want["hydra"].items() if k not in _VARYING}
        hydra_got["job"].pop("override_dirname", None)
        hydra_want["job"].pop("override_dirname", None)
        diff = _first_difference(hydra_want, hydra_got, "hydra")
        if diff is None and sorted(got) != sorted(k for k in want if k != "hydra"):
            diff = "the top-level keys"
        if diff is not None:
            raise ConfigError(
                f"sweep -m: policy '{p}' sets {diff}, not ctxsim's; only the launcher may differ"
            )
        launcher = cfg.hydra.launcher
        target = launcher.get("_target_")
        if target not in launchers:
            raise ConfigError(
                f"sweep -m: launcher _target_ {target!r} is not a Hydra launcher plugin; installed: "
                + ", ".join(sorted(launchers))
            )
        nested = _nested_targets(OmegaConf.to_container(launcher, resolve=False), "hydra.launcher")
        if nested:
            raise ConfigError(
                f"sweep -m: {nested[0]}: a nested _target_ is not allowed in the launcher config"
            )
        if target == _JOBLIB:
            capped = _check_joblib(OmegaConf.to_container(launcher, resolve=True))
        knob_names[p] = {
            "policy": [k for k in got["policy"] if k != "_target_"],
            "model": list(got.get("model") or {}),
        }
    return knob_names, {k: v for k, v in want.items() if k != "hydra"}, capped


def _check_knobs(words: Words, knob_names: dict[str, dict[str, list[str]]]) -> None:
    for word, group, knob in words.knobs:
        for p, names in knob_names.items():
            if knob not in names[group]:
                what = "knob" if group == "policy" else "key"
                raise ConfigError(
                    f"sweep -m: '{word}': {group} {p if group == 'policy' else 'replay'} has no {what} "
                    f"'{knob}'; {what}s: {', '.join(names[group]) or 'none'}"
                )


def _check_top(words: Words) -> None:
    """The values a job would otherwise only find bad one by one (a missing scenario, a bad number)."""
    from sim.sweep.scenario import load_scenario

    top = words.top
    for key in ("chunk_size",):
        if key in top and not (top[key].isdigit() and int(top[key]) >= 1):
            raise ConfigError(f"sweep -m: '{key}={top[key]}': expected an integer >= 1")
    for key in ("csv", "skip_invalid"):
        if key in top and top[key].lower() not in ("true", "false"):
            raise ConfigError(f"sweep -m: '{key}={top[key]}': expected true or false")
    if "pricing" in top and top["pricing"] not in ("auto", "none", "null"):
        from sim.cost.pricing import price_named

        try:
            price_named(top["pricing"])
        except ConfigError as exc:
            raise ConfigError(f"sweep -m: 'pricing={top['pricing']}': {exc}") from None
    if "scenario" in top:
        load_scenario(top["scenario"])  # lazy: checks that it names something, reads nothing yet
    if "results.path" in top and not top["results.path"]:
        raise ConfigError("sweep -m: 'results.path=': expected a folder")


def _sweep_size(override) -> int:
    """How many values Hydra's basic sweeper makes of one parsed override, without making them: a list
    (``a,b``, ``choice(...)``) its length, ``range(start, stop, step)`` its length by arithmetic; any
    other override one value (an interval cannot be swept by the basic sweeper: it says so itself)."""
    from hydra.core.override_parser.types import ChoiceSweep, RangeSweep

    if not override.is_sweep_override():
        return 1
    sweep = override.value()
    if isinstance(sweep, ChoiceSweep):
        return len(sweep.list)
    if isinstance(sweep, RangeSweep):
        start, stop, step = sweep.start, sweep.stop, sweep.step
        if all(isinstance(v, int) for v in (start, stop, step)):
            return len(range(start, stop, step)) if step else 0
        if not step or not all(math.isfinite(float(v)) for v in (start, stop, step)):
            return 1  # Hydra refuses it when it splits the arguments
        return max(0, math.ceil((float(stop) - float(start)) / float(step)))
    return 1


def _check_results_path(results_dir: Path) -> None:
    """``results.path`` is a folder the multirun can write in (created now, once every word is checked):
    an existing file (``/dev/null``) or a folder nothing can be created in (``/proc/self``) is exit 2."""
    from sim.util.atomicfile import make_dirs

    if results_dir.exists() and not results_dir.is_dir():
        raise ConfigError(f"sweep -m: results.path={results_dir}: not a folder (a file of that name exists)")
    try:
        make_dirs(results_dir / "hydra")
    except OSError as exc:
        raise ConfigError(
            f"sweep -m: results.path={results_dir}: cannot create a folder in it: {exc.strerror or exc}"
        ) from None


def check_grid(words: Words) -> None:
    """Every grid point composed and built before Hydra runs a job, as a plain ``sweep`` does: a setting
    the policy refuses (keep_recent_tokens >= context_token_limit, say) exits 2 naming it, unless
    ``skip_invalid=true``, when its job skips it with a note. Hydra's own parser expands the sweep
    syntax (``a,b``, ``range()``, ``choice()``), so the points are the ones the launcher will run."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    from sim.sweep.settings import check_settings
    from sim.sweep.spec import MAX_SETTINGS, SweepSpec, check_grid_size

    limit = words.top.get("max_settings", str(MAX_SETTINGS))
    if not (limit.isdigit() and 1 <= int(limit) <= 2**53 - 1):
        raise ConfigError(f"sweep -m: max_settings={limit[:40]}: expected an integer in [1, 2^53)")
    try:
        parsed = OverridesParser.create().parse_overrides([w for w, _, _ in words.knobs])
        # before Hydra expands it: range(1,100000000) is a list of 10^8 values once split
        check_grid_size(
            math.prod(_sweep_size(o) for o in parsed) * len(words.policies), None, int(limit), "sweep -m"
        )
        grid = BasicSweeper.split_arguments(parsed, None)[0]
    except HydraException as exc:
        raise ConfigError(f"sweep -m: {str(exc).strip().splitlines()[0]}") from None
    skip = words.top.get("skip_invalid", "false").lower() == "true"
    valid = 0
    for p in words.policies:
        spec = SweepSpec(policy=p, skip_invalid=True, allow_modules=words.allow_modules)
        refused: list[str] = []
        valid += check_settings(spec, grid, refused.append)
        if refused and not skip:
            raise ConfigError(
                f"sweep -m: policy {p}: {refused[0].removeprefix('skipping ')}; pass --skip-invalid "
                "(or skip_invalid=true) to skip the settings the policy refuses"
            )
    if not valid:
        raise ConfigError(f"sweep -m: none of the {len(grid) * len(words.policies)} settings is valid")


def main(items: Sequence[str]) -> int:
    import hydra

    from sim.config.compose import prepare_policy

    words = check_words(items)
    for p in words.policies:
        prepare_policy(p, words.allow_modules)  # each policy file and its defaults chain, before Hydra
    knob_names, defaults, capped = verify_hydra_config(words)
    _check_knobs(words, knob_names)
    _check_top(words)
    check_grid(words)
    results_dir = Path(words.top.get("results.path") or defaults["results"]["path"])
    _check_results_path(results_dir)  # Hydra writes its sweep folder in it first: a file there was exit 3
    app = hydra.main(config_path=str(CONF_DIR), config_name="sweep_app", version_base=None)(_job)
    argv, full_error = sys.argv, os.environ.get("HYDRA_FULL_ERROR")
    sys.argv = ["ctxsim-sweep", "-m", *words.overrides, *capped]
    # an error inside a job reaches sim.util.exitcodes.run_command (exit 2 for bad input, 3 for a crash)
    # instead of Hydra's own report and exit status 1, which CI would read as a regression
    os.environ["HYDRA_FULL_ERROR"] = "1"
    try:
        app()
    except SystemExit as exc:
        if exc.code not in (0, None):
            raise RuntimeError(f"Hydra's multirun exited with status {exc.code}") from None
    finally:
        sys.argv = argv
        if full_error is None:
            os.environ.pop("HYDRA_FULL_ERROR", None)
        else:
            os.environ["HYDRA_FULL_ERROR"] = full_error
    csv = words.top.get("csv", str(defaults.get("csv", False))).lower() == "true"
    merge_results(results_dir, csv)
    return 0
