"""The per-call replay loop (DESIGN.md "Replay semantics").

Per call: admit the events recorded since the previous call (settle-time transforms apply once, here);
let the policy transform the view, possibly through a metered summary call; price the request
incrementally (prefix sums of the original sizes plus the net effect of every change so far, never a
recount), with the run-status line if the policy appends one; refuse it if it exceeds the model's window
(the policy may compact once and retry); ask the mock model; account usage and let the policy check its
budgets (a grace call with tools forbidden, or a stop).

Two ways to run the same semantics. The per-call loop (``_replay_loop``) is the reference. When nothing
watches and the policy's decisions are known ahead (no pre-call transform, or a ``plan``; no budgets, no
status line, no recovery), requests are prefix sums of settled sizes plus planned changes, computed in a
few steps (``_replay_vectorised``); a run that hits the window is handed to the loop. The conformance
checker holds the two paths to identical records for every registered policy.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable
from itertools import accumulate

import numpy as np

from sim.cache import CostModel, cache_rules
from sim.errors import ConfigError
from sim.information import VISIBLE, FactState, has_needs, issuer_of, last_need
from sim.information import providers as fact_providers
from sim.ledger import totals as ledger_totals
from sim.model import ReplayModel
from sim.models import resolve_window
from sim.policies.base import Decision, Policy, RunStatus, View
from sim.pricing import Price, closest_priced, find_price, price_named
from sim.records import (
    AGENT,
    CALL_COLUMNS,
    GRACE,
    KIND_OF_STATE,
    REFETCH,
    RETRIEVE,
    SUMMARY,
    RunRecord,
    change_table,
    compaction_table,
)
from sim.traceio import trace_hash
from sim.types import ItemState, Trace

Observer = Callable[[int, View], None]
AUTO = "auto"


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
    model = model or ReplayModel(trace)
    if window == AUTO:
        window = resolve_window(trace.model)
    cost = cost_model(trace, pricing)
    if getattr(policy, "cost_budget_microusd", None) is not None and cost.price is None:
        close = ", ".join(closest_priced(trace.model or "")) or "none"
        raise ConfigError(
            f"trace {trace.trace_id}: cost_budget_microusd needs a price, and model {trace.model!r} has none "
            f"(closest priced: {close}; choose one with --pricing)"
        )
    fast = (
        observer is None
        and (policy.plans or not policy.acts_before_call)
        and not (policy.recovers or policy.checks_after_call or policy.reports_status)
    )
    if fast:
        # None: some action would miss a needed fact, so the mock model reacts (the loop's work)
        record = _replay_vectorised(trace, policy, model, cost)
        if record is not None and (window is None or not (record.calls["input_tokens"] > window).any()):
            return record
        cost = cost_model(trace, pricing)  # fresh cache state for the loop
    return _replay_loop(trace, policy, model, observer, window, cost)  # type: ignore[arg-type]


def guess_family(model: str | None) -> str:
    """Cache family of an unpriced model, from its name."""
    m = (model or "").lower()
    for key, family in (("claude", "anthropic"), ("gemini", "gemini"), ("gpt", "openai")):
        if key in m:
            return family
    return "none"


def cost_model(trace: Trace, pricing: str | None) -> CostModel:
    price: Price | None
    if pricing == AUTO:
        price = find_price(trace.model)
    elif pricing is None:
        price = None
    else:
        price = price_named(pricing)
    family = price.family if price is not None else guess_family(trace.model)
    return CostModel(cache_rules(family), price)


def _record(
    trace,
    policy,
    model,
    cols,
    item_state,
    events,
    cost,
    item_tokens,
    finish="completed",
    warnings=(),
    rejections=0,
    facts=None,
    degraded=False,
    summaries=(),
    rereads=(),
) -> RunRecord:
    answer = trace.events[trace.calls[-1].event_index].needs if trace.calls else ()
    if facts is None:  # no fact can have left the view (see replay): every need is met
        met, kept, recovered = len(answer), (), ()
    else:
        n = len(item_state)
        states = item_state.tolist()
        met = sum(1 for f in answer if facts.where(f, states, n) != "lost")
        kept, recovered = tuple(sorted(facts.kept)), tuple(sorted(facts.recovered))
    record = RunRecord(
        trace_id=trace.trace_id,
        trace_hash=trace.derived("trace_hash", trace_hash),
        policy=policy.name,
        params=policy.params(),
        model=model.name,
        finish_reason=finish,
        calls=cols,
        item_state=item_state,
        compactions=_compactions(events),
        warnings=tuple(warnings),
        rejections=rejections,
        pricing=None if cost.price is None else cost.price.model,
        cache_family=cost.rules.family,
        changes=change_table(events),
        item_tokens=np.asarray(item_tokens, dtype=np.int64),
        summary_kept=kept,
        summaries=tuple(summaries),
        rereads=tuple(rereads),
        recovered=recovered,
        degraded=degraded,
        answer_needs=len(answer),
        answer_needs_met=met,
    )
    object.__setattr__(record, "ledger", ledger_totals(trace, record))  # derived once, from the record
    return record


class _Fenwick:
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


def _account(cols: dict, cost: CostModel, elapsed: np.ndarray) -> None:
    """Cache and cost columns for the rows of a fast-path replay (the loop accounts as it goes)."""
    read, write, uncached, c = cost.step_all(
        elapsed,
        cols["input_tokens"],
        cols["view_tokens"],
        cols["stable_prefix_tokens"],
        cols["output_tokens"],
    )
    cols["cache_read_tokens"], cols["cache_write_tokens"] = read, write
    cols["uncached_input_tokens"], cols["cost_microusd"] = uncached, c


def _compactions(events: list[tuple[int, int, int, int, int]]) -> dict[str, np.ndarray]:
    """Group change events (recorded call, kind, index, reclaimed, after) into one row per (call, kind)."""
    groups: dict[tuple[int, int], list[int]] = {}
    for call, kind, index, reclaimed, _ in events:
        g = groups.get((call, kind))
        if g is None:
            groups[(call, kind)] = [1, reclaimed, index]
        else:
            g[0] += 1
            g[1] += reclaimed
            g[2] = min(g[2], index)
    return compaction_table([(c, k, *v) for (c, k), v in sorted(groups.items())])


# ------------------------------------------------------------------------------------------ fast path
def _settled_sizes(trace: Trace, policy: Policy, state, stop: int):
    """Sizes and states of events [0, stop) after settle-time transforms, and the changes made."""
    tokens = trace.arrays.tokens.tolist()[:stop]
    states = [0] * stop
    changes = policy.settle_all(trace)
    if changes is None:  # the policy wants to see the view as each event enters
        view = View()
        view.tokens, view.state, view.nbytes = tokens, states, trace.arrays.bytes.tolist()[:stop]
        total, changes = 0, []
        for i in range(stop):
            view.n, view.total = i + 1, total + tokens[i]
            ch = policy.settle(trace, state, i, view)
            if ch is not None:
                changes.append(ch)
                tokens[i], states[i] = ch.tokens, ch.state
            total += tokens[i]
        return tokens, states, changes
    changes = [ch for ch in changes if ch.index < stop]
    for ch in changes:
        tokens[ch.index], states[ch.index] = ch.tokens, ch.state
    return tokens, states, changes


def _replay_vectorised(trace: Trace, policy: Policy, model: ReplayModel, cost: CostModel) -> RunRecord | None:
    a = trace.arrays
    ncalls = len(a.view_end)
    stop = int(a.view_end[-1]) if ncalls else 0
    firsts, nchanged = a.no_first, a.no_changes
    events: list[tuple[int, int, int, int]] = []
    tokens = states = None
    if policy.settles:
        tokens, states, settled = _settled_sizes(trace, policy, policy.start(trace), stop)
        if settled:
            original = a.tokens
            view_end = a.view_end.tolist()
            for ch in settled:  # a settled event belongs to the first call whose view admits it
                i = ch.index
                events.append(
                    (
                        bisect_right(view_end, i),
                        KIND_OF_STATE[ch.state],
                        i,
                        int(original[i]) - ch.tokens,
                        ch.tokens,
                    )
                )
        prefix = np.zeros(stop + 1, dtype=np.int64)
        np.cumsum(tokens, out=prefix[1:])
        view_tokens = prefix[a.view_end]
    else:  # nothing settles: the recorded views' sizes, computed once per trace
        prefix, view_tokens = a.prefix, a.recorded_view
    stable = None
    p = policy.plan(trace) if policy.acts_before_call else None
    if (p is not None and p.index or policy.spills) and trace.derived("has_needs", has_needs):
        if not _needs_met(trace, p, states):
            return None
    if p is not None:
        if p.index:
            if tokens is None:
                tokens, states = a.tokens.tolist()[:stop], [0] * stop
            view_tokens, firsts, nchanged, stable = _apply_plan(
                p, tokens, states, view_tokens, ncalls, events, prefix, a.view_end
            )
    if stable is None:  # nothing changed before any call: each request reuses the whole previous view
        stable = np.concatenate(([0], view_tokens[:-1])) if ncalls else view_tokens
    item_state = np.zeros(stop, dtype=np.int8) if states is None else np.array(states, dtype=np.int8)
    cols = {
        "call": a.call_index,
        "kind": a.no_changes,  # all agent rows (code 0)
        "recorded_call": a.call_index,
        "input_tokens": view_tokens + a.residual,
        "output_tokens": model.respond_all(),
        "view_tokens": view_tokens,
        "residual_tokens": a.residual,
        "status_tokens": a.no_changes,
        "recorded_input_tokens": a.recorded_input,
        "view_items": a.view_end,
        "first_changed": firsts,
        "items_changed": nchanged,
        "stable_prefix_tokens": stable,
    }
    _account(cols, cost, trace.derived("elapsed", _elapsed_array))
    item_tokens = a.tokens[:stop] if tokens is None else tokens
    return _record(trace, policy, model, cols, item_state, events, cost, item_tokens)


def _needs_met(trace: Trace, p, settled: list[int] | None) -> bool:
    """Whether every action's needed facts stay in view under settle-time states and a plan: an item
    counts from admission until the call its plan entry hides it (bounded items stay visible)."""
    hidden_at: dict[int, int] = {}
    if p is not None:
        for k, i, s in zip(p.call, p.index, p.state, strict=True):
            if s not in VISIBLE:
                hidden_at[i] = k
    if settled is not None:
        for i, s in enumerate(settled):
            if s not in VISIBLE:
                hidden_at[i] = -1
    providers = trace.derived("fact_providers", fact_providers)
    for c in trace.calls:
        for f in trace.events[c.event_index].needs:
            if not any(
                j < c.view_end and hidden_at.get(j, c.index + 1) > c.index for j in providers.get(f, ())
            ):
                return False
    return True


def _apply_plan(p, tokens, states, view_tokens, ncalls, events, prefix, view_end):
    """Fold a plan into per-call columns (``tokens``/``states`` updated in place). A call that changes
    items from position q on reuses only the prefix before q: its size is the settled prefix sum plus
    the changes earlier calls made below q. When the plan's positions only grow (a moving boundary, as
    in masking) those are all earlier changes; otherwise a Fenwick tree sums them."""
    delta = [0] * ncalls  # net size change made before each call
    firsts = [-1] * ncalls
    nchanged = [0] * ncalls
    seams: list[tuple[int, int]] = []  # (call, stable prefix tokens) for calls that change old items
    index = p.index
    ascending = all(a < b for a, b in zip(index, index[1:], strict=False))
    fen = None if ascending else _Fenwick(len(tokens))
    changed_so_far = 0
    kinds = KIND_OF_STATE
    for k, i, t, s in zip(p.call, index, p.tokens, p.state, strict=True):
        if firsts[k] < 0:
            firsts[k] = i  # entries ascend by index within a call: the first is the lowest
            if k > 0 and i < view_end[k - 1]:
                below = changed_so_far if fen is None else fen.query(i)
                seams.append((k, int(prefix[i]) + below))
        d = t - tokens[i]
        delta[k] += d
        changed_so_far += d
        if fen is not None:
            fen.add(i, d)
        tokens[i], states[i] = t, s
        events.append((k, kinds[s], i, -d, t))
        nchanged[k] += 1
    view_tokens = view_tokens + np.fromiter(accumulate(delta), dtype=np.int64, count=ncalls)
    stable = np.concatenate(([0], view_tokens[:-1]))
    for k, v in seams:
        stable[k] = v
    return view_tokens, np.array(firsts, dtype=np.int64), np.array(nchanged, dtype=np.int64), stable


# ------------------------------------------------------------------------------------------ the loop
def _elapsed_array(trace: Trace) -> np.ndarray:
    a = np.array(trace.derived("per_call", _per_call)[1], dtype=np.float64)
    a.setflags(write=False)
    return a


def _per_call(trace: Trace) -> tuple[list[int], list[float]]:
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


def _replay_loop(
    trace: Trace,
    policy: Policy,
    model: ReplayModel,
    observer: Observer | None,
    window: int | None,
    cost: CostModel,
) -> RunRecord:
    a = trace.arrays
    events_ = trace.events
    view_end = a.view_end.tolist()
    residual = a.residual.tolist()
    recorded_input = a.recorded_input.tolist()
    outputs = model.respond_all().tolist()
    ncalls = len(view_end)
    stop = view_end[-1] if ncalls else 0
    tool_calls, elapsed = trace.derived("per_call", _per_call)
    call_of_event = {c.event_index: c.index for c in trace.calls}
    issuers = trace.derived("issuers", issuer_of)
    # Items are laid out for every event the run will admit; only [0, view.n) is in view. The running
    # total is the prefix sum of original sizes plus ``delta``, the net effect of every change so far;
    # a Fenwick tree of the changes gives any prefix of the view (the part a cache can reuse). Items the
    # agent re-reads (refetch, retrieval) are appended to the conversation: ``extra`` tokens that stay
    # in every later request (policies do not transform them).
    original = a.tokens.tolist()[:stop]
    view = View()
    view.tokens = vt = list(original)
    view.nbytes = vb = a.bytes.tolist()[:stop]
    view.state = vs = [0] * stop
    prefix = list(accumulate(vt, initial=0))
    fen = _Fenwick(stop)
    delta = extra = 0
    prev_view = prev_items = 0  # the previous request's view: what the cache may hold
    state = policy.start(trace)
    status = RunStatus()
    settle, settles = policy.settle, policy.settles
    facts = FactState(trace) if trace.derived("has_needs", has_needs) else None
    view.facts = facts
    still_needed = trace.derived("last_need", last_need)
    degraded = False
    summaries: list[tuple[int, tuple[str, ...]]] = []
    rereads: list[tuple[int, int, int, int]] = []  # (recorded call, row kind, event re-read, tokens added)
    cols: dict[str, list[int]] = {c: [] for c in CALL_COLUMNS}
    events: list[tuple[int, int, int, int, int]] = []
    warnings: list[tuple[int, str]] = []
    finish, rejections = "completed", 0

    def change(k: int, ch) -> None:
        nonlocal delta
        i, d = ch.index, ch.tokens - vt[ch.index]
        delta += d
        fen.add(i, d)
        events.append((k, KIND_OF_STATE[ch.state], i, -d, ch.tokens))
        vt[i], vb[i], vs[i] = ch.tokens, ch.nbytes, ch.state

    def admit(k: int, end: int) -> None:
        if settles:
            for i in range(view.n, end):
                view.n, view.total = i + 1, prefix[i + 1] + delta
                ch = settle(trace, state, i, view)
                if ch is not None:
                    change(k, ch)
        view.n, view.total = end, prefix[end] + delta

    def row(kind, k, inp, out, view_tokens, resid, st, recorded, first, changed, stable) -> None:
        """Append one request's row with its modelled cache split and cost; account it in the status."""
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
        covered: list[str] = []
        if summary is not None:
            out = model.summarize(summary.input_tokens, summary.output_tokens)
            row(SUMMARY, k, summary.input_tokens, out, 0, 0, 0, -1, -1, 0, 0)
            if facts is not None:  # what the summary covers: visible items' facts and the old summary's
                for ch in sorted(changes, key=lambda c: -c.index):
                    if ch.state == ItemState.SUMMARIZED and vs[ch.index] in VISIBLE:
                        covered.extend(reversed(events_[ch.index].provides))
                covered.extend(sorted(facts.kept, reverse=True))
        first = -1
        for ch in changes:
            change(k, ch)
            if first < 0 or ch.index < first:
                first = ch.index
        if summary is not None and facts is not None:
            later = {f for f in covered if still_needed.get(f, -1) >= view.n}
            facts.kept = set(model.summary_keeps(list(dict.fromkeys(covered)), later, out))
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
        sources: dict[int, int] = {}  # providing event -> row kind (refetch or retrieve)
        for f in events_[trace.calls[k].event_index].needs:
            where = facts.where(f, vs, view.n)
            if where == "spilled":
                sources.setdefault(facts.source(f, view.n), RETRIEVE)
            elif where == "lost":
                if model.on_missing == "fail":
                    return False, first, changed
                src = facts.source(f, view.n)
                if model.on_missing == "degrade" or events_[src].kind != "tool_result":
                    degraded = True  # nothing to re-run (a user's words, a summary's input): go on without
                    continue
                sources.setdefault(src, REFETCH)
        for src, kind in sorted(sources.items()):
            # the agent re-issues the call that produced src (or reads its spill handle): one more call
            # on the current view, whose result then stays in the conversation
            issuer = issuers.get(src, src)
            out = outputs[call_of_event[issuer]] if issuer in call_of_event else 0
            total = view.total + extra
            stable = stable_prefix(first)
            row(kind, k, total + residual[k], out, total, residual[k], 0, -1, first, changed, stable)
            prev_view, prev_items, first, changed = total, view.n, -1, 0
            added = original[issuer] + original[src] if issuer != src else original[src]
            extra += added
            rereads.append((k, kind, src, added))
            facts.recovered.update(events_[src].provides)
        return True, first, changed

    for k in range(ncalls):
        status.elapsed_s = elapsed[k]
        admit(k, view_end[k])
        first, changed = -1, 0
        if policy.acts_before_call:
            first, changed = apply(k, policy.before_call(trace, state, view, k, status))
        if facts is not None:
            go_on, first, changed = reread(k, first, changed)
            if not go_on:
                finish = "missing-information"
                break
        st = policy.status_tokens(trace, state, k, status) if policy.reports_status else 0
        request = view.total + extra + residual[k] + st
        if window is not None and request > window:
            rejections += 1
            retry = policy.on_overflow(trace, state, view, k, status) if policy.recovers else None
            if retry is not None:
                f2, c2 = apply(k, retry)
                if f2 >= 0 and (first < 0 or f2 < first):
                    first = f2
                changed += c2
                request = view.total + extra + residual[k] + st
            if retry is None or request > window:
                finish = "context-overflow"
                break
        out = model.respond(k)
        total = view.total + extra
        stable = stable_prefix(first)
        row(AGENT, k, request, out, total, residual[k], st, recorded_input[k], first, changed, stable)
        prev_view, prev_items = total, view.n
        status.turns, status.last_input = k + 1, request
        status.tool_calls += tool_calls[k]
        if observer is not None:
            observer(k, view)
        if policy.checks_after_call:
            verdict = policy.after_call(trace, state, view, k, status)
            if verdict is not None:
                warnings.extend((len(cols["kind"]) - 1, w) for w in verdict.warnings)
                if verdict.stop is not None and k + 1 < ncalls:
                    finish = verdict.stop
                    if verdict.grace:  # one final answer, tools forbidden, from what the view holds
                        g = k + 1
                        admit(g, view_end[g])
                        st = policy.status_tokens(trace, state, g, status) if policy.reports_status else 0
                        total = view.total + extra
                        request = total + residual[g] + st
                        if window is not None and request > window:
                            rejections += 1
                            finish = "context-overflow"
                        else:
                            out = model.grace(g)
                            row(GRACE, g, request, out, total, residual[g], st, -1, -1, 0, prev_view)
                    break

    cols["call"] = list(range(len(cols["kind"])))
    arrays = {c: np.array(v, dtype=np.int64) for c, v in cols.items()}
    item_state = np.array(vs[: view.n], dtype=np.int8)
    return _record(
        trace,
        policy,
        model,
        arrays,
        item_state,
        events,
        cost,
        vt[: view.n],
        finish,
        warnings,
        rejections,
        facts,
        degraded,
        summaries,
        rereads,
    )
