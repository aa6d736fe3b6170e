"""``openhands_observation_masking``: OpenHands' ``ObservationMaskingCondenser`` (V0).

Trigger: every call. Kept set: every non-observation event, and every observation among the newest
``attention_window`` events of the view (OpenHands: ``i < len(view) - attention_window`` is masked).
Observations are tool results (``tool_result`` events); the user's messages, the system prompt and the
agent's actions are never masked. Transform of the rest: placeholder ``<MASKED>``
(an ``AgentCondensationObservation``), sized by the calibrated estimate of that text. View per call:
OpenHands rebuilds the masked view from the full history each call (``get_view``, no condensation event),
so originals stay in the event stream, but the view holds no handle: masked content counts as lost.
Since the view only grows, the boundary ``view.n - attention_window`` only moves forward and a masked
observation stays masked. Cache: each call masks the observations that just left the window, so every
request rewrites the prefix from the newest masked observation on.

Choices where POLICIES.md is silent: positions count every event in view, the system prompt and tool
definitions included (OpenHands' history holds the system message as its first event; it only matters
while the view has fewer than ``attention_window`` events). Class default ``attention_window`` 5 (the
config file's default is 100).
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass

from sim.policies.base import Change, Plan, Policy, View, check_int, register
from sim.tokens import estimate_tokens
from sim.types import ItemState, Trace

MASKED = ItemState.MASKED
PLACEHOLDER = "<MASKED>"


def tool_results(trace: Trace) -> tuple[int, ...]:
    return tuple(e.index for e in trace.events if e.kind == "tool_result")


class _RunState:
    __slots__ = ("obs", "masked_upto")

    def __init__(self, obs: tuple[int, ...]) -> None:
        self.obs = obs
        self.masked_upto = 0  # observations obs[:masked_upto] are masked


@register
@dataclass(frozen=True)
class OpenHandsObservationMasking(Policy):
    """Observations older than the newest ``attention_window`` events become ``<MASKED>``."""

    attention_window: int = 5

    name = "openhands_observation_masking"
    acts_before_call = True
    plans = True
    conformance_settings = ({"attention_window": 1}, {"attention_window": 12})

    def __post_init__(self) -> None:
        check_int(self.name, "attention_window", self.attention_window, 0)

    def start(self, trace: Trace) -> _RunState:
        return _RunState(trace.derived("openhands_tool_results", tool_results))

    def _sizes(self, trace: Trace) -> tuple[int, int]:
        nbytes = len(PLACEHOLDER.encode())
        return estimate_tokens(nbytes, trace.bytes_per_token), nbytes

    def before_call(self, trace: Trace, state: _RunState, view: View, call: int, status=None) -> list[Change]:
        upto = bisect_left(state.obs, view.n - self.attention_window)
        if upto <= state.masked_upto:
            return []
        tokens, nbytes = self._sizes(trace)
        changes = [Change(i, MASKED, tokens, nbytes, "mask") for i in state.obs[state.masked_upto : upto]]
        state.masked_upto = upto
        return changes

    def plan(self, trace: Trace) -> Plan:
        obs = trace.derived("openhands_tool_results", tool_results)
        tokens, _ = self._sizes(trace)
        calls, index = [], []
        masked_upto = 0
        for k, end in enumerate(trace.arrays.view_end.tolist()):
            upto = bisect_left(obs, end - self.attention_window)
            if upto > masked_upto:
                for i in obs[masked_upto:upto]:
                    calls.append(k)
                    index.append(i)
                masked_upto = upto
        return Plan(calls, index, [tokens] * len(index), [MASKED] * len(index))

    def bound_violations(self, trace: Trace, view: View) -> list[str]:
        old = [
            i
            for i in range(max(view.n - self.attention_window, 0))
            if trace.events[i].kind == "tool_result" and view.state[i] == ItemState.VERBATIM
        ]
        return [f"observations {old} older than the attention window are verbatim"] if old else []
