"""SWE-agent trajectories (``.traj``), 0.x and 1.x.

A ``.traj`` holds ``history`` (the messages the agent kept: role, content, and for model turns
``thought`` / ``action``), ``trajectory`` (one step per model call: response, action, observation),
``info`` (exit status, submission, ``model_stats``) and, in 1.x, ``replay_config`` (the run's config, an
object or a JSON string). The mapping:

- ``history`` in order. ``system`` -> system; the first user message (SWE-agent's instance template,
  "observation 0" of its ``last_n_observations``) and any user message before the first model turn ->
  user; ``assistant`` -> assistant, one call each; later observations (``role: tool``, or ``user`` in
  0.x and 1.x non-function-calling histories) -> tool_result answering the previous action.
- Ids: 1.x function calling records ``tool_calls[].id`` on actions and ``tool_call_ids`` on tool
  messages, used as they are; 0.x records none, so action K issues ``call-K`` and the next observation
  answers it. An observation with no id and no unanswered action is kept unpaired (with a warning).
- Demonstrations: messages with ``is_demo: true`` (a worked example SWE-agent shows the model) are
  skipped, so the trace is the agent's own run; the model *did* read them, so the recorded requests were
  larger than the trace's views by the demo's size (``outcome["demo_messages_skipped"]`` says how many).
- The history SWE-agent saves stops short of the run's end: 0.x never appends the submission's
  observation (the diff), and 1.x can miss the whole last step. Steps of ``trajectory`` past the history
  are appended (response -> assistant, observation -> tool_result), so there is one call per recorded
  step and the final answer's result is the submitted diff (``outcome["steps_from_trajectory"]``).
- Usage: SWE-agent records only per-run totals (``info.model_stats``: ``tokens_sent``,
  ``tokens_received``, ``api_calls``, ``instance_cost``), counted by the client's tokenizer, not
  billed. Calls therefore get no usage (sizes are estimates) and the totals go to
  ``outcome["model_stats"]`` as a check.
- ``recorded_policy``: from the config's ``history_processors`` (``replay_config``, else an
  ``args.yaml`` beside the file, as 0.x writes it). A ``last_n_observations`` (0.x ``LastNObservations``
  / ``Last5Observations`` ...) alone, besides processors that only tag or mark cache breakpoints, is
  ctxsim's ``observation_masking`` with its ``n`` and ``polling``; anything else is ``raw`` with the
  processors listed; none is ``raw``.
- Model: ``agent.model.name`` (1.x) or ``model_name`` (0.x). SWE-agent's scripted stand-ins (``replay``,
  ``instant_empty_submit``, ``human``...) are no model: the trace gets none and ``outcome`` marks it a
  demonstration, as it does a run whose ``model_stats`` are all zero (a hand-written demo such as the
  EnIGMA ``katy.traj``).
- Facts: ``sim.information.facts.swe_fact_table`` over the run, an action's command being its ``action``
  field (the command SWE-agent ran) wrapped as a bash block, else the message text. SWE-agent's own tools
  (``open``, ``edit``, ``str_replace_editor``, ``find_file`` ...) are not shell commands (their bodies
  are file text, which the shell rules would misread): they follow the tool rules of
  ``sim.information.facts`` (``swe_tool_op``), paths relative to the run's working directory (the steps'
  ``state.working_dir``).
  Observations that report errors give error facts either way.
- What each call's request held (``sim.information.recorded_request``): a step's ``messages`` (1.x: the
  history as sent at the next call) show which observations were masked; without them, a recorded
  ``last_n_observations`` masks by SWE-agent's rule. A need whose fact the request did not hold is
  dropped: replaying the run under its recorded policy finds nothing missing.
- An observation SWE-agent cut (its ``<response clipped>`` notice) is marked ``bounded``.

Not modelled: per-call sizes as recorded (1.x ``trajectory[].messages`` holds the processed request of
each step; only which observations it masked is used), per-step ``execution_time``, the editor state
line's tags, and subroutine agents.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping
from pathlib import Path

from sim.core.types import Trace
from sim.importers import Importer, register
from sim.importers.chat_messages import render_call
from sim.importers.common import Message, build_trace, read_json_file, text_of, warn
from sim.information.facts import SweToolOp, command_of, swe_fact_table, swe_tool_op
from sim.information.recorded_request import masked_from
from sim.trace.rules import lone_surrogate
from sim.util.errors import TraceError
from sim.util.jsonl import parse_json

FORMAT = "swe-agent"
_TEST_MODELS = frozenset({"replay", "instant_empty_submit", "human", "human_thought"})
# SWE-agent's own commands: not shell, and their arguments are often file text.
_SWE_TOOLS = frozenset(
    {
        "open",
        "goto",
        "scroll_up",
        "scroll_down",
        "create",
        "edit",
        "insert",
        "append",
        "search_dir",
        "search_file",
        "find_file",
        "submit",
        "exit_forfeit",
        "skip",
        "str_replace_editor",
        "filemap",
        "decompile",
        "disassemble",
        "debug_start",
        "debug_add_breakpoint",
        "debug_continue",
        "debug_step",
        "debug_exec",
        "debug_stop",
        "connect_start",
        "connect_sendline",
        "connect_exec",
        "connect_stop",
        "exit_format",
        "exit_cost",
        "exit_context",
        "exit_api",
        "exit_error",
    }
)
# Processors that leave message text alone: tags for other processors, cache breakpoints.
_NEUTRAL_PROCESSORS = frozenset({"cache_control", "tag_tool_call_observations", "DefaultHistoryProcessor"})
_LAST_N_V0 = re.compile(r"^Last(\d+)Observations$")
_CLIPPED = "<response clipped>"
_MAX_CONFIG_DEPTH = 32
_HEAD = re.compile(rb'^\s*\{.*?"(trajectory|history|environment|info|replay_config)"\s*:', re.S)


def _sniff(path: Path) -> bool:
    """A ``.traj`` object with SWE-agent's keys near the start (0.x writes ``environment`` first, 1.x
    ``trajectory`` or ``environment``); mini-swe-agent's ``.traj.json`` never reaches this importer."""
    try:
        with open(path, "rb") as f:
            head = f.read(8192)
    except OSError:
        return False
    return bool(_HEAD.match(head.removeprefix(b"\xef\xbb\xbf")))


