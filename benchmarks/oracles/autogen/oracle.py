"""AutoGen's real model contexts over canonical traces (autogen-core 0.7.5, pinned in requirements.txt).

    .venv/bin/python oracle.py IN.json OUT.json     (run by ../frameworks.py)

Per trace and setting, the context is fed as ``AssistantAgent`` feeds it: one message per non-instruction
event (``UserMessage``; an ``AssistantMessage`` whose content is its ``FunctionCall`` list and whose
thought is the text, or its text alone; a ``FunctionExecutionResultMessage`` per tool result), added as
the run records them; before each model call ``get_messages()`` is what the request holds after the
agent's system message (the trace's ``system`` and ``tools`` events, always sent).

Alignment: the model client's ``count_tokens`` sums ctxsim's sizes of the messages it is given; with
``token_count`` ``provider`` it also counts the instruction events and the call's residual (the request
as the provider reports it). ``remaining_tokens`` (``token_limit`` null) is the model's window minus that
count: the trace's recorded ``context_window`` (the export's), else no limit, as ctxsim reads it (unknown
on every shared family but OpenHands SDK, where 128,000 is never reached). A new message (the
head-and-tail placeholder) weighs ctxsim's estimate of its bytes; it is shown in the slot of the first
omitted message (M, with that message's call/result partner), the other omitted messages are D.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

from autogen_core import FunctionCall
from autogen_core.model_context import (
    BufferedChatCompletionContext,
    HeadAndTailChatCompletionContext,
    TokenLimitedChatCompletionContext,
)
from autogen_core.models import (
    AssistantMessage,
    ChatCompletionClient,
    FunctionExecutionResult,
    FunctionExecutionResultMessage,
    ModelInfo,
    RequestUsage,
    UserMessage,
)

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # benchmarks/oracles: oracle_job
from oracle_job import rle, run_job  # noqa: E402

INSTRUCTION = ("system", "tools")


def estimate(nbytes: int, bpt: float | None) -> int:
    """ctxsim's estimate_tokens of a new message (16 bytes of framing; 4 bytes a token uncalibrated)."""
    return math.ceil((nbytes + 16) / (4.0 if bpt is None else bpt))


class SizedClient(ChatCompletionClient):
    """count_tokens over ctxsim's sizes; nothing else of a client is used by the contexts."""

    def __init__(self, tokens: dict[int, int], window: int | None) -> None:
        self.tokens = tokens  # id(message) -> tokens
        self.extra = 0  # provider scope: instruction events + the call's residual
        self.window = window  # the model's context window (token_limit null); None: unknown, no limit

    def count_tokens(self, messages, *, tools=()) -> int:
        return sum(self.tokens[id(m)] for m in messages) + self.extra

    def remaining_tokens(self, messages, *, tools=()) -> int:
        """A real client's: its model's window minus count_tokens (the context pops while negative)."""
        if self.window is None:
            return 1
        return self.window - self.count_tokens(messages, tools=tools)

    async def create(self, *a, **k):
        raise NotImplementedError

    def create_stream(self, *a, **k):
        raise NotImplementedError

    async def close(self) -> None:
        pass

    def actual_usage(self) -> RequestUsage:
        return RequestUsage(0, 0)

    def total_usage(self) -> RequestUsage:
        return RequestUsage(0, 0)

    @property
    def capabilities(self):
        return self.model_info

    @property
    def model_info(self) -> ModelInfo:
        return ModelInfo(
            vision=False, function_calling=True, json_output=False, family="unknown", structured_output=False
        )


def message(e: dict, results: list[dict]):
    if e["kind"] == "user":
        return UserMessage(content=e["text"], source="user")
    if e["kind"] == "assistant" and e["tool_call_ids"]:
        calls = [FunctionCall(id=c, arguments="{}", name="tool") for c in e["tool_call_ids"]]
        return AssistantMessage(content=calls, thought=e["text"] or None, source="assistant")
    if e["kind"] == "assistant":
        return AssistantMessage(content=e["text"], source="assistant")
    return FunctionExecutionResultMessage(
        content=[
            FunctionExecutionResult(
                content=r["text"], name="tool", call_id=r["tool_call_id"] or "", is_error=False
            )
            for r in results
        ]
    )


