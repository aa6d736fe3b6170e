"""Plain chat transcripts: an OpenAI chat ``messages`` list and an Anthropic Messages API list.

Two formats, told apart by what only one of them can hold:

- ``openai-chat``: a JSON list of ``{role, content, ...}`` or an object ``{"messages": [...], ...}``
  (a chat-completions request body). Roles ``system`` / ``developer`` -> system, ``user`` -> user,
  ``assistant`` -> assistant (its ``tool_calls`` ids are the calls it issues; a legacy ``function_call``
  gets a synthesized id ``call-K``), ``tool`` -> tool_result answering its ``tool_call_id``, legacy
  ``function`` -> tool_result answering the latest ``function_call``.
- ``anthropic-messages``: ``{"messages": [...], "system": ...}`` (a Messages API request body) or a
  list of ``{role, content: [blocks]}``. ``system`` -> system; a user message's ``tool_result`` blocks ->
  one tool_result each (``tool_use_id``), placed before the message's other blocks, which become one
  user event; an assistant message's ``tool_use`` blocks -> the ids of the calls it issues.

A file is Anthropic when it holds a ``tool_use`` / ``tool_result`` / ``thinking`` block, or is an object
with a top-level ``system`` and no OpenAI-only marker (a ``system``/``tool`` role, ``tool_calls``,
``tool_call_id``); otherwise OpenAI (plain user/assistant strings are valid in both: OpenAI is chosen).

Both: every assistant message is one call that saw everything before it (append-only). A ``usage`` on an
assistant message is that call's usage, read by its field names (``prompt_tokens`` -> ``openai_usage``,
``input_tokens`` -> ``anthropic_usage``) whatever the file's format, since exporters mix them. A
request body's ``tools`` becomes one ``tools`` event after the leading system messages (its size is input
to every call). The model is the body's ``model`` or the first assistant message's ``model``; the trace
id is the file's stem; the recorded policy is ``raw`` (a transcript records no context management).

Rendering: a tool call is appended to the assistant's text as a line ``name(arguments)`` so its size
counts as output and later input; a tool result's text is its content's text.

Not modelled: images and documents (kept as a short placeholder, not their base64 bytes), thinking
blocks (Anthropic drops earlier turns' thinking from later inputs, so they are not events), ``is_error``
on tool results, ``n > 1`` choices, cache-control markers, and any request parameter other than
``model``, ``system`` and ``tools``.

Sniffing must not take other formats' ``.json`` files (this module sorts before most importers): a list
qualifies only if its first element is a message with a chat role (tau-bench's runs, OpenHands event
lists and summaries do not), and an object only if all its top-level keys are request-body keys (mini-swe-
agent trajectories, Inspect logs and LLM telemetry logs carry others). It reads at most the first 8 MiB
of a file: one that fits is classified on its whole document; a larger one on the messages and keys its
first 8 MiB hold whole (a top-level ``system`` after 8 MiB of messages is not seen).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from functools import lru_cache
from pathlib import Path

from sim.core.types import Trace
from sim.importers import Importer, register
from sim.importers.common import (
    Message,
    Usage,
    anthropic_usage,
    build_trace,
    iso_timestamp,
    openai_usage,
    read_json_file,
    text_of,
    unix_time,
    usage_cost,
    warn,
)
from sim.util.errors import TraceError
from sim.util.jsonl import parse_json

OPENAI = "openai-chat"
ANTHROPIC = "anthropic-messages"
RECORDED_POLICY = {"name": "raw"}

_OPENAI_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
_ANTHROPIC_BLOCKS = frozenset(
    {"tool_use", "tool_result", "thinking", "redacted_thinking", "server_tool_use", "web_search_tool_result"}
)
# Top-level keys of a chat-completions or Messages API request body (and of a bare {"messages": ...}).
_REQUEST_KEYS = frozenset(
    {
        "messages",
        "system",
        "model",
        "tools",
        "tool_choice",
        "functions",
        "function_call",
        "parallel_tool_calls",
        "temperature",
        "top_p",
        "top_k",
        "n",
        "seed",
        "stop",
        "stop_sequences",
        "max_tokens",
        "max_completion_tokens",
        "stream",
        "metadata",
        "response_format",
        "reasoning_effort",
        "thinking",
        "presence_penalty",
        "frequency_penalty",
        "logit_bias",
        "user",
    }
)
_HEAD_BYTES = 1 << 16
_FIRST_ELEMENT_BYTES = 1 << 20  # a list's first message must be decodable within this much
_CLASSIFY_BYTES = 8 << 20  # what sniffing reads at most: files up to this size are classified whole
_DECODER = json.JSONDecoder()
_BLANK = re.compile(r"[ \t\n\r]*")
_FIRST_KEY = re.compile(r'\{\s*"((?:[^"\\]|\\.)*)"\s*:')


# ------------------------------------------------------------------------------------------------ sniff
def _read(path: Path, n: int) -> str:
    with open(path, "rb") as f:
        return f.read(n).decode("utf-8", errors="replace").lstrip("\ufeff \t\r\n")


def _is_message(m) -> bool:
    return isinstance(m, Mapping) and isinstance(m.get("role"), str) and m["role"] in _OPENAI_ROLES


def _messages_of(data) -> tuple[list, Mapping | None] | None:
    """(messages, request body or None) when ``data`` is a chat transcript, else None."""
    if isinstance(data, list):
        return (data, None) if data and all(_is_message(m) for m in data) else None
    if isinstance(data, Mapping) and set(data) <= _REQUEST_KEYS:
        msgs = data.get("messages")
        if isinstance(msgs, list) and msgs and all(_is_message(m) for m in msgs):
            return msgs, data
    return None


def classify(data) -> str | None:
    """``openai-chat``, ``anthropic-messages`` or None (not a chat transcript)."""
    found = _messages_of(data)
    if found is None:
        return None
    msgs, body = found
    openai_marker = False
    for m in msgs:
        content = m.get("content")
        if isinstance(content, list) and any(
            isinstance(b, Mapping) and isinstance(b.get("type"), str) and b["type"] in _ANTHROPIC_BLOCKS
            for b in content
        ):
            return ANTHROPIC
        if m["role"] in ("system", "developer", "tool", "function") or any(
            k in m for k in ("tool_calls", "tool_call_id", "function_call")
        ):
            openai_marker = True
    if body is not None and "system" in body and not openai_marker:
        return ANTHROPIC
    return OPENAI


def _first_element(text: str):
    """The first element of a JSON list from the start of its text, or None if it is not all there."""
    items, _ = _elements(text, _skip(text, 0))
    return items[0] if items else None


def _skip(text: str, pos: int) -> int:
    return _BLANK.match(text, pos).end()


def _elements(text: str, pos: int) -> tuple[list, int | None]:
    """The complete leading elements of the JSON list opening at ``pos``, and the position after its
    ``]`` (None when the text ends first or is not JSON there)."""
    items: list = []
    pos = _skip(text, pos + 1)
    if text.startswith("]", pos):
        return items, pos + 1
    while True:
        try:
            value, pos = _DECODER.raw_decode(text, pos)
        except (ValueError, RecursionError):
            return items, None
        items.append(value)
        pos = _skip(text, pos)
        if text.startswith("]", pos):
            return items, pos + 1
        if not text.startswith(",", pos):
            return items, None
        pos = _skip(text, pos + 1)


def _leading_document(text: str):
    """The JSON list or object at the start of ``text`` as far as the text holds it whole: a list of its
    complete leading elements, or an object of its complete leading members (``messages`` element by
    element). Enough to classify a transcript from a bounded prefix of its file."""
    pos = _skip(text, 0)
    if text.startswith("[", pos):
        return _elements(text, pos)[0]
    if not text.startswith("{", pos):
        return None
    out: dict = {}
    pos = _skip(text, pos + 1)
    while text.startswith('"', pos):
        try:
            key, pos = _DECODER.raw_decode(text, pos)
        except ValueError:
            return out
        pos = _skip(text, pos)
        if not text.startswith(":", pos):
            return out
        pos = _skip(text, pos + 1)
        if key == "messages" and text.startswith("[", pos):
            out[key], pos = _elements(text, pos)
            if pos is None:
                return out
        else:
            try:
                out[key], pos = _DECODER.raw_decode(text, pos)
            except (ValueError, RecursionError):
                return out
        pos = _skip(text, pos)
        if not text.startswith(",", pos):
            return out
        pos = _skip(text, pos + 1)
    return out


@lru_cache(maxsize=256)
def _shape(path_str: str, mtime_ns: int, size: int) -> str | None:
    """Read at most ``_CLASSIFY_BYTES``: a file that fits is classified on its whole document, as it
    parses; a larger one on the messages (and request keys) its first ``_CLASSIFY_BYTES`` hold whole."""
    path = Path(path_str)
    head = _read(path, _HEAD_BYTES)
    if head.startswith("["):
        first = _first_element(head)
        if first is None and size > _HEAD_BYTES:  # a long first message: look a little further
            first = _first_element(_read(path, _FIRST_ELEMENT_BYTES))
        if not _is_message(first):
            return None
    elif head.startswith("{"):
        m = _FIRST_KEY.match(head)
        if m is None or m.group(1) not in _REQUEST_KEYS:
            return None
    else:
        return None
    text = _read(path, min(size, _CLASSIFY_BYTES) + 1)
    if size <= _CLASSIFY_BYTES:
        try:
            data = parse_json(text)
        except json.JSONDecodeError:
            return None
    else:
        data = _leading_document(text)
    return classify(data)


def shape(path: Path) -> str | None:
    """The chat format of a file, or None; never raises on an unreadable or foreign file."""
    try:
        st = path.stat()
        return _shape(str(path), st.st_mtime_ns, st.st_size)
    except OSError:
        return None


# ------------------------------------------------------------------------------------------ conversion
def render_call(name, arguments) -> str:
    """One tool call as text: ``name(arguments)`` (arguments as the model wrote them, or as JSON)."""
    args = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return f"{name if isinstance(name, str) else '?'}({'' if args is None else args})"


def call_parts(name, arguments) -> tuple[str, str]:
    """(name, arguments text) of one tool call, as ``render_call`` shows them."""
    args = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return (name if isinstance(name, str) else "?", "" if args is None else args)


def content_text(content) -> str:
    """A content's text: a string, or parts with ``text``; media parts become a short placeholder."""
    if content is None:
        return ""
    if isinstance(content, list):
        parts = []
        for p in content:
            t = p.get("type") if isinstance(p, Mapping) else None
            if t in ("image", "image_url", "input_image", "document", "file", "input_audio"):
                parts.append(f"[{t}]")
            elif isinstance(p, Mapping) and t == "tool_result":
                parts.append(content_text(p.get("content")))
            else:
                parts.append(text_of([p]) or "")
        return "\n".join(parts)
    return text_of(content) or ""


