"""``ctxsim run``: replay traces under one policy and print one row of metrics per run (a table, JSON
Lines or CSV), optionally the per-call table and the information-loss ledger. ``--streaming`` with json
or csv writes each batch's rows as they come, so memory stays bounded for any corpus size."""

from __future__ import annotations

import argparse
import itertools
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from sim.commands.common import (
    add_allow_module,
    add_mock_model_options,
    add_model_options,
    add_transform_option,
    format_table,
    mock_model_words,
    model_flags,
    progress,
    split_args,
    transforms_of,
    warn,
)
from sim.util import interrupts
from sim.util.errors import ConfigError, TraceError, UnknownNameError

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


def add_parser(sub) -> None:
    """The ``run`` subcommand on the CLI's subparsers."""
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
    add_allow_module(r)
    r.add_argument(
        "--pricing",
        default="auto",
        metavar="MODEL",
        help="price every call as this model (conf/pricing/); default: each trace's recorded model",
    )
    add_model_options(r)
    add_mock_model_options(r, as_words=True)
    add_transform_option(r)
    r.set_defaults(func=cmd_run)


# ----------------------------------------------------------------------------------------- replaying
def run_sources(
    paths: list[str], scenarios: list[str] | None, dataset: tuple[str, str, bool] | None
) -> list[tuple[str, Any]]:
    """(label, loader of its traces) for every trace file, scripted scenario and dataset, in that order;
    an unknown scenario fails here, before any run, listing every scripted scenario."""
    from sim.importers import expand_paths, load_path

    files = expand_paths(paths) if paths else []
    sources: list[tuple[str, Any]] = [(f.name, lambda f=f: load_path(f)) for f in files]
    if scenarios:
        from scenarios.closed_loop import SCENARIOS, scenario
        from scenarios.conversation import SCENARIOS as CONVERSATIONS

        for name in scenarios:
            if name not in SCENARIOS and name not in CONVERSATIONS:
                raise UnknownNameError("scenario", name, {**SCENARIOS, **CONVERSATIONS})
        built = [CONVERSATIONS[n]() if n in CONVERSATIONS else scenario(n) for n in scenarios]
        sources += [(t.trace_id, lambda t=t: [t]) for t in built]
    if dataset is not None:
        from sim.trace.io import load_dataset_traces

        name, split, streaming = dataset
        sources.append((name, lambda: load_dataset_traces(name, split, streaming)))
    return sources


