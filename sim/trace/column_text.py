"""Canonical JSON text written by Arrow compute, a column at a time: each record's events and calls as
``sim.trace.codec.trace_to_dict`` would give them to ``json.dumps``, sorted keys for the content hash
(``text_hash``) and the writer's key order to compare a JSON line with.

Why: hashing a trace read as columns, or checking that a JSON line is the canonical encoding of what
Arrow read from it, would otherwise encode every event in Python.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from sim.trace.arrow_arrays import (
    arrow_and_compute,
    bool_array,
    int32_array,
    numpy_filled,
    string_array,
    valid_mask,
)
from sim.trace.codec import arrow_schema


def _int_text(a):
    pa, pc = arrow_and_compute()
    return pc.fill_null(pc.cast(a, pa.string()), "null")


def _float_text(a):
    """Python's ``repr`` of each double (what ``json.dumps`` writes): Arrow writes the same shortest
    digits but drops ``.0`` and switches to exponents at other magnitudes, so those are Python's own."""
    pa, pc = arrow_and_compute()
    s = pc.cast(a, pa.string())
    v = numpy_filled(a, math.nan).astype(np.float64)  # nulls: NaN
    mag = np.abs(v)
    usual = (mag < 1e15) & ((mag >= 1e-4) | (v == 0))  # NaN: neither
    integral = usual & (v == np.floor(v))  # Arrow: "5", Python: "5.0"
    if integral.any():
        s = pc.if_else(bool_array(integral), pc.binary_join_element_wise(s, ".0", ""), s)
    special = ~usual & np.asarray(valid_mask(a))
    if special.any():
        idx = np.flatnonzero(special)
        s = pc.replace_with_mask(s, bool_array(special), string_array([repr(float(v[i])) for i in idx]))
    return pc.fill_null(s, "null")


_ESCAPES = (("\\", "\\\\"), ('"', '\\"'), ("\n", "\\n"), ("\r", "\\r"), ("\t", "\\t"), ("\b", "\\b"))
_ESCAPES += (("\f", "\\f"),)


def _str_text(a, few: bool = False):
    """Each string as ``json.dumps(s, ensure_ascii=False)`` writes it (null: ``null``). ``few``: a
    column of a few distinct values (a kind, a provenance), written once per value."""
    pa, pc = arrow_and_compute()
    if few and len(a):
        d = pc.dictionary_encode(a)
        return pc.fill_null(pc.take(_str_text(d.dictionary), d.indices), "null")
    if len(a) and pc.any(pc.match_substring_regex(a, r'[\x00-\x1f"\\]')).as_py():
        if pc.any(pc.match_substring_regex(a, r"[\x00-\x07\x0b\x0e-\x1f]")).as_py():  # \u00XX escapes
            return string_array([json.dumps(x, ensure_ascii=False) for x in a.to_pylist()])
        for old, new in _ESCAPES:
            a = pc.replace_substring(a, old, new)
    return pc.fill_null(pc.binary_join_element_wise('"', a, '"', ""), "null")


def _list_text(lists, item_text):
    """Each list as a JSON array of ``item_text`` of its items (null: ``null``)."""
    pa, pc = arrow_and_compute()
    items = pa.ListArray.from_arrays(lists.offsets, item_text(lists.values))
    out = pc.binary_join_element_wise("[", pc.binary_join(items, ","), "]", "")
    return pc.if_else(pc.is_valid(lists), out, "null")


def _objects(parts: list) -> Any:
    """Element-wise concatenation of literal pieces and text columns: one JSON object per row."""
    _, pc = arrow_and_compute()
    return pc.binary_join_element_wise(*parts, "")


def _optional(present, key: str, text):
    """``,"key":text`` where ``present``, else nothing (``trace_to_dict`` writes such keys only then)."""
    _, pc = arrow_and_compute()
    return pc.if_else(present, pc.binary_join_element_wise(f',"{key}":', text, ""), "")


def _joined(offsets, objects):
    """Per record: its rows' objects joined with commas (the inside of a JSON array)."""
    pa, pc = arrow_and_compute()
    return pc.binary_join(pa.ListArray.from_arrays(offsets, objects), ",")


def _constant(a, text: Callable) -> Any:
    """A column's JSON text: one literal when every row has the same (all null, all false, one
    distinct value), which folds into the pieces around it; else ``text(a)``, a text per row."""
    pa, pc = arrow_and_compute()
    if a.null_count == len(a):
        return "null"
    if a.null_count == 0 and a.type in (pa.bool_(), pa.string()) and len(a):
        first = a[0].as_py()
        if pc.all(pc.equal(a, first)).as_py():
            return json.dumps(first, ensure_ascii=False)
    return text(a)


