"""Canonical trace I/O: dict <-> Trace, validation with file/record/field, JSON Lines and Parquet.

One trace per record (a JSON line or a Parquet row), so a corpus is one file and streams record by record.
Nested metadata (recorded policy, outcome) is a JSON string so Arrow infers one schema for every row.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from sim.core.types import MAX_CHILD_DEPTH, MAX_CHILDREN, SCHEMA_VERSION, Call, Child, Event, Trace
from sim.cost.tokens import json2_bytes, json_bytes
from sim.trace import schema
from sim.util.atomicfile import atomic_path as atomic_path  # where writers have always imported it from
from sim.util.canonical import is_canonical_jsonl as is_canonical_jsonl  # where importers have taken it from
from sim.util.errors import TraceError
from sim.util.jsonl import parse_json

CANONICAL_FORMAT = "ctxsim-canonical"


# ---------------------------------------------------------------------------------------- dict <-> Trace
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


def p_of(i: int) -> str:
    return f"events[{i}]"


def semantic_problems(d: dict, text_checked: bool = False) -> list[tuple[str, str]]:
    """Cross-field rules a JSON Schema cannot say. Assumes ``d`` already passed the schema.
    ``text_checked``: ``d`` was read by a reader that refuses lone surrogates in every string
    (``sim.util.jsonl.parse_json``; Arrow, whose strings are valid UTF-8), so none is looked for again."""
    out: list[tuple[str, str]] = []
    events, calls = d["events"], d["calls"]
    issued: set[str] = set()
    provided: set[str] = set()
    for i, e in enumerate(events):
        for f in e.get("needs") or ():
            if f not in provided:
                out.append((f"{p_of(i)}.needs", f"'{f}' is provided by no earlier event"))
        for f in e.get("supersedes") or ():
            if f not in provided:
                out.append((f"{p_of(i)}.supersedes", f"'{f}' is provided by no earlier event"))
        provided.update(e.get("provides") or ())
        p = f"events[{i}]"
        out.extend(_fact_problems(e, p))
        if e["index"] != i:
            out.append((f"{p}.index", f"expected {i} (events are numbered in order), got {e['index']}"))
        c = e["content"]
        if c is not None and not text_checked and lone_surrogate(c):
            out.append((f"{p}.content", _SURROGATE_PROBLEM))
        elif c is not None:
            for key, actual in (
                ("bytes", len(c.encode())),
                ("chars", len(c)),
                ("lines", len(c.splitlines())),
            ):
                if e[key] != actual:
                    out.append((f"{p}.{key}", f"is {e[key]} but the content has {actual}"))
            for key, size in (("json_bytes", json_bytes), ("json2_bytes", json2_bytes)):
                if e.get(key) is not None and e[key] != size(c):
                    out.append((f"{p}.{key}", f"is {e[key]} but the content has {size(c)}"))
        if not text_checked:
            for key in ("tool_call_id", "tool_call_ids", "provides", "needs", "supersedes"):
                if _any_surrogate(e.get(key)):
                    out.append((f"{p}.{key}", _SURROGATE_PROBLEM))
        if e["kind"] == "assistant":
            issued.update(e.get("tool_call_ids") or ())
        tcid = e.get("tool_call_id")
        if tcid is not None and tcid not in issued:
            out.append((f"{p}.tool_call_id", f"'{tcid}' answers no earlier assistant tool call"))
    out.extend(run_problems(d))
    prefix = [0]
    for e in events:
        prefix.append(prefix[-1] + e["tokens"])
    last_event, last_view = -1, 0
    for j, c in enumerate(calls):
        p = f"calls[{j}]"
        if c["index"] != j:
            out.append((f"{p}.index", f"expected {j}, got {c['index']}"))
        ei, ve = c["event_index"], c["view_end"]
        if ei >= len(events) or events[ei]["kind"] != "assistant":
            out.append((f"{p}.event_index", f"{ei} is not an assistant event"))
        if ei <= last_event:
            out.append((f"{p}.event_index", f"{ei} does not follow the previous call's {last_event}"))
        if ve > ei or ve < last_view:
            out.append(
                (f"{p}.view_end", f"{ve} must lie in [{last_view}, {ei}] (append-only, before its output)")
            )
            ve = min(max(ve, 0), len(events))
        last_event, last_view = ei, max(last_view, ve)
        ve = min(ve, len(events))
        expected = 0 if c["input_tokens"] is None else c["input_tokens"] - prefix[ve]
        if c["residual_tokens"] != expected:
            out.append(
                (
                    f"{p}.residual_tokens",
                    f"is {c['residual_tokens']} but input_tokens - view tokens = {expected}",
                )
            )
    for key in ("trace_id", "source_format", "source_file", "agent", "model"):
        if _any_surrogate(d.get(key)):
            out.append((key, _SURROGATE_PROBLEM))
    for key in ("recorded_policy", "outcome"):
        if key in d:
            if lone_surrogate(d[key]):
                out.append((key, _SURROGATE_PROBLEM))
                continue
            try:
                ok = isinstance(parse_json(d[key]), dict)
            except json.JSONDecodeError as exc:
                out.append(
                    (key, f"expected a JSON object encoded as a string ({exc.msg}, column {exc.colno})")
                )
                continue
            if not ok:
                out.append((key, "expected a JSON object encoded as a string"))
    return out or schema.bound_problems(d)  # sums of a replay must fit int64 (sim.util.limits)


def run_problems(d: dict) -> list[tuple[str, str]]:
    """Runs of a conversation (version 2): numbered 0, 1, ... in event order, a call in its event's run,
    every run with a call (its opening prompt)."""
    out: list[tuple[str, str]] = []
    events, calls = d["events"], d["calls"]
    prev, starts = 0, [0]
    for i, e in enumerate(events):
        r = e.get("run_index") or 0
        if r and d["schema_version"] < 2:
            out.append(
                (f"{p_of(i)}.run_index", f"needs schema_version 2, the record says {d['schema_version']}")
            )
            return out
        if r not in (prev, prev + 1) or (i == 0 and r != 0):
            first = 0 if i == 0 else prev
            allowed = "0" if i == 0 else f"{first} or {first + 1}"
            out.append(
                (
                    f"{p_of(i)}.run_index",
                    f"expected {allowed} (runs are numbered 0, 1, ... in order), got {r}",
                )
            )
            return out
        if r == prev + 1:
            starts.append(i)
        prev = r
    with_call = set()
    for j, c in enumerate(calls):
        ei = c["event_index"]
        own = (events[ei].get("run_index") or 0) if ei < len(events) else None
        r = c.get("run_index")
        if r is not None and own is not None and r != own:
            out.append((f"calls[{j}].run_index", f"is {r} but its event {ei} belongs to run {own}"))
        if own is not None:
            with_call.add(own)
    for r, i in enumerate(starts):
        if r not in with_call and events:
            out.append((f"{p_of(i)}.run_index", f"run {r} has no call (every run opens with a request)"))
            break
    return out


_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_PROBLEM = "holds a lone UTF-16 surrogate (not valid Unicode text; it cannot be written as UTF-8)"


def lone_surrogate(text: str) -> bool:
    """True when ``text`` holds a lone surrogate, which no UTF-8 file can carry: a string from a JSON
    escape such as ``\\ud800`` or from a reader that let it through."""
    return not text.isascii() and _SURROGATE.search(text) is not None


def _any_surrogate(value) -> bool:
    if isinstance(value, str):
        return lone_surrogate(value)
    if isinstance(value, list | tuple):
        return any(isinstance(v, str) and lone_surrogate(v) for v in value)
    return False


def _fact_problems(e: dict, p: str) -> list[tuple[str, str]]:
    """A fact's span and kind lists line up with ``provides``; a span is [start, end) inside the content."""
    out = []
    n = len(e.get("provides") or ())
    for key in ("fact_spans", "fact_kinds"):
        v = e.get(key)
        if v and len(v) != n:
            out.append((f"{p}.{key}", f"has {len(v)} entries but provides has {n} (one per provided fact)"))
    for j, span in enumerate(e.get("fact_spans") or ()):
        if span is None:
            continue
        if len(span) != 2:
            out.append((f"{p}.fact_spans[{j}]", f"expected [start, end], got {len(span)} numbers"))
        elif not span[0] <= span[1] <= e["bytes"]:
            out.append(
                (
                    f"{p}.fact_spans[{j}]",
                    f"[{span[0]}, {span[1]}] must satisfy start <= end <= bytes ({e['bytes']})",
                )
            )
    return out


