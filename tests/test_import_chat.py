"""Plain chat transcripts (OpenAI chat messages, Anthropic Messages): mapping, usage, detection, mess.

No shared samples exist for these formats: each test writes a small file of the documented shapes."""

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

OPENAI_LIST = [
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "List the files."},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_a", "type": "function", "function": {"name": "bash", "arguments": '{"cmd": "ls"}'}}
        ],
        "usage": {
            "prompt_tokens": 120,
            "completion_tokens": 9,
            "prompt_tokens_details": {"cached_tokens": 100},
        },
    },
    {"role": "tool", "tool_call_id": "call_a", "content": "a.py\nb.py"},
    {"role": "assistant", "content": "Two files.", "usage": {"prompt_tokens": 150, "completion_tokens": 4}},
]

ANTHROPIC_BODY = {
    "model": "claude-3-5-haiku-20241022",
    "system": "You are helpful.",
    "tools": [{"name": "bash", "description": "run", "input_schema": {"type": "object"}}],
    "messages": [
        {"role": "user", "content": "List the files."},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "use bash", "signature": "x"},
                {"type": "text", "text": "Listing."},
                {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"cmd": "ls"}},
            ],
            "usage": {"input_tokens": 20, "cache_read_input_tokens": 300, "output_tokens": 12},
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [{"type": "text", "text": "a.py"}],
                },
                {"type": "text", "text": "And?"},
            ],
        },
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "One file."}],
            "usage": {"input_tokens": 40, "cache_read_input_tokens": 300, "output_tokens": 3},
        },
    ],
}


