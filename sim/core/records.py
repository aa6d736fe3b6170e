"""What a replay produces. Records are the truth; tables and metrics are derived from them."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from sim.core.segments import value_starts
from sim.core.types import ItemState

# Per-call columns, in order. One array each (never one object per call).
CALL_COLUMNS = (
    "call",  # row number in the run: every model request, summaries and grace calls included
    "kind",  # CALL_KINDS code: agent turn, summary, grace (final answer with tools forbidden)
    "recorded_call",  # the recorded call this row replays or precedes
    "input_tokens",  # what the request costs as input: view + residual + run-status line
    "output_tokens",
    "view_tokens",  # sum of the sizes of the items in view (0 for a summary call)
    "residual_tokens",  # the recorded call's provider residual, carried into any view
    "status_tokens",  # the run-status line appended to this request
    "recorded_input_tokens",  # what the recorded run's provider reported for that call (-1 unknown)
    "view_items",  # events in the store at this call
    "first_changed",  # first event index a pre-call transform changed (-1 none): the cache seam
    "items_changed",  # items the policy changed before this call
    "stable_prefix_tokens",  # tokens of the view's prefix unchanged since the previous request
    "cache_read_tokens",  # modelled (sim.cost.cache), never copied from the recording
    "cache_write_tokens",
    "uncached_input_tokens",
    "cost_microusd",  # -1 when the model has no price
)
CALL_KINDS = ("agent", "summary", "grace", "refetch", "retrieve", "page")
AGENT, SUMMARY, GRACE, REFETCH, RETRIEVE, PAGE = 0, 1, 2, 3, 4, 5
STEP_KINDS = (AGENT, GRACE, REFETCH, RETRIEVE, PAGE)  # the agent's own steps (model.max_turns counts them)
REREAD_KINDS = (REFETCH, RETRIEVE, PAGE)

# One row per change an operation made to an item (the ledger's source). ``row``: the first row of the
# calls table whose request sees the change.
CHANGE_COLUMNS = ("recorded_call", "kind", "index", "tokens_reclaimed", "tokens_after", "row")

# One row per compaction: a call's changes of one kind. Kinds follow the state an item is moved to.
COMPACTION_COLUMNS = ("call", "kind", "items", "tokens_reclaimed", "first_index")
COMPACTION_KINDS = ("truncate", "prune", "summarize", "clear", "spill", "paginate")
KIND_OF_STATE = {
    ItemState.BOUNDED: 0,
    ItemState.MASKED: 1,
    ItemState.SUMMARIZED: 2,
    ItemState.DROPPED: 3,
    ItemState.SPILLED: 4,
    ItemState.PAGINATED: 5,
}


UNKNOWN = object()  # a value not computed yet (None is a value: e.g. no growth exponent)


class Columns(Mapping):
    """A table as named rows of one 2-D block (read-only views). A batch replay hands each run a slice
    of the batch's block instead of building a dict of per-column slices for every run."""

    __slots__ = ("names", "block", "_row")

    def __init__(self, names: tuple[str, ...], block: np.ndarray, row: dict[str, int] | None = None) -> None:
        self.names, self.block = names, block
        self._row = row if row is not None else {n: i for i, n in enumerate(names)}

    def __getitem__(self, name: str) -> np.ndarray:
        return self.block[self._row[name]]

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)

    def __reduce__(self):
        return (Columns, (self.names, self.block))


class Primed(NamedTuple):
    """What a batch replay computes for each of its runs at once (``RunRecord.of_fields``)."""

    sums: dict[str, int]  # total of every call column
    rows: int
    largest_input: int
    kinds: tuple[int, ...]  # rows of each CALL_KINDS code
    compactions: tuple[tuple[int, ...], int]  # (compactions per kind, tokens they reclaimed)
    growth: float | None


