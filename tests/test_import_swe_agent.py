"""SWE-agent ``.traj`` (0.x and 1.x): the five shared samples, and the mess real files carry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sim.engine.dispatch import replay
from sim.importers import detect, get_importer, load_path, registered
from sim.importers.common import ImportNotice
from sim.policies.base import make_policy
from sim.trace.codec import trace_to_dict
from sim.trace.rules import trace_problems
from sim.util.errors import TraceError
from sim.util.paths import traces_dir

# Load every format first: importing one importer module directly before the registry is filled would
# leave the other formats unregistered (``_load_builtins`` skips when the registry is non-empty).
registered()
from sim.importers.swe_agent import recorded_policy  # noqa: E402

SWE = traces_dir() / "swe-agent"
LASTN5 = "v1_gpt4o_lastn5_sweagenttestrepo-1c2844/6e44b9__sweagenttestrepo-1c2844.traj"

# Counted by reading each file: calls = assistant messages of ``history`` (demo messages skipped) plus
# trajectory steps past the history; events = non-demo history messages + what the trajectory adds.
# katy: 37 history messages, the submit's observation missing (+1) -> 38 events, 18 calls.
# pydicom: 26 messages, 1 demo (-1), the submit's observation missing (+1) -> 26 events, 12 calls.
# test-repo-i1: 12 messages, 1 demo (-1), the submit's observation missing (+1) -> 12 events, 5 calls.
# marshmallow: 28 messages, complete (13 actions, 13 observations) -> 28 events, 13 calls.
# lastn5: 10 messages (4 actions), the 5th step (submit + diff) only in trajectory (+2) -> 12 events, 5.
SAMPLES = {
    # file: (trace_id, calls, events, model, recorded policy)
    "v0_demo_enigma_ctf/katy.traj": ("katy", 18, 38, None, {"name": "raw"}),
    "v0_gpt4_pydicom__pydicom-1458/pydicom__pydicom-1458.traj": (
        "pydicom__pydicom-1458",
        12,
        26,
        "gpt4",
        {"name": "raw"},
    ),
    "v0_gpt4_test-repo-i1/swe-agent__test-repo-i1.traj": (
        "swe-agent__test-repo-i1",
        5,
        12,
        "gpt4",
        {"name": "raw"},
    ),
    "v1_demo_function_calling_replace_from_source/marshmallow-code__marshmallow-1867.traj": (
        "marshmallow-code__marshmallow-1867",
        13,
        28,
        None,  # recorded with SWE-agent's scripted "replay" model
        {"name": "observation_masking", "n": 5, "polling": 1},
    ),
    LASTN5: (
        "6e44b9__sweagenttestrepo-1c2844",
        5,
        12,
        "gpt-4o",
        {"name": "observation_masking", "n": 5, "polling": 1},
    ),
}


@pytest.fixture(scope="module")
def swe_dir() -> Path:
    if not SWE.is_dir():
        pytest.skip(f"real traces not found at {SWE} (set CTXSIM_TRACES to the shared traces folder)")
    return SWE


@pytest.fixture(scope="module")
def swe_traces(swe_dir):
    return {name: list(load_path(swe_dir / name)) for name in SAMPLES}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_sample_imports_validates_and_is_detected(swe_dir, swe_traces, name):
    trace_id, calls, events, model, policy = SAMPLES[name]
    assert detect(swe_dir / name).name == "swe-agent"
    (t,) = swe_traces[name]
    assert trace_problems(trace_to_dict(t)) == []
    assert (t.trace_id, len(t.calls), len(t.events), t.model) == (trace_id, calls, events, model)
    assert t.recorded_policy == policy
    assert t.source_format == "swe-agent"
    # no per-call usage: SWE-agent counts per run only, client-side
    assert all(c.input_tokens is None and c.usage_provenance == "none" for c in t.calls)
    assert all(e.tokens_provenance == "estimate" for e in t.events)
    assert [e.kind for e in t.events[:2]] == ["system", "user"]
    # every observation answers the action before it
    for e in t.events:
        if e.kind == "tool_result":
            prev = t.events[e.index - 1]
            assert prev.kind == "assistant" and e.tool_call_id in prev.tool_call_ids
    replay(t, make_policy("raw"))


def test_run_totals_are_kept_as_a_check_not_as_usage(swe_traces):
    (t,) = swe_traces["v0_gpt4_pydicom__pydicom-1458/pydicom__pydicom-1458.traj"]
    stats = t.outcome["model_stats"]
    assert stats["tokens_sent"] == 122612 and stats["api_calls"] == 12 == len(t.calls)
    assert t.outcome["exit_status"] == "submitted"
    assert t.outcome["demo_messages_skipped"] == 1
    assert not any("--- DEMONSTRATION ---" in (e.content or "") for e in t.events)
    # the final observation (from the trajectory) is the submitted diff
    assert t.events[-1].kind == "tool_result" and "diff --git" in t.events[-1].content


def test_lastn5_policy_ids_and_final_step(swe_traces):
    (t,) = swe_traces[LASTN5]
    assert t.recorded_policy == {"name": "observation_masking", "n": 5, "polling": 1}
    assert t.agent == "SWE-agent 1.x"
    assert t.outcome["model_stats"]["api_calls"] == 5 == len(t.calls)
    assert t.outcome["steps_from_trajectory"] == 1
    # 1.x function calling: the recorded ids are used; the step rebuilt from the trajectory gets call-4
    ids = [e.tool_call_ids[0] for e in t.events if e.kind == "assistant"]
    assert ids[0] == "call_fJuazlMUN5fQDQ73G6XSpYpx" and ids[-1] == "call-4"
    assert "find_file(" in t.events[2].content  # the function call is part of the action's text
    p = {k: v for k, v in t.recorded_policy.items() if k != "name"}
    replay(t, make_policy("observation_masking", **p))


def test_demonstrations_are_marked(swe_traces):
    (katy,) = swe_traces["v0_demo_enigma_ctf/katy.traj"]
    assert katy.outcome["demonstration"] is True  # model_stats all zero: a hand-written demo
    (marsh,) = swe_traces[
        "v1_demo_function_calling_replace_from_source/marshmallow-code__marshmallow-1867.traj"
    ]
    assert marsh.outcome["demonstration"] is True and marsh.outcome["scripted_model"] == "replay"


def test_shell_and_tool_commands_give_facts(swe_traces):
    """pydicom: ``create`` / ``edit`` windows are reads of reproduce_bug.py, ``find_file`` lists the
    handler that ``open`` then needs, each ``edit`` of it shows a new window, tracebacks are errors."""
    (t,) = swe_traces["v0_gpt4_pydicom__pydicom-1458/pydicom__pydicom-1458.traj"]
    handler = "pydicom/pixel_data_handlers/numpy_handler.py"
    assert [f for e in t.events for f in e.provides] == [
        "constraint@0",
        "goal@1",
        "read:reproduce_bug.py@3",
        "read:reproduce_bug.py@5",
        "error@7",
        f"found:{handler}@9",
        f"read:{handler}@11",
        f"read:{handler}@13",
        "error@13",
        f"read:{handler}@15",
        "error@15",
        f"read:{handler}@17",
        "error@17",
        f"read:{handler}@19",
    ]
    assert t.events[24].needs == (f"read:{handler}@19", "error@7", "constraint@0", "goal@1")


def test_recorded_policy_mapping():
    assert recorded_policy(None) == {"name": "raw"}
    assert recorded_policy([]) == {"name": "raw"}
    assert recorded_policy(
        [{"type": "last_n_observations", "n": 3, "polling": 2}, {"type": "cache_control"}]
    ) == {
        "name": "observation_masking",
        "n": 3,
        "polling": 2,
    }
    assert recorded_policy(["Last5Observations"]) == {"name": "observation_masking", "n": 5, "polling": 1}
    closed = [{"type": "closed_window"}]
    assert recorded_policy(closed) == {"name": "raw", "history_processors": closed}


# ----------------------------------------------------------------------------------------- real mess
def _v0(history, trajectory=None) -> dict:
    return {
        "environment": "swe_main",
        "trajectory": trajectory or [],
        "history": history,
        "info": {"exit_status": "submitted", "model_stats": {"tokens_sent": 10, "api_calls": 1}},
    }


def _write(tmp_path: Path, data, name="inst__x-1.traj") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(data))
    return p


BASE = [
    {"role": "system", "content": "You are a programmer."},
    {"role": "user", "content": "Fix the bug."},
]


def test_empty_content_is_kept(tmp_path):
    p = _write(
        tmp_path,
        _v0(BASE + [{"role": "assistant", "content": "", "action": "ls"}, {"role": "user", "content": ""}]),
    )
    (t,) = load_path(p)
    assert [e.content for e in t.events[2:]] == ["", ""]
    assert t.events[3].tool_call_id == "call-0"
    assert trace_problems(trace_to_dict(t)) == []


def test_observation_without_its_call_warns_and_stays_unpaired(tmp_path):
    hist = BASE + [
        {"role": "assistant", "content": "look", "action": "ls", "tool_calls": [{"id": "a1"}]},
        {"role": "tool", "content": "x.py", "tool_call_ids": ["a1"], "message_type": "observation"},
        {"role": "tool", "content": "stray", "tool_call_ids": ["zz"], "message_type": "observation"},
    ]
    p = _write(tmp_path, _v0(hist))
    with pytest.warns(ImportNotice, match="answer no earlier tool call"):
        (t,) = load_path(p)
    assert t.events[-1].kind == "tool_result" and t.events[-1].tool_call_id is None
    assert trace_problems(trace_to_dict(t)) == []


def test_non_utf8_bytes_warn_and_import(tmp_path):
    hist = BASE + [
        {"role": "assistant", "content": "cat a.py", "action": "cat a.py"},
        {"role": "user", "content": "X"},
    ]
    raw = json.dumps(_v0(hist)).encode().replace(b'"X"', b'"caf\xe9 \xff"')
    p = tmp_path / "bad__bytes-1.traj"
    p.write_bytes(raw)
    with pytest.warns(ImportNotice, match="not valid UTF-8"):
        (t,) = load_path(p)
    assert "\ufffd" in t.events[-1].content
    assert t.events[-1].provides == ("read:a.py@3",)  # the shell read still gives its fact


def test_truncated_json_names_the_file(tmp_path):
    p = _write(tmp_path, _v0(BASE))
    p.write_text(p.read_text()[:-40])
    with pytest.raises(TraceError, match=p.name):
        list(load_path(p))
    with pytest.raises(TraceError, match=p.name):
        list(get_importer("swe-agent").load(p))


def test_sniff_rejects_other_formats(tmp_path):
    sniff = get_importer("swe-agent").sniff
    assert not sniff(_write(tmp_path, [{"role": "user", "content": "hi"}], "chat.traj"))
    assert not sniff(_write(tmp_path, {"messages": [], "trajectory_format": "mini-swe-agent-1"}, "m.traj"))
    (tmp_path / "bin.traj").write_bytes(b"\x00\x01garbage")
    assert not sniff(tmp_path / "bin.traj")


def test_replay_config_as_json_string(swe_dir, tmp_path):
    """SWE-agent 1.x writes ``replay_config`` as a JSON string; the shared sample holds an object."""
    data = json.loads((swe_dir / LASTN5).read_text())
    data["replay_config"] = json.dumps(data["replay_config"])
    (t,) = load_path(_write(tmp_path, data, "6e44b9__sweagenttestrepo-1c2844.traj"))
    assert t.recorded_policy == {"name": "observation_masking", "n": 5, "polling": 1}
    assert t.model == "gpt-4o"
    data["replay_config"] = "{not json"
    with pytest.warns(ImportNotice, match="replay_config is not valid JSON"):
        (t,) = load_path(_write(tmp_path, data, "broken-config.traj"))
    assert t.recorded_policy == {"name": "raw"} and t.model is None
