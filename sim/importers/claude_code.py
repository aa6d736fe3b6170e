"""Claude Code session logs (``~/.claude/projects/<project>/<session>.jsonl``): one JSON record a line.

One trace per ``sessionId`` in the file, in order of first appearance, its records in file order
(``parentUuid`` is not followed: branches left by rewinds or edits are flattened in file order).
Usage is Anthropic's (``anthropic_usage``: cache reads and writes beside ``input_tokens``, summed);
the model is the session's first ``message.model`` (``<synthetic>`` messages excepted).

Mapping.
- ``assistant`` records -> one assistant message per API response. Claude Code writes one record per
  content block of a response, all with the same ``message.id``: a record whose id is the last
  assistant message's id is merged into it (tool results written in between stay after it), and the
  merged message keeps the last usage block written for that response (the most complete one). Its
  content is the text blocks, then one JSON line ``{"name", "input"}`` per ``tool_use`` block, whose
  ids become ``tool_call_ids``. ``thinking`` blocks are left out (the API drops earlier turns'
  thinking from the input; what it counts anyway lands in the per-call residual). An assistant
  message from ``<synthetic>`` (Claude Code's own placeholder, e.g. after an interrupted request)
  is kept without usage: no model call produced it.
- ``user`` records -> one ``tool_result`` message per ``tool_result`` block (``tool_call_id`` =
  ``tool_use_id``; an id no earlier tool_use issued is kept unpaired, with a warning), then one
  ``user`` message with the remaining text (string content, text blocks; images as ``[image]``).
  Empty content is kept as an empty message. A compaction summary (``isCompactSummary``) is a user
  message: it is what the model sees after a compaction.
- ``summary`` records (``{"summary", "leafUuid"}``) are not sent to the model: Claude Code writes
  them to describe a conversation (``claude --resume`` lists them), naming its last message. They
  are listed in the outcome of the session holding ``leafUuid`` and change no recorded view. They
  alone do not make a recorded compaction: nothing in the fixtures follows them.
- Compaction shows as a ``system`` record with ``subtype: compact_boundary`` or a user record with
  ``isCompactSummary``; a session with one is recorded as ``claude_code_auto_compact``, else ``raw``.
  Its calls after the boundary saw the summary, not the history before it: the trace keeps the whole
  history append-only, the provider's count falls while the view grows, and the per-call residuals
  carry the difference, so raw replay of a compacted session stays exact but no event is marked as
  dropped. A need of a call after the boundary whose fact only events before it provided is dropped
  (``sim.information.recorded_request``: the recorded request did not hold it).
- Facts: ``sim.information.tool_facts``, with ``Read`` a file read and ``Edit``, ``MultiEdit``, ``Write`` and
  ``NotebookEdit`` file edits (``file_ops``).
- Not conversation, so skipped: ``system`` records otherwise (local notices, hooks), other record
  types (``file-history-snapshot``, ``queue-operation``, ...; counted per file in the outcome), and
  records shown only in Claude Code's transcript (``isVisibleInTranscriptOnly``).
- Sidechain records (``isSidechain``: a sub-agent's own conversation, e.g. a ``Task`` tool's) become
  children of their session's trace (schema version 2): one per ``agentId``, or, without one, per chain
  of ``parentUuid`` links; each is spawned by the session's last assistant message before its first
  record and answers that call's next tool call still without a result. The parent's own events keep
  only what it received (the Task tool's result: the sub-agent's report); a notice counts them.
- Not recorded in the log, so not modelled: the system prompt and tool definitions Claude Code
  sends. The first call's provider count covers them and is split over the events before it.

Messy files import with warnings: lines that are not JSON, not objects, or have no ``type``;
user/assistant records without a ``message`` object or content; records repeating an earlier
``uuid`` (Claude Code copies history into resumed sessions): all skipped. Undecodable bytes are
replaced (one warning names the first such line). A file with no conversation record at all is an error.
"""

from __future__ import annotations

import bisect
import dataclasses
import json
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from sim.core.types import Child, Trace
from sim.importers import Importer, register
from sim.importers.common import (
    Message,
    Usage,
    anthropic_usage,
    build_trace,
    iso_timestamp,
    number_runs,
    warn,
)
from sim.util.errors import TraceError
from sim.util.fenwick import Fenwick
from sim.util.jsonl import MAX_DOCUMENT_BYTES, DocumentTooLarge, lines_of, parse_document, parse_json

