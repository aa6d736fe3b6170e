"""``langchain_clear_tool_uses``: LangChain ``ContextEditingMiddleware`` with ``ClearToolUsesEdit``
(langchain 1.5.2). Held call for call to the installed middleware in a real ``create_agent`` graph by
``make oracle-langchain``.

Knobs (LangChain's names; ``trigger`` -> ``trigger_tokens``): ``trigger_tokens`` 100,000, ``keep`` 3,
``clear_at_least`` 0, ``exclude_tools`` none, ``clear_tool_inputs`` false; placeholder ``[cleared]``;
``token_count``.

- Trigger: before each model call the middleware counts the request's messages, which are never
  edited in the state, so the count is unedited. ``token_count`` ``framework`` (default: LangChain's
  ``token_count_method="approximate"``, a local count): the messages only, no system prompt, no tool
  specs (ctxsim's per-event sizes stand for the approximation). ``provider``: the model's count
  (``token_count_method="model"``): system prompt, tools and messages, here the whole request with the
  call's residual. It fires when the count exceeds ``trigger_tokens`` and, since the history only
  grows, on every call after.
- Kept: the newest ``keep`` tool results (counted over all tool results); results of excluded tools.
- Transform: older tool results, oldest first, become ``[cleared]``; with ``clear_at_least`` > 0 the
  loop stops as soon as at least that many tokens are reclaimed (LangChain's reading of the knob, unlike
  Anthropic's all-or-nothing gate). ``clear_tool_inputs``: LangChain empties the call's arguments; the
  canonical assistant event does not separate text from arguments, so the whole issuing assistant
  event becomes ``[tool input cleared]`` (an over-estimate). Pairing kept (nothing DROPPED).
- ``exclude_tools``: canonical events carry no tool names; a name matches a result whose issuing
  assistant event's text starts with it (null or [] = nothing excluded).
- View per call: the edit is applied to a deep copy of the messages for that one request; the state
  keeps the originals. Every call over the trigger therefore re-clears the same items (a known
  cache-cost issue of the middleware). ctxsim models it by re-issuing the change of every cleared item
  on every such call, so each call's ``first_changed`` is the oldest cleared item: the cache is
  counted as rewritten from there on every call.
- Recoverability: originals stay in the agent state but the model has no handle: lost from view.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.core.types import Trace
from sim.information.state import issuer_of
from sim.policies.anthropic_clear_tool_uses import (
    INPUT_PLACEHOLDER,
    MASKED,
    ClearToolUsesKnobs,
    candidates,
    excluded,
    text_size,
    unedited_tokens,
)
from sim.policies.autogen_token_limited import check_token_count
from sim.policies.base import Change, View, register

PLACEHOLDER = "[cleared]"


@register
@dataclass(frozen=True)
class LangchainClearToolUses(ClearToolUsesKnobs):
    """LangChain ClearToolUsesEdit: a per-call copy with old tool results cleared, re-done every call."""

    token_count: str = "framework"

    name = "langchain_clear_tool_uses"

    def __post_init__(self) -> None:
        super().__post_init__()
        check_token_count(self.name, self.token_count)

    def before_call(self, trace: Trace, state, view: View, call: int, status=None) -> list[Change]:
        counted = unedited_tokens(trace, view, call)
        if self.token_count == "framework":  # the request's messages only
            counted -= instruction_tokens(trace, view.n) + int(trace.arrays.residual[call])
        if counted <= self.trigger_tokens:
            return []
        ptok, pbytes = text_size(trace, PLACEHOLDER)
        itok, ibytes = text_size(trace, INPUT_PLACEHOLDER)
        issuers = trace.derived("issuers", issuer_of)
        events = trace.events
        changes: dict[int, Change] = {}
        reclaimed = 0  # against the unedited copy, as the middleware counts
        for i in candidates(trace, view, self.keep):
            if self.clear_at_least > 0 and reclaimed >= self.clear_at_least:
                break
            if excluded(trace, self.exclude_tools, i):
                continue
            changes[i] = Change(i, MASKED, ptok, pbytes, "clear")
            reclaimed += events[i].tokens - ptok
            a = issuers.get(i)
            if self.clear_tool_inputs and a is not None and a not in changes:
                changes[a] = Change(a, MASKED, itok, ibytes, "clear-input")
                reclaimed += events[a].tokens - itok
        return [changes[i] for i in sorted(changes)]


def _instruction_prefix(trace: Trace) -> list[int]:
    out = [0]
    for e in trace.events:
        out.append(out[-1] + (e.tokens if e.kind in ("system", "tools") else 0))
    return out


def instruction_tokens(trace: Trace, n: int) -> int:
    """Tokens of the system prompt and tool specs among events [0, n): the agent's system message."""
    return trace.derived("instruction_prefix", _instruction_prefix)[n]
