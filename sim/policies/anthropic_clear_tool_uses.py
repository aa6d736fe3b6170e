"""``anthropic_clear_tool_uses``: Anthropic context editing, strategy ``clear_tool_uses_20250919``.

Knobs (Anthropic's names): ``trigger`` -> ``trigger_tokens`` 100,000 input tokens, ``keep`` 3 tool uses,
``clear_at_least`` (minimum tokens reclaimed per activation; 0 = no minimum), ``exclude_tools``,
``clear_tool_inputs`` false. The tool-use-count form of ``trigger`` is not modelled.

- Trigger: before each call, the request (tokens of the view + the call's residual) exceeds
  ``trigger_tokens``. The request is measured as it would reach the model, earlier clears included
  (see "state" below).
- Kept: every non-tool item; the newest ``keep`` tool results in view (counted over all tool results,
  excluded ones included, as LangChain's port does); results of excluded tools.
- Transform: every older tool result not yet cleared becomes the placeholder ``[tool result cleared]``
  (oldest first; the exact text the API inserts is not documented: ctxsim's choice). With
  ``clear_tool_inputs`` the assistant event that issued a cleared result also becomes a placeholder
  (``[tool input cleared]``): canonical events do not separate an assistant's text from its call
  arguments, so the whole assistant message stands for the tool input (an over-estimate of what is
  cleared). Call/result pairing is kept (nothing is DROPPED).
- ``clear_at_least``: the API does not apply the strategy if it cannot clear at least that many tokens;
  counted here on the tokens newly reclaimed by this activation (placeholders subtracted). Skipped
  activations leave earlier clears in place.
- ``exclude_tools``: canonical events carry no tool names, so a name matches a tool result when its
  issuing assistant event's text starts with it (null or [] = nothing excluded). On traces whose
  assistant text does not start with the tool name the knob matches nothing.
- State, not view-per-call: the edit is made server-side on a history the client keeps in full, and
  the server re-derives the same clears on every later request. ctxsim models that as a persistent
  cleared set whose boundary only moves forward, with the trigger on the request after earlier clears.
  Not documented: whether the server compares the trigger to the unedited prompt (then, like the
  LangChain port, it would fire on every call once past the threshold).
- Recoverability: originals stay in the client's history but the model has no handle: lost from view.
- Cache: each activation rewrites the prefix from the oldest newly cleared result on (the reason for
  ``clear_at_least``); calls without an activation keep the whole prefix.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from sim.core.segments import concat, offsets, owners, positions
from sim.core.types import KIND_CODE, ItemState, Trace
from sim.cost.tokens import estimate_tokens
from sim.information.state import issuer_of, runs_have_needs
from sim.policies.base import Change, Plans, Policy, View, check_int, register
from sim.policies.sparse_plans import result_issuers
from sim.util.batchmemo import batch_derived
from sim.util.errors import ConfigError

PLACEHOLDER = "[tool result cleared]"
INPUT_PLACEHOLDER = "[tool input cleared]"
MASKED = ItemState.MASKED
VISIBLE = (ItemState.VERBATIM, ItemState.BOUNDED)


def tool_results(trace: Trace) -> tuple[int, ...]:
    """Event indices of the tool results, ascending."""
    return tuple(e.index for e in trace.events if e.kind == "tool_result")


def request_tokens(trace: Trace, view: View, call: int) -> int:
    """The request as sent: tokens of the view plus the call's provider residual."""
    return view.total + int(trace.arrays.residual[call])


def unedited_tokens(trace: Trace, view: View, call: int) -> int:
    """The request before any edit: original sizes of every item in view plus the residual."""
    return int(trace.arrays.prefix[view.n]) + int(trace.arrays.residual[call])


def text_size(trace: Trace, text: str) -> tuple[int, int]:
    """(tokens, bytes) of a new message of ``text``."""
    nbytes = len(text.encode())
    return estimate_tokens(nbytes, trace.bytes_per_token), nbytes


