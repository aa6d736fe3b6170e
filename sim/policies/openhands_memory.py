"""What OpenHands V0 does around its condensers: the events a trace stands for, and ``ConversationMemory``.

Shared by the ``openhands_*`` V0 policies (openhands-ai 0.62.0). OpenHands' condensers work on a *view*:
the history's events, condensed ones removed, the latest summary inserted; ``ConversationMemory``
then turns the condensed view into the messages sent. A canonical trace's events map to OpenHands
events as the oracle maps them (``benchmarks/oracles/openhands/driver.py``):

- ``system`` -> ``SystemMessageAction`` (its ``tools`` event rides along: the tools go with every
  request, never condensed); a ``user`` event -> ``MessageAction`` unless its ``source_type`` says
  otherwise: ``action:recall`` -> ``RecallAction`` (an event, never sent), ``observation:*`` ->
  an observation without a tool call (``RecallObservation``, ``ErrorObservation``: a user message);
- an ``assistant`` event with m tool calls -> m actions sharing one model response (one event each);
  without a call -> the agent's ``MessageAction``; a ``tool_result`` -> its call's observation
  (``source_type observation:browse``: a ``BrowserOutputObservation``).

``ConversationMemory.process_events`` (what is sent from a condensed view): a system message (re-created
when the condenser forgot it: ctxsim sends the trace's), the initial user message re-inserted second
when the second event is not a user message; an action's message waits until every tool call of its
model response has its observation in the view, then goes with them (so an action whose observation
was masked or forgotten is not sent, nor an observation whose action was forgotten); an observation
without a tool call (a placeholder, a summary, the workspace context, an error) is a user message.

ctxsim's states for it: sent -> VERBATIM (at n times its size when sent n times); a placeholder ->
MASKED at the placeholder's size; in the view but not sent -> MASKED at 0 tokens (such a pair leaves
the request whole, as one user message or not at all); forgotten -> DROPPED, or SUMMARIZED when a
summary covered it.
"""

from __future__ import annotations

from typing import ClassVar

from sim.core.types import ItemState, Trace
from sim.policies.base import Change, Decision, Plan, Policy, RunStatus, SummaryCall, View

V, MASKED, DROPPED, SUMMARIZED = ItemState.VERBATIM, ItemState.MASKED, ItemState.DROPPED, ItemState.SUMMARIZED
EV, PH, SUM = 0, 1, 2  # entry kinds of a view: an event (one unit of it), a placeholder, a summary
NEVER_SENT = ("action:recall",)


class Events:
    """OpenHands' reading of a trace's events (derived once per trace)."""

    __slots__ = ("units", "obs", "message", "browser", "issuer", "calls", "call_id", "system", "first_user",
                 "recall", "recall_obs", "mute", "paired")  # fmt: skip

    def __init__(self, t: Trace) -> None:
        ev = t.events
        n = len(ev)
        self.units = [0] * n  # OpenHands events each stands for
        self.obs = [False] * n  # an Observation (maskable, "dangling" at a window's start)
        self.message = [False] * n  # a user MessageAction
        self.browser = [False] * n
        self.mute = [False] * n  # never sent (the recall action, an empty workspace context)
        self.paired = [False] * n  # an observation answering a call (sent with its action)
        self.issuer: dict[int, int] = {}  # tool_result -> its assistant event
        self.calls: dict[int, tuple[str, ...]] = {}  # assistant -> its tool call ids
        self.call_id: dict[int, str] = {}  # paired tool_result -> the call it answers
        by_id: dict[str, int] = {}
        for e in ev:
            i, st = e.index, e.source_type or ""
            if e.kind == "tools":
                continue
            self.units[i] = max(1, len(e.tool_call_ids)) if e.kind == "assistant" else 1
            if e.kind == "assistant":
                for c in e.tool_call_ids:
                    by_id[c] = i
                if e.tool_call_ids:
                    self.calls[i] = e.tool_call_ids
            elif e.kind == "tool_result":
                self.obs[i] = True
                if e.tool_call_id in by_id:
                    self.issuer[i] = by_id[e.tool_call_id]
                    self.call_id[i] = e.tool_call_id
                    self.paired[i] = True
                self.browser[i] = st == "observation:browse"
            elif e.kind == "user":
                self.obs[i] = st.startswith("observation:")
                self.message[i] = not self.obs[i] and st not in NEVER_SENT
                self.mute[i] = st in NEVER_SENT or (
                    st == "observation:recall" and e.tokens == 0 and not e.content
                )
        self.system = next((e.index for e in ev if e.kind == "system"), -1)
        self.first_user = next((i for i in range(n) if self.message[i]), -1)
        self.recall = next(
            (i for i in range(self.first_user + 1, n) if ev[i].source_type == "action:recall"), -1
        ) if self.first_user >= 0 else -1  # fmt: skip
        self.recall_obs = next(
            (i for i in range(self.recall + 1, n) if ev[i].source_type == "observation:recall"), -1
        ) if self.recall >= 0 else -1  # fmt: skip