# ---------------------------------------------------------------------------------------------- config
def _replay_config(data: Mapping, file: str) -> dict:
    rc = data.get("replay_config")
    if isinstance(rc, str):
        try:
            rc = parse_json(rc)
        except json.JSONDecodeError:
            warn(file, "replay_config is not valid JSON; ignored (no model, policy raw)")
            return {}
    return rc if isinstance(rc, dict) else {}


def _args_yaml(path: Path | None, file: str) -> dict:
    """0.x writes the run's config as ``args.yaml`` in the trajectory's folder. It is read with the
    bounded safe loader (a few hundred bytes of nested aliases stand for billions of nodes); one that
    cannot be read gives a warning and the run is imported without it: the trajectory itself is fine."""
    if path is None:
        return {}
    f = path.parent / "args.yaml"
    if not f.is_file():
        return {}
    from sim.util.errors import ConfigError
    from sim.util.safeyaml import MAX_YAML_BYTES, load_yaml

    try:
        if f.stat().st_size > MAX_YAML_BYTES:
            raise ConfigError(f"args.yaml: larger than {MAX_YAML_BYTES:,} bytes; not read")
        cfg = load_yaml(f.read_text(encoding="utf-8", errors="replace"), "args.yaml")
        return _plain(cfg) if isinstance(cfg, dict) else {}
    except (ConfigError, OSError) as exc:
        warn(file, f"the args.yaml beside it is not used ({exc}); imported without it (no model, policy raw)")
        return {}


