"""Where each fact is during a replay: in view, kept by a summary, behind a spill handle or a page, or lost.

A fact is **available** to a request when an item that provides it is in view verbatim, or in view
cut (a head/tail, an envelope) or paginated with the fact's byte span inside the bytes the view shows,
or a summary kept it, or the agent re-read it (refetch, retrieval, a page read) earlier in the run. It
is **recoverable** when a provider is paginated with the fact in a later page (a page read brings it
back, exactly) or spilled with its handle in view (a retrieval call, which may miss: ``not_retrieved``).
Otherwise it is **lost** from view (masked, pruned, dropped, cut away, or covered by a summary that did
not keep it). A fact without a recorded span is the whole event: any cut loses it.

**Needs are on live facts only** (``live_needs``, the one place the rule is stated): an importer records
every fact an action or the final answer referenced, and the information model decides which of them
are needed. A need of event i on fact f counts only when no event before i superseded f (its first
superseding event, ``superseded_at``, is >= i): an outdated file read or an error a later run
of the same command resolved is history, not something the action must see again (re-running the tool
would not even give it back). Every reader of needs in the engine, the metrics and the analysis goes
through ``live_needs`` (``last_need``, ``fact_info``'s first need, ``need_pairs``, the final answer's
needs); ``has_needs`` alone reads the recorded needs: whether the trace carries the information model.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

import numpy as np

from sim.core.records import PAGE, REFETCH, RETRIEVE
from sim.core.types import FACT_KINDS, ItemState, Trace

VISIBLE = (ItemState.VERBATIM, ItemState.BOUNDED)
_VISIBLE = frozenset(int(s) for s in VISIBLE)  # plain ints: enum member lookups are slow in hot loops
_SPILLED = int(ItemState.SPILLED)
_VERBATIM = int(ItemState.VERBATIM)
_POSITIONAL = frozenset((int(ItemState.BOUNDED), int(ItemState.PAGINATED)))
_PAGINATED = int(ItemState.PAGINATED)
POSITIONAL = (ItemState.BOUNDED, ItemState.PAGINATED)  # states that show part of an item's bytes

Ranges = tuple[tuple[int, int], ...]


def providers(trace: Trace) -> dict[str, list[int]]:
    """Fact -> indices of the events that provide it, ascending."""
    out: dict[str, list[int]] = {}
    for e in trace.events:
        for f in e.provides:
            out.setdefault(f, []).append(e.index)
    return out


def live_needs(trace: Trace) -> tuple[tuple[str, ...], ...]:
    """Per event: the facts it needs that no earlier event superseded (module docstring), in the order
    recorded. Memoise with ``trace.derived("live_needs", live_needs)``."""
    stale_at = trace.derived("superseded_at", superseded_at)
    if not stale_at:
        return tuple(e.needs for e in trace.events)
    return tuple(
        tuple(f for f in e.needs if stale_at.get(f, e.index) >= e.index) if e.needs else ()
        for e in trace.events
    )


def needs_of(trace: Trace, i: int) -> tuple[str, ...]:
    """The live needs of event i (``live_needs``)."""
    return trace.derived("live_needs", live_needs)[i]


def last_need(trace: Trace) -> dict[str, int]:
    """Fact -> index of the last event that needs it (so: still needed after position p iff >= p)."""
    out: dict[str, int] = {}
    for i, needs in enumerate(trace.derived("live_needs", live_needs)):
        for f in needs:
            out[f] = i
    return out


def issuer_of(trace: Trace) -> dict[int, int]:
    """tool_result index -> the assistant event that issued its call (by tool call id)."""
    by_id: dict[str, int] = {}
    out: dict[int, int] = {}
    for e in trace.events:
        for cid in e.tool_call_ids:
            by_id[cid] = e.index
        if e.tool_call_id is not None and e.tool_call_id in by_id:
            out[e.index] = by_id[e.tool_call_id]
    return out


def refetchable(trace: Trace, src: int | None, fact: str, n: int) -> bool:
    """Can re-running the tool call of event src give the fact back, for a request holding items
    [0, n): src is a tool result and no event before n superseded the fact (re-running would return
    the newer value)."""
    if src is None or trace.events[src].kind != "tool_result":
        return False
    return trace.derived("fact_info", fact_info).stale_at.get(fact, n) >= n


def has_needs(trace: Trace) -> bool:
    """Does the trace record needs (the information model is on for it), live or not: the gate of the
    fact tracking, which the column reader fills without the events; which needs count is
    ``live_needs``'s."""
    return any(e.needs for e in trace.events)


