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


def fact_outcomes(trace: Trace, r: RunRecord) -> dict[str, str]:
    """Each fact the admitted items provided -> its category at the end of the run (best holder wins)."""
    if not trace.derived("has_provides", lambda t: any(e.provides for e in t.events)):
        return {}
    states = r.item_state.tolist()
    kept, recovered = set(r.summary_kept), set(r.recovered)
    rank = {c: i for i, c in enumerate(CATEGORIES)}
    out: dict[str, str] = {}
    for i, s in enumerate(states):
        for f in trace.events[i].provides:
            if s == ItemState.VERBATIM or f in recovered:
                cat = "verbatim"
            elif s == ItemState.BOUNDED or (s == ItemState.SUMMARIZED and f in kept):
                cat = "derived"
            elif s == ItemState.SPILLED:
                cat = "spilled"
            else:
                cat = "lost"
            if f not in out or rank[cat] < rank[out[f]]:
                out[f] = cat
    return out


def totals(trace: Trace, r: RunRecord) -> LedgerTotals:
    outcomes = fact_outcomes(trace, r)
    facts = {c: sum(1 for v in outcomes.values() if v == c) for c in CATEGORIES}
    tok = dict.fromkeys(CATEGORIES, 0)
    original = trace.arrays.tokens
    final = r.item_tokens.tolist() if r.item_tokens is not None else []
    covered = summary = 0
    for i, s in enumerate(r.item_state.tolist()):
        o, t = int(original[i]), final[i]
        if s == ItemState.VERBATIM:
            tok["verbatim"] += o
        elif s == ItemState.SUMMARIZED:  # the summary stands for its whole span
            covered += o
            summary += t
        else:
            kept = min(t, o)
            tok["derived"] += kept
            tok["spilled" if s == ItemState.SPILLED else "lost"] += o - kept
    tok["derived"] += min(summary, covered)
    tok["lost"] += covered - min(summary, covered)
    return LedgerTotals(
        facts_seen=len(outcomes),
        facts_verbatim=facts["verbatim"],
        facts_derived=facts["derived"],
        facts_spilled=facts["spilled"],
        facts_lost=facts["lost"],
        tokens_seen=sum(int(original[i]) for i in range(len(final))),
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
