"""``autogen_token_limited``: AutoGen's ``TokenLimitedChatCompletionContext`` (autogen-core 0.7.5).

Constructor: ``TokenLimitedChatCompletionContext(model_client, *, token_limit=None, tool_schema=None)``;
``token_limit`` must be > 0. Held call for call to the installed class by ``make oracle-autogen``.

- Messages: every event but ``system`` / ``tools`` ones (``AssistantAgent`` prepends its system message
  to what the context returns; tool schemas are given to the model, not to the context); one message per
  event, except that the consecutive results of one assistant turn are one message (AutoGen's
  ``FunctionExecutionResultMessage`` of a turn's parallel calls: popped whole, weighing their sum).
- Every call, ``get_messages`` starts again from the full history: while the count exceeds
  ``token_limit`` it pops the single message at ``len // 2`` (never its partner), then drops the first
  message when that is a tool result. A message popped for one request comes back in a later one when
  the middle has moved past it: ctxsim restores it (DROPPED -> VERBATIM at its original size).
- ``token_count``: what the count covers. ``framework`` (default: AutoGen's own scope): the model
  client's ``count_tokens`` over the context's messages only (ctxsim's per-event sizes: the client's
  count is a local function of the messages), no system message, no tool schema. ``provider``: the
  whole request as the provider reports it (system message and tool specs, the call's residual).
- ``token_limit`` null: AutoGen's ``remaining_tokens`` (the model's window minus the count): the trace's
  recorded context window (no limit when unknown).
- Split pairs: a popped call can leave its result in the request, or the reverse; such requests are
  counted in the ``unpaired_tool_messages`` metric (providers usually reject them; AutoGen sends them).
- Records: a restore is no compaction: the change table lists each pop (a message popped again after
  a restore is listed again); the final states, the ledger and the facts follow the view.
- Cache: the request changes from the first popped message on, mid-conversation, on most calls.
- Plan: ``plan_many`` gives ``before_call``'s decisions for many runs at once (the batch path), with
  each run's split requests (``Plans.unpaired``), and declines those it does not model (a first
  message that is a tool result, a pair further apart); ``before_call`` stays the reference
  (tests/test_plans_autogen.py holds one to the other).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain, compress
from operator import eq, itemgetter, ne

import numpy as np

from sim.core.types import ItemState, Trace
from sim.policies.autogen_plan import batch, member_table, previous_in_run, ranges
from sim.policies.base import Change, Plan, Plans, Policy, View, check_int, register
from sim.policies.strands_sliding_window import Frame, Turns, frame, turns
from sim.util.errors import ConfigError

DROPPED, VERBATIM = ItemState.DROPPED, ItemState.VERBATIM
TOKEN_COUNTS = ("framework", "provider")


def check_token_count(policy: str, value: object) -> None:
    if value not in TOKEN_COUNTS:
        raise ConfigError(f"policy '{policy}': token_count={value!r} is not one of {', '.join(TOKEN_COUNTS)}")


class _State:
    __slots__ = ("frame", "turns", "unpaired")

    def __init__(self, f: Frame, t: Turns) -> None:
        self.frame, self.turns = f, t
        self.unpaired = 0  # requests so far holding a call or result without its partner


@register
@dataclass(frozen=True)
class AutogenTokenLimited(Policy):
    """Pop the middle message until the count fits token_limit, from the full history every call
    (AutoGen TokenLimitedChatCompletionContext)."""

    token_limit: int | None = None
    token_count: str = "framework"

    name = "autogen_token_limited"
    size_grid = {
        "token_limit": (16000, 32000, 64000, 96000, 128000)
    }  # ``ctxsim size --policy autogen_token_limited``'s default grid
    size_off = {"token_limit": None}  # switched off: the sizing's baseline
    acts_before_call = True
    splits_pairs = True
    plans = True
    conformance_settings = ({"token_limit": 1500}, {"token_limit": 4000, "token_count": "provider"})

    def __post_init__(self) -> None:
        if self.token_limit is not None:
            check_int(self.name, "token_limit", self.token_limit, 1)
        check_token_count(self.name, self.token_count)

    def start(self, trace: Trace) -> _State:
        return _State(frame(trace), turns(trace))

    def limit(self, trace: Trace) -> int | None:
        return self.token_limit if self.token_limit is not None else trace.context_window

    def unpaired_requests(self, state: _State) -> int:
        return state.unpaired

    def before_call(self, trace: Trace, state: _State, view: View, call: int, status=None) -> list[Change]:
        """The rule (the module's docstring); ``plan_many`` restates it for many runs at once."""
        t, events = state.turns, trace.events
        n = t.in_view(view.n)
        heads = t.first[:n]
        kept = list(range(n))  # message positions
        limit = self.limit(trace)
        if limit is not None:
            if self.token_count == "provider":  # the request as sent: instruction events and residual
                count = int(trace.arrays.prefix[view.n]) + int(trace.arrays.residual[call])
            else:
                count = t.prefix[n]
            while count > limit and kept:
                count -= t.tokens[kept.pop(len(kept) // 2)]
        if kept and events[heads[kept[0]]].kind == "tool_result":  # a first tool-result message
            kept.pop(0)
        table = member_table(trace)
        keep = set(chain.from_iterable(map(table.members.__getitem__, kept)))
        # every event of the messages in view, in order: popped and not yet DROPPED, or kept and DROPPED
        # (the middle moved past it: sent again); found with iterators (the rule is the comment's)
        in_view = table.flat[: table.start[n]]
        vstate = view.state
        states = [vstate[i] for i in in_view] if len(in_view) < 2 else itemgetter(*in_view)(vstate)
        odd = compress(in_view, map(eq, map(keep.__contains__, in_view), map(DROPPED.__eq__, states)))
        changes = [
            Change(i, DROPPED, 0, 0, "pop-middle")
            if i not in keep
            else Change(i, VERBATIM, events[i].tokens, events[i].bytes, "restore")
            for i in odd
        ]
        upto = bisect_left(table.results, view.n)  # the pairs whose result is in view
        state.unpaired += any(
            map(
                ne, map(keep.__contains__, table.results[:upto]), map(keep.__contains__, table.issuers[:upto])
            )
        )
        return changes

    def plan(self, trace: Trace) -> Plan:
        return self.plan_many([trace])[0]

    def plan_many(self, traces: Sequence[Trace]) -> Plans:
        return self.planned(traces)[0]

    def planned(self, traces: Sequence[Trace]) -> tuple[Plans, np.ndarray]:
        """``before_call`` for many runs at once, and each run's ``unpaired_requests`` (exact where the
        run is not declined for a pair further apart or a first tool-result message). Popping the
        message at ``len // 2`` again and again takes a growing slice from the middle: after p pops of
        n messages the kept ones are the first ``ceil((n - p) / 2)`` and the last ``(n - p) // 2``, so
        the pops a call needs (the fewest whose slice outweighs the count's excess over the limit, else
        all) are found by a binary search over every call at once, from the recorded sizes alone (a
        re-read adds to the request, never to what the context counts: runs with needs are planned
        too). Each call then changes the messages in one slice and not the other (the previous
        call's): popped ones DROPPED, those back in view VERBATIM at their recorded size."""
        b = batch(traces)
        run = b.call_run
        n = b.count
        rows = b.start_off[run]  # each call's run's rows of ``prefix`` / ``start`` / ``cross``
        limits = [self.limit(t) for t in traces]
        limit = np.array([-1 if x is None else x for x in limits], dtype=np.int64)[run]
        if self.token_count == "provider":
            count = b.event_prefix + b.residual
        else:
            count = b.prefix[rows + n]
        excess = np.where(limit >= 0, count - limit, 0)
        lo, hi = np.zeros(len(n), dtype=np.int64), n.copy()
        lo[excess <= 0] = hi[excess <= 0] = 0
        open_ = lo < hi
        while open_.any():  # the fewest pops whose slice covers the excess (all n when none does)
            mid = (lo + hi) // 2
            popped = b.prefix[rows + n - (n - mid) // 2] - b.prefix[rows + (n - mid + 1) // 2]
            enough = popped >= excess
            hi = np.where(open_ & enough, mid, hi)
            lo = np.where(open_ & ~enough, mid + 1, lo)
            open_ = lo < hi
        a = (n - lo + 1) // 2  # the popped messages: [a, e)
        e = n - (n - lo) // 2
        none = a == e  # nothing popped: one empty slice
        a[none] = e[none] = 0
        a0, e0 = previous_in_run(a, b, 0), previous_in_run(e, b, 0)
        # the messages in one slice and not the other: three pieces between the four ends, in order
        ends = np.sort(np.stack([a0, e0, a, e], axis=1), axis=1)
        lo_ = ends[:, :3].ravel()
        hi_ = ends[:, 1:].ravel()
        now = ((lo_ >= np.repeat(a, 3)) & (lo_ < np.repeat(e, 3))).astype(np.int64)
        then = ((lo_ >= np.repeat(a0, 3)) & (lo_ < np.repeat(e0, 3))).astype(np.int64)
        rows3 = np.repeat(rows, 3)
        lo_, hi_ = b.start[rows3 + lo_], b.start[rows3 + hi_]  # as places in ``flat``
        piece = np.flatnonzero((now != then) & (hi_ > lo_))
        sizes = hi_[piece] - lo_[piece]
        pos = ranges(lo_[piece], hi_[piece])
        dropped = np.repeat(now[piece], sizes).astype(bool)
        index = b.flat[pos]
        state = np.where(dropped, int(DROPPED), int(VERBATIM))
        tokens = np.where(dropped, 0, b.tokens[pos])
        call_counts = np.bincount(piece // 3, weights=sizes, minlength=len(n)).astype(np.int64)
        counts = np.bincount(run, weights=call_counts, minlength=b.n_runs).astype(np.int64)
        plans = Plans.by_call(call_counts, b.local_call, index, tokens, state, counts)
        # a request splits a pair when one message of it is popped and the other kept: a pair of
        # adjacent messages crosses one end of the slice (``cross``: the first result message past it)
        split = (a < e) & ((b.cross[rows + a] < n) | (b.cross[rows + e] < n))
        unpaired = np.bincount(run, weights=split, minlength=b.n_runs).astype(np.int64)
        acts = np.bincount(run, weights=e > a, minlength=b.n_runs) > 0
        # declined: a pair further apart while popping (it may straddle the whole slice, the count
        # above does not see it), a first message that is a tool result (AutoGen drops it: not modelled)
        first_result = b.result[np.minimum(b.msg_off, max(len(b.result) - 1, 0))] & (b.n_msgs > 0)
        declined = (b.long_pairs & acts) | first_result
        if declined.any():
            plans.declined = declined
        if unpaired.any():
            plans.unpaired = unpaired
        return plans, unpaired
