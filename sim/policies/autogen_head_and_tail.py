"""``autogen_head_and_tail``: AutoGen's ``HeadAndTailChatCompletionContext`` (autogen-core 0.7.5).

Constructor: ``HeadAndTailChatCompletionContext(head_size, tail_size)``, both required and > 0 (0 is
refused, as AutoGen raises). Held call for call to the installed class by ``make oracle-autogen``.

- Messages: every event but ``system`` / ``tools`` ones, one per event, except that the consecutive
  results of one assistant turn are one message (AutoGen's ``FunctionExecutionResultMessage``).
- Trigger: every call where the messages in view exceed ``head_size + tail_size``.
- Kept: the first ``head_size`` messages and the last ``tail_size``. As in AutoGen, the head loses its
  last message when that is a tool call and the tail its first when that is a tool-result message.
- The rest: one placeholder user message ``Skipped N messages.``, N = messages - head_size - tail_size
  (AutoGen's count, taken before the boundary adjustments). The placeholder sits in the slot of the first
  omitted message (MASKED, with the placeholder's size; when that message is a tool call its results
  are MASKED at 0 tokens, so the pair stays together); every other omitted message is DROPPED.
- View per call: the context's own list keeps everything, but the agent has no handle (lost from view).
  The head is fixed, so the omitted span only grows toward the tail.
- Cache: every call once over, from the placeholder on (its count changes, the tail slides).
- Defaults chosen: AutoGen requires both sizes; ctxsim uses ``head_size`` 1 (the task message) and
  ``tail_size`` 20 (ten tool turns).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import compress, repeat
from operator import itemgetter, ne

from sim.core.types import ItemState, Trace
from sim.cost.tokens import estimate_tokens
from sim.policies.autogen_token_limited import member_table
from sim.policies.base import Change, Policy, View, check_int, register
from sim.policies.strands_sliding_window import Frame, Turns, frame, turns

MASKED, DROPPED = ItemState.MASKED, ItemState.DROPPED


def placeholder(skipped: int) -> str:
    return f"Skipped {skipped} messages."


@register
@dataclass(frozen=True)
class AutogenHeadAndTail(Policy):
    """The first head_size and last tail_size messages, a "Skipped N messages." placeholder between."""

    head_size: int = 1
    tail_size: int = 20

    name = "autogen_head_and_tail"
    size_grid = {
        "head_size": (1, 2, 4),
        "tail_size": (5, 10, 20, 40),
    }  # ``ctxsim size --policy autogen_head_and_tail``'s default grid
    acts_before_call = True
    conformance_settings = ({"head_size": 1, "tail_size": 2}, {"head_size": 3, "tail_size": 4})

    def __post_init__(self) -> None:
        check_int(self.name, "head_size", self.head_size, 1)  # AutoGen refuses 0 (ValueError)
        check_int(self.name, "tail_size", self.tail_size, 1)

    def start(self, trace: Trace) -> tuple[Frame, Turns]:
        return frame(trace), turns(trace)

    def before_call(self, trace: Trace, state, view: View, call: int, status=None) -> list[Change]:
        f, t = state
        events = trace.events
        msgs, count = t.first, t.in_view(view.n)
        skipped = count - self.head_size - self.tail_size
        if skipped <= 0:
            return []
        head_end = self.head_size
        if events[msgs[head_end - 1]].tool_call_ids:  # AutoGen: the head loses a last tool-call message
            head_end -= 1
        tail_start = count - self.tail_size
        if events[msgs[tail_start]].kind == "tool_result":  # and the tail a first tool-result message
            tail_start += 1
        table = member_table(trace)  # the events of messages [head_end, tail_start), as one slice
        omitted = table.flat[table.start[head_end] : table.start[tail_start]] if head_end < tail_start else []
        if not omitted:
            return []
        carrier = omitted[0]
        text = len(placeholder(skipped).encode())
        tokens = estimate_tokens(text, trace.bytes_per_token)
        changes = []
        if view.state[carrier] != MASKED or view.tokens[carrier] != tokens or view.nbytes[carrier] != text:
            changes.append(Change(carrier, MASKED, tokens, text, "placeholder"))
        beside = f.group.get(carrier, ())
        rest = omitted[1:]
        if not beside and len(rest) > 1:  # the loop below, its DROPPED ones found with iterators
            odd = compress(rest, map(ne, itemgetter(*rest)(view.state), repeat(DROPPED)))
            changes.extend(Change(i, DROPPED, 0, 0, "skipped") for i in odd)
            return changes
        for i in rest:
            if i in beside:
                if view.state[i] != MASKED:
                    changes.append(Change(i, MASKED, 0, 0, "skipped"))
            elif view.state[i] != DROPPED:
                changes.append(Change(i, DROPPED, 0, 0, "skipped"))
        return changes
