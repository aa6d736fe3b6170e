"""Hold ctxsim's framework policies to the real libraries, call by call, on any traces at any settings.

    .venv/bin/python benchmarks/oracles/frameworks.py FRAMEWORK --traces PATH... [--policy NAME]
        [--setting 'KEY=V KEY=V']... [--draw N [--seed S]] [--limit N] [--format table|json]
    .venv/bin/python benchmarks/oracles/frameworks.py FRAMEWORK --write [--only SETTING]   # the goldens

FRAMEWORK: adk, autogen, inspect, langchain, letta, strands (``<framework>/oracle.py``), openhands
(``openhands/driver.py``: openhands-ai's V0 condensers and openhands-sdk's) or effect_agent (the seed
engine's own code, Node). With ``--traces``: every trace ctxsim can import under PATH (files or folders,
any supported format) is replayed by the real library and by ctxsim's policy at each setting:
``--setting`` takes ctxsim's knob names (for framework policies the library's own; ``window=N`` is the
provider's context window where the oracle models one), ``--draw N`` adds N settings drawn across each
knob's range (``draws.py``, seeded by ``--seed``); no setting means the policy's defaults. Without
``--policy`` every policy the framework's oracle holds runs (then ``--setting`` is refused). Prints, per
setting and per trace, calls compared, per-call agreement, the cumulative-token difference (ctxsim -
real, a fraction of real) and the first differing call with both sides' view; ``--format json`` prints
one object per setting. Without ``--traces``: the goldens' corpora and settings
(``tests/framework_oracle.py``), ``--write`` rewrites ``tests/golden/frameworks/<framework>/``.

The framework's pinned environment (``<framework>/.venv`` from ``requirements.txt``, or
``effect_agent/node_modules``) is built on first use, as ``make oracle-<framework>`` does; ``PY312`` names
the Python 3.12 to build it from (default: the first ``python3.12`` that runs). Exit 0 when every call
agrees, 1 on any disagreement, 2 on bad input (a path, a knob, a value), 3 when an oracle fails.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(HERE))

import draws  # noqa: E402
import framework_oracle as fo  # noqa: E402
from comparison import Setting, TraceResult, compare_vectors, unique_ids  # noqa: E402

from sim.core.types import Trace  # noqa: E402
from sim.importers import load_paths  # noqa: E402
from sim.policies.base import make_policy  # noqa: E402
from sim.util.errors import CtxsimError  # noqa: E402

FULL_TEXT = {
    "langchain",
    "strands",
}  # oracles that read whole contents (LangChain's trim keeps a message's last lines)
VERSIONS = {
    "adk": "google-adk 2.13.0",
    "letta": "letta 0.16.8",
    "inspect": "inspect-ai 0.3.285",
    "autogen": "autogen-core 0.7.5",
    "strands": "strands-agents 1.62.0",
    "langchain": "langchain 1.5.2, langchain-core 1.8.3, langgraph 1.2.24",
    "openhands": "openhands-ai 0.62.0, openhands-sdk 1.58.2",
    "effect_agent": "effect-agent (effect_agent/oracle.ts; effect pinned by package-lock.json)",
}
FRAMEWORKS = tuple(sorted(VERSIONS))
# settings of policies with a knob that has no default (the "defaults" run sets it), as a fraction of
# the traces' median peak request
REQUIRED = {
    "autogen_token_limited": "token_limit",
    "letta_partial_evict": "context_window",
    "langchain_summarization": "trigger",
}


class BadInput(Exception):
    """Exit 2: a path, knob or value the user gave is wrong; the message names it."""


# ----------------------------------------------------------------------------------- environments
def python312() -> str:
    """The Python 3.12 the framework environments are built from: $PY312, else the first that runs."""
    if os.environ.get("PY312"):
        return os.environ["PY312"]
    candidates = [shutil.which("python3.12") or ""]
    candidates += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.12*/bin/python3.12")))
    for c in candidates:
        if c and subprocess.run([c, "-V"], capture_output=True).returncode == 0:
            return c
    raise BadInput("no Python 3.12 found to build the framework's environment: set PY312=/path/to/python3.12")


def ensure_env(framework: str) -> str:
    """The interpreter (or, for effect_agent, ``node``) the oracle runs in, built on first use."""
    if framework == "effect_agent":
        target = HERE / "effect_agent" / "node_modules" / ".installed"
        if not target.exists():
            if shutil.which("npm") is None:
                raise BadInput("effect_agent needs Node.js and npm on PATH")
            print("frameworks.py: installing effect-agent's pinned packages (npm ci) ...", file=sys.stderr)
            subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=HERE / "effect_agent", check=True)
            target.touch()
        return "node"
    python = HERE / framework / ".venv" / "bin" / "python"
    if not (HERE / framework / ".venv" / ".installed").exists():
        print(f"frameworks.py: building {framework}'s pinned environment (first use) ...", file=sys.stderr)
        rel = (HERE / framework / ".venv" / ".installed").relative_to(REPO)
        subprocess.run(["make", "-C", str(REPO), str(rel), f"PY312={python312()}"], check=True)
    return str(python)


# ------------------------------------------------------------------------------------- settings
def parse_setting(text: str) -> dict:
    """``'KEY=V KEY=V'`` -> knobs; V is JSON (numbers, true/false/null, lists, objects) or a bare string."""
    knobs: dict = {}
    for part in shlex.split(text):
        if part == "defaults":
            continue
        key, sep, raw = part.partition("=")
        if not sep or not key:
            raise BadInput(f"--setting {text!r}: {part!r} is not KEY=VALUE")
        try:
            knobs[key] = json.loads(raw)
        except json.JSONDecodeError:
            knobs[key] = raw
    return knobs


def label(knobs: dict) -> str:
    return " ".join(f"{k}={json.dumps(v, separators=(',', ':'))}" for k, v in knobs.items()) or "defaults"


def settings_for(
    framework: str, policy: str, given: list[dict], n_draw: int, seed: int, traces
) -> list[Setting]:
    out = []
    knob_sets = list(given)
    if not knob_sets and not n_draw:
        knob_sets = [{}]
        if policy in REQUIRED:  # a knob without a default: half the traces' median peak request
            knob_sets = [{REQUIRED[policy]: max(draws.peak(traces) // 2, 1)}]
    if n_draw:
        knob_sets += draws.draw(policy, n_draw, seed, traces)
    for knobs in knob_sets:
        knobs = dict(knobs)
        window = knobs.pop("window", None)
        try:
            make_policy(policy, **knobs)
            config = check_config(framework, policy, knobs, window)
        except CtxsimError as exc:
            raise BadInput(str(exc)) from None
        except fo.NotComparable as exc:
            raise BadInput(f"{policy} {label(knobs)}: {exc}") from None
        name = label(knobs) + (f" window={window}" if window is not None else "")
        out.append(Setting(policy, knobs, window, name, config))
    return out


def check_config(framework: str, policy: str, knobs: dict, window: int | None) -> dict:
    if framework in fo.POLICIES:
        return fo.framework_config(framework, policy, knobs, window)
    return BACKENDS[framework].config(policy, knobs, window)


class LibraryBackend:
    """ADK, AutoGen, Inspect, LangChain, Letta, Strands: ``<framework>/oracle.py`` (``oracle_job``)."""

    def __init__(self, framework: str) -> None:
        self.framework = framework

    def run(self, python: str, traces: list[Trace], settings: list[Setting]) -> dict[str, list[TraceResult]]:
        ids = unique_ids(traces)
        exported = []
        for t, key in zip(traces, ids, strict=True):
            d = fo.export(t, full_text=self.framework in FULL_TEXT)
            d["trace_id"] = key
            exported.append(d)
        job = {
            "summary": fo.SUMMARY_RULE,
            "settings": [
                {
                    "name": s.name,
                    "corpus": "user",
                    "config": s.config,
                    "summary": fo.summary_rule(s.policy, s.knobs),
                }
                for s in settings
            ],
            "corpora": {"user": exported},
        }
        real = run_oracle_job(python, self.framework, job)
        out = {}
        for s in settings:
            rows = []
            for t, key in zip(traces, ids, strict=True):
                got = fo.vectors(t, s.policy, s.knobs, window=s.config.get("window"))
                rows.append(compare_vectors(key, got, real[s.name][key], s.policy in fo.PREFIX_ONLY))
            out[s.name] = rows
        return out


def run_oracle_job(python: str, framework: str, job: dict) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "in.json", Path(tmp) / "out.json"
        src.write_text(json.dumps(job))
        proc = subprocess.run([python, str(HERE / framework / "oracle.py"), str(src), str(out)])
        if proc.returncode != 0:
            raise RuntimeError(f"{framework}/oracle.py exited {proc.returncode}")
        return json.loads(out.read_text())


def _load_backend(framework: str):
    """``<framework>/backend.py`` of an oracle with its own driver: ``POLICIES``, ``config(policy, knobs,
    window)`` and ``run(runner, traces, settings)``, loaded by path (the folder is not a package and its
    name may be the library's own)."""
    import importlib.util

    path = HERE / framework / "backend.py"
    spec = importlib.util.spec_from_file_location(f"ctxsim_oracle_{framework}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BACKENDS: dict = {f: LibraryBackend(f) for f in fo.POLICIES}
for _f in ("openhands", "effect_agent"):
    if (HERE / _f / "backend.py").exists():
        BACKENDS[_f] = _load_backend(_f)


def policies_of(framework: str) -> tuple[str, ...]:
    if framework in fo.POLICIES:
        return fo.POLICIES[framework]
    return BACKENDS[framework].POLICIES


# ------------------------------------------------------------------------------------------ output
def summarize(policy: str, name: str, rows: list[TraceResult]) -> dict:
    calls = sum(r.calls for r in rows)
    same = sum(r.same for r in rows)
    tc, tr = sum(r.tokens_ctxsim for r in rows), sum(r.tokens_real for r in rows)
    return {
        "policy": policy,
        "setting": name,
        "traces": len(rows),
        "calls": calls,
        "agreement": round(same / calls, 6) if calls else 1.0,
        "token_difference": round((tc - tr) / tr, 6) if tr else 0.0,
        "tokens_ctxsim": tc,
        "tokens_real": tr,
        "per_trace": [
            {"trace": r.trace, "calls": r.calls, "agreement": round(r.same / r.calls, 6) if r.calls else 1.0,
             "token_difference": round((r.tokens_ctxsim - r.tokens_real) / r.tokens_real, 6)
             if r.tokens_real else 0.0, "first_difference": r.first_difference}
            for r in rows
        ],
    }  # fmt: skip


def print_table(results: list[dict], framework: str) -> None:
    print(f"# {framework}: {VERSIONS[framework]}")
    print(f"{'policy':30s} {'setting':44s} {'traces':>6s} {'calls':>6s} {'agree':>8s} {'tokens':>9s}")
    for r in results:
        print(
            f"{r['policy']:30s} {r['setting'][:44]:44s} {r['traces']:6d} {r['calls']:6d} "
            f"{100 * r['agreement']:7.2f}% {100 * r['token_difference']:+8.3f}%"
        )
        for t in r["per_trace"]:
            first = "" if t["first_difference"] is None else f"; first: {t['first_difference'][:400]}"
            print(
                f"    {t['trace'][:40]:40s} {t['calls']:6d} calls {100 * t['agreement']:7.2f}% agree "
                f"tokens {100 * t['token_difference']:+8.3f}%{first}"
            )


def conformance(args) -> int:
    framework = args.framework
    try:
        traces = list(load_paths(args.traces))
    except CtxsimError as exc:
        raise BadInput(str(exc)) from None
    except OSError as exc:
        raise BadInput(f"--traces: {exc}") from None
    if not traces:
        raise BadInput(f"--traces {' '.join(args.traces)}: no traces found")
    if args.limit is not None:
        traces = traces[: args.limit]
    known = policies_of(framework)
    if args.policy is not None and args.policy not in known:
        raise BadInput(f"{framework} holds {', '.join(known)}; not {args.policy}")
    if args.policy is None and args.setting:
        raise BadInput("--setting needs --policy (knobs are a policy's)")
    given = [parse_setting(s) for s in args.setting or []]
    by_policy = {}
    for policy in [args.policy] if args.policy else known:
        unique = {}  # a setting given twice (or drawn as given) runs once: names key the oracle's answers
        for s in settings_for(framework, policy, given, args.draw, args.seed, traces):
            unique.setdefault(s.name, s)
        by_policy[policy] = list(unique.values())
    python = ensure_env(framework)
    backend = BACKENDS[framework]
    results = []
    for settings in by_policy.values():  # one oracle job per policy: its settings' names are unique
        per_setting = backend.run(python, traces, settings)
        results += [summarize(s.policy, s.name, per_setting[s.name]) for s in settings]
    if args.format == "json":
        for r in results:
            print(json.dumps(r, sort_keys=True))
    else:
        print_table(results, framework)
    return 0 if all(r["agreement"] == 1.0 and r["token_difference"] == 0.0 for r in results) else 1


# ------------------------------------------------------------------------------------------ goldens
def goldens(args) -> int:
    """The goldens' corpora and settings (``tests/framework_oracle.py``); ``--write`` rewrites them."""
    if hasattr(BACKENDS.get(args.framework), "goldens"):  # an oracle with its own goldens (openhands)
        return BACKENDS[args.framework].goldens(ensure_env(args.framework), args.only, args.write)
    if args.framework not in fo.SETTINGS:
        if hasattr(BACKENDS.get(args.framework), "goldens"):  # effect_agent: feed.py's own run
            return BACKENDS[args.framework].goldens(args.write, args.only)
        raise BadInput(
            f"{args.framework}: its goldens are written by its own make target (make oracle-{args.framework})"
        )
    settings = {k: v for k, v in fo.SETTINGS[args.framework].items() if not args.only or k in args.only}
    python = ensure_env(args.framework)
    traces = {name: fo.corpus(name) for name in sorted({c for c, *_ in settings.values()})}
    job = {
        "summary": fo.SUMMARY_RULE,
        "settings": [
            {"name": s, "corpus": c, "config": cfg, "summary": fo.summary_rule(p, kn)}
            for s, (c, p, kn, cfg) in settings.items()
        ],
        "corpora": {
            name: [fo.export(t, full_text=args.framework in FULL_TEXT) for t in ts]
            for name, ts in traces.items()
        },
    }
    real = run_oracle_job(python, args.framework, job)
    bad = 0
    print(f"{'setting':28s} {'policy':28s} {'calls':>6s} {'agree':>7s} {'tokens ctxsim-real':>19s}")
    for name, (corpus, policy, knobs, config) in settings.items():
        checks = [(policy, knobs)]
        if (also := fo.ALSO.get((args.framework, name))) is not None:
            checks.append(also)
        for pol, kn in checks:
            rows = [
                compare_vectors(
                    t.trace_id,
                    fo.vectors(t, pol, kn, window=config.get("window")),
                    real[name][t.trace_id],
                    pol != policy,
                )
                for t in traces[corpus]
            ]
            n, same = sum(r.calls for r in rows), sum(r.same for r in rows)
            tc, tr = sum(r.tokens_ctxsim for r in rows), sum(r.tokens_real for r in rows)
            bad += same != n
            pct = 100.0 * (tc - tr) / tr if tr else 0.0
            print(f"{name:28s} {pol:28s} {n:6d} {100.0 * same / n:6.1f}% {pct:+18.2f}%")
        if args.write:
            path = fo.golden_path(args.framework, name)
            path.parent.mkdir(parents=True, exist_ok=True)
            golden = {
                "framework": VERSIONS[args.framework],
                "setting": name,
                "corpus": corpus,
                "policy": policy,
                "knobs": knobs,
                "config": config,
                "summary": fo.summary_rule(policy, knobs),
                "runs": real[name],
            }
            path.write_text(json.dumps(golden, indent=1) + "\n")
    return 1 if bad else 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="frameworks.py",
        description="Hold ctxsim's framework policies to the real libraries, call by call.",
        epilog=__doc__.split("\n\n", 2)[2],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("framework", choices=FRAMEWORKS)
    ap.add_argument(
        "--traces", nargs="+", metavar="PATH", help="trace files or folders (any importable format)"
    )
    ap.add_argument("--policy", help="one of the framework's policies (default: every one it holds)")
    ap.add_argument(
        "--setting", action="append", metavar="'KEY=V ...'", help="knobs of one setting (repeatable)"
    )
    ap.add_argument(
        "--draw", type=int, default=0, metavar="N", help="add N settings drawn across the knobs' ranges"
    )
    ap.add_argument("--seed", type=int, default=0, help="seed of --draw (default 0)")
    ap.add_argument("--limit", type=int, metavar="N", help="only the first N traces")
    ap.add_argument("--format", choices=("table", "json"), default="table")
    ap.add_argument(
        "--write", action="store_true", help="goldens mode: rewrite tests/golden/frameworks/<framework>/"
    )
    ap.add_argument("--only", action="append", metavar="SETTING", help="goldens mode: only this setting")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.draw < 0 or (args.limit is not None and args.limit < 1):
            raise BadInput("--draw must be >= 0 and --limit >= 1")
        if args.traces is None:
            return goldens(args)
        return conformance(args)
    except BadInput as exc:
        print(f"frameworks.py: error: {exc}", file=sys.stderr)
        return 2
    except (RuntimeError, subprocess.CalledProcessError) as exc:
        print(f"frameworks.py: oracle failed: {exc}", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
