"""The rules of a canonical record that a JSON Schema cannot say (cross-field, runs, children, text),
each problem a (field path, message) pair so the error names the file, record and field.

Why apart from the codec: the column reader (``sim.trace.columns``) checks the same rules on whole
batches and hands a record it declines to the reference reader, which states the problem from here.
"""

from __future__ import annotations

import json
import re

from sim.core.types import MAX_CHILD_DEPTH, MAX_CHILDREN
from sim.cost.tokens import json2_bytes, json_bytes
from sim.trace import schema
from sim.util.jsonl import parse_json


def p_of(i: int) -> str:
    return f"events[{i}]"


def semantic_problems(d: dict, text_checked: bool = False) -> list[tuple[str, str]]:
    """Cross-field rules a JSON Schema cannot say. Assumes ``d`` already passed the schema.
    ``text_checked``: ``d`` was read by a reader that refuses lone surrogates in every string
    (``sim.util.jsonl.parse_json``; Arrow, whose strings are valid UTF-8), so none is looked for again."""
    out: list[tuple[str, str]] = []
    events, calls = d["events"], d["calls"]
    issued: set[str] = set()
    provided: set[str] = set()
    for i, e in enumerate(events):
        for f in e.get("needs") or ():
            if f not in provided:
                out.append((f"{p_of(i)}.needs", f"'{f}' is provided by no earlier event"))
        for f in e.get("supersedes") or ():
            if f not in provided:
                out.append((f"{p_of(i)}.supersedes", f"'{f}' is provided by no earlier event"))
        provided.update(e.get("provides") or ())
        p = f"events[{i}]"
        out.extend(_fact_problems(e, p))
        if e["index"] != i:
            out.append((f"{p}.index", f"expected {i} (events are numbered in order), got {e['index']}"))
        c = e["content"]
        if c is not None and not text_checked and lone_surrogate(c):
            out.append((f"{p}.content", _SURROGATE_PROBLEM))
        elif c is not None:
            for key, actual in (
                ("bytes", len(c.encode())),
                ("chars", len(c)),
                ("lines", len(c.splitlines())),
            ):
                if e[key] != actual:
                    out.append((f"{p}.{key}", f"is {e[key]} but the content has {actual}"))
            for key, size in (("json_bytes", json_bytes), ("json2_bytes", json2_bytes)):
                if e.get(key) is not None and e[key] != size(c):
                    out.append((f"{p}.{key}", f"is {e[key]} but the content has {size(c)}"))
        if not text_checked:
            for key in ("tool_call_id", "tool_call_ids", "provides", "needs", "supersedes"):
                if _any_surrogate(e.get(key)):
                    out.append((f"{p}.{key}", _SURROGATE_PROBLEM))
        if e["kind"] == "assistant":
            issued.update(e.get("tool_call_ids") or ())
        tcid = e.get("tool_call_id")
        if tcid is not None and tcid not in issued:
            out.append((f"{p}.tool_call_id", f"'{tcid}' answers no earlier assistant tool call"))
    out.extend(run_problems(d))
    prefix = [0]
    for e in events:
        prefix.append(prefix[-1] + e["tokens"])
    last_event, last_view = -1, 0
    for j, c in enumerate(calls):
        p = f"calls[{j}]"
        if c["index"] != j:
            out.append((f"{p}.index", f"expected {j}, got {c['index']}"))
        ei, ve = c["event_index"], c["view_end"]
        if ei >= len(events) or events[ei]["kind"] != "assistant":
            out.append((f"{p}.event_index", f"{ei} is not an assistant event"))
        if ei <= last_event:
            out.append((f"{p}.event_index", f"{ei} does not follow the previous call's {last_event}"))
        if ve > ei or ve < last_view:
            out.append(
                (f"{p}.view_end", f"{ve} must lie in [{last_view}, {ei}] (append-only, before its output)")
            )
            ve = min(max(ve, 0), len(events))
        last_event, last_view = ei, max(last_view, ve)
        ve = min(ve, len(events))
        expected = 0 if c["input_tokens"] is None else c["input_tokens"] - prefix[ve]
        if c["residual_tokens"] != expected:
            out.append(
                (
                    f"{p}.residual_tokens",
                    f"is {c['residual_tokens']} but input_tokens - view tokens = {expected}",
                )
            )
    for key in ("trace_id", "source_format", "source_file", "agent", "model"):
        if _any_surrogate(d.get(key)):
            out.append((key, _SURROGATE_PROBLEM))
    for key in ("recorded_policy", "outcome"):
        if key in d:
            if lone_surrogate(d[key]):
                out.append((key, _SURROGATE_PROBLEM))
                continue
            try:
                ok = isinstance(parse_json(d[key]), dict)
            except json.JSONDecodeError as exc:
                out.append(
                    (key, f"expected a JSON object encoded as a string ({exc.msg}, column {exc.colno})")
                )
                continue
            if not ok:
                out.append((key, "expected a JSON object encoded as a string"))
    return out or schema.bound_problems(d)  # sums of a replay must fit int64 (sim.util.limits)


