"""``langchain_summarization``: LangChain's ``SummarizationMiddleware``.

Knobs (LangChain's names): ``trigger`` tokens (null = off; the messages / fraction forms are not
modelled), ``keep`` 20 messages, ``trim_tokens_to_summarize`` 4,000. The summary size rule is ctxsim's:
clamp(``summary_ratio`` x summarized tokens, ``summary_min_tokens``, ``summary_max_tokens``).

- Trigger: before a model call, the request (view + the call's residual; LangChain counts the state's
  messages approximately) reaches ``trigger``.
- Messages: the non-instruction events in view (``system`` and ``tools`` events are not state messages),
  the previous summary counting as one message. Kept: the newest ``keep``; the cutoff moves earlier
  while it falls on a tool result, so a call and its results stay together (LangChain's safe cutoff).
- Transform: the messages before the cutoff are removed from the state and replaced by one summary
  message ("Here is a summary of the conversation to date:") in the slot of the first summarized item.
  The summarizer only sees those messages trimmed to their newest ``trim_tokens_to_summarize`` tokens
  (``trim_messages`` strategy "last", partial message allowed): the newest messages up to and including
  the one crossing the budget are SUMMARIZED (extended back to the issuing call of any result among
  them); the older ones are DROPPED: removed without ever reaching the summarizer (a trimmed previous
  summary just vanishes: its slot holds 0 tokens and stays SUMMARIZED). Not modelled:
  ``start_on="human"`` (which can trim further), and the engine still offers the previous summary's
  kept facts to the new one even when that summary was trimmed away.
- Summary call: input = the seen tokens (at most ``trim_tokens_to_summarize``) + the prompt; output by
  the size rule over the seen items' tokens.
- State rewrite (RemoveMessage): persistent; removed items are not recoverable.
- Cache: each summarization rewrites from the first removed item on.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.information import issuer_of
from sim.policies.anthropic_clear_tool_uses import request_tokens, text_size
from sim.policies.anthropic_server_compaction import SummaryState, check_summary_knobs, messages, summarize
from sim.policies.base import Change, Policy, View, check_int, register
from sim.types import ItemState, Trace

SUMMARY_PREFIX = "Here is a summary of the conversation to date:\n\n"
SUMMARY_PROMPT = (
    "<role>Context Extraction Assistant</role> Extract the highest quality and most relevant context from "
    "the conversation history below, so the conversation can continue without the messages removed. "
    "Respond only with the extracted context."
)


@register
@dataclass(frozen=True)
class LangchainSummarization(Policy):
    """LangChain SummarizationMiddleware: over the trigger, all but the newest ``keep`` messages become a
    summary of their newest ``trim_tokens_to_summarize`` tokens."""

    trigger: int | None = None
    keep: int = 20
    trim_tokens_to_summarize: int = 4000
    summary_ratio: float = 0.1
    summary_min_tokens: int = 256
    summary_max_tokens: int = 2048

    name = "langchain_summarization"
    acts_before_call = True
    conformance_settings = (
        {"trigger": 800, "keep": 4, "summary_min_tokens": 32},
        {"trigger": 1200, "keep": 3, "trim_tokens_to_summarize": 200, "summary_min_tokens": 32},
    )

    def __post_init__(self) -> None:
        if self.trigger is not None:
            check_int(self.name, "trigger", self.trigger, 1)
        check_int(self.name, "keep", self.keep, 0)
        check_int(self.name, "trim_tokens_to_summarize", self.trim_tokens_to_summarize, 1)
        check_summary_knobs(self)

    def start(self, trace: Trace) -> SummaryState:
        return SummaryState()

    def before_call(self, trace: Trace, state: SummaryState, view: View, call: int, status=None):
        if self.trigger is None or request_tokens(trace, view, call) < self.trigger:
            return ()
        events = trace.events
        msgs = messages(trace, view)
        if state.carrier >= 0:
            msgs = [state.carrier, *msgs]
        cutoff = len(msgs) - self.keep
        while cutoff > 0 and events[msgs[cutoff]].kind == "tool_result":
            cutoff -= 1
        if cutoff <= 0:
            return ()
        span = msgs[:cutoff]
        # the summarizer sees the newest messages of the span up to trim_tokens_to_summarize
        seen_from, total = len(span), 0
        while seen_from > 0 and total < self.trim_tokens_to_summarize:
            seen_from -= 1
            total += view.tokens[span[seen_from]]
        issuers = trace.derived("issuers", issuer_of)
        first = span[seen_from]
        for i in span[seen_from:]:  # never separate a summarized result from its (dropped) call
            a = issuers.get(i)
            if a is not None and a < first:
                first = a
        seen = [i for i in span if i >= first]
        # trimmed messages leave without reaching the summarizer; a trimmed previous summary empties its
        # slot but the slot's event stays SUMMARIZED (it stood for the summary, not for a lone call)
        dropped = [
            Change(i, ItemState.SUMMARIZED if i == state.carrier else ItemState.DROPPED, 0, 0, "trimmed")
            for i in span
            if i < first
        ]
        basis = sum(view.tokens[i] for i in seen)
        instruction, _ = text_size(trace, SUMMARY_PROMPT)
        summary_in = min(basis, self.trim_tokens_to_summarize) + instruction
        if state.carrier >= 0 and state.carrier < first:  # the previous summary was trimmed away
            state.carrier = -1
        covered = [i for i in seen if i != state.carrier]
        if not covered:
            return dropped
        return (
            summarize(self, trace, state, view, covered, summary_in, SUMMARY_PREFIX, tuple(dropped), basis)
            or dropped
        )
