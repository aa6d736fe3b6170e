"""The ranges every number ctxsim reads must lie in, and one wording of why a value does not.

Why these bounds: token counts are kept as int64 (numpy columns, Arrow, Parquet) and some sums go
through float64 weights, so a count must be exact in a double: below 2^53. Times are unix seconds that
``datetime`` can represent (years 1 to 9999), so an importer can always turn one into a date and back,
and differences of two stay finite. Sums over a run (cumulative tokens, cost in micro-USD) must not wrap
int64: a trace whose worst case (``trace_token_bound``) reaches ``MAX_TRACE_TOKENS`` is refused at load.
That keeps a run's token sums near 2^40 and its cost near 2^50 micro-USD at the highest price the tables
may hold (``MAX_USD_PER_MTOK``), a margin of 2^13 or more for policy-made text and re-read copies before
2^63; a replay whose calls x largest count still reaches ``MAX_RUN_TOKENS`` is refused
(``sim.engine.common.check_sums``,
``sim.engine.fast.batch``), never wrapped. A bytes-per-token
ratio must be at least ``MIN_BYTES_PER_TOKEN``: a smaller one would make an estimate of a few bytes of
text a count past 2^53 (no tokenizer spends a hundred tokens on one byte).
"""

from __future__ import annotations

import math

from sim.util.errors import ConfigError

MAX_COUNT = 2**53 - 1  # counts are integers in [0, 2^53)
MAX_TRACE_TOKENS = 2**40  # a trace's worst case must stay below this (see trace_token_bound)
MAX_RUN_TOKENS = 2**51  # a replayed run's rows x its largest count must stay below this (run_sum_problem)
MIN_BYTES_PER_TOKEN = 0.01
# a call's usage counts (a Call's fields, and an importer's Usage): each may be absent, none negative
USAGE_COUNTS = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
)
MAX_USD_PER_MTOK = 1000.0  # prices above $1,000 per million tokens are refused (the dearest list ~$600)
TIME_MIN = -62135596800.0  # 0001-01-01T00:00:00Z
TIME_MAX = 253402300799.0  # 9999-12-31T23:59:59Z
MAX_YAML_BYTES = 8 << 20  # a YAML file a user did not necessarily write (sim.util.safeyaml); read whole below


def count_problem(v, allow_negative: bool = False) -> str | None:
    """Why ``v`` is not a token count (an integer in [0, 2^53); in (-2^53, 2^53) if ``allow_negative``),
    or None when it is one."""
    if isinstance(v, bool) or not isinstance(v, int):
        return f"expected an integer, got {_describe(v)}"
    lo = -MAX_COUNT if allow_negative else 0
    if v < lo or v > MAX_COUNT:
        rng = "(-2^53, 2^53)" if allow_negative else "[0, 2^53)"
        return f"expected an integer in {rng}, got {_short(v)}"
    return None


def number_problem(v, lo: float | None = None, hi: float | None = None, lo_open: bool = False) -> str | None:
    """Why ``v`` is not a finite number in [lo, hi] (``lo_open``: (lo, hi]), or None."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        return f"expected a number, got {_describe(v)}"
    try:
        f = float(v)
    except OverflowError:
        return f"expected a finite number, got an integer of {len(str(abs(v)))} digits"
    if not math.isfinite(f):
        return f"expected a finite number, got {v!r}"
    if lo is not None and (f <= lo if lo_open else f < lo):
        return f"expected a number {'>' if lo_open else '>='} {lo:g}, got {_short(v)}"
    if hi is not None and f > hi:
        return f"expected a number <= {hi:g}, got {_short(v)}"
    return None


def time_problem(v) -> str | None:
    """Why ``v`` is not a unix time in seconds (finite, years 1 to 9999), or None."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        return f"expected a unix time in seconds, got {_describe(v)}"
    if not TIME_MIN <= v <= TIME_MAX:  # NaN fails both; a huge integer compares exactly
        return f"expected a unix time in seconds between years 1 and 9999, got {_short(v)}"
    return None


def ratio_problem(v) -> str | None:
    """Why ``v`` is not a bytes-per-token ratio (a finite number >= MIN_BYTES_PER_TOKEN), or None."""
    return number_problem(v, MIN_BYTES_PER_TOKEN)


