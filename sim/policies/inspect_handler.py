"""Inspect's compaction handler (inspect-ai 0.3.285, ``inspect_ai.model._compaction``): what the four
``inspect_compaction_*`` policies share. Not a policy itself.

Inspect's ``compaction(strategy, prefix)`` handler keeps a compacted input that new messages are appended
to, and before each generate:
- estimates the request: the previous call's reported input (``record_output``: provider input tokens,
  the residual included) plus the messages added since; on the first call the messages and the tool
  definitions counted from scratch (here: the view, no residual);
- compacts when the estimate exceeds ``threshold`` (strictly): an int (or a float > 1) is tokens, a float
  <= 1 a fraction of the model's input window (ctxsim: the trace's recorded window, else the provider
  table in ``conf/model/providers/``, else Inspect's fallback of 128,000);
- runs the strategy, then up to three more passes on its own output while the result (tools + messages,
  no residual) is over the threshold and each pass still shrinks it; still over: it raises "Compaction
  insufficient" and the sample ends. ctxsim: the run ends with finish reason ``compaction-insufficient``
  before that call is sent; summarizer calls the passes made are metered, nothing else changes.
- the prefix (system and task) is re-added when a strategy dropped it: none of these strategies does.
- consecutive messages are not collapsed (Inspect collapses them only for providers that require it; the
  oracle's mock provider does not).
The result is state, not a per-call view: edits persist and later compactions work on the compacted
input. Messages are every event but ``tools`` (Inspect counts tool definitions apart, ``count_tool_tokens``;
here they stay in the view, which sums the same). The input messages (``source="input"``) are the user
events before the first assistant event.

``plan_handler`` restates the trigger over whole runs for the engine's batch path (``plans``) and runs
the same ``compaction`` where it fires; runs with needs and runs the handler ends are declined.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sim.core.types import ItemState, Trace
from sim.cost.models import resolve_window
from sim.cost.tokens import estimate_tokens
from sim.information.state import has_needs, issuer_of
from sim.policies.base import Change, Decision, Plan, Policy, SummaryCall, View
from sim.util.errors import ConfigError

VERBATIM, MASKED, DROPPED, SUMMARIZED = (
    ItemState.VERBATIM,
    ItemState.MASKED,
    ItemState.DROPPED,
    ItemState.SUMMARIZED,
)
DEFAULT_CONTEXT_WINDOW = 128000  # Inspect's fallback when the model's window is unknown
MAX_ITERATIONS = 3  # passes after the first (Inspect's _perform_compaction)
INSUFFICIENT = "compaction-insufficient"


class HandlerState:
    """Per run: the resolved threshold, the view size at the previous call (the messages the baseline
    already counts) and, for summaries, the slot and size of the summary message."""

    __slots__ = ("threshold", "prev_n", "carrier", "summary_tokens", "first_assistant")

    def __init__(self, trace: Trace, threshold: int) -> None:
        self.threshold = threshold
        self.prev_n = 0
        self.carrier = -1
        self.summary_tokens = 0
        self.first_assistant = next(
            (e.index for e in trace.events if e.kind == "assistant"), len(trace.events)
        )


class Work:
    """A compaction in progress: the view with the changes decided so far laid over it."""

    __slots__ = ("view", "changes", "total")

    def __init__(self, view: View) -> None:
        self.view = view
        self.changes: dict[int, Change] = {}
        self.total = view.total

    def state(self, i: int) -> int:
        c = self.changes.get(i)
        return c.state if c is not None else self.view.state[i]

    def tokens(self, i: int) -> int:
        c = self.changes.get(i)
        return c.tokens if c is not None else self.view.tokens[i]

    def nbytes(self, i: int) -> int:
        c = self.changes.get(i)
        return c.nbytes if c is not None else self.view.nbytes[i]

    def set(self, i: int, state: int, tokens: int, nbytes: int, reason: str) -> None:
        if self.state(i) == state and self.tokens(i) == tokens:
            return
        self.total += tokens - self.tokens(i)
        if self.view.state[i] == state and self.view.tokens[i] == tokens:
            self.changes.pop(i, None)  # back to what the view holds
        else:
            self.changes[i] = Change(i, ItemState(state), tokens, nbytes, reason)

    def set_all(self, items, state: int, tokens: int, nbytes: int, reason: str) -> None:
        """``set`` for each of ``items`` (one state and size for all), an item already so skipped at
        once: a compaction re-clears every old item each time (edit), most of them already cleared."""
        changes, vs, vt = self.changes, self.view.state, self.view.tokens
        for i in items:
            c = changes.get(i)
            if (
                (vs[i] == state and vt[i] == tokens)
                if c is None
                else (c.state == state and c.tokens == tokens)
            ):
                continue
            self.set(i, state, tokens, nbytes, reason)


def partition(trace: Trace, st: HandlerState, work: Work, n: int) -> tuple[list[int], list[int], list[int]]:
    """Inspect's ``partition_messages`` over the messages in view: (system, input, conversation) event
    indices. A summary message (the carrier slot) is conversation; with no input message, the
    conversation up to and including its first user message is the input."""
    system, inp, conv = [], [], []
    ev = trace.events
    for i in range(n):
        kind = ev[i].kind
        if kind == "tools" or work.state(i) == DROPPED or (work.state(i) == SUMMARIZED and i != st.carrier):
            continue
        if kind == "system":
            system.append(i)
        elif i == st.carrier:
            conv.append(i)
        elif kind == "user" and i < st.first_assistant:
            inp.append(i)
        else:
            conv.append(i)
    if not inp:
        while conv and conv[0] != st.carrier:
            i = conv.pop(0)
            inp.append(i)
            if ev[i].kind == "user":
                break
    return system, inp, conv


def text_tokens(trace: Trace, text_bytes: int) -> int:
    """A new message of ``text_bytes`` bytes (the calibrated estimate ctxsim sizes every new text by)."""
    return estimate_tokens(text_bytes, trace.bytes_per_token)


def part_tokens(trace: Trace, text_bytes: int) -> int:
    """Text added to an existing message (no message framing of its own)."""
    return math.ceil(text_bytes / (trace.bytes_per_token or 4.0))


def check_threshold(name: str, threshold) -> None:
    ok = isinstance(threshold, int | float) and not isinstance(threshold, bool) and threshold > 0
    if not ok or not math.isfinite(threshold):
        raise ConfigError(
            f"policy '{name}': threshold={threshold!r} is not a token count (> 1) or a fraction of the "
            "context window in (0, 1]"
        )


def resolve_threshold(trace: Trace, threshold: int | float) -> int:
    """Inspect's ``_resolve_threshold``: tokens, or a fraction of the model's input window."""
    if isinstance(threshold, int) or threshold > 1.0:
        return int(threshold)
    return int(threshold * model_window(trace))


def model_window(trace: Trace) -> int:
    """The model's input window Inspect reads a fractional threshold against (ctxsim: the trace's recorded
    window, else the provider table's, else Inspect's fallback); the oracle registers the same one. Kept
    per trace: the provider table's look-up is slow and every setting of a sizing asks."""
    return trace.derived("inspect_window", _model_window)


