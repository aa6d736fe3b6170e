"""A sweep's results store: ``DIR/parts/part-*.parquet`` (finished runs, one file per chunk, keyed by
``run_key``) and ``DIR/results.parquet`` merged from them.

Several writers may share one store at once (two sweeps on one path, the jobs of a Hydra multirun):
parts appear whole by rename (``sim.util.atomicfile``), each writer's temporary files carry its id and only
provably stale ones of vanished writers are removed, and a part's name is a hash of every key it holds,
so two writers that write the same chunk write the same file. Rows for one key are the same whoever wrote
them (a run's numbers follow from its key), so a key held by several parts gives one row.

Beside the parts, ``DIR/parts/index.json`` remembers each part's run keys with the identity (size, mtime,
inode, ctime) of the file they were read from or written as: a scan takes a part's keys from there while
the file is still that file, and its key list still hashes to the part's name (a part's name is a hash of
its keys), so a rerun without a receipt opens no part it has seen before (3,200 parts: ~8.7 s of Parquet
footers). The index is a cache only: any entry in doubt, or a damaged or missing index, means the part is
read, as without it.

A part that cannot be read as a results part (truncated, not Parquet, no ``run_key``, wrong schema) is
moved to ``DIR/parts/quarantine/`` with a warning naming it, and its runs count as not done.

Beside ``results.parquet`` a sweep leaves ``results.receipt.json``: the digest of the plan it merged
(``sim.sweep.plandigest``), the sha256 of the bytes it wrote, and the identity (size, mtime, inode, ctime) of
every part it merged from. A rerun whose plan digest matches, while results.parquet still hashes to those
bytes and every such part is still there unchanged, is finished: it reads no part, composes no setting
and loads no trace (``receipt_vouches``). Anything else — another sweep's receipt, a part rewritten,
moved or quarantined, a results.parquet replaced — takes the full path (scan, plan, merge if needed).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sim.util.atomicfile import atomic_path, durable_replace, make_dirs, remove_stale_temps
from sim.util.errors import ConfigError

PARTS = "parts"
RESULTS = "results.parquet"
RECEIPT = "results.receipt.json"
INDEX = "index.json"  # in the parts folder: each part's keys (``read_index``)
QUARANTINE = "quarantine"
KEY = "run_key"
LABELS = ("scenario", "setting")  # what a run was asked under; not part of its key
REQUIRED = (KEY, "trace_hash", "policy")  # columns every results part has held
_KEY_TEXT = re.compile(r"[0-9a-f]{64}\Z")
_PART_NAME = re.compile(r"part-[0-9a-f]{32}\.parquet\Z")

Warn = Callable[[str], None]


@dataclass(frozen=True)
class Part:
    """One part file as scanned or written: its keys (file order), modification time and identity."""

    path: Path
    keys: tuple[str, ...]
    mtime_ns: int
    identity: tuple[int, ...] = ()  # (size, mtime_ns, inode, ctime_ns) when read or written
    # the Arrow table written as this file (``write_part``): a merge takes it while the file is still
    # the one written, instead of reading the file back (a whole 64-row, 102-column part: ~4-8 ms)
    table: Any = field(default=None, compare=False, repr=False)

    def __reduce__(self):
        """Pickled (a worker's answer to the parent) with the table as Arrow IPC bytes: ~0.7 ms to write
        and ~0.2 ms to read a part's table, against ~2.3 ms and ~1 ms through the table's own pickling."""
        return (_part, (str(self.path), self.keys, self.mtime_ns, self.identity, _ipc_bytes(self.table)))


def _ipc_bytes(data: Any) -> bytes | None:
    if data is None:
        return None
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, data.schema) as w:
        w.write_table(data)
    return sink.getvalue().to_pybytes()


def _part(path: str, keys: tuple[str, ...], mtime_ns: int, ident: tuple[int, ...], ipc: bytes | None) -> Part:
    data = None
    if ipc is not None:
        import pyarrow as pa

        data = pa.ipc.open_stream(pa.py_buffer(ipc)).read_all()
    return Part(Path(path), keys, mtime_ns, ident, data)


def identity(st: os.stat_result) -> tuple[int, int, int, int]:
    """What changes whenever a file is rewritten, replaced or touched: ctime cannot be set back."""
    return (st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns)


class DamagedPart(Exception):
    """A file in the parts folder that is not a readable results part; the message says why."""


# ---------------------------------------------------------------------------------------------- tables
def table(rows: list[dict[str, Any]]):
    """An Arrow table from row dicts with columns in first-seen order. Types are inferred from the
    whole column, so the same rows always give the same schema (a pandas round trip would turn an int
    column with gaps into floats, and an all-empty column into whatever the first part had)."""
    import pyarrow as pa

    cols: list[str] = []
    seen: set[str] = set()
    for r in rows:
        for k in r:
            if k not in seen:
                seen.add(k)
                cols.append(k)
    return pa.table({c: pa.array([r.get(c) for r in rows]) for c in cols})


def write_table(rows: list[dict[str, Any]] | Any, path: Path) -> str:
    """Write the rows (or an Arrow table of them, ``merged``) atomically; returns the sha256 of the bytes
    this writer wrote (read back from its own temporary file, so another writer replacing ``path``
    meanwhile cannot change the answer)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    data = rows if isinstance(rows, pa.Table) else table(rows)
    with atomic_path(path) as tmp:  # page checksums: a flipped bit is an error on reading, not a number
        pq.write_table(data, tmp, write_page_checksum=True)
        return file_sha256(tmp)


def _write_part_table(data: Any, path: Path) -> None:
    """``write_table`` without the sha256 of the bytes, which nothing asks of a part."""
    import pyarrow.parquet as pq

    with atomic_path(path) as tmp:
        pq.write_table(data, tmp, write_page_checksum=True)


def file_sha256(path: Path) -> str:
    """The sha256 of a file's bytes, through the standard library's own file hashing."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def part_name(keys: Iterable[str]) -> str:
    """``part-<hash of every key, in order>.parquet``: two writers that run the same chunk write the same
    name (and the same bytes), while chunks that differ in any key never share a name, so a rename over
    an existing part can never drop a run."""
    return _named("\n".join(keys))


def _named(key_lines: str) -> str:
    return f"part-{hashlib.sha256(key_lines.encode('ascii')).hexdigest()[:32]}.parquet"


def write_part(parts_dir: Path, rows: list[dict[str, Any]]) -> Part:
    """Write one chunk's rows as a part; what comes back is a path, keys, a stat and the Arrow table
    written: a worker writes its own part and sends this to the parent, whose merge then takes the table
    (Arrow's own pickling: a fraction of what reading the part back costs) instead of reading the file."""
    keys = tuple(r[KEY] for r in rows)
    path = Path(parts_dir) / part_name(keys)
    data = table(rows)
    _write_part_table(data, path)
    st = os.stat(path)
    return Part(path, keys, st.st_mtime_ns, identity(st), data)


# ------------------------------------------------------------------------------------------------ scan
def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0]


def _read_keys(path: Path) -> tuple[tuple[str, ...], os.stat_result]:
    """The ``run_key`` column of a part (nothing else is read) and its mtime; DamagedPart when the file
    is not a results part."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    # A path, read by Arrow's own file and without its thread pool: reading through a Python file object
    # made 2 of 15 resumes abort at exit ("terminate called without an active exception"); 0 of 40 so.
    try:
        with pq.ParquetFile(str(path), page_checksum_verification=True) as pf:
            names = pf.schema_arrow.names
            missing = [c for c in REQUIRED if c not in names]
            if missing:
                raise DamagedPart(f"not a results part: no column {', '.join(missing)}")
            if names.count(KEY) > 1:
                raise DamagedPart(f"not a results part: {names.count(KEY)} columns named {KEY}")
            kind = pf.schema_arrow.field(KEY).type
            if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
                raise DamagedPart(f"not a results part: column {KEY} holds {kind}, not text")
            if pf.metadata.num_rows == 0:
                raise DamagedPart("no rows")
            keys = pf.read(columns=[KEY], use_threads=False).column(0).to_pylist()
    except pa.ArrowException as exc:
        raise DamagedPart(f"unreadable Parquet ({_first_line(exc)})") from None
    st = os.stat(path)  # after the read: a part replaced meanwhile counts as the newer
    for i, k in enumerate(keys):
        if not (isinstance(k, str) and _KEY_TEXT.match(k)):
            raise DamagedPart(f"row {i}: {KEY} {k!r} is not a run key (64 hex digits)")
    if len(set(keys)) != len(keys):
        raise DamagedPart(f"a {KEY} repeats")
    return tuple(keys), st


def quarantine(path: Path, reason: str, warn: Warn, consequence: str) -> Path | None:
    """Move a damaged part to ``parts/quarantine/`` (never over an earlier one) and say so. None when
    another process moved it first (then it is that one's to report). Should another writer have put a
    whole part under the same name in between, that part is set aside too: its runs are redone, no
    result is lost or wrong."""
    path = Path(path)
    qdir = path.parent / QUARANTINE
    make_dirs(qdir)
    dest = qdir / path.name
    n = 0
    while dest.exists():
        n += 1
        dest = qdir / f"{path.stem}.{n}{path.suffix}"
    try:
        durable_replace(path, dest)
    except FileNotFoundError:
        return None
    warn(f"warning: {path}: {reason}; moved to {dest}; {consequence}")
    return dest


def scan(
    results_dir: Path, warn: Warn, consequence: str = "its runs will be run again"
) -> tuple[list[Part], list[Path]]:
    """(every whole part under ``results_dir/parts`` sorted by name, the files this scan quarantined).
    Reads each file's ``run_key`` column alone, unless the parts index vouches for its keys (the same
    file as when they were read: ``read_index``); writes the index again when it read any part. Removes
    provably stale temporaries of vanished writers there and beside results.parquet (never a live
    writer's), and moves damaged or foreign parts to quarantine."""
    results_dir = Path(results_dir)
    parts_dir = results_dir / PARTS
    if results_dir.is_dir():
        remove_stale_temps(results_dir, ".results.*.tmp")
    if not parts_dir.is_dir():
        return [], []
    remove_stale_temps(parts_dir, ".part-*.tmp")
    remove_stale_temps(parts_dir, f".{INDEX}.*.tmp")
    known = read_index(parts_dir)
    out, moved, read = [], [], 0
    for path in sorted(parts_dir.glob("part-*.parquet"), key=lambda p: p.name):  # one folder: by name
        held = known.get(path.name)
        if held is not None:
            try:
                st = os.stat(path)
            except FileNotFoundError:
                continue
            if identity(st) == held[0]:
                out.append(Part(path, held[1], st.st_mtime_ns, held[0]))
                continue
        read += 1
        try:
            keys, st = _read_keys(path)
        except FileNotFoundError:  # moved away (quarantined) by another process since the listing
            continue
        except DamagedPart as exc:
            moved.append(quarantine(path, str(exc), warn, consequence))
            continue
        except OSError as exc:  # a folder under a part's name, a failed page checksum, ...
            moved.append(
                quarantine(path, f"unreadable ({exc.strerror or _first_line(exc)})", warn, consequence)
            )
            continue
        out.append(Part(path, keys, st.st_mtime_ns, identity(st)))
    if read or len(known) != len(out):
        write_index(parts_dir, out)
    return out, [m for m in moved if m is not None]


# ------------------------------------------------------------------------------------------------ index
MAX_INDEX_BYTES = 256 << 20  # ~3.7M run keys; a larger (or foreign) index is not read: parts are read
_KEY_LINES = re.compile(r"[0-9a-f]{64}(?:\n[0-9a-f]{64})*\Z")


def write_index(parts_dir: Path, parts: Iterable[Part]) -> None:
    """Remember each part's keys with the identity of the file they belong to (parts without one are
    left out); atomically, so a reader sees a whole index, the last writer's. Best effort: an index that
    cannot be written only means the next scan reads the parts."""
    # keys as their part's name hashes them ("\n"-joined): a reader checks an entry with one sha256
    entries = {p.path.name: [*p.identity, "\n".join(p.keys)] for p in parts if len(p.identity) == 4}
    text = json.dumps({"format": 1, "parts": entries}, sort_keys=True, separators=(",", ":"))
    if len(text) > MAX_INDEX_BYTES:
        return
    try:
        with atomic_path(Path(parts_dir) / INDEX) as tmp:
            tmp.write_text(text, encoding="ascii")
    except OSError:
        pass


def read_index(parts_dir: Path) -> dict[str, tuple[tuple[int, ...], tuple[str, ...]]]:
    """Part name -> (identity, keys) of every entry of the parts index that is well formed: four
    integers, and keys (64 hex digits each, none twice) that hash to the part's name, so an entry can
    only give the keys its part was written with. Empty when the index is absent, too large or
    unreadable; the caller checks each identity against the file."""
    path = Path(parts_dir) / INDEX
    try:
        if os.stat(path).st_size > MAX_INDEX_BYTES:
            return {}
        data = json.loads(path.read_text(encoding="ascii"))
    except (OSError, ValueError):
        return {}
    parts = data.get("parts") if isinstance(data, dict) and data.get("format") == 1 else None
    if not isinstance(parts, dict):
        return {}
    out = {}
    for name, entry in parts.items():
        if not (isinstance(entry, list) and len(entry) == 5 and _PART_NAME.match(name)):
            continue
        *ident, text = entry
        if not (all(type(v) is int for v in ident) and isinstance(text, str) and _KEY_LINES.match(text)):
            continue
        if _named(text) != name:  # part_name(keys), its "\n"-joined keys being the text
            continue
        keys = tuple(text.split("\n"))
        if len(set(keys)) == len(keys):
            out[name] = (tuple(ident), keys)
    return out


def done_keys(parts: Iterable[Part]) -> set[str]:
    return {k for p in parts for k in p.keys}


def holders(parts: Iterable[Part], wanted: Collection[str]) -> list[Part]:
    """The parts that hold at least one wanted key (what a merge of those keys reads)."""
    return [p for p in parts if any(k in wanted for k in p.keys)]


# ----------------------------------------------------------------------------------------------- merge
def collect(
    parts: list[Part], wanted: Collection[str], warn: Warn, consequence: str = "its runs will be run again"
) -> tuple[list[Any], set[str]]:
    """(Arrow tables holding one row per wanted key found, wanted keys without a row). Each key's row
    comes from the first part by name that holds it and reads whole; a part that fails a full read is
    quarantined and the next holder is used. Only parts holding a wanted key not yet found are read, and
    of those only the ones whose table this process does not hold as written (``Part.table``, while the
    file has the identity it was written with: a part replaced, touched or gone since is read, or
    missed, as without it). Rows stay in Arrow: a merge of 200,000 runs through Python dicts took ~55 s
    of the parent's CPU; reading back the 3,200 parts a first sweep just wrote, ~8 ms a part, loaded."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    wanted = set(wanted)
    found: set[str] = set()
    pieces = []
    for part in sorted(parts, key=lambda p: p.path.name):
        if not any(k in wanted and k not in found for k in part.keys):
            continue
        if part.table is not None and _unchanged(part):
            read, keys = part.table, part.keys
        else:
            try:  # ParquetFile.read without threads: ~4 ms a 64-row part against ~7 ms through read_table
                with pq.ParquetFile(str(part.path), page_checksum_verification=True) as pf:
                    read = pf.read(use_threads=False)
            except FileNotFoundError:
                continue
            except (pa.ArrowException, OSError) as exc:
                quarantine(part.path, f"unreadable Parquet ({_first_line(exc)})", warn, consequence)
                continue
            keys = read.column(KEY).to_pylist() if KEY in read.schema.names else []
        take = [i for i, k in enumerate(keys) if k in wanted and k not in found]
        if not take:
            continue
        found.update(keys[i] for i in take)
        pieces.append(read if len(take) == read.num_rows else read.take(take))
    return pieces, wanted - found


def _unchanged(part: Part) -> bool:
    """Whether ``part``'s file is still the one it was written as (the same identity)."""
    try:
        return len(part.identity) == 4 and identity(os.stat(part.path)) == part.identity
    except OSError:
        return False


def merged(pieces: list[Any], labels: Callable[[str], tuple[str, str]] | None = None) -> Any:
    """The pieces of ``collect`` as one Arrow table sorted by run key, with each row's (scenario,
    setting) set from ``labels`` when given: the table ``table(rows)`` makes of the same rows in key
    order, so results.parquet has the same bytes (same columns in the same order, the same types —
    a column empty in one part and typed in another takes the type, ints and floats mixed give floats).
    Parts whose columns differ (several policies in one store) go through the rows as before."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not pieces:
        return table([])
    names = pieces[0].schema.names

    def by_rows() -> Any:
        rows = sorted((r for p in pieces for r in p.to_pylist()), key=lambda r: r[KEY])
        if labels is not None:
            for r in rows:
                r[LABELS[0]], r[LABELS[1]] = labels(r[KEY])
        return table(rows)

    if labels is not None and any(c not in names for c in LABELS):
        return by_rows()
    # parts of one schema (the common case) need no type promotion, which costs 2-3x the plain concat;
    # Arrow checks that every schema is the first's (comparing 3,200 schemas in Python: ~0.4 s)
    try:
        out = pa.concat_tables(pieces, promote_options="none")
    except pa.ArrowInvalid:  # schemas differ
        if any(p.schema.names != names for p in pieces):
            return by_rows()
        out = pa.concat_tables(pieces, promote_options="permissive")
    # one chunk a column before the sort: a take over 3,200 chunks a column costs ~4x a contiguous one
    out = out.combine_chunks()
    out = out.take(pc.sort_indices(out.column(KEY)))
    if labels is not None:
        columns = labels.columns(out.column(KEY)) if isinstance(labels, KeyLabels) else None
        if columns is None:
            got = [labels(k) for k in out.column(KEY).to_pylist()]
            columns = [pa.array([g[i] for g in got]) for i in range(len(LABELS))]
        for name, column in zip(LABELS, columns, strict=True):
            out = out.set_column(names.index(name), name, column)
    return out.combine_chunks()


class KeyLabels:
    """The (scenario, setting) label of each run key of a plan, given in plan order: ``keys[i]`` is
    labelled ``texts[which[i]]``, and a key listed again keeps its first label. Called with one key it
    answers as a dict would (KeyError for a key it does not hold); ``columns`` labels a whole column of
    keys at once with Arrow's hash lookup (200,000 keys: ~0.23 s against ~0.47 s a Python call a key,
    loaded)."""

    def __init__(self, keys: list[str], which: list[int], texts: list[tuple[str, str]]) -> None:
        if len(keys) != len(which):
            raise ValueError("KeyLabels: one label index a key")
        self.keys, self.which, self.texts = keys, which, texts
        self._by_key: dict[str, tuple[str, str]] | None = None

    def __call__(self, key: str) -> tuple[str, str]:
        if self._by_key is None:
            by_key: dict[str, tuple[str, str]] = {}
            for k, w in zip(self.keys, self.which, strict=True):
                by_key.setdefault(k, self.texts[w])
            self._by_key = by_key
        return self._by_key[key]

    def columns(self, keys: Any) -> list[Any] | None:
        """The label columns (scenario, setting) of ``keys``, an Arrow text column; None when one of them
        is not a key of the plan (or is empty)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if keys.null_count:
            return None
        # index_in answers each key's first place in the value set: the first label, as __call__ gives
        place = pc.index_in(keys, value_set=pa.array(self.keys, pa.string()))
        if place.null_count:
            return None
        which = pc.take(pa.array(self.which, pa.int64()), place)
        return [pc.take(pa.array([t[i] for t in self.texts], pa.string()), which) for i in range(len(LABELS))]


def results_current(
    results: Path,
    keys: Collection[str],
    labels: Callable[[str], tuple[str, str]] | None,
    sources: Iterable[Part],
) -> bool:
    """Whether ``results.parquet`` is what a merge would write now, so the merge can be skipped: it
    holds exactly ``keys`` (distinct; sorted, each once), with each key's (scenario, setting) label
    ``labels(key)`` when given, and it was written after every part it is merged from (a part replaced or
    added later is newer; a part removed since leaves a key without a part, so the sweep has work to do
    and merges anyway). Any doubt (unreadable file, equal timestamps) answers False: a needless merge
    costs time, a wrong skip would return stale results."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        before = os.stat(results)
        if any(p.mtime_ns >= before.st_mtime_ns for p in sources):
            return False
        # the labels as dictionaries: a few hundred distinct texts, not one Python string a row
        with pq.ParquetFile(
            str(results), page_checksum_verification=True, read_dictionary=list(LABELS)
        ) as pf:
            names = pf.schema_arrow.names
            if pf.metadata.num_rows != len(keys) or KEY not in names:
                return False
            cols = [KEY] + (list(LABELS) if labels is not None else [])
            if any(c not in names for c in cols):
                return False
            got = pf.read(columns=cols, use_threads=False)
        after = os.stat(results)
    except (OSError, pa.ArrowException):
        return False
    if (before.st_ino, before.st_mtime_ns) != (after.st_ino, after.st_mtime_ns):
        return False  # replaced while read
    held = got.column(KEY).to_pylist()
    # as many rows as keys, strictly increasing, each one of the keys: exactly the keys, sorted (no sort
    # of the keys needed: 0.35 s of 200,000)
    wanted = keys if isinstance(keys, set | frozenset) else set(keys)
    if len(held) != len(wanted) or not all(a < b for a, b in itertools.pairwise(held)):
        return False
    if not all(k in wanted for k in held):
        return False
    if labels is None:
        return True
    # one Python call a key: Arrow's lookup (KeyLabels.columns) would import pyarrow.compute, which costs
    # a rerun more than it saves
    want = [labels(k) for k in held]
    return all(_texts(got.column(name)) == [label[i] for label in want] for i, name in enumerate(LABELS))


def _texts(column: Any) -> list[Any]:
    """A column's values as a list; a dictionary column's rows share its dictionary's strings."""
    import pyarrow as pa

    out: list[Any] = []
    for chunk in column.chunks:
        if pa.types.is_dictionary(chunk.type) and chunk.null_count == 0:
            values = chunk.dictionary.to_pylist()
            out.extend([values[i] for i in chunk.indices.to_pylist()])
        else:
            out.extend(chunk.to_pylist())
    return out


# ---------------------------------------------------------------------------------------------- receipt
MAX_RECEIPT_BYTES = 64 << 20  # ~600k parts; a larger (or foreign) receipt is not read: the full path runs


def write_receipt(
    results_dir: Path, plan: str, results_sha256: str, sources: Iterable[Part], facts: dict[str, Any]
) -> None:
    """Say what ``results.parquet`` is: the merge of ``sources`` (every part holding one of its keys)
    under the plan with digest ``plan``, with bytes of sha256 ``results_sha256``; ``facts``: what the
    plan said (totals, notes), said again by a rerun that stops at the receipt."""
    srcs = sorted(sources, key=lambda p: p.path.name)
    if any(len(p.identity) != 4 for p in srcs):
        return
    data = {
        "format": 1,
        "plan": plan,
        "results_sha256": results_sha256,
        "sources": [[p.path.name, *p.identity] for p in srcs],
        **facts,
    }
    with atomic_path(Path(results_dir) / RECEIPT) as tmp:
        tmp.write_text(json.dumps(data, sort_keys=True, separators=(",", ":")), encoding="utf-8")


def receipt_vouches(results_dir: Path, plan: str) -> dict[str, Any] | None:
    """The receipt's data when it vouches that ``results.parquet`` is the finished merge of the plan with
    digest ``plan``: the same digest, every part it names still there with the same identity (size,
    mtime, inode, ctime), and results.parquet's bytes hashing to the recorded sha256. None otherwise
    (absent, unreadable, another plan's, a part changed or gone): the caller takes the full path."""
    results_dir = Path(results_dir)
    path = results_dir / RECEIPT
    try:
        if os.stat(path).st_size > MAX_RECEIPT_BYTES:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("format") != 1 or data.get("plan") != plan:
        return None
    sources = data.get("sources")
    if not isinstance(sources, list) or not sources:
        return None
    # one stat per part, by name relative to the open folder: thousands of parts cost a few ms (a Path
    # joined and resolved from the root per part took twice as long)
    try:
        folder = os.open(results_dir / PARTS, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return None
    try:
        for entry in sources:
            if not (isinstance(entry, list) and len(entry) == 5 and isinstance(entry[0], str)):
                return None
            if not _PART_NAME.match(entry[0]):
                return None
            try:
                st = os.stat(entry[0], dir_fd=folder)
            except OSError:
                return None
            if list(identity(st)) != entry[1:]:
                return None
    finally:
        os.close(folder)
    try:
        sha = file_sha256(results_dir / RESULTS)
    except OSError:
        return None
    return data if sha == data.get("results_sha256") else None


def current_sha256(
    results: Path,
    keys: Collection[str],
    labels: Callable[[str], tuple[str, str]] | None,
    sources: Iterable[Part],
) -> str | None:
    """The sha256 of ``results.parquet`` when ``results_current`` finds it current, taken from the very
    file it checked (None if it is not current or was replaced meanwhile): what a receipt records."""
    try:
        before = os.stat(results)
        if not results_current(results, keys, labels, sources):
            return None
        sha = file_sha256(results)
        after = os.stat(results)
    except OSError:
        return None
    return sha if identity(before) == identity(after) else None


def read_rows(path: Path) -> list[dict[str, Any]]:
    import pyarrow.parquet as pq

    return pq.read_table(path, page_checksum_verification=True).to_pylist()


def merge_all(results_dir: Path, warn: Warn) -> tuple[Path, Any]:
    """Every finished run under ``results_dir/parts`` into ``results.parquet``, one row per key (sorted),
    labels as the parts hold them. Returns (path, the Arrow table written, or None when the file was
    current). A damaged part found here stops the merge (ConfigError): which runs it held is unknown,
    and a results.parquet without them would look complete; rerunning the sweep recomputes them."""
    results_dir = Path(results_dir)
    consequence = "run the same sweep again to recompute its runs"
    parts, moved = scan(results_dir, warn, consequence)
    if moved:
        raise ConfigError(
            f"sweep: {len(moved)} damaged parts under {results_dir / PARTS} moved to quarantine; "
            "results.parquet not written: run the same sweep again to recompute their runs"
        )
    if not parts:
        raise ConfigError(f"sweep: no finished runs under {results_dir / PARTS}")
    results = results_dir / RESULTS
    keys = sorted(done_keys(parts))
    # with a key held by two parts, which one a merge reads depends on the parts present: merge again
    unique_holders = sum(len(p.keys) for p in parts) == len(keys)
    if unique_holders and results_current(results, keys, None, parts):
        return results, None
    pieces, missing = collect(parts, keys, warn, consequence)
    if missing:
        raise ConfigError(
            f"sweep: {len(missing)} runs under {results_dir / PARTS} were in damaged parts (moved to "
            "quarantine); results.parquet not written: run the same sweep again to recompute them"
        )
    try:
        out = merged(pieces)
        write_table(out, results)
    except (TypeError, ValueError) as exc:  # pyarrow's ArrowInvalid/ArrowTypeError derive from these
        raise ConfigError(
            f"sweep: the parts under {results_dir / PARTS} do not share one schema ({exc}); "
            "parts of another ctxsim version or another tool?"
        ) from None
    return results, out
