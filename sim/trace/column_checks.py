"""The schema's and ``sim.trace.rules``' checks on a batch of records read as columns, in numpy and
Arrow compute: which records break a rule (the reference reader then names the problem).
"""

from __future__ import annotations

import math

import numpy as np

from sim.core.types import FACT_KINDS, KIND_CODE
from sim.trace.arrow_arrays import (
    arrow_and_compute,
    bool_array,
    list_items,
    numpy_filled,
    numpy_of,
    string_set,
    valid_mask,
)
from sim.trace.codec import arrow_schema
from sim.util.limits import MAX_COUNT, MIN_BYTES_PER_TOKEN, TIME_MAX, TIME_MIN

ASSISTANT = KIND_CODE["assistant"]


BIG_TOKENS = 1 << 40  # above this a record's sums go through the reference (exact Python integers)


def natural(v: np.ndarray) -> np.ndarray:
    return (v >= 0) & (v <= MAX_COUNT)


def per_record(bad_rows: np.ndarray, owner: np.ndarray, n: int) -> np.ndarray:
    """Records (of ``n``) owning at least one bad row."""
    return np.bincount(owner[bad_rows], minlength=n) > 0 if bad_rows.any() else np.zeros(n, dtype=bool)


def time_ok(a) -> np.ndarray:
    v = numpy_filled(a, 0.0).astype(np.float64)
    return (v >= TIME_MIN) & (v <= TIME_MAX)  # NaN fails both


def top_keys() -> tuple[str, ...]:
    """A record's top-level keys but its lists (``arrow_schema``'s order, which the writer's is)."""
    return tuple(k for k in arrow_schema().names if k not in ("events", "calls", "children"))


def top_ok(top: dict, i: int) -> bool:
    """The schema's rules on a record's top-level values (the reference names a failure)."""
    if (
        top["schema_version"][i] not in (1, 2)
        or top["trace_id"][i] is None
        or top["source_format"][i] is None
    ):
        return False
    cw, bpt = top["context_window"][i], top["bytes_per_token"][i]
    if cw is not None and not 0 <= cw <= MAX_COUNT:
        return False
    return bpt is None or MIN_BYTES_PER_TOKEN <= bpt < math.inf


_BREAKS = "[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]"


def line_counts(content) -> np.ndarray:
    """``len(c.splitlines())`` of each string: its line breaks (``\\r\\n`` is one), plus one for a last
    line without a break."""
    _, pc = arrow_and_compute()
    c = pc.replace_substring(pc.fill_null(content, ""), "\r\n", "\n")
    breaks = numpy_filled(pc.count_substring_regex(c, _BREAKS), 0).astype(np.int64)
    tail = numpy_filled(pc.match_substring_regex(c, _BREAKS + "$"), False).astype(bool)
    nonempty = numpy_filled(pc.binary_length(c), 0) > 0
    return breaks + (nonempty & ~tail)


def bad_fact_lists(E, nbytes: np.ndarray) -> np.ndarray:
    """Events whose fact lists break the schema or the fact rules of ``sim.trace.rules``: ids that are not
    strings, kinds outside FACT_KINDS, span and kind lists not one per provided fact, a span that is not
    [start, end] with start <= end <= bytes."""
    pa, pc = arrow_and_compute()
    f = E.field
    bad = np.zeros(len(E), dtype=bool)
    rows = np.arange(len(E))
    for k in ("provides", "needs", "supersedes"):  # items are strings, never null
        items, lengths = list_items(f(k))
        if items.null_count:
            bad |= per_record(~valid_mask(items), np.repeat(rows, lengths), len(E))
    provided = numpy_filled(pc.list_value_length(f("provides")), 0)
    for k in ("fact_spans", "fact_kinds"):
        length = numpy_filled(pc.list_value_length(f(k)), 0)
        bad |= (length > 0) & (length != provided)
    kinds, lengths = list_items(f("fact_kinds"))
    if len(kinds):
        unknown = valid_mask(kinds) & (
            numpy_filled(pc.index_in(kinds, value_set=string_set(FACT_KINDS)), -1) < 0
        )
        bad |= per_record(unknown, np.repeat(rows, lengths), len(E))
    spans, lengths = list_items(f("fact_spans"))
    if len(spans):
        owner = np.repeat(rows, lengths)
        given = valid_mask(spans)
        numbers, width = list_items(spans)
        wrong = given & (width != 2)
        if len(numbers):
            v = numpy_filled(numbers, -1)
            per = np.repeat(np.arange(len(spans)), width)
            wrong |= per_record(~natural(v), per, len(spans))
            two = given & (width == 2)
            starts = numpy_of(spans.offsets).astype(np.int64)[:-1] - int(spans.offsets[0].as_py())
            start = np.where(two, v[np.minimum(starts, len(v) - 1)], 0)
            end = np.where(two, v[np.minimum(starts + 1, len(v) - 1)], 0)
            wrong |= two & ~((start <= end) & (end <= nbytes[owner]))
        bad |= per_record(wrong, owner, len(E))
    return bad


