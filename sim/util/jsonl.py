"""Reading JSON: one parser for every untrusted document, and JSON Lines read the same way everywhere.

``parse_json`` is ``json.loads`` with the rules the rest of ctxsim relies on: nesting at most
``MAX_JSON_DEPTH`` levels (deeper input would overflow the C parser's or a later walk's stack), no
``NaN``/``Infinity`` and no number that overflows a double (a count or a time must be a real number),
and no lone UTF-16 surrogate (``"\\ud800"``: text that cannot be written back as UTF-8). Each refusal
is a ``json.JSONDecodeError`` with a position, so callers word every bad document one way.

A document read from outside is parsed whole, so its size bounds the memory: ``parse_document`` refuses
one longer than ``MAX_DOCUMENT_BYTES`` and one whose parsed form would need more than
``MAX_PARSE_BYTES`` (``parse_cost``: a 60 MB list of tiny objects takes 2.5 GB as Python objects, forty
times its size, where a real trace takes two to four times). ``json_lines`` holds one line at a time,
at most ``MAX_DOCUMENT_BYTES`` long, and names a line that is not UTF-8 instead of stopping there.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

MAX_JSON_DEPTH = 200  # far above any real trace (they nest < 20 deep), far below the interpreter's stack
MAX_DOCUMENT_BYTES = 128 << 20  # one JSON document read whole: a file, an archive member, a JSON line
MAX_PARSE_BYTES = 1 << 30  # the memory one document's parsed form may take (estimated by parse_cost)
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


class _Refused(Exception):
    def __init__(self, message: str, literal: str | None = None) -> None:
        super().__init__(message)
        self.message, self.literal = message, literal


def _constant(name: str) -> Any:
    raise _Refused(f"{name} is not a number (JSON numbers are finite)", name)


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(f"number {text[:40]} does not fit a double", text)
    return value


def _depth_error(obj: Any, limit: int) -> bool:
    """True when ``obj`` nests deeper than ``limit`` (an explicit stack: no recursion on deep input)."""
    stack = [(obj, 1)]
    pop, push = stack.pop, stack.append
    while stack:
        o, d = pop()
        if d > limit:
            return True
        t = type(o)
        if t is dict:
            o = o.values()
        elif t is not list:
            continue
        for v in o:
            tv = type(v)
            if tv is dict or tv is list:
                push((v, d + 1))
    return False


def _deep_position(text: str, limit: int) -> int:
    """Offset of the bracket that opens level ``limit + 1`` (strings skipped), for the message."""
    depth, in_str, esc = 0, False, False
    for i, ch in enumerate(text):
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            if depth > limit:
                return i
        elif ch in "]}":
            depth -= 1
    return 0


def _has_lone_surrogate(obj: Any) -> bool:
    try:
        json.dumps(obj, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def parse_json(text: str, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``json.loads`` under the rules above; a refused document raises ``json.JSONDecodeError``."""
    try:
        obj = json.loads(text, parse_constant=_constant, parse_float=_float)
    except _Refused as exc:
        pos = text.find(exc.literal) if exc.literal else -1
        raise json.JSONDecodeError(exc.message, text, max(pos, 0)) from None
    except RecursionError:
        raise json.JSONDecodeError(
            f"nested deeper than {max_depth} levels", text, _deep_position(text, max_depth)
        ) from None
    except json.JSONDecodeError:
        raise
    except ValueError as exc:  # e.g. an integer of more digits than Python converts
        raise json.JSONDecodeError(str(exc).splitlines()[0][:120], text, 0) from None
    if type(obj) in (dict, list) and _depth_error(obj, max_depth):
        raise json.JSONDecodeError(
            f"nested deeper than {max_depth} levels", text, _deep_position(text, max_depth)
        )
    if "\\u" in text and _SURROGATE_ESCAPE.search(text) and _has_lone_surrogate(obj):
        m = _SURROGATE_ESCAPE.search(text)
        raise json.JSONDecodeError(
            "a lone UTF-16 surrogate escape (not valid Unicode text)", text, m.start() if m else 0
        )
    return obj


class DocumentTooLarge(ValueError):
    """A document refused for its size or for the memory parsing it would take (the message says which)."""


def parse_cost(text: str) -> int:
    """An upper estimate of the bytes ``json.loads(text)`` holds at its peak: the text itself plus, for
    each value counted by its delimiter (also inside strings, so never an under-count), what CPython
    keeps for it: about 250 bytes an object or array, 60 a string, 32 any other value."""
    containers = text.count("{") + text.count("[")
    return sys.getsizeof(text) + 250 * containers + 30 * text.count('"') + 32 * text.count(",")