@dataclass(frozen=True)
class RunRecord:
    """One (trace, policy, model) replay."""

    trace_id: str
    trace_hash: str
    policy: str
    params: dict[str, Any]
    model: str
    finish_reason: str  # completed | context-overflow | budget-exhausted:<dimension> | agent-turn-limit ...
    calls: Mapping[str, np.ndarray] = field(repr=False)
    item_state: np.ndarray = field(repr=False)  # final state of every admitted item (ItemState codes)
    compactions: Mapping[str, np.ndarray] = field(repr=False)
    warnings: tuple[tuple[int, str], ...] = ()  # (call row, budget dimension) at 80% of a budget
    rejections: int = 0  # requests the provider refused as over the window
    pricing: str | None = None  # the priced model, None when unpriced
    cache_family: str = "none"
    changes: Mapping[str, np.ndarray] = field(default_factory=dict, repr=False)  # CHANGE_COLUMNS
    item_tokens: np.ndarray | None = field(default=None, repr=False)  # final size of each admitted item
    summary_kept: tuple[str, ...] = ()  # facts the last summary holds
    summaries: tuple[tuple[int, tuple[str, ...]], ...] = ()  # (recorded call, facts kept) per summary
    recovered: tuple[str, ...] = ()  # facts re-read into view (refetch or retrieval)
    rereads: tuple[tuple[int, int, int, int], ...] = ()  # (recorded call, row kind, event, tokens added)
    degraded: bool = False  # an action went ahead without a fact it needed (on_missing=degrade)
    answer_needs: int = 0  # facts the final answer needs
    answer_needs_met: int = 0  # of which available or recoverable when it was (or would have been) given
    unpaired_tool_messages: int = 0  # requests holding a tool call or result without its partner
    ledger: Any = field(default=None, repr=False)  # sim.information.ledger.LedgerTotals at the end of the run
    summarizer: str = "extractive"  # the mock model's summarizer (sim.engine.model.SUMMARIZERS)
    # (recorded call, item, byte ranges of its original content shown) of every cut or pagination
    cuts: tuple[tuple[int, int, tuple[tuple[int, int], ...]], ...] = ()
    page_reads: tuple[tuple[int, int, int], ...] = ()  # (recorded call, item, page) of each page read
    missed: tuple[str, ...] = ()  # facts a retrieval missed (a (trace, fact) misses every time); sorted
    # facts an action or the final answer needed while they were lost from view (lost or not_retrieved:
    # the facts behind re-reads of lost content, failures and degraded answers); sorted
    needed_lost: tuple[str, ...] = ()
    final_answered: bool = True  # the recorded final call got its agent turn (not a grace turn)
    window: int | None = None  # the provider's window the run was replayed with (None: no limit)
    # A conversation of several runs (schema version 2): its number of runs, and per run reached the
    # tokens of its opening prompt as the conversation hands it over (before the policy's pre-call seam
    # at the run's first call; ``sim.metrics.conversation.per_run`` reads them). Empty for a trace of one run.
    runs: int = 1
    opening_prompts: tuple[int, ...] = ()
    # the records of the trace's children (sub-agent runs), each replayed under the same policy and
    # mock model behaviour; their spend rolls into the parent's totals (sim.metrics.compute)
    children: tuple[RunRecord, ...] = field(default=(), repr=False)
    transforms: tuple[str, ...] = ()  # what-if transforms applied to the trace (sim.transforms), in order
    _lists: dict = field(default_factory=dict, init=False, repr=False, compare=False)  # derived, cached
    _totals: dict = field(default_factory=dict, init=False, repr=False, compare=False)  # column sums

    @classmethod
    def of_fields(cls, fields: dict[str, Any], primed: Primed | None = None) -> RunRecord:
        """The record whose fields are exactly ``fields`` (every field, each given once; the dict becomes
        the record's own): the engine's constructor for records it fills completely. ``primed``: values
        a batch replay computed for all its runs at once, which fill the caches of ``total``, ``n_calls``,
        ``largest('input_tokens')``, ``kind_count``, ``compaction_counts``, ``total_reclaimed`` and
        ``primed_growth``: the same numbers, without per-run work (``sums`` is kept as given)."""
        if len(fields) != len(_ALL_FIELDS) or not _ALL_FIELDS <= fields.keys():
            raise TypeError(f"RunRecord.of_fields: fields differ by {sorted(_ALL_FIELDS ^ fields.keys())}")
        if primed is None:
            fields["_lists"], fields["_totals"] = {}, {}
        else:
            fields["_totals"] = primed.sums
            fields["_lists"] = {
                "n_calls": primed.rows,
                ("max", "input_tokens"): primed.largest_input,
                "kinds": primed.kinds,
                "compactions": primed.compactions[0],
                "reclaimed": primed.compactions[1],
                "growth": primed.growth,
            }
        r = cls.__new__(cls)
        object.__setattr__(r, "__dict__", fields)
        return r

    @property
    def n_calls(self) -> int:
        n = self._lists.get("n_calls")
        if n is None:
            n = self._lists["n_calls"] = len(self.calls["call"])
        return n

    def column(self, name: str) -> list[int]:
        """A per-call column as a Python list, converted once: metrics over a run's few calls are
        cheaper in plain Python than as numpy reductions."""
        v = self._lists.get(name)
        if v is None:
            v = self._lists[name] = self.calls[name].tolist()
        return v

    def total(self, name: str) -> int:
        """Sum of a per-call column (computed once; a batch replay fills these for all its runs)."""
        try:
            return self._totals[name]
        except KeyError:
            v = self._totals[name] = sum(self.column(name))
            return v

    def largest(self, name: str) -> int:
        """Largest value of a per-call column, 0 for a run without calls."""
        v = self._lists.get(("max", name))
        if v is None:
            v = self._lists[("max", name)] = max(self.column(name), default=0)
        return v

    def kind_count(self, kind: int) -> int:
        """Rows of a CALL_KINDS code."""
        counts = self._lists.get("kinds")
        if counts is None:
            col = self.column("kind")
            counts = self._lists["kinds"] = tuple(col.count(k) for k in range(len(CALL_KINDS)))
        return counts[kind]

    def compaction_counts(self) -> tuple[int, ...]:
        """Compactions of each COMPACTION_KINDS code."""
        v = self._lists.get("compactions")
        if v is None:
            kinds = self.compactions["kind"].tolist()
            v = self._lists["compactions"] = tuple(kinds.count(k) for k in range(len(COMPACTION_KINDS)))
        return v

    def total_reclaimed(self) -> int:
        """Tokens all compactions took out of the view."""
        v = self._lists.get("reclaimed")
        if v is None:
            v = self._lists["reclaimed"] = sum(self.compactions["tokens_reclaimed"].tolist())
        return v

    def primed_growth(self) -> float | None | object:
        """The growth exponent a batch replay computed for this run, or ``UNKNOWN``."""
        return self._lists.get("growth", UNKNOWN)

    def calls_frame(self):
        """Per-call table as a pandas DataFrame, with the run's identity columns in front (the working
        set's eight categories: ``sim.metrics.working_set.calls_table``)."""
        import pandas as pd

        df = pd.DataFrame({c: self.calls[c] for c in CALL_COLUMNS})
        df["kind"] = pd.Categorical.from_codes(df["kind"], categories=list(CALL_KINDS)).astype(str)
        # an unpriced call's cost is unknown: empty in every table written, never the -1 kept in memory
        cost = df["cost_microusd"].astype("Int64")
        df["cost_microusd"] = cost.mask(cost < 0)
        df.insert(0, "policy", self.policy)
        df.insert(0, "trace_id", self.trace_id)
        return df