def candidates(trace: Trace, view: View, keep: int) -> list[int]:
    """Tool results in view older than the newest ``keep``, oldest first."""
    results = trace.derived("tool_results", tool_results)
    in_view = bisect_left(results, view.n)  # results ascend: no scan of the whole history per call
    return list(results[: in_view - keep]) if keep < in_view else []


def check_clear_knobs(policy: Policy) -> None:
    name = policy.name
    check_int(name, "trigger_tokens", policy.trigger_tokens, 1)  # type: ignore[attr-defined]
    check_int(name, "keep", policy.keep, 0)  # type: ignore[attr-defined]
    check_int(name, "clear_at_least", policy.clear_at_least, 0)  # type: ignore[attr-defined]
    if not isinstance(policy.clear_tool_inputs, bool):  # type: ignore[attr-defined]
        raise ConfigError(
            f"policy '{name}': clear_tool_inputs={policy.clear_tool_inputs!r} is not true or false"  # type: ignore[attr-defined]
        )
    names = policy.exclude_tools  # type: ignore[attr-defined]
    ok = names is None or (isinstance(names, list | tuple) and all(isinstance(x, str) and x for x in names))
    if not ok:
        raise ConfigError(
            f"policy '{name}': exclude_tools={names!r} is not null or a list of non-empty tool names"
        )
    if isinstance(names, list):  # frozen and hashable: keep a tuple
        object.__setattr__(policy, "exclude_tools", tuple(names))


def excluded(trace: Trace, names: tuple[str, ...] | None, result: int) -> bool:
    """Whether tool result ``result`` belongs to an excluded tool (its issuer's text starts with a name)."""
    if not names:
        return False
    a = trace.derived("issuers", issuer_of).get(result)
    content = trace.events[a].content if a is not None else None
    return content is not None and content.startswith(tuple(names))


@dataclass(frozen=True)
class ClearToolUsesKnobs(Policy):
    """The knobs Anthropic's and LangChain's clear_tool_uses edits share (same names and defaults);
    the two differ in how they count, trigger and persist, so each subclass has its own before_call."""

    trigger_tokens: int = 100000
    keep: int = 3
    clear_at_least: int = 0
    exclude_tools: tuple[str, ...] | None = None
    clear_tool_inputs: bool = False

    acts_before_call = True
    conformance_settings = (
        {"trigger_tokens": 800, "keep": 2},
        {"trigger_tokens": 800, "keep": 1, "clear_at_least": 500, "clear_tool_inputs": True},
        {"trigger_tokens": 500, "keep": 0, "exclude_tools": ["cmd 1"]},
    )

    def __post_init__(self) -> None:
        check_clear_knobs(self)


