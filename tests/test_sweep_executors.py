"""Who does a sweep's work: workers write their own parts and send back only keys, take the traces'
hashes from the parent instead of hashing again, and give byte-identical parts and results.parquet for
any worker count; a rerun of a finished sweep stops at the receipt (no part read, no setting composed,
no trace loaded); ``executor=`` is a closed choice and importing ctxsim never imports Ray."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from scenarios.swe_like import generate_suite
from sim.importers import load_paths
from sim.sweep.execute import run_sweep
from sim.sweep.keys import encoded_hashes, run_key, run_keys
from sim.sweep.spec import SweepSpec, spec_from_args
from sim.trace.io import write_traces
from sim.util.errors import ConfigError, UnknownNameError
from sim.util.paths import EMBEDDED_SUITE, REPO

GRID = ("policy.n=1,3,10",)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("corpus") / "small.jsonl"
    traces = list(load_paths([EMBEDDED_SUITE / "closed_loop.jsonl"])) + generate_suite(7, 4)  # 8 runs
    write_traces(traces, out)
    return out


def _spec(corpus: Path, out: Path, **kw) -> SweepSpec:
    base = dict(
        policy="observation_masking",
        grid=GRID,
        scenario=str(corpus),
        pricing="claude-sonnet-4-5",
        results=str(out),
        chunk_size=5,
    )
    base.update(kw)
    return SweepSpec(**base)


def _tree(out: Path) -> dict[str, bytes]:
    """Every part and results.parquet, by name, as bytes."""
    files = {p.name: p.read_bytes() for p in sorted((out / "parts").glob("part-*.parquet"))}
    files["results.parquet"] = (out / "results.parquet").read_bytes()
    return files


# ----------------------------------------------------------------------------------------------- keys
def test_run_keys_are_run_key_byte_for_byte():
    hashes = ["sha256:" + "ab" * 32, "sha256:" + "01" * 32, 'odd "quoted" \\ hash é']
    cases = [
        ("seed_engine", {"context_token_limit": 16000, "keep_recent_tokens": None}, {"window": 200000}, None),
        # a knob whose value holds the very text the key's template is cut at, and a nested trace_hash
        ("x", {"note": '"trace_hash":""', "deep": {"trace_hash": "", "z": [1, 2.5]}}, {}, "gpt-4o"),
        ("ünï", {"a": "ß", "b": True}, {"on_missing": "refetch"}, "claude-sonnet-4-5"),
    ]
    for policy, params, model, pricing in cases:
        want = [run_key(h, policy, params, model, pricing, "9.9") for h in hashes]
        assert run_keys(hashes, policy, params, model, pricing, "9.9") == want
        assert run_keys(hashes, policy, params, model, pricing, "9.9", encoded_hashes(hashes)) == want


# ------------------------------------------------------------------------------------ workers and bytes
def test_parts_and_results_are_the_same_bytes_for_any_worker_count(corpus, tmp_path):
    one = _tree_of(run_sweep(_spec(corpus, tmp_path / "w1"), workers=1, progress=False))
    two = _tree_of(run_sweep(_spec(corpus, tmp_path / "w2"), workers=2, progress=False))
    assert len(one) == 3 * 2 + 1  # 8 traces in chunks of 5: 2 parts per setting, and results.parquet
    assert one == two
    assert pq.read_metadata(tmp_path / "w1" / "results.parquet").num_rows == 24


def _tree_of(results: Path) -> dict[str, bytes]:
    return _tree(results.parent)


SPY = """
import os, sys
import sim.results.store as store
import sim.trace.codec as traceio
import sim.trace.io as trace_files
import sim.trace.columns as columns
import sim.engine.common as engine
import sim.engine.loop as loop
import sim.engine.model as model
import sim.sweep.execute as s

parent = os.getpid()
log = {log!r}


def note(what):
    with open(log, "a", encoding="utf-8") as f:
        f.write(f"{{what}} {{os.getpid()}}\\n")


real_write_part, real_hash = store.write_part, traceio.trace_hash