FORMAT = "claude-code"
_CONVERSATION = ("user", "assistant")
_RECORD_TYPES = ("user", "assistant", "summary", "system")
_SYNTHETIC = "<synthetic>"
_SNIFF_BYTES = 65536
_SNIFF_LINES = 20


def _sniff(path: Path) -> bool:
    """The first JSON object lines look like Claude Code records: a ``type`` of user/assistant/summary/
    system with a ``sessionId`` or ``uuid`` (or a summary's ``leafUuid``). ctxsim's canonical lines
    (``schema_version``) and OpenHands evaluation lines (``instance_id``) are refused outright."""
    try:
        with open(path, "rb") as f:
            head = f.read(_SNIFF_BYTES)
        for n, line in enumerate(head.split(b"\n")):
            if n >= _SNIFF_LINES:
                break
            line = line.strip()
            if not line.startswith(b"{"):
                continue
            try:
                d = parse_json(line.decode("utf-8", errors="replace"))
            except ValueError:
                continue
            if not isinstance(d, dict):
                continue
            if "schema_version" in d or "instance_id" in d:
                return False
            t = d.get("type")
            if (
                isinstance(t, str)
                and t in _RECORD_TYPES
                and (
                    isinstance(d.get("sessionId"), str)
                    or isinstance(d.get("uuid"), str)
                    or (t == "summary" and "leafUuid" in d)
                )
            ):
                return True
        return False
    except Exception:  # a sniff never raises: anything odd means "not ours"
        return False


@dataclass
class _Session:
    sid: str
    messages: list[Message] = field(default_factory=list)
    usage: dict[int, Usage] = field(default_factory=dict)
    uuids: set[str] = field(default_factory=set)
    last_assistant: int | None = None  # index of the last assistant message
    last_message_id: str | None = None  # its API message id
    model: str | None = None
    version: str | None = None
    compact_boundaries: int = 0
    compact_summaries: int = 0
    compact_triggers: list = field(default_factory=list)  # "auto" or "manual" (/compact), per boundary
    boundaries: list = field(default_factory=list)  # message count at each compaction
    run_starts: list = field(default_factory=list)  # message index of each new task the user typed
    summaries: list[dict] = field(default_factory=list)


class _Reading:
    """What reading a Claude Code file gathers: its sessions (and each record's session), summaries,
    sub-agents' conversations, and the records skipped or ignored, for the warnings."""

    def __init__(self) -> None:
        self.sessions: dict[str, _Session] = {}
        self.owner: dict[str, str] = {}  # record uuid -> session id
        self.summaries: list[dict] = []
        self.bad: Counter[str] = Counter()
        self.first_bad: dict[str, int] = {}
        self.ignored: Counter[str] = Counter()
        self.sidechain = 0
        self.sides: dict[str, _Sides] = {}  # session id -> its sub-agents' conversations, in order
        self.bad_utf8: int | None = None  # the first line with undecodable bytes (replaced; one warning)

    def skip(self, reason: str, lineno: int) -> None:
        self.bad[reason] += 1
        self.first_bad.setdefault(reason, lineno)


def _read_lines(path: Path, r: _Reading) -> None:
    """Every line of the file as a record (``_take_record``), or skipped saying why."""
    # lines end at "\n" only: JSON text may hold U+2028 and other characters str.splitlines() breaks on
    for lineno, raw in lines_of(path):
        if raw is None:
            r.skip(f"longer than {MAX_DOCUMENT_BYTES:,} bytes", lineno)
            continue
        try:
            line = raw.decode("utf-8").strip()
        except UnicodeDecodeError:
            r.bad_utf8 = r.bad_utf8 or lineno
            line = raw.decode("utf-8", errors="replace").strip()
        if not line:
            continue
        try:
            d = parse_document(line)
        except json.JSONDecodeError:
            r.skip("not valid JSON", lineno)
            continue
        except DocumentTooLarge:
            r.skip("too large to parse", lineno)
            continue
        if not isinstance(d, dict):
            r.skip("not a JSON object", lineno)
            continue
        _take_record(path, r, d, lineno)


