"""The results store under concurrency and damage: writers' temporary files, two sweeps on one path,
Hydra's joblib launcher at chunk_size=1, damaged or foreign parts, fsync around renames, and a resume that
reads only run keys and skips a merge that would write the same file.

Concurrency trials run real processes. A ``sitecustomize`` on their PYTHONPATH makes every rename of a
part's temporary file wait 20 ms, so each writer's temporaries exist long enough for another writer to
trip over them (without it the race still exists, but most trials of this size miss it)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from scenarios.swe_like import generate_suite
from sim.importers import load_paths
from sim.sweep.execute import merge_parts, run_sweep
from sim.sweep.spec import SweepSpec
from sim.trace.io import write_traces
from sim.util.paths import EMBEDDED_SUITE, REPO

TRIALS = 5
SLOW_RENAME = """
import os, time
_replace = os.replace
def _slow_replace(src, dst, *args, **kwargs):
    if os.path.basename(str(src)).startswith(".part-") and str(src).endswith(".tmp"):
        time.sleep(0.02)
    return _replace(src, dst, *args, **kwargs)
os.replace = _slow_replace
"""


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("corpus") / "small.jsonl"
    traces = list(load_paths([EMBEDDED_SUITE / "closed_loop.jsonl"])) + generate_suite(7, 4)  # 8 runs
    write_traces(traces, out)
    return out


@pytest.fixture(scope="module")
def slow_env(tmp_path_factory) -> dict[str, str]:
    hook = tmp_path_factory.mktemp("hook")
    (hook / "sitecustomize.py").write_text(SLOW_RENAME, encoding="utf-8")
    path = os.pathsep.join([str(hook), str(REPO), os.environ.get("PYTHONPATH", "")])
    return dict(os.environ, PYTHONPATH=path)


def _spec(corpus: Path, out: Path, **kw) -> SweepSpec:
    base = dict(
        policy="observation_masking",
        grid=("policy.n=1,3,10",),
        scenario=str(corpus),
        pricing="claude-sonnet-4-5",
        results=str(out),
        chunk_size=5,
    )
    base.update(kw)
    return SweepSpec(**base)


def _grid(values) -> str:
    return "policy.n=" + ",".join(str(v) for v in values)


def _read(path: Path) -> pd.DataFrame:
    return pd.read_parquet(path)


def _temps(folder: Path) -> list[Path]:
    return sorted(folder.glob(".*.tmp")) if folder.is_dir() else []


def _parts(out: Path) -> list[Path]:
    return sorted((out / "parts").glob("part-*.parquet"))


@pytest.fixture(scope="module")
def clean(corpus, tmp_path_factory):
    """Results of sweeps run alone in fresh folders, by grid: what every concurrent trial must match."""
    root = tmp_path_factory.mktemp("clean")
    cache: dict[str, pd.DataFrame] = {}

    def get(grid: str) -> pd.DataFrame:
        if grid not in cache:
            path = run_sweep(_spec(corpus, root / str(len(cache)), grid=(grid,)), progress=False)
            cache[grid] = _read(path)
        return cache[grid]

    return get


@pytest.fixture(scope="module")
def finished(corpus, tmp_path_factory) -> Path:
    """A finished sweep of the default spec; tests work on copies (timestamps kept)."""
    out = tmp_path_factory.mktemp("finished") / "s"
    run_sweep(_spec(corpus, out), progress=False)
    return out


def _copy(finished: Path, dest: Path, merged: bool = True) -> Path:
    shutil.copytree(finished, dest)
    if not merged:  # as a multirun's jobs leave it, before the final merge
        (dest / "results.parquet").unlink()
    return dest


# ----------------------------------------------------------------------------------- writers' temporaries
def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _temp_name(target: str, kernel: str, ns: int, pid: int) -> str:
    return f".{target}.{kernel}~{ns}~{pid}.abc12345.tmp"


def test_temporary_names_carry_the_writer_and_only_stale_ones_go(corpus, tmp_path):
    from sim.util import atomicfile

    kernel, ns = atomicfile._KERNEL, atomicfile._PIDNS
    with atomicfile.atomic_path(tmp_path / "x.parquet") as tmp:
        assert f"~{ns}~{os.getpid()}." in tmp.name and tmp.name.startswith(".x.parquet.")
        assert not atomicfile.is_stale(tmp)  # this process's own
        tmp.write_bytes(b"x")
    assert (tmp_path / "x.parquet").read_bytes() == b"x" and not _temps(tmp_path)

    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        out = tmp_path / "s"
        parts = out / "parts"
        parts.mkdir(parents=True)
        dead = _dead_pid()
        keep = [
            _temp_name("part-a.parquet", kernel, ns, live.pid),  # a writer still running
            _temp_name("part-b.parquet", "f" * 32, ns, dead),  # another machine, or before a reboot
            _temp_name("part-c.parquet", kernel, ns + 1, dead),  # another container's pid namespace
            ".part-d.parquet.abc12345.tmp",  # no writer id (older ctxsim): cannot be proven stale
        ]
        gone = [_temp_name("part-e.parquet", kernel, ns, dead)]
        for name in keep + gone:
            (parts / name).write_bytes(b"partial")
        (out / _temp_name("results.parquet", kernel, ns, dead)).write_bytes(b"partial")
        (out / _temp_name("results.parquet", kernel, ns, live.pid)).write_bytes(b"partial")
        assert atomicfile.is_stale(parts / gone[0])
        assert not any(atomicfile.is_stale(parts / n) for n in keep)

        run_sweep(_spec(corpus, out), progress=False)
        assert [p.name for p in _temps(parts)] == sorted(keep)
        assert [p.name for p in _temps(out)] == [_temp_name("results.parquet", kernel, ns, live.pid)]
        merge_parts(out)
        assert [p.name for p in _temps(parts)] == sorted(keep)
    finally:
        live.kill()
        live.wait()


# ------------------------------------------------------------------------------------------ concurrency
WRITER = """
import pathlib, sys, time
import sim.sweep.execute as s
from sim.sweep.plan import plan
from sim.sweep.spec import SweepSpec
root = pathlib.Path({root!r})
def spec(trial):
    return SweepSpec(policy="observation_masking", grid=({grid!r},), scenario={corpus!r},
                       pricing="claude-sonnet-4-5", results=str(root / f"t{{trial}}"), chunk_size={chunk})
