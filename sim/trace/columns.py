"""Canonical files read as columns: a batch of records (Arrow: a Parquet batch, or a block of JSON Lines
parsed by Arrow's reader) validated and turned into traces with numpy and Arrow compute, without a
Python object per event.

What a trace read here holds: its calls, its ``TraceArrays`` and the derived values the fast paths ask
for, filled from the columns; its events are built on first use (``sim.core.types.Lazy``), the very
``Event`` objects the record-by-record reader makes. Its content hash is computed here from the same
canonical text ``sim.trace.codec.trace_hash`` hashes (sorted keys, no ``source_file``), written by Arrow
compute instead of ``json.dumps``: stored as the trace's ``trace_hash`` derived value, so nothing
re-encodes the trace to hash it; a test holds it equal to ``trace_hash`` on the embedded suite and on
real traces.

The fast path *declines* what it does not handle, and such a record goes through the record-by-record reader
(``slow``), which validates and builds it as it always has, and names the file, record and field of a bad one
(so every error message is the old one). Declined: a record whose columns fail any check of
``sim.trace.schema`` / ``sim.trace.rules.semantic_problems`` (the reference names the problem), one with
children or several runs, and a JSON line that is not byte for byte the canonical encoding of what Arrow read
from it (``write_traces``' own output is): that one check covers whatever a JSON document can say that Arrow's
typed reader does not (a missing key versus a null, duplicate keys, whitespace, escapes, ``5`` for ``5.0``). A
file whose record of trace hashes (``sim.trace.storedhashes``) holds for its bytes is ``write_traces``' own
output, read back cleanly when it was written: its lines are not compared again (every rule of the schema is
still checked; a record forged by hand over other bytes gets those lines read as Arrow reads them, as it gets
its hashes taken: see ``sim.trace.storedhashes``)."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

import numpy as np

from sim.core.types import (
    FACT_KINDS,
    Call,
    Lazy,
    Trace,
    TraceArrays,
    filler,
)
from sim.cost.tokens import estimate_tokens
from sim.trace.arrow_arrays import (
    arrow_and_compute,
    numpy_filled,
    read_only,
)
from sim.trace.codec import arrow_schema, dictionary_schema, event_from_dict
from sim.trace.column_checks import (
    CallColumns,
    Rows,
    call_columns,
    event_problems,
    per_record,
    top_keys,
    top_ok,
)
from sim.trace.column_links import ToolLinks, batch_links
from sim.trace.column_text import (
    canonical_texts,
    head_sorted,
    line_matches,
    object_text,
    parsed_object,
    text_hash,
)
from sim.util.errors import CtxsimError
from sim.util.limits import MAX_TRACE_TOKENS, bound_problem, trace_token_bound

Slow = Callable[[int], Trace]  # record number in the batch -> its trace by the reference reader


def batch_traces(
    batch, slow: Slow, lines: list[bytes] | None = None, hashes: list[str] | None = None
) -> list[Trace]:
    """The traces of a batch of canonical records (``sim.trace.codec.arrow_schema``), in order; a record the
    fast path declines is ``slow(i)``. ``lines``: the JSON lines the batch was parsed from (each must be
    the canonical encoding of its record to stay on the fast path). ``hashes``: the records' trace
    hashes recorded for the file's bytes (``sim.trace.storedhashes``), taken instead of hashing their text."""
    n = batch.num_rows
    if n == 0:
        return []
    if not (batch.schema.equals(arrow_schema()) or batch.schema.equals(dictionary_schema())):
        return [slow(i) for i in range(n)]
    rows = Rows(batch)
    # ---- events and calls: the schema's rules, then the cross-field ones
    bad_events, ints, kind = event_problems(rows)
    ok = rows.ok & ~bad_events
    calls = call_columns(rows, ints["tokens"], kind)
    ok &= ~calls.bad
    ok &= ~((rows.n_ev > 0) & (rows.n_calls == 0))  # a run without a call (its opening prompt)
    # ---- top level
    top = {k: batch.column(k).to_pylist() for k in top_keys()}
    ok, policy_text, outcome_text = _top_level(top, ok)
    _hold_sum_bound(ok, rows, calls, ints["bytes"], top["bytes_per_token"])
    # ---- canonical text: the hash's (sorted keys) and, for JSON Lines, the line's (the writer's order)
    with_lines = lines is not None
    texts = (
        canonical_texts(rows.E, rows.C, rows.eo, rows.co, hashes is None, with_lines)
        if hashes is None or with_lines
        else {}
    )
    columns = _Shared(rows, ints, kind, calls)
    out = _build(np.flatnonzero(ok), rows, columns, top, (policy_text, outcome_text), texts, lines, hashes)
    return [t if t is not None else slow(i) for i, t in enumerate(out)]


