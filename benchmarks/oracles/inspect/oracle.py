"""Inspect's real compaction handler over canonical traces (inspect-ai, pinned in requirements.txt).

    .venv/bin/python oracle.py IN.json OUT.json     (run by ../frameworks.py)

Per trace and setting: the messages are built as an Inspect agent holds them (system, the task as the
sample's input, assistant messages with one ``bash`` tool call per call id, tool messages), the handler
``compaction(strategy, prefix=[messages before the first assistant])`` is asked before every call
(``compact_input`` on the agent's whole history; a returned summary is appended to the history), and
``record_output`` gets the call's usage. A "Compaction insufficient" RuntimeError ends the sample.
Canonical events name no tools: a call is ``bash`` unless its assistant's text starts with a name in
``exclude_tools`` (ctxsim's rule for that knob; the text is cut to 64 characters, longer names never match).

Alignment: ``Model.count_tokens`` sums ctxsim's sizes (an edited message: its original's, a cleared
result: its placeholder's estimate, an assistant that lost its call: its size plus the placeholder
text's, a summary: the scripted output plus its framing's estimate), ``count_tool_tokens`` is the
``tools`` events' tokens, the provider's input is the request's sum plus the call's residual, and the
summarizer (Inspect's mock provider) answers ``SUMMARY n`` weighing the size rule over the conversation
messages it was given.
"""

from __future__ import annotations

import logging
import math
import re
import sys
from pathlib import Path

from inspect_ai.model import (
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageTool,
    ChatMessageUser,
    ModelInfo,
    ModelOutput,
    ModelUsage,
    get_model,
    set_model_info,
)
from inspect_ai.model._compaction import (
    CompactionAuto,
    CompactionEdit,
    CompactionSummary,
    CompactionTrim,
    compaction,
)
from inspect_ai.model._compaction.edit import TOOL_RESULT_REMOVED
from inspect_ai.model._model import Model, ModelAPI
from inspect_ai.tool import ToolCall

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # benchmarks/oracles: oracle_job
from oracle_job import rle, run_job  # noqa: E402

logging.getLogger("inspect_ai").setLevel(logging.ERROR)
STRATEGIES = {
    "CompactionEdit": CompactionEdit,
    "CompactionTrim": CompactionTrim,
    "CompactionSummary": CompactionSummary,
    "CompactionAuto": CompactionAuto,
}
SUMMARY_RE = re.compile(r"SUMMARY (\d+)")


class Run:
    """One trace under one strategy: the sizes the patched counters read."""

    current: Run | None = None

    def __init__(self, trace: dict, rule: dict) -> None:
        self.trace, self.rule = trace, rule
        self.bpt = trace["bytes_per_token"] or 4.0
        self.tokens = [e["tokens"] for e in trace["events"]]
        self.tools = sum(e["tokens"] for e in trace["events"] if e["kind"] == "tools")
        self.summaries: dict[int, int] = {}  # n -> output tokens

    def estimate(self, nbytes: int) -> int:  # ctxsim's estimate_tokens of a new message
        return math.ceil((nbytes + 16) / self.bpt)

    def part(self, nbytes: int) -> int:  # text added to a message
        return math.ceil(nbytes / self.bpt)

    def size(self, m) -> int:
        meta = m.metadata or {}
        if "summary" in meta:
            n = int(SUMMARY_RE.search(m.text).group(1))
            wrapper = len(m.text.encode()) - len(f"SUMMARY {n}".encode())
            return self.summaries[n] + self.estimate(wrapper)
        if "ctx" not in meta:
            return self.estimate(len(m.text.encode()))
        base = self.tokens[meta["ctx"]]
        if m.role == "tool" and m.text == TOOL_RESULT_REMOVED:
            return self.estimate(len(TOOL_RESULT_REMOVED.encode()))
        if m.role == "assistant" and not isinstance(m.content, str):
            added = [c.text for c in m.content if getattr(c, "text", "").startswith("[Tool call: ")]
            return base + sum(self.part(len(t.encode())) for t in added)
        return base


async def _count_tokens(self, input, *args, **kwargs):
    run = Run.current
    if isinstance(input, str):
        return run.estimate(len(input.encode()))
    return sum(run.size(m) for m in input)


async def _count_tool_tokens(self, tools):
    return Run.current.tools


async def _count_text_tokens(self, text):
    return Run.current.estimate(len(text.encode()))


Model.count_tokens = _count_tokens
Model.count_tool_tokens = _count_tool_tokens
ModelAPI.count_text_tokens = _count_text_tokens  # the mock provider's own usage (no tokenizer download)


