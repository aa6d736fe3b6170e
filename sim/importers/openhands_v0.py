"""OpenHands V0: evaluation output (``output.jsonl``) and saved event lists (``*.json``).

Two files, one event model. An **evaluation output** holds one task per line: ``instance_id``,
``instruction``, ``metadata`` (``agent_class``, ``llm_config``, ``condenser_config``), ``history`` (the
events) and ``metrics`` (``token_usages`` per call with a ``response_id``). The resolver's output has the
same shape (``issue`` instead of ``instance_id``, an older flat history, per-call ``costs`` only) and is
read by the same importer. An **event list** is a JSON list of the same events (runtime test
trajectories, a GUI session).

Events -> messages, in the order OpenHands' ``ConversationMemory`` builds the prompt:

- ``action: system`` -> a ``system`` message (the prompt) and a ``tools`` message (the tool schemas as
  JSON). Files that predate this event carry neither; the first call's residual then holds them.
- ``action: message`` from the user -> ``user``; from the agent -> ``assistant`` (a model call that
  issued no tool). Another user action (a command the user ran) -> ``user``.
- Any other agent action -> ``assistant`` with the tool call id of ``tool_call_metadata``; its text is
  what the model returned (``model_response.choices[0].message``: text, then one JSON line per tool
  call), so later calls see it as the provider did. Actions sharing a ``model_response.id`` (parallel
  tool calls) are one assistant message issuing several ids: one call. Without a model response
  (older files) the action's thought and arguments are rendered instead (CodeAct tags for the legacy
  resolver history).
- An observation -> ``tool_result`` answering the tool call of ``tool_call_metadata.tool_call_id`` or,
  failing that, of the action its ``cause`` names. One that answers a user action, or none at all
  (an ``error`` raised while parsing a model response) is what OpenHands sends: a ``user`` message.
  One whose ``cause`` names an action absent from the history is kept unpaired, with a warning.
  Text follows OpenHands: a command's output gets its metadata lines (``[Command finished with exit
  code N]``...), an error gets ``[Error occurred in processing last action]``.
- ``observation: recall`` (workspace context, microagent knowledge) -> a ``user`` message rebuilt from
  its fields (OpenHands renders it with a template the file does not hold: the text is close, not exact;
  sizes come from the provider's counts anyway). One that adds nothing is kept as a never-sent event.
- A ``recall`` action (the request for that context) never reaches the model, but it is an event of
  OpenHands' history and its condensers count it: a ``user`` event of no text and 0 tokens.
- Skipped, as they never reach the model nor the agent's history: ``change_agent_state`` and other
  environment actions, ``null`` and ``agent_state_changed`` observations, and observations answering a
  skipped action.
- Every event keeps its OpenHands type as ``source_type`` (``action:run``, ``observation:browse``, ...;
  the system prompt and its tools ``action:system``), a browser output its page address as ``url``: the
  ``openhands_*`` policies find events by type, as OpenHands does.

The recorded run's own bound: OpenHands cuts any observation longer than ``max_message_chars`` (from
``llm_config``; 30,000 when a file does not say, OpenHands' default) to its first and last half with a
notice, when it builds the prompt; file reads are cut by the editor tool instead and are exempt. The
events keep the full text; the imported content is the cut text the model saw, marked ``bounded`` so no
replay cuts it twice. The recorded policy is the condenser (``noop`` -> ``raw``) plus that bound.

Usage. Each call's usage comes from its action's ``tool_call_metadata.model_response.usage`` (LiteLLM's
record of the provider response), else from ``metrics.token_usages`` by ``response_id``. LiteLLM's
``prompt_tokens`` already counts cached tokens, for Anthropic too: in the runtime trajectories
(claude-3.5-sonnet) ``prompt_tokens`` >= ``cache_read_input_tokens + cache_creation_input_tokens`` on
every call and grows call to call by about the previous output plus the new result (3,486 -> 4,646 after
1,135 output tokens), which would not hold if the cache fields were beside it. So ``input_tokens =
prompt_tokens`` and the cache fields are copied; a record whose cache fields exceed ``prompt_tokens`` can
only be counting them beside, and is summed instead. Per-call ``costs`` are matched by position when
there is one per call.

Facts: ``sim.information.tool_facts``, with the file editor's calls marked (``file_op``): a ``read`` action
(the editor's ``view``) reads its ``path``, an ``edit`` action edits it. Every event before a call was sent to
it (the cut ones as cut), so every need counts (``sim.information.recorded_request``).

Not modelled: a condenser's rewrites of the history (``condensation`` actions) - later calls keep the
append-only view and their residuals absorb the difference; a model call whose response failed to parse
(OpenHands records only the resulting error, neither the call nor its usage); images.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path

from sim.core.types import Trace
from sim.importers import Importer, register
from sim.importers.common import (
    MAX_DOCUMENT_BYTES,
    Message,
    Usage,
    build_trace,
    iso_timestamp,
    load_json,
    number_runs,
    openai_usage,
    read_json_file,
    text_of,
    unix_time,
    usage_cost,
    usage_count,
    warn,
)
from sim.util.errors import TraceError
from sim.util.jsonl import lines_of

FORMAT_OUTPUT = "openhands-v0-output"
FORMAT_EVENTS = "openhands-v0-events"
DEFAULT_MAX_MESSAGE_CHARS = 30000  # OpenHands LLMConfig default, for files that do not record theirs
TRUNCATION_NOTICE = "\n[... Observation truncated due to length ...]\n"

TYPE_SYSTEM = "action:system"  # sim.core.types.Event.source_type: the system prompt and the tools it carries
TYPE_RECALL = "action:recall"
_SKIP_ACTIONS = {"change_agent_state", "null", "condensation_request", "pause", "resume"}
_SKIP_OBSERVATIONS = {"null", "agent_state_changed"}
_UNTRUNCATED = {"read", "browse"}  # cut by their tools, not by max_message_chars
_NO_TOOL_ACTIONS = {"message"}  # agent actions that are plain replies, not tool calls


# ------------------------------------------------------------------------------------------ helpers
def truncate(text: str, max_chars: int | None) -> tuple[str, bool]:
    """OpenHands' ``truncate_content``: over ``max_chars`` characters -> first and last half + notice."""
    if max_chars is None or max_chars < 0 or len(text) <= max_chars:
        return text, False
    half = max_chars // 2
    return text[:half] + TRUNCATION_NOTICE + text[len(text) - half :], True


