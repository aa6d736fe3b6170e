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

from bisect import bisect_left
from itertools import compress, repeat
from operator import attrgetter, itemgetter, mul, ne
from typing import ClassVar

from sim.core.types import ItemState, Trace
from sim.policies.base import Change, Decision, Plan, Policy, RunStatus, SummaryCall, View

V, MASKED, DROPPED, SUMMARIZED = ItemState.VERBATIM, ItemState.MASKED, ItemState.DROPPED, ItemState.SUMMARIZED
EV, PH, SUM = 0, 1, 2  # entry kinds of a view: an event (one unit of it), a placeholder, a summary
NEVER_SENT = ("action:recall",)


class Events:
    """OpenHands' reading of a trace's events (derived once per trace)."""

    __slots__ = ("units", "obs", "message", "browser", "issuer", "calls", "call_id", "system", "first_user",
                 "recall", "recall_obs", "mute", "paired", "flat", "start", "needs", "scan")  # fmt: skip

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
        # ``incoming``'s tables: every event's entries laid end to end (an event of u units is u entries)
        # and where each event's start (``start[n]``: the entries of events [0, n)); ``sends``': the
        # call ids each action waits for, as a set
        self.flat: list[tuple] = [(EV, i) for i in range(n) for _ in range(self.units[i])]
        self.start = [0] * (n + 1)
        for i in range(n):
            self.start[i + 1] = self.start[i] + self.units[i]
        self.needs = {a: frozenset(ids) for a, ids in self.calls.items()}
        # the last ``sends`` walk: (its entries, and pending, answered and sent after them); the walk is
        # a function of the entries alone, so the next call's view that starts with the same entries
        # (a view that only grew) goes on from there
        self.scan: tuple | None = None
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


def event_sizes(t: Trace) -> tuple[list[int], list[int]]:
    """Every event's tokens and bytes as lists (``apply`` reads them for every event it sends, every call)."""
    return [e.tokens for e in t.events], [e.bytes for e in t.events]


def sends(info: Events, entries: list[tuple]) -> dict[int, int]:
    """``ConversationMemory.process_events`` over a condensed view: how often each event is sent."""
    sent = _walk(info, entries)
    for i in reinserted(info, info.system >= 0 and (EV, info.system) in entries, entries[:2]):
        sent[i] = sent.get(i, 0) + 1  # (an event entry is exactly (EV, i))
    return sent


def reinserted(info: Events, has_system: bool, head: list[tuple]) -> list[int]:
    """The events ``process_events`` sends besides the view's own (``sends``): the system prompt when the
    view lacks it (re-created: ctxsim sends the trace's), the first user message when the view's second
    message is not a user message (re-inserted second). ``head``: the view's first two entries.
    ``openhands_plan`` passes what it keeps of the view (its system prompt, its head)."""
    system, first_user = info.system, info.first_user
    out = [system] if system >= 0 and not has_system else []
    second = 1 if head[:1] == [(EV, system)] else 0
    if first_user >= 0 and not (
        len(head) > second and head[second][0] == EV and info.message[head[second][1]]
    ):
        out.append(first_user)
    return out


def _walk(info: Events, entries: list[tuple]) -> dict[int, int]:
    """The messages ``process_events`` makes of ``entries`` in order: how often each event is sent. Goes
    on from the last walk (``Events.scan``) when ``entries`` start with its entries (held to a walk from
    the first entry by tests/test_policy_tables.py)."""
    pending: dict[int, tuple[str, ...]] = {}
    answered: dict[str, int] = {}
    sent: dict[int, int] = {}
    lo = 0
    memo = info.scan
    if memo is not None and len(memo[0]) <= len(entries) and entries[: len(memo[0])] == memo[0]:
        lo = len(memo[0])
        pending, answered, sent = dict(memo[1]), dict(memo[2]), dict(memo[3])
    walk_on(info, entries[lo:] if lo else entries, pending, answered, sent)
    info.scan = (list(entries), pending, answered, dict(sent))
    return sent


