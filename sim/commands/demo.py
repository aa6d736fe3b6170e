"""``ctxsim demo``: the README's main job in one command. Size the seed engine on the embedded suite,
compare it with full history and observation masking, put the best setting of several policies side by
side (``best_of_policies``: ``size --policy`` on each), and write the comparison report.

Every setting replays at one provider window (``--window``, default ``DEMO_WINDOW``), tight enough that
some runs of the embedded suite overflow it without compaction: the trade-off the report exists to show
(what a setting saves, what it loses, whether the runs still finish) only appears where compaction is
needed. The seed engine's limits are ``size``'s: those the window leaves room for, with the highest safe
limit in place of those left out (``sim.analysis.size.grid_limits``), so the demo and ``size --window``
size the same grid."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sim.commands.common import add_workers_option, format_table
from sim.util import interrupts
from sim.util.errors import ConfigError
from sim.util.forkmap import check_workers

# A 64k window (many local models'): of the embedded suite's 40 SWE-like runs (peaks up to 175k), 4
# overflow it under the seed engine without compaction and 6 under raw, so the settings differ in runs
# finished and facts kept.
DEMO_WINDOW = 64000
DEMO_LIMITS = (16000, 24000, 32000, 48000, 64000)  # context_token_limit, cut by the window (module doc)
LIMITS = "policy.context_token_limit="  # the seed engine's limit line of DEMO_STUDY, filled in per window
KEEPS = "policy.keep_recent_tokens=2000,4000,8000,16000"
DEMO_STUDY = (  # (policy, grid) swept over the embedded suite by `ctxsim demo` (the README's main job)
    ("raw", ()),
    ("observation_masking", ("policy.n=1,3,10",)),
    (
        "seed_engine",
        (
            LIMITS,
            KEEPS,
            # the verdict's sensitivity to the mock model (the report's table)
            "model.on_missing=refetch,fail,degrade",
            "model.summarizer=extractive,oracle",
        ),
    ),
)


# policies whose best settings the demo puts side by side (``size --policy`` on each, the same traces and
# window): a token-budget compactor, a turn-count masker and a framework's event-count condenser
DEMO_COMPARE = ("seed_engine", "observation_masking", "openhands_llm_summarizing")


def add_parser(sub) -> None:
    """The ``demo`` subcommand on the CLI's subparsers."""
    d = sub.add_parser(
        "demo",
        help="compare the built-in policies on the embedded scenario suite",
        description="Sweep the embedded suite (or PATHs) at one provider window (--window) under raw, "
        "observation_masking n=1,3,10 and the seed engine's grid (context_token_limit none or 16000-64000, "
        "those the window leaves room for as `size` chooses them, x keep_recent_tokens 2000-16000, under "
        "three mock behaviours and two summarizers); print the comparison and the sizing verdict, and write "
        "the report (report.md, report.html) and each sweep's results under --out.",
    )
    d.add_argument(
        "paths", nargs="*", metavar="PATH", help="a trace file or folder instead of the embedded suite"
    )
    d.add_argument(
        "--window",
        type=int,
        default=DEMO_WINDOW,
        metavar="TOKENS",
        help=f"the provider's context window every setting replays at (default {DEMO_WINDOW}: some runs of "
        "the embedded suite overflow it without compaction)",
    )
    d.add_argument("--out", default="reports/latest", help="output folder (default reports/latest)")
    add_workers_option(d, 2, "processes for the sweeps (default 2)")
    d.add_argument(
        "--pricing",
        default="claude-sonnet-4-5",
        metavar="MODEL",
        help="price the runs as this model (default claude-sonnet-4-5; 'auto' = each trace's own model)",
    )
    d.set_defaults(func=cmd_demo)


def _knob(row: dict, key: str):
    """A summary row's policy knob as an int, None when unset (NaN in a column of floats)."""
    v = row.get(f"policy.{key}")
    if v is None or (isinstance(v, float) and v != v):
        return None
    return int(v)


