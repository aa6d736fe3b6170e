"""``ctxsim size``: recommend context_token_limit and keep_recent_tokens from the user's traces, against
no compaction. Replays a grid of the two knobs, judges it by one rule (``sim.analysis.verdict.verdict``),
optionally under every mock-model behaviour (``--sensitivity``), and prints the verdict with the
assumptions it rests on."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from sim.commands.common import (
    add_mock_model_options,
    add_transform_option,
    add_workers_option,
    format_table,
    model_flags,
    progress,
    split_args,
    transforms_of,
    warn,
)
from sim.util import interrupts
from sim.util.errors import ConfigError
from sim.util.forkmap import check_workers


def add_parser(sub) -> None:
    """The ``size`` subcommand on the CLI's subparsers."""
    sz = sub.add_parser(
        "size",
        help="recommend context_token_limit and keep_recent_tokens from your traces",
        description="Replay the traces under a grid of context_token_limit x keep_recent_tokens and no "
        "compaction, and say which setting to ship, by the regime no compaction puts the traces in: "
        "compaction required (some runs overflow the window: the setting that overflows fewest, then "
        "completes most, loses fewest facts, costs least, its cost against the same runs with no window), "
        "compacting pays (the cheapest setting whose paired saving's 95% interval lies above zero, within "
        "the completion target and the facts-lost tolerance, with no overflow), or not needed (a "
        "safety-net pair). With the runners-up, why each other setting is not shipped, the assumptions "
        "and one sentence of advice (docs/sizing.md).",
    )
    sz.add_argument(
        "items",
        nargs="*",
        metavar="PATH|KEY=VALUE",
        help="trace files or folders; model.on_missing=X, model.summarizer=X as on run and sweep, workers=N "
        "as on sweep (the same as the flags; a word wins over its flag)",
    )
    sz.add_argument(
        "--dataset", metavar="NAME_OR_PATH", help="canonical traces through Hugging Face datasets"
    )
    sz.add_argument("--split", default="train")
    sz.add_argument(
        "--policy",
        default="seed_engine",
        help="the policy to size (default seed_engine): any registered policy with numeric knobs, on its "
        "default grid (its size_grid) or --grid's",
    )
    sz.add_argument(
        "--grid",
        action="append",
        metavar="KEY=V1,V2,...",
        help="a knob of --policy and the values to try (one or two --grid; default: the policy's own grid); "
        "for seed_engine the same as --limits/--keeps",
    )
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
    sz.add_argument("--limits", help="seed_engine's context_token_limit values, comma-separated")
    sz.add_argument("--keeps", help="seed_engine's keep_recent_tokens values, comma-separated")
    add_mock_model_options(sz)
    sz.add_argument(
        "--sensitivity",
        action="store_true",
        help="also recompute the verdict under every --on-missing x --summarizer and say whether it holds",
    )
    add_workers_option(
        sz,
        2,
        "processes for the grid batches and the runs on the per-call loop, when there is enough of each "
        "(default 2; the same answer for any number)",
    )
    sz.add_argument("--format", choices=("table", "json"), default="table")
    sz.add_argument(
        "--progress",
        action="store_true",
        help="show progress on standard error even when it is not a terminal (on a terminal it is shown)",
    )
    add_transform_option(sz)
    sz.set_defaults(func=cmd_size)


def int_list(text: str, option: str) -> list[int]:
    """A comma-separated list of integers >= 1 (``--limits``, ``--keeps``), else exit 2 naming the flag."""
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ConfigError(f"{option} {text!r}: expected comma-separated integers") from None
    if not values or any(v < 1 for v in values):
        raise ConfigError(f"{option} {text!r}: expected integers >= 1")
    return values


SIZE_WORDS = ("model.on_missing", "model.summarizer", "workers")


def take_size_words(args: argparse.Namespace) -> None:
    """Split ``size``'s positional words into ``args.paths`` and the KEY=VALUE words it shares with run
    and sweep (``SIZE_WORDS``), which set ``args.on_missing``, ``args.summarizer`` and ``args.workers``
    (a word wins over its flag, as on sweep); a bad value is refused as run refuses it."""
    args.paths, words = split_args(args.items)
    for word in words:
        key, _, value = word.partition("=")
        if key not in SIZE_WORDS:
            raise ConfigError(
                f"size: '{word}' is not one of {', '.join(k + '=' for k in SIZE_WORDS)} (the other settings "
                "are flags: ctxsim size --help)"
            )
        if key == "workers":
            try:
                args.workers = check_workers(int(value), as_word=True)
            except ValueError:
                raise ConfigError(f"size: '{word}': workers is an integer") from None
        else:
            from sim.engine.model import check_mode

            check_mode(key.partition(".")[2], value)  # run's errors: model.KEY='X' is not one of
            setattr(args, key.partition(".")[2], value)


