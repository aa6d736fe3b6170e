"""Canonical files read as columns (``sim.trace.columns``): the same traces, hashes and errors as the
record-by-record reader (``trace_from_dict`` of each parsed record), with the fast path really taken."""

import dataclasses
import json
import pickle
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import sim.trace.arrow_arrays as arrow_arrays
import sim.trace.column_checks as column_checks
import sim.trace.columns as tracecolumns
import sim.trace.read_jsonl as read_jsonl
import sim.trace.read_parquet as read_parquet
import sim.trace.readahead as readahead
from sim.core.types import Lazy, TraceArrays
from sim.engine.fast.batch_static import elapsed_array
from sim.engine.model import _recorded_outputs
from sim.importers import expand_paths, load_path
from sim.information.ledger import _facts_before, provides_any
from sim.information.state import has_needs
from sim.policies.observation_masking import _observation_arrays, observations, placeholder_sizes
from sim.trace.codec import NULLABLE_TOP, arrow_schema, trace_from_dict, trace_hash, trace_to_dict
from sim.trace.io import iter_jsonl, iter_parquet, load_dataset_traces, write_traces
from sim.trace.read_parquet import parquet_rows
from sim.util.errors import TraceError
from sim.util.jsonl import json_lines
from sim.util.paths import traces_dir

SUITE = Path(__file__).resolve().parent.parent / "scenarios" / "suite"


def reference(path: Path) -> list:
    """The record-by-record reader: every record parsed, validated and built by ``trace_from_dict``."""
    if path.suffix == ".jsonl":
        out = []
        for lineno, d, problem in json_lines(path):
            if problem is not None:
                raise TraceError(path.name, problem, record=f"line {lineno}")
            out.append(trace_from_dict(d, path.name, f"line {lineno}", text_checked=True))
        return out
    return [
        trace_from_dict(
            {k: v for k, v in d.items() if v is not None or k in NULLABLE_TOP},
            path.name,
            f"row {row}",
            text_checked=True,
        )
        for row, d in parquet_rows(path)
    ]


def read(path: Path) -> list:
    traces = list(iter_jsonl(path) if path.suffix == ".jsonl" else iter_parquet(path))
    for t in traces:  # noted before a comparison builds its events
        t._cache["read_fast"] = type(t.__dict__["events"]) is Lazy and type(t.__dict__["calls"]) is Lazy
    return traces


def fast(t) -> bool:
    """Read on the fast path (events and calls left to be built)."""
    return t._cache["read_fast"]


def assert_same(got: list, want: list) -> None:
    """Same traces and records; what the fast path filled from columns equals what its builders give."""
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        cache = dict(a._cache)  # before anything builds the events
        assert a == b
        assert trace_to_dict(a) == trace_to_dict(b)
        assert trace_hash(a) == trace_hash(b)
        if "trace_hash" in cache:
            assert cache["trace_hash"] == trace_hash(b)
        if "arrays" in cache:
            built = TraceArrays.build(b)
            for f in dataclasses.fields(TraceArrays):
                x, y = getattr(cache["arrays"], f.name), getattr(built, f.name)
                assert x.dtype == y.dtype and np.array_equal(x, y) and not x.flags.writeable, f.name
        builders = {
            "provides_any": provides_any,
            "has_needs": has_needs,
            "elapsed": elapsed_array,
            "facts_before": _facts_before,
            "replay_outputs": _recorded_outputs,
        }
        for key, build in builders.items():
            if key in cache:
                v, w = cache[key], build(b)
                if key == "replay_outputs":  # (outputs, how many estimated)
                    assert np.array_equal(v[0], w[0]) and v[1] == w[1] and not v[0].flags.writeable
                    continue
                assert np.array_equal(v, w) if isinstance(w, np.ndarray) else v == w, key
        assert a.runs == b.runs


@pytest.fixture(scope="module")
def suite_files(tmp_path_factory):
    out = tmp_path_factory.mktemp("suite")
    files = []
    for name in ("swe_like", "closed_loop"):
        traces = reference(SUITE / f"{name}.jsonl")
        for suffix in (".jsonl", ".parquet"):
            write_traces(traces, out / f"{name}{suffix}", record_hashes=False)  # hashed from the text
            files.append(out / f"{name}{suffix}")
    return files


