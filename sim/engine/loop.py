"""The reference replay: one run, recorded call by recorded call.

This loop is what a replay means. Every fast path beside it (``sim.engine.fast``: the batch path, the
seed engine's lanes and grid) is held to its records by the conformance checker
(``sim.checks.conformance``): where they differ, the loop is right. The semantics it implements are
written out in ``docs/replay-semantics.md``; ``sim.engine.dispatch`` decides which runs take it.

Per call: admit the events recorded since the previous call (settle-time transforms apply once, here);
let the policy transform the view, possibly through a metered summary call; bring back what the agent's
next action needs and the view no longer shows (a refetch, a retrieval, a page); price the request
incrementally (prefix sums of the original sizes plus the net effect of every change so far, never a
recount), with the run-status line if the policy appends one; refuse it if it exceeds the model's window
(the policy may compact and retry, up to its ``overflow_retries`` rejections in a row); ask the mock model;
account usage and let the policy check its budgets (a grace call with tools forbidden, or a stop). A
policy's ``Decision`` may also stop the run with a finish reason of its own (a framework's failure, e.g.
``condensation-insufficient``).

A trace of several runs of one conversation (``Trace.runs``): at each run's first call the policy's
compaction carries into the run (``Policy.persists_compaction``) or every item goes back to what it was
when it settled (the seed engine without its durable record), and the policy's ``start_run`` gives the
state the run goes on with; each run's opening prompt is recorded.

The loop's state lives on one ``_Run`` whose methods are the steps above; hot figures are bound to
locals inside each method, as the per-call work is the slow path for many policies.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from itertools import accumulate

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
)
from sim.core.types import ItemState, Moved, Trace
from sim.cost.cache import CostModel
from sim.engine.common import Fenwick, Observer, assemble_record, check_sums, per_call
from sim.engine.model import ReplayModel
from sim.information.state import (
    POSITIONAL,
    FactState,
    choose_rows,
    has_needs,
    inside,
    last_need,
    merged,
    needs_of,
    page_size,
    pages_of,
    ranged_reads,
    refetchable,
    reread_size,
    shown_ranges,
    span_of,
)
from sim.policies.base import Decision, Policy, RunStatus, View
from sim.trace.codec import trace_hash


def replay_loop(
    trace: Trace,
    policy: Policy,
    model: ReplayModel,
    observer: Observer | None,
    window: int | None,
    cost: CostModel,
    children: tuple[RunRecord, ...] = (),
) -> RunRecord:
    """``trace`` replayed under ``policy`` call by call: the reference record.

    ``window``: the provider's limit in tokens (None: no limit), already resolved; ``cost``: the cache
    and cost model of the run's calls; ``observer(call, view)`` sees each agent request's view just
    before it is sent; ``children``: the records of the trace's children, already replayed (the trace
    as they left it: ``after_children``)."""
    run = _Run(trace, policy, model, observer, window, cost)
    try:
        finish = run.calls()
    except _TurnLimit:
        finish, run.final_answered = "agent-turn-limit", False
    return run.record(finish, children)


def after_children(trace: Trace, kids: Sequence[RunRecord]) -> Trace:
    """The parent as its children left it: a child that failed sent no report, so the tool result
    answering its call provides no facts (declared lost: ``Moved`` of kind ``child-failed``). The run
    keeps the recorded trace's identity (its hash). Without a failed child: ``trace`` itself."""
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


_KINDS = [KIND_OF_STATE.get(s) for s in ItemState]  # KIND_OF_STATE by state code, read by index


class _TurnLimit(Exception):
    """The agent's next step would pass ``model.max_turns``: the run ends there."""


