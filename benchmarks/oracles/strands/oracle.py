"""Strands Agents' real conversation managers over canonical traces (strands-agents 1.62.0, pinned in
requirements.txt).

    .venv/bin/python oracle.py IN.json OUT.json     (run by ../frameworks.py)

Per trace and setting, a real ``strands.Agent`` with a scripted ``Model`` and one scripted tool: the
``user`` events between two calls open one invocation (``agent([message, ...])``, all of them; none
before the first call: ``agent()``; a call after an answer without tool calls opens one too); the model
answers call k with the recorded assistant event (its text and one ``toolUse`` per call id), the tool
returns the recorded result of that call and, when user events follow it, ends the invocation there
(``agent.cancel(after_current_tools=True)``: Strands has no other way to take a user message after a
tool result), so the manager runs where Strands runs it: after each invocation (``apply_management``), before
model calls (``per_turn``; proactive compression from the projected input tokens), and on a
``ContextWindowOverflowException`` the model raises when the request (system prompt and tool specs,
messages, the call's residual) exceeds the setting's ``window``. A state that overflows a second time
at the same call ends the run (``compaction-loop``: Strands would retry forever).

Alignment: ``count_tokens`` sums ctxsim's sizes (the system prompt and tool specs: the trace's
``system`` and ``tools`` events; a truncated tool result: ctxsim's ``scale_tokens`` of its bytes); the
model reports each call's request as sent plus the mock model's output (what the projected input
tokens start from). Texts of user and assistant messages carry their event number (``evN|``) so the
request can be traced back; tool results keep their recorded text (truncation reads it). The summarizer
is the real ``generate_summary`` call to the scripted model, which answers ``SUMMARY n`` weighing
clamp(ratio x the tokens it was given, min, max).
"""

from __future__ import annotations

import logging
import re
import sys
from pathlib import Path
from typing import Any

from strands import Agent
from strands.agent.conversation_manager import (
    SlidingWindowConversationManager,
    SummarizingConversationManager,
)
from strands.agent.conversation_manager.compression.context_compression import DEFAULT_SUMMARIZATION_PROMPT
from strands.models.model import Model
from strands.tools.tools import PythonAgentTool
from strands.types.exceptions import ContextWindowOverflowException

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # benchmarks/oracles: oracle_job
from oracle_job import rle, run_job  # noqa: E402

logging.getLogger("strands").setLevel(logging.CRITICAL)
INSTRUCTION = ("system", "tools")
TAG = re.compile(r"^ev(\d+)\|")
ASK = "Please summarize this conversation."


class Loop(Exception):
    """The same state overflowed twice at one call: Strands would re-summarize forever."""


def scale(tokens: int, old: int, new: int) -> int:
    """ctxsim's scale_tokens: a cut-down message keeps its content's bytes per token."""
    return round(tokens * (new + 16) / (old + 16))


