"""Decoded sizes are capped before decoding (issue 41, item 2), and the importer-side inconsistencies.

Each case is a small input built here whose decoded form would be huge: a Parquet file whose dictionary
repeats one long string, an LZMA archive member declaring a 4 GiB dictionary, an Inspect sample whose
messages point at one long attachment, an identifier of megabytes. Each is refused with exit 2 naming
the file, the member or column, the cap and ``CTXSIM_MAX_INPUT_BYTES``, which raises the cap; the
identifiers are accepted and cut in what ctxsim prints. Then an Inspect JSON whose messages share one
id (import refuses it as validate does) and an ``.eval`` holding one path under three spellings.
"""

from __future__ import annotations

import json
import lzma
import re
import resource
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from hostile import LZMA, inspect_eval_members, member, zip_bytes

from sim.cli import main
from sim.importers import load_path
from sim.trace.codec import arrow_schema
from sim.util.errors import ConfigError, TraceError, clip
from sim.util.limits import INPUT_BYTES_KNOB, MAX_LZMA_DICT_BYTES, max_input_bytes

MiB = 1 << 20
KNOB = INPUT_BYTES_KNOB


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


# ------------------------------------------------------------------------------------------------ parquet
def parquet_bomb(path: Path, string_bytes: int, events: int) -> Path:
    """A canonical Parquet file of one trace (``builders.swe_trace``: system, task, then assistant and
    tool result pairs) whose ``events`` all hold one string of ``string_bytes``: dictionary-encoded, the
    string is stored once and the pages hold indices, so the file is a few KB and decodes to
    ``string_bytes x events``. Written from a dictionary array (never expanded here) without Arrow's
    schema, so readers see plain strings."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from builders import swe_trace

    from sim.trace.codec import trace_to_dict

    t = swe_trace([("", 1)] * ((events - 2) // 2))
    table = pa.Table.from_pylist([trace_to_dict(t)], schema=arrow_schema())
    lists = table.column("events").chunk(0)
    st = lists.values
    n = len(st)
    names = [f.name for f in st.type]
    fields = []
    for k, name in enumerate(names):
        if name == "content":
            fields.append(
                pa.DictionaryArray.from_arrays(pa.array([0] * n, pa.int32()), pa.array(["x" * string_bytes]))
            )
        elif name in ("bytes", "chars"):
            fields.append(pa.array([string_bytes] * n, pa.int64()))
        elif name == "lines":
            fields.append(pa.array([1] * n, pa.int64()))
        else:
            fields.append(st.field(k))
    events_col = pa.ListArray.from_arrays(lists.offsets, pa.StructArray.from_arrays(fields, names=names))
    table = table.set_column(table.schema.get_field_index("events"), "events", events_col)
    pq.write_table(
        table,
        path,
        compression="zstd",
        store_schema=False,
        dictionary_pagesize_limit=1 << 31,
        data_page_size=1 << 30,
    )
    return path


def test_a_parquet_dictionary_bomb_is_refused_before_decoding(capsys, tmp_path):
    """8 MiB x 200 events: 1.6 GB decoded from a file of a few KB, past the 256 MiB cap. Refused from the
    dictionary and its indices: the process never holds the strings (its peak stays far below them)."""
    bomb = parquet_bomb(tmp_path / "bomb.parquet", 8 * MiB, 200)
    assert bomb.stat().st_size < 30_000
    line = refused(capsys, tmp_path, bomb, "row group 0", "events.list.element.content", "268,435,456", KNOB)
    assert "1,677,721,600 in this column" in line
    code, out, err = cli(capsys, "validate", bomb)
    assert code == 2 and "events.list.element.content" in out + err and KNOB in out + err


def test_a_parquet_dictionary_bomb_exits_2_in_a_small_process(tmp_path):
    """The same bomb through the command line in a process held to 1.5 GB of address space (as the
    fuzzer runs each case): exit 2 and the message, not a MemoryError or 'not a readable Parquet file'."""
    bomb = parquet_bomb(tmp_path / "bomb.parquet", 8 * MiB, 400)

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1_500_000_000, 1_500_000_000))

    env = {"ARROW_DEFAULT_MEMORY_POOL": "system", "PATH": "/usr/bin:/bin"}
    run = subprocess.run(
        [sys.executable, "-m", "sim.cli", "validate", str(bomb)],
        capture_output=True,
        text=True,
        preexec_fn=limit,
        env=env,
        timeout=120,
    )
    said = run.stdout + run.stderr
    assert run.returncode == 2, said
    assert "events.list.element.content" in said and KNOB in said and "Traceback" not in said


def test_a_row_group_just_under_a_gibibyte_is_refused_in_a_small_process(tmp_path):
    """The fuzzer's case: 512 KiB x 2,000 events decode to 1.0 GB, under the old 1 GiB cap, and running
    it in 1.5 GB of address space ran out of memory turning the rows into values (exit 3). The 256 MiB
    cap refuses it first."""
    bomb = parquet_bomb(tmp_path / "bomb.parquet", 512 * 1024, 2000)

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1_500_000_000, 1_500_000_000))

    run = subprocess.run(
        [sys.executable, "-m", "sim.cli", "run", str(bomb), "--policy", "raw", "--format", "json"],
        capture_output=True,
        text=True,
        preexec_fn=limit,
        env={"ARROW_DEFAULT_MEMORY_POOL": "system", "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    said = run.stdout + run.stderr
    assert run.returncode == 2, said
    assert "268,435,456" in said and KNOB in said and "Traceback" not in said


def test_the_cap_is_raised_and_lowered_by_its_setting(capsys, tmp_path, monkeypatch):
    """2 MiB x 8 events decode to 16 MiB: read under the default cap, refused at 8 MiB (first the
    column chunk's declared size when the cap is below it, then the dictionary's expansion)."""
    small = parquet_bomb(tmp_path / "small.parquet", 2 * MiB, 8)
    (t,) = load_path(small)
    assert len(t.events) == 8 and len(t.events[7].content) == 2 * MiB
    monkeypatch.setenv(KNOB, str(8 * MiB))
    with pytest.raises(TraceError) as exc:
        list(load_path(small))
    assert exc.value.field == "events.list.element.content" and "8,388,608" in str(exc.value)
    assert "16,777,216 in this column" in str(exc.value)
    monkeypatch.setenv(KNOB, str(MiB))  # below the chunk's own uncompressed pages: the metadata says so
    with pytest.raises(TraceError) as exc:
        list(load_path(small))
    assert "column chunk declares" in str(exc.value) and exc.value.record == "row group 0"


@pytest.mark.parametrize("value", ["lots", "0", "-5", "1e9", str(2**63)])
def test_a_bad_setting_is_a_config_error(monkeypatch, value):
    monkeypatch.setenv(KNOB, value)
    with pytest.raises(ConfigError, match=KNOB):
        max_input_bytes()
    monkeypatch.setenv(KNOB, " 4096 ")
    assert max_input_bytes() == 4096


def test_a_parquet_file_import_wrote_reads_under_the_caps(tmp_path):
    """64 traces of 50 distinct 5,000-byte results each: every text column dictionary-encoded, read
    whole (the exact count of what the dictionaries expand to runs, and finds it under the cap)."""
    from builders import swe_trace

    from sim.trace.io import write_traces

    traces = [
        swe_trace([(f"{k} {j} " + "x" * 5000, 1200) for j in range(50)], trace_id=f"t{k}") for k in range(64)
    ]
    out = tmp_path / "ok.parquet"
    write_traces(traces, out)
    assert [len(t.events) for t in load_path(out)] == [102] * 64


# ------------------------------------------------------------------------------------------------ archives
def _lzma_member(name: str, data: bytes, dict_size: int) -> dict:
    """A zip LZMA member whose properties declare ``dict_size`` (its data compressed with a small one)."""
    props = lzma._encode_filter_properties({"id": lzma.FILTER_LZMA1, "preset": 0})
    filters = [lzma._decode_filter_properties(lzma.FILTER_LZMA1, props)]
    c = lzma.LZMACompressor(lzma.FORMAT_RAW, filters=filters)
    declared = props[:1] + struct.pack("<I", dict_size)
    payload = struct.pack("<BBH", 9, 4, len(declared)) + declared + c.compress(data) + c.flush()
    return member(name, data, LZMA, payload=payload)


def test_an_lzma_member_declaring_a_4_gib_dictionary_is_refused_before_allocating(capsys, tmp_path):
    header, sample = inspect_eval_members()
    data = json.dumps({"id": "s", "epoch": 1, "messages": [], "events": []}).encode()
    bad = tmp_path / "dict.eval"
    bad.write_bytes(zip_bytes([header, _lzma_member("samples/s_epoch_1.json", data, 2**32 - 1)]))
    assert bad.stat().st_size < 8_000
    line = refused(capsys, tmp_path, bad, "samples/s_epoch_1.json", "4,294,967,295", "67,108,864", KNOB)
    assert "LZMA dictionary" in line


def test_an_lzma_member_with_a_dictionary_under_the_cap_reads(tmp_path):
    header, sample = inspect_eval_members()
    user = {"id": "u1", "role": "user", "content": "List the files."}
    reply = {"id": "a1", "role": "assistant", "content": "Two files."}
    event = {
        "event": "model",
        "input": [user],
        "output": {"choices": [{"message": reply}], "usage": {"input_tokens": 50, "output_tokens": 5}},
    }
    data = json.dumps({"id": "s", "epoch": 1, "messages": [user, reply], "events": [event]}).encode()
    ok = tmp_path / "ok.eval"
    ok.write_bytes(zip_bytes([header, _lzma_member("samples/s_epoch_1.json", data, MAX_LZMA_DICT_BYTES)]))
    (t,) = load_path(ok)
    assert [e.content for e in t.events] == ["List the files.", "Two files."]


@pytest.mark.parametrize("spelling", ["samples/./s_epoch_1.json", "samples//s_epoch_1.json"])
def test_one_member_spelled_two_ways_is_refused(capsys, tmp_path, spelling):
    """Read as two traces with one trace_id before: an extractor writes both to one path, and which
    content is meant cannot be told, so the archive is refused (as a member named twice always was)."""
    header, sample = inspect_eval_members()
    bad = tmp_path / "twice.eval"
    bad.write_bytes(zip_bytes([header, sample, dict(sample, name=spelling)]))
    line = refused(capsys, tmp_path, bad, "twice", "also spelled 'samples/s_epoch_1.json'")
    assert spelling in line


def test_a_member_spelled_with_a_dot_part_alone_is_read(tmp_path):
    header, sample = inspect_eval_members()
    p = tmp_path / "dot.eval"
    p.write_bytes(
        zip_bytes([dict(header, name="./header.json"), dict(sample, name="samples/./s_epoch_1.json")])
    )
    (t,) = load_path(p)
    assert t.trace_id == "demo/s/1"


# ------------------------------------------------------------------------------------------ attachments
def _attachment_eval(path: Path, refs: int, size: int) -> Path:
    """An Inspect ``.eval`` whose sample holds ``refs`` user messages, each a reference to one attachment
    of ``size`` bytes, and one model call."""
    header = {"version": 2, "status": "success", "eval": {"task": "demo", "model": "openai/gpt-4o-mini"}}
    msgs = [{"id": f"u{k}", "role": "user", "content": "attachment://big"} for k in range(refs)]
    reply = {"id": "a", "role": "assistant", "content": "ok"}
    event = {
        "event": "model",
        "input": msgs,
        "output": {"choices": [{"message": reply}], "usage": {"input_tokens": 5, "output_tokens": 1}},
    }
    sample = {
        "id": "s",
        "epoch": 1,
        "messages": [*msgs, reply],
        "events": [event],
        "attachments": {"big": "a" * size},
    }
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("header.json", json.dumps(header))
        z.writestr("samples/s_epoch_1.json", json.dumps(sample))
    return path


def test_400_references_to_one_8_mib_attachment_are_refused(capsys, tmp_path):
    """13 KB expanding to 3.3 GB: refused when the references pass the cap (128 MiB), each counted once
    (the sample's messages repeat the event's input and add nothing)."""
    bad = _attachment_eval(tmp_path / "att.eval", 400, 8 * MiB)
    assert bad.stat().st_size < 40_000
    line = refused(capsys, tmp_path, bad, "demo/s/1", "attachments", "134,217,728", KNOB)
    assert "input[16]" in line  # the 17th reference passes 128 MiB: 17 x 8 MiB > 128 MiB


def test_references_are_counted_once_and_the_cap_is_a_setting(tmp_path, monkeypatch):
    ok = _attachment_eval(tmp_path / "ok.eval", 10, MiB)
    (t,) = load_path(ok)  # 10 MiB, though the messages are listed twice (input and messages)
    assert len(t.events) == 11 and all(len(e.content) == MiB for e in t.events[:10])
    monkeypatch.setenv(KNOB, str(10 * MiB - 1))
    with pytest.raises(TraceError, match="attachment references expand the sample to more than 10,485,759"):
        list(load_path(ok))


# ------------------------------------------------------------------------------------------ identifiers
def test_a_long_session_id_is_cut_in_warnings_and_errors(capsys, tmp_path):
    sid = "S" * (4 * MiB)
    records = []
    for s in ("short", sid):
        records += [
            {
                "type": "user",
                "sessionId": s,
                "uuid": f"u{s[:3]}",
                "message": {"role": "user", "content": "go"},
            },
            {
                "type": "assistant",
                "sessionId": s,
                "uuid": f"a{s[:3]}",
                "message": {"id": "m", "content": "hi"},
            },
            {
                "type": "assistant",
                "sessionId": s,
                "uuid": f"b{s[:3]}",
                "message": {"id": "n", "content": "x", "usage": {"input_tokens": 5, "output_tokens": 1}},
            },
        ]
    p = tmp_path / "long.jsonl"
    p.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    out = tmp_path / "out.jsonl"
    code, _, err = cli(capsys, "import", p, "-o", out)
    assert code == 0 and max(len(line) for line in err.splitlines()) < 2_100
    assert re.search(r"\(4,19\d,\d{3} characters left out\)", err)  # how much was left out
    assert err.count("1 of 2 calls have no recorded usage") == 2
    assert json.loads(out.read_text().splitlines()[1])["trace_id"] == sid  # the data keeps it whole
    with pytest.raises(TraceError) as exc:
        raise TraceError("f.jsonl", "bad", record=sid, field="usage")
    assert len(str(exc.value)) <= 2_100 and str(exc.value).endswith(": field usage: bad")
    assert exc.value.record == sid


def test_clip_keeps_the_start_and_the_end():
    assert clip("short") == "short"
    text = "A" * 3000 + "END"
    cut = clip(text)
    assert (
        cut.startswith("A" * 1333)
        and cut.endswith("A" * 663 + "END")
        and "(1,004 characters left out)" in cut
    )
    assert len(cut) < 2_050


# ------------------------------------------------------------------------------ inconsistent acceptance
def test_an_inspect_json_whose_messages_share_one_id_is_refused_by_import_as_by_validate(capsys, tmp_path):
    """Its messages collapse to one (Inspect's ids name messages) and no call is left: validate refused
    it, import wrote a file validate and run then refused. Both now say the same, with exit 2."""
    user = {"id": "m", "role": "user", "content": "hi"}
    reply = {"id": "m", "role": "assistant", "content": "yo"}
    event = {
        "event": "model",
        "input": [user],
        "output": {"choices": [{"message": reply}], "usage": {"input_tokens": 10, "output_tokens": 1}},
    }
    log = {
        "version": 2,
        "status": "success",
        "eval": {"task": "t", "model": "openai/gpt-4o-mini", "eval_id": "e"},
        "samples": [{"id": "s", "epoch": 1, "messages": [user, reply], "events": [event]}],
    }
    p = tmp_path / "same_ids.json"
    p.write_text(json.dumps(log))
    v_code, v_out, v_err = cli(capsys, "validate", p)
    line = refused(capsys, tmp_path, p, "t/s/1", "run 0 has no call")
    assert v_code == 2 and line.split("error: ", 1)[1] in v_out + v_err
