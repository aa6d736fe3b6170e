"""Letta's real compaction over canonical traces (letta 0.16.8, pinned in requirements.txt).

    .venv/bin/python oracle.py IN.json OUT.json     (run by ../frameworks.py)

Per trace and setting, the in-context messages are built as Letta holds them (message 0 the system
prompt: the ``system`` events; assistant messages with one ``bash`` tool call per call id; tool
messages); the ``tools`` events are the agent's tool schemas, passed to ``compact_messages`` as
``letta_agent_v3`` passes its tools, and sent with every request. ``letta_agent_v3``'s rule drives it:
after each step, when the step's usage total (prompt + completion) exceeds
``get_compaction_trigger_threshold`` (int(0.9 x context_window)), the real ``compact_messages``
(``services/summarizer/compact.py``: the mode's summarizer, the sliding window's fallback to
``summarize_all``, the post-compaction check) replaces the in-context messages at the end of the step
(a user message after the step's output and tool results is the next turn's input: appended after).
When the system prompt alone reaches ``context_window``, ``compact_messages`` raises
``SystemPromptTokenExceededError`` and the agent loop stops: the run ends ``context-overflow``.

Alignment: Letta's ``count_tokens`` sums ctxsim's sizes (no 1.3 margin: that is only for its
approximate counter), ``count_tokens_with_tools`` adds the ``tools`` events' sizes when given tools;
``simple_summary`` is scripted, answering ``SUMMARY n`` weighing the size rule over the messages it
was given; the summary message weighs that (its system-alert framing, which holds the time, is not
sized); the step's prompt is the request's sum (tools included) plus the call's residual, its
completion ctxsim's mock-model output.
"""

from __future__ import annotations

import logging
import re
import sys
from pathlib import Path

import letta.services.summarizer.compact as compact
import letta.services.summarizer.summarizer_all as sall
import letta.services.summarizer.summarizer_sliding_window as sw
from letta.errors import SystemPromptTokenExceededError
from letta.schemas.enums import MessageRole
from letta.schemas.letta_message_content import TextContent
from letta.schemas.llm_config import LLMConfig
from letta.schemas.message import Message
from letta.services.summarizer.summarizer_config import CompactionSettings
from letta.services.summarizer.thresholds import get_compaction_trigger_threshold
from openai.types.chat.chat_completion_message_function_tool_call import (
    ChatCompletionMessageFunctionToolCall as ToolCall,
)
from openai.types.chat.chat_completion_message_function_tool_call import Function

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # benchmarks/oracles: oracle_job
from oracle_job import rle, run_job  # noqa: E402

logging.disable(logging.CRITICAL)  # its CRITICAL "failed to summarize" goes to stdout
AGENT_ID = "agent-00000000-0000-4000-8000-000000000000"
SUMMARY_RE = re.compile(r"SUMMARY (\d+)")


class Run:
    current: Run | None = None

    def __init__(self, rule: dict) -> None:
        self.rule = rule
        self.tool_tokens = 0  # the agent's tool schemas (the ``tools`` events)
        self.size: dict[str, int] = {}  # message id -> tokens
        self.ctx: dict[str, int] = {}  # message id -> ctxsim index
        self.summaries: dict[int, int] = {}

    def tokens(self, m) -> int:
        if m.id in self.size:
            return self.size[m.id]
        found = SUMMARY_RE.search("".join(c.text for c in m.content if hasattr(c, "text")))
        return self.summaries[int(found.group(1))] if found else 0


async def _count_tokens(actor, llm_config, messages):
    return sum(Run.current.tokens(m) for m in messages)


async def _simple_summary(messages, **kwargs):
    run = Run.current
    n = len(run.summaries) + 1
    r = run.rule
    run.summaries[n] = min(max(round(r["ratio"] * sum(run.tokens(m) for m in messages)), r["min"]), r["max"])
    return f"SUMMARY {n}"


async def _count_tokens_with_tools(actor, llm_config, messages, tools=None):
    return await _count_tokens(actor, llm_config, messages) + (Run.current.tool_tokens if tools else 0)


