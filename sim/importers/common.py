"""What every conversation-shaped format shares: messages and per-call usage -> a canonical trace.

An importer reads its format into ``Message`` items (in order) and a ``Usage`` for each assistant
message that came from a model call, then calls ``build_trace``. Here, once: pairing of tool results with
the calls that issued them (an orphan result gets a warning and no pairing), sizes derived from the
provider's numbers (``sim.cost.tokens.derive_sizes``) or estimated from text, and usage normalised to one
meaning (``input_tokens`` counts every input token, cached or not: see ``anthropic_usage`` and
``openai_usage``). Messy input warns (``ImportNotice``, shown on standard error) and imports sensibly;
broken input raises ``TraceError`` naming file, record and field.

Numbers (``usage_count``, ``usage_cost``, ``unix_time``, ``iso_timestamp``): a value that is absent or
null is missing (a call without usage is kept with unknown input, and a warning counts such calls); a
value that is present but impossible is refused: a count that is not an integer in [0, 2^53) (negative,
too large, a fraction, NaN, infinity, a boolean, a string), a cost that is not a finite number >= 0, a
time that is not unix seconds (or an ISO-8601 string) between years 1 and 9999. An integral float
(``12.0``, as some exporters write counts) is that integer. ``build_trace`` checks every ``Usage`` again
and the finished trace against the sum bound (``sim.util.limits``), so no importer hands the engine a number
it cannot add up.
"""

from __future__ import annotations

import bisect
import bz2
import json
import lzma
import struct
import warnings
import zipfile
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

from sim.core.types import EVENT_KINDS, Call, Event, Trace
from sim.cost.tokens import (
    calibrated_bytes_per_token,
    derive_sizes,
    estimate_text_tokens,
    estimate_tokens,
    text_coefficients,
)
from sim.information.recorded_request import present_needs
from sim.util.errors import TraceError, clip
from sim.util.jsonl import MAX_DOCUMENT_BYTES, DocumentTooLarge, parse_document
from sim.util.limits import (
    INPUT_BYTES_KNOB,
    MAX_COUNT,
    MAX_DECODED_BYTES,
    MAX_LZMA_DICT_BYTES,
    TIME_MAX,
    USAGE_COUNTS,
    count_problem,
    max_input_bytes,
    number_problem,
    short_id,
    time_problem,
)
from sim.util.notices import ImportNotice as ImportNotice  # where importers have always taken it from

MAX_ARCHIVE_BYTES = MAX_DECODED_BYTES  # all members of an archive, decompressed (declared, and produced)
_RAISE = f"raise the cap with {INPUT_BYTES_KNOB}=BYTES"


def warn(file: str, message: str) -> None:
    """An import notice; cut to one readable line however long the identifiers it quotes (``clip``)."""
    warnings.warn(ImportNotice(clip(f"{file}: {message}")), stacklevel=2)


@dataclass
class Message:
    kind: str  # one of sim.core.types.EVENT_KINDS
    content: str | None
    tool_call_ids: tuple[str, ...] = ()  # assistant: the tool calls it issued
    tool_call_id: str | None = None  # tool_result: the call it answers
    timestamp: float | None = None
    bounded: bool = False  # the recorded run already cut this content
    provides: tuple[str, ...] = ()
    needs: tuple[str, ...] = ()
    fact_spans: tuple[tuple[int, int] | None, ...] = ()  # per provided fact (sim.core.types.Event)
    fact_kinds: tuple[str | None, ...] = ()
    supersedes: tuple[str, ...] = ()
    calls: tuple[tuple[str, str], ...] = ()  # assistant: (tool name, arguments text) per issued call
    file_ops: tuple[tuple[str, str, str], ...] = ()  # assistant: (call id, "read"/"edit", path) (tool_facts)
    source_type: str | None = None  # the source framework's type of the event (sim.core.types.Event)
    url: str | None = None  # a browser output's page address
    sent: bool = True  # False: an event the framework counts but never sends (0 tokens, e.g. a recall)
    hidden_from: int | None = None  # first message index whose recorded request lacked it (recorded_request)
    run_index: int = 0  # the run of the conversation it belongs to (``number_runs``)
    # further parts of one response written as several records (``add_part``), joined by ``joined``
    more: list | None = field(default=None, repr=False, compare=False)

    def add_part(self, text: str | None, ids: Sequence[str] = (), ops: Sequence = ()) -> None:
        """Another part of this message (one response written as several records): text (if any), call ids,
        file operations, kept aside and joined once by ``joined`` (joining each part was quadratic)."""
        if self.more is None:
            self.more = [
                [self.content] if self.content else [],
                list(self.tool_call_ids),
                list(self.file_ops),
            ]
        texts, all_ids, all_ops = self.more
        if text:
            texts.append(text)
        all_ids.extend(ids)
        all_ops.extend(ops)

    def joined(self) -> Message:  # its parts joined: text lines, then ids and file operations in order
        if self.more is not None:
            texts, all_ids, all_ops = self.more
            self.content = "\n".join(texts)
            self.tool_call_ids, self.file_ops, self.more = tuple(all_ids), tuple(all_ops), None
        return self