plan(spec(0))  # imports, Hydra and the traces loaded before the first start line
for trial in range({trials}):
    (root / f"ready-{{trial}}-{name}").touch()
    while not (root / f"go-{{trial}}").exists():
        time.sleep(0.002)
    s.run_sweep(spec(trial), progress=False)
"""


@pytest.mark.slow  # two writer processes, 5 trials each, renames slowed down
def test_two_sweeps_on_one_path_finish_with_the_union(corpus, tmp_path, slow_env, clean):
    """Overlapping grids with different chunk sizes: 2 settings in common, written in differently cut
    parts by the two writers. Both succeed; the store holds the union; each sweep's rows are the ones it
    gets alone. Each writer process runs the 5 trials one after another (one start-up, not five)."""
    a, b = _grid([1, 2, 3, 4]), _grid([3, 4, 5, 6])
    procs = []
    for name, grid, chunk in (("a", a, 1), ("b", b, 2)):
        code = WRITER.format(
            root=str(tmp_path), trials=TRIALS, grid=grid, corpus=str(corpus), chunk=chunk, name=name
        )
        procs.append(
            subprocess.Popen([sys.executable, "-c", code], cwd=REPO, env=slow_env, stderr=subprocess.PIPE)
        )
    deadline = time.monotonic() + 300
    for trial in range(TRIALS):
        while not all((tmp_path / f"ready-{trial}-{n}").exists() for n in "ab"):
            if any(p.poll() is not None for p in procs):
                break  # a writer died: its status and message are checked below
            assert time.monotonic() < deadline
            time.sleep(0.005)
        (tmp_path / f"go-{trial}").touch()
    results = [(p.wait(timeout=300), p.stderr.read().decode()) for p in procs]
    assert [rc for rc, _ in results] == [0, 0], [err[-2000:] for _, err in results]
    for trial in range(TRIALS):
        out = tmp_path / f"t{trial}"
        assert not _temps(out / "parts") and not _temps(out)
        last = _read(out / "results.parquet")  # the last finisher's
        assert last.equals(clean(a)) or last.equals(clean(b))
        pd.testing.assert_frame_equal(_read(merge_parts(out)), clean(_grid(range(1, 7))))
        # either sweep run again does no run and rewrites results.parquet with its own rows
        again = run_sweep(_spec(corpus, out, grid=(a,)), progress=False)
        pd.testing.assert_frame_equal(_read(again), clean(a))


MULTIRUNS = """
import sys
from sim.cli import main
words = {words!r}
for trial in range({trials}):
    rc = main(["sweep", "-m", *words, f"results.path={root}/j{{trial}}"])
    print(f"trial {{trial}}: exit {{rc}}", file=sys.stderr, flush=True)
