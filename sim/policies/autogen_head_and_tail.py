"""``autogen_head_and_tail``: AutoGen's ``HeadAndTailChatCompletionContext`` (autogen-core 0.7.5).

Constructor: ``HeadAndTailChatCompletionContext(head_size, tail_size)``, both required and > 0 (0 is
refused, as AutoGen raises). Held call for call to the installed class by ``make oracle-autogen``.

- Messages: every event but ``system`` / ``tools`` ones, one per event, except that the consecutive
  results of one assistant turn are one message (AutoGen's ``FunctionExecutionResultMessage``).
- Trigger: every call where the messages in view exceed ``head_size + tail_size``.
- Kept: the first ``head_size`` messages and the last ``tail_size``. As in AutoGen, the head loses its
  last message when that is a tool call and the tail its first when that is a tool-result message.
- The rest: one placeholder user message ``Skipped N messages.``, N = messages - head_size - tail_size
  (AutoGen's count, taken before the boundary adjustments). The placeholder sits in the slot of the first
  omitted message (MASKED, with the placeholder's size; when that message is a tool call its results
  are MASKED at 0 tokens, so the pair stays together); every other omitted message is DROPPED.
- View per call: the context's own list keeps everything, but the agent has no handle (lost from view).
  The head is fixed, so the omitted span only grows toward the tail.
- Cache: every call once over, from the placeholder on (its count changes, the tail slides).
- Defaults chosen: AutoGen requires both sizes; ctxsim uses ``head_size`` 1 (the task message) and
  ``tail_size`` 20 (ten tool turns).
- Plan: ``plan_many`` gives ``before_call``'s decisions for many runs at once (the batch path);
  ``before_call`` stays the reference (tests/test_plans_autogen.py holds one to the other).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import compress, repeat
from operator import itemgetter, ne

import numpy as np

from sim.core.segments import offsets
from sim.core.types import ItemState, Trace
from sim.cost.tokens import estimate_tokens, estimate_tokens_all
from sim.policies.autogen_plan import NO_GROUP, batch, member_table, previous_in_run, ranges
from sim.policies.base import Change, Plan, Plans, Policy, View, check_int, register
from sim.policies.strands_sliding_window import Frame, Turns, frame, turns

MASKED, DROPPED = ItemState.MASKED, ItemState.DROPPED


def placeholder(skipped: int) -> str:
    return f"Skipped {skipped} messages."


_PLACEHOLDER_FIXED = len(placeholder(0).encode()) - 1  # its bytes but for the count's digits
_POW10 = np.array([10**p for p in range(1, 19)], dtype=np.int64)


def placeholder_tokens(skipped: np.ndarray, ratios: Sequence[float | None], run: np.ndarray) -> np.ndarray:
    """``estimate_tokens`` of each ``placeholder(skipped[j])`` (ASCII: its fixed text and the count's
    digits) at the ratio of run ``run[j]``: once per distinct ratio."""
    nbytes = np.searchsorted(_POW10, skipped, side="right") + (1 + _PLACEHOLDER_FIXED)
    distinct = list(dict.fromkeys(ratios[r] for r in np.unique(run).tolist()))
    if len(distinct) == 1:
        return estimate_tokens_all(nbytes, distinct[0])
    out = np.empty(len(nbytes), dtype=np.int64)
    of_run = [ratios[r] for r in run.tolist()]
    for ratio in distinct:
        at = np.array([x == ratio for x in of_run], dtype=bool)
        out[at] = estimate_tokens_all(nbytes[at], ratio)
    return out


@register
@dataclass(frozen=True)
class AutogenHeadAndTail(Policy):
    """The first head_size and last tail_size messages, a "Skipped N messages." placeholder between."""

    head_size: int = 1
    tail_size: int = 20

    name = "autogen_head_and_tail"
    size_grid = {
        "head_size": (1, 2, 4),
        "tail_size": (5, 10, 20, 40),
    }  # ``ctxsim size --policy autogen_head_and_tail``'s default grid
    acts_before_call = True
    plans = True
    conformance_settings = ({"head_size": 1, "tail_size": 2}, {"head_size": 3, "tail_size": 4})

    def __post_init__(self) -> None:
        check_int(self.name, "head_size", self.head_size, 1)  # AutoGen refuses 0 (ValueError)
        check_int(self.name, "tail_size", self.tail_size, 1)

    def start(self, trace: Trace) -> tuple[Frame, Turns]:
        return frame(trace), turns(trace)

    def before_call(self, trace: Trace, state, view: View, call: int, status=None) -> list[Change]:
        """The rule (the module's docstring); ``plan_many`` restates it for many runs at once."""
        f, t = state
        events = trace.events
        msgs, count = t.first, t.in_view(view.n)
        skipped = count - self.head_size - self.tail_size
        if skipped <= 0:
            return []
        head_end = self.head_size
        if events[msgs[head_end - 1]].tool_call_ids:  # AutoGen: the head loses a last tool-call message
            head_end -= 1
        tail_start = count - self.tail_size
        if events[msgs[tail_start]].kind == "tool_result":  # and the tail a first tool-result message
            tail_start += 1
        table = member_table(trace)  # the events of messages [head_end, tail_start), as one slice
        omitted = table.flat[table.start[head_end] : table.start[tail_start]] if head_end < tail_start else []
        if not omitted:
            return []
        carrier = omitted[0]
        text = len(placeholder(skipped).encode())
        tokens = estimate_tokens(text, trace.bytes_per_token)
        changes = []
        if view.state[carrier] != MASKED or view.tokens[carrier] != tokens or view.nbytes[carrier] != text:
            changes.append(Change(carrier, MASKED, tokens, text, "placeholder"))
        beside = f.group.get(carrier, ())
        rest = omitted[1:]
        if not beside and len(rest) > 1:  # the loop below, its DROPPED ones found with iterators
            odd = compress(rest, map(ne, itemgetter(*rest)(view.state), repeat(DROPPED)))
            changes.extend(Change(i, DROPPED, 0, 0, "skipped") for i in odd)
            return changes
        for i in rest:
            if i in beside:
                if view.state[i] != MASKED:
                    changes.append(Change(i, MASKED, 0, 0, "skipped"))
            elif view.state[i] != DROPPED:
                changes.append(Change(i, DROPPED, 0, 0, "skipped"))
        return changes

    def plan(self, trace: Trace) -> Plan:
        return self.plan_many([trace])[0]

    def plan_many(self, traces: Sequence[Trace]) -> Plans:
        """``before_call`` for many runs at once. A run acts from its first call with more than
        ``head_size + tail_size`` messages on (message counts only grow). Its head end is fixed, and its
        tail start (``count - tail_size``, one further past a tool-result message) only moves forward, so
        the omitted events are one growing slice of the run's messages laid end to end: each call changes
        the events its tail start passed since the call before (the first, the placeholder's carrier
        too: MASKED; the carrier's call/result group MASKED at 0, the rest DROPPED) and, when the
        placeholder's count gains a digit, the carrier again (its new size; first in the call: the
        lowest index)."""
        b = batch(traces)
        h, tail_size = self.head_size, self.tail_size
        skipped = b.count - h - tail_size
        acting = np.flatnonzero(skipped > 0)  # each run's calls from its first acting one on
        run_a = b.call_run[acting]
        head_end = np.minimum(h, b.n_msgs)
        has_head = b.n_msgs >= h
        head_end[has_head] -= b.calls[(b.msg_off + h - 1)[has_head]]  # a last tool-call message leaves
        carrier = b.start[b.start_off + head_end]  # its first event's place in ``flat``
        tail = b.count[acting] - tail_size
        tail += b.result[b.msg_off[run_a] + tail]
        end = carrier[b.call_run]  # per call: the omitted events end here (the carrier: none yet)
        end[acting] = b.start[b.start_off[run_a] + tail]
        before = previous_in_run(end, b, carrier)
        last_skipped = previous_in_run(skipped, b, 0)
        digits = np.searchsorted(_POW10, skipped, side="right")
        again = (skipped > 0) & (last_skipped > 0)
        again &= digits != np.searchsorted(_POW10, last_skipped, side="right")
        call_counts = end - before + again
        has = b.n_calls > 0
        last_end = carrier.copy()
        last_end[has] = end[(b.first_call + b.n_calls - 1)[has]]
        pos = ranges(carrier, last_end)  # every run's omitted events, in order
        n_range = last_end - carrier
        entry_run = np.repeat(np.arange(b.n_runs), n_range)
        index = b.flat[pos]
        group = b.group[pos]
        carrier_group = b.group[np.minimum(carrier, len(b.group) - 1)][entry_run] if len(pos) else group
        state = np.full(len(pos), int(DROPPED), dtype=np.int64)
        state[(group == carrier_group) & (group != NO_GROUP)] = MASKED
        tokens = np.zeros(len(pos), dtype=np.int64)
        ratios = [t.bytes_per_token for t in traces]
        # the carrier at each run's first acting call, sized for that call's count
        n_acting = np.bincount(run_a, minlength=b.n_runs)
        runs = np.flatnonzero(n_acting > 0)
        first_acting = (b.first_call + b.n_calls - n_acting)[runs]
        at = offsets(n_range)[runs]
        state[at] = MASKED
        tokens[at] = placeholder_tokens(skipped[first_acting], ratios, runs)
        # the carrier again where the count gains a digit, before that call's newly omitted events
        again_at = np.flatnonzero(again)
        again_run = b.call_run[again_at]
        where = before[again_at] - carrier[again_run] + offsets(n_range)[again_run]
        index = np.insert(index, where, b.flat[carrier[again_run]])
        state = np.insert(state, where, MASKED)
        tokens = np.insert(tokens, where, placeholder_tokens(skipped[again_at], ratios, again_run))
        counts = n_range + np.bincount(again_run, minlength=b.n_runs)
        return Plans.by_call(call_counts, b.local_call, index, tokens, state, counts)
