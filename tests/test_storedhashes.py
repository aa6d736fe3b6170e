"""The trace hashes recorded beside a canonical file (``sim.trace.storedhashes``): used while the file keeps
its bytes, ignored (and computed as without a record) when the file or the record changed."""

import json
import shutil
import warnings
from pathlib import Path

import pytest
from test_tracecolumns import assert_same, fast, read, real_traces, reference

import sim.trace.columns as tracecolumns
import sim.trace.read_jsonl as read_jsonl
import sim.trace.read_parquet as read_parquet
from sim.importers import expand_paths
from sim.trace.codec import trace_hash
from sim.trace.io import load_dataset_traces, write_traces
from sim.trace.storedhashes import SUFFIX, record_path, record_text

SUITE = Path(__file__).resolve().parent.parent / "scenarios" / "suite" / "swe_like.jsonl"


@pytest.fixture(scope="module")
def suite():
    return reference(SUITE)


@pytest.fixture
def counted(monkeypatch):
    """How many traces had their hash taken over their canonical text by the column reader."""
    calls = [0]
    real = tracecolumns.text_hash

    def text_hash(pieces):
        calls[0] += 1
        return real(pieces)

    monkeypatch.setattr(tracecolumns, "text_hash", text_hash)
    return calls


def _written(suite, tmp_path, suffix: str) -> Path:
    path = tmp_path / f"corpus{suffix}"
    assert write_traces(suite, path) == len(suite)
    assert record_path(path).is_file()
    return path


def _record(path: Path) -> dict:
    return json.loads(record_path(path).read_text())


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_a_valid_record_gives_the_hashes_without_hashing_the_text(suite, tmp_path, counted, suffix):
    path = _written(suite, tmp_path, suffix)
    assert _record(path)["trace_hashes"] == [trace_hash(t) for t in suite]
    counted[0] = 0  # (writing reads the file back)
    got = read(path)
    assert counted[0] == 0 and all(fast(t) for t in got)
    assert [t._cache["trace_hash"] for t in got] == [trace_hash(t) for t in suite]
    assert_same(got, reference(path))


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_small_batches_take_their_own_slice_of_the_record(suite, tmp_path, counted, monkeypatch, suffix):
    monkeypatch.setattr(read_parquet, "PARQUET_BATCH", 7)
    monkeypatch.setattr(read_jsonl, "JSONL_BLOCK", 50_000)
    path = _written(suite, tmp_path, suffix)
    counted[0] = 0  # (writing reads the file back)
    counted[0] = 0  # (writing reads the file back)
    got = read(path)
    assert counted[0] == 0 and len(got) == len(suite)
    assert [t._cache["trace_hash"] for t in got] == [trace_hash(t) for t in suite]


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_no_record_hashes_the_text(suite, tmp_path, counted, suffix):
    path = tmp_path / f"corpus{suffix}"
    write_traces(suite, path, record_hashes=False)
    assert not record_path(path).exists()
    counted[0] = 0  # (writing reads the file back)
    got = read(path)
    assert counted[0] == len(suite)
    assert [t._cache["trace_hash"] for t in got] == [trace_hash(t) for t in suite]


def test_rewriting_a_file_without_a_record_removes_the_old_one(suite, tmp_path):
    path = _written(suite, tmp_path, ".jsonl")
    write_traces(suite[:3], path, record_hashes=False)
    assert not record_path(path).exists()


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_an_edited_file_ignores_its_record(suite, tmp_path, counted, suffix):
    """The file rewritten (here: other traces, the old record put back) or edited in place: its bytes no
    longer match the record, so every hash is computed, and is the edited traces' own."""
    path = _written(suite, tmp_path, suffix)
    old = record_path(path).read_bytes()
    edited = [suite[1], suite[0], *suite[2:]]  # the same traces in another order: other bytes
    write_traces(edited, path)
    record_path(path).write_bytes(old)
    counted[0] = 0  # (writing reads the file back)
    got = read(path)
    assert counted[0] == len(suite)
    assert [t._cache["trace_hash"] for t in got] == [trace_hash(t) for t in edited]
    assert_same(got, reference(path))


def test_a_byte_edited_in_place_ignores_the_record(suite, tmp_path, counted):
    path = _written(suite, tmp_path, ".jsonl")
    data = path.read_bytes()
    tid = suite[0].trace_id.encode()
    assert data.count(tid) == 1
    path.write_bytes(data.replace(tid, tid[:-1] + (b"X" if tid[-1:] != b"X" else b"Y")))  # same size
    counted[0] = 0  # (writing reads the file back)
    got = read(path)
    assert counted[0] == len(suite)
    assert got[0].trace_id != suite[0].trace_id
    assert [t._cache["trace_hash"] for t in got] == [trace_hash(t) for t in reference(path)]


def _tampered(path: Path, edit) -> None:
    rec = _record(path)
    edit(rec)
    record_path(path).write_text(json.dumps(rec))


def _wrong(rec: dict) -> None:
    rec["trace_hashes"][3] = "sha256:" + "0" * 64


def _wrong_and_resealed_digest(rec: dict) -> None:  # a hash and the file's digest changed, seal kept
    rec["trace_hashes"][3] = "sha256:" + "0" * 64
    rec["file_sha256"] = "f" * 64


