"""``--dataset`` on local canonical files: read straight from the file, the same traces as ``datasets``."""

import json

import pytest
from builders import swe_trace

import sim.trace.io as traceio
from sim.trace.codec import trace_hash, trace_to_dict
from sim.trace.io import load_dataset_traces, write_traces
from sim.util.errors import TraceError


def _traces():
    return [swe_trace([("out\n" * 3, 30), ("x", 5)] * (k + 1), trace_id=f"t{k}") for k in range(3)]


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_local_files_give_the_traces_datasets_gives(tmp_path, monkeypatch, suffix):
    a, b = tmp_path / f"a{suffix}", tmp_path / f"b{suffix}"
    write_traces(_traces()[:2], a)
    write_traces(_traces()[2:], b)
    direct = list(load_dataset_traces([a, b], streaming=True))
    assert [t.trace_id for t in direct] == ["t0", "t1", "t2"]
    assert [trace_hash(t) for t in direct] == [trace_hash(t) for t in _traces()]
    monkeypatch.setattr(traceio, "_canonical_local", lambda path: False)  # through datasets instead
    via = list(load_dataset_traces([a, b], streaming=True))
    assert [trace_to_dict(t) for t in via] == [trace_to_dict(t) for t in direct]


def test_bad_record_names_the_dataset_row_and_field(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write_traces(_traces()[:2], a)
    d = trace_to_dict(_traces()[2])
    d["calls"][1]["residual_tokens"] = 3  # input - view is 0
    b.write_text(json.dumps(d) + "\n", encoding="utf-8")
    with pytest.raises(TraceError) as e:
        list(load_dataset_traces([a, b], streaming=True))
    assert (e.value.file, e.value.record, e.value.field) == (
        "a.jsonl,b.jsonl",
        "row 2 (trace_id t2)",
        "calls[1].residual_tokens",
    )
    b.write_text('{"schema_version": 1, "trace_id": \n', encoding="utf-8")  # a truncated line
    with pytest.raises(TraceError) as e:
        list(load_dataset_traces([a, b], streaming=True))
    assert e.value.record == "row 2" and "cannot read as a dataset: invalid JSON" in e.value.message
