"""Canonical trace files: written (JSON Lines or Parquet, atomically, with their record of trace hashes)
and read (``iter_jsonl``, ``iter_parquet``, ``load_dataset_traces``), and redacted copies.

The record itself (dict <-> Trace, hash, Arrow schema) is ``sim.trace.codec``; its rules,
``sim.trace.rules``; the readers that take files as columns, ``sim.trace.read_jsonl`` and
``sim.trace.read_parquet``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from sim.core.types import Child, Trace
from sim.cost.tokens import json2_bytes, json_bytes
from sim.trace.codec import NULLABLE_TOP, arrow_schema, trace_from_dict, trace_hash, trace_to_dict
from sim.util.atomicfile import atomic_path
from sim.util.canonical import is_canonical_jsonl
from sim.util.errors import TraceError, first_line


def iter_jsonl(path: Path) -> Iterator[Trace]:
    """The traces of a canonical JSON Lines file; records named by line (``sim.trace.columns`` reads
    them as columns, the reference reads a line it declines)."""
    from sim.util.jsonl import json_line

    name = path.name

    def slow(lineno: int, raw: bytes | None, _record: int) -> Trace | None:
        got = json_line(raw)
        if got is None:
            return None
        d, problem = got
        if problem is not None:
            raise TraceError(name, problem, record=f"line {lineno}")
        return trace_from_dict(d, name, f"line {lineno}", text_checked=True)

    from sim.trace.read_jsonl import jsonl_traces  # the column reader: only when a file is read

    return jsonl_traces(path, slow)


def iter_parquet(path: Path) -> Iterator[Trace]:
    """The traces of a canonical Parquet file; records named by row (read as columns, as above)."""
    name = path.name

    def slow(row: int, d: dict) -> Trace:
        d = {k: v for k, v in d.items() if v is not None or k in NULLABLE_TOP}
        return trace_from_dict(d, name, f"row {row}", text_checked=True)

    from sim.trace.read_parquet import parquet_traces

    return parquet_traces(path, slow, lambda exc, row: exc)


# Rows of a Parquet row group as written (and bytes held for one at most): a reader decodes each
# group's 46 column chunks, so fewer, larger groups read faster (10k runs: 157 groups of 64 rows, 0.75 s;
# 10 of 1024, 0.53 s CPU; half the file size), and the column reader's batches are this size.
ROW_GROUP = 1024
ROW_GROUP_BYTES = 64 << 20


def write_traces(traces: Iterable[Trace], out: Path, record_hashes: bool = True) -> int:
    """Write one canonical file (format from the extension), atomically. Returns the number written.
    ``record_hashes``: also record the traces' hashes beside it (``sim.trace.storedhashes``: loading uses them
    while the file keeps these bytes), taken by reading the written file back, so they are what loading
    it would compute; a file that does not read back gets no record."""
    out = Path(out)
    suffix = out.suffix.lower()
    if suffix not in (".jsonl", ".parquet"):
        from sim.util.errors import ConfigError

        raise ConfigError(f"output {out.name}: unknown extension '{suffix}'; use .jsonl or .parquet")
    n = 0
    with atomic_path(out) as tmp:
        if suffix == ".jsonl":
            with open(tmp, "w", encoding="utf-8") as f:
                for t in traces:
                    f.write(json.dumps(trace_to_dict(t), ensure_ascii=False, separators=(",", ":")) + "\n")
                    n += 1
        else:
            import pyarrow as pa
            import pyarrow.parquet as pq

            sch = arrow_schema()
            with pq.ParquetWriter(tmp, sch) as w:
                batch: list[dict] = []
                group: list = []  # Arrow tables of 64 records, written as one row group
                held = 0  # their rows, and below their bytes

                def flush() -> None:
                    nonlocal group, held
                    w.write_table(pa.concat_tables(group))
                    group, held = [], 0

                for t in traces:
                    batch.append(trace_to_dict(t))
                    n += 1
                    if len(batch) == 64:
                        group.append(pa.Table.from_pylist(batch, schema=sch))
                        batch, held = [], held + 64
                        if held >= ROW_GROUP or sum(g.nbytes for g in group) >= ROW_GROUP_BYTES:
                            flush()
                if batch or n == 0:
                    group.append(pa.Table.from_pylist(batch, schema=sch))
                if group:
                    flush()
        record = _read_back(tmp, suffix) if record_hashes else None
    from sim.trace.storedhashes import record_path, write_record

    if record is None:
        record_path(out).unlink(missing_ok=True)  # a record of the file this one replaced: stale
    else:
        write_record(out, *record)
    return n


def _read_back(path: Path, suffix: str) -> tuple[int, str, list[str]] | None:
    """(size, SHA-256, trace hashes) of a canonical file just written, the hashes as loading it gives
    them; None when it does not load (a trace that breaks a rule: loading it says so)."""
    from sim.trace.storedhashes import file_digest
    from sim.util.errors import CtxsimError

    with open(path, "rb") as f:
        size, digest = file_digest(f)
    read = iter_jsonl if suffix == ".jsonl" else iter_parquet
    try:
        hashes = [t.derived("trace_hash", trace_hash) for t in read(path)]
    except CtxsimError:
        return None
    return size, digest, hashes


def load_dataset_traces(
    source: str | Path | Sequence[str | Path], split: str = "train", streaming: bool = False
) -> Iterator[Trace]:
    """Canonical traces through Hugging Face ``datasets``: local JSON Lines / Parquet files (or a folder
    of them), or a hub dataset name for users with network. ``streaming`` reads record by record with
    bounded memory (a corpus larger than memory); otherwise ``datasets`` builds its Arrow cache first."""
    items = [source] if isinstance(source, str | Path) else list(source)
    files: list[str] = []
    for item in map(Path, items):
        if item.is_dir():
            from sim.util.paths import files_under

            try:
                files += [str(f) for f in files_under(item, (".parquet", ".jsonl", ".json"))]
            except ValueError as exc:
                raise TraceError(str(item), str(exc)) from None
        elif item.exists():
            files.append(str(item))
    label = ",".join(Path(f).name for f in files) if files else str(source)
    if not files and not (isinstance(source, str) and not Path(source).suffix):
        raise TraceError(str(source), "no such file or directory")
    if files and split == "train" and all(_canonical_local(Path(f)) for f in files):
        yield from _local_traces([Path(f) for f in files], label)
        return
    import datasets  # lazy: heavy, and only a hub name or a file ctxsim does not read itself needs it

    datasets.disable_progress_bars()  # its bars would leak into ctxsim's output
    try:
        if files:
            builder = "parquet" if all(f.endswith(".parquet") for f in files) else "json"
            ds = datasets.load_dataset(builder, data_files=files, split=split, streaming=streaming)
        else:
            ds = datasets.load_dataset(source, split=split, streaming=streaming)  # a hub dataset name
    except Exception as exc:  # noqa: BLE001 - unknown split, unreachable hub, damaged files: datasets
        # wraps what pyarrow or its JSON reader raised (DatasetGenerationError, ArrowInvalid, ...)
        raise TraceError(label, f"cannot load as a dataset: {_dataset_problem(exc)}") from None
    rows = iter(ds)
    i = 0
    while True:
        try:
            d = next(rows, None)
        except Exception as exc:  # noqa: BLE001 - streaming reads (and fails) while iterating
            raise TraceError(
                label, f"cannot read as a dataset: {_dataset_problem(exc)}", record=f"row {i}"
            ) from None
        if d is None:
            return
        d = {k: v for k, v in d.items() if v is not None or k in NULLABLE_TOP}
        yield trace_from_dict(d, label, f"row {i}")
        i += 1


def _canonical_local(path: Path) -> bool:
    """A local file ``datasets`` would only turn into the canonical records it holds (its one split is
    ``train``): canonical Parquet or JSON Lines, which ctxsim reads itself."""
    suffix = path.suffix.lower()
    return suffix == ".parquet" or (suffix == ".jsonl" and is_canonical_jsonl(path))


def _local_traces(files: list[Path], label: str) -> Iterator[Trace]:
    """The traces of local canonical files in order, read straight from the file as columns
    (``sim.trace.columns``: Arrow batches of Parquet, blocks of JSON Lines) instead of through
    ``datasets``' row conversion: the same records, numbered as ``datasets`` numbers them (rows across
    all files), memory bounded by a batch."""
    from sim.trace.read_jsonl import jsonl_traces
    from sim.trace.read_parquet import parquet_traces
    from sim.util.jsonl import json_line

    i = 0
    for path in files:
        base = i
        if path.suffix.lower() == ".parquet":

            def slow_row(row: int, d: dict, base=base) -> Trace:
                d = {k: v for k, v in d.items() if v is not None or k in NULLABLE_TOP}
                return trace_from_dict(d, label, f"row {base + row}", text_checked=True)

            def read_error(exc: Exception, row: int, base=base) -> Exception:  # a damaged file
                message = exc.message if isinstance(exc, TraceError) else first_line(exc)
                return TraceError(label, f"cannot read as a dataset: {message}", record=f"row {base + row}")

            traces = parquet_traces(path, slow_row, read_error)
        else:

            def slow_line(_lineno: int, raw: bytes | None, record: int, base=base) -> Trace | None:
                got = json_line(raw)
                if got is None:
                    return None
                d, problem = got
                row = f"row {base + record}"
                if problem is not None:
                    raise TraceError(label, f"cannot read as a dataset: {problem}", record=row)
                if type(d) is dict:  # as datasets gives a row: a missing value is no field
                    d = {k: v for k, v in d.items() if v is not None or k in NULLABLE_TOP}
                return trace_from_dict(d, label, row, text_checked=True)

            traces = jsonl_traces(path, slow_line)
        for t in traces:
            yield t
            i += 1


def _dataset_problem(exc: BaseException) -> str:
    """What went wrong, from the innermost cause (``datasets`` wraps the reader's error in its own)."""
    while exc.__cause__ is not None or exc.__context__ is not None:
        exc = exc.__cause__ or exc.__context__
    return f"{type(exc).__name__}: {first_line(exc)}"


def redact(t: Trace) -> Trace:
    """A text-free copy: no content, fact ids replaced by hashes, outcome dropped; sizes (the content's JSON
    sizes too, which the seed engine's estimate needs), where each fact sits (its byte span) and its kind,
    provenance, usage and structure kept, so every metric computes as before. Exception: a head/tail cut of
    text with multi-byte characters (or, for the seed engine's envelope and summarizer input, with JSON
    escapes) is sized from the counts without the text (exact for ASCII)."""
    import dataclasses

    def h(fact: str) -> str:
        return "fact:" + hashlib.sha256(fact.encode()).hexdigest()[:16]

    def sizes(e) -> dict:
        if e.content is None:
            return {}
        return {"json_bytes": json_bytes(e.content), "json2_bytes": json2_bytes(e.content)}

    events = tuple(
        dataclasses.replace(
            e,
            content=None,
            provides=tuple(h(f) for f in e.provides),
            needs=tuple(h(f) for f in e.needs),
            supersedes=tuple(h(f) for f in e.supersedes),
            # a page address is text too: kept as its length only (OpenHands' placeholder is sized by it)
            url=None if e.url is None else "x" * len(e.url.encode()),
            **sizes(e),
        )
        for e in t.events
    )
    children = tuple(Child(c.parent_call, redact(c.trace), c.tool_call_id) for c in t.children)
    return dataclasses.replace(t, events=events, outcome={"redacted": True}, children=children)
