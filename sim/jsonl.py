"""Reading JSON Lines: one place that parses records and words a damaged line the same way everywhere."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any


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
                yield lineno, json.loads(text), None
            except json.JSONDecodeError as exc:
                yield lineno, None, f"invalid JSON: {exc.msg} (column {exc.colno})"
