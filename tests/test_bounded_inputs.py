"""Bounded cost and one clear error on hostile or damaged input (issue 18, items 2, 4 and 7).

Archives: members are read through a stream that counts the bytes it actually produces, whatever their
headers declare; odd or repeated member names are refused before anything is read. Every case that
could crash or exhaust memory is reproduced here first (each gave a traceback or a MemoryError before).
"""

from __future__ import annotations

import io
import json
import random
import tracemalloc
import zipfile
from pathlib import Path

import pytest
from hostile import (
    BZIP2,
    DEFLATED,
    LZMA,
    STORED,
    alias_bomb,
    bzip2_zeros,
    inspect_eval_members,
    lzma_zeros,
    member,
    swe_agent_0x,
    zip_bytes,
)

from sim.cli import main
from sim.importers import common, load_path
from sim.importers.common import Archive
from sim.util.errors import TraceError


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


# ------------------------------------------------------------------------------------------ JSON parsing
DEEP = "[" * 100_000 + "]" * 100_000  # RecursionError in json.loads before


def _mini(messages) -> str:
    return json.dumps({"trajectory_format": "mini-swe-agent-1", "messages": messages})


@pytest.mark.parametrize(
    "name, text, needle",
    [
        ("unknown.json", DEEP, "nested deeper than 200 levels"),
        ("chat.json", '[{"role": "user", "content": ' + DEEP + "}]", "nested deeper than 200 levels"),
        ("run.traj.json", _mini([]).replace("[]", DEEP), "nested deeper than 200 levels"),
        ("runs.json", '[{"task_id": 1, "traj": ' + DEEP + "}]", "nested deeper than 200 levels"),
        ("t.jsonl", '{"schema_version": 1, "x": ' + DEEP + "}\n", "line 1: invalid JSON: nested deeper"),
        ("chat.json", '[{"role": "user", "content": "hi \\ud800"}]', "lone UTF-16 surrogate"),
        ("run.traj.json", _mini([{"role": "user", "content": "S"}]).replace('"S"', '"\\udc00"'), "surrogate"),
        ("t.jsonl", '{"schema_version": 1, "trace_id": "\\ud800"}\n', "lone UTF-16 surrogate"),
        ("unknown.json", '{"a": NaN}', "NaN is not a number"),
    ],
)
def test_json_that_would_crash_is_one_line_and_exit_2(capsys, tmp_path, name, text, needle):
    bad = tmp_path / name
    bad.write_text(text, encoding="utf-8")
    refused(capsys, tmp_path, bad, needle)


def test_claude_code_skips_a_line_too_deep_or_with_a_lone_surrogate(capsys, tmp_path):
    """Claude Code logs are messy by nature: such lines are skipped with a warning, as other bad lines."""
    good = {"type": "user", "sessionId": "s", "uuid": "u1", "message": {"role": "user", "content": "hi"}}
    reply = {"type": "assistant", "sessionId": "s", "uuid": "u2"}
    reply["message"] = {"id": "m", "role": "assistant", "content": [{"type": "text", "text": "ok"}]}
    lines = [json.dumps(good), '{"type": "user", "x": ' + DEEP + "}", json.dumps(reply), '{"a": "\\ud800"}']
    path = tmp_path / "session.jsonl"
    path.write_text("\n".join(lines) + "\n")
    code, _, err = cli(capsys, "import", path, "-o", tmp_path / "out.jsonl")
    assert code == 0 and "2 not valid JSON (first at line 2)" in err


def test_a_list_where_a_content_block_type_belongs_does_not_crash_detection(capsys, tmp_path):
    """``type`` is looked up in a set while sniffing: a list there was a TypeError traceback."""
    body = {"system": "s", "messages": [{"role": "user", "content": [{"type": ["text"], "text": "hi"}]}]}
    body["messages"].append({"role": "assistant", "content": [{"type": {"x": 1}, "text": "ok"}]})
    path = tmp_path / "req.json"
    path.write_text(json.dumps(body))
    code, _, err = cli(capsys, "import", path, "-o", tmp_path / "out.jsonl")
    assert code == 0, err
    t = next(load_path(path))
    assert t.source_format == "anthropic-messages" and [e.kind for e in t.events] == [
        "system",
        "user",
        "assistant",
    ]