def _take_record(path: Path, r: _Reading, d: dict, lineno: int) -> None:
    """One record: a summary, a compaction boundary, or a user or assistant message of its session (or
    of a sub-agent's conversation); others are counted as ignored or skipped."""
    kind = d.get("type")
    if not isinstance(kind, str):
        r.skip("no record type", lineno)
        return
    if kind == "summary":
        if isinstance(d.get("summary"), str):
            r.summaries.append({"summary": d["summary"], "leaf_uuid": d.get("leafUuid")})
        else:
            r.skip("summary without text", lineno)
        return
    sessions = r.sessions
    sid = d.get("sessionId") if isinstance(d.get("sessionId"), str) else path.stem
    if kind == "system":
        if d.get("subtype") == "compact_boundary":
            cs = sessions.setdefault(sid, _Session(sid))
            cs.compact_boundaries += 1
            cs.boundaries.append(len(cs.messages))
            meta = d.get("compactMetadata") if isinstance(d.get("compactMetadata"), dict) else {}
            cs.compact_triggers.append(meta.get("trigger"))
        else:
            r.ignored["system"] += 1
        return
    if kind not in _CONVERSATION:
        r.ignored[kind] += 1
        return
    side = d.get("isSidechain") is True
    if side:
        r.sidechain += 1
    if d.get("isVisibleInTranscriptOnly") is True and not d.get("isCompactSummary"):
        r.ignored["transcript-only"] += 1
        return
    msg = d.get("message")
    if not isinstance(msg, dict) or "content" not in msg:
        r.skip(f"{kind} record without a message object holding content", lineno)
        return
    sides = side_of = None
    if side:
        sides = r.sides.setdefault(sid, _Sides())
        side_of = _side_session(sides, sessions.setdefault(sid, _Session(sid)), d)
        s = side_of.session
    else:
        s = sessions.setdefault(sid, _Session(sid))
    uuid = d.get("uuid") if isinstance(d.get("uuid"), str) else None
    if uuid is not None and uuid in s.uuids:
        r.skip("repeats an earlier record's uuid", lineno)
        return
    if uuid is not None:
        s.uuids.add(uuid)
        r.owner[uuid] = sid
        if sides is not None:
            sides.note(side_of, uuid)
    if s.version is None and isinstance(d.get("version"), str):
        s.version = d["version"]
    ts = iso_timestamp(d.get("timestamp"), path.name, f"line {lineno}", "timestamp")
    if kind == "assistant":
        _add_assistant(s, msg, ts, path.name, f"line {lineno}")
    else:
        if d.get("isCompactSummary") is True:
            s.compact_summaries += 1
            s.boundaries.append(len(s.messages))
        prompt = not (d.get("isMeta") is True or d.get("isCompactSummary") is True)
        _add_user(s, msg.get("content"), ts, prompt)


def _warn_read(file: str, r: _Reading) -> None:
    """The warnings of the reading: undecodable bytes, skipped records, sub-agents imported as children."""
    if r.bad_utf8 is not None:
        warn(file, f"not valid UTF-8 (first at line {r.bad_utf8}); undecodable bytes replaced")
    if r.bad:
        detail = "; ".join(
            f"{n} {reason} (first at line {r.first_bad[reason]})" for reason, n in r.bad.items()
        )
        warn(file, f"skipped records: {detail}")
    if r.sidechain:
        n = sum(len(v) for v in r.sides.values())
        warn(
            file,
            f"{r.sidechain} sidechain (sub-agent) records imported as {n} "
            f"{'child' if n == 1 else 'children'} of their sessions",
        )


