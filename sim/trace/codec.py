"""The canonical record: a ``Trace`` as a dict (JSON Lines line, Parquet row) and back, its content hash,
and the Arrow schema both file formats share.

One trace per record, so a corpus is one file and streams record by record. Nested metadata (recorded
policy, outcome, children) is a JSON string so Arrow infers one schema for every row. Reading validates
first (``sim.trace.rules``) and names the file, record and field of the first problem.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from functools import lru_cache

from sim.core.types import SCHEMA_VERSION, Call, Child, Event, Trace
from sim.trace.rules import trace_problems
from sim.util.errors import TraceError
from sim.util.jsonl import parse_json

CANONICAL_FORMAT = "ctxsim-canonical"


def event_to_dict(e: Event) -> dict:
    d = {
        "index": e.index,
        "kind": e.kind,
        "content": e.content,
        "bytes": e.bytes,
        "chars": e.chars,
        "lines": e.lines,
        "tokens": e.tokens,
        "tokens_provenance": e.tokens_provenance,
        "tool_call_ids": list(e.tool_call_ids),
        "tool_call_id": e.tool_call_id,
        "bounded": e.bounded,
        "timestamp": e.timestamp,
    }
    # written only when present: traces without facts keep their bytes and hashes
    if e.provides:
        d["provides"] = list(e.provides)
    if e.needs:
        d["needs"] = list(e.needs)
    if e.content is None:  # JSON sizes are written only beside a missing content (a text's own derive)
        if e.json_bytes is not None:
            d["json_bytes"] = e.json_bytes
        if e.json2_bytes is not None:
            d["json2_bytes"] = e.json2_bytes
    # positional facts, kinds and supersession: written only when present (older traces unchanged)
    if e.fact_spans:
        d["fact_spans"] = [None if s is None else list(s) for s in e.fact_spans]
    if e.fact_kinds:
        d["fact_kinds"] = list(e.fact_kinds)
    if e.supersedes:
        d["supersedes"] = list(e.supersedes)
    # written only when known: traces of other formats keep their bytes and hashes
    if e.source_type is not None:
        d["source_type"] = e.source_type
    if e.url is not None:
        d["url"] = e.url
    if e.run_index:  # schema version 2, written beyond a conversation's first run
        d["run_index"] = e.run_index
    return d


def call_to_dict(c: Call) -> dict:
    return {
        "index": c.index,
        "event_index": c.event_index,
        "view_end": c.view_end,
        "input_tokens": c.input_tokens,
        "output_tokens": c.output_tokens,
        "cache_read_tokens": c.cache_read_tokens,
        "cache_write_tokens": c.cache_write_tokens,
        "reasoning_tokens": c.reasoning_tokens,
        "residual_tokens": c.residual_tokens,
        "usage_provenance": c.usage_provenance,
        "timestamp": c.timestamp,
        "recorded_cost_usd": c.recorded_cost_usd,
        **({"run_index": c.run_index} if c.run_index else {}),
    }


def schema_version_of(t: Trace) -> int:
    """The lowest schema version that holds ``t``: a trace of one run without children is written as
    version 1, byte for byte as before (so its hash, and every baseline keyed by it, stays the same)."""
    return SCHEMA_VERSION if t.runs > 1 or t.children else 1


def trace_to_dict(t: Trace) -> dict:
    """The canonical record, at the lowest schema version that holds it (``schema_version_of``)."""
    return {
        "schema_version": schema_version_of(t),
        "trace_id": t.trace_id,
        "source_format": t.source_format,
        "source_file": t.source_file,
        "agent": t.agent,
        "model": t.model,
        "context_window": t.context_window,
        "bytes_per_token": t.bytes_per_token,
        "recorded_policy": json.dumps(t.recorded_policy, sort_keys=True),
        "outcome": json.dumps(t.outcome, sort_keys=True),
        "events": [event_to_dict(e) for e in t.events],
        "calls": [call_to_dict(c) for c in t.calls],
        # schema version 2: written only when present (a trace without children keeps its bytes)
        **({"children": children_json(t.children)} if t.children else {}),
    }


def children_json(children: Sequence[Child]) -> str:
    """A trace's children as one JSON string (like the outcome: one Arrow type for every row whatever
    the nesting): a list of ``{parent_call, tool_call_id, trace}``, each trace a canonical record."""
    return json.dumps(
        [
            {"parent_call": c.parent_call, "tool_call_id": c.tool_call_id, "trace": trace_to_dict(c.trace)}
            for c in children
        ],
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )


def trace_hash(t: Trace) -> str:
    """sha256 over the canonical content; the source file name is provenance, not content."""
    d = trace_to_dict(t)
    d.pop("source_file")
    blob = json.dumps(d, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(blob.encode()).hexdigest()


def trace_from_dict(d: dict, file: str = "<memory>", record: str = "0", text_checked: bool = False) -> Trace:
    """Validate and build. Raises TraceError naming the first problem's file, record and field.
    ``text_checked``: see ``semantic_problems`` (the file readers here pass it)."""
    found = trace_problems(d, text_checked)
    if found:
        field, msg = found[0]
        more = f" (+{len(found) - 1} more problems)" if len(found) > 1 else ""
        raise TraceError(file, msg + more, record=record_name(record, d), field=field)
    events = tuple(map(event_from_dict, d["events"]))
    calls = tuple(
        Call(
            index=c["index"],
            event_index=c["event_index"],
            view_end=c["view_end"],
            input_tokens=c["input_tokens"],
            output_tokens=c["output_tokens"],
            cache_read_tokens=c.get("cache_read_tokens"),
            cache_write_tokens=c.get("cache_write_tokens"),
            reasoning_tokens=c.get("reasoning_tokens"),
            residual_tokens=c["residual_tokens"],
            usage_provenance=c.get("usage_provenance", "provider"),
            timestamp=c.get("timestamp"),
            recorded_cost_usd=c.get("recorded_cost_usd"),
            run_index=d["events"][c["event_index"]].get("run_index") or 0,
        )
        for c in d["calls"]
    )
    return Trace(
        trace_id=d["trace_id"],
        source_format=d["source_format"],
        events=events,
        calls=calls,
        agent=d.get("agent"),
        model=d.get("model"),
        context_window=d.get("context_window"),
        bytes_per_token=d.get("bytes_per_token"),
        recorded_policy=parse_json(d.get("recorded_policy", "{}")),
        outcome=parse_json(d.get("outcome", "{}")),
        source_file=d.get("source_file"),
        children=_children_of(d, file, record),
    )


def _children_of(d: dict, file: str, record: str) -> tuple[Child, ...]:
    """The children of a record that passed ``trace_problems`` (built, not validated again)."""
    if "children" not in d:
        return ()
    return tuple(
        Child(
            c["parent_call"],
            trace_from_dict(c["trace"], file, f"{record} children[{j}]"),
            c.get("tool_call_id"),
        )
        for j, c in enumerate(parse_json(d["children"]))
    )


def event_from_dict(e: dict) -> Event:
    """An event of a validated record (positional: a corpus has millions of them)."""
    g = e.get
    spans = g("fact_spans")
    return Event(
        e["index"],
        e["kind"],
        e["content"],
        e["bytes"],
        e["chars"],
        e["lines"],
        e["tokens"],
        e["tokens_provenance"],
        tuple(g("tool_call_ids") or ()),
        g("tool_call_id"),
        bool(g("bounded", False)),
        g("timestamp"),
        tuple(g("provides") or ()),
        tuple(g("needs") or ()),
        g("json_bytes"),
        g("json2_bytes"),
        tuple(None if s is None else (s[0], s[1]) for s in spans) if spans else (),
        tuple(g("fact_kinds") or ()),
        tuple(g("supersedes") or ()),
        g("source_type"),
        g("url"),
        g("run_index") or 0,
    )


def record_name(record: str, d) -> str:
    tid = d.get("trace_id") if isinstance(d, dict) else None
    return f"{record} (trace_id {tid})" if isinstance(tid, str) else record


NULLABLE_TOP = {"source_file", "agent", "model", "context_window", "bytes_per_token"}  # "children" absent


def arrow_schema():
    import pyarrow as pa

    ev = pa.struct(
        [
            ("index", pa.int64()),
            ("kind", pa.string()),
            ("content", pa.string()),
            ("bytes", pa.int64()),
            ("chars", pa.int64()),
            ("lines", pa.int64()),
            ("tokens", pa.int64()),
            ("tokens_provenance", pa.string()),
            ("tool_call_ids", pa.list_(pa.string())),
            ("tool_call_id", pa.string()),
            ("bounded", pa.bool_()),
            ("timestamp", pa.float64()),
            ("provides", pa.list_(pa.string())),
            ("needs", pa.list_(pa.string())),
            ("json_bytes", pa.int64()),
            ("json2_bytes", pa.int64()),
            ("fact_spans", pa.list_(pa.list_(pa.int64()))),
            ("fact_kinds", pa.list_(pa.string())),
            ("supersedes", pa.list_(pa.string())),
            ("source_type", pa.string()),
            ("url", pa.string()),
            ("run_index", pa.int64()),
        ]
    )
    call = pa.struct(
        [
            ("index", pa.int64()),
            ("event_index", pa.int64()),
            ("view_end", pa.int64()),
            ("input_tokens", pa.int64()),
            ("output_tokens", pa.int64()),
            ("cache_read_tokens", pa.int64()),
            ("cache_write_tokens", pa.int64()),
            ("reasoning_tokens", pa.int64()),
            ("residual_tokens", pa.int64()),
            ("usage_provenance", pa.string()),
            ("timestamp", pa.float64()),
            ("recorded_cost_usd", pa.float64()),
            ("run_index", pa.int64()),
        ]
    )
    return pa.schema(
        [
            ("schema_version", pa.int64()),
            ("trace_id", pa.string()),
            ("source_format", pa.string()),
            ("source_file", pa.string()),
            ("agent", pa.string()),
            ("model", pa.string()),
            ("context_window", pa.int64()),
            ("bytes_per_token", pa.float64()),
            ("recorded_policy", pa.string()),
            ("outcome", pa.string()),
            ("events", pa.list_(ev)),
            ("calls", pa.list_(call)),
            ("children", pa.string()),  # schema version 2: a JSON array as a string (children_json)
        ]
    )


# Enumerations (a few distinct strings) read from Parquet as Arrow dictionaries: decoding them into one
# string per row was a third of the file's decoding (10k runs: 0.55 s CPU, 0.37 s so)
DICTIONARY_FIELDS = {"events": ("kind", "tokens_provenance"), "calls": ("usage_provenance",)}


@lru_cache(maxsize=1)
def dictionary_schema():
    """``arrow_schema`` as a canonical file reads with those fields as dictionaries."""
    import pyarrow as pa

    schema = arrow_schema()
    for column, names in DICTIONARY_FIELDS.items():
        at = schema.get_field_index(column)
        struct = schema.field(at).type.value_type
        fields = [
            f.with_type(pa.dictionary(pa.int32(), pa.string())) if f.name in names else f for f in struct
        ]
        schema = schema.set(at, pa.field(column, pa.list_(pa.struct(fields))))
    return schema