def test_the_embedded_suite_reads_as_columns_the_same(suite_files):
    for path in suite_files:
        got, want = read(path), reference(path)
        assert_same(got, want)
        assert all(fast(t) for t in got) and len(got) == (40 if path.stem == "swe_like" else 4)
    # the committed file itself (written by the generator) too
    got = read(SUITE / "swe_like.jsonl")
    assert all(fast(t) for t in got)
    assert_same(got, reference(SUITE / "swe_like.jsonl"))


def test_a_batch_arrow_fails_on_is_read_by_the_reference(suite_files, monkeypatch):
    """Arrow's compute failing on a batch (e.g. text past 2 GiB) declines it: the reference reads it, the
    same traces, never an internal error; a bad record's own error still names it."""

    def fails(*args, **kwargs):
        raise OverflowError("offset overflow")

    monkeypatch.setattr(read_jsonl, "batch_traces", fails)
    monkeypatch.setattr(read_parquet, "batch_traces", fails)
    for path in suite_files:
        got = read(path)
        assert_same(got, reference(path))
        assert not any(fast(t) for t in got)


def real_traces():
    """Every shared real trace (``sim.util.paths.traces_dir()``, as the other tests read them); skips saying
    where it looked when the folder is absent (a fresh machine), never in CI, which has it."""
    root = traces_dir()
    if not root.is_dir():
        pytest.skip(f"real traces not found at {root} (set CTXSIM_TRACES to the shared traces folder)")
    out = []
    with pytest.warns():  # the importers' notices about skipped files and records
        for f in expand_paths([root]):
            out += list(load_path(f))
    return out


def _without_facts(t):
    """A real trace (its real text) without facts, children or later runs: what the fast path takes."""
    events = tuple(
        dataclasses.replace(e, provides=(), needs=(), fact_spans=(), fact_kinds=(), supersedes=())
        for e in t.events
    )
    return dataclasses.replace(t, events=events, children=())


@pytest.mark.slow  # every shared real trace written and read back four ways: ~25 s
def test_real_traces_read_as_columns_the_same(tmp_path):
    traces = real_traces()
    assert len(traces) > 100
    plain = [_without_facts(t) for t in traces if t.runs == 1]
    for suffix in (".jsonl", ".parquet"):
        for label, batch in (("real", traces), ("plain", plain)):
            path = tmp_path / f"{label}{suffix}"
            write_traces(batch, path, record_hashes=False)  # hashed from the text
            got = read(path)
            assert_same(got, reference(path))
            # real text (escapes, non-ASCII, line breaks) and facts on the fast path; several runs not
            assert [fast(t) for t in got] == [t.runs == 1 and not t.children for t in batch]


def test_observation_arrays_from_columns_equal_the_event_builders(suite_files):
    for path in suite_files:
        for got, want in zip(read(path), reference(path), strict=True):
            obs, tokens = _observation_arrays(got)
            assert obs.tolist() == list(observations(want))
            assert tokens.tolist() == [t for t, _ in placeholder_sizes(want)]


@pytest.mark.parametrize("ahead", [True, False])
def test_json_lines_with_their_record_of_hashes_skip_only_the_line_check(tmp_path, monkeypatch, ahead):
    """A JSON Lines file holding the bytes its record of hashes was taken from is write_traces' own text:
    its lines are not compared with their canonical encoding again, and read as the same traces; a file
    without a valid record (none, or edited since) is compared line by line as before. Read ahead, the
    file's digest is taken on a thread of its own, beside the one reading the file."""
    monkeypatch.setattr(readahead, "READ_AHEAD", ahead)
    traces = reference(SUITE / "swe_like.jsonl")
    path = tmp_path / "t.jsonl"
    write_traces(traces, path)  # with its record
    compared = []
    line_matches = tracecolumns.line_matches
    monkeypatch.setattr(tracecolumns, "line_matches", lambda *a: compared.append(1) or line_matches(*a))
    got = read(path)
    assert compared == [] and all(map(fast, got))
    assert_same(got, traces)
    (tmp_path / "t.jsonl.trace-hashes").unlink()
    got = read(path)
    assert len(compared) == len(traces) and all(map(fast, got))
    assert_same(got, traces)
    write_traces(traces, path)
    text = path.read_bytes().replace(b'"bounded":false', b'"bounded" :false', 1)  # not canonical
    path.write_bytes(text)  # the record no longer holds: compared, and that line declined
    compared.clear()
    got = read(path)
    assert len(compared) == len(traces) and [fast(t) for t in got].count(False) == 1
    assert_same(got, reference(path))


