"""Pieces the reference loop (``sim.engine.loop``) and the fast paths (``sim.engine.fast``) share.

They sit below both, so the reference replay imports nothing from a fast path and no fast path imports
the dispatcher (``sim.engine.dispatch``) that chooses between them: the prefix sums of size changes, the
per-call figures of a trace, a recorded model's cache rules and price, the int64 bound on a run's
columns, and the assembly of a ``RunRecord`` from a run's columns, which every path ends with so that
their records cannot differ in anything but the columns they computed."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

from sim.core.records import RunRecord, compactions_of
from sim.core.types import Trace
from sim.cost.cache import CacheRules, CostModel, cache_rules
from sim.cost.models import resolve
from sim.cost.pricing import Price, price_named
from sim.information.ledger import moved_totals
from sim.information.ledger import totals as ledger_totals
from sim.information.state import has_needs, needs_of
from sim.policies.base import View
from sim.trace.codec import trace_hash
from sim.util.errors import TraceError
from sim.util.limits import run_sum_problem

AUTO = "auto"  # a window or pricing setting read from the trace's recorded model
Observer = Callable[[int, View], None]  # sees each agent request's view just before it is sent


class Fenwick:
    """Prefix sums of per-item size changes, O(log n) per update and query."""

    __slots__ = ("tree",)

    def __init__(self, n: int) -> None:
        self.tree = [0] * (n + 1)

    def add(self, i: int, d: int) -> None:
        i += 1
        tree = self.tree
        while i < len(tree):
            tree[i] += d
            i += i & -i

    def query(self, i: int) -> int:
        """Sum over items [0, i)."""
        s, tree = 0, self.tree
        while i > 0:
            s += tree[i]
            i -= i & -i
        return s


def per_call(trace: Trace) -> tuple[list[int], list[float]]:
    """Tool calls each recorded call issued, and its recorded time since the run started (seconds)."""
    tool_calls = [len(trace.events[c.event_index].tool_call_ids) for c in trace.calls]
    stamps = [e.timestamp for e in trace.events if e.timestamp is not None]
    stamps += [c.timestamp for c in trace.calls if c.timestamp is not None]
    start = min(stamps) if stamps else None
    elapsed, last = [], 0.0
    for c in trace.calls:
        if c.timestamp is not None and start is not None:
            last = c.timestamp - start
        elapsed.append(last)
    return tool_calls, elapsed


# ------------------------------------------------------------------------------------- model setup
@lru_cache(maxsize=256)
def rules_and_price(model: str | None, pricing: str | None) -> tuple[CacheRules, Price | None]:
    """Cache rules and price of a recorded model under a pricing setting (tables are read once)."""
    price: Price | None
    if pricing == AUTO:
        price = resolve(model).price
    elif pricing is None:
        price = None
    else:
        price = price_named(pricing)
    family = price.family if price is not None else resolve(model).cache_family
    return cache_rules(family), price


def cost_model(trace: Trace, pricing: str | None) -> CostModel:
    """The cache and cost model of ``trace``'s recorded model under a pricing setting."""
    return CostModel(*rules_and_price(trace.model, pricing))


def check_sums(trace: Trace, cols: dict[str, list[int]]) -> None:
    """Refuse a run whose column sums could wrap int64 (``sim.util.limits.run_sum_problem``); the batch path
    checks the same bound on its columns (``sim.engine.fast.batch_rows.check_column_sums``)."""
    rows = len(cols["kind"])
    top = max((max(max(v), -min(v)) for c, v in cols.items() if c != "cost_microusd" and v), default=0)
    if (p := run_sum_problem(top, rows)) is not None:
        raise TraceError(trace.source_file or "<trace>", p, record=trace.trace_id)


# ---------------------------------------------------------------------------------- the run's record
def _answer_needs(trace: Trace) -> tuple[str, ...]:
    """Facts the final answer (the last call's action) needs: its live needs (``needs_of``; the key is
    not the column reader's ``answer_needs``, which holds the needs as recorded). A trace without needs
    answers from its flag, which the column reader fills, without building its events."""
    if not trace.derived("has_needs", has_needs) or not trace.calls:
        return ()
    return needs_of(trace, trace.calls[-1].event_index)


