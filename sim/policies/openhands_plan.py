"""Every pre-call decision of an OpenHands condenser at once (``Policy.plan``): the batch path's view of
``openhands_recent_events``, ``openhands_amortized_forgetting``, ``openhands_llm_summarizing`` (v0) and,
apart (``sdk_view_plan``), the SDK view properties of ``openhands_hard_context_reset``.

The planner restates ``V0Condenser.before_call`` (``sim.policies.openhands_memory``) for a condenser on its
own, from the trace's structure: with no other step before it, every event it is given is verbatim or
its own (forgotten, summarized, left out, unsent), so the view OpenHands gives it is every event not
forgotten, in order, its summary inserted (``incoming``), and the events it decides are every event in
view (``apply``'s ``mine``). It calls the condenser's own rules: ``condense`` (which events), ``forget``
(a condensation, its summary's size), ``walk_on`` and ``reinserted`` (what ``ConversationMemory`` sends)
and ``want_of`` (each event's state). What is new is the bookkeeping that makes a call cost what changed
(``_Run.step``):

- the view it is given is kept from call to call: new events are appended, a condensation rebuilds it;
- while the condenser returns that view as it is (no condensation), ``ConversationMemory``'s walk goes on
  from where the last call's stopped, and only the events it newly sends are looked at again, with the
  new events and the first user message and system prompt (re-sent by the view's head);
- when the condenser returns a view of its own (``RecentEventsCondenser``'s head and tail, a
  condensation), that view is walked whole and only the events whose presence or send count differ
  from the last call's are looked at again.

Shortcuts on top, each with the condition under which it gives the step's answer:

- a rolling condenser (``idle_size``) leaves calls alone until its view passes ``idle_size``: a call at
  which the walk has nothing pending, whatever it holds could never complete a later action, and the
  whole history's walk (``quiet_table``) completes every new action (its calls answered within the same
  call) changes nothing, so the planner jumps to the next call that condenses or is not so (``rolling``);
  ``RecentEventsCondenser`` likewise while its tail holds every entry (``quiet``);
- ``RecentEventsCondenser`` on a trace whose tool call ids are each issued once and answered at most
  once (``groups_of``): once the head and the tail are apart, an event is sent when it is a message, or
  when its action and every result of that action are in the view, so a call looks only at the events
  that left or entered the tail and their groups (``sliding``), and the calls after the first such one
  are found at once, per event, by bisection (``tail_at_once``; for all runs of ``plan_many`` together:
  ``tail_entries``).

Each event's state as the plan leaves it is kept, so an entry is a change exactly where ``apply`` makes
one. A run the condenser gives up on (``Insufficient``: ``before_call`` stops it) is declined. Summaries
are sized from the recorded events (``summary_of``), never from the view, so a run with needs is planned
too (the batch path hands a run that summarizes and has needs to the loop). Runs over their window take
the loop (``on_overflow``'s condensation requests). Held to ``before_call`` and to the loop by
tests/test_plans_openhands.py.
"""

from __future__ import annotations

from bisect import bisect_right

import numpy as np

from sim.core.types import ItemState, Trace
from sim.policies.base import Plan, Plans
from sim.policies.openhands_memory import (
    SETTLE_ROUNDS,
    Insufficient,
    V0Condenser,
    event_ids,
    event_sizes,
    events_of,
    fresh_sizes,
    reinserted,
    walk_on,
    want_of,
)

V, MASKED, DROPPED = int(ItemState.VERBATIM), int(ItemState.MASKED), int(ItemState.DROPPED)
NO_PH: dict = {}  # (these condensers make no placeholder)
DECLINED = Plan([], [], [], [], (), True)


def v0_plan(policy: V0Condenser, t: Trace) -> Plan:
    """``policy.before_call``'s decisions at every call of ``t`` (see the module's docstring), or a
    declined plan when a call's would stop the run."""
    try:
        run = _Run(policy, t)
        if policy.idle_size >= 0:
            run.rolling()
        else:
            for k, n in enumerate(run.ends):
                run.step(k, n)
        return run.plan()
    except Insufficient:
        return DECLINED


