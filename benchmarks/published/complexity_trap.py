"""ctxsim beside The Complexity Trap (arXiv 2508.21433): the paper's per-task figures and ctxsim's
predictions of the same quantities, per model, with a tolerance each (docs/published.md).

    .venv/bin/python benchmarks/published/complexity_trap.py [--reference DIR] [--traces DIR]
        [--models KEY,...] [--tasks N] [--format table|json|markdown] [--write-summary]

Paper side (``paper.py``): arithmetic on the per-task CSV, nothing modelled. ctxsim side, per model:

- ``calibrated_suite``: one synthetic run per task (``scenarios/calibrated.py``), shaped by the raw run of
  that task (its turns, mean prompt and completion sizes; the fixed head from the raw runs' fit) and by
  the real runs' observation profile. Each strategy's run of a task has the turns the paper's run of that
  strategy took (a replay cannot show an agent acting differently; the quantity
  ``cumulative_input_vs_raw_same_turns`` is the replay with raw's turns, so the two rows together give
  the size of that behavioural effect). Billed output per call beyond the completion the CSV reports
  (a thinking model's reasoning, growing with the square root of the call's input) is fitted on the raw
  runs' bills alone (``Bill.hidden_per_sqrt_input``).
- ``shared_swe_agent`` and ``shared_mini_swe_agent``: the real runs in ``CTXSIM_TRACES``, replayed.

Prices: Gemini 2.5 Flash at its mid-2025 list price with Gemini's implicit cache (``conf/cache/gemini.yaml``);
the Qwen models at the flat price per input and output token that their bills imply (least squares on the
raw and masking rows), no cache. ``--format json`` prints one object per row with the keys ``model``,
``strategy``, ``quantity``, ``corpus``, ``paper``, ``ctxsim``, ``ratio``, ``tolerance``, ``within`` (plus
``note``). ``--write-summary`` rewrites ``conf/published/complexity_trap.yaml``, the line ``report`` and
``size`` print. Exit 2 when the CSVs are missing.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from benchmarks.published import paper  # noqa: E402
from benchmarks.published.replays import Bill, Rates, RunTotals, replay_totals  # noqa: E402
from scenarios.calibrated import TaskShape, calibrated_suite, fixed_head, shape_with_turns  # noqa: E402
from sim.cost.cache import cache_rules  # noqa: E402
from sim.policies.llm_summary import summaries_in  # noqa: E402
from sim.util.paths import traces_dir  # noqa: E402

# beside the shared traces (one setting, CTXSIM_TRACES, for all shared data; default ../shared)
REFERENCE_DEFAULT = traces_dir().parent / "reference" / "complexity-trap" / "auxiliary-data"
SEED = 20261206
POLICIES = {"masking": ("observation_masking", {"n": 10}), "summary": ("llm_summary", {"n": 21, "m": 10})}
# Gemini API list price of gemini-2.5-flash from its general availability (June 2025), when the paper's
# runs were made; conf/pricing/google.yaml holds today's (cache read $0.03).
GEMINI_FLASH_2025 = Rates(0.30, 2.50, 0.075, "Gemini API list price of gemini-2.5-flash, June 2025")
GEMINI_CACHE = "gemini-2.5-flash"  # a priced model of the gemini family: selects conf/cache/gemini.yaml
TOLERANCE = {
    "price_per_input_token_vs_raw": 0.15,
    "cumulative_input_vs_raw": 0.25,
    "cost_vs_raw": 0.25,
    "summary_cost_share": 0.5,
    "price_per_input_token": 0.25,
}
POLICY_DEFAULT_SUMMARY = 2048
SHARED = {"shared_swe_agent": "swe-agent", "shared_mini_swe_agent": "mini-swe-agent-gemini3pro/trajs"}


@dataclass(frozen=True)
class Row:
    model: str
    strategy: str
    quantity: str
    corpus: str
    paper: float | None
    ctxsim: float | None
    tolerance: float | list | None
    note: str = ""

    @property
    def ratio(self) -> float | None:
        if self.paper is None or self.ctxsim is None or self.quantity == "solve_or_completion_change":
            return None
        return self.ctxsim / self.paper if self.paper else None

    @property
    def within(self) -> bool | None:
        if self.paper is None or self.ctxsim is None or self.tolerance is None:
            return None
        if isinstance(self.tolerance, list):
            return self.tolerance[0] <= self.ctxsim <= self.tolerance[1]
        ok = abs(self.ratio - 1) <= self.tolerance + 1e-12
        if self.quantity == "cost_vs_raw":  # and on the same side of 1: cheaper stays cheaper
            ok = ok and (self.ctxsim < 1) == (self.paper < 1)
        return ok

    def as_dict(self) -> dict:
        r = self.ratio
        return {
            "model": self.model,
            "strategy": self.strategy,
            "quantity": self.quantity,
            "corpus": self.corpus,
            "paper": _round(self.paper),
            "ctxsim": _round(self.ctxsim),
            "ratio": _round(r),
            "tolerance": self.tolerance,
            "within": self.within,
            "note": self.note,
        }


def _round(x: float | None, digits: int = 4) -> float | None:
    return None if x is None or not math.isfinite(x) else round(float(x), digits)


# ---------------------------------------------------------------- the calibrated suite


def head_tokens(raw) -> int:
    return fixed_head(raw["turn_count"], raw["mean_prompt_tokens"])


def shapes_for(joined, head: int, turns_column: str) -> list[TaskShape]:
    """One shape per task, sized by its raw run, with the turns of ``turns_column``."""
    cols = ("instance_id", "turn_count", "mean_prompt_tokens", "mean_completion_tokens", turns_column)
    return [shape_with_turns(*(getattr(r, c) for c in cols), head) for r in joined.itertuples()]


def fit_bill(raw_rows, totals: RunTotals, rates: Rates, reuse: float) -> Bill:
    """The two things a Gemini bill holds that the published token counts do not, fitted on the raw runs'
    bills alone (masking and summary stay predictions): how much of the modelled cache reads the
    provider honoured (``read_scale``, kept so the reuse fraction stays <= 1) and billed output that no
    history shows (Gemini 2.5 Flash thinks by default, and the CSV's reasoning column is empty), per call
    ``hidden_per_sqrt_input`` x sqrt(input tokens). Least squares of each task's cost less its
    uncached-price input and visible output, on (modelled reads x (read price - input price),
    sum of sqrt(input) x output price)."""
    base = totals.agent_input * rates.input + totals.agent_output * rates.output
    y = raw_rows["total_cost"].to_numpy(float) - base / 1e6
    x = np.column_stack(
        [
            totals.agent_read * (rates.cache_read - rates.input) / 1e6,
            totals.agent_sqrt_input * rates.output / 1e6,
        ]
    )
    scale, hidden = paper.nonnegative_fit(x, y)
    return Bill(rates, min(float(scale), 1.0 / reuse), round(float(hidden), 3))


def calibrated(
    model: paper.Model, df, rates: Rates, cache: str | None, tasks: int | None, on_missing: str = "refetch"
) -> tuple[list, dict, Bill, dict]:
    """The calibrated suite's rows of one model, the assumptions they rest on, the fitted bill and the
    knobs each strategy ran with. Tokens and cost are replayed with ``on_missing=degrade`` (no step is
    added: the paper's turns already hold its agents' re-reads); completion is the pure replay (raw's
    turns) under ``on_missing``."""
    raw = paper.strategy_rows(df, model.key, "raw")
    head = head_tokens(raw)
    raw_t = raw[raw["turn_count"] > 0]
    if tasks:
        raw_t = raw_t.iloc[:tasks]
    raw_t = raw_t.assign(turns_raw=raw_t["turn_count"])
    t_all = replay_totals(
        calibrated_suite(shapes_for(raw_t, head, "turns_raw"), SEED, head), "raw", {}, cache
    )
    reuse = cache_rules("gemini").reuse_fraction if cache else 1.0
    bill = fit_bill(raw_t, t_all, rates, reuse) if cache else Bill(rates)
    info = {
        "prices": rates.text(),
        "cache": "conf/cache/gemini.yaml" if cache else "none",
        "head_tokens": head,
        "reuse_fraction": f"{reuse * bill.read_scale:.4f} (fitted on the raw bills; conf {reuse:g})"
        if cache
        else "no cache",
        "hidden_output": f"{bill.hidden_per_sqrt_input:g} x sqrt(input tokens) per call "
        f"({t_all.hidden_output(bill):.0f} a call on the raw runs; fitted on the raw bills)"
        if cache
        else "none",
        "raw_tasks": len(raw_t),
    }
    rows, knobs_of = [], {}
    for strategy, (policy, knobs) in POLICIES.items():
        other = paper.strategy_rows(df, model.key, strategy)
        j = raw_t.merge(other[["instance_id", "turn_count"]], on="instance_id", suffixes=("", "_other"))
        j = j[j["turn_count_other"] > 0]
        pr = paper.paired(raw.loc[raw["instance_id"].isin(j["instance_id"])], other)
        runs_raw = calibrated_suite(shapes_for(j, head, "turns_raw"), SEED, head)
        runs = calibrated_suite(shapes_for(j, head, "turn_count_other"), SEED, head)
        if strategy == "summary":
            configured = sized_summary(other, runs, policy, knobs, cache, bill)
            n = summary_trigger(other, knobs["m"])
            knobs = sized_summary(other, runs, policy, {**knobs, "n": n}, cache, bill)
            published, fired = _summaries(other, knobs), _summaries(other, configured)
            info["summary_tokens"] = (
                f"{knobs['summary_max_tokens']} (from the paper's summary_cost per summary)"
            )
            counted = int(other.loc[other["turn_count"] > 0, "summary_count"].sum())
            info["summary_trigger"] = (
                f"every n={n} turns, m={knobs['m']} kept: {published} summaries on the paper's turns, where "
                f"it counts {counted} (its N={configured['n']} as ctxsim reads it fires {fired})"
            )
        knobs_of[strategy] = knobs
        t_raw = replay_totals(runs_raw, "raw", {}, cache, "degrade")
        t_same = replay_totals(runs_raw, policy, knobs, cache, "degrade")
        t = replay_totals(runs, policy, knobs, cache, "degrade")
        done_raw = replay_totals(runs_raw, "raw", {}, cache, on_missing)
        done = replay_totals(runs_raw, policy, knobs, cache, on_missing)
        cum = t.agent_input.sum() / t_raw.agent_input.sum()
        cost = t.cost(bill).sum() / t_raw.cost(bill).sum()
        note = f"{len(j)} tasks, each with the turns of the paper's {strategy} run"
        add = partial(_row, model, strategy)
        rows += [
            add("cumulative_input_vs_raw", pr["cumulative_input_vs_raw"], cum, note),
            add("cumulative_input_vs_raw_same_turns", pr["cumulative_input_vs_raw"],
                t_same.agent_input.sum() / t_raw.agent_input.sum(), "raw's turns", tolerance=None),
            add("turns_vs_raw", pr["turns_vs_raw"], t.agent_calls.sum() / t_raw.agent_calls.sum(),
                "the paper's turns, carried into the suite", tolerance=None),
            add("price_per_input_token_vs_raw", pr["price_per_input_token_vs_raw"], cost / cum, note),
            add("cost_vs_raw", pr["cost_vs_raw"], cost, note),
            _completion_row(model, strategy, pr, done_raw, done, f"raw's turns, on_missing={on_missing}"),
        ]  # fmt: skip
        if strategy == "summary":
            share = t.summary_cost(bill).sum() / t.cost(bill).sum()
            rows.append(add("summary_cost_share", paper.figures(other)["summary_cost_share"], share, note))
            tc = replay_totals(runs, policy, configured, cache, "degrade")
            cum_c = tc.agent_input.sum() / t_raw.agent_input.sum()
            rows.append(
                add("price_per_input_token_vs_raw_as_configured", pr["price_per_input_token_vs_raw"],
                    tc.cost(bill).sum() / t_raw.cost(bill).sum() / cum_c,
                    f"the paper's N={configured['n']} as ctxsim's trigger reads it", tolerance=None)
            )  # fmt: skip
    rp = paper.figures(raw_t)["price_per_input_token"]
    rows.append(
        _row(
            model,
            "raw",
            "price_per_input_token",
            rp,
            t_all.cost(bill).sum() / t_all.agent_input.sum() * 1e6,
            "USD per million input tokens, output and summaries included; fitted here for Gemini",
        )
    )
    return rows, info, bill, knobs_of


def summary_trigger(rows, m: int) -> int:
    """The summary trigger's ``n`` (with ``m`` kept) whose summaries on the paper's turns add up to the
    paper's summary count; ties go to the smaller per-task error, then the smaller n. Why not the
    paper's N=21: its summary counts fit a trigger every 27 turns (with or without thinking) far better
    than every 21 (per-task error 78 against 191 summaries with thinking); what its N counts (turns
    that enter the history, or every call) is not in its data."""
    turns = rows.loc[rows["turn_count"] > 0, "turn_count"].astype(int).tolist()
    counts = rows.loc[rows["turn_count"] > 0, "summary_count"].astype(int).tolist()
    target = sum(counts)

    def score(n: int) -> tuple[int, int, int]:
        got = [summaries_in(t, n, m) for t in turns]
        return abs(sum(got) - target), sum(abs(g - c) for g, c in zip(got, counts, strict=True)), n

    return min(range(1, max(turns, default=1) + 1), key=score)


def _summaries(rows, knobs: dict) -> int:
    return sum(summaries_in(int(t), knobs["n"], knobs["m"]) for t in rows["turn_count"] if t > 0)


def sized_summary(rows, runs, policy: str, knobs: dict, cache: str | None, bill: Bill) -> dict:
    """``knobs`` with the summary size the paper's summary bills imply under that trigger."""
    size = summary_size(rows, replay_totals(runs, policy, knobs, cache), bill)
    return {**knobs, "summary_min_tokens": size, "summary_max_tokens": size}


def summary_size(rows, totals: RunTotals, bill: Bill) -> int:
    """The summary's size in tokens that the paper's summary bills imply: the mean cost of one summary
    call, less what its input costs (ctxsim's summary input per call, uncached) and the hidden output of
    the call, over the output price. The paper gives no summary size; ctxsim's default (10% of what is
    covered, 256..2048 tokens) is a guess that this replaces for the comparison."""
    per_call = float(rows["summary_cost"].sum()) / max(float(rows["summary_count"].sum()), 1.0)
    calls = float(totals.summary_calls.sum())
    if not calls:
        return POLICY_DEFAULT_SUMMARY
    input_cost = float(totals.summary_input.sum()) / calls * bill.rates.input / 1e6
    hidden = bill.hidden_per_sqrt_input * float(totals.summary_sqrt_input.sum()) / calls
    tokens = (per_call - input_cost) / (bill.rates.output / 1e6) - hidden
    return int(min(max(round(tokens), 256), 16384))


# ---------------------------------------------------------------- shared real runs


def shared(
    model: paper.Model, df, bill: Bill, knobs_of: dict, cache: str | None, traces: dict, on_missing: str
):
    """The shared real runs' rows of one model: replays of the recorded runs under the model's bill."""
    rows = []
    raw = paper.strategy_rows(df, model.key, "raw")
    for corpus, runs in traces.items():
        t_raw = replay_totals(runs, "raw", {}, cache, on_missing)
        for strategy, (policy, _) in POLICIES.items():
            pr = paper.paired(raw, paper.strategy_rows(df, model.key, strategy))
            t = replay_totals(runs, policy, knobs_of[strategy], cache, on_missing)
            cum = t.agent_input.sum() / t_raw.agent_input.sum()
            cost = t.cost(bill).sum() / t_raw.cost(bill).sum()
            note = f"{len(runs)} recorded runs"
            add = partial(_row, model, strategy, corpus=corpus)
            rows += [
                add("cumulative_input_vs_raw", pr["cumulative_input_vs_raw"], cum, note),
                add("turns_vs_raw", pr["turns_vs_raw"], t.agent_calls.sum() / t_raw.agent_calls.sum(),
                    "re-reads included", tolerance=None),
                add("price_per_input_token_vs_raw", pr["price_per_input_token_vs_raw"], cost / cum, note),
                add("cost_vs_raw", pr["cost_vs_raw"], cost, note),
                _completion_row(model, strategy, pr, t_raw, t, f"mock on_missing={on_missing}", corpus),
            ]  # fmt: skip
    return rows


def _row(
    model, strategy, quantity, paper_value, ctxsim_value, note, corpus="calibrated_suite", tolerance="auto"
):
    tol = TOLERANCE.get(quantity) if tolerance == "auto" else tolerance
    return Row(model.key, strategy, quantity, corpus, float(paper_value), float(ctxsim_value), tol, note)


def _completion_row(
    model, strategy, pr: dict, t_raw: RunTotals, t: RunTotals, note: str, corpus="calibrated_suite"
):
    """The paper's paired solve-rate change beside ctxsim's completion change, within the paper's CI."""
    ci = PAIRED_CI.get((model.key, strategy))
    change = float(t.completed.mean() - t_raw.completed.mean())
    tol = [round(ci[0], 4), round(ci[1], 4)] if ci else None
    return Row(
        model.key, strategy, "solve_or_completion_change", corpus, pr["solve_change"], change, tol, note
    )


PAIRED_CI: dict = {}


# ---------------------------------------------------------------- output


def table(rows: Sequence[Row], infos: dict) -> str:
    out = []
    for key in dict.fromkeys(r.model for r in rows):
        m = paper.model_named(key)
        info = infos.get(key, {})
        out.append(f"\n## {m.label}\n")
        out.append("assumptions: " + "; ".join(f"{k} {v}" for k, v in info.items()))
        out.append("")
        out.append("| strategy | quantity | corpus | paper | ctxsim | ratio | tolerance | within |")
        out.append("|---|---|---|---|---|---|---|---|")
        for r in rows:
            if r.model != key:
                continue
            d = r.as_dict()
            tol = d["tolerance"]
            tol_s = (
                ""
                if tol is None
                else (f"CI [{tol[0]:+.3f}, {tol[1]:+.3f}]" if isinstance(tol, list) else f"±{tol:.0%}")
            )
            w = {True: "yes", False: "**no**", None: ""}[d["within"]]
            ratio = "" if d["ratio"] is None else f"{d['ratio']:.3f}"
            out.append(
                f"| {r.strategy} | {r.quantity} | {r.corpus} | {_fmt(d['paper'])} | {_fmt(d['ctxsim'])} "
                f"| {ratio} "
                f"| {tol_s} | {w} |"
            )
    return "\n".join(out)


def _fmt(x: float | None) -> str:
    return "" if x is None else f"{x:.3f}"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="complexity_trap.py", description=__doc__.splitlines()[0])
    reference = Path(os.environ.get("CTXSIM_COMPLEXITY_TRAP", REFERENCE_DEFAULT))
    ap.add_argument("--reference", type=Path, default=reference,
                    help="folder of the paper's auxiliary CSVs")  # fmt: skip
    ap.add_argument("--traces", type=Path, default=None, help="shared traces (default CTXSIM_TRACES)")
    known = [m.key for m in paper.MODELS]
    ap.add_argument("--models", default=",".join(known), help=f"comma-separated, of: {', '.join(known)}")
    ap.add_argument(
        "--tasks", type=int, default=None, help="only the first N raw tasks per model (a quick look; N >= 1)"
    )
    ap.add_argument("--on-missing", default="refetch", choices=("refetch", "fail", "degrade"))
    ap.add_argument("--format", default="table", choices=("table", "markdown", "json"))
    ap.add_argument("--write-summary", action="store_true")
    args = ap.parse_args(argv)
    unknown = [k for k in args.models.split(",") if k and k not in known]
    if unknown or not args.models.strip(","):
        ap.error(f"--models: unknown {', '.join(unknown) or '(none given)'}; known: {', '.join(known)}")
    if args.tasks is not None and args.tasks < 1:
        ap.error(f"--tasks: expected an integer >= 1, got {args.tasks}")
    if not (args.reference / paper.TASKS_CSV).is_file():
        print(
            f"complexity_trap.py: no {paper.TASKS_CSV} in {args.reference} (set --reference)", file=sys.stderr
        )
        return 2
    if args.write_summary and (args.tasks or SUMMARY_MODEL not in args.models.split(",")):
        print(f"complexity_trap.py: --write-summary needs all tasks of {SUMMARY_MODEL}", file=sys.stderr)
        return 2
    df = paper.read_tasks(args.reference)
    ci = paper.read_paired(args.reference)
    keys = [k for k in args.models.split(",") if k]
    for k in keys:
        m = paper.model_named(k)
        for s in POLICIES:
            got = paper.published_ci(ci, m, s)
            if got:
                PAIRED_CI[(k, s)] = got
    traces = load_shared(args.traces)
    rows, infos = [], {}
    for k in keys:
        m = paper.model_named(k)
        if m.cache:
            rates, cache = GEMINI_FLASH_2025, GEMINI_CACHE
        else:
            pin, pout = paper.flat_price(df, k)
            rates, cache = Rates(pin, pout, pin, "flat price fitted to the paper's bills"), None
        r, info, bill, knobs_of = calibrated(m, df, rates, cache, args.tasks, args.on_missing)
        rows += r
        rows += shared(m, df, bill, knobs_of, cache, traces, args.on_missing)
        infos[k] = info
    if args.write_summary:
        write_summary(rows, infos)
    if args.format == "json":
        for r in rows:
            print(json.dumps(r.as_dict(), sort_keys=False))
    else:
        print(table(rows, infos))
    return 0


