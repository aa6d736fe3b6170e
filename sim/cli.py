"""``ctxsim``: a thin command line over the Python API. Exit status 2 for bad input or config."""

from __future__ import annotations

import argparse
import itertools
import re
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from sim.util import interrupts
from sim.util.errors import ConfigError, CtxsimError, TraceError, UnknownNameError
from sim.util.exitcodes import run_command
from sim.util.jsonl import json_lines

_OVERRIDE = re.compile(r"^[+~]?[A-Za-z_][\w.]*=")


def _warn(msg: str) -> None:
    print(f"ctxsim: warning: {msg}", file=sys.stderr)


def split_args(items: Sequence[str]) -> tuple[list[str], list[str]]:
    """Positional words are paths, except KEY=VALUE overrides (``policy.n=10``)."""
    paths, overrides = [], []
    for it in items:
        (overrides if _OVERRIDE.match(it) and not Path(it).exists() else paths).append(it)
    return paths, overrides


def format_table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    def cell(v: Any) -> str:
        if v is None:
            return "-"
        if isinstance(v, bool):
            return str(v).lower()
        if isinstance(v, int):
            return f"{v:,}"
        if isinstance(v, float):
            return f"{v:,.3f}"
        return str(v)

    cells = [[cell(r.get(c)) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    numeric = [all(isinstance(r.get(c), int | float) or r.get(c) is None for r in rows) for c in columns]

    def line(values: list[str]) -> str:
        return "  ".join(
            v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric, strict=True)
        )

    out = [line(columns), line(["-" * w for w in widths])]
    out.extend(line(row) for row in cells)
    return "\n".join(s.rstrip() for s in out)


# ------------------------------------------------------------------------------------------------- run
CONVERSATION_COLUMNS = ["runs", "max_opening_prompt_tokens", "live_context_tokens"]
RUN_TABLE_COLUMNS = [
    "trace_id",
    "policy",
    "calls",
    "cumulative_input_tokens",
    "cumulative_output_tokens",
    "peak_context_tokens",
    "growth_exponent",
    "cache_hit_rate",
    "cost_usd",  # the table for people is in USD; json/csv keep the exact integer cost_microusd
    "compactions",
    "finish_reason",
]


def _progress(i: int, total: int, label: str) -> None:
    if sys.stderr.isatty() and total >= 20:
        end = "\n" if i == total else ""
        print(f"\r{label} {i}/{total}", end=end, file=sys.stderr, flush=True)


def iter_runs(
    paths: list[str],
    policy,
    window: int | str = "auto",
    pricing: str | None = "auto",
    behaviour: dict[str, Any] | None = None,
    scenarios: list[str] | None = None,
    dataset: tuple[str, str, bool] | None = None,
    transforms: Sequence[Any] = (),
) -> Iterator[tuple[list[Any], Any]]:
    """Batches of (traces, their replays as a ``sim.engine.dispatch.ReplayTable``) for every trace in the
    given
    files, in file order (a batch never spans two files); each trace through ``transforms``
    (``sim.transforms``) first."""
    from sim.cost.models import resolve
    from sim.cost.pricing import price_named
    from sim.engine.dispatch import BATCH, replay_table
    from sim.engine.model import ReplayModel
    from sim.importers import expand_paths, load_path

    if pricing not in ("auto", None):
        price_named(pricing)  # an unknown name fails before any run
    files = expand_paths(paths) if paths else []
    unpriced: set[str] = set()
    uncalibrated: set[str] = set()
    unwindowed: set[str] = set()
    sources: list[tuple[str, Any]] = [(f.name, lambda f=f: load_path(f)) for f in files]
    if scenarios:
        from scenarios.closed_loop import SCENARIOS, scenario
        from scenarios.conversation import SCENARIOS as CONVERSATIONS

        # unknown names fail before any run, listing every scripted scenario
        for name in scenarios:
            if name not in SCENARIOS and name not in CONVERSATIONS:
                raise UnknownNameError("scenario", name, {**SCENARIOS, **CONVERSATIONS})
        built = [CONVERSATIONS[n]() if n in CONVERSATIONS else scenario(n) for n in scenarios]
        sources += [(t.trace_id, lambda t=t: [t]) for t in built]
    if dataset is not None:
        from sim.trace.io import load_dataset_traces

        name, split, streaming = dataset
        sources.append((name, lambda: load_dataset_traces(name, split, streaming)))
    for i, (label, load) in enumerate(sources, start=1):
        f = Path(label)
        estimated_runs = estimated_calls = 0
        batch: list[Any] = []
        models: list[Any] = []
        for trace in itertools.chain(load(), [None]):
            if trace is None or len(batch) == BATCH:  # replay in batches: fast, and memory stays bounded
                yield batch, replay_table(batch, policy, models, window=window, pricing=pricing)
                batch, models = [], []
                if trace is None:
                    break
            model = ReplayModel(trace, **(behaviour or {}))
            if model.estimated:
                estimated_runs += 1
                estimated_calls += model.estimated
            # each model's fallbacks, once, where they are used: its price, its window (when looked
            # up), and the calibration that sized a run without provider numbers
            if pricing == "auto" and (trace.model or "") not in unpriced:
                unpriced.add(trace.model or "")
                for line in resolve(trace.model).warnings("pricing", "cache_family"):
                    _warn(line)
            if window == "auto" and (trace.model or "") not in unwindowed:
                unwindowed.add(trace.model or "")
                for line in resolve(trace.model).warnings("window"):
                    _warn(line)
            if (
                (trace.model or "") not in uncalibrated
                and _no_input_recorded(trace.arrays.recorded_input)
                and any(e.tokens_provenance == "estimate" for e in trace.events)
            ):
                uncalibrated.add(trace.model or "")
                for line in resolve(trace.model).warnings("bytes_per_token", "text_coefficients"):
                    _warn(line)
            if transforms:
                from sim.transforms.base import apply_all

                trace = apply_all(trace, transforms, model)
                model = model.like(trace)
            batch.append(trace)
            models.append(model)
        if estimated_runs:
            _warn(
                f"{f.name}: {estimated_calls} calls in {estimated_runs} runs have no recorded output tokens; "
                "estimated from each turn's text"
            )
        _progress(i, len(sources), "replaying")


def _no_input_recorded(recorded_input) -> bool:
    """No call's input recorded (-1 throughout); a first call with its input answers without an array
    operation (a streamed corpus asks once per trace)."""
    return (not len(recorded_input) or recorded_input[0] < 0) and bool((recorded_input < 0).all())


def model_flags(args: argparse.Namespace, window: int | str, pricing: str) -> tuple[int | str, str]:
    """``--model NAME`` (price as NAME, and NAME's window unless ``--window`` is given) and ``--window N``
    on ``run`` and ``explain``, as ``size`` and ``sweep`` take them: (window, pricing)."""
    if args.model:
        from sim.cost.models import resolve_window
        from sim.cost.pricing import price_named

        price_named(args.model)  # an unknown name: exit 2 with the closest ones
        if pricing not in ("auto", args.model):
            raise ConfigError(f"--model {args.model} and --pricing {pricing} disagree: give one")
        pricing = args.model
        if args.window is None and (w := resolve_window(args.model)) is not None:
            window = w
    if args.window is not None:
        if args.window < 1:
            raise ConfigError(f"--window {args.window} is not an integer >= 1")
        window = args.window
    return window, pricing


def model_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--model", metavar="NAME", help="price and window as this model (as --pricing NAME model.window=...)"
    )
    p.add_argument(
        "--window",
        type=int,
        help="provider context window in tokens (as model.window=N; default: the model's)",
    )


