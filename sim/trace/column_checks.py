"""The schema's and ``sim.trace.rules``' checks on a batch of records read as columns, in numpy and
Arrow compute: which records break a rule (the reference reader then names the problem).
"""

from __future__ import annotations

import math

import numpy as np

from sim.core.types import EVENT_KINDS, FACT_KINDS, KIND_CODE, TOKEN_PROVENANCES, USAGE_PROVENANCES
from sim.trace.arrow_arrays import (
    arrow_and_compute,
    bool_array,
    codes_of,
    list_items,
    numpy_filled,
    numpy_of,
    string_set,
    valid_mask,
)
from sim.trace.codec import arrow_schema
from sim.util.limits import MAX_COUNT, MIN_BYTES_PER_TOKEN, TIME_MAX, TIME_MIN

_ASSISTANT = KIND_CODE["assistant"]


_BIG_TOKENS = 1 << 40  # above this a record's sums go through the reference (exact Python integers)


def _natural(v: np.ndarray) -> np.ndarray:
    return (v >= 0) & (v <= MAX_COUNT)


def per_record(bad_rows: np.ndarray, owner: np.ndarray, n: int) -> np.ndarray:
    """Records (of ``n``) owning at least one bad row."""
    return np.bincount(owner[bad_rows], minlength=n) > 0 if bad_rows.any() else np.zeros(n, dtype=bool)


def _time_ok(a) -> np.ndarray:
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


def _line_counts(content) -> np.ndarray:
    """``len(c.splitlines())`` of each string: its line breaks (``\\r\\n`` is one), plus one for a last
    line without a break."""
    _, pc = arrow_and_compute()
    c = pc.replace_substring(pc.fill_null(content, ""), "\r\n", "\n")
    breaks = numpy_filled(pc.count_substring_regex(c, _BREAKS), 0).astype(np.int64)
    tail = numpy_filled(pc.match_substring_regex(c, _BREAKS + "$"), False).astype(bool)
    nonempty = numpy_filled(pc.binary_length(c), 0) > 0
    return breaks + (nonempty & ~tail)


def _bad_fact_lists(E, nbytes: np.ndarray) -> np.ndarray:
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
            wrong |= per_record(~_natural(v), per, len(spans))
            two = given & (width == 2)
            starts = numpy_of(spans.offsets).astype(np.int64)[:-1] - int(spans.offsets[0].as_py())
            start = np.where(two, v[np.minimum(starts, len(v) - 1)], 0)
            end = np.where(two, v[np.minimum(starts + 1, len(v) - 1)], 0)
            wrong |= two & ~((start <= end) & (end <= nbytes[owner]))
        bad |= per_record(wrong, owner, len(E))
    return bad


def _unprovided(E, lists, owner: np.ndarray) -> np.ndarray:
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


def _unanswered(E, kind, answer, tcids, owner) -> np.ndarray:
    """Events whose ``tool_call_id`` no earlier (or the same) assistant event of its record issued."""
    issued, lengths = list_items(tcids)
    issued_at = np.repeat(np.arange(len(E)), lengths)
    assistant = kind[issued_at] == _ASSISTANT
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


class Rows:
    """A batch's records flattened: their events ``E`` and calls ``C`` (struct arrays starting at the
    first record's first row), each record's offsets into them (``eo``, ``co``), counts and each row's
    record (``ev_owner``, ``call_owner``); ``ok``: the records whose layout the fast path takes (lists
    present, no children: a record with children, the reference builds it)."""

    __slots__ = ("n", "E", "C", "eo", "co", "n_ev", "n_calls", "ev_owner", "call_owner", "ok")

    def __init__(self, batch) -> None:
        n = self.n = batch.num_rows
        col = batch.column
        ev_list, call_list = col("events"), col("calls")
        ok = valid_mask(ev_list) & valid_mask(call_list)
        ok &= ~valid_mask(col("children"))  # a record with children: the reference builds it
        E, C = ev_list.values, call_list.values
        eo = numpy_of(ev_list.offsets).astype(np.int64)
        co = numpy_of(call_list.offsets).astype(np.int64)
        e0, e1, c0, c1 = int(eo[0]), int(eo[-1]), int(co[0]), int(co[-1])
        self.E, self.C = E.slice(e0, e1 - e0), C.slice(c0, c1 - c0)
        self.eo, self.co = eo - e0, co - c0
        self.n_ev, self.n_calls = np.diff(self.eo), np.diff(self.co)
        self.ev_owner = np.repeat(np.arange(n), self.n_ev)
        self.call_owner = np.repeat(np.arange(n), self.n_calls)
        self.ok = ok


