"""Reading JSON: one parser for every untrusted document, and JSON Lines read the same way everywhere.

``parse_json`` is ``json.loads`` with the rules the rest of ctxsim relies on: nesting at most
``MAX_JSON_DEPTH`` levels (deeper input would overflow the C parser's or a later walk's stack), no
``NaN``/``Infinity`` and no number that overflows a double (a count or a time must be a real number),
and no lone UTF-16 surrogate (``"\\ud800"``: text that cannot be written back as UTF-8). Each refusal
is a ``json.JSONDecodeError`` with a position, so callers word every bad document one way.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

MAX_JSON_DEPTH = 200  # far above any real trace (they nest < 20 deep), far below the interpreter's stack
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


def json_lines(path: Path, errors: str = "strict") -> Iterator[tuple[int, Any, str | None]]:
    """(line number, record, None) for each non-blank line, or (line number, None, what is wrong) for
    a line that is not JSON. The position is counted on the line without its newline, so a truncated
    record points at its last character rather than at column 1 of a line that does not exist."""
    with open(path, encoding="utf-8", errors=errors) as f:
        for lineno, line in enumerate(f, start=1):
            text = line.rstrip("\r\n")
            if not text.strip():
                continue
            try:
                yield lineno, parse_json(text), None
            except json.JSONDecodeError as exc:
                yield lineno, None, f"invalid JSON: {exc.msg} (column {exc.colno})"
