"""LangChain's real agent middleware over canonical traces (langchain 1.5.2, langchain-core 1.8.3,
langgraph 1.2.24; pinned in requirements.txt).

    .venv/bin/python oracle.py IN.json OUT.json     (run by ../frameworks.py)

Per trace and setting, a real ``create_agent`` graph (an ``InMemorySaver`` thread) with a scripted chat
model and one scripted tool: every ``user`` event is one ``invoke`` on the thread; the model answers
call k with the recorded assistant event (its text, one tool call per call id) and the tool returns the
recorded result of that call, so the middleware runs where the agent runs it
(``SummarizationMiddleware.before_model`` before each model node, ``ContextEditingMiddleware``
around each model call). The request is what the model is given (its system message is the trace's
``system`` and ``tools`` events, always sent).

Alignment: the token counter sums ctxsim's sizes of the messages it is given (a message cut by
``trim_messages`` weighs ctxsim's ``scale_tokens`` of the bytes kept; a placeholder or the fixed
fallback text ctxsim's estimate of its bytes); ``token_count`` ``provider``: ``ContextEditingMiddleware``
counts with the model (``token_count_method="model"``: system message, tools and messages, here plus the
call's residual), and each model response carries its usage (the request as sent plus the mock model's
output) for ``SummarizationMiddleware``'s reported-usage check. The summarizer is a scripted callable
(``summarizer=``): it answers ``SUMMARY n`` weighing clamp(ratio x the tokens it was given, min, max).
The summary message stands in the slot of the first message it replaced (S); a replaced message the
summarizer was given (whole or cut) is S, one it never saw (trimmed away, or the fallback text) D.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Annotated, Any

from langchain.agents import create_agent
from langchain.agents.middleware import ClearToolUsesEdit, ContextEditingMiddleware, SummarizationMiddleware
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import InjectedToolCallId, StructuredTool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import ConfigDict

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # benchmarks/oracles: oracle_job
from oracle_job import rle, run_job  # noqa: E402

INSTRUCTION = ("system", "tools")
PREFIX = "Here is a summary of the conversation to date:\n\n"
PROVIDER = "replay"
CLEARED = "[cleared]"  # ClearToolUsesEdit's placeholder


def estimate(nbytes: int, bpt: float | None) -> int:
    """ctxsim's estimate_tokens of a new message (16 bytes of framing; 4 bytes a token uncalibrated)."""
    return math.ceil((nbytes + 16) / (4.0 if bpt is None else bpt))


def scale(tokens: int, old: int, new: int) -> int:
    """ctxsim's scale_tokens: a cut-down message keeps its content's bytes per token."""
    return round(tokens * (new + 16) / (old + 16))


class Run:
    def __init__(self, trace: dict, config: dict, rule: dict) -> None:
        self.trace, self.config, self.rule = trace, config, rule
        self.events = trace["events"]
        self.bpt = trace["bytes_per_token"]
        self.instruction = sum(e["tokens"] for e in self.events if e["kind"] in INSTRUCTION)
        self.by_call: dict[str, int] = {}  # unique tool call id -> its tool_result event
        last: dict[str, int] = {}
        for i, e in enumerate(self.events):
            for c in e["tool_call_ids"]:
                last[c] = i
            if e["kind"] == "tool_result" and e["tool_call_id"] in last:
                self.by_call[f"{e['tool_call_id']}@{last[e['tool_call_id']]}"] = i
        self.result_of = {i: u for u, i in self.by_call.items()}
        self.summaries: dict[str, tuple[int, int]] = {}  # summary message text -> (tokens, ctxsim bytes)
        self.summary_ids: dict[str, str] = {}  # summary message id -> its text
        self.k = 0  # model calls answered
        self.calls: list = []
        self.seen: set[int] = set()  # events a summarizer was given
        self.slot = -1  # the event whose slot the summary message stands in
        self.pending_out = 0

    def event(self, m) -> int | None:
        if isinstance(m, ToolMessage):
            return self.by_call.get(m.tool_call_id)
        mid = m.id or ""
        return int(mid[2:]) if mid.startswith("ev") else None

    def size(self, m) -> int:
        content = m.content if isinstance(m.content, str) else str(m.content)
        i = self.event(m)
        if i is not None:
            e = self.events[i]
            if content == e["text"]:
                return e["tokens"]
            if isinstance(m, ToolMessage) and content == CLEARED:
                return estimate(len(content.encode()), self.bpt)
            # trim_messages' cut (while it searches, the kept lines joined in reverse order)
            return scale(e["tokens"], len(e["text"].encode()), len(content.encode()))
        if content in self.summaries:
            self.summary_ids[m.id] = content
        full = self.summary_ids.get(m.id)
        if full is None:
            return estimate(len(content.encode()), self.bpt)
        tokens, nbytes = self.summaries[full]
        if content == full:
            return tokens
        return scale(tokens, nbytes, nbytes - (len(full.encode()) - len(content.encode())))

    def count(self, messages) -> int:
        return sum(self.size(m) for m in messages if not isinstance(m, SystemMessage))

    def answer(self, messages) -> AIMessage:
        k, t = self.k, self.trace
        if k >= len(t["calls"]):
            return AIMessage(content="(end of recording)")
        self.k += 1
        call = t["calls"][k]
        end = call["view_end"]
        sent = {self.event(m) for m in messages if not isinstance(m, SystemMessage)} - {None}
        changed, inserted, tokens = set(), [], self.instruction + call["residual"]
        for m in messages:
            if isinstance(m, SystemMessage):
                continue
            s = self.size(m)
            tokens += s
            i = self.event(m)
            if i is None:
                inserted.append(s)
            elif m.content != self.events[i]["text"]:
                changed.add(i)
        state = []
        for i in range(end):
            if self.events[i]["kind"] in INSTRUCTION or (i in sent and i not in changed):
                state.append("V")
            elif i in changed:
                state.append("M")
            elif i == self.slot or i in self.seen:
                state.append("S")
            else:
                state.append("D")
        self.calls.append([rle("".join(state)), inserted, tokens])
        e = self.events[call["event_index"]]
        tool_calls = [
            {
                "name": "tool",
                "args": {},
                "id": self.result_of_call(c, call["event_index"]),
                "type": "tool_call",
            }
            for c in e["tool_call_ids"]
        ]
        msg = AIMessage(content=e["text"], tool_calls=tool_calls, id=f"ev{call['event_index']}")
        if self.config.get("token_count") == "provider":
            out = t["outputs"][k]
            msg.usage_metadata = {"input_tokens": tokens, "output_tokens": out, "total_tokens": tokens + out}
            msg.response_metadata = {"model_provider": PROVIDER}
        return msg

    @staticmethod
    def result_of_call(cid: str, issuer: int) -> str:
        return f"{cid}@{issuer}"

    def summarize(self, messages) -> str:
        """The scripted summarizer: ctxsim's size rule over what the middleware gives it (after trim)."""
        r = self.rule
        out = min(max(round(r["ratio"] * self.count(messages)), r["min"]), r["max"])
        text = f"SUMMARY {len(self.summaries) + 1}"
        tokens = estimate(len(PREFIX.encode()), self.bpt) + out
        self.summaries[PREFIX + text] = (tokens, len(PREFIX.encode()) + round(out * (self.bpt or 4.0)))
        return text