class _Run:
    """One run's replay in progress.

    Items are laid out for every event the run will admit; only [0, view.n) is in view. The running
    total is the prefix sum of original sizes plus ``delta``, the net effect of every change so far; a
    Fenwick tree of the changes gives any prefix of the view (the part a cache can reuse). Items the
    agent re-reads (refetch, retrieval, page) are appended to the conversation: ``extra`` tokens that
    stay in every later request (policies do not transform them)."""

    __slots__ = (
        "trace",
        "policy",
        "model",
        "observer",
        "window",
        "cost",
        "trace_events",
        "view_end",
        "residual",
        "recorded_input",
        "outputs",
        "ncalls",
        "tool_calls",
        "elapsed",
        "original",
        "view",
        "original_bytes",
        "prefix",
        "fen",
        "delta",
        "prev_view",
        "state",
        "status",
        "settle",
        "settles",
        "facts",
        "still_needed",
        "degraded",
        "summaries",
        "rereads",
        "cuts",
        "page_reads",
        "cols",
        "changes",
        "warnings",
        "rejections",
        "max_steps",
        "steps",
        "final_answered",
        "run_starts",
        "settled",
        "openings",
        "vt",
        "vb",
        "vs",
        "extra",
        "prev_items",
    )

    def __init__(
        self,
        trace: Trace,
        policy: Policy,
        model: ReplayModel,
        observer: Observer | None,
        window: int | None,
        cost: CostModel,
    ) -> None:
        self.trace, self.policy, self.model = trace, policy, model
        self.observer, self.window, self.cost = observer, window, cost
        a = trace.arrays
        self.trace_events = trace.events
        self.view_end = a.view_end.tolist()
        self.residual = a.residual.tolist()
        self.recorded_input = a.recorded_input.tolist()
        self.outputs = model.respond_all().tolist()
        self.ncalls = len(self.view_end)
        stop = self.view_end[-1] if self.ncalls else 0
        self.tool_calls, self.elapsed = trace.derived("per_call", per_call)
        self.original = a.tokens.tolist()[:stop]
        self.view = view = View()
        view.tokens = self.vt = list(self.original)
        self.original_bytes = a.bytes.tolist()[:stop]
        view.nbytes = self.vb = list(self.original_bytes)
        view.state = self.vs = [0] * stop
        self.prefix = list(accumulate(self.vt, initial=0))
        self.fen = Fenwick(stop)
        self.delta = self.extra = 0
        self.prev_view = self.prev_items = 0  # the previous request's view: what the cache may hold
        self.state = policy.start(trace)
        view.policy_state = self.state
        self.status = RunStatus()
        self.status.window = window
        self.settle, self.settles = policy.settle, policy.settles
        self.facts = FactState(trace) if trace.derived("has_needs", has_needs) else None
        view.facts = self.facts
        self.still_needed = trace.derived("last_need", last_need)
        self.degraded = False
        self.summaries: list[tuple[int, tuple[str, ...]]] = []
        self.rereads: list[tuple[int, int, int, int]] = []  # (recorded call, row kind, event, tokens added)
        self.cuts: list[tuple[int, int, tuple[tuple[int, int], ...]]] = []  # (call, item, shown ranges)
        self.page_reads: list[tuple[int, int, int]] = []
        self.cols: dict[str, list[int]] = {c: [] for c in CALL_COLUMNS}
        self.changes: list[tuple[int, int, int, int, int, int]] = []  # rows of the change table
        self.warnings: list[tuple[int, str]] = []
        self.rejections = 0
        self.max_steps = model.max_turns
        self.steps = 0  # the agent's own steps so far (STEP_KINDS rows)
        self.final_answered = False
        # a conversation of several runs: each run's first call, what settle time made of each item (a
        # run that does not persist compaction opens on those), and each run's opening prompt
        self.run_starts = set(trace.run_starts[1:]) if trace.runs > 1 else set()
        self.settled: dict[int, object] = {}
        self.openings: list[int] = []

    # ------------------------------------------------------------------------------ calls in turn
    def calls(self) -> str:
        """Every recorded call in turn; returns the run's finish reason."""
        for k in range(self.ncalls):
            finish = self.call(k)
            if finish is not None:
                return finish
        return "completed"

    def call(self, k: int) -> str | None:
        """Recorded call k: a new run of the conversation opens, the events since the last call come in,
        the policy acts, what the action needs comes back, the request is sent and answered, and the
        policy checks its budgets. Returns the finish reason if the run ends here (None: it goes on)."""
        policy, view, status = self.policy, self.view, self.status
        status.elapsed_s = self.elapsed[k]
        restored = -1
        if k in self.run_starts:  # a new run of the conversation: carry the compaction state, or drop it
            restored = self.open_run(k)
        self.admit(k, self.view_end[k])
        if self.run_starts and (k == 0 or k in self.run_starts):
            self.openings.append(max(view.total + self.extra + self.residual[k], 0))
        first, changed = restored, 0
        if policy.acts_before_call:
            decision = policy.before_call(self.trace, self.state, view, k, status)
            f2, changed = self.apply(k, decision)
            first = f2 if restored < 0 or 0 <= f2 < restored else restored
            if isinstance(decision, Decision) and decision.stop is not None:
                return decision.stop  # the framework's compaction failed: this call is never sent
        if self.facts is not None:  # what the action needs and the view lost (choose_rows notes it)
            go_on, first, changed = self.reread(k, first, changed)
            if not go_on:
                return "missing-information"
        sent = self.send(k, first, changed)
        if sent is None or isinstance(sent, str):
            return sent or "context-overflow"
        request, st, first, changed = sent
        out = self.model.respond(k)
        total = view.total + self.extra
        stable = self.stable_prefix(first)
        self.row(AGENT, k, request, out, total, self.residual[k], st, self.recorded_input[k], first, changed,
                 stable)  # fmt: skip
        if k == self.ncalls - 1:
            self.final_answered = True
        self.prev_view, self.prev_items = total, view.n
        status.turns, status.last_input, status.last_output = k + 1, request, out
        status.tool_calls += self.tool_calls[k]
        if self.observer is not None:
            self.observer(k, view)
        return self.after_call(k) if policy.checks_after_call else None

    def after_call(self, k: int) -> str | None:
        """The policy's budgets after call k: warnings, a stop, and with a stop perhaps one grace call."""
        verdict = self.policy.after_call(self.trace, self.state, self.view, k, self.status)
        if verdict is None:
            return None
        self.warnings.extend((len(self.cols["kind"]) - 1, w) for w in verdict.warnings)
        if verdict.stop is None:
            return None
        if verdict.grace and k + 1 < self.ncalls:  # one final answer, tools forbidden
            return self.grace(k + 1, verdict.stop)
        return verdict.stop

    def grace(self, g: int, finish: str) -> str:
        """The grace call at recorded call g after a budget stop (``finish``): its events come in, the
        policy acts, the request is sent; returns the run's finish reason."""
        policy, view, status = self.policy, self.view, self.status
        status.elapsed_s = self.elapsed[g]
        self.admit(g, self.view_end[g])
        first, changed = -1, 0
        if policy.acts_before_call:
            first, changed = self.apply(g, policy.before_call(self.trace, self.state, view, g, status))
        facts = self.facts
        if facts is not None:  # the answer from what the view holds: its needs the run saw, lost from it
            answer = needs_of(self.trace, self.trace.calls[-1].event_index)
            facts.note_needs([f for f in answer if facts.source(f, view.n) is not None], self.vs, view.n)
        sent = self.send(g, first, changed)
        if sent is None or isinstance(sent, str):
            return sent or "context-overflow"
        request, st, first, changed = sent
        total = view.total + self.extra
        out = self.model.grace(g)
        self.row(GRACE, g, request, out, total, self.residual[g], st, -1, first, changed,
                 self.stable_prefix(first))  # fmt: skip
        return finish

    # --------------------------------------------------------------------------- the view changes
    def open_run(self, k: int) -> int:
        """Call k opens a new run of the conversation: the policy's compaction carries into it, or every
        item goes back to how it settled (``restore``). Returns the first item restored (-1: none)."""
        policy, view = self.policy, self.view
        persisted = policy.persists_compaction
        restored = -1 if persisted else self.restore()
        self.state = policy.start_run(self.trace, self.state, self.trace.calls[k].run_index, view, persisted)
        view.policy_state = self.state
        return restored

    def change(self, k: int, ch) -> None:
        """Apply one change to the view before request k; a compaction gets a row of the change table.
        ``changes_before`` restates it for a decision's many changes (held to it by a test,
        tests/test_policy_tables.py)."""
        vt, facts = self.vt, self.facts
        i, d = ch.index, ch.tokens - vt[ch.index]
        if d:  # a change that keeps the size (a per-call copy cleared again) moves no prefix sum
            self.delta += d
            self.fen.add(i, d)
        if ch.state != ItemState.VERBATIM:  # a verbatim item resized (sent twice) is no compaction
            self.changes.append((k, KIND_OF_STATE[ch.state], i, -d, ch.tokens, len(self.cols["kind"])))
        vt[i], self.vb[i], self.vs[i] = ch.tokens, ch.nbytes, ch.state
        if ch.state in POSITIONAL:
            shown = shown_ranges(ch.state, ch.kept, ch.nbytes)
            self.cuts.append((k, i, shown))
            if facts is not None:
                facts.shown[i] = shown
        elif facts is not None:
            facts.shown.pop(i, None)

    def changes_before(self, k: int, changes) -> int:
        """``change(k, ch)`` for each of ``changes`` in order, with the loop's lookups made once (a policy
        that re-issues its whole per-call copy every call sends many); returns the smallest index changed
        (-1: none). A cut or a pagination goes through ``change`` itself. Held to ``change`` one by one
        by tests/test_policy_tables.py."""
        vt, vb, vs, fen, rows, facts = self.vt, self.vb, self.vs, self.fen, self.changes, self.facts
        row = len(self.cols["kind"])  # the request's row, written after its changes
        shown = None if facts is None else facts.shown
        first, delta, verbatim, kinds = -1, self.delta, ItemState.VERBATIM, _KINDS
        for ch in changes:
            i, state, tokens, nbytes, _, _ = ch  # a Change
            if state in POSITIONAL:
                self.delta = delta
                self.change(k, ch)
                delta = self.delta
            else:
                d = tokens - vt[i]
                if d:  # (as ``change``)
                    delta += d
                    fen.add(i, d)
                if state != verbatim:
                    rows.append((k, kinds[state], i, -d, tokens, row))
                vt[i], vb[i], vs[i] = tokens, nbytes, state
                if shown is not None:
                    shown.pop(i, None)
            if first < 0 or i < first:
                first = i
        self.delta = delta
        return first

    def admit(self, k: int, end: int) -> None:
        """The events recorded up to item ``end`` come into view before request k, each settled once."""
        view, prefix = self.view, self.prefix
        if self.settles:
            trace, state, settle, settled = self.trace, self.state, self.settle, self.settled
            run_starts = self.run_starts
            for i in range(view.n, end):
                view.n, view.total = i + 1, prefix[i + 1] + self.delta
                ch = settle(trace, state, i, view)
                if ch is not None:
                    self.change(k, ch)
                    if run_starts:
                        settled[i] = ch
        view.n, view.total = end, prefix[end] + self.delta

    def restore(self) -> int:
        """A new run without the durable compaction record: every item in view goes back to what it was
        when it settled (prior runs' raw records, their settle-time bounds kept). Returns the first item
        that changed (-1: none). Not a compaction: the change table does not list it."""
        view, vt, vb, vs, facts, fen = self.view, self.vt, self.vb, self.vs, self.facts, self.fen
        settled, original, original_bytes = self.settled, self.original, self.original_bytes
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
            self.delta += d
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
        view.total = self.prefix[view.n] + self.delta
        return first

    def apply(self, k: int, result) -> tuple[int, int]:
        """Apply a decision before request k; a summary call gets its own row. Returns (first, count)."""
        if isinstance(result, Decision):
            changes, summary = result.changes, result.summary
        else:
            changes, summary = result, None
        model, facts = self.model, self.facts
        if isinstance(summary, list):  # several passes: each call metered, the last one's output kept
            for s in summary[:-1]:
                out = model.summarize(s.input_tokens, s.output_tokens)
                self.row(SUMMARY, k, s.input_tokens, out, 0, 0, 0, -1, -1, 0, 0)
            summary = summary[-1] if summary else None
        covered: list[str] = []
        if summary is not None:
            out = model.summarize(summary.input_tokens, summary.output_tokens)
            self.row(SUMMARY, k, summary.input_tokens, out, 0, 0, 0, -1, -1, 0, 0)
            if facts is not None:  # what the summary covers: the facts its items show, the old summary's
                covered = self.covered(changes, summary.sees)
        first = self.changes_before(k, changes)
        if summary is None and facts is not None and isinstance(result, Decision) and result.forgets_summary:
            facts.kept = set()
        if summary is not None and facts is not None:
            n = self.view.n
            later = {f for f in covered if self.still_needed.get(f, -1) >= n}
            facts.kept = set(model.summary_keeps(list(dict.fromkeys(covered)), later, out, n))
            self.summaries.append((k, tuple(sorted(facts.kept))))
        self.view.total = self.prefix[self.view.n] + self.delta
        return first, len(changes)

    def covered(self, changes, sees=None) -> list[str]:
        """The facts a summary made by ``changes`` covers: those its summarized items show (before the
        changes apply) — or, when the policy says what its summarizer's input holds of each item
        (``SummaryCall.sees``: byte ranges of the recorded content; a result in a bound also as the view
        shows it), those inside it — then those the old summary kept."""
        facts, vs, trace_events, trace = self.facts, self.vs, self.trace_events, self.trace
        covered: list[str] = []
        for ch in sorted(changes, key=lambda c: -c.index):
            i = ch.index
            if ch.state != ItemState.SUMMARIZED:
                continue
            provides = reversed(trace_events[i].provides)
            if sees is None:
                covered.extend(f for f in provides if facts.visible(i, vs[i], f))
                continue
            held = sees.get(i, ())
            bounded = vs[i] in POSITIONAL
            covered.extend(
                f
                for f in provides
                if inside(span_of(trace, i, f), held) and (not bounded or facts.visible(i, vs[i], f))
            )
        covered.extend(sorted(facts.kept, reverse=True))
        return covered

    # ---------------------------------------------------------------------------------- requests
    def stable_prefix(self, first: int) -> int:
        """Tokens of the request's prefix unchanged since the previous request."""
        if first < 0 or first >= self.prev_items:
            return self.prev_view
        return self.prefix[first] + self.fen.query(first)

    def reread(self, k: int, first: int, changed: int) -> tuple[bool, int, int]:
        """Before agent call k: bring back what its action needs (``choose_rows``). Returns (go on?,
        first, changed). Each re-read is a call on the current view whose result then stays in the
        conversation. A refetch re-runs the tool call, and its result passes the policy's bound again
        (``Policy.reread_bound``; None: whole): it adds the issuer's tokens plus the bounded copy's, and
        brings back only the facts whose byte spans lie inside the copy's shown ranges. A needed fact
        outside them is read by ranged reads (``ranged_reads``: each one more refetch row, its slice's
        tokens plus ``model.reread_margin_tokens``, the refetch's output tokens; a slice longer than the
        bound shows takes as many reads as it needs); the fact is back when its span is covered."""
        trace, model, facts, view = self.trace, self.model, self.facts, self.view
        trace_events = self.trace_events
        needs = needs_of(trace, trace.calls[k].event_index)
        found = choose_rows(facts, needs, self.vs, view.n, model)
        if found is None:
            return False, first, changed
        self.degraded |= found.degraded
        for src, kind, page in found.rows:
            provides = trace_events[src].provides
            if kind == PAGE:
                size = facts.shown[src][0][1]
                added, out = page_size(trace, src, page, size, self.outputs)
            else:
                bound = self.policy.reread_bound(trace, src) if kind == REFETCH else None
                if bound is not None:
                    first, changed = self.bounded_refetch(k, src, bound, needs, first, changed)
                    continue
                added, out = reread_size(trace, src, self.outputs)
            first, changed = self.reread_row(k, kind, src, added, out, first, changed)
            if kind == REFETCH:  # the tool ran again: everything it provides is back
                facts.recovered.update(provides)
                facts.missed.difference_update(provides)
            elif kind == RETRIEVE:  # what the retrieval finds (choose_rows noted what it misses)
                facts.recovered.update(f for f in provides if model.retrieves(f))
            else:
                self.page_reads.append((k, src, page))
                read = facts.pages_read.setdefault(src, set())
                read.add(page)
                nbytes = trace_events[src].bytes
                facts.recovered.update(
                    f
                    for f in provides
                    if all(p == 0 or p in read for p in pages_of(span_of(trace, src, f), size, nbytes))
                )
        return True, first, changed

    def reread_row(self, k: int, kind: int, src: int, added: int, out: int, first: int, changed: int):
        """One re-read call before agent call k on the current view; its ``added`` tokens then stay in
        the conversation. Returns (first, changed) for the next request: nothing changed since."""
        view, resid = self.view, self.residual[k]
        total = view.total + self.extra
        stable = self.stable_prefix(first)
        self.row(kind, k, max(total + resid, 0), out, total, resid, 0, -1, first, changed, stable)
        self.prev_view, self.prev_items = total, view.n
        self.extra += added
        self.rereads.append((k, kind, src, added))
        return -1, 0

    def bounded_refetch(self, k: int, src: int, bound, needs, first: int, changed: int) -> tuple[int, int]:
        """A refetch of ``src`` whose result the policy bounds (``bound``), then the ranged reads of the
        needed facts the bounded copy does not show. Returns (first, changed)."""
        trace, facts, n = self.trace, self.facts, self.view.n
        provides = self.trace_events[src].provides
        added, out = reread_size(trace, src, self.outputs, bound.tokens)
        first, changed = self.reread_row(k, REFETCH, src, added, out, first, changed)
        shown = shown_ranges(bound.state, bound.kept, bound.nbytes)
        back = [f for f in provides if inside(span_of(trace, src, f), shown)]
        facts.recovered.update(back)
        facts.missed.difference_update(back)
        wanted = [  # this action's needs the refetch was for, still missing, that a re-run gives back
            f
            for f in needs
            if f in provides
            and facts.source(f, n) == src
            and facts.where(f, self.vs, n) in ("lost", "spilled", "not_retrieved")
            and refetchable(trace, src, f, n)
        ]
        if not wanted:
            return first, changed
        spans = [span_of(trace, src, f) for f in wanted]
        reads = ranged_reads(trace, src, spans, shown, self.model.reread_margin_tokens)
        for _, tokens in reads:
            first, changed = self.reread_row(k, REFETCH, src, tokens, out, first, changed)
        seen = merged((*shown, *(r for r, _ in reads)))
        back = [f for f in provides if inside(span_of(trace, src, f), seen)]
        facts.recovered.update(back)
        facts.missed.difference_update(back)
        self.degraded |= any(f not in facts.recovered for f in wanted)  # the bound shows no byte
        return first, changed

    def send(self, k: int, first: int, changed: int) -> tuple[int, int, int, int] | str | None:
        """Request k's status line and size; over the window the policy may compact and retry (up to its
        ``overflow_retries`` rejections in a row). Returns (request, status tokens, first changed,
        changed), None when the provider refuses, or the finish reason a policy stopped the run with."""
        trace, policy, view, status, window = self.trace, self.policy, self.view, self.status, self.window
        st = policy.status_tokens(trace, self.state, k, status) if policy.reports_status else 0
        request = max(view.total + self.extra + self.residual[k] + st, 0)  # a negative residual: 0 at least
        tries = 0
        while window is not None and request > window:
            self.rejections += 1
            tries += 1
            if tries > policy.overflow_retries:
                return None
            retry = policy.on_overflow(trace, self.state, view, k, status) if policy.recovers else None
            if retry is None:
                return None
            if isinstance(retry, Decision) and retry.stop is not None:
                self.apply(k, retry)  # the framework gave up: what it did (its summaries) still counts
                return retry.stop
            f2, c2 = self.apply(k, retry)
            if f2 >= 0 and (first < 0 or f2 < first):
                first = f2
            changed += c2
            st = policy.status_tokens(trace, self.state, k, status) if policy.reports_status else 0
            request = max(view.total + self.extra + self.residual[k] + st, 0)
        return request, st, first, changed

    def row(self, kind, k, inp, out, view_tokens, resid, st, recorded, first, changed, stable) -> None:
        """Append one request's row with its modelled cache split and cost; account it in the status.
        An agent step past ``model.max_turns`` is never made: the run ends (``_TurnLimit``)."""
        if kind in STEP_KINDS:
            if self.max_steps is not None and self.steps >= self.max_steps:
                raise _TurnLimit
            self.steps += 1
        read, write, uncached, c = self.cost.step(
            kind == SUMMARY, self.elapsed[k], inp, view_tokens, stable, out
        )
        cols = self.cols
        for col, v in (
            ("kind", kind),
            ("recorded_call", k),
            ("input_tokens", inp),
            ("output_tokens", out),
            ("view_tokens", view_tokens),
            ("residual_tokens", resid),
            ("status_tokens", st),
            ("recorded_input_tokens", recorded),
            ("view_items", self.view.n),
            ("first_changed", first),
            ("items_changed", changed),
            ("stable_prefix_tokens", stable),
            ("cache_read_tokens", read),
            ("cache_write_tokens", write),
            ("uncached_input_tokens", uncached),
            ("cost_microusd", c),
        ):
            cols[col].append(v)
        status = self.status
        status.tokens += inp + out
        if c > 0:
            status.cost_microusd += c

    # ------------------------------------------------------------------------------------ record
    def record(self, finish: str, children: tuple[RunRecord, ...]) -> RunRecord:
        """The run's ``RunRecord``: its rows as int64 columns, the view's items as the run left them."""
        trace, policy, cols, n = self.trace, self.policy, self.cols, self.view.n
        cols["call"] = list(range(len(cols["kind"])))
        check_sums(trace, cols)
        arrays = {c: np.array(v, dtype=np.int64) for c, v in cols.items()}
        item_state = np.array(self.vs[:n], dtype=np.int8)
        return assemble_record(
            trace,
            policy,
            self.model,
            arrays,
            item_state,
            change_table(self.changes),
            (self.cost.rules, self.cost.price),
            np.array(self.vt[:n], dtype=np.int64),
            finish,
            self.warnings,
            self.rejections,
            self.facts,
            self.degraded,
            self.summaries,
            self.rereads,
            cuts=self.cuts,
            page_reads=self.page_reads,
            final_answered=self.final_answered,
            window=self.window,
            unpaired=policy.unpaired_requests(self.state) if policy.splits_pairs else 0,
            opening_prompts=self.openings,
            children=children,
        )
