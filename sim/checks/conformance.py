"""The conformance checker every registered policy must pass (after Gymnasium's env checker).

Checks, on each given trace: the engine's fast path and its per-call loop give identical records (every
table, final item, reaction and ledger total) and identical metrics (those the batch path reads from its
columns without a record included), deterministic (two replays give identical records), input
untouched (the trace's serialised content is unchanged), tool call/result pairs never split (never one
dropped while the other is sent as it was; a policy declaring ``splits_pairs`` must count exactly the
requests that split one), sizes sane (non-negative items, running total equal to the item
sum), and the policy's own declared bound respected in every request.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import numpy as np

from sim.core.records import RunRecord
from sim.core.types import ItemState, Trace
from sim.engine.dispatch import replay, replay_table
from sim.engine.model import ReplayModel
from sim.metrics.compute import compute_metric_columns, table_metric_columns
from sim.policies.base import Policy, View
from sim.trace.codec import trace_hash

AS_SENT = {ItemState.VERBATIM, ItemState.BOUNDED}


def check_policy(policy: Policy, traces: Iterable[Trace], **model: Any) -> list[str]:
    """Every violation found, as readable lines; empty when the policy conforms. ``model``: the mock
    model's knobs (``sim.engine.model.ReplayModel``), the defaults when none are given."""
    out: list[str] = []
    for t in traces:
        before = trace_hash(t)
        problems: list[str] = []
        pair_of = _pairs(t)
        split_requests = [0]

        def observe(
            k: int, view: View, t=t, problems=problems, pair_of=pair_of, split=split_requests
        ) -> None:
            if len(problems) > 20:
                return
            items = view.tokens[: view.n]
            if any(x < 0 for x in items):
                problems.append(f"call {k}: negative item size")
            if sum(items) != view.total:
                problems.append(f"call {k}: view total {view.total} != item sum {sum(items)}")
            splits = 0
            for a, b in pair_of:
                # split: one side gone while the other is sent as it was (a placeholder partner is plain
                # text standing for the pair, e.g. Inspect's "[Tool call: ... removed from history]")
                pair = (view.state[a], view.state[b]) if b < view.n else ()
                if ItemState.DROPPED in pair and any(s in AS_SENT for s in pair):
                    splits += 1
                    if not policy.splits_pairs:
                        problems.append(f"call {k}: tool call {a} and its result {b} split")
            split[0] += splits > 0
            problems.extend(f"call {k}: {v}" for v in policy.bound_violations(t, view))

        m = ReplayModel(t, **model) if model else None
        r1 = replay(t, policy, m, observer=observe)
        if r1.unpaired_tool_messages != split_requests[0]:  # a policy that may split counts it exactly
            problems.append(
                f"unpaired_tool_messages {r1.unpaired_tool_messages} != {split_requests[0]} split requests"
            )
        r2 = replay(t, policy, m)
        # r1 ran the per-call loop (an observer forces it); r2 the engine's fast path where the policy
        # has one: they must agree exactly, and two runs of either must too
        problems.extend(
            f"{d} differs between the per-call loop and the fast path" for d in record_diff(r1, r2)
        )
        r3 = replay(t, policy, m)
        if record_diff(r2, r3):
            problems.append("not deterministic: two replays differ")
        # metrics read from the batch's columns (no record built) must be the loop record's
        table = replay_table([t], policy, None if m is None else [m])
        cols, want = table_metric_columns(table), compute_metric_columns([r1])
        problems.extend(
            f"metric {k} differs between the per-call loop and the batch's columns"
            for k in want
            if json.dumps(cols[k]) != json.dumps(want[k])
        )
        if trace_hash(t) != before:
            problems.append("the trace was modified")
        out.extend(f"{policy.name} on {t.trace_id}: {p}" for p in problems)
    return out