def check_window(window: int) -> int:
    """``--window`` as given, or exit 2 naming the knob and its range."""
    if not 1 <= window < 2**53:
        raise ConfigError(f"demo: --window={window} is not an integer in [1, 2^53)")
    return window


def study_limits(scenario: str, window: int) -> list[int]:
    """``DEMO_LIMITS`` that leave the scenario's output reserve and the seed engine's largest summary below
    the window, with the highest safe limit in place of those left out (as ``size`` grids them)."""
    from sim.analysis.size import grid_limits, largest_summary, output_reserve
    from sim.sweep.scenario import scenario_traces

    reserve = output_reserve(scenario_traces(scenario))
    limits = grid_limits(DEMO_LIMITS, window, reserve, largest_summary("seed_engine"))
    if not limits:
        raise ConfigError(
            f"demo: --window={window} leaves no room for a context_token_limit (output reserve {reserve:,} + "
            f"largest summary {largest_summary('seed_engine'):,} tokens)"
        )
    return limits


def run_study(args: argparse.Namespace) -> list[Path]:
    """Every sweep of ``DEMO_STUDY`` over the scenario at ``args.window``, afresh; their results files."""
    import shutil

    from sim.sweep.execute import SweepSpec, run_sweep

    workers = check_workers(args.workers)  # before the last study is removed
    window = check_window(args.window)
    out = Path(args.out)
    scenario = args.paths[0] if args.paths else "embedded"
    limits = ",".join(["null", *(str(v) for v in study_limits(scenario, window))])
    sweeps = out / "sweeps"
    shutil.rmtree(sweeps, ignore_errors=True)  # a fresh study each time: results follow the code
    paths = []
    for policy, grid in DEMO_STUDY:
        grid = tuple(LIMITS + limits if g == LIMITS else g for g in grid)
        spec = SweepSpec(
            policy=policy,
            grid=(*grid, f"model.window={window}"),
            scenario=scenario,
            pricing=args.pricing,
            results=str(sweeps / policy),
            csv=True,
            skip_invalid=True,  # keep_recent_tokens 16000 with limit 16000 is refused: skipped, said so
        )
        paths.append(run_sweep(spec, workers=workers, progress=sys.stderr.isatty()))
    return paths


def shown_rows(paths: list[Path], best: dict) -> list[dict]:
    """The comparison's rows: every raw and observation_masking setting; of the seed engine, no
    compaction and the recommended setting, under the default mock model."""
    from sim.results.summary import summary, varying_columns

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
    return shown


def _same(setting: dict, knobs: dict) -> bool:
    return all(setting.get(k) == v for k, v in knobs.items())


ASSUMPTION_COLUMNS = ("traces_hash", "priced_as", "window", "mock_model")  # ``row_assumptions``'s keys


def row_assumptions(a: dict) -> dict:
    """What a compared row's figures rest on, from ``size``'s own assumptions: the traces (hash), the
    price table, the window and the mock model's behaviour."""
    mock, priced, window = a["mock_model"], a["priced_model"], a["window"]
    as_of = priced.get("price_table_as_of")
    return {
        "traces_hash": a["traces"]["hash"],
        "priced_as": priced["model"] + (f" (price table as of {as_of})" if as_of else ""),
        "window": window if isinstance(window, int) else "each trace's recorded model's",
        "mock_model": f"on_missing={mock['on_missing']} summarizer={mock['summarizer']}",
    }


