"""``letta_partial_evict``: Letta's compaction as letta 0.16.8 runs it (``letta_agent_v3`` with
``services/summarizer``: ``compact_messages``, ``summarize_via_sliding_window``, ``summarize_all``; the last
Letta server release under the name ``letta``).

Knobs (Letta's names and defaults): ``context_window`` (``LLMConfig.context_window``; null = the trace's
recorded window, else only the provider's rejection triggers), ``mode`` ``sliding_window`` or ``all``
(``CompactionSettings.mode``; the ``self_compact_*`` modes, which have the agent model summarize itself,
are not modelled), ``sliding_window_percentage`` 0.3 (``summarizer_settings.partial_evict_summarizer_
percentage``). Summary size: ctxsim's rule, clamp(``summary_ratio`` x the summarized messages,
``summary_min_tokens``, ``summary_max_tokens``), 0.1 / 256 / 2,048 (Letta's is what the model writes;
its ``clip_chars`` 50,000 never binds at these sizes and is not modelled).

- In-context messages: message 0 is the system prompt (the ``system`` events, never evicted), then the
  summary message when there is one, then every other event in view not evicted. The ``tools`` events
  are the agent's tool schemas, sent beside the messages: in the request and the post-compaction
  count (``count_tokens_with_tools``), not in the sliding window's count nor the system-prompt check.
- Trigger: after a step, when its usage total (prompt + completion: the previous call's input and
  output) exceeds ``int(0.9 x context_window)`` (``get_compaction_trigger_threshold``, every model), the
  messages are compacted at the end of that step: with its output and tool results, without a user
  message that came after them (it opens the next turn, Letta's next ``step()`` input, and is appended
  after the compaction); and when the provider rejects a request as too long
  (``ContextWindowExceededError``: compact the whole request and retry, up to
  ``summarizer_settings.max_summarizer_retries`` = 3 times; a fourth rejection ends the run).
- ``sliding_window``: the cut starts at ``sliding_window_percentage`` of the messages and grows in steps
  of 0.10 (float arithmetic as Letta's): cut = round(fraction x messages), moved back to the last
  assistant message at or before it; until system + messages from the cut on (no tools) are below
  ``(1 - sliding_window_percentage) x context_window``. Messages [1, cut) — the previous summary
  included — are summarized; the rest are kept. No assistant message found, or the cut at the last
  message: Letta raises and falls back to ``all``.
- Fallback: when system, tools and the kept messages (without the new summary) still reach the trigger,
  ``summarize_all`` runs on them: the new summary replaces them all and the sliding window's own summary
  is discarded (both summarizer calls are metered).
- ``all``: every message but the system prompt is summarized.
- A system prompt (tools not counted) at or above ``context_window``: after the summaries (metered) the
  request is still over the trigger and Letta raises ``SystemPromptTokenExceededError``; the agent loop
  stops (``context_window_overflow_in_system_prompt``). ctxsim: the run ends ``context-overflow`` before
  the call is sent.
- Transform: the summarized messages are SUMMARIZED; the summary message (index 1 in Letta) sits in the
  slot of the first message ever summarized, with the summary's tokens (Letta's system-alert framing
  around it is not sized apart). Evicted messages stay in Letta's recall memory, searchable with
  ``conversation_search``; ctxsim's mock model does not search it (no handle in view): lost from view.
- A state rewrite of the in-context messages. Cache: each compaction rewrites the prefix from the
  summary slot on.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.core.types import ItemState, Trace
from sim.cost.tokens import estimate_tokens
from sim.policies.base import Change, Decision, Policy, SummaryCall, View, check_int, register
from sim.policies.llm_summary import SUMMARIZER_INSTRUCTION, check_summary_knobs
from sim.util.errors import ConfigError

SUMMARIZED = ItemState.SUMMARIZED
TRIGGER_MULTIPLIER = 0.9  # letta.constants.SUMMARIZATION_TRIGGER_MULTIPLIER
MODES = ("sliding_window", "all")
SYSTEM, SUMMARY = -1, -2
OVERFLOW = "context-overflow"


class _State:
    __slots__ = ("carrier", "summary_tokens", "pending")

    def __init__(self) -> None:
        self.carrier = -1  # the slot of the summary message
        self.summary_tokens = 0
        self.pending = False  # the last step's usage exceeded the trigger


@register
@dataclass(frozen=True)
class LettaPartialEvict(Policy):
    """After a step over 0.9 x context_window, summarize the oldest messages (sliding window, cut back
    to an assistant message) until the rest fits 70% of the window; summarize all as the fallback."""

    context_window: int | None = None
    mode: str = "sliding_window"
    sliding_window_percentage: float = 0.3
    summary_ratio: float = 0.1
    summary_min_tokens: int = 256
    summary_max_tokens: int = 2048

    name = "letta_partial_evict"
    size_grid = {
        "sliding_window_percentage": (0.1, 0.2, 0.3, 0.5)
    }  # ``ctxsim size --policy letta_partial_evict``'s default grid
    size_harsher = frozenset({"sliding_window_percentage"})  # larger acts earlier
    acts_before_call = True
    recovers = True
    overflow_retries = 3  # letta_agent_v3: compact and retry while attempt < max_summarizer_retries (3)
    checks_after_call = True
    conformance_settings = (
        {"context_window": 2500, "summary_min_tokens": 10},
        {"context_window": 4000, "sliding_window_percentage": 0.5, "summary_min_tokens": 10},
        {"context_window": 3000, "mode": "all", "summary_min_tokens": 10},
    )

    def __post_init__(self) -> None:
        if self.context_window is not None:
            check_int(self.name, "context_window", self.context_window, 1)
        if self.mode not in MODES:
            raise ConfigError(f"policy '{self.name}': mode={self.mode!r} is not one of {', '.join(MODES)}")
        r = self.sliding_window_percentage
        if not (isinstance(r, int | float) and not isinstance(r, bool) and 0 <= r <= 1):
            raise ConfigError(
                f"policy '{self.name}': sliding_window_percentage={r!r} is not a number in [0, 1]"
            )
        check_summary_knobs(self)

    def window(self, trace: Trace) -> int | None:
        return self.context_window if self.context_window is not None else trace.context_window

    def start(self, trace: Trace) -> _State:
        return _State()

    def after_call(self, trace: Trace, state: _State, view: View, call: int, status):
        w = self.window(trace)
        state.pending = w is not None and status.last_input + status.last_output > int(w * TRIGGER_MULTIPLIER)
        return None

    def before_call(self, trace: Trace, state: _State, view: View, call: int, status=None):
        if not state.pending:
            return ()
        state.pending = False
        # the post-step compaction runs at the end of the previous step: its output and tool results are
        # in, a user message after them opens the next turn (Letta's next step() input) and comes after
        start = trace.calls[call - 1].view_end if call > 0 else 0
        n = next((i for i in range(start, view.n) if trace.events[i].kind == "user"), view.n)
        return self.compact(trace, state, view, n) or ()

    def on_overflow(self, trace: Trace, state: _State, view: View, call: int, status=None):
        return self.compact(trace, state, view)

    def compact(self, trace: Trace, state: _State, view: View, n: int | None = None) -> Decision | None:
        """Compact the in-context messages among events [0, n) (default: the whole view)."""
        ev = trace.events
        n = view.n if n is None else n
        system = [i for i in range(n) if ev[i].kind == "system"]
        tool_tokens = sum(view.tokens[i] for i in range(n) if ev[i].kind == "tools")
        msgs = [i for i in range(n) if ev[i].kind not in ("system", "tools") and view.state[i] != SUMMARIZED]
        # Letta's list: [system, summary?, *msgs] (SYSTEM, SUMMARY stand for those two); positions below
        # are in that list
        lst = [SYSTEM] + ([SUMMARY] if state.carrier >= 0 else []) + msgs
        size = {i: view.tokens[i] for i in msgs}
        size[SUMMARY] = state.summary_tokens
        sys_tokens = sum(view.tokens[i] for i in system)
        w = self.window(trace) or 0
        trigger = int(w * TRIGGER_MULTIPLIER)
        calls: list[SummaryCall] = []
        cut = self.sliding_cut(trace, lst, size, sys_tokens, w) if self.mode == "sliding_window" else None
        if cut is None:  # mode all, or the sliding window raised: summarize everything but the system prompt
            covered, kept = lst[1:], []
        else:
            covered, kept = lst[1:cut], lst[cut:]
        calls.append(self.summary_call(trace, covered, size, sys_tokens))
        if cut is not None and sys_tokens + tool_tokens + sum(size[i] for i in kept) >= trigger:
            covered, kept = lst[1:], []  # summarize_all over the kept messages; the first summary is lost
            calls.append(self.summary_call(trace, lst[cut:], size, sys_tokens))
        summary = calls[0] if len(calls) == 1 else calls
        # compact_messages' last check: the system prompt alone fills the window
        if self.window(trace) is not None and sys_tokens >= w:
            return Decision((), summary, stop=OVERFLOW)
        out = calls[-1].output_tokens
        covered = [i for i in covered if i != SUMMARY]
        carrier = state.carrier if state.carrier >= 0 else (covered[0] if covered else -1)
        if carrier < 0:
            return None
        bpt = trace.bytes_per_token or 4.0
        changes = [Change(i, SUMMARIZED, 0, 0, "summarized") for i in covered if i != carrier]
        changes.append(Change(carrier, SUMMARIZED, out, round(out * bpt), "summary"))
        state.carrier, state.summary_tokens = carrier, out
        return Decision(sorted(changes, key=lambda c: c.index), summary)

    def sliding_cut(self, trace: Trace, lst: list[int], size: dict, sys_tokens: int, w: int) -> int | None:
        """``summarize_via_sliding_window``'s cut (a position in ``lst``), or None where Letta raises."""
        ev = trace.events
        total = len(lst)
        goal = (1 - self.sliding_window_percentage) * w
        approx = w
        fraction = self.sliding_window_percentage
        idx = None
        while approx >= goal and fraction < 1.0:
            fraction += 0.10
            cutoff = round(fraction * total)
            idx = next((i for i in range(min(cutoff, total - 1), 0, -1) if self._assistant(ev, lst[i])), None)
            if idx is None:
                continue
            approx = sys_tokens + sum(size[i] for i in lst[idx:])
        if idx is None or fraction >= 1.0 or idx >= total - 1:
            return None
        return idx

    @staticmethod
    def _assistant(ev, i: int) -> bool:
        return i >= 0 and ev[i].kind == "assistant"  # the system prompt and the summary are not

    def summary_call(self, trace: Trace, covered: list[int], size: dict, sys_tokens: int) -> SummaryCall:
        span = sum(size[i] for i in covered)
        out = min(max(round(self.summary_ratio * span), self.summary_min_tokens), self.summary_max_tokens)
        instruction = estimate_tokens(len(SUMMARIZER_INSTRUCTION.encode()), trace.bytes_per_token)
        return SummaryCall(instruction + span, out)
