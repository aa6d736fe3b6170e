"""``strands_summarizing``: Strands Agents' ``SummarizingConversationManager`` (strands-agents 1.62.0).
Held call for call to a real ``Agent`` by ``make oracle-strands``.

Knobs (Strands' names and defaults): ``summary_ratio`` 0.3 (Strands clamps it to [0.1, 0.8]),
``preserve_recent_messages`` 10, ``proactive_compression`` null (off) or ``{compression_threshold:
float in (0, 1]}`` (Strands' mapping; ``true`` means 0.7), flattened in result rows to
``policy.proactive_compression.compression_threshold``. ``context_window``: the model's
``context_window_limit`` (null: the trace's recorded window, else Strands' default 200,000). The summary
size rule is ctxsim's: clamp(``summary_size_ratio`` x the tokens the summarizer is given,
``summary_min_tokens``, ``summary_max_tokens``). Not modelled: ``summarization_agent``, ``pin_first``.

- Messages: every event but ``system`` / ``tools`` ones (one message per event, except that the
  consecutive results of one assistant turn are one user message, as Strands holds parallel tool
  results), the summary (a user message) first once there is one.
- When: on a context-window overflow (``reduce_context`` with the error: a failure ends the run,
  ``context-overflow``), and, with ``proactive_compression``, before every model call (a retry after an
  overflow too) whose projected input reaches threshold x ``context_window``. Projected input (Strands'
  own scope): the usage the provider reported for the newest assistant message (its request + output)
  plus ctxsim's sizes of the messages after it; with no such message, the system prompt, tool specs
  and every message.
- Cut: the oldest max(1, int(``summary_ratio`` x messages)) messages, at most messages -
  ``preserve_recent_messages`` (none left: no reduction); the split moves forward past tool results and
  tool calls whose result does not follow. The summary message replaces them (the previous summary is
  among them: summaries are incremental), SUMMARIZED in the slot of the first one.
- Overflow: Strands reduces and retries until the request fits. When the same state overflows twice at
  one call (the summary of a summary no smaller), Strands would loop forever: the run ends with finish
  reason ``compaction-loop``.
- Summary call: input = the instruction + what it was given; a state rewrite, not recoverable.
- Cache: each reduction rewrites the prefix from the summary slot on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sim.core.types import ItemState, Trace
from sim.cost.tokens import estimate_tokens
from sim.information.state import has_needs
from sim.policies.base import Change, Decision, Plan, Plans, Policy, SummaryCall, View, check_int, register
from sim.policies.driven_plan import DECLINED, driven_plan
from sim.policies.langchain_clear_tool_uses import instruction_tokens
from sim.policies.llm_summary import SUMMARIZER_INSTRUCTION
from sim.policies.strands_sliding_window import Turns, turns
from sim.util.errors import ConfigError

SUMMARIZED, VERBATIM = ItemState.SUMMARIZED, ItemState.VERBATIM
DEFAULT_COMPRESSION_THRESHOLD = 0.7
DEFAULT_CONTEXT_WINDOW_LIMIT = 200_000  # Strands' estimate when the model has no context_window_limit


class _State:
    __slots__ = ("turns", "carrier", "reported", "overflowed", "call")

    def __init__(self, t: Turns) -> None:
        self.turns = t
        self.carrier = -1  # the slot of the summary message
        self.reported: dict[int, int] = {}  # call -> its provider's report (request + output)
        self.overflowed: set[tuple] = set()  # states that overflowed at the current call
        self.call = -1


def _number(p, knob: str, value: Any, lo: float, hi: float, lo_open: bool = True) -> None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and value <= hi
    ok = ok and (value > lo if lo_open else value >= lo)
    if not ok:
        raise ConfigError(
            f"policy '{p.name}': {knob}={value!r} is not a number in {'(' if lo_open else '['}{lo}, {hi}]"
        )


def compression_threshold(p, value: Any) -> float | None:
    """Strands' ``proactive_compression``: null / false (off), true (0.7), or {compression_threshold}."""
    if value is None or value is False:
        return None
    if value is True:
        return DEFAULT_COMPRESSION_THRESHOLD
    if not isinstance(value, dict) or set(value) - {"compression_threshold"}:
        raise ConfigError(
            f"policy '{p.name}': proactive_compression={value!r} is not null, true or "
            "{compression_threshold: x}"
        )
    t = value.get("compression_threshold", DEFAULT_COMPRESSION_THRESHOLD)
    _number(p, "proactive_compression.compression_threshold", t, 0, 1)
    return t


