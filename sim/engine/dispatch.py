"""Which way each run is replayed: the one place that decides.

The reference is the per-call loop (``sim.engine.loop``); the fast paths beside it give the same records
(``sim.checks.conformance`` holds them to it) where they apply:

- the **batch path** (``sim.engine.fast.batch``): when nothing watches and the policy's decisions are
  known ahead (no pre-call transform, or a ``plan``; no budgets, no status line, no recovery:
  ``batch_path``), a batch of runs is replayed at once as columns laid end to end; a run that would
  exceed its window, or whose model fails on a missing fact, is handed to the loop;
- the seed engine's **lanes** (``sim.engine.fast.seed_lanes``, ``sim.engine.fast.seed_rows``): settings
  that differ only in ``context_token_limit`` / ``keep_recent_tokens`` advance together over runs the
  lanes accept (``lanes_decline``), as a sweep's chunk (``replay_tables``), a run's batch
  (``replay_table``), or the whole grid of a sizing (``grid_route`` and ``grid_figures_of``);
  a seed engine without a limit never compacts, and its runs are lanes too;
- everything else, and every trace of several runs, children or a transform's moves, takes the loop.

Callers ask here (``replay``, ``replay_many``, ``replay_table``, ``replay_tables``, ``grid_route``,
``lane_setting_key``) and never pick a fast path themselves.
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Sequence
from functools import partial
from typing import NamedTuple

import numpy as np

from sim.core.records import RunRecord
from sim.core.types import Trace
from sim.cost.cache import CacheRules, CostModel
from sim.cost.models import resolve_window
from sim.cost.pricing import Price, closest_priced
from sim.engine.common import AUTO, Observer, assemble_record, rules_and_price
from sim.engine.fast.batch import Batch, Prepared, prepare_many, replay_batch, run_columns
from sim.engine.lane_rules import LANES
from sim.engine.loop import after_children, replay_loop
from sim.engine.model import ReplayModel
from sim.policies.base import Plans, Policy
from sim.util.batchmemo import BatchKey, Keyed, batch_derived
from sim.util.errors import ConfigError

BATCH = 256  # runs per replay_many call for streaming callers: amortises per-batch work, bounds memory
# Lanes pay a call position's array operations whatever their number, the loop each call: below this
# many lanes a position on average (lanes' calls / the longest run's), the loop is faster (measured:
# about even at 4 with 8-32 SWE-like runs; a run alone is 3-4x faster on the loop)
LANES_MIN_WIDTH = 4


def _check_priced(policy: Policy, trace: Trace, price: Price | None) -> None:
    """Refuse a cost budget on a run that has no price: the budget could never be checked."""
    if getattr(policy, "cost_budget_microusd", None) is not None and price is None:
        close = ", ".join(closest_priced(trace.model or "")) or "none"
        raise ConfigError(
            f"trace {trace.trace_id}: cost_budget_microusd needs a price, and model {trace.model!r} has none "
            f"(closest priced: {close}; choose one with --pricing)"
        )


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
    return loop_one(trace, policy, model, observer, window, pricing)


def loop_one(
    trace: Trace, policy: Policy, model: ReplayModel, observer: Observer | None, window, pricing
) -> RunRecord:
    """One run through the per-call loop (the reference), set up as ``replay`` sets it up: its price and
    window resolved, its children replayed first (``sim.engine.loop.after_children``)."""
    rules, price = rules_and_price(trace.model, pricing)
    _check_priced(policy, trace, price)
    w = resolve_window(trace.model) if window == AUTO else window
    children = _replay_children(trace, policy, model, window, pricing)
    run = after_children(trace, children)
    model, trace = (model, trace) if run is trace else (model.like(run), run)
    return replay_loop(trace, policy, model, observer, w, CostModel(rules, price), children)  # type: ignore[arg-type]


def _replay_children(
    trace: Trace, policy: Policy, model: ReplayModel, window: int | str | None, pricing: str | None
) -> tuple[RunRecord, ...]:
    """The records of a trace's children, each replayed under the same policy (its own state) and the
    parent's mock model behaviour; a child's children recurse (nesting is bounded at load)."""
    if not trace.children:
        return ()
    kids = [c.trace for c in trace.children]
    return tuple(replay_many(kids, policy, [model.like(k) for k in kids], window, pricing))


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
    unpaired: np.ndarray | None = None  # per run: requests that split a pair (``Plans.unpaired``)


class ReplayTable:
    """The replays of ``replay_table``: records of the runs the per-call loop replayed, columns of those the
    batch path did (``BatchGroup``), metric columns of those the lanes did
    (``sim.engine.fast.seed_rows.LaneGroup``). Metrics and result rows read the columns
    (``sim.metrics.compute.table_metric_columns``); ``records()`` builds every run's ``RunRecord`` only for a
    caller that needs them."""

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
                        records[pos] = replay_loop(trace, policy, model, None, w, CostModel(g.rules, g.price))
                continue
            columns = run_columns(g.batch)
            kept = g.kept.tolist()
            for k, (pos, p, w, c, ok) in enumerate(
                zip(g.positions, g.batch.runs, g.windows, columns, kept, strict=True)
            ):
                if not ok:
                    continue
                records[pos] = assemble_record(
                    p.trace, policy, p.model, c.calls, c.item_state, c.changes, (g.rules, g.price),
                    c.item_tokens, recovered=p.recovered, degraded=p.degraded, rereads=p.rereads,
                    answer_met=p.answer_met, compactions=c.compactions, ledger=c.ledger, params=params,
                    primed=c.primed, cuts=c.cuts, window=w, needed_lost=p.needed_lost,
                    unpaired=0 if g.unpaired is None else int(g.unpaired[k]),
                )  # fmt: skip
        return records  # type: ignore[return-value]


def batch_path(policy: Policy) -> bool:
    """Whether the batch path may replay runs of ``policy`` (its decisions known ahead; no budgets, no
    status line); ``prepare_many`` may still hand single runs to the loop. A policy that recovers from
    an overflow may, when it plans: a run the provider would refuse is handed to the loop
    (``_batch_group``), which makes the recovery; the others never call ``on_overflow``."""
    return (policy.plans or not policy.acts_before_call) and not (
        (policy.recovers and not policy.plans) or policy.checks_after_call or policy.reports_status
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
        loop[pos] = loop_one(traces[pos], policy, models[pos], None, window, pricing)
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
            loop[pos] = replay_loop(traces[pos], policy, models[pos], None, w, CostModel(rules, price))
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
            loop[positions[j]] = replay_loop(p.trace, policy, p.model, None, w, CostModel(rules, price))
    unpaired = None
    if plans is not None and plans.unpaired is not None:
        unpaired = plans.unpaired[[p.pos for p in runs]]
    return BatchGroup(positions, batch, rules, price, windows, kept, unpaired)


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
            rules, price = rules_and_price(trace.model, pricing)
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
    (status line and cache as arrays over the runs), those it declines (facts, a turn limit, a trace that is
    not simple) left to the loop. ``records``: position -> record, filled for the runs it replays."""
    from sim.engine.fast.seed_unlimited import replay_unlimited, unlimited_declines

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
    """Seed-engine settings the lanes can replay together (``sim.engine.fast.seed_grid.settings_decline``), on
    the runs not yet ``handled`` that the lanes accept: per setting, its
    ``sim.engine.fast.seed_rows.LaneGroup``s, and the loop's records of its runs that left the grid (a request
    over the window). Runs priced alike advance together; where they are fewer than ``min_width`` a call
    position on average, they are left to the caller (the loop is faster)."""
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
                    handed[s][chunk[j]] = replay_loop(
                        sub[j], policy, sub_models[j], None, w, CostModel(rules, price)
                    )
                lists = metric_lists(cols, s, range(len(chunk)), price is not None)
                groups[s].append(LaneGroup(chunk, rules, price, [w] * len(chunk), kept, lists))
    return groups, handed


