"""Google ADK's real events compaction over canonical traces (google-adk, pinned in requirements.txt).

    .venv/bin/python oracle.py IN.json OUT.json     (run by ../frameworks.py)

Per trace and setting, the session is built as ADK's Runner fills it: a ``user`` event starts a new
user-initiated invocation (the agent's model events, with one ``bash`` function call per call id, and
its function responses belong to it); ``system`` and ``tools`` events are the agent's instruction and
tool declarations, not session events. Before a user event is appended, the invocation before it has
completed and the Runner's post-invocation step runs (``_run_compaction_for_sliding_window``: token
threshold first, then the sliding window); before every model call the compaction request processor
runs (``_run_compaction_for_token_threshold_config``); the request's contents are
``_contents._get_contents`` (compaction applied, compacted calls recovered, empty contents skipped).
Each model event carries the prompt tokens of the request it answered, as a provider reports them. An
event's text is its exported text; a text-free trace's sized event gets ``-`` (it stands for text).

Alignment: the request's size and ADK's sizing helpers (``_serialized_size``, the prompt estimate) sum
ctxsim's sizes instead of JSON characters; contents are not copied for the request (so they can be
traced back to events); the summarizer is the real ``LlmEventSummarizer`` over a scripted model that
answers ``SUMMARY n``, weighing the size rule over the events it was given.
"""

from __future__ import annotations

import logging
import re
import sys
import warnings
from pathlib import Path

import google.adk.apps.compaction as adk_compaction
import google.adk.flows.llm_flows.context._contents as adk_contents
from google.adk.agents import LlmAgent
from google.adk.apps.app import App, EventsCompactionConfig
from google.adk.apps.llm_event_summarizer import LlmEventSummarizer
from google.adk.events.event import Event
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_response import LlmResponse
from google.adk.sessions import InMemorySessionService
from google.genai import types

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # benchmarks/oracles: oracle_job
from oracle_job import rle, run_job  # noqa: E402

logging.getLogger("google_adk").setLevel(logging.ERROR)
warnings.filterwarnings("ignore", message=r"\[EXPERIMENTAL\]")
AGENT = "agent"
SUMMARY_RE = re.compile(r"^SUMMARY \d+$")


class Run:
    current: Run | None = None

    def __init__(self, rule: dict) -> None:
        self.rule = rule
        self.by_content: dict[int, int] = {}  # id(content) -> ctx index
        self.tokens: list[int] = []
        self.summaries: dict[str, int] = {}  # summary text -> tokens
        self.pending = 0  # tokens given to the summarizer now

    def content_size(self, content) -> int:
        if content is None:
            return 0
        i = self.by_content.get(id(content))
        if i is not None:
            return self.tokens[i]
        text = "".join(p.text or "" for p in content.parts or [])
        return self.summaries.get(text, 0)


def _serialized_size(events) -> int:
    return sum(Run.current.content_size(adk_compaction._request_content(e)) for e in events)


def _estimate_prompt_token_count(*, events, current_branch, agent_name, isolation_scope=None):
    contents = adk_contents._get_contents(
        current_branch=current_branch, events=events, agent_name=agent_name, isolation_scope=isolation_scope
    )
    total = sum(Run.current.content_size(c) for c in contents)
    return total if total > 0 else None


adk_compaction._serialized_size = _serialized_size
adk_compaction._estimate_prompt_token_count = _estimate_prompt_token_count
adk_contents._copy_content_for_request = lambda content, **kwargs: content
_summarize = LlmEventSummarizer.maybe_summarize_events


async def _sized_summarize(self, *, events):
    run = Run.current
    run.pending = sum(run.content_size(e.content) for e in events)
    return await _summarize(self, events=events)


LlmEventSummarizer.maybe_summarize_events = _sized_summarize


class ScriptedLlm(BaseLlm):
    model: str = "scripted"

    async def generate_content_async(self, llm_request, stream=False):
        run = Run.current
        text = f"SUMMARY {len(run.summaries) + 1}"
        r = run.rule
        run.summaries[text] = min(max(round(r["ratio"] * run.pending), r["min"]), r["max"])
        yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text=text)]))