class Run(Model):
    def __init__(self, trace: dict, config: dict, rule: dict) -> None:
        self.trace, self.rule = trace, rule
        self.events = trace["events"]
        self.window = config.get("window")
        self.config: dict[str, Any] = {"model_id": "replay"}
        if config.get("context_window_limit") is not None:
            self.config["context_window_limit"] = config["context_window_limit"]
        self.instruction = sum(e["tokens"] for e in self.events if e["kind"] in INSTRUCTION)
        self.by_use: dict[str, int] = {}  # toolUseId -> its tool_result event
        last: dict[str, int] = {}
        for i, e in enumerate(self.events):
            for c in e["tool_call_ids"]:
                last[c] = i
            if e["kind"] == "tool_result" and e["tool_call_id"] in last:
                self.by_use[f"{e['tool_call_id']}@{last[e['tool_call_id']]}"] = i
        self.summaries: dict[str, int] = {}  # summary text -> tokens
        self.k = 0
        self.calls: list = []
        self.summarized: set[int] = set()
        self.slot = -1
        self.overflowed: set = set()
        self.agent: Agent | None = None
        # call k -> the user events of the invocation it opens (the calls that open one)
        self.opens: dict[int, list[int]] = {}
        prev = -1
        for k, c in enumerate(trace["calls"]):
            users = [i for i in range(prev + 1, c["event_index"]) if self.events[i]["kind"] == "user"]
            if k == 0 or users or not self.events[prev]["tool_call_ids"]:
                self.opens[k] = users
            prev = c["event_index"]

    # ------------------------------------------------------------------------------ Model interface
    def update_config(self, **model_config):
        self.config.update(model_config)

    def get_config(self):
        return self.config

    def structured_output(self, *a, **k):
        raise NotImplementedError

    async def count_tokens(self, messages, tool_specs=None, system_prompt=None, system_prompt_content=None):
        base = self.instruction if (system_prompt or system_prompt_content or tool_specs) else 0
        return base + sum(self.size(m) for m in messages)

    async def stream(self, messages, tool_specs=None, system_prompt=None, **kwargs):
        last = messages[-1] if messages else {}
        if system_prompt == DEFAULT_SUMMARIZATION_PROMPT and [b.get("text") for b in last["content"]] == [
            ASK
        ]:
            for ev in self.summarize(messages[:-1]):
                yield ev
            return
        t, k = self.trace, self.k
        if k >= len(t["calls"]):
            for ev in _text("(end of recording)", "end_turn", 0, 1):
                yield ev
            return
        call = t["calls"][k]
        sizes = [self.size(m) for m in messages]
        request = self.instruction + sum(sizes) + call["residual"]
        if self.window is not None and request > self.window:
            idents = ["summary" if isinstance(i, str) else i for i in map(self.ident, messages)]
            # the texts too: a truncation can leave a result's size as it was (a 401-character text
            # comes back about as long, with the notice), and Strands then trims on the next overflow
            texts = [self.result_text(m) for m in messages]
            signature = (k, tuple(zip(idents, sizes, texts, strict=True)))
            if signature in self.overflowed:
                raise Loop()
            self.overflowed.add(signature)
            raise ContextWindowOverflowException("scripted: request over the window")
        self.k += 1
        self.record(messages, call, request)
        e = self.events[call["event_index"]]
        out = t["outputs"][k]
        yield {"messageStart": {"role": "assistant"}}
        yield {"contentBlockDelta": {"delta": {"text": f"ev{call['event_index']}|{e['text']}"}}}
        yield {"contentBlockStop": {}}
        for cid in e["tool_call_ids"]:
            use = {"toolUseId": f"{cid}@{call['event_index']}", "name": "tool"}
            yield {"contentBlockStart": {"start": {"toolUse": use}}}
            yield {"contentBlockDelta": {"delta": {"toolUse": {"input": "{}"}}}}
            yield {"contentBlockStop": {}}
        yield {"messageStop": {"stopReason": "tool_use" if e["tool_call_ids"] else "end_turn"}}
        usage = {"inputTokens": request, "outputTokens": out, "totalTokens": request + out}
        yield {"metadata": {"usage": usage, "metrics": {"latencyMs": 0}}}

    # --------------------------------------------------------------------------------- the mapping
    def ident(self, m) -> int | str:
        for b in m.get("content", []):
            if "toolResult" in b:
                return self.by_use[b["toolResult"]["toolUseId"]]
            if "text" in b and (g := TAG.match(b["text"])):
                return int(g.group(1))
        return "".join(b.get("text", "") for b in m.get("content", []))

    def results(self, m) -> list[tuple[int, str]]:
        """(event, text) of each toolResult block: Strands puts a turn's results in one user message."""
        return [
            (
                self.by_use[b["toolResult"]["toolUseId"]],
                "".join(c.get("text", "") for c in b["toolResult"]["content"]),
            )
            for b in m.get("content", [])
            if "toolResult" in b
        ]

    def result_text(self, m) -> str:
        return "".join(text for _, text in self.results(m))

    def members(self, m) -> list[int]:
        """The events a message holds (none for a summary)."""
        if results := self.results(m):
            return [i for i, _ in results]
        i = self.ident(m)
        return [] if isinstance(i, str) else [i]

    def size(self, m) -> int:
        i = self.ident(m)
        if isinstance(i, str):
            return self.summaries.get(i, 0)
        if results := self.results(m):
            total = 0
            for j, text in results:
                e = self.events[j]
                if text != e["text"]:  # truncated by should_truncate_results
                    total += scale(e["tokens"], len(e["text"].encode()), len(text.encode()))
                else:
                    total += e["tokens"]
            return total
        return self.events[i]["tokens"]

    def record(self, messages, call: dict, request: int) -> None:
        sent, changed, inserted = set(), set(), []
        for m in messages:
            i = self.ident(m)
            if isinstance(i, str):
                inserted.append(self.summaries[i])
                continue
            sent.update(self.members(m))
            changed.update(j for j, text in self.results(m) if text != self.events[j]["text"])
        state = []
        for i in range(call["view_end"]):
            if self.events[i]["kind"] in INSTRUCTION or (i in sent and i not in changed):
                state.append("V")
            elif i in changed:
                state.append("M")
            elif i == self.slot or i in self.summarized:
                state.append("S")
            else:
                state.append("D")
        self.calls.append([rle("".join(state)), inserted, request])

    def summarize(self, messages):
        r = self.rule
        for m in messages:
            for i in self.members(m):
                self.summarized.add(i)
                if self.slot < 0:
                    self.slot = i
        basis = sum(self.size(m) for m in messages)
        out = min(max(round(r["ratio"] * basis), r["min"]), r["max"])
        text = f"SUMMARY {len(self.summaries) + 1}"
        self.summaries[text] = out
        yield from _text(text, "end_turn", basis, out)