def _check_count(u: Mapping, key: str, file: str, record: str, field: str) -> int | None:
    return usage_count(u.get(key), file, record, f"{field}.{key}")


def _inside(usage: Usage) -> Usage:
    """Cached tokens are inside ``input_tokens`` (LiteLLM's prompt_tokens); if they cannot be (they exceed
    it), the record counts them beside and the total is the sum."""
    cached = (usage.cache_read_tokens or 0) + (usage.cache_write_tokens or 0)
    if usage.input_tokens is not None and cached > usage.input_tokens:
        usage.input_tokens += cached
    return usage


def litellm_usage(u, file: str, record: str, field: str) -> Usage:
    """A provider response's ``usage`` as LiteLLM records it (OpenAI fields, Anthropic cache fields)."""
    if not isinstance(u, Mapping):
        raise TraceError(file, f"expected an object, got {type(u).__name__}", record=record, field=field)
    usage = openai_usage(u, file, record, field)
    read = _check_count(u, "cache_read_input_tokens", file, record, field)
    write = _check_count(u, "cache_creation_input_tokens", file, record, field)
    if read is not None:
        usage.cache_read_tokens = read
    if write is not None:
        usage.cache_write_tokens = write
    return _inside(usage)


def token_usage(u, file: str, record: str, field: str) -> Usage:
    """One entry of OpenHands' ``metrics.token_usages`` (its own copy of the LiteLLM numbers)."""
    if not isinstance(u, Mapping):
        raise TraceError(file, f"expected an object, got {type(u).__name__}", record=record, field=field)
    inp, out, read, write, reasoning = (
        _check_count(u, key, file, record, field)
        for key in (
            "prompt_tokens",
            "completion_tokens",
            "cache_read_tokens",
            "cache_write_tokens",
            "reasoning_tokens",
        )
    )
    return _inside(Usage(inp, out, read, write, reasoning))


