"""``adk_events_compaction``: Google ADK's events compaction as google-adk 2.13.0 runs it
(``apps/compaction.py``, the compaction request processor and prompt assembly in
``flows/llm_flows/context/``).

Knobs: ``EventsCompactionConfig``'s names. ``compaction_interval`` and ``overlap_size`` (the sliding
window) and ``token_threshold`` and ``event_retention_size`` (the token threshold) are each set
together or both null, and at least one pair is set, as ADK requires. ADK's defaults are all null (a
config with no trigger is refused); ctxsim defaults to its documentation's example, interval 3 and
overlap 1. Summary size: ctxsim's rule, clamp(``summary_ratio`` x the summarized events,
``summary_min_tokens``, ``summary_max_tokens``), 0.1 / 256 / 2,048 (ADK's is what the model writes).

- Events: every event but ``system`` and ``tools`` (ADK's instruction and tool declarations are not
  session events and are never compacted). Invocations are user-initiated: a ``user`` event starts one,
  and the agent's calls and tool results belong to it (a single-task trace is one invocation). The
  task's own event is compacted like any other.
- Sliding window (post-invocation, in the Runner): when an invocation has completed (the next user event
  arrives), once ``compaction_interval`` invocations have their latest event after the end of the
  latest compaction, the events from ``overlap_size`` invocations before the first new one to the end
  of the last new one are summarized (earlier compaction events left out), cut to their longest prefix
  with no unanswered call. Ranges overlap: both summaries stay in the request unless one contains the
  other.
- Token threshold: before every model call (the request processor) and first in the post-invocation
  step, when the latest reported prompt tokens (the previous call's input; after a compaction with no
  call since, ADK's own estimate of the request's contents: here their tokens, no instruction, no
  residual) reach ``token_threshold``: the events after the latest compaction but the newest
  ``event_retention_size`` (the split moved earlier so no kept tool result loses its call; 0 keeps
  none), cut to their longest self-contained prefix, are summarized together with the previous summary
  (a rolling summary: its range starts where the previous one did, which it replaces).
- Either trigger compacts only when the range can remove more than the latest summary weighs
  (``_is_range_worth_compacting``; sizes in tokens here, ADK counts JSON characters).
- Request: events inside any kept summary's range are not sent; each kept summary is sent at the end of
  its range. ctxsim: covered events SUMMARIZED with no tokens, each kept summary in the slot of the last
  event it covers (so the cache prefix breaks where ADK's request changes); a superseded summary's slot
  goes to 0.
- The summarizer call: ADK's prompt template (657 bytes) and the events as listed (seed summary
  included); its output the size rule.
- Empty events: a user or assistant event with no text, no call and no tokens (OpenHands V0 records an
  empty user message) is never sent (``_contains_empty_content``): DROPPED, unless a summary covers it.
  It still counts as an event (and a user one starts an invocation).
- Not modelled: long-running
  and confirmation calls, rewinds, branches and isolation scopes. Raw events stay in the session but the
  agent has no tool to read them: lost from view.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sim.core.types import ItemState, Trace
from sim.cost.tokens import estimate_tokens
from sim.information.state import has_needs
from sim.policies.base import Change, Decision, Plan, Plans, Policy, SummaryCall, View, check_int, register
from sim.policies.driven_plan import DECLINED, driven_plan
from sim.policies.llm_summary import check_summary_knobs
from sim.util.errors import ConfigError

SUMMARIZED, VERBATIM, DROPPED = ItemState.SUMMARIZED, ItemState.VERBATIM, ItemState.DROPPED
INSTRUCTION_KINDS = ("system", "tools")
PROMPT_TEMPLATE_BYTES = 657  # LlmEventSummarizer._DEFAULT_PROMPT_TEMPLATE without the history


class Compaction:
    """One compaction event: covers events [start, end] (ctxsim indices stand for timestamps), appended
    to the session when it had ``at`` events."""

    __slots__ = ("start", "end", "tokens", "at")

    def __init__(self, start: int, end: int, tokens: int, at: int) -> None:
        self.start, self.end, self.tokens, self.at = start, end, tokens, at


class _State:
    __slots__ = ("compactions", "invocation", "empty", "last_call_event", "prev_n")

    def __init__(self, trace: Trace) -> None:
        self.compactions: list[Compaction] = []
        self.invocation: list[int] = []  # per event: its invocation number (-1: not an ADK event)
        self.empty = {i for i, e in enumerate(trace.events) if is_empty(e)}
        inv = 0
        for e in trace.events:
            if e.kind in INSTRUCTION_KINDS:
                self.invocation.append(-1)
                continue
            if e.kind == "user" and any(x >= 0 for x in self.invocation):
                inv += 1
            self.invocation.append(inv)
        self.last_call_event = -1  # the assistant event of the previous call (it carries its usage)
        self.prev_n = 0


def trace_acts(trace: Trace) -> bool:
    """Whether ``before_call``'s sliding window may ever act on the trace (its per-trace table, shared by
    every setting): an empty event, or a user event after the first session event (an invocation
    completes there). The token threshold may act on any trace."""
    return trace.derived("adk_acts", _acts)


def _acts(trace: Trace) -> bool:
    seen = False
    for e in trace.events:
        if e.kind in INSTRUCTION_KINDS:
            continue
        if is_empty(e) or (seen and e.kind == "user"):
            return True
        seen = True
    return False


_NOTHING = Plan((), (), (), ())


def is_empty(e) -> bool:
    """ADK's ``_contains_empty_content``: a content whose every part is invisible (no text, no call).
    A text-free trace's sized event stands for text, so only a 0-token one is empty."""
    return e.kind in ("user", "assistant") and not e.content and not e.tool_call_ids and e.tokens == 0


