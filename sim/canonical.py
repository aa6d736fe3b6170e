"""What marks a canonical JSON Lines trace file, told from its first bytes alone: its own small module, so
a finished sweep's resume can digest its scenario without importing the trace types (numpy)."""

from __future__ import annotations

from pathlib import Path


def is_canonical_jsonl(path: Path) -> bool:
    """A canonical JSON Lines file starts with an object carrying our schema_version (bytes that are not
    UTF-8 there do not hide it: reading names them)."""
    try:
        with open(path, "rb") as f:
            head = f.read(256).decode("utf-8", errors="replace")
    except OSError:
        return False
    return head.lstrip().startswith("{") and '"schema_version"' in head