def runs_have_needs(traces: Sequence[Trace]) -> list[bool]:
    """``has_needs`` of each trace of a batch, kept per batch (``sim.util.batchmemo``): the engine's batch
    path and the planners that decline runs with needs ask it of the same batch."""
    from sim.util.batchmemo import batch_derived

    return batch_derived(traces, "has_needs", _each_has_needs)


def _each_has_needs(traces: Sequence[Trace]) -> list[bool]:
    return [t.derived("has_needs", has_needs) for t in traces]


def fact_spans(trace: Trace) -> dict[tuple[int, str], tuple[int, int]]:
    """(event, fact) -> the fact's byte span in that event; a fact without one spans the whole event."""
    out: dict[tuple[int, str], tuple[int, int]] = {}
    for e in trace.events:
        if not e.provides:
            continue
        spans = e.fact_spans or (None,) * len(e.provides)
        for f, span in zip(e.provides, spans, strict=True):
            out.setdefault((e.index, f), (0, e.bytes) if span is None else span)
    return out


def span_of(trace: Trace, i: int, fact: str) -> tuple[int, int]:
    return trace.derived("fact_spans", fact_spans).get((i, fact), (0, trace.events[i].bytes))


def inside(span: tuple[int, int], ranges: Ranges) -> bool:
    """The span lies within one of the ranges (a range shown by a cut, a page, or pages read)."""
    a, b = span
    return any(lo <= a and b <= hi for lo, hi in ranges)


def merged(ranges: Iterable[tuple[int, int]]) -> Ranges:
    """Ranges sorted, with touching or overlapping ones joined."""
    out: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1]:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return tuple((lo, hi) for lo, hi in out)


def shown_ranges(state: int, kept: Ranges | None, nbytes: int) -> Ranges:
    """What a positional change shows of the original bytes: its declared ranges, else (a change that
    declares none) the head of as many bytes as the new representation holds."""
    return tuple(kept) if kept is not None else ((0, nbytes),)


