"""Regenerate the embedded scenario suite: ``python -m scenarios.make_suite``.

The committed ``scenarios/suite/`` is exactly what this writes with the defaults; a test regenerates it
and compares bytes, so the data can never drift from the generator. ``--calibrate CSV`` prints the
statistics of the Complexity Trap CSV's raw-history rows that the generator's parameters were chosen
from, beside the same statistics of the suite, and writes one suite per experiment calibrated task by
task to its raw runs (``scenarios/calibrated.py``) into ``build/calibrated/`` (``--calibrated-out``).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from pathlib import Path

from scenarios import closed_loop
from scenarios.facts import REAL_RUNS, fact_stats
from scenarios.swe_like import generate_suite, suite_stats
from sim.trace.io import write_traces
from sim.util.atomicfile import atomic_path
from sim.util.paths import traces_dir

SEED = 20261130
N_RUNS = 40  # enough runs for the tail statistics to hold; the file stays ~1.4 MB
SUITE_DIR = Path(__file__).resolve().parent / "suite"
SUITE_FILE = "swe_like.jsonl"
CLOSED_LOOP_FILE = "closed_loop.jsonl"  # the scripted scenarios of scenarios/closed_loop.py, seed 0
RAW_STRATEGY = "Raw Agent"  # the full-history rows of the CSV's `strategy` column
# the paper's per-task CSV beside the shared traces (CTXSIM_TRACES; default ../shared)
REFERENCE_CSV = (
    traces_dir().parent
    / "reference"
    / "complexity-trap"
    / "auxiliary-data"
    / ("experiment_instance_costs_sweagent.csv")
)

# (key in suite_stats, label, target as published / as tested, number format)
_TARGETS = (
    ("runs", "runs", "", "{:d}"),
    ("turns_mean", "turns (calls) per run, mean", "~50; test [40, 60]", "{:.1f}"),
    ("turns_median", "turns per run, median", "~30; test [22, 38]", "{:.1f}"),
    ("turns_max", "turns per run, max", "> 150", "{:d}"),
    ("input_per_call_mean", "input tokens per call (mean of run means)", "~20k; test [16k, 24k]", "{:,.0f}"),
    ("peak_input_max", "largest input of any call", "> 100k", "{:,d}"),
    ("runs_peak_over_100k", "runs whose peak input passes 100k", ">= 1", "{:d}"),
    ("cumulative_input_per_run_mean", "cumulative input tokens per run, mean", "1.6M-2.3M", "{:,.0f}"),
    ("observation_share", "observation share of turn tokens", "~0.84; test [0.80, 0.88]", "{:.3f}"),
    ("tool_result_median", "tool result tokens, median", "", "{:,.0f}"),
    ("tool_result_max", "tool result tokens, max", ">= 20k", "{:,d}"),
    ("tool_results_over_20k", "tool results of 20k+ tokens", ">= 1", "{:d}"),
    ("output_per_call_mean", "output tokens per call (mean of run means)", "70-150", "{:.1f}"),
)
# (key in scenarios.facts.fact_stats, label, the 40 shared mini-swe-agent runs' own value, number format)
_FACT_ROWS = (
    ("fact_provide_share", "observations providing a fact", "0.412", "{:.3f}"),
    ("fact_error_share", "of those facts, errors (the rest: paths)", "0.234", "{:.3f}"),
    ("actions_needing_share", "actions needing an observation's fact", "0.093", "{:.3f}"),
    ("path_superseded_share", "path facts superseded later", "0.572", "{:.3f}"),
    ("error_superseded_share", "error facts superseded later", "0.483", "{:.3f}"),
    ("live_need_share", "observation needs on a live (not superseded) fact", "0.915", "{:.3f}"),
    (
        "error_at_start_share",
        "error facts whose line opens the result (the rest: near its end)",
        "0.383",
        "{:.3f}",
    ),
)


def _readme(seed: int, n_runs: int, stats: dict, nbytes: int) -> str:
    rows = "\n".join(
        f"| {label} | {fmt.format(stats[key])} | {target} |" for key, label, target, fmt in _TARGETS
    )
    fact_rows = "\n".join(
        f"| {label} | {fmt.format(stats[key])} | {real} |" for key, label, real, fmt in _FACT_ROWS
    )
    names = ", ".join(f"`{n}`" for n in closed_loop.SCENARIOS)
    return f"""# Embedded scenario suite

