"""``openhands_conversation_window``: OpenHands' ``ConversationWindowCondenser`` (openhands-ai 0.62.0, V0).

Trigger: only the agent's condensation request after a context-window rejection (``on_overflow``);
nothing happens before the first rejection. Kept set: the essential events — the system prompt, the
first user message, the recall action for it and its workspace context — and the newest half of the
others in OpenHands' view (``max(1, m // 2)`` of the ``m`` non-essential events), the slice moved
forward past the observations at its start. Transform of the rest: forgotten (DROPPED), no summary.
OpenHands asks again after each rejection, so the window keeps halving until the request fits; one
that no longer shrinks (only the essentials left) ends the run: ``condensation-insufficient``. Around
the condenser, ``ConversationMemory`` (``sim.policies.openhands_memory``): an observation whose action was
forgotten is not sent. State rewrite (the condensation is an event of the history); not recoverable.
Cache: each recovery rewrites the prefix from the first forgotten event. No knobs (the constructor has
none).
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.core.types import Trace
from sim.policies.base import register
from sim.policies.openhands_memory import EV, SUM, Events, V0Condenser, V0State, is_obs


@register
@dataclass(frozen=True)
class OpenHandsConversationWindow(V0Condenser):
    """On a context-length error: keep system, the first user message and the newest half of the rest."""

    name = "openhands_conversation_window"
    rolling = True

    def condense(self, t: Trace, info: Events, st: V0State, entries: list[tuple], request: bool):
        if not request:
            return entries
        present = {x[1] for x in entries if x[0] == EV}
        if info.first_user not in present:
            return set(), False  # OpenHands: an empty condensation
        essential = {info.system, info.first_user}
        if info.recall in present:
            essential.add(info.recall)
            if info.recall_obs in present:
                essential.add(info.recall_obs)
        essential &= present
        n_essential = sum(1 for x in entries if x[0] == EV and x[1] in essential)
        keep = max(1, (len(entries) - n_essential) // 2)
        start = max(0, len(entries) - keep)
        while start < len(entries) and is_obs(info, entries[start]):
            start += 1
        kept = essential | {x[1] for x in entries[start:]}
        return {x[1] for x in entries if x[0] != SUM and x[1] not in kept}, False
