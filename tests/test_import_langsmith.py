"""LangSmith runs (export JSON Lines, list_runs / read_run JSON): detection, runs, usage, facts, errors.

``tests/data/exports/langsmith_runs.jsonl`` was made by the LangSmith SDK (``@traceable`` under
``tracing_context(enabled="local")``, records as its ``schemas.Run``; benchmarks/make_export_samples.py)."""

from __future__ import annotations

import copy
import json
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from export_mutations import run_cases

from sim.cli import main
from sim.engine.dispatch import replay
from sim.importers import detect, load_path
from sim.importers.common import ImportNotice
from sim.policies.base import make_policy
from sim.trace.codec import trace_to_dict
from sim.trace.rules import trace_problems
from sim.util.errors import TraceError

DATA = Path(__file__).parent / "data" / "exports"
RUNS = DATA / "langsmith_runs.jsonl"
KINDS = ["system", "tools", "user", "assistant", "tool_result", "assistant", "tool_result", "assistant"]


def runs() -> list[dict]:
    return [json.loads(x) for x in RUNS.read_text().splitlines()]


def load(path: Path) -> list:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ImportNotice)
        return list(load_path(path))


def write(tmp_path: Path, data, name="ls.json") -> Path:
    p = tmp_path / name
    if name.endswith(".jsonl"):
        p.write_text("".join(json.dumps(r) + "\n" for r in data))
    else:
        p.write_text(json.dumps(data))
    return p


def test_sample_is_detected_one_trace_per_langsmith_trace():
    assert detect(RUNS).name == "langsmith"
    traces = load(RUNS)
    roots = [r for r in runs() if r["run_type"] == "chain"]
    assert [t.trace_id for t in traces] == [r["trace_id"] for r in roots]
    for t in traces:
        assert trace_problems(trace_to_dict(t)) == []
        assert [e.kind for e in t.events] == KINDS
        assert t.model == "gpt-4o-mini-2024-07-18" and t.agent == "support-bot"


def test_runs_opening_with_trace_id_are_still_langsmith(tmp_path):
    """A run written with trace_id first opens like a canonical record (whose first key may be trace_id):
    the run's run_type tells it apart, so the export is not read as a broken canonical file."""
    p = tmp_path / "reordered.jsonl"
    p.write_text("".join(json.dumps({"trace_id": r["trace_id"], **r}) + "\n" for r in runs()))
    assert p.read_text().startswith('{"trace_id": ') and detect(p).name == "langsmith"
    assert [t.trace_id for t in load(p)] == [t.trace_id for t in load(RUNS)]


def test_input_tokens_are_the_runs_and_raw_replay_reproduces_them():
    llms = [r for r in runs() if r["run_type"] == "llm"]
    expected = [r["outputs"]["usage_metadata"]["input_tokens"] for r in llms]
    assert expected == [r["prompt_tokens"] for r in llms] == [109, 194, 192, 99, 167, 238]
    traces = load(RUNS)
    calls = [c for t in traces for c in t.calls]
    assert [c.input_tokens for c in calls] == expected
    assert [c.cache_read_tokens for c in calls] == [0, 128, 128, 0, 64, 192]
    assert [c.output_tokens for c in calls] == [r["completion_tokens"] for r in llms]
    for t in traces:
        r = replay(t, make_policy("raw"), window=None)
        assert np.array_equal(r.calls["input_tokens"], [c.input_tokens for c in t.calls])


def test_facts_and_the_trimmed_request():
    t1, t2 = load(RUNS)
    assert t1.events[4].provides == ("identifier:ORD-7731@4", "value:129.95@4")
    assert set(t1.events[5].needs) == {"identifier:ORD-7731@4", "value:129.95@4"}
    assert "identifier:RF-55120@6" in t1.events[7].needs
    assert t2.events[5].needs == ("error@4",) and "value:8080@6" in t2.events[7].needs
    assert t1.outcome == {"non_prefix_inputs": 1} and t2.outcome == {"non_prefix_inputs": 0}


def test_nested_child_runs_and_a_list_read_as_the_lines_do(tmp_path):
    rs = runs()
    by_id = {r["id"]: {**r} for r in rs}
    nested = []
    for r in by_id.values():
        parent = r.pop("parent_run_id", None)
        r.pop("trace_id")
        if parent is None:
            nested.append(r)
        else:
            by_id[parent].setdefault("child_runs", []).append(r)
    want = [trace_to_dict(t)["calls"] for t in load(RUNS)]
    got = [
        trace_to_dict(load(write(tmp_path, root, f"root{i}.json"))[0])["calls"]
        for i, root in enumerate(nested)
    ]
    assert got == want  # read_run(load_child_runs=True): the tree, no trace ids
    assert [trace_to_dict(t)["calls"] for t in load(write(tmp_path, {"runs": rs}))] == want