def test_observation_arrays_of_a_batch_equal_each_runs(suite_files):
    """The masking batch path sizes a whole batch's observations at once: the same indices and tokens
    as each run's own ``_observation_arrays``, runs with no user event, a user event after a tool result,
    no events and another ratio among them."""
    from builders import ev, swe_trace

    from sim.policies.observation_masking import _batch_observation_arrays

    odd = [
        swe_trace([("a\nb", 30)] * 3, bytes_per_token=2.5),
        swe_trace([], trace_id="no calls"),
        dataclasses.replace(
            swe_trace([("x" * 10, 5)], trace_id="result first"),
            events=(ev(0, "tool_result", "r\n" * 120, 9, tool_call_id="c0"), ev(1, "user", "late", 3)),
            calls=(),
        ),
        dataclasses.replace(swe_trace([], trace_id="empty"), events=(), calls=()),
    ]
    batches = [read(path) for path in suite_files] + [odd, odd[1:], odd[3:]]
    for batch in batches:
        n_obs, n_events, obs, tokens = _batch_observation_arrays(
            [t.arrays for t in batch], [t.bytes_per_token for t in batch]
        )
        each = [_observation_arrays(t) for t in batch]
        assert n_obs.tolist() == [len(o) for o, _ in each]
        assert n_events.tolist() == [len(t.arrays.kind) for t in batch]
        assert obs.tolist() == [i for o, _ in each for i in o.tolist()]
        assert tokens.tolist() == [k for _, tok in each for k in tok.tolist()]
    assert _observation_arrays(odd[2])[0].tolist() == [0]  # the late user event is no observation


def test_a_lazy_trace_pickles_and_replaces_as_a_built_one(suite_files):
    t = read(suite_files[0])[3]
    assert fast(t)
    back = pickle.loads(pickle.dumps(t))
    assert type(back.__dict__["events"]) is tuple and back == t
    moved = dataclasses.replace(t, trace_id="other")
    assert moved.events == t.events and moved.calls == t.calls and "arrays" not in moved._cache


# ------------------------------------------------------------------------------------------ bad input
def _record() -> dict:
    return trace_to_dict(reference(SUITE / "swe_like.jsonl")[0])


def _error(fn) -> str:
    with pytest.raises(TraceError) as exc:
        fn()
    return str(exc.value)


def _break(d: dict, where: str, value) -> dict:
    """``d`` with the field at ``where`` (``events.3.tokens``) set to ``value``."""
    *path, last = where.split(".")
    node = d
    for p in path:
        node = node[int(p)] if p.isdigit() else node[p]
    node[int(last) if last.isdigit() else last] = value
    return d


BAD = [
    ("events.3.tokens", 10**6),  # residuals no longer add up
    ("events.3.index", 7),
    ("events.2.kind", "user"),  # a call's event is not an assistant's
    ("calls.4.view_end", 1),  # the view shrinks
    ("calls.2.index", 9),
    ("events.3.tool_call_id", "nobody"),
    ("events.4.bytes", -1),
    ("calls.1.output_tokens", -5),
    ("events.5.timestamp", 1e300),
    ("events.0.tokens", 2**52),  # the sum bound
    ("bytes_per_token", 0.001),
    ("schema_version", 3),
    ("recorded_policy", "[1]"),
    ("outcome", "{not json"),
    ("events.2.tool_call_ids", ["x", "call-0"]),  # still fine: the answer's id is among them
    ("events.1.content", "two\nlines"),  # content disagrees with its sizes
]


@pytest.mark.parametrize("where,value", BAD)
def test_a_bad_record_gives_the_reference_error(tmp_path, where, value):
    good = _record()
    bad = _break(json.loads(json.dumps(good)), where, value)
    records = [good, bad, good]
    for suffix in (".jsonl", ".parquet"):
        path = tmp_path / f"bad{suffix}"
        if suffix == ".jsonl":
            text = "".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in records)
            path.write_text(text, encoding="utf-8")
        else:
            pq.write_table(pa.Table.from_pylist(records, schema=arrow_schema()), path)
        try:
            want = reference(path)
        except TraceError as exc:
            assert _error(lambda p=path: read(p)) == str(exc)
            assert _error(lambda p=path: list(load_dataset_traces(p, streaming=True))).startswith(path.name)
        else:  # a change the reference accepts: the same traces
            assert_same(read(path), want)