def _top_level(top: dict, ok: np.ndarray) -> tuple[np.ndarray, list, list]:
    """``ok`` narrowed by the schema's rules on the top-level values, and each record's recorded policy
    and outcome as ``trace_to_dict`` writes them (None for a declined record)."""
    fine = [o and top_ok(top, i) for i, o in enumerate(ok.tolist())]  # Python bools: no numpy scalars
    policy_text = [object_text(s) if o else None for o, s in zip(fine, top["recorded_policy"], strict=True)]
    outcome_text = [object_text(s) if o else None for o, s in zip(fine, top["outcome"], strict=True)]
    fine = [
        o and p is not None and q is not None for o, p, q in zip(fine, policy_text, outcome_text, strict=True)
    ]
    return np.array(fine, dtype=bool), policy_text, outcome_text


def _hold_sum_bound(ok: np.ndarray, rows: Rows, calls: CallColumns, nbytes: np.ndarray, ratios: list) -> None:
    """Clear ``ok`` of the records past the sum bound (sim.util.limits): per record, (calls + 1) x (its
    tokens + largest |residual| + largest output); a call without output tokens counts the mock model's
    estimate (exact integers, in Python)."""
    outputs, co, call_owner, n_calls = calls.opt["output_tokens"], rows.co, rows.call_owner, rows.n_calls
    widest_out = _segment_max(outputs, co)
    for j in np.flatnonzero(ok[call_owner] & (outputs < 0)):
        i = int(call_owner[j])
        guess = estimate_tokens(int(nbytes[calls.at[j]]), ratios[i])
        widest_out[i] = max(int(widest_out[i]), guess)
    widest_res = _segment_max(np.abs(calls.residual), co)
    ev_sum = calls.prefix[rows.eo[1:]] - calls.prefix[rows.eo[:-1]]
    # in floats first (exact enough far from the limit); a record within a factor 2 of it, exactly
    approx = (n_calls + 1.0) * (ev_sum + np.where(n_calls > 0, widest_res + widest_out.astype(float), 0.0))
    for i in np.flatnonzero(ok & ~(approx < MAX_TRACE_TOKENS / 2)):
        c = int(n_calls[i])
        widest = [int(widest_res[i])] if c else [], [int(widest_out[i])] if c else []
        ok[i] = bound_problem(trace_token_bound(int(ev_sum[i]), widest[0], widest[1], c)) is None


