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

from dataclasses import dataclass

from sim.core.types import ItemState, Trace
from sim.policies.base import Decision, Policy, View, check_int, register
from sim.policies.llm_summary import SummaryState, check_summary_knobs, summarize_turns
from sim.policies.observation_masking import ObservationMasking


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
        masked = [
            c
            for c in self.masking().before_call(trace, state.mask, view, call, status)
            if view.state[c.index] != ItemState.SUMMARIZED
        ]
        done = summarize_turns(self, trace, state.summary, view, {c.index: c for c in masked})
        if done is None:
            return masked
        upto = state.summary.covered_upto
        return Decision([c for c in masked if c.index >= upto] + list(done[0]), done[1])
