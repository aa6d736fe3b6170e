"""``langchain_clear_tool_uses``: LangChain ``ContextEditingMiddleware`` with ``ClearToolUsesEdit``
(langchain 1.5.2). Held call for call to the installed middleware in a real ``create_agent`` graph by
``make oracle-langchain``.

Knobs (the library's own names and defaults): ``ClearToolUsesEdit``'s ``trigger`` 100,000 tokens,
``clear_at_least`` 0, ``keep`` 3, ``clear_tool_inputs`` false, ``exclude_tools`` [] and ``placeholder``
``[cleared]``; ``ContextEditingMiddleware``'s ``token_count_method`` ``approximate`` | ``model``. The old
names ``trigger_tokens`` and ``token_count`` (``framework`` / ``provider``) are still taken, with a
deprecation warning.

- Trigger: before each model call the middleware counts the request's messages, which are never
  edited in the state, so the count is unedited. ``token_count_method`` ``approximate`` (default, a
  local count): the messages only, no system prompt, no tool specs (ctxsim's per-event sizes stand for
  the approximation). ``model`` (the chat model's count): system prompt, tools and messages, here the
  whole request with the call's residual. It fires when the count exceeds ``trigger`` and, since the
  history only grows, on every call after.
- Kept: the newest ``keep`` tool results (counted over all tool results); results of excluded tools;
  a result whose nearest earlier assistant message did not issue its call (LangChain looks for the call
  only there).
- Transform: older tool results, oldest first, become ``placeholder``; with ``clear_at_least`` > 0 the
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
  counted as rewritten from there on every call. A call whose count is not over the trigger (the
  model's count moves with the provider's residual, so it can fall back) sends every item as it is:
  what the previous copy cleared is restored.
- Recoverability: originals stay in the agent state but the model has no handle: lost from view.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field

from sim.core.types import ItemState, Trace
from sim.information.state import issuer_of
from sim.policies.anthropic_clear_tool_uses import (
    INPUT_PLACEHOLDER,
    MASKED,
    candidates,
    excluded,
    text_size,
    tool_results,
    unedited_tokens,
)
from sim.policies.base import Change, Policy, View, check_int, register
from sim.util.errors import ConfigError

PLACEHOLDER = "[cleared]"  # LangChain's DEFAULT_TOOL_PLACEHOLDER
TOKEN_COUNT_METHODS = ("approximate", "model")
VERBATIM = ItemState.VERBATIM


@register
@dataclass(frozen=True)
class LangchainClearToolUses(Policy):
    """LangChain ClearToolUsesEdit: a per-call copy with old tool results cleared, re-done every call."""

    trigger: int = 100000
    clear_at_least: int = 0
    keep: int = 3
    clear_tool_inputs: bool = False
    exclude_tools: tuple[str, ...] = field(default_factory=tuple)  # the YAML's []
    placeholder: str = PLACEHOLDER
    token_count_method: str = "approximate"

    name = "langchain_clear_tool_uses"
    size_grid = {
        "trigger": (40000, 60000, 80000, 100000, 150000),
        "keep": (1, 3, 5),
    }  # ``ctxsim size --policy langchain_clear_tool_uses``'s default grid
    acts_before_call = True
    knob_aliases = {
        "trigger_tokens": ("trigger", {}),
        "token_count": ("token_count_method", {"framework": "approximate", "provider": "model"}),
    }
    conformance_settings = (
        {"trigger": 800, "keep": 2},
        {"trigger": 800, "keep": 1, "clear_at_least": 500, "clear_tool_inputs": True},
        {"trigger": 500, "keep": 0, "exclude_tools": ["cmd 1"], "placeholder": "[gone]"},
    )

    def __post_init__(self) -> None:
        name = self.name
        check_int(name, "trigger", self.trigger, 1)
        check_int(name, "keep", self.keep, 0)
        check_int(name, "clear_at_least", self.clear_at_least, 0)
        if not isinstance(self.clear_tool_inputs, bool):
            raise ConfigError(
                f"policy '{name}': clear_tool_inputs={self.clear_tool_inputs!r} is not true or false"
            )
        names = self.exclude_tools
        if names is None:  # the old default: nothing excluded
            names = ()
        if not (isinstance(names, list | tuple) and all(isinstance(x, str) and x for x in names)):
            raise ConfigError(
                f"policy '{name}': exclude_tools={names!r} is not null or a list of non-empty tool names"
            )
        object.__setattr__(self, "exclude_tools", tuple(names))  # frozen and hashable
        if not isinstance(self.placeholder, str):
            raise ConfigError(f"policy '{name}': placeholder={self.placeholder!r} is not a string")
        if self.token_count_method not in TOKEN_COUNT_METHODS:
            raise ConfigError(
                f"policy '{name}': token_count_method={self.token_count_method!r} is not one of "
                f"{', '.join(TOKEN_COUNT_METHODS)}"
            )

    def start(self, trace: Trace) -> dict[int, Change]:
        return {}  # the items the previous call's copy cleared

    def before_call(self, trace: Trace, state: dict[int, Change], view: View, call: int, status=None):
        changes = self._clears(trace, view, call)
        events = trace.events
        restored = (
            []
            if state.keys() <= changes.keys()  # (as a copy only grows: the list below is empty)
            else [  # cleared on the last copy, not on this one (a model count can fall under the trigger)
                Change(i, VERBATIM, events[i].tokens, events[i].bytes, "restore")
                for i in state
                if i not in changes
            ]
        )
        state.clear()
        state.update(changes)
        if not restored and self._plain():  # ``_clears`` made its dict in ascending index: sorted already
            return list(changes.values())
        return sorted([*changes.values(), *restored])

    def _plain(self) -> bool:
        """Nothing stops, pairs or skips a clear: ``_clears`` takes its per-trace tables."""
        return not (self.clear_at_least or self.clear_tool_inputs or self.exclude_tools)

    def _clears(self, trace: Trace, view: View, call: int) -> dict[int, Change]:
        """This call's copy: item -> its change."""
        counted = unedited_tokens(trace, view, call)
        if self.token_count_method == "approximate":  # the request's messages only
            counted -= instruction_tokens(trace, view.n) + int(trace.arrays.residual[call])
        if counted <= self.trigger:
            return {}
        ptok, pbytes = text_size(trace, self.placeholder)
        if self._plain():
            # the loop below with nothing to stop it, pair or skip: every answered candidate, oldest
            # first, read from per-trace tables (the same dict; a sizing replays it on every call of
            # every setting). Held to the loop by tests/test_policy_tables.py
            results, count, cleared = answered_tables(trace, ptok, pbytes)
            in_view = bisect_left(results, view.n)
            upto = count[in_view - self.keep] if self.keep < in_view else 0
            return dict(cleared[:upto])
        itok, ibytes = text_size(trace, INPUT_PLACEHOLDER)
        issuers = trace.derived("issuers", issuer_of)
        answered = trace.derived("answered_results", answered_results)
        events = trace.events
        changes: dict[int, Change] = {}
        reclaimed = 0  # against the unedited copy, as the middleware counts
        # the rule; ``answered_tables`` above is its plain case read from tables (held to it by a test)
        for i in candidates(trace, view, self.keep):
            if self.clear_at_least > 0 and reclaimed >= self.clear_at_least:
                break
            if i not in answered or excluded(trace, self.exclude_tools, i):
                continue
            changes[i] = Change(i, MASKED, ptok, pbytes, "clear")
            reclaimed += events[i].tokens - ptok
            a = issuers.get(i)
            if self.clear_tool_inputs and a is not None and a not in changes:
                changes[a] = Change(a, MASKED, itok, ibytes, "clear-input")
                reclaimed += events[a].tokens - itok
        return changes