def load(path: Path) -> Iterator[Trace]:
    file = path.name
    r = _Reading()
    _read_lines(path, r)
    _warn_read(file, r)
    sessions = r.sessions
    for sm in r.summaries:
        sid = r.owner.get(sm["leaf_uuid"]) if isinstance(sm["leaf_uuid"], str) else None
        target = sessions.get(sid) if sid else next(iter(sessions.values()), None)
        if target is not None:
            target.summaries.append(sm)
    if not any(s.messages for s in sessions.values()):
        raise TraceError(file, "no Claude Code user or assistant records with a message")
    for s in sessions.values():
        if not any(m.kind == "assistant" for m in s.messages):
            warn(file, f"session {s.sid}: no assistant messages (no model calls); skipped")
            continue
        compacted = s.compact_boundaries or s.compact_summaries
        hide_before_compactions(s.messages, s.boundaries)
        number_runs(s.messages, s.run_starts)
        trace = build_trace(
            trace_id=s.sid,
            source_format=FORMAT,
            file=file,
            messages=s.messages,
            usage=s.usage,
            model=s.model,
            agent=f"claude-code {s.version}" if s.version else "claude-code",
            recorded_policy={"name": "claude_code_auto_compact" if compacted else "raw"},
            outcome={
                "compact_boundaries": s.compact_boundaries,
                "compact_summaries": s.compact_summaries,
                "compact_triggers": s.compact_triggers,
                "summaries": s.summaries,
                "ignored_records_in_file": dict(sorted(r.ignored.items())),
            },
        )
        kids = _children(file, trace, r.sides.get(s.sid, ()))
        yield dataclasses.replace(trace, children=kids) if kids else trace


@dataclass
class _Side:
    """One sub-agent's conversation (a sidechain) and where its parent session was when it began."""

    session: _Session
    agent_id: str | None
    parent_messages: int  # messages of the parent session before the sidechain's first record
    index: int = 0  # its place among its session's sidechains


class _Sides:
    """One session's sub-agents' conversations, in order, with the indexes ``_side_session`` joins by:
    the side of each ``agentId``, the latest side without one holding each uuid, and every uuid any side
    holds. Searching the sides for each record was quadratic (8,000 agents: 16 s for 2.5 MB)."""

    def __init__(self) -> None:
        self.sides: list[_Side] = []
        self.by_agent: dict[str, _Side] = {}
        self.unnamed_by_uuid: dict[str, int] = {}  # uuid -> index of the latest side without agentId
        self.uuids: set[str] = set()  # held by any side

    def __iter__(self) -> Iterator[_Side]:
        return iter(self.sides)

    def __len__(self) -> int:
        return len(self.sides)

    def note(self, side: _Side, uuid: str) -> None:
        """``uuid`` was added to ``side``'s session."""
        self.uuids.add(uuid)
        if side.agent_id is None:
            k = side.index
            self.unnamed_by_uuid[uuid] = max(k, self.unnamed_by_uuid.get(uuid, k))


def _side_session(sides: _Sides, parent: _Session, d: dict) -> _Side:
    """The sidechain a record belongs to: by ``agentId`` when Claude Code writes one; otherwise the one
    holding its ``parentUuid``, else (no link) the latest one, unless the record is a user record
    without a link: a sub-agent's prompt, which begins a new sidechain."""
    agent = d.get("agentId") if isinstance(d.get("agentId"), str) else None
    up = d.get("parentUuid")
    if agent is not None and agent in sides.by_agent:
        return sides.by_agent[agent]
    if agent is None and isinstance(up, str) and up in sides.unnamed_by_uuid:
        return sides.sides[sides.unnamed_by_uuid[up]]
    last = sides.sides[-1] if sides.sides else None
    unlinked = not (isinstance(up, str) and up in sides.uuids)
    if (
        agent is None
        and last is not None
        and last.agent_id is None
        and unlinked
        and d.get("type") == "assistant"
    ):
        return last
    new = _Side(_Session(parent.sid), agent, len(parent.messages), len(sides.sides))
    new.session.model, new.session.version = parent.model, parent.version
    sides.sides.append(new)
    if agent is not None:
        sides.by_agent[agent] = new
    return new


