"""Canonical files read as columns: a batch of records (Arrow: a Parquet batch, or a block of JSON Lines
parsed by Arrow's reader) validated and turned into traces with numpy and Arrow compute, without a
Python object per event.

What a trace read here holds: its calls, its ``TraceArrays`` and the derived values the fast paths ask
for, filled from the columns; its events are built on first use (``sim.core.types.Lazy``), the very
``Event`` objects the record-by-record reader makes. Its content hash is computed here from the same
canonical text ``sim.trace.io.trace_hash`` hashes (sorted keys, no ``source_file``), written by Arrow
compute instead of ``json.dumps``: stored as the trace's ``trace_hash`` derived value, so nothing
re-encodes the trace to hash it; a test holds it equal to ``trace_hash`` on the embedded suite and on
real traces.

The fast path *declines* what it does not handle, and such a record goes through the record-by-record
reader (``slow``), which validates and builds it as it always has, and names the file, record and field
of a bad one (so every error message is the old one). Declined: a record whose columns fail any check
of ``sim.trace.schema`` / ``sim.trace.io.semantic_problems`` (the reference names the problem), one with
children or several runs, and a JSON line that is not
byte for byte the canonical encoding of what Arrow read from it (``write_traces``' own output is): that
one check covers whatever a JSON document can say that Arrow's typed reader does not (a missing key
versus a null, duplicate keys, whitespace, escapes, ``5`` for ``5.0``). A file whose record of trace
hashes (``sim.trace.storedhashes``) holds for its bytes is ``write_traces``' own output, read back cleanly
when it was written: its lines are not compared again (every rule of the schema is still checked; a
record forged by hand over other bytes gets those lines read as Arrow reads them, as it gets its
hashes taken: see ``sim.trace.storedhashes``).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from sim.core.types import (
    EVENT_KINDS,
    FACT_KINDS,
    KIND_CODE,
    TOKEN_PROVENANCES,
    USAGE_PROVENANCES,
    Call,
    Lazy,
    Trace,
    TraceArrays,
    filler,
)
from sim.cost.tokens import estimate_tokens
from sim.util.errors import CtxsimError
from sim.util.interrupts import sigint_held
from sim.util.limits import (
    MAX_COUNT,
    MAX_TRACE_TOKENS,
    MIN_BYTES_PER_TOKEN,
    TIME_MAX,
    TIME_MIN,
    bound_problem,
    trace_token_bound,
)

PARQUET_BATCH = 1024  # records per Arrow batch on the fast path (the reference reads 64 at a time)
JSONL_BLOCK = 8 << 20  # bytes of whole lines parsed by Arrow at once
_PARTS = 4  # a block parsed on Arrow's threads: in this many parts, so that both cores keep busy
_ASSISTANT = KIND_CODE["assistant"]
_USER = KIND_CODE["user"]
_TOOL_RESULT = KIND_CODE["tool_result"]
_BIG_TOKENS = 1 << 40  # above this a record's sums go through the reference (exact Python integers)

Slow = Callable[[int], Trace]  # record number in the batch -> its trace by the reference reader


# ------------------------------------------------------------------------------------------ JSON text
def _pa():
    import pyarrow as pa

    return pa, _compute()


@lru_cache(maxsize=1)
def _compute() -> _Compute:
    return _Compute()


class _Compute:
    """The ``pyarrow.compute`` functions this module calls, called as those do (same kernels, same
    options) through ``pyarrow._compute.call_function``: importing ``pyarrow.compute`` itself wraps and
    documents each of its ~290 functions, ~0.07 s CPU, a thirtieth of a streamed 10k run. Arrays'
    own ``is_valid``, ``filter`` and ``cast`` import it too: called here instead. A Python value
    among the arguments becomes an Arrow scalar built from its bytes (``pa.scalar`` imports pandas,
    ~0.3 s)."""

    def __init__(self) -> None:
        import pyarrow as pa
        import pyarrow._compute as c

        self.pa, self.c, self._call = pa, c, c.call_function
        self.types = {str: pa.string(), bool: pa.bool_(), int: pa.int64(), float: pa.float64()}

    def call(self, name: str, args: list, options=None):
        return self._call(name, [self.scalar(v) for v in args], options)

    def scalar(self, value, t=None):
        """``value`` as Arrow (of type ``t``, else its own: str, bool, int, float); Arrow data as it is."""
        pa = self.pa
        if isinstance(value, pa.Array | pa.ChunkedArray | pa.Scalar):
            return value if t is None or value.type == t else self.cast(value, t)
        t = t if t is not None else self.types.get(type(value))
        if type(value) is str and t == pa.string():
            return _value_set((value,))[0]
        if type(value) is bool and t == pa.bool_():
            return _mask(np.array([value]))[0]
        dtype = _DTYPES.get(str(t))
        if type(value) in (int, float) and dtype is not None:
            data = np.array([value], dtype=dtype)
            return pa.Array.from_buffers(t, 1, [None, pa.py_buffer(data)])[0]
        return pa.scalar(value, type=t)  # none of those: as pyarrow.compute would

    def fill_null(self, a, fill):
        return self.call("coalesce", [a, self.scalar(fill, a.type)])

    def cast(self, a, target_type):
        return self._call("cast", [a], self.c.CastOptions.safe(self.pa.types.lib.ensure_type(target_type)))

    def take(self, a, indices):
        return self.call("take", [a, indices], self.c.TakeOptions(boundscheck=True))

    def filter(self, a, mask):
        return self.call("filter", [a, mask], self.c.FilterOptions("drop"))

    def is_valid(self, a):
        return self.call("is_valid", [a])

    def index_in(self, a, value_set):
        return self.call("index_in", [a], self.c.SetLookupOptions(value_set))

    def match_substring_regex(self, a, pattern: str):
        return self.call("match_substring_regex", [a], self.c.MatchSubstringOptions(pattern))

    def count_substring_regex(self, a, pattern: str):
        return self.call("count_substring_regex", [a], self.c.MatchSubstringOptions(pattern))

    def replace_substring(self, a, pattern: str, replacement: str):
        return self.call("replace_substring", [a], self.c.ReplaceSubstringOptions(pattern, replacement))

    def binary_join_element_wise(self, *strings):
        return self.call("binary_join_element_wise", list(strings))

    def and_(self, x, y):
        return self.call("and", [x, y])

    def __getattr__(self, name: str):  # the others take no options: any, all, equal, if_else, ...
        call = self.call

        def function(*args):
            return call(name, list(args))

        setattr(self, name, function)
        return function


def _int_text(a):
    pa, pc = _pa()
    return pc.fill_null(pc.cast(a, pa.string()), "null")


def _float_text(a):
    """Python's ``repr`` of each double (what ``json.dumps`` writes): Arrow writes the same shortest
    digits but drops ``.0`` and switches to exponents at other magnitudes, so those are Python's own."""
    pa, pc = _pa()
    s = pc.cast(a, pa.string())
    v = _np(a, math.nan).astype(np.float64)  # nulls: NaN
    mag = np.abs(v)
    usual = (mag < 1e15) & ((mag >= 1e-4) | (v == 0))  # NaN: neither
    integral = usual & (v == np.floor(v))  # Arrow: "5", Python: "5.0"
    if integral.any():
        s = pc.if_else(_mask(integral), pc.binary_join_element_wise(s, ".0", ""), s)
    special = ~usual & np.asarray(_valid(a))
    if special.any():
        idx = np.flatnonzero(special)
        s = pc.replace_with_mask(s, _mask(special), _strings([repr(float(v[i])) for i in idx]))
    return pc.fill_null(s, "null")