def walk_on(info: Events, entries, pending: dict, answered: dict, sent: dict) -> None:
    """``_walk``'s pass over ``entries`` from the state an earlier pass left (``pending`` actions,
    ``answered`` call ids; both updated): adds to ``sent`` each send it makes (the planner passes an
    empty dict to learn what the new entries sent, ``sim.policies.openhands_plan``)."""
    get = sent.get
    calls, paired, call_id, mute, needs = info.calls, info.paired, info.call_id, info.mute, info.needs
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
                sent[i] = get(i, 0) + 1
            # nothing pending or answered changed, and the last pass left no pending action complete
            # (a pass only removes): the pass would do nothing
            continue
        if not answered:
            continue  # no action can be complete (each waits on at least one answer)
        for a in list(pending):
            # checked one pending action after another, as OpenHands does: two calls reusing an id
            # (SWE-agent's traces do) wait on one answer, which goes to the older call only
            if answered.keys() >= needs[a]:  # every call id of the action answered
                sent[a] = get(a, 0) + 1
                for c in pending.pop(a):
                    r = answered.pop(c)
                    sent[r] = get(r, 0) + 1


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
    present, odd = event_ids(out)
    placeholders = {x[1]: (x[2], x[3]) for x in odd if x[0] == PH}
    changes = []
    vstate, vtokens, vbytes, n = view.state, view.tokens, view.nbytes, view.n
    tokens, nbytes = t.derived("openhands_sizes", event_sizes)
    # The rule per event is ``want_of``'s. Most events of ``mine`` fall in one of two groups that are
    # mostly as wanted already from the last call: forgotten (in none of the sets below: DROPPED at 0)
    # and sent as they are. In each, the events not yet as wanted are found at C speed and only they are
    # walked; the rest are walked. The walks' changes are put back in index order, the order of a walk
    # of ``mine``.
    special = sent.keys() | placeholders.keys() | present | summarized
    special.add(carrier)
    rest = _below(sorted(mine - special), n)
    if len(rest) > 1:
        get = itemgetter(*rest)
        rest = _differing(rest, get(vstate), repeat(DROPPED), get(vtokens), get(vbytes))
    plain = sent.keys() & mine
    plain.discard(carrier)
    sent_plain = _below(sorted(plain), n)
    if len(sent_plain) > 1:
        get = itemgetter(*sent_plain)
        times = get(sent)
        tok, nb = map(mul, get(tokens), times), map(mul, get(nbytes), times)
        sent_plain = _differing(sent_plain, get(vstate), repeat(V), get(vtokens), get(vbytes), tok, nb)
    walk = [rest, sent_plain, _below(sorted(mine & special - plain), n)]
    for group in walk:
        for i in group:
            want = want_of(t, info, vstate[i], i, sent.get(i, 0), placeholders, present, summarized, carrier,
                         summary)  # fmt: skip
            if want is not None and (vstate[i], vtokens[i], vbytes[i]) != want:
                changes.append(Change(i, want[0], want[1], want[2], "openhands"))
    if sum(1 for g in walk if g) > 1:
        changes.sort(key=_index)
    return changes


def event_ids(entries: list[tuple]) -> tuple[set[int], list[tuple]]:
    """The events with an entry in ``entries`` (``{x[1] for x in entries if x[0] == EV}``), and the
    entries that are not an event's (placeholders and summaries, in order). An event's entry is the
    only one of two fields, so the usual view of events alone is read at C speed."""
    odd = list(compress(entries, map(ne, map(len, entries), repeat(2))))
    if not odd:
        return set(map(_second, entries)), odd
    return {x[1] for x in entries if x[0] == EV}, odd


_second = itemgetter(1)