def trace_problems(
    d, text_checked: bool = False, depth: int = 0, count: list[int] | None = None
) -> list[tuple[str, str]]:
    """Problems of a record as (field path, message); a child's fields are named from the top
    (``children[0].events[3].tokens``). ``text_checked``: see ``semantic_problems``; ``depth``/``count``:
    nesting so far and children met so far."""
    found = [] if schema.conforms(d) else schema.problems(d, schema.TRACE_SCHEMA)
    found = found or semantic_problems(d, text_checked)
    if not found and "children" in d:
        found = _children_problems(d, depth, [0] if count is None else count)
    return found


def _children_problems(d: dict, depth: int, count: list[int]) -> list[tuple[str, str]]:
    """A record's ``children``: a JSON array (as a string) of {parent_call, tool_call_id, trace}, each
    spawned by one of the record's calls (and, when named, one of that call's tool calls), each trace a
    valid record; nesting at most MAX_CHILD_DEPTH deep and MAX_CHILDREN children in all."""
    try:
        kids = parse_json(d["children"])
    except json.JSONDecodeError as exc:
        return [("children", f"expected a JSON array encoded as a string ({exc.msg}, column {exc.colno})")]
    if not isinstance(kids, list):
        return [("children", "expected a JSON array of children encoded as a string")]
    if kids and depth + 1 > MAX_CHILD_DEPTH:
        return [("children", f"children nest deeper than {MAX_CHILD_DEPTH} levels")]
    count[0] += len(kids)
    if count[0] > MAX_CHILDREN:
        return [("children", f"more than {MAX_CHILDREN:,} children in one trace (all levels together)")]
    calls, events = d["calls"], d["events"]
    for j, c in enumerate(kids):
        p = f"children[{j}]"
        if not isinstance(c, dict) or set(c) - {"parent_call", "tool_call_id", "trace"}:
            return [(p, "expected an object with parent_call, tool_call_id and trace")]
        pc = c.get("parent_call")
        if type(pc) is not int or not 0 <= pc < len(calls):
            return [(f"{p}.parent_call", f"expected a call index in [0, {len(calls)}), got {pc!r}")]
        tcid = c.get("tool_call_id")
        issued = events[calls[pc]["event_index"]].get("tool_call_ids") or ()
        if tcid is not None and (type(tcid) is not str or tcid not in issued):
            return [(f"{p}.tool_call_id", f"{tcid!r} is not a tool call of call {pc}")]
        if not isinstance(c.get("trace"), dict):
            return [(f"{p}.trace", "expected a canonical trace record (an object)")]
        inner = trace_problems(c["trace"], True, depth + 1, count)  # parse_json refused lone surrogates
        if inner:
            return [(f"{p}.trace.{f}" if f != "<record>" else f"{p}.trace", m) for f, m in inner]
    return []