def timestamp_of(m: Mapping, file: str = "<messages>", record: str | None = None) -> float | None:
    """A message's time: unix seconds, or an ISO 8601 string (``Z`` accepted; naive times read as UTC,
    never in the importing machine's zone). The first of the keys present decides; one present that is
    not a time (out of years 1 to 9999, a boolean, a list, ...) is refused naming it."""
    for key in ("timestamp", "created_at", "created"):
        v = m.get(key)
        if v is None:
            continue
        if isinstance(v, str):
            return iso_timestamp(v, file, record, key)
        return unix_time(v, file, record, key)
    return None


def usage_of(u, file: str, record: str) -> Usage | None:
    """Per-call usage by field names: OpenAI counts cached tokens inside ``prompt_tokens``, Anthropic
    beside ``input_tokens`` (the two helpers normalise both to every input token)."""
    if u is None:
        return None
    if not isinstance(u, Mapping):
        warn(file, f"{record}: usage is not an object; ignored")
        return None
    if "prompt_tokens" in u or "completion_tokens" in u:
        out = openai_usage(u, file, record)
    elif "input_tokens" in u or "output_tokens" in u:
        out = anthropic_usage(u, file, record)
    else:
        warn(file, f"{record}: usage has neither prompt_tokens nor input_tokens; ignored")
        return None
    out.cost_usd = usage_cost(u.get("cost"), file, record, "usage.cost")
    return out