@register
@dataclass(frozen=True)
class AnthropicClearToolUses(ClearToolUsesKnobs):
    """Anthropic clear_tool_uses_20250919: over trigger, tool results older than the last ``keep``
    become a placeholder; the cleared set persists."""

    name = "anthropic_clear_tool_uses"
    size_grid = {
        "trigger_tokens": (40000, 60000, 80000, 100000, 150000),
        "keep": (1, 3, 5),
    }  # ``ctxsim size --policy anthropic_clear_tool_uses``'s default grid

    plans = True

    def before_call(self, trace: Trace, state, view: View, call: int, status=None) -> list[Change]:
        """``plan_many`` restates this for whole runs (tests/test_plans_summary.py)."""
        if request_tokens(trace, view, call) <= self.trigger_tokens:
            return []
        ptok, pbytes = text_size(trace, PLACEHOLDER)
        itok, ibytes = text_size(trace, INPUT_PLACEHOLDER)
        issuers = trace.derived("issuers", issuer_of)
        changes: dict[int, Change] = {}
        reclaimed = 0
        for i in candidates(trace, view, self.keep):
            if view.state[i] not in VISIBLE or excluded(trace, self.exclude_tools, i):
                continue
            changes[i] = Change(i, MASKED, ptok, pbytes, "clear")
            reclaimed += view.tokens[i] - ptok
            a = issuers.get(i)
            if self.clear_tool_inputs and a is not None and a not in changes and view.state[a] in VISIBLE:
                changes[a] = Change(a, MASKED, itok, ibytes, "clear-input")
                reclaimed += view.tokens[a] - itok
        if not changes or reclaimed < self.clear_at_least:
            return []
        return [changes[i] for i in sorted(changes)]

    def plan(self, trace: Trace):
        return self.plan_many([trace])[0]

    def plan_many(self, traces: Sequence[Trace]) -> Plans:
        """``before_call``'s decisions for many runs at once, a call position at a time over every run
        (``_Results``). The cleared results are always a prefix of each run's tool results (those not
        excluded): an activation clears up to the newest ``keep``, so a run's state is where its prefix
        ends and the tokens the clears saved; what an activation reclaims is a difference of running
        sums. The trigger reads sizes: runs with needs are declined (a re-read changes them)."""
        if not traces:
            return Plans.of([])
        b = batch_derived(traces, "clear_tool_uses_results", _results)
        excl = _excluded_all(traces, self.exclude_tools) if self.exclude_tools else None
        gain = b.gain.copy()
        counted = np.ones(len(gain), dtype=np.int64)
        if excl is not None:
            gain[excl], counted[excl] = 0, 0
        inputs = b.input_gain if excl is None else np.where(excl, 0, b.input_gain)
        if self.clear_tool_inputs:
            gain += inputs
        gains = np.zeros(len(gain) + 1, dtype=np.int64)
        np.cumsum(gain, out=gains[1:])
        counts = np.zeros(len(gain) + 1, dtype=np.int64)
        np.cumsum(counted, out=counts[1:])
        runs = len(traces)
        saved, cleared = np.zeros(runs, dtype=np.int64), np.zeros(runs, dtype=np.int64)
        act_run, act_call, act_lo, act_hi = [], [], [], []
        for k in range(b.base.shape[1]):
            upto = b.in_view[:, k] - self.keep
            fire = (b.base[:, k] - saved > self.trigger_tokens) & (upto > cleared)
            if not fire.any():
                continue
            r = np.flatnonzero(fire)
            lo, hi = b.first[r] + cleared[r], b.first[r] + upto[r]
            reclaimed = gains[hi] - gains[lo]
            ok = (counts[hi] > counts[lo]) & (reclaimed >= self.clear_at_least)
            r, lo, hi = r[ok], lo[ok], hi[ok]
            saved[r] += reclaimed[ok]
            cleared[r] = upto[r]
            act_run.append(r), act_call.append(np.full(len(r), k, dtype=np.int64))
            act_lo.append(lo), act_hi.append(hi)
        declined = b.needs
        if not act_run:
            plans = Plans(*(np.zeros(0, dtype=np.int64) for _ in range(4)), np.zeros(runs, dtype=np.int64))
        else:
            lo, hi = np.concatenate(act_lo), np.concatenate(act_hi)
            n = hi - lo
            at = np.repeat(lo, n) + positions(n)  # every result each activation clears (excluded too)
            run, call = np.repeat(np.concatenate(act_run), n), np.repeat(np.concatenate(act_call), n)
            keep = ~declined[run] if excl is None else ~declined[run] & ~excl[at]
            run, call, at = run[keep], call[keep], at[keep]
            index, tokens = b.index[at], b.ptok[run]
            if self.clear_tool_inputs:  # each issuer with the first of its results
                issued = b.first_of_issuer[at]
                by = run[issued]
                run, call = np.concatenate([run, by]), np.concatenate([call, call[issued]])
                index = np.concatenate([index, b.issuer[at[issued]]])
                tokens = np.concatenate([tokens, b.itok[by]])
            order = np.lexsort((index, call, run))
            state = np.full(len(order), int(MASKED), dtype=np.int64)
            plans = Plans(call[order], index[order], tokens[order], state, np.bincount(run, minlength=runs))
            plans.one_state = int(MASKED)
        if declined.any():
            plans.declined = declined
        return plans


