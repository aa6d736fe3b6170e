"""``openhands_hard_context_reset``: the OpenHands SDK's hard context reset (openhands-sdk 1.58.2,
``LLMSummarizingCondenser.hard_context_reset``) on its own.

Trigger: only the agent's condensation request after a context-window rejection (``on_overflow``; the
SDK appends a ``CondensationRequest`` and asks the condenser again). Kept set: the system prompt (with its
tools: one ``SystemPromptEvent``). Transform of the rest: every other event of the view, the previous
summary included, is summarized in one call; the summary is inserted right after the system prompt.
The SDK asks again after each rejection; a request that no longer shrinks ends the run:
``condensation-insufficient``. ``hard_context_reset_max_retries`` (5) and
``hard_context_reset_context_scaling`` (0.8) only act when the summarizer fails, which ctxsim's never does
(kept for the constructor's names). The summary's size is ctxsim's rule, as for
``openhands_llm_summarizing``. State rewrite; what the summary drops is lost. Cache: each reset rewrites
everything after the system prompt. ``openhands_llm_summarizing variant=sdk_v1`` falls back to the same
reset when a hard reason finds nothing to forget.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.core.types import Trace
from sim.policies.base import Decision, Plan, Policy, RunStatus, SummaryCall, View, check_int, register
from sim.policies.openhands_llm_summarizing import (
    SdkState,
    condensed,
    enforce,
    sdk_changes,
    sdk_raw,
    sdk_system,
)
from sim.policies.openhands_memory import EV, INSUFFICIENT, events_of
from sim.policies.openhands_plan import sdk_view_plan
from sim.util.errors import ConfigError


@register
@dataclass(frozen=True)
class OpenHandsHardContextReset(Policy):
    """On a context-length error: summarize everything after the system prompt."""

    hard_context_reset_max_retries: int = 5
    hard_context_reset_context_scaling: float = 0.8
    summary_ratio: float = 0.1
    summary_min_tokens: int = 256
    summary_max_tokens: int = 2048

    name = "openhands_hard_context_reset"
    size_grid = {
        "hard_context_reset_context_scaling": (0.5, 0.7, 0.8, 0.9)
    }  # ``ctxsim size --policy openhands_hard_context_reset``'s default grid
    recovers = True
    overflow_retries = 1000
    max_event_length = 1 << 62  # the first attempt sends every event whole

    def __post_init__(self) -> None:
        check_int(self.name, "hard_context_reset_max_retries", self.hard_context_reset_max_retries, 1)
        c = self.hard_context_reset_context_scaling
        if not (isinstance(c, int | float) and not isinstance(c, bool) and 0 < c < 1):
            raise ConfigError(
                f"policy '{self.name}': hard_context_reset_context_scaling={c!r} is not in (0, 1)"
            )
        r = self.summary_ratio
        if not (isinstance(r, int | float) and not isinstance(r, bool) and 0 < r <= 1):
            raise ConfigError(f"policy '{self.name}': summary_ratio={r!r} is not a number in (0, 1]")
        check_int(self.name, "summary_min_tokens", self.summary_min_tokens, 1)
        check_int(self.name, "summary_max_tokens", self.summary_max_tokens, self.summary_min_tokens)

    acts_before_call = True  # the view's properties, every call (the reset itself only on a rejection)
    plans = True  # ``plan``: the properties read the events' structure alone (a rejection: the loop)

    def start(self, trace: Trace) -> SdkState:
        return SdkState()

    def before_call(self, trace: Trace, state: SdkState, view: View, call: int, status: RunStatus):
        """The SDK's view properties (planned by ``plan``: ``sim.policies.openhands_plan.sdk_view_plan``)."""
        entries = enforce(events_of(trace), sdk_raw(trace, events_of(trace), state, view))
        return sdk_changes(trace, state, view, entries)

    def plan(self, trace: Trace) -> Plan:
        return sdk_view_plan(trace)

    def on_overflow(self, trace: Trace, state: SdkState, view: View, call: int, status: RunStatus):
        info = events_of(trace)
        entries = enforce(info, sdk_raw(trace, info, state, view))
        system = trace.derived("openhands_sdk_system", sdk_system)
        keep = next((p + 1 for p, x in enumerate(entries) if x[0] == EV and x[1] == system), 0)
        gone = entries[keep:]
        if not gone:
            return Decision(stop=INSUFFICIENT)
        call_ = condensed(self, trace, info, state, gone, keep)
        changes = sdk_changes(trace, state, view, enforce(info, state.raw))
        summary = SummaryCall(call_.input_tokens, call_.output_tokens)
        if sum(ch.tokens - view.tokens[ch.index] for ch in changes) >= 0:
            return Decision(stop=INSUFFICIENT, summary=summary)  # no progress (the summary was made)
        return Decision(changes, summary)