def events_of(t: Trace) -> Events:
    return t.derived("openhands_events", Events)


def is_obs(info: Events, entry: tuple) -> bool:
    """An OpenHands Observation: placeholders and summaries are (``AgentCondensationObservation``)."""
    return entry[0] != EV or info.obs[entry[1]]


def _sizes(t: Trace) -> tuple[list[int], list[int]]:
    """Every event's tokens and bytes as lists (``apply`` reads them for every event it sends, every call)."""
    return [e.tokens for e in t.events], [e.bytes for e in t.events]


def sends(info: Events, entries: list[tuple]) -> dict[int, int]:
    """``ConversationMemory.process_events`` over a condensed view: how often each event is sent."""
    sent: dict[int, int] = {}

    def add(i: int) -> None:
        sent[i] = sent.get(i, 0) + 1

    if not any(x[0] == EV and x[1] == info.system for x in entries) and info.system >= 0:
        add(info.system)  # re-created (the agent's system prompt: ctxsim sends the trace's)
    second = 1 if any(x[0] == EV and x[1] == info.system for x in entries[:1]) else 0
    if info.first_user >= 0 and not (
        len(entries) > second and entries[second][0] == EV and info.message[entries[second][1]]
    ):
        add(info.first_user)  # re-inserted as the second message
    pending: dict[int, tuple[str, ...]] = {}
    answered: dict[str, int] = {}
    calls, paired, call_id, mute = info.calls, info.paired, info.call_id, info.mute
    for x in entries:
        if x[0] != EV:
            continue  # a placeholder or a summary: a user message (sized by the entry)
        i = x[1]
        if i in calls:
            pending[i] = calls[i]
        elif paired[i]:
            answered[call_id[i]] = i
        else:
            if not mute[i]:
                sent[i] = sent.get(i, 0) + 1
            # nothing pending or answered changed, and the last pass left no pending action complete
            # (a pass only removes): the pass would do nothing
            continue
        for a, ids in list(pending.items()):
            # checked one pending action after another, as OpenHands does: two calls reusing an id
            # (SWE-agent's traces do) wait on one answer, which goes to the older call only
            if all(c in answered for c in ids):
                add(a)
                for c in pending.pop(a):
                    add(answered.pop(c))
    return sent


def placeholder_size(text: str, t: Trace) -> tuple[int, int]:
    from sim.cost.tokens import estimate_tokens

    nbytes = len(text.encode())
    return estimate_tokens(nbytes, t.bytes_per_token), nbytes


def apply(
    t: Trace,
    info: Events,
    view: View,
    out: list[tuple],
    mine: set[int],
    summarized: set[int],
    carrier: int,
    summary: tuple[int, int],
) -> list[Change]:
    """The changes that make ``view`` send what OpenHands sends for the condensed view ``out``.

    ``mine``: the events this condenser decides (its incoming view and what it forgot; events an
    earlier pipeline step forgot stay as they are); ``summarized``: events its summary covers;
    ``carrier``: the event whose slot holds the summary (``summary``: tokens and bytes), -1 for none."""
    sent = sends(info, out)
    placeholders = {x[1]: (x[2], x[3]) for x in out if x[0] == PH}
    present = {x[1] for x in out if x[0] == EV}
    changes = []
    vstate, vtokens, vbytes, n = view.state, view.tokens, view.nbytes, view.n
    tokens, nbytes = t.derived("openhands_sizes", _sizes)
    for i in sorted(mine):
        if i >= n:
            continue
        if i in sent and i != carrier:  # the common case first: sent as it is (the branch below, unrolled)
            k = sent[i]
            if vstate[i] == ItemState.BOUNDED and k == 1:
                continue
            tok, nb = tokens[i] * k, nbytes[i] * k
            if vstate[i] != V or vtokens[i] != tok or vbytes[i] != nb:
                changes.append(Change(i, V, tok, nb, "openhands"))
            continue
        if i == carrier:
            want = (SUMMARIZED, *summary)
        elif i in sent:
            if view.state[i] == ItemState.BOUNDED and sent[i] == 1:
                continue
            e = t.events[i]  # sent, as often as OpenHands sends it (openhands_recent_events: twice)
            want = (V, e.tokens * sent[i], e.bytes * sent[i])
        elif i in placeholders:
            want = (MASKED, *placeholders[i])
        elif i in present:
            if info.mute[i]:
                continue
            want = (MASKED, 0, 0)
        elif i in summarized:
            want = (SUMMARIZED, 0, 0)
        else:
            want = (DROPPED, 0, 0)
        if (view.state[i], view.tokens[i], view.nbytes[i]) != want:
            changes.append(Change(i, want[0], want[1], want[2], "openhands"))
    return changes