def recent_plans(policy: V0Condenser, traces, keep_first: int, max_events: int) -> Plans:
    """``v0_plan`` of ``RecentEventsCondenser`` (head ``keep_first`` entries, ``max_events`` in all) for
    each of ``traces``, the calls ``tail_at_once`` leaves for all runs at once (``tail_entries``)."""
    runs: list[_Run | None] = []
    for t in traces:
        run: _Run | None = _Run(policy, t)
        try:
            run.sliding(keep_first, max_events)  # type: ignore[union-attr]
        except Insufficient:
            run = None
        runs.append(run)
    tail_entries([r for r in runs if r is not None and r.deferred is not None])
    return Plans.of([DECLINED if r is None else r.plan() for r in runs])


def tail_entries(runs: list[_Run]) -> None:
    """The entries of every run's calls that ``tail_at_once`` left (``_Run.deferred``), found for all runs
    at once: each run's view ends and tail starts laid end to end, each moved past the last run's (so
    one bisection finds a call within its run). An event outside the head is, at call k, out of the
    view once the tail starts past it (DROPPED), else sent (verbatim as admitted) while its group
    (itself, for a message) lies within the tail, else in the view unsent (MASKED at 0): its state
    changes only at the calls it enters, its group completes, its group's first event leaves and it
    leaves. Sets each run's ``vector``."""
    if not runs:
        return
    parts = [r.deferred for r in runs]
    big = max(len(r.units) for r in runs) + 2  # above every event index (and the never-answered mark)
    shift = np.arange(len(runs), dtype=np.int64) * big
    owner = np.repeat(np.arange(len(runs)), [len(p[0]) for p in parts])  # each tracked event's run
    ends = np.concatenate([p[4] + q for p, q in zip(parts, shift.tolist(), strict=True)])
    firsts = np.concatenate([p[5] + q for p, q in zip(parts, shift.tolist(), strict=True)])
    ends_at = np.cumsum([0] + [len(p[4]) for p in parts])[:-1][owner]
    firsts_at = np.cumsum([0] + [len(p[5]) for p in parts])[:-1][owner]
    k0 = np.array([p[6] for p in parts], dtype=np.int64)[owner]
    count = np.array([p[7] for p in parts], dtype=np.int64)[owner]
    ev, lo, hi, sized = (np.concatenate([p[j] for p in parts]) for j in range(4))
    moved = shift[owner]
    enter = np.searchsorted(ends, ev + moved, "right") - ends_at
    leave = k0 + np.searchsorted(firsts, ev + moved, "right") - firsts_at
    whole = np.searchsorted(ends, hi + moved, "right") - ends_at
    broken = k0 + np.searchsorted(firsts, lo + moved, "right") - firsts_at
    at = np.stack([enter, whole, broken, leave], axis=1)  # (an event per row, a kind of call per column)

    def state(k):
        s = np.where((k >= whole[:, None]) & (k < broken[:, None]), V, MASKED)
        s = np.where(k >= leave[:, None], DROPPED, s)
        return np.where(k < enter[:, None], V, s)

    now = state(at)
    take = (at > k0[:, None]) & (at < count[:, None]) & (now != state(at - 1))
    take[:, 1] &= at[:, 1] != at[:, 0]  # (two of them at one call: once)
    take[:, 2] &= (at[:, 2] != at[:, 0]) & (at[:, 2] != at[:, 1])
    take[:, 3] &= (at[:, 3] != at[:, 0]) & (at[:, 3] != at[:, 1]) & (at[:, 3] != at[:, 2])
    calls, now = at[take], now[take]
    rows = np.broadcast_to(np.arange(len(ev))[:, None], at.shape)[take]
    item, tokens = ev[rows], np.where(now == V, sized[rows], 0)
    bounds = np.searchsorted(owner[rows], np.arange(len(runs) + 1)).tolist()
    for j, r in enumerate(runs):
        a, b = bounds[j], bounds[j + 1]
        r.vector = (calls[a:b], item[a:b], tokens[a:b], now[a:b])