def tool_call_line(name, arguments) -> str:
    """One tool call as the model emitted it: its function name and its arguments (JSON text)."""
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False)
    return json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)


def cost_of(entry, file: str, record: str | None, field: str) -> float | None:
    """A recorded cost in USD (a number, or an object with ``cost``): None when absent, else a finite
    number >= 0 or refused naming the field."""
    if isinstance(entry, Mapping):
        entry, field = entry.get("cost"), f"{field}.cost"
    return usage_cost(entry, file, record, field)


# ------------------------------------------------------------------------------------- conversion
class _History:
    """Builds messages and per-call usage from one run's events (see the module docstring)."""

    def __init__(self, file: str, record: str, max_chars: int | None, usages_by_id: Mapping[str, Usage]):
        self.file, self.record, self.max_chars = file, record, max_chars
        self.usages_by_id = usages_by_id
        self.messages: list[Message] = []
        self.usage: dict[int, Usage] = {}
        self.call_of_response: dict[str, int] = {}  # model response id -> its assistant message
        self.ids_of_call: dict[int, set] = {}  # assistant message -> the tool call ids it issues (a set)
        self.called = False  # an assistant message is among the messages (kept, not searched each time)
        self.tool_call_of: dict = {}  # kept action id -> its tool call id (None: a user action or reply)
        self.skipped: set = set()
        self.agent_version: str | None = None
        self.run_starts: list[int] = []  # a user's message after the agent acted: it resumes (a new run)

    def add(self, e, pos: int) -> None:
        rec = f"{self.record} history[{pos}]"
        if not isinstance(e, Mapping):
            raise TraceError(self.file, f"expected an event object, got {type(e).__name__}", record=rec)
        for key in ("id", "cause"):
            v = e.get(key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int | str)):
                raise TraceError(self.file, f"expected an event id, got {v!r}", record=rec, field=key)
        for key in ("action", "observation"):
            v = e.get(key)
            if v is not None and not isinstance(v, str):
                raise TraceError(self.file, f"expected a name, got {type(v).__name__}", record=rec, field=key)
        if "action" in e:
            self._action(e, rec)
        elif "observation" in e:
            self._observation(e, rec)
        else:
            raise TraceError(self.file, "expected an action or an observation", record=rec, field="action")

    # -- actions
    def _action(self, e: Mapping, rec: str) -> None:
        a, src, eid = e.get("action"), e.get("source"), e.get("id")
        args = e.get("args") if isinstance(e.get("args"), Mapping) else {}
        ts = iso_timestamp(e.get("timestamp"), self.file, rec, "timestamp")
        if a == "system":
            self.messages.append(
                Message(
                    "system",
                    _str(args.get("content"), e.get("message")),
                    timestamp=ts,
                    source_type=TYPE_SYSTEM,
                )
            )
            tools = args.get("tools")
            if tools:
                self.messages.append(
                    Message(
                        "tools", json.dumps(tools, ensure_ascii=False), timestamp=ts, source_type=TYPE_SYSTEM
                    )
                )
            self.agent_version = args.get("openhands_version") or self.agent_version
            return
        if a == "condensation":
            warn(
                self.file,
                f"{self.record}: condensation at event {eid} not modelled; later calls keep the "
                "full history and their residuals carry the difference",
            )
            self.skipped.add(eid)
            return
        if a == "recall":  # never sent, but an event of OpenHands' history (its condensers count it)
            self.messages.append(Message("user", "", timestamp=ts, source_type=TYPE_RECALL, sent=False))
            return
        if a in _SKIP_ACTIONS or src == "environment":
            self.skipped.add(eid)
            return
        if src == "user":
            if a == "message":
                text = _str(args.get("content"), e.get("message"))
            elif a == "run":
                text = f"User executed the command:\n{args.get('command', '')}"
            else:
                text = _str(e.get("message"), json.dumps(dict(args), ensure_ascii=False))
            if a == "message" and self.called:
                self.run_starts.append(len(self.messages))
            self.messages.append(Message("user", text, timestamp=ts, source_type=f"action:{a}"))
            self.tool_call_of[eid] = None
            return
        self._agent_action(e, a, args, eid, ts, rec)

    def _agent_action(self, e: Mapping, a, args: Mapping, eid, ts: float | None, rec: str) -> None:
        tcm = e.get("tool_call_metadata")
        if tcm is not None and not isinstance(tcm, Mapping):
            raise TraceError(self.file, "expected an object", record=rec, field="tool_call_metadata")
        tcm = tcm or {}
        resp = tcm.get("model_response")
        if resp is not None and not isinstance(resp, Mapping):
            raise TraceError(
                self.file, "expected an object", record=rec, field="tool_call_metadata.model_response"
            )
        rid = resp.get("id") if resp else None
        rid = rid if isinstance(rid, str) and rid else None
        tcid = tcm.get("tool_call_id")
        tcid = tcid if isinstance(tcid, str) and tcid else None
        if tcid is None and a not in _NO_TOOL_ACTIONS and a != "finish":
            tcid = f"call-{eid}"  # no recorded id (older files): observations pair through their cause
        self.tool_call_of[eid] = tcid
        op = file_op(a, args, tcid)
        if rid is not None and rid in self.call_of_response:  # a further tool call of the same response
            i = self.call_of_response[rid]
            issued = self.ids_of_call.setdefault(i, set(self.messages[i].tool_call_ids))
            if tcid is not None and tcid not in issued:
                issued.add(tcid)
                self.messages[i].add_part(None, (tcid,), op)
            return
        text = _response_text(resp) if resp else None
        if text is None:
            text = _action_text(e, a, args)
        self.messages.append(
            Message(
                "assistant",
                text,
                (tcid,) if tcid else (),
                timestamp=ts,
                source_type=f"action:{a}",
                file_ops=op,
            )
        )
        i = len(self.messages) - 1
        self.called = True
        if rid is not None:
            self.call_of_response[rid] = i
        u = None
        if resp and resp.get("usage") is not None:
            u = litellm_usage(resp["usage"], self.file, rec, "tool_call_metadata.model_response.usage")
            u.timestamp = unix_time(
                resp.get("created"), self.file, rec, "tool_call_metadata.model_response.created"
            )
        elif rid is not None and rid in self.usages_by_id:
            u = self.usages_by_id[rid]
        if u is not None:
            self.usage[i] = u

    # -- observations
    def _observation(self, e: Mapping, rec: str) -> None:
        o, cause = e.get("observation"), e.get("cause")
        ts = iso_timestamp(e.get("timestamp"), self.file, rec, "timestamp")
        if o == "recall":  # sent as a user message; an empty one is still an event OpenHands counts
            text = recall_text(e.get("extras") if isinstance(e.get("extras"), Mapping) else {})
            self.messages.append(
                Message("user", text or "", timestamp=ts, source_type="observation:recall", sent=bool(text))
            )
            return
        if o in _SKIP_OBSERVATIONS or (cause is not None and cause in self.skipped):
            return
        text, bounded = self._observation_text(e, o)
        tcm = e.get("tool_call_metadata")
        tcid = tcm.get("tool_call_id") if isinstance(tcm, Mapping) else None
        tcid = tcid if isinstance(tcid, str) and tcid else None
        if tcid is None and cause is not None:
            if cause in self.tool_call_of:
                tcid = self.tool_call_of[cause]  # None: it answers a user action
            else:
                tcid = f"call-{cause}"  # its action is not in the history: kept unpaired (warned)
        kind = "tool_result" if tcid is not None else "user"
        extras = e.get("extras") if isinstance(e.get("extras"), Mapping) else {}
        url = extras.get("url") if o == "browse" and isinstance(extras.get("url"), str) else None
        self.messages.append(
            Message(
                kind,
                text,
                tool_call_id=tcid,
                timestamp=ts,
                bounded=bounded,
                source_type=f"observation:{o}",
                url=url,
            )
        )

    def _observation_text(self, e: Mapping, o) -> tuple[str, bool]:
        content = e.get("content")
        if content is not None and not isinstance(content, str):
            content = text_of(content)
        content = content or ""
        extras = e.get("extras") if isinstance(e.get("extras"), Mapping) else {}
        if o == "run" and isinstance(extras.get("metadata"), Mapping):
            content = cmd_output_text(content, extras["metadata"])
        if o == "run_ipython":
            content = "\n".join(
                "![image](data:image/png;base64, ...) already displayed to user"
                if "![image](data:image/png;base64," in line
                else line
                for line in content.split("\n")
            )
        if o in _UNTRUNCATED:
            return content, False
        text, cut = truncate(content, self.max_chars)
        if o == "error":
            text += "\n[Error occurred in processing last action]"
        elif o == "user_rejected":
            text = "OBSERVATION:\n" + text + "\n[Last action has been rejected by the user]"
        return text, cut