class FallbackWarnings:
    """Each model's fallbacks, said once, where they are used: its price, its window (when looked up),
    and the calibration that sized a run without provider numbers."""

    def __init__(self, window: int | str, pricing: str | None) -> None:
        from sim.cost.models import resolve

        self.resolve = resolve
        self.window, self.pricing = window, pricing
        self.unpriced: set[str] = set()
        self.uncalibrated: set[str] = set()
        self.unwindowed: set[str] = set()

    def see(self, trace) -> None:
        resolve = self.resolve
        name = trace.model or ""
        if self.pricing == "auto" and name not in self.unpriced:
            self.unpriced.add(name)
            for line in resolve(trace.model).warnings("pricing", "cache_family"):
                warn(line)
        if self.window == "auto" and name not in self.unwindowed:
            self.unwindowed.add(name)
            for line in resolve(trace.model).warnings("window"):
                warn(line)
        if (
            name not in self.uncalibrated
            and no_input_recorded(trace.arrays.recorded_input)
            and any(e.tokens_provenance == "estimate" for e in trace.events)
        ):
            self.uncalibrated.add(name)
            for line in resolve(trace.model).warnings("bytes_per_token", "text_coefficients"):
                warn(line)


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
    given files, in file order (a batch never spans two files); each trace through ``transforms``
    (``sim.transforms``) first."""
    from sim.cost.pricing import price_named
    from sim.engine.dispatch import BATCH, replay_table
    from sim.engine.model import ReplayModel

    if pricing not in ("auto", None):
        price_named(pricing)  # an unknown name fails before any run
    sources = run_sources(paths, scenarios, dataset)
    fallbacks = FallbackWarnings(window, pricing)
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
            fallbacks.see(trace)
            if transforms:
                from sim.transforms.base import apply_all

                trace = apply_all(trace, transforms, model)
                model = model.like(trace)
            batch.append(trace)
            models.append(model)
        if estimated_runs:
            warn(
                f"{f.name}: {estimated_calls} calls in {estimated_runs} runs have no recorded output tokens; "
                "estimated from each turn's text"
            )
        progress(i, len(sources), "replaying")


def no_input_recorded(recorded_input) -> bool:
    """No call's input recorded (-1 throughout); a first call with its input answers without an array
    operation (a streamed corpus asks once per trace)."""
    return (not len(recorded_input) or recorded_input[0] < 0) and bool((recorded_input < 0).all())


def collecting_less(items: Iterator) -> Iterator:
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


# ------------------------------------------------------------------------------------------- output
def stream_csv(rows: list[dict[str, Any]], header: list[str] | None) -> list[str] | None:
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


def stream_csv_columns(columns: dict[str, list], header: list[str] | None) -> list[str] | None:
    """``stream_csv`` of the rows ``columns`` hold (``sim.results.tables.table_columns``: every row has
    its keys, in its order), the same bytes, written a column at a time
    (``sim.results.tables.csv_columns_text``). Returns the header."""
    from sim.results.tables import csv_columns_text

    names = list(columns)
    if not names or not len(columns[names[0]]):
        return header
    if header is not None and names != header:  # another column order: a row at a time, as it always was
        return stream_csv(
            [dict(zip(names, row, strict=True)) for row in zip(*columns.values(), strict=True)], header
        )
    sys.stdout.write(csv_columns_text(columns, with_header=header is None))
    return names


def totals_line(rows: list[dict[str, Any]]) -> str:
    """The one line under a table of several runs: runs, calls, cumulative input and output tokens."""
    ci = sum(r["cumulative_input_tokens"] for r in rows)
    co = sum(r["cumulative_output_tokens"] for r in rows)
    calls = sum(r["calls"] for r in rows)
    return f"{len(rows)} runs, {calls:,} calls, cumulative input {ci:,} tokens, output {co:,} tokens"


def print_rows(rows: list[dict[str, Any]], fmt: str, summarizer: str) -> None:
    """The rows of a run that kept them (not streamed): JSON Lines, CSV or the table for people."""
    from sim.engine.model import UPPER_BOUND
    from sim.results.tables import csv_text, json_line

    if fmt == "json":
        sys.stdout.write("".join(json_line(r) + "\n" for r in rows))
    elif fmt == "csv":
        sys.stdout.write(csv_text(rows))
    else:
        shown = [
            {**r, "cost_usd": None if r["cost_microusd"] is None else f"{r['cost_microusd'] / 1e6:.4f}"}
            for r in rows
        ]
        conversations = any(r.get("runs", 1) > 1 for r in rows)  # per-run figures: --calls
        print(format_table(shown, RUN_TABLE_COLUMNS + (CONVERSATION_COLUMNS if conversations else [])))
        if len(rows) > 1:
            print(totals_line(rows))
        if summarizer == UPPER_BOUND:
            note = "it keeps what later actions need; an upper bound, not a harness"
            print(f"summarizer {UPPER_BOUND}: {note}")


# ---------------------------------------------------------------------------------------------- run
def cmd_run(args: argparse.Namespace) -> int:
    from sim.config.compose import build_policy, check_allow_modules, compose, model_behaviour, model_window
    from sim.results.tables import check_table_path

    paths, overrides = split_args(args.items)
    if not paths and not args.scenario and not args.dataset:
        raise ConfigError("run: no PATH (a canonical trace, a source file or a directory) and no --scenario")
    for option in ("calls", "ledger"):
        if getattr(args, option):
            check_table_path(Path(getattr(args, option)), f"--{option}")
    allow = check_allow_modules(args.allow_module or ())  # the command line's, never the config's
    # the flags first, so a model.KEY=V word on the line wins, as on sweep
    cfg = compose(args.policy, mock_model_words(args) + overrides, allow)
    policy, window, behaviour = build_policy(cfg, allow), model_window(cfg), model_behaviour(cfg)
    window, pricing = model_flags(args, window, args.pricing)
    transforms = transforms_of(args)
    dataset = (args.dataset, args.split, args.streaming) if args.dataset else None
    runs = iter_runs(paths, policy, window, pricing, behaviour, args.scenario, dataset, transforms)
    rows, frames, ledger = replay_and_collect(args, runs)
    interrupts.check()  # before any output: an interrupted run writes no table, no --calls, no --ledger
    if args.calls:
        from sim.results.tables import write_frames

        write_frames(frames, Path(args.calls))
    if args.ledger:
        import pandas as pd

        from sim.information.ledger import LEDGER_COLUMNS
        from sim.results.tables import write_frames

        write_frames([pd.DataFrame(ledger, columns=list(LEDGER_COLUMNS))], Path(args.ledger))
    if args.streaming and args.format in ("json", "csv"):
        return 0
    print_rows(rows, args.format, behaviour["summarizer"])
    return 0


def replay_and_collect(args: argparse.Namespace, runs) -> tuple[list, list, list]:
    """Consume ``runs`` (``iter_runs``): (rows, per-call frames, ledger entries) for the output, or, with
    ``--streaming`` and json/csv, each batch's rows written as they come (no rows kept)."""
    from sim.information.ledger import entries
    from sim.metrics.working_set import calls_table
    from sim.results.tables import json_line, table_columns, table_rows
    from sim.util.versions import ctxsim_version

    rows, frames, ledger = [], [], []
    stream_out = args.streaming and args.format in ("json", "csv")
    header: list[str] | None = None
    replayed = 0
    try:
        for traces, table in collecting_less(runs) if args.streaming else runs:
            interrupts.check()  # a batch replayed: a Ctrl-C a finalizer swallowed stops the run here
            replayed += len(traces)
            if stream_out and args.format == "csv" and not (args.calls or args.ledger):
                # CSV straight from the replays' columns: no row dict, no record
                header = stream_csv_columns(table_columns(table, ctxsim_version()), header)
                continue
            # rows from the replays' columns; a record per run only for the tables that show its calls
            batch_rows = table_rows(table, ctxsim_version())
            records = table.records() if args.calls or args.ledger else [None] * len(traces)
            if stream_out and args.format == "csv":
                header = stream_csv(batch_rows, header)
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
    finally:  # here, not in a finalizer: the thread reading ahead (sim.trace.columns) has stopped on return
        runs.close()
    if not replayed and not args.scenario:
        # as import and validate refuse it: an input with no model call has nothing to replay
        where = ", ".join(split_args(args.items)[0]) or str(args.dataset)
        raise TraceError(where, "no traces to replay (see the warnings above)")
    return rows, frames, ledger
