"""The per-call replay loop (DESIGN.md "Replay semantics").

Per call: admit the events recorded since the previous call (settle-time transforms apply once, here);
let the policy transform the view, possibly through a metered summary call; price the request
incrementally (prefix sums of the original sizes plus the net effect of every change so far, never a
recount), with the run-status line if the policy appends one; refuse it if it exceeds the model's window
(the policy may compact and retry, up to its ``overflow_retries`` rejections in a row); ask the mock model;
account usage and let the policy check its budgets (a grace call with tools forbidden, or a stop). A
policy's ``Decision`` may also stop the run with a finish reason of its own (a framework's failure, e.g.
``condensation-insufficient``).

Two ways to run the same semantics. The per-call loop (``_replay_loop``) is the reference. When nothing
watches and the policy's decisions are known ahead (no pre-call transform, or a ``plan``; no budgets, no
status line, no recovery), ``replay_many`` hands a batch of runs to ``sim.engine.fast.batch``: requests are
prefix
sums of settled sizes plus planned changes, and the mock model's reactions to facts a plan hid (refetch,
retrieval, degrade) are rows inserted where the loop would make them, all computed over the batch's runs
laid end to end. A run that would exceed its window, or whose model fails on a missing fact, is handed
to the loop. The conformance checker holds the two paths to identical records for every registered
policy.

A trace of several runs of one conversation (``Trace.runs``) always takes the loop: at each run's first
call the policy's compaction carries into the run (``Policy.persists_compaction``) or every item goes
back to what it was when it settled (the seed engine without its durable record), and the policy's
``start_run`` gives the state the run goes on with; each run's opening prompt is recorded.
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Callable, Sequence
from functools import lru_cache, partial
from itertools import accumulate
from typing import NamedTuple

import numpy as np

from sim.core.records import (
    AGENT,
    CALL_COLUMNS,
    GRACE,
    KIND_OF_STATE,
    PAGE,
    REFETCH,
    RETRIEVE,
    STEP_KINDS,
    SUMMARY,
    RunRecord,
    change_table,
    child_answered,
    compactions_of,
)
from sim.core.types import ItemState, Trace
from sim.cost.cache import CacheRules, CostModel, cache_rules
from sim.cost.models import resolve, resolve_window
from sim.cost.pricing import Price, closest_priced, price_named
from sim.engine.common import Fenwick, per_call
from sim.engine.fast.batch import Batch, Prepared, prepare_many, replay_batch, run_columns
from sim.engine.model import ReplayModel
from sim.information.ledger import moved_totals
from sim.information.ledger import totals as ledger_totals
from sim.information.state import (
    POSITIONAL,
    FactState,
    choose_rows,
    has_needs,
    last_need,
    page_size,
    pages_of,
    reread_size,
    shown_ranges,
    span_of,
)
from sim.policies.base import Decision, Plans, Policy, RunStatus, View
from sim.trace.codec import trace_hash
from sim.util.batchmemo import BatchKey, Keyed, batch_derived
from sim.util.errors import ConfigError, TraceError
from sim.util.limits import run_sum_problem

Observer = Callable[[int, View], None]
AUTO = "auto"
BATCH = 256  # runs per replay_many call for streaming callers: amortises per-batch work, bounds memory
# Lanes pay a call position's array operations whatever their number, the loop each call: below this
# many lanes a position on average (lanes' calls / the longest run's), the loop is faster (measured:
# about even at 4 with 8-32 SWE-like runs; a run alone is 3-4x faster on the loop)
LANES_MIN_WIDTH = 4
LANES = 4096  # lanes (settings x runs) advanced together at most: bounds the rows they keep


def replay(
    trace: Trace,
    policy: Policy,
    model: ReplayModel | None = None,
    observer: Observer | None = None,
    window: int | str | None = AUTO,
    pricing: str | None = AUTO,
) -> RunRecord:
    """Replay ``trace`` under ``policy`` with the scripted mock model; returns the run's record.

    ``window``: the provider's context window in tokens; ``"auto"`` looks up the trace's recorded model
    in ``conf/model/providers/`` (unknown models: no limit); None disables the check.
    ``pricing``: ``"auto"`` prices the trace's recorded model from ``conf/pricing/``; a model name prices
    every call as that model; None leaves cost unknown. Unpriced runs still get cache token figures.
    ``observer(call, view)``, if given, sees each agent request's view (read-only) just before it is
    sent: the conformance checker and ``explain`` use it; replays for results leave it None.
    """
    model = model or trace.derived("replay_model", ReplayModel)
    if observer is None:
        return replay_many([trace], policy, [model], window, pricing)[0]
    return _loop_one(trace, policy, model, observer, window, pricing)


def _loop_one(
    trace: Trace, policy: Policy, model: ReplayModel, observer: Observer | None, window, pricing
) -> RunRecord:
    """One run through the per-call loop, set up as ``replay`` sets it up."""
    rules, price = _rules_and_price(trace.model, pricing)
    _check_priced(policy, trace, price)
    w = resolve_window(trace.model) if window == AUTO else window
    children = _replay_children(trace, policy, model, window, pricing)
    run = after_children(trace, children)
    model, trace = (model, trace) if run is trace else (model.like(run), run)
    return _replay_loop(trace, policy, model, observer, w, CostModel(rules, price), children)  # type: ignore[arg-type]


def _replay_children(
    trace: Trace, policy: Policy, model: ReplayModel, window: int | str | None, pricing: str | None
) -> tuple[RunRecord, ...]:
    """The records of a trace's children, each replayed under the same policy (its own state) and the
    parent's mock model behaviour; a child's children recurse (nesting is bounded at load)."""
    if not trace.children:
        return ()
    kids = [c.trace for c in trace.children]
    return tuple(replay_many(kids, policy, [model.like(k) for k in kids], window, pricing))


def after_children(trace: Trace, kids: Sequence[RunRecord]) -> Trace:
    """The parent as its children left it: a child that failed sent no report, so the tool result
    answering its call provides no facts (declared lost: ``Moved`` of kind ``child-failed``). The run
    keeps the recorded trace's identity (its hash). Without a failed child: ``trace`` itself."""
    import dataclasses

    from sim.core.types import Moved

    failed = {
        c.tool_call_id: (j, c.parent_call)
        for j, (c, r) in enumerate(zip(trace.children, kids, strict=True))
        if c.tool_call_id is not None and not child_answered(r)
    }
    if not failed:
        return trace
    events, moved = list(trace.events), []
    for i, e in enumerate(events):
        if e.kind == "tool_result" and e.tool_call_id in failed and e.provides:
            j, k = failed[e.tool_call_id]
            kinds = e.fact_kinds or (None,) * len(e.provides)
            moved.append(Moved("child-failed", k, k + 1, k, j, 0, 0, (), e.provides, tuple(kinds)))
            events[i] = dataclasses.replace(e, provides=(), fact_spans=(), fact_kinds=())
    if not moved:
        return trace
    out = dataclasses.replace(trace, events=tuple(events), moved=(*trace.moved, *moved))
    out._cache["trace_hash"] = trace.derived("trace_hash", trace_hash)
    return out