class _Pending:
    """The tool calls of a parent's calls still without a result, as sidechains begin (in file order,
    so at non-decreasing message counts): ``nth(spawner, upto, j)`` is the ``j``-th call of event
    ``spawner`` that no event before ``upto`` answers. The parent's events are walked once and the
    spawner's answered calls cleared in a Fenwick tree: a logarithm a sidechain, not a scan of the
    parent (8,000 sidechains of one long session were quadratic)."""

    def __init__(self, parent: Trace) -> None:
        self.events = parent.events
        self.answered: set[str | None] = set()
        self.upto = 0
        self.spawner: int | None = None
        self.where: dict[str, list[int]] = {}  # the spawner's call id -> its positions among its calls
        self.unanswered = Fenwick(())

    def nth(self, spawner: int, upto: int, j: int) -> str | None:
        while self.upto < upto:
            t = self.events[self.upto].tool_call_id
            if t is not None and t not in self.answered:
                self.answered.add(t)
                for p in self.where.get(t, ()):
                    self.unanswered.add(p, -1)
            self.upto += 1
        ids = self.events[spawner].tool_call_ids
        if spawner != self.spawner:
            self.spawner, self.where = spawner, {}
            for p, t in enumerate(ids):
                self.where.setdefault(t, []).append(p)
            self.unanswered = Fenwick([0 if t in self.answered else 1 for t in ids])
        p = self.unanswered.find(j)
        return ids[p] if p < len(ids) else None


def _children(file: str, parent: Trace, sides) -> tuple[Child, ...]:
    """Each sidechain as a child of the parent call before it began: the last assistant message written
    before the sidechain's first record (Claude Code's Task call waits for its sub-agent), answering
    that call's tool calls still without a result in order (parallel Task calls each get one)."""
    out: list[Child] = []
    taken: dict[int, int] = {}
    call_of = {c.event_index: c.index for c in parent.calls}
    call_events = [c.event_index for c in parent.calls]  # ascending: the spawner is found by bisection
    pending = _Pending(parent)
    for n, side in enumerate(sides):
        s = side.session
        if not any(m.kind == "assistant" for m in s.messages):
            warn(file, f"session {parent.trace_id}: sidechain {n} has no assistant messages; skipped")
            continue
        k = bisect.bisect_left(call_events, side.parent_messages)
        if k == 0:
            warn(file, f"session {parent.trace_id}: sidechain {n} begins before any call; skipped")
            continue
        spawner = call_events[k - 1]
        j = taken.get(spawner, 0)
        taken[spawner] = j + 1
        child = build_trace(
            trace_id=f"{parent.trace_id}/{side.agent_id or f'sidechain-{n}'}",
            source_format=FORMAT,
            file=file,
            messages=s.messages,
            usage=s.usage,
            model=s.model or parent.model,
            agent=parent.agent,
            recorded_policy={"name": "raw"},
            outcome={"sidechain": n},
        )
        out.append(Child(call_of[spawner], child, pending.nth(spawner, side.parent_messages, j)))
    return tuple(out)


_READ_TOOLS = {"Read": "file_path"}
_EDIT_TOOLS = {
    "Edit": "file_path",
    "MultiEdit": "file_path",
    "Write": "file_path",
    "NotebookEdit": "notebook_path",
}


def file_ops(content) -> tuple[tuple[str, str, str], ...]:
    """Claude Code's file calls for ``sim.information.tool_facts``: ``Read`` reads its ``file_path``;
    ``Edit``, ``MultiEdit``, ``Write`` and ``NotebookEdit`` edit theirs."""
    out = []
    for b in content if isinstance(content, list) else ():
        if not isinstance(b, dict) or b.get("type") != "tool_use" or not isinstance(b.get("id"), str):
            continue
        name, args = b.get("name"), b.get("input")
        for kind, table in (("read", _READ_TOOLS), ("edit", _EDIT_TOOLS)):
            key = table.get(name) if isinstance(name, str) else None
            path = args.get(key) if key and isinstance(args, dict) else None
            if isinstance(path, str) and path:
                out.append((b["id"], kind, path))
    return tuple(out)


def hide_before_compactions(messages: list[Message], boundaries: list[int]) -> None:
    """Each message before a compaction was not sent from the first call after it on (it saw the summary
    instead): its ``hidden_from`` (``sim.information.recorded_request``) is that call's message index."""
    calls = [i for i, m in enumerate(messages) if m.kind == "assistant"]
    done = 0  # messages before it were handled by an earlier boundary: each message is visited once
    for b in sorted(set(boundaries)):
        k = bisect.bisect_left(calls, b)
        if k == len(calls):
            break  # no call after this boundary, nor after any later one
        for m in messages[done:b]:
            if m.hidden_from is None:
                m.hidden_from = calls[k]
        done = max(done, b)