def _check_message(m, file: str, rec: str) -> Mapping:
    if not isinstance(m, Mapping):
        raise TraceError(file, f"expected a message object, got {type(m).__name__}", record=rec)
    role = m.get("role")
    if not isinstance(role, str) or role not in _OPENAI_ROLES:
        raise TraceError(file, f"unknown role {role!r}", record=rec, field="role")
    return m


def openai_messages(msgs, file: str, record: str = "") -> tuple[list[Message], dict[int, Usage], str | None]:
    """OpenAI chat messages -> (messages, usage by message index, model named by a message)."""
    if not isinstance(msgs, list):
        raise TraceError(file, "expected a list of messages", record=record.strip() or None, field="messages")
    out: list[Message] = []
    usage: dict[int, Usage] = {}
    model = None
    n_calls = 0
    last_function: str | None = None
    no_id = 0
    for i, raw in enumerate(msgs):
        rec = f"{record}messages[{i}]"
        m = _check_message(raw, file, rec)
        role, ts = m["role"], timestamp_of(m, file, rec)
        text = content_text(m.get("content"))
        if role in ("system", "developer"):
            out.append(Message("system", text, timestamp=ts))
        elif role == "user":
            out.append(Message("user", text, timestamp=ts))
        elif role == "assistant":
            parts = [text] if text else []
            ids: list[str] = []
            # (name, arguments text): sim.information.tool_facts reads them
            issued: list[tuple[str, str]] = []
            calls = m.get("tool_calls")
            if calls is not None and not isinstance(calls, list):
                raise TraceError(file, "expected a list", record=rec, field="tool_calls")
            for j, tc in enumerate(calls or []):
                if not isinstance(tc, Mapping):
                    raise TraceError(
                        file, "expected a tool call object", record=rec, field=f"tool_calls[{j}]"
                    )
                fn = tc.get("function") if isinstance(tc.get("function"), Mapping) else {}
                tid = tc.get("id")
                ids.append(tid if isinstance(tid, str) and tid else f"call-{n_calls}-{j}")
                parts.append(render_call(fn.get("name"), fn.get("arguments")))
                issued.append(call_parts(fn.get("name"), fn.get("arguments")))
            fc = m.get("function_call")
            if isinstance(fc, Mapping):
                last_function = f"call-{n_calls}"
                ids.append(last_function)
                parts.append(render_call(fc.get("name"), fc.get("arguments")))
                issued.append(call_parts(fc.get("name"), fc.get("arguments")))
            u = usage_of(m.get("usage"), file, rec)
            if u is not None:
                usage[len(out)] = u
            if model is None and isinstance(m.get("model"), str):
                model = m["model"]
            out.append(Message("assistant", "\n".join(parts), tuple(ids), timestamp=ts, calls=tuple(issued)))
            n_calls += 1
        elif role == "tool":
            tcid = m.get("tool_call_id")
            if not isinstance(tcid, str) or not tcid:
                no_id += 1
                tcid = None
            out.append(Message("tool_result", text, tool_call_id=tcid, timestamp=ts))
        else:  # legacy "function" role answers the latest function_call
            out.append(Message("tool_result", text, tool_call_id=last_function, timestamp=ts))
            if last_function is None:
                no_id += 1
            last_function = None
    if no_id:
        warn(file, f"{record or 'messages'}: {no_id} tool messages name no call they answer; kept unpaired")
    return out, usage, model


