"""Canonical Parquet files read: as columns, a batch at a time (``sim.trace.columns``), and row by row
for the reference reader (``parquet_rows``), which reads what the column reader declines or cannot read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from sim.core.types import Trace
from sim.trace.codec import DICTIONARY_FIELDS, arrow_schema
from sim.trace.columns import batch_traces, declining
from sim.trace.readahead import read_ahead
from sim.util.errors import TraceError, first_line

PARQUET_BATCH = 1024  # records per Arrow batch on the fast path (the reference reads 64 at a time)


def parquet_rows(path: Path, batch_size: int = 64, start: int = 0) -> Iterator[tuple[int, dict]]:
    """(row number, record) of a canonical Parquet file, one batch in memory at a time, from row
    ``start`` on (the batches before it are decoded, as they must be to fail where they always have,
    but not turned into records). A damaged file (bad footer, corrupt pages, strings that are not UTF-8)
    is a TraceError naming it and the first row that could not be read, wherever pyarrow notices it."""
    import pyarrow.parquet as pq

    name = path.name
    with open(path, "rb") as f:
        check_decoded_sizes(f, name)
    try:
        batches = pq.ParquetFile(path).iter_batches(batch_size=batch_size)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several types (OSError, ArrowInvalid...)
        raise TraceError(name, f"not a readable Parquet file ({first_line(exc)})") from None
    row = 0
    while True:
        try:
            batch = next(batches, None)
            if batch is not None and row + batch.num_rows <= start:
                row += batch.num_rows
                continue
            records = [] if batch is None else batch.to_pylist()
        except Exception as exc:  # noqa: BLE001 - only pyarrow's reading runs here
            raise TraceError(
                name, f"not a readable Parquet file ({first_line(exc)})", record=f"row {row}"
            ) from None
        if batch is None:
            return
        for d in records:
            if row >= start:
                yield row, d
            row += 1


def check_decoded_sizes(f, name: str) -> None:
    """Refuse, before decoding any of it, a Parquet file whose row group would decode past the cap
    (``MAX_ROW_GROUP_BYTES``, ``CTXSIM_MAX_INPUT_BYTES``). First the sizes the metadata declares: each
    column chunk's and each row group's uncompressed pages. Then what dictionary encoding hides: a
    dictionary holds each string once and the pages only indices, so a 27 KB file whose dictionary holds
    one huge string repeated took 6.3 GB to decode. When the metadata cannot bound a row group's strings
    below the cap (rows x dictionary, as for any text column), its dictionary-encoded columns are read
    as dictionaries (as much memory as their pages, checked just before) and the bytes their indices
    select are summed. A file pyarrow cannot read at all is left for the reader to name."""
    import pyarrow.parquet as pq

    from sim.util.limits import INPUT_BYTES_KNOB, MAX_ROW_GROUP_BYTES, max_input_bytes

    try:
        meta = pq.ParquetFile(f).metadata
        groups = [meta.row_group(g) for g in range(meta.num_row_groups)]
    except Exception:  # noqa: BLE001 - damaged: the reader says how
        return
    cap = max_input_bytes(MAX_ROW_GROUP_BYTES)
    knob = f"raise the cap with {INPUT_BYTES_KNOB}=BYTES"
    for g, rg in enumerate(groups):
        declared = bound = 0
        encoded: list[str] = []
        for c in range(rg.num_columns):
            col = rg.column(c)
            size = max(col.total_uncompressed_size, 0)
            if size > cap:
                raise TraceError(
                    name,
                    f"column chunk declares {size:,} bytes uncompressed, more than the {cap:,} ctxsim "
                    f"decodes from one row group ({knob})",
                    record=f"row group {g}",
                    field=col.path_in_schema,
                )
            declared += size
            if col.physical_type == "BYTE_ARRAY" and col.has_dictionary_page:
                encoded.append(col.path_in_schema)
                bound += max(col.num_values, 0) * size  # no value is longer than its whole chunk
            else:
                bound += size
        if declared > cap:
            raise TraceError(
                name,
                f"row group declares {declared:,} bytes uncompressed, more than the {cap:,} ctxsim decodes "
                f"from one ({knob})",
                record=f"row group {g}",
            )
        if bound <= cap or not encoded:
            continue
        try:
            table = pq.ParquetFile(f, metadata=meta, read_dictionary=encoded).read_row_group(
                g, columns=encoded, use_threads=False
            )
            sizes: dict[str, int] = {}
            for column in table.column_names:
                _decoded_bytes(table.column(column), column, sizes)
        except TraceError:
            raise
        except Exception:  # noqa: BLE001 - damaged: the reader says how
            return
        total = declared + sum(sizes.values())
        if total > cap:
            column, n = max(sizes.items(), key=lambda x: x[1])
            raise TraceError(
                name,
                f"row group decodes to more than {cap:,} bytes ({n:,} in this column, whose dictionary "
                f"repeats its strings), the most ctxsim decodes from one ({knob})",
                record=f"row group {g}",
                field=column,
            )


def _decoded_bytes(a, path: str, out: dict[str, int]) -> None:
    """Add to ``out[leaf path]`` the bytes of the strings an Arrow array (or chunked array) holds once
    its dictionaries are expanded, counted from the dictionaries and their indices, never expanded."""
    from sim.trace.arrow_arrays import arrow_and_compute

    pa, pc = arrow_and_compute()
    if isinstance(a, pa.ChunkedArray):
        for chunk in a.chunks:
            _decoded_bytes(chunk, path, out)
        return
    t = a.type
    n = None
    if pa.types.is_dictionary(t):
        n = pc.sum(pc.take(pc.binary_length(a.dictionary), a.indices)).as_py()
    elif pa.types.is_list(t) or pa.types.is_large_list(t):
        _decoded_bytes(a.flatten(), f"{path}.list.element", out)
    elif pa.types.is_struct(t):
        for k, child in enumerate(a.flatten()):
            _decoded_bytes(child, f"{path}.{t.field(k).name}", out)
    elif pa.types.is_string(t) or pa.types.is_binary(t) or pa.types.is_large_string(t):
        n = pc.sum(pc.binary_length(a)).as_py()
    if n:
        out[path] = out.get(path, 0) + int(n)


def parquet_traces(
    path: Path, slow: Callable[[int, dict], Trace], read_error: Callable[[Exception, int], Exception]
) -> Iterator[Trace]:
    """The traces of a canonical Parquet file in order. ``slow(row, record)``: the reference for a
    declined row (``record`` as ``parquet_rows`` gives it); ``read_error(exc, row)``: what
    to raise when the file cannot be read at ``row`` (the reference reader, 64 rows a batch, says where)."""
    with open(path, "rb") as f:  # the bytes a record of hashes vouches for are the ones read here
        check_decoded_sizes(f, path.name)
        yield from _parquet_traces(path, f, slow, read_error)


def _open_parquet(f):
    """The Parquet file ``f`` opened for the fast path: a canonical one with its enumerations read as
    dictionaries (``DICTIONARY_FIELDS``, named by their paths in the file); any other as it is."""
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(f)
    if not pf.schema_arrow.equals(arrow_schema()):
        return pf
    meta = pf.metadata
    paths = [meta.schema.column(i).path for i in range(meta.num_columns)]
    wanted = [
        p
        for p in paths
        if len(parts := p.split(".")) == 4 and parts[-1] in DICTIONARY_FIELDS.get(parts[0], ())
    ]
    return pq.ParquetFile(f, metadata=meta, read_dictionary=wanted)


def _parquet_traces(path: Path, f, slow, read_error) -> Iterator[Trace]:
    from sim.trace.storedhashes import stored_hashes

    hashes = stored_hashes(path, f)
    done = 0
    readable = True
    batches = read_ahead(_arrow_batches(f))
    try:  # closed here, before the file is: the thread reading ahead stops first
        for batch in batches:
            if batch is None:  # a batch Arrow could not read
                readable = False
                break
            rows = None

            def slow_row(i: int, base=done, batch=batch) -> Trace:
                nonlocal rows
                if rows is None:
                    rows = batch.to_pylist()
                return slow(base + i, rows[i])

            known = None if hashes is None else hashes[done : done + batch.num_rows]
            if known is not None and len(known) != batch.num_rows:  # more rows than recorded: not ours
                hashes = known = None
            ts = declining(
                lambda batch=batch, slow_row=slow_row, known=known: batch_traces(
                    batch, slow_row, hashes=known
                )
            )
            for t in ts if ts is not None else map(slow_row, range(batch.num_rows)):
                yield t
                done += 1
    finally:
        batches.close()
    if readable:
        return
    # the rest through the reference: it reads (and fails) where it always has
    rows_iter = parquet_rows(path, start=done)
    while True:
        try:
            got = next(rows_iter, None)
        except Exception as exc:  # noqa: BLE001 - a TraceError of the reader
            raise read_error(exc, done) from None
        if got is None:
            return
        yield slow(got[0], got[1])
        done += 1


def _arrow_batches(f) -> Iterator:
    """The Arrow batches of the Parquet file ``f`` for the fast path, in order, each checked (its
    strings UTF-8); a last None when one could not be read (the reference reads from there on). Meant
    to run ahead of its reader (``read_ahead``): Arrow decodes without the interpreter lock."""
    try:  # one thread: the batch ahead is decoded on a second one (read_ahead), beside the replay
        batches = _open_parquet(f).iter_batches(batch_size=PARQUET_BATCH, use_threads=False)
    except Exception:  # noqa: BLE001 - not readable: the reference says how
        yield None
        return
    while True:
        try:
            batch = next(batches, None)
            if batch is not None:
                batch.validate(full=True)  # strings that are not UTF-8: the reference names the row
        except Exception:  # noqa: BLE001 - pyarrow's reading only
            yield None
            return
        if batch is None:
            return
        yield batch
