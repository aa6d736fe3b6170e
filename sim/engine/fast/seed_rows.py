"""Result rows of ``seed_engine`` lanes: the metric columns of every (setting, run) lane of
``sim.engine.fast.seed_lanes`` without a record per run, for ``replay_table`` (one setting: the lanes are the
runs) and for a sweep's chunk of grid settings (all its settings' lanes advance together).

The lanes give each call's agent row (``grid_figures``' ``rows``), the summary calls made and each
lane's final state (``lanes_out``); the rest follows from the trace's settled tables, because the seed
engine's compactions only move forward: the items a summary covers are the messages from the protected
block to the last cut, the items left cleared are the tool messages from that cut to the prune bound,
and the change table's reclaimed tokens add up to the settle-time cuts less the lane's net change. So
the ledger's token outcomes are prefix sums over messages, and the compaction counts are the figures'
split by the summary calls. Lanes that leave the grid (a request over the window) are the caller's to
replay with the per-call loop; ``sim.checks.conformance.check_lanes`` holds these columns to the loop's
metrics.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sim.core.growth import growth_exponents
from sim.core.records import COMPACTION_KINDS
from sim.core.types import ItemState
from sim.cost.cache import CacheRules
from sim.cost.pricing import Price
from sim.engine.fast.seed_lanes import grid_figures
from sim.engine.fast.seed_static import GridStatic, grid_static
from sim.engine.model import ReplayModel
from sim.information.ledger import LedgerTotals, totals_columns
from sim.policies.seed_engine import SeedEngine
from sim.util.batchmemo import batch_derived
from sim.util.limits import run_sum_problem

_BOUNDED = int(ItemState.BOUNDED)
_FACT_WIDTH = 6 + (len(LedgerTotals._fields) - 14) // 2  # fact outcome counts: 6 + lost by kind
_KINDS = (len(LedgerTotals._fields) - 14) // 2
# the per-call columns the lanes' metrics read (``grid_figures`` builds a table a call position of each)
ROW_COLUMNS = ("input_tokens", "cache_read_tokens", "cache_write_tokens", "uncached_input_tokens")


@dataclass
class LaneGroup:
    """Runs of a ``ReplayTable`` the lanes replayed together under one price: their metric columns
    (metric name -> one value per run, ``positions`` order), the runs that left the grid not ``kept``."""

    positions: list[int]
    rules: CacheRules
    price: Price | None
    windows: list[int | None]
    kept: np.ndarray
    columns: dict[str, list]

    def metric_columns(self) -> dict[str, list]:
        return self.columns


class _Ledger:
    """Per trace: what the lanes' token outcomes and reclaimed tokens are read from (prefix sums of the
    original tokens, the settle-time cuts' kept and lost parts, over the messages' items and over the
    tool messages' items; ``sim.information.ledger.token_outcomes`` item by item)."""

    def __init__(self, trace, st: GridStatic) -> None:
        a = trace.arrays
        N = st.N
        orig = np.asarray(a.tokens[:N], dtype=np.int64)
        settled = st.state0 == _BOUNDED
        kept0 = np.minimum(st.tok0, orig)
        bd = np.where(settled, kept0, 0)  # a settle-time cut's derived part, while the cut stands
        bl = np.where(settled, orig - kept0, 0)  # ... its lost part
        ph = np.minimum(st.ph_tokens, orig)  # a cleared item keeps the placeholder of its original

        def over(values: np.ndarray, items: np.ndarray, off: np.ndarray) -> np.ndarray:
            c = np.zeros(len(items) + 1, dtype=np.int64)
            np.cumsum(values[items], out=c[1:])
            return c[off]

        m_items, m_off = st.m_items, st.m_off
        t_items, t_off = st.tm_items, st.tm_off
        self.msg = np.stack([over(v, m_items, m_off) for v in (orig, bd, bl)])  # (3, M + 1)
        self.tool = np.stack([over(v, t_items, t_off) for v in (ph, orig - ph, bd, bl)])  # (4, T + 1)
        self.bd, self.bl = int(bd.sum()), int(bl.sum())
        self.seen = int(a.prefix[N])
        self.settled_reclaimed = sum(before - after for _, _, before, after in st.settled)
        self.M = len(st.ep) - 1
        self.tm = np.append(np.asarray(st.tm, dtype=np.int64), self.M)  # past the end: keeps it ascending
        # the largest count any column of a lane's rows can hold but its inputs (``check_sums``)
        self.top = max(
            int(np.abs(st.residual).max(initial=0)), int(np.abs(st.recorded_input).max(initial=0)), N
        )