class ReplayChat(BaseChatModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)
    run: Any = None

    @property
    def _llm_type(self) -> str:
        return "replay-chat"

    def _get_ls_params(self, stop=None, **kwargs):
        return {"ls_provider": PROVIDER, "ls_model_name": "replay", "ls_model_type": "chat"}

    def bind_tools(self, tools, **kwargs):
        return self

    def get_num_tokens_from_messages(self, messages, tools=None) -> int:
        run = self.run
        k = min(run.k, len(run.trace["calls"]) - 1)
        return run.instruction + run.trace["calls"][k]["residual"] + run.count(messages)

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        return ChatResult(generations=[ChatGeneration(message=self.run.answer(messages))])


class Summarization(SummarizationMiddleware):
    """The real middleware; records which messages its summarizer was given (the real trim)."""

    def __init__(self, run: Run, **kw) -> None:
        super().__init__(**kw)
        self._run = run

    def _create_summary(self, messages_to_summarize):
        run = self._run
        if run.slot < 0 and messages_to_summarize:
            run.slot = run.event(messages_to_summarize[0])
        if messages_to_summarize:
            for m in self._trim_messages_for_summary(messages_to_summarize):
                if (i := run.event(m)) is not None:
                    run.seen.add(i)
        summary = super()._create_summary(messages_to_summarize)
        if summary not in [t[len(PREFIX) :] for t in run.summaries]:  # the fixed fallback text
            content = PREFIX + summary
            n = len(content.encode())
            run.summaries[content] = (estimate(n, run.bpt), n)
        return summary


def size_spec(value):
    return tuple(value) if isinstance(value, list) else value


def middleware(run: Run, model: ReplayChat):
    c = run.config
    if c["middleware"] == "ClearToolUses":
        edit = ClearToolUsesEdit(
            trigger=c["trigger"], keep=c.get("keep", 3), clear_at_least=c.get("clear_at_least", 0)
        )
        if c.get("token_count") == "provider":
            return ContextEditingMiddleware(edits=[edit], token_count_method="model")
        return ContextEditingMiddleware(edits=[edit], token_counter=run.count)
    kw = {"keep": size_spec(c["keep"])} if "keep" in c else {}
    if "trim_tokens_to_summarize" in c:
        kw["trim_tokens_to_summarize"] = c["trim_tokens_to_summarize"]
    return Summarization(
        run,
        model=model,
        trigger=size_spec(c["trigger"]),
        token_counter=run.count,
        summarizer=run.summarize,
        **kw,
    )


def make_tool(run: Run):
    def tool(tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        i = run.by_call.get(tool_call_id)
        return run.events[i]["text"] if i is not None else ""

    return StructuredTool.from_function(tool, name="tool", description="tool")


async def replay(trace: dict, config: dict, rule: dict) -> dict:
    run = Run(trace, config, rule)
    model = ReplayChat(run=run)
    system = "".join(e["text"] for e in trace["events"] if e["kind"] == "system") or None
    agent = create_agent(
        model, [make_tool(run)], system_prompt=system, middleware=[middleware(run, model)],
        checkpointer=InMemorySaver(),
    )  # fmt: skip
    cfg = {"configurable": {"thread_id": "t"}, "recursion_limit": 100000}
    last = trace["calls"][-1]["event_index"]
    for i, e in enumerate(trace["events"]):
        if e["kind"] != "user":
            continue
        if i >= last or run.k >= len(trace["calls"]):
            break
        agent.invoke({"messages": [HumanMessage(content=e["text"], id=f"ev{i}")]}, cfg)
    return {"finish": "completed", "calls": run.calls}


def main() -> int:
    return run_job(replay)


if __name__ == "__main__":
    sys.exit(main())