@pytest.mark.parametrize(
    "edit",
    [
        lambda line: line.replace('"content":null,', "", 1),  # a missing key is not a null
        lambda line: line.replace('"bounded":false', '"bounded":null', 1),
        lambda line: line.replace('"tokens":', '"tokens" : ', 1),  # whitespace: valid, read as before
        lambda line: line.replace('"timestamp":1753125336.0', '"timestamp":1753125336', 1),
        lambda line: line.replace('"index":0,', '"index":0,"index":0,', 1),  # a duplicate key
        lambda line: line.replace('"kind":"system"', '"kind":"\\u0073ystem"', 1),  # an escape
        lambda line: line.replace('"agent":"', '"agent":"\\ud800', 1),  # a lone surrogate
        lambda line: line.replace('"timestamp":1753125336.0', '"timestamp":NaN', 1),
        lambda line: line.replace('"tokens":1575', '"tokens":1575.0', 1),
        lambda line: line[:-40],  # truncated
        lambda line: "\n  \n" + line,  # blank lines before it
    ],
)
def test_a_json_line_arrow_would_read_differently_goes_to_the_reference(tmp_path, edit):
    line = json.dumps(_record(), ensure_ascii=False, separators=(",", ":"))
    assert '"timestamp":1753125336.0' in line and '"tokens":1575' in line
    path = tmp_path / "edited.jsonl"
    path.write_text(line + "\n" + edit(line) + "\n" + line + "\n", encoding="utf-8")
    try:
        want = reference(path)
    except TraceError as exc:
        assert _error(lambda: read(path)) == str(exc)
        return
    got = read(path)
    assert_same(got, want)
    # the edited line is the reference's; the others stay on the fast path unless Arrow refused the
    # block (a duplicate key: then the whole block is read by the reference)
    refused = '"index":0,"index":0' in edit(line)
    assert fast(got[1]) == (edit(line).strip() == line)  # blank lines around a canonical line: fast
    assert fast(got[0]) == fast(got[-1]) == (not refused)


FACT_BAD = [
    ("events.4.needs", ["nobody:provides"]),
    ("events.4.needs", ["fn:retry_timeout_location"]),  # provided only later (event 5)
    ("events.4.supersedes", ["grep:hits", "nothing"]),
    ("events.3.fact_kinds", ["path", "value"]),  # two kinds for one fact
    ("events.3.fact_kinds", ["colour"]),
    ("events.3.fact_kinds", [None]),  # no kind: fine
    ("events.3.fact_spans", [[0, 10]]),  # fine
    ("events.3.fact_spans", [None]),  # the whole event: fine
    ("events.3.fact_spans", [[5, 2]]),
    ("events.3.fact_spans", [[0, 10**6]]),  # past the event's bytes
    ("events.3.fact_spans", [[0, 1, 2]]),
    ("events.3.provides", ["grep:hits", "grep:hits"]),  # one fact twice, kinds one short
    ("events.6.needs", ["grep:hits", "fn:retry_timeout_location"]),  # both provided before: fine
]


@pytest.mark.parametrize("where,value", FACT_BAD)
def test_bad_fact_fields_give_the_reference_error(tmp_path, where, value):
    good = trace_to_dict(reference(SUITE / "closed_loop.jsonl")[0])
    assert good["events"][3]["provides"] == ["grep:hits"] and good["events"][4]["needs"] == ["grep:hits"]
    bad = _break(json.loads(json.dumps(good)), where, value)
    for suffix in (".jsonl", ".parquet"):
        path = tmp_path / f"facts{suffix}"
        if suffix == ".jsonl":
            text = "".join(
                json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in [good, bad]
            )
            path.write_text(text, encoding="utf-8")
        else:
            pq.write_table(pa.Table.from_pylist([good, bad], schema=arrow_schema()), path)
        try:
            want = reference(path)
        except TraceError as exc:
            assert _error(lambda p=path: read(p)) == str(exc)
        else:
            got = read(path)
            assert_same(got, want)
            # a JSON line stays on the fast path when it is what the writer writes (an added key lands
            # out of the writer's order: that line is the reference's)
            canonical = json.dumps(bad, separators=(",", ":")) == json.dumps(
                trace_to_dict(want[1]), separators=(",", ":")
            )
            assert fast(got[0]) and fast(got[1]) == (suffix == ".parquet" or canonical)