def parse_document(text: str) -> Any:
    """``parse_json`` of one whole document from outside; ``DocumentTooLarge`` past the bounds above."""
    if len(text) > MAX_DOCUMENT_BYTES:
        raise DocumentTooLarge(
            f"larger than {MAX_DOCUMENT_BYTES:,} bytes, the most ctxsim parses as one JSON document"
        )
    cost = parse_cost(text)
    if cost > MAX_PARSE_BYTES:
        raise DocumentTooLarge(
            f"parsing it would take about {cost >> 20:,} MiB (too many small values for its size; "
            f"the bound is {MAX_PARSE_BYTES >> 20:,} MiB per document)"
        )
    return parse_json(text)


def json_lines(path: Path, errors: str = "strict") -> Iterator[tuple[int, Any, str | None]]:
    """(line number, record, None) for each non-blank line, or (line number, None, what is wrong) for
    a line that is not JSON, not UTF-8 (with ``errors="strict"``) or longer than ``MAX_DOCUMENT_BYTES``.
    The position is counted on the line without its newline, so a truncated record points at its last
    character rather than at column 1 of a line that does not exist."""
    for lineno, raw in lines_of(path):
        got = json_line(raw, errors)
        if got is not None:
            yield lineno, *got


def json_line(raw: bytes | None, errors: str = "strict") -> tuple[Any, str | None] | None:
    """One line of ``json_lines``: (record, None), (None, what is wrong), or None for a blank line
    (``raw`` None: a line that ``lines_of`` found too long)."""
    if raw is None:
        return None, f"line longer than {MAX_DOCUMENT_BYTES:,} bytes; not read"
    try:
        text = raw.decode("utf-8", errors=errors).rstrip("\r\n")
    except UnicodeDecodeError as exc:
        return None, f"not UTF-8 text (byte {exc.start + 1} of the line)"
    if not text.strip():
        return None
    try:
        return parse_document(text), None
    except json.JSONDecodeError as exc:
        return None, f"invalid JSON: {exc.msg} (column {exc.colno})"
    except DocumentTooLarge as exc:
        return None, str(exc)


def lines_of(
    path: Path, limit: int | None = None, file=None, chunk: int | None = None
) -> Iterator[tuple[int, bytes | None]]:
    """(line number, bytes) of each line, or (line number, None) for one longer than ``limit`` (default
    ``MAX_DOCUMENT_BYTES``), which is skipped without holding it in memory. ``file``: ``path`` already
    open (binary, at its start), read instead of opening it again. ``chunk``: read the file that many
    bytes at a time (the same lines): a few reads instead of a few per line, for a thread that must
    not wait for the interpreter lock after each one."""
    limit = MAX_DOCUMENT_BYTES if limit is None else limit
    with open(path, "rb") if file is None else contextlib.nullcontext(file) as f:
        if chunk is not None:
            yield from _lines_in_chunks(f, limit, chunk)
            return
        lineno = 0
        while True:
            line = f.readline(limit + 1)
            if not line:
                return
            lineno += 1
            if len(line) <= limit or line.endswith(b"\n"):
                yield lineno, line
                continue
            while line and not line.endswith(b"\n"):  # the rest of the long line, a chunk at a time
                line = f.readline(1 << 20)
            yield lineno, None


def _lines_in_chunks(f, limit: int, chunk: int) -> Iterator[tuple[int, bytes | None]]:
    """``lines_of`` reading ``chunk`` bytes at a time: each line whole (with its newline), None for one
    of more than ``limit`` bytes before its newline, yielded once its end is read, as ``lines_of`` does."""
    lineno = 0
    head: list[bytes] = []  # the start of a line whose newline is not read yet
    held = 0  # its bytes: at most ``limit`` (past it, the line is dropped up to its newline)
    skipping = False
    while True:
        data = f.read(chunk)
        if not data:
            break
        pos = 0
        nl = data.find(b"\n")
        if nl >= 0 and (head or skipping):  # the end of the line begun in an earlier chunk
            lineno += 1
            too_long = skipping or held + nl > limit
            yield lineno, None if too_long else b"".join(head) + data[: nl + 1]
            head, held, skipping = [], 0, False
            pos = nl + 1
            nl = data.find(b"\n", pos)
        while nl >= 0:
            lineno += 1
            yield lineno, None if nl - pos > limit else data[pos : nl + 1]
            pos = nl + 1
            nl = data.find(b"\n", pos)
        if skipping or pos == len(data):
            continue
        held += len(data) - pos
        if held > limit:  # too long already: not held
            head, held, skipping = [], 0, True
        else:
            head.append(data[pos:] if pos else data)
    if head or skipping:  # the last line, without a newline
        yield lineno + 1, None if skipping else b"".join(head)
