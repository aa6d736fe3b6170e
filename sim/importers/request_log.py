"""A conversation rebuilt from a log of model requests: what observability exports share.

OpenTelemetry GenAI spans, Langfuse generations and LangSmith ``llm`` runs each keep, per model call,
the messages the request sent and the message it returned. ``Conversation`` turns a time-ordered series
of such calls into one running conversation for ``build_trace``:

- a call's input messages are matched, in order, against the conversation so far (by their role, text,
  tool calls and the call id they answer); those it holds are not repeated, those it adds are appended
  (a summary a compaction wrote, a new user turn, the tool results since the last call);
- a message of the conversation the input skipped was not in that request: it is *hidden* from that call
  on (``Message.hidden_from``), so the recorded-request rule (``sim.information.recorded_request``)
  drops the needs it would have served, and the per-call residual carries the token difference;
- the call's output is one assistant message (one call) with the call's usage.

A call whose request kept no messages (content capture off) adds the tool results its caller passes
(from tool spans or tool runs) and an assistant message with the tool calls it knows.

Messages are normalised from the shapes these tools record: OpenAI chat messages (``role``, ``content``,
``tool_calls``, ``tool_call_id``), LangChain messages (``type`` ``human``/``ai``/``system``/``tool``, or
serialised with ``lc``/``kwargs``), Anthropic content blocks (``text``, ``tool_use``, ``tool_result``) and
the GenAI semantic conventions' ``parts`` (``text``, ``tool_call``, ``tool_call_response``). Images and
other media become a short placeholder; reasoning parts are dropped (providers do not resend them).
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from sim.core.types import Trace
from sim.importers.common import Message, Usage, build_trace, warn
from sim.util.errors import TraceError
from sim.util.jsonl import MAX_PARSE_BYTES, json_line, lines_of, parse_cost

_KINDS = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "model": "assistant",
    "tool": "tool_result",
    "function": "tool_result",
}
_MEDIA = (
    "image",
    "image_url",
    "input_image",
    "blob",
    "uri",
    "file",
    "document",
    "audio",
    "input_audio",
    "video",
)
_DROPPED = ("reasoning", "thinking", "redacted_thinking")


@dataclass(frozen=True)
class Msg:
    """One message as every format's request log is compared: kind, text, tool calls, answered call."""

    kind: str  # system / user / assistant / tool_result
    text: str
    calls: tuple[tuple[str, str, str], ...] = ()  # assistant: (call id, tool name, arguments text)
    tool_call_id: str | None = None

    def key(self) -> str:
        return json.dumps([self.kind, self.text, self.calls, self.tool_call_id], ensure_ascii=False)


def args_text(v) -> str:
    """A tool call's arguments as text: JSON text as written (re-encoded canonically when it parses, so
    the same call matches whether a log kept it as text or as an object)."""
    if v is None:
        return ""
    if isinstance(v, str):
        try:
            v = json.loads(v)
        except (ValueError, RecursionError):
            return v
    try:
        return json.dumps(v, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError, RecursionError):
        return str(v)


def _str(v) -> str | None:
    return v if isinstance(v, str) and v else None


def content_parts(content) -> tuple[str, list[tuple[str, str, str]], list[tuple[str | None, str]]]:
    """(text, tool calls, tool results) of a content: a string, or a list of parts/blocks."""
    if content is None:
        return "", [], []
    if isinstance(content, str):
        return content, [], []
    if isinstance(content, Mapping):
        content = [content]
    if not isinstance(content, list):
        return json.dumps(content, ensure_ascii=False, sort_keys=True), [], []
    texts: list[str] = []
    calls: list[tuple[str, str, str]] = []
    results: list[tuple[str | None, str]] = []
    for p in content:
        if isinstance(p, str):
            texts.append(p)
            continue
        if not isinstance(p, Mapping):
            texts.append(json.dumps(p, ensure_ascii=False))
            continue
        t = p.get("type")
        if t in _DROPPED:
            continue
        if t in _MEDIA:
            texts.append(f"[{t}]")
        elif t in ("tool_call", "tool_use", "function_call"):
            args = p.get("arguments", p.get("input", p.get("args")))
            calls.append((_str(p.get("id")) or "", _str(p.get("name")) or "?", args_text(args)))
        elif t in ("tool_call_response", "tool_result", "function_call_output"):
            body = p.get("response", p.get("result", p.get("content", p.get("output"))))
            cid = _str(p.get("id")) or _str(p.get("tool_use_id")) or _str(p.get("call_id"))
            results.append((cid, content_parts(body)[0] if not isinstance(body, Mapping) else _json(body)))
        elif isinstance(p.get("text"), str):
            texts.append(p["text"])
        elif isinstance(p.get("content"), str):
            texts.append(p["content"])
        else:
            texts.append(_json(p))
    return "\n".join(texts), calls, results