class _Tables:
    """A batch's per-run constants, runs as the lanes order them, laid end to end: message and tool
    message prefix sums (``_Ledger``) with each run's offsets, and per-run totals."""

    def __init__(self, traces: Sequence, proto: SeedEngine) -> None:
        statics = [grid_static(t, proto) for t in traces]
        ledgers = [
            t.derived(f"lane_ledger_{proto.tool_result_max_bytes}", lambda t, st=st: _Ledger(t, st))
            for t, st in zip(traces, statics, strict=True)
        ]
        R = len(traces)
        self.ncalls = np.array([st.K for st in statics], dtype=np.int64)
        self.msg = np.concatenate([lg.msg for lg in ledgers], axis=1)
        self.tool = np.concatenate([lg.tool for lg in ledgers], axis=1)
        self.mo = np.zeros(R, dtype=np.int64)  # each run's first message in ``msg`` (M + 1 entries a run)
        self.mo[1:] = np.cumsum([lg.M + 1 for lg in ledgers])[:-1]
        # tool messages as positions in ``msg``: each run's past-the-end filler keeps them ascending
        self.tmg = np.concatenate([lg.tm + o for lg, o in zip(ledgers, self.mo.tolist(), strict=True)])
        self.pe = np.array([st.protected_end for st in statics], dtype=np.int64)
        self.per_run = np.array(
            [
                [lg.bd, lg.bl, lg.seen, lg.settled_reclaimed, st.bound_calls]
                for lg, st in zip(ledgers, statics, strict=True)
            ],
            dtype=np.int64,
        ).T.reshape(5, R)
        self.top = max((lg.top for lg in ledgers), default=0)


def _top_output(models: Sequence[ReplayModel]) -> int:
    return max((int(np.asarray(m.respond_all()).max(initial=0)) for m in models), default=0)