SEED_KNOBS = ("context_token_limit", "keep_recent_tokens")


def check_size_args(args: argparse.Namespace) -> None:
    """The policy can be sized (the seed engine's two knobs, or a grid of its own: ``args.grid`` parsed);
    the thresholds and ``--workers`` are in range (before any work)."""
    from sim.policies.base import knobs, policy_class

    cls = policy_class(args.policy)
    names = {f.name for f in knobs(cls)}
    args.seed_grid = set(SEED_KNOBS) <= names
    if not args.seed_grid and (args.limits or args.keeps):
        raise ConfigError(
            f"size: --limits/--keeps are seed_engine's shorthand; policy '{args.policy}' takes "
            "--grid KEY=V1,V2,..."
        )
    args.grid = parse_grid(args.grid or [], args.policy, cls, names)
    if args.seed_grid:
        extra = [k for k in args.grid if k not in SEED_KNOBS]
        if extra:
            raise ConfigError(
                f"size: --grid {extra[0]}: {args.policy} is sized on {' and '.join(SEED_KNOBS)}"
            )
        if (
            "context_token_limit" in args.grid
            and args.limits
            or "keep_recent_tokens" in args.grid
            and args.keeps
        ):
            raise ConfigError("size: give a knob's values once (--grid or --limits/--keeps)")
    elif not args.grid:
        if not cls.size_grid:
            raise ConfigError(
                f"size: policy '{args.policy}' has no numeric knobs to size (no default grid); "
                "give --grid KEY=V1,V2,... for one or two of its knobs"
            )
        args.grid = {k: list(v) for k, v in cls.size_grid.items()}
    if not args.seed_grid:
        from sim.analysis.size import policy_grid

        policy_grid(args.policy, args.grid)  # every value a knob takes (make_policy's range errors: exit 2)
    if not 0 < args.target_completion <= 1:
        raise ConfigError(f"--target-completion {args.target_completion} is not in (0, 1]")
    if not 0 <= args.max_facts_lost_increase <= 1:
        raise ConfigError(f"--max-facts-lost-increase {args.max_facts_lost_increase} is not in [0, 1]")
    check_workers(args.workers)


def parse_grid(items: list[str], policy: str, cls, names: set[str]) -> dict[str, list]:
    """``--grid KEY=V1,V2,...`` (one or two): each a knob of the policy and its numbers, in order; a bad
    one is refused naming the flag, the knob and the value (exit 2)."""
    grid: dict[str, list] = {}
    if len(items) > 2:
        raise ConfigError(f"size: --grid takes one or two knobs, not {len(items)}")
    for item in items:
        key, eq, text = item.partition("=")
        key = key.strip()
        if not eq or not key:
            raise ConfigError(f"size: --grid {item!r}: expected KEY=V1,V2,...")
        if key not in names:
            raise ConfigError(
                f"size: --grid {key}: policy '{policy}' has no such knob; knobs: {', '.join(sorted(names))}"
            )
        if key in grid:
            raise ConfigError(f"size: --grid {key} given twice")
        values: list = []
        for v in text.split(","):
            v = v.strip()
            try:
                values.append(int(v))
            except ValueError:
                try:
                    values.append(float(v))
                except ValueError:
                    raise ConfigError(f"size: --grid {key}={v!r}: expected a number") from None
        if not values or len(set(values)) < len(values):
            raise ConfigError(f"size: --grid {item!r}: expected distinct numbers")
        grid[key] = values
    return grid


def size_traces(args: argparse.Namespace) -> list[Any]:
    """The traces to size on (``--dataset`` or PATHs), each through ``--transform`` first."""
    from sim.importers import load_paths

    if args.dataset:
        from sim.trace.io import load_dataset_traces

        traces = list(load_dataset_traces(args.dataset, args.split))
    elif args.paths:
        traces = list(load_paths(args.paths))
    else:
        raise ConfigError("size: give trace PATHs or --dataset")
    if not traces:
        raise ConfigError("size: no traces")
    if transforms := transforms_of(args):
        from sim.engine.model import ReplayModel
        from sim.transforms.base import apply_all

        what = {"on_missing": args.on_missing, "summarizer": args.summarizer}
        traces = [apply_all(t, transforms, ReplayModel(t, **what)) for t in traces]
    return traces