def test_llm_runs_without_messages_take_the_tool_runs(tmp_path):
    rs = runs()
    for r in rs:
        if r["run_type"] == "llm":
            r["inputs"] = {}
            r["outputs"] = {"usage_metadata": r["outputs"]["usage_metadata"]}
    t1, t2 = load(write(tmp_path, rs, "bare.jsonl"))
    assert [e.kind for e in t2.events] == [
        "assistant",
        "tool_result",
        "assistant",
        "tool_result",
        "assistant",
    ]
    assert t2.events[0].content == 'read_file({"path": "config.yaml"})'
    assert t2.events[1].tool_call_id == "call_you0" and t2.events[2].needs == ("error@1",)
    assert "identifier:ORD-7731@1" in t1.events[2].needs


def test_langchain_shapes(tmp_path):
    base = {"id": "r1", "trace_id": "t", "start_time": "2025-01-01T00:00:00Z", "run_type": "llm"}
    lc = {
        "lc": 1,
        "type": "constructor",
        "id": ["langchain", "schema", "messages", "HumanMessage"],
        "kwargs": {"content": "hi", "type": "human"},
    }
    run = base | {
        "inputs": {"messages": [[lc]]},
        "outputs": {
            "generations": [[{"text": "hello", "message": {"type": "ai", "content": "hello"}}]],
            "llm_output": {"token_usage": {"prompt_tokens": 12, "completion_tokens": 2}},
        },
    }
    (t,) = load(write(tmp_path, [run]))
    assert [(e.kind, e.content) for e in t.events] == [("user", "hi"), ("assistant", "hello")]
    assert (t.calls[0].input_tokens, t.calls[0].output_tokens) == (12, 2)


def test_bad_values_exit_2_naming_file_record_and_field(tmp_path, capsys):
    rs = runs()
    llm = next(i for i, r in enumerate(rs) if r["run_type"] == "llm")
    bad = copy.deepcopy(rs)
    bad[llm]["outputs"]["usage_metadata"]["input_tokens"] = "many"
    p = write(tmp_path, bad, "bad.jsonl")
    rid = rs[llm]["id"]
    with pytest.raises(
        TraceError, match=rf"bad.jsonl: record run '{rid}': field usage_metadata.input_tokens"
    ):
        load(p)
    assert main(["validate", str(p)]) == 2
    out, err = capsys.readouterr()
    assert (
        "bad.jsonl" in out + err
        and "usage_metadata.input_tokens" in out + err
        and "Traceback" not in out + err
    )
    bad = copy.deepcopy(rs)
    bad[llm]["start_time"] = 5
    with pytest.raises(TraceError, match=r"field start_time"):
        load(write(tmp_path, bad, "bad2.jsonl"))
    p = tmp_path / "cut.jsonl"
    p.write_text(RUNS.read_text().splitlines()[0] + '\n{"id": \n')
    with pytest.raises(TraceError, match=r"cut.jsonl: record line 2: invalid JSON"):
        load(p)
    with pytest.raises(TraceError, match="no llm runs"):
        load(write(tmp_path, [r for r in rs if r["run_type"] != "llm"], "none.jsonl"))


def test_command_line_import_validate_run_and_redact(tmp_path, capsys):
    out = tmp_path / "ls.parquet"
    assert main(["import", "--redact", str(RUNS), "-o", str(out)]) == 0
    assert main(["validate", str(out)]) == 0
    assert main(["run", str(RUNS), "--policy", "raw", "--calls", str(tmp_path / "c.csv")]) == 0
    rows = (tmp_path / "c.csv").read_text().splitlines()
    head = rows[0].split(",")
    assert [int(r.split(",")[head.index("input_tokens")]) for r in rows[1:]] == [109, 194, 192, 99, 167, 238]


def test_200_mutations_exit_0_or_2_without_a_traceback(tmp_path, capsys):
    t0 = time.process_time()
    assert run_cases(RUNS, tmp_path, 200, "langsmith", capsys) == []
    assert time.process_time() - t0 < 20
