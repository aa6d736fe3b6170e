"""Langfuse traces and observations (public API / UI JSON): detection, runs, usage, facts, errors.

The samples in tests/data/exports/ were built with the Langfuse SDK's own API data classes
(benchmarks/make_export_samples.py): ``langfuse_observations.json`` a page of the observations API (two
traces), ``langfuse_trace.json`` one trace with its observations."""

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
PAGE = DATA / "langfuse_observations.json"
TRACE = DATA / "langfuse_trace.json"
KINDS = ["system", "tools", "user", "assistant", "tool_result", "assistant", "tool_result", "assistant"]


def load(path: Path) -> list:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ImportNotice)
        return list(load_path(path))


def write(tmp_path: Path, data, name="lf.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(data))
    return p


def test_samples_are_detected_one_trace_per_langfuse_trace():
    assert detect(PAGE).name == detect(TRACE).name == "langfuse"
    t1, t2 = load(PAGE)
    assert (t1.trace_id, t2.trace_id) == ("lf-trace-1", "lf-trace-2")
    for t in (t1, t2):
        assert trace_problems(trace_to_dict(t)) == []
        assert [e.kind for e in t.events] == KINDS
        assert t.model == "gpt-4o-mini-2024-07-18" and t.agent == "support-bot"
    (one,) = load(TRACE)  # the trace document: the same run as the page's first trace
    assert trace_to_dict(one)["calls"] == trace_to_dict(t1)["calls"]
    assert [e.content for e in one.events] == [e.content for e in t1.events]


def test_input_is_every_input_usage_type_and_raw_replay_reproduces_it():
    gens = [o for o in json.loads(PAGE.read_text())["data"] if o["type"] == "GENERATION"]
    expected = [sum(v for k, v in o["usageDetails"].items() if "input" in k) for o in gens]
    assert expected == [109, 194, 192, 99, 167, 238]
    traces = load(PAGE)
    calls = [c for t in traces for c in t.calls]
    assert [c.input_tokens for c in calls] == expected
    assert [c.output_tokens for c in calls] == [o["usageDetails"]["output"] for o in gens]
    assert [c.cache_read_tokens for c in calls] == [
        o["usageDetails"].get("input_cached_tokens") for o in gens
    ]
    assert [c.recorded_cost_usd for c in calls] == [o["costDetails"]["total"] for o in gens]
    for t in traces:
        r = replay(t, make_policy("raw"), window=None)
        assert np.array_equal(r.calls["input_tokens"], [c.input_tokens for c in t.calls])


def test_facts_and_the_trimmed_request():
    t1, t2 = load(PAGE)
    assert t1.events[4].provides == ("identifier:ORD-7731@4", "value:129.95@4")
    assert set(t1.events[5].needs) == {"identifier:ORD-7731@4", "value:129.95@4"}
    assert "identifier:RF-55120@6" in t1.events[7].needs
    assert t2.events[5].needs == ("error@4",) and "value:8080@6" in t2.events[7].needs
    assert t1.outcome == {"non_prefix_inputs": 1} and t2.outcome == {"non_prefix_inputs": 0}


def test_generations_without_input_take_tool_observations(tmp_path):
    data = json.loads(PAGE.read_text())
    for o in data["data"]:
        if o["type"] == "GENERATION":
            for key in ("input", "output", "modelParameters"):
                o.pop(key)
    t1, t2 = load(write(tmp_path, data))
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


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        ({"usageDetails": {"input": 20, "cache_read_input_tokens": 300, "output": 5}}, (320, 300, 5)),
        ({"usage": {"input": 40, "output": 3, "total": 43}}, (40, None, 3)),
        ({"promptTokens": 41, "completionTokens": 2}, (41, None, 2)),
    ],
)
def test_usage_shapes(tmp_path, usage, expected):
    gen = {"id": "g", "traceId": "t", "type": "GENERATION", "startTime": "2025-01-01T00:00:00Z"}
    gen |= {"input": "hi", "output": "hello"} | usage
    (t,) = load(write(tmp_path, [gen]))
    c = t.calls[0]
    assert (c.input_tokens, c.cache_read_tokens, c.output_tokens) == expected
    assert [e.kind for e in t.events] == ["user", "assistant"]


def test_bad_values_exit_2_naming_file_record_and_field(tmp_path, capsys):
    data = json.loads(PAGE.read_text())
    bad = copy.deepcopy(data)
    bad["data"][1]["usageDetails"]["input"] = -1
    p = write(tmp_path, bad)
    with pytest.raises(
        TraceError, match=r"lf.json: record observation 'lf-obs-1-1': field usageDetails.input"
    ):
        load(p)
    bad = copy.deepcopy(data)
    bad["data"][2]["startTime"] = "yesterday"
    with pytest.raises(TraceError, match=r"record observation 'lf-obs-1-2': field startTime"):
        load(write(tmp_path, bad))
    bad = copy.deepcopy(data)
    bad["data"][1]["input"][0] = {"role": "robot", "content": "x"}
    with pytest.raises(
        TraceError, match=r"observation 'lf-obs-1-1' input\[0\]: field role: unknown message role"
    ):
        load(write(tmp_path, bad))
    assert main(["validate", str(p)]) == 2
    out, err = capsys.readouterr()
    assert "lf.json" in out + err and "Traceback" not in out + err
    bad = {"data": [o for o in data["data"] if o["type"] != "GENERATION"]}
    with pytest.raises(TraceError, match="no GENERATION observations"):
        load(write(tmp_path, bad))


def test_command_line_import_validate_run_and_redact(tmp_path, capsys):
    out = tmp_path / "lf.jsonl"
    assert main(["import", "--redact", str(PAGE), "-o", str(out)]) == 0
    assert "Alice" not in out.read_text()
    assert main(["validate", str(out)]) == 0
    assert main(["run", str(PAGE), "--policy", "raw", "--calls", str(tmp_path / "c.csv")]) == 0
    rows = (tmp_path / "c.csv").read_text().splitlines()
    head = rows[0].split(",")
    got = [int(r.split(",")[head.index("input_tokens")]) for r in rows[1:]]
    assert got == [109, 194, 192, 99, 167, 238]


@pytest.mark.parametrize("sample", [PAGE, TRACE], ids=["page", "trace"])
def test_200_mutations_exit_0_or_2_without_a_traceback(tmp_path, capsys, sample):
    t0 = time.process_time()
    assert run_cases(sample, tmp_path, 200, "langfuse", capsys) == []
    assert time.process_time() - t0 < 20
