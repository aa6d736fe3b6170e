"""``observation_masking``: SWE-agent's ``last_n_observations`` history processor.

Observations are the first user message (SWE-agent's instance template, observation 0) and every tool
result. Before each call, with L observations in view, observations 1 .. (L // polling) * polling - n - 1
become ``Old environment output: (N lines omitted)``, N the original's ``len(text.splitlines())``;
observation 0 is never masked. The mask is rebuilt per call from the full history, so once masked an
observation stays masked and the boundary only moves forward, every ``polling`` observations. Originals
stay in the durable store, but the view has no handle: masked content counts as lost from view.
Cache: each advance rewrites the prefix from the newly masked observation on (SWE-agent's docs note it
breaks prompt caching; polling > 1 keeps the prefix stable longer). Not modelled: SWE-agent's
``keep_output`` / ``remove_output`` tags, which the canonical trace does not carry.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sim.policies.base import Change, Policy, View, check_int, register
from sim.tokens import estimate_tokens
from sim.types import ItemState, Trace


def placeholder(lines: int) -> str:
    return f"Old environment output: ({lines} lines omitted)"


@dataclass
class _RunState:
    observations: list[int] = field(default_factory=list)  # event indices, in order
    seen: int = 0  # events scanned for observations
    masked_upto: int = 1  # observations [1, masked_upto) are masked


@register
@dataclass(frozen=True)
class ObservationMasking(Policy):
    """All but the last ``n`` observations become a one-line placeholder (SWE-agent ``last_n_observations``)."""

    n: int = 10
    polling: int = 1

    name = "observation_masking"
    acts_before_call = True

    def __post_init__(self) -> None:
        check_int(self.name, "n", self.n, 1)
        check_int(self.name, "polling", self.polling, 1)

    def start(self, trace: Trace) -> _RunState:
        return _RunState()

    def before_call(self, trace: Trace, state: _RunState, view: View, call: int) -> list[Change]:
        events = trace.events
        obs = state.observations
        _collect_observations(trace, state.seen, view.n, obs)
        state.seen = view.n
        last_removed = max(0, (len(obs) // self.polling) * self.polling - self.n)
        changes = []
        for j in range(state.masked_upto, last_removed):
            i = obs[j]
            text = placeholder(events[i].lines)
            nbytes = len(text.encode())
            changes.append(Change(i, ItemState.MASKED, estimate_tokens(nbytes, trace.bytes_per_token), nbytes, "mask"))
        state.masked_upto = max(state.masked_upto, last_removed)
        return changes

    def bound_violations(self, trace: Trace, view: View) -> list[str]:
        obs: list[int] = []
        _collect_observations(trace, 0, view.n, obs)
        verbatim = sum(1 for i in obs[1:] if view.state[i] == ItemState.VERBATIM)
        limit = self.n + self.polling - 1
        if verbatim > limit:
            return [f"{verbatim} observations after the first verbatim in view, over n + polling - 1 = {limit}"]
        return []


def _collect_observations(trace: Trace, start: int, stop: int, obs: list[int]) -> None:
    """Append the observations among events [start, stop): the first user message, then tool results."""
    events = trace.events
    for i in range(start, stop):
        kind = events[i].kind
        if kind == "tool_result" or (kind == "user" and not obs):
            obs.append(i)
