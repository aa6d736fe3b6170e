"""ctxsim's own canonical files: JSON Lines and Parquet."""

from __future__ import annotations

from pathlib import Path

from sim.importers import Importer, register
from sim.trace.codec import CANONICAL_FORMAT
from sim.trace.io import iter_jsonl, iter_parquet
from sim.util.canonical import is_canonical_jsonl


def _is_parquet(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(4) == b"PAR1"


register(Importer(CANONICAL_FORMAT, (".jsonl",), is_canonical_jsonl, iter_jsonl))
register(Importer(CANONICAL_FORMAT + "-parquet", (".parquet",), _is_parquet, iter_parquet))