def trace_from_dict(d: dict, file: str = "<memory>", record: str = "0", text_checked: bool = False) -> Trace:
    """Validate and build. Raises TraceError naming the first problem's file, record and field.
    ``text_checked``: see ``semantic_problems`` (the file readers here pass it)."""
    found = trace_problems(d, text_checked)
    if found:
        field, msg = found[0]
        more = f" (+{len(found) - 1} more problems)" if len(found) > 1 else ""
        raise TraceError(file, msg + more, record=record_name(record, d), field=field)
    events = tuple(map(_event, d["events"]))
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


def _event(e: dict) -> Event:
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


# ----------------------------------------------------------------------------------------------- reading
def iter_jsonl(path: Path) -> Iterator[Trace]:
    """The traces of a canonical JSON Lines file; records named by line (``sim.trace.columns`` reads
    them as columns, the reference reads a line it declines)."""
    from sim.trace.columns import jsonl_traces
    from sim.util.jsonl import json_line

    name = path.name

    def slow(lineno: int, raw: bytes | None, _record: int) -> Trace | None:
        got = json_line(raw)
        if got is None:
            return None
        d, problem = got
        if problem is not None:
            raise TraceError(name, problem, record=f"line {lineno}")
        return trace_from_dict(d, name, f"line {lineno}", text_checked=True)

    return jsonl_traces(path, slow)


