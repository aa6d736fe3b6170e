"""``strands_sliding_window``: Strands Agents' ``SlidingWindowConversationManager`` (POLICIES.md §4).

- Messages: every event but ``system`` / ``tools`` ones (Strands keeps the system prompt and the tool
  specs outside ``agent.messages``); each event counts as one message. Choice: Strands puts all results
  of one turn in a single user message, ctxsim counts each tool result as its own message.
- Trigger: more than ``window_size`` messages in view. Chosen: applied before every model call (Strands'
  ``per_turn`` mode); by default Strands applies it after each agent invocation, which a single-task
  trace would never reach.
- Kept: the newest ``window_size`` messages, the trim point moved forward (newer) to a valid boundary:
  the window never starts on a tool result whose call it does not hold (Strands' rule "the oldest
  message cannot be a toolResult"). When no valid boundary exists, nothing is trimmed that call.
- The rest: deleted (DROPPED), together with their tool call/result partners. A state rewrite
  (``messages[:] = messages[trim:]``): not recoverable. The trim point only moves forward.
- Cache: every trim rewrites the whole prefix after the system prompt / tool specs.
- Not modelled: ``should_truncate_results`` (on a context overflow Strands first truncates the oldest
  tool result); overflow recovery is not offered.

The module also holds the pair/boundary helpers the AutoGen window policies share.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass

from sim.policies.base import Change, Policy, View, check_int, register
from sim.types import ItemState, Trace

DROPPED = ItemState.DROPPED
NOT_MESSAGES = ("system", "tools")


class Frame:
    """Message structure of a trace: which events are messages, how calls and results pair up."""

    __slots__ = ("messages", "crossing", "group", "issuer")

    def __init__(self, trace: Trace) -> None:
        events = trace.events
        self.messages = [e.index for e in events if e.kind not in NOT_MESSAGES]
        by_id: dict[str, int] = {}
        self.issuer: dict[int, int] = {}  # tool_result -> the assistant event that issued its call
        members: dict[int, list[int]] = {}
        for e in events:
            for cid in e.tool_call_ids:
                by_id[cid] = e.index
            if e.kind == "tool_result" and e.tool_call_id in by_id:
                a = by_id[e.tool_call_id]
                self.issuer[e.index] = a
                members.setdefault(a, [a]).append(e.index)
        # crossing[i]: some pair (a, r) has a < i <= r, so a view starting at i would split it
        diff = [0] * (len(events) + 2)
        for r, a in self.issuer.items():
            diff[a + 1] += 1
            diff[r + 1] -= 1
        run, self.crossing = 0, []
        for i in range(len(events)):
            run += diff[i]
            self.crossing.append(run > 0)
        self.group: dict[int, tuple[int, ...]] = {}  # event -> its call/result group (itself if alone)
        for g in members.values():
            for i in g:
                self.group[i] = tuple(g)

    def in_view(self, n: int) -> int:
        """How many messages are among events [0, n)."""
        return bisect_left(self.messages, n)

    def valid(self, i: int) -> bool:
        """A view may start (or a cut may sit) at event i without splitting a call from its result."""
        return not self.crossing[i]


def frame(trace: Trace) -> Frame:
    return trace.derived("message_frame", Frame)


class _WindowState:
    __slots__ = ("frame", "start")

    def __init__(self, frame: Frame) -> None:
        self.frame = frame
        self.start = 0  # messages[:start] are dropped (only moves forward)


class KeepNewest(Policy):
    """Shared by the window policies: drop all but the newest ``size`` messages, at a valid boundary."""

    acts_before_call = True
    reason = "window"

    def window(self) -> int:
        raise NotImplementedError

    def start(self, trace: Trace) -> _WindowState:
        return _WindowState(frame(trace))

    def before_call(
        self, trace: Trace, state: _WindowState, view: View, call: int, status=None
    ) -> list[Change]:
        f = state.frame
        msgs, count = f.messages, f.in_view(view.n)
        if count - state.start <= self.window():
            return []
        cut = count - self.window()
        while cut < count and not f.valid(msgs[cut]):
            cut += 1
        if cut >= count or cut <= state.start:
            return []
        changes = [
            Change(i, DROPPED, 0, 0, self.reason) for i in msgs[state.start : cut] if view.state[i] != DROPPED
        ]
        state.start = cut
        return changes


@register
@dataclass(frozen=True)
class StrandsSlidingWindow(KeepNewest):
    """Keep the newest window_size messages; older ones are deleted (Strands SlidingWindow)."""

    window_size: int = 40

    name = "strands_sliding_window"
    reason = "sliding-window"
    conformance_settings = ({"window_size": 3}, {"window_size": 6})

    def __post_init__(self) -> None:
        check_int(self.name, "window_size", self.window_size, 1)

    def window(self) -> int:
        return self.window_size