class Sizing:
    """One sizing's inputs, fixed before the grid is replayed: the traces, the model's window and
    pricing, the output reserve and largest summary, and the grid's limits (those above the window left
    out)."""

    def __init__(self, args: argparse.Namespace, traces: list[Any], limits: list[int], keeps: list[int]):
        from sim.analysis.size import grid_limits, largest_summary, output_reserve
        from sim.cost.models import resolve_window

        self.args, self.traces, self.keeps = args, traces, keeps
        self.pricing = args.model or "auto"
        model_window = resolve_window(args.model) if args.model else "auto"
        self.window: int | str | None = args.window if args.window is not None else model_window
        self.reserve, self.summary = output_reserve(traces), largest_summary(args.policy)
        win = self.window if isinstance(self.window, int) else None
        if self.window == "auto":  # every trace's recorded model has the same window: size against it
            recorded = {resolve_window(t.model) for t in traces}
            win = recorded.pop() if len(recorded) == 1 else None
        self.win = win
        self.grid = None if args.seed_grid else args.grid  # another policy's grid (``size --policy``)
        self.kept = grid_limits(limits, win, self.reserve, self.summary) if self.grid is None else limits
        if not self.kept and self.grid is None:
            raise ConfigError(
                f"--limits: every limit is above window {win} - output reserve {self.reserve} - largest "
                f"summary {self.summary} = {win - self.reserve - self.summary}"
            )
        self.behaviour = {"on_missing": args.on_missing, "summarizer": args.summarizer}
        self.show_progress = bool(args.progress) or sys.stderr.isatty()

    def evaluate(self, behaviour: dict[str, Any]) -> list:
        """Every setting of the grid (and no compaction) replayed under a mock-model ``behaviour``."""
        from sim.analysis.size import evaluate, evaluate_policy

        what = "" if behaviour == self.behaviour else " ({on_missing}/{summarizer})".format(**behaviour)
        if self.grid is not None:
            return evaluate_policy(
                self.traces,
                self.args.policy,
                self.grid,
                self.window,
                self.pricing,
                self.progress_of(what),
                behaviour,
                workers=self.args.workers,
            )
        return evaluate(
            self.traces,
            self.args.policy,
            self.kept,
            self.keeps,
            self.window,
            self.pricing,
            self.progress_of(what),
            behaviour,
            workers=self.args.workers,
        )

    def progress_of(self, what: str):
        """The sizing's progress callback (None when it is not shown): on standard error, on a terminal
        or with ``--progress``."""
        if not self.show_progress:
            return None
        return lambda i, n, step: progress(i, n, f"size{what}: {step}", show=True)

    def reference(self, behaviour: dict[str, Any], results: list):
        """The baseline replayed with no window, the cost reference, only where no compaction
        overflows some run (else None: the baseline is its own reference)."""
        from sim.analysis.size import policy_reference, reference

        if not results[0].overflow_runs:
            return None
        if self.show_progress:
            progress(0, 1, "size: the cost reference (no compaction, no window)", show=True)
        if self.grid is not None:
            ref = policy_reference(
                self.traces, self.args.policy, self.grid, self.pricing, behaviour, self.args.workers
            )
        else:
            ref = reference(self.traces, self.args.policy, self.pricing, behaviour, self.args.workers)
        if self.show_progress:
            progress(1, 1, "size: the cost reference (no compaction, no window)", show=True)
        return ref

    def judge(self, results: list, reference=None, worst=None) -> dict:
        """The verdict on ``results``: the same rule and tolerances for every mock behaviour."""
        from sim.analysis.verdict import verdict
        from sim.policies.base import policy_class

        args = self.args
        return verdict(
            results,
            policy_name=args.policy,
            target=args.target_completion,
            max_facts_lost_increase=args.max_facts_lost_increase,
            window=self.win,
            reserve=self.reserve,
            summary=self.summary,
            reference=reference,
            worst_completion=worst,
            trigger=None if self.grid is None else policy_class(args.policy).size_trigger,
        )

    def sized(self, sensitivity: bool) -> tuple[dict, list]:
        """The verdict under this sizing's behaviour and the results it rests on. With ``sensitivity``,
        every mock behaviour's grid too: the verdict then ranks by each setting's worst completion over
        them, and ``sensitivity`` holds each behaviour's own verdict and grid."""
        from sim.analysis.verdict import add_sensitivity, sensitivity_behaviours, worst_completions

        results = self.evaluate(self.behaviour)
        ref = self.reference(self.behaviour, results)
        if not sensitivity:
            return self.judge(results, ref), results
        per = []
        for b in sensitivity_behaviours():
            interrupts.check()
            if b == self.behaviour:
                per.append((b, results, ref))
            else:
                r = self.evaluate(b)
                per.append((b, r, self.reference(b, r)))
        rec = self.judge(results, ref, worst_completions([r for _, r, _ in per]))
        add_sensitivity(rec, [(b, self.judge(r, f), r) for b, r, f in per])
        return rec, results


