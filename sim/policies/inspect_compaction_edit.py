"""``inspect_compaction_edit``: Inspect's ``CompactionEdit`` (inspect-ai 0.3.285) under its ``compaction()``
handler (trigger, passes and the ``compaction-insufficient`` failure: ``sim.policies.inspect_handler``).

Knobs (Inspect's names and defaults): ``threshold`` 0.9, ``keep_tool_uses`` 3, ``keep_tool_inputs``
true, ``exclude_tools`` null. Not modelled: ``keep_thinking_turns`` (canonical events carry no reasoning
blocks) and ``memory`` (it acts only when the memory tool is among the tools; traces name no tools).

- Tool uses: every tool result in the message list that answers a call of an earlier assistant message
  still there, in call order; tools in ``exclude_tools`` are not tool uses at all (unlike Anthropic's
  edit, they do not count toward the kept ones). Canonical events carry no tool names: a name matches a
  result whose issuing assistant's text starts with it, as for ``anthropic_clear_tool_uses``.
- All but the newest ``keep_tool_uses`` (all of them at 0) are cleared, oldest included again on every
  compaction (already cleared ones stay as they are):
  - ``keep_tool_inputs`` true: the result's text becomes ``(Tool result removed)`` (MASKED);
  - false: the tool message is deleted (DROPPED) and its call is taken out of the assistant message,
    which gains the text ``[Tool call: NAME (parameters and results removed from history)]`` (MASKED,
    its size plus that text's; the call itself weighs nothing in a canonical event). NAME is ``bash``:
    traces name no tools (the mini-swe-agent tool). The pair leaves the request as a whole.
- Assistant messages the list ends with are removed for good (Inspect strips them so the request ends
  with a user message).
- State: the edits persist in the handler's compacted input; a second pass changes nothing, so an edit
  that leaves the request over ``threshold`` ends the run (``compaction-insufficient``).
- Not recoverable (the model has no handle). Cache: each compaction rewrites the prefix from the oldest
  newly cleared message on.
- Sizing: whole runs are planned for the engine's batch path by ``inspect_handler.plan_handler`` (the
  same ``compaction``; tests/test_plans_inspect.py holds it to ``before_call``).
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.core.types import Trace
from sim.information.state import issuer_of
from sim.policies.anthropic_clear_tool_uses import excluded
from sim.policies.base import check_int, register
from sim.policies.inspect_handler import (
    DROPPED,
    MASKED,
    HandlerState,
    InspectCompaction,
    Work,
    part_tokens,
    text_tokens,
    tool_uses,
    trailing_assistants,
)
from sim.util.errors import ConfigError

TOOL_RESULT_REMOVED = "(Tool result removed)"
TOOL_NAME = "bash"
CALL_REMOVED = f"[Tool call: {TOOL_NAME} (parameters and results removed from history)]"


@register
@dataclass(frozen=True)
class InspectCompactionEdit(InspectCompaction):
    """Inspect CompactionEdit: over threshold, tool results older than the newest keep_tool_uses are
    cleared (or, without keep_tool_inputs, removed with their call); too little left ends the run."""

    keep_tool_uses: int = 3
    keep_tool_inputs: bool = True
    exclude_tools: tuple[str, ...] | None = None

    name = "inspect_compaction_edit"
    size_grid = {
        "threshold": (0.5, 0.7, 0.8, 0.9, 0.95),
        "keep_tool_uses": (1, 3, 5),
    }  # ``ctxsim size --policy inspect_compaction_edit``'s default grid
    conformance_settings = (
        {"threshold": 1500, "keep_tool_uses": 2},
        {"threshold": 2500, "keep_tool_uses": 1, "keep_tool_inputs": False},
        {"threshold": 3000, "keep_tool_uses": 0, "exclude_tools": ["cmd 1"]},
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int(self.name, "keep_tool_uses", self.keep_tool_uses, 0)
        if not isinstance(self.keep_tool_inputs, bool):
            raise ConfigError(
                f"policy '{self.name}': keep_tool_inputs={self.keep_tool_inputs!r} is not true or false"
            )
        names = self.exclude_tools
        if not (
            names is None
            or (isinstance(names, list | tuple) and all(isinstance(x, str) and x for x in names))
        ):
            raise ConfigError(
                f"policy '{self.name}': exclude_tools={names!r} is not null or a list of non-empty tool names"
            )
        if isinstance(names, list):
            object.__setattr__(self, "exclude_tools", tuple(names))

    def compact(self, trace: Trace, st: HandlerState, work: Work, n: int):
        issuers = trace.derived("issuers", issuer_of)
        uses = tool_uses(trace, work, n)
        if self.exclude_tools:
            uses = [i for i in uses if not excluded(trace, self.exclude_tools, i)]
        # fewer uses than keep_tool_uses: none cleared (a negative slice end would clear all but the last)
        clear = uses[: max(len(uses) - self.keep_tool_uses, 0)] if self.keep_tool_uses else uses
        if self.keep_tool_inputs:
            tok, nbytes = (
                text_tokens(trace, len(TOOL_RESULT_REMOVED.encode())),
                len(TOOL_RESULT_REMOVED.encode()),
            )
            work.set_all(clear, MASKED, tok, nbytes, "clear")
        else:
            extra = len(CALL_REMOVED.encode())
            for i in clear:
                work.set(i, DROPPED, 0, 0, "clear")
                a = issuers[i]
                work.set(a, MASKED, work.tokens(a) + part_tokens(trace, extra), work.nbytes(a) + extra,
                         "clear-input")  # fmt: skip
        for i in trailing_assistants(trace, work, n):
            work.set(i, DROPPED, 0, 0, "strip")
        return None
