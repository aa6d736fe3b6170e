"""Amplifying inputs for every importer (issue 41): small files whose records share an id, a reference
or a pool range, so that an importer joining them by a scan per record would take time quadratic in
their size. Each builder writes the input for size ``n`` under ``folder`` and returns its path; the
scaling tests time two sizes, the repro in the report used the same builders."""

from __future__ import annotations

import json
import zipfile
from math import isqrt
from pathlib import Path

TS = "2025-01-01T00:00:00Z"


def _write(path: Path, data) -> Path:
    path.write_text(json.dumps(data))
    return path


def claude_code_shared_message_id(folder: Path, n: int) -> Path:
    """``n`` assistant records of one response (one ``message.id``), each a tool_use block."""
    lines = [
        {
            "type": "user",
            "sessionId": "s",
            "uuid": "u0",
            "timestamp": TS,
            "message": {"role": "user", "content": "go"},
        }
    ]
    for k in range(n):
        content = [{"type": "tool_use", "id": f"t{k}", "name": "Bash", "input": {"command": f"echo {k}"}}]
        msg = {"id": "msg_1", "role": "assistant", "model": "claude-x", "content": content}
        msg["usage"] = {"input_tokens": 10, "output_tokens": 1}
        lines.append(
            {"type": "assistant", "sessionId": "s", "uuid": f"a{k}", "timestamp": TS, "message": msg}
        )
    path = folder / "shared_id.jsonl"
    path.write_text("\n".join(json.dumps(d) for d in lines) + "\n")
    return path


def claude_code_sidechains(folder: Path, n: int) -> Path:
    """One Task call, then ``n`` sidechains, each with its own ``agentId`` (a prompt and a reply)."""
    task = {"type": "tool_use", "id": "task", "name": "Task", "input": {}}
    lines = [
        {
            "type": "user",
            "sessionId": "s",
            "uuid": "u0",
            "timestamp": TS,
            "message": {"role": "user", "content": "go"},
        },
        {
            "type": "assistant",
            "sessionId": "s",
            "uuid": "a0",
            "timestamp": TS,
            "message": {
                "id": "m0",
                "role": "assistant",
                "content": [task],
                "usage": {"input_tokens": 5, "output_tokens": 1},
            },
        },
    ]
    for k in range(n):
        common = {"sessionId": "s", "isSidechain": True, "agentId": f"agent{k}", "timestamp": TS}
        lines.append(
            {**common, "type": "user", "uuid": f"su{k}", "message": {"role": "user", "content": "sub"}}
        )
        reply = {
            "id": f"sm{k}",
            "role": "assistant",
            "content": "done",
            "usage": {"input_tokens": 3, "output_tokens": 1},
        }
        lines.append(
            {**common, "type": "assistant", "uuid": f"sa{k}", "parentUuid": f"su{k}", "message": reply}
        )
    path = folder / "sidechains.jsonl"
    path.write_text("\n".join(json.dumps(d) for d in lines) + "\n")
    return path


def claude_code_unlinked_sidechains(folder: Path, n: int) -> Path:
    """``n`` sidechains without ``agentId``: each a prompt and a reply linked by ``parentUuid``."""
    path = claude_code_sidechains(folder, n)
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    for d in lines:
        d.pop("agentId", None)
    path.write_text("\n".join(json.dumps(d) for d in lines) + "\n")
    return path


def openhands_sdk_shared_response(folder: Path, n: int) -> Path:
    """An SDK conversation whose ``n`` action events share one ``llm_response_id``, each answered."""
    conv = folder / "conv"
    (conv / "events").mkdir(parents=True)
    usage = {"response_id": "r1", "prompt_tokens": 10, "completion_tokens": 1}
    state = {
        "id": "c",
        "agent": {"llm": {"model": "gpt-4o-mini"}},
        "stats": {"usage_to_metrics": {"agent": {"token_usages": [usage]}}},
    }
    _write(conv / "base_state.json", state)
    k = 0

    def event(e: dict) -> None:
        nonlocal k
        _write(conv / "events" / f"event-{k:05d}-e{k}.json", {"timestamp": TS, **e})
        k += 1

    event(
        {
            "kind": "MessageEvent",
            "source": "user",
            "llm_message": {"role": "user", "content": [{"type": "text", "text": "go"}]},
        }
    )
    for j in range(n):
        call = {"name": "terminal", "arguments": json.dumps({"command": f"echo {j} " + "x" * 400})}
        event(
            {
                "kind": "ActionEvent",
                "tool_call_id": f"t{j}",
                "llm_response_id": "r1",
                "tool_call": call,
                "thought": [],
            }
        )
    for j in range(n):
        obs = {"kind": "TextObservation", "content": [{"type": "text", "text": f"{j}"}]}
        event({"kind": "ObservationEvent", "tool_call_id": f"t{j}", "observation": obs})
    return conv