_ESCAPES = (("\\", "\\\\"), ('"', '\\"'), ("\n", "\\n"), ("\r", "\\r"), ("\t", "\\t"), ("\b", "\\b"))
_ESCAPES += (("\f", "\\f"),)


def _str_text(a, few: bool = False):
    """Each string as ``json.dumps(s, ensure_ascii=False)`` writes it (null: ``null``). ``few``: a
    column of a few distinct values (a kind, a provenance), written once per value."""
    pa, pc = _pa()
    if few and len(a):
        d = pc.dictionary_encode(a)
        return pc.fill_null(pc.take(_str_text(d.dictionary), d.indices), "null")
    if len(a) and pc.any(pc.match_substring_regex(a, r'[\x00-\x1f"\\]')).as_py():
        if pc.any(pc.match_substring_regex(a, r"[\x00-\x07\x0b\x0e-\x1f]")).as_py():  # \u00XX escapes
            return _strings([json.dumps(x, ensure_ascii=False) for x in a.to_pylist()])
        for old, new in _ESCAPES:
            a = pc.replace_substring(a, old, new)
    return pc.fill_null(pc.binary_join_element_wise('"', a, '"', ""), "null")


def _list_text(lists, item_text):
    """Each list as a JSON array of ``item_text`` of its items (null: ``null``)."""
    pa, pc = _pa()
    items = pa.ListArray.from_arrays(lists.offsets, item_text(lists.values))
    out = pc.binary_join_element_wise("[", pc.binary_join(items, ","), "]", "")
    return pc.if_else(pc.is_valid(lists), out, "null")


def _objects(parts: list) -> Any:
    """Element-wise concatenation of literal pieces and text columns: one JSON object per row."""
    _, pc = _pa()
    return pc.binary_join_element_wise(*parts, "")


def _optional(present, key: str, text):
    """``,"key":text`` where ``present``, else nothing (``trace_to_dict`` writes such keys only then)."""
    _, pc = _pa()
    return pc.if_else(present, pc.binary_join_element_wise(f',"{key}":', text, ""), "")


def _joined(offsets, objects):
    """Per record: its rows' objects joined with commas (the inside of a JSON array)."""
    pa, pc = _pa()
    return pc.binary_join(pa.ListArray.from_arrays(offsets, objects), ",")


# --------------------------------------------------------------------------------------------- columns
_DTYPES = {"int64": np.int64, "int32": np.int32, "int8": np.int8, "double": np.float64, "uint32": np.uint32}


def _numpy(a) -> np.ndarray:
    """An Arrow array's values as numpy, read from its data buffer (numbers, booleans; nulls must have
    been filled): pyarrow's own ``to_numpy`` imports pandas, a tenth of a streamed run's time."""
    dtype = _DTYPES.get(str(a.type))
    n, at = len(a), a.offset
    if a.null_count == 0 and dtype is not None:
        data = a.buffers()[1]
        return np.frombuffer(data, dtype, count=n + at)[at:] if data is not None else np.zeros(0, dtype)
    if a.null_count == 0 and str(a.type) == "bool":
        data = a.buffers()[1]
        if data is None:
            return np.zeros(0, bool)
        bits = np.frombuffer(data, np.uint8)
        return np.unpackbits(bits, count=n + at, bitorder="little")[at:].view(bool)
    return np.asarray(a.to_numpy(zero_copy_only=False))


def _np(a, fill) -> np.ndarray:
    """A column of numbers or booleans as numpy, ``fill`` where null."""
    if not a.null_count:
        return _numpy(a)
    if a.null_count == len(a):
        dtype = _DTYPES.get(str(a.type), bool if str(a.type) == "bool" else None)
        return np.full(len(a), fill, dtype=dtype) if dtype is not None else np.full(len(a), fill)
    if str(a.type) in _DTYPES or str(a.type) == "bool":  # the values under a null are unspecified
        return np.where(_valid(a), _numpy(_values(a)), fill)
    _, pc = _pa()
    return _numpy(pc.fill_null(a, fill))


def _values(a):
    """``a`` without its validity bitmap (its values, whatever lies under a null)."""
    pa, _ = _pa()
    return pa.Array.from_buffers(a.type, len(a), [None, *a.buffers()[1:]], 0, a.offset)


def _mask(v: np.ndarray):
    """A numpy boolean array as an Arrow one (built from its bits: ``pa.array`` imports pandas)."""
    pa, _ = _pa()
    bits = np.packbits(np.asarray(v, dtype=bool), bitorder="little")
    return pa.Array.from_buffers(pa.bool_(), len(v), [None, pa.py_buffer(bits)])


def _strings(values: list[str]):
    """A list of strings as an Arrow string array, built from their bytes (``pa.array`` imports pandas)."""
    pa, _ = _pa()
    data = [v.encode() for v in values]
    offsets = np.zeros(len(data) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in data], out=offsets[1:])
    if offsets[-1] >= 2**31:
        raise OverflowError("text past 2 GiB")  # Arrow's offsets: the fast path declines the batch
    return pa.Array.from_buffers(
        pa.string(), len(data), [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(b"".join(data))]
    )


def _int32s(v: np.ndarray):
    """Integers (offsets) as an Arrow int32 array, from their bytes."""
    pa, _ = _pa()
    return pa.Array.from_buffers(pa.int32(), len(v), [None, pa.py_buffer(np.ascontiguousarray(v, np.int32))])


_VALUE_SETS: dict = {}


def _value_set(values: tuple[str, ...]):
    """A tuple of strings as an Arrow array (``pc.index_in``'s value set), built from its bytes once."""
    got = _VALUE_SETS.get(values)
    if got is None:
        pa, _ = _pa()
        data = [v.encode() for v in values]
        offsets = np.concatenate([[0], np.cumsum([len(b) for b in data])]).astype(np.int32)
        got = _VALUE_SETS[values] = pa.Array.from_buffers(
            pa.string(), len(values), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(data))]
        )
    return got