def replay_many(
    traces: Sequence[Trace],
    policy: Policy,
    models: Sequence[ReplayModel] | None = None,
    window: int | str | None = AUTO,
    pricing: str | None = AUTO,
) -> list[RunRecord]:
    """``[replay(t, policy, m, window=window, pricing=pricing) for t, m in zip(traces, models)]``: the
    same records, in order, with the fast path's cache and cost columns computed for all runs at once.
    ``models`` default to ``ReplayModel(t)`` per trace (one per trace, reused: it holds no run state)."""
    # records of every run: the lanes' columns would be replayed again by the loop (``records``)
    return replay_table(traces, policy, models, window, pricing, lanes=False).records()


class BatchGroup(NamedTuple):
    """Runs of a ``ReplayTable`` the batch path replayed together under one price."""

    positions: list[int]  # each run's place in the table
    batch: Batch
    rules: CacheRules
    price: Price | None
    windows: list[int | None]
    kept: np.ndarray  # per run: the batch's answer stands (False: over its window, the loop's record)


class ReplayTable:
    """The replays of ``replay_table``: records of the runs the per-call loop replayed, columns of those
    the batch path did (``BatchGroup``), metric columns of those the lanes did
    (``sim.engine.fast.seed_rows.LaneGroup``).
    Metrics and result rows read the columns (``sim.metrics.compute.table_metric_columns``); ``records()``
    builds
    every run's ``RunRecord`` only for a caller that needs them."""

    def __init__(self, traces, models, policy, loop: dict[int, RunRecord], groups: list[BatchGroup]):
        self.traces, self.models, self.policy = traces, models, policy
        self.loop, self.groups = loop, groups

    def __len__(self) -> int:
        return len(self.traces)

    def records(self) -> list[RunRecord]:
        records: list[RunRecord | None] = [None] * len(self.traces)
        for pos, r in self.loop.items():
            records[pos] = r
        policy, params = self.policy, self.policy.params()
        for g in self.groups:
            if not isinstance(g, BatchGroup):  # the lanes keep no call table: the loop's record
                for pos, w, ok in zip(g.positions, g.windows, g.kept.tolist(), strict=True):
                    if ok:
                        trace, model = self.traces[pos], self.models[pos]
                        records[pos] = _replay_loop(
                            trace, policy, model, None, w, CostModel(g.rules, g.price)
                        )
                continue
            columns = run_columns(g.batch)
            kept = g.kept.tolist()
            for pos, p, w, c, ok in zip(g.positions, g.batch.runs, g.windows, columns, kept, strict=True):
                if not ok:
                    continue
                records[pos] = _record(
                    p.trace, policy, p.model, c.calls, c.item_state, c.changes, (g.rules, g.price),
                    c.item_tokens, recovered=p.recovered, degraded=p.degraded, rereads=p.rereads,
                    answer_met=p.answer_met, compactions=c.compactions, ledger=c.ledger, params=params,
                    primed=c.primed, cuts=c.cuts, window=w,
                )  # fmt: skip
        return records  # type: ignore[return-value]


def batch_path(policy: Policy) -> bool:
    """Whether the batch path may replay runs of ``policy`` (its decisions known ahead; no budgets, no
    status line, no recovery); ``prepare_many`` may still hand single runs to the loop."""
    return (policy.plans or not policy.acts_before_call) and not (
        policy.recovers or policy.checks_after_call or policy.reports_status
    )


