"""``ctxsim size``: which ``context_token_limit`` and ``keep_recent_tokens`` to ship, from the user's own
traces, compared with doing nothing.

Every setting of the grid replays every trace, and so does the **baseline**: the same policy with its
limit unset (no compaction). Each setting is compared with the baseline *paired on the same traces*: the
per-trace differences of cost, cumulative input tokens, facts lost and refetch calls, with percentile
bootstrap 95% intervals over traces (whole traces resampled; the generator is seeded from a SHA-256 of
the traces' content hashes and the setting, so the same inputs give the same intervals and no global
seed is touched). ``verdict`` is the one recommendation function: ``size``, ``demo`` and ``report`` all
call it, so they cannot disagree. A compacting setting is recommended only when its saving's interval
excludes zero and its information cost stays within the stated tolerances; otherwise the verdict says
compaction is not needed (or that no setting qualifies) and why. Settings that behave identically on
these traces (the same cost, facts lost and outcome on every trace) are named as **tied**.

The grid follows the seed's sizing guidance: a limit stays below the window by the output reserve (the
traces' largest recorded output) plus the largest summary the policy can write, so no grid point sits
at the window. An Optuna search is not used: the grid is small and exhaustive.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from sim.core.types import Trace
from sim.util.errors import ConfigError

DEFAULT_LIMITS = (16000, 24000, 32000, 48000, 64000, 96000, 128000, 200000)
DEFAULT_KEEPS = (2000, 4000, 8000, 12000, 16000, 20000)
BOOTSTRAP = 2000
DEFAULT_MAX_FACTS_LOST_INCREASE = 0.05  # share of the facts seen, over the baseline's
GRID_BATCH = 256  # runs a grid pass takes at once: bounds its lanes' memory (settings x runs)
OUTCOMES = (
    "complete",
    "grace",
    "degraded",
    "failed",
)  # sim.metrics.compute.ANSWER_OUTCOMES, without importing it


@dataclass(frozen=True)
class SettingResult:
    """One setting's per-trace figures, traces in the same order for every setting of a sizing."""

    context_token_limit: int | None  # None: the baseline (no compaction)
    keep_recent_tokens: int | None
    trace_hashes: tuple[str, ...]
    cost: np.ndarray  # micro-USD
    tokens: np.ndarray  # cumulative input tokens
    facts_seen: np.ndarray
    facts_lost: np.ndarray
    refetch: np.ndarray  # refetch_calls
    outcome: tuple[str, ...]  # answer_outcome
    completed: np.ndarray  # bool
    overflow_runs: int
    peak: np.ndarray  # peak_context_tokens
    compactions: np.ndarray
    output: np.ndarray | None = None  # cumulative output tokens (None: not read)

    @property
    def is_baseline(self) -> bool:
        return self.context_token_limit is None

    @property
    def label(self) -> str:
        if self.is_baseline:
            return "no compaction"
        return f"{self.context_token_limit}/{self.keep_recent_tokens}"

    @property
    def mean_cost_usd(self) -> float:
        return float(self.cost.mean()) / 1e6

    @property
    def completion(self) -> float:
        return float(self.completed.mean())

    @property
    def facts_lost_share(self) -> float:
        seen = float(self.facts_seen.sum())
        return float(self.facts_lost.sum()) / seen if seen else 0.0

    def same_as(self, other: SettingResult) -> bool:
        """Identical on every trace: cost, tokens, facts lost, refetches and outcome."""
        return (
            np.array_equal(self.cost, other.cost)
            and np.array_equal(self.tokens, other.tokens)
            and np.array_equal(self.facts_lost, other.facts_lost)
            and np.array_equal(self.refetch, other.refetch)
            and self.outcome == other.outcome
        )


def _order(traces: Sequence[Trace]) -> tuple[list[int], list[str]]:
    """Traces by content hash then id: the order ``settings_from_results`` reads a sweep in."""
    from sim.trace.codec import trace_hash

    hashes = [t.derived("trace_hash", trace_hash) for t in traces]  # memoised: --sensitivity asks again
    order = sorted(range(len(traces)), key=lambda i: (hashes[i], traces[i].trace_id))
    return order, [hashes[i] for i in order]


def output_reserve(traces: Sequence[Trace]) -> int:
    """The largest output of any call, as the mock model replays it (the recorded output, or its
    estimate from the turn's text when the recording has none); 0 without calls."""
    from sim.engine.model import ReplayModel

    return max((int(ReplayModel(t).respond_all().max(initial=0)) for t in traces), default=0)


def largest_summary(policy_name: str) -> int:
    """The largest summary the policy can write (its ``summary_max_tokens`` default, else 0)."""
    from sim.policies.base import knobs, policy_class

    for f in knobs(policy_class(policy_name)):
        if f.name == "summary_max_tokens" and isinstance(f.default, int):
            return int(f.default)
    return 0