@dataclass
class Usage:
    """One model call's usage, normalised: ``input_tokens`` is every input token, cached or not."""

    input_tokens: int | None
    output_tokens: int | None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    reasoning_tokens: int | None = None
    cost_usd: float | None = None
    timestamp: float | None = None
    extra: dict = field(default_factory=dict)

    def check(self, file: str, record: str | None, field: str = "usage") -> Usage:
        """This usage, every number checked (a reader that built it by hand may have missed one)."""
        for name in USAGE_COUNTS:
            usage_count(getattr(self, name), file, record, f"{field}.{name}")
        usage_cost(self.cost_usd, file, record, f"{field}.cost_usd")
        unix_time(self.timestamp, file, record, f"{field}.timestamp")
        return self


def usage_count(v, file: str, record: str | None, field: str) -> int | None:
    """A token count as read: None when absent; an integer in [0, 2^53) (an integral float is one);
    anything else is refused, naming file, record and field."""
    if v is None:
        return None
    if isinstance(v, float) and v.is_integer() and 0 <= v <= MAX_COUNT:
        return int(v)
    if (p := count_problem(v)) is not None:
        raise TraceError(file, p, record=record, field=field)
    return v


def usage_cost(v, file: str, record: str | None, field: str) -> float | None:
    """A recorded cost in USD: None when absent; a finite number >= 0, else refused."""
    if v is None:
        return None
    if (p := number_problem(v, 0.0)) is not None:
        raise TraceError(file, p, record=record, field=field)
    return float(v)


def unix_time(v, file: str, record: str | None, field: str) -> float | None:
    """A unix time in seconds: None when absent; a number between years 1 and 9999, else refused."""
    if v is None:
        return None
    if (p := time_problem(v)) is not None:
        hint = (
            " (milliseconds? expected seconds)" if isinstance(v, int | float) and TIME_MAX < v < 1e15 else ""
        )
        raise TraceError(file, p + hint, record=record, field=field)
    return float(v)


def _int(v, file: str, record: str | None, field: str) -> int | None:
    return usage_count(v, file, record, field)


def usage_details(u: Mapping, key: str, file: str, record: str | None, field: str) -> Mapping:
    d = u.get(key)
    if d is None:
        return {}
    if not isinstance(d, Mapping):
        raise TraceError(
            file, f"expected an object, got {type(d).__name__}", record=record, field=f"{field}.{key}"
        )
    return d


def anthropic_usage(
    u: Mapping, file: str = "<usage>", record: str | None = None, field: str = "usage"
) -> Usage:
    """Anthropic reports cache reads and writes *beside* ``input_tokens``: the total is their sum."""
    inp, read, write = (
        _int(u.get("input_tokens"), file, record, f"{field}.input_tokens"),
        _int(u.get("cache_read_input_tokens"), file, record, f"{field}.cache_read_input_tokens"),
        _int(u.get("cache_creation_input_tokens"), file, record, f"{field}.cache_creation_input_tokens"),
    )
    total = None if inp is None else inp + (read or 0) + (write or 0)
    if total is not None and total > MAX_COUNT:
        raise TraceError(
            file,
            f"input + cache read + cache write = {total:,} is not below 2^53",
            record=record,
            field=field,
        )
    return Usage(total, _int(u.get("output_tokens"), file, record, f"{field}.output_tokens"), read, write)


