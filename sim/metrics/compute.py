"""Run metrics: one definition each, pure functions of RunRecords. Names are result column names.

Each metric takes a sequence of records and returns one value per record, so a batch of runs is
measured in one pass per metric (a run's few calls make per-record function calls the main cost);
``compute_metrics(r)`` is the same definitions applied to one record.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import attrgetter

import numpy as np

from sim.core.growth import growth_exponents
from sim.core.records import (
    COMPACTION_KINDS,
    GRACE,
    PAGE,
    REFETCH,
    RETRIEVE,
    SUMMARY,
    UNKNOWN,
    RunRecord,
    child_answered,
)
from sim.core.rounding import round_all
from sim.information.ledger import LedgerTotals
from sim.util.batchmemo import batch_derived

Records = Sequence[RunRecord]


def calls(rs: Records) -> list[int]:
    return [r.n_calls for r in rs]


def child_total(r: RunRecord, column: str) -> int:
    """Σ of a call column over the run's children and theirs (a sub-agent's spend is its parent's)."""
    return sum(c.total(column) + child_total(c, column) for c in r.children) if r.children else 0


def _total(column: str, name: str, doc: str) -> Callable[[Records], list[int]]:
    """The metric ``name``: each run's total of a call column, its children's included."""

    def value(rs: Records) -> list[int]:
        return [r.total(column) + child_total(r, column) if r.children else r.total(column) for r in rs]

    value.__name__, value.__doc__ = name, doc
    return value


cumulative_input_tokens = _total(
    "input_tokens",
    "cumulative_input_tokens",
    "Sum of input tokens over all calls, the children's included: the quadratic quantity.",
)
cumulative_output_tokens = _total("output_tokens", "cumulative_output_tokens", "Sum of output tokens.")
cache_read_tokens = _total(
    "cache_read_tokens",
    "cache_read_tokens",
    "Input tokens read from the prompt cache (modelled, sim.cost.cache).",
)
cache_write_tokens = _total(
    "cache_write_tokens",
    "cache_write_tokens",
    "Input tokens written to the cache at the write price (families with explicit writes).",
)
uncached_input_tokens = _total(
    "uncached_input_tokens", "uncached_input_tokens", "Input tokens at the full price."
)


def peak_context_tokens(rs: Records) -> list[int]:
    """Largest request of the run, in input tokens (what a window must hold before output)."""
    return [r.largest("input_tokens") for r in rs]


def growth_exponent(r: RunRecord) -> float | None:
    """Slope of log(cumulative input) on log(call number) over the second half of the calls.

    Raw long runs approach 2 (each call re-sends a growing history); bounded views approach 1.
    None for runs of fewer than 4 calls, where a half has too few points for a slope.
    """
    return _growth_exponents([r])[0]


def _growth_exponents(rs: Records) -> list[float | None]:
    """``growth_exponent`` of each record: primed by a batch replay, else computed for the rest at once."""
    out = [r.primed_growth() for r in rs]
    todo = [j for j, v in enumerate(out) if v is UNKNOWN]
    if todo:
        rest = [rs[j] for j in todo]
        values = growth_exponents(
            np.concatenate([r.calls["input_tokens"] for r in rest]),
            np.cumsum([0] + [r.n_calls for r in rest]),
        )
        for j, v in zip(todo, values, strict=True):
            out[j] = v
    return out


def cache_hit_rate(rs: Records) -> list[float | None]:
    """cache_read_tokens / cumulative_input_tokens (children included in both)."""
    reads, inputs = cache_read_tokens(rs), cumulative_input_tokens(rs)
    return [round(read / total, 6) if total else None for read, total in zip(reads, inputs, strict=True)]


def _priced(r: RunRecord) -> bool:
    """The run and every child of it has a price (a partial sum would mislead)."""
    return r.pricing is not None and all(_priced(c) for c in r.children)


def cost_microusd(rs: Records) -> list[int | None]:
    """Cache-aware cost in micro-USD at the priced model's rates, the children's included; None when a
    model has no price (the engine prices every row of a priced run, and none of an unpriced one)."""
    return [
        (
            r.total("cost_microusd") + child_total(r, "cost_microusd")
            if r.children
            else r.total("cost_microusd")
        )
        if _priced(r)
        else None
        for r in rs
    ]


def _child_rows(r: RunRecord) -> int:
    return sum(c.n_calls + _child_rows(c) for c in r.children)


def child_calls(rs: Records) -> list[int]:
    """Model requests of the run's children (and theirs): rows, summaries and grace turns included."""
    return [_child_rows(r) if r.children else 0 for r in rs]