def _str(*values) -> str:
    for v in values:
        if isinstance(v, str):
            return v
    return ""


def cmd_output_text(content: str, md: Mapping) -> str:
    """OpenHands' ``CmdOutputObservation.to_agent_observation`` (the SDK's terminal tool renders alike)."""
    ret = f"{md.get('prefix') or ''}{content}{md.get('suffix') or ''}"
    if md.get("working_dir"):
        ret += f"\n[Current working directory: {md['working_dir']}]"
    if md.get("py_interpreter_path"):
        ret += f"\n[Python interpreter: {md['py_interpreter_path']}]"
    code = md.get("exit_code", -1)
    if code is not None and code != -1:
        ret += f"\n[Command finished with exit code {code}]"
    return ret


def _response_text(resp: Mapping) -> str | None:
    """What the model returned: its text, then one line per tool call. None if there is no message."""
    choices = resp.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        return None
    msg = choices[0].get("message")
    if not isinstance(msg, Mapping):
        return None
    parts = []
    text = text_of(msg.get("content"))
    if text and text.strip():
        parts.append(text)
    for tc in msg.get("tool_calls") or ():
        fn = tc.get("function") if isinstance(tc, Mapping) else None
        if isinstance(fn, Mapping):
            parts.append(tool_call_line(fn.get("name"), fn.get("arguments")))
    return "\n".join(parts)


