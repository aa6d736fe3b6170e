"""``adk_events_compaction``: Google ADK's ``EventsCompactionConfig`` (POLICIES.md §4).

- Invocations: ADK counts user-initiated invocations; a single-task trace has one, so (as
  ``llm_summary`` does) ctxsim counts turns: an assistant event and everything after it up to the next
  assistant event. The block before the first assistant event (system prompt, tool specs, task) is
  never compacted (chosen).
- Trigger 1 (sliding window): before a call, once ``compaction_interval`` turns have completed since
  the last compacted range, all completed turns not yet compacted are compacted, together with the
  last ``overlap_size`` turns of the previous range (ADK: "compressed upon completion of invocations 3,
  6, 9" at interval 3). Nothing recent is kept verbatim, as in ADK.
- Trigger 2 (token threshold, off unless both knobs are set, as ADK requires them together): the
  previous request's provider-reported input (``status.last_input``) >= ``token_threshold`` -> every
  not yet compacted message but the newest ``event_retention_size`` messages (non-system events) is
  compacted, the cut moved back (older) to a boundary that never separates a tool call from its result.
  Checked only when trigger 1 did not fire that call (chosen).
- Transform: one summary event per compaction (SUMMARIZED, in the slot of the first newly covered
  event, with the summary's tokens). Earlier summaries stay in view (chosen: ADK feeds every compaction
  event to the model). The other newly covered raw events stay in the session and are recoverable:
  SPILLED, each keeping a handle of ``handle_tokens`` tokens (a ctxsim choice; ADK puts no per-event
  text in the prompt, the handle stands for the event being retrievable from the session). Their facts
  reach the agent by retrieval, not through the summary (only the summary slot's own event feeds the
  summary's facts in the engine's information model).
- Summarizer: one metered call; input = the summarizer instruction + the overlap turns' raw events at
  their original size (ADK re-summarizes them; it does not read the previous summary) + the newly
  covered events as they stand in view; output clamp(``summary_ratio`` x that span,
  ``summary_min_tokens``, ``summary_max_tokens``) — ADK fixes no size; the seed engine's values.
- A view rewrite (the session keeps every event). Cache: each compaction rewrites the prefix from the
  new summary's slot on.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass

from sim.errors import ConfigError
from sim.policies.base import Change, Decision, Policy, SummaryCall, View, check_int, register
from sim.policies.llm_summary import SUMMARIZER_INSTRUCTION, SummaryState, check_summary_knobs
from sim.tokens import estimate_tokens
from sim.types import ItemState, Trace

SUMMARIZED = ItemState.SUMMARIZED
SPILLED = ItemState.SPILLED


class _State(SummaryState):
    """``SummaryState`` plus the number of turns covered by compactions so far."""

    __slots__ = ("turns_done",)

    def __init__(self, trace: Trace) -> None:
        super().__init__(trace)
        self.turns_done = 0  # turns [0, turns_done) lie in compacted ranges


def compact_span(p, trace: Trace, view: View, start: int, cut: int, extra: int, reason: str):
    """Cover events [start, cut): a summary in ``start``'s slot, the others SPILLED behind a handle of
    ``p.handle_tokens``. ``extra``: summarizer input beyond the span (previous summary / overlap).
    Returns (changes, SummaryCall, summary tokens)."""
    span = sum(view.tokens[i] for i in range(start, cut))
    bpt = trace.bytes_per_token
    instruction = estimate_tokens(len(SUMMARIZER_INSTRUCTION.encode()), bpt)
    out = min(max(round(p.summary_ratio * (extra + span)), p.summary_min_tokens), p.summary_max_tokens)
    handle = p.handle_tokens
    changes = [Change(start, SUMMARIZED, out, round(out * (bpt or 4.0)), reason)]
    changes += [
        Change(i, SPILLED, handle, round(handle * (bpt or 4.0)), "spilled") for i in range(start + 1, cut)
    ]
    return changes, SummaryCall(instruction + extra + span, out), out


@register
@dataclass(frozen=True)
class AdkEventsCompaction(Policy):
    """Every compaction_interval turns (with overlap_size), or at token_threshold keeping
    event_retention_size events, summarize; the raw events stay recoverable (Google ADK)."""

    compaction_interval: int = 5
    overlap_size: int = 1
    token_threshold: int | None = None
    event_retention_size: int | None = None
    handle_tokens: int = 4
    summary_ratio: float = 0.1
    summary_min_tokens: int = 256
    summary_max_tokens: int = 2048

    name = "adk_events_compaction"
    acts_before_call = True
    spills = True
    conformance_settings = (
        {"compaction_interval": 2, "overlap_size": 1, "summary_min_tokens": 10},
        {"compaction_interval": 1000, "token_threshold": 800, "event_retention_size": 3},
        {"compaction_interval": 3, "overlap_size": 0, "handle_tokens": 0},
    )

    def __post_init__(self) -> None:
        check_int(self.name, "compaction_interval", self.compaction_interval, 1)
        check_int(self.name, "overlap_size", self.overlap_size, 0)
        if (self.token_threshold is None) != (self.event_retention_size is None):
            raise ConfigError(
                f"policy '{self.name}': token_threshold={self.token_threshold!r} and "
                f"event_retention_size={self.event_retention_size!r} must be set together or both null"
            )
        if self.token_threshold is not None:
            check_int(self.name, "token_threshold", self.token_threshold, 1)
            check_int(self.name, "event_retention_size", self.event_retention_size, 0)
        check_int(self.name, "handle_tokens", self.handle_tokens, 0)
        check_summary_knobs(self)

    def start(self, trace: Trace) -> _State:
        return _State(trace)

    def before_call(self, trace: Trace, state: _State, view: View, call: int, status=None):
        turns = state.turns
        completed = bisect_left(turns, view.n)  # assistant events in view: their turns completed
        start = state.covered_upto
        if completed - state.turns_done >= self.compaction_interval:
            cut = view.n  # every completed turn (the view ends where the next call's turn begins)
            first_overlap = max(0, state.turns_done - self.overlap_size)
            lo = turns[first_overlap] if first_overlap < state.turns_done else start
            overlap = int(trace.arrays.prefix[start] - trace.arrays.prefix[lo])  # original sizes
            reason = "compaction"
        elif (
            self.token_threshold is not None
            and status is not None
            and status.last_input is not None
            and status.last_input >= self.token_threshold
        ):
            f = state.frame
            msgs = f.messages[: f.in_view(view.n)]
            keep = self.event_retention_size or 0
            if len(msgs) <= keep:
                return ()
            cut = msgs[len(msgs) - keep] if keep else view.n
            while cut > start and cut < view.n and not f.valid(cut):
                cut -= 1
            overlap, reason = 0, "token-compaction"
        else:
            return ()
        if cut <= start:
            return ()
        changes, summary, _ = compact_span(self, trace, view, start, cut, overlap, reason)
        state.covered_upto = cut
        state.turns_done = bisect_left(turns, cut)
        return Decision(changes, summary)