SUMMARY_FILE = REPO / "conf" / "published" / "complexity_trap.yaml"
SUMMARY_MODEL = "gemini-2.5-flash"
SUMMARY_ROWS = (  # (strategy, quantity, how report and size name it)
    ("masking", "price_per_input_token_vs_raw", "price per input token masked ÷ raw"),
    ("masking", "cumulative_input_vs_raw", "cumulative input masked ÷ raw"),
    ("masking", "cost_vs_raw", "cost masked ÷ raw"),
    ("summary", "price_per_input_token_vs_raw", "price per input token summary ÷ raw"),
)


def summary(rows: Sequence[Row], infos: dict) -> dict:
    """The figures ``report`` and ``size`` print (``sim.analysis.published``): Gemini 2.5 Flash on the
    calibrated suite, the model whose bills carry a prompt cache."""
    by = {
        (r.strategy, r.quantity): r
        for r in rows
        if r.model == SUMMARY_MODEL and r.corpus == "calibrated_suite"
    }
    results = []
    for strategy, quantity, label in SUMMARY_ROWS:
        r = by[(strategy, quantity)]
        results.append(
            {
                "quantity": label,
                "key": quantity,
                "strategy": strategy,
                "ctxsim": _round(r.ctxsim, 2),
                "published": _round(r.paper, 2),
                "tolerance": r.tolerance,
                "within": r.within,
            }
        )
    return {
        "benchmark": "The Complexity Trap",
        "source": "arXiv 2508.21433, SWE-agent on SWE-bench Verified",
        "date": "2025-08",
        "setting": "Gemini 2.5 Flash, observation masking n=10 and LLM-Summary vs raw on a suite calibrated "
        f"to its {infos[SUMMARY_MODEL]['raw_tasks']} raw runs",
        "command": "benchmarks/published/complexity_trap.py",
        "assumptions": "; ".join(
            f"{k} {infos[SUMMARY_MODEL][k]}"
            for k in ("prices", "reuse_fraction", "hidden_output", "summary_tokens", "summary_trigger")
        )
        + "; each strategy's run with the paper's turns",
        "results": results,
    }


def write_summary(rows: Sequence[Row], infos: dict) -> None:
    import yaml

    from sim.util.atomicfile import atomic_path

    head = "# Written by benchmarks/published/complexity_trap.py --write-summary (a test holds it to a run)\n"
    with atomic_path(SUMMARY_FILE) as tmp:
        tmp.write_text(
            head + yaml.safe_dump(summary(rows, infos), sort_keys=False, allow_unicode=True), "utf-8"
        )


def load_shared(folder: Path | None) -> dict:
    from sim.importers import load_paths
    from sim.util.paths import traces_dir

    base = folder or traces_dir()
    out = {}
    for corpus, sub in SHARED.items():
        if (base / sub).exists():
            out[corpus] = list(load_paths([base / sub]))
    return out


if __name__ == "__main__":
    sys.exit(main())
