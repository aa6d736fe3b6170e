"""Token counts with provenance: the seed engine's estimate, calibrated estimates, and the split of
provider-reported input tokens into per-event sizes plus a per-call residual.

Why a residual: a provider's input count is not a pure function of the visible history (in the
mini-swe-agent runs some consecutive counts *fall* while the history only grew). Event sizes must stay
non-negative, so what the visible events cannot explain is kept per call and replayed as is.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from functools import lru_cache
from json.encoder import encode_basestring

from sim.cost.names import lookup
from sim.util.errors import ConfigError
from sim.util.limits import MIN_BYTES_PER_TOKEN, number_problem, ratio_problem
from sim.util.paths import CONF_DIR

# Per-message framing (role markers, separators) as bytes, so an empty message still weighs something
# when a provider delta is split across the events it covers.
MESSAGE_OVERHEAD_BYTES = 16
SEED_BYTES_PER_TOKEN = 4.0  # effect-agent: ceil(UTF-8 bytes / 4)


CALIBRATION_FILE = CONF_DIR / "calibration" / "bytes_per_token.yaml"


def _conf_mapping(path, key: str | None = None) -> dict:
    """A calibration file's top-level mapping (or its ``key`` mapping), read with the bounded loader."""
    from sim.util.safeyaml import load_yaml_file

    source = f"conf/calibration/{path.name}"
    data = load_yaml_file(path, source) if path.is_file() else {}
    data = {} if data is None else data
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping, got {type(data).__name__}")
    if key is None:
        return data
    inner = data.get(key) or {}
    if not isinstance(inner, dict):
        raise ConfigError(f"{source}: {key}: expected a mapping of model names, got {type(inner).__name__}")
    return inner


@lru_cache(maxsize=1)
def bytes_per_token_calibration() -> tuple[float, dict[str, float]]:
    """(default, per-model) bytes per token; each a finite ratio >= MIN_BYTES_PER_TOKEN, else ConfigError
    naming the file and key."""
    source = f"conf/calibration/{CALIBRATION_FILE.name}"
    default = _conf_mapping(CALIBRATION_FILE).get("default", SEED_BYTES_PER_TOKEN)
    values = {
        "default": default,
        **{f"models.{m}": v for m, v in _conf_mapping(CALIBRATION_FILE, "models").items()},
    }
    for key, v in values.items():
        if (p := ratio_problem(v)) is not None:
            raise ConfigError(f"{source}: {key}: {p}")
    models = {str(m).lower(): float(v) for m, v in _conf_mapping(CALIBRATION_FILE, "models").items()}
    return float(default), models


def calibrated_bytes_per_token(model: str | None) -> float:
    """The shipped per-model calibration (the name resolved as every table resolves it,
    ``sim.cost.names.lookup``), or the default (the seed's 4 bytes per token) for an unknown model."""
    default, models = bytes_per_token_calibration()
    found = lookup(models, model)
    return default if found is None else found


def fit_bytes_per_token(traces: Iterable) -> dict[str, float]:
    """Per model: framed bytes / tokens pooled over every event whose size derives from provider numbers."""
    acc: dict[str, list[int]] = {}
    for t in traces:
        a = acc.setdefault(t.model or "", [0, 0])
        for e in t.events:
            if e.tokens_provenance in ("derived", "provider"):
                a[0] += e.bytes + MESSAGE_OVERHEAD_BYTES
                a[1] += e.tokens
    return {m: round(b / k, 4) for m, (b, k) in sorted(acc.items()) if k}