def _codes(a, values: tuple[str, ...]) -> np.ndarray:
    """Each string's position in ``values`` (-1: null or none of them), as numpy: ``pc.index_in``. An
    enumeration read as a dictionary is looked up once per distinct value (``index_in`` of the
    dictionary array itself decodes every row first: a tenth of the checks)."""
    pa, pc = _pa()
    if not pa.types.is_dictionary(a.type):
        return _np(pc.index_in(a, value_set=_value_set(values)), -1)
    if not len(a.dictionary):
        return np.full(len(a), -1, dtype=np.int64)
    per_value = _np(pc.index_in(a.dictionary, value_set=_value_set(values)), -1)
    codes = per_value[_np(a.indices, 0)]
    return np.where(_valid(a), codes, -1) if a.null_count else codes


def _items(lists) -> tuple[Any, np.ndarray]:
    """A list column's items (exactly the rows' spans of its child) and each row's span length."""
    off = _numpy(lists.offsets).astype(np.int64)
    return lists.values.slice(int(off[0]), int(off[-1] - off[0])), np.diff(off)


def _valid(a) -> np.ndarray:
    nulls = a.null_count
    if nulls == 0 or nulls == len(a):  # the common cases, without a bitmap turned into bools
        return np.full(len(a), nulls == 0, dtype=bool)
    return _numpy(_compute().is_valid(a))


def _nat(v: np.ndarray) -> np.ndarray:
    return (v >= 0) & (v <= MAX_COUNT)


def _per_record(bad_rows: np.ndarray, owner: np.ndarray, n: int) -> np.ndarray:
    """Records (of ``n``) owning at least one bad row."""
    return np.bincount(owner[bad_rows], minlength=n) > 0 if bad_rows.any() else np.zeros(n, dtype=bool)


def _time_ok(a) -> np.ndarray:
    v = _np(a, 0.0).astype(np.float64)
    return (v >= TIME_MIN) & (v <= TIME_MAX)  # NaN fails both