def openai_usage(u: Mapping, file: str = "<usage>", record: str | None = None, field: str = "usage") -> Usage:
    """OpenAI (and Gemini through OpenRouter) count cached tokens *inside* ``prompt_tokens``."""
    details = usage_details(u, "prompt_tokens_details", file, record, field)
    cdetails = usage_details(u, "completion_tokens_details", file, record, field)
    return Usage(
        _int(u.get("prompt_tokens"), file, record, f"{field}.prompt_tokens"),
        _int(u.get("completion_tokens"), file, record, f"{field}.completion_tokens"),
        _int(details.get("cached_tokens"), file, record, f"{field}.prompt_tokens_details.cached_tokens"),
        None,
        _int(
            cdetails.get("reasoning_tokens"),
            file,
            record,
            f"{field}.completion_tokens_details.reasoning_tokens",
        ),
    )


def decode(raw: bytes, file: str) -> str:
    """UTF-8 text; undecodable bytes become U+FFFD with a warning (sizes then follow the repaired text)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        warn(file, f"not valid UTF-8 (first bad byte at offset {exc.start}); undecodable bytes replaced")
        return raw.decode("utf-8", errors="replace")


def load_json(raw: bytes, file: str, record: str | None = None):
    """One whole JSON document: ``parse_document``'s bounds, every failure a TraceError naming the file
    (and the record: an archive member, a line)."""
    if len(raw) > MAX_DOCUMENT_BYTES:
        raise TraceError(file, _too_large(len(raw)), record)
    return parse_text(decode(raw, file), file, record)


def parse_text(text: str, file: str, record: str | None = None):
    try:
        return parse_document(text)
    except json.JSONDecodeError as exc:
        raise TraceError(
            file, f"invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})", record
        ) from None
    except DocumentTooLarge as exc:
        raise TraceError(file, str(exc), record) from None


def _too_large(n: int) -> str:
    return f"{n:,} bytes, larger than the {MAX_DOCUMENT_BYTES:,} ctxsim parses as one JSON document"


def read_json_file(path: Path, file: str | None = None):
    """``load_json`` of a file, refused by its size before it is read."""
    file = file or path.name
    try:
        size = path.stat().st_size
        if size > MAX_DOCUMENT_BYTES:
            raise TraceError(file, _too_large(size))
        raw = path.read_bytes()
    except OSError as exc:
        raise TraceError(file, f"cannot read ({exc.strerror or exc})") from None
    return load_json(raw, file)


# ------------------------------------------------------------------------------------------------ archives
MAX_ARCHIVE_MEMBERS = 200_000  # each costs a few hundred bytes of index before anything is read
MAX_COMPRESSION_RATIO = 1000  # deflate's own ceiling is ~1,032:1; bzip2 and LZMA bombs go far beyond
_RATIO_FLOOR = 1 << 20  # small members may have any ratio (a 1 KB run of spaces)
_CHUNK = 1 << 14  # compressed bytes fed at a time (a bomb stops within 1,000 x this)
_STEP = 1 << 20  # decompressed bytes produced at a time: the ratio is checked after each step


class Archive:
    """A zip archive read in memory (never onto disk), bounded. Opening checks the index: the member
    count, the declared total, every name (no absolute path, drive, backslash or ``..``: nothing that
    could name a file outside it) and no name twice (an archive reader would see only one of them).
    ``read`` then decompresses a member through a stream that counts the bytes it *actually* produces:
    a member stops at ``MAX_DOCUMENT_BYTES``, at a compression ratio above ``MAX_COMPRESSION_RATIO`` (past
    its first MiB), and when the archive's members together pass ``MAX_ARCHIVE_BYTES``, whatever its
    header declares (a 2 KB bzip2 member that declares 100 bytes may hold gigabytes). A member whose
    content does not match its declared size or CRC is damaged."""

    def __init__(self, path: Path) -> None:
        self.file = path.name
        try:
            self._fp = open(path, "rb")
        except OSError as exc:
            raise TraceError(self.file, f"cannot read ({exc.strerror or exc})") from None
        try:
            count = _central_directory_entries(self._fp)
            if count is not None and count > MAX_ARCHIVE_MEMBERS:
                raise TraceError(
                    self.file,
                    f"archive lists {count:,} members, more than {MAX_ARCHIVE_MEMBERS:,}",
                    field="members",
                )
            try:
                self._zf = zipfile.ZipFile(self._fp)
            except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
                raise TraceError(self.file, f"not a valid archive ({exc})") from None
            self._infos = {}
            declared = 0
            cap = self._cap = max_input_bytes(MAX_ARCHIVE_BYTES)
            for info in self._zf.infolist():
                problem = _bad_member_name(info.filename)
                if problem:
                    raise TraceError(
                        self.file, f"archive member {short_id(info.filename)!r} {problem}", field="members"
                    )
                # 'samples/./a.json', 'samples//a.json': one path, so one member (not three traces)
                name = _member_name(info.filename)
                if name in self._infos:
                    same = self._infos[name].filename
                    also = "" if same == info.filename else f" (also spelled {short_id(same)!r})"
                    raise TraceError(
                        self.file,
                        f"archive holds member {short_id(info.filename)!r} twice{also}: which one is "
                        "meant cannot be told",
                        field="members",
                    )
                self._infos[name] = info
                declared += info.file_size
                if declared > cap:
                    raise TraceError(
                        self.file,
                        f"archive members declare more than {cap:,} bytes decompressed in all ({_RAISE})",
                        record=short_id(info.filename),
                        field="members",
                    )
        except BaseException:
            self._fp.close()
            raise
        self._left = self._cap  # actual bytes the remaining reads may produce

    @property
    def names(self) -> list[str]:
        return list(self._infos)

    def __enter__(self) -> Archive:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._fp.close()

    def read(self, name: str) -> bytearray:
        info = self._infos[name]
        if info.flag_bits & 0x1:
            raise TraceError(self.file, "archive member is encrypted", record=name)
        limit = min(MAX_DOCUMENT_BYTES, self._left)
        try:
            data = _inflate(self._fp, info, limit)
        except _TooMuch as exc:
            if exc.ratio is not None:
                why = f"decompresses at more than {MAX_COMPRESSION_RATIO:,}:1, a decompression bomb"
            elif limit < MAX_DOCUMENT_BYTES:
                why = f"takes the archive past {self._cap:,} bytes decompressed ({_RAISE})"
            else:
                why = (
                    f"decompresses to more than {limit:,} bytes, the most ctxsim parses as one JSON document"
                )
            raise TraceError(
                self.file, f"archive member {why} (its header declares {info.file_size:,} bytes)", record=name
            ) from None
        except _DictionaryTooLarge as exc:
            raise TraceError(
                self.file,
                f"archive member's LZMA dictionary is declared {exc.size:,} bytes, more than the "
                f"{exc.cap:,} ctxsim allocates for one ({_RAISE})",
                record=name,
            ) from None
        except (zlib.error, OSError, EOFError, lzma.LZMAError, ValueError, MemoryError) as exc:
            raise TraceError(self.file, f"archive member cannot be read ({exc})", record=name) from None
        self._left -= len(data)
        if len(data) != info.file_size:
            raise TraceError(
                self.file,
                f"archive member is damaged: {len(data):,} bytes where its header declares "
                f"{info.file_size:,}",
                record=name,
            )
        if zlib.crc32(data) != info.CRC:
            raise TraceError(self.file, "archive member is damaged (CRC mismatch)", record=name)
        return data


def safe_zip(path: Path) -> Archive:
    """The archive at ``path`` opened for bounded reading in memory (see ``Archive``)."""
    return Archive(path)


def _member_name(name: str) -> str:
    """A member's name as a path: ``.`` parts and repeated slashes dropped (a directory's trailing slash
    too), so two spellings of one path are one name."""
    return str(PurePosixPath(name)) if name else name


def _bad_member_name(name: str) -> str | None:
    """Why a member name could address something outside the archive, or None."""
    p = PurePosixPath(name)
    if "\\" in name:
        return "holds a backslash (a Windows path separator)"
    if name.startswith("/") or p.is_absolute():
        return "has an absolute path"
    if ".." in p.parts:
        return "has a '..' path"
    if p.parts and ":" in p.parts[0]:
        return "starts with a drive name"
    return None


def _central_directory_entries(f) -> int | None:
    """The member count the archive's end record declares (zip64 too), or None if there is none (then
    ``zipfile`` names the damage)."""
    f.seek(0, 2)
    size = f.tell()
    f.seek(max(0, size - (1 << 16) - 22))
    tail = f.read()
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or len(tail) < at + 22:
        return None
    count = struct.unpack("<H", tail[at + 10 : at + 12])[0]
    if count != 0xFFFF or at < 20 or tail[at - 20 : at - 16] != b"PK\x06\x07":
        return count
    (offset,) = struct.unpack("<Q", tail[at - 12 : at - 4])
    f.seek(offset)
    record = f.read(56)
    if len(record) < 40 or record[:4] != b"PK\x06\x06":
        return None
    return struct.unpack("<Q", record[32:40])[0]


class _Stored:
    eof = False
    needs_input = True

    def decompress(self, data: bytes, max_length: int) -> bytes:
        return data


class _Inflate:
    """zlib's raw deflate stream with bz2's interface (input it could not take yet is kept)."""

    def __init__(self) -> None:
        self._d = zlib.decompressobj(-15)
        self.needs_input = True

    @property
    def eof(self) -> bool:
        return self._d.eof

    def decompress(self, data: bytes, max_length: int) -> bytes:
        out = self._d.decompress(self._d.unconsumed_tail + data, max_length)
        self.needs_input = not self._d.unconsumed_tail and len(out) < max_length
        return out


def _lzma_decompressor(f, left: int) -> tuple[lzma.LZMADecompressor, int]:
    """A zip LZMA member starts with the LZMA SDK version (2 bytes), the size of the properties (2) and
    the properties (lc/lp/pb in one byte, then the dictionary size): raw LZMA1 follows."""
    head = f.read(min(4, left))
    if len(head) < 4:
        raise EOFError("truncated LZMA header")
    (n,) = struct.unpack("<H", head[2:4])
    props = f.read(min(n, left - 4))
    if n < 5 or len(props) < n:
        raise ValueError("bad LZMA properties")
    d, lp_pb = props[0] % 9, props[0] // 9
    filt = {"id": lzma.FILTER_LZMA1, "lc": d, "lp": lp_pb % 5, "pb": lp_pb // 5}
    filt["dict_size"] = int.from_bytes(props[1:5], "little")
    cap = max_input_bytes(MAX_LZMA_DICT_BYTES)
    if filt["dict_size"] > cap:  # liblzma allocates the whole dictionary before it reads a byte
        raise _DictionaryTooLarge(filt["dict_size"], cap)
    return lzma.LZMADecompressor(lzma.FORMAT_RAW, filters=[filt]), 4 + n


class _DictionaryTooLarge(Exception):
    def __init__(self, size: int, cap: int) -> None:
        super().__init__(size, cap)
        self.size, self.cap = size, cap  # an LZMA member's declared dictionary, and the cap


class _TooMuch(Exception):
    def __init__(self, ratio: int | None = None) -> None:
        super().__init__()
        self.ratio = ratio


def _inflate(f, info: zipfile.ZipInfo, limit: int) -> bytearray:
    """The member's bytes, decompressed at most ``_STEP`` bytes at a time (the decompressors'
    ``max_length``: a single call never expands a bomb) and never past ``limit`` + 1 bytes in all."""
    f.seek(info.header_offset)
    header = f.read(30)
    if len(header) < 30 or header[:4] != b"PK\x03\x04":
        raise ValueError("no local header where the index points")
    name_len, extra_len = struct.unpack("<HH", header[26:30])
    f.seek(info.header_offset + 30 + name_len + extra_len)
    left = info.compress_size
    method = info.compress_type
    if method == zipfile.ZIP_STORED:
        d = _Stored()
    elif method == zipfile.ZIP_DEFLATED:
        d = _Inflate()
    elif method == zipfile.ZIP_BZIP2:
        d = bz2.BZ2Decompressor()
    elif method == zipfile.ZIP_LZMA:
        d, used = _lzma_decompressor(f, left)
        left -= used
    else:
        raise ValueError(f"compression method {method} is not supported")
    out = bytearray()
    fed = 0
    while not d.eof:
        chunk = b""
        if d.needs_input:
            if left <= 0:
                break  # all input given: what came out is the member (its size and CRC then tell)
            chunk = f.read(min(_CHUNK, left))
            if not chunk:
                raise EOFError("archive ends inside the member")
            left -= len(chunk)
            fed += len(chunk)
        out += d.decompress(chunk, min(_STEP, limit + 1 - len(out)))
        if len(out) > limit:
            raise _TooMuch()
        if len(out) > _RATIO_FLOOR and len(out) > MAX_COMPRESSION_RATIO * fed:
            raise _TooMuch(len(out) // max(fed, 1))
    return out


def iso_timestamp(
    value, file: str | None = None, record: str | None = None, field: str = "timestamp"
) -> float | None:
    """Unix time of an ISO-8601 timestamp; a naive one is read as UTC, so an import never depends on the
    importing machine's time zone (differences between events stay right). None when absent. Given the
    ``file``, a present value that is not such a time (between years 1 and 9999) is refused naming file,
    record and field; without it (a probe), None."""
    if value is None:
        return None
    t = None
    if isinstance(value, str):
        try:
            dt = datetime.fromisoformat(value.replace("Z", "+00:00") if value.endswith("Z") else value)
            t = (dt if dt.tzinfo else dt.replace(tzinfo=UTC)).timestamp()
        except (ValueError, OverflowError):
            t = None
    if t is not None and time_problem(t) is None:
        return t
    if file is None:
        return None
    raise TraceError(
        file,
        f"expected an ISO-8601 time between years 1 and 9999, got {value!r:.60}",
        record=record,
        field=field,
    )


def text_of(content) -> str | None:
    """Plain text of a message content: a string, or a list of parts with ``text`` (others as JSON)."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            elif isinstance(part, str):
                parts.append(part)
            else:
                parts.append(json.dumps(part, sort_keys=True, ensure_ascii=False))
        return "\n".join(parts)
    return json.dumps(content, sort_keys=True, ensure_ascii=False)