@pytest.mark.parametrize(
    "name, record",
    [
        ("chat.json", [{"role": ["user"], "content": "hi"}, {"role": "assistant", "content": "x"}]),
        ("events.json", [{"id": 1, "timestamp": "t", "source": "agent", "action": ["run"], "args": {}}]),
    ],
)
def test_a_list_where_a_name_belongs_names_the_field(capsys, tmp_path, name, record):
    path = tmp_path / name
    path.write_text(json.dumps(record))
    if name == "chat.json":  # not sniffed as chat (no role): named through the format's own loader
        from sim.importers import get_importer

        with pytest.raises(TraceError, match="unknown role"):
            list(get_importer("openai-chat").load(path))
        return
    line = refused(capsys, tmp_path, path, "history[0]", "field action", "expected a name, got list")
    assert "unexpected" not in line


def test_a_document_past_the_size_bound_is_refused_before_parsing(capsys, tmp_path, monkeypatch):
    from sim.util import jsonl

    monkeypatch.setattr(common, "MAX_DOCUMENT_BYTES", 1_000)
    monkeypatch.setattr(jsonl, "MAX_DOCUMENT_BYTES", 1_000)
    path = tmp_path / "run.traj.json"
    path.write_text(_mini([{"role": "user", "content": "x" * 2_000}]))
    refused(capsys, tmp_path, path, "larger than the 1,000")


def test_a_document_too_dense_to_parse_within_the_memory_bound_is_refused(capsys, tmp_path, monkeypatch):
    """A list of tiny objects takes ~40 times its size as Python objects (2.5 GB for 63 MB)."""
    from sim.util import jsonl

    text = _mini([{"role": "user", "content": "go"}] + [{"a": []}] * 20_000)
    assert jsonl.parse_cost(text) > 10 * len(text)  # the estimate sees the density
    monkeypatch.setattr(jsonl, "MAX_PARSE_BYTES", 4 * len(text))
    path = tmp_path / "run.traj.json"
    path.write_text(text)
    refused(capsys, tmp_path, path, "parsing it would take about")


def test_parse_cost_bounds_what_parsing_takes():
    """The estimate is never below what CPython holds for the parsed values (tracemalloc's peak)."""
    samples = [
        json.dumps([{"a": []}] * 50_000),
        json.dumps(["x"] * 100_000),
        json.dumps([1.5] * 100_000),
        json.dumps({"k" + str(i): {"role": "user", "content": "t" * 50} for i in range(5_000)}),
    ]
    from sim.util.jsonl import parse_cost

    for text in samples:
        tracemalloc.start()
        json.loads(text)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak <= parse_cost(text), (text[:40], peak, parse_cost(text))


def test_an_unrecognised_large_json_is_not_parsed_to_name_it(capsys, tmp_path, monkeypatch):
    """Before, a 500 MB .json in no known format was parsed whole (11.7 GB) to say "unknown format"."""
    import sim.importers as importers

    monkeypatch.setattr(importers, "_JSON_CHECK_BYTES", 1_000)
    monkeypatch.setattr(importers, "read_json", lambda path: pytest.fail("parsed whole"))
    path = tmp_path / "data.json"
    path.write_text(json.dumps({"rows": [{"a": i} for i in range(1_000)]}))
    refused(capsys, tmp_path, path, "unknown format")


def test_a_chat_file_larger_than_the_sniff_prefix_is_classified_from_it(tmp_path, monkeypatch):
    from sim.importers import chat_messages, detect

    monkeypatch.setattr(chat_messages, "_CLASSIFY_BYTES", 4_096)
    calls = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "x" * 100}] * 600
    tool = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "ok"}]}
    for msgs, fmt in (([*calls], "openai-chat"), ([calls[0], tool, *calls], "anthropic-messages")):
        path = tmp_path / f"{fmt}.json"
        path.write_text(json.dumps({"model": "m", "messages": msgs}))
        assert path.stat().st_size > 10 * 4_096
        chat_messages._shape.cache_clear()
        assert detect(path).name == fmt
    opened = []
    real_read = chat_messages._read
    monkeypatch.setattr(chat_messages, "_read", lambda p, n: opened.append(n) or real_read(p, n))
    chat_messages._shape.cache_clear()
    detect(path)
    assert max(opened) < path.stat().st_size  # the 64 KiB head and the 4 KiB prefix: never the whole file


