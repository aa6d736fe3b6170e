"""The policy interface and its registry.

A policy decides, before each call, how the view is built from the durable store. It never does I/O and
never mutates the trace or the view: it returns ``Change`` decisions and the engine applies them.
Per-run bookkeeping (e.g. a boundary that only moves forward) lives in the object ``start`` returns,
owned by that run; the policy object itself is an immutable bundle of knobs.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar, NamedTuple

import numpy as np

from sim.core.segments import offsets, owners, positions
from sim.core.types import ItemState, Trace
from sim.util.errors import ConfigError, UnknownNameError


class Change(NamedTuple):
    """One decision: event ``index`` is now in ``state`` and weighs ``tokens`` (``nbytes`` of text).
    ``kept``: for a cut (BOUNDED) or a first page (PAGINATED), the byte ranges [start, end) of the
    original content the view still shows; the facts inside them stay readable, the others do not.
    None: the head of ``nbytes`` bytes."""

    index: int
    state: ItemState
    tokens: int
    nbytes: int
    reason: str
    kept: tuple[tuple[int, int], ...] | None = None


class Plan(NamedTuple):
    """Every pre-call decision of a run at once. Entry j: before call ``call[j]``, event ``index[j]``
    becomes ``state[j]`` weighing ``tokens[j]``. ``call`` is non-decreasing, within one call the
    entries ascend by index (the first is that call's cache seam), and each index appears once per call
    (a later call may change an item again). Must equal what ``before_call`` decides call by call; the
    conformance checker compares the records the two give (``sim.checks.conformance.check_policy``).
    Fields are integer sequences: lists, or numpy arrays for plans computed in array steps.

    A plan may read the recorded sizes (a token trigger, a summary's size) as well as the structure:
    the sizes the run will have are the recorded ones unless the mock model re-reads something, which
    only a run with needs does; such a planner declines those runs. ``summaries``: the metered
    summarizer calls, (call, input tokens, output tokens) in the order made (several before one call:
    each its own row, as ``Decision.summary`` as a list). ``declined``: the planner cannot say what
    this run does (a ``Decision.stop``, a run whose sizes may change): the per-call loop replays it.
    ``unpaired``: a ``splits_pairs`` policy's requests of the run that split a tool call from its
    result, as its ``unpaired_requests`` counts them (the batch path's record carries it)."""

    call: Sequence[int]
    index: Sequence[int]
    tokens: Sequence[int]
    state: Sequence[int]
    summaries: Sequence[tuple[int, int, int]] = ()
    declined: bool = False
    unpaired: int = 0  # a ``splits_pairs`` policy: its requests that split a pair (``unpaired_requests``)


class Plans:
    """The plans of many runs laid end to end, as ``plan_many`` returns them: entry arrays (call and
    index numbered within each entry's run) and each run's number of entries. ``plans[j]`` is run j's
    ``Plan``. The engine's fast path reads the arrays whole instead of one plan per run."""

    __slots__ = ("_call", "index", "tokens", "state", "counts", "call_counts", "_local", "_bounds", "_whole")
    __slots__ += ("ascending", "one_state", "summaries", "declined", "unpaired")

    def __init__(
        self, call: np.ndarray, index: np.ndarray, tokens: np.ndarray, state: np.ndarray, counts: np.ndarray
    ) -> None:
        self._call, self.index, self.tokens, self.state = call, index, tokens, state
        self.counts = counts
        # entries of each call, every run's calls laid end to end, when the planner knows them (the batch
        # path then counts nothing, and builds no call array); None: unknown
        self.call_counts: np.ndarray | None = None
        self._local: np.ndarray | None = None
        self._bounds: list[int] | None = None
        self._whole: tuple | None = None  # laid_out of every run: (offsets it was given, entries)
        # what the planner promises of its entries, so the batch path need not check (a pass each):
        # every entry changes another item, in ascending index within its run; every entry's state
        self.ascending = False
        self.one_state: int | None = None
        # per run: its metered summarizer calls, ``Plan.summaries`` (None: no run makes one)
        self.summaries: list[tuple[tuple[int, int, int], ...]] | None = None
        # per run: the planner declined it (``Plan.declined``; None: none declined)
        self.declined: np.ndarray | None = None
        # per run: its requests that split a pair (``Plan.unpaired``; None: none does)
        self.unpaired: np.ndarray | None = None

    @classmethod
    def by_call(
        cls, call_counts: np.ndarray, local_call: np.ndarray, index, tokens, state, counts: np.ndarray
    ) -> Plans:
        """Plans whose entries are given per call: ``call_counts[k]`` entries before call k of the runs'
        calls laid end to end, ``local_call[k]`` its number in its run (the call array is made only when
        read)."""
        plans = cls(None, index, tokens, state, counts)  # type: ignore[arg-type]
        plans.call_counts, plans._local = call_counts, local_call
        return plans

    @property
    def call(self) -> np.ndarray:
        """Each entry's call, numbered within its run."""
        if self._call is None:
            self._call = np.repeat(self._local, self.call_counts)
        return self._call

    @classmethod
    def of(cls, plans: Sequence[Plan]) -> Plans:
        """Plans of runs from one ``Plan`` each."""
        cols = [
            np.concatenate([np.asarray(p[f], dtype=np.int64) for p in plans])
            if plans
            else np.zeros(0, dtype=np.int64)
            for f in range(4)
        ]
        out = cls(*cols, np.array([len(p.index) for p in plans], dtype=np.int64))
        if any(len(p) > 4 and p.summaries for p in plans):
            out.summaries = [tuple(map(tuple, p.summaries)) if len(p) > 4 else () for p in plans]
        if any(len(p) > 5 and p.declined for p in plans):
            out.declined = np.array([len(p) > 5 and bool(p.declined) for p in plans], dtype=bool)
        if any(len(p) > 6 and p.unpaired for p in plans):
            out.unpaired = np.array([int(p.unpaired) if len(p) > 6 else 0 for p in plans], dtype=np.int64)
        return out

    def __len__(self) -> int:
        return len(self.counts)

    def laid_out(self, pos: list[int] | None, call_off: np.ndarray, item_off: np.ndarray):
        """The entries of runs ``pos`` (None: every run, in order), those runs laid end to end in that
        order, with each run's calls and indices moved by its offsets: (call, index, tokens, state)
        arrays, or None when they plan nothing. The result for every run in order is kept: the engine
        asks for it twice a batch."""
        whole = pos is None or (len(pos) == len(self) and pos == list(range(len(pos))))
        if whole and self._whole is not None and self._whole[0] is call_off:
            return self._whole[1]
        counts = self.counts if whole else self.counts[pos]
        entries = None
        if counts.any():
            arrays = (self.call, self.index, self.tokens, self.state)
            if not whole:  # a subset of the runs
                take = np.repeat(offsets(self.counts)[pos], counts) + positions(counts)
                arrays = tuple(a[take] for a in arrays)
            run = owners(counts)
            entries = (arrays[0] + call_off[run], arrays[1] + item_off[run], arrays[2], arrays[3])
        if whole:
            self._whole = (call_off, entries)
        return entries

    def __iter__(self) -> Iterator[Plan]:
        return (self[j] for j in range(len(self)))

    def __getitem__(self, j: int) -> Plan:
        if not 0 <= j < len(self.counts):
            raise IndexError(f"run {j} of {len(self.counts)}")
        if self._bounds is None:
            self._bounds = [0, *np.cumsum(self.counts).tolist()]
        lo, hi = self._bounds[j], self._bounds[j + 1]
        summaries = () if self.summaries is None else self.summaries[j]
        declined = self.declined is not None and bool(self.declined[j])
        unpaired = 0 if self.unpaired is None else int(self.unpaired[j])
        return Plan(
            self.call[lo:hi], self.index[lo:hi], self.tokens[lo:hi], self.state[lo:hi], summaries, declined,
            unpaired,
        )  # fmt: skip


class SummaryCall(NamedTuple):
    """A metered summarizer call the policy makes before a request (its own row in the calls table).
    ``sees``: what the summarizer's input holds of each item it summarizes, as byte ranges of the
    item's recorded content (a framework that feeds the summarizer its stored messages shows a cleared
    result's original text), an item absent from it: nothing; None (the default): each item as the
    view shows it. The facts a summary covers, and so can keep, are those inside (``_Run.covered``)."""

    input_tokens: int
    output_tokens: int
    sees: Mapping[int, tuple[tuple[int, int], ...]] | None = None


class Decision(NamedTuple):
    """What ``before_call`` / ``on_overflow`` may return when a plain list of changes is not enough.
    ``summary``: one metered summarizer call, or a list of them (a framework that summarizes again when
    one pass was not enough). ``stop``: a finish reason that ends the run before this call is sent (a
    framework's compaction failure, e.g. ``compaction-insufficient``); its summaries are still metered.
    ``forgets_summary``: the previous summary is replaced by text that holds nothing (no summary call):
    the facts it kept are lost."""

    changes: Sequence[Change] = ()
    summary: SummaryCall | list[SummaryCall] | None = None
    stop: str | None = None
    forgets_summary: bool = False


class AfterCall(NamedTuple):
    """A policy's verdict after a call's usage is accounted: budget warnings, and whether to stop."""

    warnings: tuple[str, ...] = ()  # dimensions that crossed their warning level at this call
    stop: str | None = None  # finish reason, e.g. "budget-exhausted:turns"
    grace: bool = False  # one final call with tools forbidden before stopping


class View:
    """What the next request holds: events [0, n) with their current sizes, text bytes and states.

    Engine-owned; policies read it. Plain lists for speed; entries at and beyond ``n`` are not in view.
    """

    __slots__ = ("n", "tokens", "nbytes", "state", "total", "facts", "policy_state")

    def __init__(self) -> None:
        self.facts = None  # the engine's sim.information.state.FactState, for observers (explain)
        self.policy_state = None  # what the policy's ``start`` returned, for observers (explain)
        self.n = 0
        self.tokens: list[int] = []
        self.nbytes: list[int] = []
        self.state: list[int] = []
        self.total = 0


class RunStatus:
    """Counters of the run so far, kept by the engine (policies read them for triggers and budgets)."""

    __slots__ = (
        "turns", "tool_calls", "tokens", "last_input", "last_output", "elapsed_s", "cost_microusd", "window",
    )  # fmt: skip

    def __init__(self) -> None:
        self.turns = 0  # agent calls answered
        self.tool_calls = 0  # tool calls those answers issued
        self.tokens = 0  # cumulative input + output over every call, summaries included
        self.last_input: int | None = None  # input tokens of the last agent call, as the provider counted
        self.last_output: int | None = None  # its output tokens
        self.elapsed_s = 0.0  # recorded time since the run started
        self.cost_microusd = 0  # modelled cost so far (0 while the model has no price)
        self.window: int | None = None  # the provider's context window of this replay (None: no limit)


class Policy:
    """Base of every policy. Subclasses are frozen dataclasses whose fields are the knobs."""

    name: ClassVar[str] = ""
    settles: ClassVar[bool] = False  # has a settle-time transform
    acts_before_call: ClassVar[bool] = False  # has a pre-call transform
    plans: ClassVar[bool] = False  # offers ``plan`` (vectorised pre-call decisions)
    # its plan holds whatever settle-time changes another policy made first (its decisions read event
    # positions, never item states or sizes): a ``pipeline`` step after settle-time steps keeps the plan
    plans_after_settle: ClassVar[bool] = False
    # knob settings the conformance checker replays besides the defaults (tests/test_conformance.py)
    conformance_settings: ClassVar[tuple[dict, ...]] = ()
    # knobs renamed to the library's own argument names: old name -> (new name, old value -> new value).
    # ``make_policy`` still takes the old name, translates it and warns once per use (KnobDeprecation)
    knob_aliases: ClassVar[dict[str, tuple[str, dict]]] = {}
    # ``ctxsim size --policy``'s default grid (docs/sizing.md): one or two numeric knobs, each with the values
    # tried (empty: the policy is not sized); ``size_off``: the knob values that switch the policy off, the
    # baseline it is compared with (None: it has no off, ``raw`` stands in); ``size_trigger``: it acts only
    # once a run grows past a threshold of its context (tokens, messages, events, turns), so a gentle enough
    # setting never changes a run; ``size_harsher``: grid knobs whose larger values act more (the others act
    # less as they grow): the gentlest setting is the one that acts least
    size_grid: ClassVar[dict[str, tuple]] = {}
    size_off: ClassVar[dict | None] = None
    size_trigger: ClassVar[bool] = True
    size_harsher: ClassVar[frozenset[str]] = frozenset()
    recovers: ClassVar[bool] = False  # offers ``on_overflow`` (compaction after a context-length rejection)
    overflow_retries: ClassVar[int] = 1  # rejections of one request ``on_overflow`` may answer in a row
    checks_after_call: ClassVar[bool] = False  # offers ``after_call`` (budgets)
    reports_status: ClassVar[bool] = False  # appends a run-status line to each request
    spills: ClassVar[bool] = False  # may move items out of view behind a handle (settle or pre-call)
    # may send a tool call without its result or the reverse (a framework that pops single messages);
    # such a policy counts those requests (``unpaired_requests``) and brings dropped items back
    splits_pairs: ClassVar[bool] = False

    def start(self, trace: Trace) -> Any:
        """Fresh per-run state."""
        return None

    # A conversation of several runs (``Trace.runs``). Most frameworks keep their compaction in the
    # conversation itself (a summary message, cleared results, a condensation event), so it carries into
    # the next run: the default. A policy whose compaction lives in per-run state says False (the seed
    # engine without its durable compaction record, ``persist_compaction=false``); the engine then puts
    # every item back as it settled before the new run opens.
    @property
    def persists_compaction(self) -> bool:
        return True

    def start_run(self, trace: Trace, state: Any, run: int, view: View, persisted: bool) -> Any:
        """At the first call of run ``run`` (>= 1), before its events are admitted: the state the run
        goes on with. ``persisted``: the view kept its compaction (else every item is back as it
        settled). Default: the state carries over."""
        return state

    def settle(self, trace: Trace, state: Any, index: int, view: View) -> Change | None:
        """Once, as event ``index`` enters the store and the view (tool-result bounds)."""
        return None

    def reread_bound(self, trace: Trace, index: int) -> Change | None:
        """What a re-read of tool result ``index`` shows when the agent re-runs its call (a refetch): the
        same bound the result passed when it entered history, as a Change whose ``kept`` ranges are the
        bytes shown (a head/tail cut, an envelope, a first page), or None: it comes back whole (the
        default). A policy whose settle rule bounds tool results answers with the very function its
        settle uses (one rule in one place); it must not depend on run state."""
        return None

    def settle_all(self, trace: Trace) -> list[Change] | None:
        """All settle-time changes of a run at once (ascending index), or None to be asked per event.
        Only for settle transforms that look at the event alone, never at the view."""
        return None

    def settle_key(self) -> str | None:
        """What a run's settle-time changes depend on besides its trace, as text: replays whose policies
        give the same key share them (the batch path keeps them per batch, so a sweep of a later step's
        knobs settles once). None (the default): not shared, settled on every replay."""
        return None

    def before_call(
        self, trace: Trace, state: Any, view: View, call: int, status: RunStatus
    ) -> Sequence[Change] | Decision:
        """Before call ``call``: decisions on items already in view (and at most one summary call)."""
        return ()

    def on_overflow(
        self, trace: Trace, state: Any, view: View, call: int, status: RunStatus
    ) -> Decision | None:
        """The provider rejected call ``call`` as too long: compact for one retry, or None to give up."""
        return None

    def status_tokens(self, trace: Trace, state: Any, call: int, status: RunStatus) -> int:
        """Tokens of the run-status line appended to request ``call`` (not persisted)."""
        return 0

    def after_call(
        self, trace: Trace, state: Any, view: View, call: int, status: RunStatus
    ) -> AfterCall | None:
        """After call ``call`` is accounted: warnings and exhaustion."""
        return None

    def explain(self, trace: Trace, state: Any, view: View, call: int) -> tuple[dict[str, list], list[str]]:
        """For ``explain``, at request ``call``: extra per-item columns (one value per item in view) and
        lines saying why the policy decided as it did."""
        return {}, []

    def plan(self, trace: Trace) -> Plan:
        """Only where ``plans`` is true: every pre-call decision of the run (see ``Plan``)."""
        raise NotImplementedError

    def plan_many(self, traces: Sequence[Trace]) -> Plans:
        """The plans of ``[self.plan(t) for t in traces]``; a policy may compute many runs' plans in one
        pass (the engine's fast path asks once per batch)."""
        return Plans.of([self.plan(t) for t in traces])

    def unpaired_requests(self, state: Any) -> int:
        """Only where ``splits_pairs`` is true: requests of the run so far that held a tool call or
        result without its partner (the ``unpaired_tool_messages`` metric)."""
        return 0

    def bound_violations(self, trace: Trace, view: View) -> list[str]:
        """What the policy declares about every view it builds, checked by the conformance checker."""
        return []

    def params(self) -> dict[str, Any]:
        """The knobs and their values, in declaration order."""
        names = _KNOB_NAMES.get(type(self))
        if names is None:
            names = _KNOB_NAMES[type(self)] = tuple(f.name for f in dataclasses.fields(self))  # type: ignore
        return {n: getattr(self, n) for n in names}


_KNOB_NAMES: dict[type, tuple[str, ...]] = {}  # per class, constant: fields() is slow in a hot path


_REGISTRY: dict[str, type[Policy]] = {}


def register(cls: type[Policy]) -> type[Policy]:
    """Class decorator: registers a policy under its ``name``."""
    if not cls.name or cls.name in _REGISTRY:
        raise ValueError(f"policy name {cls.name!r} is empty or taken")
    _REGISTRY[cls.name] = cls
    return cls


_LOADED = False


def _load_builtins() -> None:
    """Import every module of sim.policies once: each registers its policy (one module per policy)."""
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    from sim.util.plugins import import_modules

    import_modules("sim.policies", skip="base")
    load_entry_points()


ENTRY_POINT_GROUP = "ctxsim.policies"


def load_entry_points() -> list[str]:
    """Register the policies that installed packages declare under the ``ctxsim.policies`` entry-point
    group (``name = "pkg.module:Class"``). Installed code the user chose; never named by trace data."""
    from importlib.metadata import entry_points

    added = []
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        cls = ep.load()
        if not (isinstance(cls, type) and issubclass(cls, Policy)):
            raise ConfigError(f"entry point {ep.name} = {ep.value}: not a sim.policies.base.Policy subclass")
        if cls.name and cls.name not in _REGISTRY:
            register(cls)
            added.append(cls.name)
    return added


def registered() -> dict[str, type[Policy]]:
    _load_builtins()
    return dict(sorted(_REGISTRY.items()))


def builtin_class(name: str) -> type[Policy] | None:
    """The built-in policy ``name`` by importing its own module alone (``sim.policies.NAME``, one module
    per policy), not all of them (~0.1-0.3 s of a command's start); None when that module does not
    register ``name``. Built-ins take precedence over entry points, so the answer is ``registered()``'s."""
    import importlib.util

    if name in _REGISTRY or _LOADED:
        return _REGISTRY.get(name)
    if not (name.isidentifier() and name.islower() and name != "base"):
        return None
    module = f"sim.policies.{name}"
    if importlib.util.find_spec(module) is None:
        return None
    importlib.import_module(module)
    return _REGISTRY.get(name)


def policy_class(name: str) -> type[Policy]:
    cls = builtin_class(name) if isinstance(name, str) else None
    if cls is not None:
        return cls
    reg = registered()
    if name not in reg:
        raise UnknownNameError("policy", name, reg)
    return reg[name]


def knobs(cls: type[Policy]) -> list[dataclasses.Field]:
    return list(dataclasses.fields(cls))  # type: ignore[arg-type]


def make_policy(name: str, **params: Any) -> Policy:
    """Build a registered policy; unknown knobs and bad values raise ConfigError naming them."""
    cls = policy_class(name)
    if cls.knob_aliases:
        params = renamed_knobs(cls, params)
    known = {f.name for f in knobs(cls)}
    for key in params:
        if key not in known:
            raise ConfigError(
                f"policy '{name}' has no knob '{key}'; knobs: {', '.join(sorted(known)) or 'none'}"
            )
    for key, value in params.items():
        if (problem := _knob_number_problem(value)) is not None:
            raise ConfigError(f"policy '{name}': {key}={value!r:.60} is out of range ({problem})")
    try:
        return cls(**params)
    except TypeError as exc:  # a required knob missing
        raise ConfigError(f"policy '{name}': {exc}") from None


def renamed_knobs(cls: type[Policy], params: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` with every deprecated knob name replaced by the library's own (and its value mapped),
    one KnobDeprecation warning per old name; both names at once is a ConfigError."""
    import warnings

    from sim.util.notices import KnobDeprecation

    out = dict(params)
    for old, (new, values) in cls.knob_aliases.items():
        if old not in out:
            continue
        if new in out:
            raise ConfigError(
                f"policy '{cls.name}': knob '{old}' is the old name of '{new}'; give only '{new}'"
            )
        value = out.pop(old)
        mapped = values.get(value, value) if isinstance(value, str | int | float | bool | None) else value
        out[new] = mapped
        hint = f"{new}={mapped!r}" if mapped != value else repr(new)
        warnings.warn(
            f"policy '{cls.name}': knob '{old}' is deprecated, use {hint} (the library's own name)",
            KnobDeprecation,
            stacklevel=3,
        )
    return out


def _knob_number_problem(value: Any) -> str | None:
    """Numbers in a knob (also inside a list) must be finite and their integers below 2^53 in magnitude,
    like every count ctxsim keeps: a larger one would overflow the int64 columns a replay computes."""
    from sim.util.limits import MAX_COUNT

    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, list | tuple):
            stack.extend(v)
        elif isinstance(v, bool):
            continue
        elif isinstance(v, int) and abs(v) > MAX_COUNT:
            return "integers must lie within ±(2^53 - 1)"
        elif isinstance(v, float) and not math.isfinite(v):
            return "numbers must be finite"
    return None


def check_int(policy: str, knob: str, value: Any, lo: int, hi: int | None = None) -> None:
    """Knob validation with the message users need: knob, value, allowed range."""
    ok = (
        isinstance(value, int) and not isinstance(value, bool) and value >= lo and (hi is None or value <= hi)
    )
    if not ok:
        rng = f"in [{lo}, {hi}]" if hi is not None else f">= {lo}"
        raise ConfigError(f"policy '{policy}': {knob}={value!r} is not an integer {rng}")