def iter_parquet(path: Path) -> Iterator[Trace]:
    """The traces of a canonical Parquet file; records named by row (read as columns, as above)."""
    from sim.trace.columns import parquet_traces

    name = path.name

    def slow(row: int, d: dict) -> Trace:
        d = {k: v for k, v in d.items() if v is not None or k in _NULLABLE_TOP}
        return trace_from_dict(d, name, f"row {row}", text_checked=True)

    return parquet_traces(path, slow, lambda exc, row: exc)


def parquet_rows(path: Path, batch_size: int = 64, start: int = 0) -> Iterator[tuple[int, dict]]:
    """(row number, record) of a canonical Parquet file, one batch in memory at a time, from row
    ``start`` on (the batches before it are decoded, as they must be to fail where they always have,
    but not turned into records). A damaged file (bad footer, corrupt pages, strings that are not UTF-8)
    is a TraceError naming it and the first row that could not be read, wherever pyarrow notices it."""
    import pyarrow.parquet as pq

    name = path.name
    try:
        batches = pq.ParquetFile(path).iter_batches(batch_size=batch_size)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several types (OSError, ArrowInvalid...)
        raise TraceError(name, f"not a readable Parquet file ({_first_line(exc)})") from None
    row = 0
    while True:
        try:
            batch = next(batches, None)
            if batch is not None and row + batch.num_rows <= start:
                row += batch.num_rows
                continue
            records = [] if batch is None else batch.to_pylist()
        except Exception as exc:  # noqa: BLE001 - only pyarrow's reading runs here
            raise TraceError(
                name, f"not a readable Parquet file ({_first_line(exc)})", record=f"row {row}"
            ) from None
        if batch is None:
            return
        for d in records:
            if row >= start:
                yield row, d
            row += 1


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0][:200] if text else "") or type(exc).__name__


_NULLABLE_TOP = {"source_file", "agent", "model", "context_window", "bytes_per_token"}  # "children" absent


# ----------------------------------------------------------------------------------------------- writing
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


# Rows of a Parquet row group as written (and bytes held for one at most): a reader decodes each
# group's 46 column chunks, so fewer, larger groups read faster (10k runs: 157 groups of 64 rows, 0.75 s;
# 10 of 1024, 0.53 s CPU; half the file size), and the column reader's batches are this size.
ROW_GROUP = 1024
ROW_GROUP_BYTES = 64 << 20


