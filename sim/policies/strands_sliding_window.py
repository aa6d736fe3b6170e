"""``strands_sliding_window``: Strands Agents' ``SlidingWindowConversationManager`` (strands-agents
1.62.0). Held call for call to a real ``Agent`` by ``make oracle-strands``.

Knobs (Strands' names and defaults): ``window_size`` 40 (0: delete every message on each reduction),
``should_truncate_results`` true, ``per_turn`` false (true: before every model call; N: every N-th).
Not modelled: ``pin_first``, ``proactive_compression``.

- Messages: every event but ``system`` / ``tools`` ones (the agent's system prompt and tool specs);
  one message per event, except that the consecutive results of one assistant turn are one user message
  (Strands' message of a turn's parallel tool results: truncated together, deleted together).
- When: after each agent invocation (``apply_management``: before the next user message, which a
  single-task run never reaches, or after an answer without tool calls: Strands' invocation ends there),
  before model calls per ``per_turn`` (a retry after an overflow is a model call too), and on a
  context-window overflow (``reduce_context`` with the error).
- ``apply_management``: with more than ``window_size`` messages, reduce. Reduce: on an overflow with
  ``should_truncate_results``, first cut the oldest tool result (its first and last 200 characters kept
  around a ``[truncated: N chars removed]`` notice; MASKED at ``scale_tokens`` of the bytes kept) unless
  it is short or already cut; otherwise delete the messages before the trim point: from ``len -
  window_size`` (2 once within the window) forward to the next plain user message, else to the next
  tool call followed by its result; none -> nothing (an overflow: the run ends, ``context-overflow``).
- The rest: deleted (DROPPED), a state rewrite, not recoverable; the start only moves forward.
- Cache: every trim rewrites the whole prefix after the system prompt / tool specs.

The module also holds the pair/boundary helpers the AutoGen policies share, and the messages of both
frameworks (``Turns``: a turn's parallel results are one message).
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from itertools import accumulate

from sim.core.types import ItemState, Trace
from sim.cost.tokens import scale_tokens
from sim.policies.base import Change, Plan, Policy, View, check_int, register
from sim.policies.driven_plan import driven_plan
from sim.util.errors import ConfigError

DROPPED, MASKED = ItemState.DROPPED, ItemState.MASKED
NOT_MESSAGES = ("system", "tools")


class Frame:
    """Message structure of a trace: which events are messages, how calls and results pair up."""

    __slots__ = ("messages", "crossing", "group", "issuer")

    def __init__(self, trace: Trace) -> None:
        events = trace.events
        self.messages = [e.index for e in events if e.kind not in NOT_MESSAGES]
        by_id: dict[str, int] = {}
        self.issuer: dict[int, int] = {}  # tool_result -> the assistant event that issued its call
        members: dict[int, list[int]] = {}
        for e in events:
            for cid in e.tool_call_ids:
                by_id[cid] = e.index
            if e.kind == "tool_result" and e.tool_call_id in by_id:
                a = by_id[e.tool_call_id]
                self.issuer[e.index] = a
                members.setdefault(a, [a]).append(e.index)
        # crossing[i]: some pair (a, r) has a < i <= r, so a view starting at i would split it
        diff = [0] * (len(events) + 2)
        for r, a in self.issuer.items():
            diff[a + 1] += 1
            diff[r + 1] -= 1
        run, self.crossing = 0, []
        for i in range(len(events)):
            run += diff[i]
            self.crossing.append(run > 0)
        self.group: dict[int, tuple[int, ...]] = {}  # event -> its call/result group (itself if alone)
        for g in members.values():
            for i in g:
                self.group[i] = tuple(g)

    def in_view(self, n: int) -> int:
        """How many messages are among events [0, n)."""
        return bisect_left(self.messages, n)

    def valid(self, i: int) -> bool:
        """A view may start (or a cut may sit) at event i without splitting a call from its result."""
        return not self.crossing[i]


def frame(trace: Trace) -> Frame:
    return trace.derived("message_frame", Frame)


class Turns:
    """Messages as AutoGen's ``AssistantAgent`` and Strands' ``Agent`` hold them: one per event, except
    that the results of one assistant turn that follow one another are one message (AutoGen's
    ``FunctionExecutionResultMessage``, Strands' user message of toolResult blocks: parallel tool calls).
    ``first``: each message's first event, ascending; ``members``: its events; ``tokens``: each message's
    recorded size (its events' sum), ``prefix[k]`` the size of the first k messages (counted once a
    trace, not per call)."""

    __slots__ = ("first", "members", "tokens", "prefix")

    def __init__(self, trace: Trace) -> None:
        f, events = frame(trace), trace.events
        self.first: list[int] = []
        groups: dict[int, list[int]] = {}
        prev = -1
        for i in f.messages:
            if (
                events[i].kind == "tool_result"
                and prev == i - 1
                and events[prev].kind == "tool_result"
                and f.issuer.get(prev, -1) == f.issuer.get(i, -2)
            ):
                groups[self.first[-1]].append(i)
            else:
                self.first.append(i)
                groups[i] = [i]
            prev = i
        self.members: dict[int, tuple[int, ...]] = {k: tuple(v) for k, v in groups.items()}
        self.tokens = [sum(events[i].tokens for i in self.members[m]) for m in self.first]
        self.prefix = [0, *accumulate(self.tokens)]

    def in_view(self, n: int) -> int:
        """How many messages start among events [0, n)."""
        return bisect_left(self.first, n)


def turns(trace: Trace) -> Turns:
    return trace.derived("autogen_messages", Turns)


class _WindowState:
    __slots__ = ("turns", "start")

    def __init__(self, t: Turns) -> None:
        self.turns = t
        self.start = 0  # messages[:start] are dropped (only moves forward)


class KeepNewest(Policy):
    """AutoGen's buffered context: the newest ``size`` messages, less a first tool-result message."""

    acts_before_call = True
    reason = "window"

    def window(self) -> int:
        raise NotImplementedError

    def start(self, trace: Trace) -> _WindowState:
        return _WindowState(turns(trace))

    def before_call(
        self, trace: Trace, state: _WindowState, view: View, call: int, status=None
    ) -> list[Change]:
        t = state.turns
        msgs, count = t.first, t.in_view(view.n)
        if count - state.start <= self.window():
            return []
        cut = count - self.window()
        if trace.events[msgs[cut]].kind == "tool_result":  # AutoGen drops that one message (even the last)
            cut += 1
        if cut <= state.start:
            return []
        changes = [
            Change(i, DROPPED, 0, 0, self.reason)
            for m in msgs[state.start : cut]
            for i in t.members[m]
            if view.state[i] != DROPPED
        ]
        state.start = cut
        return changes


PRESERVE_CHARS = 200  # should_truncate_results keeps this many characters at each end
TRUNCATED = "... [truncated:"


def truncated_text(text: str) -> str | None:
    """Strands' truncation of a tool result's text, or None when it leaves the text alone."""
    if TRUNCATED in text or len(text) <= 2 * PRESERVE_CHARS:
        return None
    removed = len(text) - 2 * PRESERVE_CHARS
    head, tail = text[:PRESERVE_CHARS], text[-PRESERVE_CHARS:]
    return f"{head}...\n\n... [truncated: {removed} chars removed] ...\n\n...{tail}"


class _SlidingState:
    __slots__ = ("turns", "start", "truncated", "model_calls")

    def __init__(self, t: Turns) -> None:
        self.turns = t
        self.start = 0  # messages[:start] are deleted (only moves forward)
        self.truncated: set[int] = set()
        self.model_calls = 0  # BeforeModelCallEvents so far (per_turn=N counts them)


@register
@dataclass(frozen=True)
class StrandsSlidingWindow(Policy):
    """Strands SlidingWindowConversationManager: over window_size messages, delete the oldest up to the
    next plain user message (else the next tool call and its result)."""

    window_size: int = 40
    should_truncate_results: bool = True
    per_turn: bool | int = False

    name = "strands_sliding_window"
    size_grid = {
        "window_size": (10, 20, 40, 80)
    }  # ``ctxsim size --policy strands_sliding_window``'s default grid
    acts_before_call = True
    plans = True  # ``plan``: before_call itself over a bare view (its decisions read message counts only)
    recovers = True
    overflow_retries = 1 << 20  # Strands retries after every reduction; each one deletes or cuts something
    conformance_settings = ({"window_size": 3, "per_turn": True}, {"window_size": 6, "per_turn": 2})

    def __post_init__(self) -> None:
        check_int(self.name, "window_size", self.window_size, 0)
        if not isinstance(self.should_truncate_results, bool):
            value = self.should_truncate_results
            raise ConfigError(f"policy '{self.name}': should_truncate_results={value!r} is not true or false")
        if not isinstance(self.per_turn, bool):
            check_int(self.name, "per_turn", self.per_turn, 1)

    def start(self, trace: Trace) -> _SlidingState:
        return _SlidingState(turns(trace))

    def _reduce(self, trace: Trace, state: _SlidingState, view: View, upto: int, overflow: bool):
        """``reduce_context`` over the messages among events [0, upto); None: Strands raises."""
        t, events = state.turns, trace.events
        msgs = t.first[state.start : t.in_view(upto)]
        if self.window_size == 0:
            state.start += len(msgs)
            return [Change(i, DROPPED, 0, 0, self.name) for m in msgs for i in t.members[m]]
        if overflow and self.should_truncate_results:
            oldest = next((m for m in msgs if events[m].kind == "tool_result"), None)
            cuts = []  # every result of that message not cut yet (Strands: a turn's results are one message)
            for i in t.members[oldest] if oldest is not None else ():
                text = truncated_text(events[i].content or "") if i not in state.truncated else None
                if text is not None:
                    state.truncated.add(i)
                    old, new = len((events[i].content or "").encode()), len(text.encode())
                    cuts.append(Change(i, MASKED, scale_tokens(events[i].tokens, old, new), new, "truncate"))
            if cuts:
                return cuts
        n = len(msgs)
        start = 2 if n <= self.window_size else n - self.window_size
        trim = next((t for t in range(start, n) if events[msgs[t]].kind == "user"), n)
        if trim >= n:  # no plain user message: the next tool call followed by its result
            trim = next(
                (t for t in range(start, n - 1)
                 if events[msgs[t]].tool_call_ids and events[msgs[t + 1]].kind == "tool_result"),
                None,
            )  # fmt: skip
            if trim is None:
                return None if overflow else []
        state.start += trim
        return [Change(i, DROPPED, 0, 0, "sliding-window") for m in msgs[:trim] for i in t.members[m]]

    def _manage(self, trace: Trace, state: _SlidingState, view: View, upto: int) -> list[Change]:
        """``apply_management``: reduce when more than window_size messages."""
        if state.turns.in_view(upto) - state.start <= self.window_size:
            return []
        return self._reduce(trace, state, view, upto, False) or []

    def _before_model_call(self, trace: Trace, state: _SlidingState, view: View) -> list[Change]:
        if self.per_turn is False:
            return []
        state.model_calls += 1
        if self.per_turn is True or state.model_calls % self.per_turn == 0:
            return self._manage(trace, state, view, view.n)
        return []

    def before_call(self, trace: Trace, state: _SlidingState, view: View, call: int, status=None):
        changes: list[Change] = []
        if call > 0:  # the invocation before this call ended: apply_management
            prev = trace.calls[call - 1].event_index
            user = next((i for i in range(prev + 1, view.n) if trace.events[i].kind == "user"), None)
            # it ended at a user message, or at an answer without tool calls (Strands' end_turn: the
            # next call is another invocation's even with no user message between)
            if user is not None or not trace.events[prev].tool_call_ids:
                changes += self._manage(trace, state, view, view.n if user is None else user)
        changes += self._before_model_call(trace, state, view)
        return changes

    def plan(self, trace: Trace) -> Plan:
        """``before_call``'s decisions over the whole run, driven call by call over a bare view
        (``sim.policies.driven_plan``): they read the messages in view and their count, never a size, so a
        run whose mock model re-reads keeps them; a run the provider would refuse takes the loop, where
        ``on_overflow`` cuts or deletes (tests/test_plans_strands_adk.py holds the plan to the loop)."""
        return driven_plan(self, trace)

    def on_overflow(self, trace: Trace, state: _SlidingState, view: View, call: int, status=None):
        changes = self._reduce(trace, state, view, view.n, True)
        if changes is None:
            return None
        return changes + self._before_model_call(trace, state, view)