def test_dataset_rows_are_numbered_across_files_and_blank_lines(tmp_path):
    line = json.dumps(_record(), ensure_ascii=False, separators=(",", ":"))
    bad = line.replace('"index":1,', '"index":5,', 1)
    (tmp_path / "a.jsonl").write_text(line + "\n\n" + line + "\n", encoding="utf-8")
    (tmp_path / "b.jsonl").write_text(line + "\n\n" + bad + "\n", encoding="utf-8")
    message = _error(
        lambda: list(load_dataset_traces([tmp_path / "a.jsonl", tmp_path / "b.jsonl"], streaming=True))
    )
    assert message.startswith("a.jsonl,b.jsonl: record row 3 (trace_id swe-like-0000")
    assert "field events[1].index" in message


def test_a_batch_that_cannot_be_read_hands_the_rest_to_the_reference(tmp_path, monkeypatch):
    """Bytes that are not UTF-8 in row 70: the column reader (batches of 7 here) reads rows 0-69, and the
    reference goes on from row 70 without building the records before it again; it fails where it
    always has, at its 64-row batch that holds row 70, naming the file and that batch's first row."""
    base = reference(SUITE / "swe_like.jsonl")
    traces = [dataclasses.replace(base[i % len(base)], trace_id=f"t{i:03d}") for i in range(80)]
    path = tmp_path / "x.parquet"
    write_traces(traces, path, record_hashes=False)
    table = pq.read_table(path)
    ids = [t.trace_id.encode() for t in traces]
    ids[70] = b"t\xff"
    col = pa.array(ids, type=pa.binary()).view(pa.string())
    pq.write_table(table.set_column(table.schema.get_field_index("trace_id"), "trace_id", col), path)
    monkeypatch.setattr(read_parquet, "PARQUET_BATCH", 7)
    starts = []
    real = read_parquet.parquet_rows

    def rows(path, batch_size=64, start=0):
        starts.append(start)
        return real(path, batch_size, start)

    monkeypatch.setattr(read_parquet, "parquet_rows", rows)
    got = []
    with pytest.raises(TraceError) as err:
        for t in iter_parquet(path):
            got.append(t)
    assert str(err.value) == _error(lambda: list(real(path)))
    assert "row 64" in str(err.value) and [t.trace_id for t in got] == [t.trace_id for t in traces[:70]]
    assert starts == [70]  # the reference goes on from row 70: the records before it are not built again


# ------------------------------------------------------------------ reading ahead, parsing, lookups
@pytest.mark.parametrize("ahead", [True, False, None])
def test_small_batches_read_ahead_or_not_give_the_same_traces(suite_files, monkeypatch, ahead):
    monkeypatch.setattr(readahead, "READ_AHEAD", ahead)  # (None: as the machine's load decides)
    monkeypatch.setattr(read_parquet, "PARQUET_BATCH", 7)  # several batches, each made ahead of the last
    monkeypatch.setattr(read_jsonl, "JSONL_BLOCK", 50_000)
    for path in suite_files:
        got = read(path)
        assert_same(got, reference(path))
        if path.stem == "swe_like":
            assert all(fast(t) for t in got)


@pytest.mark.parametrize("ahead", [True, False])
def test_reading_ahead_fails_where_the_reader_reaches_the_bad_batch(tmp_path, monkeypatch, ahead):
    """The unreadable row 70 again, read ahead on a thread or not: rows 0-69 first, then the same error."""
    monkeypatch.setattr(readahead, "READ_AHEAD", ahead)
    test_a_batch_that_cannot_be_read_hands_the_rest_to_the_reference(tmp_path, monkeypatch)


def test_ahead_keeps_order_raises_in_place_and_stops_its_thread(monkeypatch):
    monkeypatch.setattr(readahead, "READ_AHEAD", True)
    made, closed = [], []

    def items():
        try:
            for i in range(5):
                made.append(i)
                if i == 3:
                    raise ValueError("item 3")
                yield i
        finally:
            closed.append(True)

    got = []
    with pytest.raises(ValueError, match="item 3"):
        for i in readahead.read_ahead(items()):
            got.append(i)
            assert len(made) <= i + 2  # one ahead, no more
    assert got == [0, 1, 2] and closed == [True]
    made.clear(), closed.clear()
    it = readahead.read_ahead(items())
    assert next(it) == 0
    it.close()  # the caller stops early: the source is closed (on its thread) before close returns
    assert closed == [True] and made == [0, 1]
    monkeypatch.setattr(readahead, "READ_AHEAD", False)
    source = items()
    assert readahead.read_ahead(source) is source  # no thread: the items themselves


