"""Prompt-cache and cost model: what each request reads from the cache, writes to it, and costs.

Per provider family (``conf/cache/<family>.yaml``), a request reuses the part of its prefix that is
unchanged since the previous request (``stable_prefix_tokens``, tracked by the engine from the first
position a policy changed, never by comparing requests) when that cache entry is still alive (lifetime
from the recorded timestamps, refreshed on every use) and at least the minimum cacheable prefix, in the
family's granularity, times a reuse fraction (1 for explicit and automatic caching; fitted for Gemini's
best-effort implicit caching). Families with explicit writes (Anthropic) write the rest of the view at
the write premium. The residual and the run-status line are never cached: they change every call.
A summary call is a different prompt: nothing is read or written for it.

No modelled count or cost is negative. A request's input is ``max(view + residual + status, 0)`` (the
engine clamps it: a recorded input below the view's event sizes gives a negative residual, and a policy
may shrink the view below it); a read is at most that input, and a write at most the input left after
the read (``min(view, input) - read``), so ``cache_read + cache_write <= input_tokens`` and the uncached
rest is >= 0. The cache still holds the view as sent: only what is billed is cut.

Every figure is modelled, never copied from the recording: the recording's cached tokens serve only to
fit the Gemini parameters (``fit_implicit``) and to score the model (``ctxsim fidelity``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np

from sim.cost.pricing import Price
from sim.util.errors import ConfigError
from sim.util.limits import TIME_MAX, TIME_MIN, count_problem, number_problem
from sim.util.paths import CONF_DIR

CACHE_DIR = CONF_DIR / "cache"


@dataclass(frozen=True)
class CacheRules:
    family: str
    min_prefix_tokens: int
    granularity: int
    lifetime_s: float
    writes: bool  # explicit writes billed at the write price
    reuse_fraction: float
    fitted_on: tuple[str, ...] = ()  # trace ids the parameters were fitted on (the rest is held back)


@cache
def cache_rules(family: str) -> CacheRules:
    f = CACHE_DIR / f"{family}.yaml"
    if not f.is_file():
        raise ConfigError(f"no cache rules for family '{family}' (conf/cache/{family}.yaml)")
    return read_cache_rules(f, family)


def read_cache_rules(f, family: str) -> CacheRules:
    """One family's rules (bounded YAML), every field checked: ConfigError naming the file and key."""
    from sim.util.safeyaml import load_yaml_file

    source = f"conf/cache/{f.name}"
    d = load_yaml_file(f, source)
    d = {} if d is None else d
    if not isinstance(d, dict):
        raise ConfigError(f"{source}: expected a mapping, got {type(d).__name__}")
    for key in ("min_prefix_tokens", "lifetime_s"):
        if key not in d:
            raise ConfigError(f"{source}: {key}: missing")
    checks = (
        ("min_prefix_tokens", count_problem(d["min_prefix_tokens"])),
        ("granularity", count_problem(d.get("granularity", 1)) or _at_least_one(d.get("granularity", 1))),
        ("lifetime_s", number_problem(d["lifetime_s"], 0.0, TIME_MAX - TIME_MIN)),
        ("reuse_fraction", number_problem(d.get("reuse_fraction", 1.0), 0.0, 1.0)),
    )
    for key, p in checks:
        if p is not None:
            raise ConfigError(f"{source}: {key}: {p}")
    writes, fitted = d.get("writes", False), d.get("fitted_on") or ()
    if not isinstance(writes, bool):
        raise ConfigError(f"{source}: writes: expected true or false, got {writes!r}")
    if not isinstance(fitted, list | tuple) or not all(isinstance(x, str) for x in fitted):
        raise ConfigError(f"{source}: fitted_on: expected a list of trace ids")
    return CacheRules(
        family=family,
        min_prefix_tokens=d["min_prefix_tokens"],
        granularity=d.get("granularity", 1),
        lifetime_s=float(d["lifetime_s"]),
        writes=writes,
        reuse_fraction=float(d.get("reuse_fraction", 1.0)),
        fitted_on=tuple(fitted),
    )


def _at_least_one(v) -> str | None:
    return None if v >= 1 else f"expected an integer >= 1, got {v!r}"


