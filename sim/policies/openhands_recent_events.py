"""``openhands_recent_events``: OpenHands' ``RecentEventsCondenser`` (openhands-ai 0.62.0, V0).

Trigger: every call. Kept set: the first ``keep_first`` events of OpenHands' view
(``sim.policies.openhands_memory``: the system prompt counts) and the newest ``max_events - keep_first``.
Transform of the rest: not in the view this call (DROPPED), no summary; view per call (no condensation
event), so originals stay in the history, but nothing in the view points to them: lost. Around the
condenser, ``ConversationMemory``: the first user message is re-sent second once it left the window;
an observation whose action left is not sent. Cache: every call past ``max_events`` events rewrites the
prefix after the head. Constructor defaults ``keep_first`` 1, ``max_events`` 10 (the config file's
``max_events``: 100).

While the view is shorter than ``max_events``, OpenHands' ``head + view[-tail:]`` holds the head twice
(and ``ConversationMemory`` then re-inserts the first user message before the second copy), so those
events are sent twice: ctxsim weighs them at twice their size (VERBATIM, no compaction).
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.core.types import Trace
from sim.policies.base import Plan, Plans, check_int, register
from sim.policies.openhands_memory import Events, V0Condenser, V0State
from sim.policies.openhands_plan import recent_plans


@register
@dataclass(frozen=True)
class OpenHandsRecentEvents(V0Condenser):
    """Keep the first ``keep_first`` and the newest events, ``max_events`` in all."""

    keep_first: int = 1
    max_events: int = 10

    name = "openhands_recent_events"
    size_grid = {
        "max_events": (5, 10, 20, 40),
        "keep_first": (1, 2),
    }  # ``ctxsim size --policy openhands_recent_events``'s default grid
    conformance_settings = ({"keep_first": 1, "max_events": 4}, {"keep_first": 2, "max_events": 7})
    plans = True  # ``plan``: its decisions read the events' structure alone

    def __post_init__(self) -> None:
        check_int(self.name, "keep_first", self.keep_first, 0)
        check_int(self.name, "max_events", self.max_events, 1)

    def condense(self, t: Trace, info: Events, st: V0State, entries: list[tuple], request: bool):
        head = entries[: self.keep_first]
        tail_n = max(0, self.max_events - len(head))
        return head + entries[-tail_n:] if tail_n else head + entries

    def plan(self, trace: Trace) -> Plan:
        """``before_call`` at every call (``sim.policies.openhands_plan``)."""
        return self.plan_many([trace])[0]

    def plan_many(self, traces) -> Plans:
        """``plan`` of each of ``traces`` (their tails planned together: ``recent_plans``)."""
        return recent_plans(self, traces, self.keep_first, self.max_events)
