"""Trace hashes recorded beside a canonical file when ctxsim writes it, used on load only while the file
holds the very bytes they were recorded for.

Why a sidecar file and not Parquet key-value metadata: one design for both canonical formats (a JSON
Lines file has nowhere to keep metadata), and the digest covers the whole file, byte for byte, with
nothing left out (a digest kept inside a Parquet footer would have to leave out the footer, which also
holds the schema and the row groups' offsets: what is read would no longer be what was digested). A
sidecar that is lost (a file copied alone) or stale (the file rewritten or edited, by ctxsim or by hand)
costs only the time to compute the hashes again, as without a record; it never gives a wrong hash.

The record, ``<file>.trace-hashes`` (a suffix no importer claims, so a folder of traces lists it as
nothing), is a JSON object: the file's size and SHA-256, the trace hashes in record order, and a seal (a
SHA-256 over all of them). Loading takes the hashes only when the record is well formed, its seal holds
(an edited hash, digest or count: the whole record is ignored) and the file's bytes, read through the
handle the reader then reads, have the recorded size and digest (~1-2 GB/s, far cheaper than the
canonical text a hash is taken over). The record's hashes are what loading the file without it gives:
``write_traces`` takes them by reading back the file it has just written.

What it does not guard against: someone who writes a new seal by hand over wrong hashes (the seal is a
check against staleness and damage, not a signature; such a person could as well edit the results), and
a file written in place, not replaced, while it is being read (which no reader survives). A valid record
also vouches that a JSON Lines file is ``write_traces``' own text, so its lines are not compared with
their canonical encoding again (``sim.trace.columns``); the schema's rules are checked all the same.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import BinaryIO

SUFFIX = ".trace-hashes"
FORMAT = "ctxsim-trace-hashes/1"
_HASH = re.compile(r"sha256:[0-9a-f]{64}\Z")
_MAX_RECORD_FACTOR = 16  # a record larger than this many times its file is not read (a trace: 74 bytes)


def record_path(path: Path) -> Path:
    """Where the record of ``path``'s hashes lives: beside it."""
    path = Path(path)
    return path.with_name(path.name + SUFFIX)


def file_digest(f: BinaryIO) -> tuple[int, str]:
    """(size, SHA-256) of the bytes of an open binary file from its start; leaves it at its start."""
    f.seek(0)
    digest = hashlib.file_digest(f, "sha256").hexdigest()
    size = f.tell()
    f.seek(0)
    return size, digest


def file_digest_in_place(f: BinaryIO) -> tuple[int, str]:
    """``file_digest`` read at offsets (``os.pread``), leaving ``f`` where it is: while another thread
    reads ``f`` from its start (the same open file, so the same bytes)."""
    h = hashlib.sha256()
    fd, size = f.fileno(), 0
    while True:
        piece = os.pread(fd, 1 << 20, size)
        if not piece:
            return size, h.hexdigest()
        h.update(piece)
        size += len(piece)


def _seal(size: int, digest: str, hashes: list[str]) -> str:
    h = hashlib.sha256(f"{FORMAT}\x00{size}\x00{digest}\x00{len(hashes)}\x00".encode())
    h.update("\n".join(hashes).encode())
    return h.hexdigest()


def record_text(size: int, digest: str, hashes: list[str]) -> str:
    """The record's JSON text for a file of ``size`` bytes with SHA-256 ``digest`` holding traces whose
    hashes are ``hashes``, in order."""
    body = {"format": FORMAT, "file_bytes": size, "file_sha256": digest, "trace_hashes": hashes}
    return json.dumps({**body, "seal": _seal(size, digest, hashes)}, separators=(",", ":")) + "\n"


def write_record(path: Path, size: int, digest: str, hashes: list[str]) -> None:
    """Record ``hashes`` for ``path`` (whose bytes have ``size`` and ``digest``), atomically."""
    from sim.util.atomicfile import atomic_path

    with atomic_path(record_path(path)) as tmp:
        tmp.write_text(record_text(size, digest, hashes), encoding="ascii")


def stored_hashes(path: Path, f: BinaryIO, in_place: bool = False) -> list[str] | None:
    """The recorded trace hashes of ``path`` when its record is valid and ``f`` (``path`` opened for
    reading, read from its start by the caller afterwards) holds the recorded bytes; else None (compute
    them). ``in_place``: ``f`` is read at offsets, not moved (the caller may be reading it already).
    Never raises for a bad record: a record is an optimisation, not input."""
    try:
        size = os.fstat(f.fileno()).st_size
        rec = record_path(path)
        if rec.stat().st_size > 1024 + _MAX_RECORD_FACTOR * size:  # bounded cost
            return None
        got = json.loads(rec.read_text(encoding="ascii"))
    except (OSError, ValueError):  # no record, unreadable, not ASCII, not JSON
        return None
    if type(got) is not dict or set(got) != {"format", "file_bytes", "file_sha256", "trace_hashes", "seal"}:
        return None
    hashes, digest, recorded = got["trace_hashes"], got["file_sha256"], got["file_bytes"]
    if got["format"] != FORMAT or type(recorded) is not int or recorded != size or type(digest) is not str:
        return None
    if type(hashes) is not list or not all(type(h) is str and _HASH.match(h) for h in hashes):
        return None
    if got["seal"] != _seal(recorded, digest, hashes):
        return None
    try:
        if (file_digest_in_place(f) if in_place else file_digest(f)) != (size, digest):
            return None
    except OSError:
        return None
    return hashes