def grid_limits(limits: Sequence[int], window: int | None, reserve: int, summary: int) -> list[int]:
    """The limits that leave the output reserve and the largest summary below the window; when some are
    left out, the highest safe limit (window − reserve − summary) is added in their place."""
    if window is None:
        return list(limits)
    top = (window - reserve - summary) // 1000 * 1000
    kept = [v for v in limits if v <= top]
    if len(kept) < len(limits) and top > 0 and top not in kept:
        kept.append(top)  # the highest safe limit stands in for those left out
    return kept


def evaluate(
    traces: Sequence[Trace],
    policy_name: str,
    limits: Sequence[int],
    keeps: Sequence[int],
    window: int | str | None,
    pricing: str | None,
    progress: Callable[[int, int], None] | None = None,
    behaviour: dict | None = None,
    grid: bool = True,
    workers: int = 1,
) -> list[SettingResult]:
    """The baseline (limit unset) first, then every (limit, keep) with keep < limit. Every setting of a
    trace is replayed at once on the grid path (``sim.engine.fast.seed_grid``) where it applies; the runs it
    declines
    or hands back go to ``replay_many`` (the per-call loop for the seed engine), setting by setting.
    ``grid=False`` replays everything that way (the reference the grid path is held to). ``workers``:
    processes the grid batches, then the settings with runs for the loop, are dealt to (``sim.util.forkmap``:
    the same batches and the same answer for any number)."""
    from sim.cost.models import resolve_window
    from sim.engine.dispatch import AUTO, _rules_and_price, replay_many
    from sim.engine.fast.seed_grid import settings_decline, trace_declines
    from sim.engine.fast.seed_lanes import grid_figures
    from sim.engine.model import ReplayModel
    from sim.metrics.compute import compute_metrics_many
    from sim.policies.base import make_policy
    from sim.util import interrupts
    from sim.util.forkmap import forked_map

    settings: list[tuple[int | None, int | None]] = [(None, None)]
    settings += [(lim, keep) for lim in limits for keep in keeps if keep < lim]
    if len(settings) == 1:
        raise ConfigError("size: no setting with keep_recent_tokens < context_token_limit in the grid")
    order, hashes = _order(traces)
    ordered = [traces[i] for i in order]
    policies = [
        make_policy(
            policy_name, **({} if lim is None else {"context_token_limit": lim, "keep_recent_tokens": keep})
        )
        for lim, keep in settings
    ]
    models = [ReplayModel(t, **(behaviour or {})) for t in ordered]  # no run state: shared by the settings
    S, n = len(settings), len(ordered)
    figures = {name: np.zeros((S, n), dtype=np.float64) for name in _FIGURES}
    priced = np.ones((S, n), dtype=bool)
    outcome = [["complete"] * n for _ in settings]  # what every run on the grid path comes to
    completed = np.ones((S, n), dtype=bool)
    overflow = [0] * S
    todo: list[list[int]] = [[] for _ in settings]  # per setting: the traces the loop replays
    grid = grid and settings_decline(policies) is None
    batches: dict[int, tuple[tuple, list[int]]] = {}  # runs priced alike go on the grid together
    for pos, (t, model) in enumerate(zip(ordered, models, strict=True)):
        if not grid or trace_declines(t, model) is not None:
            for todo_j in todo:
                todo_j.append(pos)
            continue
        setup = _rules_and_price(t.model, pricing)
        batches.setdefault(id(setup), (setup, []))[1].append(pos)
    jobs = [
        (rules, price, positions[lo : lo + GRID_BATCH])
        for (rules, price), positions in batches.values()
        for lo in range(0, len(positions), GRID_BATCH)
    ]  # the same batches whatever the number of workers

    def run_batch(job: tuple) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        interrupts.check()  # between batches: a swallowed Ctrl-C stops the grid here (sim.util.interrupts)
        rules, price, chunk = job
        ts = [ordered[p] for p in chunk]
        windows = [resolve_window(t.model) if window == AUTO else window for t in ts]
        return grid_figures(ts, policies, [models[p] for p in chunk], windows, rules, price)

    done = 0
    for (_, price, chunk), (ok, sums) in zip(jobs, forked_map(run_batch, jobs, workers), strict=True):
        cols = np.array(chunk)
        for name, key in _FIGURES.items():
            if key is not None:
                figures[name][:, cols] = sums[key]
        if price is None:
            priced[:, cols] = False
        for j, r in zip(*np.nonzero(~ok), strict=True):  # lanes that left the grid
            todo[int(j)].append(chunk[int(r)])
        done += len(chunk)
        if progress:
            progress(done, n)
    for todo_j in todo:
        todo_j.sort()
    looped = [j for j, positions in enumerate(todo) if positions]

    def run_loop(j: int) -> list[tuple]:  # per trace: its figures, priced, outcome, completed, overflow
        interrupts.check()
        positions = todo[j]
        records = replay_many(
            [ordered[p] for p in positions], policies[j], [models[p] for p in positions], window, pricing
        )
        return [
            (
                [m[name] or 0 for name in _FIGURES],
                m["cost_microusd"] is not None,
                str(m["answer_outcome"]),
                bool(m["answer_completed"]),
                r.finish_reason == "context-overflow",
            )
            for r, m in zip(records, compute_metrics_many(records), strict=True)
        ]

    for j, runs in zip(looped, forked_map(run_loop, looped, workers), strict=True):
        for p, (values, is_priced, answer, complete, overflowed) in zip(todo[j], runs, strict=True):
            for name, v in zip(_FIGURES, values, strict=True):
                figures[name][j, p] = v
            priced[j, p] = is_priced
            outcome[j][p] = answer
            completed[j, p] = complete
            overflow[j] += overflowed
    out = []
    for j, (lim, keep) in enumerate(settings):
        if not priced[j].all():
            t = ordered[int(np.flatnonzero(~priced[j])[0])]
            raise ConfigError(
                f"size: trace {t.trace_id} (model {t.model!r}) has no price; choose one with --model"
            )
        f = {name: figures[name][j] for name in _FIGURES}
        out.append(
            SettingResult(
                lim,
                keep,
                tuple(hashes),
                f["cost_microusd"],
                f["cumulative_input_tokens"],
                f["facts_seen"],
                f["facts_lost"],
                f["refetch_calls"],
                tuple(outcome[j]),
                completed[j],
                overflow[j],
                f["peak_context_tokens"],
                f["compactions"],
                f["cumulative_output_tokens"],
            )
        )
    return out