"""


@pytest.mark.slow  # 5 joblib multiruns of 32 jobs each, about 45 s
def test_joblib_multirun_chunk_size_1(corpus, tmp_path, slow_env, clean):
    """`ctxsim sweep -m` with the joblib launcher (2 worker processes, reused across the 5 multiruns of
    one process), one run per part: jobs scan the parts folder while other jobs write there."""
    grid = _grid([1, 2, 3, 4])
    words = ["policy=observation_masking", grid, f"scenario={corpus}", "pricing=claude-sonnet-4-5"]
    words += ["chunk_size=1", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2"]
    code = MULTIRUNS.format(words=words, trials=TRIALS, root=str(tmp_path))
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=slow_env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [f"trial {t}: exit 0" in proc.stderr for t in range(TRIALS)] == [True] * TRIALS, proc.stderr[
        -3000:
    ]
    for trial in range(TRIALS):
        out = tmp_path / f"j{trial}"
        assert len(_parts(out)) == 4 * 8 and not _temps(out / "parts")
        assert _read(out / "results.parquet").equals(clean(grid))


# ------------------------------------------------------------------------------------------------ damage
def _not_parquet(path: Path) -> None:
    path.write_text("run_key,policy\nabc,raw\n", encoding="utf-8")


def _truncated(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _empty(path: Path) -> None:
    path.write_bytes(b"")


def _no_run_key(path: Path) -> None:
    pq.write_table(pq.read_table(path).drop_columns(["run_key"]), path)


def _run_key_not_text(path: Path) -> None:
    t = pq.read_table(path)
    keys = pa.array(range(t.num_rows), pa.int64())
    pq.write_table(t.set_column(t.schema.get_field_index("run_key"), "run_key", keys), path)


def _foreign_table(path: Path) -> None:  # a Parquet file with run keys but none of a result's columns
    keys = pq.read_table(path, columns=["run_key"]).column(0)
    pq.write_table(pa.table({"run_key": keys, "value": pa.array(range(len(keys)))}), path)


def _bad_key_text(path: Path) -> None:
    t = pq.read_table(path)
    keys = pa.array(["not-a-key"] * t.num_rows)
    pq.write_table(t.set_column(t.schema.get_field_index("run_key"), "run_key", keys), path)


DAMAGE = {
    "not-parquet": (_not_parquet, "unreadable Parquet"),
    "truncated": (_truncated, "unreadable Parquet"),
    "empty": (_empty, "unreadable Parquet"),
    "no-run-key": (_no_run_key, "no column run_key"),
    "run-key-not-text": (_run_key_not_text, "column run_key holds int64"),
    "foreign-table": (_foreign_table, "no column trace_hash, policy"),
    "bad-key-text": (_bad_key_text, "is not a run key"),
}


def _count_runs(monkeypatch) -> list[int]:
    import sim.sweep.unit_runner as runner

    ran: list[int] = []
    orig = runner.run_chunk
    monkeypatch.setattr(runner, "run_chunk", lambda chunk: ran.append(len(chunk.runs)) or orig(chunk))
    return ran


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_damaged_part_is_quarantined_and_its_runs_redone(
    corpus, finished, tmp_path, monkeypatch, capsys, clean, case
):
    damage, reason = DAMAGE[case]
    out = _copy(finished, tmp_path / "d")
    victim = _parts(out)[0]
    keys = pq.read_table(victim, columns=["run_key"]).column(0).to_pylist()
    damage(victim)
    capsys.readouterr()
    ran = _count_runs(monkeypatch)
    df = _read(run_sweep(_spec(corpus, out), progress=False))
    err = capsys.readouterr().err
    moved = out / "parts" / "quarantine" / victim.name
    assert f"warning: {victim}: " in err and reason in err and f"moved to {moved}" in err
    assert moved.is_file() and sum(ran) == len(keys)
    pd.testing.assert_frame_equal(df, clean("policy.n=1,3,10"))
    if case == "truncated":  # the same damage again: the earlier quarantined file is kept
        damage(victim)
        run_sweep(_spec(corpus, out), progress=False)
        assert moved.is_file() and (moved.parent / f"{victim.stem}.1.parquet").is_file()


def test_foreign_file_beside_the_parts_is_set_aside(corpus, finished, tmp_path, capsys):
    out = _copy(finished, tmp_path / "f")
    first = out / "results.parquet"
    before = first.read_bytes()
    stray = out / "parts" / "part-notes.parquet"
    pq.write_table(pa.table({"x": [1, 2]}), stray)
    capsys.readouterr()
    run_sweep(_spec(corpus, out), progress=False)
    err = capsys.readouterr().err
    assert f"warning: {stray}: not a results part: no column run_key" in err
    assert not stray.exists() and (out / "parts" / "quarantine" / stray.name).is_file()
    assert first.read_bytes() == before


def test_cli_sweep_warns_and_exits_0_on_a_damaged_part(corpus, tmp_path):
    from sim.cli import main

    out = tmp_path / "c"
    words = ["sweep", "policy=observation_masking", "policy.n=1,3", f"scenario={corpus}"]
    words.append(f"results.path={out}")
    assert main(words) == 0
    victim = _parts(out)[-1]
    _truncated(victim)
    proc = subprocess.run(
        [sys.executable, "-m", "sim.cli", *words], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert f"ctxsim: sweep: warning: {victim}: unreadable Parquet" in proc.stderr
    assert "Traceback" not in proc.stderr


def _flip_in_column(path: Path, column: str) -> None:
    """Flip one byte inside a column's data page (the page checksum no longer matches)."""
    meta = pq.ParquetFile(path).metadata
    names = [meta.row_group(0).column(i).path_in_schema for i in range(meta.num_columns)]
    chunk = meta.row_group(0).column(names.index(column))
    # the chunk's last data byte: it starts at its dictionary page when it has one
    start = chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
    data = bytearray(path.read_bytes())
    data[start + chunk.total_compressed_size - 2] ^= 0xFF
    path.write_bytes(bytes(data))


