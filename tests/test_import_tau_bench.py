"""tau-bench historical trajectories: 200 airline runs of gpt-4o, and the mess real files carry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sim.engine.dispatch import replay
from sim.importers import detect, get_importer, load_path
from sim.importers.common import ImportNotice
from sim.policies.base import make_policy
from sim.trace.codec import trace_to_dict
from sim.trace.rules import trace_problems
from sim.util.errors import TraceError
from sim.util.paths import traces_dir

AIRLINE = traces_dir() / "tau-bench" / "historical_trajectories" / "gpt-4o-airline.json"


@pytest.fixture(scope="module")
def airline() -> Path:
    if not AIRLINE.is_file():
        pytest.skip(f"real traces not found at {AIRLINE} (set CTXSIM_TRACES to the shared traces folder)")
    return AIRLINE


@pytest.fixture(scope="module")
def airline_traces(airline):
    return list(load_path(airline))


def test_airline_imports_validates_and_is_detected(airline, airline_traces):
    assert detect(airline).name == "tau-bench"
    ts = airline_traces
    # counted by reading the file: 200 list elements (50 tasks x 4 trials); 2,454 messages with role
    # assistant (one call each); 5,308 messages in all traj lists (200 system, 1,490 user, 2,454
    # assistant, 1,164 tool); 84 runs with reward 1.0
    assert len(ts) == 200
    assert sum(len(t.calls) for t in ts) == 2454
    assert sum(len(t.events) for t in ts) == 5308
    assert sum(t.outcome["reward"] for t in ts) == 84
    assert len({t.trace_id for t in ts}) == 200
    assert ts[0].trace_id == "0-0" and ts[0].outcome == {"reward": 0.0, "task_id": 0, "trial": 0}
    for t in ts:
        assert trace_problems(trace_to_dict(t)) == []
        assert t.model == "gpt-4o" and t.recorded_policy == {"name": "raw"}
        assert t.source_format == "tau-bench"
        assert all(c.input_tokens is None for c in t.calls)  # text only: no usage


def test_every_tool_result_answers_its_call(airline_traces):
    results = [e for t in airline_traces for e in t.events if e.kind == "tool_result"]
    assert len(results) == 1164
    for t in airline_traces:
        issued = {i for e in t.events if e.kind == "assistant" for i in e.tool_call_ids}
        assert all(e.tool_call_id in issued for e in t.events if e.kind == "tool_result")


def test_raw_replay(airline_traces):
    raw = make_policy("raw")
    for t in airline_traces[:20]:
        assert len(replay(t, raw).calls["input_tokens"]) == len(t.calls)


def test_sniff_claims_no_other_shared_file():
    root = traces_dir()
    if not root.is_dir():
        pytest.skip(f"real traces not found at {root}")
    sniff = get_importer("tau-bench").sniff
    others = [p for p in root.rglob("*.json") if "tau-bench" not in p.parts]
    assert others
    assert not [p for p in others if sniff(p)]


# ----------------------------------------------------------------------------------------- real mess
def _run(traj, task_id=7, trial=1, reward=1.0) -> dict:
    return {"task_id": task_id, "reward": reward, "info": {}, "traj": traj, "trial": trial}


TRAJ = [
    {"role": "system", "content": "policy"},
    {"role": "user", "content": "hi"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_user", "arguments": "{}"}}],
    },
    {"role": "tool", "tool_call_id": "c1", "name": "get_user", "content": '{"id": 1}'},
    {"role": "assistant", "content": "Done."},
]


def _write(tmp_path: Path, runs, name="gpt-4o-retail.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(runs))
    return p


def test_small_file_maps_model_domain_and_ids(tmp_path):
    p = _write(tmp_path, [_run(TRAJ), _run(TRAJ, trial=2)])
    assert detect(p).name == "tau-bench"
    a, b = load_path(p)
    assert (a.trace_id, b.trace_id) == ("7-1", "7-2")
    assert a.model == "gpt-4o" and "retail" in a.agent
    assert [e.kind for e in a.events] == ["system", "user", "assistant", "tool_result", "assistant"]
    assert a.events[2].content == "get_user({})" and a.events[3].tool_call_id == "c1"


def test_empty_content_is_kept(tmp_path):
    traj = [*TRAJ[:2], {"role": "assistant", "content": ""}, {"role": "user", "content": ""}]
    (t,) = load_path(_write(tmp_path, [_run(traj)]))
    assert [e.content for e in t.events[2:]] == ["", ""]
    assert trace_problems(trace_to_dict(t)) == []


def test_tool_result_without_its_call_warns_and_stays_unpaired(tmp_path):
    traj = [*TRAJ, {"role": "tool", "tool_call_id": "never", "name": "x", "content": "late"}]
    with pytest.warns(ImportNotice, match="answer no earlier tool call"):
        (t,) = load_path(_write(tmp_path, [_run(traj)]))
    assert t.events[-1].kind == "tool_result" and t.events[-1].tool_call_id is None
    assert trace_problems(trace_to_dict(t)) == []


def test_non_utf8_bytes_warn_and_import(tmp_path):
    raw = json.dumps([_run(TRAJ)]).encode().replace(b'"hi"', b'"h\xe9llo \xff"')
    p = tmp_path / "gpt-4o-airline.json"
    p.write_bytes(raw)
    with pytest.warns(ImportNotice, match="not valid UTF-8"):
        (t,) = load_path(p)
    assert "\ufffd" in t.events[1].content


def test_truncated_json_names_the_file(tmp_path):
    p = _write(tmp_path, [_run(TRAJ)])
    p.write_text(p.read_text()[:-30])
    with pytest.raises(TraceError, match=p.name):
        list(load_path(p))


def test_run_without_traj_names_the_record(tmp_path):
    p = _write(tmp_path, [_run(TRAJ), {"task_id": 1, "trial": 0, "reward": 0.0, "traj": "oops"}])
    with pytest.raises(TraceError, match=r"gpt-4o-retail\.json: record 1-0: field messages"):
        list(load_path(p))
