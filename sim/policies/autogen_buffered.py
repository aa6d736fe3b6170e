"""``autogen_buffered``: AutoGen's ``BufferedChatCompletionContext(buffer_size)`` (autogen-core 0.7.5).

``buffer_size`` required by AutoGen and > 0 (0 is refused, as AutoGen raises). Held call for call to
the installed class by ``make oracle-autogen``.

- Messages: every event but ``system`` / ``tools`` ones (AutoGen's agent sends its system message outside
  the model context), one per event, except that the consecutive results of one assistant turn are one
  message (AutoGen's ``FunctionExecutionResultMessage`` of a turn's parallel calls).
- Trigger: every call, ``get_messages`` returns the last ``buffer_size`` messages.
- Kept: those, minus the first when it is a tool-result message (AutoGen drops that one message: at
  ``buffer_size`` 1 in a tool loop the request holds no message at all, only the system message).
- The rest: removed from the request (DROPPED); the context's own list keeps them, but the agent has no
  handle to them, so they count as lost. View per call; as messages only get appended, the window's
  start only moves forward.
- Cache: the request's prefix after the system message changes on every call once the buffer is full.
- Default chosen: AutoGen requires ``buffer_size``; ctxsim uses 20 (ten tool turns).
- Plan: ``AutogenBuffered.plan_many`` gives the same decisions for many runs at once (the batch path);
  ``KeepNewest.before_call`` stays the reference (tests/test_plans_autogen.py holds one to the other).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sim.core.types import ItemState, Trace
from sim.policies.autogen_plan import batch, previous_in_run, ranges, running_max
from sim.policies.base import Plan, Plans, check_int, register
from sim.policies.strands_sliding_window import KeepNewest

DROPPED = ItemState.DROPPED


@register
@dataclass(frozen=True)
class AutogenBuffered(KeepNewest):
    """The last buffer_size messages (AutoGen BufferedChatCompletionContext)."""

    buffer_size: int = 20

    name = "autogen_buffered"
    size_grid = {
        "buffer_size": (5, 10, 20, 40, 80)
    }  # ``ctxsim size --policy autogen_buffered``'s default grid
    reason = "buffer"
    plans = True
    conformance_settings = ({"buffer_size": 2}, {"buffer_size": 5})

    def __post_init__(self) -> None:
        check_int(self.name, "buffer_size", self.buffer_size, 1)

    def window(self) -> int:
        return self.buffer_size

    def plan(self, trace: Trace) -> Plan:
        return self.plan_many([trace])[0]

    def plan_many(self, traces: Sequence[Trace]) -> Plans:
        """``KeepNewest.before_call`` for many runs at once. With ``count`` messages in a call's view the
        cut is ``count - buffer_size``, one further when the message there is a tool result; the start
        only moves forward (a running maximum of the cuts within the run), and each call drops the
        messages between the previous start and its own. One exception keeps an exact loop: a call
        whose ``count - buffer_size`` equals the start does not act even when its message is a tool
        result (the start was itself moved past a tool result: two result messages in a row)."""
        b = batch(traces)
        w = self.buffer_size
        c = b.count - w
        at = np.flatnonzero(c >= 1)
        msg = b.msg_off[b.call_run[at]] + c[at]
        cand = np.zeros(len(c), dtype=np.int64)
        cand[at] = c[at] + b.result[msg]
        lift = int(b.n_msgs.max(initial=0)) + 2
        start = running_max(cand, b, lift)
        risky = at[b.result[msg] & b.result[msg - 1]]
        for r in np.unique(b.call_run[risky]).tolist():  # the exact loop (before_call's), rarely
            lo, n, off, s = int(b.first_call[r]), int(b.n_calls[r]), int(b.msg_off[r]), 0
            for j in range(lo, lo + n):
                cj = int(c[j])
                if cj > s:
                    s = max(s, cj + int(b.result[off + cj]))
                start[j] = s
        before = previous_in_run(start, b, 0)
        so = b.start_off[b.call_run]
        call_counts = b.start[so + start] - b.start[so + before]
        has = b.n_calls > 0
        last = np.zeros(b.n_runs, dtype=np.int64)
        last[has] = start[(b.first_call + b.n_calls - 1)[has]]
        end = b.start[b.start_off + last]
        index = b.flat[ranges(b.flat_off, end)]
        state = np.full(len(index), int(DROPPED), dtype=np.int64)
        plans = Plans.by_call(
            call_counts, b.local_call, index, np.zeros(len(index), dtype=np.int64), state, end - b.flat_off
        )
        plans.ascending, plans.one_state = True, int(DROPPED)  # each message dropped once, in order
        return plans
