"""LangChain's real agent middleware over canonical traces (langchain 1.5.2, langchain-core 1.8.3,
langgraph 1.2.24; pinned in requirements.txt).

    .venv/bin/python oracle.py IN.json OUT.json     (run by ../frameworks.py)

Per trace and setting, a real ``create_agent`` graph (an ``InMemorySaver`` thread) with a scripted chat
model and scripted tools, driven call by call (``Run.plan``): the model answers call k with the
recorded assistant event (its text, one tool call per call id whose result the trace records) and the
tool returns that recorded result, so the agent's own loop adds the answer and its results; every other
event of call k's view not yet in the thread (user turns, results of no call of the previous answer, a
recorded assistant turn no call made) is added by a first ``before_model`` hook (``Feed``) just before
call k, in trace order; an answer with no tool call ends the ``invoke`` and the next one continues the
thread. The middleware runs where the agent runs it (``SummarizationMiddleware.before_model`` before
each model node, after the feed; ``ContextEditingMiddleware`` around each model call). The request is
what the model is given (its system message is the trace's ``system`` and ``tools`` events, always
sent). Tool names: canonical events carry none; a call is named after the first ``exclude_tools`` name
its issuing assistant's text starts with (ctxsim's reading of the knob), else ``tool``. A cleared tool
input (``clear_tool_inputs``: LangChain empties the call's arguments, which the canonical assistant
event does not hold apart from its text) weighs the whole assistant event as ``[tool input cleared]``,
as ctxsim does.

Alignment: the token counter sums ctxsim's sizes of the messages it is given (a message cut by
``trim_messages`` weighs ctxsim's ``scale_tokens`` of the bytes kept; a placeholder or the fixed
fallback text ctxsim's estimate of its bytes); with ``token_count_method="model"``
``ContextEditingMiddleware`` counts with the model (system message, tools and messages, here plus the
call's residual); with ``token_count`` ``provider`` (summarization) each model response carries its
usage (the request as sent plus the mock model's output) for ``SummarizationMiddleware``'s
reported-usage check. The summarizer is a scripted callable (``summarizer=``): it answers ``SUMMARY n``
weighing clamp(ratio x the tokens it was given, min, max). The summary message stands in the slot of
the first message it replaced (S); a replaced message the summarizer was given (whole or cut) is S,
one it never saw (trimmed away, or the fallback text) D.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Annotated, Any

from langchain.agents import create_agent
from langchain.agents.middleware import (
    AgentMiddleware,
    ClearToolUsesEdit,
    ContextEditingMiddleware,
    SummarizationMiddleware,
)
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
INPUT_CLEARED = "[tool input cleared]"  # what ctxsim weighs an assistant event whose tool input was cleared


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
        edit = config.get("edit", {})
        self.placeholder = edit.get("placeholder", "[cleared]")
        self.exclude = list(edit.get("exclude_tools", []))
        self.by_call: dict[str, int] = {}  # unique tool call id -> its tool_result event
        last: dict[str, int] = {}
        for i, e in enumerate(self.events):
            for c in e["tool_call_ids"]:
                last[c] = i
            if e["kind"] == "tool_result":
                key = f"{e['tool_call_id']}@{last[e['tool_call_id']]}" if e["tool_call_id"] in last else None
                self.by_call[key or f"orphan@{i}"] = i
        self.result_of = {i: u for u, i in self.by_call.items()}
        self.plan()
        self.summaries: dict[str, tuple[int, int]] = {}  # summary message text -> (tokens, ctxsim bytes)
        self.summary_ids: dict[str, str] = {}  # summary message id -> its text
        self.k = 0  # model calls answered
        self.calls: list = []
        self.seen: set[int] = set()  # events a summarizer was given
        self.slot = -1  # the event whose slot the summary message stands in
        self.pending_out = 0

    def plan(self) -> None:
        """Per call: the tool calls its answer makes (those whose result is recorded within the next
        call's view: the agent's tool node adds them) and the events fed before it (``Feed``): the rest
        of its view not yet in the thread, in trace order."""
        calls, events = self.trace["calls"], self.events
        self.tool_keys: list[list[str]] = []
        self.inputs: list[list[int]] = []
        added: set[int] = set()
        for k, c in enumerate(calls):
            lo = calls[k - 1]["view_end"] if k else 0
            self.inputs.append(
                [
                    i
                    for i in range(lo, c["view_end"])
                    if i not in added and events[i]["kind"] not in INSTRUCTION
                ]
            )
            added.update(self.inputs[-1])
            a = c["event_index"]
            horizon = calls[k + 1]["view_end"] if k + 1 < len(calls) else len(events)
            keys = [
                key
                for cid in events[a]["tool_call_ids"]
                if (key := f"{cid}@{a}") in self.by_call and self.by_call[key] < horizon
                and self.by_call[key] not in added
            ]  # fmt: skip
            self.tool_keys.append(keys)
            added.add(a)
            added.update(self.by_call[key] for key in keys)

    def tool_name(self, issuer: int) -> str:
        text = self.events[issuer]["text"]
        return next((n for n in self.exclude if text.startswith(n)), "tool")

    def message(self, i: int):
        """Event ``i`` as the message the feed adds."""
        e = self.events[i]
        if e["kind"] == "tool_result":
            return ToolMessage(content=e["text"], tool_call_id=self.result_of[i], id=f"ev{i}")
        if e["kind"] == "assistant":
            return AIMessage(content=e["text"], id=f"ev{i}")
        return HumanMessage(content=e["text"], id=f"ev{i}")

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
            if cleared(m):  # ClearToolUsesEdit's placeholder; an emptied tool input
                text = content if isinstance(m, ToolMessage) else INPUT_CLEARED
                return estimate(len(text.encode()), self.bpt)
            if content == e["text"]:
                return e["tokens"]
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
            elif m.content != self.events[i]["text"] or cleared(m):
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
        name = self.tool_name(call["event_index"])
        tool_calls = [{"name": name, "args": {}, "id": key, "type": "tool_call"} for key in self.tool_keys[k]]
        msg = AIMessage(content=e["text"], tool_calls=tool_calls, id=f"ev{call['event_index']}")
        if self.config.get("token_count") == "provider":
            out = t["outputs"][k]
            msg.usage_metadata = {"input_tokens": tokens, "output_tokens": out, "total_tokens": tokens + out}
            msg.response_metadata = {"model_provider": PROVIDER}
        return msg

    def summarize(self, messages) -> str:
        """The scripted summarizer: ctxsim's size rule over what the middleware gives it (after trim)."""
        r = self.rule
        out = min(max(round(r["ratio"] * self.count(messages)), r["min"]), r["max"])
        text = f"SUMMARY {len(self.summaries) + 1}"
        tokens = estimate(len(PREFIX.encode()), self.bpt) + out
        self.summaries[PREFIX + text] = (tokens, len(PREFIX.encode()) + round(out * (self.bpt or 4.0)))
        return text