def cmd_size(args: argparse.Namespace) -> int:
    """Recommend context_token_limit and keep_recent_tokens from the user's traces, against no compaction."""
    from sim.results.tables import json_line
    from sim.util.collector import collector_paused

    with collector_paused():
        rec, results, sizing = size_verdict(args)
    interrupts.check()  # before any output: an interrupted sizing prints no verdict
    for line in rec["assumptions"]["warnings"]:
        warn(line)
    if args.format == "json":
        sys.stdout.write(json_line(rec) + "\n")
        return 0
    print_verdict(args, rec, sizing, len(results) - 1)
    return 0


def size_verdict(args: argparse.Namespace) -> tuple[dict, list, Sizing]:
    """The verdict ``size`` prints for parsed ``args`` (its JSON object), the results it rests on and the
    sizing; ``demo`` sizes several policies with it."""
    from sim.analysis.assumptions import assumptions
    from sim.analysis.size import DEFAULT_KEEPS, DEFAULT_LIMITS
    from sim.analysis.sizing_checks import keep_check, load_bearing_results, runaway_budgets

    take_size_words(args)
    check_size_args(args)
    model_flags(args, "auto", "auto")  # run's checks: an unknown --model, a --window below 1 (exit 2)
    limits = int_list(args.limits, "--limits") if args.limits else list(DEFAULT_LIMITS)
    keeps = int_list(args.keeps, "--keeps") if args.keeps else list(DEFAULT_KEEPS)
    if args.seed_grid and args.grid:  # --grid on the seed engine's knobs: --limits/--keeps
        limits = int_list(",".join(map(str, args.grid.get("context_token_limit", limits))), "--grid")
        keeps = int_list(",".join(map(str, args.grid.get("keep_recent_tokens", keeps))), "--grid")
    traces = size_traces(args)
    sizing = Sizing(args, traces, limits, keeps)
    rec, results = sizing.sized(args.sensitivity)
    rec["grid_limits_left_out"] = [v for v in limits if v not in sizing.kept]
    if sizing.grid is None:
        rec["budgets"] = runaway_budgets(results[0])
        chosen = (rec.get("recommended") or {}).get("keep_recent_tokens")
        rec["keep_check"] = keep_check(load_bearing_results(traces), chosen)
    else:  # the seed engine's rules (its token and cost budgets, its keep_recent_tokens)
        rec["budgets"] = rec["keep_check"] = None
    sources = [f"dataset:{args.dataset}"] if args.dataset else list(args.paths)
    rec["assumptions"] = assumptions(
        traces, results[0].trace_hashes, sources, sizing.pricing, sizing.window, sizing.behaviour
    )
    return rec, results, sizing


# ------------------------------------------------------------------------------------------- output
def grid_table(rec: dict) -> list[dict[str, Any]]:
    """No compaction and every setting of the grid for the table, settings identical on every trace
    (``same_as``) collapsed into the row of the first of them, which names them (``tied``)."""
    names = rec.get("knobs") or ["context_token_limit", "keep_recent_tokens"]
    base = {**rec["baseline"], names[0]: "none"}
    rows: dict[str, dict[str, Any]] = {}
    for g in [base, *rec["grid"]]:
        label = "no compaction" if g is base else "/".join(str(g[k]) for k in names)
        if g.get("same_as"):
            rows[g["same_as"]]["tied"].append(label)
            continue
        if "why_not" not in g:
            why = "baseline"
        elif g["eligible"]:
            why = "eligible" + (f" (short: {'; '.join(g['shortfalls'])})" if g["shortfalls"] else "")
        else:
            why = "; ".join(g["why_not"])
        rows[label] = {
            **{k: g[k] for k in names},
            "mean_cost_usd": round(g["mean_cost_usd"], 4),
            "saving_ci_usd": "-"
            if "saving_ci" not in g
            else f"{g['saving_ci'][0]:+.4f}..{g['saving_ci'][1]:+.4f}",
            "completion": round(g["completion"], 3),
            "facts_lost": g["facts_lost"],
            "overflow_runs": g["overflow_runs"],
            "why_not": why,
            "tied": [],
        }
    keeps: dict[str, set[str]] = {}  # per limit, the keeps the grid holds
    for g in rec["grid"]:
        keeps.setdefault(str(g[names[0]]), set()).add("/".join(str(g[k]) for k in names[1:]))
    for r in rows.values():
        r["tied"] = _tied_cell(r["tied"], keeps)
    return list(rows.values())