def replay_table(
    traces: Sequence[Trace],
    policy: Policy,
    models: Sequence[ReplayModel] | None = None,
    window: int | str | None = AUTO,
    pricing: str | None = AUTO,
    lanes: bool = True,
) -> ReplayTable:
    """``replay_many``'s replays, left as columns where the batch path or the lanes made them (no per-run
    record). ``lanes``: a seed engine with a limit replays the runs the lanes accept as lanes
    (``sim.engine.fast.seed_rows``; off: the per-call loop, for a caller that wants every record)."""
    traces = Keyed(traces)  # the batch's memory key made once for the replay's many asks
    if models is None:  # each trace's default model, made once, found through the batch's memory: each
        # trace's own memo is several objects apart in memory, and reading 500 of them costs as much as
        # a batch's arithmetic once a replay has pushed them out of the CPU's caches
        models = [ref() for ref in batch_derived(traces, "replay_model_refs", _default_model_refs)]
        if None in models:  # (a trace's memo cleared: its model made again)
            models = [t.derived("replay_model", ReplayModel) for t in traces]
        else:  # the batch's default models, keyed from the traces' key (each model holds its trace)
            models = Keyed(models, BatchKey.derived("replay_model", traces.key))
    models = Keyed(models) if type(models) is not Keyed else models
    if len(models) != len(traces):
        raise ValueError(f"replay_many: {len(traces)} traces but {len(models)} models")
    fast = batch_path(policy)
    loop: dict[int, RunRecord] = {}
    setup = batch_setup(traces, window, pricing)
    for pos in setup.composite:
        # several runs of one conversation, children or a transform's moves: only the per-call loop
        # models them, so the batch and grid paths never see such a trace (they decline, never guess)
        loop[pos] = _loop_one(traces[pos], policy, models[pos], None, window, pricing)
    for pos in setup.first_of_model:  # the first run of each model, checked once
        _check_priced(policy, traces[pos], setup.setups[pos][1])
    setups = setup.setups
    _replay_unlimited(traces, policy, models, setups, loop)
    groups: list = []
    if lanes and getattr(policy, "context_token_limit", None) is not None:
        laned, handed = _replay_lanes(traces, [policy], models, setups, set(loop))
        groups = laned[0]
        loop.update(handed[0])
    taken = set(loop).union(*(g.positions for g in groups)) if groups else loop
    rest = list(range(len(traces))) if not taken else [pos for pos in range(len(traces)) if pos not in taken]
    if not rest:
        return ReplayTable(traces, models, policy, loop, groups)
    whole = len(rest) == len(traces)
    sub = traces if whole else [traces[pos] for pos in rest]
    plans = policy.plan_many(sub) if fast and policy.acts_before_call else None
    if plans is not None and not isinstance(plans, Plans):  # a plugin's plan_many may give one Plan per run
        plans = Plans.of(list(plans))
    sub_models = models if whole else [models[pos] for pos in rest]
    prepared_runs = prepare_many(sub, policy, sub_models, plans) if fast else [None] * len(rest)
    if whole and len(setup.first_of_model) == 1 and None not in prepared_runs:
        # the common case: one model setup and every run on the batch path, as one group in order
        rules, price, w = setups[0]
        groups.append(_batch_group(rest, prepared_runs, plans, rules, price, [w] * len(rest), policy, loop))
        return ReplayTable(traces, models, policy, loop, groups)
    # runs priced alike are replayed together: one group per model setup (by identity: hashing the
    # price tables per run would cost more than the grouping saves)
    by_setup: dict[int, tuple[CacheRules, Price | None, list[tuple[int, Prepared, int | None]]]] = {}
    for pos, prepared in zip(rest, prepared_runs, strict=True):
        rules, price, w = setups[pos]
        if prepared is None:
            loop[pos] = _replay_loop(traces[pos], policy, models[pos], None, w, CostModel(rules, price))
        else:
            by_setup.setdefault(id(setups[pos]), (rules, price, []))[2].append((pos, prepared, w))
    for rules, price, runs in by_setup.values():
        positions = [pos for pos, _, _ in runs]
        group = [p for _, p, _ in runs]
        groups.append(
            _batch_group(positions, group, plans, rules, price, [w for *_, w in runs], policy, loop)
        )
    return ReplayTable(traces, models, policy, loop, groups)


def _default_model_refs(traces) -> tuple[weakref.ref, ...]:
    """Weak references to each trace's default model (its ``replay_model`` memo): the batch's memory holds
    no trace, and a model holds its trace."""
    return tuple(weakref.ref(t.derived("replay_model", ReplayModel)) for t in traces)


def _batch_group(positions, runs, plans, rules, price, windows, policy, loop) -> BatchGroup:
    """Runs ``runs`` (at ``positions``) replayed together on the batch path; a run over its window is
    refused by the provider, and the loop decides what follows (its record goes in ``loop``)."""
    batch = replay_batch(runs, rules, price, plans)
    kept = np.ones(len(runs), dtype=bool)
    if windows.count(None) != len(windows):
        unlimited = np.array([w is None for w in windows], dtype=bool)
        w_arr = np.array([0 if w is None else w for w in windows], dtype=np.int64)
        kept = unlimited | (batch.peaks <= w_arr)
        for j in np.flatnonzero(~kept).tolist():
            p, w = runs[j], windows[j]
            loop[positions[j]] = _replay_loop(p.trace, policy, p.model, None, w, CostModel(rules, price))
    return BatchGroup(positions, batch, rules, price, windows, kept)