def _json(v) -> str:
    return json.dumps(v, ensure_ascii=False, sort_keys=True)


def _tool_calls(raw) -> list[tuple[str, str, str]]:
    """OpenAI ``tool_calls`` (``{id, function: {name, arguments}}``) or LangChain's (``{id, name, args}``)."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except (ValueError, RecursionError):
            return []
    out = []
    for tc in raw if isinstance(raw, list) else ():
        if not isinstance(tc, Mapping):
            continue
        fn = tc.get("function") if isinstance(tc.get("function"), Mapping) else tc
        args = fn.get("arguments", fn.get("args", fn.get("input")))
        out.append((_str(tc.get("id")) or "", _str(fn.get("name")) or "?", args_text(args)))
    return out


def normalise(m, file: str, rec: str) -> list[Msg]:
    """One logged message as ``Msg`` items (a user message holding tool results becomes one tool result
    each, then the rest). Refuses what is not a message, naming file, record and field."""
    if not isinstance(m, Mapping):
        raise TraceError(file, f"expected a message object, got {type(m).__name__}", record=rec)
    if m.get("lc") is not None and isinstance(m.get("kwargs"), Mapping):  # a serialised LangChain message
        ids = m.get("id")
        cls = ids[-1] if isinstance(ids, list) and ids and isinstance(ids[-1], str) else ""
        m = {
            **m["kwargs"],
            "type": m["kwargs"].get("type") or cls.replace("MessageChunk", "").replace("Message", "").lower(),
        }
    role = m.get("role", m.get("type"))
    kind = _KINDS.get(role) if isinstance(role, str) else None
    if kind is None:
        raise TraceError(file, f"unknown message role {role!r}", record=rec, field="role")
    text, calls, results = content_parts(m.get("parts", m.get("content")))
    calls += _tool_calls(m.get("tool_calls"))
    ak = m.get("additional_kwargs")
    if not calls and isinstance(ak, Mapping):
        calls += _tool_calls(ak.get("tool_calls"))
    if isinstance(m.get("function_call"), Mapping):
        fc = m["function_call"]
        calls.append(("", _str(fc.get("name")) or "?", args_text(fc.get("arguments"))))
    if kind == "assistant":
        return [Msg("assistant", text, tuple(calls))]
    if kind == "tool_result":
        cid = _str(m.get("tool_call_id")) or _str(m.get("id")) or (results[0][0] if results else None)
        body = text if not results else "\n".join(r[1] for r in results)
        return [Msg("tool_result", body, (), cid)]
    out = [Msg("tool_result", body, (), cid) for cid, body in results]
    if text or not results:
        out.append(Msg(kind, text))
    return out


def render(m: Msg) -> str:
    """An assistant message's text with one line ``name(arguments)`` per tool call (counted as output and
    later input, as ``chat_messages`` renders them)."""
    parts = [m.text] if m.text else []
    parts += [f"{name}({args})" for _, name, args in m.calls]
    return "\n".join(parts)


class Conversation:
    """The running conversation of one agent run (module doc). ``call`` takes one model call."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.messages: list[Message] = []
        self.usage: dict[int, Usage] = {}
        self.keys: list[str | None] = []  # per message; None: not matched against inputs (tools event)
        self.at: dict[str, list[int]] = {}  # key -> positions, ascending
        self.nxt: list[int] = []  # union-find: the first message at or after i not yet hidden (or len)
        self.not_prefix = 0
        self.calls = 0

    def _live(self, i: int) -> int:
        """The first message at or after ``i`` that no call has hidden yet (path-halving union-find:
        each message is hidden once, so the hiding of a whole run costs near-linear time)."""
        nxt = self.nxt
        while i < len(nxt) and nxt[i] != i:
            nxt[i] = nxt[nxt[i]] if nxt[i] < len(nxt) else nxt[i]
            i = nxt[i]
        return i

    def _hide_range(self, lo: int, hi: int, out: list[int]) -> None:
        q = self._live(lo)
        while q < hi:
            out.append(q)
            self.nxt[q] = q + 1
            q = self._live(q + 1)

    def _append(self, m: Msg, ts: float | None, call_ids: Sequence[str] = ()) -> None:
        k = m.key()
        self.at.setdefault(k, []).append(len(self.messages))
        self.keys.append(k)
        self.nxt.append(len(self.nxt))
        if m.kind == "assistant":
            ids = tuple(c[0] or f"call-{self.calls}-{j}" for j, c in enumerate(m.calls)) or tuple(call_ids)
            calls = tuple((name, args) for _, name, args in m.calls)
            self.messages.append(Message("assistant", render(m), ids, timestamp=ts, calls=calls))
        else:
            self.messages.append(Message(m.kind, m.text, tool_call_id=m.tool_call_id, timestamp=ts))

    def tools(self, definitions) -> None:
        """The tool definitions, once, after the leading system messages: input to every call."""
        if definitions and not any(m.kind == "tools" for m in self.messages):
            k = 0
            while k < len(self.messages) and self.messages[k].kind == "system":
                k += 1
            text = definitions if isinstance(definitions, str) else _json(definitions)
            self.messages.insert(k, Message("tools", text))
            self.keys.insert(k, None)
            self.at = {}
            for i, key in enumerate(self.keys):
                if key is not None:
                    self.at.setdefault(key, []).append(i)
            self.usage = {(i + 1 if i >= k else i): u for i, u in self.usage.items()}
            for m in self.messages:
                if m.hidden_from is not None and m.hidden_from >= k:
                    m.hidden_from += 1
            hidden = [m.hidden_from is not None for m in self.messages]
            hidden[k] = True  # the tools event is never matched, so never hidden
            self.nxt = [i + 1 if h else i for i, h in enumerate(hidden)]

    def add(self, msgs: Sequence[Msg], ts: float | None = None) -> None:
        """Messages known to precede the next call without a request log (tool results of tool spans)."""
        for m in msgs:
            self._append(m, ts)

    def call(self, inp: Sequence[Msg] | None, out: Msg | None, usage: Usage | None, ts: float | None) -> None:
        """One model call: the new messages of its input, then its output (module doc)."""
        if inp is not None:
            hidden: list[int] = []
            p = 0
            new: list[Msg] = []
            for m in inp:
                where = self.at.get(m.key(), ())
                j = bisect.bisect_left(where, p)
                if j < len(where):
                    self._hide_range(p, where[j], hidden)
                    p = where[j] + 1
                else:
                    new.append(m)
            self._hide_range(p, len(self.messages), hidden)
            if hidden or (new and p < len(self.messages)):
                self.not_prefix += 1
            for m in new:
                self._append(m, ts)
            call_at = len(self.messages)
            for q in hidden:
                self.messages[q].hidden_from = call_at
        out = out or Msg("assistant", "")
        self._append(out, ts)
        self.messages[-1].timestamp = ts
        if usage is not None:
            if usage.timestamp is None:
                usage.timestamp = ts
            self.usage[len(self.messages) - 1] = usage
        self.calls += 1


