"""OpenTelemetry GenAI spans: OTLP JSON of spans that follow the GenAI semantic conventions.

Files: ``.json`` or ``.jsonl`` holding OTLP ``ExportTraceServiceRequest`` documents
(``{"resourceSpans": [{"resource", "scopeSpans": [{"scope", "spans": [...]}]}]}``), one per line as the
collector's ``file`` exporter and the SDKs' file exporters write them, or one pretty-printed document.
OTLP JSON encodes ids as hex, 64-bit integers as strings or numbers, and attributes as
``[{"key", "value": {"stringValue" | "intValue" | "doubleValue" | "boolValue" | "arrayValue" |
"kvlistValue" | "bytesValue": ...}}]``; ``resourceLogs`` in the same file (per-message log events of
the older conventions) are read too and joined to their span by ``spanId``.

Runs. One trace per agent run: the spans under one root span (the topmost ancestor the file holds), or,
where a span or an ancestor carries ``gen_ai.conversation.id``, every span of that conversation (across
traces). ``trace_id``: the conversation id, else the OTel trace id (``TRACEID/ROOTSPANID`` where one trace
id holds several roots). Runs are in the order of their first span.

Calls. A span with ``gen_ai.operation.name`` ``chat``, ``text_completion`` or ``generate_content`` (or
no operation name and ``gen_ai.usage.*`` attributes, as older instrumentations write) is one model
call; calls in start-time order (ties by end time, then span id). Its request and response messages come
from, in this order of preference:

- ``gen_ai.input.messages`` / ``gen_ai.output.messages`` (current conventions: JSON text, or a structured
  value, of ``{role, parts}`` messages), with ``gen_ai.system_instructions`` as the leading system
  message and ``gen_ai.tool.definitions`` as one ``tools`` event;
- the older per-message events (span events or log records): ``gen_ai.system.message``,
  ``gen_ai.user.message``, ``gen_ai.assistant.message``, ``gen_ai.tool.message`` and ``gen_ai.choice``
  (fields ``content``, ``tool_calls``, ``id``, ``message``, from attributes or the log body);
- ``gen_ai.content.prompt`` / ``gen_ai.content.completion`` events (``gen_ai.prompt`` /
  ``gen_ai.completion``: JSON chat messages).

The conversation is rebuilt from the requests (``sim.importers.request_log``): a request that left out
an earlier message hides it from that call on (the recorded-request rule), and its new messages are
appended. A call whose span kept no messages (content capture off) gets the ``execute_tool`` spans that
started after it and before the next call: their results (``gen_ai.tool.call.result``) are tool results
before the next call, their ids, names and arguments (``gen_ai.tool.call.id``/``.name``/``.arguments``)
the calls it issued.

Usage: ``gen_ai.usage.input_tokens`` (older ``gen_ai.usage.prompt_tokens``) counts every input token,
cached or not, as the conventions ask of instrumentations; ``gen_ai.usage.cache_read.input_tokens`` and
``gen_ai.usage.cache_creation.input_tokens`` (or ``cache_write``) are the cached parts. A cache read
larger than the input can only have been counted beside it (an instrumentation that copied
Anthropic's ``input_tokens``): the input is then their sum (``extra["cache_accounting"] = "beside"``).
``gen_ai.usage.output_tokens`` (older ``completion_tokens``) and ``gen_ai.usage.reasoning.output_tokens``
likewise. The model is the first call's ``gen_ai.response.model`` or ``gen_ai.request.model``; the
agent ``gen_ai.agent.name``.
Recorded policy ``raw``: spans record no context management (a request that dropped messages shows as
hidden messages and a residual; ``outcome["non_prefix_inputs"]`` counts such calls).

Not modelled: ``n > 1`` choices (the first output message is the call's), embeddings and other
operations, span links, media (a placeholder), reasoning parts, costs (the conventions define none).

Bounded: a file above ``MAX_DOCUMENT_BYTES`` x 8 is refused before reading; each line (or the whole
document) within ``parse_document``'s bounds; at most ``MAX_SPANS`` spans.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from sim.core.types import Trace
from sim.importers import Importer, register
from sim.importers.common import Usage, read_json_file, unix_time, usage_count
from sim.importers.request_log import (
    LoggedCall,
    Msg,
    ToolRun,
    args_text,
    bounded_lines,
    content_parts,
    conversation_trace,
    converted,
    normalise,
    rebuild,
)
from sim.util.errors import TraceError
from sim.util.jsonl import MAX_DOCUMENT_BYTES

FORMAT = "otel-genai"
CHAT_OPS = frozenset({"chat", "text_completion", "generate_content"})
MAX_SPANS = 1_000_000
MAX_FILE_BYTES = 8 * MAX_DOCUMENT_BYTES
_SNIFF_BYTES = 1 << 18
_FIRST_KEY = re.compile(rb'^\s*\{\s*"(resourceSpans|resourceLogs)"\s*:')
_EVENT_ROLES = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}


def _sniff(path: Path) -> bool:
    """An OTLP JSON export (first key ``resourceSpans`` or ``resourceLogs``) with a GenAI attribute in
    its first 256 KiB."""
    with open(path, "rb") as f:
        head = f.read(_SNIFF_BYTES)
    head = head.removeprefix(b"\xef\xbb\xbf")
    return bool(_FIRST_KEY.match(head)) and b'"gen_ai.' in head


# ------------------------------------------------------------------------------------------------ reading
def any_value(v):
    """An OTLP JSON ``AnyValue`` as a Python value (int64s may be strings; bytes stay base64 text)."""
    if not isinstance(v, Mapping):
        return v
    if "stringValue" in v:
        return v["stringValue"]
    if "intValue" in v:
        x = v["intValue"]
        return int(x) if isinstance(x, str) and re.fullmatch(r"-?\d{1,19}", x) else x
    if "doubleValue" in v:
        return v["doubleValue"]
    if "boolValue" in v:
        return v["boolValue"]
    if "arrayValue" in v:
        vals = v["arrayValue"].get("values") if isinstance(v["arrayValue"], Mapping) else None
        return [any_value(x) for x in vals] if isinstance(vals, list) else []
    if "kvlistValue" in v:
        vals = v["kvlistValue"].get("values") if isinstance(v["kvlistValue"], Mapping) else None
        return {
            kv["key"]: any_value(kv.get("value"))
            for kv in (vals if isinstance(vals, list) else ())
            if isinstance(kv, Mapping) and isinstance(kv.get("key"), str)
        }
    if "bytesValue" in v:
        return v["bytesValue"]
    return None


def attributes(kvs, file: str, rec: str, fld: str = "attributes") -> dict:
    if kvs is None:
        return {}
    if not isinstance(kvs, list):
        raise TraceError(file, f"expected a list of key/value pairs, got {type(kvs).__name__}", rec, fld)
    out = {}
    for kv in kvs:
        if isinstance(kv, Mapping) and isinstance(kv.get("key"), str):
            out[kv["key"]] = any_value(kv.get("value"))
    return out


def nanos(v, file: str, rec: str, fld: str) -> float | None:
    """Unix nanoseconds (a string or an integer) as seconds, checked as a time."""
    if v is None or v == "0" or v == 0:
        return None
    if isinstance(v, str) and re.fullmatch(r"\d{1,20}", v):
        v = int(v)
    if not isinstance(v, int) or isinstance(v, bool):
        raise TraceError(file, f"expected unix nanoseconds, got {v!r:.40}", rec, fld)
    return unix_time(v / 1e9, file, rec, fld)


@dataclass
class Span:
    trace_id: str
    span_id: str
    parent: str | None
    name: str
    start: float | None
    end: float | None
    attrs: dict
    rec: str
    events: list[tuple[str, dict]] = field(default_factory=list)  # (name, attributes or log body)


def _hex(v, file: str, rec: str, fld: str, required: bool) -> str | None:
    if v is None or v == "":
        if required:
            raise TraceError(file, "missing", rec, fld)
        return None
    if not isinstance(v, str):
        raise TraceError(file, f"expected a hex id, got {type(v).__name__}", rec, fld)
    return v.lower()


def _documents(path: Path) -> Iterator[tuple[str, object]]:
    """(record label, document): each JSON line, or the one document of a pretty-printed file."""
    file = path.name
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise TraceError(file, f"cannot read ({exc.strerror or exc})") from None
    if size > MAX_FILE_BYTES:
        raise TraceError(file, f"{size:,} bytes, more than the {MAX_FILE_BYTES:,} ctxsim reads as OTLP")
    first = True
    for lineno, doc, problem in bounded_lines(path):
        if first and problem is not None:  # not JSON Lines: one pretty-printed document
            yield "document", read_json_file(path)
            return
        first = False
        if problem is not None:
            raise TraceError(file, problem, record=f"line {lineno}")
        yield f"line {lineno}", doc


def _list(v, file: str, rec: str, fld: str) -> list:
    if v is None:
        return []
    if not isinstance(v, list):
        raise TraceError(file, f"expected a list, got {type(v).__name__}", rec, fld)
    return v


def read_spans(path: Path) -> list[Span]:
    """Every span of the file, log records attached to their spans as events."""
    file = path.name
    spans: dict[tuple[str, str], Span] = {}
    logs: list[tuple[str, str, str, dict]] = []
    for rec, doc in _documents(path):
        if not isinstance(doc, Mapping):
            raise TraceError(file, f"expected an OTLP object, got {type(doc).__name__}", record=rec)
        for i, rs in enumerate(_list(doc.get("resourceSpans"), file, rec, "resourceSpans")):
            where = f"resourceSpans[{i}]"
            if not isinstance(rs, Mapping):
                raise TraceError(file, "expected an object", rec, where)
            scopes = rs.get("scopeSpans", rs.get("instrumentationLibrarySpans"))
            for j, ss in enumerate(_list(scopes, file, rec, f"{where}.scopeSpans")):
                if not isinstance(ss, Mapping):
                    raise TraceError(file, "expected an object", rec, f"{where}.scopeSpans[{j}]")
                for k, sp in enumerate(_list(ss.get("spans"), file, rec, f"{where}.scopeSpans[{j}].spans")):
                    s = _span(sp, file, f"{rec} {where}.scopeSpans[{j}].spans[{k}]")
                    spans.setdefault((s.trace_id, s.span_id), s)
                    if len(spans) > MAX_SPANS:
                        raise TraceError(file, f"more than {MAX_SPANS:,} spans", record=rec)
        for i, rl in enumerate(_list(doc.get("resourceLogs"), file, rec, "resourceLogs")):
            for j, sl in enumerate(
                _list((rl or {}).get("scopeLogs"), file, rec, f"resourceLogs[{i}].scopeLogs")
            ):
                for k, lr in enumerate(_list((sl or {}).get("logRecords"), file, rec, "logRecords")):
                    got = _log_event(lr, file, f"{rec} resourceLogs[{i}].scopeLogs[{j}].logRecords[{k}]")
                    if got is not None:
                        logs.append(got)
    for tid, sid, name, body in logs:
        s = spans.get((tid, sid))
        if s is not None:
            s.events.append((name, body))
    return list(spans.values())


def _span(sp, file: str, rec: str) -> Span:
    if not isinstance(sp, Mapping):
        raise TraceError(file, f"expected a span object, got {type(sp).__name__}", record=rec)
    name = sp.get("name")
    s = Span(
        trace_id=_hex(sp.get("traceId"), file, rec, "traceId", True),
        span_id=_hex(sp.get("spanId"), file, rec, "spanId", True),
        parent=_hex(sp.get("parentSpanId"), file, rec, "parentSpanId", False),
        name=name if isinstance(name, str) else "",
        start=nanos(sp.get("startTimeUnixNano"), file, rec, "startTimeUnixNano"),
        end=nanos(sp.get("endTimeUnixNano"), file, rec, "endTimeUnixNano"),
        attrs=attributes(sp.get("attributes"), file, rec),
        rec=rec,
    )
    for i, ev in enumerate(_list(sp.get("events"), file, rec, "events")):
        if isinstance(ev, Mapping) and isinstance(ev.get("name"), str):
            s.events.append(
                (ev["name"], attributes(ev.get("attributes"), file, rec, f"events[{i}].attributes"))
            )
    return s


def _log_event(lr, file: str, rec: str) -> tuple[str, str, str, dict] | None:
    """(trace id, span id, event name, fields) of a GenAI log record, else None."""
    if not isinstance(lr, Mapping):
        return None
    attrs = attributes(lr.get("attributes"), file, rec)
    name = lr.get("eventName") or attrs.get("event.name")
    if not isinstance(name, str) or not name.startswith("gen_ai.") or not lr.get("spanId"):
        return None
    body = any_value(lr.get("body"))
    fields = {**attrs, **body} if isinstance(body, Mapping) else {**attrs, "content": body}
    tid = _hex(lr.get("traceId"), file, rec, "traceId", False) or ""
    return tid, _hex(lr.get("spanId"), file, rec, "spanId", True), name, fields


# ------------------------------------------------------------------------------------------------ runs
def _runs(spans: list[Span]) -> list[tuple[str, list[Span]]]:
    """(trace id, spans) per agent run (module doc), in the order of each run's first span."""
    by_id = {(s.trace_id, s.span_id): s for s in spans}
    top: dict[tuple[str, str], tuple[Span, str | None]] = {}  # span -> (root, conversation id)
    for s in spans:
        path: list[Span] = []
        seen: set[tuple[str, str]] = set()
        cur: Span | None = s
        while cur is not None and (cur.trace_id, cur.span_id) not in top:
            k = (cur.trace_id, cur.span_id)
            if k in seen:  # a parent cycle: the span met twice is the root
                break
            seen.add(k)
            path.append(cur)
            nxt = by_id.get((cur.trace_id, cur.parent)) if cur.parent else None
            cur = nxt
        if cur is not None and (cur.trace_id, cur.span_id) in top:
            root, conv = top[(cur.trace_id, cur.span_id)]
        else:
            root, conv = path[-1], None
        for p in reversed(path):
            c = p.attrs.get("gen_ai.conversation.id")
            if isinstance(c, str) and c:
                conv = c
            top[(p.trace_id, p.span_id)] = (root, conv)
    roots_per_trace: dict[str, set[str]] = {}
    for root, _ in top.values():
        roots_per_trace.setdefault(root.trace_id, set()).add(root.span_id)
    groups: dict[str, list[Span]] = {}
    for s in spans:
        root, conv = top[(s.trace_id, s.span_id)]
        if conv is not None:
            key = conv
        elif len(roots_per_trace[root.trace_id]) > 1:
            key = f"{root.trace_id}/{root.span_id}"
        else:
            key = root.trace_id
        groups.setdefault(key, []).append(s)
    first = {k: min((s.start or 0.0, s.span_id) for s in v) for k, v in groups.items()}
    return [(k, groups[k]) for k in sorted(groups, key=lambda k: (first[k], k))]