def test_damage_found_only_by_the_full_read_is_redone_in_the_same_sweep(
    corpus, finished, tmp_path, monkeypatch, capsys, clean
):
    """Run keys intact, a number's page damaged: the scan (run_key only) passes, the merge's full read
    fails its page checksum; the part is quarantined and its runs redone before the merge."""
    out = _copy(finished, tmp_path / "m")
    victim = _parts(out)[0]
    n = pq.read_metadata(victim).num_rows
    _flip_in_column(victim, "cumulative_input_tokens")
    capsys.readouterr()
    ran = _count_runs(monkeypatch)
    df = _read(run_sweep(_spec(corpus, out), progress=False))
    err = capsys.readouterr().err
    assert f"warning: {victim}: unreadable Parquet" in err and "checksum" in err.lower()
    assert sum(ran) == n and (out / "parts" / "quarantine" / victim.name).is_file()
    pd.testing.assert_frame_equal(df, clean("policy.n=1,3,10"))


@pytest.mark.parametrize("where", ["scan", "full read"])
def test_hydra_merge_refuses_to_merge_a_hole_and_a_rerun_fills_it(
    corpus, finished, tmp_path, capsys, clean, where
):
    """The multirun's final merge finds a damaged part (by its run keys, or only by a full read): it
    writes no results.parquet and says to rerun; the rerun's jobs redo those runs and the merge is whole."""
    from sim.util.errors import ConfigError

    out = _copy(finished, tmp_path / "h", merged=False)
    victim = _parts(out)[0]
    if where == "scan":
        _truncated(victim)
    else:
        _flip_in_column(victim, "cumulative_input_tokens")
    match = "damaged parts under .* moved to quarantine" if where == "scan" else "were in damaged parts"
    with pytest.raises(ConfigError, match=match):
        merge_parts(out)
    assert f"warning: {victim}: " in capsys.readouterr().err
    assert not (out / "results.parquet").exists()
    assert (out / "parts" / "quarantine" / victim.name).is_file()
    run_sweep(_spec(corpus, out), progress=False, merge=False)  # what the rerun's jobs do
    pd.testing.assert_frame_equal(_read(merge_parts(out)), clean("policy.n=1,3,10"))