class _Setup(NamedTuple):
    """What ``replay_table`` needs of a batch under given model flags, before any policy acts (no trace:
    ``batchmemo`` keeps no trace alive)."""

    composite: list[int]  # positions of the traces only the loop replays (not ``Trace.is_simple``)
    first_of_model: list[int]  # position of the first trace of each recorded model
    setups: list[tuple[CacheRules, Price | None, int | None]]  # per trace: its model's (one per model)


def batch_setup(traces: Sequence[Trace], window, pricing) -> _Setup:
    """What depends on the batch and the model flags alone, made once and kept for the batch's next
    setting (``replay_table`` and ``replay_tables`` share it)."""
    return batch_derived(traces, f"setup:{window!r}:{pricing!r}", partial(_batch_setup, window, pricing))


def _batch_setup(window, pricing, traces: Sequence[Trace]) -> _Setup:
    by_model: dict[str | None, tuple[CacheRules, Price | None, int | None]] = {}  # runs share few models
    first: list[int] = []
    for pos, trace in enumerate(traces):
        if trace.model not in by_model:
            rules, price = _rules_and_price(trace.model, pricing)
            w = resolve_window(trace.model) if window == AUTO else window
            by_model[trace.model] = (rules, price, w)
            first.append(pos)
    composite = [pos for pos, t in enumerate(traces) if not t.is_simple]
    return _Setup(composite, first, [by_model[t.model] for t in traces])


def replay_tables(
    traces: Sequence[Trace],
    policies: Sequence[Policy],
    models: Sequence[ReplayModel],
    window: int | str | None = AUTO,
    pricing: str | None = AUTO,
    min_width: float = LANES_MIN_WIDTH,
) -> list[ReplayTable]:
    """``[replay_table(traces, p, models, window, pricing) for p in policies]``, the same tables to every
    metric, with the lanes of all settings advancing together where the lanes take them (a seed-engine
    grid over ``context_token_limit`` x ``keep_recent_tokens``: a sweep's chunk of settings).
    ``min_width``: the fewest lanes a call position on average worth replaying as lanes (0: every run
    the lanes accept, as the conformance checker replays them)."""
    from sim.engine.fast.seed_grid import settings_decline

    traces, models = list(traces), list(models)
    if settings_decline(policies) is not None:
        return [replay_table(traces, p, models, window, pricing) for p in policies]
    setups = batch_setup(traces, window, pricing).setups  # replay_table's for the same batch
    laned, handed = _replay_lanes(traces, policies, models, setups, set(), min_width)
    out = []
    for policy, groups, loop in zip(policies, laned, handed, strict=True):
        taken = set(loop).union(*(g.positions for g in groups))
        rest = [pos for pos in range(len(traces)) if pos not in taken]
        groups = list(groups)
        if rest:  # what the lanes decline takes replay_table's own route
            sub = replay_table([traces[p] for p in rest], policy, [models[p] for p in rest], window, pricing)
            loop.update((rest[p], r) for p, r in sub.loop.items())
            for g in sub.groups:
                positions = [rest[p] for p in g.positions]
                groups.append(
                    g._replace(positions=positions)
                    if isinstance(g, BatchGroup)
                    else dataclasses.replace(g, positions=positions)
                )
        out.append(ReplayTable(traces, models, policy, loop, groups))
    return out


def _replay_unlimited(traces, policy, models, setups, records: dict[int, RunRecord]) -> None:
    """A seed engine without a limit never compacts: its runs are lanes of ``sim.engine.fast.seed_lanes``
    (status
    line and cache as arrays over the runs), those it declines (facts, a turn limit, a trace that is not
    simple) left to the loop. ``records``: position -> record, filled for the runs it replays."""
    from sim.engine.fast.seed_lanes import replay_unlimited, unlimited_declines

    if unlimited_declines(policy) is not None:
        return
    groups: dict[int, tuple[tuple, list[int]]] = {}
    for pos, (t, m, setup) in enumerate(zip(traces, models, setups, strict=True)):
        if pos not in records and lanes_decline(t, m) is None:
            groups.setdefault(id(setup), (setup, []))[1].append(pos)
    for (rules, price, w), positions in groups.values():
        for lo in range(0, len(positions), BATCH):
            chunk = positions[lo : lo + BATCH]
            got = replay_unlimited(
                [traces[p] for p in chunk], policy, [models[p] for p in chunk], [w] * len(chunk), rules, price
            )
            for p, r in zip(chunk, got, strict=True):
                if r is not None:  # None: handed back (over its window), the loop replays it
                    records[p] = r


def lanes_decline(trace: Trace, model: ReplayModel) -> str | None:
    """``sim.engine.fast.seed_grid.trace_declines``, its look at every event made once per trace."""
    from sim.engine.fast.seed_grid import trace_declines

    if type(model) is not ReplayModel or model.max_turns is not None:
        return trace_declines(trace, model)
    return trace.derived("lanes_decline", lambda t: trace_declines(t, model) or "") or None  # "": none