def event_problems(rows: Rows) -> tuple[np.ndarray, dict[str, np.ndarray], np.ndarray]:
    """(records with an event that breaks the schema's or the cross-field rules, the events' integer
    columns by name (-1 where null), their kind codes)."""
    _, pc = arrow_and_compute()
    E, n, ev_owner = rows.E, rows.n, rows.ev_owner
    f = E.field
    bad = ~valid_mask(E)
    ints = {k: numpy_filled(f(k), -1) for k in ("index", "bytes", "chars", "lines", "tokens")}
    for v in ints.values():
        bad |= ~_natural(v)
    kind = codes_of(f("kind"), EVENT_KINDS).astype(np.int8)
    bad |= kind < 0
    bad |= codes_of(f("tokens_provenance"), TOKEN_PROVENANCES) < 0
    tcids = f("tool_call_ids")
    bad |= ~valid_mask(tcids) | ~valid_mask(f("bounded"))
    items, lengths = list_items(tcids)  # items are strings, never null (the fact lists: _bad_fact_lists)
    if items.null_count:
        bad |= per_record(~valid_mask(items), np.repeat(np.arange(len(E)), lengths), len(E))
    bad |= ~_time_ok(f("timestamp"))
    for k in ("json_bytes", "json2_bytes"):
        v = numpy_filled(f(k), 0)
        bad |= ~_natural(v)
    bad |= _bad_fact_lists(E, ints["bytes"])
    bad |= numpy_filled(f("run_index"), 0) != 0  # several runs: the reference
    bad |= ints["index"] != np.arange(len(E)) - rows.eo[ev_owner]
    bad |= ints["tokens"] > _BIG_TOKENS
    content = f("content")
    has_content = valid_mask(content)
    if has_content.any():
        bad |= has_content & (valid_mask(f("json_bytes")) | valid_mask(f("json2_bytes")))
        bad |= has_content & (numpy_filled(pc.binary_length(content), 0) != ints["bytes"])
        bad |= has_content & (numpy_filled(pc.utf8_length(content), 0) != ints["chars"])
        bad |= has_content & (_line_counts(content) != ints["lines"])
    bad_records = per_record(bad, ev_owner, n)

    # a tool result answers an earlier (or its own) assistant event's tool call
    answer = valid_mask(f("tool_call_id"))
    if answer.any():
        bad_records |= per_record(_unanswered(E, kind, answer, tcids, ev_owner), ev_owner, n)
    # a needed or superseded fact is provided by an earlier event
    for k in ("needs", "supersedes"):
        if len(list_items(f(k))[0]):
            bad_records |= per_record(_unprovided(E, f(k), ev_owner), ev_owner, n)
    return bad_records, ints, kind


class CallColumns:
    """A batch's call columns as numpy (nulls: -1, a residual's 0), what they derive from the events
    (``at``: each call's event row, ``local``: its index in its record, ``prefix``: the events' token
    prefix sums, ``view``: each call's visible tokens), and ``bad``: the records with a call that breaks
    a rule."""

    __slots__ = ("cint", "opt", "residual", "at", "local", "prefix", "view", "bad")


def call_columns(rows: Rows, tokens: np.ndarray, kind: np.ndarray) -> CallColumns:
    """The calls of ``rows`` checked (the schema's rules, append-only views, each residual the recorded
    input less the visible tokens) and read as numpy; ``tokens``, ``kind``: the events' columns."""
    C, E, eo, call_owner = rows.C, rows.E, rows.eo, rows.call_owner
    g = C.field
    cbad = ~valid_mask(C)
    cint = {k: numpy_filled(g(k), -1) for k in ("index", "event_index", "view_end")}
    for v in cint.values():
        cbad |= ~_natural(v)
    opt = {}
    for k in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens"):
        opt[k] = numpy_filled(g(k), -1)
        cbad |= valid_mask(g(k)) & ~_natural(opt[k])
    residual = numpy_filled(g("residual_tokens"), 0)
    cbad |= ~valid_mask(g("residual_tokens")) | (residual < -MAX_COUNT) | (residual > MAX_COUNT)
    cbad |= codes_of(g("usage_provenance"), USAGE_PROVENANCES) < 0
    cbad |= ~_time_ok(g("timestamp"))
    cost = numpy_filled(g("recorded_cost_usd"), 0.0).astype(np.float64)
    cbad |= ~((cost >= 0) & (cost < math.inf))
    cbad |= numpy_filled(g("run_index"), 0) != 0
    local = np.arange(len(C)) - rows.co[call_owner]
    cbad |= cint["index"] != local
    ei, ve = cint["event_index"], cint["view_end"]
    cbad |= ei >= rows.n_ev[call_owner]
    at = np.where(cbad, 0, eo[call_owner] + ei)  # the call's event, row in E (0 where already bad)
    if len(E):
        cbad |= kind[at] != _ASSISTANT
    else:
        cbad[:] = True
    first = local == 0
    prev_ei = np.concatenate([[-1], ei[:-1]])
    prev_ve = np.concatenate([[0], ve[:-1]])
    cbad |= ~first & (ei <= prev_ei)
    cbad |= (ve > ei) | (~first & (ve < prev_ve))
    prefix = np.zeros(len(E) + 1, dtype=np.int64)
    np.cumsum(tokens, out=prefix[1:])
    view = prefix[np.clip(eo[call_owner] + ve, 0, len(E))] - prefix[eo[call_owner]]
    recorded_input = opt["input_tokens"]
    expected = np.where(recorded_input < 0, 0, recorded_input - view)
    cbad |= residual != expected
    out = CallColumns()
    out.cint, out.opt, out.residual, out.at, out.local = cint, opt, residual, at, local
    out.prefix, out.view, out.bad = prefix, view, per_record(cbad, call_owner, rows.n)
    return out