def is_chat(s: Span) -> bool:
    op = s.attrs.get("gen_ai.operation.name")
    if op is None:
        return any(k.startswith("gen_ai.usage.") for k in s.attrs)
    return op in CHAT_OPS


def _order(s: Span) -> tuple:
    return (s.start if s.start is not None else float("inf"), s.end or 0.0, s.span_id)


# ------------------------------------------------------------------------------------------------ messages
def _structured(s: Span, key: str, file: str):
    """An attribute that holds JSON: as text (parsed) or as a structured value."""
    v = s.attrs.get(key)
    if isinstance(v, str):
        try:
            return json.loads(v)
        except (ValueError, RecursionError):
            raise TraceError(file, "not valid JSON text", record=s.rec, field=f"attributes.{key}") from None
    return v


def _messages(raw, file: str, rec: str, fld: str) -> list[Msg]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise TraceError(file, f"expected a list of messages, got {type(raw).__name__}", rec, fld)
    out: list[Msg] = []
    for i, m in enumerate(raw):
        out += normalise(m, file, f"{rec} {fld}[{i}]")
    return out


def _output(raw, file: str, rec: str, fld: str) -> Msg | None:
    """The first output message (or choice: ``{message: {...}}``) as the call's assistant message."""
    if isinstance(raw, Mapping):
        raw = [raw]
    if not isinstance(raw, list) or not raw:
        return None
    m = raw[0]
    if isinstance(m, Mapping) and isinstance(m.get("message"), Mapping):
        m = m["message"]
    if isinstance(m, Mapping) and "role" not in m and "type" not in m:
        m = {**m, "role": "assistant"}
    got = normalise(m, file, f"{rec} {fld}[0]")
    return Msg("assistant", got[0].text, got[0].calls) if got else None