class _Shared:
    """What the batch's traces take slices of: read-only columns (the ``TraceArrays`` fields), the
    columns of the derived values the fast paths ask for, per record as Python values where the loop
    reads one per record (a numpy scalar per field per record costs as much again), and the batch's
    calls, built on first use."""

    def __init__(self, rows: Rows, ints: dict, kind: np.ndarray, calls: CallColumns) -> None:
        _, pc = arrow_and_compute()
        E, C, n, ev_owner, call_owner = rows.E, rows.C, rows.n, rows.ev_owner, rows.call_owner
        f, g = E.field, C.field
        outputs = calls.opt["output_tokens"]
        self.kind = read_only(kind)
        self.tokens = read_only(ints["tokens"])
        self.bytes = read_only(ints["bytes"])
        self.chars = read_only(ints["chars"])
        self.lines = read_only(ints["lines"])
        self.bounded = read_only(numpy_filled(f("bounded"), False).astype(bool))
        self.out_tokens = read_only(outputs)
        self.rec_input = read_only(calls.opt["input_tokens"])
        self.ve, self.residual = read_only(calls.cint["view_end"]), read_only(calls.residual)
        self.view, self.local = read_only(calls.view), read_only(calls.local)
        self.minus_one = read_only(np.full(len(C), -1, dtype=np.int64))
        self.zeros = read_only(np.zeros(len(C), dtype=np.int64))
        self.provides_any = read_only(numpy_filled(pc.list_value_length(f("provides")), 0) > 0)
        self.any_facts = per_record(self.provides_any, ev_owner, n).tolist()
        needed = numpy_filled(pc.list_value_length(f("needs")), 0) > 0
        self.any_needs = per_record(needed, ev_owner, n).tolist()
        with np.errstate(invalid="ignore"):  # an infinite stamp (its record declined): NaN, no warning
            stamps = numpy_filled(f("timestamp"), np.nan), numpy_filled(g("timestamp"), np.nan)
            self.elapsed = _elapsed(*stamps, rows.eo, rows.co, ev_owner, call_owner)
        self.calls = _BatchCalls(C, calls.cint, calls.opt, calls.residual)
        self.unrecorded_out = per_record(outputs < 0, call_owner, n).tolist()
        self.own_prefix = _own_prefix(rows, ints["tokens"])
        links, text_free = batch_links(E, kind, ev_owner, n, calls.at)
        local = np.where(links.issuer >= 0, links.issuer - rows.eo[ev_owner], -1)  # within its record
        self.links = ToolLinks(*map(read_only, (links.ids_n, links.ids_json, local, links.call_ids)))
        self.text_free = text_free.tolist()


def _own_prefix(rows: Rows, tokens: np.ndarray) -> np.ndarray:
    """Each record's own prefix sums of its events' tokens (from 0, one longer than its events), side by
    side: record i's are rows [eo[i] + i, eo[i + 1] + i]. Read-only."""
    n, eo, ev_owner = rows.n, rows.eo, rows.ev_owner
    starts = eo[:-1] + np.arange(n)
    own_prefix = np.zeros(len(rows.E) + n, dtype=np.int64)
    own_prefix[np.arange(len(rows.E)) + ev_owner + 1] = tokens
    np.cumsum(own_prefix, out=own_prefix)
    own_prefix -= np.repeat(own_prefix[starts], rows.n_ev + 1)
    return read_only(own_prefix)


def _build(
    fast: np.ndarray,
    rows: Rows,
    s: _Shared,
    top: dict,
    objects: tuple[list, list],
    texts: dict,
    lines: list[bytes] | None,
    hashes: list[str] | None,
) -> list[Trace | None]:
    """The traces of the records at ``fast`` (None for the others, and for a JSON line that is not its
    record's canonical encoding), from the columns."""
    E, n = rows.E, rows.n
    policy_text, outcome_text = objects
    out: list[Trace | None] = [None] * n
    kind, tokens, bytes_, chars, lines_, bounded = s.kind, s.tokens, s.bytes, s.chars, s.lines, s.bounded
    ve_ro, res_ro, out_tokens, rec_input = s.ve, s.residual, s.out_tokens, s.rec_input
    own_prefix, view_ro, local_ro, minus_one, zeros = s.own_prefix, s.view, s.local, s.minus_one, s.zeros
    provides_any, elapsed, calls_py = s.provides_any, s.elapsed, s.calls
    links, text_free_ = s.links, s.text_free
    any_needs_, unrecorded_, any_facts_ = s.any_needs, s.unrecorded_out, s.any_facts
    sorted_events, sorted_calls = texts.get("events_sorted"), texts.get("calls_sorted")
    eo_, co_ = rows.eo.tolist(), rows.co.tolist()
    ids, formats, files = top["trace_id"], top["source_format"], top["source_file"]
    agents, models, windows, ratios = (
        top["agent"],
        top["model"],
        top["context_window"],
        top["bytes_per_token"],
    )
    make_arrays, make_trace = _makers()
    no_facts = _no_facts(int(rows.n_ev.max(initial=0)) + 1)
    for i in fast.tolist():
        a, b, ca, cb = eo_[i], eo_[i + 1], co_[i], co_[i + 1]
        if lines is not None:
            if not line_matches(lines[i], top, i, policy_text[i], outcome_text[i], texts, i):
                continue
        if hashes is None:
            head, mid, end = head_sorted(top, i, policy_text[i], outcome_text[i])
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
            "elapsed": elapsed[ca:cb],
            "tool_links": ToolLinks(
                links.ids_n[a:b], links.ids_json[a:b], links.issuer[a:b], links.call_ids[ca:cb]
            ),
            "text_free": text_free_[i],
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
            parsed_object(policy_text[i]),
            parsed_object(outcome_text[i]),
            files[i],
            (),
            (),
            (),
            cache,
        )
        out[i] = t
    return out