class CostModel:
    """Per-run cache state and pricing. ``price`` None: tokens are still split, cost is -1 (unknown)."""

    __slots__ = ("rules", "price", "expires", "cached")

    def __init__(self, rules: CacheRules, price: Price | None) -> None:
        self.rules, self.price = rules, price
        self.expires = -1.0  # time after which the cache entry is gone (-1: nothing cached yet)
        self.cached = 0  # tokens of the prefix held in the cache

    def step(self, summary: bool, t: float, inp: int, view: int, stable: int, out: int):
        """(cache_read, cache_write, uncached, cost_microusd) of one request sent at time ``t``."""
        r = self.rules
        read = write = 0
        if not summary:
            if t <= self.expires and stable >= r.min_prefix_tokens:
                reusable = min(stable, self.cached)
                read = min(int(reusable * r.reuse_fraction) // r.granularity * r.granularity, inp)
            if view >= r.min_prefix_tokens:  # the request's view is cached (a read implies this too)
                if r.writes:
                    write = max(min(view, inp) - read, 0)
                self.cached, self.expires = view, t + r.lifetime_s
        uncached = inp - read - write
        cost = -1 if self.price is None else self.price.cost_microusd(uncached, read, write, out)
        return read, write, uncached, cost


def split_runs(
    rules: CacheRules,
    price: Price | None,
    t: np.ndarray,
    inp: np.ndarray,
    view: np.ndarray,
    stable: np.ndarray,
    out: np.ndarray,
    run_start: np.ndarray,
    summary: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``CostModel.step`` over the requests of many runs laid end to end (no summary calls), each run
    starting with an empty cache: (cache_read, cache_write, uncached, cost_microusd) arrays.
    ``run_start[k]`` is the row where the run of row k starts. The cache entry alive at request k is
    the one the last earlier request of its run with a cacheable view left; everything follows from
    that request's time and size. One pass for a whole corpus: per-run numpy calls would cost more
    than the arithmetic. ``summary``: which rows are summary calls (they neither read nor leave an entry,
    as in ``CostModel.step``). When no request is cacheable, read and write are one read-only array of
    zeros and uncached is ``inp`` itself (a caller reading columns need not sum them again)."""
    n = len(inp)
    cacheable = view >= rules.min_prefix_tokens
    if summary is not None:
        cacheable &= ~summary
    if not cacheable.any():  # no request leaves an entry: nothing is read or written
        read = write = np.zeros(n, dtype=np.int64)
        read.setflags(write=False)
        uncached = inp
    else:
        last = np.maximum.accumulate(np.where(cacheable, np.arange(n), -1))
        prev = np.empty(n, dtype=np.int64)
        prev[:1] = -1
        prev[1:] = last[:-1]  # last cacheable request before k (of any run)
        has = prev >= run_start  # ... and of k's own run
        src = np.where(has, prev, 0)
        alive = has & (t <= t[src] + rules.lifetime_s) & (stable >= rules.min_prefix_tokens)
        reusable = np.minimum(stable, view[src])
        if rules.reuse_fraction != 1.0:
            reusable = np.floor(reusable * rules.reuse_fraction).astype(np.int64)
        if rules.granularity != 1:
            reusable = reusable // rules.granularity * rules.granularity
        if summary is not None:
            alive &= ~summary
        read = np.where(alive, np.minimum(reusable, inp), 0)
        if rules.writes:
            write = np.where(cacheable, np.maximum(np.minimum(view, inp) - read, 0), 0)
        else:
            write = np.zeros(n, dtype=np.int64)
        uncached = inp - read - write
    cost = np.full(n, -1, dtype=np.int64) if price is None else price.cost_all(uncached, read, write, out)
    return read, write, uncached, cost


FIT_MIN_PREFIX_GRID = tuple(range(0, 8192 + 1, 128))  # minimum cacheable prefixes tried, in tokens


def implicit_errors(
    samples: Sequence[tuple[int, bool, int]], min_prefix: int, fraction: float
) -> tuple[float, float, float, float]:
    """How a best-effort cache of ``(min_prefix, fraction)`` predicts (stable prefix, previous view
    alive?, reported cached) samples: (predicted / reported total, then the per-call absolute % error's
    mean, median and p95 over the calls reporting a hit)."""
    s = np.array([x[0] for x in samples], dtype=np.int64)
    alive = np.array([x[1] for x in samples], dtype=bool)
    c = np.array([x[2] for x in samples], dtype=np.int64)
    pred = np.where(alive & (s >= min_prefix), np.floor(s * fraction), 0.0)
    hit = c > 0
    if not hit.any():
        return math.nan, math.inf, math.inf, math.inf
    rel = np.abs(pred[hit] - c[hit]) / c[hit] * 100
    return (
        float(pred.sum()) / float(c.sum()),
        float(rel.mean()),
        float(np.percentile(rel, 50)),
        float(np.percentile(rel, 95)),
    )


def fit_implicit(
    samples: Iterable[tuple[int, bool, int]], candidates: Iterable[int] = FIT_MIN_PREFIX_GRID
) -> tuple[int, float]:
    """Fit (min_prefix_tokens, reuse_fraction) of a best-effort cache on (stable prefix, previous view
    alive?, reported cached) samples. For each candidate minimum (every 128 tokens up to 8,192: the
    coarse 0/1k/2k/4k grid missed the hits reported on 2-4k prefixes) the fraction is the one that
    matches the reported total; the pair kept is the one whose mean per-call absolute % error is
    smallest (a per-call score: a total token error let a 4k minimum miss every hit below it, a p95
    alone ignores the typical call), then p95. Equal errors keep the largest minimum: the data cannot
    tell those minimums apart, and the largest claims no cache hit below what was seen."""
    samples = list(samples)
    reported = sum(c for _, _, c in samples)
    best = None
    for m in candidates:
        eligible = sum(s for s, alive, _ in samples if alive and s >= m)
        if not eligible or not reported:
            continue
        frac = round(reported / eligible, 4)
        _, mean, _, p95 = implicit_errors(samples, m, frac)
        key = (round(mean, 6), round(p95, 6), -m)
        if best is None or key < best[0]:
            best = (key, m, frac)
    if best is None:
        raise ValueError("no samples with a cacheable prefix")
    return best[1], best[2]