sw.count_tokens = compact.count_tokens = _count_tokens
sw.count_tokens_with_tools = compact.count_tokens_with_tools = _count_tokens_with_tools
sw.simple_summary = sall.simple_summary = _simple_summary


def messages(trace: dict, run: Run) -> list:
    events = trace["events"]
    prompt = sum(e["tokens"] for e in events if e["kind"] == "system")
    run.tool_tokens = sum(e["tokens"] for e in events if e["kind"] == "tools")
    out = [Message(role=MessageRole.system, content=[TextContent(text="system")], agent_id=AGENT_ID)]
    run.size[out[0].id] = prompt
    roles = {"user": MessageRole.user, "assistant": MessageRole.assistant, "tool_result": MessageRole.tool}
    for i, e in enumerate(events):
        if e["kind"] in ("system", "tools"):
            continue
        kw = {}
        if e["kind"] == "assistant" and e["tool_call_ids"]:
            kw["tool_calls"] = [
                ToolCall(id=c, type="function", function=Function(name="bash", arguments="{}"))
                for c in e["tool_call_ids"]
            ]
        if e["kind"] == "tool_result":
            kw["tool_call_id"] = e["tool_call_id"]
        m = Message(
            role=roles[e["kind"]], content=[TextContent(text=e["text"] or "-")], agent_id=AGENT_ID, **kw
        )
        run.size[m.id], run.ctx[m.id] = e["tokens"], i
        out.append(m)
    return out


async def replay(trace: dict, config: dict, rule: dict) -> dict:
    run = Run.current = Run(rule)
    llm = LLMConfig(model="gpt-4o", model_endpoint_type="openai", context_window=config["context_window"])
    settings = CompactionSettings(
        mode=config["mode"], sliding_window_percentage=config["sliding_window_percentage"]
    )
    trigger = get_compaction_trigger_threshold(llm)
    msgs = messages(trace, run)
    system, rest = msgs[0], msgs[1:]
    in_context, p, calls, pending = [system], 0, [], False
    tools = [{"name": "bash", "parameters": {}}] if run.tool_tokens else []
    events = trace["events"]
    for k, call in enumerate(trace["calls"]):
        # the post-step compaction: the step's output and tool results are in; a user message after them
        # is the next turn's input (letta_agent_v3's next step()), appended after the compaction
        while pending and p < len(rest) and run.ctx[rest[p].id] < call["view_end"]:
            if events[run.ctx[rest[p].id]]["kind"] == "user":
                break
            in_context.append(rest[p])
            p += 1
        if pending:
            try:
                result = await compact.compact_messages(
                    actor=None, agent_id=AGENT_ID, agent_llm_config=llm, telemetry_manager=None,
                    llm_client=None, agent_type=None, messages=in_context, timezone="UTC",
                    compaction_settings=settings, tools=tools, trigger_threshold=trigger,
                    use_summary_role=True,
                )  # fmt: skip
            except SystemPromptTokenExceededError:  # letta_agent_v3 stops the run; this call is not made
                return {"finish": "context-overflow", "calls": calls}
            in_context = result.compacted_messages
        while p < len(rest) and run.ctx[rest[p].id] < call["view_end"]:
            in_context.append(rest[p])
            p += 1
        shown = {run.ctx[m.id] for m in in_context if m.id in run.ctx}
        summaries = [run.tokens(m) for m in in_context[1:] if m.id not in run.ctx]
        state = "".join(
            "V" if events[i]["kind"] in ("system", "tools") or i in shown else ("S" if summaries else "D")
            for i in range(call["view_end"])
        )
        tokens = sum(run.tokens(m) for m in in_context) + run.tool_tokens + call["residual"]
        calls.append([rle(state), summaries, tokens])
        pending = tokens + trace["outputs"][k] > trigger
    return {"finish": "completed", "calls": calls}


def main() -> int:
    return run_job(replay)


if __name__ == "__main__":
    sys.exit(main())