def anthropic_messages(
    msgs, system, file: str, record: str = ""
) -> tuple[list[Message], dict[int, Usage], str | None]:
    """Anthropic Messages API messages (and the body's ``system``) -> (messages, usage, model)."""
    if not isinstance(msgs, list):
        raise TraceError(file, "expected a list of messages", record=record.strip() or None, field="messages")
    out: list[Message] = []
    usage: dict[int, Usage] = {}
    model = None
    if system is not None:
        out.append(Message("system", content_text(system)))
    for i, raw in enumerate(msgs):
        rec = f"{record}messages[{i}]"
        m = _check_message(raw, file, rec)
        role, ts, content = m["role"], timestamp_of(m, file, rec), m.get("content")
        blocks = content if isinstance(content, list) else None
        if role == "assistant":
            parts: list[str] = []
            ids: list[str] = []
            issued: list[tuple[str, str]] = []
            if blocks is None:
                parts.append(content_text(content))
            for j, b in enumerate(blocks or []):
                t = b.get("type") if isinstance(b, Mapping) else None
                if t in ("thinking", "redacted_thinking"):
                    continue
                if t in ("tool_use", "server_tool_use"):
                    bid = b.get("id")
                    ids.append(bid if isinstance(bid, str) and bid else f"call-{i}-{j}")
                    parts.append(render_call(b.get("name"), b.get("input")))
                    issued.append(call_parts(b.get("name"), b.get("input")))
                else:
                    parts.append(content_text([b]))
            u = usage_of(m.get("usage"), file, rec)
            if u is not None:
                usage[len(out)] = u
            if model is None and isinstance(m.get("model"), str):
                model = m["model"]
            out.append(
                Message(
                    "assistant",
                    "\n".join(p for p in parts if p),
                    tuple(ids),
                    timestamp=ts,
                    calls=tuple(issued),
                )
            )
        elif role in ("user", "tool"):
            rest = []
            results = 0
            for b in blocks or []:
                if isinstance(b, Mapping) and b.get("type") == "tool_result":
                    tid = b.get("tool_use_id")
                    out.append(
                        Message(
                            "tool_result",
                            content_text(b.get("content")),
                            tool_call_id=tid if isinstance(tid, str) and tid else None,
                            timestamp=ts,
                        )
                    )
                    results += 1
                else:
                    rest.append(b)
            if blocks is None or rest or not results:
                out.append(Message("user", content_text(content if blocks is None else rest), timestamp=ts))
        else:  # a system message inside the list (some exporters put it there)
            out.append(Message("system", content_text(content), timestamp=ts))
    return out, usage, model