_CODEACT_TAGS = {"run": ("execute_bash", "command"), "run_ipython": ("execute_ipython", "code")}


def _action_text(e: Mapping, a, args: Mapping) -> str:
    """An agent action without its model response: thought plus the action (CodeAct's tags for commands
    and code, as the pre-function-calling agent wrote them; else the arguments as JSON)."""
    if a == "message":
        return _str(args.get("content"), e.get("message"))
    thought = _str(args.get("thought"))
    if a == "finish":
        return thought or _str(e.get("message"))
    if a in _CODEACT_TAGS:
        tag, key = _CODEACT_TAGS[a]
        body = f"<{tag}>\n{args.get(key, '')}\n</{tag}>"
    else:
        rest = {k: v for k, v in args.items() if k != "thought"}
        body = tool_call_line(a, rest)
    return f"{thought}\n{body}" if thought else body


def recall_text(x: Mapping) -> str | None:
    """The user message OpenHands makes of a recall observation (workspace context or microagent
    knowledge). A reconstruction of its template: the facts are those recorded, the wording close."""
    parts = []
    repo, directory = x.get("repo_name"), x.get("repo_directory")
    if repo or directory:
        parts.append(
            "<REPOSITORY_INFO>\nAt the user's request, repository "
            f"{repo or ''} has been cloned to {directory or ''} in the current working directory.\n"
            "</REPOSITORY_INFO>"
        )
    if x.get("repo_instructions"):
        parts.append(f"<REPOSITORY_INSTRUCTIONS>\n{x['repo_instructions']}\n</REPOSITORY_INSTRUCTIONS>")
    hosts = x.get("runtime_hosts") if isinstance(x.get("runtime_hosts"), Mapping) else {}
    extra = x.get("additional_agent_instructions")
    if hosts or extra:
        lines = ["<RUNTIME_INFORMATION>"]
        if hosts:
            lines.append(
                "The user has access to the following hosts for accessing a web application,\n"
                "each of which has a corresponding port:"
            )
            lines += [f"* {h} (port {p})" for h, p in hosts.items()]
            lines.append(
                "When starting a web server, use the corresponding ports. You should also\n"
                "set any options to allow iframes and CORS requests, and allow the server to\n"
                "be accessed from any host (e.g. 0.0.0.0)."
            )
        if extra:
            lines.append(str(extra))
        if x.get("date"):
            lines.append(f"Today's date is {x['date']} (UTC).")
        lines.append("</RUNTIME_INFORMATION>")
        parts.append("\n".join(lines))
    for k in x.get("microagent_knowledge") or ():
        if isinstance(k, Mapping) and k.get("content"):
            parts.append(
                "<EXTRA_INFO>\nThe following information has been included based on a keyword match for "
                f'"{k.get("trigger", "")}".\nIt may or may not be relevant to the user\'s request.\n\n'
                f"{k['content']}\n</EXTRA_INFO>"
            )
    return "\n\n".join(parts) or None