def answered_results(trace: Trace) -> frozenset[int]:
    """Tool results LangChain's edit may clear: the nearest assistant event before each issued its call
    (``ClearToolUsesEdit`` looks for the call in that one message and skips the result otherwise)."""
    issuers = issuer_of(trace)
    out, last = set(), None
    for e in trace.events:
        if e.kind == "assistant":
            last = e.index
        elif e.kind == "tool_result" and last is not None and issuers.get(e.index) == last:
            out.add(e.index)
    return frozenset(out)


def answered_tables(trace: Trace, ptok: int, pbytes: int) -> tuple[tuple[int, ...], list[int], list]:
    """Per trace, for ``_clears`` without ``clear_at_least``, ``clear_tool_inputs`` or ``exclude_tools``:
    the tool results ascending (``candidates``' table), how many of the first j of them are answered
    (``answered_results``), and each answered one's ``(index, clear change)`` at this placeholder size,
    ascending: the first ``count[j]`` pairs are the clears of candidates ``results[:j]``."""

    def build(t: Trace) -> tuple[tuple[int, ...], list[int], list]:
        results = t.derived("tool_results", tool_results)
        answered = t.derived("answered_results", answered_results)
        count, cleared = [0], []
        for i in results:
            if i in answered:
                cleared.append((i, Change(i, MASKED, ptok, pbytes, "clear")))
            count.append(len(cleared))
        return results, count, cleared

    return trace.derived(f"langchain_clears:{ptok}:{pbytes}", build)


def _instruction_prefix(trace: Trace) -> list[int]:
    out = [0]
    for e in trace.events:
        out.append(out[-1] + (e.tokens if e.kind in ("system", "tools") else 0))
    return out


def instruction_tokens(trace: Trace, n: int) -> int:
    """Tokens of the system prompt and tool specs among events [0, n): the agent's system message."""
    return trace.derived("instruction_prefix", _instruction_prefix)[n]
