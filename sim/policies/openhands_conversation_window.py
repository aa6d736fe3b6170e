"""``openhands_conversation_window``: OpenHands' ``ConversationWindowCondenser`` (V0).

Trigger: only a context-length rejection (``on_overflow``); nothing happens before the first overflow.
Kept set: the essential events — the system prompt and tool definitions, and the first user message —
and the newest half of the other events still in view: ``max(1, m // 2)`` of the ``m`` non-essential
events, the slice moved forward past tool results at its start (OpenHands skips observations there so
none is left without its action). Transform of the rest: deleted (DROPPED), no summary. State rewrite:
the condensation is an event of the history, so dropped events stay dropped and a later overflow halves
what is left; not recoverable. One retry per rejection (the engine's rule): a request still over the
window ends the run with ``context-overflow``. Cache: each recovery rewrites the prefix from the first
dropped event. No knobs (OpenHands' config has none).

Choices: results admitted after their call was dropped are dropped at the next recovery (they are
non-essential and at the slice's start); a tool result whose call is kept is never dropped alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.policies.base import Change, Decision, Policy, RunStatus, View, register
from sim.policies.openhands_amortized_forgetting import SYSTEM_KINDS, issuers
from sim.types import ItemState, Trace

DROPPED = ItemState.DROPPED


def first_user(trace: Trace) -> int:
    return next((e.index for e in trace.events if e.kind == "user"), -1)


@register
@dataclass(frozen=True)
class OpenHandsConversationWindow(Policy):
    """On a context-length error: keep system, the first user message and the newest half of the rest."""

    name = "openhands_conversation_window"
    recovers = True

    def on_overflow(self, trace: Trace, state, view: View, call: int, status: RunStatus) -> Decision | None:
        first = trace.derived("openhands_first_user", first_user)
        issuer = trace.derived("openhands_issuers", issuers)
        events = trace.events
        rest = [
            i
            for i in range(view.n)
            if i != first and events[i].kind not in SYSTEM_KINDS and view.state[i] != DROPPED
        ]
        if not rest:  # only the essentials are left: nothing to drop
            return None
        start = len(rest) - max(1, len(rest) // 2)
        while start < len(rest) and events[rest[start]].kind == "tool_result":
            start += 1
        gone = set(rest[:start])
        keep = set(rest[start:])
        for i in rest[start:]:  # a later result of a dropped call (parallel calls) goes too
            if issuer.get(i, -1) in gone:
                gone.add(i)
                keep.discard(i)
        for i in list(gone):  # never drop a result alone while its call stays
            if issuer.get(i, -1) in keep or issuer.get(i, -1) == first:
                gone.discard(i)
        if not gone:
            return None
        return Decision([Change(i, DROPPED, 0, 0, "window") for i in sorted(gone)])