def _legacy(history: list) -> list:
    """The resolver's older history (flat action and observation dicts: no id, source or cause) as V0
    events: ids by position, each observation caused by the latest unanswered action."""
    out, open_actions = [], []
    for pos, h in enumerate(history):
        if not isinstance(h, Mapping) or "id" in h:
            out.append(h)
            continue
        if "action" in h:
            args = {k: v for k, v in h.items() if k != "action"}
            if h["action"] == "message":  # the agent's messages wait for the user's reply
                src = "agent" if h.get("wait_for_response") else "user"
            else:
                src = "agent"
            out.append({"id": pos, "source": src, "action": h["action"], "args": args})
            if src == "agent":
                open_actions.append(pos)
        elif "observation" in h:
            o = h["observation"]
            cause = open_actions.pop() if open_actions else None
            extras = {k: v for k, v in h.items() if k not in ("observation", "content")}
            content = h.get("content") if isinstance(h.get("content"), str) else ""
            if o == "run":  # the CodeAct of this era framed results as observations with the exit code
                content = f"OBSERVATION:\n{content}\n[Command finished with exit code {h.get('exit_code')}]"
            elif o != "error":
                content = f"OBSERVATION:\n{content}"
            out.append(
                {
                    "id": pos,
                    "source": "environment",
                    "observation": o,
                    "cause": cause,
                    "content": content,
                    "extras": extras,
                }
            )
        else:
            out.append(h)
    return out


def file_op(action, args: Mapping, tcid: str | None) -> tuple[tuple[str, str, str], ...]:
    """The file editor's calls for ``sim.information.tool_facts``: a ``read`` action (or the editor's
    ``view``) reads its path, an ``edit`` action (``create``, ``str_replace``, ``insert``, ``undo_edit``, or
    the older LLM-based edit with no command) edits it."""
    path = args.get("path")
    if tcid is None or not isinstance(path, str) or not path or action not in ("read", "edit"):
        return ()
    command = args.get("command")
    if action == "read" or command == "view":
        return ((tcid, "read", path),)
    if command in (None, "", "create", "str_replace", "insert", "undo_edit"):
        return ((tcid, "edit", path),)
    return ()