def test_enumeration_codes_of_a_dictionary_column_equal_index_in():
    import pyarrow.compute as pc

    values = ("user", "assistant", "tool_result")
    dense = pa.array(["assistant", None, "user", "nobody", "assistant", "tool_result", None])
    for a in (dense, pc.dictionary_encode(dense), pc.dictionary_encode(dense).slice(2, 4)):
        want = pc.index_in(pc.cast(a, pa.string()), value_set=pa.array(values)).to_pylist()
        assert arrow_arrays.codes_of(a, values).tolist() == [-1 if w is None else w for w in want]
    empty = pa.DictionaryArray.from_arrays(pa.array([None, None], pa.int32()), pa.array([], pa.string()))
    assert arrow_arrays.codes_of(empty, values).tolist() == [-1, -1]


def test_answers_in_issue_order_and_out_of_it_are_found_alike():
    """``_unanswered``'s shortcut (the k-th answer names the k-th id issued, at or before it, in its
    record) against the sorting search it stands in for, on answers in order, out of order, before
    their call, in another record, and unissued."""
    owner = np.array([0, 0, 0, 0, 1, 1])
    issued_at = np.array([0, 0, 4])
    issued = pa.array(["a", "b", "c"])
    cases = {
        "in order": ([1, 2, 5], ["a", "b", "c"], []),
        "swapped": ([1, 2, 5], ["b", "a", "c"], []),
        "unissued": ([1, 2, 5], ["a", "x", "c"], [2]),
        "other record": ([1, 2, 3], ["a", "b", "c"], [3]),
        "one missing": ([1, 5], ["a", "c"], []),
    }
    for label, (at, ids, bad) in cases.items():
        at = np.array(at)
        want = column_checks._unmatched(owner, issued_at, issued, at, pa.array(ids), True, len(owner))
        assert np.flatnonzero(want).tolist() == bad, label
        shortcut = column_checks._answered_in_order(owner, issued_at, issued, at, pa.array(ids))
        assert shortcut == (label == "in order"), label
    before = np.array([0, 1])  # an answer before its call: no shortcut, and the search finds it
    late = np.array([2, 2, 4])
    assert not column_checks._answered_in_order(owner, late, issued, np.array([1, 2, 5]), issued)
    assert column_checks._unmatched(owner, late, issued, np.array([1, 2, 5]), issued, True, 6)[1]
    assert len(before) == 2


def test_a_filler_makes_what_the_constructor_makes_and_checks_its_names_once():
    from sim.core.types import Trace, filler

    names = tuple(f.name for f in dataclasses.fields(Trace))
    make = filler(Trace, names)
    t = make("t", "fmt", (), (), None, "m", 100, None, {}, {}, None, (), (), (), {})
    assert t == Trace("t", "fmt", (), (), model="m", context_window=100)
    assert list(t.__dict__) == list(Trace("t", "fmt", (), ()).__dict__) == list(names) and t._cache == {}
    with pytest.raises(TypeError, match="in order"):
        filler(Trace, names[1:])
    with pytest.raises(TypeError, match="in order"):
        filler(Trace, (names[1], names[0], *names[2:]))


def test_a_streamed_read_does_not_import_pyarrow_compute(suite_files):
    """Its kernels are called through ``pyarrow._compute`` (``sim.trace.arrow_arrays.Compute``): importing
    ``pyarrow.compute`` wraps ~290 functions, a thirtieth of a streamed run's CPU."""
    import subprocess
    import sys

    for path in suite_files:
        code = (
            "import sys\nfrom pathlib import Path\nfrom sim.trace.io import load_dataset_traces\n"
            f"n = len(list(load_dataset_traces(Path({str(path)!r}), streaming=True)))\n"
            "print(n, 'pyarrow.compute' in sys.modules, 'pandas' in sys.modules)\n"
        )
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        assert out.stdout.split() == [str(40 if path.stem == "swe_like" else 4), "False", "False"], path


