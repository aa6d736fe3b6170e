"""Facts of tool-calling runs (chat transcripts, tau-bench, any format without rules of its own).

``tool_fact_table`` reads the run's messages in order. Its rules, stated here because ``needs`` decide
what a policy may forget:

- **Values.** A tool result provides a value fact ``KIND:VALUE@E`` (E: the result's event) when a later
  assistant turn writes that value — in a tool call's arguments or in its text, the final answer
  included — and the value was first seen in a tool result (a value the user, the system prompt or the
  agent wrote before any tool returned it is not the tool's). That later turn needs the newest result
  that returned it. Candidate values of a result: when its text is JSON, every string leaf of 3 to 200
  characters and every number of absolute value 10 or more (or with a fraction); otherwise each word
  (letters, digits, ``_ . @ / : + -``; trailing dots and colons dropped: ``12:00`` is one word) of 4
  or more characters holding a digit or one of ``_ / . @``, and each number of 3 or more characters.
  A turn's words and the contents of its quoted strings are matched exactly.
- **Kinds.** A number, or a date or time (``2024-05-20``), is a ``value``; a string with a ``/`` and no
  space a ``path``; any other string (ids, codes, names, e-mail addresses) an ``identifier``.
- **Errors.** A result that reports a failure (``sim.information.facts.is_error``, or a text starting with
  ``Error``) provides ``error@E`` (span: the failing line, else the first line); the agent's next turn
  needs it (it answers the failure).
- **Task and rules.** The first ``user`` event provides ``goal@E`` and each ``system`` event
  ``constraint@E`` (whole messages); the final answer (the last assistant turn) needs both.
- **Stale values.** A JSON object answering a call whose first argument has value A describes entity A;
  a later JSON object about the same entity that holds a different value at the same field path (dict
  keys and list positions) supersedes the fact of the earlier value there (a reservation's status
  after an update). Results of other shapes are never superseded.

- **Files.** Where the importer marks a call as a file read or edit (``Message.file_ops``: OpenHands'
  file editor — a ``read`` action or ``str_replace_editor view`` is a read, its ``create``,
  ``str_replace``, ``insert`` and ``undo_edit`` an edit; Claude Code's ``Read`` a read, ``Edit``,
  ``MultiEdit``, ``Write`` and ``NotebookEdit`` edits), the result of a read of P provides ``read:P@E``
  (kind ``path``, the whole result) unless it reports an error (it starts with ``Error``, ``ERROR`` or
  ``<tool_use_error>``). An edit of P needs the latest read of P; its result, unless it reports an
  error, makes that read stale (the file changed), as does a newer read of P. The final answer needs the
  latest read of each file the run edited, when one came after its last edit.

Each fact's span is the UTF-8 byte range of its first occurrence in the result (a JSON string: the text
between its quotes). Linear time: every text is scanned once with regular expressions, and a JSON text
is followed with an explicit stack (deeper than 64 levels, it is read as plain text).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from typing import NamedTuple

from sim.information.facts import FactTable, error_span, is_error

_JSON_TOKEN = re.compile(
    r'"[^"\\]*(?:\\.[^"\\]*)*"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null|[{}\[\]:,]|\S'
)
_WORD = re.compile(r"[\w][\w.@/:+-]*")
_QUOTED = re.compile(r'"([^"\\]*(?:\\.[^"\\]*)*)"')
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}|\d{1,2}:\d{2}(?::\d{2})?")
_MAX_DEPTH = 64
_FILE_ERRORS = ("Error", "ERROR", "<tool_use_error>")  # a file call's result that reports a failure


class _Value(NamedTuple):
    value: str
    start: int  # character offsets in the result's text
    end: int
    path: str | None  # field path in a JSON result (None: plain text)


def kind_of(value: str) -> str:
    if _NUMBER.fullmatch(value) or _DATE.match(value):
        return "value"
    if "/" in value and " " not in value:
        return "path"
    return "identifier"


def _word_ok(w: str) -> bool:
    if _NUMBER.fullmatch(w):
        return len(w) >= 3
    return len(w) >= 4 and any(c.isdigit() or c in "_/.@" for c in w)


def _words(text: str) -> Iterator[tuple[str, int, int]]:
    for m in _WORD.finditer(text):
        w = m.group().rstrip(".:")
        if w:
            yield w, m.start(), m.start() + len(w)


def _unquote(literal: str) -> str | None:
    try:
        v = json.loads(literal)
    except ValueError:
        return None
    return v if isinstance(v, str) else None


def _json_values(text: str) -> list[_Value] | None:
    """The candidate leaves of a JSON text with their paths; None when it is not JSON we can follow."""
    stack: list[list] = []  # frames: [is_object, key or index, expecting a key]
    out: list[_Value] = []
    done = False
    for m in _JSON_TOKEN.finditer(text):
        tok = m.group()
        if done:
            return None  # text after the document
        c = tok[0]
        top = stack[-1] if stack else None
        if c in "{[":
            if len(stack) >= _MAX_DEPTH or (top is not None and top[0] and top[2]):
                return None
            stack.append([c == "{", None if c == "{" else 0, c == "{"])
            continue
        if c in "}]":
            if top is None or top[0] != (c == "}"):
                return None
            stack.pop()
            done = not stack
            continue
        if top is None:
            return None  # a bare scalar: plain text
        if c == ":":
            if not top[0] or not top[2] or top[1] is None:
                return None
            top[2] = False
            continue
        if c == ",":
            if top[0]:
                top[1], top[2] = None, True
            else:
                top[1] += 1
            continue
        if top[0] and top[2]:  # a key
            key = _unquote(tok) if c == '"' else None
            if key is None:
                return None
            top[1] = key
            continue
        if c == '"':
            v = _unquote(tok)
            if v is None:
                return None
            if 3 <= len(v) <= 200 and v.strip():
                out.append(_Value(v, m.start() + 1, m.end() - 1, _path(stack)))
        elif c == "-" or c.isdigit():
            try:
                x = float(tok)
            except ValueError:
                return None
            if abs(x) >= 10 or x != int(x):
                out.append(_Value(tok, m.start(), m.end(), _path(stack)))
        elif tok not in ("true", "false", "null"):
            return None
    return out if done else None


def _path(stack: list[list]) -> str:
    return "".join(f".{k}" if is_obj else f"[{k}]" for is_obj, k, _ in stack)


def _text_values(text: str) -> list[_Value]:
    return [_Value(w, a, b, None) for w, a, b in _words(text) if _word_ok(w)]


def _written(text: str) -> set[str]:
    """What a turn writes, for matching: its words and the contents of its quoted strings."""
    out = {w for w, _, _ in _words(text)}
    for m in _QUOTED.finditer(text):
        v = _unquote(m.group())
        if v:
            out.add(v)
    return out


def _byte_spans(text: str, ranges: list[tuple[int, int]]) -> dict[tuple[int, int], tuple[int, int]]:
    """Character ranges -> UTF-8 byte ranges, encoding each stretch of the text once."""
    if text.isascii():
        return {r: r for r in ranges}
    points = sorted({p for r in ranges for p in r})
    at, pos, nbytes = {}, 0, 0
    for p in points:
        nbytes += len(text[pos:p].encode())
        at[p], pos = nbytes, p
    return {(a, b): (at[a], at[b]) for a, b in ranges}


def _scope(calls: tuple[tuple[str, str], ...], j: int | None) -> str | None:
    """The first argument's value of call ``j`` (the one a result answers: the entity it describes)."""
    if j is None or j >= len(calls):
        return None
    try:
        args = json.loads(calls[j][1])
    except ValueError:
        return None
    if not isinstance(args, dict) or not args:
        return None
    first = next(iter(args.values()))
    return first if isinstance(first, str) else json.dumps(first)