def recorded_policy(condenser, max_chars: int | None, assumed: bool = False) -> dict:
    """The run's context policy: its condenser (``noop`` keeps the full history: ``raw``) and the
    per-observation bound it applied when building every prompt."""
    kind = condenser.get("type") if isinstance(condenser, Mapping) else None
    if kind in (None, "noop"):
        policy: dict = {"name": "raw"}
    else:
        policy = {
            "name": "openhands_condenser",
            "condenser": {k: v for k, v in condenser.items() if k not in ("llm_config", "llm")},
        }
    if max_chars is not None:
        policy["max_message_chars"] = max_chars
        policy["applies_to"] = "observations except file reads"
        if assumed:
            policy["max_message_chars_source"] = "OpenHands default; not recorded in the file"
    return policy


def convert_history(
    history,
    *,
    file: str,
    record: str,
    trace_id: str,
    source_format: str,
    model: str | None,
    agent: str | None,
    max_chars: int | None,
    policy: dict,
    outcome: dict,
    usages_by_id: Mapping[str, Usage] | None = None,
    costs: list | None = None,
    allow_empty: bool = False,
) -> Trace | None:
    """The trace of one run's events; None for a history with no message when ``allow_empty``."""
    if not isinstance(history, list):
        raise TraceError(file, f"expected a list of events, got {type(history).__name__}", record, "history")
    conv = _History(file, record, max_chars, usages_by_id or {})
    for pos, e in enumerate(_legacy(history)):
        conv.add(e, pos)
    if not conv.messages and allow_empty:
        return None
    calls = [i for i, m in enumerate(conv.messages) if m.kind == "assistant"]
    if costs:
        if len(costs) == len(calls):
            for k, (i, c) in enumerate(zip(calls, costs, strict=True)):
                cost = cost_of(c, file, record, f"metrics.costs[{k}]")
                conv.usage.setdefault(i, Usage(None, None)).cost_usd = cost
        else:
            warn(file, f"{record}: {len(costs)} recorded costs for {len(calls)} calls; costs not matched")
    if agent and conv.agent_version:
        agent = f"{agent} {conv.agent_version}"
    number_runs(conv.messages, conv.run_starts)
    return build_trace(
        trace_id=trace_id,
        source_format=source_format,
        file=file,
        messages=conv.messages,
        usage=conv.usage,
        model=model,
        agent=agent,
        recorded_policy=policy,
        outcome=outcome,
    )


# ---------------------------------------------------------------------------- evaluation output
_OUTPUT_HEAD = re.compile(rb'^\s*\{\s*"(instance_id|issue)"\s*:')


def _sniff_output(path: Path) -> bool:
    """A JSON Lines file whose first object opens with ``instance_id`` (evaluation output) or ``issue``
    (resolver output) - pydantic writes fields in declaration order - and names an ``instruction``,
    ``history`` or ``test_result`` within its first 64 KiB (a SWE-bench predictions file names none)."""
    try:
        with open(path, "rb") as f:
            head = f.read(1 << 16)
    except OSError:
        return False
    first = head.split(b"\n", 1)[0]
    markers = (b'"instruction"', b'"history"', b'"test_result"')
    return bool(_OUTPUT_HEAD.match(first)) and any(m in first for m in markers)


def load_output(path: Path) -> Iterator[Trace]:
    for lineno, raw in lines_of(path):
        record = f"line {lineno}"
        if raw is None:
            raise TraceError(path.name, f"longer than {MAX_DOCUMENT_BYTES:,} bytes; not read", record)
        if not raw.strip():
            continue
        d = load_json(raw, path.name, record)
        t = convert_output(d, path.name, record)
        if t is None:  # a run that failed before its first event: nothing to replay
            warn(
                path.name,
                f"{record}: no conversation in its history (error: {d.get('error')!r}); skipped",
            )
            continue
        yield t