def _differing(items: list[int], states, want_states, tokens, nbytes, want_tokens=None, want_bytes=None):
    """The items (ascending) whose state, tokens or bytes differ from the wanted ones (None: 0), found
    with iterators only; ascending."""
    odd = set(compress(items, map(ne, states, want_states)))
    if want_tokens is None:
        odd.update(compress(items, tokens), compress(items, nbytes))
    else:
        odd.update(
            compress(items, map(ne, tokens, want_tokens)), compress(items, map(ne, nbytes, want_bytes))
        )
    return sorted(odd)


def _below(ascending: list[int], n: int) -> list[int]:
    """The items of an ascending list below ``n`` (the events in view)."""
    return ascending[: bisect_left(ascending, n)]


def want_of(t, info, state, i, times, placeholders, present, summarized, carrier, summary) -> tuple | None:
    """What event i of a condenser's events must be for OpenHands' condensed view: (state, tokens,
    bytes), or None to leave it as it is (a bounded result sent once, a present event never sent).
    ``state``: its state in the view now; ``times``: how often ``sends`` sends it (0: not sent). Read by
    ``apply`` and by the planner (``sim.policies.openhands_plan``)."""
    if i == carrier:
        return (SUMMARIZED, *summary)
    if times:
        if state == ItemState.BOUNDED and times == 1:
            return None
        tokens, nbytes = t.derived("openhands_sizes", event_sizes)
        return (V, tokens[i] * times, nbytes[i] * times)  # openhands_recent_events: twice
    if i in placeholders:
        return (MASKED, *placeholders[i])
    if i in present:
        return None if info.mute[i] else (MASKED, 0, 0)
    if i in summarized:
        return (SUMMARIZED, 0, 0)
    return (DROPPED, 0, 0)


_index = attrgetter("index")


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

    __slots__ = ("dropped", "summarized", "masked", "hidden", "summary", "carrier", "summary_pos", "expect")
    __slots__ += ("idle_entries",)

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
        # ``V0Condenser.shares_idle``: the view (states, tokens, bytes) this run's decisions left, while
        # it has condensed nothing (None once it has); the entries of a call the condenser left as given
        self.expect: tuple[list, list, list] | None = ([], [], [])
        self.idle_entries: list[tuple] | None = None


def incoming(t: Trace, info: Events, st: V0State, view: View) -> list[tuple]:
    """The view this condenser is given: the events not forgotten, as OpenHands' ``View.from_events``
    builds it (an earlier pipeline step's placeholders and summaries as such), its summary inserted.

    Every event of [0, ``view.n``) is its units' entries (``Events.flat``) except the *special* ones: those
    this condenser forgot, and those another step left in a state other than verbatim; the entries of
    the runs between special events are copied whole (per event the rule is ``_entries_of``)."""
    n = view.n
    vstate, start, flat = view.state, info.start, info.flat
    gone = st.dropped | st.summarized
    own = st.masked | st.hidden
    # the events not verbatim, found at C speed (the view's states are ints)
    other = set(compress(range(n), map(V.__ne__, vstate[:n]))) - own - gone
    special = _below(sorted(gone | other), n) if gone or other else ()
    if not special:
        out = flat[: start[n]]
    else:
        out = []
        lo = 0
        for i in special:
            if i > lo:
                out += flat[start[lo] : start[i]]
            lo = i + 1
            if i not in gone:  # (a forgotten event has no entries)
                _entries_of(info, i, False, own, view, out)
        out += flat[start[lo] : start[n]]
    if st.summary is not None:
        out.insert(min(st.summary_pos, len(out)), (SUM, st.carrier, *st.summary))
    return out


def _entries_of(info: Events, i: int, gone: bool, own: set[int], view: View, out: list[tuple]) -> None:
    """Event i's entries in the condenser's incoming view, appended to ``out``: none when it has no
    units (the tools event) or this condenser forgot it (``gone``); an earlier step's forgotten event
    none, its summary a summary entry, its placeholder a placeholder entry; else its units."""
    u = info.units[i]
    if u == 0 or gone:
        return
    if i not in own and view.state[i] != V:
        s, tok = view.state[i], view.tokens[i]
        if s == DROPPED or (s == SUMMARIZED and tok == 0):
            return  # forgotten by an earlier step
        if s == SUMMARIZED:
            out.append((SUM, i, tok, view.nbytes[i]))
            return
        if s == MASKED and tok > 0:
            out.append((PH, i, tok, view.nbytes[i]))
            return
    out.extend([(EV, i)] * u)