def test_a_json_line_longer_than_the_bound_is_named_and_skipped(tmp_path, monkeypatch):
    from sim.util import jsonl

    monkeypatch.setattr(jsonl, "MAX_DOCUMENT_BYTES", 100)
    path = tmp_path / "t.jsonl"
    path.write_text('{"a": 1}\n{"b": "' + "x" * 500 + '"}\n{"c": 3}\n')
    got = list(jsonl.json_lines(path))
    assert got[0] == (1, {"a": 1}, None) and got[2] == (3, {"c": 3}, None)
    assert got[1][:2] == (2, None) and "longer than 100 bytes" in got[1][2]


# --------------------------------------------------------------------------------- canonical and Parquet
@pytest.fixture
def canonical(tmp_path) -> Path:
    from builders import swe_trace

    from sim.trace.io import write_traces

    path = tmp_path / "suite.jsonl"
    write_traces([swe_trace([("a\nb\nc", 100)] * 3, trace_id=f"t{i}") for i in range(3)], path)
    return path


def test_bad_utf8_in_a_canonical_file_is_named_by_validate(capsys, canonical):
    raw = canonical.read_bytes().split(b"\n")
    raw[1] = raw[1][:40] + b"\xff\xfe" + raw[1][42:]
    canonical.write_bytes(b"\n".join(raw))
    code, out, err = cli(capsys, "validate", canonical)
    assert code == 2 and "Traceback" not in err
    assert "suite.jsonl: record line 2: not UTF-8 text (byte 41 of the line)" in out
    assert "line 1" not in out and "line 3" not in out  # the other lines are fine
    code, _, err = cli(capsys, "run", canonical)
    assert code == 2 and "record line 2: not UTF-8 text" in err


def test_lone_surrogates_given_as_python_strings_are_refused(canonical):
    """Parquet and ``datasets`` hand over Python strings: the schema rules name a lone surrogate."""
    from sim.trace.codec import trace_from_dict
    from sim.trace.rules import trace_problems

    d = json.loads(canonical.read_text().splitlines()[0])
    d["events"][1]["content"] = "x\ud800"
    d["events"][2]["tool_call_id"] = "\udc00"
    d["trace_id"] = "t\ud800"
    d["outcome"] = '{"a": "\ud800"}'
    fields = [f for f, _ in trace_problems(d)]
    assert {"events[1].content", "events[2].tool_call_id", "trace_id", "outcome"} <= set(fields)
    with pytest.raises(TraceError, match="lone UTF-16 surrogate"):
        trace_from_dict(d, "x.parquet", "row 0")


def _parquet(tmp_path: Path, canonical: Path) -> Path:
    from sim.importers import load_paths
    from sim.trace.io import write_traces

    path = tmp_path / "suite.parquet"
    write_traces(load_paths([canonical]), path)
    return path