def convert_output(d, file: str, record: str) -> Trace | None:
    if not isinstance(d, Mapping):
        raise TraceError(file, f"expected an object, got {type(d).__name__}", record=record)
    if "history" not in d:
        raise TraceError(file, "expected the run's events", record=record, field="history")
    meta = d.get("metadata") if isinstance(d.get("metadata"), Mapping) else {}
    llm = meta.get("llm_config") if isinstance(meta.get("llm_config"), Mapping) else {}
    metrics = d.get("metrics") if isinstance(d.get("metrics"), Mapping) else {}
    usages_by_id: dict[str, Usage] = {}
    for k, tu in enumerate(metrics.get("token_usages") or ()):
        u = token_usage(tu, file, record, f"metrics.token_usages[{k}]")
        if tu.get("response_id"):
            usages_by_id[tu["response_id"]] = u
    issue = d.get("issue") if isinstance(d.get("issue"), Mapping) else None
    if isinstance(d.get("instance_id"), str) and d["instance_id"]:
        trace_id = d["instance_id"]
    elif issue:
        trace_id = f"{issue.get('owner')}/{issue.get('repo')}#{issue.get('number')}"
    else:
        trace_id = f"{Path(file).stem}:{record}"
    max_chars = llm.get("max_message_chars") if isinstance(llm.get("max_message_chars"), int) else None
    test_result = d.get("test_result") if isinstance(d.get("test_result"), Mapping) else {}
    patch = test_result.get("git_patch", d.get("git_patch"))
    outcome = {
        "error": d.get("error"),
        "accumulated_cost_usd": cost_of(
            metrics.get("accumulated_cost"), file, record, "metrics.accumulated_cost"
        ),
        "patch_chars": len(patch) if isinstance(patch, str) else None,
    }
    if issue:
        outcome["success"] = d.get("success")
    agent_class = meta.get("agent_class")
    return convert_history(
        d["history"],
        file=file,
        record=record,
        trace_id=trace_id,
        source_format=FORMAT_OUTPUT,
        model=llm.get("model") if isinstance(llm.get("model"), str) else None,
        agent=f"OpenHands {agent_class}" if agent_class else "OpenHands",
        max_chars=max_chars,
        policy=recorded_policy(meta.get("condenser_config"), max_chars),
        outcome=outcome,
        usages_by_id=usages_by_id,
        costs=metrics.get("costs") if isinstance(metrics.get("costs"), list) else None,
        allow_empty=True,
    )


# ---------------------------------------------------------------------------------- event lists
_EVENTS_HEAD = re.compile(
    rb'^\s*\[\s*\{\s*"id"\s*:\s*\d+\s*,\s*"timestamp"\s*:\s*"[^"]*"\s*,\s*"source"\s*:\s*"(agent|user|environment)"'
)


def _sniff_events(path: Path) -> bool:
    """A JSON list whose first event opens as OpenHands serialises one: ``id``, ``timestamp``, ``source``."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    return bool(_EVENTS_HEAD.match(head))


def load_events(path: Path) -> Iterator[Trace]:
    data = read_json_file(path)
    model = None
    for e in data if isinstance(data, list) else ():
        resp = (e.get("tool_call_metadata") or {}).get("model_response") if isinstance(e, Mapping) else None
        if isinstance(resp, Mapping) and isinstance(resp.get("model"), str):
            model = resp["model"]
            break
    yield convert_history(
        data,
        file=path.name,
        record=path.stem,
        trace_id=path.stem,
        source_format=FORMAT_EVENTS,
        model=model,
        agent="OpenHands",
        max_chars=DEFAULT_MAX_MESSAGE_CHARS,
        policy=recorded_policy(None, DEFAULT_MAX_MESSAGE_CHARS, assumed=True),
        outcome={},
    )


register(Importer(FORMAT_OUTPUT, (".jsonl",), _sniff_output, load_output))
register(Importer(FORMAT_EVENTS, (".json",), _sniff_events, load_events))