def _idle_table(t: Trace) -> dict:
    return {}  # call -> (view.n, the condenser's entries, the decision's changes): ``_idle_shared``


def _pristine(st: V0State) -> bool:
    """Nothing condensed yet: nothing forgotten, summarized, masked or hidden by this condenser."""
    return (
        not (st.dropped or st.summarized or st.masked or st.hidden) and st.summary is None and st.carrier < 0
    )


def fresh_sizes(t: Trace) -> tuple[list[int], list[int]]:
    return t.arrays.tokens.tolist(), t.arrays.bytes.tolist()  # what the loop admits an event at


def _as_left(t: Trace, st: V0State, view: View) -> bool:
    """The view is what this run's decisions left (``st.expect``), and every event admitted since is
    verbatim at its recorded size: the view every run of the trace that condensed nothing has here."""
    states, tokens, nbytes = st.expect  # type: ignore[misc]
    m, n = len(states), view.n
    if n < m or view.state[:m] != states or view.tokens[:m] != tokens or view.nbytes[:m] != nbytes:
        return False
    if n == m:
        return True
    fresh_tokens, fresh_bytes = t.derived("openhands_fresh_sizes", fresh_sizes)
    return (
        view.state[m:n].count(V) == n - m
        and view.tokens[m:n] == fresh_tokens[m:n]
        and view.nbytes[m:n] == fresh_bytes[m:n]
    )