def cmd_run(args: argparse.Namespace) -> int:
    from sim.config.compose import build_policy, check_allow_modules, compose, model_behaviour, model_window
    from sim.engine.model import UPPER_BOUND
    from sim.information.ledger import LEDGER_COLUMNS, entries
    from sim.metrics.working_set import calls_table
    from sim.results.tables import (
        check_table_path,
        csv_text,
        json_line,
        table_columns,
        table_rows,
        write_frames,
    )
    from sim.util.versions import ctxsim_version

    paths, overrides = split_args(args.items)
    if not paths and not args.scenario and not args.dataset:
        raise ConfigError("run: no PATH (a canonical trace, a source file or a directory) and no --scenario")
    for option in ("calls", "ledger"):
        if getattr(args, option):
            check_table_path(Path(getattr(args, option)), f"--{option}")
    allow = check_allow_modules(args.allow_module or ())  # the command line's, never the config's
    cfg = compose(args.policy, overrides, allow)
    policy, window, behaviour = build_policy(cfg, allow), model_window(cfg), model_behaviour(cfg)
    window, pricing = model_flags(args, window, args.pricing)
    transforms = _transforms(args)
    rows, frames, ledger = [], [], []
    dataset = (args.dataset, args.split, args.streaming) if args.dataset else None
    # --streaming with json/csv writes each row as it comes, so memory stays bounded for any corpus size
    stream_out = args.streaming and args.format in ("json", "csv")
    header: list[str] | None = None
    runs = iter_runs(paths, policy, window, pricing, behaviour, args.scenario, dataset, transforms)
    try:
        for traces, table in _collecting_less(runs) if args.streaming else runs:
            interrupts.check()  # a batch replayed: a Ctrl-C a finalizer swallowed stops the run here
            if stream_out and args.format == "csv" and not (args.calls or args.ledger):
                # CSV straight from the replays' columns: no row dict, no record
                header = _stream_csv_columns(table_columns(table, ctxsim_version()), header)
                continue
            # rows from the replays' columns; a record per run only for the tables that show its calls
            batch_rows = table_rows(table, ctxsim_version())
            records = table.records() if args.calls or args.ledger else [None] * len(traces)
            if stream_out and args.format == "csv":
                header = _stream_csv(batch_rows, header)
            for trace, rec, row in zip(traces, records, batch_rows, strict=True):
                if stream_out:
                    if args.format == "json":
                        sys.stdout.write(json_line(row) + "\n")
                else:
                    rows.append(row)
                if args.calls:
                    frames.append(calls_table(trace, rec))
                if args.ledger:
                    ledger.extend(entries(trace, rec))
    finally:  # here, not in a finalizer: the thread reading ahead (sim.trace.readahead) has stopped on return
        runs.close()
    interrupts.check()  # before any output: an interrupted run writes no table, no --calls, no --ledger
    if args.calls:
        write_frames(frames, Path(args.calls))
    if args.ledger:
        import pandas as pd

        write_frames([pd.DataFrame(ledger, columns=list(LEDGER_COLUMNS))], Path(args.ledger))
    if stream_out:
        return 0
    if args.format == "json":
        sys.stdout.write("".join(json_line(r) + "\n" for r in rows))
    elif args.format == "csv":
        sys.stdout.write(csv_text(rows))
    else:
        shown = [
            {**r, "cost_usd": None if r["cost_microusd"] is None else f"{r['cost_microusd'] / 1e6:.4f}"}
            for r in rows
        ]
        conversations = any(r.get("runs", 1) > 1 for r in rows)  # per-run figures: --calls
        print(format_table(shown, RUN_TABLE_COLUMNS + (CONVERSATION_COLUMNS if conversations else [])))
        if len(rows) > 1:
            print(_totals_line(rows))
        if behaviour["summarizer"] == UPPER_BOUND:
            note = "it keeps what later actions need; an upper bound, not a harness"
            print(f"summarizer {UPPER_BOUND}: {note}")
    return 0


def _stream_csv(rows: list[dict[str, Any]], header: list[str] | None) -> list[str] | None:
    """Write a batch of rows as CSV under the first row's header (each row in its own column order, as
    a row at a time always did); returns the header. A batch whose rows all have the header's columns
    is one ``csv_text``: the same bytes, one writer per batch instead of per row."""
    from sim.results.tables import csv_text

    if rows and all(list(r) == (header or list(rows[0])) for r in rows):
        text = csv_text(rows)
        sys.stdout.write(text if header is None else text.split("\n", 1)[1])
        return header or list(rows[0])
    for row in rows:
        text = csv_text([row])
        sys.stdout.write(text if header is None else text.split("\n", 1)[1])
        header = header or list(row)
    return header


def _collecting_less(items: Iterator) -> Iterator:
    """``items``, with Python's cycle collector run less often meanwhile (restored after): a streamed
    corpus allocates and frees a few containers per trace and event, and a collection every 700 net
    allocations (the default) was ~6% of the run (10k runs: 286 collections, 0.2 s CPU; 4 and 0.04 s
    so; peak memory the same, 306 and 311 MiB)."""
    import gc

    before = gc.get_threshold()
    gc.set_threshold(20_000, *before[1:])
    try:
        yield from items
    finally:
        gc.set_threshold(*before)


def _stream_csv_columns(columns: dict[str, list], header: list[str] | None) -> list[str] | None:
    """``_stream_csv`` of the rows ``columns`` hold (``sim.results.tables.table_columns``: every row has its
    keys,
    in its order), the same bytes, written a column at a time (``sim.results.tables.csv_columns_text``).
    Returns
    the header."""
    from sim.results.tables import csv_columns_text

    names = list(columns)
    if not names or not len(columns[names[0]]):
        return header
    if header is not None and names != header:  # another column order: a row at a time, as it always was
        return _stream_csv(
            [dict(zip(names, row, strict=True)) for row in zip(*columns.values(), strict=True)], header
        )
    sys.stdout.write(csv_columns_text(columns, with_header=header is None))
    return names


def _transforms(args: argparse.Namespace) -> list[Any]:
    """The command line's ``--transform NAME [transform.KEY=VALUE ...]``, composed (none: [])."""
    specs = getattr(args, "transforms", None)
    if not specs:
        return []
    from sim.config.transforms import compose_transforms

    return compose_transforms(specs)


def _totals_line(rows: list[dict[str, Any]]) -> str:
    ci = sum(r["cumulative_input_tokens"] for r in rows)
    co = sum(r["cumulative_output_tokens"] for r in rows)
    calls = sum(r["calls"] for r in rows)
    return f"{len(rows)} runs, {calls:,} calls, cumulative input {ci:,} tokens, output {co:,} tokens"


