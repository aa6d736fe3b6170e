"""OpenHands SDK v1 persisted conversations: a folder with ``base_state.json`` and ``events/event-*.json``.

The SDK writes one JSON file per event, named ``event-<NNNNN>-<event id>.json``; the five-digit number is
the event's position in the conversation (ids are random UUIDs, timestamps can tie), so events are read
in that order. ``base_state.json`` holds the agent's configuration (model, ``max_message_chars``,
condenser) and its metrics: ``stats.usage_to_metrics.<usage id>.token_usages``, one entry per model call
with a ``response_id``.

Events -> messages, as the SDK's ``events_to_messages`` builds each prompt:

- ``SystemPromptEvent`` -> ``system`` (its prompt) and ``tools`` (the tool definitions as JSON: the file
  keeps descriptions and annotations, not the exact schemas sent, so that message is close, not exact;
  its size comes from the provider's counts anyway); a ``dynamic_context`` becomes a ``user`` message.
- ``MessageEvent`` -> ``user`` or ``assistant`` by the message's role (an assistant message is a model call
  that issued no tool); ``extended_content`` is appended, as the SDK does.
- ``ActionEvent`` -> ``assistant``: its thought, then the tool call (name and arguments) as the model
  emitted it. Consecutive actions with the same ``llm_response_id`` (parallel tool calls) are one message,
  one call, issuing each tool call id.
- ``ObservationEvent``, ``AgentErrorEvent``, ``UserRejectObservation`` -> ``tool_result`` answering
  ``tool_call_id``. A terminal result gets its metadata lines as the terminal tool renders them
  (``[Command finished with exit code N]``...). One answering a call that is not in the conversation is
  kept unpaired, with a warning.
- ``CondensationSummaryEvent`` -> ``user`` (the summary the SDK inserts).
- Skipped, as they never reach the model: state updates, pauses, conversation errors, condensation
  requests, and any event kind not listed here. A ``Condensation`` (which forgets events from later views)
  is not modelled: later calls keep the append-only view and their residuals absorb the difference; a
  warning says so.

Usage. Each assistant message's call is the ``token_usages`` entry whose ``response_id`` equals its
``llm_response_id`` (searched over every usage id, so a condenser's calls never match an agent message).
LiteLLM's ``prompt_tokens`` counts cached tokens inside (the sample: 3,869 prompt tokens of which 3,712
cache reads); OpenHands copies it with ``cache_read_tokens`` / ``cache_write_tokens`` beside, which are
kept as such. ``costs`` carry no response id: they are matched to ``token_usages`` by position when the
two lists have one entry per call. The per-call telemetry files (``telemetry/*.json``, written when
``log_completions`` is on) are not read: the metrics already hold every number they would give.

Recorded policy: the agent's condenser (none or ``NoOpCondenser`` -> ``raw``) and the LLM's
``max_message_chars``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path

from sim.core.types import Trace
from sim.importers import Importer, register
from sim.importers.common import (
    Message,
    Usage,
    build_trace,
    iso_timestamp,
    number_runs,
    read_json_file,
    text_of,
    warn,
)
from sim.importers.openhands_v0 import cmd_output_text, cost_of, token_usage, tool_call_line
from sim.util.errors import TraceError

FORMAT = "openhands-sdk-v1"
_EVENT_FILE = re.compile(r"^event-(\d+)-.*\.json$")
_SKIPPED_KINDS = {
    "ConversationStateUpdateEvent",
    "PauseEvent",
    "ConversationErrorEvent",
    "CondensationRequest",
    "TokenEvent",
    "StreamingDeltaEvent",
}


def _sniff(path: Path) -> bool:
    """A directory holding ``base_state.json`` and an ``events/`` folder."""
    try:
        return path.is_dir() and (path / "base_state.json").is_file() and (path / "events").is_dir()
    except OSError:
        return False


def event_files(folder: Path) -> list[Path]:
    """Event files in conversation order: by the position number in their name (then the name)."""
    found = []
    for f in (folder / "events").iterdir():
        m = _EVENT_FILE.match(f.name)
        if m and f.is_file():
            found.append((int(m.group(1)), f.name, f))
    return [f for _, _, f in sorted(found)]


def load(path: Path) -> Iterator[Trace]:
    """Errors name the file inside the conversation folder (``<folder>/events/event-....json``)."""
    name = f"{path.name}/base_state.json"
    state = read_json_file(path / "base_state.json", name)
    if not isinstance(state, Mapping):
        raise TraceError(name, f"expected an object, got {type(state).__name__}")
    events = []
    for f in event_files(path):
        name = f"{path.name}/events/{f.name}"
        e = read_json_file(f, name)
        if not isinstance(e, Mapping):
            raise TraceError(name, f"expected an event object, got {type(e).__name__}")
        events.append((name, e))
    yield convert(state, events, path.name)


def _usages(state: Mapping, file: str) -> dict[str, Usage]:
    """Every recorded call's usage by response id, over all usage ids (agent, condenser, ...)."""
    out: dict[str, Usage] = {}
    stats = state.get("stats") if isinstance(state.get("stats"), Mapping) else {}
    by_id = stats.get("usage_to_metrics") if isinstance(stats.get("usage_to_metrics"), Mapping) else {}
    for uid, metrics in by_id.items():
        if not isinstance(metrics, Mapping):
            continue
        tus = metrics.get("token_usages") if isinstance(metrics.get("token_usages"), list) else []
        costs = metrics.get("costs") if isinstance(metrics.get("costs"), list) else []
        for k, tu in enumerate(tus):
            u = token_usage(tu, file, f"usage {uid}", f"stats.usage_to_metrics.{uid}.token_usages[{k}]")
            if len(costs) == len(tus):
                u.cost_usd = cost_of(
                    costs[k], file, f"usage {uid}", f"stats.usage_to_metrics.{uid}.costs[{k}]"
                )
            if isinstance(tu.get("response_id"), str) and tu["response_id"]:
                out[tu["response_id"]] = u
    return out


