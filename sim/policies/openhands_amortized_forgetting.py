"""``openhands_amortized_forgetting``: OpenHands' ``AmortizedForgettingCondenser`` (openhands-ai 0.62.0, V0).

Events are OpenHands' view (``sim.policies.openhands_memory``): the system prompt counts (it is the
history's first event), so do the recall action, its workspace context and one event per tool call.
Trigger: before a call, more than ``max_size`` events, or the agent's condensation request after a
context-window rejection (``on_overflow``). Kept set: the first ``keep_first`` events and the newest
``max_size // 2 - keep_first`` (no ``- 1``: there is no summary). Transform of the rest: forgotten
(DROPPED), no summary: the condensation forgets the id range from the first to the last forgotten event.
Around the condenser, ``ConversationMemory``: an observation whose action was forgotten stays in the view
(it counts) but is not sent, nor an action whose observation was forgotten (MASKED at 0 tokens); the
first user message is re-sent second when it was forgotten; a forgotten system prompt is re-created.
State rewrite (the condensation is an event of the history; later counts start from the shortened view);
not recoverable. Cache: each condensation rewrites the prefix from the first forgotten event; between
condensations the prefix is stable (amortized). A request the condenser cannot shrink (a view already at
``max_size // 2``) ends the run: ``condensation-insufficient`` (OpenHands raises there).
Constructor defaults ``max_size`` 100, ``keep_first`` 0 (the config file's ``keep_first``: 1).
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.core.types import ItemState, Trace
from sim.policies.base import Plan, View, check_int, register
from sim.policies.openhands_memory import SUM, Events, V0Condenser, V0State, events_of
from sim.policies.openhands_plan import v0_plan
from sim.util.errors import ConfigError


def check_cut(policy: str, keep_first: int, max_size: int) -> None:
    """OpenHands' own validation: ``0 <= keep_first < max_size // 2``, ``max_size >= 1``."""
    check_int(policy, "max_size", max_size, 1)
    check_int(policy, "keep_first", keep_first, 0)
    if keep_first >= max_size // 2:
        raise ConfigError(
            f"policy '{policy}': keep_first={keep_first!r} is not below max_size // 2 = {max_size // 2}"
        )


def forget_range(entries: list[tuple], middle: list[tuple]) -> set[int]:
    """The events a condensation forgetting ids min..max of ``middle`` removes from ``entries``."""
    ids = [x[1] for x in middle if x[0] != SUM]
    if not ids:
        return set()
    lo, hi = min(ids), max(ids)
    return {x[1] for x in entries if x[0] != SUM and lo <= x[1] <= hi}


@register
@dataclass(frozen=True)
class OpenHandsAmortizedForgetting(V0Condenser):
    """Over ``max_size`` events: keep the head and the newest half, forget the middle (no summary)."""

    keep_first: int = 0
    max_size: int = 100

    name = "openhands_amortized_forgetting"
    size_grid = {
        "max_size": (50, 100, 200),
        "keep_first": (0, 1, 4),
    }  # ``ctxsim size --policy openhands_amortized_forgetting``'s default grid
    rolling = True
    shares_idle = True  # ``condense`` returns its entries when under max_size
    conformance_settings = ({"keep_first": 1, "max_size": 6}, {"keep_first": 2, "max_size": 9})
    plans = True  # ``plan``: its decisions read the events' structure alone (runs over the window: the loop)

    def __post_init__(self) -> None:
        check_cut(self.name, self.keep_first, self.max_size)

    def condense(self, t: Trace, info: Events, st: V0State, entries: list[tuple], request: bool):
        if not (len(entries) > self.idle_size or request):
            return entries
        head = entries[: self.keep_first]
        tail_n = self.max_size // 2 - len(head)
        keep = len(head) + (len(entries) if tail_n <= 0 else 0)
        middle = entries[len(head) : max(len(entries) - tail_n, len(head))] if keep == len(head) else []
        return forget_range(entries, middle), False

    @property
    def idle_size(self) -> int:
        return self.max_size

    def plan(self, trace: Trace) -> Plan:
        """``before_call`` at every call (``sim.policies.openhands_plan``)."""
        return v0_plan(self, trace)

    def bound_violations(self, trace: Trace, view: View) -> list[str]:
        info = events_of(trace)
        n = sum(
            info.units[i] for i in range(view.n) if view.state[i] in (ItemState.VERBATIM, ItemState.MASKED)
        )
        if n > self.max_size + 2:  # + the first user message and the system prompt, re-sent while forgotten
            return [f"{n} events in view before the call, over max_size {self.max_size}"]
        return []