def with_tools(messages: list[Message], tools) -> list[Message]:
    """The request's tool definitions as one ``tools`` event after the leading system messages."""
    if not tools:
        return messages
    k = 0
    while k < len(messages) and messages[k].kind == "system":
        k += 1
    ev = Message("tools", json.dumps(tools, ensure_ascii=False, sort_keys=True))
    return [*messages[:k], ev, *messages[k:]]


def _load(path: Path, fmt: str) -> Iterator[Trace]:
    """Lenient where sniffing is strict: a format named by the user reads any list or ``messages``
    object, and a bad message is reported by its index and field."""
    file = path.name
    data = read_json_file(path)
    if isinstance(data, list):
        msgs, body = data, {}
    elif isinstance(data, Mapping) and "messages" in data:
        msgs, body = data["messages"], data
    else:
        raise TraceError(file, "expected a list of chat messages or an object with 'messages'")
    if fmt == ANTHROPIC:
        messages, usage, model = anthropic_messages(msgs, body.get("system"), file)
    else:
        messages, usage, model = openai_messages(msgs, file)
    tools = body.get("tools") or body.get("functions")
    if tools:
        shifted = with_tools(messages, tools)
        at = next(i for i, m in enumerate(shifted) if m.kind == "tools")
        usage = {(i + 1 if i >= at else i): u for i, u in usage.items()}
        messages = shifted
    if isinstance(body.get("model"), str):
        model = body["model"]
    yield build_trace(
        trace_id=path.stem,
        source_format=fmt,
        file=file,
        messages=messages,
        usage=usage,
        model=model,
        agent=None,
        recorded_policy=dict(RECORDED_POLICY),
        outcome={},
    )


def load_openai(path: Path) -> Iterator[Trace]:
    yield from _load(path, OPENAI)


def load_anthropic(path: Path) -> Iterator[Trace]:
    yield from _load(path, ANTHROPIC)


register(Importer(OPENAI, (".json",), lambda p: shape(p) == OPENAI, load_openai))
register(Importer(ANTHROPIC, (".json",), lambda p: shape(p) == ANTHROPIC, load_anthropic))