def number_runs(messages: Sequence[Message], starts: Sequence[int]) -> int:
    """Number the runs of a conversation: each message index in ``starts`` (a user's new task) opens a
    run, which holds the messages up to the next one. A start with no model call before the next start
    (a task the log never answered) opens no run: its messages stay in the run before. Returns the runs.
    """
    calls = [i for i, m in enumerate(messages) if m.kind == "assistant"]  # ascending: bisect, not scan

    def any_call(lo: int, hi: int) -> bool:
        return bisect.bisect_left(calls, lo) < bisect.bisect_left(calls, hi)

    bounds = sorted({b for b in starts if 0 < b < len(messages)})
    kept: list[int] = []
    for j, b in enumerate(bounds):
        end = bounds[j + 1] if j + 1 < len(bounds) else len(messages)
        if any_call(b, end) and any_call(kept[-1] if kept else 0, b):
            kept.append(b)
    run = 0
    for i, m in enumerate(messages):
        if run < len(kept) and i == kept[run]:
            run += 1
        m.run_index = run
    return run + 1


def build_trace(
    *,
    trace_id: str,
    source_format: str,
    file: str,
    messages: Sequence[Message],
    usage: Mapping[int, Usage],
    model: str | None,
    agent: str | None,
    recorded_policy: dict,
    outcome: dict,
    context_window: int | None = None,
) -> Trace:
    """The canonical trace of a conversation. Every assistant message is one call; its recorded view is
    the messages before it (append-only). ``usage`` maps an assistant message's index to its call's
    usage; a call without usage is kept with unknown input (a warning says how many)."""
    if not messages:
        raise TraceError(file, "no messages to import", record=trace_id)
    for m in messages:
        m.joined()
    answers = _answered_ids(messages, file, trace_id)
    for i, m in enumerate(messages):
        unix_time(m.timestamp, file, f"{trace_id} message {i}", "timestamp")
    for i, u in usage.items():
        u.check(file, f"{trace_id} message {i}")
    assistant = [i for i, m in enumerate(messages) if m.kind == "assistant"]
    missing = [i for i in assistant if i not in usage or usage[i].input_tokens is None]
    if assistant and missing and len(missing) < len(assistant):
        warn(file, f"{trace_id}: {len(missing)} of {len(assistant)} calls have no recorded usage")
    nbytes = [len((m.content or "").encode()) for m in messages]
    sizes, prov, bpt = _sizes(messages, nbytes, usage, assistant, model)
    facts = None
    if not any(m.provides or m.needs for m in messages):  # the format has no rules of its own
        from sim.information.tool_facts import tool_fact_table

        facts = tool_fact_table(messages, answers)
    # a need counts only if the request the recorded agent sent held its fact
    # (sim.information.recorded_request)
    needs = present_needs(
        [m.provides for m in messages] if facts is None else facts.provides,
        [m.needs for m in messages] if facts is None else facts.needs,
        [m.hidden_from for m in messages],
    )
    events = tuple(
        Event(
            index=i,
            kind=m.kind,
            content=m.content,
            bytes=nbytes[i],
            chars=len(m.content or ""),
            lines=len((m.content or "").splitlines()),
            tokens=sizes[i],
            tokens_provenance=prov[i],
            tool_call_ids=tuple(m.tool_call_ids),
            tool_call_id=tcid,
            bounded=m.bounded,
            timestamp=m.timestamp,
            provides=tuple(m.provides) if facts is None else tuple(facts.provides[i]),
            needs=tuple(needs[i]),
            fact_spans=tuple(m.fact_spans) if facts is None else tuple(facts.spans[i]),
            fact_kinds=tuple(m.fact_kinds) if facts is None else tuple(facts.kinds[i]),
            supersedes=tuple(m.supersedes) if facts is None else tuple(facts.supersedes[i]),
            source_type=m.source_type,
            url=m.url,
            run_index=m.run_index,
        )
        for i, (m, tcid) in enumerate(zip(messages, answers, strict=True))
    )
    return checked(
        Trace(
            trace_id=trace_id,
            source_format=source_format,
            source_file=file,
            agent=agent,
            model=model,
            context_window=context_window,
            bytes_per_token=bpt,
            recorded_policy=recorded_policy,
            outcome=outcome,
            events=events,
            calls=_calls(messages, usage, assistant, sizes),
        ),
        file,
    )


