"""``autogen_buffered``: AutoGen's ``BufferedChatCompletionContext(buffer_size)`` (autogen-core 0.7.5).

``buffer_size`` required by AutoGen and > 0 (0 is refused, as AutoGen raises). Held call for call to
the installed class by ``make oracle-autogen``.

- Messages: every event but ``system`` / ``tools`` ones (AutoGen's agent sends its system message outside
  the model context), one per event, except that the consecutive results of one assistant turn are one
  message (AutoGen's ``FunctionExecutionResultMessage`` of a turn's parallel calls).
- Trigger: every call, ``get_messages`` returns the last ``buffer_size`` messages.
- Kept: those, minus the first when it is a tool-result message (AutoGen drops that one message: at
  ``buffer_size`` 1 in a tool loop the request holds no message at all, only the system message).
- The rest: removed from the request (DROPPED); the context's own list keeps them, but the agent has no
  handle to them, so they count as lost. View per call; as messages only get appended, the window's
  start only moves forward.
- Cache: the request's prefix after the system message changes on every call once the buffer is full.
- Default chosen: AutoGen requires ``buffer_size``; ctxsim uses 20 (ten tool turns).
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.policies.base import check_int, register
from sim.policies.strands_sliding_window import KeepNewest


@register
@dataclass(frozen=True)
class AutogenBuffered(KeepNewest):
    """The last buffer_size messages (AutoGen BufferedChatCompletionContext)."""

    buffer_size: int = 20

    name = "autogen_buffered"
    size_grid = {
        "buffer_size": (5, 10, 20, 40, 80)
    }  # ``ctxsim size --policy autogen_buffered``'s default grid
    reason = "buffer"
    conformance_settings = ({"buffer_size": 2}, {"buffer_size": 5})

    def __post_init__(self) -> None:
        check_int(self.name, "buffer_size", self.buffer_size, 1)

    def window(self) -> int:
        return self.buffer_size