def test_lines_read_in_chunks_are_the_lines_read_one_by_one():
    """``lines_of`` with ``chunk`` against the line-by-line reading it stands in for: lines across
    chunk ends, blank lines, CRLF, lines at, one past and far past the length limit (None), and a last
    line without its newline, for chunks of one byte up to more than the file."""
    import io

    from sim.util.jsonl import lines_of

    texts = [
        b"",
        b"\n",
        b"abc",
        b"abcd\n",
        b"abcde\n",
        b"ab\r\ncd\n\n\nabcd",
        b"abcde",
        b"xxxxxxxxxxxx\nab\nabcdefghij\nabcd\n",
        b"{}\n  \nabcd\nabcdexxxxxxxxxx",
    ]
    for text in texts:
        want = list(lines_of(Path("x"), 4, io.BytesIO(text)))
        for chunk in (1, 2, 3, 4, 5, 7, 64):
            assert list(lines_of(Path("x"), 4, io.BytesIO(text), chunk)) == want, (text, chunk)
    text = texts[-2]
    assert list(lines_of(Path("x"), 4, io.BytesIO(text), 3)) == [
        (1, None),
        (2, b"ab\n"),
        (3, None),
        (4, b"abcd\n"),
    ]
    text = texts[-1]
    got = list(lines_of(Path("x"), 4, io.BytesIO(text), 2))
    assert got == [(1, b"{}\n"), (2, b"  \n"), (3, b"abcd\n"), (4, None)]


def test_a_block_parsed_on_arrows_threads_is_the_same_batch(suite_files):
    """``_parsed`` in parts on Arrow's threads (a core free) gives the batch it gives in one part, and
    refuses what it refuses in one part."""
    path = next(p for p in suite_files if p.suffix == ".jsonl" and p.stem == "swe_like")
    block = [(i + 1, raw) for i, raw in enumerate(path.read_bytes().splitlines(keepends=True)) if raw.strip()]
    assert len(block) > read_jsonl._PARTS  # each part has lines
    one = read_jsonl._parsed(block)
    parts = read_jsonl._parsed(block, threads=True)
    assert one is not None and parts is not None and parts.equals(one) and parts.num_rows == len(block)
    bad = block[:2] + [(99, block[2][1].replace(b'"index":0', b'"index":"0"', 1))] + block[3:]
    assert bad[2][1] != block[2][1]
    assert read_jsonl._parsed(bad) is None and read_jsonl._parsed(bad, threads=True) is None


@pytest.mark.parametrize("ahead", [True, False])
def test_odd_lines_read_ahead_or_not_give_the_reference_traces_and_errors(tmp_path, monkeypatch, ahead):
    """Blank lines, CRLF, a line past the length limit and a truncated line, in blocks that end inside
    lines, read ahead (a block at a time, parsed on Arrow's threads) or not: the reference's traces, and
    its error where it reaches the bad line."""
    import threading

    import sim.util.jsonl

    monkeypatch.setattr(readahead, "READ_AHEAD", ahead)
    monkeypatch.setattr(read_jsonl, "JSONL_BLOCK", 5_000)
    lines = [
        json.dumps({**_record(), "trace_id": f"t{i}"}, ensure_ascii=False, separators=(",", ":"))
        for i in range(9)
    ]
    limit = max(map(len, lines)) + 100
    monkeypatch.setattr(sim.util.jsonl, "MAX_DOCUMENT_BYTES", limit)
    good = tmp_path / "good.jsonl"
    good.write_text(
        "\n".join(lines[:3]) + "\n\n \n" + lines[3] + "\r\n" + "\n".join(lines[4:]), encoding="utf-8"
    )
    got = read(good)
    assert_same(got, reference(good))
    assert [t.trace_id for t in got] == [f"t{i}" for i in range(9)]
    assert [fast(t) for t in got] == [True] * 3 + [False] + [True] * 5  # the CRLF line: the reference's
    long = tmp_path / "long.jsonl"
    long.write_text("\n".join([*lines[:4], "x" * (limit + 1), *lines[4:]]) + "\n", encoding="utf-8")
    message = _error(lambda: reference(long))
    assert "line 5" in message and _error(lambda: read(long)) == message
    cut = tmp_path / "cut.jsonl"
    cut.write_text("\n".join([*lines[:6], lines[6][:-40], *lines[7:]]) + "\n", encoding="utf-8")
    got = []
    with pytest.raises(TraceError) as exc:
        for t in iter_jsonl(cut):
            got.append(t.trace_id)
    assert str(exc.value) == _error(lambda: reference(cut)) and "line 7" in str(exc.value)
    assert got == [f"t{i}" for i in range(6)]
    assert [t.name for t in threading.enumerate() if t.name.startswith("ctxsim-")] == []  # all stopped
