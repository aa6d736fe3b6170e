"""``openhands_observation_masking``: OpenHands' ``ObservationMaskingCondenser`` (openhands-ai 0.62.0, V0).

Trigger: every call. Kept set: OpenHands' view position by position (``sim.policies.openhands_memory``:
the system prompt, the task, the recall action and its workspace context, one event per tool call,
observations): every event among the newest ``attention_window`` and every non-observation. Transform of
the rest: an observation at position ``i < len(view) - attention_window`` becomes ``<MASKED>``, a new
``AgentCondensationObservation`` sized by the calibrated estimate of that text. Observations are tool
results, the workspace context (``RecallObservation``) and errors sent as user messages; actions and the
user's messages never are. Around the condenser, ``ConversationMemory``: ``<MASKED>`` has no tool call, so
it goes as a user message and the masked observation's action is not sent either (MASKED at 0 tokens).
View per call (no condensation event): originals stay in the history, the view holds no handle, masked
content counts as lost; the boundary only moves forward. Cache: each call rewrites the prefix from the
newest masked observation on. Constructor default ``attention_window`` 5 (the config file's: 100).
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass

from sim.core.types import ItemState, Trace
from sim.policies.base import Plan, View, check_int, register
from sim.policies.openhands_memory import (
    PH,
    Events,
    V0Condenser,
    V0State,
    events_of,
    is_obs,
    mask_plan,
    placeholder_size,
    unit_positions,
)

PLACEHOLDER = "<MASKED>"


@register
@dataclass(frozen=True)
class OpenHandsObservationMasking(V0Condenser):
    """Observations older than the newest ``attention_window`` events become ``<MASKED>``."""

    attention_window: int = 5

    name = "openhands_observation_masking"
    size_grid = {
        "attention_window": (1, 3, 5, 10, 20)
    }  # ``ctxsim size --policy openhands_observation_masking``'s default grid
    size_trigger = False  # acts on every run, whatever its size
    plans = True
    conformance_settings = ({"attention_window": 1}, {"attention_window": 12})

    def __post_init__(self) -> None:
        check_int(self.name, "attention_window", self.attention_window, 0)

    def condense(self, t: Trace, info: Events, st: V0State, entries: list[tuple], request: bool):
        edge = len(entries) - self.attention_window
        size = placeholder_size(PLACEHOLDER, t)
        return [(PH, x[1], *size) if p < edge and is_obs(info, x) else x for p, x in enumerate(entries)]

    def plan(self, trace: Trace) -> Plan:
        info = events_of(trace)
        pos = unit_positions(trace)
        obs = [i for i in range(len(trace.events)) if info.obs[i]]
        obs_pos = [pos[i] for i in obs]
        tokens = placeholder_size(PLACEHOLDER, trace)[0]
        # an observation at position p is masked once p < len(view) - attention_window
        return mask_plan(
            trace, obs, lambda end: bisect_left(obs_pos, pos[end] - self.attention_window), lambda i: tokens
        )

    def bound_violations(self, trace: Trace, view: View) -> list[str]:
        info = events_of(trace)
        n = sum(info.units[i] for i in range(view.n) if view.state[i] != ItemState.DROPPED)
        old, pos = [], 0
        for i in range(view.n):
            if view.state[i] == ItemState.DROPPED:
                continue
            pos += info.units[i]
            if pos <= n - self.attention_window and info.obs[i] and view.state[i] == ItemState.VERBATIM:
                old.append(i)
        return [f"observations {old} older than the attention window are verbatim"] if old else []