def seed_estimate(nbytes: int) -> int:
    """The seed engine's estimate: ceil(UTF-8 bytes of the serialized message / 4)."""
    return -(-nbytes // 4)


def json_bytes(text: str) -> int:
    """UTF-8 bytes of ``text`` as a JSON string, quotes and escapes included (JavaScript's
    ``JSON.stringify``, whose escapes Python's ``json.dumps`` shares): what a text weighs inside a
    serialized message."""
    if type(text) is str:  # what json.dumps(text, ensure_ascii=False) returns, without building an encoder
        return len(encode_basestring(text).encode())
    return len(json.dumps(text, ensure_ascii=False).encode())


def json2_bytes(text: str) -> int:
    """UTF-8 bytes of ``text`` JSON-encoded twice: a JSON string holding the text's JSON text."""
    return json_bytes(json.dumps(text, ensure_ascii=False))


def estimate_tokens(nbytes: int, bytes_per_token: float | None) -> int:
    """Calibrated estimate of one message's size as input, framing included (None: the seed's ratio).
    Every ratio is checked where it is read (trace, calibration); one out of range here is a bug."""
    bpt = SEED_BYTES_PER_TOKEN if bytes_per_token is None else bytes_per_token
    if not (type(bpt) is float and MIN_BYTES_PER_TOKEN <= bpt < math.inf) and ratio_problem(bpt) is not None:
        raise ValueError(f"estimate_tokens: bytes_per_token {bpt!r}: {ratio_problem(bpt)}")
    return math.ceil((nbytes + MESSAGE_OVERHEAD_BYTES) / bpt)


def estimate_tokens_all(nbytes, bytes_per_token: float | None):
    """``estimate_tokens`` of every entry of an integer array (one ratio): the same float division and
    ceiling, so the same counts."""
    import numpy as np

    bpt = SEED_BYTES_PER_TOKEN if bytes_per_token is None else bytes_per_token
    estimate_tokens(0, bpt)  # its check of the ratio
    return np.ceil((np.asarray(nbytes, dtype=np.int64) + MESSAGE_OVERHEAD_BYTES) / bpt).astype(np.int64)


def scale_tokens(tokens: int, old_bytes: int, new_bytes: int) -> int:
    """Size of a cut-down version of the same content: keeps that content's own bytes-per-token."""
    if old_bytes + MESSAGE_OVERHEAD_BYTES <= 0:
        return tokens
    return round(tokens * (new_bytes + MESSAGE_OVERHEAD_BYTES) / (old_bytes + MESSAGE_OVERHEAD_BYTES))


def split_proportional(total: int, weights: Sequence[int]) -> list[int]:
    """Split a non-negative integer total by weights (largest remainder, ties to the earlier item)."""
    if not weights:
        return []
    wsum = sum(weights)
    if wsum <= 0:
        weights, wsum = [1] * len(weights), len(weights)
    raw = [total * w for w in weights]
    parts = [r // wsum for r in raw]
    left = total - sum(parts)
    order = sorted(range(len(weights)), key=lambda i: (-(raw[i] % wsum), i))
    for i in order[:left]:
        parts[i] += 1
    return parts


def isotonic_l1(values: Sequence[int]) -> list[int]:
    """Non-decreasing, non-negative integer fit minimising sum |value - fit| (pool-adjacent-violators
    with block medians). Used for the cumulative visible size of an append-only history: the fit is
    how much of each call's recorded input the visible events can explain."""
    blocks: list[list[int]] = []  # each: sorted values of the pooled calls
    meds: list[int] = []
    counts: list[int] = []
    for v in values:
        blocks.append([max(0, v)])
        meds.append(max(0, v))
        counts.append(1)
        while len(meds) > 1 and meds[-2] > meds[-1]:
            merged = sorted(blocks[-2] + blocks[-1])
            blocks[-2:] = [merged]
            counts[-2:] = [counts[-2] + counts[-1]]
            meds[-2:] = [merged[(len(merged) - 1) // 2]]  # lower median: deterministic, still optimal
    out: list[int] = []
    for m, c in zip(meds, counts, strict=True):
        out.extend([m] * c)
    return out


def derive_sizes(
    event_bytes: Sequence[int],
    view_ends: Sequence[int],
    recorded_inputs: Sequence[int | None],
    bytes_per_token: float | None = None,
) -> tuple[list[int], list[str], list[int], float | None]:
    """Per-event sizes, their provenance, per-call residuals, and the calibrated bytes per token.

    Calls must have non-decreasing ``view_ends`` (append-only history). Each call's recorded input is
    fitted by a non-decreasing cumulative visible size; each step of the fit is split over the events
    that step adds, in proportion to their bytes. Events no recorded call saw get a calibrated estimate.
    """
    n = len(event_bytes)
    sizes = [0] * n
    prov = ["estimate"] * n
    known = [(ve, r) for ve, r in zip(view_ends, recorded_inputs, strict=True) if r is not None]
    fit = isotonic_l1([r for _, r in known])
    # Calls whose fit is flat were pooled (their counts dipped): the events they add share the pool's
    # step, so no event with content is left at zero tokens.
    start, prev_cum, j = 0, 0, 0
    while j < len(known):
        cum = fit[j]
        while j + 1 < len(known) and fit[j + 1] == cum:
            j += 1
        ve = known[j][0]
        if ve > start:
            weights = [event_bytes[i] + MESSAGE_OVERHEAD_BYTES for i in range(start, ve)]
            for k, part in enumerate(split_proportional(cum - prev_cum, weights)):
                sizes[start + k] = part
                prov[start + k] = "derived"
            start, prev_cum = ve, cum
        j += 1
    derived_bytes = sum(event_bytes[i] + MESSAGE_OVERHEAD_BYTES for i in range(start))
    bpt = bytes_per_token
    # a ratio below MIN_BYTES_PER_TOKEN means counts no text explains (image tokens, a broken count):
    # it would make estimates of ordinary text absurd, so the calibration given stays in use
    if prev_cum > 0 and (own := round(derived_bytes / prev_cum, 4)) >= MIN_BYTES_PER_TOKEN:
        bpt = own
    for i in range(start, n):
        sizes[i] = estimate_tokens(event_bytes[i], bpt)
    prefix = [0]
    for s in sizes:
        prefix.append(prefix[-1] + s)
    residuals = [0 if r is None else r - prefix[ve] for ve, r in zip(view_ends, recorded_inputs, strict=True)]
    return sizes, prov, residuals, bpt


# ------------------------------------------------------------------------------ text-only estimates
# Bytes per token varies with content (digits and newlines cost a token each for many tokenizers, words
# about one, indentation little), so a single ratio misses by ~6% per call on the shared runs. The
# character-class estimate counts these classes and weighs them by coefficients fitted per model on
# provider numbers (least squares over the event groups each call adds), which halves that error.
TEXT_FEATURES = ("letters", "digits", "spaces", "newlines", "other", "words", "messages")
TEXT_CALIBRATION_FILE = CONF_DIR / "calibration" / "text_tokens.yaml"


def text_features(text: str) -> tuple[int, ...]:
    """Counts of the character classes of one message (see TEXT_FEATURES)."""
    letters = digits = spaces = newlines = words = 0
    in_word = False
    for ch in text:
        if ch.isascii() and ch.isalpha():
            letters += 1
            if not in_word:
                words += 1
            in_word = True
            continue
        in_word = False
        if ch.isdigit():
            digits += 1
        elif ch == " ":
            spaces += 1
        elif ch == "\n":
            newlines += 1
    other = len(text) - letters - digits - spaces - newlines
    return letters, digits, spaces, newlines, other, words, 1


@lru_cache(maxsize=1)
def text_calibration() -> dict[str, tuple[float, ...]]:
    """Per model: one finite coefficient per TEXT_FEATURES entry, else ConfigError naming file and key."""
    source = f"conf/calibration/{TEXT_CALIBRATION_FILE.name}"
    out = {}
    for m, c in _conf_mapping(TEXT_CALIBRATION_FILE, "models").items():
        if not isinstance(c, list) or len(c) != len(TEXT_FEATURES):
            raise ConfigError(
                f"{source}: models.{m}: expected a list of {len(TEXT_FEATURES)} numbers, got {c!r}"
            )
        for i, x in enumerate(c):
            if (p := number_problem(x, -1000.0, 1000.0)) is not None:
                raise ConfigError(f"{source}: models.{m}[{i}] ({TEXT_FEATURES[i]}): {p}")
        out[str(m).lower()] = tuple(float(x) for x in c)
    return out


def text_coefficients(model: str | None) -> tuple[float, ...] | None:
    """The shipped character-class coefficients of a model (resolved by ``sim.cost.names.lookup``), or
    None."""
    return lookup(text_calibration(), model)


def estimate_text_tokens(text: str, coefficients: Sequence[float]) -> int:
    return max(0, round(sum(f * c for f, c in zip(text_features(text), coefficients, strict=True))))


def fit_text_estimator(traces: Iterable) -> dict[str, tuple[float, ...]]:
    """Per model: least-squares coefficients of TEXT_FEATURES over the event groups that each recorded
    call adds (target: the tokens derived from the provider's counts for that group)."""
    import numpy as np

    rows: dict[str, tuple[list, list]] = {}
    for t in traces:
        x, y = rows.setdefault(t.model or "", ([], []))
        start = 0
        for c in t.calls:
            group = [t.events[i] for i in range(start, c.view_end)]
            if group and all(e.content is not None and e.tokens_provenance == "derived" for e in group):
                feats = [text_features(e.content) for e in group]
                x.append([sum(col) for col in zip(*feats, strict=True)])
                y.append(sum(e.tokens for e in group))
            start = max(start, c.view_end)
    out = {}
    for model, (x, y) in sorted(rows.items()):
        if len(y) >= len(TEXT_FEATURES):
            coef, *_ = np.linalg.lstsq(np.array(x, dtype=float), np.array(y, dtype=float), rcond=None)
            out[model] = tuple(round(float(v), 4) for v in coef)
    return out