# ------------------------------------------------------------------------------- same keys, other writers
def test_same_keys_from_other_writers_give_one_row_and_the_same_bytes(corpus, tmp_path):
    """Parts of the same runs cut differently (chunk sizes, grid order) and labelled differently (the
    scenario spelled another way): one row per key, and the sweep's results.parquet is byte for byte the
    one it writes alone."""
    alone = run_sweep(_spec(corpus, tmp_path / "alone"), progress=False).read_bytes()
    other = tmp_path / "other"
    other_scenario = f"{corpus.parent}/./{corpus.name}"
    run_sweep(
        _spec(corpus, other, grid=("policy.n=10,3,1",), chunk_size=3, scenario=other_scenario), progress=False
    )
    mixed = tmp_path / "mixed"
    run_sweep(_spec(corpus, mixed, chunk_size=7), progress=False, merge=False)
    for part in _parts(other):
        shutil.copy2(part, mixed / "parts" / part.name)
    by_writer: dict[str, list[dict]] = {}
    for part in _parts(mixed):
        for row in pq.read_table(part).to_pylist():
            by_writer.setdefault(row["run_key"], []).append(row)
    assert len(by_writer) == 24 and all(len(rows) == 2 for rows in by_writer.values())
    for rows in by_writer.values():  # the numbers do not depend on the writer; only the label does
        a, b = ({k: v for k, v in r.items() if k != "scenario"} for r in rows)
        assert a == b
    assert run_sweep(_spec(corpus, mixed), progress=False).read_bytes() == alone
    merged = _read(merge_parts(mixed))
    assert len(merged) == 24 and merged["run_key"].is_unique


# ---------------------------------------------------------------------------------------- fsync, resume
def test_files_and_their_folder_are_fsynced_around_the_rename(tmp_path, monkeypatch):
    from sim.util import atomicfile

    events: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        return real_fsync(fd)

    def replace(src, dst):
        events.append(("replace", f"{src} -> {dst}"))
        return real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    tmp_path = Path(os.path.realpath(tmp_path))  # as /proc/self/fd shows it
    target = tmp_path / "new" / "deeper" / "x.bin"
    with atomicfile.atomic_path(target) as tmp:
        tmp.write_bytes(b"data")
    assert events == [
        ("fsync", str(tmp_path)),  # new/ created: its entry in tmp_path
        ("fsync", str(tmp_path / "new")),  # deeper/ created
        ("fsync", str(tmp)),  # the data, before it gets its name
        ("replace", f"{tmp} -> {target}"),
        ("fsync", str(target.parent)),  # the rename itself
    ]


def _spy_reads(monkeypatch) -> list[tuple[str, tuple]]:
    calls: list[tuple[str, tuple]] = []
    real_read, real_read_table = pq.ParquetFile.read, pq.read_table

    def read(self, columns=None, **kw):
        calls.append(("ParquetFile.read", tuple(columns or ("*",))))
        return real_read(self, columns=columns, **kw)

    def read_table(source, *args, columns=None, **kw):
        calls.append(("read_table", tuple(columns or ("*",))))
        return real_read_table(source, *args, columns=columns, **kw)

    monkeypatch.setattr(pq.ParquetFile, "read", read)
    monkeypatch.setattr(pq, "read_table", read_table)
    return calls