# the metrics a sizing reads of every run, and the grid path's sum that gives each (None: 0 on the grid
# path, which replays no trace with facts)
_FIGURES = {
    "cost_microusd": "cost_microusd",
    "cumulative_input_tokens": "input_tokens",
    "facts_seen": None,
    "facts_lost": None,
    "refetch_calls": None,
    "peak_context_tokens": "peak",
    "compactions": "compactions",
    "cumulative_output_tokens": "output_tokens",
}


# ------------------------------------------------------------------------------------------- statistics
def _rng(hashes: Sequence[str], key: str) -> np.random.Generator:
    return _Seeds(hashes)(key)


class _Seeds:
    """``_rng(hashes, key)`` for many keys over the same traces: the SHA-256 of the hashes' text is taken
    once and copied per key (the same digest as hashing the whole text)."""

    def __init__(self, hashes: Sequence[str]) -> None:
        self.head = hashlib.sha256(("\n".join(hashes) + "\n").encode())

    def __call__(self, key: str) -> np.random.Generator:
        h = self.head.copy()
        h.update(key.encode())
        return np.random.Generator(np.random.PCG64(int.from_bytes(h.digest()[:16], "big")))


def _ci(values: np.ndarray, idx: np.ndarray) -> tuple[float, float]:
    means = values[idx].mean(axis=1)
    lo, hi = np.percentile(means, [2.5, 97.5])
    return float(lo), float(hi)


def bootstrap_ci(values: np.ndarray, rng: np.random.Generator, n: int = BOOTSTRAP) -> tuple[float, float]:
    """95% percentile interval of the mean, resampling traces with replacement."""
    return _ci(values, rng.integers(0, len(values), size=(n, len(values))))


def paired(base: SettingResult, s: SettingResult) -> dict:
    """The setting against the baseline on the same traces: savings (baseline − setting; positive is
    cheaper) and changes (setting − baseline) with 95% paired bootstrap intervals."""
    return paired_many(base, [s])[0]


def _paired_diffs(base: SettingResult, s: SettingResult) -> tuple[np.ndarray, ...]:
    """The per-trace differences ``paired`` resamples: saving (USD), tokens saved, facts lost and
    refetch calls added."""
    return (
        (base.cost - s.cost) / 1e6,
        base.tokens - s.tokens,
        s.facts_lost - base.facts_lost,
        s.refetch - base.refetch,
    )