def _one_fewer(rec: dict) -> None:
    rec["trace_hashes"].pop()


def _swapped(rec: dict) -> None:
    h = rec["trace_hashes"]
    h[0], h[1] = h[1], h[0]


def _bad_shape(rec: dict) -> None:
    rec["trace_hashes"][0] = 5


@pytest.mark.parametrize("edit", [_wrong, _wrong_and_resealed_digest, _one_fewer, _swapped, _bad_shape])
@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_a_tampered_record_never_gives_a_wrong_hash(suite, tmp_path, counted, suffix, edit):
    path = _written(suite, tmp_path, suffix)
    _tampered(path, edit)
    counted[0] = 0  # (writing reads the file back)
    got = read(path)
    assert counted[0] == len(suite)  # the whole record ignored: every hash computed
    assert [t._cache["trace_hash"] for t in got] == [trace_hash(t) for t in suite]


@pytest.mark.parametrize("text", ["", "{", "[]", "null", '{"format": 1}', "\xff\xfe"])
def test_a_record_that_is_not_one_is_ignored(suite, tmp_path, counted, text):
    path = _written(suite, tmp_path, ".parquet")
    record_path(path).write_bytes(text.encode("latin-1"))
    counted[0] = 0  # (writing reads the file back)
    got = read(path)
    assert counted[0] == len(suite)
    assert [t._cache["trace_hash"] for t in got] == [trace_hash(t) for t in suite]


def test_a_record_of_another_file_is_ignored(suite, tmp_path, counted):
    """A well-sealed record for other bytes (another file's, copied over) does not match this file."""
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write_traces(suite[:5], a)
    write_traces(suite[5:10], b)
    shutil.copy(record_path(a), record_path(b))
    counted[0] = 0  # (writing reads the file back)
    got = read(b)
    assert counted[0] == 5
    assert [t._cache["trace_hash"] for t in got] == [trace_hash(t) for t in suite[5:10]]


def test_a_record_sealed_for_the_wrong_hashes_is_what_the_seal_cannot_catch(suite, tmp_path):
    """The documented limit: a record resealed by hand over wrong hashes is a forgery, not staleness.
    Held here so the docs' claim stays true: the seal, the size and the digest are all it checks."""
    path = _written(suite, tmp_path, ".jsonl")
    rec = _record(path)
    wrong = ["sha256:" + "0" * 64] * len(suite)
    record_path(path).write_text(record_text(rec["file_bytes"], rec["file_sha256"], wrong))
    assert {t._cache["trace_hash"] for t in read(path)} == {wrong[0]}


def test_the_record_is_ctxsims_own_file_in_a_folder(suite, tmp_path):
    """A folder of traces lists the record as nothing (no warning about a skipped file), and a dataset
    folder does not read it as data."""
    _written(suite[:4], tmp_path, ".jsonl")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert expand_paths([tmp_path]) == [tmp_path / "corpus.jsonl"]
    assert [t.trace_id for t in load_dataset_traces(tmp_path)] == [t.trace_id for t in suite[:4]]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.jsonl", "corpus.jsonl" + SUFFIX]


def test_a_file_that_does_not_read_back_gets_no_record(suite, tmp_path):
    import dataclasses

    bad = dataclasses.replace(suite[0], events=(), calls=suite[0].calls)  # calls of no event
    path = tmp_path / "bad.jsonl"
    write_traces([bad], path)
    assert path.exists() and not record_path(path).exists()


def test_real_traces_take_the_recorded_hashes(tmp_path, counted):
    traces = real_traces()
    for suffix in (".jsonl", ".parquet"):
        path = tmp_path / f"real{suffix}"
        write_traces(traces, path)
        counted[0] = 0
        got = read(path)
        assert counted[0] == 0
        assert_same(got, reference(path))


def test_a_record_far_larger_than_its_file_is_not_read(suite, tmp_path, counted):
    """Bounded cost: a record is read only up to 16 times its file's size (a real one is a fraction)."""
    path = _written(suite[:3], tmp_path, ".jsonl")
    text = record_path(path).read_text()
    record_path(path).write_text(text[:-2] + " " * (16 * path.stat().st_size + 1024) + "}\n")
    counted[0] = 0
    got = read(path)
    assert counted[0] == 3 and [t._cache["trace_hash"] for t in got] == [trace_hash(t) for t in suite[:3]]
    record_path(path).write_text(text[:-2] + " " * 1000 + "}\n")  # the same record, padded a little: read
    counted[0] = 0
    assert [t._cache["trace_hash"] for t in read(path)] == [trace_hash(t) for t in suite[:3]]
    assert counted[0] == 0


def test_the_digest_taken_in_place_is_the_files_and_leaves_it_where_it_was(tmp_path):
    from sim.trace.storedhashes import file_digest, file_digest_in_place

    path = tmp_path / "x.bin"
    for size in (0, 5, 1 << 20, (1 << 20) + 3):
        path.write_bytes(bytes(range(256)) * (size // 256) + b"z" * (size % 256))
        with open(path, "rb") as f:
            f.read(3)
            here = f.tell()
            got = file_digest_in_place(f)
            assert f.tell() == here
            assert got == file_digest(f) and got[0] == size
