"""``openhands_llm_summarizing``: OpenHands' ``LLMSummarizingCondenser``, V0 (openhands-ai 0.62.0) and SDK v1
(openhands-sdk 1.58.2), chosen by ``variant``.

Events are OpenHands' view: the system prompt counts (the history's first event), so do the recall
action and its workspace context (V0; ``sim.policies.openhands_memory``), one event per tool call, and the
summary event once there is one.

V0 (``variant: v0``; constructor defaults ``max_size`` 100, ``keep_first`` 1, ``max_event_length``
10,000). Trigger: more than ``max_size`` events, or the agent's condensation request after a
context-window rejection (``on_overflow``). Kept set: the first ``keep_first`` events, the summary
(inserted at position ``keep_first``) and the newest ``max_size // 2 - keep_first - 1``. Transform of the
rest: one summarizer call covers the events between (placeholders and the old summary excluded), the
previous summary in its prompt; the condensation forgets the id range from the first to the last of
them. Around the condenser, ``ConversationMemory``: the first user message is re-sent second when it was
covered, an observation whose action was covered is not sent (MASKED at 0 tokens).

SDK v1 (``variant: sdk_v1``; defaults ``max_size`` 240, ``keep_first`` 2, ``minimum_progress`` 0.1; the
default agent uses 80 / 4). Events: the system prompt with its tools is one ``SystemPromptEvent`` (the
tools alone when there is no system prompt); no recall events. The view enforces the SDK's properties
every call: an observation answering a tool call id an earlier one in the view answers is left out
(DROPPED while so; traces reusing ids), and so are an action whose call has no observation in the view
(with the rest of its response) and an observation whose action is not in it. Reasons: more than
``max_size`` events (soft), the view's tokens over the effective ``max_tokens`` (hard): the smaller of
``max_tokens`` and the provider window (the agent LLM's input limit), the agent's condensation request
after a rejection (hard). Tail: ``max_size // 2 - keep_first - 1`` events (request: ``len(view) // 2 -
keep_first - 1``; tokens: the longest suffix after which the view fits ``max_tokens // 2``), the smallest
of those; the forgotten range runs from the first manipulation index at or after ``max(keep_first, 1)``
(the system prompt is never forgotten) to the first at or after the tail's start (a tool call and its
result are never split). Too little forgotten (none, or fewer events than ``minimum_progress`` of the
view): a soft reason skips the condensation; a hard one does the hard context reset: every event after
the system prompt is summarized (``hard_context_reset_max_retries`` 5 and
``hard_context_reset_context_scaling`` 0.8 only act when the summarizer fails, which ctxsim's never
does). The summary is inserted where the forgotten range began; an old summary in the range is forgotten
with it (one before it, kept by ``keep_first`` after a hard reset put it right behind the system prompt,
stays: two summaries).

Both: the summary's size is ctxsim's rule (OpenHands sets no length): clamp(``summary_ratio`` x covered
tokens, ``summary_min_tokens``, ``summary_max_tokens``) + one message's framing; its input a fixed
instruction + the previous summary + each covered event clipped at ``max_event_length`` characters.
State rewrite (covered events stay covered); what the summary drops is lost (no handle). Cache: each
condensation rewrites the prefix from the summary's slot on. A request the condenser cannot shrink ends
the run: ``condensation-insufficient``.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

from sim.core.types import ItemState, Trace
from sim.cost.tokens import estimate_tokens
from sim.policies.base import Change, Decision, Plan, RunStatus, SummaryCall, View, check_int, register
from sim.policies.openhands_amortized_forgetting import check_cut, forget_range
from sim.policies.openhands_memory import (
    EV,
    INSUFFICIENT,
    SETTLE_ROUNDS,
    SUM,
    Events,
    Insufficient,
    V0Condenser,
    V0State,
    events_of,
    merged,
)
from sim.policies.openhands_plan import DECLINED, v0_plan
from sim.util.errors import ConfigError

SUMMARIZED = ItemState.SUMMARIZED
VARIANTS = ("v0", "sdk_v1")
DEFAULTS = {"v0": (1, 100), "sdk_v1": (2, 240)}  # variant -> (keep_first, max_size)
INSTRUCTION = (
    "You are maintaining a context-aware state summary for an interactive agent. You will be given a list "
    "of events corresponding to actions taken by the agent, and the most recent previous summary if one "
    "exists. Track: USER_CONTEXT: (Preserve essential user requirements, goals, and clarifications in "
    "concise form) COMPLETED: (Tasks completed so far, with brief results) PENDING: (Tasks that still need "
    "to be done) CURRENT_STATE: (Current variables, data structures, or relevant state) For code-specific "
    "tasks, also include: CODE_STATE: {File paths, function signatures, data structures} TESTS: {Failing "
    "cases, error messages, outputs} CHANGES: {Code edits, variable updates} DEPS: {Dependencies, imports, "
    "external calls} VERSION_CONTROL_STATUS: {Repository state, current branch, PR status, commit history} "
    "PRIORITIZE: 1. Adapt tracking format to match the actual task type 2. Capture key user requirements "
    "and goals 3. Distinguish between completed and pending tasks 4. Keep all sections concise and "
    "relevant. SKIP: Tracking irrelevant details for the current task type."
)


def summary_of(policy, t: Trace, st, covered: list[int], units) -> tuple[tuple[int, int], SummaryCall]:
    """ctxsim's summary size rule over ``covered`` (each event at its original size, once per OpenHands
    event it stands for) and the summarizer call's input."""
    events, bpt = t.events, t.bytes_per_token
    prev = st.summary[0] if st.summary is not None else 0
    tokens = prev + sum(units[i] * events[i].tokens for i in covered)
    clipped = sum(
        e.tokens * min(e.chars, policy.max_event_length) / e.chars if e.chars else e.tokens
        for e in (events[i] for i in covered)
    )
    out = min(max(round(policy.summary_ratio * tokens), policy.summary_min_tokens), policy.summary_max_tokens)
    summary_in = estimate_tokens(len(INSTRUCTION.encode()), bpt) + prev + round(clipped)
    return (out + estimate_tokens(0, bpt), round(out * (bpt or 4.0))), SummaryCall(summary_in, out)