def tool_fact_table(messages: Sequence, tool_call_ids: Sequence[str | None]) -> FactTable:
    """The facts of a run given as ``sim.importers.common.Message`` items (``tool_call_ids``: each
    message's paired call id, None when unpaired); the rules are the module's."""
    n = len(messages)
    provides: list[list[str]] = [[] for _ in range(n)]
    spans: list[list[tuple[int, int] | None]] = [[] for _ in range(n)]
    kinds: list[list[str]] = [[] for _ in range(n)]
    needs: list[list[str]] = [[] for _ in range(n)]
    supersedes: list[list[str]] = [[] for _ in range(n)]
    first_from_tool: dict[str, bool] = {}  # value -> was it first seen in a tool result
    newest: dict[str, tuple[int, _Value]] = {}  # value -> (its newest result, where it sits there)
    values_of: dict[int, list[_Value]] = {}  # JSON results: their leaves (for stale values)
    issuer: dict[str, int] = {}
    chosen: dict[int, dict[str, _Value]] = {}  # result -> fact -> where it sits
    pending_error: str | None = None
    file_of: dict[str, tuple[str, str]] = {}  # call id -> (op, path) of a file call
    latest_read: dict[str, str] = {}  # path -> its newest read fact
    edited: dict[str, None] = {}  # paths edited, in order
    standing: list[str] = []
    task_seen = False
    last_assistant = max((i for i, m in enumerate(messages) if m.kind == "assistant"), default=-1)
    for i, m in enumerate(messages):
        text = m.content or ""
        if m.kind == "tool_result":
            values = _json_values(text) if text.lstrip()[:1] in ("{", "[") else None
            if values is not None:
                values_of[i] = values
            else:
                values = _text_values(text)
            for v in values:
                first_from_tool.setdefault(v.value, True)
                newest[v.value] = (i, v)
            if is_error(text) or text.lstrip().startswith("Error"):
                fact = f"error@{i}"
                provides[i].append(fact)
                kinds[i].append("error")
                spans[i].append(error_span(text) or _first_line(text))
                pending_error = fact
            op = file_of.pop(tool_call_ids[i], None) if tool_call_ids[i] is not None else None
            if op is not None and not text.lstrip().startswith(_FILE_ERRORS):
                kind, path = op
                old = latest_read.pop(path, None)
                if old is not None:
                    supersedes[i].append(old)
                if kind == "read":
                    latest_read[path] = f"read:{path}@{i}"
                    provides[i].append(latest_read[path])
                    kinds[i].append("path")
                    spans[i].append(None)
            continue
        if m.kind == "assistant":
            for cid in m.tool_call_ids:
                issuer[cid] = i
            seen: set[str] = set()
            for w in sorted(_written(text)):
                if first_from_tool.get(w) and w in newest:
                    src, v = newest[w]
                    fact = f"{kind_of(w)}:{w}@{src}"
                    chosen.setdefault(src, {}).setdefault(fact, v)
                    if fact not in seen:
                        seen.add(fact)
                        needs[i].append(fact)
            if pending_error is not None:
                needs[i].append(pending_error)
                pending_error = None
            for cid, kind, path in getattr(m, "file_ops", ()):
                file_of[cid] = (kind, path)
                if kind == "edit":
                    edited[path] = None
                    if path in latest_read and latest_read[path] not in needs[i]:
                        needs[i].append(latest_read[path])
            if i == last_assistant:
                needs[i].extend(
                    r for p in edited if (r := latest_read.get(p)) is not None and r not in needs[i]
                )
                needs[i].extend(f for f in standing if f not in seen)
            for w in _written(text):
                first_from_tool.setdefault(w, False)
            continue
        if m.kind == "system":
            standing.append(f"constraint@{i}")
            provides[i].append(standing[-1])
            kinds[i].append("constraint")
            spans[i].append(None)
        elif m.kind == "user" and not task_seen:
            task_seen = True
            standing.append(f"goal@{i}")
            provides[i].append(standing[-1])
            kinds[i].append("goal")
            spans[i].append(None)
        for w in _written(text):
            first_from_tool.setdefault(w, False)
    for i, facts in chosen.items():
        text = messages[i].content or ""
        ordered = sorted(facts.items(), key=lambda fv: (fv[1].start, fv[0]))
        byte = _byte_spans(text, [(v.start, v.end) for _, v in ordered])
        for fact, v in ordered:
            provides[i].append(fact)
            kinds[i].append(fact.split(":", 1)[0])
            spans[i].append(byte[(v.start, v.end)])
    _stale_values(messages, tool_call_ids, issuer, values_of, chosen, supersedes)
    return FactTable(provides, spans, kinds, needs, supersedes)