@dataclass
class LoggedCall:
    """One model call as an export keeps it (``inp`` None: its request's messages were not kept)."""

    start: float | None
    inp: list[Msg] | None
    out: Msg | None
    usage: Usage | None
    tools: object = None  # the request's tool definitions, where the export keeps them


@dataclass
class ToolRun:
    """One tool execution as an export keeps it (a span, an observation, a run)."""

    start: float | None
    call_id: str
    name: str
    arguments: str
    result: str | None


def rebuild(file: str, trace_id: str, calls: Sequence[LoggedCall], tools: Sequence[ToolRun]) -> Conversation:
    """The conversation of one run from its calls and tool runs, both in time order (module doc): the
    tool runs that started after a call and before the next are the calls it issued where its response
    was not kept, and their results precede the next call where its request was not kept. The first
    call's tool definitions become the ``tools`` event."""
    c = Conversation(file)
    t = 0
    for k, call in enumerate(calls):
        ts = call.start
        nxt = calls[k + 1].start if k + 1 < len(calls) else None
        while t < len(tools) and (tools[t].start or 0.0) < (ts or 0.0):
            t += 1  # ran before this call: its result reached the call through its request, if at all
        j = t
        issued: list[ToolRun] = []
        while j < len(tools) and (nxt is None or (tools[j].start or 0.0) < nxt):
            issued.append(tools[j])
            j += 1
        out = call.out
        if out is None and issued:
            out = Msg("assistant", "", tuple((r.call_id, r.name, r.arguments) for r in issued))
        c.call(call.inp, out, call.usage, ts)
        if k == 0:
            c.tools(call.tools)
        if k + 1 < len(calls) and calls[k + 1].inp is None:  # the next request's messages were not kept
            c.add([Msg("tool_result", r.result or "", (), r.call_id) for r in issued], ts)
        t = j
    return c