def quiet_table(t: Trace) -> tuple[list[int], list[int], dict[str, int]]:
    """What ``_Run.rolling`` reads of a trace, the same for every setting: each call's view end in
    entries; per call the next call (itself included) at which the whole history's walk has something
    pending or waiting before or after the call's new entries (``len``: none); and per tool call id the
    last action issuing it. Non-decreasing view ends only (else every call counts as such a call)."""
    info = events_of(t)
    flat, start = info.flat, info.start
    ends = [start[n] for n in t.arrays.view_end.tolist()]
    pending: dict = {}
    answered: dict = {}
    sent: dict = {}
    busy = []
    lo = 0
    for u in ends:
        before = bool(pending or answered)
        if u > lo:
            walk_on(info, flat[lo:u], pending, answered, sent)
            lo = u
        busy.append(before or bool(pending or answered))
    if any(b < a for a, b in zip(ends, ends[1:], strict=False)):
        busy = [True] * len(ends)
    nxt, upcoming = len(ends), [0] * len(ends)
    for k in range(len(ends) - 1, -1, -1):
        if busy[k]:
            nxt = k
        upcoming[k] = nxt
    last_issue: dict[str, int] = {}
    for a, ids in info.calls.items():
        for c in ids:
            last_issue[c] = max(last_issue.get(c, -1), a)
    return ends, upcoming, last_issue


def groups_of(t: Trace) -> list[tuple | None] | None:
    """Per event: its action's group (the action and the result of each of its calls; the trace's
    length for a call never answered), None for a message; None for the trace when a call id is issued
    twice or answered twice (``ConversationMemory``'s walk then pairs by order: ``_Run.sliding``
    leaves such traces to ``step``)."""
    info = events_of(t)
    n = len(t.events)
    issued: set[str] = set()
    for ids in info.calls.values():
        for c in ids:
            if c in issued:
                return None
            issued.add(c)
    result: dict[str, int] = {}
    for r, c in info.call_id.items():
        if c in result:
            return None
        result[c] = r
    members: list[tuple | None] = [None] * n
    for a, ids in info.calls.items():
        group = (a, *(result.get(c, n) for c in ids))
        for i in group:
            if i < n:
                members[i] = group
    return members