def _left(st: V0State, view: View, changes) -> None:
    """``st.expect``: the view once ``changes`` are applied (what the next call should find)."""
    n = view.n
    states, tokens, nbytes = view.state[:n], view.tokens[:n], view.nbytes[:n]
    for ch in changes:
        states[ch.index], tokens[ch.index], nbytes[ch.index] = ch.state, ch.tokens, ch.nbytes
    st.expect = (states, tokens, nbytes)


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
    # its ``condense`` returns the very entries it is given when it does not condense: until a run
    # condenses, its decisions are ConversationMemory's alone, the same for every setting of the knobs,
    # so a sizing's settings share them per trace and call (``_idle_shared``)
    shares_idle: ClassVar[bool] = False

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

    @property
    def idle_size(self) -> int:
        """``condense`` returns the very entries it is given (no request) while they are at most this
        many (a rolling condenser's ``max_size``); -1: it may change them at any call. The planner skips
        the calls it would leave alone (``sim.policies.openhands_plan``)."""
        return -1

    def summary_size(self, t: Trace, st: V0State, covered: list[int]) -> tuple[tuple[int, int], SummaryCall]:
        raise NotImplementedError

    def _settle(self, t: Trace, info: Events, st: V0State, view: View, request: bool):
        entries = incoming(t, info, st, view)
        given = event_ids(entries)[0]
        mine = given | st.dropped | st.summarized | st.masked
        calls: list[SummaryCall] = []
        for _ in range(SETTLE_ROUNDS):  # a condensation shrinks the view: settled in one or two rounds
            res = self.condense(t, info, st, entries, request)
            if isinstance(res, list):
                st.idle_entries = entries if res is entries else None
                kept, odd = event_ids(res)
                st.masked |= {x[1] for x in odd if x[0] == PH and x[1] in given}
                st.hidden |= given - kept - {x[1] for x in odd if x[0] == PH}
                mine |= st.masked | st.hidden
                return res, mine, calls
            forget, summarize = res
            entries, gone = self.forget(t, info, st, entries, forget, summarize, request, calls)
            mine.update(gone)  # (a new summary's carrier is one of them)
            request = False
        raise Insufficient("the condenser did not settle", calls)

    def forget(self, t: Trace, info: Events, st: V0State, entries, forget, summarize: bool, request: bool,
               calls: list) -> tuple[list[tuple], list[int]]:  # fmt: skip
        """One condensation of ``_settle`` (and of the planner, ``sim.policies.openhands_plan``): the events
        ``forget`` leave the view ``entries`` (forgotten, or covered by a summary made now: its call goes
        in ``calls``). Returns the view left and the events forgotten (ascending)."""
        gone = sorted(forget)
        if not gone:
            raise Insufficient("nothing to forget")
        if summarize and request and all(i == info.first_user or info.mute[i] for i in gone):
            # covers only the first user message, which ConversationMemory re-sends: the summary
            # adds to the request and nothing leaves it (OpenHands summarizes, then fails)
            raise Insufficient("no progress", [*calls, self.summary_size(t, st, gone)[1]])
        if summarize:
            size, call = self.summary_size(t, st, gone)
            calls.append(call)
            st.summarized.update(gone)
            if st.carrier < 0:
                # not an event ConversationMemory sends all the same (the first user message, a
                # forgotten system prompt re-created): the summary needs a slot of its own
                pick = [i for i in gone if i not in (info.first_user, info.system) and not info.mute[i]]
                st.carrier = (pick or gone)[0]
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
        return entries, gone

    def _decide(self, t: Trace, st: V0State, view: View, request: bool) -> Decision:
        info = events_of(t)
        try:
            out, mine, calls = self._settle(t, info, st, view, request)
        except Insufficient as why:
            return Decision(stop=INSUFFICIENT, summary=merged(why.calls))
        changes = apply(t, info, view, out, mine, st.summarized, st.carrier, st.summary or (0, 0))
        return Decision(changes, merged(calls))

    def before_call(self, trace: Trace, state: V0State, view: View, call: int, status: RunStatus):
        """The condensed view's states. A condenser on its own plans them (``plan``:
        ``sim.policies.openhands_plan``, held to this by tests/test_plans_openhands.py)."""
        if self.shares_idle and state.expect is not None:
            return self._idle_shared(trace, state, view, call)
        d = self._decide(trace, state, view, False)
        return d if d.summary is not None or d.stop is not None else d.changes

    def _idle_shared(self, t: Trace, st: V0State, view: View, call: int):
        """``before_call`` of a run that has condensed nothing yet. Its view is then the one every such
        run of the trace has at this call (checked: what its decisions left, and the events since, as
        they were recorded), and so is the view the condenser is given: when ``condense`` leaves that as
        it is, the decision is the one first made for this call by any setting, kept per trace and
        class. Else decided here (``_decide``), and kept for the next setting when it is that decision.
        Held to each setting's own decisions by tests/test_policy_tables.py."""
        if not _as_left(t, st, view):  # another step changed the view, or the mock model brought an
            st.expect = None  # item back: its views are its own from here on (the chain starts at call 0)
            d = self._decide(t, st, view, False)
            return d if d.summary is not None or d.stop is not None else d.changes
        table = t.derived(f"openhands_idle:{self.name}", _idle_table)
        hit = table.get(call)
        if (
            hit is not None
            and hit[0] == view.n
            and self.condense(t, events_of(t), st, hit[1], False) is hit[1]
        ):
            _left(st, view, hit[2])
            return list(hit[2])
        st.idle_entries = None
        d = self._decide(t, st, view, False)
        if st.idle_entries is None or d.summary is not None or d.stop is not None or not _pristine(st):
            st.expect = None  # it condensed: its views are its own from here on
            return d if d.summary is not None or d.stop is not None else d.changes
        table[call] = (view.n, st.idle_entries, list(d.changes))  # the idle decision at this call
        _left(st, view, d.changes)
        return d.changes

    def on_overflow(self, trace: Trace, state: V0State, view: View, call: int, status: RunStatus):
        if not self.rolling:
            return None
        state.expect = None  # (a condensation request: the view is this run's own from here on)
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
