"""``codex_auto_compact``: Codex CLI's automatic compaction (``run_compact_task``, compacted history).

Knobs: ``context_window`` 272,000 (the GPT-5 family's window in Codex; ctxsim's choice of default),
``auto_compact_token_limit`` null = 90% of ``context_window`` (Codex's ``model_auto_compact_token_limit``),
``user_message_max_tokens`` 20,000 (Codex's budget for user messages kept verbatim); the summary size
rule is ctxsim's: clamp(``summary_ratio`` x covered tokens, ``summary_min_tokens``, ``summary_max_tokens``).

- Trigger: before a call, the request (view + the call's residual) reaches the limit. Codex checks the
  last response's total usage after a turn; the request about to be sent is that plus what was
  appended since (a slightly earlier trigger; ctxsim's choice).
- Kept: the initial context (``system`` and ``tools`` events); user messages newest first while they
  fit ``user_message_max_tokens``; the one that overflows is cut to the budget left (BOUNDED, head kept,
  sized proportionally); older ones are covered.
- Transform: everything else in view (assistant turns, tool results, the previous summary) is replaced
  by one handoff summary (a user message opening with Codex's bridge text), from one metered call whose
  input is the whole request plus the compaction prompt. The summary takes the slot of the first
  covered item (Codex puts it after the kept user messages; the slot only matters for the cache, which
  the rewrite breaks anyway).
- State rewrite (the history is replaced); covered items are not recoverable from the view.
- Cache: a compaction rewrites from the first changed item (usually the first assistant turn) on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sim.core.types import KIND_CODE, ItemState, Trace
from sim.policies.anthropic_clear_tool_uses import request_tokens, text_size
from sim.policies.anthropic_server_compaction import SummaryState, check_summary_knobs, messages, summarize
from sim.policies.base import Change, Plans, Policy, View, check_int, register
from sim.policies.sparse_plans import sparse_plans
from sim.util.errors import ConfigError

SUMMARY_PREFIX = (
    "Another language model started to solve this problem and produced a summary of its thinking process. "
    "You also have access to the state of the tools that were used by that language model. Use this to "
    "build on the work that has already been done and avoid duplicating work. Here is the summary produced "
    "by the other language model, use the information in this summary to assist with your own analysis:\n"
)
COMPACT_PROMPT = (
    "You are performing a CONTEXT CHECKPOINT COMPACTION. Create a handoff summary for another LLM that will "
    "resume the task. Include current progress and key decisions made, important context, constraints, or "
    "user preferences, what remains to be done (clear next steps), and any critical data, examples, or "
    "references needed to continue. Be concise, structured, and focused on helping the next LLM seamlessly "
    "continue the work."
)


@register
@dataclass(frozen=True)
class CodexAutoCompact(Policy):
    """Codex auto-compact: at 90% of the window, keep initial context + recent user messages + a summary."""

    context_window: int = 272000
    auto_compact_token_limit: int | None = None
    user_message_max_tokens: int = 20000
    summary_ratio: float = 0.1
    summary_min_tokens: int = 256
    summary_max_tokens: int = 2048

    name = "codex_auto_compact"
    size_grid = {
        "auto_compact_token_limit": (64000, 96000, 128000, 180000, 240000)
    }  # ``ctxsim size --policy codex_auto_compact``'s default grid
    acts_before_call = True
    plans = True
    conformance_settings = (
        {"context_window": 1000, "user_message_max_tokens": 30, "summary_min_tokens": 32},
        {"context_window": 4000, "auto_compact_token_limit": 1200, "summary_min_tokens": 64},
    )

    def __post_init__(self) -> None:
        check_int(self.name, "context_window", self.context_window, 1)
        if self.auto_compact_token_limit is not None:
            check_int(self.name, "auto_compact_token_limit", self.auto_compact_token_limit, 1)
        check_int(self.name, "user_message_max_tokens", self.user_message_max_tokens, 0)
        check_summary_knobs(self)
        if self.limit < 1:
            raise ConfigError(f"policy '{self.name}': context_window={self.context_window} gives a limit < 1")

    @property
    def limit(self) -> int:
        """Tokens at which compaction fires: the knob, else 90% of the window."""
        if self.auto_compact_token_limit is not None:
            return self.auto_compact_token_limit
        return self.context_window * 9 // 10

    def start(self, trace: Trace) -> SummaryState:
        return SummaryState()

    def before_call(self, trace: Trace, state: SummaryState, view: View, call: int, status=None):
        """Asked only where the request reaches ``limit`` by ``plan_many`` (``sparse_plans``)."""
        request = request_tokens(trace, view, call)
        if request < self.limit:
            return ()
        kind, user = trace.arrays.kind, KIND_CODE["user"]
        msgs = messages(trace, view)
        kept: set[int] = set()
        extra: list[Change] = []
        left = self.user_message_max_tokens
        for i in reversed(msgs):
            if kind[i] != user or left <= 0:
                continue
            t = view.tokens[i]
            kept.add(i)
            if t <= left:
                left -= t
                continue
            nbytes = view.nbytes[i] * left // t if t else 0  # head of the message, proportional
            extra.append(Change(i, ItemState.BOUNDED, left, nbytes, "user-message-cut"))
            left = 0
        covered = [i for i in msgs if i not in kept]
        instruction, _ = text_size(trace, COMPACT_PROMPT)
        decision = summarize(
            self, trace, state, view, covered, request + instruction, SUMMARY_PREFIX, tuple(extra)
        )
        if decision is None:
            return extra
        return decision

    def plan(self, trace: Trace):
        return self.plan_many([trace])[0]

    def plan_many(self, traces: Sequence[Trace]) -> Plans:
        return sparse_plans(self, traces, self.limit)