def _paired_bounds(base: SettingResult, settings: Sequence[SettingResult]) -> list[list[list[float]]]:
    """Per figure, per setting: the (2.5%, 97.5%) percentiles of its resampled means, as ``_ci`` takes
    them (the percentiles of all settings in one call per figure: a percentile along an axis is the
    per-row one), and no resampling of a difference that is zero on every trace (its interval is
    [0, 0]; a setting with no such difference draws nothing)."""
    n = len(base.cost)
    seeds = _Seeds(base.trace_hashes)
    zero = np.zeros(BOOTSTRAP)
    means: list[list[np.ndarray]] = [[], [], [], []]  # per figure, per setting: the resampled means
    for s in settings:
        values = _paired_diffs(base, s)
        moved = [v.any() for v in values]
        idx = seeds(s.label).integers(0, n, size=(BOOTSTRAP, n)) if any(moved) else None
        for f, v in enumerate(values):
            means[f].append(v[idx].mean(axis=1) if moved[f] else zero)
    return [np.percentile(np.array(m), [2.5, 97.5], axis=1).T.tolist() if m else [] for m in means]


def paired_many(base: SettingResult, settings: Sequence[SettingResult], workers: int = 1) -> list[dict]:
    """``[paired(base, s) for s in settings]``, the same numbers; the settings' bootstraps (each its own
    generator) dealt in contiguous slices to ``workers`` processes (``sim.util.forkmap``), whose bounds are
    joined in order: the same answer for any number."""
    from sim.util.forkmap import forked_map

    for s in settings:
        if base.trace_hashes != s.trace_hashes:
            raise ConfigError(f"size: setting {s.label} did not run the baseline's traces")
    diffs = [_paired_diffs(base, s) for s in settings]
    W = max(1, min(workers, len(settings)))
    cuts = [len(settings) * w // W for w in range(W + 1)]
    slices = [settings[cuts[w] : cuts[w + 1]] for w in range(W)]
    parts = forked_map(lambda part: _paired_bounds(base, part), slices, W)
    bounds = [[b for part in parts for b in part[f]] for f in range(4)]  # per figure: (lo, hi) a setting
    out = []
    for j, (s, (saving, tokens, lost, refetch)) in enumerate(zip(settings, diffs, strict=True)):

        def interval(f: int, dp: int, j=j) -> list[float]:
            return [round(float(x), dp) for x in bounds[f][j]]

        out.append(
            {
                "saving_usd": round(float(saving.mean()), 6),
                "saving_ci": interval(0, 6),
                "tokens_saving": round(float(tokens.mean()), 1),
                "tokens_saving_ci": interval(1, 1),
                "runs_dearer": int((saving < 0).sum()),
                "facts_lost_change": {
                    "per_run": round(float(lost.mean()), 3),
                    "per_run_ci": interval(2, 3),
                    "share_of_facts_seen": round(s.facts_lost_share - base.facts_lost_share, 4),
                    "setting_share": round(s.facts_lost_share, 4),
                },
                "refetch_change": {"per_run": round(float(refetch.mean()), 3), "per_run_ci": interval(3, 3)},
                "outcome_change": {o: s.outcome.count(o) - base.outcome.count(o) for o in OUTCOMES},
            }
        )
    return out


# ------------------------------------------------------------------------------------ the seed's rules
def _round_up(v: float) -> int:
    """Up to two significant digits: a budget is a round number a harness engineer can type."""
    if v <= 0:
        return 0
    step = 10 ** max(int(math.floor(math.log10(v))) - 1, 0)
    return int(math.ceil(v / step) * step)


def runaway_budgets(base: SettingResult) -> dict:
    """``token_budget`` and ``cost_budget_microusd`` as runaway stops: twice the p99 of the runs without
    compaction (every call's input + output, as the seed engine counts; and the cost), rounded up, with
    how many of these runs each would stop (none, unless a run is far beyond the rest)."""
    tokens = base.tokens + (base.output if base.output is not None else 0)
    p99_tokens, p99_cost = float(np.percentile(tokens, 99)), float(np.percentile(base.cost, 99))
    tb, cb = _round_up(2 * p99_tokens), _round_up(2 * p99_cost)
    return {
        "token_budget": tb,
        "cost_budget_microusd": cb,
        "p99_tokens": round(p99_tokens),
        "p99_cost_microusd": round(p99_cost),
        "runs_stopped_by_token_budget": int((tokens > tb).sum()),
        "runs_stopped_by_cost_budget": int((base.cost > cb).sum()),
    }


def load_bearing_results(traces: Sequence[Trace]) -> list[int]:
    """Sizes (tokens) of the tool results that provide a fact a later event needs: what a compaction's
    recent window must hold whole for the next action to find its fact without a re-read."""
    from sim.information.state import has_needs

    sizes = []
    for t in traces:
        # nothing needed, nothing load-bearing (a trace read as columns knows it without its events)
        if isinstance(t, Trace) and not t.derived("has_needs", has_needs):
            continue
        needed: set[str] = set()
        for e in reversed(t.events):
            if e.kind == "tool_result" and any(f in needed for f in e.provides):
                sizes.append(int(e.tokens))
            needed.update(e.needs)
    return sizes


def keep_check(sizes: Sequence[int], keep: int | None) -> dict | None:
    """Whether ``keep_recent_tokens`` holds the p90 load-bearing result whole (None without results)."""
    if not sizes:
        return None
    p90 = int(np.percentile(np.array(sizes, dtype=np.float64), 90))
    out = {"load_bearing_results": len(sizes), "p90_tokens": p90, "max_tokens": int(max(sizes))}
    if keep is not None:
        out["keep_recent_tokens"] = keep
        out["holds_p90"] = keep >= p90
    return out


def rules_text(budgets: dict, keep: dict | None) -> str:
    """The seed's sizing rules as a few lines for people."""
    lines = [
        f"runaway stops: token_budget={budgets['token_budget']} and cost_budget_microusd="
        f"{budgets['cost_budget_microusd']} (${budgets['cost_budget_microusd'] / 1e6:.2f}): twice the p99 "
        f"of these runs without compaction ({budgets['p99_tokens']:,} tokens, "
        f"${budgets['p99_cost_microusd'] / 1e6:.4f}); they would stop "
        f"{budgets['runs_stopped_by_token_budget']} and {budgets['runs_stopped_by_cost_budget']} of these "
        "runs"
    ]
    if keep is not None and "holds_p90" in keep:
        lines.append(
            f"keep_recent_tokens={keep['keep_recent_tokens']} "
            + ("holds" if keep["holds_p90"] else "does NOT hold")
            + f" the p90 load-bearing tool result whole ({keep['p90_tokens']:,} tokens; largest "
            f"{keep['max_tokens']:,}; {keep['load_bearing_results']:,} results a later action needs)"
        )
    elif keep is not None:
        lines.append(
            f"load-bearing tool results: p90 {keep['p90_tokens']:,} tokens, largest {keep['max_tokens']:,} "
            f"({keep['load_bearing_results']:,} results a later action needs): a keep_recent_tokens below "
            "the p90 cannot hold the latest one whole"
        )
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------- verdict
def _usd(v: float) -> str:
    return f"-${-v:.4f}" if v < 0 else f"${v:.4f}"


def _k(tokens: float) -> str:
    return f"{tokens / 1000:.0f}k" if tokens >= 1000 else f"{tokens:.0f}"


def safety_net(window: int | None, reserve: int, summary: int, largest_request: int) -> dict | None:
    """A limit that only stops a runaway: from three quarters of the window (or just above the largest
    request plus its output on these traces, if higher) to the highest limit the output reserve and the
    largest summary allow. None without a window."""
    if window is None:
        return None
    high = window - reserve - summary
    low = max(math.ceil(0.75 * window / 1000) * 1000, math.ceil((largest_request + 1) / 1000) * 1000)
    high = (high // 1000) * 1000
    return {
        "low": min(low, high),
        "high": high,
        "fires_on_these_traces": high <= largest_request,
    }


def verdict(
    results: Sequence[SettingResult],
    *,
    policy_name: str,
    target: float,
    max_facts_lost_increase: float = DEFAULT_MAX_FACTS_LOST_INCREASE,
    window: int | None = None,
    reserve: int = 0,
    summary: int = 0,
    largest_request: int | None = None,
    workers: int = 1,
) -> dict:
    """The recommendation: the cheapest *eligible* compacting setting (its saving's 95% paired interval
    above zero, completion at least ``target``, facts lost up by at most ``max_facts_lost_increase`` of
    the facts seen, no overflow), or null with the reason. ``results[0]`` must be the baseline.
    ``workers``: processes for the paired bootstraps (the same answer for any number)."""
    if not results or not results[0].is_baseline:
        raise ConfigError(f"size: the results of {policy_name} hold no no-compaction (limit unset) setting")
    base, cands = results[0], list(results[1:])
    if not cands:
        raise ConfigError(f"size: the results of {policy_name} hold no compacting setting")
    if largest_request is None:
        largest_request = int(base.peak.max()) + reserve
    net = safety_net(window, reserve, summary, largest_request)
    rows = []
    for s, pr in zip(cands, paired_many(base, cands, workers), strict=True):
        reasons = []
        if pr["saving_ci"][0] <= 0:
            reasons.append("saving CI includes zero")
        if s.completion < target:
            reasons.append(f"completion {s.completion:.0%} < {target:.0%}")
        if pr["facts_lost_change"]["share_of_facts_seen"] > max_facts_lost_increase:
            reasons.append(
                f"facts lost +{pr['facts_lost_change']['share_of_facts_seen']:.1%} of facts seen "
                f"> {max_facts_lost_increase:.0%}"
            )
        if s.overflow_runs:
            reasons.append(f"{s.overflow_runs} runs overflow the window")
        rows.append((s, pr, reasons))

    def brief(s: SettingResult, pr: dict | None = None, reasons: list[str] | None = None) -> dict:
        d = {
            "context_token_limit": s.context_token_limit,
            "keep_recent_tokens": s.keep_recent_tokens,
            "mean_cost_usd": round(s.mean_cost_usd, 6),
            "completion": round(s.completion, 4),
            "facts_lost": int(s.facts_lost.sum()),
            "facts_seen": int(s.facts_seen.sum()),
            "refetch_calls": int(s.refetch.sum()),
            "overflow_runs": int(s.overflow_runs),
            "compactions": int(s.compactions.sum()),
        }
        if pr is not None:
            d["eligible"] = not reasons
            d["why_not"] = reasons
            d["saving_ci"] = pr["saving_ci"]
            d["facts_lost_change_share"] = pr["facts_lost_change"]["share_of_facts_seen"]
        return d

    eligible = [(s, pr) for s, pr, why in rows if not why]
    ranked = sorted(
        eligible,
        key=lambda x: (
            x[0].mean_cost_usd,
            x[0].facts_lost_share,
            -(x[0].context_token_limit or 0),
            -(x[0].keep_recent_tokens or 0),
        ),
    )
    peak_p99 = float(np.percentile(base.peak, 99))
    base_brief = brief(base)
    base_brief["peak_context_tokens_p99"] = round(peak_p99)
    never_fire = [s for s in cands if s.same_as(base)]
    out = {
        "policy": policy_name,
        "baseline": base_brief,
        "target_completion": target,
        "max_facts_lost_increase": max_facts_lost_increase,
        "settings": len(results),
        "grid": [brief(s, pr, why) for s, pr, why in rows],
        "eligible_settings": len(eligible),
        "traces": len(base.cost),
        "safety_net": net,
    }
    changing = [x for x in rows if not x[0].same_as(base)] or rows  # a setting that changes some run
    cheapest = min(changing, key=lambda x: (x[0].mean_cost_usd, -(x[0].context_token_limit or 0)))
    if ranked:
        best, pr = ranked[0]
        tied = [s for s, _ in ranked[1:] if s.same_as(best)]
        runners = [brief(s, p, []) for s, p in ranked[1:] if not s.same_as(best)][:3]
        fl = pr["facts_lost_change"]
        advice = (
            f"Ship context_token_limit={best.context_token_limit} with keep_recent_tokens="
            f"{best.keep_recent_tokens}: {_usd(best.mean_cost_usd)} per run against "
            f"{_usd(base.mean_cost_usd)} "
            f"without compaction, saving {_usd(pr['saving_usd'])} per run (paired 95% CI "
            f"{_usd(pr['saving_ci'][0])} to {_usd(pr['saving_ci'][1])}; {pr['runs_dearer']} of "
            f"{len(base.cost)} runs dearer); information cost: facts lost {fl['setting_share']:.1%} of "
            f"facts seen ({fl['share_of_facts_seen']:+.1%} vs no compaction), refetch calls "
            f"{pr['refetch_change']['per_run']:+.2f} per run, answers completed {best.completion:.0%} "
            f"(no compaction {base.completion:.0%})."
        )
        out.update(
            verdict="compact",
            recommended={
                "context_token_limit": int(best.context_token_limit),
                "keep_recent_tokens": int(best.keep_recent_tokens),
            },
            mean_cost_usd=round(best.mean_cost_usd, 6),
            completion=round(best.completion, 4),
            paired={
                k: pr[k]
                for k in (
                    "saving_ci",
                    "tokens_saving_ci",
                    "facts_lost_change",
                    "refetch_change",
                    "outcome_change",
                )
            },
            runners_up=runners,
            tied=[
                {"context_token_limit": s.context_token_limit, "keep_recent_tokens": s.keep_recent_tokens}
                for s in tied
            ],
        )
    else:
        s, pr, why = cheapest
        fl = pr["facts_lost_change"]
        if s.same_as(base):
            alt = f"no setting of the grid changes any run: all {len(cands)} are tied with no compaction."
        else:
            alt = (
                f"the cheapest setting, {s.label}, would save {_usd(pr['saving_usd'])} per run "
                "(paired 95% CI "
                f"{_usd(pr['saving_ci'][0])} to {_usd(pr['saving_ci'][1])}; {pr['runs_dearer']} of "
                f"{len(base.cost)} runs dearer) and lose {fl['setting_share']:.0%} of facts "
                f"({fl['share_of_facts_seen']:+.1%} vs no compaction), completing {s.completion:.0%} "
                f"({'; '.join(why)})."
            )
        if base.overflow_runs == 0:
            head = f"Compaction not needed. Your runs peak at {_k(peak_p99)} tokens (p99)"
            if window is not None and net is not None and not net["fires_on_these_traces"]:
                head += (
                    f"; with a {_k(window)} window compaction never needs to fire: set context_token_limit="
                    f"{net['low']}–{net['high']} as a safety net (it never fires on these traces)"
                )
            elif window is not None and net is not None:
                head += (
                    f" and no run overflows the {_k(window)} window without compaction, but with little "
                    f"room: the largest request plus the largest output is {largest_request:,} tokens, so "
                    "even the "
                    f"highest safe limit, context_token_limit={net['high']} (window − output reserve − "
                    f"largest summary), would fire on these traces"
                )
            advice = f"{head}; {alt}"
            out["verdict"] = "compaction-not-needed"
        else:
            advice = (
                f"No setting qualifies: without compaction {base.overflow_runs} of {len(base.cost)} runs "
                f"overflow the window, and no compacting setting meets the tolerances; {alt}"
            )
            out["verdict"] = "no-setting-qualifies"
        out.update(
            recommended=None,
            mean_cost_usd=round(base.mean_cost_usd, 6),
            completion=round(base.completion, 4),
            paired=None,
            runners_up=[],
            tied=[
                {"context_token_limit": x.context_token_limit, "keep_recent_tokens": x.keep_recent_tokens}
                for x in never_fire
            ],
        )
    # the recommendation's (or, with none, the baseline's) own intervals, resampling traces
    shown = ranked[0][0] if ranked else base
    rng = _rng(base.trace_hashes, "intervals " + shown.label)
    out["cost_ci"] = [round(v / 1e6, 6) for v in bootstrap_ci(shown.cost, rng)]
    out["completion_ci"] = [round(v, 4) for v in bootstrap_ci(shown.completed.astype(np.float64), rng)]
    out["never_fire"] = len(never_fire)
    out["advice"] = advice
    return out


def tied_text(rec: dict) -> str:
    """The tied settings as one line (empty when none)."""
    tied = rec.get("tied") or []
    if not tied:
        return ""
    what = "the recommendation" if rec.get("recommended") else "no compaction (they never compact here)"
    names = ", ".join(f"{t['context_token_limit']}/{t['keep_recent_tokens']}" for t in tied)
    return f"tied with {what}, identical on every trace ({len(tied)}): {names}"


def settings_from_results(path) -> list[SettingResult]:
    """The baseline (rows with context_token_limit unset) and every (limit, keep) of a sweep's
    results.parquet, rows in the order ``evaluate`` uses (trace hash, then id)."""
    import pandas as pd

    df = pd.read_parquet(path)
    return settings_from_frame(df, str(path))


def settings_from_frame(df, where: str) -> list[SettingResult]:
    keys = ["policy.context_token_limit", "policy.keep_recent_tokens"]
    if not set(keys) <= set(df.columns):
        raise ConfigError(f"{where}: not a sweep over context_token_limit and keep_recent_tokens")
    if df["cost_microusd"].isna().any():
        raise ConfigError(f"{where}: some runs have no cost (unpriced model); sweep with pricing=MODEL")
    df = df.sort_values(["trace_hash", "trace_id"], kind="stable")

    def one(g, lim, keep) -> SettingResult:
        def col(name: str) -> np.ndarray:
            return g[name].fillna(0).to_numpy(dtype=np.float64) if name in g else np.zeros(len(g))

        outcome = (
            tuple(str(v) for v in g["answer_outcome"])
            if "answer_outcome" in g
            else tuple("complete" if c else "failed" for c in g["answer_completed"])
        )
        return SettingResult(
            lim,
            keep,
            tuple(str(h) for h in g["trace_hash"]),
            col("cost_microusd"),
            col("cumulative_input_tokens"),
            col("facts_seen"),
            col("facts_lost"),
            col("refetch_calls"),
            outcome,
            g["answer_completed"].to_numpy(dtype=bool),
            int((g["finish_reason"] == "context-overflow").sum()),
            col("peak_context_tokens"),
            col("compactions"),
            col("cumulative_output_tokens"),
        )

    unset = df[keys[0]].isna()
    base_rows = df[unset]
    if base_rows.empty:
        raise ConfigError(
            f"{where}: no no-compaction setting (policy.context_token_limit=null) to compare with"
        )
    # the limit unset, keep_recent_tokens has no effect: one baseline (the first keep value)
    first_keep = sorted(base_rows[keys[1]].dropna().unique().tolist())[:1]
    if first_keep:
        base_rows = base_rows[base_rows[keys[1]] == first_keep[0]]
    out = [one(base_rows, None, None)]
    for (lim, keep), g in df[~unset].groupby(keys, sort=True):
        out.append(one(g, int(lim), int(keep)))
    return out


DEMO_TARGET = 0.95  # what `demo` and `report` size against (``size``'s defaults)


BEHAVIOUR_COLUMNS = (("on_missing", "model.on_missing"), ("summarizer", "summarizer"))


def verdict_from_frame(df, where: str, policy_name: str) -> dict:
    """``verdict`` over one policy's rows of a sweep, with ``size``'s default tolerances (no window: a
    sweep's results do not say which window the user ships). A sweep over the mock behaviour
    (``model.on_missing``, ``model.summarizer``) is split by it: the verdict is the default behaviour's
    (refetch, extractive; else the first), and ``sensitivity`` holds every behaviour's."""
    cols = [c for _, c in BEHAVIOUR_COLUMNS if c in df.columns]
    if not cols:
        return verdict(settings_from_frame(df, where), policy_name=policy_name, target=DEMO_TARGET)
    keys = df[cols].astype(str)
    combos = sorted({tuple(r) for r in keys.itertuples(index=False)})
    verdicts = []
    for combo in combos:
        g = df[(keys == list(combo)).all(axis=1)]
        rec = verdict(settings_from_frame(g, where), policy_name=policy_name, target=DEMO_TARGET)
        names = [n for n, c in BEHAVIOUR_COLUMNS if c in df.columns]
        verdicts.append((dict(zip(names, combo, strict=True)), rec))
    default = next(
        (
            r
            for b, r in verdicts
            if b.get("on_missing", "refetch") == "refetch"
            and b.get("summarizer", "extractive") == "extractive"
        ),
        verdicts[0][1],
    )
    out = dict(default)
    out["mock_model"] = next(b for b, r in verdicts if r is default)
    if len(verdicts) > 1:
        out["sensitivity"] = sensitivity(verdicts)
    return out


def verdict_from_results(path, policy_name: str = "seed_engine") -> dict:
    """``verdict`` over a sweep's results.parquet (the sweep of ``demo``'s seed engine, for one)."""
    import pandas as pd

    df = pd.read_parquet(path)
    return verdict_from_frame(df[df["policy"] == policy_name], str(path), policy_name)


def recommendation_line(rec: dict) -> str:
    """The one-line recommendation every command prints the same way."""
    r = rec.get("recommended")
    if r:
        return (
            f"recommended: {rec['policy']} context_token_limit={r['context_token_limit']} "
            f"keep_recent_tokens={r['keep_recent_tokens']}"
        )
    return f"recommended: {rec['policy']} without compaction ({rec['verdict']})"


# ------------------------------------------------------------------------------------------ sensitivity
def sensitivity_behaviours() -> list[dict]:
    """Every ``model.on_missing`` x ``model.summarizer``: the mock behaviours a verdict is checked under."""
    from sim.engine.model import ON_MISSING, SUMMARIZERS

    return [{"on_missing": om, "summarizer": sm} for om in ON_MISSING for sm in SUMMARIZERS]


def sensitivity(verdicts: Sequence[tuple[dict, dict]]) -> dict:
    """One row per mock behaviour (its verdict, recommendation, cost, completion and saving CI) and
    whether the recommendation is the same under all of them."""
    rows = []
    for behaviour, rec in verdicts:
        r = rec.get("recommended")
        rows.append(
            {
                **behaviour,
                "verdict": rec["verdict"],
                "context_token_limit": r["context_token_limit"] if r else None,
                "keep_recent_tokens": r["keep_recent_tokens"] if r else None,
                "mean_cost_usd": rec["mean_cost_usd"],
                "completion": rec["completion"],
                "saving_ci": rec["paired"]["saving_ci"] if rec.get("paired") else None,
                "eligible_settings": rec["eligible_settings"],
            }
        )
    holds = len({(x["verdict"], x["context_token_limit"], x["keep_recent_tokens"]) for x in rows}) == 1
    return {"rows": rows, "holds": holds}


def sensitivity_text(sens: dict) -> str:
    """The sensitivity table's closing sentence."""
    if sens["holds"]:
        return f"The verdict holds under all {len(sens['rows'])} mock behaviours."
    each = [
        f"{x['on_missing']}/{x['summarizer']}: "
        + (
            f"{x['context_token_limit']}/{x['keep_recent_tokens']}"
            if x["context_token_limit"]
            else x["verdict"]
        )
        for x in sens["rows"]
    ]
    return f"The verdict does NOT hold under every mock behaviour ({'; '.join(each)})."
