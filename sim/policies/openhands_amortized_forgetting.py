"""``openhands_amortized_forgetting``: OpenHands' ``AmortizedForgettingCondenser`` (V0).

Events are OpenHands' view: the non-system events in view that were not forgotten (the system prompt
and tool definitions are always kept and not counted). Trigger: before a call, more than ``max_size``
events. Kept set: the first ``keep_first`` events (head) and the newest
``max_size // 2 - keep_first - 1`` events (tail). Transform of the rest: deleted (DROPPED), no summary.
State rewrite: the condensation is recorded in the history, so dropped events stay dropped and later
counts start from the shortened view; not recoverable. Cache: each condensation rewrites the prefix
from the first forgotten event; between condensations the prefix is stable (amortized).

Tool pairs are never split. A tail that would start with a result whose call is forgotten is cut one
event later (OpenHands' ConversationMemory filters such unmatched observations from the request anyway,
so the request is the same; OpenHands still counts the filtered event until its next condensation,
ctxsim does not). A forgotten result whose call is in the head stays. A result admitted after its call
was forgotten is dropped as it arrives. The ``- 1`` of the tail size is the brief's (POLICIES.md: "same
cut" as LLMSummarizing, whose ``- 1`` leaves room for the summary event).
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.errors import ConfigError
from sim.policies.base import Change, Policy, View, check_int, register
from sim.types import ItemState, Trace

DROPPED = ItemState.DROPPED
SYSTEM_KINDS = ("system", "tools")


def issuers(trace: Trace) -> dict[int, int]:
    """tool_result event index -> the assistant event that issued its call (joined by tool call id)."""
    by_id: dict[str, int] = {}
    out: dict[int, int] = {}
    for e in trace.events:
        for cid in e.tool_call_ids:
            by_id[cid] = e.index
        if e.kind == "tool_result" and e.tool_call_id in by_id:
            out[e.index] = by_id[e.tool_call_id]
    return out


def check_cut(policy: str, keep_first: int, max_size: int) -> None:
    check_int(policy, "keep_first", keep_first, 0)
    check_int(policy, "max_size", max_size, 1)
    lo = 2 * keep_first + 4
    if max_size < lo:
        raise ConfigError(
            f"policy '{policy}': max_size={max_size!r} is not an integer >= 2 x keep_first + 4 = {lo} "
            "(the tail max_size // 2 - keep_first - 1 must keep at least one event)"
        )


def split(
    kept: list[int], keep_first: int, from_tail: int, issuer: dict[int, int]
) -> tuple[list[int], list[int]]:
    """OpenHands' cut of the view ``kept``: (events kept, events forgotten), never splitting a pair.

    Head ``kept[:keep_first]``, tail the newest ``from_tail``; the middle is forgotten, except results
    whose call is in the head; tail results whose call is forgotten are forgotten too.
    """
    end = max(len(kept) - from_tail, keep_first)
    head = set(kept[:keep_first])
    forgotten, stay = [], []
    for i in kept[keep_first:end]:
        (stay if issuer.get(i, -1) in head else forgotten).append(i)
    gone = set(forgotten)
    tail = []
    for i in kept[end:]:
        (forgotten if issuer.get(i, -1) in gone else tail).append(i)
    return kept[:keep_first] + stay + tail, sorted(forgotten)


class _RunState:
    __slots__ = ("issuer", "kept", "seen", "gone")

    def __init__(self, issuer: dict[int, int]) -> None:
        self.issuer = issuer
        self.kept: list[int] = []  # OpenHands' view: non-system events not forgotten, ascending
        self.seen = 0  # events [0, seen) were looked at
        self.gone: set[int] = set()  # forgotten events


def admit(trace: Trace, state: _RunState, n: int) -> list[int]:
    """Add the events new in view to ``state.kept``; returns results whose call was already forgotten."""
    late = []
    for i in range(state.seen, n):
        e = trace.events[i]
        if e.kind in SYSTEM_KINDS:
            continue
        if state.issuer.get(i, -1) in state.gone:
            state.gone.add(i)
            late.append(i)
        else:
            state.kept.append(i)
    state.seen = max(state.seen, n)
    return late


@register
@dataclass(frozen=True)
class OpenHandsAmortizedForgetting(Policy):
    """Over ``max_size`` events: keep the head and the newest half, forget the middle (no summary)."""

    keep_first: int = 1
    max_size: int = 100

    name = "openhands_amortized_forgetting"
    acts_before_call = True
    conformance_settings = ({"keep_first": 1, "max_size": 6}, {"keep_first": 2, "max_size": 9})

    def __post_init__(self) -> None:
        check_cut(self.name, self.keep_first, self.max_size)

    def start(self, trace: Trace) -> _RunState:
        return _RunState(trace.derived("openhands_issuers", issuers))

    def before_call(self, trace: Trace, state: _RunState, view: View, call: int, status=None) -> list[Change]:
        forget = admit(trace, state, view.n)
        if len(state.kept) > self.max_size:
            from_tail = self.max_size // 2 - self.keep_first - 1
            state.kept, more = split(state.kept, self.keep_first, from_tail, state.issuer)
            state.gone.update(more)
            forget += more
        return [Change(i, DROPPED, 0, 0, "forget") for i in sorted(forget)]

    def bound_violations(self, trace: Trace, view: View) -> list[str]:
        n = sum(
            1
            for i in range(view.n)
            if trace.events[i].kind not in SYSTEM_KINDS and view.state[i] != ItemState.DROPPED
        )
        if n > self.max_size:
            return [f"{n} events in view before the call, over max_size {self.max_size}"]
        return []