# ------------------------------------------------------------------------------- the V0 condensers' base
class Insufficient(Exception):
    """The real condenser raises here, or cannot shrink the request: the run ends (a named outcome).
    ``calls``: summarizer calls OpenHands made before giving up (metered all the same)."""

    def __init__(self, why: str, calls: list | None = None) -> None:
        super().__init__(why)
        self.calls = calls or []


# condensations asked for one request before the run ends: OpenHands would keep condensing (each one a
# summarizer call) when none settles; the oracle's driver stops at the same count, so both meter as many
SETTLE_ROUNDS = 100
INSUFFICIENT = (
    "condensation-insufficient"  # sim.engine.dispatch finish reason: an OpenHands condenser gave up
)


class V0State:
    """Per run: what this condenser forgot (its condensation actions in the history) and its summary."""

    __slots__ = ("dropped", "summarized", "masked", "hidden", "summary", "carrier", "summary_pos")

    def __init__(self) -> None:
        self.dropped: set[int] = set()
        self.summarized: set[int] = set()
        self.masked: set[int] = set()  # events this condenser shows as its own placeholder
        # events this condenser left out of a view it returned (RecentEvents): still in the history it is
        # given next time, so they can come back (the first user message, re-inserted by ConversationMemory)
        self.hidden: set[int] = set()
        self.summary: tuple[int, int] | None = None  # the latest summary's tokens and bytes
        self.carrier = -1
        self.summary_pos = 0  # where OpenHands inserts the summary in the view


def incoming(t: Trace, info: Events, st: V0State, view: View) -> list[tuple]:
    """The view this condenser is given: the events not forgotten, as OpenHands' ``View.from_events``
    builds it (an earlier pipeline step's placeholders and summaries as such), its summary inserted."""
    out: list[tuple] = []
    units, vstate, vtokens = info.units, view.state, view.tokens
    gone = st.dropped | st.summarized
    own = st.masked | st.hidden
    for i in range(view.n):
        u = units[i]
        if u == 0 or i in gone:  # 0 units: the tools event (``Events``)
            continue
        if i not in own and vstate[i] != V:
            s, tok = vstate[i], vtokens[i]
            if s == DROPPED or (s == SUMMARIZED and tok == 0):
                continue  # forgotten by an earlier step
            if s == SUMMARIZED:
                out.append((SUM, i, tok, view.nbytes[i]))
                continue
            if s == MASKED and tok > 0:
                out.append((PH, i, tok, view.nbytes[i]))
                continue
        if u == 1:
            out.append((EV, i))
        else:
            out.extend([(EV, i)] * u)
    if st.summary is not None:
        out.insert(min(st.summary_pos, len(out)), (SUM, st.carrier, *st.summary))
    return out


def merged(calls: list[SummaryCall]) -> SummaryCall | list[SummaryCall] | None:
    """The summarizer calls OpenHands made before one request (several condensations: each metered)."""
    return None if not calls else calls[0] if len(calls) == 1 else list(calls)