def write_part(*a, **kw):
    note("part")
    return real_write_part(*a, **kw)


def trace_hash(t):
    note("hash")
    return real_hash(t)


real_text_hash = columns.text_hash


def text_hash(pieces):  # a canonical file's traces are hashed as they are read as columns
    note("hash")
    return real_text_hash(pieces)


store.write_part = write_part
for m in (traceio, trace_files, engine, loop, model):
    m.trace_hash = trace_hash
columns.text_hash = text_hash
spec = s.SweepSpec(policy="observation_masking", grid={grid!r}, scenario={corpus!r},
                   pricing="claude-sonnet-4-5", results={out!r}, chunk_size=5)
s.run_sweep(spec, workers=2, progress=False)
print(parent)
"""


def test_forked_workers_write_their_parts_and_never_hash_a_trace(corpus, tmp_path):
    """The parent hashes each trace once while planning; every part is written by a worker (6 chunks, 6
    parts, none by the parent) and no worker computes a trace hash. With the file's record of hashes
    (``sim.trace.storedhashes``) nobody computes one."""
    plain = tmp_path / "plain" / corpus.name
    plain.parent.mkdir()
    plain.write_bytes(corpus.read_bytes())  # without the record: the parent hashes each trace
    for scenario, hashed in ((plain, 8), (corpus, 0)):
        log = tmp_path / f"log{hashed}.txt"
        out = tmp_path / f"s{hashed}"
        code = SPY.format(log=str(log), grid=GRID, corpus=str(scenario), out=str(out))
        proc = subprocess.run(
            [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300, check=False
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        parent = proc.stdout.strip()
        events = [line.split() for line in log.read_text(encoding="utf-8").splitlines()]
        hashes = [pid for what, pid in events if what == "hash"]
        parts = [pid for what, pid in events if what == "part"]
        assert hashes == [parent] * hashed  # one per trace, in the parent
        assert len(parts) == 6 and parent not in parts


def test_a_worker_that_loads_the_scenario_takes_the_parents_hashes(corpus, tmp_path, monkeypatch):
    """A worker that did not inherit the traces (spawned, a Ray task) loads them, checks the scenario's
    bytes against the parent's digest and uses the parent's hashes: no trace is hashed. If the file
    changed after planning, the chunk stops with exit 2 instead of running other traces under old keys."""
    import sim.engine.common as engine
    import sim.engine.loop as loop
    import sim.engine.model as model
    import sim.sweep.plan as sweep_plan
    import sim.sweep.scenario as scenario
    import sim.sweep.unit_runner as runner
    import sim.trace.codec as traceio
    import sim.trace.io as trace_files

    local = tmp_path / "corpus.jsonl"
    local.write_bytes(corpus.read_bytes())
    runs = sweep_plan.plan(_spec(local, tmp_path / "p"), log=lambda msg: None)
    chunk = runs.chunks(())[0]
    assert chunk.scenario_digest is not None and len(chunk.runs) == 5
    scenario._TRACES.clear()  # as a process that did not fork from the parent

    def no_hash(t):
        raise AssertionError("a worker hashed a trace")

    for mod in (traceio, trace_files, engine, loop, model):
        monkeypatch.setattr(mod, "trace_hash", no_hash)
    rows = runner.run_chunk(chunk)
    assert [r["run_key"] for r in rows] == [key for _, key, _ in chunk.runs]
    assert [r["trace_hash"] for r in rows] == [h for _, _, h in chunk.runs]

    scenario._TRACES.clear()
    local.write_bytes(corpus.read_bytes() + b"\n")  # a blank line more: same traces, other bytes
    with pytest.raises(ConfigError, match="changed during the sweep"):
        runner.run_chunk(chunk)


# ------------------------------------------------------------------------------------------------ merge
def _row_merge(parts_dir: Path, labels=None) -> bytes:
    """The merge as it was, through Python rows: every part's rows, one per key, sorted, labelled."""
    import sim.results.store as store

    rows: dict[str, dict] = {}
    for path in sorted(parts_dir.glob("part-*.parquet")):
        for row in pq.read_table(path).to_pylist():
            rows.setdefault(row["run_key"], row)
    out = [rows[k] for k in sorted(rows)]
    for row in out:
        if labels is not None:
            row["scenario"], row["setting"] = labels(row["run_key"])
    target = parts_dir.parent / "row-merge.parquet"
    store.write_table(out, target)
    return target.read_bytes()


