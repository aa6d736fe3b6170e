"""Inspect eval logs: ``.json`` (one JSON document) and ``.eval`` (a zip of JSON files, read in memory).

One trace per sample and epoch, ``trace_id = "{task}/{sample id}/{epoch}"``; the model is the eval
spec's (``eval.model``, e.g. ``openai/gpt-4o-mini``).

The conversation comes from the sample's *model events*, in order, because each keeps the exact input
messages of its request and the usage of its response. The first event's input, then whatever each
later input adds beyond the running conversation, then each event's output message (one assistant
message = one call, with that event's usage). Messages the sample holds but no model event saw
(e.g. a last tool result) are appended after; a sample without model events falls back to its
``messages`` (calls without usage). Messages are matched by Inspect's message ``id`` (by their JSON as
written, ``attachment://`` references unresolved, where there is none: a long attachment is not
re-encoded for every request that repeats its message). Model events under a ``scorer`` span (a
grader model) are not the agent's calls.

Mapping. ``system``/``user`` -> the same kinds; ``assistant`` -> assistant (its text, then one JSON
line ``{"function", "arguments"}`` per tool call; ``tool_call_ids`` from the calls' ids); ``tool`` ->
tool_result (``tool_call_id``; a tool error's message appended). The tool definitions of the first
model event become one ``tools`` event at the start: every request carries them, so they are input.
``attachment://<hash>`` references (Inspect stores long strings once per sample) are resolved when
their message joins the conversation, each counted once against a cap on what they add to a sample
(128 MiB, ``CTXSIM_MAX_INPUT_BYTES``); ``.eval`` logs of Inspect >= 0.3.13x also pool messages
(``message_pool`` + ``input_refs``, ranges ``[start, end)``), read through an index of the pool
(``_Pool``) as the messages the ranges spell.

Not modelled: reasoning parts (providers drop or re-encode earlier turns' reasoning; what they count
lands in the per-call residual); images, audio and video are kept as a ``[image]``-style placeholder
(their token cost is not a function of bytes). If a model event's input is *not* the running
conversation extended (Inspect's truncation, compaction or message edits, or a sub-agent's own
conversation), its new messages are still appended, nothing is removed, and the call keeps its
recorded input: the per-call residual absorbs the difference (a warning counts such calls).

Usage. Inspect's ``input_tokens`` does not mean the same thing for every provider and version: its
OpenAI provider (as in the shared browser log, Inspect 0.3.95) copies ``prompt_tokens``, which
*includes* cache reads (the raw response kept in the event's ``call.response.usage`` shows
``prompt_tokens`` 1568 = ``input_tokens`` and ``cached_tokens`` 1024 = ``input_tokens_cache_read``),
while its Anthropic provider (and later versions for OpenAI) report cache reads and writes *beside*
``input_tokens``. ``total_tokens`` tells them apart: inside means ``total = input + output``
(1585 = 1568 + 17 in the browser log), beside means ``total = input + cache read + cache write +
output`` (either possibly + reasoning, as Inspect's Google provider counts thoughts only in the
total). A cache read larger than ``input_tokens`` can only be beside it. Where neither decides (no
total, or Inspect's default 0) and there were cache tokens, beside is assumed (a warning says so), as
Inspect's current documentation defines the fields. ``Usage.input_tokens`` then counts every input
token, cached or not; each call's ``Usage.extra["cache_accounting"]`` says which reading was used.

Recorded policy: ``raw`` (Inspect's ``generate`` keeps the whole conversation) unless the plan's
solver parameters name a ``truncation`` or ``compaction`` setting other than disabled.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from sim.core.types import Trace
from sim.importers import Importer, register
from sim.importers.common import (
    Message,
    Usage,
    build_trace,
    iso_timestamp,
    load_json,
    read_json_file,
    safe_zip,
    usage_cost,
    usage_count,
    warn,
)
from sim.util.errors import TraceError
from sim.util.fenwick import Fenwick
from sim.util.limits import INPUT_BYTES_KNOB, MAX_ATTACHMENT_BYTES, max_input_bytes

FORMAT_JSON = "inspect-json"
FORMAT_EVAL = "inspect-eval"
_ATTACHMENT = "attachment://"
_MEDIA = ("image", "audio", "video", "document")
_NO_POLICY = (None, False, "disabled", "none", "off")
_NO_SAMPLES = "the log holds no samples (written with log_samples=False?)"


# ------------------------------------------------------------------------------------------------ sniffs
def _sniff_json(path: Path) -> bool:
    """An Inspect JSON log begins ``{"version": N, "status": ..., "eval": {"eval_id"/"task"...``."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    return (
        re.search(rb'^\s*\{\s*"version"\s*:\s*\d', head) is not None
        and re.search(rb'"eval"\s*:\s*\{', head) is not None
        and any(k in head for k in (b'"eval_id"', b'"run_id"', b'"task"'))
    )


def _sniff_eval(path: Path) -> bool:
    """A ``.eval`` file is Inspect's zip: the extension says whose, the magic says it is (meant as) a zip.
    A damaged zip is still claimed so that loading names the damage."""
    try:
        with open(path, "rb") as f:
            return f.read(2) == b"PK"
    except OSError:
        return False


# ----------------------------------------------------------------------------------------------- loading
def load_json_log(path: Path) -> Iterator[Trace]:
    data = read_json_file(path)
    if not isinstance(data, dict) or not isinstance(data.get("eval"), dict):
        raise TraceError(path.name, "expected an Inspect eval log (an object with 'eval')", field="eval")
    samples = data.get("samples")
    if samples is None:
        samples = []
    if not isinstance(samples, list):
        raise TraceError(path.name, "expected a list", field="samples")
    if not samples:
        raise TraceError(path.name, _NO_SAMPLES, field="samples")
    yield from _convert_log(data, samples, path.name, FORMAT_JSON)


def load_eval_log(path: Path) -> Iterator[Trace]:
    """Read the archive's members into memory (never onto disk), one sample at a time, so memory holds
    one member and its traces; ``safe_zip`` refuses a damaged archive, odd or repeated member names and
    members that decompress past their bounds."""
    file = path.name
    with safe_zip(path) as zf:
        names = zf.names

        def member(name: str):
            return load_json(zf.read(name), file, record=name)

        header_name = next((n for n in ("header.json", "_journal/start.json") if n in names), None)
        if header_name is None:
            raise TraceError(
                file, "archive holds neither header.json nor _journal/start.json", field="members"
            )
        header = member(header_name)
        if not isinstance(header, dict) or not isinstance(header.get("eval"), dict):
            raise TraceError(file, "expected an object with 'eval'", record=header_name, field="eval")
        sample_names = [n for n in names if n.startswith("samples/") and n.endswith(".json")]
        if not sample_names:
            raise TraceError(file, _NO_SAMPLES, field="samples")

        def samples() -> Iterator[dict]:
            for n in sample_names:
                s = member(n)
                if not isinstance(s, dict):
                    raise TraceError(file, "expected a sample object", record=n)
                yield s

        yield from _convert_log(header, samples(), file, FORMAT_EVAL)


# -------------------------------------------------------------------------------------------- conversion
def _convert_log(header: dict, samples: Iterable, file: str, fmt: str) -> Iterator[Trace]:
    spec = header["eval"]
    task = spec.get("task") if isinstance(spec.get("task"), str) else "task"
    model = spec.get("model") if isinstance(spec.get("model"), str) else None
    version = (
        (spec.get("packages") or {}).get("inspect_ai") if isinstance(spec.get("packages"), dict) else None
    )
    plan = header.get("plan") if isinstance(header.get("plan"), dict) else {}
    steps = [s for s in plan.get("steps") or [] if isinstance(s, dict)]
    solvers = [s.get("solver") for s in steps if isinstance(s.get("solver"), str)]
    agent = f"inspect_ai {version}".strip() if version else "inspect_ai"
    if solvers:
        agent += f" ({', '.join(solvers)})"
    policy = _recorded_policy(steps, spec)
    for i, sample in enumerate(samples):
        if not isinstance(sample, dict):
            raise TraceError(file, "expected a sample object", record=f"samples[{i}]")
        trace = _convert_sample(sample, task, model, agent, policy, header, file, fmt)
        if trace is not None:
            yield trace


def _recorded_policy(steps: list[dict], spec: dict) -> dict:
    """``raw`` unless a solver parameter sets truncation or compaction (the log then says otherwise)."""
    params = [s.get("params") for s in steps] + [spec.get("solver_args")]
    for p in params:
        if not isinstance(p, dict):
            continue
        for key in ("truncation", "compaction"):
            value = p.get(key)
            if value not in _NO_POLICY and isinstance(value, str | int | float | bool | dict | list):
                return {"name": f"inspect_{key}", key: value}
    return {"name": "raw"}


class _Attachments:
    """A sample's attachments: ``resolve`` puts each ``attachment://`` reference's text in its place
    (through lists and objects); a reference without an attachment is kept as is and noted in
    ``missing``. What references expand to is counted (``expanded``, UTF-8 bytes): messages are resolved
    once, when they join the conversation, so each reference counts once however often later requests
    repeat its message, and ``check`` refuses a sample past the cap (400 references to one 8 MiB
    attachment would otherwise be a 3 GB trace from a 13 KB file)."""

    def __init__(self, att: dict, file: str, trace_id: str) -> None:
        self.att = att
        self.missing: set[str] = set()
        self.expanded = 0
        self.file, self.trace_id = file, trace_id
        self.sizes: dict[str, int] = {}
        self.cap = max_input_bytes(MAX_ATTACHMENT_BYTES)

    def resolve(self, value):
        if isinstance(value, str):
            if value.startswith(_ATTACHMENT):
                key = value[len(_ATTACHMENT) :]
                text = self.att.get(key)
                if isinstance(text, str):
                    if key not in self.sizes:
                        self.sizes[key] = len(text.encode("utf-8", "surrogatepass"))
                    self.expanded += self.sizes[key]
                    return text
                self.missing.add(key)
            return value
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        if isinstance(value, dict):
            return {k: self.resolve(v) for k, v in value.items()}
        return value

    def check(self, rec: str) -> None:
        cap = self.cap
        if self.expanded > cap:
            raise TraceError(
                self.file,
                f"attachment references expand the sample to more than {cap:,} bytes (each reference "
                f"counted once); raise the cap with {INPUT_BYTES_KNOB}=BYTES",
                record=rec,
                field="attachments",
            )


class _Conversation:
    """The running conversation of a sample rebuilt from its model events: each message once (by
    ``_key``), the calls' usage by the index of their output message, and what did not fit (counted
    for the outcome and the warnings)."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.messages: list[Message] = []
        self.usage: dict[int, Usage] = {}
        self.seen: set[str] = set()
        self.not_prefix = self.skipped = 0
        self.conv_keys: list[str] = []
        self.tools_first = None
        self.tools_changed = 0
        self.accounting: set[str] = set()
        self.pos: dict[str, int] = {}  # key -> its position in the conversation (keys are distinct)
        self.pool: _Pool | None = None

    def append(self, m: dict, rec: str, att: _Attachments, key: str | None = None) -> bool:
        """Append message ``m`` (as written: its references not yet resolved) unless one with its key is
        in the conversation; resolved here, once. True when it was appended."""
        k = _key(m) if key is None else key
        if k in self.seen:
            return False
        self.seen.add(k)
        self.pos[k] = len(self.conv_keys)
        self.conv_keys.append(k)
        self.messages.append(_message(att.resolve(m), self.file, rec))
        att.check(rec)
        if self.pool is not None:
            self.pool.seen(k, self.pos[k])
        return True


def _take_model_event(c: _Conversation, ev: dict, rec: str, att: _Attachments) -> None:
    """One model event: its input's new messages, then its output message (a call, with its usage).
    Messages are compared and keyed as written (``attachment://`` references unresolved) and resolved
    when they join the conversation; an input given as ``input_refs`` goes through the pool's index."""
    file, messages = c.file, c.messages
    out_msg = _output_message(ev)
    if out_msg is None:  # an errored or still-pending request produced no message: not a call
        c.skipped += 1
        return
    raw_input = ev.get("input")
    refs = ev.get("input_refs")
    ranges = None
    if not raw_input and isinstance(refs, list) and refs:
        if c.pool is None:
            c.pool = _Pool([])
        ranges = c.pool.ranges(refs, file, rec)
    elif not isinstance(raw_input, list):
        raise TraceError(file, "expected a list of messages", record=rec, field="input")
    else:
        for j, m in enumerate(raw_input):
            if not isinstance(m, dict):
                raise TraceError(file, "expected a message object", record=rec, field=f"input[{j}]")
    tools = ev.get("tools") if isinstance(ev.get("tools"), list) else None
    if c.tools_first is None and not messages:
        c.tools_first = tools or []
        if c.tools_first:
            resolved = att.resolve(c.tools_first)
            messages.append(Message("tools", json.dumps(resolved, sort_keys=True, ensure_ascii=False)))
            att.check(rec)
    elif tools is not None and tools != c.tools_first:
        c.tools_changed += 1
    if ranges is not None:
        if not c.pool.extends(ranges, len(c.conv_keys)):
            c.not_prefix += 1
        c.pool.append_new(ranges, c, att, rec)
    else:
        keys = [_key(m) for m in raw_input]
        if keys[: len(c.conv_keys)] != c.conv_keys:
            c.not_prefix += 1
        for j, (m, k) in enumerate(zip(raw_input, keys, strict=True)):
            c.append(m, f"{rec} input[{j}]", att, k)
    k = _key(out_msg)
    if k in c.seen:  # the same output recorded twice (a retried event): keep the first call
        c.skipped += 1
        return
    c.append(out_msg, f"{rec} output", att, k)
    ts = iso_timestamp(ev.get("timestamp"), file, rec, "timestamp")
    messages[-1].timestamp = ts
    u = (ev.get("output") or {}).get("usage")
    if isinstance(u, Mapping):
        c.usage[len(messages) - 1] = _usage(u, ts, c.accounting, file, rec)


class _Pool:
    """A sample's ``message_pool`` indexed for ``input_refs`` (ranges ``[start, end)`` of it), so that a
    model event costs time in its ranges and in the messages it adds, not in the messages its ranges
    span (``n`` events each taking ``[[0, n]]`` of ``n`` messages without ids were quadratic: 17 KB, 116 s).

    - Each pool message is keyed once; ``nxt`` skips, in a union-find, the pool messages whose key the
      conversation holds already (each is skipped for good once marked).
    - Whether ranges spell the running conversation's start (``extends``): the conversation's keys are
      distinct, so pool message ``q`` is in place at input position ``j`` when its key's position in
      the conversation is ``j``; over a range starting at ``a``, read at input offset ``o``, every
      ``q`` must have ``diff[q]`` (that position less ``q``) equal to ``o - a``. ``diff`` is set once a
      key joins the conversation and never changes, and a Fenwick tree counts the neighbours with equal
      ``diff``: a range check is then one lookup and one sum."""

    def __init__(self, pool: list) -> None:
        self.pool = pool
        n = len(pool)
        self.keys = [_key(m) if isinstance(m, dict) else None for m in pool]
        self.where: dict[str, list[int]] = {}
        for q, k in enumerate(self.keys):
            if k is not None:
                self.where.setdefault(k, []).append(q)
        self.not_dicts = [0]  # running count of pool entries that are not message objects
        for k in self.keys:
            self.not_dicts.append(self.not_dicts[-1] + (k is None))
        self.diff: list[int | None] = [None] * n
        self.runs = Fenwick([0] * max(n - 1, 0))  # 1 at q: diff[q] == diff[q + 1], both set
        self.nxt = list(range(n + 1))

    def ranges(self, refs: list, file: str, rec: str) -> list[tuple[int, int]]:
        """The ranges of ``input_refs``, each checked, and each message they span an object."""
        n = len(self.pool)
        out = []
        for r in refs:
            ok = isinstance(r, list | tuple) and len(r) == 2 and all(isinstance(x, int) for x in r)
            if not ok or not 0 <= r[0] <= r[1] <= n:
                raise TraceError(
                    file, f"bad message pool range {_short(r)} (pool of {n})", record=rec, field="input_refs"
                )
            out.append((r[0], r[1]))
        offset = 0
        for a, b in out:
            if self.not_dicts[b] != self.not_dicts[a]:
                q = next(q for q in range(a, b) if self.keys[q] is None)
                raise TraceError(
                    file, "expected a message object", record=rec, field=f"input[{offset + q - a}]"
                )
            offset += b - a
        return out

    def seen(self, key: str, at: int) -> None:
        """The conversation took ``key`` at position ``at``."""
        for q in self.where.pop(key, ()):
            self.diff[q] = at - q
            self.nxt[q] = q + 1
            for r in (q - 1, q):
                if (
                    0 <= r < len(self.diff) - 1
                    and self.diff[r] is not None
                    and self.diff[r] == self.diff[r + 1]
                ):
                    self.runs.add(r, 1)

    def _next(self, q: int) -> int:
        nxt = self.nxt
        while nxt[q] != q:
            nxt[q] = nxt[nxt[q]]
            q = nxt[q]
        return q

    def extends(self, ranges: list[tuple[int, int]], held: int) -> bool:
        """Whether the messages ``ranges`` spell begin with the conversation's ``held`` messages."""
        if sum(b - a for a, b in ranges) < held:
            return held == 0
        offset = 0
        for a, b in ranges:
            if offset >= held:
                break
            m = min(b - a, held - offset)
            if m > 0:
                if self.diff[a] != offset - a:
                    return False
                if m > 1 and self.runs.prefix(a + m - 1) - self.runs.prefix(a) != m - 1:
                    return False
            offset += b - a
        return True

    def append_new(
        self, ranges: list[tuple[int, int]], c: _Conversation, att: _Attachments, rec: str
    ) -> None:
        """Append, in order, the messages ``ranges`` spell that the conversation does not hold."""
        offset = 0
        for a, b in ranges:
            q = self._next(a)
            while q < b:
                c.append(self.pool[q], f"{rec} input[{offset + q - a}]", att, self.keys[q])
                q = self._next(q + 1)
            offset += b - a


def _short(v) -> str:
    text = repr(v)
    return text if len(text) <= 60 else f"{text[:40]}... ({len(text):,} characters)"


def _warn_sample(file: str, trace_id: str, c: _Conversation, att: _Attachments) -> None:
    """The warnings of a sample's conversation: missing attachments, an assumed token accounting, model
    calls whose input is not the running conversation extended."""
    if att.missing:
        warn(file, f"{trace_id}: {len(att.missing)} attachment references have no attachment; kept as is")
    if "assumed" in c.accounting:
        warn(
            file,
            f"{trace_id}: total_tokens does not say whether cache reads are inside input_tokens; "
            "assumed beside (Inspect's documented meaning)",
        )
    if c.not_prefix:
        warn(
            file,
            f"{trace_id}: {c.not_prefix} model calls' input is not the running conversation extended "
            "(trimmed, edited or another agent's); their new messages are appended and the per-call "
            "residual absorbs the difference",
        )


def _sample_outcome(sample: dict, header: dict, c: _Conversation) -> dict:
    err = sample.get("error")
    return {
        "status": header.get("status"),
        "scores": {
            name: s.get("value") if isinstance(s, dict) else s
            for name, s in (sample.get("scores") or {}).items()
        }
        if isinstance(sample.get("scores"), dict)
        else None,
        "error": err.get("message") if isinstance(err, dict) else err,
        "limit": sample.get("limit"),
        "total_time": sample.get("total_time"),
        "working_time": sample.get("working_time"),
        "non_prefix_inputs": c.not_prefix,
        "tools_changed": c.tools_changed,
        "skipped_model_events": c.skipped,
    }


def _convert_sample(
    sample: dict, task: str, model: str | None, agent: str, policy: dict, header: dict, file: str, fmt: str
) -> Trace | None:
    sid, epoch = sample.get("id"), sample.get("epoch", 1)
    trace_id = f"{task}/{sid}/{epoch}"
    att = _Attachments(
        sample.get("attachments") if isinstance(sample.get("attachments"), dict) else {}, file, trace_id
    )
    pool = sample.get("message_pool") if isinstance(sample.get("message_pool"), list) else []
    events = sample.get("events") if isinstance(sample.get("events"), list) else []
    model_events = _agent_model_events(events)
    c = _Conversation(file)
    if pool:
        c.pool = _Pool(pool)
    for n, ev in model_events:
        _take_model_event(c, ev, f"{trace_id} events[{n}]", att)

    sample_msgs = sample.get("messages") if isinstance(sample.get("messages"), list) else []
    for j, m in enumerate(sample_msgs):
        if not isinstance(m, dict):
            raise TraceError(file, "expected a message object", record=trace_id, field=f"messages[{j}]")
    for j, m in enumerate(sample_msgs):
        c.append(m, f"{trace_id} messages[{j}]", att)

    _warn_sample(file, trace_id, c, att)
    if not c.messages:
        warn(file, f"{trace_id}: sample has no messages and no model events; skipped")
        return None
    if not model_events and any(m.kind == "assistant" for m in c.messages):
        warn(file, f"{trace_id}: no model events; calls rebuilt from the sample's messages, without usage")
    return build_trace(
        trace_id=trace_id,
        source_format=fmt,
        file=file,
        messages=c.messages,
        usage=c.usage,
        model=model,
        agent=agent,
        recorded_policy=dict(policy),
        outcome=_sample_outcome(sample, header, c),
    )


def _agent_model_events(events: list) -> list[tuple[int, dict]]:
    """Model events of the agent: not under a ``scorer`` span (model-graded scorers call a grader)."""
    span_type: dict[str, str] = {}
    span_parent: dict[str, str | None] = {}
    out = []
    for n, ev in enumerate(events):
        if not isinstance(ev, dict):
            continue
        if ev.get("event") == "span_begin" and isinstance(ev.get("id"), str):
            span_type[ev["id"]] = str(ev.get("type") or "")
            span_parent[ev["id"]] = ev.get("parent_id") if isinstance(ev.get("parent_id"), str) else None
        elif ev.get("event") == "model" and not ev.get("pending"):
            s, depth, scorer = ev.get("span_id"), 0, False
            while isinstance(s, str) and depth < 100:
                if span_type.get(s) == "scorer":
                    scorer = True
                    break
                s, depth = span_parent.get(s), depth + 1
            if not scorer:
                out.append((n, ev))
    return out


def _output_message(ev: dict) -> dict | None:
    out = ev.get("output")
    if not isinstance(out, dict):
        return None
    choices = out.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None
    m = choices[0].get("message")
    return m if isinstance(m, dict) else None


def _key(m: dict) -> str:
    mid = m.get("id")
    return f"id:{mid}" if isinstance(mid, str) and mid else json.dumps(m, sort_keys=True, default=str)


def _content_text(content) -> str:
    """Text of an Inspect content: a string, or parts (text; reasoning left out; media as placeholders)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return json.dumps(content, sort_keys=True, ensure_ascii=False)
    parts = []
    for p in content:
        if isinstance(p, str):
            parts.append(p)
        elif isinstance(p, dict):
            t = p.get("type")
            if t == "text" and isinstance(p.get("text"), str):
                parts.append(p["text"])
            elif t == "reasoning":
                continue
            elif t in _MEDIA:
                parts.append(f"[{t}]")
            else:
                parts.append(json.dumps(p, sort_keys=True, ensure_ascii=False))
        else:
            parts.append(json.dumps(p, ensure_ascii=False))
    return "\n".join(parts)


def _message(m: dict, file: str, rec: str) -> Message:
    role = m.get("role")
    text = _content_text(m.get("content"))
    if role in ("system", "user"):
        return Message(role, text)
    if role == "assistant":
        ids, lines = [], [text] if text else []
        for c in m.get("tool_calls") or []:
            if not isinstance(c, dict):
                continue
            if isinstance(c.get("id"), str):
                ids.append(c["id"])
            lines.append(
                json.dumps(
                    {"function": c.get("function"), "arguments": c.get("arguments")}, ensure_ascii=False
                )
            )
        return Message("assistant", "\n".join(lines), tool_call_ids=tuple(ids))
    if role == "tool":
        err = m.get("error")
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            text = f"{text}\n{err['message']}" if text else err["message"]
        tcid = m.get("tool_call_id")
        return Message("tool_result", text, tool_call_id=tcid if isinstance(tcid, str) else None)
    raise TraceError(
        file, f"expected role system, user, assistant or tool, got {role!r}", record=rec, field="role"
    )


def _usage(u: Mapping, ts: float | None, accounting: set[str], file: str, rec: str) -> Usage:
    """Normalise Inspect's usage so ``input_tokens`` counts every input token (see the module doc)."""

    def _n(key: str) -> int | None:
        return usage_count(u.get(key), file, rec, f"output.usage.{key}")

    inp, out, total = _n("input_tokens"), _n("output_tokens"), _n("total_tokens")
    read, write, reasoning = (
        _n("input_tokens_cache_read"),
        _n("input_tokens_cache_write"),
        _n("reasoning_tokens"),
    )
    if total == 0 and (inp or out):
        total = None  # Inspect's default when a provider reported no total
    cache = (read or 0) + (write or 0)
    how = "inside"
    if inp is not None and cache:
        base = inp + (out or 0)
        ends = (0, reasoning or 0)
        if total is not None and any(total == base + r for r in ends):
            how = "inside"
        elif total is not None and any(total == base + cache + r for r in ends):
            how = "beside"
        elif read is not None and read > inp:
            how = "beside"  # a cache read larger than the whole input cannot be inside it
        else:
            how = "beside"
            accounting.add("assumed")
    total_in = None if inp is None else inp + (cache if how == "beside" else 0)
    return Usage(
        total_in,
        out,
        read,
        write,
        reasoning,
        usage_cost(u.get("total_cost"), file, rec, "output.usage.total_cost"),
        ts,
        {"cache_accounting": how},
    )


register(Importer(FORMAT_JSON, (".json",), _sniff_json, load_json_log))
register(Importer(FORMAT_EVAL, (".eval",), _sniff_eval, load_eval_log))