def cleared(m) -> bool:
    """Whether ClearToolUsesEdit edited this message (a result's placeholder, a call's arguments)."""
    entry = m.response_metadata.get("context_editing", {})
    return bool(entry.get("cleared") or entry.get("cleared_tool_inputs"))


class Feed(AgentMiddleware):
    """The first ``before_model`` hook: adds the events of the next call's view the agent's loop does not
    (``Run.plan``), so the middleware after it sees them as it sees a user's turn."""

    def __init__(self, run: Run) -> None:
        super().__init__()
        self._run = run

    def before_model(self, state, runtime):
        run = self._run
        if run.k >= len(run.inputs) or not run.inputs[run.k]:
            return None
        return {"messages": [run.message(i) for i in run.inputs[run.k]]}


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
    """A knob as LangChain takes it: a pair (JSON's list) is its tuple, a clause (a mapping) stays, a
    list of pairs and clauses is a list of each."""
    if isinstance(value, list) and value and isinstance(value[0], str):
        return tuple(value)
    if isinstance(value, list):
        return [size_spec(v) for v in value]
    return value


def middleware(run: Run, model: ReplayChat):
    c = run.config
    if c["middleware"] == "ClearToolUses":
        edit = ClearToolUsesEdit(**c["edit"])
        if c["token_count_method"] == "model":  # the model's count: ReplayChat.get_num_tokens_from_messages
            return ContextEditingMiddleware(edits=[edit], token_count_method="model")
        # "approximate": ctxsim's sizes stand for LangChain's approximation
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


def make_tools(run: Run) -> list:
    def tool(tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        i = run.by_call.get(tool_call_id)
        return run.events[i]["text"] if i is not None else ""

    return [StructuredTool.from_function(tool, name=n, description=n) for n in ["tool", *run.exclude]]


async def replay(trace: dict, config: dict, rule: dict) -> dict:
    run = Run(trace, config, rule)
    model = ReplayChat(run=run)
    system = "".join(e["text"] for e in trace["events"] if e["kind"] == "system") or None
    agent = create_agent(
        model, make_tools(run), system_prompt=system, middleware=[Feed(run), middleware(run, model)],
        checkpointer=InMemorySaver(),
    )  # fmt: skip
    cfg = {"configurable": {"thread_id": "t"}, "recursion_limit": 100000}
    while run.k < len(trace["calls"]):  # an answer without a tool call ends an invoke: the next goes on
        k = run.k
        agent.invoke({"messages": []}, cfg)
        if run.k == k:
            raise RuntimeError(f"{trace['trace_id']}: call {k} was never made")
    return {"finish": "completed", "calls": run.calls}


def main() -> int:
    return run_job(replay)


if __name__ == "__main__":
    sys.exit(main())
