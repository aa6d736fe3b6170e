"""``anthropic_clear_tool_uses``: Anthropic context editing, strategy ``clear_tool_uses_20250919``.

Knobs (Anthropic's names): ``trigger`` -> ``trigger_tokens`` 100,000 input tokens, ``keep`` 3 tool uses,
``clear_at_least`` (minimum tokens reclaimed per activation; 0 = no minimum), ``exclude_tools``,
``clear_tool_inputs`` false. The tool-use-count form of ``trigger`` is not modelled.

- Trigger: before each call, the request (tokens of the view + the call's residual) exceeds
  ``trigger_tokens``. The request is measured as it would reach the model, earlier clears included
  (see "state" below).
- Kept: every non-tool item; the newest ``keep`` tool results in view (counted over all tool results,
  excluded ones included, as LangChain's port does); results of excluded tools.
- Transform: every older tool result not yet cleared becomes the placeholder ``[tool result cleared]``
  (oldest first; the exact text the API inserts is not documented: ctxsim's choice). With
  ``clear_tool_inputs`` the assistant event that issued a cleared result also becomes a placeholder
  (``[tool input cleared]``): canonical events do not separate an assistant's text from its call
  arguments, so the whole assistant message stands for the tool input (an over-estimate of what is
  cleared). Call/result pairing is kept (nothing is DROPPED).
- ``clear_at_least``: the API does not apply the strategy if it cannot clear at least that many tokens;
  counted here on the tokens newly reclaimed by this activation (placeholders subtracted). Skipped
  activations leave earlier clears in place.
- ``exclude_tools``: canonical events carry no tool names, so a name matches a tool result when its
  issuing assistant event's text starts with it (null or [] = nothing excluded). On traces whose
  assistant text does not start with the tool name the knob matches nothing.
- State, not view-per-call: the edit is made server-side on a history the client keeps in full, and
  the server re-derives the same clears on every later request. ctxsim models that as a persistent
  cleared set whose boundary only moves forward, with the trigger on the request after earlier clears.
  Not documented: whether the server compares the trigger to the unedited prompt (then, like the
  LangChain port, it would fire on every call once past the threshold).
- Recoverability: originals stay in the client's history but the model has no handle: lost from view.
- Cache: each activation rewrites the prefix from the oldest newly cleared result on (the reason for
  ``clear_at_least``); calls without an activation keep the whole prefix.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass

from sim.core.types import ItemState, Trace
from sim.cost.tokens import estimate_tokens
from sim.information.state import issuer_of
from sim.policies.base import Change, Policy, View, check_int, register
from sim.util.errors import ConfigError

PLACEHOLDER = "[tool result cleared]"
INPUT_PLACEHOLDER = "[tool input cleared]"
MASKED = ItemState.MASKED
VISIBLE = (ItemState.VERBATIM, ItemState.BOUNDED)


def tool_results(trace: Trace) -> tuple[int, ...]:
    """Event indices of the tool results, ascending."""
    return tuple(e.index for e in trace.events if e.kind == "tool_result")


def request_tokens(trace: Trace, view: View, call: int) -> int:
    """The request as sent: tokens of the view plus the call's provider residual."""
    return view.total + int(trace.arrays.residual[call])


def unedited_tokens(trace: Trace, view: View, call: int) -> int:
    """The request before any edit: original sizes of every item in view plus the residual."""
    return int(trace.arrays.prefix[view.n]) + int(trace.arrays.residual[call])


def text_size(trace: Trace, text: str) -> tuple[int, int]:
    """(tokens, bytes) of a new message of ``text``."""
    nbytes = len(text.encode())
    return estimate_tokens(nbytes, trace.bytes_per_token), nbytes


def candidates(trace: Trace, view: View, keep: int) -> list[int]:
    """Tool results in view older than the newest ``keep``, oldest first."""
    results = trace.derived("tool_results", tool_results)
    in_view = bisect_left(results, view.n)  # results ascend: no scan of the whole history per call
    return list(results[: in_view - keep]) if keep < in_view else []