def _model_window(trace: Trace) -> int:
    return trace.context_window or resolve_window(trace.model) or DEFAULT_CONTEXT_WINDOW


@dataclass(frozen=True)
class InspectCompaction(Policy):
    """Base of the Inspect strategies: the handler's trigger, passes and failure (module docstring).
    Subclasses implement ``compact`` (one pass of the strategy)."""

    threshold: int | float = 0.9

    acts_before_call = True
    plans = True

    def __post_init__(self) -> None:
        check_threshold(self.name, self.threshold)

    def plan(self, trace: Trace) -> Plan:
        return plan_handler(self, trace)

    def start(self, trace: Trace) -> HandlerState:
        return HandlerState(trace, resolve_threshold(trace, self.threshold))

    def compact(self, trace: Trace, st: HandlerState, work: Work, n: int) -> SummaryCall | None:
        raise NotImplementedError

    def before_call(self, trace: Trace, st: HandlerState, view: View, call: int, status=None):
        """The handler's estimate and trigger, then ``compaction``. The batch path's planner
        (``plan_handler``, held to this by tests/test_plans_inspect.py) restates the estimate over whole
        runs and calls ``compaction`` where it fires."""
        if status is None or status.last_input is None:
            total = view.total  # no baseline yet: every message and the tool definitions
        else:
            total = status.last_input + sum(view.tokens[st.prev_n : view.n])
        st.prev_n = view.n
        if total <= st.threshold:
            return ()
        return self.compaction(trace, st, view)

    def compaction(self, trace: Trace, st: HandlerState, view: View) -> Decision:
        """The strategy's first pass and up to MAX_ITERATIONS more, or the failure (module docstring)."""
        work = Work(view)
        calls: list[SummaryCall] = []
        saved = (st.carrier, st.summary_tokens)
        if (s := self.compact(trace, st, work, view.n)) is not None:
            calls.append(s)
        for _ in range(MAX_ITERATIONS):
            if work.total <= st.threshold:
                break
            before = work.total
            if (s := self.compact(trace, st, work, view.n)) is not None:
                calls.append(s)
            if work.total >= before:
                break
        summary = calls[0] if len(calls) == 1 else (calls or None)
        if work.total > st.threshold:
            st.carrier, st.summary_tokens = saved
            return Decision((), summary, stop=INSUFFICIENT)
        return Decision([work.changes[i] for i in sorted(work.changes)], summary)