def test_the_arrow_merge_writes_the_row_merges_bytes(tmp_path):
    """Parts whose columns are typed differently (empty in one part, ints in one and floats in another)
    merge to the bytes the row merge writes: the types come out as table(rows) infers them."""
    import sim.results.store as store

    parts_dir = tmp_path / "s" / "parts"
    key = [f"{i:064x}" for i in range(7)]

    def row(i, a, b, c):
        return {"run_key": key[i], "trace_hash": f"h{i}", "policy": "p", "a": a, "b": b, "c": c}

    first = [row(5, 1, 2, None), row(0, None, 3, None), row(3, 4, 5, None)]
    second = [row(1, None, 2.5, None), row(6, None, 1.0, None)]
    third = [row(2, 7, None, None), row(4, 8, 9, None), row(3, 4, 5, None)]  # key 3 held twice
    for rows in (first, second, third):
        for r in rows:
            r.update(scenario="as-written", setting="s")
        store.write_part(parts_dir, rows)
    parts, _ = store.scan(tmp_path / "s", print)
    pieces, missing = store.collect(parts, key, print)
    assert missing == set() and sum(p.num_rows for p in pieces) == 7

    def labels(k: str) -> tuple[str, str]:
        return ("scenario-x", f"n={int(k, 16)}")

    table = store.merged(pieces, labels)
    assert table.column("run_key").to_pylist() == key
    assert [str(table.schema.field(c).type) for c in "abc"] == ["int64", "double", "null"]
    store.write_table(table, tmp_path / "arrow.parquet")
    assert (tmp_path / "arrow.parquet").read_bytes() == _row_merge(parts_dir, labels)


def test_a_sweeps_results_are_the_row_merges_bytes(corpus, tmp_path):
    results = run_sweep(_spec(corpus, tmp_path / "m", policy="seed_engine", grid=()), progress=False)
    assert results.read_bytes() == _row_merge(tmp_path / "m" / "parts")


# ----------------------------------------------------------------------------------------------- resume
def _forbid_work(monkeypatch) -> list[tuple]:
    """Fail on composing a setting, loading a trace or writing a table; record every Parquet read."""
    import pyarrow.parquet as pqm

    import sim.results.store as store
    import sim.sweep.plan as sweep_plan
    import sim.sweep.scenario as scenario

    reads: list[tuple] = []
    monkeypatch.setattr(sweep_plan, "grid_settings", lambda *a: pytest.fail("a setting was composed"))
    monkeypatch.setattr(scenario, "load_scenario", lambda *a: pytest.fail("the scenario was loaded"))
    monkeypatch.setattr(store, "write_table", lambda *a: pytest.fail("a table was written"))
    real_read, real_read_table = pqm.ParquetFile.read, pqm.read_table
    monkeypatch.setattr(
        pqm.ParquetFile, "read", lambda self, *a, **k: reads.append(a) or real_read(self, *a, **k)
    )
    monkeypatch.setattr(pqm, "read_table", lambda *a, **k: reads.append(a) or real_read_table(*a, **k))
    return reads


