"""``spill_large_results``: Deep Agents-style offload of large tool results (a spill, not a cut).

At settle time, a tool result over ``threshold_tokens`` moves out of view to a file; the view keeps a
head/tail preview of ``preview_chars`` characters (split in half) and a handle naming the file. The full
result stays recoverable: when an action needs a fact it holds, the agent reads the file back (a
retrieval: one more call, and the content re-enters the conversation). Cache: settle-time, so nothing
already sent is rewritten. Deep Agents' defaults: 20,000 tokens; its exact preview format is not
modelled, only its size.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.core.types import ItemState, Trace
from sim.cost.tokens import estimate_tokens, scale_tokens
from sim.policies.base import Change, Policy, View, check_int, register


def handle_text(index: int) -> str:
    return f"\n[full result saved to /large_tool_results/{index}; read it with read_file]\n"


@register
@dataclass(frozen=True)
class SpillLargeResults(Policy):
    """Tool results over threshold_tokens move to a file; a head/tail preview and a handle stay in view."""

    threshold_tokens: int = 20000
    preview_chars: int = 2000

    name = "spill_large_results"
    size_grid = {
        "threshold_tokens": (5000, 10000, 20000, 40000)
    }  # ``ctxsim size --policy spill_large_results``'s default grid
    size_trigger = False  # acts on every run, whatever its size
    settles = True
    spills = True

    def __post_init__(self) -> None:
        check_int(self.name, "threshold_tokens", self.threshold_tokens, 1)
        check_int(self.name, "preview_chars", self.preview_chars, 0)

    def settle(self, trace: Trace, state, index: int, view: View | None) -> Change | None:
        e = trace.events[index]
        if e.kind != "tool_result" or e.tokens <= self.threshold_tokens:
            return None
        shown = min(self.preview_chars, e.chars)
        preview_bytes = round(shown * e.bytes / e.chars) if e.chars else 0
        handle = len(handle_text(index).encode())
        tokens = scale_tokens(e.tokens, e.bytes, preview_bytes) + estimate_tokens(
            handle, trace.bytes_per_token
        )
        return Change(index, ItemState.SPILLED, tokens, preview_bytes + handle, "spill")

    def settle_all(self, trace: Trace) -> list[Change]:
        return [c for c in (self.settle(trace, None, e.index, None) for e in trace.events) if c is not None]