def tool_uses(trace: Trace, work: Work, n: int) -> list[int]:
    """Tool results in view still answering a call in view (Inspect's client-side tool uses), in the
    order of their calls (assistant event, then call position)."""
    state = work.state
    return [
        i
        for a, i in trace.derived("inspect_tool_uses", _answers)
        if i < n and state(i) != DROPPED != state(a)
    ]


def _answers(trace: Trace) -> tuple[tuple[int, int], ...]:
    """(issuer, result) of every tool result answering an earlier assistant event, in the order of the
    calls (issuer, then the call's position in it): ``tool_uses`` before any item's state is read."""
    ev, issuers = trace.events, trace.derived("issuers", issuer_of)
    uses = []
    for i, a in issuers.items():
        if ev[i].kind == "tool_result" and a < i:
            uses.append((a, ev[a].tool_call_ids.index(ev[i].tool_call_id), i))
    return tuple((a, i) for a, _, i in sorted(uses))


def trailing_assistants(trace: Trace, work: Work, n: int) -> list[int]:
    """The assistant messages the message list ends with (Inspect strips them before sending)."""
    out = []
    for i in range(n - 1, -1, -1):
        kind = trace.events[i].kind
        if kind == "tools" or work.state(i) == DROPPED or work.state(i) == SUMMARIZED:
            continue
        if kind != "assistant":
            break
        out.append(i)
    return out


# ------------------------------------------------------------------------------------- the planner
_DECLINED = Plan((), (), (), (), (), True)
_NOTHING = Plan((), (), (), ())


def _calls(trace: Trace) -> tuple:
    """Per call, the same for every setting: items in view, the recorded view's tokens, the residual,
    the handler's estimate while nothing is compacted (lists), and that estimate's running maximum."""
    a = trace.arrays
    view, resid = a.recorded_view, a.residual
    est = np.empty(len(view), dtype=np.int64)
    if len(view):
        est[0] = view[0]  # the first call: the view itself
        est[1:] = np.maximum(view[:-1] + resid[:-1], 0) + np.diff(view)  # last input + what came since
    peak = np.maximum.accumulate(est)
    return a.view_end.tolist(), view.tolist(), resid.tolist(), est.tolist(), peak


def _items(trace: Trace) -> tuple[list[int], list[int]]:
    """The recorded tokens and bytes of every item a call sees (the view the loop starts from)."""
    a = trace.arrays
    stop = int(a.view_end[-1]) if len(a.view_end) else 0
    return a.tokens[:stop].tolist(), a.bytes[:stop].tolist()


def plan_handler(policy: InspectCompaction, trace: Trace) -> Plan:
    """Every decision ``InspectCompaction.before_call`` makes over a run, without the engine: the
    handler's estimate call by call (the previous request as sent, ``max(view + residual, 0)``, plus the
    tokens admitted since), and where it is over the threshold the policy's own ``compaction`` on a view
    kept here. Until the first compaction the estimate is the recorded one (``_calls``), so a run that
    never goes over costs one search. Declined: a run with needs (a re-read adds tokens the estimate
    does not see) and a run the handler ends (``compaction-insufficient``). Held to the per-call loop
    by tests/test_plans_inspect.py."""
    if trace.derived("has_needs", has_needs):
        return _DECLINED
    ends, recorded, resid, est, peak = trace.derived("inspect_calls", _calls)
    threshold = resolve_threshold(trace, policy.threshold)
    k0 = int(peak.searchsorted(threshold, side="right"))  # the first call over the threshold
    if k0 == len(ends):
        return _NOTHING
    st = policy.start(trace)
    tokens0, nbytes0 = trace.derived("inspect_items", _items)
    view = View()
    view.tokens, view.nbytes, view.state = list(tokens0), list(nbytes0), [0] * len(tokens0)
    vt, vb, vs = view.tokens, view.nbytes, view.state
    calls: list[int] = []
    index: list[int] = []
    sizes: list[int] = []
    states: list[int] = []
    summaries: list[tuple[int, int, int]] = []
    delta = 0  # the view's tokens minus the recorded ones
    total = est[k0]
    for k in range(k0, len(ends)):
        if k > k0:
            total = max(recorded[k - 1] + delta + resid[k - 1], 0) + recorded[k] - recorded[k - 1]
        if total <= threshold:
            continue
        view.n, view.total = ends[k], recorded[k] + delta
        st.prev_n = view.n
        decision = policy.compaction(trace, st, view)
        if decision.stop is not None:
            return _DECLINED
        for s in decision.summary if isinstance(decision.summary, list) else (decision.summary,):
            if s is not None:
                summaries.append((k, s.input_tokens, s.output_tokens))
        for ch in decision.changes:
            i = ch.index
            delta += ch.tokens - vt[i]
            vt[i], vb[i], vs[i] = ch.tokens, ch.nbytes, int(ch.state)
            calls.append(k)
            index.append(i)
            sizes.append(ch.tokens)
            states.append(int(ch.state))
    return Plan(calls, index, sizes, states, tuple(summaries))