def lane_columns(
    traces: Sequence,
    policies: Sequence[SeedEngine],
    models: Sequence[ReplayModel],
    windows: Sequence[int | None],
    rules: CacheRules,
    price: Price | None,
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(ok, columns) of every (setting, run): ``ok[s, r]`` False where the lane left the grid (replay it
    with the loop); ``columns``: metric name -> an (S, R) array (``growth_exponent``: NaN for None). The
    same preconditions as ``grid_figures`` (traces and settings it accepts, runs priced alike)."""
    S, R = len(policies), len(traces)
    out: dict = {}
    ok, figs = grid_figures(
        traces, policies, models, windows, rules, price, None, out, ROW_COLUMNS, keep_batch=True,
        call_tables=True,
    )  # fmt: skip
    order = out["order"]
    proto = policies[0]
    b = batch_derived(
        [traces[r] for r in order],
        f"lane_tables_{proto.tool_result_max_bytes}",
        lambda ts: _Tables(ts, proto),
    )
    top_output = batch_derived([models[r] for r in order], "lane_top_output", _top_output)
    L = S * R
    ncalls = b.ncalls
    K = int(ncalls.max()) if R else 0
    calls = out["calls"]  # (lane, call) tables, lane j = sorted run j // S, setting j % S
    inp_l = calls["input_tokens"]
    sums = np.stack([calls[name].sum(axis=1) for name in ROW_COLUMNS[1:]]).reshape(3, R, S)
    lane_run = np.repeat(np.arange(R), S)
    n_agent = ncalls[lane_run]
    summaries = out.get("summaries", [])
    if summaries:
        sk = np.concatenate([k for k, _, _, _ in summaries])
        sh = np.concatenate([h for _, h, _, _ in summaries])
        s_in = np.concatenate([v for _, _, v, _ in summaries])
        s_out = np.concatenate([v for _, _, _, v in summaries])
    else:
        sk = sh = s_in = s_out = np.zeros(0, dtype=np.int64)
    n_sum = np.bincount(sh, minlength=L)
    sum_in = np.bincount(sh, s_in, minlength=L).astype(np.int64)
    sum_out = np.bincount(sh, s_out, minlength=L).astype(np.int64)
    n_rows = n_agent + n_sum
    # every lane's inputs in row order (a summary call's row before its call's agent row): the growth
    # exponent's series
    bounds = np.zeros(L + 1, dtype=np.int64)
    np.cumsum(n_rows, out=bounds[1:])
    series = inp_l[np.arange(K)[None, :] < n_agent[:, None]]  # the agent rows, lane by lane
    if len(sh):  # each summary row goes in before its call's agent row
        agent_start = np.zeros(L, dtype=np.int64)
        np.cumsum(n_agent[:-1], out=agent_start[1:])
        series = np.insert(series, agent_start[sh] + sk, s_in)  # (a call has one summary at most)
    growth = growth_exponents(series, bounds)
    top = max(int(series.max(initial=0)) + b.top, int(s_out.max(initial=0)), top_output)
    if run_sum_problem(top, int(n_rows.max(initial=0))) is not None:  # the loop refuses it
        ok = np.zeros_like(ok)
    live = inp_l[np.arange(L), np.maximum(n_agent - 1, 0)]
    # the ledger: cleared items are the tool messages from the last cut to the prune bound, summarized
    # ones the messages from the protected block to the last cut
    cut, cleared = out["cut"], out["cleared"]
    s_tok = out["summary_tokens"]
    mo = b.mo[lane_run]
    m_lo = mo + b.pe[lane_run]
    m_hi = np.where(cut > 0, mo + cut, m_lo)
    j0 = np.searchsorted(b.tmg, mo + cut)
    j1 = np.maximum(np.searchsorted(b.tmg, mo + cleared), j0)
    o_sum, bd_sum, bl_sum = b.msg[:, m_hi] - b.msg[:, m_lo]
    ph_cl, rest_cl, bd_cl, bl_cl = b.tool[:, j1] - b.tool[:, j0]
    in_summary = np.minimum(s_tok, o_sum)
    bd_all, bl_all, seen, settled, truncate = b.per_run[:, lane_run]
    derived = bd_all - bd_cl - bd_sum + ph_cl + in_summary
    lost = bl_all - bl_cl - bl_sum + rest_cl + o_sum - in_summary

    back = np.argsort(order)

    def as_grid(v: np.ndarray) -> np.ndarray:  # lane order -> (setting, run as given)
        return v.reshape(R, S)[back].T

    cols = {
        "calls": as_grid(n_rows),
        "cumulative_input_tokens": figs["input_tokens"],
        "cumulative_output_tokens": figs["output_tokens"],
        "peak_context_tokens": figs["peak"],
        "growth_exponent": as_grid(np.array([np.nan if g is None else g for g in growth], dtype=np.float64)),
        "cache_read_tokens": as_grid(sums[0].ravel()),
        "cache_write_tokens": as_grid(sums[1].ravel()),
        "uncached_input_tokens": as_grid(sums[2].ravel() + sum_in),
        "cost_microusd": figs["cost_microusd"],
        "compactions": figs["compactions"],
        "compactions_truncate": as_grid(truncate),
        "compactions_summarize": as_grid(n_sum),
        "tokens_reclaimed": as_grid(settled - out["delta"]),
        "summary_calls": as_grid(n_sum),
        "summary_tokens": as_grid(sum_out),
        "live_context_tokens": as_grid(live),
        "tokens_seen": as_grid(seen),
        "tokens_derived": as_grid(derived),
        "tokens_lost": as_grid(lost),
    }
    cols["compactions_prune"] = (
        cols["compactions"] - cols["compactions_truncate"] - n_sum.reshape(R, S)[back].T
    )
    return ok, cols


def exact_ratios(num: np.ndarray, den: list[int]) -> list[float]:
    """``num[i] / den[i]`` as Python divides the ints (NaN where ``den[i]`` is 0): numpy's division of
    the same doubles where both are exact in a double (below 2**53), Python's own otherwise."""
    d = np.asarray(den, dtype=np.int64)
    if len(d) and max(int(np.abs(num).max()), int(d.max())) >= 1 << 53:
        return [a / b if b else float("nan") for a, b in zip(num.tolist(), den, strict=True)]
    with np.errstate(divide="ignore", invalid="ignore"):
        q = num / d
    q[d == 0] = np.nan
    return q.tolist()


def metric_lists(cols: dict[str, np.ndarray], s: int, runs: Sequence[int], priced: bool) -> dict[str, list]:
    """Every metric (``sim.metrics.compute.METRICS`` names) of setting ``s``'s lanes on ``runs``, as the
    loop's records give them: a simple trace's run that completed, without facts, budgets or children."""
    idx = np.asarray(runs, dtype=np.int64)

    def get(name: str) -> list:
        return cols[name][s, idx].tolist()

    n = len(idx)
    calls = get("calls")
    total_in, reads = get("cumulative_input_tokens"), get("cache_read_tokens")
    n_comp = get("compactions")
    zeros = [0] * n
    tokens = np.zeros((n, 4), dtype=np.int64)
    tokens[:, 0], tokens[:, 3] = cols["tokens_derived"][s, idx], cols["tokens_lost"][s, idx]
    none = np.zeros(n, dtype=np.int64)
    ledger = totals_columns(
        none, cols["tokens_seen"][s, idx], tokens, np.zeros((n, _FACT_WIDTH), dtype=np.int64),
        np.zeros((n, _KINDS), dtype=np.int64),
    )  # fmt: skip
    out: dict[str, list] = {
        "calls": calls,
        "cumulative_input_tokens": total_in,
        "cumulative_output_tokens": get("cumulative_output_tokens"),
        "peak_context_tokens": get("peak_context_tokens"),
        "growth_exponent": [None if g != g else g for g in get("growth_exponent")],
        "cache_read_tokens": reads,
        "cache_write_tokens": get("cache_write_tokens"),
        "uncached_input_tokens": get("uncached_input_tokens"),
        "cache_hit_rate": [
            None if q != q else round(q, 6) for q in exact_ratios(cols["cache_read_tokens"][s, idx], total_in)
        ],
        "cost_microusd": get("cost_microusd") if priced else [None] * n,
        "compactions": n_comp,
    }
    for kind in COMPACTION_KINDS:
        name = f"compactions_{kind}"
        out[name] = get(name) if name in cols else zeros
    out["compaction_frequency"] = [
        0.0 if q != q else round(q, 4) for q in exact_ratios(100 * cols["compactions"][s, idx], calls)
    ]
    out["tokens_reclaimed"] = get("tokens_reclaimed")
    out["summary_calls"] = get("summary_calls")
    out["summary_tokens"] = get("summary_tokens")
    out["exhausted"] = [False] * n
    out["warnings"] = zeros
    out["unpaired_tool_messages"] = zeros
    out.update(ledger)
    out["refetch_calls"] = out["retrieve_calls"] = out["page_calls"] = zeros
    out["answer_completed"] = [True] * n
    out["answer_outcome"] = ["complete"] * n
    out["answer_fact_recall"] = [1.0] * n
    out["runs"] = [1] * n
    out["max_opening_prompt_tokens"] = [None] * n
    out["live_context_tokens"] = get("live_context_tokens")
    out["child_calls"] = out["child_input_tokens"] = zeros
    out["child_cost_microusd"] = [0] * n if priced else [None] * n
    out["parent_input_tokens"] = total_in
    out["child_exhausted"] = out["child_failed"] = zeros
    out["needed_facts_lost"] = zeros  # no facts: none needed
    return out