def tool_name(text: str, exclude: list[str] | None) -> str:
    """A call's function name. Canonical events name no tools: ctxsim's rule for ``exclude_tools`` (a name
    matches the calls of an assistant whose text starts with it) names those calls; every other call is
    ``bash`` (the mini-swe-agent tool; its name is in the placeholder of a removed call)."""
    return next((n for n in exclude or () if text.startswith(n)), "bash")


def messages(trace: dict, exclude: list[str] | None = None) -> list:
    events = trace["events"]
    first = next((i for i, e in enumerate(events) if e["kind"] == "assistant"), len(events))
    out, functions = [], {}
    for i, e in enumerate(events):
        kind, meta = e["kind"], {"ctx": i}
        if kind == "tools":
            continue
        if kind == "system":
            m = ChatMessageSystem(content=e["text"], metadata=meta)
        elif kind == "user":
            m = ChatMessageUser(content=e["text"], metadata=meta, source="input" if i < first else None)
        elif kind == "assistant":
            name = tool_name(e["text"], exclude)
            calls = [ToolCall(id=c, function=name, arguments={}) for c in e["tool_call_ids"]] or None
            m = ChatMessageAssistant(content=e["text"], tool_calls=calls, metadata=meta)
            functions.update((c, name) for c in e["tool_call_ids"])
        else:
            m = ChatMessageTool(
                content=e["text"],
                tool_call_id=e["tool_call_id"],
                function=functions.get(e["tool_call_id"], "bash"),
                metadata=meta,
            )
        out.append(m)
    return out


def summarizer(run: Run):
    def answer(input, tools, tool_choice, config):
        # the summarization input: system + input + conversation + prompt; size the conversation
        covered = sum(
            run.size(m) for m in input[:-1] if m.role != "system" and getattr(m, "source", None) != "input"
        )
        n = len(run.summaries) + 1
        rule = run.rule
        run.summaries[n] = min(max(round(rule["ratio"] * covered), rule["min"]), rule["max"])
        return ModelOutput.from_content(model="mockllm/model", content=f"SUMMARY {n}")

    return answer


async def replay(trace: dict, config: dict, rule: dict) -> dict:
    run = Run.current = Run(trace, rule)
    cfg = dict(config)
    strategy = STRATEGIES[cfg.pop("strategy")](**cfg)
    # the model's window, as ctxsim resolves it for a fractional threshold (export's model_window)
    set_model_info("mockllm/model", ModelInfo(context_length=trace["model_window"]))
    model = get_model("mockllm/model", custom_outputs=summarizer(run))
    msgs = messages(trace, cfg.get("exclude_tools"))
    events = trace["events"]
    first = next((i for i, e in enumerate(events) if e["kind"] == "assistant"), len(events))
    handler = compaction(
        strategy, prefix=[m for m in msgs if m.metadata["ctx"] < first], tools=[], model=model
    )
    originals = {m.metadata["ctx"]: m for m in msgs}
    history, p, calls, finish = [], 0, [], "completed"
    for k, call in enumerate(trace["calls"]):
        while p < len(msgs) and msgs[p].metadata["ctx"] < call["view_end"]:
            history.append(msgs[p])
            p += 1
        try:
            inp, extra = await handler.compact_input(list(history))
        except RuntimeError as exc:
            if "Compaction insufficient" not in str(exc):
                raise
            finish = "compaction-insufficient"
            break
        if extra is not None:
            history.append(extra)
        sent = {}
        for m in inp:
            i = (m.metadata or {}).get("ctx")
            if i is None:
                continue
            o = originals[i]
            edited = m.text != o.text or (
                m.role == "assistant" and (m.tool_calls or []) != (o.tool_calls or [])
            )
            sent[i] = "M" if edited else "V"
        summary = any("summary" in (m.metadata or {}) for m in inp)
        state = "".join(
            "V" if events[i]["kind"] == "tools" else sent.get(i, "S" if summary else "D")
            for i in range(call["view_end"])
        )
        inserted = [run.size(m) for m in inp if "summary" in (m.metadata or {})]
        tokens = sum(run.size(m) for m in inp) + run.tools + call["residual"]
        calls.append([rle(state), inserted, tokens])
        usage = ModelUsage(input_tokens=tokens, output_tokens=trace["outputs"][k], total_tokens=tokens)
        await handler.record_output(inp, ModelOutput(model="mockllm/model", choices=[], usage=usage))
    return {"finish": finish, "calls": calls}


def main() -> int:
    return run_job(replay)


if __name__ == "__main__":
    sys.exit(main())