def test_resume_of_a_finished_sweep_reads_run_keys_only_and_writes_nothing(corpus, tmp_path, monkeypatch):
    import sim.results.store as store

    out = tmp_path / "r"
    results = run_sweep(_spec(corpus, out, csv=True), progress=False)
    before = (results.read_bytes(), results.stat().st_mtime_ns)
    n_parts = len(_parts(out))
    calls = _spy_reads(monkeypatch)
    monkeypatch.setattr(store, "write_table", lambda *a: pytest.fail("results.parquet written again"))
    # the receipt vouches for results.parquet: not one Parquet read
    assert run_sweep(_spec(corpus, out), progress=False) == results
    assert (results.read_bytes(), results.stat().st_mtime_ns) == before and calls == []
    # without it (its plan changed, ctxsim's code changed): the parts index gives every part's keys, so
    # only run_key + labels of results.parquet are read; the receipt is written again
    labels = ("ParquetFile.read", ("run_key", "scenario", "setting"))
    (out / "results.receipt.json").unlink()
    assert run_sweep(_spec(corpus, out), progress=False) == results
    assert (results.read_bytes(), results.stat().st_mtime_ns) == before
    assert calls == [labels] and (out / "results.receipt.json").is_file()
    # without the index too (a store of an older ctxsim): one run_key column per part; never a whole
    # table; the index is written again
    calls.clear()
    (out / "results.receipt.json").unlink()
    (out / "parts" / "index.json").unlink()
    assert run_sweep(_spec(corpus, out), progress=False) == results
    assert (results.read_bytes(), results.stat().st_mtime_ns) == before
    assert calls.count(("ParquetFile.read", ("run_key",))) == n_parts
    assert calls.count(labels) == 1 and len(calls) == n_parts + 1
    assert (out / "results.receipt.json").is_file() and (out / "parts" / "index.json").is_file()
    assert run_sweep(_spec(corpus, out), progress=False) == results and len(calls) == n_parts + 1


def test_the_parts_index_gives_only_the_keys_of_unchanged_parts(corpus, tmp_path, monkeypatch, capsys, clean):
    """An index entry counts only while its part is the very file it describes (size, mtime, inode,
    ctime) and its keys hash to the part's name; anything else is read from the part, as without an
    index: a damaged part is still found, a forged or garbled entry gives no key."""
    import json

    import sim.results.store as store

    out = tmp_path / "ix"
    run_sweep(_spec(corpus, out), progress=False)
    parts_dir = out / "parts"
    index = parts_dir / "index.json"
    entries = json.loads(index.read_text())["parts"]
    assert sorted(entries) == [p.name for p in _parts(out)]
    assert set(store.read_index(parts_dir)) == set(entries)
    calls = _spy_reads(monkeypatch)
    keys = {p.path.name: p.keys for p in store.scan(out, pytest.fail)[0]}
    assert calls == [] and keys == {n: tuple(e[4].split("\n")) for n, e in entries.items()}
    first, second, third = sorted(entries)[:3]
    # a forged entry (keys that do not hash to the name), a garbled one, one for a part that is gone
    entries[first][4] = entries[first][4].replace(entries[first][4][:64], "0" * 64)
    entries[second][0] = "12"
    entries["part-" + "f" * 32 + ".parquet"] = entries[third]  # another part's keys: not this name's
    gone = store.part_name(["a" * 64])
    entries[gone] = [*entries[third][:4], "a" * 64]
    index.write_text(json.dumps({"format": 1, "parts": entries}))
    assert set(store.read_index(parts_dir)) == set(keys) - {first, second} | {gone}
    got = {p.path.name: p.keys for p in store.scan(out, pytest.fail)[0]}
    assert got == keys and calls == [("ParquetFile.read", ("run_key",))] * 2
    # the scan that read parts wrote the index again: whole and current
    assert set(store.read_index(parts_dir)) == set(keys)
    calls.clear()
    store.scan(out, pytest.fail)
    assert calls == []
    # a part damaged in place after it was indexed: its identity changed, so it is read and quarantined
    victim = parts_dir / third
    _truncated(victim)
    capsys.readouterr()
    pd.testing.assert_frame_equal(
        _read(run_sweep(_spec(corpus, out), progress=False)), clean("policy.n=1,3,10")
    )
    assert f"warning: {victim}: unreadable Parquet" in capsys.readouterr().err
    assert (parts_dir / "quarantine" / third).is_file()
    # an index that is not one (not JSON, another format): every part is read, the index rewritten
    for text in ("not json", json.dumps({"format": 2, "parts": {}}), json.dumps([1, 2])):
        index.write_text(text)
        calls.clear()
        assert len(store.scan(out, pytest.fail)[0]) == len(keys)
        assert calls.count(("ParquetFile.read", ("run_key",))) == len(keys)
        assert set(store.read_index(parts_dir)) == set(keys)