def check_clear_knobs(policy: Policy) -> None:
    name = policy.name
    check_int(name, "trigger_tokens", policy.trigger_tokens, 1)  # type: ignore[attr-defined]
    check_int(name, "keep", policy.keep, 0)  # type: ignore[attr-defined]
    check_int(name, "clear_at_least", policy.clear_at_least, 0)  # type: ignore[attr-defined]
    if not isinstance(policy.clear_tool_inputs, bool):  # type: ignore[attr-defined]
        raise ConfigError(
            f"policy '{name}': clear_tool_inputs={policy.clear_tool_inputs!r} is not true or false"  # type: ignore[attr-defined]
        )
    names = policy.exclude_tools  # type: ignore[attr-defined]
    ok = names is None or (isinstance(names, list | tuple) and all(isinstance(x, str) and x for x in names))
    if not ok:
        raise ConfigError(
            f"policy '{name}': exclude_tools={names!r} is not null or a list of non-empty tool names"
        )
    if isinstance(names, list):  # frozen and hashable: keep a tuple
        object.__setattr__(policy, "exclude_tools", tuple(names))


def excluded(trace: Trace, names: tuple[str, ...] | None, result: int) -> bool:
    """Whether tool result ``result`` belongs to an excluded tool (its issuer's text starts with a name)."""
    if not names:
        return False
    a = trace.derived("issuers", issuer_of).get(result)
    content = trace.events[a].content if a is not None else None
    return content is not None and content.startswith(tuple(names))


@dataclass(frozen=True)
class ClearToolUsesKnobs(Policy):
    """The knobs Anthropic's and LangChain's clear_tool_uses edits share (same names and defaults);
    the two differ in how they count, trigger and persist, so each subclass has its own before_call."""

    trigger_tokens: int = 100000
    keep: int = 3
    clear_at_least: int = 0
    exclude_tools: tuple[str, ...] | None = None
    clear_tool_inputs: bool = False

    acts_before_call = True
    conformance_settings = (
        {"trigger_tokens": 800, "keep": 2},
        {"trigger_tokens": 800, "keep": 1, "clear_at_least": 500, "clear_tool_inputs": True},
        {"trigger_tokens": 500, "keep": 0, "exclude_tools": ["cmd 1"]},
    )

    def __post_init__(self) -> None:
        check_clear_knobs(self)


@register
@dataclass(frozen=True)
class AnthropicClearToolUses(ClearToolUsesKnobs):
    """Anthropic clear_tool_uses_20250919: over trigger, tool results older than the last ``keep``
    become a placeholder; the cleared set persists."""

    name = "anthropic_clear_tool_uses"
    size_grid = {
        "trigger_tokens": (40000, 60000, 80000, 100000, 150000),
        "keep": (1, 3, 5),
    }  # ``ctxsim size --policy anthropic_clear_tool_uses``'s default grid

    def before_call(self, trace: Trace, state, view: View, call: int, status=None) -> list[Change]:
        if request_tokens(trace, view, call) <= self.trigger_tokens:
            return []
        ptok, pbytes = text_size(trace, PLACEHOLDER)
        itok, ibytes = text_size(trace, INPUT_PLACEHOLDER)
        issuers = trace.derived("issuers", issuer_of)
        changes: dict[int, Change] = {}
        reclaimed = 0
        for i in candidates(trace, view, self.keep):
            if view.state[i] not in VISIBLE or excluded(trace, self.exclude_tools, i):
                continue
            changes[i] = Change(i, MASKED, ptok, pbytes, "clear")
            reclaimed += view.tokens[i] - ptok
            a = issuers.get(i)
            if self.clear_tool_inputs and a is not None and a not in changes and view.state[a] in VISIBLE:
                changes[a] = Change(a, MASKED, itok, ibytes, "clear-input")
                reclaimed += view.tokens[a] - itok
        if not changes or reclaimed < self.clear_at_least:
            return []
        return [changes[i] for i in sorted(changes)]
