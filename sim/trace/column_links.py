"""How a trace's tool calls and results link, per event, as arrays (``ToolLinks``): how many tool call ids
an event issues, the JSON bytes of its ids (an assistant's, summed; a result's own id), and which event
issued a result (the latest earlier assistant event naming its id; -1: none). The seed engine's per-trace
tables (``sim.engine.fast.seed_static``) read these instead of building every ``Event``.

``tool_links(trace)`` derives them from the events (the reference); ``batch_links`` from a batch's
event columns at once, for the column reader (``sim.trace.columns``), which keeps each record's slice
as the trace's ``tool_links`` derived value. Also ``text_free``: per record, whether no event holds text
or recorded JSON sizes (what lets a trace's tables be read from its counts alone)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from sim.cost.tokens import json_bytes


class ToolLinks(NamedTuple):
    ids_n: np.ndarray  # per event: tool call ids it issues
    ids_json: np.ndarray  # per event: JSON bytes of its ids (a result: of its own id, "" when it has none)
    issuer: np.ndarray  # per event: the event that issued this result (-1: none, or not a result)
    call_ids: np.ndarray  # per call: tool call ids its event issues


def tool_links(trace) -> ToolLinks:
    """``trace``'s links from its events: the rule ``sim.policies.seed_state.SeedEvents`` follows."""
    events = trace.events
    n = len(events)
    ids_n, ids_json, issuer = np.zeros(n, np.int64), np.zeros(n, np.int64), np.full(n, -1, np.int64)
    by_id: dict[str, int] = {}
    for e in events:
        if e.kind == "assistant":
            ids_n[e.index] = len(e.tool_call_ids)
            ids_json[e.index] = sum(json_bytes(c) for c in e.tool_call_ids)
            for c in e.tool_call_ids:
                by_id[c] = e.index
        elif e.kind == "tool_result":
            ids_n[e.index] = len(e.tool_call_ids)
            ids_json[e.index] = json_bytes(e.tool_call_id or "")
            if e.tool_call_id in by_id:
                issuer[e.index] = by_id[e.tool_call_id]
        else:
            ids_n[e.index] = len(e.tool_call_ids)
    return ToolLinks(ids_n, ids_json, issuer, ids_n[[c.event_index for c in trace.calls]])


def _strings(a):
    """A string column as plain strings (the dictionary schema's decoded)."""
    from sim.trace.arrow_arrays import arrow_and_compute

    pa, pc = arrow_and_compute()
    return a if a.type == pa.string() else pc.cast(a, pa.string())


def _json_sizes(strings) -> np.ndarray:
    """``json_bytes`` of every string of an Arrow string array (nulls: of ""): its UTF-8 bytes and two
    quotes where nothing needs escaping, else ``json_bytes`` itself."""
    from sim.trace.arrow_arrays import arrow_and_compute, numpy_filled

    _, pc = arrow_and_compute()
    out = numpy_filled(pc.binary_length(strings), 0).astype(np.int64) + 2
    escaped = numpy_filled(pc.match_substring_regex(strings, r'["\\\x00-\x1f]'), False).astype(bool)
    for i in np.flatnonzero(escaped).tolist():
        out[i] = json_bytes(strings[i].as_py())
    return out


def batch_links(
    E, kind: np.ndarray, ev_owner: np.ndarray, n_records: int, call_rows: np.ndarray
) -> tuple[ToolLinks, np.ndarray]:
    """Every event's links in a batch's event column ``E`` (issuers as rows of ``E``), and per record
    whether it is text-free; ``kind``: the events' kind codes, ``ev_owner``: each row's record,
    ``call_rows``: each call's event row."""
    from sim.core.types import KIND_CODE
    from sim.trace.arrow_arrays import arrow_and_compute, bool_array, numpy_filled, numpy_of, valid_mask

    pa, pc = arrow_and_compute()
    f = E.field
    rows = len(E)
    lists = f("tool_call_ids")
    ids_n = numpy_filled(pc.list_value_length(lists), 0).astype(np.int64)
    flat = _strings(pc.list_flatten(lists))
    parent = numpy_of(pc.list_parent_indices(lists)).astype(np.int64)
    flat_json = _json_sizes(flat)
    assistant, result = kind == KIND_CODE["assistant"], kind == KIND_CODE["tool_result"]
    ids_json = np.zeros(rows, np.int64)
    on_assistant = assistant[parent] & valid_mask(flat)  # (a null id: its record is declined anyway)
    np.add.at(ids_json, parent[on_assistant], flat_json[on_assistant])
    own = _strings(f("tool_call_id"))
    ids_json[result] = _json_sizes(own)[result]
    issuer = np.full(rows, -1, np.int64)
    has_id = result & valid_mask(own)
    if has_id.any() and on_assistant.any():
        # one code per distinct id string, the issuers' and the results' alike
        mine = pc.filter(flat, bool_array(on_assistant)), pc.filter(own, bool_array(has_id))
        both = pc.dictionary_encode(pa.concat_arrays(list(mine)))
        codes = numpy_of(both.indices).astype(np.int64)
        U = max(len(both.dictionary), 1)
        a_rows, r_rows = parent[on_assistant], np.flatnonzero(has_id)
        a_key = (ev_owner[a_rows] * U + codes[: len(a_rows)]) * rows + a_rows  # (record, id), then row
        r_key = (ev_owner[r_rows] * U + codes[len(a_rows) :]) * rows + r_rows
        order = np.argsort(a_key, kind="stable")
        a_key, a_rows = a_key[order], a_rows[order]
        at = np.searchsorted(a_key, r_key, side="left") - 1  # the last issuing row before the result ...
        ok = at >= 0
        ok[ok] = a_key[at[ok]] // rows == r_key[ok] // rows  # ... of the same record and id
        issuer[r_rows[ok]] = a_rows[at[ok]]
    texts = ~valid_mask(f("content")) & ~valid_mask(f("json_bytes")) & ~valid_mask(f("json2_bytes"))
    with_text = np.bincount(ev_owner[~texts], minlength=n_records) > 0
    return ToolLinks(ids_n, ids_json, issuer, ids_n[call_rows]), ~with_text