def child_input_tokens(rs: Records) -> list[int]:
    """Input tokens of the children's calls (part of ``cumulative_input_tokens``)."""
    return [child_total(r, "input_tokens") for r in rs]


def child_cost_microusd(rs: Records) -> list[int | None]:
    """Cost of the children's calls (part of ``cost_microusd``); None when a model has no price."""
    return [child_total(r, "cost_microusd") if _priced(r) else None for r in rs]


def parent_input_tokens(rs: Records) -> list[int]:
    """Input tokens of the run's own calls: ``cumulative_input_tokens`` without the children's."""
    return [r.total("input_tokens") for r in rs]


def _settled_on_grace(r: RunRecord) -> bool:
    return r.finish_reason.startswith("budget-exhausted") and r.kind_count(GRACE) > 0


def child_exhausted(rs: Records) -> list[int]:
    """Children whose run settled on a grace answer after a budget ran out: a success for the parent,
    with ``exhausted`` visible to it (effect-agent's ``SubagentCompleted`` carries ``finishReason``
    budget-exhausted and the ``exhausted`` dimension)."""
    return [sum(_settled_on_grace(c) for c in r.children) for r in rs]


def child_failed(rs: Records) -> list[int]:
    """Children that settled without an answer (no final turn, no grace turn): their report never
    reached the parent, and the facts it held count lost (effect-agent's ``SubagentFailed``)."""
    return [sum(not child_answered(c) for c in r.children) for r in rs]


def _ledger(field: str) -> Callable[[Records], list[int]]:
    get = attrgetter(f"ledger.{field}")

    def value(rs: Records) -> list[int]:
        return list(map(get, rs))

    value.__name__ = field
    value.__doc__ = f"Ledger total {field} at the end of the run (sim.information.ledger)."
    return value


LEDGER_FIELDS = LedgerTotals._fields


def refetch_calls(rs: Records) -> list[int]:
    """Extra calls re-running a tool call whose result the view had lost (trajectory elongation)."""
    return [r.kind_count(REFETCH) for r in rs]


def retrieve_calls(rs: Records) -> list[int]:
    """Extra calls reading spilled content back through its handle (a miss included)."""
    return [r.kind_count(RETRIEVE) for r in rs]


def page_calls(rs: Records) -> list[int]:
    """Extra calls reading a later page of a paginated result."""
    return [r.kind_count(PAGE) for r in rs]


def answer_fact_recall(rs: Records) -> list[float]:
    """Share of the final answer's needed facts available or recoverable when it was given."""
    return [
        round(met / needs, 6) if (met := r.answer_needs_met) != (needs := r.answer_needs) else 1.0 for r in rs
    ]  # all needs met (none included): exactly 1.0


def needed_facts_lost(rs: Records) -> list[int]:
    """Distinct facts an action or the final answer needed while they were lost from view (``lost`` or
    ``not_retrieved``: neither in view, nor kept by a summary, nor re-read before, nor behind a page or a
    spill handle): the facts behind re-reads of lost content, failures and degraded answers."""
    return [len(r.needed_lost) for r in rs]


def answer_completed(rs: Records) -> list[bool]:
    """Reached the final answer within budgets, no action went ahead blind, every needed fact there."""
    return [
        r.finish_reason == "completed" and not r.degraded and r.answer_needs_met == r.answer_needs for r in rs
    ]


ANSWER_OUTCOMES = ("complete", "grace", "degraded", "failed")


def answer_outcome(rs: Records) -> list[str]:
    """How the run's answer came out, first rule that holds: ``complete`` (``answer_completed``);
    ``grace`` (the answer is a grace turn, tools forbidden, after a budget ran out); ``degraded`` (the
    agent's own final turn was given, but an action went ahead without a fact it needed, a fact the
    answer needs was missing, or a budget ran out on that very turn); ``failed`` (no answer: the run
    stopped before its final turn — missing information, a context overflow, the agent's turn limit,
    a failed compaction, a budget without a grace turn)."""
    done = answer_completed(rs)
    return [
        "complete" if ok else "grace" if r.kind_count(GRACE) else "degraded" if r.final_answered else "failed"
        for r, ok in zip(rs, done, strict=True)
    ]


def compactions(rs: Records) -> list[int]:
    """Compactions: one per (call, kind) in which a policy transformed items (settle-time cuts included)."""
    return [sum(r.compaction_counts()) for r in rs]


def _compactions_of(kind: str) -> Callable[[Records], list[int]]:
    code = COMPACTION_KINDS.index(kind)

    def count(rs: Records) -> list[int]:
        return [r.compaction_counts()[code] for r in rs]

    count.__name__ = f"compactions_{kind}"
    count.__doc__ = f"Compactions of kind {kind}."
    return count


