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
``sim.policies.seed_engine`` as the reference of every rule: the prune bound and the summary cut are
``sim.policies.seed_rules.natural_prune_bounds`` and ``grid_summarize_cut``, beside the rules the policy
calls (``tests/test_seed_rules.py`` holds them equal). The per-trace tables are
``sim.engine.fast.seed_static.GridStatic``. A lane whose request would exceed the
provider's window leaves the grid and is replayed by the per-call loop (the overflow retry is rare and
stateful). The cache and cost columns of all lanes come from one ``sim.cost.cache.split_runs`` pass.

What the grid path declines (the caller uses the per-call loop): settings that differ in any knob but
``context_token_limit`` / ``keep_recent_tokens``, budgets (``max_turns`` etc.: their rejected batches
change the messages), traces with facts (needs or provides: the mock model's reactions), a mock model
with a turn limit, or a trace without calls. ``sim.checks.conformance.check_grid`` holds the records it builds
to the loop's, lane by lane.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, fields

import numpy as np

from sim.core.records import AGENT, CALL_COLUMNS, SUMMARY, change_table
from sim.core.types import ItemState, Trace
from sim.cost.cache import CacheRules, split_runs
from sim.cost.pricing import Price
from sim.cost.tokens import estimate_tokens
from sim.engine.common import assemble_record
from sim.engine.fast.seed_static import NO_LIMIT, POW10, GridStatic, grid_static, status_base_len
from sim.engine.model import ReplayModel
from sim.information.ledger import provides_any
from sim.information.state import has_needs
from sim.policies.seed_engine import SeedEngine
from sim.policies.seed_knobs import GRID_KNOBS
from sim.policies.seed_messages import NO_SUMMARY, OUTPUT_CONTRACT_TOKENS, estimate, summary_message
from sim.policies.seed_rules import grid_summarize_cut, natural_prune_bounds
from sim.util.limits import run_sum_problem

_MASKED, _SUMMARIZED = int(ItemState.MASKED), int(ItemState.SUMMARIZED)
_PRUNE_KIND, _SUMMARY_KIND, _BOUND_KIND = 1, 2, 0  # sim.core.records.KIND_OF_STATE of those states


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
    if has_facts(trace):
        return "facts"
    return None


def has_facts(trace: Trace) -> bool:
    """Does any event need, provide or supersede a fact? The traces' memoised flags say (a trace read as
    columns has them from load, without its events): both readers refuse a superseded fact that no
    earlier event provides, so a trace that provides none supersedes none."""
    return bool(trace.derived("has_needs", has_needs)) or bool(
        trace.derived("provides_any", provides_any).any()
    )


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


class _Grid:
    """The settings of one trace as lanes: their knobs, and their state over the calls (per lane as
    lists, read by the few lanes that fire; as arrays over the lanes where every call reads them)."""

    def __init__(self, trace: Trace, st: GridStatic, policies: Sequence[SeedEngine], model, records: bool):
        proto = policies[0]
        S, K = len(policies), st.K
        self.st, self.S, self.records = st, S, records
        limit = np.array(
            [NO_LIMIT if p.context_token_limit is None else p.context_token_limit for p in policies]
        )
        keeps = [p.keep_recent_tokens for p in policies]
        self.keeps = keeps
        self.keep_values = np.array(sorted(set(keeps)), dtype=np.int64)
        self.keep_at = [int(v) for v in np.searchsorted(self.keep_values, keeps)]
        self.natural: dict[int, list[int]] = {}  # tool messages in view -> each keep's natural prune bound
        self.limits = limit.tolist()
        self.has_limit = limit < NO_LIMIT
        self.trigger = np.where(self.has_limit, limit - OUTPUT_CONTRACT_TOKENS, NO_LIMIT)  # fires above this
        self.mode, self.ratio = proto.mode, proto.summary_ratio
        self.smin, self.smax = proto.summary_min_tokens, proto.summary_max_tokens
        self.bpt = trace.bytes_per_token
        self.outputs = np.asarray(model.respond_all(), dtype=np.int64)
        self.status_on = proto.reports_status
        if self.status_on:
            base_len = status_base_len(proto)
            lengths = np.arange(base_len + 5 * 20 + 1)
            bpt = self.bpt
            self.line_tokens = np.array([estimate_tokens(int(n), bpt) for n in lengths], dtype=np.int64)
            self.status_fixed = st.status_fixed(base_len)
        # lane state
        self.ct = [0] * S  # cleared_through
        self.stt = [0] * S  # summarized_through
        self.summary_bytes: list[int | None] = [None] * S
        self.summary_est = [0] * S
        self.summary_tokens = [0] * S
        self.carrier = [-1] * S
        self.view_est = np.zeros(S, dtype=np.int64)
        self.delta = np.zeros(S, dtype=np.int64)
        self.tokens = np.zeros(S, dtype=np.int64)
        self.alive = np.ones(S, dtype=bool)
        self.cur = np.broadcast_to(st.tok0, (S, st.N)).copy()
        self.cur_state = np.broadcast_to(st.state0, (S, st.N)).copy() if records else None
        self.compaction_calls = [0] * S
        self.summary_rows: list[
            tuple[int, int, int, int, int]
        ] = []  # (lane, call, input, output, view items)
        self.events: list[list] | None = [[] for _ in range(S)] if records else None
        self.sums_before: list[int] = [0] * S  # summary rows so far (row numbers of change events)
        # agent rows, one per (call, lane)
        self.inp = np.zeros((K, S), dtype=np.int64)
        self.sts = np.zeros((K, S), dtype=np.int64)
        self.vtok = np.zeros((K, S), dtype=np.int64)
        self.firsts = np.full((K, S), -1, dtype=np.int64)
        self.nchanged = np.zeros((K, S), dtype=np.int64)
        self.stable = np.zeros((K, S), dtype=np.int64)


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
    st = grid_static(trace, policies[0])
    g = _Grid(trace, st, policies, model, records)
    _replay_calls(g, window)
    return _assemble(
        st, g.outputs, rules, price, g.alive, g.inp, g.sts, g.vtok, g.firsts, g.nchanged, g.stable,
        g.summary_rows, g.compaction_calls, g.events, g.cur, g.cur_state,
    )  # fmt: skip


def _replay_calls(g: _Grid, window: int | None) -> None:
    """Every call position for all lanes at once: the trigger, the compactions of the lanes that fire
    (``_compact_lane``), the request (its status line's tokens from digit counts) and the agent row."""
    st = g.st
    view_est, last_in, tokens, trigger = g.view_est, np.zeros(g.S, dtype=np.int64), g.tokens, g.trigger
    prev_view = np.zeros(g.S, dtype=np.int64)
    out_l, appended, prefix = g.outputs.tolist(), st.appended.tolist(), st.prefix_l
    status_on = g.status_on
    prev_items = 0
    for k in range(st.K):
        n = st.view_end[k]
        view_est += appended[k]
        if k == 0:
            est_now = view_est
        else:  # nextContextEstimate: the last call's input and output and what was appended since
            est_now = np.where(last_in > 0, last_in + (out_l[k - 1] + appended[k]), view_est)
        fire = np.flatnonzero(est_now > trigger).tolist()
        summary_in = None
        first_k = g.firsts[k]
        changed_k = g.nchanged[k]
        stable_k = None
        for s in fire:
            first, changed, summarized, d_old, s_in = _compact_lane(g, s, k, n)
            if s_in is not None:
                if summary_in is None:
                    summary_in = {}
                summary_in[s] = s_in
            if first >= 0:
                first_k[s] = first
                changed_k[s] = changed
                if first < prev_items:  # every earlier change lies below the first one now
                    if stable_k is None:
                        stable_k = {}
                    stable_k[s] = prefix[first] + (0 if summarized else d_old)
        total = g.delta + st.prefix_l[n]
        if status_on:  # the line's length from its numbers' digits: the rest of its text is fixed
            last = last_in
            if summary_in is not None:
                last = last_in.copy()
                last[list(summary_in)] = list(summary_in.values())
            digits = np.searchsorted(POW10, tokens, side="right") + np.searchsorted(POW10, last, side="right")
            stok = g.line_tokens[digits + g.status_fixed[k]]
            req = total + (st.residual_l[k] + stok)
        else:
            stok = 0
            req = total + st.residual_l[k]
        np.maximum(req, 0, out=req)
        if window is not None and (req > window).any():  # refused: the loop replays what follows
            over = req > window
            g.alive &= ~over
            trigger[over] = NO_LIMIT
        g.inp[k] = req
        g.sts[k] = stok
        g.vtok[k] = total
        g.stable[k] = prev_view
        if stable_k is not None:
            for s, v in stable_k.items():
                g.stable[k, s] = v
        tokens += req
        tokens += out_l[k]
        last_in = req
        prev_view = total
        prev_items = n


def _compact_lane(g: _Grid, s: int, k: int, n: int) -> tuple[int, int, bool, int, int | None]:
    """Lane ``s``'s compaction before call ``k`` (``n`` items in view): prune to its natural bound, then
    summarize where the mode says so. Returns (the first item changed, -1: none; items changed; whether
    it summarized; the lane's net change before; the summary call's input, None: no summary)."""
    st, mode = g.st, g.mode
    row = k + g.sums_before[s]
    ve = int(g.view_est[s])
    d_tok = 0
    first, changed = -1, 0
    pruned = summarized = False
    c0 = g.ct[s]
    s_in = None
    if mode != "summarize":
        ve, d_tok, first, changed, pruned = _prune_lane(g, s, k, row, ve)
    if mode != "prune" and not (mode != "summarize" and g.ct[s] > c0 and ve <= g.limits[s]):
        got = _summarize_lane(g, s, k, n, row, ve, st.msgs_at[k])
        if got is not None:
            ve, d_sum, car, n_changed, s_in = got
            d_tok += d_sum
            first = car
            changed += n_changed
            summarized = True
    g.view_est[s] = ve
    d_old = int(g.delta[s])
    if d_tok:
        g.delta[s] = d_old + d_tok
    g.compaction_calls[s] += pruned + summarized
    return first, changed, summarized, d_old, s_in


def _prune_lane(g: _Grid, s: int, k: int, row: int, ve: int) -> tuple[int, int, int, int, bool]:
    """Lane ``s``'s prune before call ``k`` to the natural bound of its keep (``natural_prune_bounds``,
    the seed engine's rule from prefix sums; never back): (view estimate, net change, first item
    changed, items changed, whether results were cleared)."""
    st = g.st
    tm, ct, stt = st.tm, g.ct, g.stt
    c0 = ct[s]
    T = st.tools_at[k]
    got = g.natural.get(T)
    if got is None:
        got = g.natural[T] = natural_prune_bounds(st.tm, st.tm_est, T, g.keep_values)
    bound = max(c0, got[g.keep_at[s]])
    d_tok, first, changed, pruned = 0, -1, 0, False
    if bound > c0:
        a, b = bisect_left(tm, c0), bisect_left(tm, bound)
        av = max(a, bisect_left(tm, stt[s]))
        if b > av:  # the newly cleared messages still in view (not under the summary)
            ph = st.ph_tokens
            ve -= st.tm_saving_l[b] - st.tm_saving_l[av]
            o0, o1 = st.tm_off_l[av], st.tm_off_l[b]
            d_tok += ph * (o1 - o0) - (st.tm_tok[b] - st.tm_tok[av])
            first, changed = st.first[tm[av]], o1 - o0
            pruned = True
            if g.records:
                idx = st.tm_items[o0:o1]
                before = g.cur[s, idx]
                g.cur[s, idx] = ph
                g.cur_state[s, idx] = _MASKED
                g.events[s].extend(
                    (k, _PRUNE_KIND, i, v - ph, ph, row)
                    for i, v in zip(idx.tolist(), before.tolist(), strict=True)
                )
        ct[s] = bound
    return ve, d_tok, first, changed, pruned


def _kept_from(ep: list[int], dv: list[int], m: int, M: int, cM: int, top: int) -> int:
    """Rendered estimate of messages [m, M): whole past the prune bound ``cM``, cleared before it."""
    return ep[M] - ep[m] if m >= cM else top - dv[m]


def _summarize_lane(g: _Grid, s: int, k: int, n: int, row: int, ve: int, M: int):
    """Lane ``s``'s summary before call ``k`` (``M`` messages in view) at the cut ``grid_summarize_cut``
    chooses (the seed engine's rule from prefix sums): (view estimate, net change, the carrier item,
    items changed, the summary call's input), or None when the cut covers nothing."""
    st = g.st
    tm, tm_off, tm_tok, m_off, m_tok = st.tm, st.tm_off_l, st.tm_tok, st.m_off_l, st.m_tok
    ep, dv, ph = st.ep, st.dv, st.ph_tokens
    stt, c = g.stt, g.ct[s]
    cut, cM, top = grid_summarize_cut(ep, st.sv, dv, st.back, M, c, g.keeps[s], stt[s])
    m0 = max(stt[s], st.protected_end)
    if cut <= m0:
        return None
    nc = m_off[cut] - m_off[m0]
    j0, j1 = bisect_left(tm, m0), bisect_left(tm, min(cut, c))
    covered = m_tok[cut] - m_tok[m0]
    if j1 > j0:  # cleared results under the summary count at the placeholder's size
        covered += ph * (tm_off[j1] - tm_off[j0]) - (tm_tok[j1] - tm_tok[j0])
    covered_tokens = g.summary_tokens[s] + covered
    chars = st.prompt_chars(m0, cut, g.summary_bytes[s])
    bpt = g.bpt
    s_in = estimate_tokens(chars, bpt)
    out = min(max(round(g.ratio * covered_tokens), g.smin), g.smax)
    text = round(out * (bpt or 4.0)) or len(NO_SUMMARY)
    ve -= _kept_from(ep, dv, m0, M, cM, top) - _kept_from(ep, dv, cut, M, cM, top) + g.summary_est[s]
    g.summary_bytes[s], g.summary_est[s] = text, estimate(summary_message(text))
    ve += g.summary_est[s]
    stt[s] = cut
    msg_tokens = out + st.prefix_tokens
    if g.carrier[s] >= 0:
        car, old_car, others, n_others = g.carrier[s], g.summary_tokens[s], covered, nc
    else:  # the first summary: its first covered item carries it
        car = st.first[m0]
        cleared_head = j1 > j0 and tm[j0] == m0
        old_car = ph if cleared_head else int(st.tok0[car])
        others, n_others = covered - old_car, nc - 1
    g.carrier[s], g.summary_tokens[s] = car, msg_tokens
    row += 1
    g.summary_rows.append((s, k, s_in, out, n))
    g.tokens[s] += s_in + out
    if g.records:
        _record_summary(g, s, k, row, car, msg_tokens, m_off[m0], m_off[cut])
    g.sums_before[s] += 1
    return ve, msg_tokens - old_car - others, car, 1 + n_others, s_in


def _record_summary(g: _Grid, s: int, k: int, row: int, car: int, msg_tokens: int, o0: int, o1: int) -> None:
    """The change events of lane ``s``'s summary at call ``k`` (items ``m_items[o0:o1]``, ``car``
    carrying it). Changes are applied in order: the pruned items first (their row is the agent row,
    after the summary row), then the carrier and the covered items."""
    ev, cur, cur_state = g.events[s], g.cur, g.cur_state
    for j in range(len(ev)):
        e = ev[j]
        if e[0] == k and e[5] == row - 1:
            ev[j] = (*e[:5], row)
    idx = g.st.m_items[o0:o1]
    rest = idx[idx != car]
    ob = cur[s, rest]
    ev.append((k, _SUMMARY_KIND, car, int(cur[s, car]) - msg_tokens, msg_tokens, row))
    pairs = zip(rest.tolist(), ob.tolist(), strict=True)
    ev.extend((k, _SUMMARY_KIND, i, v, 0, row) for i, v in pairs)
    cur_state[s, car] = _SUMMARIZED
    cur_state[s, rest] = _SUMMARIZED
    cur[s, car] = msg_tokens
    cur[s, rest] = 0


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


def _settle_events(st: GridStatic, cols) -> list:
    """The settle-time envelopes' change events: row = the rows before their admitting call's first."""
    kind, call = cols["kind"], cols["recorded_call"]
    first_row = {}
    for r in range(len(kind) - 1, -1, -1):
        first_row[int(call[r])] = r
    st.settled_items = {i for _, i, _, _ in st.settled}
    return [(c, _BOUND_KIND, i, b - a, a, first_row[c]) for c, i, b, a in st.settled]


def record(trace: Trace, policy: SeedEngine, model: ReplayModel, run: GridRun, rules, price, window):
    """The RunRecord the per-call loop builds for this lane."""
    assert run.changes is not None
    cols = {c: v.copy() for c, v in zip(CALL_COLUMNS, run.table, strict=True)}
    return assemble_record(
        trace, policy, model, cols, run.item_state, change_table(run.changes), (rules, price),
        run.item_tokens, cuts=run.cuts, window=window,
    )  # fmt: skip