def test_rerun_of_a_finished_sweep_stops_at_the_receipt(corpus, tmp_path, monkeypatch, capsys):
    out = tmp_path / "r"
    spec = _spec(
        corpus,
        out,
        policy="seed_engine",
        grid=("policy.context_token_limit=32000", "policy.keep_recent_tokens=2000,40000"),
        skip_invalid=True,
    )
    results = run_sweep(spec, progress=False)
    first = capsys.readouterr().err
    skipped = "skipping setting policy.context_token_limit=32000 policy.keep_recent_tokens=40000"
    assert skipped in first
    receipt = json.loads((out / "results.receipt.json").read_text(encoding="utf-8"))
    assert receipt["total"] == 8 and receipt["repeats"] == 0 and len(receipt["sources"]) == 2
    before = (results.read_bytes(), results.stat().st_mtime_ns, _tree(out))
    reads = _forbid_work(monkeypatch)
    assert run_sweep(spec, progress=False) == results
    err = capsys.readouterr().err
    assert reads == []  # not one Parquet read: neither a part nor results.parquet
    assert (results.read_bytes(), results.stat().st_mtime_ns, _tree(out)) == before
    # the notes a full rerun gives, in the same words
    assert skipped in err and f"resuming: 8 of 8 runs already in {out / 'parts'}" in err


@pytest.mark.parametrize("change", ["touch a part", "remove a part", "results.parquet", "other plan"])
def test_the_receipt_vouches_for_nothing_that_changed(corpus, tmp_path, monkeypatch, change):
    """Each change sends the rerun down the full path (it composes the settings again) and the
    results are those of a fresh sweep; the next rerun stops at the new receipt."""
    import sim.sweep.plan as sweep_plan

    out = tmp_path / "c"
    spec = _spec(corpus, out)
    fresh = run_sweep(spec, progress=False).read_bytes()
    part = sorted((out / "parts").glob("part-*.parquet"))[0]
    if change == "touch a part":
        os.utime(part)
    elif change == "remove a part":
        part.unlink()
    elif change == "results.parquet":
        (out / "results.parquet").write_bytes(b"not parquet")
    else:
        run_sweep(_spec(corpus, out, grid=("policy.n=1,3",)), progress=False)
    composed: list[int] = []
    real = sweep_plan.grid_settings
    monkeypatch.setattr(sweep_plan, "grid_settings", lambda *a: composed.append(1) or real(*a))
    assert run_sweep(spec, progress=False).read_bytes() == fresh and composed == [1]
    assert run_sweep(spec, progress=False).read_bytes() == fresh and composed == [1]


# ----------------------------------------------------------------------------------------------- words
def test_executor_is_a_closed_choice():
    spec, workers = spec_from_args(["policy=raw", "executor=ray", "ray.address=auto", "workers=3"])
    assert (spec.executor, spec.ray_address, workers) == ("ray", "auto", 3)
    spec, _ = spec_from_args(["policy=raw", "executor=ray", "ray.address=ray://head.example:10001"])
    assert spec.ray_address == "ray://head.example:10001"
    assert spec_from_args(["policy=raw"])[0].executor == "pool"
    with pytest.raises(UnknownNameError) as exc:
        spec_from_args(["policy=raw", "executor=rey"])
    assert str(exc.value) == "unknown executor 'rey'; registered: pool, ray; did you mean 'ray'?"
    with pytest.raises(ConfigError, match="'ray.address=auto' needs executor=ray"):
        spec_from_args(["policy=raw", "ray.address=auto"])
    with pytest.raises(ConfigError, match="expected auto, HOST:PORT or ray://HOST:PORT"):
        spec_from_args(["policy=raw", "executor=ray", "ray.address=sim.sweep.rayexec:_task"])


def test_cli_unknown_executor_exits_2_with_the_choices(corpus, tmp_path):
    words = ["sweep", "policy=raw", f"scenario={corpus}", f"results.path={tmp_path / 'x'}", "executor=dask"]
    proc = subprocess.run(
        [sys.executable, "-m", "sim.cli", *words], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2
    assert "unknown executor 'dask'; registered: pool, ray" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "x").exists()


def test_importing_ctxsim_does_not_import_ray():
    code = "import sys, sim, sim.cli, sim.sweep.execute, sim.results.store; print('ray' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "False", proc.stderr