# ------------------------------------------------------------------------------------------------ SDK
class SdkState:
    """Per run: the SDK's event list with every condensation applied (``View.from_events`` before it
    enforces the view's properties: ``raw``, events up to ``seen``), the events summarized, and those the
    properties leave out of the view for now (``hidden``: DROPPED while so)."""

    __slots__ = ("summarized", "raw", "seen", "hidden")

    def __init__(self) -> None:
        self.summarized: set[int] = set()
        self.raw: list[tuple] = []
        self.seen = 0
        self.hidden: set[int] = set()


def sdk_system(t: Trace) -> int:
    """The event that is the SDK's ``SystemPromptEvent``: the system prompt, else the tools (a trace
    without a system prompt; the event carries the tools), -1 for neither."""
    for kind in ("system", "tools"):
        i = next((e.index for e in t.events if e.kind == kind), -1)
        if i >= 0:
            return i
    return -1


def sdk_sizes(t: Trace) -> list[int]:
    """Tokens of each event as an SDK event: the system prompt carries its tools (one event)."""
    tokens = [e.tokens for e in t.events]
    system = sdk_system(t)
    for e in t.events:
        if e.kind == "tools" and system >= 0 and e.index != system:
            tokens[system] += tokens[e.index]
            tokens[e.index] = 0
    return tokens


def sdk_raw(t: Trace, info: Events, st: SdkState, view: View) -> list[tuple]:
    """``st.raw`` with the events new since the last call appended (no SDK event: the tools beside a
    system prompt, V0's recall action)."""
    system = t.derived("openhands_sdk_system", sdk_system)
    for i in range(st.seen, view.n):
        e = t.events[i]
        if e.kind == "tools" and i != system or info.mute[i] and e.source_type == "action:recall":
            continue
        st.raw.extend([(EV, i)] * max(info.units[i], i == system))  # V0 gives the tools no unit
    st.seen = max(st.seen, view.n)
    return st.raw


