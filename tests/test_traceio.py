import json

import pytest
from builders import swe_trace

from sim.importers import load_path
from sim.trace.codec import trace_from_dict, trace_hash, trace_to_dict
from sim.trace.io import iter_jsonl, load_dataset_traces, write_traces
from sim.util.errors import TraceError


def test_roundtrip_jsonl_and_parquet_keep_content_and_hash(tmp_path):
    t = swe_trace([("héllo\nworld", 30), ("x", 2)], trace_id="rt")
    for name in ("a.jsonl", "a.parquet"):
        write_traces([t, t], tmp_path / name)
        back = list(load_path(tmp_path / name))
        assert len(back) == 2
        assert trace_to_dict(back[0]) == trace_to_dict(t)
        assert trace_hash(back[1]) == trace_hash(t)


def test_jsonl_is_byte_stable(tmp_path):
    t = swe_trace([("a", 3)])
    write_traces([t], tmp_path / "1.jsonl")
    write_traces([t], tmp_path / "2.jsonl")
    assert (tmp_path / "1.jsonl").read_bytes() == (tmp_path / "2.jsonl").read_bytes()


def test_hash_ignores_source_file_but_not_content():
    import dataclasses

    t = swe_trace([("a", 3)])
    assert trace_hash(dataclasses.replace(t, source_file="other.json")) == trace_hash(t)
    assert trace_hash(swe_trace([("a", 4)])) != trace_hash(t)


def test_loadable_with_datasets(tmp_path):
    pytest.importorskip("datasets")
    t = swe_trace([("one\ntwo", 12), ("three", 4)], trace_id="ds")
    for name in ("d.jsonl", "d.parquet"):
        write_traces([t], tmp_path / name)
        back = list(load_dataset_traces(tmp_path / name))
        assert [trace_hash(b) for b in back] == [trace_hash(t)]


def _bad(d_mod, tmp_path):
    d = trace_to_dict(swe_trace([("a", 3), ("b", 4)], trace_id="bad"))
    d_mod(d)
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(d) + "\n")
    with pytest.raises(TraceError) as exc:
        list(iter_jsonl(path))
    return str(exc.value)


def test_wrong_field_type_names_file_record_field(tmp_path):
    msg = _bad(lambda d: d["events"][3].__setitem__("tokens", "3"), tmp_path)
    assert (
        msg
        == "bad.jsonl: record line 1 (trace_id bad): field events[3].tokens: expected integer, got string '3'"
    )


def test_negative_event_size(tmp_path):
    msg = _bad(lambda d: d["events"][2].__setitem__("tokens", -5), tmp_path)
    assert msg.startswith(
        "bad.jsonl: record line 1 (trace_id bad): field events[2].tokens: must be >= 0, got -5"
    )


def test_residual_must_match_sizes(tmp_path):
    msg = _bad(lambda d: d["calls"][1].__setitem__("residual_tokens", 9), tmp_path)
    assert "field calls[1].residual_tokens: is 9 but input_tokens - view tokens = 0" in msg


def test_content_and_sizes_must_agree(tmp_path):
    msg = _bad(lambda d: d["events"][1].__setitem__("bytes", 99), tmp_path)
    assert "field events[1].bytes: is 99 but the content has 10" in msg


def test_unknown_field_and_missing_field(tmp_path):
    assert "field events[0].colour: unknown field" in _bad(
        lambda d: d["events"][0].__setitem__("colour", 1), tmp_path
    )
    assert "field calls[0].view_end: missing required field" in _bad(
        lambda d: d["calls"][0].pop("view_end"), tmp_path
    )