def _answered_ids(messages: Sequence[Message], file: str, trace_id: str) -> list[str | None]:
    """Each message's ``tool_call_id`` as kept: a tool result answering no earlier tool call is kept
    unpaired (None; a warning says how many). An unknown message kind is an error."""
    issued: set[str] = set()
    orphans = 0
    answers = []
    for i, m in enumerate(messages):
        if m.kind not in EVENT_KINDS:
            raise TraceError(file, f"unknown message kind {m.kind!r}", record=f"{trace_id} message {i}")
        tcid = m.tool_call_id
        if m.kind == "tool_result" and tcid is not None and tcid not in issued:
            orphans += 1
            tcid = None
        if m.kind == "assistant":
            issued.update(m.tool_call_ids)
        answers.append(tcid)
    if orphans:
        warn(file, f"{trace_id}: {orphans} tool results answer no earlier tool call; kept unpaired")
    return answers


def _sizes(
    messages: Sequence[Message],
    nbytes: list[int],
    usage: Mapping[int, Usage],
    assistant: list[int],
    model: str | None,
) -> tuple[list[int], list[str], float | None]:
    """Each message's tokens and their provenance, and the bytes per token used: derived from the
    recorded inputs (``derive_sizes``), else estimated (by character classes where the model has them)."""
    recorded = [usage[i].input_tokens if i in usage else None for i in assistant]
    # sizes are derived over the messages sent; one never sent weighs 0 tokens and takes no share
    sent = [i for i, m in enumerate(messages) if m.sent or m.kind == "assistant"]
    pos = {i: p for p, i in enumerate(sent)}
    part = derive_sizes(
        [nbytes[i] for i in sent], [pos[i] for i in assistant], recorded, calibrated_bytes_per_token(model)
    )
    sizes, prov, bpt = [0] * len(messages), ["derived"] * len(messages), part[3]
    for p, i in enumerate(sent):
        sizes[i], prov[i] = part[0][p], part[1][p]
    coef = text_coefficients(model)
    for i, p in enumerate(prov):
        if p == "estimate":
            c = messages[i].content
            sizes[i] = estimate_text_tokens(c, coef) if (coef and c) else estimate_tokens(nbytes[i], bpt)
    return sizes, prov, bpt