class _Run:
    """One run's planning: the condenser's state, its view and walk, each event's planned state, and the
    plan's entries so far."""

    def __init__(self, policy: V0Condenser, t: Trace) -> None:
        self.policy, self.t = policy, t
        self.info = info = events_of(t)
        self.st = policy.start(t)
        self.ends = t.arrays.view_end.tolist()
        fresh_tokens, fresh_bytes = t.derived("openhands_fresh_sizes", fresh_sizes)
        stop = max(self.ends, default=0)
        # each event's (state, tokens, bytes) as the plan leaves it: what the loop's view holds
        self.cur_s, self.cur_t, self.cur_b = [V] * stop, fresh_tokens[:stop], fresh_bytes[:stop]
        self.calls: list[int] = []
        self.index: list[int] = []
        self.tokens: list[int] = []
        self.states: list[int] = []
        self.summaries: list[tuple[int, int, int]] = []
        self.entries: list[tuple] = []  # the view the condenser is given (``incoming``), kept across calls
        self.sum_at = -1  # where its summary entry is (-1: none)
        self.walk: tuple | None = None  # (pending, answered) of the walk over ``entries[:walked]``
        self.walked = 0
        self.sent: dict[int, int] = {}  # what the walk of the last call's view sent
        self.present: set[int] = set()  # the events with an entry in the last call's view
        self.prev_out: list | None = None  # the last call's view when the condenser made its own
        self.prev_walk: tuple | None = None  # (pending, answered) after the walk over ``prev_out``
        self.stale = False  # ``sent`` and ``present`` are not the last call's (``sliding`` made it)
        self.extras: list[int] = []  # what ``reinserted`` sent besides
        self.seen = 0  # the events [0, seen) are in ``entries`` (or were forgotten)
        self.units = info.units
        self.vector: tuple | None = None  # ``tail_entries``' entries: (call, index, tokens, state) arrays
        self.deferred: tuple | None = None  # what ``tail_at_once`` leaves to ``tail_entries``
        self.sizes = t.derived("openhands_sizes", event_sizes)  # what ``want_of`` sizes a sent event by

    def plan(self) -> Plan:
        if self.vector is None:
            return Plan(self.calls, self.index, self.tokens, self.states, tuple(self.summaries))
        cols = [np.concatenate([np.asarray(a, dtype=np.int64), b]) for a, b in zip(
            (self.calls, self.index, self.tokens, self.states), self.vector, strict=True
        )]  # fmt: skip
        order = np.lexsort((cols[1], cols[0]))  # by call, then index
        return Plan(*(c[order] for c in cols), tuple(self.summaries))

    def decide(self, k: int, i: int, times: int, present: bool) -> None:
        """Event i at call k: sent ``times`` times, in the view or not (``want_of``); an entry when that
        is not what it is."""
        st = self.st
        if i != st.carrier:  # the two commonest answers of ``want_of``, without the call: as it is
            s = self.cur_s[i]
            if times == 1:
                if s == V and self.cur_t[i] == self.sizes[0][i] and self.cur_b[i] == self.sizes[1][i]:
                    return
            elif not times and not present and s == DROPPED and i not in st.summarized:
                return
        want = want_of(
            self.t, self.info, self.cur_s[i], i, times, NO_PH, (i,) if present else (), st.summarized,
            st.carrier, st.summary or (0, 0),
        )  # fmt: skip
        if want is None:
            return
        s, tok, nb = want
        if self.cur_s[i] == s and self.cur_t[i] == tok and self.cur_b[i] == nb:
            return
        self.cur_s[i], self.cur_t[i], self.cur_b[i] = s, tok, nb
        self.calls.append(k)
        self.index.append(i)
        self.tokens.append(tok)
        self.states.append(int(s))

    def step(self, k: int, n: int) -> None:
        """Call k (view end n) as ``before_call`` decides it, from the last call's view (see the module's
        docstring). The events [seen, n) are new, however many calls ago the last step was."""
        info, st, units, policy, t = self.info, self.st, self.units, self.policy, self.t
        seen = self.seen
        new = [i for i in range(seen, n) if units[i]] if n > seen else []
        entries = self.entries
        if n > seen:
            entries += info.flat[info.start[seen] : info.start[n]]
            self.seen = n
            at = min(st.summary_pos, len(entries) - 1)
            if 0 <= self.sum_at < at:  # the summary goes at its position once the view is long enough
                entries.insert(at, entries.pop(self.sum_at))
                self.sum_at, self.walk = at, None
        made: list = []
        gone: list[int] = []
        for _ in range(SETTLE_ROUNDS):
            res = policy.condense(t, info, st, entries, False)
            if isinstance(res, list):
                break
            entries, forgotten = policy.forget(t, info, st, entries, res[0], res[1], False, made)
            self.entries = entries
            gone += forgotten
            self.walk = None
            if st.summary is not None:
                self.sum_at = min(st.summary_pos, len(entries) - 1)
        else:
            raise Insufficient("the condenser did not settle")
        for c in made:
            self.summaries.append((k, c.input_tokens, c.output_tokens))
        walk = self.walk
        if res is entries and walk is not None:
            # the view it was given, grown: the walk goes on over the new entries only
            inc: dict[int, int] = {}
            walk_on(info, entries[self.walked :], walk[0], walk[1], inc)
            self.walked = len(entries)
            sent, present = self.sent, self.present
            for i, c in inc.items():
                sent[i] = sent.get(i, 0) + c
            present.update(new)
            cand = set(new)
            cand.update(inc)
        else:
            # a view of its own (or a condensation): walked whole, then compared with the last call's
            prev = self.prev_out
            if prev is not None and len(res) >= len(prev) and res[: len(prev)] == prev:
                # (it only grew: RecentEvents' view while head and tail overlap) the walk goes on
                pending, answered = self.prev_walk  # type: ignore[misc]
                sent = dict(self.sent)
                walk_on(info, res[len(prev) :], pending, answered, sent)
            else:
                pending, answered, sent = {}, {}, {}
                walk_on(info, res, pending, answered, sent)
            self.prev_out, self.prev_walk = (None, None) if res is entries else (res, (pending, answered))
            self.walk, self.walked = ((pending, answered), len(entries)) if res is entries else (None, 0)
            present = event_ids(res)[0]
            cand = present ^ self.present
            cand.update(i for i, _ in sent.items() ^ self.sent.items())
            cand.update(new)
            cand.update(gone)
            if gone and st.carrier >= 0:
                cand.add(st.carrier)  # its summary resized
            if self.stale:
                cand.update(range(n))
                self.stale = False
            self.sent, self.present = sent, present
        system, first_user = info.system, info.first_user
        again = reinserted(info, system >= 0 and system in present, res[:2])
        cand.update(self.extras)
        cand.update(again)
        self.extras = again
        decide = self.decide
        for i in sorted(cand):
            if 0 <= i < n and units[i]:
                times = sent.get(i, 0)
                if again and (i == system or i == first_user):
                    times += again.count(i)
                decide(k, i, times, i in present)

    def rolling(self) -> None:
        """Every call of a rolling condenser: ``step`` at the calls it cannot skip (module docstring)."""
        ends = self.ends
        view_units, upcoming, last_issue = self.t.derived("openhands_quiet", quiet_table)
        idle, start, st = self.policy.idle_size, self.info.start, self.st
        k, count = 0, len(ends)
        while k < count:
            walk = self.walk
            if (
                walk is not None
                and not walk[0]
                and len(self.entries) >= 2
                and not 0 <= self.sum_at < st.summary_pos
                and all(last_issue.get(c, -1) < self.seen for c in walk[1])
            ):
                # the view at call j holds len(entries) + units[j] - start[seen] entries
                j = bisect_right(view_units, idle - len(self.entries) + start[self.seen], k)
                j = min(upcoming[k], j)
                if j > k:
                    k = j
                    continue
            self.step(k, ends[k])
            k += 1

    def quiet(self, k: int, keep_first: int, upcoming: list[int], last_issue: dict) -> bool:
        """``sliding``'s skip while the tail holds every entry (the view is the head, then every event):
        call k changes nothing when the last step's view was that one (its head whole) and its walk
        has nothing pending and nothing waiting that a later action could take, and the whole history's
        walk completes every action of call k (``quiet_table``): the view only grows by entries the
        walk sends as they come, as in ``rolling``. The next step walks the entries skipped."""
        prev, walk = self.prev_out, self.prev_walk
        return (
            upcoming[k] > k
            and prev is not None
            and walk is not None
            and len(prev) >= 2
            and self.info.start[self.seen] >= keep_first
            and len(prev) == keep_first + self.info.start[self.seen]
            and not walk[0]
            and all(last_issue.get(c, -1) < self.seen for c in walk[1])
        )

    def sliding(self, keep_first: int, max_events: int) -> None:
        """Every call of ``RecentEventsCondenser``: ``step`` until the head and the tail are apart, then
        (on a trace ``groups_of`` reads) only the events that left or entered the tail, and their groups
        (module docstring)."""
        info, units, flat, start = self.info, self.units, self.info.flat, self.info.start
        members = self.t.derived("openhands_groups", groups_of)
        system, first_user, mute = info.system, info.first_user, info.mute
        decide = self.decide
        view_units, upcoming, last_issue = self.t.derived("openhands_quiet", quiet_table)
        head: set[int] | None = None
        low = -1  # the tail's first event at the last call (-1: that call was a step)
        ends, k = self.ends, 0
        while k < len(ends):
            n = ends[k]
            size = start[n]
            h = min(keep_first, size)
            cut = size - (max_events - h)  # the tail's first entry
            if members is None or max_events <= h or cut < h or (h and flat[cut][1] <= flat[h - 1][1]):
                if cut <= 0 and h == keep_first and self.quiet(k, keep_first, upcoming, last_issue):
                    # so until a busy call, or one whose tail no longer holds every entry
                    k = max(k + 1, min(upcoming[k], bisect_right(view_units, max_events - keep_first, k)))
                    continue
                self.step(k, n)
                k += 1
                continue
            if head is None:
                head = {x[1] for x in flat[:h]}
            first = flat[cut][1]  # the tail: events [first, n)
            if low < 0:
                seen = self.seen  # (``entries`` stays as the last step left it)
            cand = {i for i in range(seen, n) if units[i]}
            if low < 0:  # after a step: what it left
                cand |= self.present
                cand.update(self.sent)
                self.stale = True
            else:
                cand.update(range(low, first))
            for i in list(cand):
                if i < len(members) and members[i] is not None:
                    cand.update(members[i])  # type: ignore[arg-type]
            seen, low = n, first
            has_system = system >= 0 and (system in head or first <= system < n)
            again = reinserted(info, has_system, (flat[:h] + flat[cut : min(cut + 2, size)])[:2])
            cand.update(self.extras)
            cand.update(again)
            self.extras = again
            for i in sorted(cand):
                if not (0 <= i < n and units[i]):
                    continue
                times, present = _sent_times(i, head, first, n, members, mute, again, system, first_user)
                decide(k, i, times, present)
            if k + 1 < len(self.ends) and self.tail_at_once(k, h, max_events - h, head, members):
                return
            k += 1

    def tail_at_once(self, k0: int, h: int, tail: int, head: set[int], members: list) -> bool:
        """``sliding``'s calls after call k0 (head and tail apart there) at once, when they stay apart
        (else False, nothing done): the events outside the head are left to ``tail_entries``
        (``deferred``: the events, their groups' bounds and sizes, the calls' view ends and tail starts);
        the head, the system prompt and the first user message (re-sent as ``reinserted`` says) and their
        groups go call by call as in ``sliding``, at the calls where what they read changes."""
        table = self.t.derived("openhands_tail_table", tail_table)
        if table is None:
            return False
        flat_event, units_np, lo, hi, sized, message, start_np, monotone = table
        start = self.info.start
        ends = self.t.arrays.view_end
        count = len(ends)
        cuts = start_np[ends[k0:]] - tail
        if not monotone or (cuts < h).any():
            return False
        firsts = flat_event[cuts]  # each call's tail: events [firsts, ends) (non-decreasing, as the ends)
        if h and (firsts <= flat_event[h - 1]).any():
            return False
        info, flat, units, mute = self.info, self.info.flat, self.units, self.info.mute
        system, first_user = info.system, info.first_user
        special = set(head) | {i for i in (system, first_user) if i >= 0}
        for i in list(special):
            if i < len(members) and members[i] is not None:
                special.update(x for x in members[i] if x < len(members))
        keep = units_np > 0
        keep[list(special)] = False
        ev = np.flatnonzero(keep[firsts[0] : ends[-1]]) + firsts[0]
        self.deferred = (ev, lo[ev], hi[ev], sized[ev], ends, firsts, k0, count)  # (``tail_entries``)
        # the head, the system prompt, the first user message and their groups: call by call
        # (only at the calls where what they read changes: whether each of them and of their groups' events
        # is in view and in the tail, and what ``reinserted`` reads of the view's first two entries)
        sizes = start_np[ends[k0 + 1 :]]
        around = sorted({x for i in special for x in (members[i] or (i,)) if x < len(members)} | special)
        cols = [ends[k0 + 1 :, None] > around, firsts[1:, None] <= around]
        for j in range(h, 2):  # the view's entries 0 and 1 come from the tail: its first two
            at = cuts[1:] + (j - h)
            e = flat_event[np.minimum(at, len(flat_event) - 1)]
            inside = at < sizes
            cols.append(np.stack([inside, inside & (e == system), inside & message[e]], axis=1))
        signature = np.concatenate(cols, axis=1)
        moved = np.flatnonzero((signature[1:] != signature[:-1]).any(axis=1)) + k0 + 2
        decide, last = self.decide, {}
        for k in [k0 + 1, *moved.tolist()]:
            n = int(ends[k])
            cut = int(cuts[k - k0])
            first = flat[cut][1]
            has_system = system >= 0 and (system in head or first <= system < n)
            again = reinserted(info, has_system, (flat[:h] + flat[cut : min(cut + 2, start[n])])[:2])
            for i in sorted(special):
                if not (0 <= i < n and units[i]):
                    continue
                times, present = _sent_times(i, head, first, n, members, mute, again, system, first_user)
                if last.get(i) != (times, present):
                    last[i] = (times, present)
                    decide(k, i, times, present)
        return True