def _text(parts) -> str:
    return text_of(parts) or ""


def _observation_text(obs: Mapping) -> str:
    content = _text(obs.get("content"))
    md = obs.get("metadata")
    if obs.get("kind") == "TerminalObservation" and isinstance(md, Mapping):
        return cmd_output_text(content, md)
    return content


def recorded_policy(agent: Mapping) -> dict:
    condenser = agent.get("condenser") if isinstance(agent.get("condenser"), Mapping) else None
    if condenser is None or condenser.get("kind") in (None, "NoOpCondenser"):
        policy: dict = {"name": "raw"}
    else:
        policy = {
            "name": "openhands_condenser",
            "condenser": {k: v for k, v in condenser.items() if k not in ("llm",)},
        }
    llm = agent.get("llm") if isinstance(agent.get("llm"), Mapping) else {}
    if isinstance(llm.get("max_message_chars"), int):
        policy["max_message_chars"] = llm["max_message_chars"]
    return policy


def convert(state: Mapping, events: list[tuple[str, Mapping]], folder: str) -> Trace:
    usages = _usages(state, f"{folder}/base_state.json")
    messages: list[Message] = []
    usage: dict[int, Usage] = {}
    last_action: tuple[str, int] | None = None  # (response id, message index) of the latest ActionEvent
    run_starts: list[int] = []
    called = False  # an assistant message is among the messages so far (kept, not searched for each one)
    for name, e in events:
        kind, ts = e.get("kind"), iso_timestamp(e.get("timestamp"), f"{folder}/{name}", None, "timestamp")
        # the messages this event adds carry its kind (sim.core.types.Event.source_type)
        first = len(messages)
        if kind != "ActionEvent":
            last_action = None
        if kind == "SystemPromptEvent":
            sp = e.get("system_prompt")
            messages.append(
                Message("system", _text([sp]) if isinstance(sp, Mapping) else _text(sp), timestamp=ts)
            )
            if e.get("tools"):
                messages.append(Message("tools", json.dumps(e["tools"], ensure_ascii=False), timestamp=ts))
            if e.get("dynamic_context"):
                dc = e["dynamic_context"]
                messages.append(Message("user", _text([dc] if isinstance(dc, Mapping) else dc), timestamp=ts))
        elif kind == "MessageEvent":
            msg = e.get("llm_message")
            if not isinstance(msg, Mapping):
                raise TraceError(name, "expected an object", field="llm_message")
            role = msg.get("role")
            if role not in ("user", "assistant", "system"):
                raise TraceError(name, f"expected role user, assistant or system, got {role!r}", field="role")
            text = _text(msg.get("content"))
            extended = _text(e.get("extended_content"))
            if extended:
                text = f"{text}\n{extended}" if text else extended
            if role == "user" and e.get("source") != "agent" and called:
                run_starts.append(len(messages))  # a message sent to the conversation after it ran: a new run
            messages.append(Message(role, text, timestamp=ts))
            called = called or role == "assistant"
            rid = e.get("llm_response_id")
            if role == "assistant" and isinstance(rid, str) and rid in usages:
                usage[len(messages) - 1] = usages[rid]
        elif kind == "ActionEvent":
            tcid, rid = e.get("tool_call_id"), e.get("llm_response_id")
            if not isinstance(tcid, str) or not tcid:
                raise TraceError(name, "expected the id of the tool call", field="tool_call_id")
            if last_action is not None and rid is not None and last_action[0] == rid:
                messages[last_action[1]].add_part(_tool_call(e), (tcid,))  # a parallel call of one response
                continue
            thought = _text(e.get("thought"))
            text = f"{thought}\n{_tool_call(e)}" if thought else _tool_call(e)
            messages.append(Message("assistant", text, (tcid,), timestamp=ts))
            called = True
            last_action = (rid, len(messages) - 1)
            if isinstance(rid, str) and rid in usages:
                usage[len(messages) - 1] = usages[rid]
        elif kind in ("ObservationEvent", "AgentErrorEvent", "UserRejectObservation"):
            if kind == "ObservationEvent":
                obs = e.get("observation")
                if not isinstance(obs, Mapping):
                    raise TraceError(name, "expected an object", field="observation")
                text = _observation_text(obs)
                extended = _text(e.get("extended_content"))
                if extended:
                    text = f"{text}\n{extended}"
            elif kind == "AgentErrorEvent":
                text = str(e.get("error", ""))
            else:
                text = f"Action rejected: {e.get('rejection_reason', 'User rejected the action')}"
            tcid = e.get("tool_call_id")
            messages.append(
                Message(
                    "tool_result", text, tool_call_id=tcid if isinstance(tcid, str) else None, timestamp=ts
                )
            )
        elif kind == "CondensationSummaryEvent":
            messages.append(Message("user", str(e.get("summary", "")), timestamp=ts))
        elif kind == "Condensation":
            warn(
                folder,
                f"condensation in {name} not modelled; later calls keep the full history and "
                "their residuals carry the difference",
            )
        elif not isinstance(kind, str) or kind not in _SKIPPED_KINDS:
            warn(folder, f"{name}: event kind {kind!r} is not part of the model's conversation here; skipped")
        for m in messages[first:]:
            m.source_type = kind
    agent = state.get("agent") if isinstance(state.get("agent"), Mapping) else {}
    llm = agent.get("llm") if isinstance(agent.get("llm"), Mapping) else {}
    window = llm.get("max_input_tokens")
    trace_id = state.get("id") if isinstance(state.get("id"), str) and state.get("id") else folder
    number_runs(messages, run_starts)
    return build_trace(
        trace_id=trace_id,
        source_format=FORMAT,
        file=folder,
        messages=messages,
        usage=usage,
        model=llm.get("model") if isinstance(llm.get("model"), str) else None,
        agent=f"OpenHands SDK {agent.get('kind', 'Agent')}",
        recorded_policy=recorded_policy(agent),
        outcome={"execution_status": state.get("execution_status")},
        context_window=window if isinstance(window, int) and not isinstance(window, bool) else None,
    )


def _tool_call(e: Mapping) -> str:
    tc = e.get("tool_call") if isinstance(e.get("tool_call"), Mapping) else {}
    return tool_call_line(tc.get("name", e.get("tool_name")), tc.get("arguments", "{}"))


register(Importer(FORMAT, (), _sniff, load, folder=True))