@register
@dataclass(frozen=True)
class StrandsSummarizing(Policy):
    """Summarize the oldest summary_ratio of messages, keeping preserve_recent_messages (Strands)."""

    summary_ratio: float = 0.3
    preserve_recent_messages: int = 10
    proactive_compression: Any = None
    context_window: int | None = None
    summary_size_ratio: float = 0.1
    summary_min_tokens: int = 256
    summary_max_tokens: int = 2048

    name = "strands_summarizing"
    size_grid = {
        "preserve_recent_messages": (5, 10, 20, 40)
    }  # ``ctxsim size --policy strands_summarizing``'s default grid
    acts_before_call = True
    plans = True
    recovers = True
    overflow_retries = 1 << 20  # Strands reduces until the request fits; a repeated state ends the run
    conformance_settings = (
        {"context_window": 2000, "preserve_recent_messages": 2, "summary_min_tokens": 10,
         "proactive_compression": {"compression_threshold": 0.7}},
        {"context_window": 5000, "summary_ratio": 0.5, "preserve_recent_messages": 3,
         "proactive_compression": True},
    )  # fmt: skip

    def __post_init__(self) -> None:
        _number(self, "summary_ratio", self.summary_ratio, -1e9, 1e9, lo_open=False)  # Strands clamps it
        _number(self, "summary_size_ratio", self.summary_size_ratio, 0, 1)
        compression_threshold(self, self.proactive_compression)
        check_int(self.name, "preserve_recent_messages", self.preserve_recent_messages, 0)
        if self.context_window is not None:
            check_int(self.name, "context_window", self.context_window, 1)
        check_int(self.name, "summary_min_tokens", self.summary_min_tokens, 1)
        check_int(self.name, "summary_max_tokens", self.summary_max_tokens, self.summary_min_tokens)

    def params(self) -> dict[str, Any]:
        """The knobs, ``proactive_compression`` flattened to its threshold (as result rows hold it)."""
        out = super().params()
        out["proactive_compression.compression_threshold"] = compression_threshold(
            self, out.pop("proactive_compression")
        )
        return out

    def start(self, trace: Trace) -> _State:
        return _State(turns(trace))

    # ---------------------------------------------------------------------------------- Strands' steps
    def _messages(self, state: _State, view: View) -> list[int]:
        """The messages sent (each by its first event), the summary first."""
        t = state.turns
        msgs = [m for m in t.first[: t.in_view(view.n)] if view.state[m] == VERBATIM]
        return [state.carrier, *msgs] if state.carrier >= 0 else msgs

    def _sizes(self, state: _State, view: View, msgs: list[int]) -> dict[int, int]:
        """Each message's tokens (a turn's results together; the summary its own)."""
        members = state.turns.members
        return {
            m: view.tokens[m] if m == state.carrier else sum(view.tokens[i] for i in members[m]) for m in msgs
        }

    def _summarize_oldest(self, trace: Trace, state: _State, msgs: list[int], size: dict[int, int]):
        """``_summarize_oldest``: (changes, summary call, messages after), or None where Strands raises."""
        events = trace.events
        ratio = max(0.1, min(0.8, self.summary_ratio))
        n = len(msgs)
        count = min(max(1, int(n * ratio)), n - self.preserve_recent_messages)
        if count <= 0:
            return None
        if count < n:  # adjust_split_point_for_tool_pairs: forward past results and unanswered calls
            while count < n:
                e = events[msgs[count]] if msgs[count] != state.carrier else None
                if e is not None and (
                    e.kind == "tool_result"
                    or (e.tool_call_ids and count + 1 < n and events[msgs[count + 1]].kind != "tool_result")
                ):
                    count += 1
                else:
                    break
            else:
                return None
        covered = msgs[:count]
        basis = sum(size[i] for i in covered)
        out = min(
            max(round(self.summary_size_ratio * basis), self.summary_min_tokens), self.summary_max_tokens
        )
        slot = covered[0]
        bpt = trace.bytes_per_token
        members = state.turns.members
        changes = [
            Change(i, SUMMARIZED, 0, 0, "summarized")
            for m in covered
            for i in ((m,) if m == state.carrier else members[m])
            if i != slot
        ]
        changes.insert(0, Change(slot, SUMMARIZED, out, round(out * (bpt or 4.0)), "summary"))
        instruction = estimate_tokens(len(SUMMARIZER_INSTRUCTION.encode()), bpt)
        state.carrier = slot
        size[slot] = out
        return changes, SummaryCall(instruction + basis, out), [slot, *msgs[count:]]

    def _projected(
        self, trace: Trace, state: _State, view: View, msgs: list[int], size: dict[int, int]
    ) -> int:
        """Strands' projected input tokens: the newest reported usage plus the messages after it."""
        calls = trace.derived("call_of_event", _call_of_event)
        for j in range(len(msgs) - 1, -1, -1):
            c = calls.get(msgs[j]) if msgs[j] != state.carrier else None
            if c is not None and c in state.reported:
                return state.reported[c] + sum(size[i] for i in msgs[j + 1 :])
        return instruction_tokens(trace, view.n) + sum(size[i] for i in msgs)

    def _proactive(self, trace: Trace, state: _State, view: View, msgs: list[int], size: dict[int, int]):
        threshold = compression_threshold(self, self.proactive_compression)
        if threshold is None:
            return None
        limit = self.context_window or trace.context_window or DEFAULT_CONTEXT_WINDOW_LIMIT
        if self._projected(trace, state, view, msgs, size) / limit < threshold:
            return None
        return self._summarize_oldest(trace, state, msgs, size)  # a failure is swallowed

    def before_call(self, trace: Trace, state: _State, view: View, call: int, status=None):
        """Proactive compression only (off by default: then nothing before a call; ``plan_many`` says
        so for whole batches, tests/test_plans_strands_adk.py holds the two together)."""
        if call > 0 and status is not None and status.last_input is not None:
            state.reported[call - 1] = status.last_input + (status.last_output or 0)
        state.call, state.overflowed = call, set()
        msgs = self._messages(state, view)
        size = self._sizes(state, view, msgs)
        done = self._proactive(trace, state, view, msgs, size)
        return Decision(done[0], done[1]) if done else ()

    def on_overflow(self, trace: Trace, state: _State, view: View, call: int, status=None):
        msgs = self._messages(state, view)
        size = self._sizes(state, view, msgs)
        signature = tuple((i, size[i]) for i in msgs)
        if signature in state.overflowed:  # Strands would summarize and overflow again forever
            return Decision(stop="compaction-loop")
        state.overflowed.add(signature)
        done = self._summarize_oldest(trace, state, msgs, size)
        if done is None:
            return None
        changes, summaries, msgs = list(done[0]), [done[1]], done[2]
        again = self._proactive(trace, state, view, msgs, size)  # the retry's BeforeModelCallEvent
        if again is not None:
            changes += again[0]
            summaries.append(again[1])
        return Decision(changes, summaries)

    def plan(self, trace: Trace) -> Plan:
        return self.plan_many([trace])[0]

    def plan_many(self, traces: Sequence[Trace]) -> Plans:
        """``before_call``'s decisions for whole runs (tests/test_plans_strands_adk.py holds them to it).
        Without ``proactive_compression`` it never changes anything before a call (Strands reduces on an
        overflow only, and the engine hands a run over its window to the loop, whose ``on_overflow``
        does that): every plan is empty, found without reading the traces. With it, ``_plan_run``."""
        if compression_threshold(self, self.proactive_compression) is None:
            n = len(traces)
            none = np.zeros(0, dtype=np.int64)
            plans = Plans(none, none, none, none, np.zeros(n, dtype=np.int64))
            plans.ascending = True
            return plans
        return Plans.of([self._plan_run(t) for t in traces])

    def _plan_run(self, trace: Trace) -> Plan:
        """Proactive compression over one run: ``before_call`` itself, driven over a bare view with the
        usage the provider would report (``sim.policies.driven_plan``); its cost is the reference's
        (O(messages) a call), without the engine's. Declined: a run with needs (a re-read adds tokens
        to later requests), and what ``driven_plan`` declines (an output the recording lacks)."""
        if trace.derived("has_needs", has_needs):
            return DECLINED
        return driven_plan(self, trace, reads_output=True)


def _call_of_event(trace: Trace) -> dict[int, int]:
    """assistant event -> the call that produced it."""
    return {c.event_index: c.index for c in trace.calls}