def test_csv_is_rewritten_from_current_results(corpus, tmp_path):
    out = tmp_path / "csv"
    run_sweep(_spec(corpus, out, csv=True), progress=False)
    text = (out / "results.csv").read_text(encoding="utf-8")
    (out / "results.csv").unlink()
    run_sweep(_spec(corpus, out, csv=True), progress=False)
    assert (out / "results.csv").read_text(encoding="utf-8") == text


def _merged_again(corpus, out: Path, monkeypatch, **kw) -> bool:
    import sim.results.store as store

    writes: list[Path] = []
    orig = store.write_table
    monkeypatch.setattr(store, "write_table", lambda rows, path: writes.append(path) or orig(rows, path))
    run_sweep(_spec(corpus, out, **kw), progress=False)
    monkeypatch.setattr(store, "write_table", orig)
    return out / "results.parquet" in writes


def test_merge_is_skipped_only_when_results_are_current(corpus, finished, tmp_path, monkeypatch, clean):
    out = _copy(finished, tmp_path / "cur")
    results = out / "results.parquet"
    assert not _merged_again(corpus, out, monkeypatch)
    # a part newer than results.parquet (e.g. rewritten by another writer)
    part = _parts(out)[0]
    os.utime(part, ns=(results.stat().st_mtime_ns + 10**6,) * 2)
    assert _merged_again(corpus, out, monkeypatch)
    assert not _merged_again(corpus, out, monkeypatch)
    # equal timestamps: doubt, so merge
    os.utime(part, ns=(results.stat().st_mtime_ns,) * 2)
    assert _merged_again(corpus, out, monkeypatch)
    # results.parquet of another sweep on the same path: this sweep's rows come back
    run_sweep(_spec(corpus, out, grid=("policy.n=1,3",)), progress=False)
    assert len(_read(results)) == 16
    assert _merged_again(corpus, out, monkeypatch)
    pd.testing.assert_frame_equal(_read(results), clean("policy.n=1,3,10"))
    # the same keys asked under another label (the scenario spelled another way)
    assert _merged_again(corpus, out, monkeypatch, scenario=f"{corpus.parent}/./{corpus.name}")
    assert set(_read(results)["scenario"]) == {f"{corpus.parent}/./{corpus.name}"}
    assert _merged_again(corpus, out, monkeypatch)
    # damaged or missing results.parquet
    results.write_bytes(b"not parquet")
    assert _merged_again(corpus, out, monkeypatch)
    results.unlink()
    assert _merged_again(corpus, out, monkeypatch)
    pd.testing.assert_frame_equal(_read(results), clean("policy.n=1,3,10"))


def test_hydra_merge_is_skipped_when_current_and_redone_when_a_part_is_added(
    corpus, finished, tmp_path, monkeypatch
):
    import sim.results.store as store

    out = _copy(finished, tmp_path / "hm", merged=False)
    first = merge_parts(out)
    mtime = first.stat().st_mtime_ns
    assert merge_parts(out) == first and first.stat().st_mtime_ns == mtime
    run_sweep(_spec(corpus, out, grid=("policy.n=2",)), progress=False, merge=False)
    writes: list[Path] = []
    orig = store.write_table
    monkeypatch.setattr(store, "write_table", lambda rows, path: writes.append(path) or orig(rows, path))
    assert len(_read(merge_parts(out))) == 32 and writes == [first]