def _calls(
    messages: Sequence[Message], usage: Mapping[int, Usage], assistant: list[int], sizes: list[int]
) -> tuple[Call, ...]:
    """One call per assistant message, its view the messages before it; its residual: the recorded
    input less the tokens of that view."""
    prefix = [0]
    for s in sizes:
        prefix.append(prefix[-1] + s)
    calls = []
    for k, i in enumerate(assistant):
        u = usage.get(i) or Usage(None, None)
        calls.append(
            Call(
                index=k,
                event_index=i,
                view_end=i,
                input_tokens=u.input_tokens,
                output_tokens=u.output_tokens,
                cache_read_tokens=u.cache_read_tokens,
                cache_write_tokens=u.cache_write_tokens,
                reasoning_tokens=u.reasoning_tokens,
                residual_tokens=0 if u.input_tokens is None else u.input_tokens - prefix[i],
                usage_provenance="provider" if u.input_tokens is not None else "none",
                timestamp=u.timestamp if u.timestamp is not None else messages[i].timestamp,
                recorded_cost_usd=u.cost_usd,
                run_index=messages[i].run_index,
            )
        )
    return tuple(calls)


def checked(t: Trace, file: str) -> Trace:
    """``t``, once its numbers are in the canonical ranges, its sums fit
    (``sim.trace.schema.number_problems``) and its runs are numbered as the schema says
    (``sim.trace.rules.run_problems``); else the first problem, naming file, trace and field."""
    from sim.trace.schema import number_problems

    found = number_problems(t)
    # runs numbered in order, each with a call; a trace without calls too (validate and run refuse it)
    if t.runs > 1 or not t.calls or any(e.run_index for e in t.events):
        from sim.trace.rules import run_problems

        found += run_problems(
            {
                "schema_version": 2,
                "events": [{"run_index": e.run_index} for e in t.events],
                "calls": [{"event_index": c.event_index, "run_index": c.run_index} for c in t.calls],
            }
        )
    for key in ("recorded_policy", "outcome"):  # written as JSON text: JSON has no NaN or infinity
        try:
            json.dumps(getattr(t, key), allow_nan=False)
        except (ValueError, TypeError) as exc:
            found.append((key, f"not JSON-writable ({exc})"))
    if found:
        fld, msg = found[0]
        more = f" (+{len(found) - 1} more problems)" if len(found) > 1 else ""
        raise TraceError(file, msg + more, record=t.trace_id, field=fld)
    return t
