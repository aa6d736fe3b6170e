"""Records of the canonical trace and of a replay. Frozen: nothing downstream may rewrite a trace."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import IntEnum

import numpy as np

# 2: a trace may hold several runs of one conversation (``run_index`` on events and calls) and children
# (sub-agent runs, ``Child``). A trace that uses nothing of version 2 is still written as version 1, so
# its bytes and hash stay what they were.
SCHEMA_VERSION = 2
SCHEMA_VERSIONS = (1, 2)  # versions a reader accepts
MAX_CHILD_DEPTH = 4  # a child's child's ... : deeper nesting is refused (bounded cost of any input)
MAX_CHILDREN = 10_000  # children of one trace, all depths together

EVENT_KINDS = ("system", "tools", "user", "assistant", "tool_result")
KIND_CODE = {k: i for i, k in enumerate(EVENT_KINDS)}
TOKEN_PROVENANCES = ("provider", "derived", "tokenizer", "estimate", "synthetic")
# What a fact is (``sim.information.facts`` and ``sim.information.tool_facts`` say which rule gives which
# kind); the extractive
# summarizer ranks by kind (``sim.engine.model``) and the ledger counts facts seen and lost per kind.
FACT_KINDS = ("path", "identifier", "error", "value", "constraint", "goal")
USAGE_PROVENANCES = ("provider", "synthetic", "none")


class ItemState(IntEnum):
    """What a view holds for an event. Codes are stored in per-call tables, so they never change."""

    VERBATIM = 0
    BOUNDED = 1  # head/tail cut at settle time; the rest is gone for good
    MASKED = 2  # placeholder, no handle: lost from view
    DROPPED = 3  # removed from the view entirely
    SUMMARIZED = 4  # covered by a summary (derived representation)
    SPILLED = 5  # moved out of view behind a handle; recoverable
    PAGINATED = 6  # its first page in view with a continuation handle; later pages exactly recoverable


@dataclass(frozen=True, slots=True)
class Event:
    """One entry of the durable store. Sizes are kept beside content so text-free traces still replay."""

    index: int
    kind: str
    content: str | None
    bytes: int  # UTF-8 bytes of content
    chars: int  # characters of content (mini-swe-agent's bounds count characters)
    lines: int  # len(content.splitlines()) (SWE-agent's placeholder counts these)
    tokens: int  # size as input to a later call
    tokens_provenance: str
    tool_call_ids: tuple[str, ...] = ()  # assistant: the tool calls it issued
    tool_call_id: str | None = None  # tool_result: the call it answers
    bounded: bool = False  # the recorded run already cut this content
    timestamp: float | None = None
    provides: tuple[str, ...] = ()  # facts this event brings into the context
    needs: tuple[str, ...] = ()  # facts this action (or the final answer) depends on
    # Kept beside content for text-free traces (None: derive from content, or unknown): UTF-8 bytes of
    # the content as a JSON string, and as a JSON string holding that JSON text (how a run's input is
    # sent). The seed engine's estimate is over serialized messages, so it needs them.
    json_bytes: int | None = None
    json2_bytes: int | None = None
    # Per provided fact (same order as ``provides``; empty: not recorded): where it sits in ``content``,
    # as a UTF-8 byte range [start, end) (None: the whole event), and its kind (FACT_KINDS; None: none).
    # A cut or a page keeps exactly the facts whose range lies inside the bytes it shows.
    fact_spans: tuple[tuple[int, int] | None, ...] = ()
    fact_kinds: tuple[str | None, ...] = ()
    supersedes: tuple[str, ...] = ()  # facts of earlier events this one updates: they become stale
    # The source framework's own type of the event, where its importer knows it (OpenHands V0:
    # ``action:recall``, ``observation:browse``, ...): policies named after that framework find events by
    # type (a browser output, the workspace-context recall) instead of guessing from the text. ``url``: a
    # browser output's page address (OpenHands' placeholder names it).
    source_type: str | None = None
    url: str | None = None
    # Which run of the conversation the event belongs to (0: the first; schema version 2). Runs are
    # consecutive: a run's events follow the previous run's, and its first call is its opening prompt.
    run_index: int = 0


@dataclass(frozen=True, slots=True)
class Call:
    """One model request of the recorded run, with its usage normalised to one meaning.

    ``input_tokens`` counts every input token, cached or not (Gemini and OpenAI already report it so;
    Anthropic's input + cache read + cache write is summed by the importer).
    """

    index: int
    event_index: int  # the assistant event this call produced
    view_end: int  # events [0, view_end) made up the recorded request
    input_tokens: int | None
    output_tokens: int | None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    reasoning_tokens: int | None = None
    residual_tokens: int = 0  # input_tokens - sum of view event tokens; provenance provider-residual
    usage_provenance: str = "provider"
    timestamp: float | None = None
    recorded_cost_usd: float | None = None
    run_index: int = 0  # the run of the conversation this call belongs to (its assistant event's)


@dataclass(frozen=True)
class Trace:
    """A canonical trace: ordered events, the recorded calls, and run metadata."""

    trace_id: str
    source_format: str
    events: tuple[Event, ...]
    calls: tuple[Call, ...]
    agent: str | None = None
    model: str | None = None
    context_window: int | None = None
    bytes_per_token: float | None = None  # calibrated from this trace's provider numbers, if any
    recorded_policy: dict = field(default_factory=dict)
    outcome: dict = field(default_factory=dict)
    source_file: str | None = None
    # Sub-agent runs this run spawned (schema version 2; empty in version 1), in order of parent call.
    children: tuple[Child, ...] = ()
    # What a what-if transform moved where (``sim.transforms``); never written to a canonical file.
    moved: tuple[Moved, ...] = ()
    applied: tuple[str, ...] = ()  # labels of the transforms applied, in order (``Transform.label``)
    _cache: dict = field(default_factory=dict, init=False, repr=False, compare=False, hash=False)

    def derived(self, key: str, build):
        """Memoised data derived from this (immutable) trace, e.g. the indices of its observations."""
        v = self._cache.get(key)
        if v is None:
            v = self._cache[key] = build(self)
        return v

    @property
    def runs(self) -> int:
        """Runs of the conversation this trace holds (1 for a trace of one run); memoised (a trace read
        as columns knows it without its calls)."""
        return self.derived("runs", lambda t: t.calls[-1].run_index + 1 if t.calls else 1)

    @property
    def is_simple(self) -> bool:
        """A trace the fast paths (batch, grid) handle: one run, no children, no transform's moves. A
        conversation of several runs or a composite trace replays through the per-call loop only (the
        engine's reference), never to a guessed answer."""
        return self.runs == 1 and not self.composite

    @property
    def run_starts(self) -> tuple[int, ...]:
        """Per run, the index of its first call (its opening prompt); runs are consecutive."""
        starts = self._cache.get("run_starts")
        if starts is None:
            starts = self._cache["run_starts"] = tuple(
                k for k, c in enumerate(self.calls) if k == 0 or c.run_index != self.calls[k - 1].run_index
            )
        return starts

    @property
    def composite(self) -> bool:
        """Holds children or a what-if transform's declarations: the fast paths (batch, grid) decline
        such a trace and the per-call loop replays it."""
        return bool(self.children or self.moved)

    @property
    def arrays(self) -> TraceArrays:
        a = self._cache.get("arrays")
        if a is None:
            a = self._cache["arrays"] = TraceArrays.build(self)
        return a


@dataclass(frozen=True)
class Child:
    """A sub-agent run: its own events, calls and usage, spawned by call ``parent_call`` of its parent.
    The parent's view holds only the child's report (the tool result answering ``tool_call_id``, when
    the source names it); the child's spend is accounted into the parent's totals on replay."""

    parent_call: int
    trace: Trace
    tool_call_id: str | None = None


@dataclass(frozen=True)
class Moved:
    """One what-if transform's declaration of what it moved where: recorded calls ``[first, end)`` of
    the source trace became call ``call`` of the transformed one (a delegation, a brokered program),
    ``child`` the child that holds them now (None: they stayed in the parent). ``tokens_moved``: their
    events' tokens the parent no longer holds; ``tokens_after``: what it holds instead (the report, the
    brokered result); ``facts_lost``: facts those events provided that no longer reach the parent."""

    transform: str
    first: int
    end: int
    call: int
    child: int | None
    tokens_moved: int
    tokens_after: int
    facts_kept: tuple[str, ...] = ()
    facts_lost: tuple[str, ...] = ()
    fact_kinds_lost: tuple[str | None, ...] = ()


@dataclass(frozen=True)
class TraceArrays:
    """Column view of a trace for the engine's hot loop; arrays are read-only."""

    kind: np.ndarray
    tokens: np.ndarray
    bytes: np.ndarray
    chars: np.ndarray
    lines: np.ndarray
    bounded: np.ndarray
    view_end: np.ndarray
    residual: np.ndarray
    output_tokens: np.ndarray  # -1 where not recorded
    recorded_input: np.ndarray  # -1 where not recorded
    prefix: np.ndarray  # prefix[i] = sum of tokens of events [0, i)
    recorded_view: np.ndarray  # per call: sum of tokens of its recorded view
    call_index: np.ndarray  # 0 .. calls-1
    no_first: np.ndarray  # per call -1: "no item changed" (shared by records, read-only)
    no_changes: np.ndarray  # per call 0

    @classmethod
    def build(cls, t: Trace) -> TraceArrays:
        def arr(values, dtype):
            a = np.asarray(values, dtype=dtype)
            a.setflags(write=False)
            return a

        ev, calls = t.events, t.calls
        tokens = np.asarray([e.tokens for e in ev], dtype=np.int64)
        prefix = np.zeros(len(ev) + 1, dtype=np.int64)
        np.cumsum(tokens, out=prefix[1:])
        view_end = np.asarray([c.view_end for c in calls], dtype=np.int64)
        return cls(
            kind=arr([KIND_CODE[e.kind] for e in ev], np.int8),
            tokens=arr([e.tokens for e in ev], np.int64),
            bytes=arr([e.bytes for e in ev], np.int64),
            chars=arr([e.chars for e in ev], np.int64),
            lines=arr([e.lines for e in ev], np.int64),
            bounded=arr([e.bounded for e in ev], np.bool_),
            view_end=arr([c.view_end for c in calls], np.int64),
            residual=arr([c.residual_tokens for c in calls], np.int64),
            output_tokens=arr([-1 if c.output_tokens is None else c.output_tokens for c in calls], np.int64),
            recorded_input=arr([-1 if c.input_tokens is None else c.input_tokens for c in calls], np.int64),
            prefix=arr(prefix, np.int64),
            recorded_view=arr(prefix[view_end], np.int64),
            call_index=arr(np.arange(len(calls)), np.int64),
            no_first=arr(np.full(len(calls), -1), np.int64),
            no_changes=arr(np.zeros(len(calls)), np.int64),
        )


def filler(cls, names: tuple[str, ...]):
    """``make(*values)``: the instance of the frozen dataclass ``cls`` (``Trace``, ``TraceArrays``: no
    ``__post_init__``) whose fields are ``values``, the object its constructor makes, filled at once (the
    constructor sets each field through ``object.__setattr__``, and a corpus read as columns makes two
    objects per record). ``names`` are every field in field order, checked here once, not per call."""
    from dataclasses import fields

    assert not hasattr(cls, "__post_init__")
    every = tuple(f.name for f in fields(cls))
    if tuple(names) != every:
        raise TypeError(f"{cls.__name__}: fields {list(every)} expected, in order; got {list(names)}")
    new = object.__new__

    def make(*values):
        obj = new(cls)
        obj.__dict__.update(zip(names, values, strict=True))
        return obj

    return make


class Lazy:
    """What a trace read as columns holds in place of its events (and calls) until one is asked for
    (``sim.trace.columns``): the fast paths read the columns (``arrays`` and the ``derived`` values they
    ask for are filled at load), so a corpus streams without an ``Event`` per event; ``build`` makes the
    very objects the record-by-record reader would (tested equal)."""

    __slots__ = ("build",)

    def __init__(self, build) -> None:
        self.build = build  # () -> tuple[Event, ...] (or tuple[Call, ...])

    def __reduce__(self):  # a worker (spawn, Ray) gets the objects themselves
        return tuple, (self.build(),)


def _lazy_field(name: str, doc: str) -> property:
    def get(self: Trace):
        v = self.__dict__[name]
        if type(v) is Lazy:
            v = self.__dict__[name] = v.build()
        return v

    def put(self: Trace, value) -> None:
        self.__dict__[name] = value

    return property(get, put, doc=doc)


# ``events`` and ``calls`` stay dataclass fields (constructor, ``replace``, ``fields``, equality, repr);
# reading one through these properties builds a column-read trace's objects on first use
Trace.events = _lazy_field("events", "The trace's events, in order (built on first use).")
Trace.calls = _lazy_field("calls", "The recorded calls, in order (built on first use).")


def policy_json(params: dict) -> str:
    """Stable JSON for nested metadata kept as strings in tables (Arrow-friendly)."""
    return json.dumps(params, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
