"""Corpora at scale: datasets loading (local, offline), streaming, and text-free (redacted) traces."""

import dataclasses

import pytest

from sim.cli import main
from sim.engine.dispatch import replay
from sim.metrics.compute import compute_metrics
from sim.policies.base import make_policy
from sim.trace.codec import trace_to_dict
from sim.trace.io import load_dataset_traces, redact, write_traces
from sim.trace.rules import trace_problems

POLICIES = [
    ("raw", {}),
    ("tool_result_head_tail", {}),
    ("observation_masking", {"n": 3}),
    ("seed_engine", {"context_token_limit": 16000, "keep_recent_tokens": 4000}),
    ("spill_large_results", {"threshold_tokens": 2000}),
]


@pytest.mark.parametrize("name,params", POLICIES)
def test_redacted_traces_give_identical_metrics(mini_traces, name, params):
    policy = make_policy(name, **params)
    for t in mini_traces:
        r = redact(t)
        assert all(e.content is None for e in r.events)
        assert all(f.startswith("fact:") for e in r.events for f in (*e.provides, *e.needs))
        assert trace_problems(trace_to_dict(r)) == []
        assert compute_metrics(replay(r, policy)) == compute_metrics(replay(t, policy)), t.trace_id


def test_redaction_hides_text(mini_traces, tmp_path):
    t = mini_traces[0]
    write_traces([redact(t)], tmp_path / "r.jsonl")
    text = (tmp_path / "r.jsonl").read_text()
    assert "django" not in text.replace(t.trace_id, "") and "def " not in text
    assert main(["import", str(tmp_path / "r.jsonl"), "-o", str(tmp_path / "again.jsonl"), "--redact"]) == 0


@pytest.mark.parametrize("suffix", [".parquet", ".jsonl"])
@pytest.mark.parametrize("streaming", [False, True])
def test_dataset_loading_equals_files(mini_traces, tmp_path, suffix, streaming):
    path = tmp_path / f"corpus{suffix}"
    write_traces(mini_traces[:6], path)
    got = list(load_dataset_traces(path, streaming=streaming))
    assert [dataclasses.replace(t, source_file=None) for t in got] == [
        dataclasses.replace(t, source_file=None) for t in mini_traces[:6]
    ]


def test_run_dataset_cli_matches_paths(capsys, mini_traces, tmp_path):
    write_traces(mini_traces[:5], tmp_path / "c.parquet")
    assert main(["run", str(tmp_path / "c.parquet"), "--format", "csv"]) == 0
    by_path = capsys.readouterr().out
    assert main(["run", "--dataset", str(tmp_path / "c.parquet"), "--streaming", "--format", "csv"]) == 0
    assert capsys.readouterr().out == by_path
    assert main(["run", "--dataset", str(tmp_path / "missing.parquet")]) == 2
    assert "missing.parquet" in capsys.readouterr().err


@pytest.mark.parametrize(
    "columns",
    [
        {"a": [1, 2, 3], "b": [0.5, -0.0, 1e-7], "c": ["x", "y", "z"]},  # no cell quoted: joined
        {"a": [1, None, 3], "b": [float("nan"), float("inf"), 2.0], "c": [True, False, None]},
        {"a": ["with,comma", 'a "quote"', "line\nbreak"], "b": [1, 1, 1], "c": ["", "é", None]},
        {"a": [0, 0.0, False], "b": ["x", None, "tab\there"], "c": [10**20, -5, 7]},
        {"only": ["", "", ""]},  # a row of one empty cell: the writer quotes it
        {"p": ["5%", "5%", "5%"], "q": [1, 2, 3], "r": ["a%s", "b", "%%"]},  # a template's own %
        {"a": [1, 1, 1], "b": ["x", "x", "x"], "c": [None, None, None]},  # every column one value
    ],
)
def test_streamed_csv_from_columns_is_the_rows_csv(capsys, columns):
    """``run --streaming --format csv`` writes a batch's CSV from its columns: the very bytes the rows'
    writer gives, for every kind of cell, for a first batch (with its header) and a later one."""
    from sim.commands.run import stream_csv, stream_csv_columns

    rows = [dict(zip(columns, values, strict=True)) for values in zip(*columns.values(), strict=True)]
    for header in (None, list(columns)):
        assert stream_csv(rows, header) == list(columns)
        by_rows = capsys.readouterr().out
        assert stream_csv_columns(columns, header) == list(columns)
        assert capsys.readouterr().out == by_rows
    other = dict(reversed(columns.items()))  # a later batch in another column order: a row at a time
    assert stream_csv_columns(other, list(columns)) == list(columns)
    by_columns = capsys.readouterr().out
    stream_csv([dict(zip(other, v, strict=True)) for v in zip(*other.values(), strict=True)], list(columns))
    assert capsys.readouterr().out == by_columns


def test_streamed_csv_spans_batches(capsys, mini_traces, tmp_path, monkeypatch):
    """Several replay batches streamed as CSV: the same bytes as the run over the file as a whole."""
    import sim.engine.dispatch

    write_traces(mini_traces[:7], tmp_path / "c.parquet")
    assert (
        main(["run", str(tmp_path / "c.parquet"), "--policy", "observation_masking", "--format", "csv"]) == 0
    )
    whole = capsys.readouterr().out
    monkeypatch.setattr(sim.engine.dispatch, "BATCH", 3)
    argv = ["run", "--dataset", str(tmp_path / "c.parquet"), "--streaming", "--policy", "observation_masking"]
    assert main([*argv, "--format", "csv"]) == 0
    assert capsys.readouterr().out == whole
    assert whole.count("\n") == 8


def test_streaming_run_collects_cycles_less_often_and_restores_it(capsys, mini_traces, tmp_path, monkeypatch):
    import gc

    import sim.results.tables

    write_traces(mini_traces[:2], tmp_path / "c.parquet")
    seen = []
    columns = sim.results.tables.table_columns
    monkeypatch.setattr(
        sim.results.tables, "table_columns", lambda *a: seen.append(gc.get_threshold()) or columns(*a)
    )
    before = gc.get_threshold()
    argv = ["run", "--dataset", str(tmp_path / "c.parquet"), "--streaming", "--format", "csv"]
    assert main(argv) == 0
    assert seen and all(t == (20_000, *before[1:]) for t in seen)
    assert gc.get_threshold() == before
    assert main(["run", "--dataset", str(tmp_path / "missing.parquet"), "--streaming"]) == 2
    assert gc.get_threshold() == before