def _fold(parts: list, rows: int) -> Any:
    """Element-wise concatenation of literals and text columns, adjacent literals joined first."""
    pa, _ = arrow_and_compute()
    folded: list = []
    for p in parts:
        if isinstance(p, str) and folded and isinstance(folded[-1], str):
            folded[-1] += p
        elif not (isinstance(p, str) and not p):
            folded.append(p)
    if all(isinstance(p, str) for p in folded):  # every column one value: one text for every row
        return string_array(["".join(folded)] * rows)
    return _objects(folded)


_FEW = frozenset({"kind", "tokens_provenance", "source_type", "usage_provenance"})  # enumerations
_OPTIONAL = ("provides", "needs", "supersedes", "fact_kinds", "fact_spans", "json_bytes", "json2_bytes")
_OPTIONAL += ("source_type", "url")  # keys trace_to_dict writes only when there is something to say


def _keys(column: str) -> list[str]:
    """An event's or a call's keys in the writer's order: the schema's fields (``arrow_schema``) but
    ``run_index``, written only beyond a first run (such a record is declined)."""
    t = arrow_schema().field(column).type.value_type
    return [t.field(i).name for i in range(t.num_fields) if t.field(i).name != "run_index"]


def _column_text(a, key: str):
    """A column's JSON text (``_constant``), by its schema type."""
    pa, pc = arrow_and_compute()
    t = a.type
    if pa.types.is_dictionary(t):  # an enumeration read as a dictionary: each value written once
        if a.null_count == len(a):
            return "null"
        return pc.fill_null(pc.take(_str_text(a.dictionary), a.indices), "null")
    if pa.types.is_int64(t):
        return _constant(a, _int_text)
    if pa.types.is_float64(t):
        return _constant(a, _float_text)
    if pa.types.is_boolean(t):
        return _constant(a, lambda a: pc.if_else(a, "true", "false"))
    if pa.types.is_string(t):
        return _constant(a, (lambda a: _str_text(a, few=True)) if key in _FEW else _str_text)
    if pa.types.is_list(t.value_type):  # fact spans: lists of [start, end]
        return _list_text(a, lambda spans: _list_text(spans, _int_text))
    return _list_text(a, _str_text)


def canonical_texts(E, C, eo: np.ndarray, co: np.ndarray, with_sorted: bool, with_lines: bool) -> dict:
    """Per record: its events' and calls' canonical JSON, sorted keys (the hash's) when ``with_sorted``,
    and in the writer's key order when ``with_lines``."""
    pa, pc = arrow_and_compute()
    f, g = E.field, C.field
    ev_keys, call_keys = _keys("events"), _keys("calls")

    def listed(k):
        return pc.greater(pc.fill_null(pc.list_value_length(f(k)), 0), 0)

    present = {k: listed(k) for k in _OPTIONAL if pa.types.is_list(f(k).type)}
    content_absent = pc.invert(pc.is_valid(f("content")))
    for k in ("json_bytes", "json2_bytes"):  # JSON sizes: beside a missing content only
        present[k] = pc.and_(content_absent, pc.is_valid(f(k)))
    for k in ("source_type", "url"):
        present[k] = pc.is_valid(f(k))
    for k in list(present):
        if not pc.any(present[k]).as_py():
            present[k] = None  # absent everywhere: no piece at all
    T = {k: _column_text(f(k), k) for k in ev_keys if present.get(k, True) is not None}

    def obj(order):
        parts: list = []
        for n, k in enumerate(order):
            if k in present:
                if present[k] is not None:
                    text = T[k] if not isinstance(T[k], str) else string_array([T[k]] * len(E))
                    parts.append(_optional(present[k], k, text))
            else:
                parts += [("{" if n == 0 else ",") + f'"{k}":', T[k]]
        return _fold([*parts, "}"], len(E))

    U = {k: _column_text(g(k), k) for k in call_keys}

    def call_obj(order):
        parts: list = []
        for n, k in enumerate(order):
            parts += [("{" if n == 0 else ",") + f'"{k}":', U[k]]
        return _fold([*parts, "}"], len(C))

    ev_off, call_off = int32_array(eo), int32_array(co)
    out = {}
    if with_sorted:
        out["events_sorted"] = _joined(ev_off, obj(sorted(ev_keys)))
        out["calls_sorted"] = _joined(call_off, call_obj(sorted(call_keys)))
    if with_lines:
        out["events_line"] = _joined(ev_off, obj(ev_keys))
        out["calls_line"] = _joined(call_off, call_obj(call_keys))
    return out