def compaction_frequency(rs: Records) -> list[float]:
    """Compactions per 100 calls."""
    return [round(100 * sum(r.compaction_counts()) / n, 4) if (n := r.n_calls) else 0.0 for r in rs]


def tokens_reclaimed(rs: Records) -> list[int]:
    """Tokens the compactions took out of the view when they happened (summaries net of their size)."""
    return [r.total_reclaimed() for r in rs]


def summary_calls(rs: Records) -> list[int]:
    return [r.kind_count(SUMMARY) for r in rs]


def summary_tokens(rs: Records) -> list[int]:
    """Output tokens of the summary calls: the summaries' own size."""
    return [
        sum(o for k, o in zip(r.column("kind"), r.column("output_tokens"), strict=True) if k == SUMMARY)
        if r.kind_count(SUMMARY)
        else 0
        for r in rs
    ]


def exhausted(rs: Records) -> list[bool]:
    """The run stopped on a budget (turns, tool calls, tokens, cost or duration)."""
    return [r.finish_reason.startswith("budget-exhausted") for r in rs]


def unpaired_tool_messages(rs: Records) -> list[int]:
    """Requests that held a tool call without its result or a result without its call (a framework that
    pops single messages, e.g. AutoGen's token-limited context: most providers reject such requests)."""
    return [r.unpaired_tool_messages for r in rs]


def warnings(rs: Records) -> list[int]:
    """Budget warnings (one per dimension, at 80%)."""
    return [len(r.warnings) for r in rs]


# ------------------------------------------------------------------ conversations of several runs
def runs(rs: Records) -> list[int]:
    """Runs of the conversation the trace holds (1: a trace of one run)."""
    return [r.runs for r in rs]


def max_opening_prompt_tokens(rs: Records) -> list[int | None]:
    """Largest opening prompt of any run after the first (None: the trace has one run, or the replay
    stopped in the first): what a long-lived conversation carries into every new run."""
    return [max(r.opening_prompts[1:]) if len(r.opening_prompts) > 1 else None for r in rs]


def live_context_tokens(rs: Records) -> list[int]:
    """Input tokens of the last request the agent made (an agent, grace or re-read step, never a summary
    call: its input is the transcript, not the context), in the last run reached: the context the
    conversation lives at now, the seed's "number to watch" beside the lifetime counters. 0: no call."""
    return [_last_step_input(r) for r in rs]


def _last_step_input(r: RunRecord) -> int:
    kinds, inputs = r.column("kind"), r.column("input_tokens")
    for j in range(len(kinds) - 1, -1, -1):
        if kinds[j] != SUMMARY:
            return inputs[j]
    return 0


METRICS: dict[str, Callable[[Records], list]] = {
    "calls": calls,
    "cumulative_input_tokens": cumulative_input_tokens,
    "cumulative_output_tokens": cumulative_output_tokens,
    "peak_context_tokens": peak_context_tokens,
    "growth_exponent": _growth_exponents,
    "cache_read_tokens": cache_read_tokens,
    "cache_write_tokens": cache_write_tokens,
    "uncached_input_tokens": uncached_input_tokens,
    "cache_hit_rate": cache_hit_rate,
    "cost_microusd": cost_microusd,
    "compactions": compactions,
    **{f"compactions_{k}": _compactions_of(k) for k in COMPACTION_KINDS},
    "compaction_frequency": compaction_frequency,
    "tokens_reclaimed": tokens_reclaimed,
    "summary_calls": summary_calls,
    "summary_tokens": summary_tokens,
    "exhausted": exhausted,
    "warnings": warnings,
    "unpaired_tool_messages": unpaired_tool_messages,
    **{f: _ledger(f) for f in LEDGER_FIELDS},
    "refetch_calls": refetch_calls,
    "retrieve_calls": retrieve_calls,
    "page_calls": page_calls,
    "answer_completed": answer_completed,
    "answer_outcome": answer_outcome,
    "answer_fact_recall": answer_fact_recall,
    "runs": runs,
    "max_opening_prompt_tokens": max_opening_prompt_tokens,
    "live_context_tokens": live_context_tokens,
    # appended (issue 25): a run's sub-agents; the totals above include their spend
    "child_calls": child_calls,
    "child_input_tokens": child_input_tokens,
    "child_cost_microusd": child_cost_microusd,
    "parent_input_tokens": parent_input_tokens,
    "child_exhausted": child_exhausted,
    "child_failed": child_failed,
    # appended: the needed facts the view had lost (sim.information.state.FactState.note_needs)
    "needed_facts_lost": needed_facts_lost,
}


