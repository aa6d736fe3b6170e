"""What every setting of a ``seed_engine`` grid shares on one trace (``GridStatic``): the settled items, the
seed engine's messages and their estimates call by call, the transcript block each message would show, and
the prefix sums the grid paths move a lane's prune bound and summary cut over. Built once per trace and
tool-result bound (``grid_static``) by the policy itself (``SeedEngine.admit``, ``settle``,
``transcript_block``): without budgets none of it depends on the other knobs.
``sim.engine.fast.seed_grid`` reads it for one trace, ``sim.engine.fast.seed_lanes_tables`` lays many end
to end, ``sim.engine.fast.seed_rows`` and ``sim.engine.fast.seed_unlimited`` read the settled items.

Also here: the status line's length from digit counts (``status_base_len``, ``POW10``), which both grid
paths use: the line's text is fixed but for five numbers."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property

import numpy as np

from sim.core.types import KIND_CODE, ItemState, Trace
from sim.cost.tokens import estimate_tokens
from sim.engine.common import per_call
from sim.engine.fast.seed_admitted import Admitted, from_counts, from_counts_many, takes_counts
from sim.policies.base import RunStatus, View
from sim.policies.seed_engine import PRUNE_PLACEHOLDER, SeedEngine
from sim.policies.seed_messages import (
    ELISION_RESERVE,
    INPUT_BUDGET,
    INSTRUCTION_CHARS,
    SUMMARY_PREFIX,
    prompt_units,
)
from sim.policies.seed_state import SeedState

_BOUNDED = int(ItemState.BOUNDED)
NO_LIMIT = 1 << 62  # a lane without a limit never triggers
POW10 = np.array([10**p for p in range(1, 19)], dtype=np.int64)  # a count's digits past its first: a search


def status_base_len(proto) -> int:
    """UTF-8 bytes of the seed engine's status line less its five numbers: the line of a status whose
    numbers are all 0, less one byte each (the grid paths add each number's digit count)."""
    zero = RunStatus()
    zero.turns, zero.tool_calls, zero.tokens = -1, 0, 0
    return len(proto.status_text(zero, 0).encode()) - 5


def grid_static(trace: Trace, proto: SeedEngine) -> GridStatic:
    """``trace``'s ``GridStatic`` under ``proto``'s tool-result bound (kept with the trace: the other knobs
    do not change it)."""
    return trace.derived(f"grid_static_{proto.tool_result_max_bytes}", lambda t: GridStatic(t, proto))


def grid_statics(traces: Sequence[Trace], proto: SeedEngine) -> list[GridStatic]:
    """``[grid_static(t, proto) for t in traces]``, the text-free traces' tables not yet kept read in one
    pass over the batch (``sim.engine.fast.seed_admitted.from_counts_many``)."""
    key = f"grid_static_{proto.tool_result_max_bytes}"
    # (``derived`` takes a None it was given for a missing value: the next ask builds the tables)
    todo = [t for t in traces if t.derived(key, _none) is None and takes_counts(t, proto)]
    if todo:
        for t, m in zip(todo, from_counts_many(todo, proto), strict=True):
            t.derived(key, lambda t, m=m: GridStatic(t, proto, admitted=m))
    return [grid_static(t, proto) for t in traces]


def _none(_trace: Trace) -> None:
    return None


def _prefix(v: np.ndarray) -> np.ndarray:
    """0 then the running sums of ``v`` (int64)."""
    out = np.zeros(len(v) + 1, dtype=np.int64)
    np.cumsum(v, out=out[1:])
    return out


def _spans(first: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Offsets and the items of the item ranges [first, end) laid end to end."""
    lengths = (end - first).astype(np.int64)
    off = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=off[1:])
    items = np.arange(int(off[-1]), dtype=np.int64) + np.repeat(first.astype(np.int64) - off[:-1], lengths)
    return off, items


class GridStatic:
    """What every lane of a trace shares: settled items, the messages and their estimates per call.

    Built by the policy itself (``SeedEngine.start``, ``settle``, ``admit``, ``transcript_block``: the
    reference), or, for a text-free trace of one run under the seed engine (no event holds text, so every
    size follows from the events' counts), from its arrays and tool links at once
    (``sim.engine.fast.seed_admitted``), without building its events: the same tables
    (tests/test_seed_static_counts.py holds every field equal)."""

    def __init__(
        self, trace: Trace, proto: SeedEngine, by_policy: bool = False, admitted: Admitted | None = None
    ) -> None:
        a = trace.arrays
        self.view_end = a.view_end.tolist()
        self.K = K = len(self.view_end)
        self.N = self.view_end[-1]
        self.residual = a.residual.astype(np.int64)
        self.recorded_input = a.recorded_input.astype(np.int64)
        if admitted is not None:
            m = admitted
        elif not by_policy and takes_counts(trace, proto):
            m = from_counts(trace, proto)
        else:
            m = _by_policy(trace, proto, self.view_end)
        self.settled, self.cuts = m.settled, m.cuts
        tok = m.tok
        self.tok0, self.state0 = tok, m.states
        self.prefix = np.zeros(len(tok) + 1, dtype=np.int64)
        np.cumsum(tok, out=self.prefix[1:])
        self.bound_calls = len({c for c, *_ in self.settled})  # compactions of kind truncate
        self.msgs_at, self.tools_at = m.msgs_at, m.tools_at
        self.appended = np.asarray(m.appended, dtype=np.int64)
        self.role_tool = np.asarray(m.role_tool, dtype=bool)
        self.est = np.asarray(m.est, dtype=np.int64)
        self.est_cleared = np.asarray(m.est_cleared, dtype=np.int64)
        self.first, self.end = m.first, m.end
        self.protected_end = m.protected_end
        self.tm = m.tm
        tm = np.array(self.tm, dtype=np.int64)
        self.tm_est = self.est[tm] if len(tm) else np.zeros(0, dtype=np.int64)
        self.tm_saving = np.zeros(len(tm) + 1, dtype=np.int64)  # prefix sums of est - est_cleared
        if len(tm):
            np.cumsum(self.est[tm] - self.est_cleared[tm], out=self.tm_saving[1:])
        M = len(self.first)
        first, end = np.array(self.first, dtype=np.int64), np.array(self.end, dtype=np.int64)
        self.tm_off, self.tm_items = _spans(first[tm], end[tm])
        self.m_off, self.m_items = _spans(first, end)
        # chooseSummarizeCut steps back over tool messages: where each start lands (a tool message's: the
        # last message before it that is not one, else 0)
        at = np.arange(M)
        self._back = np.where(self.role_tool, np.maximum.accumulate(np.where(self.role_tool, 0, at)), at)
        self.blocks = m.blocks
        # prefix sums kept as arrays (the lanes lay them end to end); the per-trace grid reads them as
        # lists, made when it first asks (``_LISTS``)
        self._tm_tok = _prefix(tok[self.tm_items])  # settled tokens of tool-message items
        self._m_tok = _prefix(tok[self.m_items])  # ... of every message's items
        self._ep = _prefix(self.est)  # message estimates
        # what clearing saves (any tool message: _rendered)
        self._sv = _prefix(np.where(self.role_tool, self.est - self.est_cleared, 0))
        blocks = np.fromiter((0 if b is None else b for b in self.blocks), dtype=np.int64)
        self._bl = _prefix(blocks)
        self._bc = _prefix(np.fromiter((b is not None for b in self.blocks), dtype=np.int64))
        bpt = trace.bytes_per_token
        self.ph_bytes = len(PRUNE_PLACEHOLDER.encode())
        self.ph_tokens = estimate_tokens(self.ph_bytes, bpt)
        self.prefix_bytes = len(SUMMARY_PREFIX.encode())
        self.prefix_tokens = estimate_tokens(self.prefix_bytes, bpt)
        self.elapsed = np.array(m.elapsed, dtype=np.float64)
        self.elapsed_s = np.maximum(np.floor(self.elapsed), 0).astype(np.int64)
        self.tools_before = np.zeros(K, dtype=np.int64)
        self.tools_before[1:] = np.cumsum(m.tool_calls)[:-1]

    # the per-trace grid's lists (``sim.engine.fast.seed_grid``), each made from its array when first read
    tm_off_l = cached_property(lambda self: self.tm_off.tolist())
    m_off_l = cached_property(lambda self: self.m_off.tolist())
    tm_saving_l = cached_property(lambda self: self.tm_saving.tolist())
    tm_tok = cached_property(lambda self: self._tm_tok.tolist())
    m_tok = cached_property(lambda self: self._m_tok.tolist())
    ep = cached_property(lambda self: self._ep.tolist())
    sv = cached_property(lambda self: self._sv.tolist())
    dv = cached_property(lambda self: (self._ep - self._sv).tolist())  # prefix sums of rendered-cleared
    prefix_l = cached_property(lambda self: self.prefix.tolist())
    residual_l = cached_property(lambda self: self.residual.tolist())
    bl = cached_property(lambda self: self._bl.tolist())
    bc = cached_property(lambda self: self._bc.tolist())
    back = cached_property(lambda self: self._back.tolist())

    def lane_arrays(self) -> dict[str, np.ndarray]:
        """The tables ``sim.engine.fast.seed_lanes_tables.LaneBatch`` lays end to end, as arrays (built
        once a trace): per call (``K`` entries), prefix sums (``chained``: each run's continue the
        last's) and per-message or per-tool-message entries with one filler a run."""
        memo = self.__dict__.get("_lane_arrays")
        if memo is not None:
            return memo
        i64 = np.int64
        first = np.array(self.first, dtype=i64)
        # the tables held as Python lists, by name: per call, then prefix sums
        lists = {
            "view_end": self.view_end,
            "msgs_at": self.msgs_at,
            "tools_at": self.tools_at,
            "ep": self._ep,
            "sv": self._sv,
            "bl": self._bl,
            "bc": self._bc,
            "m_off": self.m_off,
            "m_tok": self._m_tok,
            "t_count": self.tm_off,
            "t_tok": self._tm_tok,
            "t_saving": self.tm_saving,
        }
        memo = {name: np.array(v, dtype=i64) for name, v in lists.items()}
        memo.update(
            {
                # per call
                "prefix_at": self.prefix[memo["view_end"]],
                "residual": self.residual,
                "appended": self.appended,
                "elapsed": self.elapsed,
                # prefix sums
                "c": np.concatenate([[0], np.cumsum(self.tm_est)]).astype(i64),
                # per message, per tool message (a filler each)
                "back": np.append(self._back, 0).astype(i64),
                "first_item": np.append(first, 0),
                "tok_first": np.append(self.tok0[first], 0).astype(i64),
                "tm_end": np.array(self.tm + [len(self._ep) - 1], dtype=i64),
                "t_first": np.append(first[np.array(self.tm, dtype=i64)], 0),
                "newest": np.append(self.tm_est, 0).astype(i64),
            }
        )
        self.__dict__["_lane_arrays"] = memo
        return memo

    def status_fixed(self, base: int) -> list[int]:
        """Per call: the status line's length but for its tokens and last-context numbers."""
        memo = self.__dict__.setdefault("_status_memo", {})
        if base not in memo:
            memo[base] = self._status_fixed(base)
        return memo[base]

    def _status_fixed(self, base: int) -> list[int]:
        def digits(v: np.ndarray) -> np.ndarray:  # len(str(v)) of counts >= 0
            return 1 + np.searchsorted(POW10, v, side="right")

        turns = digits(np.arange(1, self.K + 1, dtype=np.int64))
        return (base + 2 + turns + digits(self.tools_before) + digits(self.elapsed_s)).tolist()

    def prompt_chars(self, m0: int, cut: int, previous: int | None) -> int:
        """``prompt_units`` of messages [m0, cut)'s blocks after the previous summary: its arithmetic from
        prefix sums while nothing is elided (the blocks fit the budget), else the function itself."""
        count = self.bc[cut] - self.bc[m0]
        total = self.bl[cut] - self.bl[m0]
        prev = None if previous is None else 19 + previous
        fixed = (0 if prev is None else prev + 2) + INSTRUCTION_CHARS
        if total + 2 * count > INPUT_BUDGET - fixed - ELISION_RESERVE:
            return prompt_units([b for b in self.blocks[m0:cut] if b is not None], previous)[0]
        lines = count + (prev is not None)
        transcript = total + (prev or 0) + 2 * max(lines - 1, 0)
        return INSTRUCTION_CHARS + len("\n\n<transcript>\n") + transcript + len("\n</transcript>")


def _by_policy(trace: Trace, proto: SeedEngine, view_end: list[int]) -> Admitted:
    """``Admitted`` by the policy itself, event by event (the reference)."""
    a = trace.arrays
    N = view_end[-1]
    m = Admitted()
    state: SeedState = proto.start(trace)
    view = View()
    view.tokens, view.nbytes = a.tokens.tolist()[:N], a.bytes.tolist()[:N]
    view.state = [0] * N
    tok = np.asarray(a.tokens[:N], dtype=np.int64).copy()
    states = np.zeros(N, dtype=np.int8)
    m.settled = []  # (admitting call, item, tokens before, after)
    m.cuts = []  # (call, item, shown ranges) as the loop's record holds them
    # settle changes only a tool result over the bound (nothing is rejected without budgets): the
    # others are not asked
    assert state.rejecting is None
    over = np.flatnonzero(
        (np.asarray(a.kind[:N]) == KIND_CODE["tool_result"])
        & (np.asarray(state.info.jb[:N], dtype=np.int64) > proto.tool_result_max_bytes)
    )
    admitting = np.searchsorted(a.view_end, over, side="right").tolist()  # the call admitting each
    for i, call in zip(over.tolist(), admitting, strict=True):
        ch = proto.settle(trace, state, i, view)
        if ch is not None:
            assert ch.state == ItemState.BOUNDED  # without budgets nothing is rejected
            m.settled.append((call, i, int(tok[i]), ch.tokens))
            m.cuts.append((call, i, tuple(ch.kept) if ch.kept is not None else ((0, ch.nbytes),)))
            tok[i], states[i] = ch.tokens, _BOUNDED
    m.tok, m.states = tok, states
    # the messages, admitted call by call (the same for every setting)
    m.msgs_at, m.tools_at = [], []  # messages, unprotected tool messages in view at call k
    appended = []
    for k in range(len(view_end)):
        view.n = view_end[k]
        proto.admit(trace, state, view)
        m.msgs_at.append(len(state.role))
        m.tools_at.append(len(state.tool_msgs))
        appended.append(state.appended_est)
        state.appended_est = 0
    m.appended = appended
    m.role_tool = [r == "tool" for r in state.role]
    m.est, m.est_cleared = state.est, state.est_cleared
    m.first, m.end = state.first, state.end
    m.protected_end = state.protected_end
    m.tm = state.tool_msgs
    m.blocks = [proto.transcript_block(trace, state, j) for j in range(len(state.role))]
    m.tool_calls, m.elapsed = per_call(trace)
    return m