def text_hash(pieces) -> str:
    """``sim.trace.codec.trace_hash``'s value from its canonical text given in pieces (the hash of a trace
    read as columns: one call per trace, in the process that reads the file)."""
    h = hashlib.sha256()
    for piece in pieces:
        h.update(piece)
    return "sha256:" + h.hexdigest()


_OBJECT_TEXT: dict[str | None, str | None] = {}


def object_text(s: str | None) -> str | None:
    """``recorded_policy``/``outcome`` as ``trace_to_dict`` writes it (``json.dumps(obj, sort_keys=True)``;
    a null is no field: ``{}``), or None when it is not a JSON object (the reference says why). Memoised:
    a corpus repeats a handful of them."""
    got = _OBJECT_TEXT.get(s, "")
    if got != "":
        return got
    from sim.util.jsonl import parse_json

    if s is None:
        got = "{}"
    else:
        try:
            obj = parse_json(s)
        except json.JSONDecodeError:
            obj = None
        got = json.dumps(obj, sort_keys=True) if type(obj) is dict else None
    if len(_OBJECT_TEXT) < 4096:
        _OBJECT_TEXT[s] = got
    return got


_PARSED: dict[str, dict] = {}
_SCALARS = (str, int, float, bool, type(None))


def parsed_object(text: str) -> dict:
    """``json.loads(text)`` of a JSON object, memoised for the few a corpus repeats: each trace gets its
    own dict (a copy of a flat one; a nested one parsed again, so no two traces share a value)."""
    got = _PARSED.get(text)
    if got is not None:
        return dict(got)
    obj = json.loads(text)
    if len(_PARSED) < 4096 and all(v.__class__ in _SCALARS for v in obj.values()):
        _PARSED[text] = dict(obj)
    return obj


_DUMPS: dict = {}


def _dumps(v) -> str:
    """``json.dumps(v, ensure_ascii=False)``, memoised for the values records repeat (agent, model...)."""
    got = _DUMPS.get(v) if v.__class__ is not float else None  # 1 == 1.0 == True: only exact types
    if got is None or got[0] is not v.__class__:
        text = json.dumps(v, ensure_ascii=False)
        if len(_DUMPS) < 4096 and v.__class__ is not float:
            _DUMPS[v] = (v.__class__, text)
        return text
    return got[1]


def head_sorted(top: dict, i: int, policy: str, outcome: str) -> tuple[bytes, bytes, bytes]:
    """The hashed text around the calls and events: (before the calls, (between, after the events))."""
    head = (
        f'{{"agent":{_dumps(top["agent"][i])},"bytes_per_token":{_dumps(top["bytes_per_token"][i])},"calls":['
    )
    mid = f'],"context_window":{_dumps(top["context_window"][i])},"events":['
    end = (
        f'],"model":{_dumps(top["model"][i])},"outcome":{_dumps(outcome)},'
        f'"recorded_policy":{_dumps(policy)},"schema_version":1,'
        f'"source_format":{_dumps(top["source_format"][i])},'
        f'"trace_id":{json.dumps(top["trace_id"][i], ensure_ascii=False)}}}'
    )
    return head.encode(), mid.encode(), end.encode()


_CALLS = b'],"calls":['


def line_matches(raw: bytes, top: dict, i: int, policy: str, outcome: str, texts: dict, j: int) -> bool:
    """Is the JSON line byte for byte what ``write_traces`` writes for the record Arrow read from it?"""
    head = (
        f'{{"schema_version":1,"trace_id":{json.dumps(top["trace_id"][i], ensure_ascii=False)},'
        f'"source_format":{_dumps(top["source_format"][i])},"source_file":{_dumps(top["source_file"][i])},'
        f'"agent":{_dumps(top["agent"][i])},"model":{_dumps(top["model"][i])},'
        f'"context_window":{_dumps(top["context_window"][i])},'
        f'"bytes_per_token":{_dumps(top["bytes_per_token"][i])},"recorded_policy":{_dumps(policy)},'
        f'"outcome":{_dumps(outcome)},"events":['
    ).encode()
    ev = texts["events_line"][j].as_buffer().to_pybytes()
    calls = texts["calls_line"][j].as_buffer().to_pybytes()
    k = len(head) + len(ev) + len(_CALLS)
    return (
        len(raw) == k + len(calls) + 2
        and raw.startswith(head)
        and raw[len(head) : len(head) + len(ev)] == ev
        and raw[k - len(_CALLS) : k] == _CALLS
        and raw[k : k + len(calls)] == calls
        and raw.endswith(b"]}")
    )