def _write(tmp_path: Path, data, name="chat.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(data))
    return p


def _one(path: Path):
    (t,) = load_path(path)
    assert trace_problems(trace_to_dict(t)) == []
    replay(t, make_policy("raw"))
    return t


def test_openai_list(tmp_path):
    p = _write(tmp_path, OPENAI_LIST, "session-1.json")
    assert detect(p).name == "openai-chat"
    t = _one(p)
    assert t.trace_id == "session-1" and t.source_format == "openai-chat"
    assert [e.kind for e in t.events] == ["system", "user", "assistant", "tool_result", "assistant"]
    assert t.events[2].tool_call_ids == ("call_a",) and t.events[3].tool_call_id == "call_a"
    assert t.events[2].content == 'bash({"cmd": "ls"})'
    assert [(c.input_tokens, c.output_tokens, c.cache_read_tokens) for c in t.calls] == [
        (120, 9, 100),  # OpenAI counts cached tokens inside prompt_tokens already
        (150, 4, None),
    ]
    assert all(c.usage_provenance == "provider" for c in t.calls)
    # sizes split from the provider's counts up to the last call; its own output has no later input
    assert [e.tokens_provenance for e in t.events] == ["derived"] * 4 + ["estimate"]
    assert t.recorded_policy == {"name": "raw"}


def test_openai_request_body_with_tools_and_model(tmp_path):
    body = {
        "model": "gpt-4o",
        "tools": [{"type": "function", "function": {"name": "bash"}}],
        "messages": OPENAI_LIST,
    }
    p = _write(tmp_path, body)
    assert detect(p).name == "openai-chat"
    t = _one(p)
    assert t.model == "gpt-4o"
    assert [e.kind for e in t.events[:3]] == ["system", "tools", "user"]
    assert t.calls[0].event_index == 3 and t.calls[0].input_tokens == 120  # usage follows the shift


def test_anthropic_body(tmp_path):
    p = _write(tmp_path, ANTHROPIC_BODY)
    assert detect(p).name == "anthropic-messages"
    t = _one(p)
    assert t.model == "claude-3-5-haiku-20241022"
    kinds = [e.kind for e in t.events]
    assert kinds == ["system", "tools", "user", "assistant", "tool_result", "user", "assistant"]
    a = t.events[3]
    assert a.content == 'Listing.\nbash({"cmd": "ls"})' and a.tool_call_ids == ("toolu_1",)  # no thinking
    assert t.events[4].tool_call_id == "toolu_1" and t.events[4].content == "a.py"
    # Anthropic reports cache reads beside input_tokens: input is their sum
    assert [(c.input_tokens, c.cache_read_tokens) for c in t.calls] == [(320, 300), (340, 300)]


def test_anthropic_list_of_block_messages(tmp_path):
    p = _write(tmp_path, ANTHROPIC_BODY["messages"])
    assert detect(p).name == "anthropic-messages"
    t = _one(p)
    assert [e.kind for e in t.events] == ["user", "assistant", "tool_result", "user", "assistant"]
    assert t.model is None


def test_sniffs_leave_other_formats_alone(tmp_path):
    sniffs = [get_importer(n).sniff for n in ("openai-chat", "anthropic-messages")]
    foreign = {
        "tau.json": [{"task_id": 0, "reward": 1.0, "info": {}, "traj": OPENAI_LIST, "trial": 0}],
        "mini.json": {"info": {}, "messages": OPENAI_LIST, "trajectory_format": "mini-swe-agent-1"},
        "telemetry.json": {"context_window": 1, "messages": OPENAI_LIST, "response": {}},
        "events.json": [{"id": 0, "source": "user", "message": "hi"}],
        "empty.json": [],
    }
    for name, data in foreign.items():
        p = _write(tmp_path, data, name)
        assert not any(s(p) for s in sniffs), name
    assert detect(tmp_path / "tau.json").name == "tau-bench"


def test_sniffs_claim_no_shared_sample():
    root = traces_dir()
    if not root.is_dir():
        pytest.skip(f"real traces not found at {root}")
    sniffs = [get_importer(n).sniff for n in ("openai-chat", "anthropic-messages")]
    claimed = [p for p in root.rglob("*.json") if any(s(p) for s in sniffs)]
    assert claimed == []


# ----------------------------------------------------------------------------------------- real mess
def test_empty_content_is_kept(tmp_path):
    msgs = [
        {"role": "user", "content": ""},
        {"role": "assistant", "content": None},
        {"role": "user", "content": []},
    ]
    t = _one(_write(tmp_path, msgs))
    assert [(e.kind, e.content) for e in t.events] == [("user", ""), ("assistant", ""), ("user", "")]


def test_tool_result_without_its_call_warns_and_stays_unpaired(tmp_path):
    msgs = [*OPENAI_LIST, {"role": "tool", "tool_call_id": "call_zz", "content": "stray"}]
    with pytest.warns(ImportNotice, match="answer no earlier tool call"):
        t = _one(_write(tmp_path, msgs))
    assert t.events[-1].kind == "tool_result" and t.events[-1].tool_call_id is None
    body = json.loads(json.dumps(ANTHROPIC_BODY))
    body["messages"][2]["content"][0]["tool_use_id"] = "toolu_gone"
    with pytest.warns(ImportNotice, match="answer no earlier tool call"):
        t = _one(_write(tmp_path, body, "a.json"))
    assert t.events[4].kind == "tool_result" and t.events[4].tool_call_id is None


def test_some_calls_with_usage_some_without_warns(tmp_path):
    msgs = json.loads(json.dumps(OPENAI_LIST))
    del msgs[4]["usage"]
    with pytest.warns(ImportNotice, match="1 of 2 calls have no recorded usage"):
        t = _one(_write(tmp_path, msgs))
    assert [c.usage_provenance for c in t.calls] == ["provider", "none"]
    assert t.calls[1].input_tokens is None


def test_non_utf8_bytes_warn_and_import(tmp_path):
    p = tmp_path / "latin.json"
    p.write_bytes(json.dumps(OPENAI_LIST).encode().replace(b"List the files.", b"Liste caf\xe9 \xff"))
    assert detect(p).name == "openai-chat"
    with pytest.warns(ImportNotice, match="not valid UTF-8"):
        t = _one(p)
    assert "\ufffd" in t.events[1].content


def test_truncated_json_names_the_file(tmp_path):
    p = _write(tmp_path, OPENAI_LIST, "cut.json")
    p.write_text(p.read_text()[:-25])
    with pytest.raises(TraceError, match="cut.json"):
        list(load_path(p))
    for name in ("openai-chat", "anthropic-messages"):
        with pytest.raises(TraceError, match="cut.json.*invalid JSON"):
            list(get_importer(name).load(p))


def test_unknown_role_names_the_record(tmp_path):
    p = _write(tmp_path, [{"role": "user", "content": "hi"}, {"role": "robot", "content": "beep"}])
    with pytest.raises(TraceError, match=r"record messages\[1\]: field role"):
        list(get_importer("openai-chat").load(p))