def unprovided(E, lists, owner: np.ndarray) -> np.ndarray:
    """Events naming (in ``lists``: needs or supersedes) a fact no earlier event of its record provides."""
    given, given_n = list_items(E.field("provides"))
    asked, asked_n = list_items(lists)
    rows = np.arange(len(E))
    return _unmatched(owner, np.repeat(rows, given_n), given, np.repeat(rows, asked_n), asked, False, len(E))


def _unmatched(owner, given_at, given, asked_at, asked, same_ok: bool, rows: int) -> np.ndarray:
    """Rows (of ``rows``) asking (at ``asked_at``) for a string no row of their record (``owner``) gave
    (at ``given_at``) before them (or at the same row when ``same_ok``)."""
    pa, pc = arrow_and_compute()
    every = pa.chunked_array([pc.cast(given, pa.string()), pc.cast(asked, pa.string())]).combine_chunks()
    codes = numpy_of(pc.dictionary_encode(every).indices).astype(np.int64)
    width = int(codes.max()) + 1 if len(codes) else 1
    key_given = owner[given_at] * width + codes[: len(given_at)]
    key_asked = owner[asked_at] * width + codes[len(given_at) :]
    order = np.lexsort((given_at, key_given))  # by key, then position: each string's first giver
    keys, pos = key_given[order], given_at[order]
    first = np.ones(len(keys), dtype=bool)
    first[1:] = keys[1:] != keys[:-1]
    keys, pos = keys[first], pos[first]
    j = np.searchsorted(keys, key_asked)
    found = j < len(keys)
    found[found] &= keys[j[found]] == key_asked[found]
    earlier = np.zeros(len(asked_at), dtype=bool)
    at = pos[j[found]]
    earlier[found] = (at <= asked_at[found]) if same_ok else (at < asked_at[found])
    bad = np.zeros(rows, dtype=bool)
    bad[asked_at[~earlier]] = True
    return bad


def unanswered(E, kind, answer, tcids, owner) -> np.ndarray:
    """Events whose ``tool_call_id`` no earlier (or the same) assistant event of its record issued."""
    issued, lengths = list_items(tcids)
    issued_at = np.repeat(np.arange(len(E)), lengths)
    assistant = kind[issued_at] == ASSISTANT
    _, pc = arrow_and_compute()
    answer_ids = pc.filter(E.field("tool_call_id"), bool_array(answer))
    issued_at, issued = issued_at[assistant], pc.filter(issued, bool_array(assistant))
    answer_at = np.flatnonzero(answer)
    if _answered_in_order(owner, issued_at, issued, answer_at, answer_ids):
        return np.zeros(len(E), dtype=bool)
    return _unmatched(owner, issued_at, issued, answer_at, answer_ids, True, len(E))


def _answered_in_order(owner, issued_at, issued, answer_at, answer_ids) -> bool:
    """Does the k-th answer name the k-th issued id, issued at or before it in its own record, for every
    k? Then every answer is answered (what ``_unmatched`` finds without sorting; a recorded agent answers
    its tool calls in the order it made them). False: no answer (so, ``_unmatched`` decides)."""
    _, pc = arrow_and_compute()
    if len(answer_at) != len(issued_at) or issued.null_count or answer_ids.null_count:
        return False
    if not ((issued_at <= answer_at).all() and (owner[issued_at] == owner[answer_at]).all()):
        return False
    return len(issued) == 0 or pc.all(pc.equal(issued, answer_ids)).as_py() is True
