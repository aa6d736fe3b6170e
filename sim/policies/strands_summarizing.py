"""``strands_summarizing``: Strands Agents' ``SummarizingConversationManager`` (POLICIES.md §4).

- Messages: every event but ``system`` / ``tools`` ones (each tool result one message), the running
  summary counting as one message at the front.
- Trigger: a context-window overflow (``on_overflow``), and proactively before a call whose view exceeds
  ``proactive_threshold`` x ``context_window``. ``context_window`` null (chosen default) means the trace's
  recorded window; when that is unknown too, only overflow triggers.
- Cut: the oldest max(1, int(``summary_ratio`` x messages)) messages, at most messages -
  ``preserve_recent_messages``; the split point moves forward past tool results so a result never loses
  its call. Nothing to do (too few messages, or no valid split) -> no reduction (Strands raises).
- The rest: summarized (SUMMARIZED) into one user message in the slot of the first covered event; the
  previous summary is among the oldest messages, so summaries are incremental. The task message is not
  protected (as in Strands). A state rewrite; originals not recoverable.
- Summary size (Strands does not fix one): clamp(``summary_size_ratio`` x covered tokens,
  ``summary_min_tokens``, ``summary_max_tokens``), the seed engine's values; summarizer input = the
  instruction + the covered messages (previous summary included).
- Cache: each reduction rewrites the prefix from the summary slot on.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.errors import ConfigError
from sim.policies.base import Change, Decision, Policy, SummaryCall, View, check_int, register
from sim.policies.llm_summary import SUMMARIZER_INSTRUCTION
from sim.policies.strands_sliding_window import Frame, frame
from sim.tokens import estimate_tokens
from sim.types import ItemState, Trace

SUMMARIZED = ItemState.SUMMARIZED


class _State:
    __slots__ = ("frame", "covered_upto", "carrier", "summary_tokens")

    def __init__(self, f: Frame) -> None:
        self.frame = f
        self.covered_upto = 0  # message events before this are summarized
        self.carrier = -1
        self.summary_tokens = 0


def _ratio(p, knob: str) -> None:
    r = getattr(p, knob)
    if not (isinstance(r, int | float) and not isinstance(r, bool) and 0 < r <= 1):
        raise ConfigError(f"policy '{p.name}': {knob}={r!r} is not a number in (0, 1]")


@register
@dataclass(frozen=True)
class StrandsSummarizing(Policy):
    """Summarize the oldest summary_ratio of messages, keeping preserve_recent_messages (Strands)."""

    summary_ratio: float = 0.3
    preserve_recent_messages: int = 10
    proactive_threshold: float = 0.7
    context_window: int | None = None
    summary_size_ratio: float = 0.1
    summary_min_tokens: int = 256
    summary_max_tokens: int = 2048

    name = "strands_summarizing"
    acts_before_call = True
    recovers = True
    conformance_settings = (
        {"context_window": 2000, "preserve_recent_messages": 2, "summary_min_tokens": 10},
        {"context_window": 5000, "summary_ratio": 0.5, "preserve_recent_messages": 3},
    )

    def __post_init__(self) -> None:
        _ratio(self, "summary_ratio")
        _ratio(self, "proactive_threshold")
        _ratio(self, "summary_size_ratio")
        check_int(self.name, "preserve_recent_messages", self.preserve_recent_messages, 0)
        if self.context_window is not None:
            check_int(self.name, "context_window", self.context_window, 1)
        check_int(self.name, "summary_min_tokens", self.summary_min_tokens, 1)
        check_int(self.name, "summary_max_tokens", self.summary_max_tokens, self.summary_min_tokens)

    def start(self, trace: Trace) -> _State:
        return _State(frame(trace))

    def before_call(self, trace: Trace, state: _State, view: View, call: int, status=None):
        window = self.context_window if self.context_window is not None else trace.context_window
        if window is None or view.total <= self.proactive_threshold * window:
            return ()
        return self.reduce(trace, state, view) or ()

    def on_overflow(self, trace: Trace, state: _State, view: View, call: int, status=None):
        return self.reduce(trace, state, view)

    def reduce(self, trace: Trace, state: _State, view: View) -> Decision | None:
        f = state.frame
        live = [i for i in f.messages[: f.in_view(view.n)] if i >= state.covered_upto]
        has_summary = state.carrier >= 0
        length = len(live) + has_summary
        count = min(max(1, int(length * self.summary_ratio)), length - self.preserve_recent_messages)
        split = count - has_summary  # position in ``live`` of the first message kept
        while 0 <= split < len(live) and not f.valid(live[split]):
            split += 1
        if split <= 0 or split >= len(live):
            return None
        covered = live[:split]
        start, cut = covered[0], live[split]
        span = sum(view.tokens[i] for i in covered)
        bpt = trace.bytes_per_token
        instruction = estimate_tokens(len(SUMMARIZER_INSTRUCTION.encode()), bpt)
        total = state.summary_tokens + span
        out = min(
            max(round(self.summary_size_ratio * total), self.summary_min_tokens), self.summary_max_tokens
        )
        carrier = state.carrier if has_summary else start
        changes = [Change(carrier, SUMMARIZED, out, round(out * (bpt or 4.0)), "summary")]
        changes += [Change(i, SUMMARIZED, 0, 0, "summarized") for i in covered if i != carrier]
        call = SummaryCall(instruction + total, out)
        state.carrier, state.covered_upto, state.summary_tokens = carrier, cut, out
        return Decision(changes, call)