def answer_needs_of(trace: Trace) -> int:
    """How many facts the final answer needs (a record's ``answer_needs``)."""
    return len(trace.derived("live_answer_needs", _answer_needs))


def assemble_record(
    trace,
    policy,
    model,
    cols,
    item_state,
    changes,
    cost,
    item_tokens,
    finish="completed",
    warnings=(),
    rejections=0,
    facts=None,
    degraded=False,
    summaries=(),
    rereads=(),
    recovered=(),
    compactions=None,
    ledger=None,
    answer_met=None,
    params=None,
    primed=None,
    cuts=(),
    page_reads=(),
    final_answered=True,
    window=None,
    unpaired=0,
    opening_prompts=(),
    children=(),
    needed_lost=(),
) -> RunRecord:
    """A run's ``RunRecord`` from its call columns ``cols`` and what else the path that replayed it knows.

    ``changes``: CHANGE_COLUMNS arrays in the order the changes were made; ``cost``: (rules, price);
    ``compactions``: their table when already grouped; ``ledger``: its totals, ``answer_met`` the
    final answer's needs met and ``recovered`` the facts re-read, when a batch computed them (``facts``:
    the loop's fact state otherwise); ``params``: the policy's, read once a batch; ``primed``: the
    record's cached sums and counts (``records.Primed``); ``cuts``, ``page_reads``, ``final_answered``
    and ``window``: the record's fields of those names; ``needed_lost``: the facts needed while lost
    from view, when a batch found them (the loop's fact state has them otherwise)."""
    rules, price = cost
    answer = trace.derived("live_answer_needs", _answer_needs)
    missed: tuple[str, ...] = ()
    if answer_met is not None:  # a batch found the needs met and the facts re-read
        met, kept = answer_met, ()
    elif facts is None:  # no fact can have left the view (see replay): every need is met
        met, kept, recovered = len(answer), (), ()
    else:
        n, states = len(item_state), item_state.tolist()
        met = sum(1 for f in answer if facts.where(f, states, n) not in ("lost", "not_retrieved"))
        kept, recovered = tuple(sorted(facts.kept)), tuple(sorted(facts.recovered))
        missed = tuple(sorted(facts.ever_missed))
        needed_lost = tuple(sorted(facts.needed_lost))
    record = RunRecord.of_fields(
        {
            "trace_id": trace.trace_id,
            "trace_hash": trace.derived("trace_hash", trace_hash),
            "policy": policy.name,
            "params": policy.params() if params is None else dict(params),
            "model": model.name,
            "finish_reason": finish,
            "calls": cols,
            "item_state": item_state,
            "compactions": compactions_of(changes) if compactions is None else compactions,
            "warnings": tuple(warnings),
            "rejections": rejections,
            "pricing": None if price is None else price.model,
            "cache_family": rules.family,
            "changes": changes,
            "item_tokens": item_tokens,
            "summary_kept": kept,
            "summaries": tuple(summaries),
            "rereads": tuple(rereads),
            "recovered": recovered,
            "degraded": degraded,
            "answer_needs": len(answer),
            "answer_needs_met": met,
            "unpaired_tool_messages": unpaired,
            "ledger": ledger,
            "summarizer": model.summarizer,
            "cuts": tuple(cuts),
            "page_reads": tuple(page_reads),
            "missed": missed,
            "needed_lost": tuple(needed_lost),
            "final_answered": final_answered,
            "window": window,
            "runs": trace.runs,
            "opening_prompts": tuple(opening_prompts),
            "children": children,
            "transforms": trace.applied,
        },
        primed,
    )
    if ledger is None:  # derived once, from the record
        object.__setattr__(record, "ledger", moved_totals(trace, ledger_totals(trace, record)))
    return record