def _system(raw) -> list[Msg]:
    if raw is None:
        return []
    text = raw if isinstance(raw, str) else content_parts(raw)[0]
    return [Msg("system", text)]


def call_messages(s: Span, file: str) -> tuple[list[Msg] | None, Msg | None]:
    """(request messages or None when the span kept none, response message or None) of a chat span."""
    rec = s.rec
    inp = _structured(s, "gen_ai.input.messages", file)
    out = _structured(s, "gen_ai.output.messages", file)
    if inp is not None or out is not None:
        msgs = _system(_structured(s, "gen_ai.system_instructions", file))
        msgs += _messages(inp, file, rec, "attributes.gen_ai.input.messages")
        return (msgs if inp is not None else None), _output(
            out, file, rec, "attributes.gen_ai.output.messages"
        )
    msgs: list[Msg] = []
    got_input = False
    output = None
    for i, (name, f) in enumerate(s.events):
        fld = f"events[{i}]"
        if name in _EVENT_ROLES:
            got_input = True
            m = dict(f)
            if isinstance(m.get("content"), str) and name != "gen_ai.tool.message":
                try:  # some instrumentations put the whole message, JSON-encoded, in content
                    parsed = json.loads(m["content"])
                    if isinstance(parsed, Mapping) and ("content" in parsed or "parts" in parsed):
                        m = {**parsed}
                except (ValueError, RecursionError):
                    pass
            m["role"] = _EVENT_ROLES[name]
            if name == "gen_ai.tool.message" and "tool_call_id" not in m:
                m["tool_call_id"] = m.get("id")
            msgs += normalise(m, file, f"{rec} {fld}")
        elif name == "gen_ai.choice" and output is None:
            msg = f.get("message")
            if isinstance(msg, str):
                try:
                    msg = json.loads(msg)
                except (ValueError, RecursionError):
                    msg = {"content": msg}
            output = _output([msg if isinstance(msg, Mapping) else f], file, rec, fld)
        elif name == "gen_ai.content.prompt":
            got_input = True
            msgs += _messages(
                _json_field(f, "gen_ai.prompt", file, rec, fld), file, rec, f"{fld}.gen_ai.prompt"
            )
        elif name == "gen_ai.content.completion" and output is None:
            output = _output(
                _json_field(f, "gen_ai.completion", file, rec, fld), file, rec, f"{fld}.gen_ai.completion"
            )
    return (msgs if got_input else None), output