def compute_metrics(r: RunRecord) -> dict[str, object]:
    return compute_metrics_many([r])[0]


def compute_metric_columns(records: Sequence[RunRecord]) -> dict[str, list]:
    """Every metric over a batch of records: metric name -> one value per record, in ``METRICS`` order."""
    records = list(records)
    return {name: fn(records) for name, fn in METRICS.items()}


def compute_metrics_many(records: Sequence[RunRecord]) -> list[dict[str, object]]:
    """Every metric of each record, each metric computed for the whole batch at once."""
    columns = compute_metric_columns(records)
    names = list(columns)
    return [dict(zip(names, values, strict=True)) for values in zip(*columns.values(), strict=True)]


def table_metric_columns(table) -> dict[str, list]:
    """``compute_metric_columns`` of a ``sim.engine.dispatch.ReplayTable``'s runs, in order, without their
    records:
    the batch path's runs measured from its columns (the same definitions, on per-run totals), the
    loop's from their records."""
    n = len(table)
    if not table.loop and len(table.groups) == 1:  # one batch in order, every run its own: as it is
        g = table.groups[0]
        if g.positions == list(range(n)) and g.kept.all():
            return _group_metric_columns(g)
    out: dict[str, list] = {name: [None] * n for name in METRICS}
    if table.loop:
        positions = list(table.loop)
        for name, values in compute_metric_columns([table.loop[p] for p in positions]).items():
            col = out[name]
            for p, v in zip(positions, values, strict=True):
                col[p] = v
    for g in table.groups:
        values = _group_metric_columns(g)
        kept = g.kept.tolist()
        positions = g.positions
        for name, vs in values.items():
            col = out[name]
            for p, v, ok in zip(positions, vs, kept, strict=True):
                if ok:
                    col[p] = v
    return out


def _group_metric_columns(g) -> dict[str, list]:
    """A group's metric columns: a batch group's from its batch, the lanes' (``sim.engine.fast.seed_rows``)
    as given."""
    if hasattr(g, "metric_columns"):
        cols = g.metric_columns()
        return {name: cols[name] for name in METRICS}
    return _batch_metric_columns(g)


def _batch_metric_columns(g) -> dict[str, list]:
    """Every metric of a batch group's runs (``sim.engine.dispatch.BatchGroup``), one list each: the record
    definitions above, on the batch's per-run totals. Its runs completed (the batch path models no
    budget, stop or limit), answered their final call, warned of nothing and split no pair."""
    from sim.engine.fast.batch import PlainRuns
    from sim.information.ledger import int_lists, totals_columns

    b = g.batch
    runs = len(b.runs)
    sums = b.sums.column
    kinds = b.kinds.T
    counts = b.compactions
    n_compactions = counts.sum(axis=1)
    plain = isinstance(b.runs, PlainRuns)
    if not plain:
        needs = batch_derived([p.trace for p in b.runs], "live_answer_needs", _answer_needs)
        met = [n if p.answer_met is None else p.answer_met for p, n in zip(b.runs, needs, strict=True)]
        degraded = [p.degraded for p in b.runs]
    summary = kinds[SUMMARY]
    summary_tokens = np.zeros(runs, dtype=np.int64)
    if summary.any():
        out_tok = np.where(b.columns["kind"] == SUMMARY, b.columns["output_tokens"], 0)
        nonempty = b.rows.nonempty
        summary_tokens[nonempty] = np.add.reduceat(out_tok, b.rows.nonempty_off)
    if plain:  # no run reacted: every need met, none degraded
        done, outcome, recall = [True] * runs, ["complete"] * runs, [1.0] * runs
    else:
        done = [not d and m == k for d, m, k in zip(degraded, met, needs, strict=True)]
        grace = kinds[GRACE].tolist()
        outcome = [
            "complete" if ok else "grace" if gr else "degraded" for ok, gr in zip(done, grace, strict=True)
        ]
        recall = [round(m / k, 6) if m != k else 1.0 for m, k in zip(met, needs, strict=True)]
    # the int columns as one block, a row each, made lists at once (``sim.information.ledger.int_lists``)
    ints = {
        "calls": b.rows_per_run,
        "cumulative_input_tokens": sums("input_tokens"),
        "cumulative_output_tokens": sums("output_tokens"),
        "peak_context_tokens": b.peaks,
        "cache_read_tokens": sums("cache_read_tokens"),
        "cache_write_tokens": sums("cache_write_tokens"),
        "uncached_input_tokens": sums("uncached_input_tokens"),
        **({} if g.price is None else {"cost_microusd": sums("cost_microusd")}),
        "compactions": n_compactions,
        **{f"compactions_{k}": counts[:, i] for i, k in enumerate(COMPACTION_KINDS)},
        "tokens_reclaimed": b.reclaimed,
        "summary_calls": summary,
        "summary_tokens": summary_tokens,
        "refetch_calls": kinds[REFETCH],
        "retrieve_calls": kinds[RETRIEVE],
        "page_calls": kinds[PAGE],
        "live_context_tokens": _live_context(b, runs),
    }
    block = np.empty((len(ints), runs), dtype=np.int64)
    for row, values in zip(block, ints.values(), strict=True):
        row[:] = values
    cols: dict[str, list] = dict(zip(ints, int_lists(block), strict=True))
    total_in = cols["cumulative_input_tokens"]
    cols.update(
        {
            "growth_exponent": list(b.growth),
            "cache_hit_rate": _ratios(sums("cache_read_tokens"), sums("input_tokens"), 6),
            "compaction_frequency": _frequencies(n_compactions, b.rows_per_run),
            "exhausted": [False] * runs,
            "warnings": [0] * runs,
            "unpaired_tool_messages": [0] * runs if g.unpaired is None else g.unpaired.tolist(),
            **totals_columns(*b.ledger[5][:2], *b.ledger[2:4], b.ledger[5][2]),
            "answer_completed": done,
            "answer_outcome": outcome,
            "answer_fact_recall": recall,
            # the batch path replays only simple traces (``Trace.is_simple``): one run, no children
            "runs": [1] * runs,
            "max_opening_prompt_tokens": [None] * runs,
            "child_calls": [0] * runs,
            "child_input_tokens": [0] * runs,
            "child_cost_microusd": [None] * runs if g.price is None else [0] * runs,
            "parent_input_tokens": total_in,
            "child_exhausted": [0] * runs,
            "child_failed": [0] * runs,
            "needed_facts_lost": [0] * runs if plain else [len(p.needed_lost) for p in b.runs],
        }
    )
    if g.price is None:
        cols["cost_microusd"] = [None] * runs
    return {name: cols[name] for name in METRICS}