def retained(cs: list[Compaction]) -> list[Compaction]:
    """``_get_compaction_ranges``: compactions no other contains (identical ranges: the latest), in
    session order."""
    order = sorted(range(len(cs)), key=lambda j: (cs[j].start, -cs[j].end, -j))
    keep, top = set(), None
    for j in order:
        if top is None or cs[j].end > top:
            keep.add(j)
            top = cs[j].end
    return [cs[j] for j in range(len(cs)) if j in keep]


def request_size(trace: Trace, events: list[int], cs: list[Compaction]) -> int:
    """Tokens of the request's contents (``_process_compaction_events``): kept summaries plus the events
    outside every kept range."""
    kept = retained(cs)
    spans = [(c.start, c.end) for c in kept]
    ev = trace.events
    return sum(c.tokens for c in kept) + sum(ev[i].tokens for i in events if not _inside(spans, i))


def _inside(spans: list[tuple[int, int]], i: int) -> bool:
    return any(s <= i <= e for s, e in spans)


@register
@dataclass(frozen=True)
class AdkEventsCompaction(Policy):
    """Google ADK events compaction: a sliding window over completed user-initiated invocations, and a
    token threshold before each model call with one rolling summary."""

    compaction_interval: int | None = 3
    overlap_size: int | None = 1
    token_threshold: int | None = None
    event_retention_size: int | None = None
    summary_ratio: float = 0.1
    summary_min_tokens: int = 256
    summary_max_tokens: int = 2048

    name = "adk_events_compaction"
    size_grid = {
        "compaction_interval": (2, 3, 5, 8, 12),
        "overlap_size": (0, 1, 2),
    }  # ``ctxsim size --policy adk_events_compaction``'s default grid
    acts_before_call = True
    plans = True
    conformance_settings = (
        {"compaction_interval": 1, "overlap_size": 1, "summary_min_tokens": 10},
        {
            "compaction_interval": None,
            "overlap_size": None,
            "token_threshold": 800,
            "event_retention_size": 3,
        },
        {"token_threshold": 1500, "event_retention_size": 0, "summary_min_tokens": 10},
    )

    def __post_init__(self) -> None:
        for a, b in (("compaction_interval", "overlap_size"), ("token_threshold", "event_retention_size")):
            if (getattr(self, a) is None) != (getattr(self, b) is None):
                raise ConfigError(
                    f"policy '{self.name}': {a}={getattr(self, a)!r} and {b}={getattr(self, b)!r} must be "
                    "set together or both null"
                )
        if self.compaction_interval is None and self.token_threshold is None:
            raise ConfigError(
                f"policy '{self.name}': set compaction_interval and overlap_size, or token_threshold and "
                "event_retention_size (ADK needs at least one trigger)"
            )
        if self.compaction_interval is not None:
            check_int(self.name, "compaction_interval", self.compaction_interval, 1)
            check_int(self.name, "overlap_size", self.overlap_size, 0)
        if self.token_threshold is not None:
            check_int(self.name, "token_threshold", self.token_threshold, 1)
            check_int(self.name, "event_retention_size", self.event_retention_size, 0)
        check_summary_knobs(self)

    def start(self, trace: Trace) -> _State:
        return _State(trace)

    # ----------------------------------------------------------------------------------- per call
    def before_call(self, trace: Trace, state: _State, view: View, call: int, status=None):
        """The reference; ``plan_many`` gives the same decisions for whole runs (held together by
        tests/test_plans_strands_adk.py and the conformance checker)."""
        ev = trace.events
        made: list[SummaryCall] = []
        last = status.last_input if status is not None else None
        if call > 0:
            state.last_call_event = trace.calls[call - 1].event_index
        new_empty = [u for u in range(state.prev_n, view.n) if u in state.empty]
        for u in range(state.prev_n, view.n):  # an invocation completed before each new user event
            if ev[u].kind == "user" and any(state.invocation[i] >= 0 for i in range(u)):
                made += self.post_invocation(trace, state, u, last)
        state.prev_n = view.n
        if self.token_threshold is not None:
            made += self.token_compaction(trace, state, view.n, last)
        if not made:  # new empty events are never sent
            return [Change(u, DROPPED, 0, 0, "empty") for u in new_empty if view.state[u] != DROPPED]
        return Decision(self.changes(trace, state, view), made[0] if len(made) == 1 else made)

    # ------------------------------------------------------------------------------------ plans
    def plan(self, trace: Trace) -> Plan:
        return self.plan_many([trace])[0]

    def plan_many(self, traces: Sequence[Trace]) -> Plans:
        """``before_call``'s decisions for whole runs. Without ``token_threshold`` a run acts only when an
        invocation completes (a user event after the first session event: the sliding window) or an
        empty event arrives, so a run with neither (a single-task trace: one invocation) plans nothing,
        found from a per-trace table. Any other run is planned by ``before_call`` itself, driven call by
        call over a bare view with the usage the provider reports (``sim.policies.driven_plan``): the
        same rule, without the engine's per-call work. Declined (the loop replays it): a run with needs
        that may act (a re-read changes the sizes the summaries and the trigger read)."""
        plans = []
        for t in traces:
            if self.token_threshold is None and not trace_acts(t):
                plans.append(_NOTHING)
            elif t.derived("has_needs", has_needs):
                plans.append(DECLINED)
            else:
                plans.append(driven_plan(self, t))
        return Plans.of(plans)  # not ``ascending``: a later summary may take an item again

    def post_invocation(self, trace: Trace, state: _State, n: int, last: int | None) -> list[SummaryCall]:
        """The Runner's step after an invocation: token threshold first, else the sliding window."""
        if self.token_threshold is not None:
            done = self.token_compaction(trace, state, n, last)
            if done:
                return done
        if self.compaction_interval is None:
            return []
        return self.sliding_window(trace, state, n)

    def events(self, state: _State, n: int) -> list[int]:
        return [i for i in range(n) if state.invocation[i] >= 0]

    def prompt_tokens(self, trace: Trace, state: _State, n: int, last: int | None) -> int:
        """``_latest_prompt_token_count``: the last model call's reported prompt, unless a compaction was
        appended after it (then ADK's estimate of the request's contents)."""
        e = state.last_call_event
        if last is not None and 0 <= e < n and not any(c.at > e for c in state.compactions):
            return last
        return request_size(trace, self.events(state, n), state.compactions)

    def token_compaction(self, trace: Trace, state: _State, n: int, last: int | None) -> list[SummaryCall]:
        if self.prompt_tokens(trace, state, n, last) < self.token_threshold:
            return []
        events = self.events(state, n)
        kept = retained(state.compactions)
        latest = kept[-1] if kept else None  # the latest compaction no other contains
        end = latest.end if latest is not None else -1
        cand = [i for i in events if i > end]
        keep = self.event_retention_size or 0
        if len(cand) <= keep:
            return []
        part = cand if keep == 0 else cand[: self.split(trace, cand, keep)]
        part = self.self_contained(trace, state, part, events)
        if not part:
            return []
        start = latest.start if latest is not None else part[0]
        seed = latest.tokens if latest is not None else 0
        return self.summarize(trace, state, n, events, start, part, seed)

    def sliding_window(self, trace: Trace, state: _State, n: int) -> list[SummaryCall]:
        events = self.events(state, n)
        if not events:
            return []
        end = state.compactions[-1].end if state.compactions else -1
        last_of: dict[int, int] = {}
        for i in events:
            last_of[state.invocation[i]] = i
        invs = list(last_of)  # first-appearance order (invocations ascend with the events)
        new = [v for v in invs if last_of[v] > end]
        if len(new) < self.compaction_interval:
            return []
        first = invs[max(0, invs.index(new[0]) - self.overlap_size)]
        lo = next(i for i in events if state.invocation[i] == first)
        span = [i for i in events if lo <= i <= last_of[new[-1]]]
        part = self.self_contained(trace, state, span, events)
        if not part:
            return []
        return self.summarize(trace, state, n, events, part[0], part, 0)

    def summarize(
        self, trace, state: _State, n: int, events, start: int, part, seed: int
    ) -> list[SummaryCall]:
        """Compact [start, part[-1]] if worth it: the summarizer call and the new compaction event."""
        stop = part[-1]
        weightless = Compaction(start, stop, 0, n)
        removable = request_size(trace, events, state.compactions) - request_size(
            trace, events, [*state.compactions, weightless]
        )
        kept = retained(state.compactions)
        previous = kept[-1].tokens if kept else 0
        if removable <= previous:
            return []
        span = seed + sum(trace.events[i].tokens for i in part)
        out = min(max(round(self.summary_ratio * span), self.summary_min_tokens), self.summary_max_tokens)
        state.compactions.append(Compaction(start, stop, out, n))
        return [SummaryCall(estimate_tokens(PROMPT_TEMPLATE_BYTES, trace.bytes_per_token) + span, out)]

    @staticmethod
    def split(trace: Trace, cand: list[int], keep: int) -> int:
        """``_safe_token_compaction_split_index``: the latest split at or before len - keep that leaves
        no kept tool result without its call."""
        initial = len(cand) - keep
        if initial <= 0:
            return 0
        ev = trace.events
        unmatched: set[str] = set()
        for j in range(len(cand) - 1, -1, -1):
            e = ev[cand[j]]
            if e.kind == "tool_result" and e.tool_call_id:
                unmatched.add(e.tool_call_id)
            unmatched -= set(e.tool_call_ids)
            if not unmatched and j <= initial:
                return j
        return 0

    @staticmethod
    def self_contained(trace: Trace, state: _State, part: list[int], events: list[int]) -> list[int]:
        """``_longest_self_contained_prefix``: the longest prefix with no call left unanswered; past a
        call no event of the session answers (and not of the newest invocation), a second pass."""
        ev = trace.events

        def run(dead: set[str]) -> int:
            open_ids: set[str] = set()
            safe = 0
            for j, i in enumerate(part):
                if ev[i].kind == "tool_result":
                    open_ids.discard(ev[i].tool_call_id)
                open_ids |= set(ev[i].tool_call_ids) - dead
                if not open_ids:
                    safe = j + 1
            return safe

        safe = run(set())
        if safe == len(part):
            return part
        if safe > 0 and state.invocation[part[safe - 1]] != state.invocation[part[safe]]:
            return part[:safe]
        newest = state.invocation[events[-1]] if events else -1
        answered = {ev[i].tool_call_id for i in events if ev[i].kind == "tool_result"}
        dead = {
            c for i in part if state.invocation[i] != newest for c in ev[i].tool_call_ids if c not in answered
        }
        return part[: max(safe, run(dead))] if dead else part[:safe]

    # --------------------------------------------------------------------------------- the view
    def changes(self, trace: Trace, state: _State, view: View) -> list[Change]:
        """The view the session's compactions give: covered events SUMMARIZED (0 tokens), each kept
        summary in the slot of its range's last event; empty events outside every range DROPPED."""
        kept = retained(state.compactions)
        spans = [(c.start, c.end) for c in kept]
        slot = {c.end: c.tokens for c in kept}
        bpt = trace.bytes_per_token or 4.0
        out = []
        for i in range(view.n):
            if state.invocation[i] < 0:
                continue
            if not _inside(spans, i):
                if i in state.empty and view.state[i] != DROPPED:
                    out.append(Change(i, DROPPED, 0, 0, "empty"))
                continue
            tok = slot.get(i, 0)
            if view.state[i] != SUMMARIZED or view.tokens[i] != tok:
                out.append(Change(i, SUMMARIZED, tok, round(tok * bpt), "summary" if tok else "summarized"))
        return out