def check_grid(
    policies: list[Policy], traces: Iterable[Trace], window: int | None, pricing: str | None = "auto"
) -> list[str]:
    """Every way the grid path departs from the per-call loop on these settings and traces, as readable lines
    (empty: none): ``sim.engine.fast.seed_grid``'s record of each lane that stayed on the grid against the
    loop's (every table and field), and ``sim.engine.fast.seed_lanes``' figures of every lane against the
    loop's metrics. A trace or grid the grid path declines is replayed by the loop only: nothing to
    compare."""
    from sim.cost.cache import CostModel
    from sim.engine.common import rules_and_price
    from sim.engine.fast.seed_grid import record, replay_grid, settings_decline, trace_declines
    from sim.engine.fast.seed_lanes import grid_figures
    from sim.engine.loop import replay_loop
    from sim.metrics.compute import compute_metrics_many

    out: list[str] = []
    if settings_decline(policies) is not None:
        return out
    for t in traces:
        m = ReplayModel(t)
        if trace_declines(t, m) is not None:
            continue
        rules, price = rules_and_price(t.model, pricing)
        refs = [replay_loop(t, p, m, None, window, CostModel(rules, price)) for p in policies]
        res = replay_grid(t, policies, m, window, rules, price, records=True)
        ok, figures = grid_figures([t], policies, [m], [window], rules, price)
        if sorted(res.lanes.tolist()) != sorted(int(s) for s in ok[:, 0].nonzero()[0]):
            out.append(f"{t.trace_id}: the two grid paths keep different lanes on the grid")
        for s, (p, ref, mt) in enumerate(zip(policies, refs, compute_metrics_many(refs), strict=True)):
            label = f"{p.name} {p.context_token_limit}/{p.keep_recent_tokens} on {t.trace_id}"
            run = res.runs[s] if res.runs is not None else None
            if run is not None:
                out.extend(
                    f"{label}: grid record {d} differs"
                    for d in record_diff(ref, record(t, p, m, run, rules, price, window))
                )
            if ok[s, 0]:
                for key, metric in GRID_FIGURES:
                    want, got = mt[metric], int(figures[key][s, 0])
                    if want is not None and got != want:  # (an unpriced run's cost is None: unknown)
                        out.append(f"{label}: grid figure {key} {got} != the loop's {metric} {want}")
    return out


def check_lanes(
    policies: list[Policy],
    traces: Iterable[Trace],
    window: int | str | None = "auto",
    pricing: str | None = "auto",
) -> list[str]:
    """Every way the lanes' result rows depart from the per-call loop's, as readable lines (empty: none): each
    setting's rows (every metric and column) from ``sim.engine.dispatch.replay_tables`` (the settings' lanes
    together, a sweep's chunk) and from the setting alone (one setting: the lanes are the runs, as
    ``replay_table`` replays a batch) against ``sim.results.tables.result_rows`` of the loop's records. Runs
    the lanes decline or hand back take the loop on both sides."""
    from sim.engine.dispatch import loop_one, replay_tables
    from sim.results.tables import result_rows, table_rows

    traces = list(traces)
    models = [ReplayModel(t) for t in traces]
    together = replay_tables(traces, policies, models, window, pricing, min_width=0)
    out: list[str] = []
    for p, table in zip(policies, together, strict=True):
        label = f"{p.name} {p.context_token_limit}/{p.keep_recent_tokens}"
        loop = [loop_one(t, p, m, None, window, pricing) for t, m in zip(traces, models, strict=True)]
        want = result_rows(loop, "conformance")
        alone = replay_tables(traces, [p], models, window, pricing, min_width=0)[0]
        for route, got in (("with the grid's settings", table), ("alone", alone)):
            for t, a, b in zip(traces, table_rows(got, "conformance"), want, strict=True):
                out.extend(
                    f"{label} on {t.trace_id}: lanes {route}: column {k} {a.get(k)!r} != the loop's {v!r}"
                    for k, v in b.items()
                    if json.dumps(a.get(k)) != json.dumps(v)
                )
                if list(a) != list(b):
                    out.append(f"{label} on {t.trace_id}: lanes {route}: the row's columns differ")
    return out


GRID_FIGURES = (
    ("cost_microusd", "cost_microusd"),
    ("input_tokens", "cumulative_input_tokens"),
    ("output_tokens", "cumulative_output_tokens"),
    ("peak", "peak_context_tokens"),
    ("compactions", "compactions"),
)

TABLES = ("calls", "changes", "compactions")
FIELDS = (
    "finish_reason",
    "rejections",
    "pricing",
    "cache_family",
    "warnings",
    "summary_kept",
    "summaries",
    "recovered",
    "rereads",
    "degraded",
    "answer_needs",
    "answer_needs_met",
    "unpaired_tool_messages",
    "ledger",
    "summarizer",
    "cuts",
    "page_reads",
    "missed",
    "needed_lost",
    "final_answered",
    "window",
    "runs",
    "opening_prompts",
)


def record_diff(a: RunRecord, b: RunRecord) -> list[str]:
    """What differs between two records of the same run: table columns, final items, scalar fields."""
    out = [
        f"{table} column {col}"
        for table in TABLES
        for col in getattr(a, table)
        if not np.array_equal(getattr(a, table)[col], getattr(b, table)[col])
    ]
    if not np.array_equal(a.item_state, b.item_state):
        out.append("final item states")
    if not np.array_equal(a.item_tokens, b.item_tokens):
        out.append("final item sizes")
    out.extend(f"field {f}" for f in FIELDS if getattr(a, f) != getattr(b, f))
    return out


def _pairs(t: Trace) -> list[tuple[int, int]]:
    """(assistant event, tool_result event) index pairs joined by tool call id."""
    issuer: dict[str, int] = {}
    pairs = []
    for e in t.events:
        for cid in e.tool_call_ids:
            issuer[cid] = e.index
        if e.tool_call_id is not None and e.tool_call_id in issuer:
            pairs.append((issuer[e.tool_call_id], e.index))
    return pairs