class _Results(NamedTuple):
    """What the planner reads of a batch of runs, the same for every setting. Calls as a padded table
    (run x call position; a position past a run's end never fires), tool results laid end to end."""

    base: np.ndarray  # per run and call: the request's tokens before any clear (view + residual)
    in_view: np.ndarray  # per run and call: tool results in view
    first: np.ndarray  # per run: where its results start among all
    index: np.ndarray  # per result: its event index in its run
    gain: np.ndarray  # per result: the tokens clearing it reclaims (its size less the placeholder's)
    issuer: np.ndarray  # per result: its issuing assistant event (-1: none)
    first_of_issuer: np.ndarray  # per result: the first result of its issuer (clearing it clears the input)
    input_gain: np.ndarray  # per result: the tokens clearing its issuer reclaims, where first_of_issuer
    ptok: np.ndarray  # per run: the placeholder's tokens
    itok: np.ndarray  # per run: the input placeholder's tokens
    needs: np.ndarray  # per run: it records needs (declined)


def _results(traces: Sequence[Trace]) -> _Results:
    arrays = [t.arrays for t in traces]
    ncalls = np.array([len(a.view_end) for a in arrays], dtype=np.int64)
    width = int(ncalls.max(initial=0))
    never = np.iinfo(np.int64).min // 2
    base = np.full((len(traces), width), never, dtype=np.int64)
    in_view = np.zeros((len(traces), width), dtype=np.int64)
    kind = KIND_CODE["tool_result"]
    index, issuers = [], []
    for r, (t, a) in enumerate(zip(traces, arrays, strict=True)):
        res = np.flatnonzero(a.kind == kind)
        index.append(res)
        base[r, : ncalls[r]] = a.prefix[a.view_end] + a.residual
        in_view[r, : ncalls[r]] = res.searchsorted(a.view_end)
        issuers.append(t.derived("result_issuers", result_issuers)[res])
    n_res = np.array([len(x) for x in index], dtype=np.int64)
    idx, issuer = concat(index), concat(issuers)
    run = owners(n_res)
    ev_off = offsets(np.array([len(a.tokens) for a in arrays], dtype=np.int64))
    tokens = concat([a.tokens for a in arrays])
    ptok = np.array([text_size(t, PLACEHOLDER)[0] for t in traces], dtype=np.int64)
    itok = np.array([text_size(t, INPUT_PLACEHOLDER)[0] for t in traces], dtype=np.int64)
    has = issuer >= 0
    key = np.where(has, issuer + ev_off[run], -1 - np.arange(len(issuer)))  # a global issuer id
    _, first_at = np.unique(key, return_index=True)
    first_of = np.zeros(len(issuer), dtype=bool)
    first_of[first_at] = True
    first_of &= has
    input_gain = np.where(first_of, tokens[np.maximum(issuer, 0) + ev_off[run]] - itok[run], 0)
    needs = np.array(runs_have_needs(traces), dtype=bool)
    return _Results(
        base, in_view, offsets(n_res), idx, tokens[idx + ev_off[run]] - ptok[run], issuer, first_of,
        input_gain, ptok, itok, needs,
    )  # fmt: skip


def _excluded_all(traces: Sequence[Trace], names: tuple[str, ...]) -> np.ndarray:
    """Per tool result of the batch (``_Results`` order): ``excluded``, the same test."""
    return batch_derived(traces, f"clear_tool_uses_excluded:{names!r}", lambda ts: _excluded_of(ts, names))


def _excluded_of(traces: Sequence[Trace], names: tuple[str, ...]) -> np.ndarray:
    return np.array(
        [excluded(t, names, i) for t in traces for i in t.derived("tool_results", tool_results)], dtype=bool
    )