def _json_field(f: Mapping, key: str, file: str, rec: str, fld: str):
    v = f.get(key)
    if isinstance(v, str):
        try:
            return json.loads(v)
        except (ValueError, RecursionError):
            raise TraceError(file, "not valid JSON text", record=rec, field=f"{fld}.{key}") from None
    return v


def call_usage(s: Span, file: str) -> Usage | None:
    a = s.attrs

    def n(*keys: str) -> int | None:
        for k in keys:
            if a.get(k) is not None:
                return usage_count(a[k], file, s.rec, f"attributes.{k}")
        return None

    inp = n("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens")
    out = n("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens")
    read = n("gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.cache_read_input_tokens")
    write = n(
        "gen_ai.usage.cache_creation.input_tokens",
        "gen_ai.usage.cache_write.input_tokens",
        "gen_ai.usage.cache_creation_input_tokens",
    )
    reasoning = n("gen_ai.usage.reasoning.output_tokens", "gen_ai.usage.reasoning_tokens")
    if inp is None and out is None:
        return None
    u = Usage(inp, out, read, write, reasoning)
    if inp is not None and read is not None and read > inp:  # only possible if counted beside input
        u.input_tokens = inp + read + (write or 0)
        u.extra["cache_accounting"] = "beside"
    return u


