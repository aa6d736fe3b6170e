"""Bounded cost and one clear error on hostile or damaged input (issue 18, items 2, 4 and 7).

Archives: members are read through a stream that counts the bytes it actually produces, whatever their
headers declare; odd or repeated member names are refused before anything is read. Every case that
could crash or exhaust memory is reproduced here first (each gave a traceback or a MemoryError before).
"""

from __future__ import annotations

import io
import random
import tracemalloc
import zipfile
from pathlib import Path

import pytest
from archives import (
    BZIP2,
    DEFLATED,
    LZMA,
    STORED,
    bzip2_zeros,
    inspect_eval_members,
    lzma_zeros,
    member,
    zip_bytes,
)

from sim.cli import main
from sim.errors import TraceError
from sim.importers import common, load_path
from sim.importers.common import Archive


def cli(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def refused(capsys, tmp_path: Path, bad: Path, *needles: str) -> str:
    """``ctxsim import`` exits 2 with one line naming the file and each needle, and writes nothing."""
    out = tmp_path / "out.jsonl"
    code, _, err = cli(capsys, "import", bad, "-o", out)
    lines = [ln for ln in err.splitlines() if ln.startswith("ctxsim: error:")]
    assert code == 2 and len(lines) == 1, err
    assert bad.name in lines[0] and all(n in lines[0] for n in needles), lines[0]
    assert "Traceback" not in err and not out.exists()
    return lines[0]


def write(tmp_path: Path, name: str, members: list[dict]) -> Path:
    p = tmp_path / name
    p.write_bytes(zip_bytes(members))
    return p


# ----------------------------------------------------------------------------------------------- archives
def test_a_minimal_archive_imports(tmp_path):
    t = list(load_path(write(tmp_path, "ok.eval", list(inspect_eval_members()))))
    assert [(x.trace_id, [c.input_tokens for c in x.calls]) for x in t] == [("demo/s/1", [50])]


@pytest.mark.parametrize("method", [STORED, DEFLATED, BZIP2, LZMA])
@pytest.mark.parametrize("layout", ["plain", "data-descriptor", "zip64", "prefixed"])
def test_members_read_as_zipfile_reads_them(tmp_path, method, layout):
    """The bounded reader gives the bytes zipfile gives, for every method and the layouts writers use."""
    rnd = random.Random(method)
    data = {
        f"m{i}.json": bytes(rnd.choice(b"ab {}") for _ in range(rnd.randint(0, 200_000))) for i in range(3)
    }
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", {STORED: 0, DEFLATED: 8, BZIP2: 12, LZMA: 14}[method]) as zf:
        for n, d in data.items():
            if layout == "plain" or layout == "prefixed":
                zf.writestr(n, d)
            else:
                with zf.open(n, "w", force_zip64=layout == "zip64") as w:
                    w.write(d)
    raw = buf.getvalue()
    if layout == "data-descriptor":  # as written to a pipe: sizes after the data (flag bit 3)
        raw = _unseekable_zip(data, method)
    p = tmp_path / "a.zip"
    p.write_bytes((b"#!/bin/sh\n" if layout == "prefixed" else b"") + raw)
    with Archive(p) as a:
        assert {n: bytes(a.read(n)) for n in a.names} == data


def _unseekable_zip(data: dict[str, bytes], method: int) -> bytes:
    class Pipe(io.RawIOBase):
        def __init__(self):
            self.buf = bytearray()

        def writable(self):
            return True

        def write(self, b):
            self.buf += b
            return len(b)

    pipe = Pipe()
    with zipfile.ZipFile(pipe, "w", {STORED: 0, DEFLATED: 8, BZIP2: 12, LZMA: 14}[method]) as zf:
        for n, d in data.items():
            with zf.open(n, "w") as w:
                w.write(d)
    assert all(i.flag_bits & 0x08 for i in zipfile.ZipFile(io.BytesIO(pipe.buf)).infolist())
    return bytes(pipe.buf)


def test_a_bzip2_member_that_lies_about_its_size_stops_early(capsys, tmp_path):
    """2.5 GB of zeros in a 2 KB member declaring 100 bytes: before, zipfile's single decompress call
    produced all of it (4.9 GB peak; MemoryError under ulimit -v 1500000); now the stream stops at the
    ratio bound after a few MiB."""
    header, _ = inspect_eval_members()
    bomb = member("samples/s_epoch_1.json", b"", BZIP2, payload=bzip2_zeros(55), size=100, crc=0)
    bad = write(tmp_path, "bomb.eval", [header, bomb])
    assert bad.stat().st_size < 4096
    tracemalloc.start()
    with pytest.raises(TraceError, match="decompression bomb") as err:
        list(load_path(bad))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 32 << 20  # the buffers this process allocated while reading it
    assert err.value.record == "samples/s_epoch_1.json"
    refused(capsys, tmp_path, bad, "samples/s_epoch_1.json", "1,000:1", "declares 100 bytes")


def test_an_lzma_member_that_lies_about_its_size_stops_early(capsys, tmp_path):
    header, _ = inspect_eval_members()
    bomb = member("samples/s_epoch_1.json", b"", LZMA, payload=lzma_zeros(48 << 20), size=100, crc=0)
    bad = write(tmp_path, "bomb.eval", [header, bomb])
    refused(capsys, tmp_path, bad, "samples/s_epoch_1.json", "decompression bomb")


def test_a_member_larger_than_the_document_bound_is_refused(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(common, "MAX_DOCUMENT_BYTES", 10_000)
    header, sample = inspect_eval_members()
    text = (
        b'{"id": "s", "pad": "' + bytes(random.Random(0).choice(b"abcdefgh") for _ in range(20_000)) + b'"}'
    )
    big = member("samples/s_epoch_1.json", text, DEFLATED)
    line = refused(capsys, tmp_path, write(tmp_path, "big.eval", [header, big]), "samples/s_epoch_1.json")
    assert "more than 10,000 bytes" in line


def test_members_that_lie_are_counted_against_the_archive_total(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(common, "MAX_ARCHIVE_BYTES", 3_000)
    header, _ = inspect_eval_members()
    pad = bytes(random.Random(1).choice(b"abcdefgh") for _ in range(4_000))
    liar = member("samples/s_epoch_1.json", pad, DEFLATED, size=10)  # declared total: under the bound
    line = refused(capsys, tmp_path, write(tmp_path, "liar.eval", [header, liar]), "samples/s_epoch_1.json")
    assert "past 3,000 bytes" in line


@pytest.mark.parametrize(
    "lie, needle",
    [({"size": 5}, "bytes where its header declares 5"), ({"crc": 1}, "CRC mismatch")],
)
def test_a_member_whose_size_or_crc_does_not_match_is_damaged(capsys, tmp_path, lie, needle):
    header, sample = inspect_eval_members()
    data = b'{"id": "s", "epoch": 1, "messages": []}'
    bad = write(tmp_path, "bad.eval", [header, member(sample["name"], data, DEFLATED, **lie)])
    refused(capsys, tmp_path, bad, "samples/s_epoch_1.json", "damaged", needle)


def test_an_encrypted_or_unsupported_member_is_refused(capsys, tmp_path):
    header, sample = inspect_eval_members()
    odd = dict(sample, method=9)  # deflate64: not in the standard library
    refused(capsys, tmp_path, write(tmp_path, "odd.eval", [header, odd]), "method 9 is not supported")
    raw = bytearray(zip_bytes([header, sample]))
    for sig in (b"PK\x03\x04", b"PK\x01\x02"):  # set the encryption flag of every header
        at = -1
        while (at := raw.find(sig, at + 1)) >= 0:
            raw[at + (6 if sig == b"PK\x03\x04" else 8)] |= 1
    (tmp_path / "locked.eval").write_bytes(bytes(raw))
    refused(capsys, tmp_path, tmp_path / "locked.eval", "encrypted")


@pytest.mark.parametrize(
    "name, needle",
    [
        ("..\\x.json", "holds a backslash"),
        ("samples\\s.json", "holds a backslash"),
        ("C:x.json", "drive name"),
        ("C:/x.json", "drive name"),
        ("/etc/x.json", "absolute path"),
        ("samples/../../x.json", "'..' path"),
    ],
)
def test_member_names_that_could_leave_the_archive_are_refused(capsys, tmp_path, name, needle):
    header, sample = inspect_eval_members()
    bad = write(tmp_path, "names.eval", [header, sample, member(name, b"{}")])
    refused(capsys, tmp_path, bad, repr(name), needle)


def test_a_member_named_twice_is_refused(capsys, tmp_path):
    """Before, the sample was read twice: two rows for one sample."""
    header, sample = inspect_eval_members()
    bad = write(tmp_path, "dup.eval", [header, sample, sample])
    refused(capsys, tmp_path, bad, "'samples/s_epoch_1.json' twice")


def test_an_archive_listing_too_many_members_is_refused_before_indexing(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(common, "MAX_ARCHIVE_MEMBERS", 3)
    header, sample = inspect_eval_members()
    extra = [member(f"samples/x{i}.json", b"{}") for i in range(3)]
    refused(capsys, tmp_path, write(tmp_path, "many.eval", [header, sample, *extra]), "5 members")
