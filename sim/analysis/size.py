"""``ctxsim size``: which ``context_token_limit`` and ``keep_recent_tokens`` to ship, from the user's own
traces, compared with doing nothing. This module replays the grid (``evaluate``); the paired comparisons
are ``sim.analysis.paired``'s, the recommendation ``sim.analysis.verdict``'s, the runaway budgets and the
keep check ``sim.analysis.sizing_checks``'.

Every setting of the grid replays every trace, and so does the **baseline**: the same policy with its
limit unset (no compaction). ``sim.engine.dispatch.grid_route`` says which runs the grid path replays
under every setting at once and which each setting replays through ``replay_many``.

The grid follows the seed's sizing guidance: a limit stays below the window by the output reserve (the
traces' largest recorded output) plus the largest summary the policy can write, so no grid point sits
at the window. An Optuna search is not used: the grid is small and exhaustive.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from functools import partial

import numpy as np

from sim.analysis.setting_results import SettingResult
from sim.core.types import Trace
from sim.util.errors import ConfigError

DEFAULT_LIMITS = (16000, 24000, 32000, 48000, 64000, 96000, 128000, 200000)  # SeedEngine.size_grid's
DEFAULT_KEEPS = (2000, 4000, 8000, 12000, 16000, 20000)
Progress = Callable[[int, int, str], None]  # (done, total, what): a sizing's progress
GRID_BATCH = 256  # runs a grid pass takes at once when the batches are dealt to workers
# in one process a pass takes up to this many lanes (settings x runs; bounds their memory) and at most
# ``ONE_PROCESS_RUNS`` runs: a pass's cost is mostly per call position, so fewer, wider passes cost less
# (500 runs x 396 settings: one pass, not two; ~0.06 s of ~0.5 s)
GRID_LANES = 1 << 18
ONE_PROCESS_RUNS = 1024
# the work a sizing forks workers for (``workers`` > 1): (setting, run) pairs on the grid path, and runs on
# the per-call loop; below these one process is cheaper than a fork (the answer is the same either way).
# The grid forks only for work of more than two one-process passes: a pass costs mostly per call
# position, so two forked batches of a grid one wide pass holds cost more CPU and no less wall time
# (500 SWE-like runs x 395 settings on 2 cores: one process 1.48 s wall, 1.76 s CPU; two workers
# 1.98 s wall, 2.29 s CPU)
FORK_LANES = 2 * GRID_LANES
FORK_LOOP_RUNS = 64


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
    progress: Progress | None = None,
    behaviour: dict | None = None,
    grid: bool = True,
    workers: int = 1,
) -> list[SettingResult]:
    """The baseline (limit unset) first, then every (limit, keep) with keep < limit. Every setting of a
    trace is replayed at once on the grid path where the dispatcher routes it there
    (``sim.engine.dispatch.grid_route``); the runs it declines or hands back go to ``replay_many`` (the
    per-call loop for the seed engine), setting by setting. ``grid=False`` replays everything that way
    (the reference the grid path is held to). ``workers``: processes the grid batches, then the settings
    with runs for the loop, are dealt to (``sim.util.forkmap``: the same answer for any number; one
    process takes wider batches, each run's figures being its own whatever batch it is in)."""
    settings: list[tuple[int | None, int | None]] = [(None, None)]
    settings += [(lim, keep) for lim in limits for keep in keeps if keep < lim]
    if len(settings) == 1:
        raise ConfigError("size: no setting with keep_recent_tokens < context_token_limit in the grid")
    policies, keys = _seed_settings(policy_name, settings)
    return _replay(traces, policies, keys, window, pricing, progress, behaviour, grid, workers)


def _seed_settings(
    policy_name: str, settings: list[tuple[int | None, int | None]]
) -> tuple[list, list[dict]]:
    """The seed engine's (limit, keep) settings as policies, and what each ``SettingResult`` is named by."""
    from sim.policies.base import make_policy

    policies = [
        make_policy(
            policy_name, **({} if lim is None else {"context_token_limit": lim, "keep_recent_tokens": keep})
        )
        for lim, keep in settings
    ]
    return policies, [{"context_token_limit": lim, "keep_recent_tokens": keep} for lim, keep in settings]


def policy_grid(policy_name: str, grid: dict[str, Sequence[int | float]]) -> tuple[list, list[dict]]:
    """Another policy's sizing (``size --policy``): its baseline — the policy switched off
    (``Policy.size_off``), or ``raw`` where it has no off — then every combination of ``grid``'s values
    (one or two knobs, in the order given), as policies, and what each ``SettingResult`` is named by
    (its knobs, and its gentleness: ``Policy.size_harsher`` knobs count down)."""
    from itertools import product

    from sim.policies.base import make_policy, policy_class

    cls = policy_class(policy_name)
    names = list(grid)
    off = cls.size_off
    policies = [make_policy(policy_name, **off) if off is not None else make_policy("raw")]
    keys: list[dict] = [_generic_key(tuple((k, None) for k in names), ())]
    for values in product(*grid.values()):
        knobs = tuple(zip(names, values, strict=True))
        policies.append(make_policy(policy_name, **dict(knobs)))
        gentle = tuple(-v if k in cls.size_harsher else v for k, v in knobs)
        keys.append(_generic_key(knobs, gentle))
    return policies, keys


def _generic_key(knobs: tuple, gentle: tuple) -> dict:
    return {"context_token_limit": None, "keep_recent_tokens": None, "knobs": knobs, "gentle": gentle}


def evaluate_policy(
    traces: Sequence[Trace],
    policy_name: str,
    grid: dict[str, Sequence[int | float]],
    window: int | str | None,
    pricing: str | None,
    progress: Progress | None = None,
    behaviour: dict | None = None,
    loop: bool = False,
    workers: int = 1,
) -> list[SettingResult]:
    """``evaluate`` for another policy's grid (``policy_grid``): its baseline first, then every setting;
    ``loop``: every run on the per-call loop (the reference any faster path is held to)."""
    policies, keys = policy_grid(policy_name, grid)
    return _replay(traces, policies, keys, window, pricing, progress, behaviour, not loop, workers, loop)


def policy_reference(
    traces: Sequence[Trace],
    policy_name: str,
    grid: dict[str, Sequence[int | float]],
    pricing: str | None,
    behaviour: dict | None = None,
    workers: int = 1,
) -> SettingResult:
    """``reference`` for another policy's grid: its baseline replayed with no window."""
    policies, keys = policy_grid(policy_name, grid)
    return _replay(traces, policies[:1], keys[:1], None, pricing, None, behaviour, True, workers)[0]


def reference(
    traces: Sequence[Trace],
    policy_name: str,
    pricing: str | None,
    behaviour: dict | None = None,
    workers: int = 1,
) -> SettingResult:
    """The baseline (limit unset) replayed with no window: what the runs cost when none stops early at
    an overflow, the cost reference of a verdict where no compaction overflows the window (one more
    setting, on the grid path where the dispatcher routes it there)."""
    policies, keys = _seed_settings(policy_name, [(None, None)])
    return _replay(traces, policies, keys, None, pricing, None, behaviour, True, workers)[0]


def _replay(
    traces: Sequence[Trace],
    policies: list,
    keys: list[dict],
    window: int | str | None,
    pricing: str | None,
    progress: Progress | None,
    behaviour: dict | None,
    grid: bool,
    workers: int,
    per_call: bool = False,
) -> list[SettingResult]:
    """``policies`` (the settings; ``keys``: what each one's ``SettingResult`` is named by) replayed over
    ``traces`` as ``evaluate`` says; ``per_call``: every run through the per-call loop itself
    (``loop_one``), not ``replay_many``'s batch path."""
    from sim.engine.dispatch import grid_route
    from sim.engine.model import ReplayModel
    from sim.util.forkmap import forked_map

    order, hashes = _order(traces)
    ordered = [traces[i] for i in order]
    models = [ReplayModel(t, **(behaviour or {})) for t in ordered]  # no run state: shared by the settings
    # a fork costs CPU (its pages copied as they are written): only work that pays for it is dealt out
    grid_workers = workers if len(policies) * len(ordered) >= FORK_LANES else 1
    batch = (
        GRID_BATCH
        if grid_workers > 1
        else max(GRID_BATCH, min(ONE_PROCESS_RUNS, GRID_LANES // len(policies)))
    )
    route = grid_route(ordered, policies, models, pricing, batch, grid)
    route = route._replace(batches=_alike_lengths(route.batches, ordered, batch))
    if grid_workers > 1 and len(route.batches) > 1:
        _tables_here(ordered, policies[0], route.batches)
    sizing = _Sizing(len(policies), len(ordered), route.loop)
    runs = _Runs(ordered, policies, models, window, pricing, per_call)
    sizing.take_grid(route.batches, forked_map(runs.grid_batch, route.batches, grid_workers), progress)
    looped = [j for j, positions in enumerate(sizing.todo) if positions]
    loop_workers = workers if sum(len(sizing.todo[j]) for j in looped) >= FORK_LOOP_RUNS else 1
    job = partial(runs.loop_setting, sizing.todo)
    if progress:  # this process's share of the settings, each counted as the share of all it stands for
        job = partial(_counted, job, progress, len(looped), min(loop_workers, len(looped)), os.getpid(), [0])
    sizing.take_loop(looped, _loop_settings(job, looped, loop_workers))
    return sizing.results(keys, ordered, hashes)


def _loop_settings(job: Callable, looped: list[int], workers: int) -> list:
    """``[job(j) for j in looped]``, dealt to ``workers`` processes. Before forking, one setting (the first
    that is not the baseline, which may switch the policy off and read nothing) is replayed here: the
    per-trace tables every setting reads (decoded events, a planner's tables, the batch's arrays) are then
    built once and inherited, where each worker would build its own (500 SWE-like runs,
    openhands_amortized_forgetting, 2 workers: ~0.6 s of CPU less)."""
    from sim.util.forkmap import forked_map

    if workers <= 1 or len(looped) < 2:
        return forked_map(job, looped, workers)
    first = next((j for j in looped if j > 0), looped[0])
    here = job(first)
    rest = [j for j in looped if j != first]
    answers = dict(zip(rest, forked_map(job, rest, workers), strict=True))
    answers[first] = here
    return [answers[j] for j in looped]


def _alike_lengths(batches: list, ordered: Sequence[Trace], size: int) -> list:
    """The grid batches cut again so that each holds runs of like length, longest first (runs priced
    alike stay together; ``size`` runs a batch, as before): a pass costs mostly per call position, up to
    its longest run, so a batch of the shortest runs ends early (500 runs, two forked batches: ~0.1 s
    less CPU than two batches each reaching the longest run). Each run's figures are its own whatever
    batch it is in."""
    if len(batches) < 2:
        return batches
    groups: dict[tuple[int, int], tuple] = {}
    for rules, price, chunk in batches:
        groups.setdefault((id(rules), id(price)), (rules, price, []))[2].extend(chunk)
    out = []
    for rules, price, positions in groups.values():
        positions.sort(key=lambda p: -len(ordered[p].arrays.view_end))  # (stable: ties in their order)
        out += [(rules, price, positions[lo : lo + size]) for lo in range(0, len(positions), size)]
    return out


def _tables_here(ordered: Sequence[Trace], proto, batches: list) -> None:
    """The seed engine's per-trace tables of every run on the grid path, built in this process before its
    batches are forked: each child inherits them, where tables a child builds die with it (and the
    no-window reference, forked again, would build them again)."""
    from sim.policies.seed_engine import SeedEngine

    if type(proto) is not SeedEngine:
        return
    from sim.engine.fast.seed_static import grid_statics

    for _, _, chunk in batches:
        grid_statics([ordered[p] for p in chunk], proto)


def _counted(job: Callable, progress: Progress, total: int, workers: int, parent: int, done: list, j: int):
    """``job(j)``, then the progress of the settings on the per-call loop: only this process reports, and
    its share of them (every ``workers``-th) stands for all."""
    out = job(j)
    if os.getpid() == parent:
        done[0] += 1
        progress(min(done[0] * max(workers, 1), total), total, "settings on the per-call loop")
    return out


class _Runs:
    """What a sizing replays, one batch of the grid path or one setting's runs on ``replay_many`` at a
    time (each a job for ``forked_map``)."""

    def __init__(self, ordered, policies, models, window, pricing, per_call: bool = False) -> None:
        self.ordered, self.policies, self.models = ordered, policies, models
        self.window, self.pricing, self.per_call = window, pricing, per_call

    def grid_batch(self, job: tuple) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """One batch of ``grid_route`` on the grid path: which lanes stayed on it, and their sums."""
        from sim.engine.dispatch import grid_figures_of
        from sim.util import interrupts

        interrupts.check()  # between batches: a swallowed Ctrl-C stops the grid here (sim.util.interrupts)
        rules, price, chunk = job
        ts, ms = [self.ordered[p] for p in chunk], [self.models[p] for p in chunk]
        return grid_figures_of(ts, self.policies, ms, self.window, rules, price)

    def loop_setting(self, todo: list[list[int]], j: int) -> list[tuple]:
        """Setting j's runs in ``todo[j]`` through ``replay_table`` (the batch path where the policy plans,
        else the per-call loop); per trace: its figures, priced, outcome, completed, overflowed. The
        metrics are read from the table's columns (``table_metric_columns``: the records' own, without
        building a record for a run the batch path replayed); a run on the batch path never overflows
        (one over its window takes the loop, whose record says how it ended)."""
        from sim.engine.dispatch import loop_one, replay_table
        from sim.metrics.compute import compute_metric_columns, table_metric_columns
        from sim.util import interrupts

        interrupts.check()
        positions = todo[j]
        ts, ms = [self.ordered[p] for p in positions], [self.models[p] for p in positions]
        if self.per_call:
            pol, win, price = self.policies[j], self.window, self.pricing
            records = [loop_one(t, pol, m, None, win, price) for t, m in zip(ts, ms, strict=True)]
            cols = compute_metric_columns(records)
            overflowed = [r.finish_reason == "context-overflow" for r in records]
        else:
            table = replay_table(ts, self.policies[j], ms, self.window, self.pricing, lanes=False)
            cols = table_metric_columns(table)
            overflowed = [False] * len(ts)
            for p, r in table.loop.items():
                overflowed[p] = r.finish_reason == "context-overflow"
        figures = [[v or 0 for v in cols[name]] for name in _FIGURES]
        return [
            (list(values), cost is not None, str(answer), bool(complete), over)
            for values, cost, answer, complete, over in zip(
                zip(*figures, strict=True), cols["cost_microusd"], cols["answer_outcome"],
                cols["answer_completed"], overflowed, strict=True,
            )
        ]  # fmt: skip


class _Sizing:
    """The figures of every (setting, trace) as the grid path and the loop give them; a run on the grid
    path completes (it replays no trace with facts)."""

    def __init__(self, S: int, n: int, loop: list[int]) -> None:
        self.n = n
        self.figures = {name: np.zeros((S, n), dtype=np.float64) for name in _FIGURES}
        self.priced = np.ones((S, n), dtype=bool)
        self.outcome = [["complete"] * n for _ in range(S)]
        self.completed = np.ones((S, n), dtype=bool)
        self.overflow = [0] * S
        self.todo: list[list[int]] = [list(loop) for _ in range(S)]  # per setting: the runs the loop replays

    def take_grid(self, jobs: list, results: list, progress: Progress | None) -> None:
        """The grid path's batches: their sums, and the lanes that left the grid to the loop's ``todo``."""
        done = 0
        for (_, price, chunk), (ok, sums) in zip(jobs, results, strict=True):
            cols = np.array(chunk)
            for name, key in _FIGURES.items():
                if key is not None:
                    self.figures[name][:, cols] = sums[key]
            if price is None:
                self.priced[:, cols] = False
            for j, r in zip(*np.nonzero(~ok), strict=True):  # lanes that left the grid
                self.todo[int(j)].append(chunk[int(r)])
            done += len(chunk)
            if progress:
                progress(done, self.n, "runs on the grid path")
        for todo_j in self.todo:
            todo_j.sort()

    def take_loop(self, looped: list[int], results: list) -> None:
        """The loop's runs of each setting in ``looped`` (``_Runs.loop_setting``)."""
        for j, runs in zip(looped, results, strict=True):
            for p, (values, is_priced, answer, complete, overflowed) in zip(self.todo[j], runs, strict=True):
                for name, v in zip(_FIGURES, values, strict=True):
                    self.figures[name][j, p] = v
                self.priced[j, p] = is_priced
                self.outcome[j][p] = answer
                self.completed[j, p] = complete
                self.overflow[j] += overflowed

    def results(self, keys: list[dict], ordered: Sequence[Trace], hashes: list[str]) -> list[SettingResult]:
        """Every setting's ``SettingResult`` (``keys``: its knobs); a setting with an unpriced run is
        refused."""
        out = []
        for j, key in enumerate(keys):
            if not self.priced[j].all():
                t = ordered[int(np.flatnonzero(~self.priced[j])[0])]
                raise ConfigError(
                    f"size: trace {t.trace_id} (model {t.model!r}) has no price; choose one with --model"
                )
            f = {name: self.figures[name][j] for name in _FIGURES}
            out.append(
                SettingResult(
                    key["context_token_limit"],
                    key["keep_recent_tokens"],
                    tuple(hashes),
                    f["cost_microusd"],
                    f["cumulative_input_tokens"],
                    f["facts_seen"],
                    f["facts_lost"],
                    f["refetch_calls"],
                    tuple(self.outcome[j]),
                    self.completed[j],
                    self.overflow[j],
                    f["peak_context_tokens"],
                    f["compactions"],
                    f["cumulative_output_tokens"],
                    key.get("knobs", ()),
                    key.get("gentle", ()),
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