def test_a_receipt_vouches_only_for_a_file_that_reads_nothing_beside_it(tmp_path):
    """A canonical trace file is digested; a file of another format is not (its importer may read a file
    beside it: SWE-agent's args.yaml sets the recorded policy), so no receipt can skip its rerun."""
    from scenarios.swe_like import generate_run
    from sim.sweep.plandigest import scenario_digest
    from sim.trace.io import write_traces

    canonical = tmp_path / "runs.jsonl"
    write_traces([generate_run(7, 0)], canonical)
    assert scenario_digest(str(canonical)) is not None
    traj = tmp_path / "run.traj"
    traj.write_text('{"trajectory": []}', encoding="utf-8")
    (tmp_path / "args.yaml").write_text("agent: {}\n", encoding="utf-8")
    assert scenario_digest(str(traj)) is None
    assert scenario_digest(str(tmp_path)) is not None  # a folder's digest holds args.yaml itself


# ------------------------------------------------------------------------------------ the first merge
def _part_reads(monkeypatch) -> list[str]:
    """Record every whole-file Parquet read of a part (``ParquetFile.read`` of a ``part-*`` file)."""
    import pyarrow.parquet as pqm

    reads: list[str] = []
    real_init, real_read = pqm.ParquetFile.__init__, pqm.ParquetFile.read

    def init(self, source, *a, **k):
        self._spy_name = os.path.basename(str(source))
        real_init(self, source, *a, **k)

    def read(self, *a, **k):
        if getattr(self, "_spy_name", "").startswith("part-") and not (a or k.get("columns")):
            reads.append(self._spy_name)
        return real_read(self, *a, **k)

    monkeypatch.setattr(pqm.ParquetFile, "__init__", init)
    monkeypatch.setattr(pqm.ParquetFile, "read", read)
    return reads


@pytest.mark.parametrize("workers", [1, 2])
def test_a_first_sweep_merges_from_the_tables_it_wrote(corpus, tmp_path, monkeypatch, workers):
    """The merge of a first sweep reads no part back (each writer hands back the table it wrote), and
    results.parquet is byte for byte the merge that reads every part (``merge_parts``) and the row merge."""
    from sim.sweep.execute import merge_parts

    out = tmp_path / f"w{workers}"
    spec = _spec(corpus, out, policy="seed_engine", grid=("policy.context_token_limit=24000,32000",))
    reads = _part_reads(monkeypatch)
    results = run_sweep(spec, workers=workers, progress=False)
    assert reads == []
    assert len(list((out / "parts").glob("part-*.parquet"))) == 4
    first = results.read_bytes()
    monkeypatch.undo()
    for name in ("results.parquet", "results.receipt.json"):
        (out / name).unlink()
    assert merge_parts(out).read_bytes() == first
    labels = {r["run_key"]: (r["scenario"], r["setting"]) for r in pq.read_table(results).to_pylist()}
    assert _row_merge(out / "parts", labels.__getitem__) == first


def test_a_part_changed_since_it_was_written_is_read_again(tmp_path, monkeypatch):
    """A part's table held in memory stands for the file only while the file is the one written: another
    writer's file under the same name (same keys) is read, its rows are the ones merged."""
    import time

    import sim.results.store as store

    parts_dir = tmp_path / "parts"
    rows = [{"run_key": f"{i:064x}", "trace_hash": f"h{i}", "policy": "p", "x": i} for i in range(3)]
    part = store.write_part(parts_dir, rows)
    assert part.table is not None and part.table.column("x").to_pylist() == [0, 1, 2]
    reads = _part_reads(monkeypatch)
    pieces, missing = store.collect([part], part.keys, print)
    assert reads == [] and missing == set() and pieces[0].column("x").to_pylist() == [0, 1, 2]
    time.sleep(0.01)
    store.write_table([{**r, "x": 10 * r["x"]} for r in rows], part.path)  # the same name, other bytes
    pieces, missing = store.collect([part], part.keys, print)
    assert reads == [part.path.name] and pieces[0].column("x").to_pylist() == [0, 10, 20]
    part.path.unlink()
    assert store.collect([part], part.keys, print) == ([], set(part.keys))  # gone: its runs are redone