_FIELDS = dataclasses.fields(RunRecord)
_ALL_FIELDS = frozenset(f.name for f in _FIELDS if f.init)


def change_table(rows: list[tuple[int, int, int, int, int]]) -> dict[str, np.ndarray]:
    arr = np.array(rows, dtype=np.int64).reshape(-1, len(CHANGE_COLUMNS))
    return {c: arr[:, i].copy() for i, c in enumerate(CHANGE_COLUMNS)}


def compaction_rows(
    call: np.ndarray, kind: np.ndarray, index: np.ndarray, reclaimed: np.ndarray
) -> np.ndarray:
    """Group a run's changes into compactions, one per (call, kind), sorted by both: a
    (COMPACTION_COLUMNS, n) block."""
    width = len(COMPACTION_KINDS)
    key = call * width + kind
    if len(key) > 1 and not (key[1:] >= key[:-1]).all():  # kinds interleave within a call
        order = np.argsort(key, kind="stable")
        key, reclaimed, index = key[order], reclaimed[order], index[order]
    starts = np.flatnonzero(value_starts(key))
    out = np.empty((len(COMPACTION_COLUMNS), len(starts)), dtype=np.int64)
    out[0], out[1] = np.divmod(key[starts], width)
    out[2] = np.diff(starts, append=len(key))
    out[3] = np.add.reduceat(reclaimed, starts)
    out[4] = np.minimum.reduceat(index, starts)
    return out


def _empty(names: tuple[str, ...]) -> Columns:
    block = np.zeros((len(names), 0), dtype=np.int64)
    block.setflags(write=False)
    return Columns(names, block)


NO_CHANGES = _empty(CHANGE_COLUMNS)  # shared by every run without changes (read-only)
NO_COMPACTIONS = _empty(COMPACTION_COLUMNS)


class GroupedCompactions(Mapping):
    """A run's compaction table, grouped from its change table when first read: a batch replay counts
    compactions for the metrics without building every run's table."""

    __slots__ = ("changes", "_table")

    def __init__(self, changes: Mapping[str, np.ndarray]) -> None:
        self.changes = changes
        self._table: Columns | None = None

    def table(self) -> Columns:
        if self._table is None:
            self._table = compactions_of(self.changes)
        return self._table

    def __getitem__(self, name: str) -> np.ndarray:
        return self.table()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(COMPACTION_COLUMNS)

    def __len__(self) -> int:
        return len(COMPACTION_COLUMNS)

    def __reduce__(self):
        return self.table().__reduce__()


def compactions_of(changes: Mapping[str, np.ndarray]) -> Columns:
    """The compaction table of a change table."""
    if not len(changes["kind"]):
        return NO_COMPACTIONS
    c = changes
    block = compaction_rows(c["recorded_call"], c["kind"], c["index"], c["tokens_reclaimed"])
    block.setflags(write=False)
    return Columns(COMPACTION_COLUMNS, block)


def child_answered(r: RunRecord) -> bool:
    """The child settled with an answer: its own final turn, or a grace turn after a budget ran out (a
    success for the parent, effect-agent's ``SubagentCompleted``); otherwise it failed
    (``SubagentFailed``: missing information, an overflow, a budget without a grace turn, ...)."""
    return r.final_answered or r.kind_count(GRACE) > 0