def tail_table(t: Trace):
    """What ``_Run.tail_at_once`` reads of a trace, the same for every setting: each entry's event, each
    event's units, its group's first and last event (itself for a message; the trace's length for a
    call never answered) and its recorded tokens; None for a trace ``groups_of`` does not read (or
    whose events' sizes are not as admitted)."""
    members = t.derived("openhands_groups", groups_of)
    sizes, fresh = t.derived("openhands_sizes", event_sizes), t.derived("openhands_fresh_sizes", fresh_sizes)
    if members is None or sizes[0] != fresh[0] or sizes[1] != fresh[1]:
        return None
    info = events_of(t)
    n = len(t.events)
    lo, hi = np.arange(n, dtype=np.int64), np.arange(n, dtype=np.int64)
    for i, group in enumerate(members):
        if group is not None:
            lo[i], hi[i] = min(group), max(group)
    flat_event = np.array([x[1] for x in info.flat], dtype=np.int64)
    units, message = np.array(info.units, dtype=np.int64), np.array(info.message, dtype=bool)
    start = np.array(info.start, dtype=np.int64)
    monotone = bool((np.diff(t.arrays.view_end) >= 0).all())
    return flat_event, units, lo, hi, np.array(sizes[0], dtype=np.int64), message, start, monotone