@lru_cache(maxsize=1)
def _makers():
    """Makers of a record's ``TraceArrays`` and ``Trace``, from their fields in order (``filler``)."""
    from dataclasses import fields

    return tuple(filler(cls, tuple(f.name for f in fields(cls))) for cls in (TraceArrays, Trace))


_NO_FACTS = np.zeros((0, 1 + len(FACT_KINDS)), dtype=np.int64)


def _no_facts(rows: int) -> np.ndarray:
    """Zeros of shape (rows, 1 + kinds), read-only, shared (a view of one table grown on demand)."""
    global _NO_FACTS
    if len(_NO_FACTS) < rows:
        _NO_FACTS = read_only(np.zeros((max(rows, 2 * len(_NO_FACTS), 1024), 1 + len(FACT_KINDS)), np.int64))
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
    return read_only(np.where(own & np.isfinite(start[call_owner]), got, 0.0))


class _BatchCalls:
    """Every call of the batch, as the reference builds them (nulls stay None): a trace's own when few of
    the batch's traces ask (``size`` asks only for the runs its grid path hands to the loop), the whole
    batch's at once from the ``ALONE``-th ask on (a sweep asks for every one)."""

    ALONE = 16

    def __init__(self, C, cint: dict, opt: dict, residual: np.ndarray) -> None:
        self.C, self.cint, self.residual, self.calls, self.asked = C, cint, residual, None, 0

    def __getitem__(self, span: slice) -> list[Call]:
        if self.calls is None:
            self.asked += 1
            if self.asked < self.ALONE:
                return self._built(span.start, span.stop)
            self.calls = self._built(0, len(self.C))
        return self.calls[span]

    def _built(self, a: int, b: int) -> list[Call]:
        C, cint = self.C.slice(a, b - a), self.cint
        g = C.field
        cols = [
            cint["index"][a:b].tolist(),
            cint["event_index"][a:b].tolist(),
            cint["view_end"][a:b].tolist(),
        ]
        cols += [g(k).to_pylist() for k in ("input_tokens", "output_tokens")]
        cols += [g(k).to_pylist() for k in ("cache_read_tokens", "cache_write_tokens", "reasoning_tokens")]
        cols += [self.residual[a:b].tolist(), g("usage_provenance").to_pylist(), g("timestamp").to_pylist()]
        cols += [g("recorded_cost_usd").to_pylist()]
        return list(map(Call, *cols))


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
        return tuple(map(event_from_dict, self.events.slice(self.a, self.b - self.a).to_pylist()))


def declining(read: Callable[[], list[Trace]]) -> list[Trace] | None:
    """``read()``; None where Arrow's compute fails on the batch (e.g. text past its 2 GiB offsets): the
    fast path declines it and the reference reads it, naming file, record and field if it is bad. The
    reference's own errors (``CtxsimError``) pass through."""
    try:
        return read()
    except CtxsimError:
        raise
    except Exception:  # noqa: BLE001 - pyarrow's compute only: the reference reads the batch again
        return None