def _add_assistant(s: _Session, msg: dict, ts: float | None, file: str, record: str) -> None:
    mid = msg.get("id") if isinstance(msg.get("id"), str) else None
    model = msg.get("model") if isinstance(msg.get("model"), str) else None
    text, ids = _assistant_content(msg.get("content"))
    ops = file_ops(msg.get("content"))
    if mid is not None and mid == s.last_message_id and s.last_assistant is not None:
        s.messages[s.last_assistant].add_part(text, ids, ops)  # another content block of the same response
        i = s.last_assistant
    else:
        s.messages.append(Message("assistant", text, tool_call_ids=ids, timestamp=ts, file_ops=ops))
        i = s.last_assistant = len(s.messages) - 1
        s.last_message_id = mid
    if model == _SYNTHETIC:
        return
    if s.model is None and model:
        s.model = model
    u = msg.get("usage")
    if isinstance(u, Mapping):
        usage = anthropic_usage(u, file, record, "message.usage")
        usage.timestamp = s.messages[i].timestamp
        s.usage[i] = usage


def _assistant_content(content) -> tuple[str, tuple[str, ...]]:
    if isinstance(content, str):
        return content, ()
    if not isinstance(content, list):
        return ("" if content is None else json.dumps(content, ensure_ascii=False)), ()
    lines: list[str] = []
    ids: list[str] = []
    for b in content:
        if isinstance(b, str):
            lines.append(b)
        elif not isinstance(b, dict):
            lines.append(json.dumps(b, ensure_ascii=False))
        elif b.get("type") == "text":
            lines.append(b.get("text") if isinstance(b.get("text"), str) else "")
        elif b.get("type") in ("thinking", "redacted_thinking"):
            continue
        elif b.get("type") == "tool_use":
            if isinstance(b.get("id"), str):
                ids.append(b["id"])
            lines.append(json.dumps({"name": b.get("name"), "input": b.get("input")}, ensure_ascii=False))
        else:
            lines.append(json.dumps(b, sort_keys=True, ensure_ascii=False))
    return "\n".join(p for p in lines if p), tuple(ids)


def _add_user(s: _Session, content, ts: float | None, prompt: bool = True) -> None:
    if not isinstance(content, list):
        text = content if isinstance(content, str) else ("" if content is None else json.dumps(content))
        _new_task(s, text, prompt)
        s.messages.append(Message("user", text, timestamp=ts))
        return
    rest: list[str] = []
    any_result = False
    for b in content:
        if isinstance(b, dict) and b.get("type") == "tool_result":
            any_result = True
            tcid = b.get("tool_use_id")
            s.messages.append(
                Message(
                    "tool_result",
                    _block_text(b.get("content")),
                    tool_call_id=tcid if isinstance(tcid, str) else None,
                    timestamp=ts,
                )
            )
        else:
            rest.append(_block_text([b]))
    if rest or not any_result:  # text beside results, or an empty content list: a user message
        text = "\n".join(p for p in rest if p)
        _new_task(s, text, prompt and not any_result)
        s.messages.append(Message("user", text, timestamp=ts))


# Claude Code's own user records that are no task: local commands and their output, the caveat before
# them, an interruption notice
_NOT_TASKS = (
    "<command-name>",
    "<local-command-stdout>",
    "<command-message>",
    "Caveat: ",
    "[Request interrupted",
)


def _new_task(s: _Session, text: str, prompt: bool) -> None:
    """A user's prompt after the model has answered opens a new run of the session's conversation."""
    if prompt and text.strip() and s.last_assistant is not None and not text.lstrip().startswith(_NOT_TASKS):
        s.run_starts.append(len(s.messages))


def _block_text(content) -> str:
    """Text of a content (string or blocks): text blocks as is, media as a placeholder, others as JSON."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return json.dumps(content, ensure_ascii=False)
    parts = []
    for b in content:
        if isinstance(b, str):
            parts.append(b)
        elif isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str):
            parts.append(b["text"])
        elif isinstance(b, dict) and b.get("type") in ("image", "document"):
            parts.append(f"[{b['type']}]")
        else:
            parts.append(json.dumps(b, sort_keys=True, ensure_ascii=False))
    return "\n".join(parts)


register(Importer(FORMAT, (".jsonl",), _sniff, load))