def _tool_span(s: Span, file: str) -> ToolRun:
    """An ``execute_tool`` span's call id, tool name, arguments and result."""
    a = s.attrs
    cid = a.get("gen_ai.tool.call.id")
    name = a.get("gen_ai.tool.name")
    res = a.get("gen_ai.tool.call.result")
    if res is not None and not isinstance(res, str):
        res = json.dumps(res, ensure_ascii=False, sort_keys=True)
    return ToolRun(
        s.start,
        cid if isinstance(cid, str) and cid else f"span-{s.span_id}",
        name if isinstance(name, str) and name else "?",
        args_text(a.get("gen_ai.tool.call.arguments")),
        res,
    )


# ------------------------------------------------------------------------------------------------ loading
def _convert(trace_id: str, spans: list[Span], file: str) -> Trace | None:
    chats = sorted((s for s in spans if is_chat(s)), key=_order)
    if not chats:
        return None
    tools = sorted((s for s in spans if s.attrs.get("gen_ai.operation.name") == "execute_tool"), key=_order)
    logged = []
    for k, s in enumerate(chats):
        inp, out = call_messages(s, file)
        defs = _structured(s, "gen_ai.tool.definitions", file) if k == 0 else None
        logged.append(LoggedCall(s.start, inp, out, call_usage(s, file), defs))
    c = rebuild(file, trace_id, logged, [_tool_span(s, file) for s in tools])
    model = agent = None
    for s in chats:
        for key in ("gen_ai.response.model", "gen_ai.request.model"):
            if model is None and isinstance(s.attrs.get(key), str):
                model = s.attrs[key]
    for s in sorted(spans, key=_order):
        if agent is None and isinstance(s.attrs.get("gen_ai.agent.name"), str):
            agent = s.attrs["gen_ai.agent.name"]
    return conversation_trace(c, trace_id, FORMAT, file, model, agent)


def load(path: Path) -> Iterator[Trace]:
    file = path.name
    yield from converted(
        _runs(read_spans(path)),
        lambda trace_id, group: _convert(trace_id, group, file),
        file,
        "no GenAI model-call spans (gen_ai.operation.name chat / text_completion)",
    )


register(Importer(FORMAT, (".json", ".jsonl"), _sniff, load))
