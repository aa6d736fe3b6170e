"""The OpenHands oracle's real side: runs OpenHands' own condensers over canonical traces, call by call.

    <oracle venv>/bin/python driver.py INPUT.json OUTPUT.json

Runs in the oracle's virtual environment (``requirements.txt``: openhands-ai 0.62.0, the last release with
``openhands/memory/condenser/impl``, and openhands-sdk 1.58.2); never imports ctxsim. ``feed.py`` writes the
input (the traces as the policies see them: kinds, tool call ids, OpenHands types, ctxsim's per-event
token sizes, each call's view end and residual; the settings) and turns the output into goldens.

Per recorded call, as the agents do it: the history up to that call's action becomes real OpenHands events;
V0: ``View.from_events(history)`` -> ``condenser.condense(view)``; a ``Condensation`` is appended to the
history as its ``CondensationAction`` and the condenser asked again; the final view goes through the real
``ConversationMemory.process_events`` (what CodeActAgent sends). SDK: ``View.from_events`` ->
``condenser.condense(view, agent_llm)``, a ``Condensation`` appended and asked again; the view's events
are what is sent. With a provider window: a request over it appends a ``CondensationRequestAction``
(V0, ``enable_history_truncation``) or a ``CondensationRequest`` (SDK) and the condenser is asked again,
as the agent controllers do after a context-window error, until the request fits; one that no longer
shrinks ends the run (``condensation-insufficient``), as does a condenser that raises.

Aligned so that only decision rules differ: each event weighs ctxsim's size (a text has a marker
``«i»`` naming its event, so every message sent is traced back to the events it carries); the
summarizer is scripted ("SUMMARY n") and its summary weighs ctxsim's rule (clamp(0.1 x covered tokens,
256, 2048) + one message's framing); placeholders weigh ctxsim's calibrated estimate of their text; the
SDK's token counter is the sum of those sizes; the system prompt ConversationMemory re-creates when the
condenser forgot it weighs the trace's. Each original event is then V (sent; ``copies`` counts extra
sends), P (replaced by a placeholder), S (forgotten, given to a summarizer), D (forgotten) or N (in the
condenser's view, not sent).
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import sys

logging.disable(logging.CRITICAL)
os.environ.setdefault("LITELLM_LOG", "ERROR")
os.environ.setdefault("OPENHANDS_SUPPRESS_BANNER", "1")
# the SDK refuses an agent LLM window under 16,384 tokens unless told; the goldens' small windows need it
os.environ.setdefault("ALLOW_SHORT_CONTEXT_WINDOWS", "true")

MARK = re.compile(r"«(\d+)»")
NO_USER = "«no user message»"  # the initial user message of a trace without one


def mark(i: int) -> str:
    return f"«{i}»"


class Sizes:
    """ctxsim's size rules, restated from the numbers feed.py passes (``bpt``, ``overhead``)."""

    def __init__(self, tr: dict) -> None:
        self.bpt, self.overhead = tr["bpt"], tr["overhead"]
        self.tokens = [e["tokens"] for e in tr["events"]]

    def text(self, s: str) -> int:
        return math.ceil((len(s.encode()) + self.overhead) / self.bpt)

    def summary(self, covered: int, rule: dict | None = None) -> int:
        """clamp(ratio x covered, min, max) + one message's framing (the policies' ``summary_*`` knobs)."""
        r = {**SUMMARY_RULE, **(rule or {})}
        ratio, lo, hi = r["summary_ratio"], r["summary_min_tokens"], r["summary_max_tokens"]
        return min(max(round(ratio * covered), lo), hi) + self.text("")


# ctxsim's summary size rule: knobs of the policies, not of OpenHands (which sets no length)
SUMMARY_RULE = {"summary_ratio": 0.1, "summary_min_tokens": 256, "summary_max_tokens": 2048}
NOT_LIBRARY = ("name", "variant", *SUMMARY_RULE)  # step keys no OpenHands constructor takes


def library_knobs(step: dict) -> dict:
    return {a: b for a, b in step.items() if a not in NOT_LIBRARY}


def summary_rule(steps: list[dict]) -> dict:
    return {k: v for s in steps for k, v in s.items() if k in SUMMARY_RULE}


class Insufficient(Exception):
    """The condenser cannot bring the request under the window (or raised while trying)."""