def _first_line(text: str) -> tuple[int, int]:
    end = text.find("\n")
    line = text if end == -1 else text[:end]
    return 0, len(line.encode())


def _stale_values(messages, tool_call_ids, issuer, values_of, chosen, supersedes) -> None:
    """Fill ``supersedes``: a later JSON object about the same entity with another value at a path."""
    at: dict[tuple[str, str], tuple[str, str | None]] = {}  # (entity, path) -> (value, its fact)
    gone: set[str] = set()
    # issuing message -> each call id's first position: found by a dict, not a scan of the message's
    # calls per result (n JSON results of one n-call message were quadratic: issue 41)
    positions: dict[int, dict[str, int]] = {}
    for i in sorted(values_of):
        tcid = tool_call_ids[i]
        text = (messages[i].content or "").lstrip()
        if tcid is None or tcid not in issuer or not text.startswith("{"):
            continue
        a = messages[issuer[tcid]]
        if issuer[tcid] not in positions:
            first: dict[str, int] = {}
            for j, t in enumerate(a.tool_call_ids):
                first.setdefault(t, j)
            positions[issuer[tcid]] = first
        scope = _scope(a.calls, positions[issuer[tcid]].get(tcid))
        if scope is None:
            continue
        facts = {v.value: f for f, v in chosen.get(i, {}).items()}
        stale: dict[str, None] = {}
        for v in values_of[i]:
            key = (scope, v.path or "")
            old = at.get(key)
            if old is not None and old[0] != v.value and old[1] is not None and old[1] not in gone:
                stale[old[1]] = None
                gone.add(old[1])
            at[key] = (v.value, facts.get(v.value))
        supersedes[i].extend(f for f in stale if f not in supersedes[i])