def _tied_cell(names: list[str], keeps: dict[str, set[str]]) -> str:
    """The tied settings of a row, a limit whose every keep is tied as ``LIMIT/all keeps`` (a table
    cell, not a paragraph); ``-`` when none."""
    by_limit: dict[str, list[str]] = {}
    for name in names:
        lim, _, keep = name.partition("/")
        by_limit.setdefault(lim, []).append(keep)
    parts = []
    for lim, ks in by_limit.items():
        if len(ks) > 1 and set(ks) == keeps.get(lim):
            parts.append(f"{lim}/all keeps")
        else:
            parts.extend(f"{lim}/{k}" for k in ks)
    return ", ".join(parts) or "-"


def sensitivity_tables(rec: dict) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Each behaviour's own verdict (one row each), and each setting's completion under each behaviour
    (one row per setting)."""
    from sim.analysis.verdict import sensitivity_grid

    verdicts = [
        {
            "on_missing": r["on_missing"],
            "summarizer": r["summarizer"],
            "verdict": r["verdict"],
            "ships": "/".join(str(v) for v in r["ships"].values()) if r["ships"] else "-",
        }
        for r in rec["sensitivity"]
    ]
    return verdicts, sensitivity_grid(rec["sensitivity"])


def print_verdict(args: argparse.Namespace, rec: dict, sizing: Sizing, settings: int) -> None:
    """The sizing for people: the grid's table, the rule's thresholds and the advice, the runners-up,
    the sensitivity table, the mock model, the rules, the assumptions and the recommendation."""
    from sim.analysis.assumptions import assumptions_text
    from sim.analysis.sizing_checks import rules_text
    from sim.analysis.verdict import recommendation_line, sensitivity_text, tied_text

    rows = grid_table(rec)
    print(format_table(rows, list(rows[0])))
    names = rec.get("knobs") or ["context_token_limit", "keep_recent_tokens"]
    left = rec["grid_limits_left_out"]
    print(
        f"\n{len(sizing.traces)} traces, {settings} settings of {args.policy} against no compaction; "
        f"target completion {args.target_completion:.0%}, facts lost at most "
        f"+{args.max_facts_lost_increase:.0%} of facts seen."
        + (
            f" Limits left out of the grid (above window - output reserve {sizing.reserve} - largest "
            f"summary {sizing.summary}): {', '.join(map(str, left))}; the highest safe limit, "
            f"{max(sizing.kept)}, stands in."
            if left
            else ""
        )
        + f"\n{rec['advice']}"
    )
    if rec.get("runners_up"):
        print(
            "runners-up: "
            + "; ".join(
                "/".join(str(r[k]) for k in names) + f" ${r['mean_cost_usd']:.4f} ({r['completion']:.0%})"
                for r in rec["runners_up"]
            )
        )
    if line := tied_text(rec):
        print(line)
    if "sensitivity" in rec:
        verdicts, per_setting = sensitivity_tables(rec)
        print(
            "\nsensitivity to the mock model (model.on_missing x model.summarizer), completion per setting:"
        )
        print(format_table(per_setting, list(per_setting[0])))
        print("\neach behaviour's own verdict:")
        print(format_table(verdicts, list(verdicts[0])))
        print(sensitivity_text(rec) + "\n")
    print(
        f"verdict under the mock model on_missing={args.on_missing}, summarizer={args.summarizer}"
        + (" (oracle: an upper bound)" if args.summarizer == "oracle" else "")
    )
    if rec["budgets"] is not None:
        print(rules_text(rec["budgets"], rec["keep_check"]))
    print(assumptions_text(rec["assumptions"]))
    print(recommendation_line(rec))
