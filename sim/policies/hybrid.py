"""``hybrid``: the Complexity Trap's hybrid, observation masking between LLM summaries (POLICIES.md §4).

- Masking, every call: SWE-agent ``last_n_observations`` with ``mask_n`` (M=10), exactly the
  ``observation_masking`` policy's rule (run through that module's own class and helpers): all but the
  last ``mask_n`` observations become ``Old environment output: (N lines omitted)`` (MASKED, lost from
  view); the task is never masked; the boundary only moves forward.
- Summary: the ``llm_summary`` rule with ``n`` (N=43) and ``m`` (M=10): once ``n + m`` turns (53) have
  completed unsummarized, all but the last ``m`` turns are covered by one incremental summary
  (SUMMARIZED; message in the slot of the first covered event). Chosen: the summarizer reads the turns as
  the view holds them, masked observations as their placeholders; items already summarized are never
  masked afterwards.
- Summary size and summarizer input as in ``llm_summary`` (ctxsim's clamp rule, the seed's values).
- View rewrites; nothing is recoverable. Cache: each masking advance rewrites from the newly masked
  observation on; each summary from the summary slot on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sim.core.segments import offsets, owners
from sim.core.types import ItemState, Trace
from sim.information.state import runs_have_needs
from sim.policies.base import Decision, Plans, Policy, View, check_int, register
from sim.policies.llm_summary import (
    SummaryState,
    check_summary_knobs,
    summarize_turns,
    summary_entries,
    summary_events,
    turn_starts,
)
from sim.policies.observation_masking import ObservationMasking

SUMMARIZED, MASKED = int(ItemState.SUMMARIZED), int(ItemState.MASKED)


class _HybridState:
    __slots__ = ("mask", "summary")

    def __init__(self, mask, summary: SummaryState) -> None:
        self.mask, self.summary = mask, summary


@register
@dataclass(frozen=True)
class Hybrid(Policy):
    """Observation masking (mask_n) every call, an LLM summary every n turns keeping the last m."""

    n: int = 43
    m: int = 10
    mask_n: int = 10
    summary_ratio: float = 0.1
    summary_min_tokens: int = 256
    summary_max_tokens: int = 2048

    name = "hybrid"
    size_grid = {"n": (21, 43, 86), "m": (5, 10, 20)}  # ``ctxsim size --policy hybrid``'s default grid
    acts_before_call = True
    plans = True
    conformance_settings = (
        {"n": 2, "m": 1, "mask_n": 1, "summary_min_tokens": 10},
        {"n": 3, "m": 2, "mask_n": 2},
    )

    def __post_init__(self) -> None:
        check_int(self.name, "n", self.n, 1)
        check_int(self.name, "m", self.m, 0)
        check_int(self.name, "mask_n", self.mask_n, 1)
        check_summary_knobs(self)

    def masking(self) -> ObservationMasking:
        return ObservationMasking(n=self.mask_n)

    def start(self, trace: Trace) -> _HybridState:
        return _HybridState(self.masking().start(trace), SummaryState(trace))

    def before_call(self, trace: Trace, state: _HybridState, view: View, call: int, status=None):
        """Masking, then ``summarize_turns`` over the view with this call's masks; ``plan_many`` restates
        it for whole runs (tests/test_plans_summary.py)."""
        masked = [
            c
            for c in self.masking().before_call(trace, state.mask, view, call, status)
            if view.state[c.index] != ItemState.SUMMARIZED
        ]
        done = summarize_turns(self, trace, state.summary, view, {c.index: c for c in masked})
        if done is None:
            return masked
        upto = state.summary.covered_upto
        # the summary's changes (all before its cut) first: every change ascends by index, as a plan's
        return Decision(list(done[0]) + [c for c in masked if c.index >= upto], done[1])

    def plan(self, trace: Trace):
        return self.plan_many([trace])[0]

    def plan_many(self, traces: Sequence[Trace]) -> Plans:
        """``before_call``'s decisions for whole runs: the masking plan (``ObservationMasking.plan_many``,
        the same rule) and the summaries (``summary_events``), whose covered turns weigh their recorded
        sizes less what the masks made by then reclaimed; then the masks ``before_call`` drops: those
        of items already summarized, and at a summary's call those before its cut. Runs with needs are
        declined (a re-read changes sizes)."""
        if not traces:
            return Plans.of([])
        mask = self.masking().plan_many(traces)
        mcall, midx, mtok, mcounts = mask.call, mask.index, mask.tokens, mask.counts
        moff = offsets(mcounts)
        # per mask entry: the tokens it reclaims, summed over each run's entries (entries ascend by index)
        ev_off = offsets(np.array([len(t.arrays.tokens) for t in traces], dtype=np.int64))
        mrun = owners(mcounts)
        saved = np.zeros(len(midx) + 1, dtype=np.int64)
        np.cumsum(
            np.concatenate([t.arrays.tokens for t in traces])[midx + ev_off[mrun]] - mtok, out=saved[1:]
        )
        needs = runs_have_needs(traces)
        ev_run, ev_call, ev_cut, parts, summaries = [], [], [], [], []
        block_end = np.zeros(len(traces), dtype=np.int64)
        for r, t in enumerate(traces):
            turns = t.derived("turn_starts", turn_starts)
            block_end[r] = turns[0] if turns else len(t.arrays.tokens)
            if needs[r]:
                summaries.append(())
                continue
            lo, hi = int(moff[r]), int(moff[r] + mcounts[r])
            calls, idx, prefix = mcall[lo:hi], midx[lo:hi], t.arrays.prefix

            def span(k, start, cut, calls=calls, idx=idx, prefix=prefix, lo=lo) -> int:
                upto = int(calls.searchsorted(k, "right"))  # the masks made by call k
                a, b = int(idx.searchsorted(start)), min(int(idx.searchsorted(cut)), upto)
                masked = int(saved[lo + b] - saved[lo + a]) if b > a else 0
                return int(prefix[cut] - prefix[start]) - masked

            events = summary_events(self, t, span)
            summaries.append(tuple((e.call, e.input, e.out) for e in events))
            if events:
                ev_run += [r] * len(events)
                ev_call += [e.call for e in events]
                ev_cut += [e.cut for e in events]
                parts.append((r, *summary_entries(events)))
        declined = np.array(needs, dtype=bool)
        # each mask's call: the run's last summary at or before it (its cut), or none (the block's end)
        big = int(max(len(t.arrays.view_end) for t in traces)) + 1
        key = np.array(ev_run, dtype=np.int64) * big + np.array(ev_call, dtype=np.int64)
        at = key.searchsorted(mrun * big + mcall, "right") - 1
        own = at >= 0
        own[own] = key[at[own]] // big == mrun[own]
        cuts = np.array(ev_cut, dtype=np.int64)
        covered = np.where(own, cuts[np.maximum(at, 0)] if len(cuts) else 0, block_end[mrun])
        at_summary = own & (key[np.maximum(at, 0)] % big == mcall if len(key) else own)
        keep = (midx >= covered) | (~at_summary & (midx < block_end[mrun]))
        keep &= ~declined[mrun]
        run = [mrun[keep]] + [np.full(len(p[1]), p[0], dtype=np.int64) for p in parts]
        call = [mcall[keep]] + [p[1] for p in parts]
        index = [midx[keep]] + [p[2] for p in parts]
        tokens = [mtok[keep]] + [p[3] for p in parts]
        state = [np.full(int(keep.sum()), MASKED, np.int64)] + [
            np.full(len(p[1]), SUMMARIZED, np.int64) for p in parts
        ]
        run, call, index, tokens, state = map(np.concatenate, (run, call, index, tokens, state))
        order = np.lexsort((index, call, run))
        plans = Plans(
            call[order], index[order], tokens[order], state[order], np.bincount(run, minlength=len(traces))
        )
        if any(summaries):
            plans.summaries = summaries
        if declined.any():
            plans.declined = declined
        return plans