def write_traces(traces: Iterable[Trace], out: Path, record_hashes: bool = True) -> int:
    """Write one canonical file (format from the extension), atomically. Returns the number written.
    ``record_hashes``: also record the traces' hashes beside it (``sim.trace.storedhashes``: loading uses them
    while the file keeps these bytes), taken by reading the written file back, so they are what loading
    it would compute; a file that does not read back gets no record."""
    out = Path(out)
    suffix = out.suffix.lower()
    if suffix not in (".jsonl", ".parquet"):
        from sim.util.errors import ConfigError

        raise ConfigError(f"output {out.name}: unknown extension '{suffix}'; use .jsonl or .parquet")
    n = 0
    with atomic_path(out) as tmp:
        if suffix == ".jsonl":
            with open(tmp, "w", encoding="utf-8") as f:
                for t in traces:
                    f.write(json.dumps(trace_to_dict(t), ensure_ascii=False, separators=(",", ":")) + "\n")
                    n += 1
        else:
            import pyarrow as pa
            import pyarrow.parquet as pq

            sch = arrow_schema()
            with pq.ParquetWriter(tmp, sch) as w:
                batch: list[dict] = []
                group: list = []  # Arrow tables of 64 records, written as one row group
                held = 0  # their rows, and below their bytes

                def flush() -> None:
                    nonlocal group, held
                    w.write_table(pa.concat_tables(group))
                    group, held = [], 0

                for t in traces:
                    batch.append(trace_to_dict(t))
                    n += 1
                    if len(batch) == 64:
                        group.append(pa.Table.from_pylist(batch, schema=sch))
                        batch, held = [], held + 64
                        if held >= ROW_GROUP or sum(g.nbytes for g in group) >= ROW_GROUP_BYTES:
                            flush()
                if batch or n == 0:
                    group.append(pa.Table.from_pylist(batch, schema=sch))
                if group:
                    flush()
        record = _read_back(tmp, suffix) if record_hashes else None
    from sim.trace.storedhashes import record_path, write_record

    if record is None:
        record_path(out).unlink(missing_ok=True)  # a record of the file this one replaced: stale
    else:
        write_record(out, *record)
    return n


def _read_back(path: Path, suffix: str) -> tuple[int, str, list[str]] | None:
    """(size, SHA-256, trace hashes) of a canonical file just written, the hashes as loading it gives
    them; None when it does not load (a trace that breaks a rule: loading it says so)."""
    from sim.trace.storedhashes import file_digest
    from sim.util.errors import CtxsimError

    with open(path, "rb") as f:
        size, digest = file_digest(f)
    read = iter_jsonl if suffix == ".jsonl" else iter_parquet
    try:
        hashes = [t.derived("trace_hash", trace_hash) for t in read(path)]
    except CtxsimError:
        return None
    return size, digest, hashes


def load_dataset_traces(
    source: str | Path | Sequence[str | Path], split: str = "train", streaming: bool = False
) -> Iterator[Trace]:
    """Canonical traces through Hugging Face ``datasets``: local JSON Lines / Parquet files (or a folder
    of them), or a hub dataset name for users with network. ``streaming`` reads record by record with
    bounded memory (a corpus larger than memory); otherwise ``datasets`` builds its Arrow cache first."""
    items = [source] if isinstance(source, str | Path) else list(source)
    files: list[str] = []
    for item in map(Path, items):
        if item.is_dir():
            files += sorted(str(f) for f in item.rglob("*") if f.suffix in (".parquet", ".jsonl", ".json"))
        elif item.exists():
            files.append(str(item))
    label = ",".join(Path(f).name for f in files) if files else str(source)
    if not files and not (isinstance(source, str) and not Path(source).suffix):
        raise TraceError(str(source), "no such file or directory")
    if files and split == "train" and all(_canonical_local(Path(f)) for f in files):
        yield from _local_traces([Path(f) for f in files], label)
        return
    import datasets  # lazy: heavy, and only a hub name or a file ctxsim does not read itself needs it

    datasets.disable_progress_bars()  # its bars would leak into ctxsim's output
    try:
        if files:
            builder = "parquet" if all(f.endswith(".parquet") for f in files) else "json"
            ds = datasets.load_dataset(builder, data_files=files, split=split, streaming=streaming)
        else:
            ds = datasets.load_dataset(source, split=split, streaming=streaming)  # a hub dataset name
    except Exception as exc:  # noqa: BLE001 - unknown split, unreachable hub, damaged files: datasets
        # wraps what pyarrow or its JSON reader raised (DatasetGenerationError, ArrowInvalid, ...)
        raise TraceError(label, f"cannot load as a dataset: {_dataset_problem(exc)}") from None
    rows = iter(ds)
    i = 0
    while True:
        try:
            d = next(rows, None)
        except Exception as exc:  # noqa: BLE001 - streaming reads (and fails) while iterating
            raise TraceError(
                label, f"cannot read as a dataset: {_dataset_problem(exc)}", record=f"row {i}"
            ) from None
        if d is None:
            return
        d = {k: v for k, v in d.items() if v is not None or k in _NULLABLE_TOP}
        yield trace_from_dict(d, label, f"row {i}")
        i += 1