@pytest.mark.parametrize("damage", ["pages", "footer", "strings"])
@pytest.mark.parametrize("command", ["run", "validate", "import"])
def test_a_damaged_parquet_file_is_one_line_and_exit_2(capsys, tmp_path, canonical, damage, command):
    path = _parquet(tmp_path, canonical)
    raw = path.read_bytes()
    if damage == "pages":  # zeros over the middle: corrupt compressed pages
        n = len(raw)
        raw = raw[: n // 3] + bytes(n // 3) + raw[2 * n // 3 :]
    elif damage == "footer":
        raw = raw[: len(raw) // 2] + raw[-8:]
    else:  # valid pages whose strings are not UTF-8: the first "a" of the content made 0xff
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pq.read_table(path)
        ids = pa.array([b"t\xff", b"t1", b"t2"], type=pa.binary()).view(pa.string())
        pq.write_table(table.set_column(table.schema.get_field_index("trace_id"), "trace_id", ids), path)
        raw = path.read_bytes()
    path.write_bytes(raw)
    argv = [command, path] + (["-o", tmp_path / "out.jsonl"] if command == "import" else [])
    code, out, err = cli(capsys, *argv)
    assert code == 2 and "Traceback" not in err and "internal error" not in err, err
    said = out + err
    assert "suite.parquet" in said and "not a readable Parquet file" in said
    assert not (tmp_path / "out.jsonl").exists()


@pytest.mark.parametrize("fmt", ["parquet", "jsonl-truncated", "jsonl-bad-utf8"])
@pytest.mark.parametrize("streaming", [False, True])
def test_a_damaged_file_through_dataset_is_one_line_and_exit_2(capsys, tmp_path, canonical, fmt, streaming):
    if fmt == "parquet":
        path = _parquet(tmp_path, canonical)
        raw = path.read_bytes()
        path.write_bytes(raw[: len(raw) // 3] + bytes(len(raw) // 3) + raw[2 * len(raw) // 3 :])
    else:
        path = canonical
        raw = path.read_bytes()
        path.write_bytes(
            raw[: len(raw) // 2] if fmt == "jsonl-truncated" else raw.replace(b"a\\nb", b"\xff\xfe\xfd", 1)
        )
    code, _, err = cli(capsys, "run", "--dataset", path, *(["--streaming"] if streaming else []))
    # (not checked for "Traceback": datasets' logger may hold a stream an earlier test's capture closed,
    # and logging prints its own traceback for that; exit 2 is what says ctxsim did not crash)
    assert code == 2 and "internal error" not in err, err
    assert f"ctxsim: error: {path.name}: " in err and "as a dataset" in err


# ------------------------------------------------------------------------------------ YAML beside a .traj
def test_an_alias_bomb_beside_a_trajectory_is_not_expanded(capsys, tmp_path):
    traj = swe_agent_0x(tmp_path / "run")
    (traj.parent / "args.yaml").write_text(alias_bomb())
    with pytest.warns(common.ImportNotice, match="args.yaml.*expands to more than 200,000 nodes"):
        t = next(load_path(traj))
    assert t.model is None and t.recorded_policy == {"name": "raw"}


def test_yaml_values_json_cannot_hold_are_kept_as_text(tmp_path):
    traj = swe_agent_0x(tmp_path / "run")
    (traj.parent / "args.yaml").write_text(
        "agent:\n  model: {model_name: gpt-4}\n  config:\n    history_processors:\n"
        "      - {type: Custom, since: 2024-01-02, ratio: .nan, 3: three, blob: !!binary aGk=}\n"
    )
    t = next(load_path(traj))
    assert t.model == "gpt-4"
    assert t.recorded_policy == {
        "name": "raw",
        "history_processors": [
            {"type": "Custom", "since": "2024-01-02", "ratio": "nan", "3": "three", "blob": "b'hi'"}
        ],
    }
    from sim.trace.codec import trace_to_dict

    json.dumps(trace_to_dict(t), allow_nan=False)  # writable as canonical JSON


@pytest.mark.parametrize(
    "content",
    [
        b"\xff\xfe: [unclosed",
        b"agent: !!python/object:os.system {}\n",
        b"agent: x\x1f\n",
        b'agent: {model: {model_name: "\\ud800"}}\n',
    ],
)
def test_an_unreadable_args_yaml_warns_and_the_run_imports_without_it(tmp_path, content):
    traj = swe_agent_0x(tmp_path / "run")
    (traj.parent / "args.yaml").write_bytes(content)
    with pytest.warns(common.ImportNotice, match="args.yaml beside it is not used"):
        t = next(load_path(traj))
    assert t.model is None and len(t.calls) == 1


def test_an_import_that_yields_no_trace_exits_2_and_writes_nothing(capsys, tmp_path):
    """Before, it wrote an empty file that ``validate`` then called a file of unknown format."""
    user = {"type": "user", "sessionId": "s", "uuid": "u1", "message": {"role": "user", "content": "hi"}}
    path = tmp_path / "session.jsonl"
    path.write_text(json.dumps(user) + "\n")
    line = refused(capsys, tmp_path, path, "no traces to import")
    assert line == f"ctxsim: error: {path}: no traces to import (see the warnings above)"