# ------------------------------------------------------------------------------------------------- V0
def v0_run(tr: dict, setting: dict) -> dict:
    from litellm import ModelResponse
    from openhands.core.config import AgentConfig
    from openhands.events.action import CmdRunAction, MessageAction
    from openhands.events.action.agent import CondensationRequestAction, RecallAction
    from openhands.events.action.message import SystemMessageAction
    from openhands.events.event import EventSource, RecallType
    from openhands.events.observation import BrowserOutputObservation, CmdOutputObservation
    from openhands.events.observation.agent import AgentCondensationObservation, RecallObservation
    from openhands.events.observation.error import ErrorObservation
    from openhands.events.tool import ToolCallMetadata
    from openhands.memory.condenser.condenser import Condensation
    from openhands.memory.condenser.impl import (
        AmortizedForgettingCondenser,
        BrowserOutputCondenser,
        ConversationWindowCondenser,
        LLMSummarizingCondenser,
        ObservationMaskingCondenser,
        RecentEventsCondenser,
    )
    from openhands.memory.condenser.impl.pipeline import CondenserPipeline
    from openhands.memory.conversation_memory import ConversationMemory
    from openhands.memory.view import View
    from openhands.utils.prompt import PromptManager

    size = Sizes(tr)
    events = tr["events"]

    class _Msg:
        def __init__(self, text):
            self.content = text

    class _Resp:
        def __init__(self, text):
            self.choices = [type("C", (), {"message": _Msg(text)})()]

        def model_dump(self):
            return {}

    class ScriptedLLM:
        """The summarizer: answers "SUMMARY n"."""

        def __init__(self):
            self.n = 0
            self.metrics = type("M", (), {"get": lambda s: {}})()
            self.config = type("Cfg", (), {"model": "scripted"})()

        def format_messages_for_llm(self, messages):
            return messages

        def completion(self, messages, **kw):
            self.n += 1
            return _Resp(f"SUMMARY {self.n}")

    def make(step: dict):
        name, k = step["name"], library_knobs(step)
        if name == "openhands_observation_masking":
            return ObservationMaskingCondenser(**k)
        if name == "openhands_browser_output_masking":
            return BrowserOutputCondenser(**k)
        if name == "openhands_recent_events":
            return RecentEventsCondenser(**k)
        if name == "openhands_amortized_forgetting":
            return AmortizedForgettingCondenser(**k)
        if name == "openhands_llm_summarizing":
            return LLMSummarizingCondenser(ScriptedLLM(), **k)
        if name == "openhands_conversation_window":
            return ConversationWindowCondenser()
        raise ValueError(name)

    steps = setting["steps"]
    rule = summary_rule(steps)
    condenser = make(steps[0]) if len(steps) == 1 else CondenserPipeline(*[make(s) for s in steps])
    prompts = os.path.join(
        os.path.dirname(sys.modules["openhands"].__file__), "agenthub/codeact_agent/prompts"
    )

    class Prompts(PromptManager):
        """The system prompt ConversationMemory re-creates when the condenser forgot it: CodeAct's own
        (weighed as the trace's system prompt); building CodeAct's needs the browsing agent's deps."""

        def get_system_message(self, **kw) -> str:
            return "re-created system prompt"

    memory = ConversationMemory(AgentConfig(), Prompts(prompt_dir=prompts))

    # -- the trace's events as OpenHands events, each tagged with its ctxsim index (.ctx)
    def is_message(e: dict) -> bool:  # a user event that becomes a user MessageAction (below)
        st = e["source_type"] or ""
        return e["kind"] == "user" and st != "action:recall" and not st.startswith("observation:")

    first_user = next((e["index"] for e in events if is_message(e)), None)
    recall_action = None
    action_of: dict[str, CmdRunAction] = {}
    oh: list[list] = []  # per ctxsim event: the OpenHands events standing for it
    for e in events:
        i, kind, st = e["index"], e["kind"], e["source_type"]
        made = []
        if kind == "system":
            ev = SystemMessageAction(content=mark(i))
            ev._source = EventSource.AGENT
            made.append(ev)
        elif kind == "tools":
            pass  # part of the system message; CodeActAgent sends the tools with every request
        elif kind == "user" and st == "action:recall":
            q = events[first_user]["index"] if first_user is not None else -1
            ev = RecallAction(query=mark(q), recall_type=RecallType.WORKSPACE_CONTEXT)
            ev._source = EventSource.USER
            recall_action = ev
            made.append(ev)
        elif kind == "user" and st == "observation:recall":
            ev = RecallObservation(
                content="", recall_type=RecallType.WORKSPACE_CONTEXT, repo_name=mark(i) if e["sent"] else ""
            )
            ev._source = EventSource.ENVIRONMENT
            ev.cause_of = recall_action  # its cause is the recall action's id, known once appended
            made.append(ev)
        elif kind == "user" and (st or "").startswith("observation:"):
            ev = ErrorObservation(content=mark(i))
            ev._source = EventSource.AGENT
            made.append(ev)
        elif kind == "user":
            ev = MessageAction(content=mark(i))
            ev._source = EventSource.USER
            made.append(ev)
        elif kind == "assistant" and e["ids"]:
            calls = [
                {"id": c, "type": "function", "function": {"name": "execute_bash", "arguments": "{}"}}
                for c in e["ids"]
            ]
            message = {"role": "assistant", "content": mark(i), "tool_calls": calls}
            resp = ModelResponse(
                id=f"resp-{i}", choices=[{"index": 0, "finish_reason": "tool_calls", "message": message}]
            )
            for c in e["ids"]:
                ev = CmdRunAction(command=f"cmd {c}")
                ev._source = EventSource.AGENT
                ev.tool_call_metadata = ToolCallMetadata(
                    function_name="execute_bash", tool_call_id=c, model_response=resp,
                    total_calls_in_response=len(e["ids"]),
                )  # fmt: skip
                action_of[c] = ev
                made.append(ev)
        elif kind == "assistant":
            ev = MessageAction(content=mark(i))
            ev._source = EventSource.AGENT
            made.append(ev)
        elif kind == "tool_result" and e["id"] in action_of:
            act = action_of[e["id"]]
            if st == "observation:browse":
                ev = BrowserOutputObservation(content=mark(i), url=e["url"] or "", trigger_by_action="browse")
            else:
                ev = CmdOutputObservation(content=mark(i), command_id=-1, command=act.command)
            ev._source = EventSource.AGENT
            ev.cause_of = act
            ev.tool_call_metadata = act.tool_call_metadata
            made.append(ev)
        else:  # a result answering no call: an observation without a tool call (a user message)
            ev = ErrorObservation(content=mark(i))
            ev._source = EventSource.AGENT
            made.append(ev)
        for ev in made:
            ev.ctx = i
        oh.append(made)
    if first_user is not None:
        initial = oh[first_user][0]
    else:  # no user message (CodeActAgent raises there): an empty one, untraced, weighing 0 as in ctxsim
        initial = MessageAction(content=NO_USER)
        initial._source = EventSource.USER
    # the system prompt ConversationMemory re-creates weighs the trace's; a trace without one (Inspect's,
    # tau-bench's ...) has no event to weigh it by: it is sent, untraced, at 0 tokens on both sides
    sys_i = next((e["index"] for e in events if e["kind"] == "system"), None)

    history: list = []
    next_id = [0]
    summary_tokens: dict[str, int] = {}  # summary text -> its size
    summarized: set[int] = set()  # ctxsim events forgotten by a condensation that carried a summary
    dropped: set[int] = set()  # ... by one that did not
    counts = {"condensations": 0, "requests": 0, "summaries": 0}

    def append(ev) -> None:
        ev._id = next_id[0]
        next_id[0] += 1
        if getattr(ev, "cause_of", None) is not None:
            ev._cause = ev.cause_of.id
        history.append(ev)

    def condense() -> tuple[View, View]:
        for _ in range(100):
            before = View.from_events(history)
            try:
                res = condenser.condense(before)
            except Exception as exc:  # noqa: BLE001 - a crash of the real condenser is an outcome
                raise Insufficient(f"{type(exc).__name__}: {exc}") from None
            if not isinstance(res, Condensation):
                return before, res
            act = res.action
            forgotten = set(act.forgotten)
            in_view = [ev for ev in before if getattr(ev, "ctx", None) is not None and ev.id in forgotten]
            if act.summary is not None:
                prev = next(
                    (
                        ev
                        for ev in before
                        if isinstance(ev, AgentCondensationObservation) and ev.content in summary_tokens
                    ),
                    None,
                )
                covered = (summary_tokens[prev.content] if prev is not None else 0) + sum(
                    size.tokens[ev.ctx] for ev in in_view
                )
                summary_tokens[act.summary] = size.summary(covered, rule)
                counts["summaries"] += 1
                summarized.update(ev.ctx for ev in in_view if ev.ctx not in dropped)
            else:
                dropped.update(ev.ctx for ev in in_view if ev.ctx not in summarized)
            append(act)
            counts["condensations"] += 1
        raise Insufficient("the condenser did not settle")

    def state(k: int, before: View, after: View) -> dict:
        n = tr["calls"][k]["view_end"]
        msgs = memory.process_events(list(after.events), initial, max_message_chars=None)
        sent: dict[int, int] = {}
        inserted = []
        for m in msgs:
            texts = [c.text for c in m.content if hasattr(c, "text")]
            if m.role == "assistant" and m.tool_calls:
                texts = texts or []
            found = [int(x) for t in texts for x in MARK.findall(t)]
            for i in found:
                sent[i] = sent.get(i, 0) + 1
            if m.role == "system" and not found and sys_i is not None:
                sent[sys_i] = sent.get(sys_i, 0) + 1  # re-created by ConversationMemory: the trace's prompt
            if not found and m.role != "system" and "".join(texts).strip() != NO_USER:
                text = "".join(texts).lstrip("\n")
                if text in summary_tokens:
                    inserted.append(["summary", summary_tokens[text]])
                else:
                    inserted.append(["placeholder", size.text(text)])
        in_after = {id(ev) for ev in after}
        # replaced by a placeholder: a masking condenser keeps the view's length and puts an
        # AgentCondensationObservation where the event was (RecentEvents drops events instead)
        replaced = set()
        if len(before) == len(after):
            replaced = {
                id(b) for b, a in zip(before.events, after.events, strict=True)
                if a is not b and isinstance(a, AgentCondensationObservation)
            }  # fmt: skip
        codes, copies = [], []
        for i in range(n):
            e = events[i]
            if e["kind"] == "tools":
                codes.append("V")
            elif i in sent:
                codes.append("V")
                if sent[i] > 1:
                    copies.append([i, sent[i] - 1])
            elif any(id(ev) in in_after for ev in oh[i]):
                codes.append("N")
            elif any(id(ev) in replaced for ev in oh[i]):
                codes.append("P")
            elif i in summarized:
                codes.append("S")
            elif oh[i]:
                codes.append("D")
            else:
                codes.append("N")  # no OpenHands event (never the case for a trace's kinds)
        tokens = sum(size.tokens[i] for i in range(n) if codes[i] == "V")
        tokens += sum(size.tokens[i] * c for i, c in copies) + sum(t for _, t in inserted)
        return {"states": "".join(codes), "inserted": sorted(inserted), "copies": copies, "view": tokens}

    window = setting.get("window")
    rolling = any(s["name"] in ROLLING_V0 for s in steps)
    out, finish = [], "completed"
    pos = 0
    try:
        for k, c in enumerate(tr["calls"]):
            while pos < c["view_end"]:
                for ev in oh[pos]:
                    append(ev)
                pos += 1
            before, after = condense()
            st = state(k, before, after)
            if window is not None:
                request = st["view"] + c["residual"]
                while request > window:
                    if not rolling:
                        raise Insufficient("context-overflow")
                    append(CondensationRequestAction())
                    counts["requests"] += 1
                    before, after = condense()
                    st2 = state(k, before, after)
                    if st2["view"] + c["residual"] >= request and st2["states"] == st["states"]:
                        raise Insufficient("no progress")
                    st = st2
                    request = st["view"] + c["residual"]
            out.append(st)
    except Insufficient as exc:
        finish = "context-overflow" if str(exc) == "context-overflow" else "condensation-insufficient"
    return {"calls": out, "finish": finish, **counts}