def run_problems(d: dict) -> list[tuple[str, str]]:
    """Runs of a conversation (version 2): numbered 0, 1, ... in event order, a call in its event's run,
    every run with a call (its opening prompt)."""
    out: list[tuple[str, str]] = []
    events, calls = d["events"], d["calls"]
    prev, starts = 0, [0]
    for i, e in enumerate(events):
        r = e.get("run_index") or 0
        if r and d["schema_version"] < 2:
            out.append(
                (f"{p_of(i)}.run_index", f"needs schema_version 2, the record says {d['schema_version']}")
            )
            return out
        if r not in (prev, prev + 1) or (i == 0 and r != 0):
            first = 0 if i == 0 else prev
            allowed = "0" if i == 0 else f"{first} or {first + 1}"
            out.append(
                (
                    f"{p_of(i)}.run_index",
                    f"expected {allowed} (runs are numbered 0, 1, ... in order), got {r}",
                )
            )
            return out
        if r == prev + 1:
            starts.append(i)
        prev = r
    with_call = set()
    for j, c in enumerate(calls):
        ei = c["event_index"]
        own = (events[ei].get("run_index") or 0) if ei < len(events) else None
        r = c.get("run_index")
        if r is not None and own is not None and r != own:
            out.append((f"calls[{j}].run_index", f"is {r} but its event {ei} belongs to run {own}"))
        if own is not None:
            with_call.add(own)
    for r, i in enumerate(starts):
        if r not in with_call and events:
            out.append((f"{p_of(i)}.run_index", f"run {r} has no call (every run opens with a request)"))
            break
    return out


_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_PROBLEM = "holds a lone UTF-16 surrogate (not valid Unicode text; it cannot be written as UTF-8)"


def lone_surrogate(text: str) -> bool:
    """True when ``text`` holds a lone surrogate, which no UTF-8 file can carry: a string from a JSON
    escape such as ``\\ud800`` or from a reader that let it through."""
    return not text.isascii() and _SURROGATE.search(text) is not None


def _any_surrogate(value) -> bool:
    if isinstance(value, str):
        return lone_surrogate(value)
    if isinstance(value, list | tuple):
        return any(isinstance(v, str) and lone_surrogate(v) for v in value)
    return False


def _fact_problems(e: dict, p: str) -> list[tuple[str, str]]:
    """A fact's span and kind lists line up with ``provides``; a span is [start, end) inside the content."""
    out = []
    n = len(e.get("provides") or ())
    for key in ("fact_spans", "fact_kinds"):
        v = e.get(key)
        if v and len(v) != n:
            out.append((f"{p}.{key}", f"has {len(v)} entries but provides has {n} (one per provided fact)"))
    for j, span in enumerate(e.get("fact_spans") or ()):
        if span is None:
            continue
        if len(span) != 2:
            out.append((f"{p}.fact_spans[{j}]", f"expected [start, end], got {len(span)} numbers"))
        elif not span[0] <= span[1] <= e["bytes"]:
            out.append(
                (
                    f"{p}.fact_spans[{j}]",
                    f"[{span[0]}, {span[1]}] must satisfy start <= end <= bytes ({e['bytes']})",
                )
            )
    return out


def trace_problems(
    d, text_checked: bool = False, depth: int = 0, count: list[int] | None = None
) -> list[tuple[str, str]]:
    """Problems of a record as (field path, message); a child's fields are named from the top
    (``children[0].events[3].tokens``). ``text_checked``: see ``semantic_problems``; ``depth``/``count``:
    nesting so far and children met so far."""
    found = [] if schema.conforms(d) else schema.problems(d, schema.TRACE_SCHEMA)
    found = found or semantic_problems(d, text_checked)
    if not found and "children" in d:
        found = _children_problems(d, depth, [0] if count is None else count)
    return found


def _children_problems(d: dict, depth: int, count: list[int]) -> list[tuple[str, str]]:
    """A record's ``children``: a JSON array (as a string) of {parent_call, tool_call_id, trace}, each
    spawned by one of the record's calls (and, when named, one of that call's tool calls), each trace a
    valid record; nesting at most MAX_CHILD_DEPTH deep and MAX_CHILDREN children in all."""
    try:
        kids = parse_json(d["children"])
    except json.JSONDecodeError as exc:
        return [("children", f"expected a JSON array encoded as a string ({exc.msg}, column {exc.colno})")]
    if not isinstance(kids, list):
        return [("children", "expected a JSON array of children encoded as a string")]
    if kids and depth + 1 > MAX_CHILD_DEPTH:
        return [("children", f"children nest deeper than {MAX_CHILD_DEPTH} levels")]
    count[0] += len(kids)
    if count[0] > MAX_CHILDREN:
        return [("children", f"more than {MAX_CHILDREN:,} children in one trace (all levels together)")]
    calls, events = d["calls"], d["events"]
    for j, c in enumerate(kids):
        p = f"children[{j}]"
        if not isinstance(c, dict) or set(c) - {"parent_call", "tool_call_id", "trace"}:
            return [(p, "expected an object with parent_call, tool_call_id and trace")]
        pc = c.get("parent_call")
        if type(pc) is not int or not 0 <= pc < len(calls):
            return [(f"{p}.parent_call", f"expected a call index in [0, {len(calls)}), got {pc!r}")]
        tcid = c.get("tool_call_id")
        issued = events[calls[pc]["event_index"]].get("tool_call_ids") or ()
        if tcid is not None and (type(tcid) is not str or tcid not in issued):
            return [(f"{p}.tool_call_id", f"{tcid!r} is not a tool call of call {pc}")]
        if not isinstance(c.get("trace"), dict):
            return [(f"{p}.trace", "expected a canonical trace record (an object)")]
        inner = trace_problems(c["trace"], True, depth + 1, count)  # parse_json refused lone surrogates
        if inner:
            return [(f"{p}.trace.{f}" if f != "<record>" else f"{p}.trace", m) for f, m in inner]
    return []
