"""The seed engine's view of a trace and of one run: what ``sim.policies.seed_engine.SeedEngine`` reads of
the events once per trace (``SeedEvents``: JSON sizes, each run's protected block, tool call ids, call
times), and the state it keeps over a run's messages (``SeedState``: the engine's
``ContextCompactionState``, budget bookkeeping, a log of every turn's decision). Apart from the policy so
that the fast paths (``sim.engine.fast.seed_static``) can name the state they build.
"""

from __future__ import annotations

from sim.core.types import Trace
from sim.cost.tokens import json2_bytes, json_bytes
from sim.policies.seed_messages import stand_in


class SeedEvents:
    """What the policy reads of a trace, derived once (every setting of a sweep shares it)."""

    __slots__ = ("jb", "escapes", "issuer", "id_json", "elapsed", "ids", "blocks", "inputs")

    def __init__(self, trace: Trace) -> None:
        events = trace.events
        self.jb: list[int] = []
        self.escapes: list[int] = []  # text-free events: newlines of their stand-in
        for e in events:
            if e.content is not None:
                self.jb.append(e.json_bytes if e.json_bytes is not None else json_bytes(e.content))
                self.escapes.append(0)
            elif e.json_bytes is not None:
                self.jb.append(e.json_bytes)
                self.escapes.append(e.json_bytes - e.bytes - 2)
            else:
                k = min(max(e.lines - 1, 0), e.bytes // 2)
                self.jb.append(e.bytes + 2 + k)
                self.escapes.append(k)
        # each run's instruction/input block [first event, first assistant event) and its input (the
        # first user event there), whose text is JSON-stringified twice; one run: the trace's own
        self.blocks: list[tuple[int, int]] = []
        self.inputs: dict[int, int] = {}  # input event -> its json2 bytes
        for start in _run_first_events(trace):
            end = next((e.index for e in events[start:] if e.kind == "assistant"), len(events))
            self.blocks.append((start, end))
            first_user = next((e.index for e in events[start:end] if e.kind == "user"), -1)
            if first_user >= 0:
                e = events[first_user]
                self.inputs[first_user] = (
                    e.json2_bytes
                    if e.json2_bytes is not None
                    else json2_bytes(e.content if e.content is not None else self.stand_in(trace, e.index))
                )
        by_id: dict[str, int] = {}
        self.issuer: dict[int, int] = {}
        self.id_json: dict[int, list[int]] = {}
        for e in events:
            if e.kind == "assistant":
                self.id_json[e.index] = [json_bytes(c) for c in e.tool_call_ids]
                for c in e.tool_call_ids:
                    by_id[c] = e.index
            elif e.kind == "tool_result":
                self.id_json[e.index] = [json_bytes(e.tool_call_id or "")]
                if e.tool_call_id in by_id:
                    self.issuer[e.index] = by_id[e.tool_call_id]
        self.ids = [frozenset(events[c.event_index].tool_call_ids) for c in trace.calls]
        # recorded time of each call since the run started (the engine's rule: earliest stamp = start)
        stamps = [e.timestamp for e in events if e.timestamp is not None]
        stamps += [c.timestamp for c in trace.calls if c.timestamp is not None]
        start = min(stamps) if stamps else None
        self.elapsed: list[float] = []
        last = 0.0
        for c in trace.calls:
            if c.timestamp is not None and start is not None:
                last = c.timestamp - start
            self.elapsed.append(last)

    def stand_in(self, trace: Trace, i: int) -> str:
        return stand_in(trace.events[i].bytes, self.escapes[i])

    def encoded(self, trace: Trace, i: int) -> str:
        """The text a tool result's JSON text is made of (the recorded text, or its stand-in)."""
        e = trace.events[i]
        return e.content if e.content is not None else self.stand_in(trace, i)


def _run_first_events(trace: Trace) -> list[int]:
    """The first event of each run of the conversation (one run: [0])."""
    events = trace.events
    return [0] + [i for i in range(1, len(events)) if events[i].run_index != events[i - 1].run_index]


class SeedState:
    """One run's state: the engine's ``ContextCompactionState`` over messages, budget bookkeeping and
    a log of every turn's decision (``explain`` and the oracle's golden test read it)."""

    def __init__(self, info: SeedEvents) -> None:
        self.info = info
        # source messages (a message index m covers events [first[m], end[m]))
        self.role: list[str] = []
        self.first: list[int] = []
        self.end: list[int] = []
        self.parts: list[list[int] | None] = []  # a tool message's part sizes (source and cleared)
        self.cleared_parts: list[list[int] | None] = []
        self.est: list[int] = []  # estimate of the source message
        self.est_cleared: list[int] = []  # ... rendered with its results cleared (tool messages)
        self.tool_msgs: list[int] = []  # unprotected tool messages, ascending
        # messages [protected_start, protected_end) are the current run's instruction/input block: the
        # events of ``block``; a later run's block replaces it (prior runs' blocks are history then)
        self.protected_start = 0
        self.protected_end = 0
        self.block = info.blocks[0] if info.blocks else (0, 0)
        self.built = 0  # events turned into messages so far
        # ContextCompactionState
        self.cleared_through = 0
        self.summarized_through = 0
        self.summary: int | None = None  # bytes of the summary text
        self.summary_est = 0
        self.last_msgs = -1  # source messages at the last request (lastViewLength); -1: none yet
        self.last_compaction_turn = 0
        self.overflow_retry_turn = 0
        self.view_est = 0  # estimate of the whole view as built now
        self.appended_est = 0  # ... of the messages appended since the last request
        # the view in ctxsim's sizes
        self.carrier = -1  # the event slot holding the summary message
        self.summary_tokens = 0
        # bounds, budgets, status
        self.envelopes: dict[int, tuple[int, int, int]] = {}  # result -> (originalBytes, bytes, shown)
        self.rejected: dict[int, int] = {}  # rejected result -> its JSON bytes
        self.rejecting: tuple[str, int, frozenset[str]] | None = None
        self.warned: set[str] = set()
        self.pending_warnings: list[str] = []  # raised by a summarizer's usage, reported after the call
        self.token_exhausted = False
        self.exhausted: str | None = None
        self.summary_input: int | None = None  # the summarizer's input this turn (last-context)
        self.grace_next = False  # the next turn is the grace turn
        self.log: list[dict] = []

    def event_at(self, m: int, n: int) -> int:
        """First event of message m (n, the events in view, past the last message)."""
        return self.first[m] if m < len(self.first) else n