ROLLING_V0 = ("openhands_amortized_forgetting", "openhands_llm_summarizing", "openhands_conversation_window")


# ------------------------------------------------------------------------------------------------ SDK
def sdk_run(tr: dict, setting: dict) -> dict:
    import openhands.sdk.context.condenser.llm_summarizing_condenser as lsc
    import openhands.sdk.context.condenser.utils as cutils
    from litellm import ModelResponse
    from openhands.sdk.context.condenser import LLMSummarizingCondenser
    from openhands.sdk.context.condenser.base import NoCondensationAvailableException
    from openhands.sdk.context.view import View
    from openhands.sdk.event import (
        ActionEvent,
        Condensation,
        CondensationRequest,
        MessageEvent,
        ObservationEvent,
    )
    from openhands.sdk.event.condenser import CondensationSummaryEvent
    from openhands.sdk.event.llm_convertible import SystemPromptEvent
    from openhands.sdk.llm import LLM, Message, MessageToolCall, TextContent
    from openhands.sdk.llm.llm_response import LLMResponse
    from openhands.sdk.llm.utils.metrics import MetricsSnapshot
    from openhands.sdk.tool.schema import Observation

    size = Sizes(tr)
    events = tr["events"]
    sizes: dict[str, int] = {}  # SDK event id -> tokens
    summary_tokens: dict[str, int] = {}
    counter = {"n": 0}

    class TextObservation(Observation):
        pass

    class ScriptedLLM(LLM):
        def generate(self, messages, **kw):
            counter["n"] += 1
            msg = Message(role="assistant", content=[TextContent(text=f"SUMMARY {counter['n']}")])
            return LLMResponse(
                message=msg,
                metrics=MetricsSnapshot(model_name="scripted", accumulated_cost=0.0),
                raw_response=ModelResponse(id=f"summary-{counter['n']}"),
            )

    def count(evs, llm=None):
        return sum(sizes.get(ev.id, 0) for ev in evs)

    lsc.get_total_token_count = count
    cutils.get_total_token_count = count

    # -- the trace's events as SDK events (.ctx: the ctxsim events each stands for)
    sdk: list = []
    ctx_of: dict[str, list[int]] = {}
    action_of: dict[str, ActionEvent] = {}
    system_ev = None
    for e in events:
        i, kind, st = e["index"], e["kind"], e["source_type"]
        if kind in ("system", "tools") or st == "SystemPromptEvent":
            if system_ev is None:
                system_ev = SystemPromptEvent(system_prompt=TextContent(text=mark(i)), tools=[])
                sizes[system_ev.id] = 0
                ctx_of[system_ev.id] = []
                sdk.append(system_ev)
            sizes[system_ev.id] += e["tokens"]
            ctx_of[system_ev.id].append(i)
            continue
        if st == "action:recall":
            continue  # OpenHands V0's recall request: no SDK event
        made = []
        if kind == "user":
            made.append(
                MessageEvent(
                    source="user", llm_message=Message(role="user", content=[TextContent(text=mark(i))])
                )
            )
        elif kind == "assistant" and e["ids"]:
            share = e["tokens"] // len(e["ids"])
            for j, c in enumerate(e["ids"]):
                ev = ActionEvent(
                    thought=[TextContent(text=mark(i))] if j == 0 else [], action=None, tool_name="terminal",
                    tool_call_id=c, llm_response_id=f"resp-{i}",
                    tool_call=MessageToolCall(id=c, name="terminal", arguments="{}", origin="completion"),
                )  # fmt: skip
                sizes[ev.id] = share + (e["tokens"] - share * len(e["ids"]) if j == 0 else 0)
                action_of[c] = ev
                made.append(ev)
        elif kind == "assistant":
            made.append(
                MessageEvent(
                    source="agent", llm_message=Message(role="assistant", content=[TextContent(text=mark(i))])
                )
            )
        elif kind == "tool_result" and e["id"] in action_of:
            made.append(ObservationEvent(
                tool_name="terminal", tool_call_id=e["id"], action_id=action_of[e["id"]].id,
                observation=TextObservation(content=[TextContent(text=mark(i))]),
            ))  # fmt: skip
        else:
            made.append(
                MessageEvent(
                    source="user", llm_message=Message(role="user", content=[TextContent(text=mark(i))])
                )
            )
        for ev in made:
            sizes.setdefault(ev.id, e["tokens"])
            ctx_of[ev.id] = [i]
            sdk.append(ev)
    steps = setting["steps"]
    (step,) = steps
    knobs, rule = library_knobs(step), summary_rule(steps)
    llm = ScriptedLLM(model="scripted/summarizer", usage_id="condenser")
    if step["name"] == "openhands_hard_context_reset":
        condenser = None
    else:
        condenser = LLMSummarizingCondenser(llm=llm, **knobs)
    window = setting.get("window")
    # the agent's LLM, as the agent passes it: its input limit is the provider window (none: unknown)
    agent_llm = LLM(model="scripted/agent", usage_id="agent", max_input_tokens=window)

    history: list = []
    summarized: set[int] = set()
    counts = {"condensations": 0, "requests": 0, "summaries": 0}

    def cond(view: View):
        if condenser is not None:
            return condenser.condense(view, agent_llm=agent_llm)
        # openhands_hard_context_reset: LLMSummarizingCondenser's hard_context_reset, on a request only
        if not view.unhandled_condensation_request:
            return view
        reset = LLMSummarizingCondenser(llm=llm, **knobs)
        res = reset.hard_context_reset(view, agent_llm=agent_llm)
        if res is None:
            raise NoCondensationAvailableException("hard context reset failed")
        return res

    def condense() -> View:
        for _ in range(100):
            view = View.from_events(history)
            try:
                res = cond(view)
            except Exception as exc:  # noqa: BLE001
                raise Insufficient(f"{type(exc).__name__}: {exc}") from None
            if not isinstance(res, Condensation):
                return res
            gone = [ev for ev in view.events if ev.id in res.forgotten_event_ids]
            if res.summary is not None:
                summary_tokens[res.summary] = size.summary(sum(sizes.get(ev.id, 0) for ev in gone), rule)
                sizes[f"{res.id}-summary"] = summary_tokens[res.summary]
                counts["summaries"] += 1
            for ev in gone:
                summarized.update(ctx_of.get(ev.id, ()))
            history.append(res)
            counts["condensations"] += 1
        raise Insufficient("the condenser did not settle")

    def state(k: int, view: View) -> dict:
        n = tr["calls"][k]["view_end"]
        in_view: dict[int, int] = {}
        for ev in view.events:
            for i in ctx_of.get(ev.id, ()):
                in_view[i] = in_view.get(i, 0) + 1
        inserted = sorted(
            ["summary", summary_tokens[ev.summary]]
            for ev in view.events
            if isinstance(ev, CondensationSummaryEvent)
        )
        codes = []
        for i in range(n):
            parts = [ev for ev in sdk if i in ctx_of[ev.id]]
            if i in in_view and in_view[i] == len(parts):
                codes.append("V")
            elif i in in_view:
                codes.append("N")  # a parallel call partly forgotten
            elif i in summarized:
                codes.append("S")
            elif events[i]["source_type"] == "action:recall":
                codes.append("N")
            else:
                codes.append("D")
        tokens = sum(
            sizes.get(ev.id, 0) for ev in view.events if not isinstance(ev, CondensationSummaryEvent)
        )
        tokens += sum(t for _, t in inserted)
        return {"states": "".join(codes), "inserted": inserted, "copies": [], "view": tokens}

    out, finish, p = [], "completed", 0
    try:
        for k, c in enumerate(tr["calls"]):
            while p < len(sdk) and max(ctx_of[sdk[p].id]) < c["view_end"]:
                history.append(sdk[p])
                p += 1
            st = state(k, condense())
            if window is not None:
                request = st["view"] + c["residual"]
                while request > window:
                    history.append(CondensationRequest())
                    counts["requests"] += 1
                    st2 = state(k, condense())
                    if st2["view"] + c["residual"] >= request:
                        raise Insufficient("no progress")
                    st, request = st2, st2["view"] + c["residual"]
            out.append(st)
    except Insufficient:
        finish = "condensation-insufficient"
    return {"calls": out, "finish": finish, **counts}


def main() -> None:
    src, dst = sys.argv[1], sys.argv[2]
    with open(src) as f:
        job = json.load(f)
    results = []
    # OpenHands' imports replace the exception hook: print a failure here, or it exits 1 silently
    import traceback

    for run in job["runs"]:
        tr = job["traces"][run["trace"]]
        fn = sdk_run if run["framework"] == "sdk" else v0_run
        try:
            results.append({"key": run["key"], **fn(tr, run["setting"])})
        except Exception:
            print(f"driver.py: run {run['key']} failed", file=sys.stderr)
            traceback.print_exc()
            sys.exit(1)
    with open(dst, "w") as f:
        json.dump({"results": results}, f)


if __name__ == "__main__":
    main()