def enforce(info: Events, raw: list[tuple]) -> list[tuple]:
    """``View.enforce_properties``: an observation whose tool call id an earlier one in the view answers
    is left out (``ObservationUniquenessProperty``: traces reusing call ids), then an action with a call
    no observation in the view answers, with the rest of its response (``ToolCallMatchingProperty``,
    ``BatchAtomicityProperty``), and an observation no action in the view issued; until none applies."""
    out = raw
    paired, call_id, calls = info.paired, info.call_id, info.calls  # (read at every call: locals)
    while True:
        seen: set[str] = set()
        drop = set()
        for p, x in enumerate(out):
            if x[0] == EV and paired[x[1]]:
                c = call_id[x[1]]
                if c in seen:
                    drop.add(p)
                seen.add(c)
        if not drop:
            acts = {c for x in out if x[0] == EV and x[1] in calls for c in calls[x[1]]}
            for p, x in enumerate(out):
                if x[0] != EV:
                    continue
                i = x[1]
                if i in calls:
                    if not seen.issuperset(calls[i]):  # a call no observation in the view answers
                        drop.add(p)
                elif paired[i] and call_id[i] not in acts:
                    drop.add(p)
        if not drop:
            return out
        out = [x for p, x in enumerate(out) if p not in drop]


def manipulation_indices(info: Events, entries: list[tuple]) -> list[bool]:
    """Where the SDK may cut the view: never inside a tool call's span up to its result, nor between the
    calls of one response (``ToolCallMatchingProperty``, ``BatchAtomicityProperty``)."""
    ok = [True] * (len(entries) + 1)
    pending: set[str] = set()
    prev = None
    for p, x in enumerate(entries):
        if x[0] == EV and x[1] in info.calls:
            if x == prev:
                ok[p] = False  # a further call of the same response
            pending.update(info.calls[x[1]])
        elif x[0] == EV and info.paired[x[1]]:
            pending.discard(info.call_id[x[1]])
        if pending:
            ok[p + 1] = False
        prev = x
    return ok


def find_next(ok: list[bool], threshold: int) -> int:
    for p in range(max(threshold, 0), len(ok)):
        if ok[p]:
            return p
    raise ValueError(threshold)