def _plain(value, depth: int = 0):
    """YAML values as JSON ones (the recorded policy is stored as JSON): string keys, finite numbers;
    anything else (a date, bytes, NaN) as its text, and nothing nested deeper than a trace may be. A
    lone surrogate (YAML's ``"\\ud800"`` escape) cannot be written as UTF-8: the file is not used."""
    if isinstance(value, dict):
        if depth >= _MAX_CONFIG_DEPTH:
            return _text(str(value)[:200])
        return {_text(str(k)): _plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        if depth >= _MAX_CONFIG_DEPTH:
            return _text(str(value)[:200])
        return [_plain(v, depth + 1) for v in value]
    if value is None or isinstance(value, bool | int) or (isinstance(value, float) and math.isfinite(value)):
        return value
    return _text(value if isinstance(value, str) else str(value))


def _text(s: str) -> str:
    if lone_surrogate(s):
        from sim.util.errors import ConfigError

        raise ConfigError("args.yaml: holds a lone UTF-16 surrogate (not valid Unicode text)")
    return s


def _dig(d, *keys):
    for k in keys:
        if not isinstance(d, Mapping):
            return None
        d = d.get(k)
    return d


def _processors(cfg: dict):
    """The configured history processors, or None when the config does not say."""
    agent = cfg.get("agent")
    for p in (_dig(agent, "history_processors"), _dig(agent, "config", "history_processors")):
        if isinstance(p, list):
            return p
    legacy = _dig(agent, "config", "history_processor")
    if isinstance(legacy, str):
        args = _dig(agent, "config", "history_processor_args")
        return [{"type": legacy, **(args if isinstance(args, Mapping) else {})}]
    return None


def recorded_policy(processors) -> dict:
    if not processors:
        return {"name": "raw"}
    active = []
    for p in processors:
        kind = p.get("type", p.get("name")) if isinstance(p, Mapping) else p
        if not isinstance(kind, str) or kind not in _NEUTRAL_PROCESSORS:
            active.append((kind, p if isinstance(p, Mapping) else {}))
    if len(active) == 1:
        kind, p = active[0]
        m = _LAST_N_V0.match(kind) if isinstance(kind, str) else None
        n = int(m.group(1)) if m else p.get("n")
        if kind in ("last_n_observations", "LastNObservations") or m:
            polling = p.get("polling", 1)
            if type(n) is int and n >= 1 and type(polling) is int and polling >= 1:
                return {"name": "observation_masking", "n": n, "polling": polling}
    return {"name": "raw", "history_processors": processors}


def _model(cfg: dict) -> str | None:
    m = _dig(cfg, "agent", "model")
    for key in ("name", "model_name"):
        v = _dig(m, key)
        if isinstance(v, str) and v:
            return v
    return None


# --------------------------------------------------------------------------------------------- history
def _facts_text(action, content: str) -> str:
    """The text ``swe_facts`` reads for a model turn: its shell command as a bash block."""
    if isinstance(action, str) and action.strip():
        words = action.strip().split()
        if words[0] in _SWE_TOOLS:
            return ""
        return f"```bash\n{action.strip()}\n```"
    return content if command_of(content) else ""


def _tool_op(action) -> SweToolOp | None:
    """The SWE-agent tool rule of an action (``sim.information.facts.swe_tool_op``); None for a shell
    command."""
    if not isinstance(action, str) or not action.strip():
        return None
    return swe_tool_op(action) if action.split()[0] in _SWE_TOOLS else None


def _working_dir(trajectory: list) -> str | None:
    """The run's working directory, from the first step whose ``state`` (an object, or JSON text in
    0.x) names one."""
    for step in trajectory:
        state = step.get("state") if isinstance(step, Mapping) else None
        if isinstance(state, str):
            try:
                state = parse_json(state)
            except (json.JSONDecodeError, ValueError):
                continue
        wd = state.get("working_dir") if isinstance(state, Mapping) else None
        if isinstance(wd, str) and wd.startswith("/") and len(wd) > 1:
            return wd
    return None


def _hidden_from(
    messages: list[Message], origin: list[int | None], trajectory: list, policy: dict
) -> list[int | None]:
    """Per message, the first call message whose recorded request lacked it whole (module doc)."""
    calls = [i for i, m in enumerate(messages) if m.kind == "assistant"]
    at_history = {h: j for j, h in enumerate(origin) if h is not None}
    sent = [s.get("messages") if isinstance(s, Mapping) else None for s in trajectory]
    if any(isinstance(ms, list) for ms in sent):
        hidden: list[int | None] = [None] * len(messages)
        for k, ms in enumerate(sent):
            if not isinstance(ms, list) or k + 1 >= len(calls):
                continue
            for h, rec in enumerate(ms):  # step k's messages: the request of call k + 1, in history order
                j = at_history.get(h)
                if j is None or hidden[j] is not None or not isinstance(rec, Mapping):
                    continue
                if messages[j].kind in ("tool_result", "user") and (text_of(rec.get("content")) or "") != (
                    messages[j].content or ""
                ):
                    hidden[j] = calls[k + 1]
        return hidden
    if policy.get("name") == "observation_masking":
        return masked_from([m.kind for m in messages], policy["n"], policy.get("polling", 1))
    return [None] * len(messages)


def _assistant_text(m: Mapping) -> tuple[str, tuple[str, ...]]:
    """Text and tool-call ids of an action; 1.x function calls are rendered after the thought."""
    text = text_of(m.get("content")) or ""
    calls = m.get("tool_calls")
    ids: list[str] = []
    parts = [text] if text else []
    if isinstance(calls, list):
        for tc in calls:
            if not isinstance(tc, Mapping):
                continue
            if isinstance(tc.get("id"), str) and tc["id"]:
                ids.append(tc["id"])
            fn = tc.get("function") if isinstance(tc.get("function"), Mapping) else {}
            parts.append(render_call(fn.get("name"), fn.get("arguments")))
    return "\n".join(parts), tuple(ids)


class _Transcript:
    """The messages of a trajectory as they are read, each with the text its facts are read from, its
    tool operation and its history index (None: from the trajectory); ``pending``: the latest action's
    call id until an observation answers it."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.facts_text: list[str] = []
        self.tools: list[SweToolOp | None] = []
        self.origin: list[int | None] = []  # the history index of each message (None: from trajectory)
        self.pending: str | None = None  # the latest action's call id, until an observation answers it
        self.n_actions = 0


def _read_history(t: _Transcript, history: list, file: str, trace_id: str) -> int:
    """The history's messages into ``t`` (demonstrations skipped: their count is returned)."""
    messages, facts_text, tools, origin = t.messages, t.facts_text, t.tools, t.origin
    demos = unpaired = 0
    for i, m in enumerate(history):
        rec = f"history[{i}]"
        if not isinstance(m, Mapping):
            raise TraceError(file, f"expected a message object, got {type(m).__name__}", record=rec)
        if m.get("is_demo") or m.get("message_type") == "demonstration":
            demos += 1
            continue
        role = m.get("role")
        origin.append(i)
        tools.append(None)
        if role == "system":
            text = text_of(m.get("content")) or ""
            messages.append(Message("system", text))
            facts_text.append(text)
        elif role == "assistant":
            text, ids = _assistant_text(m)
            ids = ids or (f"call-{t.n_actions}",)
            messages.append(Message("assistant", text, ids))
            facts_text.append(_facts_text(m.get("action"), text))
            tools[-1] = _tool_op(m.get("action"))
            t.pending = ids[0]
            t.n_actions += 1
        elif role in ("user", "tool"):
            text = text_of(m.get("content")) or ""
            if t.n_actions == 0 and role == "user":
                messages.append(Message("user", text))
            else:
                ids = m.get("tool_call_ids")
                tcid = ids[0] if isinstance(ids, list) and ids and isinstance(ids[0], str) else t.pending
                if tcid is None:
                    unpaired += 1
                if tcid == t.pending:
                    t.pending = None
                messages.append(Message("tool_result", text, tool_call_id=tcid, bounded=_CLIPPED in text))
            facts_text.append(text)
        else:
            raise TraceError(file, f"unknown role {role!r}", record=rec, field="role")
    if unpaired:
        warn(file, f"{trace_id}: {unpaired} observations follow no unanswered action; kept unpaired")
    return demos


def _add_trajectory_steps(t: _Transcript, trajectory: list, file: str) -> int:
    """The steps SWE-agent did not keep in history (the last observation(s), sometimes the last step),
    from the trajectory into ``t``; returns how many."""
    messages = t.messages
    added = 0
    if t.n_actions <= len(trajectory):
        steps = list(enumerate(trajectory))
        if messages and messages[-1].kind == "assistant" and t.n_actions >= 1:
            steps = steps[t.n_actions - 1 :]
            first_has_action = False
        else:
            steps = steps[t.n_actions :]
            first_has_action = True
        for j, (k, step) in enumerate(steps):
            rec = f"trajectory[{k}]"
            if not isinstance(step, Mapping):
                raise TraceError(file, f"expected a step object, got {type(step).__name__}", record=rec)
            if j > 0 or first_has_action:
                text = text_of(step.get("response")) or "\n".join(
                    v for v in (step.get("thought"), step.get("action")) if isinstance(v, str) and v
                )
                cid = f"call-{t.n_actions}"
                messages.append(Message("assistant", text, (cid,)))
                t.facts_text.append(_facts_text(step.get("action"), text))
                t.tools.append(_tool_op(step.get("action")))
                t.origin.append(None)
                t.pending = cid
                t.n_actions += 1
            obs = step.get("observation")
            obs = "" if obs is None else text_of(obs) or ""
            messages.append(Message("tool_result", obs, tool_call_id=t.pending, bounded=_CLIPPED in obs))
            t.facts_text.append(obs)
            t.tools.append(None)
            t.origin.append(None)
            t.pending = None
            added += 1
    return added


def _outcome(data: dict, model, cfg, trace_id: str, demos: int, added: int) -> tuple[dict, bool]:
    """The run's outcome, and whether its model is a scripted test model (a demonstration)."""
    info = data.get("info") if isinstance(data.get("info"), Mapping) else {}
    stats = info.get("model_stats") if isinstance(info.get("model_stats"), Mapping) else {}
    outcome: dict = {"exit_status": info.get("exit_status"), "model_stats": dict(stats)}
    scripted = isinstance(model, str) and model in _TEST_MODELS
    if scripted or (stats and not any(stats.get(k) for k in ("tokens_sent", "tokens_received", "api_calls"))):
        outcome["demonstration"] = True
        if scripted:
            outcome["scripted_model"] = model
    if demos:
        outcome["demo_messages_skipped"] = demos
    if added:
        outcome["steps_from_trajectory"] = added
    ps_id = _dig(cfg, "problem_statement", "id")
    if isinstance(ps_id, str) and ps_id != trace_id:
        outcome["problem_statement_id"] = ps_id
    return outcome, scripted


def convert(data, file: str, path: Path | None = None) -> Trace:
    if not isinstance(data, dict):
        raise TraceError(file, f"expected a trajectory object, got {type(data).__name__}")
    history = data.get("history")
    trajectory = data.get("trajectory")
    if history is None and trajectory is None:
        raise TraceError(file, "neither 'history' nor 'trajectory' found; not a SWE-agent trajectory")
    if history is not None and not isinstance(history, list):
        raise TraceError(file, "expected a list", field="history")
    if trajectory is not None and not isinstance(trajectory, list):
        raise TraceError(file, "expected a list", field="trajectory")
    history, trajectory = history or [], trajectory or []
    trace_id = Path(file).name.removesuffix(".traj")
    v1 = "replay_config" in data or any(isinstance(m, Mapping) and "message_type" in m for m in history)

    t = _Transcript()
    demos = _read_history(t, history, file, trace_id)
    added = _add_trajectory_steps(t, trajectory, file)
    messages = t.messages
    facts = swe_fact_table(
        [(m.kind, text) for m, text in zip(messages, t.facts_text, strict=True)],
        t.tools,
        _working_dir(trajectory),
    )
    cfg = _replay_config(data, file) or _args_yaml(path, file)
    policy = recorded_policy(_processors(cfg))
    hidden = _hidden_from(messages, t.origin, trajectory, policy)
    for j, m in enumerate(messages):
        m.provides, m.needs = tuple(facts.provides[j]), tuple(facts.needs[j])
        m.fact_spans, m.fact_kinds = tuple(facts.spans[j]), tuple(facts.kinds[j])
        m.supersedes = tuple(facts.supersedes[j])
        m.hidden_from = hidden[j]

    model = _model(cfg)
    outcome, scripted = _outcome(data, model, cfg, trace_id, demos, added)
    return build_trace(
        trace_id=trace_id,
        source_format=FORMAT,
        file=file,
        messages=messages,
        usage={},
        model=None if scripted else model,
        agent="SWE-agent 1.x" if v1 else "SWE-agent 0.x",
        recorded_policy=policy,
        outcome=outcome,
    )


def load(path: Path) -> Iterator[Trace]:
    data = read_json_file(path)
    yield convert(data, path.name, path)


register(Importer(FORMAT, (".traj",), _sniff, load))