# ------------------------------------------------------------------------------------ a sizing's grid
class GridRoute(NamedTuple):
    """Where the runs of a grid of seed-engine settings (a sizing) are replayed."""

    batches: list[tuple[CacheRules, Price | None, list[int]]]  # runs the grid path takes, priced alike,
    # at most ``batch`` a batch: (rules, price, positions), the same batches for any number of workers
    loop: list[int]  # positions of the runs every setting replays on its own (``replay_many``)


def grid_route(
    traces: Sequence[Trace],
    policies: Sequence[Policy],
    models: Sequence[ReplayModel],
    pricing: str | None,
    batch: int,
    grid: bool = True,
) -> GridRoute:
    """Which runs of ``traces`` the grid path replays under all of ``policies`` at once (``grid_figures_of``)
    and which each setting replays through ``replay_many``: the grid takes seed-engine settings that
    differ only in the grid knobs (``sim.engine.fast.seed_grid.settings_decline``) and the traces it
    accepts (``trace_declines``); ``grid=False`` sends every run to ``replay_many`` (the reference)."""
    from sim.engine.fast.seed_grid import settings_decline, trace_declines

    grid = grid and settings_decline(policies) is None
    loop: list[int] = []
    by_setup: dict[int, tuple[tuple, list[int]]] = {}  # runs priced alike go on the grid together
    for pos, (t, model) in enumerate(zip(traces, models, strict=True)):
        if not grid or trace_declines(t, model) is not None:
            loop.append(pos)
            continue
        setup = rules_and_price(t.model, pricing)
        by_setup.setdefault(id(setup), (setup, []))[1].append(pos)
    batches = [
        (rules, price, positions[lo : lo + batch])
        for (rules, price), positions in by_setup.values()
        for lo in range(0, len(positions), batch)
    ]
    return GridRoute(batches, loop)


def grid_figures_of(
    traces: Sequence[Trace],
    policies: Sequence[Policy],
    models: Sequence[ReplayModel],
    window: int | str | None,
    rules: CacheRules,
    price: Price | None,
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """One batch of ``grid_route`` replayed on the grid path: per (setting, run), whether it stayed on the
    grid (False: it left it, and ``replay_many`` replays it) and its figures' sums
    (``sim.engine.fast.seed_lanes.grid_figures``); ``window`` as ``replay`` takes it."""
    from sim.engine.fast.seed_lanes import grid_figures

    windows = [resolve_window(t.model) if window == AUTO else window for t in traces]
    return grid_figures(traces, policies, models, windows, rules, price)
