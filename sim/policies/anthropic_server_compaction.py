"""``anthropic_server_compaction``: Anthropic server-side compaction, strategy ``compact_20260112``.

Knobs: ``trigger_tokens`` 150,000 input tokens (the API's minimum is 50,000, enforced); the summary size
rule is ctxsim's (the API's summary length is not documented): clamp(``summary_ratio`` x covered tokens,
``summary_min_tokens``, ``summary_max_tokens``), 0.1 / 256 / 2,048 as for the seed engine.

- Trigger: before a call, the request (view + the call's residual) exceeds ``trigger_tokens``.
- Transform: the server samples a summary of the whole prompt (one metered summary call: input = the
  request, output = the size rule), and the response carries a compaction block; on every later request
  everything before the block is dropped. Modelled as: every message in view (all events except the
  ``system`` and ``tools`` events, which the API sends outside the message list) is SUMMARIZED; the
  summary occupies the slot of the first covered message. Incremental: a later compaction covers the
  previous block too (its tokens count as covered) and the new block takes its slot. Choice: the
  request that triggers is itself served from the compacted context (the block replaces the prompt
  before sampling the answer).
- Kept: system prompt and tool definitions only.
- State rewrite (the client keeps the block and drops what precedes it); originals are not recoverable
  from the view.
- Cache: each compaction rewrites the prefix from the first message on; between compactions the
  prefix (system, tools, block) is stable.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sim.core.types import KIND_CODE, ItemState, Trace
from sim.policies.anthropic_clear_tool_uses import request_tokens, text_size
from sim.policies.base import Change, Decision, Plans, Policy, SummaryCall, View, check_int, register
from sim.policies.sparse_plans import sparse_plans
from sim.util.errors import ConfigError

SUMMARIZED = ItemState.SUMMARIZED
VISIBLE = (ItemState.VERBATIM, ItemState.BOUNDED)
INSTRUCTION_KINDS = ("system", "tools")
MIN_TRIGGER = 50000
SUMMARY_PREFIX = "<compaction>\n"


def check_summary_knobs(policy: Policy) -> None:
    """summary_ratio in (0, 1], summary_min_tokens >= 1, summary_max_tokens >= summary_min_tokens."""
    r = policy.summary_ratio  # type: ignore[attr-defined]
    if not (isinstance(r, int | float) and not isinstance(r, bool) and 0 < r <= 1):
        raise ConfigError(f"policy '{policy.name}': summary_ratio={r!r} is not a number in (0, 1]")
    check_int(policy.name, "summary_min_tokens", policy.summary_min_tokens, 1)  # type: ignore[attr-defined]
    check_int(policy.name, "summary_max_tokens", policy.summary_max_tokens, policy.summary_min_tokens)  # type: ignore[attr-defined]


class SummaryState:
    """Per run: the slot holding the current summary message and its size."""

    __slots__ = ("carrier", "tokens")

    def __init__(self) -> None:
        self.carrier = -1
        self.tokens = 0


def messages(trace: Trace, view: View) -> list[int]:
    """Visible non-instruction items in view (the messages a compaction may cover), ascending."""
    ok, st = trace.derived("not_instructions", _not_instructions), view.state
    return [i for i in range(view.n) if ok[i] and st[i] in VISIBLE]


def _not_instructions(trace: Trace) -> list[bool]:
    """Per event: its kind is none of INSTRUCTION_KINDS (from the kind column: no event objects)."""
    return (~np.isin(trace.arrays.kind, [KIND_CODE[k] for k in INSTRUCTION_KINDS])).tolist()


def summarize(
    policy: Policy,
    trace: Trace,
    state: SummaryState,
    view: View,
    covered: list[int],
    summary_input: int,
    prefix: str,
    extra: tuple[Change, ...] = (),
    basis: int | None = None,
) -> Decision | None:
    """Cover ``covered`` (visible items, plus the previous summary) with one summary: the metered call,
    and the changes. ``basis``: tokens the size rule applies to (default: covered + previous summary)."""
    if not covered:
        return None
    if basis is None:
        basis = sum(view.tokens[i] for i in covered) + (state.tokens if state.carrier >= 0 else 0)
    out = min(
        max(round(policy.summary_ratio * basis), policy.summary_min_tokens),  # type: ignore[attr-defined]
        policy.summary_max_tokens,  # type: ignore[attr-defined]
    )
    ptok, pbytes = text_size(trace, prefix)
    msg_tokens = out + ptok
    msg_bytes = pbytes + round(out * (trace.bytes_per_token or 4.0))
    carrier = covered[0] if state.carrier < 0 else min(state.carrier, covered[0])
    changes = {c.index: c for c in extra}
    for i in covered:
        changes[i] = Change(i, SUMMARIZED, 0, 0, "summarized")
    if 0 <= state.carrier != carrier:
        changes[state.carrier] = Change(state.carrier, SUMMARIZED, 0, 0, "summarized")
    changes[carrier] = Change(carrier, SUMMARIZED, msg_tokens, msg_bytes, "summary")
    state.carrier, state.tokens = carrier, msg_tokens
    return Decision([changes[i] for i in sorted(changes)], SummaryCall(summary_input, out))


@register
@dataclass(frozen=True)
class AnthropicServerCompaction(Policy):
    """Anthropic compact_20260112: over the trigger, every message is replaced by a compaction block."""

    trigger_tokens: int = 150000
    summary_ratio: float = 0.1
    summary_min_tokens: int = 256
    summary_max_tokens: int = 2048

    name = "anthropic_server_compaction"
    size_grid = {
        "trigger_tokens": (50000, 75000, 100000, 125000, 150000)
    }  # ``ctxsim size --policy anthropic_server_compaction``'s default grid
    acts_before_call = True
    plans = True
    conformance_settings = ({"trigger_tokens": MIN_TRIGGER, "summary_min_tokens": 64},)

    def __post_init__(self) -> None:
        check_int(self.name, "trigger_tokens", self.trigger_tokens, MIN_TRIGGER)
        check_summary_knobs(self)

    def start(self, trace: Trace) -> SummaryState:
        return SummaryState()

    @property
    def fires_at(self) -> int:
        """The fewest request tokens that trigger a compaction (the request exceeds ``trigger_tokens``)."""
        return self.trigger_tokens + 1

    def before_call(self, trace: Trace, state: SummaryState, view: View, call: int, status=None):
        """Asked only where the request reaches ``fires_at`` by ``plan_many`` (``sparse_plans``)."""
        request = request_tokens(trace, view, call)
        if request < self.fires_at:
            return ()
        covered = messages(trace, view)
        return summarize(self, trace, state, view, covered, request, SUMMARY_PREFIX) or ()

    def plan(self, trace: Trace):
        return self.plan_many([trace])[0]

    def plan_many(self, traces: Sequence[Trace]) -> Plans:
        return sparse_plans(self, traces, self.fires_at)