def sdk_step(policy, t: Trace, info: Events, entries: list[tuple], sizes, limit, request: bool):
    """One ``condense``: None (the view stands) or the entries forgotten and the summary's offset."""
    sz, seen = [], {}
    for x in entries:  # a parallel call's actions share its tokens, the first one the remainder
        if x[0] != EV:
            sz.append(x[2])
            continue
        i, m = x[1], max(info.units[x[1]], 1)  # the tools as the system prompt: one event
        j = seen[i] = seen.get(i, -1) + 1
        sz.append(sizes[i] // m + (sizes[i] - sizes[i] // m * m if j == 0 else 0))
    total = sum(sz)
    kf = policy.first
    tails = []
    if request:
        tails.append(len(entries) // 2 - kf - 1)
    if len(entries) > policy.size:
        tails.append(policy.size // 2 - kf - 1)
    by_tokens = limit is not None and total > limit
    if by_tokens:
        reduce, acc, prefix = total - limit // 2, 0, len(entries) - kf
        rest = sz[kf:]
        if reduce <= 0:
            prefix = 0
        else:
            for p, x in enumerate(rest):
                acc += x
                if acc > reduce:
                    prefix = p + 1
                    break
        tails.append(len(rest) - prefix)
    if not tails:
        return None
    hard = request or by_tokens
    sys_i = t.derived("openhands_sdk_system", sdk_system)
    system = next((p for p, x in enumerate(entries) if x[0] == EV and x[1] == sys_i), None)
    try:
        ok = manipulation_indices(info, entries)
        start = find_next(ok, max(kf, system + 1 if system is not None else 0))
        end = find_next(ok, len(entries) - min(tails))
        gone = entries[start:end]
        if not gone or len(gone) < len(entries) * policy.minimum_progress:
            raise ValueError("too little")
        return gone, start
    except ValueError:
        if not hard:
            return None
        keep = system + 1 if system is not None else 0
        return entries[keep:], keep  # the hard context reset


def condensed(policy, t: Trace, info: Events, st: SdkState, gone: list[tuple], offset: int) -> SummaryCall:
    """``Condensation.apply`` of a summary over ``gone`` (entries of the enforced view): they leave
    ``st.raw`` and the summary goes in at ``offset`` (a position in the enforced view, applied to the raw
    list as the SDK does). Its slot: the first summary it covers (the summary stays where it was), else
    its first covered event; a summary kept outside the range (``keep_first`` past a hard reset's) stays."""
    covered = sorted({x[1] for x in gone if x[0] == EV})
    old = [x for x in gone if x[0] == SUM]
    prev = SimpleNamespace(summary=(sum(x[2] for x in old), 0) if old else None)
    # each covered event once (a parallel call's actions share its tokens)
    (tok, nbytes), call = summary_of(policy, t, prev, covered, [1] * len(t.events))
    st.summarized.update(covered)
    pick = [i for i in covered if not info.mute[i]]
    carrier = old[0][1] if old else (pick or covered)[0]
    out = set(gone)
    st.raw = [x for x in st.raw if x not in out]
    st.raw.insert(min(offset, len(st.raw)), (SUM, carrier, tok, nbytes))
    return call


def sdk_settle(policy, t: Trace, st: SdkState, view: View, limit, request: bool):
    info = events_of(t)
    sizes = t.derived("openhands_sdk_sizes", sdk_sizes)
    entries = enforce(info, sdk_raw(t, info, st, view))
    calls = []
    for _ in range(SETTLE_ROUNDS):
        res = sdk_step(policy, t, info, entries, sizes, limit, request)
        request = False
        if res is None:
            return entries, calls
        gone, offset = res
        if not gone:
            raise Insufficient("nothing to forget")
        calls.append(condensed(policy, t, info, st, gone, offset))
        entries = enforce(info, st.raw)
    raise Insufficient("the condenser did not settle", calls)


def sdk_changes(t: Trace, st: SdkState, view: View, entries: list[tuple]) -> list[Change]:
    """The view's states for the SDK's view ``entries``: each summary in its slot, covered events
    SUMMARIZED, events the view's properties leave out DROPPED (sent again once back)."""
    present = {x[1] for x in entries if x[0] == EV}
    carriers = {x[1]: (x[2], x[3]) for x in entries if x[0] == SUM}
    in_raw = {x[1] for x in st.raw if x[0] == EV}
    hidden, out = set(), []
    for i in range(view.n):
        if i in carriers:
            want = (SUMMARIZED, *carriers[i])
        elif i in st.summarized:
            want = (SUMMARIZED, 0, 0)
        elif i in present and i in st.hidden:
            e = t.events[i]
            want = (ItemState.VERBATIM, e.tokens, e.bytes)
        elif i in in_raw and i not in present:
            hidden.add(i)
            want = (ItemState.DROPPED, 0, 0)
        else:
            continue
        if (view.state[i], view.tokens[i], view.nbytes[i]) != want:
            out.append(Change(i, want[0], want[1], want[2], "openhands"))
    st.hidden = hidden
    return out


@register
@dataclass(frozen=True)
class OpenHandsLLMSummarizing(V0Condenser):
    """Over ``max_size`` events (or ``max_tokens``): summarize the middle, keep head and newest half."""

    variant: str = "v0"
    keep_first: int | None = None
    max_size: int | None = None
    max_event_length: int = 10000
    max_tokens: int | None = None
    minimum_progress: float = 0.1
    hard_context_reset_max_retries: int = 5
    hard_context_reset_context_scaling: float = 0.8
    summary_ratio: float = 0.1
    summary_min_tokens: int = 256
    summary_max_tokens: int = 2048

    name = "openhands_llm_summarizing"
    size_grid = {
        "max_size": (50, 100, 200),
        "keep_first": (1, 4),
    }  # ``ctxsim size --policy openhands_llm_summarizing``'s default grid
    rolling = True
    shares_idle = True  # V0: ``condense`` returns its entries when under max_size
    conformance_settings = (
        {"keep_first": 1, "max_size": 6},
        {"variant": "sdk_v1", "keep_first": 2, "max_size": 10},
        {"variant": "sdk_v1", "max_tokens": 1500},
    )
    # ``plan``: v0's decisions read the events' structure and recorded sizes alone (runs over the window:
    # the loop); sdk_v1's read the view's tokens against the window, so its runs are declined (the loop)
    plans = True

    def __post_init__(self) -> None:
        if self.variant not in VARIANTS:
            raise ConfigError(f"policy '{self.name}': variant={self.variant!r} is not one of v0, sdk_v1")
        check_cut(self.name, self.first, self.size)
        if self.variant == "sdk_v1" and self.size // 2 - self.first - 1 <= 0:
            raise ConfigError(
                f"policy '{self.name}': keep_first={self.first!r} leaves no tail: max_size // 2 - keep_first"
                f" - 1 = {self.size // 2 - self.first - 1} (the SDK requires > 0)"
            )
        check_int(self.name, "max_event_length", self.max_event_length, 1)
        if self.max_tokens is not None:
            if self.variant != "sdk_v1":
                raise ConfigError(
                    f"policy '{self.name}': max_tokens={self.max_tokens!r} needs variant sdk_v1 (or null)"
                )
            check_int(self.name, "max_tokens", self.max_tokens, 2)
        p = self.minimum_progress
        if not (isinstance(p, int | float) and not isinstance(p, bool) and 0 < p < 1):
            raise ConfigError(f"policy '{self.name}': minimum_progress={p!r} is not a number in (0, 1)")
        check_int(self.name, "hard_context_reset_max_retries", self.hard_context_reset_max_retries, 1)
        c = self.hard_context_reset_context_scaling
        if not (isinstance(c, int | float) and not isinstance(c, bool) and 0 < c < 1):
            raise ConfigError(
                f"policy '{self.name}': hard_context_reset_context_scaling={c!r} is not a number in (0, 1)"
            )
        r = self.summary_ratio
        if not (isinstance(r, int | float) and not isinstance(r, bool) and 0 < r <= 1):
            raise ConfigError(f"policy '{self.name}': summary_ratio={r!r} is not a number in (0, 1]")
        check_int(self.name, "summary_min_tokens", self.summary_min_tokens, 1)
        check_int(self.name, "summary_max_tokens", self.summary_max_tokens, self.summary_min_tokens)

    @property
    def first(self) -> int:
        return DEFAULTS[self.variant][0] if self.keep_first is None else self.keep_first

    @property
    def size(self) -> int:
        return DEFAULTS[self.variant][1] if self.max_size is None else self.max_size

    def start(self, trace: Trace):
        if self.variant == "sdk_v1":
            return SdkState()
        st = V0State()
        st.summary_pos = self.first
        return st

    # -- V0
    def condense(self, t: Trace, info: Events, st: V0State, entries: list[tuple], request: bool):
        if not (len(entries) > self.idle_size or request):
            return entries
        tail = self.size // 2 - min(self.first, len(entries)) - 1
        middle = entries[self.first : -tail] if tail > 0 else []
        return forget_range(entries, [x for x in middle if x[0] == EV]), True

    @property
    def idle_size(self) -> int:
        return self.size

    def summary_size(self, t: Trace, st: V0State, covered: list[int]):
        return summary_of(self, t, st, covered, events_of(t).units)

    # -- SDK v1
    def _sdk(self, trace: Trace, state: SdkState, view: View, status, request: bool) -> Decision:
        window = getattr(status, "window", None)
        limits = [x for x in (self.max_tokens, window) if x is not None]
        try:
            entries, calls = sdk_settle(self, trace, state, view, min(limits) if limits else None, request)
        except Insufficient as why:
            return Decision(stop=INSUFFICIENT, summary=merged(why.calls))
        return Decision(sdk_changes(trace, state, view, entries), merged(calls))

    def before_call(self, trace: Trace, state, view: View, call: int, status: RunStatus):
        if self.variant == "sdk_v1":
            d = self._sdk(trace, state, view, status, False)
            return d if d.summary is not None or d.stop is not None else d.changes
        return super().before_call(trace, state, view, call, status)

    def on_overflow(self, trace: Trace, state, view: View, call: int, status: RunStatus):
        if self.variant != "sdk_v1":
            return super().on_overflow(trace, state, view, call, status)
        d = self._sdk(trace, state, view, status, True)
        if d.stop is None and sum(ch.tokens - view.tokens[ch.index] for ch in d.changes) >= 0:
            return Decision(stop=INSUFFICIENT, summary=d.summary)  # no progress (its summary was made)
        return d

    def plan(self, trace: Trace) -> Plan:
        """``before_call`` at every call (``sim.policies.openhands_plan``); sdk_v1: declined."""
        return DECLINED if self.variant == "sdk_v1" else v0_plan(self, trace)

    def bound_violations(self, trace: Trace, view: View) -> list[str]:
        return []
