"""``claude_code_auto_compact``: Claude Code's automatic ``/compact``.

Knobs: ``context_window`` 200,000, ``max_output_tokens`` 32,000 (Claude Code's default output cap),
``buffer_tokens`` 13,000; threshold = ``context_window`` - min(``max_output_tokens``, 20,000) -
``buffer_tokens`` (167,000 with the defaults). ``restore_files`` 5 and ``restore_file_max_tokens``
5,000: files re-attached after the summary. The summary size rule is ctxsim's: clamp(``summary_ratio``
x covered tokens, ``summary_min_tokens``, ``summary_max_tokens``).

- Trigger: before a call, the request (view + the call's residual) reaches the threshold (Claude Code
  checks the last response's usage; the request is that plus what was appended since).
- Kept: system prompt and tool definitions; "recently read files": canonical events do not say which
  tool results are file reads, so every tool result counts as one: of the ``restore_files`` newest tool
  results still visible, those of at most ``restore_file_max_tokens`` tokens stay verbatim in their
  slot (Claude Code re-reads them from disk and attaches them after the summary; larger ones are not
  restored, ctxsim's reading of the per-file limit).
- Transform: everything else in view, the previous summary included, is covered by one structured
  summary (a user message opening with Claude Code's continuation text) from one metered call whose
  input is the whole request plus the summarization prompt. The summary takes the slot of the first
  covered item.
- State rewrite (the session continues from the summary); covered items are not recoverable from the
  view (the transcript on disk is, but the agent has no handle).
- Cache: a compaction rewrites from the first message on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sim.core.types import KIND_CODE, Trace
from sim.policies.anthropic_clear_tool_uses import request_tokens, text_size
from sim.policies.anthropic_server_compaction import SummaryState, check_summary_knobs, messages, summarize
from sim.policies.base import Plans, Policy, View, check_int, register
from sim.policies.sparse_plans import sparse_plans
from sim.util.errors import ConfigError

OUTPUT_RESERVE_CAP = 20000
SUMMARY_PREFIX = (
    "This session is being continued from a previous conversation that ran out of context. "
    "The conversation is summarized below:\n"
)
COMPACT_PROMPT = (
    "Your task is to create a detailed summary of the conversation so far, paying close attention to the "
    "user's explicit requests and your previous actions. Sections: Primary Request and Intent, Key "
    "Technical Concepts, Files and Code Sections, Errors and fixes, Problem Solving, All user messages, "
    "Pending Tasks, Current Work, Optional Next Step."
)


@register
@dataclass(frozen=True)
class ClaudeCodeAutoCompact(Policy):
    """Claude Code auto-compact: near the window, a structured summary plus up to 5 recent files."""

    context_window: int = 200000
    max_output_tokens: int = 32000
    buffer_tokens: int = 13000
    restore_files: int = 5
    restore_file_max_tokens: int = 5000
    summary_ratio: float = 0.1
    summary_min_tokens: int = 256
    summary_max_tokens: int = 2048

    name = "claude_code_auto_compact"
    size_grid = {
        "buffer_tokens": (5000, 13000, 30000, 60000, 100000)
    }  # ``ctxsim size --policy claude_code_auto_compact``'s default grid
    size_harsher = frozenset({"buffer_tokens"})  # larger acts earlier
    acts_before_call = True
    plans = True
    conformance_settings = (
        {"context_window": 1200, "max_output_tokens": 100, "buffer_tokens": 100, "summary_min_tokens": 32},
        {
            "context_window": 3000,
            "max_output_tokens": 500,
            "buffer_tokens": 1000,
            "restore_files": 0,
            "summary_min_tokens": 64,
        },
    )

    def __post_init__(self) -> None:
        check_int(self.name, "context_window", self.context_window, 1)
        check_int(self.name, "max_output_tokens", self.max_output_tokens, 0)
        check_int(self.name, "buffer_tokens", self.buffer_tokens, 0)
        check_int(self.name, "restore_files", self.restore_files, 0)
        check_int(self.name, "restore_file_max_tokens", self.restore_file_max_tokens, 0)
        check_summary_knobs(self)
        if self.threshold < 1:
            raise ConfigError(
                f"policy '{self.name}': context_window={self.context_window} leaves a threshold of "
                f"{self.threshold} after the output reserve and buffer_tokens; it must be >= 1"
            )

    @property
    def threshold(self) -> int:
        return self.context_window - min(self.max_output_tokens, OUTPUT_RESERVE_CAP) - self.buffer_tokens

    def start(self, trace: Trace) -> SummaryState:
        return SummaryState()

    def before_call(self, trace: Trace, state: SummaryState, view: View, call: int, status=None):
        """Asked only where the request reaches ``threshold`` by ``plan_many`` (``sparse_plans``)."""
        request = request_tokens(trace, view, call)
        if request < self.threshold:
            return ()
        kind, result = trace.arrays.kind, KIND_CODE["tool_result"]
        msgs = messages(trace, view)
        recent = [i for i in msgs if kind[i] == result][::-1][: self.restore_files]
        restored = {i for i in recent if view.tokens[i] <= self.restore_file_max_tokens}
        covered = [i for i in msgs if i not in restored]
        instruction, _ = text_size(trace, COMPACT_PROMPT)
        return summarize(self, trace, state, view, covered, request + instruction, SUMMARY_PREFIX) or ()

    def plan(self, trace: Trace):
        return self.plan_many([trace])[0]

    def plan_many(self, traces: Sequence[Trace]) -> Plans:
        return sparse_plans(self, traces, self.threshold)
