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

from dataclasses import dataclass

from sim.policies.base import Change, Plan, Policy, View, check_int, register
from sim.tokens import estimate_tokens
from sim.types import ItemState, Trace

MASKED = ItemState.MASKED


def placeholder(lines: int) -> str:
    return f"Old environment output: ({lines} lines omitted)"


def observations(trace: Trace) -> tuple[int, ...]:
    """Event indices of the observations: the first user message, then every tool result."""
    obs: list[int] = []
    for e in trace.events:
        if e.kind == "tool_result" or (e.kind == "user" and not obs):
            obs.append(e.index)
    return tuple(obs)


def placeholder_sizes(trace: Trace) -> tuple[tuple[int, int], ...]:
    """(tokens, bytes) of each event's placeholder; only observations' entries are ever used."""
    out = []
    for e in trace.events:
        nbytes = len(placeholder(e.lines).encode())
        out.append((estimate_tokens(nbytes, trace.bytes_per_token), nbytes))
    return tuple(out)


class _RunState:
    __slots__ = ("obs", "sizes", "in_view", "masked_upto")

    def __init__(self, obs: tuple[int, ...], sizes: tuple[tuple[int, int], ...]) -> None:
        self.obs, self.sizes = obs, sizes
        self.in_view = 0  # observations [0, in_view) are in the view
        self.masked_upto = 1  # observations [1, masked_upto) are masked


@register
@dataclass(frozen=True)
class ObservationMasking(Policy):
    """All but the last ``n`` observations become a one-line placeholder (SWE-agent last_n_observations)."""

    n: int = 10
    polling: int = 1

    name = "observation_masking"
    acts_before_call = True
    plans = True

    def __post_init__(self) -> None:
        check_int(self.name, "n", self.n, 1)
        check_int(self.name, "polling", self.polling, 1)

    def start(self, trace: Trace) -> _RunState:
        return _RunState(
            trace.derived("observations", observations), trace.derived("placeholder_sizes", placeholder_sizes)
        )

    def before_call(self, trace: Trace, state: _RunState, view: View, call: int, status=None) -> list[Change]:
        obs, p, n_view = state.obs, state.in_view, view.n
        while p < len(obs) and obs[p] < n_view:
            p += 1
        state.in_view = p
        last_removed = (p // self.polling) * self.polling - self.n
        if last_removed <= state.masked_upto:
            return []
        sizes = state.sizes
        changes = [Change(i, MASKED, *sizes[i], "mask") for i in obs[state.masked_upto : last_removed]]
        state.masked_upto = last_removed
        return changes

    def plan(self, trace: Trace) -> Plan:
        """The same decisions for the whole run in one pass (plain lists: runs are short, and numpy's
        per-operation overhead would cost more than the loop)."""
        obs = trace.derived("observations", observations)
        sizes = trace.derived("placeholder_sizes", placeholder_sizes)
        calls, index, tokens = [], [], []
        p, masked_upto, n_obs, polling, n = 0, 1, len(obs), self.polling, self.n
        for k, end in enumerate(trace.arrays.view_end.tolist()):
            while p < n_obs and obs[p] < end:
                p += 1
            boundary = (p // polling) * polling - n
            if boundary > masked_upto:
                for i in obs[masked_upto:boundary]:
                    calls.append(k)
                    index.append(i)
                    tokens.append(sizes[i][0])
                masked_upto = boundary
        return Plan(calls, index, tokens, [MASKED] * len(index))

    def bound_violations(self, trace: Trace, view: View) -> list[str]:
        obs = [i for i in observations(trace) if i < view.n]
        verbatim = sum(1 for i in obs[1:] if view.state[i] == ItemState.VERBATIM)
        limit = self.n + self.polling - 1
        if verbatim > limit:
            return [
                f"{verbatim} observations after the first verbatim in view, over n + polling - 1 = {limit}"
            ]
        return []
