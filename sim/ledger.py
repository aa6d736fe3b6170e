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

from dataclasses import dataclass

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


@dataclass(frozen=True)
class LedgerTotals:
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


def fact_outcomes(trace: Trace, r: RunRecord, changed: list[int] | None = None) -> dict[str, str]:
    """Facts held by items that are no longer verbatim -> their category at the end of the run (the best
    holder wins). A fact absent from the result is verbatim (some verbatim item still holds it)."""
    states = r.item_state.tolist()
    n = len(states)
    if changed is None:
        changed = [i for i, s in enumerate(states) if s != ItemState.VERBATIM]
    kept, recovered = set(r.summary_kept), set(r.recovered)
    providers = trace.derived("fact_providers", _providers)
    rank = {c: i for i, c in enumerate(CATEGORIES)}
    out: dict[str, str] = {}
    for i in changed:
        for f in trace.events[i].provides:
            if f in out:
                continue
            best = "lost"
            for j in providers[f]:
                if j >= n:
                    break
                s = states[j]
                if s == ItemState.VERBATIM or f in recovered:
                    cat = "verbatim"
                elif s == ItemState.BOUNDED or (s == ItemState.SUMMARIZED and f in kept):
                    cat = "derived"
                elif s == ItemState.SPILLED:
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


def totals(trace: Trace, r: RunRecord) -> LedgerTotals:
    """End-of-run totals; work proportional to the items a policy changed, not to the run."""
    n = len(r.item_state)
    a = trace.arrays
    seen_tokens = int(a.prefix[n])
    seen_facts = trace.derived("facts_before", _facts_before)[n]
    changed = np.flatnonzero(r.item_state).tolist()
    tok = dict.fromkeys(CATEGORIES, 0)
    facts = dict.fromkeys(CATEGORIES, 0)
    if changed:
        outcomes = fact_outcomes(trace, r, changed)
        for v in outcomes.values():
            facts[v] += 1
        original = a.tokens
        final = r.item_tokens
        states = r.item_state
        covered = summary = 0
        for i in changed:
            s, o, t = int(states[i]), int(original[i]), int(final[i])
            if s == ItemState.SUMMARIZED:  # the summary stands for its whole span
                covered += o
                summary += t
            else:
                kept = min(t, o)
                tok["derived"] += kept
                tok["spilled" if s == ItemState.SPILLED else "lost"] += o - kept
        tok["derived"] += min(summary, covered)
        tok["lost"] += covered - min(summary, covered)
    tok["verbatim"] = seen_tokens - tok["derived"] - tok["spilled"] - tok["lost"]
    facts["verbatim"] = seen_facts - facts["derived"] - facts["spilled"] - facts["lost"]
    return LedgerTotals(
        facts_seen=seen_facts,
        facts_verbatim=facts["verbatim"],
        facts_derived=facts["derived"],
        facts_spilled=facts["spilled"],
        facts_lost=facts["lost"],
        tokens_seen=seen_tokens,
        tokens_verbatim=tok["verbatim"],
        tokens_derived=tok["derived"],
        tokens_spilled=tok["spilled"],
        tokens_lost=tok["lost"],
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