# ---------------------------------------------------------------------------------------------- import
def cmd_import(args: argparse.Namespace) -> int:
    from sim.importers import load_paths
    from sim.trace.io import write_traces

    traces = load_paths(args.paths)
    first = next(traces, None)
    if first is None:  # every record was skipped (the warnings say why): an empty file is not a result
        raise TraceError(", ".join(map(str, args.paths)), "no traces to import (see the warnings above)")
    traces = itertools.chain([first], traces)
    if args.redact:
        from sim.trace.io import redact

        traces = map(redact, traces)
    n = write_traces(traces, Path(args.output))
    print(f"wrote {n} traces to {args.output}", file=sys.stderr)
    return 0


# -------------------------------------------------------------------------------------------- validate
def _canonical_problems(path: Path) -> Iterator[str]:
    """Every problem of every record of a canonical file (does not stop at the first)."""

    from sim.trace.codec import record_name
    from sim.trace.rules import trace_problems

    def report(record: str, d) -> Iterator[str]:
        for field, msg in trace_problems(d):
            yield f"{path.name}: record {record_name(record, d)}: field {field}: {msg}"

    if path.suffix.lower() == ".parquet":
        from sim.trace.read_parquet import parquet_rows

        try:
            for row, d in parquet_rows(path):
                d = {
                    k: v
                    for k, v in d.items()
                    if v is not None or k not in ("recorded_policy", "outcome", "children")
                }
                yield from report(f"row {row}", d)
        except TraceError as exc:  # a damaged file: its rows up to the damage are checked, then this
            yield str(exc)
        return
    for lineno, d, problem in json_lines(path):
        if problem is not None:
            yield f"{path.name}: record line {lineno}: {problem}"
        else:
            yield from report(f"line {lineno}", d)


def cmd_validate(args: argparse.Namespace) -> int:
    from sim.importers import detect, expand_paths, load_path
    from sim.trace.codec import CANONICAL_FORMAT, trace_to_dict
    from sim.trace.rules import trace_problems

    bad = 0
    for f in expand_paths(args.paths):
        try:
            imp = detect(f)
        except TraceError as exc:
            print(str(exc))
            bad += 1
            continue
        problems: list[str] = []
        count = 0
        if imp.name.startswith(CANONICAL_FORMAT):
            problems = list(_canonical_problems(f))
            count = None
        else:
            try:
                for t in load_path(f):
                    count += 1
                    problems.extend(
                        f"{f.name}: record {t.trace_id}: field {fld}: {msg}"
                        for fld, msg in trace_problems(trace_to_dict(t))
                    )
            except TraceError as exc:
                problems.append(str(exc))
        if problems:
            bad += 1
            print("\n".join(problems))
        else:
            what = f" ({count} traces)" if count is not None else ""
            print(f"{f.name}: ok, format {imp.name}{what}")
    return 2 if bad else 0