def best_of_policies(args: argparse.Namespace, limits: list[int]) -> list[dict]:
    """Per policy of ``DEMO_COMPARE``, the setting ``size --policy`` ships on the demo's traces at its
    window and pricing (its own default grid, the seed engine's the study's ``limits`` x ``KEEPS``; the
    same verdict rule), with what that setting costs and loses: one row each, so the best of each policy
    can be compared on the same runs. The cost beside it is each policy's own baseline (switched off, or
    raw) replayed with no window."""
    from sim.commands import size
    from sim.util.paths import EMBEDDED_SUITE

    parser = argparse.ArgumentParser(prog="ctxsim")
    size.add_parser(parser.add_subparsers())  # size's own flags and defaults, as `ctxsim size` parses them

    path = args.paths[0] if args.paths else str(EMBEDDED_SUITE)
    model = [] if args.pricing == "auto" else ["--model", args.pricing]
    rows = []
    for policy in DEMO_COMPARE:
        interrupts.check()
        words = ["size", path, "--policy", policy, "--window", str(args.window), *model]
        if policy == "seed_engine":  # the study's own grid, so this row and the sweep's verdict agree
            words += ["--limits", ",".join(map(str, limits)), "--keeps", KEEPS.split("=", 1)[1]]
        rec, _, _ = size.size_verdict(parser.parse_args([*words, "--workers", str(args.workers)]))
        shipped = rec.get("recommended") or {}
        row = next((g for g in rec["grid"] if shipped and _same(g, shipped)), None)
        ref = rec.get("cost_reference") or rec["baseline"]
        rows.append(
            {
                "policy": policy,
                "verdict": rec["verdict"],
                "ships": " ".join(f"{k}={v}" for k, v in shipped.items()) or "-",
                "overflow_runs": None if row is None else row["overflow_runs"],
                "answers_completed": None if row is None else row["completion"],
                "facts_lost": None if row is None else row["facts_lost"],
                "mean_cost_usd": None if row is None else row["mean_cost_usd"],
                "baseline_no_window_cost_usd": ref["mean_cost_usd"],
                **row_assumptions(rec["assumptions"]),
            }
        )
    return rows


def write_compare(rows: list[dict], path: Path) -> None:
    """``best_of_policies``'s rows as CSV (pandas and CI read it), written whole or not at all."""
    import csv
    import io

    from sim.util.atomicfile import atomic_path

    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    with atomic_path(path) as tmp:
        tmp.write_text(buf.getvalue(), encoding="utf-8")


def cmd_demo(args: argparse.Namespace) -> int:
    """The README's main job: size the seed engine on the embedded suite, compare it with full history and
    observation masking, and write the comparison report."""
    from sim.analysis.setting_results import settings_from_results
    from sim.analysis.verdict import recommendation_line, tied_text, verdict_from_results

    paths = run_study(args)
    interrupts.check()  # the sweeps done: a Ctrl-C a finalizer swallowed stops the demo before its output
    rec = verdict_from_results(paths[-1], "seed_engine")
    best = rec.get("recommended") or {"context_token_limit": None}
    shown = shown_rows(paths, best)
    print(format_table(shown, list(shown[0])))
    where = args.paths[0] if args.paths else "the embedded suite"  # the study sweeps the first PATH
    print(
        f"\nsized over {len(settings_from_results(paths[-1])) - 1} seed-engine settings against no "
        f"compaction x {where} at a {args.window:,}-token window (priced as {args.pricing}):\n{rec['advice']}"
    )
    if line := tied_text(rec):
        print(line)
    print(recommendation_line(rec))
    scenario = args.paths[0] if args.paths else "embedded"
    compare = best_of_policies(args, study_limits(scenario, args.window))
    write_compare(compare, Path(args.out) / "best_of_policies.csv")
    shown_cols = [k for k in compare[0] if k not in ASSUMPTION_COLUMNS]
    basis = "; ".join(f"{k} {v}" for k, v in compare[0].items() if k in ASSUMPTION_COLUMNS)
    print(
        "\nthe best setting of each policy (`ctxsim size --policy NAME`, its default grid; the seed engine's "
        f"the study's; the same runs, window and prices):\n{format_table(compare, shown_cols)}\n"
        f"assuming {basis} (best_of_policies.csv has them per row)"
    )
    try:
        from sim.report.make import make_report
    except ImportError:
        make_report = None
    if make_report is not None:
        md, html = make_report(paths, Path(args.out))
        print(f"report: {md} and {html}")
    print(f"results: {', '.join(str(p) for p in paths)}")
    return 0