def _text(text: str, stop: str, inp: int, out: int):
    yield {"messageStart": {"role": "assistant"}}
    yield {"contentBlockDelta": {"delta": {"text": text}}}
    yield {"contentBlockStop": {}}
    yield {"messageStop": {"stopReason": stop}}
    usage = {"inputTokens": inp, "outputTokens": out, "totalTokens": inp + out}
    yield {"metadata": {"usage": usage, "metrics": {"latencyMs": 0}}}


def make_tool(run: Run):
    async def tool(tool_use, **_):
        i = run.by_use.get(tool_use["toolUseId"])
        text = run.events[i]["text"] if i is not None else ""
        if run.k in run.opens and run.agent is not None:  # user events follow: the invocation ends here
            run.agent.cancel(after_current_tools=True)
        return {"toolUseId": tool_use["toolUseId"], "status": "success", "content": [{"text": text}]}

    spec = {
        "name": "tool",
        "description": "tool",
        "inputSchema": {"json": {"type": "object", "properties": {}}},
    }
    return PythonAgentTool("tool", spec, tool)


def manager(config: dict):
    kw = dict(config.get("manager_args", {}))
    if config["manager"] == "SlidingWindow":
        return SlidingWindowConversationManager(**kw)
    return SummarizingConversationManager(**kw)


async def replay(trace: dict, config: dict, rule: dict) -> dict:
    run = Run(trace, config, rule)
    system = "".join(e["text"] for e in trace["events"] if e["kind"] == "system") or None
    agent = Agent(
        model=run, tools=[make_tool(run)], system_prompt=system, conversation_manager=manager(config),
        callback_handler=None,
    )  # fmt: skip
    run.agent = agent
    finish = "completed"
    try:
        done = -1
        while run.k < len(trace["calls"]) and run.k in run.opens and run.k != done:
            done = run.k
            users = [
                {"role": "user", "content": [{"text": f"ev{i}|{trace['events'][i]['text'][:64]}"}]}
                for i in run.opens[run.k]
            ]
            await agent.invoke_async(users or None)
    except Exception as exc:  # the event loop wraps what the model raised
        cause = exc
        while cause is not None and not isinstance(cause, Loop | ContextWindowOverflowException):
            cause = cause.__cause__
        if cause is None:
            raise
        finish = "compaction-loop" if isinstance(cause, Loop) else "context-overflow"
    return {"finish": finish, "calls": run.calls}


def main() -> int:
    return run_job(replay)


if __name__ == "__main__":
    sys.exit(main())
