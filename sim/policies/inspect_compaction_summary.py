"""``inspect_compaction_summary``: Inspect's ``CompactionSummary`` (inspect-ai 0.3.285) under its
``compaction()`` handler (trigger, passes, ``compaction-insufficient``: ``sim.policies.inspect_handler``).

Knobs: ``threshold`` 0.9 (Inspect's name and default); the summary's size is ctxsim's rule,
clamp(``summary_ratio`` x the summarized messages, ``summary_min_tokens``, ``summary_max_tokens``) —
0.1 / 256 / 2,048 as for the seed engine (Inspect's summary is whatever the model writes). Not modelled:
``model`` (the summarizer is the mock model), ``instructions`` and ``prompt`` (their text only changes the
summarizer's input), ``memory`` (acts only with the memory tool).

- Over threshold the conversation from the last summary message on (the previous summary and every
  message since; the first time, every message after the input) is summarized; the request becomes
  system + the sample's input (the task, kept verbatim) + one summary message. Summarized messages are
  SUMMARIZED; the summary message sits in the slot of the first message ever summarized and weighs the
  summary plus Inspect's fixed framing around it (275 bytes: "[CONTEXT COMPACTION SUMMARY]", the note
  that the framework wrote it, "Please continue ...").
- The summarizer call: the system and input messages, the summarized messages, and Inspect's default
  summary prompt (6,090 bytes); its output the size rule. (Inspect shrinks large tool outputs in it when
  the summarizer's window is known; not modelled — it changes only that call's input.)
- Still over threshold after a summary: the handler summarizes the summary again (a second metered call)
  while that shrinks it; still over -> ``compaction-insufficient`` (a task larger than the threshold).
- A state rewrite: the summary replaces the conversation in the compacted input; the originals stay in
  the agent's history but are never sent again (not recoverable). Cache: each summary rewrites the
  prefix from the summary slot on.
- Sizing: whole runs are planned for the engine's batch path by ``inspect_handler.plan_handler`` (the
  same ``compaction``; tests/test_plans_inspect.py holds it to ``before_call``).
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.core.types import Trace
from sim.policies.anthropic_server_compaction import check_summary_knobs
from sim.policies.base import SummaryCall, register
from sim.policies.inspect_handler import (
    SUMMARIZED,
    HandlerState,
    InspectCompaction,
    Work,
    partition,
    text_tokens,
)

WRAPPER_BYTES = 275  # the summary message's text around the completion
PROMPT_BYTES = 6090  # DEFAULT_SUMMARY_PROMPT with no addendums


@dataclass(frozen=True)
class SummaryKnobs(InspectCompaction):
    summary_ratio: float = 0.1
    summary_min_tokens: int = 256
    summary_max_tokens: int = 2048

    def __post_init__(self) -> None:
        super().__post_init__()
        check_summary_knobs(self)

    def compact(self, trace: Trace, st: HandlerState, work: Work, n: int):
        system, inp, conv = partition(trace, st, work, n)
        start = conv.index(st.carrier) if st.carrier in conv else 0
        covered = conv[start:]
        span = sum(work.tokens(i) for i in covered)
        out = min(max(round(self.summary_ratio * span), self.summary_min_tokens), self.summary_max_tokens)
        prompt = text_tokens(trace, PROMPT_BYTES)
        call = SummaryCall(sum(work.tokens(i) for i in system + inp) + span + prompt, out)
        if not covered:  # nothing to put the summary in (only a task over the threshold): over for good
            work.total += out + text_tokens(trace, WRAPPER_BYTES)
            return call
        carrier = st.carrier if st.carrier >= 0 else covered[0]
        for i in conv:
            if i != carrier:
                work.set(i, SUMMARIZED, 0, 0, "summarized")
        tokens = out + text_tokens(trace, WRAPPER_BYTES)
        work.set(carrier, SUMMARIZED, tokens, round(tokens * (trace.bytes_per_token or 4.0)), "summary")
        st.carrier, st.summary_tokens = carrier, tokens
        return call


@register
@dataclass(frozen=True)
class InspectCompactionSummary(SummaryKnobs):
    """Inspect CompactionSummary: over threshold, the conversation since the last summary becomes one
    summary after system and the task; a summary still over the threshold ends the run."""

    name = "inspect_compaction_summary"
    size_grid = {
        "threshold": (0.5, 0.7, 0.8, 0.9, 0.95)
    }  # ``ctxsim size --policy inspect_compaction_summary``'s default grid
    conformance_settings = (
        {"threshold": 2000, "summary_min_tokens": 10},
        {"threshold": 3000, "summary_ratio": 0.5, "summary_min_tokens": 10},
    )
