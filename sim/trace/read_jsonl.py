"""Canonical JSON Lines files read as columns: blocks of whole lines parsed by Arrow's JSON reader (on
a second core when one is free) and turned into traces by ``sim.trace.columns``; a line the fast path
declines goes to the reference reader the caller gives (``slow``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from sim.core.types import Trace
from sim.trace.arrow_arrays import arrow_and_compute
from sim.trace.codec import arrow_schema
from sim.trace.columns import batch_traces, declining
from sim.trace.readahead import Soon, on_thread, reading_ahead

JSONL_BLOCK = 8 << 20  # bytes of whole lines parsed by Arrow at once
_PARTS = 4  # a block parsed on Arrow's threads: in this many parts, so that both cores keep busy


def jsonl_traces(path: Path, slow: Callable[[int, bytes | None, int], Trace | None]) -> Iterator[Trace]:
    """The traces of a canonical JSON Lines file in order. ``slow(lineno, raw, record)``: the reference
    for a line the fast path declines (``record``: how many records came before it; None returned: a
    blank line; ``raw`` None: a line past the length limit)."""
    from sim.trace.storedhashes import stored_hashes

    done = [0]  # records so far
    with open(path, "rb") as f:  # the bytes a record of hashes vouches for are the ones read here
        ahead = reading_ahead()  # a core free: the next block read and parsed on it, by Arrow's threads
        # too, and the file's digest taken on a thread of its own (at offsets) while the first block is
        blocks = on_thread(_jsonl_blocks(path, f, threads=True)) if ahead else _jsonl_blocks(path, f)
        hashes = Soon(lambda: stored_hashes(path, f, in_place=ahead))  # nothing runs yet, as above
        try:  # closed here, before the file is: the threads stop first
            hashes.start(now=not ahead)
            for block, batch in blocks:
                yield from _jsonl_block(block, batch, slow, done, hashes.result())
        finally:
            blocks.close()
            hashes.join()


def _jsonl_blocks(
    path: Path, f, threads: bool = False
) -> Iterator[tuple[list[tuple[int, bytes | None]], Any]]:
    """The file's non-blank lines in blocks of about ``JSONL_BLOCK`` bytes (a line past the length
    limit, ``raw`` None, a block of its own), each with what Arrow parsed from it (``_parsed``; on
    Arrow's threads with ``threads``). Meant to run ahead of its reader (``on_thread``): Arrow parses
    without the interpreter lock, and the file is read a block at a time (read line by line, the
    thread would wait for the lock after each of the few reads a line takes, while the replay runs)."""
    from sim.util.jsonl import lines_of

    block: list[tuple[int, bytes | None]] = []
    size = 0
    for lineno, raw in lines_of(path, file=f, chunk=JSONL_BLOCK):
        if raw is None:
            if block:
                yield block, _parsed(block, threads)
            block, size = [], 0
            yield [(lineno, None)], None
            continue
        if not raw.strip():  # blank (ASCII whitespace): no record, as in the reference
            continue
        block.append((lineno, raw))
        size += len(raw)
        if size >= JSONL_BLOCK:
            yield block, _parsed(block, threads)
            block, size = [], 0
    if block:
        yield block, _parsed(block, threads)


def _parsed(block: list[tuple[int, bytes | None]], threads: bool = False) -> Any:
    """The block's lines as one Arrow batch of canonical records (``arrow_schema``), or None when Arrow
    does not read every line as one such record (the reference reads them and says why). ``threads``:
    Arrow parses the block in a few parts at once (the same batch; with a core free)."""
    import pyarrow.json as pj

    pa, _ = arrow_and_compute()
    lines = [None if raw is None else raw[:-1] if raw.endswith(b"\n") else raw for _, raw in block]
    # Arrow reads a block whose every line is one object (else: blank lines, \r\n, ...: the reference)
    if not all(line is not None and line[:1] == b"{" and line[-1:] == b"}" for line in lines):
        return None
    data = b"\n".join(lines)
    part = len(data) + 1  # Arrow's block: whole lines, so at least the longest (one past it: Arrow refuses)
    if threads:
        part = max(len(data) // _PARTS, max(map(len, lines))) + 1
    try:  # to the schema: Arrow's inferring reader crashes on deep nesting and loses lists' leading nulls
        table = pj.read_json(
            pa.BufferReader(data),
            read_options=pj.ReadOptions(use_threads=threads, block_size=part),
            parse_options=pj.ParseOptions(explicit_schema=arrow_schema(), unexpected_field_behavior="error"),
        )
        if table.num_rows == len(lines):
            batch = table.combine_chunks().to_batches()[0]
            # Arrow's JSON reader keeps a string's bytes as they are: one that is not UTF-8 (a 0xFF in an
            # event's source_type) failed only when the trace's events were built, lazily, as an internal
            # UnicodeDecodeError; the reference names the line instead (validate, import and run agree)
            batch.validate(full=True)
            return batch
    except Exception:  # noqa: BLE001 - not what Arrow reads: the reference says why
        pass
    return None


def _jsonl_block(
    block: list[tuple[int, bytes | None]], batch, slow, done: list[int], hashes: list[str] | None
) -> Iterator[Trace]:
    if batch is None:
        for lineno, raw in block:
            t = slow(lineno, raw, done[0])
            if t is not None:
                done[0] += 1
                yield t
        return
    base = done[0]
    known = None if hashes is None else hashes[base : base + len(block)]
    if known is not None and len(known) != len(block):  # more records than recorded: not ours
        known = None
    # a file that holds the very bytes its record of hashes was taken from is write_traces' own output,
    # read back when it was written: its lines are the canonical encoding, and are not checked again
    # (a third of reading a JSON Lines file); the schema's rules are
    check = None
    if known is None:
        check = [raw[:-1] if raw.endswith(b"\n") else raw for _, raw in block]
    ts = declining(
        lambda: batch_traces(batch, lambda i: slow(block[i][0], block[i][1], base + i), check, known)
    )
    if ts is None:  # the whole block through the reference
        ts = filter(None, (slow(lineno, raw, base + i) for i, (lineno, raw) in enumerate(block)))
    for t in ts:
        done[0] += 1
        yield t
