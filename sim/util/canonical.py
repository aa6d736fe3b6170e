"""What marks a canonical JSON Lines trace file, told from its first bytes alone: its own small module, so
a finished sweep's resume can digest its scenario without importing the trace types (numpy)."""

from __future__ import annotations

import re
from pathlib import Path

# a record's top-level keys that only a canonical record opens with (``write_traces`` writes
# schema_version first; a record written by hand may start with another, or lack schema_version)
_FIRST_KEY = re.compile(r'\{\s*"(schema_version|trace_id|source_format|events|calls)"\s*:')


def is_canonical_jsonl(path: Path) -> bool:
    """A canonical JSON Lines file starts with an object carrying our schema_version, or opening with
    another key of the canonical record (so one that lacks schema_version, or other required fields, is
    read as canonical and its error names the missing field, not "unknown format"). Bytes that are not
    UTF-8 there do not hide it: reading names them."""
    try:
        with open(path, "rb") as f:
            head = f.read(256).decode("utf-8", errors="replace")
    except OSError:
        return False
    head = head.lstrip()
    if not head.startswith("{"):
        return False
    if '"schema_version"' in head:
        return True
    return _FIRST_KEY.match(head) is not None and not _langsmith_run(path)


_PEEK_BYTES = 1 << 20


def _langsmith_run(path: Path) -> bool:
    """A LangSmith run written with trace_id first opens like a canonical record: its first line (if it
    is a whole JSON object within 1 MiB) has run_type and no events. A line that does not parse stays
    canonical, so that reading it names what is wrong."""
    import json

    try:
        with open(path, "rb") as f:
            line = f.readline(_PEEK_BYTES)
        d = json.loads(line)
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(d, dict) and "run_type" in d and "events" not in d
