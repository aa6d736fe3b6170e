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

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from sim.core.segments import concat, offsets, owners
from sim.core.types import KIND_CODE, ItemState, Trace
from sim.cost.tokens import MESSAGE_OVERHEAD_BYTES, estimate_tokens, estimate_tokens_all
from sim.policies.base import Change, Plan, Plans, Policy, View, check_int, register
from sim.util.batchmemo import batch_derived

MASKED = ItemState.MASKED


def placeholder(lines: int) -> str:
    return f"Old environment output: ({lines} lines omitted)"


_PLACEHOLDER_FIXED = len(placeholder(0).encode()) - 1  # the placeholder's bytes but for its number's digits
_POW10 = np.array([10**p for p in range(1, 19)], dtype=np.int64)


def observations(trace: Trace) -> tuple[int, ...]:
    """Event indices of the observations: the first user message, then every tool result."""
    obs: list[int] = []
    for e in trace.events:
        if e.kind == "tool_result" or (e.kind == "user" and not obs):
            obs.append(e.index)
    return tuple(obs)


def placeholder_tokens(nbytes: int, trace_estimate: int, tokens: int, event_bytes: int) -> int:
    """A placeholder's tokens: its bytes at the trace's ratio (``trace_estimate``), or at the ratio of the
    observation it replaces (``tokens`` over ``event_bytes``, framing included, rounded up) when that one
    is smaller. Why: a trace's ratio is fitted over every recorded input, the first call's included, and
    that one also holds what the trace does not record (OpenHands' system prompt and tool schemas): on
    a short run it can fall to a fraction of a byte per token (0.29 on an OpenHands runtime test), which
    made a 41-byte placeholder 198 tokens where the 127-byte result it replaced measured 59, and masking
    "reclaimed" -244 tokens. The observation's own tokens are the provider's numbers for that text."""
    if tokens <= 0:  # a message never sent weighs 0 tokens: no ratio of its own
        return trace_estimate
    own = -(-tokens * (nbytes + MESSAGE_OVERHEAD_BYTES) // (event_bytes + MESSAGE_OVERHEAD_BYTES))
    return min(trace_estimate, own)


def placeholder_sizes(trace: Trace) -> tuple[tuple[int, int], ...]:
    """(tokens, bytes) of each event's placeholder (``placeholder_tokens``); only observations' entries
    are ever used."""
    out = []
    for e in trace.events:
        nbytes = len(placeholder(e.lines).encode())
        estimate = estimate_tokens(nbytes, trace.bytes_per_token)
        out.append((placeholder_tokens(nbytes, estimate, e.tokens, e.bytes), nbytes))
    return tuple(out)


def _observation_arrays(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """Observation indices, and every event's placeholder tokens, as arrays: ``observations`` and
    ``placeholder_sizes`` read from the trace's columns (no event objects); one run of
    ``_batch_observation_arrays``."""
    _, _, obs, tokens = _batch_observation_arrays([trace.arrays], [trace.bytes_per_token])
    obs.setflags(write=False)
    tokens.setflags(write=False)
    return obs, tokens


class _Observations(NamedTuple):
    """The observations of runs laid end to end (the same for every setting of n and polling). Each
    run's boundaries are lifted by an offset of its own, so that one running maximum over the batch
    restarts with each run."""

    obs: np.ndarray  # every run's observation indices (local event ids), run after run
    obs_tokens: np.ndarray  # ... and their placeholders' tokens
    in_view: np.ndarray  # per call: observations in its view
    lift: np.ndarray  # per call: its run's offset
    in_view_lifted: np.ndarray  # per call: ``in_view + lift``
    floor: np.ndarray  # per call: the lowest boundary (1: observation 0 is never masked), lifted
    first_calls: np.ndarray  # the first call of each run that has calls
    first_floor: np.ndarray  # ... and its floor
    last_calls: np.ndarray  # the last call of each run that has calls
    last_floor: np.ndarray  # ... and its floor
    with_calls: np.ndarray  # the runs that have calls
    local_call: np.ndarray  # per call: its number within its run
    obs_after_first: np.ndarray  # per run: where its observations after the first start in ``obs``


def _batch_observation_arrays(arrays: Sequence, ratios: Sequence[float | None]) -> tuple:
    """``_observation_arrays`` of many runs at once (their ``TraceArrays`` and bytes_per_token), laid end
    to end: (observations per run, events per run, every run's observation indices, every event's
    placeholder tokens). One pass over the batch's columns instead of a dozen array calls per run
    (a streamed corpus meets each trace once: 40 us a run was most of its replay)."""
    n_events = np.fromiter(map(len, (a.kind for a in arrays)), np.int64, len(arrays))
    event_off = offsets(n_events)
    kind = concat([a.kind for a in arrays], np.int8)
    ev_run = owners(n_events)
    result = kind == KIND_CODE["tool_result"]
    # a run's first user event is an observation when no tool result comes before it
    users = np.flatnonzero(kind == KIND_CODE["user"])
    first_user = np.full(len(arrays), np.iinfo(np.int64).max)
    np.minimum.at(first_user, ev_run[users], users)
    first_result = np.full(len(arrays), np.iinfo(np.int64).max)
    results = np.flatnonzero(result)
    np.minimum.at(first_result, ev_run[results], results)
    opening = first_user[first_user < first_result]
    result[opening] = True
    obs_global = np.flatnonzero(result)
    n_obs = np.bincount(ev_run[obs_global], minlength=len(arrays)).astype(np.int64)
    obs = obs_global - np.repeat(event_off, n_obs)
    # a placeholder's bytes are its fixed text's plus its line count's digits (ASCII), sized at its
    # run's ratio by estimate_tokens_all: once per distinct ratio, in order (a bad ratio fails as the
    # first run with it would)
    lines = concat([a.lines for a in arrays])
    nbytes = np.searchsorted(_POW10, lines, side="right") + (1 + _PLACEHOLDER_FIXED)
    distinct = list(dict.fromkeys(ratios))
    if len(distinct) == 1:
        tokens = estimate_tokens_all(nbytes, distinct[0])
    else:
        which = np.repeat(np.array([distinct.index(r) for r in ratios], dtype=np.int64), n_events)
        tokens = np.empty(len(nbytes), dtype=np.int64)
        for j, r in enumerate(distinct):
            at = which == j
            tokens[at] = estimate_tokens_all(nbytes[at], r)
    # ... or at the observation's own ratio where that is smaller (``placeholder_tokens``)
    own_tokens = concat([a.tokens for a in arrays])
    own_bytes = concat([a.bytes for a in arrays]) + MESSAGE_OVERHEAD_BYTES
    own = -(-own_tokens * (nbytes + MESSAGE_OVERHEAD_BYTES) // own_bytes)
    np.minimum(tokens, own, out=tokens, where=own_tokens > 0)
    return n_obs, n_events, obs, tokens


def _batch_observations(traces: Sequence[Trace]) -> _Observations:
    arrays = [t.arrays for t in traces]  # no Event objects
    n_obs, n_events, obs, tokens = _batch_observation_arrays(arrays, [t.bytes_per_token for t in traces])
    ends = [a.view_end for a in arrays]
    n_calls = np.array([len(v) for v in ends], dtype=np.int64)
    obs_off, event_off, first = offsets(n_obs), offsets(n_events), offsets(n_calls)
    run = owners(n_calls)
    obs_global = obs + np.repeat(event_off, n_obs)  # global positions keep runs apart
    in_view = obs_global.searchsorted(np.concatenate(ends) + event_off[run])  # observations in each view
    in_view -= obs_off[run]
    lift = run * (int(n_obs.max(initial=0)) + 2)
    floor = lift + 1
    first_calls, last_calls = first[n_calls > 0], (first + n_calls - 1)[n_calls > 0]
    out = _Observations(
        obs,
        tokens[obs_global],
        in_view,
        lift,
        in_view + lift,
        floor,
        first_calls,
        floor[first_calls],
        last_calls,
        floor[last_calls],
        np.flatnonzero(n_calls > 0),
        np.arange(len(run), dtype=np.int64) - first[run],
        obs_off + 1,
    )
    for v in out:
        v.setflags(write=False)
    return out


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
    size_grid = {"n": (1, 3, 5, 10, 20)}  # ``ctxsim size --policy observation_masking``'s default grid
    size_trigger = False  # acts on every run, whatever its size
    acts_before_call = True
    plans = True
    plans_after_settle = True  # the boundary counts observations; a placeholder's size, the event's lines

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
        return self.plan_many([trace])[0]

    def plan_many(self, traces: Sequence[Trace]) -> Plans:
        """The same decisions for whole runs at once, many runs laid end to end. With p_k observations in
        call k's view the boundary is (p_k // polling) * polling - n; it only moves forward (a running
        maximum within the run), and call k masks the observations between the previous boundary and
        its own."""
        if not traces:
            return Plans.of([])
        b = batch_derived(traces, "observation_masking", _batch_observations)
        if self.polling > 1:
            upto = b.in_view // self.polling * self.polling + b.lift
            upto -= self.n
        else:
            upto = b.in_view_lifted - self.n
        np.maximum(upto, b.floor, out=upto)
        np.maximum.accumulate(upto, out=upto)  # a running maximum that restarts with each run
        # call k's run has observations [1, upto[k] - lift[k]) masked; call k masks those between the
        # previous call's boundary and its own (the lifts cancel within a run)
        counts = np.empty_like(upto)
        counts[1:] = upto[:-1]
        counts[b.first_calls] = b.first_floor
        np.subtract(upto, counts, out=counts)
        # so a run's calls mask its observations [1, its last boundary), in order
        runs = np.zeros(len(traces), dtype=np.int64)
        runs[b.with_calls] = upto[b.last_calls] - b.last_floor
        at = np.arange(int(runs.sum()), dtype=np.int64)  # the entries' places in ``obs``
        at += np.repeat(b.obs_after_first - offsets(runs), runs)
        index, tokens = b.obs[at], b.obs_tokens[at]
        state = np.empty(len(index), dtype=np.int64)
        state.fill(MASKED)
        plans = Plans.by_call(counts, b.local_call, index, tokens, state, runs)
        # each run masks its observations after the first once each, in order
        plans.ascending, plans.one_state = True, int(MASKED)
        return plans

    def bound_violations(self, trace: Trace, view: View) -> list[str]:
        obs = [i for i in observations(trace) if i < view.n]
        verbatim = sum(1 for i in obs[1:] if view.state[i] == ItemState.VERBATIM)
        limit = self.n + self.polling - 1
        if verbatim > limit:
            return [
                f"{verbatim} observations after the first verbatim in view, over n + polling - 1 = {limit}"
            ]
        return []