def sdk_view_plan(t: Trace) -> Plan:
    """The SDK's view properties at every call of a run no condensation changed
    (``openhands_hard_context_reset``'s ``before_call``: ``enforce`` and ``sdk_changes``, whose resets
    come only on a rejection, which the loop replays). On a trace ``groups_of`` reads, an action and
    its results are left out of the view (DROPPED) from the call each enters until the call whose view
    holds the result of every call of the action (then verbatim: back as recorded), for good when one
    is never answered; a trace reusing call ids is declined. Held to ``before_call`` by
    tests/test_plans_openhands.py."""
    members = t.derived("openhands_groups", groups_of)
    if members is None:
        return DECLINED
    ends = t.arrays.view_end.tolist()
    count, last = len(ends), len(t.events)
    if any(b < a for a, b in zip(ends, ends[1:], strict=False)):
        return DECLINED
    rows = []
    for a, group in enumerate(members):
        if group is None or group[0] != a:
            continue  # (each group once, from its action)
        whole = bisect_right(ends, max(group)) if last not in group else count
        for m in group:
            if m == last:
                continue
            enter = bisect_right(ends, m)
            if enter < whole:
                rows.append((enter, m, 0, DROPPED))
                if whole < count:
                    e = t.events[m]
                    rows.append((whole, m, e.tokens, V))
    rows.sort()
    return Plan([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], [r[3] for r in rows])


def _sent_times(i, head, first, n, members, mute, again, system, first_user) -> tuple[int, bool]:
    """(how often event i is sent, whether it is in the condensed view) when the view is the ``head``
    and the events [first, n): a grouped action and its observations only when all of them are in,
    a muted event never, the system prompt or first user message once more per re-insertion
    (``again``: ``reinserted``'s)."""
    if i in head or first <= i < n:
        group = members[i]
        if group is None:
            times = 0 if mute[i] else 1
        else:
            times = int(all(x in head or first <= x < n for x in group))
        present = True
    else:
        times, present = 0, False
    if again and (i == system or i == first_user):
        times += again.count(i)
    return times, present
