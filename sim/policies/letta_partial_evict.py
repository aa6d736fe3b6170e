"""``letta_partial_evict``: Letta (MemGPT) partial eviction of the message buffer (POLICIES.md §4).

- Buffer: the messages in view (every event but ``system`` / ``tools``, which stand in for Letta's
  system prompt and core memory) not yet evicted, plus the running summary.
- Warning: once the previous request's provider-reported input exceeds ``warning_fraction`` x
  ``context_window`` (Letta: 75%), the run records a ``memory-pressure`` warning (once until the next
  eviction). Letta also inserts a short system alert into the buffer; its tokens are not modelled
  (chosen).
- Trigger: a context-window overflow (``on_overflow``), and proactively before a call whose view exceeds
  ``proactive_fraction`` x ``context_window`` (default 1.0: Letta counts the buffer itself and evicts
  when it no longer fits). ``context_window`` null means the trace's recorded window; when that is
  unknown too, only overflow triggers.
- Cut: the oldest messages until their tokens reach ``evict_fraction`` of the buffer's tokens (MemGPT's
  ~75% of tokens; Letta's newer ~30% of messages is not the rule used here — chosen, a knob), always
  keeping the newest ``keep_last_messages`` messages (chosen default 3: "the last few"); the cut moves
  back (older) to a boundary that never separates a tool call from its result. Nothing to evict -> no
  reduction. The task message is not protected (as in Letta).
- Transform: the evicted messages are summarized recursively into one summary message (SUMMARIZED, in
  the slot of the first evicted event, with the summary's tokens); the other evicted messages move to
  recall memory and stay searchable (``conversation_search``): SPILLED, each with a handle of
  ``handle_tokens`` tokens (a ctxsim choice standing for the searchable copy). Their facts reach the
  agent by retrieval, not through the summary (only the slot's own event feeds the summary's facts).
- Summarizer: one metered call; input = the instruction + the previous summary + the newly evicted
  messages as they stand in view; output clamp(``summary_ratio`` x that, ``summary_min_tokens``,
  ``summary_max_tokens``) — Letta fixes no size here; the seed engine's values.
- A state rewrite of the in-context buffer (recall memory keeps every message). Cache: each eviction
  rewrites the prefix from the summary slot on.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.errors import ConfigError
from sim.policies.adk_events_compaction import compact_span
from sim.policies.base import AfterCall, Change, Decision, Policy, View, check_int, register
from sim.policies.llm_summary import SummaryState, check_summary_knobs
from sim.types import ItemState, Trace

SUMMARIZED = ItemState.SUMMARIZED


class _State(SummaryState):
    __slots__ = ("warned",)

    def __init__(self, trace: Trace) -> None:
        super().__init__(trace)
        self.covered_upto = 0  # events before this are evicted (messages only; system/tools never)
        self.warned = False


def _fraction(p, knob: str) -> None:
    r = getattr(p, knob)
    if not (isinstance(r, int | float) and not isinstance(r, bool) and 0 < r <= 1):
        raise ConfigError(f"policy '{p.name}': {knob}={r!r} is not a number in (0, 1]")


@register
@dataclass(frozen=True)
class LettaPartialEvict(Policy):
    """On overflow, summarize the oldest evict_fraction of the buffer's tokens into a recursive summary;
    the evicted messages stay searchable (Letta/MemGPT)."""

    context_window: int | None = None
    warning_fraction: float = 0.75
    proactive_fraction: float = 1.0
    evict_fraction: float = 0.75
    keep_last_messages: int = 3
    handle_tokens: int = 4
    summary_ratio: float = 0.1
    summary_min_tokens: int = 256
    summary_max_tokens: int = 2048

    name = "letta_partial_evict"
    acts_before_call = True
    recovers = True
    spills = True
    checks_after_call = True
    conformance_settings = (
        {"context_window": 1500, "keep_last_messages": 2, "summary_min_tokens": 10},
        {"context_window": 3000, "evict_fraction": 0.3, "proactive_fraction": 0.7, "handle_tokens": 0},
    )

    def __post_init__(self) -> None:
        if self.context_window is not None:
            check_int(self.name, "context_window", self.context_window, 1)
        for knob in ("warning_fraction", "proactive_fraction", "evict_fraction"):
            _fraction(self, knob)
        check_int(self.name, "keep_last_messages", self.keep_last_messages, 0)
        check_int(self.name, "handle_tokens", self.handle_tokens, 0)
        check_summary_knobs(self)

    def window(self, trace: Trace) -> int | None:
        return self.context_window if self.context_window is not None else trace.context_window

    def start(self, trace: Trace) -> _State:
        return _State(trace)

    def before_call(self, trace: Trace, state: _State, view: View, call: int, status=None):
        w = self.window(trace)
        if w is None or view.total <= self.proactive_fraction * w:
            return ()
        return self.evict(trace, state, view) or ()

    def on_overflow(self, trace: Trace, state: _State, view: View, call: int, status=None):
        return self.evict(trace, state, view)

    def after_call(self, trace: Trace, state: _State, view: View, call: int, status) -> AfterCall | None:
        w = self.window(trace)
        if w is None or state.warned or status.last_input is None:
            return None
        if status.last_input > self.warning_fraction * w:
            state.warned = True
            return AfterCall(warnings=("memory-pressure",))
        return None

    def evict(self, trace: Trace, state: _State, view: View) -> Decision | None:
        f = state.frame
        live = [i for i in f.messages[: f.in_view(view.n)] if i >= state.covered_upto]
        limit = len(live) - self.keep_last_messages  # at most this many messages evicted
        if limit <= 0:
            return None
        buffer = state.summary_tokens + sum(view.tokens[i] for i in live)
        goal = self.evict_fraction * buffer - state.summary_tokens
        count, acc = 0, 0
        while count < limit and acc < goal:
            acc += view.tokens[live[count]]
            count += 1
        while count > 0 and count < len(live) and not f.valid(live[count]):
            count -= 1
        if count <= 0:
            return None
        start, cut = live[0], (live[count] if count < len(live) else view.n)
        changes, summary, out = compact_span(
            self, trace, view, start, cut, state.summary_tokens, "eviction-summary"
        )
        if state.carrier >= 0:  # recursive: the new summary replaces the old one in its slot
            changes = self._fold(trace, state, changes)
        carrier = state.carrier if state.carrier >= 0 else start
        state.carrier, state.covered_upto, state.summary_tokens = carrier, cut, out
        state.warned = False
        return Decision(changes, summary)

    def _fold(self, trace: Trace, state: _State, changes):
        """Keep the summary in its first slot: move the new summary there, the new span's first event
        becomes a spilled handle like the others."""
        new, rest = changes[0], list(changes[1:])
        bpt = trace.bytes_per_token or 4.0
        h = self.handle_tokens
        rest.insert(0, Change(new.index, ItemState.SPILLED, h, round(h * bpt), "spilled"))
        return [Change(state.carrier, SUMMARIZED, new.tokens, new.nbytes, new.reason), *rest]