def not_prefix_notice(c: Conversation, trace_id: str) -> str | None:
    """The warning for calls whose request was not the running conversation extended, or None."""
    if not c.not_prefix:
        return None
    return (
        f"{trace_id}: {c.not_prefix} calls' requests are not the running conversation extended; the "
        "messages they left out are hidden from them on and the per-call residual carries the difference"
    )


def conversation_trace(
    c: Conversation, trace_id: str, source_format: str, file: str, model: str | None, agent: str | None
) -> Trace:
    """The trace of one rebuilt conversation (full history recorded, policy raw), warning once when some
    calls' requests were not the running conversation extended: the three export importers end so."""
    if (notice := not_prefix_notice(c, trace_id)) is not None:
        warn(file, notice)
    return build_trace(
        trace_id=trace_id,
        source_format=source_format,
        file=file,
        messages=c.messages,
        usage=c.usage,
        model=model,
        agent=agent,
        recorded_policy={"name": "raw"},
        outcome={"non_prefix_inputs": c.not_prefix},
    )


def bounded_lines(path: Path) -> Iterator[tuple[int, object, str | None]]:
    """(line number, record, problem) of each non-blank JSON line, refused (a TraceError naming the line)
    once the lines parsed so far would hold more than ``MAX_PARSE_BYTES`` together: an importer that
    must group records before converting keeps them all, so the bound is on their sum, not per line."""
    file = path.name
    spent = 0
    for lineno, raw in lines_of(path):
        if lineno == 1 and raw is not None:
            raw = raw.removeprefix(b"\xef\xbb\xbf")
        if raw is not None:
            spent += parse_cost(raw.decode("utf-8", errors="replace"))
            if spent > MAX_PARSE_BYTES:
                raise TraceError(
                    file,
                    f"the records up to here would take about {spent >> 20:,} MiB parsed, more than the "
                    f"{MAX_PARSE_BYTES >> 20:,} MiB ctxsim holds for one file",
                    record=f"line {lineno}",
                )
        got = json_line(raw, errors="replace")
        if got is not None:
            yield lineno, got[0], got[1]


def by_first_time(groups: Mapping[str, Sequence[tuple]]) -> list[str]:
    """The trace ids of ``groups`` (each a list of records whose last field is a time or None) in the
    order of their earliest time, untimed ones last, ties by id: one trace per run, in the run's order."""
    first = {k: min((r[-1] if r[-1] is not None else float("inf")) for r in v) for k, v in groups.items()}
    return sorted(groups, key=lambda k: (first[k], k))


def converted(
    runs: Iterable[tuple[str, object]], convert: Callable[[str, object], Trace | None], file: str, none: str
) -> Iterator[Trace]:
    """Each run's trace (``convert`` returns None for a run without a model call); TraceError naming
    ``file`` and ``none`` when no run has one, so an export with no model calls is an error, not an empty
    result."""
    n = 0
    for key, run in runs:
        t = convert(key, run)
        if t is not None:
            n += 1
            yield t
    if n == 0:
        raise TraceError(file, none)