def test_a_part_travels_with_its_table(tmp_path):
    import pickle

    import sim.results.store as store

    rows = [{"run_key": f"{i:064x}", "trace_hash": "h", "policy": "p", "x": None, "y": 0.5} for i in range(2)]
    part = store.write_part(tmp_path, rows)
    back = pickle.loads(pickle.dumps(part))
    assert back == part and back.path == part.path and back.identity == part.identity
    assert back.table.schema.equals(part.table.schema, check_metadata=True) and back.table.equals(part.table)
    assert back.table.equals(pq.read_table(part.path))
    scanned = store.Part(part.path, part.keys, part.mtime_ns, part.identity)
    assert pickle.loads(pickle.dumps(scanned)).table is None


def test_file_sha256_is_the_sha256_of_the_bytes(tmp_path):
    import hashlib

    import sim.results.store as store

    path = tmp_path / "f.bin"
    data = bytes(range(256)) * 5000  # more than one read block
    path.write_bytes(data)
    assert store.file_sha256(path) == hashlib.sha256(data).hexdigest()


# ------------------------------------------------------------------------------- planning from a record
def test_plan_takes_a_canonical_files_recorded_hashes_without_loading_it(corpus, tmp_path, monkeypatch):
    """With a valid record of its hashes (``sim.trace.storedhashes``) a canonical file is not loaded to plan,
    and the plan is the one loading gives; without a record, with a stale one, or a folder, it loads."""
    import shutil

    import sim.sweep.plan as sweep_plan
    import sim.sweep.scenario as scenario
    from sim.trace.storedhashes import record_path

    plain = tmp_path / "plain" / corpus.name  # the same bytes without the record: loaded and hashed
    plain.parent.mkdir()
    shutil.copyfile(corpus, plain)
    scenario._TRACES.clear()
    want = sweep_plan.plan(_spec(plain, tmp_path / "a"), log=lambda _m: None)

    kept = tmp_path / "kept" / corpus.name
    kept.parent.mkdir()
    shutil.copyfile(corpus, kept)
    shutil.copyfile(record_path(corpus), record_path(kept))
    loads: list[str] = []
    real = scenario.load_scenario
    monkeypatch.setattr(scenario, "load_scenario", lambda s: loads.append(s) or real(s))
    scenario._TRACES.clear()
    got = sweep_plan.plan(_spec(kept, tmp_path / "b"), log=lambda _m: None)
    assert loads == []
    assert [[run for run in runs] for _, runs in got.settings] == [[r for r in rs] for _, rs in want.settings]

    kept.write_bytes(corpus.read_bytes() + b"\n")  # other bytes: the record is stale, the file is loaded
    again = sweep_plan.plan(_spec(kept, tmp_path / "c"), log=lambda _m: None)
    assert loads == [str(kept)] and again.keys() == want.keys()
    scenario._TRACES.clear()
    sweep_plan.plan(_spec(kept.parent, tmp_path / "d"), log=lambda _m: None)  # a folder: loaded
    assert loads == [str(kept), str(kept.parent)]


def test_key_labels_answer_as_the_first_setting_naming_a_key():
    """A key listed twice keeps its first label, for one key and for a whole column of keys alike; a
    column holding a key the plan does not hold gets no labels (the caller then says not current)."""
    import pyarrow as pa

    from sim.results.store import KeyLabels

    keys = ["c", "a", "b", "a", "d", "c"]
    labels = KeyLabels(keys, [0, 0, 1, 1, 2, 2], [("s", "x=1"), ("s", "x=2"), ("t", "x=3")])
    asked = ["a", "b", "c", "d", "a"]
    want = [("s", "x=1"), ("s", "x=2"), ("s", "x=1"), ("t", "x=3"), ("s", "x=1")]
    assert [labels(k) for k in asked] == want
    columns = labels.columns(pa.chunked_array([asked[:2], asked[2:]]))
    assert [c.to_pylist() for c in columns] == [[w[0] for w in want], [w[1] for w in want]]
    assert labels.columns(pa.chunked_array([["a", "e"]])) is None
    assert labels.columns(pa.chunked_array([["a", None]])) is None
    with pytest.raises(KeyError):
        labels("e")