def lanes_accept(traces: Sequence[Trace], models: Sequence[ReplayModel]) -> list[bool]:
    """``[lanes_decline(t, m) is None ...]``, made once per batch where every model is a plain replay
    model (then the answer is the traces' alone): a look per trace costs a one-setting replay more than
    its lanes' arithmetic."""
    if batch_derived(models, "plain_replay_models", _plain_models):
        return batch_derived(traces, "lanes_accept", partial(_traces_accepted, models))
    return [lanes_decline(t, m) is None for t, m in zip(traces, models, strict=True)]


def _ncalls(traces: Sequence[Trace]) -> np.ndarray:
    return np.array([len(t.calls) for t in traces], dtype=np.int64)


def _plain_models(models: Sequence[ReplayModel]) -> bool:
    return all(type(m) is ReplayModel and m.max_turns is None for m in models)


def _traces_accepted(models: Sequence[ReplayModel], traces: Sequence[Trace]) -> list[bool]:
    return [lanes_decline(t, m) is None for t, m in zip(traces, models, strict=True)]


def _replay_lanes(
    traces, policies, models, setups, handled: set[int], min_width: float = LANES_MIN_WIDTH
) -> tuple[list[list], list[dict[int, RunRecord]]]:
    """Seed-engine settings the lanes can replay together (``sim.engine.fast.seed_grid.settings_decline``),
    on the
    runs not yet ``handled`` that the lanes accept: per setting, its
    ``sim.engine.fast.seed_rows.LaneGroup``s, and
    the loop's records of its runs that left the grid (a request over the window). Runs priced alike
    advance together; where they are fewer than ``min_width`` a call position on average, they are left
    to the caller (the loop is faster)."""
    from sim.engine.fast.seed_grid import settings_decline
    from sim.engine.fast.seed_rows import LaneGroup, lane_columns, metric_lists

    S = len(policies)
    groups: list[list] = [[] for _ in range(S)]
    handed: list[dict[int, RunRecord]] = [{} for _ in range(S)]
    if settings_decline(policies) is not None:
        return groups, handed
    by_setup: dict[int, tuple[tuple, list[int]]] = {}
    accepted = lanes_accept(traces, models)
    for pos, (setup, yes) in enumerate(zip(setups, accepted, strict=True)):
        if yes and pos not in handled:
            by_setup.setdefault(id(setup), (setup, []))[1].append(pos)
    step = max(1, LANES // S)
    ncalls = batch_derived(traces, "ncalls", _ncalls)
    for (rules, price, w), positions in by_setup.values():
        for lo in range(0, len(positions), step):
            chunk = positions[lo : lo + step]
            lengths = ncalls[chunk]
            if S * int(lengths.sum()) < min_width * int(lengths.max()):
                continue
            sub, sub_models = [traces[p] for p in chunk], [models[p] for p in chunk]
            ok, cols = lane_columns(sub, policies, sub_models, [w] * len(chunk), rules, price)
            for s, policy in enumerate(policies):
                kept = ok[s]
                for j in np.flatnonzero(~kept).tolist():  # left the grid: the loop decides what follows
                    handed[s][chunk[j]] = _replay_loop(
                        sub[j], policy, sub_models[j], None, w, CostModel(rules, price)
                    )
                lists = metric_lists(cols, s, range(len(chunk)), price is not None)
                groups[s].append(LaneGroup(chunk, rules, price, [w] * len(chunk), kept, lists))
    return groups, handed


def check_sums(trace: Trace, cols: dict[str, list[int]]) -> None:
    """Refuse a run whose column sums could wrap int64 (``sim.util.limits.run_sum_problem``); the batch path
    checks the same bound on its columns (``sim.engine.fast.batch._check_sums``)."""
    rows = len(cols["kind"])
    top = max((max(max(v), -min(v)) for c, v in cols.items() if c != "cost_microusd" and v), default=0)
    if (p := run_sum_problem(top, rows)) is not None:
        raise TraceError(trace.source_file or "<trace>", p, record=trace.trace_id)


def _check_priced(policy: Policy, trace: Trace, price: Price | None) -> None:
    if getattr(policy, "cost_budget_microusd", None) is not None and price is None:
        close = ", ".join(closest_priced(trace.model or "")) or "none"
        raise ConfigError(
            f"trace {trace.trace_id}: cost_budget_microusd needs a price, and model {trace.model!r} has none "
            f"(closest priced: {close}; choose one with --pricing)"
        )


@lru_cache(maxsize=256)
def _rules_and_price(model: str | None, pricing: str | None) -> tuple[CacheRules, Price | None]:
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


def _answer_needs(trace: Trace) -> tuple[str, ...]:
    """Facts the final answer (the last call's action) needs."""
    return trace.events[trace.calls[-1].event_index].needs if trace.calls else ()


def answer_needs_of(trace: Trace) -> int:
    """How many facts the final answer needs (a record's ``answer_needs``)."""
    return len(trace.derived("answer_needs", _answer_needs))


def cost_model(trace: Trace, pricing: str | None) -> CostModel:
    return CostModel(*_rules_and_price(trace.model, pricing))


def _record(
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
) -> RunRecord:
    """``changes``: CHANGE_COLUMNS arrays in the order the changes were made; ``cost``: (rules, price);
    ``compactions``: their table when already grouped; ``ledger``: its totals, ``answer_met`` the
    final answer's needs met and ``recovered`` the facts re-read, when a batch computed them (``facts``:
    the loop's fact state otherwise); ``params``: the policy's, read once a batch; ``primed``: the
    record's cached sums and counts (``records.Primed``); ``cuts``, ``page_reads``, ``final_answered``
    and ``window``: the record's fields of those names."""
    rules, price = cost
    answer = trace.derived("answer_needs", _answer_needs)
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


# ------------------------------------------------------------------------------------------ the loop
class _TurnLimit(Exception):
    """The agent's next step would pass ``model.max_turns``: the run ends there."""


def _replay_loop(
    trace: Trace,
    policy: Policy,
    model: ReplayModel,
    observer: Observer | None,
    window: int | None,
    cost: CostModel,
    children: tuple[RunRecord, ...] = (),
) -> RunRecord:
    a = trace.arrays
    events_ = trace.events
    view_end = a.view_end.tolist()
    residual = a.residual.tolist()
    recorded_input = a.recorded_input.tolist()
    outputs = model.respond_all().tolist()
    ncalls = len(view_end)
    stop = view_end[-1] if ncalls else 0
    tool_calls, elapsed = trace.derived("per_call", per_call)
    # Items are laid out for every event the run will admit; only [0, view.n) is in view. The running
    # total is the prefix sum of original sizes plus ``delta``, the net effect of every change so far;
    # a Fenwick tree of the changes gives any prefix of the view (the part a cache can reuse). Items the
    # agent re-reads (refetch, retrieval) are appended to the conversation: ``extra`` tokens that stay
    # in every later request (policies do not transform them).
    original = a.tokens.tolist()[:stop]
    view = View()
    view.tokens = vt = list(original)
    original_bytes = a.bytes.tolist()[:stop]
    view.nbytes = vb = list(original_bytes)
    view.state = vs = [0] * stop
    prefix = list(accumulate(vt, initial=0))
    fen = Fenwick(stop)
    delta = extra = 0
    prev_view = prev_items = 0  # the previous request's view: what the cache may hold
    state = policy.start(trace)
    view.policy_state = state
    status = RunStatus()
    status.window = window
    settle, settles = policy.settle, policy.settles
    facts = FactState(trace) if trace.derived("has_needs", has_needs) else None
    view.facts = facts
    still_needed = trace.derived("last_need", last_need)
    degraded = False
    summaries: list[tuple[int, tuple[str, ...]]] = []
    rereads: list[tuple[int, int, int, int]] = []  # (recorded call, row kind, event re-read, tokens added)
    cuts: list[tuple[int, int, tuple[tuple[int, int], ...]]] = []  # (call, item, shown byte ranges)
    page_reads: list[tuple[int, int, int]] = []
    cols: dict[str, list[int]] = {c: [] for c in CALL_COLUMNS}
    events: list[tuple[int, int, int, int, int, int]] = []
    warnings: list[tuple[int, str]] = []
    finish, rejections = "completed", 0
    max_steps = model.max_turns
    steps = 0  # the agent's own steps so far (STEP_KINDS rows)
    final_answered = False
    # a conversation of several runs: each run's first call, what settle time made of each item (a run
    # that does not persist compaction opens on those), and each run's opening prompt
    run_starts = set(trace.run_starts[1:]) if trace.runs > 1 else set()
    settled: dict[int, object] = {}
    openings: list[int] = []

    def change(k: int, ch) -> None:
        nonlocal delta
        i, d = ch.index, ch.tokens - vt[ch.index]
        delta += d
        fen.add(i, d)
        if ch.state != ItemState.VERBATIM:  # a verbatim item resized (sent twice) is no compaction
            events.append((k, KIND_OF_STATE[ch.state], i, -d, ch.tokens, len(cols["kind"])))
        vt[i], vb[i], vs[i] = ch.tokens, ch.nbytes, ch.state
        if ch.state in POSITIONAL:
            shown = shown_ranges(ch.state, ch.kept, ch.nbytes)
            cuts.append((k, i, shown))
            if facts is not None:
                facts.shown[i] = shown
        elif facts is not None:
            facts.shown.pop(i, None)

    def admit(k: int, end: int) -> None:
        if settles:
            for i in range(view.n, end):
                view.n, view.total = i + 1, prefix[i + 1] + delta
                ch = settle(trace, state, i, view)
                if ch is not None:
                    change(k, ch)
                    if run_starts:
                        settled[i] = ch
        view.n, view.total = end, prefix[end] + delta

    def restore() -> int:
        """A new run without the durable compaction record: every item in view goes back to what it was
        when it settled (prior runs' raw records, their settle-time bounds kept). Returns the first item
        that changed (-1: none). Not a compaction: the change table does not list it."""
        nonlocal delta
        first = -1
        for i in range(view.n):
            ch = settled.get(i)
            if ch is None:
                tokens, nbytes, st = original[i], original_bytes[i], 0
            else:
                tokens, nbytes, st = ch.tokens, ch.nbytes, int(ch.state)
            if vt[i] == tokens and vb[i] == nbytes and vs[i] == st:
                continue
            d = tokens - vt[i]
            delta += d
            fen.add(i, d)
            vt[i], vb[i], vs[i] = tokens, nbytes, st
            if first < 0:
                first = i
            if facts is not None:
                if ch is not None and ch.state in POSITIONAL:
                    facts.shown[i] = shown_ranges(ch.state, ch.kept, ch.nbytes)
                else:
                    facts.shown.pop(i, None)
        if facts is not None:
            facts.kept = set()  # the summary that held them is gone with the compaction state
        view.total = prefix[view.n] + delta
        return first

    def row(kind, k, inp, out, view_tokens, resid, st, recorded, first, changed, stable) -> None:
        """Append one request's row with its modelled cache split and cost; account it in the status.
        An agent step past ``model.max_turns`` is never made: the run ends (``_TurnLimit``)."""
        nonlocal steps
        if kind in STEP_KINDS:
            if max_steps is not None and steps >= max_steps:
                raise _TurnLimit
            steps += 1
        read, write, uncached, c = cost.step(kind == SUMMARY, elapsed[k], inp, view_tokens, stable, out)
        for col, v in (
            ("kind", kind),
            ("recorded_call", k),
            ("input_tokens", inp),
            ("output_tokens", out),
            ("view_tokens", view_tokens),
            ("residual_tokens", resid),
            ("status_tokens", st),
            ("recorded_input_tokens", recorded),
            ("view_items", view.n),
            ("first_changed", first),
            ("items_changed", changed),
            ("stable_prefix_tokens", stable),
            ("cache_read_tokens", read),
            ("cache_write_tokens", write),
            ("uncached_input_tokens", uncached),
            ("cost_microusd", c),
        ):
            cols[col].append(v)
        status.tokens += inp + out
        if c > 0:
            status.cost_microusd += c

    def apply(k: int, result) -> tuple[int, int]:
        """Apply a decision before request k; a summary call gets its own row. Returns (first, count)."""
        if isinstance(result, Decision):
            changes, summary = result.changes, result.summary
        else:
            changes, summary = result, None
        if isinstance(summary, list):  # several passes: each call metered, the last one's output kept
            for s in summary[:-1]:
                row(SUMMARY, k, s.input_tokens, model.summarize(s.input_tokens, s.output_tokens), 0, 0, 0,
                    -1, -1, 0, 0)  # fmt: skip
            summary = summary[-1] if summary else None
        covered: list[str] = []
        if summary is not None:
            out = model.summarize(summary.input_tokens, summary.output_tokens)
            row(SUMMARY, k, summary.input_tokens, out, 0, 0, 0, -1, -1, 0, 0)
            if facts is not None:  # what the summary covers: the facts its items show, the old summary's
                for ch in sorted(changes, key=lambda c: -c.index):
                    i = ch.index
                    if ch.state == ItemState.SUMMARIZED:
                        covered.extend(f for f in reversed(events_[i].provides) if facts.visible(i, vs[i], f))
                covered.extend(sorted(facts.kept, reverse=True))
        first = -1
        for ch in changes:
            change(k, ch)
            if first < 0 or ch.index < first:
                first = ch.index
        if summary is None and facts is not None and isinstance(result, Decision) and result.forgets_summary:
            facts.kept = set()
        if summary is not None and facts is not None:
            later = {f for f in covered if still_needed.get(f, -1) >= view.n}
            facts.kept = set(model.summary_keeps(list(dict.fromkeys(covered)), later, out, view.n))
            summaries.append((k, tuple(sorted(facts.kept))))
        view.total = prefix[view.n] + delta
        return first, len(changes)

    def stable_prefix(first: int) -> int:
        """Tokens of the request's prefix unchanged since the previous request."""
        if first < 0 or first >= prev_items:
            return prev_view
        return prefix[first] + fen.query(first)

    def reread(k: int, first: int, changed: int) -> tuple[bool, int, int]:
        """Before agent call k: bring back what its action needs. Returns (go on?, first, changed)."""
        nonlocal extra, degraded, prev_view, prev_items
        found = choose_rows(facts, events_[trace.calls[k].event_index].needs, vs, view.n, model)
        if found is None:
            return False, first, changed
        degraded |= found.degraded
        for src, kind, page in found.rows:
            # one more call on the current view, whose result then stays in the conversation
            provides = events_[src].provides
            if kind == PAGE:
                size = facts.shown[src][0][1]
                added, out = page_size(trace, src, page, size, outputs)
            else:
                added, out = reread_size(trace, src, outputs)
            total = view.total + extra
            stable = stable_prefix(first)
            row(kind, k, max(total + residual[k], 0), out, total, residual[k], 0, -1, first, changed, stable)
            prev_view, prev_items, first, changed = total, view.n, -1, 0
            extra += added
            rereads.append((k, kind, src, added))
            if kind == REFETCH:  # the tool ran again: everything it provides is back
                facts.recovered.update(provides)
                facts.missed.difference_update(provides)
            elif kind == RETRIEVE:  # what the retrieval finds (choose_rows noted what it misses)
                facts.recovered.update(f for f in provides if model.retrieves(f))
            else:
                page_reads.append((k, src, page))
                read = facts.pages_read.setdefault(src, set())
                read.add(page)
                nbytes = events_[src].bytes
                facts.recovered.update(
                    f
                    for f in provides
                    if all(p == 0 or p in read for p in pages_of(span_of(trace, src, f), size, nbytes))
                )
        return True, first, changed

    def send(k: int, first: int, changed: int) -> tuple[int, int, int, int] | str | None:
        """Request k's status line and size; over the window the policy may compact and retry (up to its
        ``overflow_retries`` rejections in a row). Returns (request, status tokens, first changed,
        changed), None when the provider refuses, or the finish reason a policy stopped the run with."""
        nonlocal rejections
        st = policy.status_tokens(trace, state, k, status) if policy.reports_status else 0
        request = max(view.total + extra + residual[k] + st, 0)  # a negative residual cannot go below 0
        tries = 0
        while window is not None and request > window:
            rejections += 1
            tries += 1
            if tries > policy.overflow_retries:
                return None
            retry = policy.on_overflow(trace, state, view, k, status) if policy.recovers else None
            if retry is None:
                return None
            if isinstance(retry, Decision) and retry.stop is not None:
                apply(k, retry)  # the framework gave up: what it did (its summaries) still counts
                return retry.stop
            f2, c2 = apply(k, retry)
            if f2 >= 0 and (first < 0 or f2 < first):
                first = f2
            changed += c2
            st = policy.status_tokens(trace, state, k, status) if policy.reports_status else 0
            request = max(view.total + extra + residual[k] + st, 0)
        return request, st, first, changed

    def calls_loop(ncalls: int) -> tuple[str, bool]:
        """Every recorded call in turn: (finish reason, did the final call get its agent turn)."""
        nonlocal prev_view, prev_items, state
        finish, answered = "completed", False
        for k in range(ncalls):
            status.elapsed_s = elapsed[k]
            restored = -1
            if k in run_starts:  # a new run of the conversation: carry the compaction state, or drop it
                persisted = policy.persists_compaction
                if not persisted:
                    restored = restore()
                state = policy.start_run(trace, state, trace.calls[k].run_index, view, persisted)
                view.policy_state = state
            admit(k, view_end[k])
            if run_starts and (k == 0 or k in run_starts):
                openings.append(max(view.total + extra + residual[k], 0))
            first, changed = restored, 0
            if policy.acts_before_call:
                decision = policy.before_call(trace, state, view, k, status)
                f2, changed = apply(k, decision)
                first = f2 if restored < 0 or 0 <= f2 < restored else restored
                if isinstance(decision, Decision) and decision.stop is not None:
                    finish = decision.stop  # the framework's compaction failed: this call is never sent
                    break
            if facts is not None:
                go_on, first, changed = reread(k, first, changed)
                if not go_on:
                    finish = "missing-information"
                    break
            sent = send(k, first, changed)
            if sent is None or isinstance(sent, str):
                finish = sent or "context-overflow"
                break
            request, st, first, changed = sent
            out = model.respond(k)
            total = view.total + extra
            stable = stable_prefix(first)
            row(AGENT, k, request, out, total, residual[k], st, recorded_input[k], first, changed, stable)
            if k == ncalls - 1:
                answered = True
            prev_view, prev_items = total, view.n
            status.turns, status.last_input, status.last_output = k + 1, request, out
            status.tool_calls += tool_calls[k]
            if observer is not None:
                observer(k, view)
            if policy.checks_after_call:
                verdict = policy.after_call(trace, state, view, k, status)
                if verdict is not None:
                    warnings.extend((len(cols["kind"]) - 1, w) for w in verdict.warnings)
                    if verdict.stop is not None:
                        finish = verdict.stop
                        if verdict.grace and k + 1 < ncalls:  # one final answer, tools forbidden
                            g = k + 1
                            status.elapsed_s = elapsed[g]
                            admit(g, view_end[g])
                            first, changed = -1, 0
                            if policy.acts_before_call:
                                first, changed = apply(g, policy.before_call(trace, state, view, g, status))
                            sent = send(g, first, changed)
                            if sent is None or isinstance(sent, str):
                                finish = sent or "context-overflow"
                            else:
                                request, st, first, changed = sent
                                total = view.total + extra
                                out = model.grace(g)
                                row(GRACE, g, request, out, total, residual[g], st, -1, first, changed,
                                    stable_prefix(first))  # fmt: skip
                        break
        return finish, answered

    try:
        finish, final_answered = calls_loop(ncalls)
    except _TurnLimit:
        finish = "agent-turn-limit"

    cols["call"] = list(range(len(cols["kind"])))
    check_sums(trace, cols)
    arrays = {c: np.array(v, dtype=np.int64) for c, v in cols.items()}
    item_state = np.array(vs[: view.n], dtype=np.int8)
    return _record(
        trace,
        policy,
        model,
        arrays,
        item_state,
        change_table(events),
        (cost.rules, cost.price),
        np.array(vt[: view.n], dtype=np.int64),
        finish,
        warnings,
        rejections,
        facts,
        degraded,
        summaries,
        rereads,
        cuts=cuts,
        page_reads=page_reads,
        final_answered=final_answered,
        window=window,
        unpaired=policy.unpaired_requests(state) if policy.splits_pairs else 0,
        opening_prompts=openings,
        children=children,
    )