class V0Condenser(Policy):
    """Base of the V0 condensers: the view OpenHands gives the condenser, the condensations it appends
    (``condense`` returns the condensed view, or the events a condensation forgets), and what
    ``ConversationMemory`` then sends. ``rolling``: a ``RollingCondenser``, which also condenses on the
    agent's condensation request after a context-window error (``on_overflow``); OpenHands asks again
    after each rejection (``overflow_retries``) and the run ends when a request no longer shrinks."""

    acts_before_call = True
    rolling: ClassVar[bool] = False

    def start(self, trace: Trace) -> V0State:
        return V0State()

    @property
    def recovers(self) -> bool:  # type: ignore[override]
        return self.rolling

    @property
    def overflow_retries(self) -> int:  # type: ignore[override]
        return 1000 if self.rolling else 1

    def condense(self, t: Trace, info: Events, st: V0State, entries: list[tuple], request: bool):
        """The condensed view (a list of entries), or ``(forgotten event indices, summarize?)``."""
        raise NotImplementedError

    def summary_size(self, t: Trace, st: V0State, covered: list[int]) -> tuple[tuple[int, int], SummaryCall]:
        raise NotImplementedError

    def _settle(self, t: Trace, info: Events, st: V0State, view: View, request: bool):
        entries = incoming(t, info, st, view)
        mine = {x[1] for x in entries if x[0] == EV} | st.dropped | st.summarized | st.masked
        given = {x[1] for x in entries if x[0] == EV}
        calls: list[SummaryCall] = []
        for _ in range(SETTLE_ROUNDS):  # a condensation shrinks the view: settled in one or two rounds
            res = self.condense(t, info, st, entries, request)
            if isinstance(res, list):
                st.masked |= {x[1] for x in res if x[0] == PH and x[1] in given}
                st.hidden |= given - {x[1] for x in res if x[0] != SUM}
                mine |= st.masked | st.hidden
                return res, mine, calls
            forget, summarize = res
            gone = sorted(forget)
            if not gone:
                raise Insufficient("nothing to forget")
            if summarize and request and all(i == info.first_user or info.mute[i] for i in gone):
                # covers only the first user message, which ConversationMemory re-sends: the summary
                # adds to the request and nothing leaves it (OpenHands summarizes, then fails)
                raise Insufficient("no progress", [*calls, self.summary_size(t, st, gone)[1]])
            mine.update(gone)
            if summarize:
                size, call = self.summary_size(t, st, gone)
                calls.append(call)
                st.summarized.update(gone)
                if st.carrier < 0:
                    # not an event ConversationMemory sends all the same (the first user message, a
                    # forgotten system prompt re-created): the summary needs a slot of its own
                    pick = [i for i in gone if i not in (info.first_user, info.system) and not info.mute[i]]
                    st.carrier = (pick or gone)[0]
                    mine.add(st.carrier)
                st.summary = size
            else:
                st.dropped.update(i for i in gone if i not in st.summarized)
            drop = set(gone)
            entries = [
                x for x in entries
                if not ((x[0] != SUM and x[1] in drop) or (summarize and x[0] == SUM and x[1] == st.carrier))
            ]  # fmt: skip
            if summarize:
                entries.insert(min(st.summary_pos, len(entries)), (SUM, st.carrier, *st.summary))
            request = False
        raise Insufficient("the condenser did not settle", calls)

    def _decide(self, t: Trace, st: V0State, view: View, request: bool) -> Decision:
        info = events_of(t)
        try:
            out, mine, calls = self._settle(t, info, st, view, request)
        except Insufficient as why:
            return Decision(stop=INSUFFICIENT, summary=merged(why.calls))
        changes = apply(t, info, view, out, mine, st.summarized, st.carrier, st.summary or (0, 0))
        return Decision(changes, merged(calls))

    def before_call(self, trace: Trace, state: V0State, view: View, call: int, status: RunStatus):
        d = self._decide(trace, state, view, False)
        return d if d.summary is not None or d.stop is not None else d.changes

    def on_overflow(self, trace: Trace, state: V0State, view: View, call: int, status: RunStatus):
        if not self.rolling:
            return None
        d = self._decide(trace, state, view, True)
        if d.stop is None and sum(ch.tokens - view.tokens[ch.index] for ch in d.changes) >= 0:
            return Decision(stop=INSUFFICIENT, summary=d.summary)  # no progress (its summary was made)
        return d


def mask_plan(t: Trace, candidates: list[int], masked_upto, size) -> Plan:
    """The plan of a masking condenser on its own (it forgets nothing, so OpenHands' view is every
    event): before each call, the ``candidates`` (observations, ascending) that newly leave the window
    become placeholders (``size(i)``: tokens) and their calls go unsent. ``masked_upto(end)``: how many
    candidates are masked for a view of events [0, end) (only grows)."""
    info = events_of(t)
    calls: list[int] = []
    index: list[int] = []
    tokens: list[int] = []
    state: list[int] = []
    done, seen = 0, set()
    for k, end in enumerate(t.arrays.view_end.tolist()):
        upto = masked_upto(end)
        if upto <= done:
            continue
        row = []
        for i in candidates[done:upto]:
            row.append((i, size(i)))
            a = info.issuer.get(i)
            if a is not None and a not in seen:
                seen.add(a)
                row.append((a, 0))
        done = upto
        for i, tok in sorted(row):
            calls.append(k)
            index.append(i)
            tokens.append(tok)
            state.append(int(MASKED))
    return Plan(calls, index, tokens, state)


def unit_positions(t: Trace) -> list[int]:
    """Per event: its position in OpenHands' view when nothing is forgotten (units before it)."""
    info = events_of(t)
    out, p = [], 0
    for u in info.units:
        out.append(p)
        p += u
    out.append(p)
    return out