def test_truncated_json_line(tmp_path):
    line = json.dumps(trace_to_dict(swe_trace([("a", 3)])))
    path = tmp_path / "cut.jsonl"
    path.write_text(line[: len(line) // 2] + "\n")
    with pytest.raises(TraceError, match=r"^cut.jsonl: record line 1: invalid JSON: .* \(column \d+\)$"):
        list(iter_jsonl(path))


def test_truncated_json_line_points_at_its_end(tmp_path):
    # 45 characters, cut before the closing brace: the decoder stops just past the last one, on line 1
    # (the newline is not part of the record, so the position is not "line 2, column 1")
    path = tmp_path / "cut.jsonl"
    path.write_text('{"schema": "ctxsim.trace/v1", "trace_id": "x"\n')
    with pytest.raises(
        TraceError, match=r"record line 1: invalid JSON: Expecting ',' delimiter \(column 46\)$"
    ):
        list(iter_jsonl(path))


def test_trace_from_dict_rejects_non_object():
    with pytest.raises(TraceError, match="expected object, got array"):
        trace_from_dict([1, 2])


def test_json_sizes_kept_beside_a_redacted_content_only(tmp_path):
    from sim.trace.io import redact

    t = swe_trace([('say "hi"\n', 5), ("é", 2)], trace_id="js")
    assert "json_bytes" not in trace_to_dict(t)["events"][1]  # derived from the text: not written
    r = redact(t)
    task, result = trace_to_dict(r)["events"][1], trace_to_dict(r)["events"][3]
    # 'task\nline2' as JSON is '"task\\nline2"' (13 bytes); inside a JSON string again 18
    assert (task["json_bytes"], task["json2_bytes"]) == (13, 18)
    assert result["json_bytes"] == len(json.dumps('say "hi"\n').encode()) == 14
    for name in ("r.jsonl", "r.parquet"):
        write_traces([r, t], tmp_path / name)
        back = list(load_path(tmp_path / name))
        assert [trace_to_dict(b) for b in back] == [trace_to_dict(r), trace_to_dict(t)]
        assert trace_hash(back[1]) == trace_hash(t)  # a text trace's hash is unchanged
    msg = _bad(lambda d: d["events"][1].__setitem__("json_bytes", 12), tmp_path)
    assert "field events[1].json_bytes: is 12 but the content has 13" in msg
    msg = _bad(lambda d: d["events"][1].__setitem__("json2_bytes", -1), tmp_path)
    assert "field events[1].json2_bytes: must be >= 0, got -1" in msg


def _with_facts(**fields):
    """events[3] (a 1-byte result 'a') provides f0 with the given fact fields; events[4] supersedes g."""

    def mod(d):
        d["events"][3].update({"provides": ["f0"], **fields})

    return mod


@pytest.mark.parametrize(
    "fields,problem",
    [
        ({"fact_spans": [[0, 1], [0, 1]]}, "field events[3].fact_spans: has 2 entries but provides has 1"),
        (
            {"fact_spans": [[0, 2]]},
            "field events[3].fact_spans[0]: [0, 2] must satisfy start <= end <= bytes (1)",
        ),
        (
            {"fact_spans": [[1, 0]]},
            "field events[3].fact_spans[0]: [1, 0] must satisfy start <= end <= bytes (1)",
        ),
        ({"fact_spans": [[0]]}, "field events[3].fact_spans[0]: expected [start, end], got 1 numbers"),
        ({"fact_kinds": ["colour"]}, "field events[3].fact_kinds[0]"),
        ({"fact_kinds": ["path", "goal"]}, "field events[3].fact_kinds: has 2 entries but provides has 1"),
    ],
)
def test_bad_fact_fields_name_the_field(tmp_path, fields, problem):
    assert problem in _bad(_with_facts(**fields), tmp_path)


def test_supersedes_names_an_earlier_fact(tmp_path):
    def mod(d):
        d["events"][3]["provides"] = ["f0"]
        d["events"][5]["supersedes"] = ["g"]

    assert "field events[5].supersedes: 'g' is provided by no earlier event" in _bad(mod, tmp_path)


def test_fact_fields_round_trip(tmp_path):
    def mod(d):
        d["events"][3].update(
            {"provides": ["f0", "f1"], "fact_spans": [[0, 1], None], "fact_kinds": ["path", None]}
        )
        d["events"][5]["supersedes"] = ["f0"]

    d = trace_to_dict(swe_trace([("a", 3), ("b", 4)], trace_id="ok"))
    mod(d)
    t = trace_from_dict(d)
    assert t.events[3].fact_spans == ((0, 1), None) and t.events[3].fact_kinds == ("path", None)
    assert t.events[5].supersedes == ("f0",)
    for name in ("f.jsonl", "f.parquet"):
        write_traces([t], tmp_path / name)
        (back,) = load_path(tmp_path / name)
        assert trace_to_dict(back) == d and trace_hash(back) == trace_hash(t)