# -------------------------------------------------------------------------------------------- policies
def cmd_policies(args: argparse.Namespace) -> int:
    import dataclasses

    from sim.policies.base import knobs, registered
    from sim.results.tables import json_line

    out = []
    for name, cls in registered().items():
        ks = {f.name: (None if f.default is dataclasses.MISSING else f.default) for f in knobs(cls)}
        doc = (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""
        out.append({"policy": name, "knobs": ks, "description": doc})
    if args.format == "json":
        sys.stdout.write("".join(json_line(o) + "\n" for o in out))
    else:
        for o in out:
            ks = " ".join(f"{k}={v}" for k, v in o["knobs"].items()) or "(no knobs)"
            print(f"{o['policy']}\n    knobs: {ks}\n    {o['description']}")
    return 0


# ------------------------------------------------------------------------------------------------ demo
DEMO_STUDY = (  # (policy, grid) swept over the embedded suite by `ctxsim demo` (the README's main job)
    ("raw", ()),
    ("observation_masking", ("policy.n=1,3,10",)),
    (
        "seed_engine",
        (
            "policy.context_token_limit=null,16000,24000,32000,48000,64000",
            "policy.keep_recent_tokens=2000,4000,8000,16000",
            # the verdict's sensitivity to the mock model (the report's table)
            "model.on_missing=refetch,fail,degrade",
            "model.summarizer=extractive,oracle",
        ),
    ),
)


def _knob(row: dict, key: str):
    """A summary row's policy knob as an int, None when unset (NaN in a column of floats)."""
    v = row.get(f"policy.{key}")
    if v is None or (isinstance(v, float) and v != v):
        return None
    return int(v)


def cmd_demo(args: argparse.Namespace) -> int:
    """The README's main job: size the seed engine on the embedded suite, compare it with full history and
    observation masking, and write the comparison report."""
    import shutil

    from sim.analysis.size import recommendation_line, settings_from_results, tied_text, verdict_from_results
    from sim.results.summary import summary, varying_columns
    from sim.sweep.execute import SweepSpec, run_sweep

    out = Path(args.out)
    scenario = args.paths[0] if args.paths else "embedded"
    sweeps = out / "sweeps"
    shutil.rmtree(sweeps, ignore_errors=True)  # a fresh study each time: results follow the code
    paths = []
    for policy, grid in DEMO_STUDY:
        spec = SweepSpec(
            policy=policy,
            grid=grid,
            scenario=scenario,
            pricing=args.pricing,
            results=str(sweeps / policy),
            csv=True,
            skip_invalid=True,  # keep_recent_tokens 16000 with limit 16000 is refused: skipped, said so
        )
        paths.append(run_sweep(spec, workers=args.workers, progress=sys.stderr.isatty()))
    interrupts.check()  # the sweeps done: a Ctrl-C a finalizer swallowed stops the demo before its output
    rec = verdict_from_results(paths[-1], "seed_engine")
    best = rec.get("recommended") or {"context_token_limit": None}
    shown: list[dict] = []
    shown_base = False
    for path in paths:
        rows = summary(path)
        knobs = [c for c in varying_columns(rows) if c.startswith("policy.")]
        for r in rows:
            if (r.get("model.on_missing") or "refetch") != "refetch" or (
                r.get("summarizer") or "extractive"
            ) != "extractive":
                continue  # the sensitivity sweep's other mock behaviours: in the report's table
            if r["policy"] == "seed_engine":
                unset = _knob(r, "context_token_limit") is None
                if unset and shown_base:
                    continue  # the limit unset, keep_recent_tokens changes nothing: one row
                if not unset and any(_knob(r, k) != v for k, v in best.items()):
                    continue  # of the sized grid, show no compaction and the recommended setting
                shown_base = shown_base or unset
            label = " ".join([r["policy"], *(f"{k.split('.', 1)[1]}={r[k]}" for k in knobs)])
            if r["policy"] == "seed_engine" and _knob(r, "context_token_limit") is None:
                label = "seed_engine no compaction (context_token_limit unset)"
            # the demo's model is the default one (extractive summaries): no summarizer column
            rest = {
                k: v
                for k, v in r.items()
                if not k.startswith("policy") and k not in ("summarizer", "model.on_missing")
            }
            shown.append({"setting": label, **rest})
    print(format_table(shown, list(shown[0])))
    print(
        f"\nsized over {len(settings_from_results(paths[-1])) - 1} seed-engine settings against no "
        "compaction "
        f"x the embedded suite (priced as {args.pricing}):\n{rec['advice']}"
    )
    if line := tied_text(rec):
        print(line)
    print(recommendation_line(rec))
    try:
        from sim.report.make import make_report
    except ImportError:
        make_report = None
    if make_report is not None:
        md, html = make_report(paths, out)
        print(f"report: {md} and {html}")
    print(f"results: {', '.join(str(p) for p in paths)}")
    return 0


# --------------------------------------------------------------------------------------------- explain
STATE_NAMES = ("verbatim", "bounded", "masked", "dropped", "summarized", "spilled", "paginated")


def cmd_explain(args: argparse.Namespace) -> int:
    """What one agent call sent: its items, their sizes and states, the facts it needed, the cache split."""
    from sim.config.compose import build_policy, check_allow_modules, compose, model_behaviour, model_window
    from sim.core.records import AGENT
    from sim.engine.dispatch import replay
    from sim.engine.model import UPPER_BOUND, ReplayModel
    from sim.importers import load_path
    from sim.metrics.working_set import CATEGORY_COLUMNS, CLASS_NAMES, event_classes, working_set

    paths, overrides = split_args(args.items)
    if len(paths) != 1:
        raise ConfigError("explain: give exactly one trace file")
    allow = check_allow_modules(args.allow_module or ())
    cfg = compose(args.policy, overrides, allow)
    policy, window, behaviour = build_policy(cfg, allow), model_window(cfg), model_behaviour(cfg)
    window, pricing = model_flags(args, window, args.pricing)
    traces = list(load_path(Path(paths[0])))
    if args.trace:
        traces = [t for t in traces if t.trace_id == args.trace]
    if len(traces) != 1:
        ids = ", ".join(t.trace_id for t in traces[:5])
        raise ConfigError(
            f"explain: {paths[0]} holds {len(traces)} traces; choose one with --trace ({ids} ...)"
        )
    trace = traces[0]
    if not 0 <= args.call < len(trace.calls):
        raise ConfigError(
            f"explain: --call {args.call} is not in [0, {len(trace.calls) - 1}] for {trace.trace_id}"
        )
    seen: dict[str, Any] = {}

    def observe(k, view) -> None:
        if k == args.call:
            needs = trace.events[trace.calls[k].event_index].needs
            where = {f: view.facts.where(f, view.state, view.n) for f in needs} if view.facts else {}
            seen.update(
                n=view.n, tokens=list(view.tokens[: view.n]), state=list(view.state[: view.n]), where=where
            )
            seen["columns"], seen["why"] = policy.explain(trace, view.policy_state, view, k)

    rec = replay(
        trace, policy, ReplayModel(trace, **behaviour), observer=observe, window=window, pricing=pricing
    )
    if not seen:
        print(f"call {args.call} was never sent: the run ended with {rec.finish_reason}")
        return 0
    classes = trace.derived("working_set_classes", event_classes)
    rows = [
        {
            "item": i,
            "kind": trace.events[i].kind,
            "category": CLASS_NAMES[int(classes[i])],
            "state": STATE_NAMES[s],
            "tokens": t,
            "original_tokens": trace.events[i].tokens,
            "facts": ",".join(trace.events[i].provides) or None,
            **{col: values[i] for col, values in seen["columns"].items()},
        }
        for i, (t, s) in enumerate(zip(seen["tokens"], seen["state"], strict=True))
    ]
    print(format_table(rows, list(rows[0])))
    calls = rec.calls
    (row,) = [
        j
        for j, (kind, k) in enumerate(zip(calls["kind"], calls["recorded_call"], strict=True))
        if kind == AGENT and k == args.call
    ]
    c = {col: calls[col][row].item() for col in calls}
    print(
        f"\ncall {args.call} of {trace.trace_id} under {policy.name}: input {c['input_tokens']:,} = view "
        f"{c['view_tokens']:,} + residual {c['residual_tokens']:,} + status line {c['status_tokens']:,}; "
        f"cache read {c['cache_read_tokens']:,}, write {c['cache_write_tokens']:,}, uncached "
        f"{c['uncached_input_tokens']:,}; cost "
        f"{'$%.6f' % (c['cost_microusd'] / 1e6) if c['cost_microusd'] >= 0 else 'unpriced'}; "
        f"first changed item {c['first_changed']}"
    )
    if trace.runs > 1:  # a conversation: which run, and what that run opened on
        run = trace.calls[args.call].run_index
        start = trace.run_starts[run]
        opening = rec.opening_prompts[run] if run < len(rec.opening_prompts) else None
        print(
            f"run {run + 1} of the conversation's {trace.runs} (its calls {start}-"
            f"{(trace.run_starts + (len(trace.calls),))[run + 1] - 1})"
            + (f"; it opened on {opening:,} tokens" if opening is not None else "")
            + (" (this call)" if args.call == start else "")
        )
    ws = working_set(trace, rec)
    print(
        "working set: "
        + ", ".join(
            f"{name.removeprefix('view_').removesuffix('_tokens').replace('_', ' ')} {ws[name][row]:,}"
            for name in CATEGORY_COLUMNS[:7]
        )
        + (
            f"; reserve {ws['reserve_tokens'][row]:,} of the {rec.window:,}-token window"
            if rec.window
            else ""
        )
    )
    if seen["where"]:
        print("facts this action needs: " + ", ".join(f"{f} ({w})" for f, w in seen["where"].items()))
    if rec.summarizer == UPPER_BOUND and rec.summaries:
        print(f"summaries by the {UPPER_BOUND} summarizer: an upper bound (it keeps what later actions need)")
    for line in seen["why"]:
        print(line)
    return 0


# -------------------------------------------------------------------------------------------- fidelity
FIDELITY_COLUMNS = [
    "trace_id",
    "split",
    "calls",
    "input_exact_share",
    "cached_predicted_over_reported",
    "cached_median_abs_pct_err",
    "cached_p95_abs_pct_err",
    "cached_zero_reported_calls",
    "cost_predicted_over_recorded",
    "cost_median_abs_pct_err",
    "cost_p95_abs_pct_err",
    "text_estimate_median_abs_pct_err",
]


def cmd_fidelity(args: argparse.Namespace) -> int:
    from sim.analysis.fidelity import evaluate
    from sim.importers import load_paths
    from sim.results.tables import json_line

    report = evaluate(list(load_paths(args.paths)))
    if not report["per_trace"]:
        raise ConfigError("fidelity: none of the given traces has provider-reported usage")
    for line in report["overall"]["model_fallbacks"]:
        _warn(line)
    if args.format == "json":
        sys.stdout.write(json_line(report) + "\n")
    else:
        print(format_table(report["per_trace"], FIDELITY_COLUMNS))
        o = report["overall"]
        print(
            f"\noverall: {o['calls']:,} calls; input exact on {o['input_exact_share']:.2%}\n"
            f"held back: cached predicted/reported {o['cached_predicted_over_reported']}, per call |error| "
            f"median {o['cached_median_abs_pct_err']}% p95 {o['cached_p95_abs_pct_err']}% over calls "
            f"reporting a hit; {o['cached_zero_reported_calls']} calls reported 0 cached "
            f"({o['cached_zero_reported_predicted_calls']} of them predicted > 0)\n"
            f"held back: cost predicted/recorded {o['cost_predicted_over_recorded']}, per call |error| "
            f"median {o['cost_median_abs_pct_err']}% p95 {o['cost_p95_abs_pct_err']}%, per run median "
            f"{o['cost_run_median_abs_pct_err']}% p95 {o['cost_run_p95_abs_pct_err']}%\n"
            f"held back: text-only input estimate (shipped calibration) median |error| "
            f"{o['text_estimate_median_abs_pct_err']}%\nsplit: {o['split']}\n"
            f"held back ({len(o['held_back'])}): {', '.join(o['held_back']) or 'none'}"
        )
    return 0


# ----------------------------------------------------------------------------------------------- bench
def cmd_bench(args: argparse.Namespace) -> int:
    from sim.commands.bench import run_bench
    from sim.results.tables import json_line

    for name in args.policy or []:
        from sim.policies.base import policy_class

        policy_class(name)
    if args.grid:
        from sim.commands.bench import run_grid_bench

        if args.traces < 1 or args.repeats < 1:
            raise ConfigError(
                f"bench --grid: --traces {args.traces} and --repeats {args.repeats} must be >= 1"
            )
        row = run_grid_bench(args.traces, args.repeats, log=lambda m: _warn(m))
        interrupts.check()  # before any output (sim.util.interrupts)
        if args.format == "json":
            sys.stdout.write(json_line(row) + "\n")
        else:
            print(format_table([row], list(row)))
            print(
                f"size's grid path: {row['grid_calls_per_s'] / 1e6:.1f}M grid-calls/s, "
                f"{row['ratio']:.1%} of the bare kernel's {row['kernel_calls_per_s'] / 1e6:.1f}M "
                f"(CPU time, median of {row['repeats']}, one core pinned)"
            )
        return 0 if row["same_cumulative_input"] else 3
    rows = run_bench(args.policy, args.corpus, args.repeats, log=lambda m: _warn(m))
    interrupts.check()
    if args.format == "json":
        sys.stdout.write("".join(json_line(r) + "\n" for r in rows))
    else:
        print(format_table(rows, ["policy", "knobs", "corpus", "calls", "calls_per_s", "repeats"]))
        if rows:
            print(f"median of {args.repeats} repeats, one core pinned; machine has {rows[0]['cores']} cores")
    return 0


# ------------------------------------------------------------------------------------------------ size
def _int_list(text: str, option: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ConfigError(f"{option} {text!r}: expected comma-separated integers") from None
    if not values or any(v < 1 for v in values):
        raise ConfigError(f"{option} {text!r}: expected integers >= 1")
    return values


def cmd_size(args: argparse.Namespace) -> int:
    """Recommend context_token_limit and keep_recent_tokens from the user's traces, against no compaction."""
    from sim.analysis.assumptions import assumptions, assumptions_text
    from sim.analysis.size import (
        DEFAULT_KEEPS,
        DEFAULT_LIMITS,
        evaluate,
        grid_limits,
        keep_check,
        largest_summary,
        load_bearing_results,
        output_reserve,
        recommendation_line,
        rules_text,
        runaway_budgets,
        sensitivity,
        sensitivity_behaviours,
        sensitivity_text,
        tied_text,
        verdict,
    )
    from sim.cost.models import resolve_window
    from sim.cost.pricing import price_named
    from sim.importers import load_paths
    from sim.policies.base import knobs, policy_class
    from sim.results.tables import json_line
    from sim.util.forkmap import MAX_WORKERS

    cls = policy_class(args.policy)
    names = {f.name for f in knobs(cls)}
    if not {"context_token_limit", "keep_recent_tokens"} <= names:
        raise ConfigError(
            f"size: policy '{args.policy}' has no context_token_limit / keep_recent_tokens knobs"
        )
    if not 0 < args.target_completion <= 1:
        raise ConfigError(f"--target-completion {args.target_completion} is not in (0, 1]")
    if not 0 <= args.max_facts_lost_increase <= 1:
        raise ConfigError(f"--max-facts-lost-increase {args.max_facts_lost_increase} is not in [0, 1]")
    if not 1 <= args.workers <= MAX_WORKERS:
        raise ConfigError(f"--workers {args.workers} is not in [1, {MAX_WORKERS}]")
    pricing = args.model or "auto"
    if args.model:
        price_named(args.model)
    window: int | str | None = args.window or (resolve_window(args.model) if args.model else "auto")
    limits = _int_list(args.limits, "--limits") if args.limits else list(DEFAULT_LIMITS)
    keeps = _int_list(args.keeps, "--keeps") if args.keeps else list(DEFAULT_KEEPS)
    if args.dataset:
        from sim.trace.io import load_dataset_traces

        traces = list(load_dataset_traces(args.dataset, args.split))
    elif args.paths:
        traces = list(load_paths(args.paths))
    else:
        raise ConfigError("size: give trace PATHs or --dataset")
    if not traces:
        raise ConfigError("size: no traces")
    if transforms := _transforms(args):
        from sim.engine.model import ReplayModel
        from sim.transforms.base import apply_all

        what = {"on_missing": args.on_missing, "summarizer": args.summarizer}
        traces = [apply_all(t, transforms, ReplayModel(t, **what)) for t in traces]
    reserve, summary = output_reserve(traces), largest_summary(args.policy)
    win = window if isinstance(window, int) else None
    if window == "auto":  # every trace's recorded model has the same window: size against it
        recorded = {resolve_window(t.model) for t in traces}
        win = recorded.pop() if len(recorded) == 1 else None
    kept = grid_limits(limits, win, reserve, summary)
    if not kept:
        raise ConfigError(
            f"--limits: every limit is above window {win} - output reserve {reserve} - largest summary "
            f"{summary} = {win - reserve - summary}"
        )
    behaviour = {"on_missing": args.on_missing, "summarizer": args.summarizer}
    results = evaluate(
        traces,
        args.policy,
        kept,
        keeps,
        window,
        pricing,
        lambda i, n: _progress(i, n, "sizing settings"),
        behaviour,
        workers=args.workers,
    )

    def judge(res: list) -> dict:  # the same rule and tolerances for every mock behaviour
        return verdict(
            res,
            policy_name=args.policy,
            target=args.target_completion,
            max_facts_lost_increase=args.max_facts_lost_increase,
            window=win,
            reserve=reserve,
            summary=summary,
            workers=args.workers,
        )

    rec = judge(results)
    rec["grid_limits_left_out"] = [v for v in limits if v not in kept]
    if args.sensitivity:
        verdicts = []
        others = sensitivity_behaviours()
        for n, b in enumerate(others, start=1):
            interrupts.check()
            _progress(n, len(others), "sensitivity: mock behaviours")
            if b == behaviour:
                verdicts.append((b, rec))
                continue
            other = evaluate(traces, args.policy, kept, keeps, window, pricing, None, b, workers=args.workers)
            verdicts.append((b, judge(other)))
        rec["sensitivity"] = sensitivity(verdicts)
    rec["budgets"] = runaway_budgets(results[0])
    chosen = (rec.get("recommended") or {}).get("keep_recent_tokens")
    rec["keep_check"] = keep_check(load_bearing_results(traces), chosen)
    sources = [f"dataset:{args.dataset}"] if args.dataset else list(args.paths)
    rec["assumptions"] = assumptions(traces, results[0].trace_hashes, sources, pricing, window, behaviour)
    interrupts.check()  # before any output: an interrupted sizing prints no verdict
    for line in rec["assumptions"]["warnings"]:
        _warn(line)
    if args.format == "json":
        sys.stdout.write(json_line(rec) + "\n")
        return 0
    rows = [
        {
            "context_token_limit": g["context_token_limit"],
            "keep_recent_tokens": g["keep_recent_tokens"],
            "mean_cost_usd": round(g["mean_cost_usd"], 4),
            "saving_ci_usd": "-"
            if "saving_ci" not in g
            else f"{g['saving_ci'][0]:+.4f}..{g['saving_ci'][1]:+.4f}",
            "completion": round(g["completion"], 3),
            "facts_lost": g["facts_lost"],
            "refetch_calls": g["refetch_calls"],
            "overflow_runs": g["overflow_runs"],
            "eligible": g.get("eligible", "baseline"),
        }
        for g in [{**rec["baseline"], "context_token_limit": "none"}, *rec["grid"]]
    ]
    print(format_table(rows, list(rows[0])))
    left = rec["grid_limits_left_out"]
    print(
        f"\n{len(traces)} traces, {len(results) - 1} settings of {args.policy} against no compaction; "
        f"target completion {args.target_completion:.0%}, facts lost at most "
        f"+{args.max_facts_lost_increase:.0%} of facts seen."
        + (
            f" Limits left out of the grid (above window - output reserve {reserve} - largest summary "
            f"{summary}): {', '.join(map(str, left))}; the highest safe limit, {max(kept)}, stands in."
            if left
            else ""
        )
        + f"\n{rec['advice']}"
    )
    if rec.get("runners_up"):
        print(
            "runners-up: "
            + "; ".join(
                f"{r['context_token_limit']}/{r['keep_recent_tokens']} ${r['mean_cost_usd']:.4f} "
                f"({r['completion']:.0%})"
                for r in rec["runners_up"]
            )
        )
    if line := tied_text(rec):
        print(line)
    if "sensitivity" in rec:
        sens = rec["sensitivity"]
        table = [
            {
                **{k: r[k] for k in ("on_missing", "summarizer", "verdict")},
                "recommended": (
                    f"{r['context_token_limit']}/{r['keep_recent_tokens']}"
                    if r["context_token_limit"]
                    else "-"
                ),
                "mean_cost_usd": round(r["mean_cost_usd"], 4),
                "completion": round(r["completion"], 3),
                "saving_ci_usd": "-"
                if r["saving_ci"] is None
                else "{:+.4f}..{:+.4f}".format(*r["saving_ci"]),
                "eligible_settings": r["eligible_settings"],
            }
            for r in sens["rows"]
        ]
        print("\nsensitivity to the mock model (model.on_missing x model.summarizer):")
        print(format_table(table, list(table[0])))
        print(sensitivity_text(sens) + "\n")
    print(
        f"verdict under the mock model on_missing={args.on_missing}, summarizer={args.summarizer}"
        + (" (oracle: an upper bound)" if args.summarizer == "oracle" else "")
    )
    print(rules_text(rec["budgets"], rec["keep_check"]))
    print(assumptions_text(rec["assumptions"]))
    print(recommendation_line(rec))
    return 0


# ----------------------------------------------------------------------------------------------- sweep
def _sweep_flags(args: argparse.Namespace) -> list[str]:
    """The flags every subcommand takes, as the sweep's KEY=VALUE words (given before the words, so a
    word on the line wins): --policy, --pricing, --model (pricing and window of that model), --window,
    --allow-module."""
    words = []
    if args.policy:
        words.append(f"policy={args.policy}")
    # as `run` reads them (``model_flags``): --model and a --pricing naming another model are refused
    window, pricing = model_flags(args, None, args.pricing or "auto")
    if pricing != "auto" or args.pricing:
        words.append(f"pricing={pricing}")
    if window is not None:
        words.append(f"model.window={window}")
    if args.allow_module:
        words.append("allow_modules=" + ",".join(args.allow_module))
    return words


def cmd_sweep(args: argparse.Namespace) -> int:
    """One policy over a grid of settings and a scenario; resumable (rerun the same command)."""
    words = [w for name, ovs in getattr(args, "transforms", None) or () for w in (f"transform={name}", *ovs)]
    if args.multirun:  # through Hydra's multirun and whichever launcher the words choose
        from sim.sweep.hydra_app import main as hydra_main

        flags = _sweep_flags(args) + (["skip_invalid=true"] if args.skip_invalid else [])
        return hydra_main(flags + list(args.items) + words + (["csv=true"] if args.csv else []))
    from sim.sweep.execute import run_sweep, spec_from_args

    args.items = _sweep_flags(args) + list(args.items) + words
    spec, workers = spec_from_args(args.items, csv=args.csv, skip_invalid=args.skip_invalid)
    path = run_sweep(spec, workers=workers)
    print(f"results: {path}" + (f" (and {path.with_suffix('.csv').name})" if spec.csv else ""))
    print(f"summary: ctxsim results {path.parent}")
    return 0


def cmd_results(args: argparse.Namespace) -> int:
    from sim.engine.model import UPPER_BOUND
    from sim.results.summary import SUMMARY_METRICS, summary, varying_columns
    from sim.results.tables import json_line

    rows = summary(args.path)
    interrupts.check()  # before any output (sim.util.interrupts)
    if args.format == "json":
        sys.stdout.write("".join(json_line(r) + "\n" for r in rows))
    else:
        shown = [
            {**r, "summarizer": f"{UPPER_BOUND} (upper bound)"} if r.get("summarizer") == UPPER_BOUND else r
            for r in rows
        ]
        print(format_table(shown, varying_columns(rows) + list(SUMMARY_METRICS)))
        if any(r.get("summarizer") == UPPER_BOUND for r in rows):
            print(
                f"{UPPER_BOUND}: the summarizer keeps what later actions need; an upper bound, not a harness"
            )
    return 0


# ---------------------------------------------------------------------------------------------- report
def cmd_report(args: argparse.Namespace) -> int:
    from sim.report.make import make_report
    from sim.results.summary import results_file

    paths = [results_file(p) for p in args.paths]  # a missing file: ConfigError, exit 2, nothing written

    def step(msg: str) -> None:  # make_report checks for a Ctrl-C at each step (sim.util.interrupts)
        if sys.stderr.isatty():
            print(f"report: {msg}", file=sys.stderr, flush=True)

    md, page = make_report(
        paths, Path(args.output), trace_id=args.trace, allow_mixed=args.allow_mixed, progress=step
    )
    from sim.report.make import verdict_of

    if rec := verdict_of(md):
        print(rec)
    print(md)
    print(page)
    return 0


# ------------------------------------------------------------------------------------------------ main
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ctxsim",
        description="Replay recorded LLM-agent traces against context-management policies; "
        "measure what each policy costs.",
    )
    p.add_argument(
        "--debug", action="store_true", help="on an internal error (exit 3), print the traceback too"
    )
    from sim.util.versions import ctxsim_version

    p.add_argument("--version", action="version", version=f"ctxsim {ctxsim_version()}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    r = sub.add_parser(
        "run",
        help="replay traces under one policy",
        description="Replay each trace under a policy and print one row of metrics per run. PATH is a "
        "canonical trace file (.jsonl/.parquet), a source file in a supported format (auto-detected), or "
        "a directory of them. Overrides set the policy's knobs, e.g. policy.n=10.",
        epilog="example: ctxsim run scenarios/suite --policy observation_masking policy.n=10 --format json",
    )
    r.add_argument("items", nargs="*", metavar="PATH|policy.KEY=VALUE")
    r.add_argument(
        "--dataset",
        metavar="NAME_OR_PATH",
        help="canonical traces through Hugging Face datasets: local Parquet/JSON Lines (file or folder) or a "
        "hub dataset name",
    )
    r.add_argument("--split", default="train", help="dataset split (default train)")
    r.add_argument(
        "--streaming", action="store_true", help="read the dataset record by record, in bounded memory"
    )
    r.add_argument(
        "--scenario",
        action="append",
        metavar="ID",
        help="replay a scripted scenario: grep_and_read, working_set_16k, needle, spill, or conversation "
        "(5 runs of one conversation) (repeatable)",
    )
    r.add_argument(
        "--policy", default="raw", help="registered policy or preset (see `ctxsim policies`); default raw"
    )
    r.add_argument(
        "--format",
        choices=("table", "json", "csv"),
        default="table",
        help="table for people; json = JSON Lines, one object per run; csv",
    )
    r.add_argument("--calls", metavar="OUT", help="also write the per-call table (.csv, .jsonl or .parquet)")
    r.add_argument(
        "--ledger", metavar="OUT", help="also write the information-loss ledger (.csv, .jsonl or .parquet)"
    )
    r.add_argument(
        "--allow-module",
        action="append",
        metavar="MODULE",
        help="let a policy config's _target_ name a Policy subclass from this module of yours (repeatable)",
    )
    r.add_argument(
        "--pricing",
        default="auto",
        metavar="MODEL",
        help="price every call as this model (conf/pricing/); default: each trace's recorded model",
    )
    model_options(r)
    r.set_defaults(func=cmd_run)

    i = sub.add_parser(
        "import",
        help="convert source files into one canonical trace file",
        description="Convert any number of source files (auto-detected formats) into one "
        "canonical file; the format follows OUT's extension (.jsonl or .parquet).",
    )
    i.add_argument("paths", nargs="+", metavar="PATH")
    i.add_argument("-o", "--output", required=True, metavar="OUT")
    i.add_argument(
        "--redact",
        action="store_true",
        help="write text-free traces: sizes, provenance, usage and hashed fact ids only (no content)",
    )
    i.set_defaults(func=cmd_import)

    v = sub.add_parser(
        "validate",
        help="list every problem in trace files",
        description="Check files against the canonical schema (scenarios/SCHEMA.md) and list "
        "every problem with file, record and field. Exit 2 if any.",
    )
    v.add_argument("paths", nargs="+", metavar="PATH")
    v.set_defaults(func=cmd_validate)

    po = sub.add_parser("policies", help="list registered policies with their knobs and defaults")
    po.add_argument("--format", choices=("table", "json"), default="table")
    po.set_defaults(func=cmd_policies)

    d = sub.add_parser(
        "demo",
        help="compare the built-in policies on the embedded scenario suite",
        description="Replay the embedded suite (or PATHs) under raw, tool_result_head_tail, "
        "observation_masking n=10 and seed_engine (context_token_limit 32000, keep_recent_tokens 8000); "
        "print a comparison and write per-run and per-call tables.",
    )
    d.add_argument(
        "paths", nargs="*", metavar="PATH", help="a trace file or folder instead of the embedded suite"
    )
    d.add_argument("--out", default="reports/latest", help="output folder (default reports/latest)")
    d.add_argument("--workers", type=int, default=2, help="processes for the sweeps (default 2)")
    d.add_argument(
        "--pricing",
        default="claude-sonnet-4-5",
        metavar="MODEL",
        help="price the runs as this model (default claude-sonnet-4-5; 'auto' = each trace's own model)",
    )
    d.set_defaults(func=cmd_demo)
    e = sub.add_parser(
        "explain",
        help="show what one call sent under a policy: items, sizes, states, facts, cache split",
        description="Replay one trace under a policy and show agent call K: every item it sent with its "
        "size and state, the facts the call's action needs and where they are, and the cache split.",
    )
    e.add_argument("items", nargs="+", metavar="TRACE|policy.KEY=VALUE")
    e.add_argument("--policy", default="raw")
    e.add_argument("--call", type=int, required=True, help="recorded call index (0-based)")
    e.add_argument("--trace", help="trace_id, when the file holds several traces")
    e.add_argument(
        "--pricing",
        default="auto",
        metavar="MODEL",
        help="price every call as this model (conf/pricing/); default: the trace's recorded model",
    )
    model_options(e)
    e.add_argument(
        "--allow-module",
        action="append",
        metavar="MODULE",
        help="let a policy config's _target_ name a Policy subclass from this module of yours (repeatable)",
    )
    e.set_defaults(func=cmd_explain)
    f = sub.add_parser(
        "fidelity",
        help="compare modelled tokens and cost with the providers' recorded numbers",
        description="Replay each trace with provider usage under its recorded policy and compare, per call, "
        "the modelled input, cached and output tokens and cost with the recorded ones (median and p95 "
        "absolute % error per trace; overall figures on the traces held back from fitting).",
    )
    f.add_argument("paths", nargs="+", metavar="PATH")
    f.add_argument("--format", choices=("table", "json"), default="table")
    f.set_defaults(func=cmd_fidelity)
    b = sub.add_parser(
        "bench",
        help="engine speed: simulated calls per second per policy",
        description="Benchmark the replay engine: simulated calls per second for each "
        "built-in policy over the 40 shared real runs (corpus shared, from CTXSIM_TRACES) and "
        "the "
        "embedded suite (corpus embedded); the median of several repeats on one pinned core.",
    )
    b.add_argument("--format", choices=("table", "json"), default="table")
    b.add_argument("--repeats", type=int, default=7, help="timed repeats per (policy, corpus); default 7")
    b.add_argument("--policy", action="append", help="only this policy (repeatable); default all registered")
    b.add_argument("--corpus", action="append", choices=("shared", "embedded"), help="only this corpus")
    b.add_argument(
        "--grid",
        action="store_true",
        help="calls/s of size's grid path (20 x 20 seed_engine settings) and its ratio to the bare kernel "
        "(benchmarks/kernel.py), both measured in this run",
    )
    b.add_argument("--traces", type=int, default=200, help="SWE-like traces for --grid (default 200)")
    b.set_defaults(func=cmd_bench)
    sz = sub.add_parser(
        "size",
        help="recommend context_token_limit and keep_recent_tokens from your traces",
        description="Replay the traces under a grid of context_token_limit x keep_recent_tokens and "
        "recommend the cheapest setting whose answers complete in at least the target share of runs "
        "without a context overflow, with bootstrap 95% intervals over traces, the runners-up and one "
        "sentence of advice.",
    )
    sz.add_argument("paths", nargs="*", metavar="PATH")
    sz.add_argument(
        "--dataset", metavar="NAME_OR_PATH", help="canonical traces through Hugging Face datasets"
    )
    sz.add_argument("--split", default="train")
    sz.add_argument("--policy", default="seed_engine", help="a policy with both knobs (default seed_engine)")
    sz.add_argument("--model", metavar="NAME", help="price and window as this model (default: recorded)")
    sz.add_argument("--window", type=int, help="provider context window in tokens (default: the model's)")
    sz.add_argument(
        "--target-completion",
        type=float,
        default=0.95,
        help="share of runs whose answer must complete under a recommended setting (default 0.95)",
    )
    sz.add_argument(
        "--max-facts-lost-increase",
        type=float,
        default=0.05,
        help="how much more of the facts seen a recommended setting may lose than no compaction "
        "(default 0.05: 5 percentage points)",
    )
    sz.add_argument("--limits", help="context_token_limit values, comma-separated")
    sz.add_argument("--keeps", help="keep_recent_tokens values, comma-separated")
    sz.add_argument(
        "--on-missing",
        choices=("refetch", "fail", "degrade"),
        default="refetch",
        help="what the agent does when a needed fact is gone (default refetch: re-read, at a cost)",
    )
    sz.add_argument(
        "--summarizer",
        choices=("extractive", "oracle"),
        default="extractive",
        help="the mock model's summarizer (default extractive; oracle is an upper bound)",
    )
    sz.add_argument(
        "--sensitivity",
        action="store_true",
        help="also recompute the verdict under every --on-missing x --summarizer and say whether it holds",
    )
    sz.add_argument(
        "--workers",
        type=int,
        default=2,
        help="processes for the grid batches and the bootstraps (default 2; the same answer for any number)",
    )
    sz.add_argument("--format", choices=("table", "json"), default="table")
    sz.set_defaults(func=cmd_size)
    sw = sub.add_parser(
        "sweep",
        help="replay a scenario under every setting of a grid; resumable, parallel",
        description="Replay every trace of a scenario under every point of a grid of policy settings. "
        "Words: scenario=embedded|conversation|PATH|dataset:NAME, policy=NAME, policy.KEY=V1,V2,... "
        "(Hydra-style multirun values; several keys give the product), model.KEY=V, results.path=DIR, "
        "workers=N, chunk_size=N, pricing=MODEL|auto, experiment=NAME (conf/experiment/NAME.yaml), "
        "executor=pool|ray (ray: chunks as Ray tasks, pip install 'ctxsim[ray]'), "
        "ray.address=auto|HOST:PORT (default: a local Ray with `workers` CPUs). Finished chunks are kept "
        "in DIR/parts/: an interrupted sweep resumes when the same command is run again.",
        epilog="example: ctxsim sweep experiment=size_seed_engine workers=2",
    )
    sw.add_argument("items", nargs="*", metavar="KEY=VALUE")
    sw.add_argument("--csv", action="store_true", help="also write DIR/results.csv")
    sw.add_argument(
        "--skip-invalid",
        action="store_true",
        help="skip grid points the policy refuses (a note names each) instead of exit 2",
    )
    sw.add_argument("--policy", help="the policy (as policy=NAME)")
    sw.add_argument("--pricing", metavar="MODEL", help="price every call as this model (as pricing=MODEL)")
    sw.add_argument(
        "--model",
        metavar="NAME",
        help="price and window as this model (pricing=NAME model.window=its window)",
    )
    sw.add_argument("--window", type=int, help="provider context window in tokens (as model.window=N)")
    sw.add_argument(
        "--allow-module",
        action="append",
        metavar="MODULE",
        help="let a policy config's _target_ name a Policy subclass from this module (as allow_modules=)",
    )
    sw.add_argument(
        "-m",
        "--multirun",
        action="store_true",
        help="run through Hydra's multirun: one job per grid point on any Hydra launcher "
        "(hydra/launcher=joblib hydra.launcher.n_jobs=2; ray and submitit with their plugins)",
    )
    sw.set_defaults(func=cmd_sweep)
    rs = sub.add_parser(
        "results",
        help="summarise a sweep: one row per policy setting",
        description="Summarise a sweep's results.parquet (PATH: the file or its folder): per policy setting "
        "the runs, median and mean cost, cumulative input tokens, cache hit rate, compactions per run, "
        "facts lost and the share of runs that completed their answer.",
    )
    rs.add_argument("path", metavar="PATH")
    rs.add_argument("--format", choices=("table", "json"), default="table")
    rs.set_defaults(func=cmd_results)
    rp = sub.add_parser(
        "report",
        help="write a Markdown and a self-contained HTML report of sweep results, with figures",
        description="Write DIR/report.md, DIR/report.html (figures embedded, no external assets) and "
        "DIR/figures/*.png from one or more sweeps' results.parquet (the file or its folder): per-setting "
        "table, cost vs completion with the Pareto frontier, heatmaps over a 2-D grid, cumulative input "
        "tokens by call for one trace under raw and the cheapest settings, and the view's composition "
        "under the recommended setting. With two RESULTS, the second (candidate) is compared with the "
        "first (baseline).",
        epilog="example: ctxsim report outputs/sweeps/raw outputs/sweeps/seed_engine -o reports/seed",
    )
    rp.add_argument("paths", nargs="+", metavar="RESULTS")
    rp.add_argument("-o", "--output", required=True, metavar="DIR", help="output folder")
    rp.add_argument("--trace", metavar="ID", help="trace of the per-call figures (default: most calls)")
    rp.add_argument(
        "--allow-mixed",
        action="store_true",
        help="report results of different ctxsim versions, suites or pricing together (said in the report)",
    )
    rp.set_defaults(func=cmd_report)
    from sim.gate.args import add_parser as add_gate_parser  # exit 0 pass, 1 regression, 2 config error

    add_gate_parser(sub)
    return p


def _unknown_arguments(parser: argparse.ArgumentParser, command: str, extra: list[str]) -> None:
    """Exit 2 with the subcommand's usage and, per unknown flag, the closest flags it takes."""
    import difflib

    sub = next(a.choices[command] for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    flags = sorted({o for a in sub._actions for o in a.option_strings if o.startswith("--")})
    hints = []
    for x in extra:
        name = x.split("=", 1)[0]
        close = difflib.get_close_matches(name, flags, n=2, cutoff=0.6) if name.startswith("-") else []
        hints.append(f"{x!r}" + (f" (did you mean {' or '.join(close)}?)" if close else ""))
    sub.error(f"unrecognized arguments: {', '.join(hints)}")


def _show_notice(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"ctxsim: warning: {message}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    import warnings

    from sim.util.notices import ImportNotice

    warnings.simplefilter("always", ImportNotice)
    warnings.showwarning = _show_notice
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv  # accepted anywhere on the line, not only before the command
    argv = [a for a in argv if a != "--debug"]
    transforms: list = []
    if argv[:1] and argv[0] in ("run", "size", "sweep"):  # --transform NAME [transform.KEY=V ...]
        from sim.config.transforms import take_transforms

        try:
            argv, transforms = take_transforms(argv, loose=argv[0] == "sweep")
        except CtxsimError as exc:
            print(f"ctxsim: error: {exc}", file=sys.stderr)
            return exc.exit_code
    # `run PATH... --policy X policy.n=10`: overrides may follow options, which argparse leaves over
    args, extra = parser.parse_known_args(argv)
    if extra:
        if args.command in ("run", "explain", "sweep") and all(_OVERRIDE.match(x) for x in extra):
            args.items.extend(extra)
        else:
            _unknown_arguments(parser, args.command, extra)
    args.transforms = transforms
    return run_command(args.func, args, debug=debug)


if __name__ == "__main__":
    sys.exit(main())