def issuers(events: list[dict]) -> dict[int, int]:
    """tool_result event -> the assistant event that issued its call."""
    out, by_id = {}, {}
    for i, e in enumerate(events):
        for c in e["tool_call_ids"]:
            by_id[c] = i
        if e["kind"] == "tool_result" and e["tool_call_id"] in by_id:
            out[i] = by_id[e["tool_call_id"]]
    return out


def messages(events: list[dict], issuer: dict[int, int]) -> list[tuple[list[int], object]]:
    """(events, message) in order: one message per event, but the results of one assistant turn that
    follow one another are one ``FunctionExecutionResultMessage`` (``AssistantAgent`` adds a turn's
    results at once)."""
    groups: list[list[int]] = []
    for i, e in enumerate(events):
        if e["kind"] in INSTRUCTION:
            continue
        last = groups[-1][-1] if groups else None
        if (
            e["kind"] == "tool_result"
            and last is not None
            and last == i - 1
            and events[last]["kind"] == "tool_result"
            and issuer.get(last, -1) == issuer.get(i, -2)
        ):
            groups[-1].append(i)
        else:
            groups.append([i])
    return [(g, message(events[g[0]], [events[j] for j in g])) for g in groups]


async def replay(trace: dict, config: dict, rule: dict) -> dict:
    events = trace["events"]
    issuer = issuers(events)
    msgs = messages(events, issuer)
    where = {id(m): g for g, m in msgs}
    # the trace's recorded window, where the export carries it (ctxsim's token_limit null reads the same)
    client = SizedClient(
        {id(m): sum(events[i]["tokens"] for i in g) for g, m in msgs}, trace.get("context_window")
    )
    kind = config["context"]
    if kind == "Buffered":
        ctx = BufferedChatCompletionContext(buffer_size=config["buffer_size"])
    elif kind == "HeadAndTail":
        ctx = HeadAndTailChatCompletionContext(head_size=config["head_size"], tail_size=config["tail_size"])
    else:
        ctx = TokenLimitedChatCompletionContext(client, token_limit=config.get("token_limit"))
    partners: dict[int, set[int]] = {}
    for r, a in issuer.items():
        partners.setdefault(a, set()).add(r)
        partners.setdefault(r, set()).add(a)
    p, calls = 0, []
    for call in trace["calls"]:
        end = call["view_end"]
        while p < len(msgs) and msgs[p][0][0] < end:
            await ctx.add_message(msgs[p][1])
            p += 1
        instruction = sum(e["tokens"] for e in events[:end] if e["kind"] in INSTRUCTION)
        client.extra = instruction + call["residual"] if config.get("token_count") == "provider" else 0
        got = await ctx.get_messages()
        sent = {i for m in got if id(m) in where for i in where[id(m)]}
        new = [estimate(len(m.content.encode()), trace["bytes_per_token"]) for m in got if id(m) not in where]
        state = ["V" if events[i]["kind"] in INSTRUCTION or i in sent else "D" for i in range(end)]
        if new:  # the placeholder stands in the first omitted message's slot, with its partner
            first = next(g[0] for g, _ in msgs if g[0] < end and g[0] not in sent)
            for j in {first} | partners.get(first, set()):
                if j < end and j not in sent:
                    state[j] = "M"
        tokens = instruction + sum(events[i]["tokens"] for i in sent) + sum(new) + call["residual"]
        calls.append([rle("".join(state)), [], tokens])
    return {"finish": "completed", "calls": calls}


def main() -> int:
    return run_job(replay)


if __name__ == "__main__":
    sys.exit(main())
