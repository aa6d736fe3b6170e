"""Each setting against the baseline, paired on the same traces: per-trace differences of cost,
cumulative input tokens, facts lost and refetch calls, with percentile bootstrap 95% intervals over
traces (whole traces resampled). The generator is seeded from a SHA-256 of the traces' content hashes
and the setting, so the same inputs give the same intervals and no global seed is touched."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from sim.analysis.setting_results import OUTCOMES, SettingResult
from sim.util.errors import ConfigError

BOOTSTRAP = 2000


def seeded_rng(hashes: Sequence[str], key: str) -> np.random.Generator:
    """A generator seeded from the traces' content hashes and ``key``: the same inputs, the same draws."""
    return Seeds(hashes)(key)


class Seeds:
    """``seeded_rng(hashes, key)`` for many keys over the same traces: the SHA-256 of the hashes' text is
    taken once and copied per key (the same digest as hashing the whole text)."""

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
    seeds = Seeds(base.trace_hashes)
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
