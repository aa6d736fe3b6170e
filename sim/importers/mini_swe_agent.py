"""mini-swe-agent trajectories (``trajectory_format: mini-swe-agent-1``).

The history is append-only: every call sees all earlier messages. Usage comes per call from the
provider response (``extra.response.usage``); OpenRouter/Gemini count cached tokens *inside*
``prompt_tokens``, which is already ctxsim's meaning of ``input_tokens``. The run's own tool-result
bound (command output of 10,000+ characters -> first and last 5,000 with a notice) is recorded as its
policy, and the outputs it cut are marked ``bounded`` so no replay cuts them twice.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from sim.core.types import Call, Event, Trace
from sim.cost.tokens import calibrated_bytes_per_token, derive_sizes, estimate_text_tokens, text_coefficients
from sim.importers import Importer, read_json, register
from sim.importers.common import checked, unix_time, usage_cost, usage_count, usage_details
from sim.information.facts import swe_fact_table
from sim.util.errors import TraceError

FORMAT = "mini-swe-agent-1"
RECORDED_POLICY = {
    "name": "tool_result_head_tail",
    "max_chars": 10000,
    "head_chars": 5000,
    "tail_chars": 5000,
    "applies_to": "command output",
    "history": "full",
}
# Markers of mini-swe-agent's long-output template: such a result was cut by the recorded run.
_CUT_MARKERS = ("<output_head>", "<elided_chars>", "<output_tail>")


def _sniff(path: Path) -> bool:
    with open(path, "rb") as f:
        head = f.read(4096)
    if b'"trajectory_format"' in head:
        return b"mini-swe-agent-1" in head
    # the key is written last by mini-swe-agent; look at the file's end too
    with open(path, "rb") as f:
        f.seek(0, 2)
        size = f.tell()
        f.seek(max(0, size - 4096))
        tail = f.read()
    return (
        b'"trajectory_format": "mini-swe-agent-1"' in tail
        or b'"trajectory_format":"mini-swe-agent-1"' in tail
    )


def _int_field(value, file: str, record: str, field: str) -> int | None:
    return usage_count(value, file, record, field)


def load(path: Path) -> Iterator[Trace]:
    data = read_json(path)
    yield convert(data, path.name)


def _message_kinds(messages: list, file: str) -> list[tuple[str, str, dict]]:
    """(kind, content, message) of each message: a user message after the first assistant one is a tool
    result (mini-swe-agent returns each command's output as the next user message)."""
    events_raw: list[tuple[str, str, dict]] = []  # kind, content, message
    seen_user = False
    called = False  # an assistant message came before (kept, not searched for at each message)
    for i, m in enumerate(messages):
        rec = f"messages[{i}]"
        if not isinstance(m, dict):
            raise TraceError(file, "expected an object", record=rec)
        role, content = m.get("role"), m.get("content")
        if role not in ("system", "user", "assistant"):
            raise TraceError(
                file, f"expected role system, user or assistant, got {role!r}", record=rec, field="role"
            )
        if not isinstance(content, str):
            raise TraceError(
                file, f"expected a string, got {type(content).__name__}", record=rec, field="content"
            )
        if role == "user":
            kind = "tool_result" if seen_user and called else "user"
            seen_user = True
        else:
            kind = role
            called = called or role == "assistant"
        events_raw.append((kind, content, m))
    return events_raw


def _assistant_call(m: dict, i: int, file: str, rec: str) -> dict:
    """The call an assistant message (event ``i``) records: its time and its usage as the provider
    reported it in ``extra.response``."""
    response = (m.get("extra") or {}).get("response") or {}
    if not isinstance(response, dict):
        raise TraceError(file, "expected an object", record=rec, field="extra.response")
    usage = response.get("usage")
    timestamp = unix_time(response.get("created"), file, rec, "extra.response.created")
    call = {"event_index": i, "view_end": i, "timestamp": timestamp}
    if isinstance(usage, dict):
        f = "extra.response.usage"
        details = usage_details(usage, "prompt_tokens_details", file, rec, f)
        cdetails = usage_details(usage, "completion_tokens_details", file, rec, f)
        call["input_tokens"] = _int_field(usage.get("prompt_tokens"), file, rec, f + ".prompt_tokens")
        call["output_tokens"] = _int_field(
            usage.get("completion_tokens"), file, rec, f + ".completion_tokens"
        )
        call["cache_read_tokens"] = _int_field(
            details.get("cached_tokens"), file, rec, f + ".prompt_tokens_details.cached_tokens"
        )
        call["reasoning_tokens"] = _int_field(
            cdetails.get("reasoning_tokens"),
            file,
            rec,
            f + ".completion_tokens_details.reasoning_tokens",
        )
        call["recorded_cost_usd"] = usage_cost(usage.get("cost"), file, rec, f + ".cost")
        call["usage_provenance"] = "provider" if call["input_tokens"] is not None else "none"
    elif usage is not None:
        raise TraceError(file, "expected an object", record=rec, field="extra.response.usage")
    else:
        call.update(input_tokens=None, output_tokens=None, usage_provenance="none")
    return call


def _events_and_calls(events_raw: list[tuple[str, str, dict]], file: str) -> tuple[list[dict], list[dict]]:
    """The events (as dicts) and calls of the messages: each assistant message is a call issuing one tool
    call, which the next tool result answers."""
    events: list[dict] = []
    calls: list[dict] = []
    last_call_id: str | None = None
    for i, (kind, content, m) in enumerate(events_raw):
        rec = f"messages[{i}]"
        ev = {
            "kind": kind,
            "content": content,
            "tool_call_ids": (),
            "tool_call_id": None,
            "bounded": False,
            "timestamp": None,
        }
        if kind == "assistant":
            k = len(calls)
            last_call_id = f"call-{k}"
            ev["tool_call_ids"] = (last_call_id,)
            call = _assistant_call(m, i, file, rec)
            ev["timestamp"] = call["timestamp"]
            calls.append(call)
        elif kind == "tool_result":
            ev["tool_call_id"] = last_call_id
            ev["bounded"] = all(marker in content for marker in _CUT_MARKERS)
        events.append(ev)
    return events, calls


def _model_of(info: dict) -> str | None:
    """The model the run's configuration names (``info.config.model.model_name``), routing prefix dropped."""
    config = info.get("config") if isinstance(info.get("config"), dict) else {}
    model_cfg = config.get("model") if isinstance(config.get("model"), dict) else {}
    model = model_cfg.get("model_name") if isinstance(model_cfg.get("model_name"), str) else None
    if model:  # one run names "@google/..." (a routing prefix); the model is the same
        model = model.lstrip("@")
    return model


def convert(data, file: str) -> Trace:
    if not isinstance(data, dict) or data.get("trajectory_format") != FORMAT:
        raise TraceError(
            file, f"expected an object with trajectory_format '{FORMAT}'", field="trajectory_format"
        )
    messages = data.get("messages")
    if not isinstance(messages, list) or not messages:
        raise TraceError(file, "expected a non-empty list of messages", field="messages")
    events, calls = _events_and_calls(_message_kinds(messages, file), file)

    info = data.get("info") if isinstance(data.get("info"), dict) else {}
    model = _model_of(info)
    nbytes = [len(e["content"].encode()) for e in events]
    sizes, prov, residuals, bpt = derive_sizes(
        nbytes,
        [c["view_end"] for c in calls],
        [c.get("input_tokens") for c in calls],
        calibrated_bytes_per_token(model),
    )
    facts = swe_fact_table([(e["kind"], e["content"]) for e in events])
    coefficients = text_coefficients(model)
    if coefficients is not None:  # no provider number for these: the character-class estimate
        for i, p in enumerate(prov):
            if p == "estimate":
                sizes[i] = estimate_text_tokens(events[i]["content"], coefficients)
    stats = info.get("model_stats") if isinstance(info.get("model_stats"), dict) else {}
    trace_id = data.get("instance_id")
    if not isinstance(trace_id, str) or not trace_id:
        trace_id = Path(file).name.removesuffix(".json").removesuffix(".traj")
    trace = Trace(
        trace_id=trace_id,
        source_format=FORMAT,
        source_file=file,
        agent=f"mini-swe-agent {info.get('mini_version', '')}".strip(),
        model=model,
        context_window=None,
        bytes_per_token=bpt,
        recorded_policy=dict(RECORDED_POLICY),
        outcome={
            "exit_status": info.get("exit_status"),
            "instance_cost_usd": stats.get("instance_cost"),
            "api_calls": stats.get("api_calls"),
        },
        events=tuple(
            Event(
                index=i,
                kind=e["kind"],
                content=e["content"],
                bytes=nbytes[i],
                chars=len(e["content"]),
                lines=len(e["content"].splitlines()),
                tokens=sizes[i],
                tokens_provenance=prov[i],
                tool_call_ids=e["tool_call_ids"],
                tool_call_id=e["tool_call_id"],
                bounded=e["bounded"],
                timestamp=e["timestamp"],
                provides=tuple(facts.provides[i]),
                needs=tuple(facts.needs[i]),
                fact_spans=tuple(facts.spans[i]),
                fact_kinds=tuple(facts.kinds[i]),
                supersedes=tuple(facts.supersedes[i]),
            )
            for i, e in enumerate(events)
        ),
        calls=tuple(
            Call(
                index=j,
                event_index=c["event_index"],
                view_end=c["view_end"],
                input_tokens=c.get("input_tokens"),
                output_tokens=c.get("output_tokens"),
                cache_read_tokens=c.get("cache_read_tokens"),
                cache_write_tokens=None,
                reasoning_tokens=c.get("reasoning_tokens"),
                residual_tokens=residuals[j],
                usage_provenance=c.get("usage_provenance", "provider"),
                timestamp=c.get("timestamp"),
                recorded_cost_usd=c.get("recorded_cost_usd"),
            )
            for j, c in enumerate(calls)
        ),
    )
    return checked(trace, file)


register(Importer(FORMAT, (".json",), _sniff, load))