`{SUITE_FILE}`: {n_runs} synthetic SWE-agent-like runs (canonical traces, text-free: sizes only), made by
`scenarios/swe_like.py` with seed {seed}. Full history (recorded policy `raw`); every call's input is
the sum of the events in its view. The distributions are calibrated to the SWE-agent raw-history rows of
the per-task data of The Complexity Trap (arXiv 2508.21433); the parameters and their derivation are
in the generator's docstring (`--calibrate CSV` prints the source statistics beside the suite's).
The runs carry facts like the 40 shared mini-swe-agent runs (`scenarios/facts.py`, profiles measured
on those runs): observations provide path and error facts, actions need them some turns later, later
observations supersede them (an edit's result, a command run again), an error fact is the line that
shows it (a cut that keeps the line keeps the fact), and the final answer needs the task's goal and the
system prompt's constraint. So a policy that hides what an action needs shows it:
a re-read, or a failed or degraded answer under `model.on_missing=fail` / `degrade`.

`{CLOSED_LOOP_FILE}`: the scripted closed-loop scenarios of `scenarios/closed_loop.py` (seed 0):
{names}; each with declared facts, so a policy that loses
what an action needs makes the agent re-read (`ctxsim run --scenario ID` builds one directly).

Regenerate (a test checks this directory equals a fresh generation byte for byte):

    .venv/bin/python -m scenarios.make_suite

Measured on the committed suite ({nbytes:,} bytes):

| statistic | value | target |
|---|---|---|
{rows}

Facts, beside the shared mini-swe-agent runs (`scenarios.facts.fact_stats`):

| statistic | value | real runs |
|---|---|---|
{fact_rows}
"""


def write_suite(out_dir: Path = SUITE_DIR, seed: int = SEED, n_runs: int = N_RUNS) -> dict:
    """Write the suite file and its README into ``out_dir``; return the suite's statistics."""
    out_dir = Path(out_dir)
    traces = generate_suite(seed, n_runs, REAL_RUNS)
    path = out_dir / SUITE_FILE
    write_traces(traces, path, record_hashes=False)  # the committed folder holds the suite alone
    scripted = [closed_loop.scenario(name) for name in closed_loop.SCENARIOS]
    write_traces(scripted, out_dir / CLOSED_LOOP_FILE, record_hashes=False)
    stats = {**suite_stats(traces), **fact_stats(traces)}
    with atomic_path(out_dir / "README.md") as tmp:
        tmp.write_text(_readme(seed, n_runs, stats, path.stat().st_size), encoding="utf-8")
    return stats


def reference_stats(csv_path: str | Path) -> list[dict]:
    """Per-model statistics of the CSV's raw-history rows, with the CSV's own per-task definitions.

    The linear fit of mean prompt tokens per call against turn count splits the history into a fixed
    part (intercept: system prompt + task) and growth per turn (2 x slope, since a run's mean call sees
    half its turns).
    """
    import numpy as np
    import pandas as pd

    df = pd.read_csv(csv_path)
    out = []
    for experiment, g in df[df["strategy"] == RAW_STRATEGY].groupby("experiment", sort=True):
        g = g[g["turn_count"] > 0]
        turns = g["turn_count"].to_numpy(float)
        prompt = g["mean_prompt_tokens"].to_numpy(float)
        slope, intercept = np.polyfit(turns, prompt, 1)
        out.append(
            {
                "experiment": experiment,
                "runs": len(g),
                "turns_mean": turns.mean(),
                "turns_median": float(np.median(turns)),
                "turns_log_sd": float(np.log(turns).std(ddof=1)),
                "at_turn_limit": float((turns >= 250).mean()),
                "input_per_call_mean": prompt.mean(),
                "cumulative_input_per_run_mean": float((prompt * turns).mean()),
                "output_per_call_mean": float(g["mean_completion_tokens"].mean()),
                "fixed_tokens": float(intercept),
                "growth_per_turn": float(2 * slope),
            }
        )
    return out


def _print_calibration(csv_path: str, stats: dict) -> None:
    cols = {
        "turns_mean": "turns mean",
        "turns_median": "turns median",
        "input_per_call_mean": "input/call",
        "cumulative_input_per_run_mean": "input/run",
        "output_per_call_mean": "output/call",
        "turns_log_sd": "turns log-sd",
        "at_turn_limit": "at limit",
        "fixed_tokens": "fixed tokens",
        "growth_per_turn": "growth/turn",
    }
    print(f"\nraw-history rows of {Path(csv_path).name} (strategy '{RAW_STRATEGY}')")
    print("source".ljust(48) + "".join(h.rjust(14) for h in cols.values()))
    for r in reference_stats(csv_path):
        print(r["experiment"][:47].ljust(48) + "".join(f"{r[c]:14.2f}" for c in cols))
    print("this suite".ljust(48) + "".join(f"{stats.get(c, math.nan):14.2f}" for c in cols))


CALIBRATED_DIR = Path("build") / "calibrated"


def write_calibrated(csv_path: str | Path, out_dir: Path, seed: int = SEED) -> list[tuple[str, int]]:
    """One calibrated suite per experiment of the CSV's raw-history rows (``scenarios/calibrated.py``):
    ``out_dir/<experiment>.jsonl``, one run per task with turns; returns (file name, runs)."""
    import pandas as pd

    from scenarios.calibrated import calibrated_suite, fixed_head, shape_with_turns

    df = pd.read_csv(csv_path)
    written = []
    for experiment, g in df[df["strategy"] == RAW_STRATEGY].groupby("experiment", sort=True):
        head = fixed_head(g["turn_count"], g["mean_prompt_tokens"])
        g = g[g["turn_count"] > 0]
        shapes = [
            shape_with_turns(r.instance_id, r.turn_count, r.mean_prompt_tokens, r.mean_completion_tokens,
                             r.turn_count, head)
            for r in g.itertuples()
        ]  # fmt: skip
        traces = calibrated_suite(shapes, seed, head, trace_prefix=str(experiment))
        path = Path(out_dir) / f"{experiment}.jsonl"
        write_traces(traces, path, record_hashes=False)
        written.append((path.name, len(traces)))
    return written


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m scenarios.make_suite", description=__doc__.splitlines()[0])
    p.add_argument(
        "--out", type=Path, default=SUITE_DIR, help="output directory (default: the committed suite)"
    )
    p.add_argument("--seed", type=int, default=SEED)
    p.add_argument("--runs", type=int, default=N_RUNS)
    p.add_argument(
        "--calibrate",
        metavar="CSV",
        nargs="?",
        const=str(REFERENCE_CSV),
        help="also print the raw-history statistics of this CSV (default: the shared Complexity Trap CSV) "
        "and write a suite per experiment calibrated task by task to its raw runs (scenarios/calibrated.py)",
    )
    p.add_argument("--calibrated-out", type=Path, default=CALIBRATED_DIR, help="where --calibrate writes")
    args = p.parse_args(argv)
    stats = write_suite(args.out, args.seed, args.runs)
    print(f"wrote {args.out / SUITE_FILE} ({args.runs} runs, seed {args.seed})")
    for key, label, target, fmt in _TARGETS:
        print(f"  {label}: {fmt.format(stats[key])}" + (f"  (target {target})" if target else ""))
    for key, label, real, fmt in _FACT_ROWS:
        print(f"  {label}: {fmt.format(stats[key])}  (real runs {real})")
    if args.calibrate:
        if not Path(args.calibrate).is_file():
            p.error(f"--calibrate: no such file: {args.calibrate}")
        _print_calibration(args.calibrate, stats)
        for name, runs in write_calibrated(args.calibrate, args.calibrated_out, args.seed):
            print(f"wrote {args.calibrated_out / name} ({runs} runs, calibrated task by task)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