def session_events(trace: dict, run: Run) -> list[tuple[int, Event]]:
    out, inv = [], -1
    for i, e in enumerate(trace["events"]):
        kind = e["kind"]
        if kind in ("system", "tools"):
            continue
        if kind == "user" or inv < 0:
            inv += 1
        # a text-free trace's sized event stands for text (ADK skips a content with no visible part)
        text = e["text"] or ("-" if e["tokens"] else "")
        if kind == "assistant":
            parts = [types.Part(text=text)] if text else []
            parts += [
                types.Part(function_call=types.FunctionCall(id=c, name="bash", args={}))
                for c in e["tool_call_ids"]
            ]
            ev = Event(
                author=AGENT, invocation_id=f"inv-{inv}", content=types.Content(role="model", parts=parts)
            )
        elif kind == "tool_result":
            resp = types.FunctionResponse(id=e["tool_call_id"], name="bash", response={"output": e["text"]})
            ev = Event(
                author=AGENT,
                invocation_id=f"inv-{inv}",
                content=types.Content(role="user", parts=[types.Part(function_response=resp)]),
            )
        else:
            ev = Event(
                author="user",
                invocation_id=f"inv-{inv}",
                content=types.Content(role="user", parts=[types.Part(text=text)]),
            )
        ev.timestamp = float(i + 1)
        run.by_content[id(ev.content)] = i
        out.append((i, ev))
    return out


async def replay(trace: dict, config: dict, rule: dict) -> dict:
    run = Run.current = Run(rule)
    run.tokens = [e["tokens"] for e in trace["events"]]
    instruction = sum(e["tokens"] for e in trace["events"] if e["kind"] in ("system", "tools"))
    llm = ScriptedLlm()
    agent = LlmAgent(name=AGENT, model=llm)
    cfg = EventsCompactionConfig(summarizer=LlmEventSummarizer(llm=llm), **config)
    app = App(name="oracle", root_agent=agent, events_compaction_config=cfg)
    svc = InMemorySessionService()
    session = await svc.create_session(app_name="oracle", user_id="u")
    evs = session_events(trace, run)
    by_index = dict(evs)
    p, calls = 0, []
    for call in trace["calls"]:
        while p < len(evs) and evs[p][0] < call["view_end"]:
            i, ev = evs[p]
            if trace["events"][i]["kind"] == "user" and session.events:  # the previous invocation completed
                async for c in adk_compaction._run_compaction_for_sliding_window(app, session, svc):
                    await svc.append_event(session=session, event=c)
            await svc.append_event(session=session, event=ev)
            p += 1
        if config.get("token_threshold") is not None:
            await adk_compaction._run_compaction_for_token_threshold_config(
                config=cfg,
                session=session,
                session_service=svc,
                agent=agent,
                agent_name=AGENT,
                current_branch=None,
            )
        contents = adk_contents._get_contents(current_branch=None, events=session.events, agent_name=AGENT)
        shown = {run.by_content[id(c)] for c in contents if id(c) in run.by_content}
        inserted = [run.content_size(c) for c in contents if id(c) not in run.by_content]
        # an event not sent is S inside a compaction's range, else D (an empty content ADK skips)
        spans = [
            (e.actions.compaction.start_timestamp, e.actions.compaction.end_timestamp)
            for e in session.events
            if e.actions and e.actions.compaction
        ]
        state = "".join(
            "V"
            if trace["events"][i]["kind"] in ("system", "tools") or i in shown
            else ("S" if any(a <= i + 1 <= b for a, b in spans) else "D")
            for i in range(call["view_end"])
        )
        tokens = sum(run.content_size(c) for c in contents) + instruction + call["residual"]
        calls.append([rle(state), inserted, tokens])
        model_event = by_index.get(call["event_index"])
        if model_event is not None:  # the provider's report of this call, on its response event
            model_event.usage_metadata = types.GenerateContentResponseUsageMetadata(prompt_token_count=tokens)
    return {"finish": "completed", "calls": calls}


def main() -> int:
    return run_job(replay)


if __name__ == "__main__":
    sys.exit(main())