def pages_of(span: tuple[int, int], page_bytes: int, size: int) -> range:
    """The pages (0 = the one shown) a span overlaps, for pages of ``page_bytes`` bytes."""
    if page_bytes <= 0:
        return range(0)
    a, b = span
    last = max(size - 1, 0) // page_bytes
    return range(min(a // page_bytes, last), min(max(b - 1, a) // page_bytes, last) + 1)


class FactInfo(NamedTuple):
    """What a summarizer can know of each fact at summary time (``sim.engine.model``), by fact."""

    kind: dict[str, str]  # fact -> its kind (the first provider's), absent: none
    first_need: dict[str, int]  # fact -> the first event that needs it (a live need: ``live_needs``)
    second_provider: dict[str, int]  # fact -> its second provider (it was repeated from then on)
    stale_at: dict[str, int]  # fact -> the first event that superseded it


def superseded_at(trace: Trace) -> dict[str, int]:
    """Fact -> the first event that superseded it (absent: none did)."""
    out: dict[str, int] = {}
    for e in trace.events:
        for f in e.supersedes:
            out.setdefault(f, e.index)
    return out


def fact_info(trace: Trace) -> FactInfo:
    kind: dict[str, str] = {}
    first_need: dict[str, int] = {}
    second: dict[str, int] = {}
    providers_seen: dict[str, int] = {}
    for e in trace.events:
        for j, f in enumerate(e.provides):
            if e.fact_kinds and e.fact_kinds[j] is not None:
                kind.setdefault(f, e.fact_kinds[j])
            c = providers_seen.get(f, 0)
            if c == 1:
                second.setdefault(f, e.index)
            providers_seen[f] = c + 1
    for i, needs in enumerate(trace.derived("live_needs", live_needs)):
        for f in needs:
            first_need.setdefault(f, i)
    return FactInfo(kind, first_need, second, trace.derived("superseded_at", superseded_at))


def fact_tokens(trace: Trace) -> dict[str, int]:
    """Fact -> the tokens it takes to state it: its byte span in its first provider, at that provider's
    own bytes per token (``sim.cost.tokens.scale_tokens``); a fact without a span is the whole event.
    What a summary spends to keep the fact (``sim.engine.model.ReplayModel.summary_keeps``)."""
    from sim.cost.tokens import scale_tokens

    spans = trace.derived("fact_spans", fact_spans)
    out: dict[str, int] = {}
    for (i, f), (a, b) in spans.items():
        if f not in out:  # spans are keyed in event order: the first provider's
            e = trace.events[i]
            out[f] = scale_tokens(e.tokens, e.bytes, max(b - a, 0))
    return out


def kind_code(trace: Trace, fact: str) -> int:
    """Index of the fact's kind in FACT_KINDS (-1: none)."""
    k = trace.derived("fact_info", fact_info).kind.get(fact)
    return FACT_KINDS.index(k) if k is not None else -1


class FactState:
    """Per-run availability of facts; the engine updates it as items change and facts are re-read."""

    __slots__ = (
        "providers",
        "kept",
        "recovered",
        "shown",
        "missed",
        "ever_missed",
        "pages_read",
        "trace",
        "needed_lost",
    )

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self.providers = trace.derived("fact_providers", providers)
        self.kept: set[str] = set()  # facts the current summary holds
        self.recovered: set[str] = set()  # facts re-read into the view by refetch, retrieval or pages
        self.shown: dict[int, Ranges] = {}  # cut or paginated items: the original bytes in view
        self.missed: set[str] = set()  # facts a retrieval missed (not re-read since)
        self.ever_missed: set[str] = set()  # every fact a retrieval missed
        self.pages_read: dict[int, set[int]] = {}  # paginated item -> pages read back
        self.needed_lost: set[str] = set()  # facts an action needed while lost from view (``note_needs``)

    def visible(self, i: int, s: int, fact: str) -> bool:
        """Is the fact readable in item i (state s) as the view shows it."""
        if s == _VERBATIM:
            return True
        if s in _POSITIONAL:
            return inside(span_of(self.trace, i, fact), self.shown.get(i, ()))
        return False

    def where(self, fact: str, state: list[int], n: int) -> str:
        """'view', 'summary', 'recovered', 'paginated', 'spilled', 'not_retrieved' or 'lost' for a request
        holding items [0, n)."""
        spilled = paged = False
        for i in self.providers.get(fact, ()):
            if i >= n:
                break
            s = state[i]
            if s == _VERBATIM:
                return "view"
            if s in _POSITIONAL:
                if inside(span_of(self.trace, i, fact), self.shown.get(i, ())):
                    return "view"
                paged = paged or s == _PAGINATED
            elif s == _SPILLED:
                spilled = True
        if fact in self.kept:
            return "summary"
        if fact in self.recovered:
            return "recovered"
        if paged:
            return "paginated"
        if spilled:
            return "not_retrieved" if fact in self.missed else "spilled"
        return "lost"

    def note_needs(self, needs: Iterable[str], state: list[int], n: int) -> list[tuple[str, str]]:
        """Before an action needing ``needs`` (items [0, n) in view): where each is (``where``), as
        (fact, where) pairs; those lost from view (``lost`` or ``not_retrieved``: neither in view, nor
        kept by the summary, nor re-read, nor behind a page or a handle) join ``needed_lost``. A spilled
        one joins it when its retrieval misses (``choose_rows``)."""
        out = [(f, self.where(f, state, n)) for f in needs]
        self.needed_lost.update(f for f, where in out if where in ("lost", "not_retrieved"))
        return out

    def source(self, fact: str, n: int) -> int | None:
        """The newest event before n that provides the fact: what a refetch re-runs."""
        best = None
        for i in self.providers.get(fact, ()):
            if i < n:
                best = i
        return best

    def paged_source(self, fact: str, state: list[int], n: int) -> int | None:
        """The newest paginated provider before n: the item whose pages a page read opens."""
        best = None
        for i in self.providers.get(fact, ()):
            if i < n and state[i] == _PAGINATED:
                best = i
        return best


FAIL, DEGRADE = -1, -2  # reactions besides the re-read row kinds REFETCH, RETRIEVE and PAGE


def reaction(spilled: bool, tool_source: bool, on_missing: str) -> int:
    """The mock model's answer to one needed fact missing from view: RETRIEVE it through its spill
    handle; or, lost, FAIL the run (``on_missing=fail``), DEGRADE (go on without it: told to, or
    nothing to re-run — a user's words, a summary's input, or a value a later event superseded, which
    re-running the tool would not give back), or REFETCH (re-run the tool call)."""
    if spilled:
        return RETRIEVE
    if on_missing == "fail":
        return FAIL
    if on_missing == "degrade" or not tool_source:
        return DEGRADE
    return REFETCH


def reactions(
    spilled: np.ndarray, tool_source: np.ndarray, fail: np.ndarray, degrade: np.ndarray
) -> np.ndarray:
    """``reaction`` of many needs at once (``fail`` / ``degrade``: whether each need's model has
    on_missing fail / degrade)."""
    return np.where(
        spilled, RETRIEVE, np.where(fail, FAIL, np.where(degrade | ~tool_source, DEGRADE, REFETCH))
    )


def choose_rereads(
    missing: Iterable[tuple[bool, int | None, bool]], on_missing: str
) -> tuple[dict[int, int], bool] | None:
    """What the mock model does about an action's needed facts that are neither in view, in the summary
    nor re-read before: ``missing`` gives (spilled?, newest provider in view, can a refetch give it
    back?) of each, in need order. Returns (event to re-read -> row kind, went ahead without a fact?),
    or None: the model fails. A source needed twice is re-read once, as the first need asked. (The
    batch path's rule: every retrieval hits and no need is paginated; ``choose_rows`` is the loop's.)"""
    sources: dict[int, int] = {}
    degraded = False
    for spilled, src, tool in missing:
        r = reaction(spilled, tool, on_missing)
        if r == FAIL:
            return None
        if r == DEGRADE:
            degraded = True
        else:
            sources.setdefault(src, r)  # type: ignore[arg-type]
    return sources, degraded


class Rows(NamedTuple):
    """The re-read calls before an action, in order: (event, row kind, page: -1 unless a page read)."""

    rows: list[tuple[int, int, int]]
    degraded: bool
    missed: list[str]  # facts a retrieval missed just now


def choose_rows(facts: FactState, needs, states, n: int, model) -> Rows | None:
    """The mock model's re-reads for an action needing ``needs`` (the loop's full rule): a fact in a later
    page of a paginated item is read back page by page (PAGE rows, exact); a spilled one through its
    handle (a RETRIEVE row), which succeeds as ``model.retrieves`` says; a miss (``not_retrieved``),
    like a lost fact, is re-run (REFETCH) under ``on_missing=refetch``, ends the run under ``fail``
    (None), or is gone without under ``degrade``. Rows by event; for one event its page reads, then its
    retrieval or refetch, then the refetch after a missed retrieval. A refetch re-runs the call, and its
    result passes the policy's bound again (``Policy.reread_bound``, applied by the loop's
    ``_Run.reread``): only the facts inside the bounded copy's shown ranges come back, and a needed fact
    outside them is read by ranged reads of its span (``ranged_reads``), counted as refetch rows."""
    if not needs:
        return Rows([], False, [])
    events, trace = facts.trace.events, facts.trace
    sources: dict[int, int] = {}
    again: set[int] = set()  # retrieved, missed: re-run after
    pages: dict[int, set[int]] = {}
    degraded = False
    missed: list[str] = []
    for f, where in facts.note_needs(needs, states, n):  # where each is, once; needed_facts_lost noted
        if where == "paginated":
            src = facts.paged_source(f, states, n)
            e = events[src]  # type: ignore[index]
            size = facts.shown[src][0][1] if facts.shown.get(src) else 0
            want = pages_of(span_of(trace, src, f), size, e.bytes)  # type: ignore[arg-type]
            done = facts.pages_read.get(src, set())  # type: ignore[arg-type]
            pages.setdefault(src, set()).update(p for p in want if p > 0 and p not in done)  # type: ignore
            continue
        if where not in ("spilled", "lost", "not_retrieved"):
            continue
        src = facts.source(f, n)
        tool = refetchable(trace, src, f, n)
        if where == "spilled":
            sources.setdefault(src, RETRIEVE)  # type: ignore[arg-type]
            if model.retrieves(f):
                continue
            missed.append(f)  # known from now on, whatever the model does next
            facts.missed.add(f)
            facts.ever_missed.add(f)
            facts.needed_lost.add(f)
        r = reaction(False, tool, model.on_missing)
        if r == FAIL:
            return None
        if r == DEGRADE:
            degraded = True
        elif sources.setdefault(src, REFETCH) == RETRIEVE and where == "spilled":  # type: ignore[arg-type]
            again.add(src)  # type: ignore[arg-type]
    rows: list[tuple[int, int, int]] = []
    for src in sorted({*sources, *pages}):
        rows.extend((src, PAGE, p) for p in sorted(pages.get(src, ())))
        if src in sources:
            rows.append((src, sources[src], -1))
        if src in again:
            rows.append((src, REFETCH, -1))
    return Rows(rows, degraded, missed)


class NeedPairs(NamedTuple):
    """A trace's (call, needed fact) pairs in call order, each with the fact's providers in that call's
    view: what a batch needs to find, for all calls at once, the needs a policy's states leave unmet."""

    calls: tuple[int, ...]  # per pair: the call whose action needs the fact
    facts: tuple[str, ...]  # per pair: the fact
    source: tuple[int | None, ...]  # per pair: its newest provider in view (what a refetch re-runs)
    call: np.ndarray  # ``calls`` as an array
    provider: np.ndarray  # the pairs' providers in view, pair after pair, ascending within a pair
    pair_of_provider: np.ndarray  # the pair each of those belongs to
    provider_start: np.ndarray  # the fact's byte span in each of those providers
    provider_end: np.ndarray
    answer_from: int  # the first pair of the last call: the final answer's needs
    source_item: np.ndarray  # ``source`` as an array (-1: none)
    source_tool: np.ndarray  # per pair: a refetch can give it back (``refetchable``)
    source_added: np.ndarray  # per pair: tokens a re-read of its source adds (``reread_cost``)
    source_call: np.ndarray  # ... and the call it re-issues (-1: none)


def need_pairs(trace: Trace) -> NeedPairs:
    provs = trace.derived("fact_providers", providers)
    spans = trace.derived("fact_spans", fact_spans)
    ends = trace.arrays.view_end.tolist()
    events = trace.events
    call: list[int] = []
    facts: list[str] = []
    source: list[int | None] = []
    provider: list[int] = []
    owner: list[int] = []
    span_start: list[int] = []
    span_end: list[int] = []
    answer_from = 0
    live = trace.derived("live_needs", live_needs)
    for c in trace.calls:
        answer_from = len(call)  # ends as the last call's first pair
        n = ends[c.index]
        for f in live[c.event_index]:
            newest = None
            for i in provs.get(f, ()):
                if i >= n:
                    break
                provider.append(i)
                owner.append(len(call))
                a, b = spans.get((i, f), (0, events[i].bytes))
                span_start.append(a)
                span_end.append(b)
                newest = i
            call.append(c.index)
            facts.append(f)
            source.append(newest)
    costs = [(0, -1) if i is None else reread_cost(trace, i) for i in source]
    arrays = [
        np.array(v, dtype=dtype)
        for v, dtype in (
            (call, np.int64),
            (provider, np.int64),
            (owner, np.int64),
            (span_start, np.int64),
            (span_end, np.int64),
            ([-1 if i is None else i for i in source], np.int64),
            (
                [refetchable(trace, i, f, ends[c]) for i, f, c in zip(source, facts, call, strict=True)],
                bool,
            ),
            ([a for a, _ in costs], np.int64),
            ([k for _, k in costs], np.int64),
        )
    ]
    for v in arrays:
        v.setflags(write=False)
    return NeedPairs(tuple(call), tuple(facts), tuple(source), *arrays[:5], answer_from, *arrays[5:])


def reread_cost(trace: Trace, src: int, result_tokens: int | None = None) -> tuple[int, int]:
    """(tokens a re-read of event src adds to the conversation, the recorded call it re-issues, -1:
    none): the agent re-issues the call that produced it (or reads its spill handle), whose result then
    stays: the issuer's tokens plus the result's, whole (``result_tokens`` None) or as the policy's
    ``reread_bound`` shows it (``result_tokens``: the bounded copy's tokens)."""
    if result_tokens is not None:
        issuer = trace.derived("issuers", issuer_of).get(src, src)
        asked = int(trace.arrays.tokens[issuer]) if issuer != src else 0
        return asked + result_tokens, trace.derived("call_of_event", call_of_event).get(issuer, -1)
    known = trace.derived("reread_sizes", _no_sizes)  # filled as re-reads of this trace's events come up
    hit = known.get(src)
    if hit is None:
        issuer = trace.derived("issuers", issuer_of).get(src, src)
        original = trace.arrays.tokens
        added = int(original[issuer]) + int(original[src]) if issuer != src else int(original[src])
        hit = known[src] = (added, trace.derived("call_of_event", call_of_event).get(issuer, -1))
    return hit


def ranged_reads(
    trace: Trace, src: int, spans: Iterable[tuple[int, int]], shown: Ranges, margin_tokens: int
) -> list[tuple[tuple[int, int], int]]:
    """The ranged reads (e.g. ``sed -n``) that bring back the byte ``spans`` of event src which a
    bounded re-read's ``shown`` ranges leave out: the parts of those spans the copy does not show,
    merged, each read in slices of at most as many bytes as the bound shows (a longer slice would be
    cut again: as many reads as it takes, like pages). Each read: (its slice [lo, hi), the tokens it
    adds: the slice's share of the event's tokens (``scale_tokens``) plus ``margin_tokens`` for the
    command and the line numbers around the slice). No read at all when the bound shows no byte
    (nothing comes through it). A span is then covered by the shown ranges and the slices together."""
    from sim.cost.tokens import scale_tokens

    cap = sum(hi - lo for lo, hi in shown)
    want = merged(g for s in spans if not inside(s, shown) for g in _gaps(s, shown))
    if cap <= 0 or not want:
        return []
    e = trace.events[src]
    out = []
    for lo, hi in want:
        for a in range(lo, max(hi, lo + 1), cap):
            b = min(a + cap, hi)
            out.append(((a, b), scale_tokens(e.tokens, e.bytes, b - a) + margin_tokens))
    return out


def page_size(trace: Trace, src: int, page: int, page_bytes: int, outputs) -> tuple[int, int]:
    """(tokens added to the conversation, output tokens of the page-read call) for reading page ``page``
    of event src (pages of ``page_bytes`` bytes): the page's share of the event's tokens plus the call
    that asked for it, sized as the one that produced the event (as a retrieval re-issues it)."""
    from sim.cost.tokens import scale_tokens

    e = trace.events[src]
    nbytes = max(min(page_bytes, e.bytes - page * page_bytes), 0)
    issuer = trace.derived("issuers", issuer_of).get(src, src)
    call = trace.derived("call_of_event", call_of_event).get(issuer, -1)
    asked = int(trace.arrays.tokens[issuer]) if issuer != src else 0
    added = scale_tokens(e.tokens, e.bytes, nbytes) + asked
    return added, (int(outputs[call]) if call >= 0 else 0)


def _gaps(span: tuple[int, int], ranges: Ranges) -> list[tuple[int, int]]:
    """The parts of ``span`` outside ``ranges`` (an empty span: itself)."""
    a, b = span
    if a >= b:
        return [span]
    out, at = [], a
    for lo, hi in merged(ranges):
        if hi <= at or lo >= b:
            continue
        if lo > at:
            out.append((at, lo))
        at = max(at, hi)
    if at < b:
        out.append((at, b))
    return out


def reread_size(
    trace: Trace, src: int, outputs: Sequence[int] | np.ndarray, result_tokens: int | None = None
) -> tuple[int, int]:
    """(tokens added to the conversation, output tokens of the re-read call) for re-reading event src
    (``result_tokens``: as ``reread_cost``)."""
    added, call = reread_cost(trace, src, result_tokens)
    return added, (int(outputs[call]) if call >= 0 else 0)


def _no_sizes(trace: Trace) -> dict[int, tuple[int, int]]:
    return {}


def call_of_event(trace: Trace) -> dict[int, int]:
    """Event index of each recorded call's assistant turn -> the call."""
    return {c.event_index: c.index for c in trace.calls}