def _ratios(num: np.ndarray, den: np.ndarray, digits: int) -> list[float | None]:
    """``[round(n / d, digits) if d else None ...]`` over int arrays, the same floats (``round_all``):
    int64 / int64 in numpy is the correctly rounded quotient, as Python's int / int is, for counts below
    2**53."""
    if not len(den):
        return []
    if not num.any() and den.min() > 0:  # 0 / d: 0.0 (never -0.0: d > 0)
        return [0.0] * len(den)
    if max(int(np.abs(num).max()), int(np.abs(den).max())) >= 1 << 53:
        return [round(n / d, digits) if d else None for n, d in zip(num.tolist(), den.tolist(), strict=True)]
    ok = den != 0
    q = np.divide(num, den, out=np.zeros(len(den), dtype=np.float64), where=ok)
    out: list[float | None] = round_all(q, digits)
    if not ok.all():
        for j in np.flatnonzero(~ok).tolist():
            out[j] = None
    return out


def _frequencies(compactions: np.ndarray, n_calls: np.ndarray) -> list[float]:
    """``compaction_frequency`` of runs: ``round(100 * compactions / n_calls, 4)``, 0.0 without calls."""
    out = _ratios(100 * compactions, n_calls, 4)
    return [0.0 if v is None else v for v in out] if not n_calls.all() else out


def _live_context(b, runs: int) -> np.ndarray:
    """``live_context_tokens`` of a batch's runs: the input of each run's last row that is not a summary
    call (0: a run without one)."""
    kind, inputs = b.columns["kind"], b.columns["input_tokens"]
    if not b.kinds[:, SUMMARY].any():  # every row a step: each run's last row (0: a run without rows)
        out = np.zeros(runs, dtype=np.int64)
        rows = b.rows
        ends = rows.bounds[1:][rows.nonempty] - 1
        out[rows.nonempty] = inputs[ends]
        return out
    step = np.flatnonzero(kind != SUMMARY)
    out = np.zeros(runs, dtype=np.int64)
    if len(step):
        bounds = np.asarray(b.rows.bounds, dtype=np.int64)  # row offsets of the runs: [start_j, end_j)
        last = np.searchsorted(step, bounds[1:], side="left") - 1  # last step row before each run's end
        ok = (last >= 0) & (step[np.maximum(last, 0)] >= bounds[:-1])
        out[ok] = inputs[step[last[ok]]]
    return out


def _answer_needs(traces) -> list[int]:
    from sim.engine.common import answer_needs_of

    return [answer_needs_of(t) for t in traces]