def trace_token_bound(event_tokens: int, residuals, outputs, calls: int) -> int:
    """A trace's worst case, in tokens: (calls + 1) x (all its events' tokens + its largest |residual| +
    its largest output). A request holds at most every event, its residual and its output, so this bounds
    a run's cumulative tokens for any policy that only keeps or shrinks events (one more row per call
    for summaries included); what policies add beyond it is small next to the margin left to 2^63."""
    widest = max((abs(r) for r in residuals), default=0) + max(outputs, default=0)
    return (calls + 1) * (event_tokens + widest)


def bound_problem(bound: int) -> str | None:
    if bound >= MAX_TRACE_TOKENS:
        return (
            f"worst case of {bound:,} tokens ((calls + 1) x (events' tokens + largest |residual| + "
            f"largest output)) reaches the limit of 2^40 = {MAX_TRACE_TOKENS:,}: run sums could overflow"
        )
    return None


def run_sum_problem(top: int, rows: int) -> str | None:
    """Why a replayed run whose largest per-call count (any column but cost, in absolute value) is
    ``top`` over ``rows`` calls could wrap a sum, or None. Below the bound, every column sum of the run
    is below 2^51 and its cost in micro-USD below 2^63 at any price the tables allow; every count is
    below 2^51, so the batch cost arithmetic stays exact (``sim.cost.pricing.Price.cost_all``)."""
    if top * max(rows, 1) >= MAX_RUN_TOKENS:
        return (
            f"its replay has a call count of {top:,} over {rows} calls: sums could pass 2^51 "
            "(int64 holds 2^63); refused rather than wrapped"
        )
    return None


def _short(v) -> str:
    text = repr(v)
    return text if len(text) <= 40 else f"{text[:20]}... ({len(text)} characters)"


def _describe(v) -> str:
    name = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(v), type(v).__name__
    )
    return f"{name} {_short(v)}"


# ----------------------------------------------------------------------------- decoded-size caps (issue 41)
# What a few compressed or referencing bytes may decode to. Each cap is checked before (or while) decoding,
# and a refusal names the file, the member or column, the cap and this setting, which sets every one of them
# (an environment variable: the caps are met deep inside readers every command shares).
INPUT_BYTES_KNOB = "CTXSIM_MAX_INPUT_BYTES"
MAX_ATTACHMENT_BYTES = 128 << 20  # what attachment:// references may add to one Inspect sample
MAX_DECODED_BYTES = 1 << 30  # an archive's members together, decompressed
# A Parquet row group decoded: its strings become the traces' own text, held twice while the batch turns
# into Python values, so 1 GiB passed the 1.5 GB a process may use (the fuzzer's 1.0 GiB dictionary bomb,
# MemoryError). ctxsim writes row groups of about 64 MiB (sim.trace.io.ROW_GROUP_BYTES).
MAX_ROW_GROUP_BYTES = 256 << 20
MAX_LZMA_DICT_BYTES = 64 << 20  # an LZMA member's declared dictionary (allocated before any byte is read)
MAX_ID_CHARS = 200  # an identifier echoed in a message or a warning is cut to this many characters


def max_input_bytes(default: int = MAX_ATTACHMENT_BYTES) -> int:
    """The cap ``default``, or the value of ``CTXSIM_MAX_INPUT_BYTES`` when it is set (a positive
    integer number of bytes; anything else is a ConfigError naming it)."""
    import os

    raw = os.environ.get(INPUT_BYTES_KNOB)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        value = 0
    if not 0 < value <= 2**62:
        raise ConfigError(f"{INPUT_BYTES_KNOB}={_short(raw)}: expected a number of bytes in [1, 2^62]")
    return value


def short_id(v, limit: int = MAX_ID_CHARS) -> str:
    """An identifier from the input as a message may quote it: cut past ``limit`` characters, saying how
    long it was (a 60 MB ``sessionId`` echoed whole made a 63 MB line of standard error)."""
    text = v if isinstance(v, str) else str(v)
    if len(text) <= limit:
        return text
    return f"{text[: limit // 2]}...({len(text):,} characters)"
