"""Each setting against the baseline, paired on the same traces: per-trace differences of cost,
cumulative input tokens, facts lost and refetch calls, with percentile bootstrap 95% intervals over
traces (whole traces resampled).

**Common random numbers.** Every setting is resampled on the *same* 2,000 bootstrap draws: one generator,
seeded from a SHA-256 of the traces' content hashes (``RESAMPLES_KEY``), draws the resampled traces
once; their counts (how often each trace is drawn in each resample, a ``BOOTSTRAP x n`` matrix) times
the per-trace differences of every setting (``n x settings``) give every resampled mean in one matrix
product. Until issue 40 each setting drew its own resamples from a generator seeded by its label. Issue
40 asked for "the same numbers, seeded as today" *and* for the bootstraps of 400 settings within 1x the
bare grid kernel's CPU; the two conflict: drawing 400 separate 2,000 x 500 index arrays alone costs ~11x
the kernel before any mean is taken (docs/performance.md). Shared draws are also the better design for
comparing settings: two settings' intervals then differ only by how the settings differ, not by which
traces each happened to draw (the settings are paired with each other as well as with the baseline), and
a setting's interval does not depend on which other settings are sized beside it. Same inputs, same
bytes: no global seed is touched, and nothing depends on the number of processes."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache

import numpy as np

from sim.analysis.setting_results import OUTCOMES, SettingResult
from sim.util.errors import ConfigError

BOOTSTRAP = 2000
RESAMPLES_KEY = "paired resamples"  # the key of the one stream every setting's bootstrap is drawn from
PERCENTILES = (2.5, 97.5)


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
    lo, hi = percentile_rows(means[None, :]).ravel().tolist()
    return lo, hi


def bootstrap_ci(values: np.ndarray, rng: np.random.Generator, n: int = BOOTSTRAP) -> tuple[float, float]:
    """95% percentile interval of the mean, resampling traces with replacement."""
    return _ci(values, rng.integers(0, len(values), size=(n, len(values))))


def resample_indices(hashes: Sequence[str], n_boot: int = BOOTSTRAP) -> np.ndarray:
    """The shared resamples: ``n_boot`` rows of ``len(hashes)`` trace positions drawn with replacement,
    from the one generator ``RESAMPLES_KEY`` seeds (every setting's bootstrap reads these)."""
    n = len(hashes)
    return Seeds(hashes)(RESAMPLES_KEY).integers(0, n, size=(n_boot, n))


def resample_counts(hashes: Sequence[str], n_boot: int = BOOTSTRAP) -> np.ndarray:
    """``resample_indices`` as counts: (resamples, traces) float64, how often each trace is drawn in each
    resample (a resampled sum is then ``counts @ values``, exact for integer values below 2**53). Its
    memory at most twice the indices' (the bootstrap of one setting held as much before)."""
    idx = resample_indices(hashes, n_boot)
    B, n = idx.shape
    idx += (np.arange(B, dtype=np.int64) * n)[:, None]  # resample b's traces at b*n + position
    counts = np.bincount(idx.ravel(), minlength=B * n)
    del idx
    return counts.reshape(B, n).astype(np.float64)


def percentile_rows(a: np.ndarray, q: Sequence[float] = PERCENTILES) -> np.ndarray:
    """``np.percentile(a, q, axis=1)`` (its default, linear method) bit for bit, as (len(q), rows), for a
    NaN-free float ``a``, which it sorts in place: numpy's call selects the order statistics it reads with
    a partition, which on rows of 2,000 takes about three times as long as numpy's vectorised sort (and
    its first call imports ``numpy.ma``, ~10 ms)."""
    B = a.shape[1]
    vi = np.true_divide(np.asarray(q, dtype=np.float64), 100) * (B - 1)  # numpy's virtual indexes
    prev = np.floor(vi)
    gamma = vi - prev
    lo = np.where(vi >= B - 1, B - 1, prev.astype(np.intp))  # at or past the last: the largest
    hi = np.minimum(lo + 1, B - 1)
    a.sort(axis=1)
    out = np.empty((len(vi), a.shape[0]), dtype=np.float64)
    for i in range(len(vi)):  # numpy's _lerp: a + (b - a) * t, or b - (b - a) * (1 - t) from t = 0.5
        x, y, t = a[:, lo[i]], a[:, hi[i]], gamma[i]
        d = y - x
        out[i] = y - d * (1 - t) if t >= 0.5 else x + d * t
    return out


def paired(base: SettingResult, s: SettingResult) -> dict:
    """The setting against the baseline on the same traces: savings (baseline − setting; positive is
    cheaper) and changes (setting − baseline) with 95% paired bootstrap intervals."""
    return paired_many(base, [s])[0]


def _paired_diffs(base: SettingResult, settings: Sequence[SettingResult]) -> list[np.ndarray]:
    """The per-trace differences ``paired`` resamples, one (settings, traces) array per figure, in their
    recorded units: saving (micro-USD), tokens saved, facts lost and refetch calls added (integers, so
    resampled sums are exact)."""

    def rows(name: str) -> np.ndarray:
        return np.array([getattr(s, name) for s in settings], dtype=np.float64).reshape(len(settings), -1)

    return [
        base.cost - rows("cost"),
        base.tokens - rows("tokens"),
        rows("facts_lost") - base.facts_lost,
        rows("refetch") - base.refetch,
    ]


# what a figure's percentiles are divided by for the answer (the saving is resampled in micro-USD)
_SCALE = (1e6, 1.0, 1.0, 1.0)


def _paired_bounds(hashes: Sequence[str], diffs: list[np.ndarray]) -> np.ndarray:
    """Per figure and setting (4, settings, 2): the (2.5%, 97.5%) percentiles of the setting's mean
    difference over the shared resamples. Every (figure, setting) that moves is one row of a matrix
    product with the resample counts; a difference zero on every trace is [0, 0] and draws nothing, and
    with none moving nothing is drawn at all."""
    S, n = diffs[0].shape
    out = np.zeros((4, S, 2), dtype=np.float64)
    moved = [d.any(axis=1) for d in diffs]
    values = np.concatenate([d[m] for d, m in zip(diffs, moved, strict=True)])  # one row per moving column
    if not len(values):
        return out
    counts = resample_counts(hashes)
    with one_blas_thread():
        means = values @ counts.T  # (columns, resamples): each resample's sum ...
    means /= n  # ... and its mean, as ``values[idx].mean(axis=1)`` gives it
    bounds = percentile_rows(means)
    at = 0
    for f, m in enumerate(moved):
        k = int(m.sum())
        out[f, m] = bounds[:, at : at + k].T / _SCALE[f]
        at += k
    return out


def paired_many(base: SettingResult, settings: Sequence[SettingResult]) -> list[dict]:
    """``[paired(base, s) for s in settings]``, the same numbers: every setting on the shared resamples
    (the module's docstring), their means one matrix product in this process (forking it to workers
    would cost more than the product)."""
    for s in settings:
        if base.trace_hashes != s.trace_hashes:
            raise ConfigError(f"size: setting {s.label} did not run the baseline's traces")
    if not settings:
        return []
    diffs = _paired_diffs(base, settings)
    bounds = _paired_bounds(base.trace_hashes, diffs).tolist()
    saving, tokens, lost, refetch = (d.mean(axis=1).tolist() for d in (diffs[0] / 1e6, *diffs[1:]))
    dearer = (diffs[0] < 0).sum(axis=1).tolist()
    base_share, base_outcomes = base.facts_lost_share, Counter(base.outcome)
    out = []
    for j, s in enumerate(settings):

        def interval(f: int, dp: int, j=j) -> list[float]:
            return [round(x, dp) for x in bounds[f][j]]

        share = s.facts_lost_share
        out.append(
            {
                "saving_usd": round(saving[j], 6),
                "saving_ci": interval(0, 6),
                "tokens_saving": round(tokens[j], 1),
                "tokens_saving_ci": interval(1, 1),
                "runs_dearer": dearer[j],
                "facts_lost_change": {
                    "per_run": round(lost[j], 3),
                    "per_run_ci": interval(2, 3),
                    "share_of_facts_seen": round(share - base_share, 4),
                    "setting_share": round(share, 4),
                },
                "refetch_change": {"per_run": round(refetch[j], 3), "per_run_ci": interval(3, 3)},
                "outcome_change": _outcome_change(base_outcomes, s.outcome, base.outcome),
            }
        )
    return out


def _outcome_change(base: Counter, outcome: tuple[str, ...], base_outcome: tuple[str, ...]) -> dict[str, int]:
    """Per answer outcome, the setting's runs less the baseline's (no count where they are the same)."""
    if outcome == base_outcome:
        return dict.fromkeys(OUTCOMES, 0)
    mine = Counter(outcome)
    return {o: mine[o] - base[o] for o in OUTCOMES}


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """numpy's OpenBLAS on one thread within: the product of the bootstraps is small enough that a second
    BLAS thread only spins (measured: twice the CPU for the same wall time, and more on a loaded machine),
    and ``size`` parallelises with processes (``--workers``), never with BLAS threads. The numbers do not
    change (a sum of integers is exact in any order). Without numpy's bundled OpenBLAS, nothing changes."""
    calls = _openblas_threads()
    if calls is None:
        yield
        return
    get, set_ = calls
    before = get()
    set_(1)
    try:
        yield
    finally:
        set_(before)


@lru_cache(maxsize=1)
def _openblas_threads():
    """(get, set) of the thread count of the OpenBLAS numpy ships (numpy.libs), or None."""
    import ctypes
    from pathlib import Path

    libs = sorted((Path(np.__file__).resolve().parent.parent / "numpy.libs").glob("libscipy_openblas*.so*"))
    for path in libs:
        try:
            lib = ctypes.CDLL(str(path))
        except OSError:
            continue
        for get_name, set_name in (
            ("scipy_openblas_get_num_threads64_", "scipy_openblas_set_num_threads64_"),
            ("scipy_openblas_get_num_threads", "scipy_openblas_set_num_threads"),
            ("openblas_get_num_threads64_", "openblas_set_num_threads64_"),
            ("openblas_get_num_threads", "openblas_set_num_threads"),
        ):
            get, set_ = getattr(lib, get_name, None), getattr(lib, set_name, None)
            if get is not None and set_ is not None:
                get.restype, get.argtypes = ctypes.c_int, []
                set_.restype, set_.argtypes = None, [ctypes.c_int]
                return get, set_
    return None