def _read_only(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


def batch_traces(
    batch, slow: Slow, lines: list[bytes] | None = None, hashes: list[str] | None = None
) -> list[Trace]:
    """The traces of a batch of canonical records (``sim.trace.io.arrow_schema``), in order; a record the
    fast path declines is ``slow(i)``. ``lines``: the JSON lines the batch was parsed from (each must be
    the canonical encoding of its record to stay on the fast path). ``hashes``: the records' trace
    hashes recorded for the file's bytes (``sim.trace.storedhashes``), taken instead of hashing their text."""
    from sim.trace.io import arrow_schema

    pa, pc = _pa()
    n = batch.num_rows
    if n == 0:
        return []
    if not (batch.schema.equals(arrow_schema()) or batch.schema.equals(_dictionary_schema())):
        return [slow(i) for i in range(n)]
    col = batch.column
    ev_list, call_list = col("events"), col("calls")
    ok = _valid(ev_list) & _valid(call_list)
    ok &= ~_valid(col("children"))  # a record with children: the reference builds it
    E, C = ev_list.values, call_list.values
    eo = _numpy(ev_list.offsets).astype(np.int64)
    co = _numpy(call_list.offsets).astype(np.int64)
    e0, e1, c0, c1 = int(eo[0]), int(eo[-1]), int(co[0]), int(co[-1])
    E, C = E.slice(e0, e1 - e0), C.slice(c0, c1 - c0)
    eo, co = eo - e0, co - c0
    n_ev, n_calls = np.diff(eo), np.diff(co)
    ev_owner = np.repeat(np.arange(n), n_ev)
    call_owner = np.repeat(np.arange(n), n_calls)

    # ---- events: the schema's rules, then the cross-field ones
    f = E.field
    bad = ~_valid(E)
    ints = {k: _np(f(k), -1) for k in ("index", "bytes", "chars", "lines", "tokens")}
    for v in ints.values():
        bad |= ~_nat(v)
    kind = _codes(f("kind"), EVENT_KINDS).astype(np.int8)
    bad |= kind < 0
    bad |= _codes(f("tokens_provenance"), TOKEN_PROVENANCES) < 0
    tcids = f("tool_call_ids")
    bad |= ~_valid(tcids) | ~_valid(f("bounded"))
    items, lengths = _items(tcids)  # items are strings, never null (the fact lists: _fact_problems)
    if items.null_count:
        bad |= _per_record(~_valid(items), np.repeat(np.arange(len(E)), lengths), len(E))
    bad |= ~_time_ok(f("timestamp"))
    for k in ("json_bytes", "json2_bytes"):
        v = _np(f(k), 0)
        bad |= ~_nat(v)
    provides = f("provides")
    bad |= _fact_problems(E, ints["bytes"])
    bad |= _np(f("run_index"), 0) != 0  # several runs: the reference
    bad |= ints["index"] != np.arange(len(E)) - eo[ev_owner]
    bad |= ints["tokens"] > _BIG_TOKENS
    content = f("content")
    has_content = _valid(content)
    if has_content.any():
        bad |= has_content & (_valid(f("json_bytes")) | _valid(f("json2_bytes")))
        bad |= has_content & (_np(pc.binary_length(content), 0) != ints["bytes"])
        bad |= has_content & (_np(pc.utf8_length(content), 0) != ints["chars"])
        bad |= has_content & (_lines_of(content) != ints["lines"])
    ok &= ~_per_record(bad, ev_owner, n)

    # a tool result answers an earlier (or its own) assistant event's tool call
    answer = _valid(f("tool_call_id"))
    if answer.any():
        ok &= ~_per_record(_unanswered(E, kind, answer, tcids, ev_owner), ev_owner, n)
    # a needed or superseded fact is provided by an earlier event
    for k in ("needs", "supersedes"):
        if len(_items(f(k))[0]):
            ok &= ~_per_record(_unprovided(E, f(k), ev_owner), ev_owner, n)

    # ---- calls
    g = C.field
    cbad = ~_valid(C)
    cint = {k: _np(g(k), -1) for k in ("index", "event_index", "view_end")}
    for v in cint.values():
        cbad |= ~_nat(v)
    opt = {}
    for k in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens"):
        opt[k] = _np(g(k), -1)
        cbad |= _valid(g(k)) & ~_nat(opt[k])
    residual = _np(g("residual_tokens"), 0)
    cbad |= ~_valid(g("residual_tokens")) | (residual < -MAX_COUNT) | (residual > MAX_COUNT)
    cbad |= _codes(g("usage_provenance"), USAGE_PROVENANCES) < 0
    cbad |= ~_time_ok(g("timestamp"))
    cost = _np(g("recorded_cost_usd"), 0.0).astype(np.float64)
    cbad |= ~((cost >= 0) & (cost < math.inf))
    cbad |= _np(g("run_index"), 0) != 0
    local = np.arange(len(C)) - co[call_owner]
    cbad |= cint["index"] != local
    ei, ve = cint["event_index"], cint["view_end"]
    cbad |= ei >= n_ev[call_owner]
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
    np.cumsum(ints["tokens"], out=prefix[1:])
    view = prefix[np.clip(eo[call_owner] + ve, 0, len(E))] - prefix[eo[call_owner]]
    recorded_input = opt["input_tokens"]
    expected = np.where(recorded_input < 0, 0, recorded_input - view)
    cbad |= residual != expected
    ok &= ~_per_record(cbad, call_owner, n)
    ok &= ~((n_ev > 0) & (n_calls == 0))  # a run without a call (its opening prompt)

    # ---- top level
    top = {k: col(k).to_pylist() for k in _top_keys()}
    fine = [o and _top_ok(top, i) for i, o in enumerate(ok.tolist())]  # Python bools: no numpy scalars
    policy_text = [_object_text(s) if o else None for o, s in zip(fine, top["recorded_policy"], strict=True)]
    outcome_text = [_object_text(s) if o else None for o, s in zip(fine, top["outcome"], strict=True)]
    fine = [
        o and p is not None and q is not None for o, p, q in zip(fine, policy_text, outcome_text, strict=True)
    ]
    ok = np.array(fine, dtype=bool)
    outputs = opt["output_tokens"]
    # the sum bound (sim.util.limits): per record, (calls + 1) x (its tokens + largest |residual| + largest
    # output); a call without output tokens counts the mock model's estimate (exact integers, in Python)
    widest_out = _segment_max(outputs, co)
    for j in np.flatnonzero(ok[call_owner] & (outputs < 0)):
        i = int(call_owner[j])
        guess = estimate_tokens(int(ints["bytes"][at[j]]), top["bytes_per_token"][i])
        widest_out[i] = max(int(widest_out[i]), guess)
    widest_res = _segment_max(np.abs(residual), co)
    ev_sum = prefix[eo[1:]] - prefix[eo[:-1]]
    # in floats first (exact enough far from the limit); a record within a factor 2 of it, exactly
    approx = (n_calls + 1.0) * (ev_sum + np.where(n_calls > 0, widest_res + widest_out.astype(float), 0.0))
    for i in np.flatnonzero(ok & ~(approx < MAX_TRACE_TOKENS / 2)):
        c = int(n_calls[i])
        widest = [int(widest_res[i])] if c else [], [int(widest_out[i])] if c else []
        ok[i] = bound_problem(trace_token_bound(int(ev_sum[i]), widest[0], widest[1], c)) is None

    # ---- canonical text: the hash's (sorted keys) and, for JSON Lines, the line's (the writer's order)
    fast = np.flatnonzero(ok)
    with_lines = lines is not None
    texts = _texts(E, C, eo, co, hashes is None, with_lines) if hashes is None or with_lines else {}
    out: list[Trace | None] = [None] * n
    kind = _read_only(kind)
    tokens = _read_only(ints["tokens"])
    bytes_ = _read_only(ints["bytes"])
    chars = _read_only(ints["chars"])
    lines_ = _read_only(ints["lines"])
    bounded = _read_only(_np(f("bounded"), False).astype(bool))
    out_tokens = _read_only(outputs)
    rec_input = _read_only(recorded_input)
    ve_ro, res_ro = _read_only(ve), _read_only(residual)
    view_ro, local_ro = _read_only(view), _read_only(local)
    minus_one = _read_only(np.full(len(C), -1, dtype=np.int64))
    zeros = _read_only(np.zeros(len(C), dtype=np.int64))
    provides_any = _read_only(_np(pc.list_value_length(provides), 0) > 0)
    any_facts = _per_record(provides_any, ev_owner, n)
    needs = f("needs")
    any_needs = _per_record(_np(pc.list_value_length(needs), 0) > 0, ev_owner, n)
    with np.errstate(invalid="ignore"):  # an infinite stamp (its record declined): NaN, no warning
        stamps = _np(f("timestamp"), np.nan), _np(g("timestamp"), np.nan)
        elapsed = _elapsed(*stamps, eo, co, ev_owner, call_owner)
    calls_py = _BatchCalls(C, cint, opt, residual)
    unrecorded_out = _per_record(outputs < 0, call_owner, n)
    # each record's own prefix sums (from 0, one longer than its events), side by side: record i's
    # are rows [eo[i] + i, eo[i + 1] + i]
    starts = eo[:-1] + np.arange(n)
    own_prefix = np.zeros(len(E) + n, dtype=np.int64)
    own_prefix[np.arange(len(E)) + ev_owner + 1] = ints["tokens"]
    np.cumsum(own_prefix, out=own_prefix)
    own_prefix -= np.repeat(own_prefix[starts], n_ev + 1)
    own_prefix = _read_only(own_prefix)
    sorted_events, sorted_calls = texts.get("events_sorted"), texts.get("calls_sorted")
    # per record, as Python values read once (a numpy scalar per field per record costs as much again)
    eo_, co_ = eo.tolist(), co.tolist()
    any_needs_, unrecorded_, any_facts_ = any_needs.tolist(), unrecorded_out.tolist(), any_facts.tolist()
    ids, formats, files = top["trace_id"], top["source_format"], top["source_file"]
    agents, models, windows, ratios = (
        top["agent"],
        top["model"],
        top["context_window"],
        top["bytes_per_token"],
    )
    make_arrays, make_trace = _makers()
    no_facts = _no_facts(int(n_ev.max(initial=0)) + 1)
    for i in fast.tolist():
        a, b, ca, cb = eo_[i], eo_[i + 1], co_[i], co_[i + 1]
        if lines is not None:
            if not _line_matches(lines[i], top, i, policy_text[i], outcome_text[i], texts, i):
                continue
        if hashes is None:
            head, mid, end = _head_sorted(top, i, policy_text[i], outcome_text[i])
            digest = text_hash((head, sorted_calls[i].as_buffer(), mid, sorted_events[i].as_buffer(), end))
        else:
            digest = hashes[i]
        arrays = make_arrays(
            kind[a:b],
            tokens[a:b],
            bytes_[a:b],
            chars[a:b],
            lines_[a:b],
            bounded[a:b],
            ve_ro[ca:cb],
            res_ro[ca:cb],
            out_tokens[ca:cb],
            rec_input[ca:cb],
            own_prefix[a + i : b + i + 1],
            view_ro[ca:cb],
            local_ro[ca:cb],
            minus_one[ca:cb],
            zeros[ca:cb],
        )
        # the derived values the batch path asks for, from the columns (held equal to their builders)
        cache = {
            "arrays": arrays,
            "trace_hash": digest,
            "runs": 1,
            "provides_any": provides_any[a:b],
            "has_needs": any_needs_[i],
            "answer_needs": _answer_needs(needs, a, ei, ca, cb) if any_needs_[i] else (),
            "elapsed": elapsed[ca:cb],
        }
        if not unrecorded_[i]:  # sim.engine.model's recorded outputs: the column itself, none estimated
            cache["replay_outputs"] = (arrays.output_tokens, 0)
        if not any_facts_[i]:  # sim.information.ledger's facts_before of a trace without facts
            cache["facts_before"] = no_facts[: b - a + 1]
        t = make_trace(
            ids[i],
            formats[i],
            Lazy(_EventBuilder(E, a, b)),
            Lazy(_CallBuilder(calls_py, ca, cb)),
            agents[i],
            models[i],
            windows[i],
            ratios[i],
            _object(policy_text[i]),
            _object(outcome_text[i]),
            files[i],
            (),
            (),
            (),
            cache,
        )
        out[i] = t
    return [t if t is not None else slow(i) for i, t in enumerate(out)]


@lru_cache(maxsize=1)
def _makers():
    """Makers of a record's ``TraceArrays`` and ``Trace``, from their fields in order (``filler``)."""
    from dataclasses import fields

    return tuple(filler(cls, tuple(f.name for f in fields(cls))) for cls in (TraceArrays, Trace))


def text_hash(pieces) -> str:
    """``sim.trace.io.trace_hash``'s value from its canonical text given in pieces (the hash of a trace
    read as columns: one call per trace, in the process that reads the file)."""
    h = hashlib.sha256()
    for piece in pieces:
        h.update(piece)
    return "sha256:" + h.hexdigest()


def _top_keys() -> tuple[str, ...]:
    """A record's top-level keys but its lists (``arrow_schema``'s order, which the writer's is)."""
    from sim.trace.io import arrow_schema

    return tuple(k for k in arrow_schema().names if k not in ("events", "calls", "children"))


def _top_ok(top: dict, i: int) -> bool:
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


_OBJECT_TEXT: dict[str | None, str | None] = {}


def _object_text(s: str | None) -> str | None:
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


def _object(text: str) -> dict:
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


def _head_sorted(top: dict, i: int, policy: str, outcome: str) -> tuple[bytes, bytes, bytes]:
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


def _line_matches(raw: bytes, top: dict, i: int, policy: str, outcome: str, texts: dict, j: int) -> bool:
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


def _constant(a, text: Callable) -> Any:
    """A column's JSON text: one literal when every row has the same (all null, all false, one
    distinct value), which folds into the pieces around it; else ``text(a)``, a text per row."""
    pa, pc = _pa()
    if a.null_count == len(a):
        return "null"
    if a.null_count == 0 and a.type in (pa.bool_(), pa.string()) and len(a):
        first = a[0].as_py()
        if pc.all(pc.equal(a, first)).as_py():
            return json.dumps(first, ensure_ascii=False)
    return text(a)


def _fold(parts: list, rows: int) -> Any:
    """Element-wise concatenation of literals and text columns, adjacent literals joined first."""
    pa, _ = _pa()
    folded: list = []
    for p in parts:
        if isinstance(p, str) and folded and isinstance(folded[-1], str):
            folded[-1] += p
        elif not (isinstance(p, str) and not p):
            folded.append(p)
    if all(isinstance(p, str) for p in folded):  # every column one value: one text for every row
        return _strings(["".join(folded)] * rows)
    return _objects(folded)


_FEW = frozenset({"kind", "tokens_provenance", "source_type", "usage_provenance"})  # enumerations
_OPTIONAL = ("provides", "needs", "supersedes", "fact_kinds", "fact_spans", "json_bytes", "json2_bytes")
_OPTIONAL += ("source_type", "url")  # keys trace_to_dict writes only when there is something to say


def _keys(column: str) -> list[str]:
    """An event's or a call's keys in the writer's order: the schema's fields (``arrow_schema``) but
    ``run_index``, written only beyond a first run (such a record is declined)."""
    from sim.trace.io import arrow_schema

    t = arrow_schema().field(column).type.value_type
    return [t.field(i).name for i in range(t.num_fields) if t.field(i).name != "run_index"]


def _column_text(a, key: str):
    """A column's JSON text (``_constant``), by its schema type."""
    pa, pc = _pa()
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


def _texts(E, C, eo: np.ndarray, co: np.ndarray, with_sorted: bool, with_lines: bool) -> dict:
    """Per record: its events' and calls' canonical JSON, sorted keys (the hash's) when ``with_sorted``,
    and in the writer's key order when ``with_lines``."""
    pa, pc = _pa()
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
                    text = T[k] if not isinstance(T[k], str) else _strings([T[k]] * len(E))
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

    ev_off, call_off = _int32s(eo), _int32s(co)
    out = {}
    if with_sorted:
        out["events_sorted"] = _joined(ev_off, obj(sorted(ev_keys)))
        out["calls_sorted"] = _joined(call_off, call_obj(sorted(call_keys)))
    if with_lines:
        out["events_line"] = _joined(ev_off, obj(ev_keys))
        out["calls_line"] = _joined(call_off, call_obj(call_keys))
    return out


_BREAKS = "[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]"


def _lines_of(content) -> np.ndarray:
    """``len(c.splitlines())`` of each string: its line breaks (``\\r\\n`` is one), plus one for a last
    line without a break."""
    _, pc = _pa()
    c = pc.replace_substring(pc.fill_null(content, ""), "\r\n", "\n")
    breaks = _np(pc.count_substring_regex(c, _BREAKS), 0).astype(np.int64)
    tail = _np(pc.match_substring_regex(c, _BREAKS + "$"), False).astype(bool)
    nonempty = _np(pc.binary_length(c), 0) > 0
    return breaks + (nonempty & ~tail)


def _fact_problems(E, nbytes: np.ndarray) -> np.ndarray:
    """Events whose fact lists break the schema or ``sim.trace.io._fact_problems``: ids that are not
    strings, kinds outside FACT_KINDS, span and kind lists not one per provided fact, a span that is not
    [start, end] with start <= end <= bytes."""
    pa, pc = _pa()
    f = E.field
    bad = np.zeros(len(E), dtype=bool)
    rows = np.arange(len(E))
    for k in ("provides", "needs", "supersedes"):  # items are strings, never null
        items, lengths = _items(f(k))
        if items.null_count:
            bad |= _per_record(~_valid(items), np.repeat(rows, lengths), len(E))
    provided = _np(pc.list_value_length(f("provides")), 0)
    for k in ("fact_spans", "fact_kinds"):
        length = _np(pc.list_value_length(f(k)), 0)
        bad |= (length > 0) & (length != provided)
    kinds, lengths = _items(f("fact_kinds"))
    if len(kinds):
        unknown = _valid(kinds) & (_np(pc.index_in(kinds, value_set=_value_set(FACT_KINDS)), -1) < 0)
        bad |= _per_record(unknown, np.repeat(rows, lengths), len(E))
    spans, lengths = _items(f("fact_spans"))
    if len(spans):
        owner = np.repeat(rows, lengths)
        given = _valid(spans)
        numbers, width = _items(spans)
        wrong = given & (width != 2)
        if len(numbers):
            v = _np(numbers, -1)
            per = np.repeat(np.arange(len(spans)), width)
            wrong |= _per_record(~_nat(v), per, len(spans))
            two = given & (width == 2)
            starts = _numpy(spans.offsets).astype(np.int64)[:-1] - int(spans.offsets[0].as_py())
            start = np.where(two, v[np.minimum(starts, len(v) - 1)], 0)
            end = np.where(two, v[np.minimum(starts + 1, len(v) - 1)], 0)
            wrong |= two & ~((start <= end) & (end <= nbytes[owner]))
        bad |= _per_record(wrong, owner, len(E))
    return bad


def _unprovided(E, lists, owner: np.ndarray) -> np.ndarray:
    """Events naming (in ``lists``: needs or supersedes) a fact no earlier event of its record provides."""
    given, given_n = _items(E.field("provides"))
    asked, asked_n = _items(lists)
    rows = np.arange(len(E))
    return _unmatched(owner, np.repeat(rows, given_n), given, np.repeat(rows, asked_n), asked, False, len(E))


def _unmatched(owner, given_at, given, asked_at, asked, same_ok: bool, rows: int) -> np.ndarray:
    """Rows (of ``rows``) asking (at ``asked_at``) for a string no row of their record (``owner``) gave
    (at ``given_at``) before them (or at the same row when ``same_ok``)."""
    pa, pc = _pa()
    every = pa.chunked_array([pc.cast(given, pa.string()), pc.cast(asked, pa.string())]).combine_chunks()
    codes = _numpy(pc.dictionary_encode(every).indices).astype(np.int64)
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


def _answer_needs(needs, first_event: int, event_index: np.ndarray, first_call: int, end_call: int) -> tuple:
    """``sim.engine.common.answer_needs``: the facts the last call's action needs."""
    if end_call == first_call:
        return ()
    got = needs[first_event + int(event_index[end_call - 1])].as_py()
    return tuple(got or ())


def _unanswered(E, kind, answer, tcids, owner) -> np.ndarray:
    """Events whose ``tool_call_id`` no earlier (or the same) assistant event of its record issued."""
    issued, lengths = _items(tcids)
    issued_at = np.repeat(np.arange(len(E)), lengths)
    assistant = kind[issued_at] == _ASSISTANT
    _, pc = _pa()
    answer_ids = pc.filter(E.field("tool_call_id"), _mask(answer))
    issued_at, issued = issued_at[assistant], pc.filter(issued, _mask(assistant))
    answer_at = np.flatnonzero(answer)
    if _answered_in_order(owner, issued_at, issued, answer_at, answer_ids):
        return np.zeros(len(E), dtype=bool)
    return _unmatched(owner, issued_at, issued, answer_at, answer_ids, True, len(E))


def _answered_in_order(owner, issued_at, issued, answer_at, answer_ids) -> bool:
    """Does the k-th answer name the k-th issued id, issued at or before it in its own record, for every
    k? Then every answer is answered (what ``_unmatched`` finds without sorting; a recorded agent answers
    its tool calls in the order it made them). False: no answer (so, ``_unmatched`` decides)."""
    _, pc = _pa()
    if len(answer_at) != len(issued_at) or issued.null_count or answer_ids.null_count:
        return False
    if not ((issued_at <= answer_at).all() and (owner[issued_at] == owner[answer_at]).all()):
        return False
    return len(issued) == 0 or pc.all(pc.equal(issued, answer_ids)).as_py() is True


_NO_FACTS = np.zeros((0, 1 + len(FACT_KINDS)), dtype=np.int64)


def _no_facts(rows: int) -> np.ndarray:
    """Zeros of shape (rows, 1 + kinds), read-only, shared (a view of one table grown on demand)."""
    global _NO_FACTS
    if len(_NO_FACTS) < rows:
        _NO_FACTS = _read_only(np.zeros((max(rows, 2 * len(_NO_FACTS), 1024), 1 + len(FACT_KINDS)), np.int64))
    return _NO_FACTS[:rows]


def _segment_max(v: np.ndarray, off: np.ndarray) -> np.ndarray:
    """Per segment [off[i], off[i + 1]) of ``v``: its largest value (0 for an empty one)."""
    out = np.zeros(len(off) - 1, dtype=v.dtype)
    full = np.flatnonzero(np.diff(off) > 0)
    if len(full):
        out[full] = np.maximum.reduceat(v, off[full])
    return out


def _elapsed(ev_time, call_time, eo, co, ev_owner, call_owner) -> np.ndarray:
    """``sim.engine.fast.batch_static.elapsed_array`` of every record from the columns: each call's time
    since its record's first stamp (events' and calls'), the last known one for a call without a stamp (0
    before any); NaN: no stamp."""
    n = len(eo) - 1
    start = np.full(n, np.inf)
    np.fmin.at(start, ev_owner, ev_time)  # fmin: a NaN (no stamp) never wins
    np.fmin.at(start, call_owner, call_time)
    known = ~np.isnan(call_time)
    idx = np.where(known, np.arange(len(call_time)), -1)
    np.maximum.accumulate(idx, out=idx)
    own = idx >= co[call_owner]  # a stamp of this record (an earlier record's does not carry over)
    got = call_time[np.maximum(idx, 0)] - start[call_owner]
    return _read_only(np.where(own & np.isfinite(start[call_owner]), got, 0.0))


class _BatchCalls:
    """Every call of the batch, as the reference builds them (nulls stay None), made when a trace of
    the batch first asks for its calls."""

    def __init__(self, C, cint: dict, opt: dict, residual: np.ndarray) -> None:
        self.C, self.cint, self.residual, self.calls = C, cint, residual, None

    def __getitem__(self, span: slice) -> list[Call]:
        if self.calls is None:
            g, cint = self.C.field, self.cint
            cols = [cint["index"].tolist(), cint["event_index"].tolist(), cint["view_end"].tolist()]
            cols += [g(k).to_pylist() for k in ("input_tokens", "output_tokens")]
            cols += [
                g(k).to_pylist() for k in ("cache_read_tokens", "cache_write_tokens", "reasoning_tokens")
            ]
            cols += [self.residual.tolist(), g("usage_provenance").to_pylist(), g("timestamp").to_pylist()]
            cols += [g("recorded_cost_usd").to_pylist()]
            self.calls = list(map(Call, *cols))
        return self.calls[span]


class _CallBuilder:
    __slots__ = ("calls", "a", "b")

    def __init__(self, calls: _BatchCalls, a: int, b: int) -> None:
        self.calls, self.a, self.b = calls, a, b

    def __call__(self) -> tuple:
        return tuple(self.calls[self.a : self.b])


class _EventBuilder:
    """A record's events from its rows of the batch's event column, built as the reference builds them."""

    __slots__ = ("a", "b", "events")

    def __init__(self, events, a: int, b: int) -> None:
        self.events, self.a, self.b = events, a, b

    def __call__(self) -> tuple:
        from sim.trace.io import _event

        return tuple(map(_event, self.events.slice(self.a, self.b - self.a).to_pylist()))


# ----------------------------------------------------------------------------------------------- files
def parquet_traces(
    path: Path, slow: Callable[[int, dict], Trace], read_error: Callable[[Exception, int], Exception]
) -> Iterator[Trace]:
    """The traces of a canonical Parquet file in order. ``slow(row, record)``: the reference for a
    declined row (``record`` as ``sim.trace.io.parquet_rows`` gives it); ``read_error(exc, row)``: what
    to raise when the file cannot be read at ``row`` (the reference reader, 64 rows a batch, says where)."""
    with open(path, "rb") as f:  # the bytes a record of hashes vouches for are the ones read here
        yield from _parquet_traces(path, f, slow, read_error)


# Enumerations (a few distinct strings) read from Parquet as Arrow dictionaries: decoding them into one
# string per row was a third of the file's decoding (10k runs: 0.55 s CPU, 0.37 s so)
_DICTIONARY_FIELDS = {"events": ("kind", "tokens_provenance"), "calls": ("usage_provenance",)}


@lru_cache(maxsize=1)
def _dictionary_schema():
    """``sim.trace.io.arrow_schema`` as a canonical file reads with those fields as dictionaries."""
    from sim.trace.io import arrow_schema

    pa, _ = _pa()
    schema = arrow_schema()
    for column, names in _DICTIONARY_FIELDS.items():
        at = schema.get_field_index(column)
        struct = schema.field(at).type.value_type
        fields = [
            f.with_type(pa.dictionary(pa.int32(), pa.string())) if f.name in names else f for f in struct
        ]
        schema = schema.set(at, pa.field(column, pa.list_(pa.struct(fields))))
    return schema


def _open_parquet(f):
    """The Parquet file ``f`` opened for the fast path: a canonical one with its enumerations read as
    dictionaries (``_DICTIONARY_FIELDS``, named by their paths in the file); any other as it is."""
    import pyarrow.parquet as pq

    from sim.trace.io import arrow_schema

    pf = pq.ParquetFile(f)
    if not pf.schema_arrow.equals(arrow_schema()):
        return pf
    meta = pf.metadata
    paths = [meta.schema.column(i).path for i in range(meta.num_columns)]
    wanted = [
        p
        for p in paths
        if len(parts := p.split(".")) == 4 and parts[-1] in _DICTIONARY_FIELDS.get(parts[0], ())
    ]
    return pq.ParquetFile(f, metadata=meta, read_dictionary=wanted)


def _parquet_traces(path: Path, f, slow, read_error) -> Iterator[Trace]:
    from sim.trace.io import parquet_rows
    from sim.trace.storedhashes import stored_hashes

    hashes = stored_hashes(path, f)
    done = 0
    readable = True
    batches = _ahead(_arrow_batches(f))
    try:  # closed here, before the file is: the thread reading ahead stops first
        for batch in batches:
            if batch is None:  # a batch Arrow could not read
                readable = False
                break
            rows = None

            def slow_row(i: int, base=done, batch=batch) -> Trace:
                nonlocal rows
                if rows is None:
                    rows = batch.to_pylist()
                return slow(base + i, rows[i])

            known = None if hashes is None else hashes[done : done + batch.num_rows]
            if known is not None and len(known) != batch.num_rows:  # more rows than recorded: not ours
                hashes = known = None
            ts = _declining(
                lambda batch=batch, slow_row=slow_row, known=known: batch_traces(
                    batch, slow_row, hashes=known
                )
            )
            for t in ts if ts is not None else map(slow_row, range(batch.num_rows)):
                yield t
                done += 1
    finally:
        batches.close()
    if readable:
        return
    # the rest through the reference: it reads (and fails) where it always has
    rows_iter = parquet_rows(path, start=done)
    while True:
        try:
            got = next(rows_iter, None)
        except Exception as exc:  # noqa: BLE001 - a TraceError of the reader
            raise read_error(exc, done) from None
        if got is None:
            return
        yield slow(got[0], got[1])
        done += 1


def _arrow_batches(f) -> Iterator:
    """The Arrow batches of the Parquet file ``f`` for the fast path, in order, each checked (its
    strings UTF-8); a last None when one could not be read (the reference reads from there on). Meant
    to run ahead of its reader (``_ahead``): Arrow decodes without the interpreter lock."""
    try:  # one thread: the batch ahead is decoded on a second one (_ahead), beside the replay
        batches = _open_parquet(f).iter_batches(batch_size=PARQUET_BATCH, use_threads=False)
    except Exception:  # noqa: BLE001 - not readable: the reference says how
        yield None
        return
    while True:
        try:
            batch = next(batches, None)
            if batch is not None:
                batch.validate(full=True)  # strings that are not UTF-8: the reference names the row
        except Exception:  # noqa: BLE001 - pyarrow's reading only
            yield None
            return
        if batch is None:
            return
        yield batch


READ_AHEAD: bool | None = None  # read the next batch on a second thread: None when a core is free


def _spare_core() -> bool:
    """Is a core free for reading ahead (the 1-minute load average below the cores this process may use)?
    With one free, the second thread saves wall time (the README gives the figures, measured on 2 cores
    at load ~1: 10k streamed runs, JSON Lines 1.8 s instead of 2.8 s, Parquet 0.62 s instead of 0.71 s);
    on a busy machine (measured at load ~5) it cost ~10% CPU (two threads' allocations and hand-offs)
    for no wall time."""
    import os

    try:
        cores = len(os.sched_getaffinity(0))
        load = os.getloadavg()[0]
    except (AttributeError, OSError):  # no affinity or load average on this platform
        return False
    return cores >= 2 and load < cores


def _ahead(items: Iterator) -> Iterator:
    """``items`` in order, each made on a second thread while the caller uses the one before (one item
    ahead, no more) when ``READ_AHEAD`` says so (by default: when a core is free): Arrow decodes and
    parses without the interpreter lock, so the next batch is read on the second core while this one
    is replayed. The same items either way: an exception ``items`` raises is raised here, where the
    caller reaches it, as without the thread; the thread is stopped (``items`` closed on it) when the
    caller stops early."""
    if not _reading_ahead():
        return items
    return _on_thread(items)


def _reading_ahead() -> bool:
    return READ_AHEAD if READ_AHEAD is not None else _spare_core()


def _on_thread(items: Iterator) -> Iterator:
    import queue
    import threading

    asks: queue.SimpleQueue = queue.SimpleQueue()
    answers: queue.SimpleQueue = queue.SimpleQueue()

    def run() -> None:
        try:
            while asks.get():
                try:
                    answers.put((True, next(items)))
                except StopIteration:
                    answers.put((False, None))
                    return
                except BaseException as exc:  # noqa: BLE001 - raised again on the caller's thread
                    answers.put((False, exc))
                    return
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()

    worker = threading.Thread(target=run, name="ctxsim-read-ahead", daemon=True)
    asks.put(True)
    try:
        with sigint_held():  # a Ctrl-C during start() would leave the thread running, never told to stop
            worker.start()
        while True:
            more, item = answers.get()
            if not more:
                if item is not None:
                    raise item
                return
            asks.put(True)  # the next one, made while the caller uses this one
            yield item
    finally:
        asks.put(False)
        try:
            worker.join()
        except RuntimeError:  # never started: at most it makes the item asked for, then reads the stop
            pass


def jsonl_traces(path: Path, slow: Callable[[int, bytes | None, int], Trace | None]) -> Iterator[Trace]:
    """The traces of a canonical JSON Lines file in order. ``slow(lineno, raw, record)``: the reference
    for a line the fast path declines (``record``: how many records came before it; None returned: a
    blank line; ``raw`` None: a line past the length limit)."""
    from sim.trace.storedhashes import stored_hashes

    done = [0]  # records so far
    with open(path, "rb") as f:  # the bytes a record of hashes vouches for are the ones read here
        ahead = _reading_ahead()  # a core free: the next block read and parsed on it, by Arrow's threads
        # too, and the file's digest taken on a thread of its own (at offsets) while the first block is
        blocks = _on_thread(_jsonl_blocks(path, f, threads=True)) if ahead else _jsonl_blocks(path, f)
        hashes = _Soon(lambda: stored_hashes(path, f, in_place=ahead))  # nothing runs yet, as above
        try:  # closed here, before the file is: the threads stop first
            hashes.start(now=not ahead)
            for block, batch in blocks:
                yield from _jsonl_block(block, batch, slow, done, hashes.result())
        finally:
            blocks.close()
            hashes.join()


class _Soon:
    """``make()`` begun on a thread of its own by ``start()`` (``now``: made there instead); ``result()``
    waits for it and gives its result or raises its exception; ``join()`` only waits. Made before the
    ``try`` whose ``finally`` joins it, started inside it: a Ctrl-C at any point leaves no thread behind."""

    def __init__(self, make: Callable[[], Any]) -> None:
        self._make_it = make
        self._got: tuple = ()
        self._thread: Any = None

    def start(self, now: bool = False) -> None:
        if now:  # its exception raised here, as the call's would be
            self._got = (True, self._make_it())
            return
        import threading

        self._thread = threading.Thread(
            target=self._make, args=(self._make_it,), name="ctxsim-digest", daemon=True
        )
        with sigint_held():  # a Ctrl-C during start() raises after it, in the caller's try
            self._thread.start()

    def _make(self, make: Callable[[], Any]) -> None:
        try:
            self._got = (True, make())
        except BaseException as exc:  # noqa: BLE001 - raised again where the result is asked for
            self._got = (False, exc)

    def join(self) -> None:
        if self._thread is not None and self._thread.ident is not None:  # started
            self._thread.join()

    def result(self) -> Any:
        self.join()
        ok, got = self._got
        if not ok:
            raise got
        return got


def _jsonl_blocks(
    path: Path, f, threads: bool = False
) -> Iterator[tuple[list[tuple[int, bytes | None]], Any]]:
    """The file's non-blank lines in blocks of about ``JSONL_BLOCK`` bytes (a line past the length
    limit, ``raw`` None, a block of its own), each with what Arrow parsed from it (``_parsed``; on
    Arrow's threads with ``threads``). Meant to run ahead of its reader (``_on_thread``): Arrow parses
    without the interpreter lock, and the file is read a block at a time (read line by line, the
    thread would wait for the lock after each of the few reads a line takes, while the replay runs)."""
    from sim.util.jsonl import lines_of

    block: list[tuple[int, bytes | None]] = []
    size = 0
    for lineno, raw in lines_of(path, file=f, chunk=JSONL_BLOCK):
        if raw is None:
            if block:
                yield block, _parsed(block, threads)
            block, size = [], 0
            yield [(lineno, None)], None
            continue
        if not raw.strip():  # blank (ASCII whitespace): no record, as in the reference
            continue
        block.append((lineno, raw))
        size += len(raw)
        if size >= JSONL_BLOCK:
            yield block, _parsed(block, threads)
            block, size = [], 0
    if block:
        yield block, _parsed(block, threads)


def _parsed(block: list[tuple[int, bytes | None]], threads: bool = False) -> Any:
    """The block's lines as one Arrow batch of canonical records (``arrow_schema``), or None when Arrow
    does not read every line as one such record (the reference reads them and says why). ``threads``:
    Arrow parses the block in a few parts at once (the same batch; with a core free)."""
    import pyarrow.json as pj

    from sim.trace.io import arrow_schema

    pa, _ = _pa()
    lines = [None if raw is None else raw[:-1] if raw.endswith(b"\n") else raw for _, raw in block]
    # Arrow reads a block whose every line is one object (else: blank lines, \r\n, ...: the reference)
    if not all(line is not None and line[:1] == b"{" and line[-1:] == b"}" for line in lines):
        return None
    data = b"\n".join(lines)
    part = len(data) + 1  # Arrow's block: whole lines, so at least the longest (one past it: Arrow refuses)
    if threads:
        part = max(len(data) // _PARTS, max(map(len, lines))) + 1
    try:  # to the schema: Arrow's inferring reader crashes on deep nesting and loses lists' leading nulls
        table = pj.read_json(
            pa.BufferReader(data),
            read_options=pj.ReadOptions(use_threads=threads, block_size=part),
            parse_options=pj.ParseOptions(explicit_schema=arrow_schema(), unexpected_field_behavior="error"),
        )
        if table.num_rows == len(lines):
            return table.combine_chunks().to_batches()[0]
    except Exception:  # noqa: BLE001 - not what Arrow reads: the reference says why
        pass
    return None


def _jsonl_block(
    block: list[tuple[int, bytes | None]], batch, slow, done: list[int], hashes: list[str] | None
) -> Iterator[Trace]:
    if batch is None:
        for lineno, raw in block:
            t = slow(lineno, raw, done[0])
            if t is not None:
                done[0] += 1
                yield t
        return
    base = done[0]
    known = None if hashes is None else hashes[base : base + len(block)]
    if known is not None and len(known) != len(block):  # more records than recorded: not ours
        known = None
    # a file that holds the very bytes its record of hashes was taken from is write_traces' own output,
    # read back when it was written: its lines are the canonical encoding, and are not checked again
    # (a third of reading a JSON Lines file); the schema's rules are
    check = None
    if known is None:
        check = [raw[:-1] if raw.endswith(b"\n") else raw for _, raw in block]
    ts = _declining(
        lambda: batch_traces(batch, lambda i: slow(block[i][0], block[i][1], base + i), check, known)
    )
    if ts is None:  # the whole block through the reference
        ts = filter(None, (slow(lineno, raw, base + i) for i, (lineno, raw) in enumerate(block)))
    for t in ts:
        done[0] += 1
        yield t


def _declining(read: Callable[[], list[Trace]]) -> list[Trace] | None:
    """``read()``; None where Arrow's compute fails on the batch (e.g. text past its 2 GiB offsets): the
    fast path declines it and the reference reads it, naming file, record and field if it is bad. The
    reference's own errors (``CtxsimError``) pass through."""
    try:
        return read()
    except CtxsimError:
        raise
    except Exception:  # noqa: BLE001 - pyarrow's compute only: the reference reads the batch again
        return None
