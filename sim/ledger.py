"""The information-loss ledger: for every item and fact of a run, what stayed verbatim, what became a
derived representation, what moved out of view behind a handle, and what can no longer be recovered.

Built from a run's record (the truth) and its trace. Entries: one ``add`` per admitted item, one per
change an operation made (truncate, prune, summarize, clear, spill), one per re-read (refetch,
retrieve). Totals describe the end of the run and reconcile by construction:
facts_verbatim + facts_derived + facts_spilled + facts_lost = facts_seen, and the same in tokens over the
admitted items' original sizes (a representation counts as derived up to the size of what it replaced;
re-read copies are extra content and are not counted in the token totals).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from sim.records import CALL_KINDS, COMPACTION_KINDS, RunRecord
from sim.types import ItemState, Trace

CATEGORIES = ("verbatim", "derived", "spilled", "lost")
LEDGER_COLUMNS = (
    "trace_id",
    "policy",
    "recorded_call",
    "operation",
    "item",
    "item_kind",
    "tokens_before",
    "tokens_after",
    "facts",
    "facts_outcome",
)


class LedgerTotals(NamedTuple):
    """End-of-run totals (immutable; a tuple, so building one per run stays cheap)."""

    facts_seen: int
    facts_verbatim: int
    facts_derived: int
    facts_spilled: int
    facts_lost: int
    tokens_seen: int
    tokens_verbatim: int
    tokens_derived: int
    tokens_spilled: int
    tokens_lost: int


def _facts_before(trace: Trace) -> list[int]:
    """Number of distinct facts provided by events [0, i), for every i."""
    seen: set[str] = set()
    out = [0]
    for e in trace.events:
        seen.update(e.provides)
        out.append(len(seen))
    return out


_VERBATIM, _BOUNDED, _SUMMARIZED, _SPILLED = (
    int(ItemState.VERBATIM),
    int(ItemState.BOUNDED),
    int(ItemState.SUMMARIZED),
    int(ItemState.SPILLED),
)


def fact_outcomes(trace: Trace, r: RunRecord, changed: list[int] | None = None) -> dict[str, str]:
    """Facts held by items that are no longer verbatim -> their category at the end of the run (the best
    holder wins). A fact absent from the result is verbatim (some verbatim item still holds it)."""
    states = r.item_state.tolist()
    n = len(states)
    if changed is None:
        changed = [i for i, s in enumerate(states) if s != _VERBATIM]
    kept, recovered = set(r.summary_kept), set(r.recovered)
    providers = trace.derived("fact_providers", _providers)
    rank = {c: i for i, c in enumerate(CATEGORIES)}
    out: dict[str, str] = {}
    events = trace.events
    for i in changed:
        for f in events[i].provides:
            if f in out:
                continue
            best = "lost"
            for j in providers[f]:
                if j >= n:
                    break
                s = states[j]
                if s == _VERBATIM or f in recovered:
                    cat = "verbatim"
                elif s == _BOUNDED or (s == _SUMMARIZED and f in kept):
                    cat = "derived"
                elif s == _SPILLED:
                    cat = "spilled"
                else:
                    cat = "lost"
                if rank[cat] < rank[best]:
                    best = cat
            out[f] = best
    return out


def _providers(trace: Trace) -> dict[str, list[int]]:
    from sim.information import providers

    return providers(trace)


def provides_any(trace: Trace) -> np.ndarray:
    """Per event: does it provide any fact (read-only)."""
    a = np.array([bool(e.provides) for e in trace.events], dtype=bool)
    a.setflags(write=False)
    return a


def token_outcomes(
    original: np.ndarray, final: np.ndarray, states: np.ndarray, bounds: np.ndarray
) -> np.ndarray:
    """Tokens (derived, spilled, lost) of each run, for runs whose items are laid end to end: run j holds
    items [bounds[j], bounds[j + 1]). An item cut in place keeps what is left as derived and loses (or
    spills) the rest; a summary stands for its whole span: derived up to its size, the rest lost."""
    runs = len(bounds) - 1
    changed = np.flatnonzero(states)
    if not len(changed):
        return np.zeros((runs, 3), dtype=np.int64)
    original, final, states = original[changed], final[changed], states[changed]
    run = bounds.searchsorted(changed, side="right") - 1

    def per_run(values: np.ndarray, where: np.ndarray | None = None) -> np.ndarray:
        # float weights are exact here: token counts stay far below 2**53
        if where is None:
            return np.bincount(run, values, minlength=runs).astype(np.int64)
        return np.bincount(run[where], values[where], minlength=runs).astype(np.int64)

    summarized = states == _SUMMARIZED
    in_place = None if not summarized.any() else ~summarized
    kept = np.minimum(final, original)
    cut = original - kept
    derived, cut_total = per_run(kept, in_place), per_run(cut, in_place)
    spilled_items = states == _SPILLED
    spilled = per_run(cut, spilled_items) if spilled_items.any() else np.zeros(runs, dtype=np.int64)
    lost = cut_total - spilled
    if in_place is not None:
        covered, summary = per_run(original, summarized), per_run(final, summarized)
        in_summary = np.minimum(summary, covered)
        derived += in_summary
        lost += covered - in_summary
    return np.stack((derived, spilled, lost), axis=1)


def totals(
    trace: Trace, r: RunRecord, tokens: tuple[int, int, int] | None = None, providing: list[int] | None = None
) -> LedgerTotals:
    """End-of-run totals. ``tokens`` (derived, spilled, lost) and ``providing`` (changed items that
    provide facts) may come precomputed for a batch of runs (``token_outcomes``)."""
    n = len(r.item_state)
    a = trace.arrays
    if tokens is None:
        tokens = tuple(
            token_outcomes(a.tokens[:n], r.item_tokens, r.item_state, np.array([0, n]))[0].tolist()
        )
    if providing is None:
        changed = np.flatnonzero(r.item_state)
        providing = changed[trace.derived("provides_any", provides_any)[changed]].tolist()
    facts = dict.fromkeys(CATEGORIES, 0)
    if providing:
        for v in fact_outcomes(trace, r, providing).values():
            facts[v] += 1
    seen_tokens = int(a.prefix[n])
    seen_facts = trace.derived("facts_before", _facts_before)[n]
    derived, spilled, lost = tokens
    return LedgerTotals(
        facts_seen=seen_facts,
        facts_verbatim=seen_facts - facts["derived"] - facts["spilled"] - facts["lost"],
        facts_derived=facts["derived"],
        facts_spilled=facts["spilled"],
        facts_lost=facts["lost"],
        tokens_seen=seen_tokens,
        tokens_verbatim=seen_tokens - derived - spilled - lost,
        tokens_derived=derived,
        tokens_spilled=spilled,
        tokens_lost=lost,
    )


def entries(trace: Trace, r: RunRecord) -> list[dict]:
    """The ledger's rows: what each operation did to each item and its facts."""
    events, rows = trace.events, []
    view_end = trace.arrays.view_end.tolist()
    original = trace.arrays.tokens.tolist()
    kept_at = dict(r.summaries)
    n = len(r.item_state)
    call = 0
    for i in range(n):  # admissions
        while call < len(view_end) and view_end[call] <= i:
            call += 1
        rows.append(_row(r, call, "add", i, events[i].kind, 0, original[i], events[i].provides, "verbatim"))
    outcome_of = {0: "derived", 1: "lost", 3: "lost", 4: "spilled"}  # truncate, prune, clear, spill
    ch = r.changes
    for k, kind, i, reclaimed, after in zip(
        ch["recorded_call"].tolist(),
        ch["kind"].tolist(),
        ch["index"].tolist(),
        ch["tokens_reclaimed"].tolist(),
        ch["tokens_after"].tolist(),
        strict=True,
    ):
        op = COMPACTION_KINDS[kind]
        provides = events[i].provides
        if op == "summarize":
            kept = set(kept_at.get(k, ()))
            outcome = ";".join("derived" if f in kept else "lost" for f in provides)
        else:
            outcome = ";".join(outcome_of[kind] for _ in provides)
        rows.append(_row(r, k, op, i, events[i].kind, after + reclaimed, after, provides, outcome, raw=True))
    for k, kind, src, added in r.rereads:  # re-read content joins the conversation verbatim
        provides = events[src].provides
        rows.append(_row(r, k, CALL_KINDS[kind], src, events[src].kind, 0, added, provides, "verbatim"))
    return rows


def _row(r, k, op, i, kind, before, after, provides, outcome, raw=False) -> dict:
    if not raw:
        outcome = ";".join(outcome for _ in provides)
    return {
        "trace_id": r.trace_id,
        "policy": r.policy,
        "recorded_call": k,
        "operation": op,
        "item": i,
        "item_kind": kind,
        "tokens_before": before,
        "tokens_after": after,
        "facts": ";".join(provides),
        "facts_outcome": outcome,
    }
