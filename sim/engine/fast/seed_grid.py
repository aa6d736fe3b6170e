"""The grid path: every setting of a ``seed_engine`` grid replayed together, call position by call
position, as array operations over the settings (lanes) of one trace.

Why it can: without budgets the seed engine's messages do not depend on its settings. The tool-result
bound is a settle-time transform (one ``tool_result_max_bytes`` for the whole grid), so the messages,
their estimates and the transcript block each would show are computed once per trace; what a setting
changes is where its prune bound and summary cut sit, and both only move forward. A lane's state is a
few numbers (bound, cut, the summary's size, the view's estimate and token total, the last call's
usage), so the trigger, the request, the status line (its tokens from digit counts: the line's text is
fixed but for five numbers) and the cache inputs are vector operations over the lanes. A lane whose
trigger fires is compacted on its own (prune from a table of natural bounds per ``keep``, which the
reference's walk reduces to; a summary from prefix sums and the precomputed blocks), with
``sim.policies.seed_engine`` as the reference of every rule. A lane whose request would exceed the
provider's window leaves the grid and is replayed by the per-call loop (the overflow retry is rare and
stateful). The cache and cost columns of all lanes come from one ``sim.cost.cache.split_runs`` pass.

What the grid path declines (the caller uses the per-call loop): settings that differ in any knob but
``context_token_limit`` / ``keep_recent_tokens``, budgets (``max_turns`` etc.: their rejected batches
change the messages), traces with facts (needs or provides: the mock model's reactions), a mock model
with a turn limit, or a trace without calls. ``sim.checks.conformance.check_grid`` holds the records it builds
to the loop's, lane by lane.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, fields

import numpy as np

from sim.core.records import AGENT, CALL_COLUMNS, SUMMARY, change_table
from sim.core.types import KIND_CODE, ItemState, Trace
from sim.cost.cache import CacheRules, split_runs
from sim.cost.pricing import Price
from sim.cost.tokens import estimate_tokens
from sim.engine.common import per_call
from sim.engine.model import ReplayModel
from sim.information.ledger import provides_any
from sim.information.state import has_needs
from sim.policies.base import RunStatus, View
from sim.policies.seed_engine import PRUNE_PLACEHOLDER, SeedEngine, _State
from sim.policies.seed_messages import (
    ELISION_RESERVE,
    INPUT_BUDGET,
    INSTRUCTION_CHARS,
    NO_SUMMARY,
    OUTPUT_CONTRACT_TOKENS,
    SUMMARY_PREFIX,
    estimate,
    prompt_units,
    summary_message,
)
from sim.util.limits import run_sum_problem

GRID_KNOBS = ("context_token_limit", "keep_recent_tokens")
NO_LIMIT = 1 << 62  # a lane without a limit never triggers
_MASKED, _SUMMARIZED, _BOUNDED = int(ItemState.MASKED), int(ItemState.SUMMARIZED), int(ItemState.BOUNDED)
_PRUNE_KIND, _SUMMARY_KIND, _BOUND_KIND = 1, 2, 0  # sim.core.records.KIND_OF_STATE of those states
_POW10 = np.array([10**p for p in range(1, 19)], dtype=np.int64)


def status_base_len(proto) -> int:
    """UTF-8 bytes of the seed engine's status line less its five numbers: the line of a status whose
    numbers are all 0, less one byte each (the grid paths add each number's digit count)."""
    zero = RunStatus()
    zero.turns, zero.tool_calls, zero.tokens = -1, 0, 0
    return len(proto._status_text(zero, 0).encode()) - 5


def settings_decline(policies: Sequence) -> str | None:
    """Why the grid path cannot replay these settings together (None: it can), whatever the trace."""
    if not policies or not all(type(p) is SeedEngine for p in policies):
        return "not seed_engine"
    first = policies[0]
    rest = [f.name for f in fields(SeedEngine) if f.name not in GRID_KNOBS]
    if any(getattr(p, n) != getattr(first, n) for p in policies[1:] for n in rest):
        return "settings differ in a knob other than context_token_limit / keep_recent_tokens"
    if first.checks_after_call:
        return "budgets"
    return None


def trace_declines(trace: Trace, model: ReplayModel) -> str | None:
    """Why the grid path cannot replay this trace under this mock model (None: it can)."""
    if type(model) is not ReplayModel or model.max_turns is not None:
        return "mock model with a turn limit"
    if not len(trace.arrays.view_end):
        return "no calls"
    if not trace.is_simple:  # several runs of a conversation, children, a transform's moves: the loop's
        return "several runs, children or transforms"
    if _has_facts(trace):
        return "facts"
    return None


def _has_facts(trace: Trace) -> bool:
    """Does any event need, provide or supersede a fact? The traces' memoised flags say (a trace read as
    columns has them from load, without its events): both readers refuse a superseded fact that no
    earlier event provides, so a trace that provides none supersedes none."""
    return bool(trace.derived("has_needs", has_needs)) or bool(
        trace.derived("provides_any", provides_any).any()
    )


def _spans(first: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Offsets and the items of the item ranges [first, end) laid end to end."""
    lengths = (end - first).astype(np.int64)
    off = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=off[1:])
    items = np.arange(int(off[-1]), dtype=np.int64) + np.repeat(first.astype(np.int64) - off[:-1], lengths)
    return off, items


class _Static:
    """What every lane of a trace shares: settled items, the messages and their estimates per call."""

    def __init__(self, trace: Trace, proto: SeedEngine) -> None:
        a = trace.arrays
        self.view_end = a.view_end.tolist()
        self.K = K = len(self.view_end)
        self.N = N = self.view_end[-1]
        self.residual = a.residual.astype(np.int64)
        self.recorded_input = a.recorded_input.astype(np.int64)
        state: _State = proto.start(trace)
        view = View()
        view.tokens, view.nbytes = a.tokens.tolist()[:N], a.bytes.tolist()[:N]
        view.state = [0] * N
        tok = np.asarray(a.tokens[:N], dtype=np.int64).copy()
        states = np.zeros(N, dtype=np.int8)
        self.settled: list[tuple[int, int, int, int]] = []  # (admitting call, item, tokens before, after)
        self.cuts: list = []  # (call, item, shown ranges) as the loop's record holds them
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
                self.settled.append((call, i, int(tok[i]), ch.tokens))
                self.cuts.append((call, i, tuple(ch.kept) if ch.kept is not None else ((0, ch.nbytes),)))
                tok[i], states[i] = ch.tokens, _BOUNDED
        self.tok0, self.state0 = tok, states
        self.prefix = np.zeros(N + 1, dtype=np.int64)
        np.cumsum(tok, out=self.prefix[1:])
        self.bound_calls = len({c for c, *_ in self.settled})  # compactions of kind truncate
        # the messages, admitted call by call (the same for every setting)
        self.msgs_at: list[int] = []  # messages in view at call k
        self.tools_at: list[int] = []  # unprotected tool messages in view at call k
        appended = []
        for k in range(K):
            view.n = self.view_end[k]
            proto._admit(trace, state, view)
            self.msgs_at.append(len(state.role))
            self.tools_at.append(len(state.tool_msgs))
            appended.append(state.appended_est)
            state.appended_est = 0
        self.appended = np.array(appended, dtype=np.int64)
        self.role_tool = np.array([r == "tool" for r in state.role], dtype=bool)
        self.est = np.array(state.est, dtype=np.int64)
        self.est_cleared = np.array(state.est_cleared, dtype=np.int64)
        self.first, self.end = state.first, state.end
        self.protected_end = state.protected_end
        self.tm = state.tool_msgs
        tm = np.array(self.tm, dtype=np.int64)
        self.tm_est = self.est[tm] if len(tm) else np.zeros(0, dtype=np.int64)
        self.tm_saving = np.zeros(len(tm) + 1, dtype=np.int64)  # prefix sums of est - est_cleared
        if len(tm):
            np.cumsum(self.est[tm] - self.est_cleared[tm], out=self.tm_saving[1:])
        self.tm_off, self.tm_items = _spans(np.array(self.first)[tm], np.array(self.end)[tm])
        M = len(state.role)
        self.m_off, self.m_items = _spans(
            np.array(self.first, dtype=np.int64), np.array(self.end, dtype=np.int64)
        )
        # chooseSummarizeCut steps back over tool messages: where each start lands
        back, last = [0] * M, 0
        for m in range(M):
            if not self.role_tool[m]:
                last = m
            back[m] = last if self.role_tool[m] else m
        self.back = back
        self.blocks = [proto._block(trace, state, m) for m in range(M)]
        self.tm_off_l, self.m_off_l = self.tm_off.tolist(), self.m_off.tolist()
        self.tm_saving_l = self.tm_saving.tolist()
        self.tm_tok = [0, *np.cumsum(tok[self.tm_items]).tolist()]  # settled tokens of tool-message items
        self.m_tok = [0, *np.cumsum(tok[self.m_items]).tolist()]  # ... of every message's items
        self.ep = [0, *np.cumsum(self.est).tolist()]  # message estimates
        tool_saving = np.where(self.role_tool, self.est - self.est_cleared, 0)
        self.sv = [0, *np.cumsum(tool_saving).tolist()]  # what clearing saves (any tool message: _rendered)
        self.dv = [e - v for e, v in zip(self.ep, self.sv, strict=True)]  # prefix sums of rendered-cleared
        self.prefix_l = self.prefix.tolist()
        self.residual_l = self.residual.tolist()
        nonempty = [0 if b is None else 1 for b in self.blocks]
        self.bl = [0, *np.cumsum([b or 0 for b in self.blocks]).tolist()]
        self.bc = [0, *np.cumsum(nonempty).tolist()]
        bpt = trace.bytes_per_token
        self.ph_bytes = len(PRUNE_PLACEHOLDER.encode())
        self.ph_tokens = estimate_tokens(self.ph_bytes, bpt)
        self.prefix_bytes = len(SUMMARY_PREFIX.encode())
        self.prefix_tokens = estimate_tokens(self.prefix_bytes, bpt)
        tool_calls, elapsed = per_call(trace)
        self.elapsed = np.array(elapsed, dtype=np.float64)
        self.elapsed_s = np.maximum(np.floor(self.elapsed), 0).astype(np.int64)
        self.tools_before = np.zeros(K, dtype=np.int64)
        self.tools_before[1:] = np.cumsum(tool_calls)[:-1]

    def lane_arrays(self) -> dict[str, np.ndarray]:
        """The tables ``sim.engine.fast.seed_lanes._Batch`` lays end to end, as arrays (built once a trace):
        per call
        (``K`` entries), prefix sums (``chained``: each run's continue the last's) and per-message or
        per-tool-message entries with one filler a run."""
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
            "ep": self.ep,
            "sv": self.sv,
            "bl": self.bl,
            "bc": self.bc,
            "m_off": self.m_off_l,
            "m_tok": self.m_tok,
            "t_count": self.tm_off_l,
            "t_tok": self.tm_tok,
            "t_saving": self.tm_saving_l,
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
                "back": np.array(self.back + [0], dtype=i64),
                "first_item": np.append(first, 0),
                "tok_first": np.append(self.tok0[first], 0).astype(i64),
                "tm_end": np.array(self.tm + [len(self.ep) - 1], dtype=i64),
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
        turns = [len(str(k + 1)) for k in range(self.K)]
        tools = [len(str(v)) for v in self.tools_before.tolist()]
        secs = [len(str(v)) for v in self.elapsed_s.tolist()]
        return [base + 2 + a + b + c for a, b, c in zip(turns, tools, secs, strict=True)]

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

    def natural_bounds(self, T: int, keeps: np.ndarray) -> list[int]:
        """choosePruneBound with nothing cleared yet over the first T tool messages, for each keep (0: none
        cleared). With a bound already at b the reference's walk gives max(b, this): it stops at the
        first message not kept or already cleared, whichever comes first from the newest."""
        if T <= 1:
            return [0] * len(keeps)
        budget = keeps - int(self.tm_est[T - 1])  # the newest always spends the budget
        spent = np.cumsum(self.tm_est[: T - 1][::-1])  # the older ones, newest first
        kept = np.searchsorted(spent, budget, side="right")  # kept while budget - spent >= 0
        bound = np.array(self.tm, dtype=np.int64)[T - 2 - np.minimum(kept, T - 2)] + 1
        return np.where(kept >= T - 1, 0, bound).tolist()


@dataclass
class GridRun:
    """One lane's replay: its call columns, changes and final items (``record`` builds the RunRecord)."""

    table: np.ndarray  # the lane's call table, one row per column of CALL_COLUMNS (a view of the grid's)
    changes: list[tuple[int, int, int, int, int, int]] | None
    item_state: np.ndarray | None
    item_tokens: np.ndarray | None
    cuts: list


@dataclass
class GridResult:
    """The lanes of one trace that stayed on the grid, their figures, and (when asked) their runs."""

    lanes: np.ndarray  # the settings replayed here (the others left the grid: replay them with the loop)
    sums: dict[str, np.ndarray]  # per lane in ``lanes``: cost_microusd, input_tokens, output_tokens
    # totals, peak (the largest input) and compactions
    runs: list[GridRun | None] | None  # per setting, with ``records``


def replay_grid(
    trace: Trace,
    policies: Sequence[SeedEngine],
    model: ReplayModel,
    window: int | None,
    rules: CacheRules,
    price: Price | None,
    records: bool = False,
) -> GridResult:
    """Every setting's run on ``trace``; a setting missing from ``lanes`` left the grid (replay it with
    the loop). With ``records`` the lanes also keep their change tables and final items (``runs``: what
    a RunRecord holds)."""
    proto = policies[0]
    st = trace.derived(f"grid_static_{proto.tool_result_max_bytes}", lambda t: _Static(t, proto))
    S, K = len(policies), st.K
    limit = np.array([NO_LIMIT if p.context_token_limit is None else p.context_token_limit for p in policies])
    keeps = [p.keep_recent_tokens for p in policies]
    keep_values = np.array(sorted(set(keeps)), dtype=np.int64)
    keep_at = [int(v) for v in np.searchsorted(keep_values, keeps)]
    natural: dict[int, list[int]] = {}  # tool messages in view -> each keep's natural prune bound
    limits = limit.tolist()
    has_limit = limit < NO_LIMIT
    mode, ratio = proto.mode, proto.summary_ratio
    smin, smax = proto.summary_min_tokens, proto.summary_max_tokens
    bpt = trace.bytes_per_token
    outputs = np.asarray(model.respond_all(), dtype=np.int64)
    out_l = outputs.tolist()
    status_on = proto.reports_status
    if status_on:
        base_len = status_base_len(proto)
        lengths = np.arange(base_len + 5 * 20 + 1)
        line_tokens = np.array([estimate_tokens(int(n), bpt) for n in lengths], dtype=np.int64)
    # lane state
    ct = [0] * S  # cleared_through
    stt = [0] * S  # summarized_through
    summary_bytes: list[int | None] = [None] * S
    summary_est = [0] * S
    summary_tokens = [0] * S
    carrier = [-1] * S
    view_est = np.zeros(S, dtype=np.int64)
    delta = np.zeros(S, dtype=np.int64)
    last_in = np.zeros(S, dtype=np.int64)
    tokens = np.zeros(S, dtype=np.int64)
    prev_view = np.zeros(S, dtype=np.int64)
    alive = np.ones(S, dtype=bool)
    cur = np.broadcast_to(st.tok0, (S, st.N)).copy()
    cur_state = np.broadcast_to(st.state0, (S, st.N)).copy() if records else None
    compaction_calls = [0] * S
    summary_rows: list[tuple[int, int, int, int, int]] = []  # (lane, call, input, output, view items)
    events: list[list] | None = [[] for _ in range(S)] if records else None
    # agent rows, one per (call, lane)
    inp = np.zeros((K, S), dtype=np.int64)
    sts = np.zeros((K, S), dtype=np.int64)
    vtok = np.zeros((K, S), dtype=np.int64)
    firsts = np.full((K, S), -1, dtype=np.int64)
    nchanged = np.zeros((K, S), dtype=np.int64)
    stable = np.zeros((K, S), dtype=np.int64)
    prev_items = 0
    tm, tm_off, tm_tok, saving = st.tm, st.tm_off_l, st.tm_tok, st.tm_saving_l
    m_off, m_tok, ep, sv, dv, back = st.m_off_l, st.m_tok, st.ep, st.sv, st.dv, st.back
    first_item, pe, ph, prefix = st.first, st.protected_end, st.ph_tokens, st.prefix_l
    sums_before: list[int] = [0] * S  # summary rows so far (row numbers of change events)
    trigger = np.where(has_limit, limit - OUTPUT_CONTRACT_TOKENS, NO_LIMIT)  # fires above this
    appended = st.appended.tolist()
    status_fixed = st.status_fixed(base_len) if status_on else None
    for k in range(K):
        n = st.view_end[k]
        M = st.msgs_at[k]
        view_est += appended[k]
        if k == 0:
            est_now = view_est
        else:  # nextContextEstimate: the last call's input and output and what was appended since
            est_now = np.where(last_in > 0, last_in + (out_l[k - 1] + appended[k]), view_est)
        fire = np.flatnonzero(est_now > trigger).tolist()
        summary_in = None
        first_k = firsts[k]
        changed_k = nchanged[k]
        stable_k = None
        for s in fire:
            lim, keep = limits[s], keeps[s]
            row = k + sums_before[s]
            ve = int(view_est[s])
            d_old = d_tok = 0
            first = -1
            changed = 0
            pruned = summarized = False
            c0 = ct[s]
            if mode != "summarize":
                T = st.tools_at[k]
                got = natural.get(T)
                if got is None:
                    got = natural[T] = st.natural_bounds(T, keep_values)
                bound = max(c0, got[keep_at[s]])
                if bound > c0:
                    a, b = bisect_left(tm, c0), bisect_left(tm, bound)
                    av = max(a, bisect_left(tm, stt[s]))
                    if b > av:  # the newly cleared messages still in view (not under the summary)
                        ve -= saving[b] - saving[av]
                        o0, o1 = tm_off[av], tm_off[b]
                        d_tok += ph * (o1 - o0) - (tm_tok[b] - tm_tok[av])
                        first, changed = first_item[tm[av]], o1 - o0
                        pruned = True
                        if records:
                            idx = st.tm_items[o0:o1]
                            before = cur[s, idx]
                            cur[s, idx] = ph
                            cur_state[s, idx] = _MASKED
                            events[s].extend(
                                (k, _PRUNE_KIND, i, v - ph, ph, row)
                                for i, v in zip(idx.tolist(), before.tolist(), strict=True)
                            )
                    ct[s] = bound
            if mode != "prune" and not (mode != "summarize" and ct[s] > c0 and ve <= lim):
                c = ct[s]
                cM = min(c, M)
                top = ep[M] - sv[cM]  # rendered estimate of the whole view: cleared at the placeholder

                def kept_from(m: int, top=top, cM=cM, M=M) -> int:  # rendered estimate of [m, M)
                    return ep[M] - ep[m] if m >= cM else top - dv[m]

                # the kept tail grows as its start moves back: the messages from which it reaches keep
                # are a prefix [0, lo); past the bound estimates are whole, before it rendered
                if cM < M and ep[M] - ep[cM] >= keep:
                    lo = bisect_right(ep, ep[M] - keep, cM, M)
                else:
                    lo = bisect_right(dv, top - keep, 0, cM)
                cut = back[lo - 1] if lo > 1 else 0
                cut = max(cut, stt[s])
                m0 = max(stt[s], pe)
                if cut > m0:
                    nc = m_off[cut] - m_off[m0]
                    j0, j1 = bisect_left(tm, m0), bisect_left(tm, min(cut, c))
                    covered = m_tok[cut] - m_tok[m0]
                    if j1 > j0:  # cleared results under the summary count at the placeholder's size
                        covered += ph * (tm_off[j1] - tm_off[j0]) - (tm_tok[j1] - tm_tok[j0])
                    covered_tokens = summary_tokens[s] + covered
                    chars = st.prompt_chars(m0, cut, summary_bytes[s])
                    s_in = estimate_tokens(chars, bpt)
                    out = min(max(round(ratio * covered_tokens), smin), smax)
                    text = round(out * (bpt or 4.0)) or len(NO_SUMMARY)
                    ve -= kept_from(m0) - kept_from(cut) + summary_est[s]
                    summary_bytes[s], summary_est[s] = text, estimate(summary_message(text))
                    ve += summary_est[s]
                    stt[s] = cut
                    msg_tokens = out + st.prefix_tokens
                    if carrier[s] >= 0:
                        car, old_car, others, n_others = carrier[s], summary_tokens[s], covered, nc
                    else:  # the first summary: its first covered item carries it
                        car = first_item[m0]
                        cleared_head = j1 > j0 and tm[j0] == m0
                        old_car = ph if cleared_head else int(st.tok0[car])
                        others, n_others = covered - old_car, nc - 1
                    carrier[s], summary_tokens[s] = car, msg_tokens
                    row += 1
                    summary_rows.append((s, k, s_in, out, n))
                    tokens[s] += s_in + out
                    if summary_in is None:
                        summary_in = {}
                    summary_in[s] = s_in
                    d_tok += msg_tokens - old_car - others
                    if records:
                        # changes are applied in order: the pruned items first (their row is the agent
                        # row, after the summary row), then the carrier and the covered items
                        ev = events[s]
                        for j in range(len(ev)):
                            e = ev[j]
                            if e[0] == k and e[5] == row - 1:
                                ev[j] = (*e[:5], row)
                        idx = st.m_items[m_off[m0] : m_off[cut]]
                        rest = idx[idx != car]
                        ob = cur[s, rest]
                        ev.append((k, _SUMMARY_KIND, car, int(cur[s, car]) - msg_tokens, msg_tokens, row))
                        pairs = zip(rest.tolist(), ob.tolist(), strict=True)
                        ev.extend((k, _SUMMARY_KIND, i, v, 0, row) for i, v in pairs)
                        cur_state[s, car] = _SUMMARIZED
                        cur_state[s, rest] = _SUMMARIZED
                        cur[s, car] = msg_tokens
                        cur[s, rest] = 0
                    first = car
                    changed += 1 + n_others
                    sums_before[s] += 1
                    summarized = True
            view_est[s] = ve
            if d_tok:
                d_old = int(delta[s])
                delta[s] = d_old + d_tok
            else:
                d_old = int(delta[s])
            compaction_calls[s] += pruned + summarized
            if first >= 0:
                first_k[s] = first
                changed_k[s] = changed
                if first < prev_items:  # every earlier change lies below the first one now
                    if stable_k is None:
                        stable_k = {}
                    stable_k[s] = prefix[first] + (0 if summarized else d_old)
        total = delta + st.prefix_l[n]
        if status_on:  # the line's length from its numbers' digits: the rest of its text is fixed
            last = last_in
            if summary_in is not None:
                last = last_in.copy()
                last[list(summary_in)] = list(summary_in.values())
            digits = np.searchsorted(_POW10, tokens, side="right") + np.searchsorted(
                _POW10, last, side="right"
            )
            stok = line_tokens[digits + status_fixed[k]]
            req = total + (st.residual_l[k] + stok)
        else:
            stok = 0
            req = total + st.residual_l[k]
        np.maximum(req, 0, out=req)
        if window is not None and (req > window).any():  # refused: the loop replays what follows
            over = req > window
            alive &= ~over
            trigger[over] = NO_LIMIT
        inp[k] = req
        sts[k] = stok
        vtok[k] = total
        stable[k] = prev_view
        if stable_k is not None:
            for s, v in stable_k.items():
                stable[k, s] = v
        tokens += req
        tokens += out_l[k]
        last_in = req
        prev_view = total
        prev_items = n
    return _assemble(
        st, outputs, rules, price, alive, inp, sts, vtok, firsts, nchanged, stable, summary_rows,
        compaction_calls, events, cur, cur_state,
    )  # fmt: skip


def _assemble(
    st, outputs, rules, price, alive, inp, sts, vtok, firsts, nchanged, stable, summary_rows,
    compaction_calls, events, cur, cur_state,
):  # fmt: skip
    """Lay the lanes' rows end to end (summary rows before their call's agent row), split the cache and
    cost of all at once, and cut them into each lane's columns."""
    S, K = inp.shape[1], st.K
    lanes = np.flatnonzero(alive)
    L = len(lanes)
    extra = np.zeros((S, K), dtype=np.int64)
    for s, k, *_ in summary_rows:
        extra[s, k] += 1
    extra = extra[lanes]
    per_lane = K + extra.sum(axis=1)
    starts = np.zeros(L + 1, dtype=np.int64)
    np.cumsum(per_lane, out=starts[1:])
    R = int(starts[-1])
    cum = np.cumsum(extra, axis=1)  # summary rows of the lane up to and including call k
    agent_pos = starts[:-1, None] + np.arange(K)[None, :] + cum  # (L, K)
    table = np.zeros((len(CALL_COLUMNS), R), dtype=np.int64)
    col = {c: table[i] for i, c in enumerate(CALL_COLUMNS)}
    ap = agent_pos.ravel()
    call_ids = np.broadcast_to(np.arange(K), (L, K)).ravel()
    col["kind"][ap] = AGENT
    col["recorded_call"][ap] = call_ids
    col["input_tokens"][ap] = inp[:, lanes].T.ravel()
    col["output_tokens"][ap] = np.broadcast_to(outputs, (L, K)).ravel()
    col["view_tokens"][ap] = vtok[:, lanes].T.ravel()
    col["residual_tokens"][ap] = np.broadcast_to(st.residual, (L, K)).ravel()
    col["status_tokens"][ap] = sts[:, lanes].T.ravel()
    col["recorded_input_tokens"][ap] = np.broadcast_to(st.recorded_input, (L, K)).ravel()
    col["view_items"][ap] = np.broadcast_to(np.array(st.view_end), (L, K)).ravel()
    col["first_changed"][ap] = firsts[:, lanes].T.ravel()
    col["items_changed"][ap] = nchanged[:, lanes].T.ravel()
    col["stable_prefix_tokens"][ap] = stable[:, lanes].T.ravel()
    row_call = np.empty(R, dtype=np.int64)
    row_call[ap] = call_ids
    is_summary = np.zeros(R, dtype=bool)
    if summary_rows:
        where = {int(s): j for j, s in enumerate(lanes.tolist())}
        srows = [r for r in summary_rows if r[0] in where]
        if srows:
            s_, k_, i_, o_, n_ = (np.array(v, dtype=np.int64) for v in zip(*srows, strict=True))
            j_ = np.array([where[int(s)] for s in s_], dtype=np.int64)
            sp = agent_pos[j_, k_] - 1
            col["kind"][sp] = SUMMARY
            col["recorded_call"][sp] = k_
            col["input_tokens"][sp] = i_
            col["output_tokens"][sp] = o_
            col["recorded_input_tokens"][sp] = -1
            col["view_items"][sp] = n_
            col["first_changed"][sp] = -1
            row_call[sp] = k_
            is_summary[sp] = True
    run_start = np.repeat(starts[:-1], per_lane)
    col["call"][:] = np.arange(R) - run_start
    split = split_runs(
        rules, price, st.elapsed[row_call], col["input_tokens"], col["view_tokens"],
        col["stable_prefix_tokens"], col["output_tokens"], run_start, summary=is_summary,
    )  # fmt: skip
    for name, c in zip(CALL_COLUMNS[-4:], split, strict=True):
        col[name][:] = c
    counts = table[:-1]
    if counts.size:
        top = max(int(counts.max()), -int(counts.min()))
        if run_sum_problem(top, int(per_lane.max())) is not None:
            return GridResult(np.zeros(0, dtype=np.int64), {}, [None] * S)  # the loop refuses it
    lo = starts[:-1]
    sums = {
        "cost_microusd": np.add.reduceat(col["cost_microusd"], lo),
        "input_tokens": np.add.reduceat(col["input_tokens"], lo),
        "output_tokens": np.add.reduceat(col["output_tokens"], lo),
        "peak": np.maximum.reduceat(col["input_tokens"], lo),
        "compactions": st.bound_calls + np.array(compaction_calls, dtype=np.int64)[lanes],
    }
    result = GridResult(lanes, sums, None)
    if events is None:
        return result
    runs: list[GridRun | None] = [None] * S
    bounds = starts.tolist()
    for j, s in enumerate(lanes.tolist()):
        lane = table[:, bounds[j] : bounds[j + 1]]
        cols = dict(zip(CALL_COLUMNS, lane, strict=True))
        ev = _settle_events(st, cols) + events[s]
        ev.sort(key=lambda e: (e[0], 0 if e[2] in st.settled_items and e[1] == _BOUND_KIND else 1))
        runs[s] = GridRun(lane, ev, cur_state[s].copy(), cur[s].copy(), st.cuts)
    result.runs = runs
    return result


def _settle_events(st: _Static, cols) -> list:
    """The settle-time envelopes' change events: row = the rows before their admitting call's first."""
    kind, call = cols["kind"], cols["recorded_call"]
    first_row = {}
    for r in range(len(kind) - 1, -1, -1):
        first_row[int(call[r])] = r
    st.settled_items = {i for _, i, _, _ in st.settled}
    return [(c, _BOUND_KIND, i, b - a, a, first_row[c]) for c, i, b, a in st.settled]


def record(trace: Trace, policy: SeedEngine, model: ReplayModel, run: GridRun, rules, price, window):
    """The RunRecord the per-call loop builds for this lane."""
    from sim.engine.common import assemble_record

    assert run.changes is not None
    cols = {c: v.copy() for c, v in zip(CALL_COLUMNS, run.table, strict=True)}
    return assemble_record(
        trace, policy, model, cols, run.item_state, change_table(run.changes), (rules, price),
        run.item_tokens, cuts=run.cuts, window=window,
    )  # fmt: skip