def _canonical_local(path: Path) -> bool:
    """A local file ``datasets`` would only turn into the canonical records it holds (its one split is
    ``train``): canonical Parquet or JSON Lines, which ctxsim reads itself."""
    suffix = path.suffix.lower()
    return suffix == ".parquet" or (suffix == ".jsonl" and is_canonical_jsonl(path))


def _local_traces(files: list[Path], label: str) -> Iterator[Trace]:
    """The traces of local canonical files in order, read straight from the file as columns
    (``sim.trace.columns``: Arrow batches of Parquet, blocks of JSON Lines) instead of through
    ``datasets``' row conversion: the same records, numbered as ``datasets`` numbers them (rows across
    all files), memory bounded by a batch."""
    from sim.trace.columns import jsonl_traces, parquet_traces
    from sim.util.jsonl import json_line

    i = 0
    for path in files:
        base = i
        if path.suffix.lower() == ".parquet":

            def slow_row(row: int, d: dict, base=base) -> Trace:
                d = {k: v for k, v in d.items() if v is not None or k in _NULLABLE_TOP}
                return trace_from_dict(d, label, f"row {base + row}", text_checked=True)

            def read_error(exc: Exception, row: int, base=base) -> Exception:  # a damaged file
                message = exc.message if isinstance(exc, TraceError) else _first_line(exc)
                return TraceError(label, f"cannot read as a dataset: {message}", record=f"row {base + row}")

            traces = parquet_traces(path, slow_row, read_error)
        else:

            def slow_line(_lineno: int, raw: bytes | None, record: int, base=base) -> Trace | None:
                got = json_line(raw)
                if got is None:
                    return None
                d, problem = got
                row = f"row {base + record}"
                if problem is not None:
                    raise TraceError(label, f"cannot read as a dataset: {problem}", record=row)
                if type(d) is dict:  # as datasets gives a row: a missing value is no field
                    d = {k: v for k, v in d.items() if v is not None or k in _NULLABLE_TOP}
                return trace_from_dict(d, label, row, text_checked=True)

            traces = jsonl_traces(path, slow_line)
        for t in traces:
            yield t
            i += 1


def _dataset_problem(exc: BaseException) -> str:
    """What went wrong, from the innermost cause (``datasets`` wraps the reader's error in its own)."""
    while exc.__cause__ is not None or exc.__context__ is not None:
        exc = exc.__cause__ or exc.__context__
    return f"{type(exc).__name__}: {_first_line(exc)}"


# ------------------------------------------------------------------------------------------- redaction
def redact(t: Trace) -> Trace:
    """A text-free copy: no content, fact ids replaced by hashes, outcome dropped; sizes (the content's
    JSON sizes too, which the seed engine's estimate needs), where each fact sits (its byte span) and its
    kind, provenance, usage and structure kept, so
    every metric computes as before. Exception: a head/tail cut of text with multi-byte characters (or,
    for the seed engine's envelope and summarizer input, with JSON escapes) is sized from the counts
    without the text (exact for ASCII)."""
    import dataclasses

    def h(fact: str) -> str:
        return "fact:" + hashlib.sha256(fact.encode()).hexdigest()[:16]

    def sizes(e) -> dict:
        if e.content is None:
            return {}
        return {"json_bytes": json_bytes(e.content), "json2_bytes": json2_bytes(e.content)}

    events = tuple(
        dataclasses.replace(
            e,
            content=None,
            provides=tuple(h(f) for f in e.provides),
            needs=tuple(h(f) for f in e.needs),
            supersedes=tuple(h(f) for f in e.supersedes),
            # a page address is text too: kept as its length only (OpenHands' placeholder is sized by it)
            url=None if e.url is None else "x" * len(e.url.encode()),
            **sizes(e),
        )
        for e in t.events
    )
    children = tuple(Child(c.parent_call, redact(c.trace), c.tool_call_id) for c in t.children)
    return dataclasses.replace(t, events=events, outcome={"redacted": True}, children=children)