def openhands_sdk_user_messages(folder: Path, n: int) -> Path:
    """An SDK conversation of ``n`` user messages before the one assistant message."""
    conv = folder / "conv_users"
    (conv / "events").mkdir(parents=True)
    _write(conv / "base_state.json", {"id": "c", "agent": {"llm": {"model": "gpt-4o-mini"}}})
    for j in range(n):
        e = {
            "kind": "MessageEvent",
            "source": "user",
            "llm_message": {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        }
        _write(conv / "events" / f"event-{j:05d}-e{j}.json", {"timestamp": TS, **e})
    e = {
        "kind": "MessageEvent",
        "source": "agent",
        "llm_message": {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
    }
    _write(conv / "events" / f"event-{n:05d}-e{n}.json", {"timestamp": TS, **e})
    return conv


def _inspect_sample(n: int) -> dict:
    """A sample whose ``n`` model events each take ``input_refs [[0, n]]`` of a pool of ``n`` messages
    without ids (so each is keyed by its JSON)."""
    pool = [{"role": "user", "content": f"message {j}"} for j in range(n)]
    events = [
        {
            "event": "model",
            "timestamp": TS,
            "input": [],
            "input_refs": [[0, n]],
            "output": {
                "choices": [{"message": {"role": "assistant", "content": f"reply {k}"}}],
                "usage": {"input_tokens": 10, "output_tokens": 1},
            },
        }
        for k in range(n)
    ]
    return {"id": "s", "epoch": 1, "messages": [], "events": events, "message_pool": pool}


INSPECT_HEADER = {"version": 2, "status": "success", "eval": {"task": "demo", "model": "openai/gpt-4o-mini"}}


def inspect_eval_refs(folder: Path, n: int) -> Path:
    path = folder / "refs.eval"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("header.json", json.dumps(INSPECT_HEADER))
        z.writestr("samples/s_epoch_1.json", json.dumps(_inspect_sample(n)))
    return path


def inspect_json_no_ids(folder: Path, n: int) -> Path:
    """An Inspect JSON log whose ``isqrt(n)`` model events each repeat the whole conversation so far
    (messages without ids): its size grows as the square of its events, so as ``n``."""
    conv: list[dict] = [{"role": "user", "content": "go"}]
    events = []
    for k in range(isqrt(n)):
        reply = {"role": "assistant", "content": f"reply {k}"}
        events.append(
            {
                "event": "model",
                "timestamp": TS,
                "input": list(conv),
                "output": {
                    "choices": [{"message": reply}],
                    "usage": {"input_tokens": 10, "output_tokens": 1},
                },
            }
        )
        conv += [reply, {"role": "user", "content": f"more {k}"}]
    log = {**INSPECT_HEADER, "samples": [{"id": "s", "epoch": 1, "messages": [], "events": events}]}
    return _write(folder / "conv.json", log)


def openai_chat_calls(folder: Path, n: int) -> Path:
    """One assistant message issuing ``n`` tool calls, then ``n`` results (and ``n`` orphans)."""
    calls = [
        {"id": f"c{k}", "type": "function", "function": {"name": "f", "arguments": "{}"}} for k in range(n)
    ]
    msgs = [{"role": "user", "content": "go"}, {"role": "assistant", "content": "", "tool_calls": calls}]
    msgs += [{"role": "tool", "tool_call_id": f"c{k}", "content": "r"} for k in range(n)]
    msgs += [{"role": "tool", "tool_call_id": f"x{k}", "content": "r"} for k in range(n)]
    msgs += [{"role": "assistant", "content": "done"}]
    return _write(folder / "chat.json", msgs)


def anthropic_messages_calls(folder: Path, n: int) -> Path:
    """One assistant message issuing ``n`` tool_use blocks, answered in one user message."""
    uses = [{"type": "tool_use", "id": f"t{k}", "name": "f", "input": {}} for k in range(n)]
    results = [{"type": "tool_result", "tool_use_id": f"t{k}", "content": "r"} for k in range(n)]
    msgs = [
        {"role": "user", "content": [{"type": "text", "text": "go"}]},
        {"role": "assistant", "content": uses},
        {"role": "user", "content": results},
        {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
    ]
    return _write(folder / "messages.json", {"system": "s", "messages": msgs})


def openhands_v0_shared_response(folder: Path, n: int) -> Path:
    """An OpenHands v0 event list whose ``n`` agent actions share one model response id, each observed;
    then ``n`` user messages."""
    events: list[dict] = [
        {
            "id": 0,
            "timestamp": TS,
            "source": "user",
            "action": "message",
            "args": {"content": "go"},
            "message": "go",
        }
    ]
    resp = {
        "id": "r1",
        "choices": [{"message": {"content": "x"}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 1},
    }
    for k in range(n):
        tcm = {"tool_call_id": f"t{k}", "model_response": resp, "function_name": "execute_bash"}
        events.append(
            {
                "id": 1 + k,
                "timestamp": TS,
                "source": "agent",
                "action": "run",
                "args": {"command": f"echo {k}"},
                "tool_call_metadata": tcm,
                "message": "",
            }
        )
    for k in range(n):
        tcm = {"tool_call_id": f"t{k}", "function_name": "execute_bash"}
        events.append(
            {
                "id": 1 + n + k,
                "timestamp": TS,
                "source": "agent",
                "observation": "run",
                "content": "ok",
                "cause": 1 + k,
                "extras": {"command": "echo", "metadata": {"exit_code": 0}},
                "tool_call_metadata": tcm,
                "message": "",
            }
        )
    for k in range(n):
        events.append(
            {
                "id": 1 + 2 * n + k,
                "timestamp": TS,
                "source": "user",
                "action": "message",
                "args": {"content": "more"},
                "message": "more",
            }
        )
    return _write(folder / "events.json", events)


def openhands_v0_output(folder: Path, n: int) -> Path:
    """The same history as an evaluation ``output.jsonl`` line."""
    events = json.loads(openhands_v0_shared_response(folder, n).read_text())
    line = {
        "instance_id": "i",
        "instruction": "go",
        "history": events,
        "metadata": {"agent_class": "CodeActAgent", "llm_config": {"model": "gpt-4o"}},
        "metrics": {},
    }
    path = folder / "output.jsonl"
    path.write_text(json.dumps(line) + "\n")
    return path


def mini_swe_agent_users(folder: Path, n: int) -> Path:
    """A mini-swe-agent trajectory: system, ``n`` user messages, then ``n`` assistant/observation turns."""
    msgs = [{"role": "system", "content": "sys"}] + [
        {"role": "user", "content": f"task {k}"} for k in range(n)
    ]
    for k in range(n):
        msgs.append(
            {
                "role": "assistant",
                "content": f"THOUGHT\n```bash\necho {k}\n```",
                "extra": {"response": {"usage": {"prompt_tokens": 10, "completion_tokens": 1}}},
            }
        )
        msgs.append({"role": "user", "content": f"<returncode>0</returncode><output>{k}</output>"})
    data = {
        "info": {"exit_status": "Submitted", "config": {"model": {"model_name": "m"}}, "mini_version": "1.0"},
        "messages": msgs,
        "trajectory_format": "mini-swe-agent-1",
    }
    return _write(folder / "run.traj.json", data)


def swe_agent_steps(folder: Path, n: int) -> Path:
    """A SWE-agent 1.x trajectory of ``n`` steps, each call answered, with a history of every message."""
    history = [
        {"role": "system", "content": "sys", "message_type": "system_prompt"},
        {"role": "user", "content": "task", "message_type": "observation"},
    ]
    traj = []
    for k in range(n):
        history.append(
            {
                "role": "assistant",
                "content": f"run {k}",
                "thought": "",
                "action": f"echo {k}",
                "message_type": "action",
                "tool_calls": [{"id": f"c{k}", "function": {"name": "bash", "arguments": "{}"}}],
            }
        )
        history.append(
            {"role": "tool", "content": f"{k}", "tool_call_ids": [f"c{k}"], "message_type": "observation"}
        )
        traj.append(
            {
                "action": f"echo {k}",
                "observation": f"{k}",
                "response": f"run {k}",
                "thought": "",
                "state": {},
                "query": [],
                "extra_info": {},
            }
        )
    data = {
        "trajectory": traj,
        "history": history,
        "info": {"model_stats": {"api_calls": n, "tokens_sent": 10 * n, "tokens_received": n}},
        "replay_config": "{}",
        "environment": "swe_main",
    }
    return _write(folder / "run.traj", data)


def tau_bench_turns(folder: Path, n: int) -> Path:
    """A tau-bench run of ``n`` tool calls and results."""
    traj = [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"}]
    for k in range(n):
        traj.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": f"c{k}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            }
        )
        traj.append({"role": "tool", "tool_call_id": f"c{k}", "name": "f", "content": "r"})
    traj.append({"role": "assistant", "content": "bye"})
    runs = [{"task_id": 0, "reward": 1.0, "info": {}, "traj": traj, "trial": 0}]
    return _write(folder / "tau.json", runs)


def openai_chat_json_results(folder: Path, n: int) -> Path:
    """One assistant message issuing ``n`` tool calls (each with an argument), then ``n`` JSON results:
    each result's entity is looked up among the calls of the message that issued it."""
    calls = []
    for k in range(n):
        fn = {"name": "get", "arguments": json.dumps({"id": f"e{k}"})}
        calls.append({"id": f"c{k}", "type": "function", "function": fn})
    msgs = [{"role": "user", "content": "go"}, {"role": "assistant", "content": "", "tool_calls": calls}]
    for k in range(n):
        msgs.append(
            {"role": "tool", "tool_call_id": f"c{k}", "content": json.dumps({"status": f"state_{k:05d}"})}
        )
    msgs += [{"role": "assistant", "content": "done"}]
    return _write(folder / "chat_json.json", msgs)


EXPORTS = Path(__file__).parent / "data" / "exports"


def _replicate(template: str, k: int, ids: dict[str, str]) -> str:
    """``template`` (JSON text of one record) with every id of ``ids`` made the ``k``-th copy's own."""
    for old, new in ids.items():
        template = template.replace(old, f"{new}{k}")
    return template


def _clock(ms: int) -> str:
    """MM:SS.mmm of ``ms`` milliseconds past the hour: copies in time order."""
    return f"{ms // 60000 % 60:02d}:{ms // 1000 % 60:02d}.{ms % 1000:03d}"


def otel_genai_calls(folder: Path, n: int) -> Path:
    """One OTLP document of ``n`` chat spans and their ``execute_tool`` spans under one root, each a copy
    of the sample's first call and tool run (its own span, response and tool-call ids; a start time a
    millisecond later): a conversation whose every request repeats only the opening message."""
    doc = json.loads((EXPORTS / "otel_genai_spans.jsonl").read_text().splitlines()[0])
    scope = doc["resourceSpans"][0]["scopeSpans"][0]
    spans = [s for rs in doc["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]
    chat, tool = spans[0], spans[1]
    root = next(s for s in spans if s["spanId"] == chat["parentSpanId"])
    out = [root]
    t0 = int(chat["startTimeUnixNano"])
    for k in range(n):
        for j, s in enumerate((chat, tool)):
            c = json.loads(_replicate(json.dumps(s), k, {"call_you0": "call_", "chatcmpl-1": "chatcmpl-"}))
            c["spanId"] = f"{2 * k + j + 1:016x}"
            c["startTimeUnixNano"] = c["endTimeUnixNano"] = str(t0 + (2 * k + j) * 1_000_000)
            out.append(c)
    doc["resourceSpans"] = [{**doc["resourceSpans"][0], "scopeSpans": [{**scope, "spans": out}]}]
    return _write(folder / "spans.json", doc)


def langfuse_calls(folder: Path, n: int) -> Path:
    """A Langfuse trace whose agent observation holds ``n`` copies of the sample's first generation and
    its tool observation (their own ids and tool-call ids, in time order)."""
    trace = json.loads((EXPORTS / "langfuse_trace.json").read_text())
    agent, gen, tool = trace["observations"][:3]
    obs = [agent]
    for k in range(n):
        for j, o in enumerate((gen, tool)):
            c = json.loads(_replicate(json.dumps(o), k, {"call_you0": "call_"}))
            c["id"] = f"lf-amp-{2 * k + j}"
            c["startTime"] = c["endTime"] = f"2026-12-01T09:{_clock(2 * k + j)}Z"
            obs.append(c)
    trace["observations"] = obs
    return _write(folder / "trace.json", trace)


def langsmith_calls(folder: Path, n: int) -> Path:
    """LangSmith runs: one chain with ``n`` copies of the sample's first llm run and its tool run."""
    runs = [json.loads(x) for x in (EXPORTS / "langsmith_runs.jsonl").read_text().splitlines()]
    chain, llm, tool = runs[0], runs[1], runs[2]
    chain = {**chain, "child_run_ids": []}
    lines = [json.dumps(chain)]
    for k in range(n):
        for j, r in enumerate((llm, tool)):
            c = json.loads(_replicate(json.dumps(r), k, {"call_you0": "call_"}))
            c["id"] = f"00000000-0000-7000-8000-{2 * k + j:012x}"
            c["start_time"] = c["end_time"] = f"2026-12-06T10:{_clock(2 * k + j)}000Z"
            c.pop("dotted_order", None)
            lines.append(json.dumps(c))
    (folder / "runs.jsonl").write_text("\n".join(lines) + "\n")
    return folder / "runs.jsonl"
