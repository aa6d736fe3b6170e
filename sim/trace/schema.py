"""Canonical trace v2 (v1 still reads): the machine-checkable schema (JSON Schema subset) and its validator.

The dict below is the source of truth; ``scenarios/trace.schema.json`` is written from it
(``python -m sim.trace.schema``) and a test keeps the two equal. The validator supports exactly the
JSON Schema keywords used here, so any JSON Schema tool reads the file the same way. Numbers are finite
besides: JSON cannot hold NaN or infinity, but a Parquet row can, and the validator refuses them.
Ranges (``sim.util.limits``): counts in [0, 2^53), residuals in (-2^53, 2^53), times in years 1 to 9999,
bytes per token >= 0.01, costs >= 0.
"""

from __future__ import annotations

import json
import math

from sim.core.types import (
    EVENT_KINDS,
    FACT_KINDS,
    SCHEMA_VERSION,
    SCHEMA_VERSIONS,
    TOKEN_PROVENANCES,
    USAGE_PROVENANCES,
)
from sim.cost.tokens import estimate_tokens
from sim.util.limits import (
    MAX_COUNT,
    MIN_BYTES_PER_TOKEN,
    TIME_MAX,
    TIME_MIN,
    USAGE_COUNTS,
    bound_problem,
    count_problem,
    number_problem,
    ratio_problem,
    time_problem,
    trace_token_bound,
)
from sim.util.paths import REPO

_INT = {"type": "integer", "minimum": 0, "maximum": MAX_COUNT}
_OPT_INT = {"type": ["integer", "null"], "minimum": 0, "maximum": MAX_COUNT}
_TIME = {"type": ["number", "null"], "minimum": TIME_MIN, "maximum": TIME_MAX, "description": "unix seconds"}

EVENT_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["index", "kind", "content", "bytes", "chars", "lines", "tokens", "tokens_provenance"],
    "properties": {
        "index": _INT,
        "kind": {"type": "string", "enum": list(EVENT_KINDS)},
        "content": {"type": ["string", "null"], "description": "text; null in a redacted trace"},
        "bytes": _INT,
        "chars": _INT,
        "lines": _INT,
        "tokens": _INT,
        "tokens_provenance": {"type": "string", "enum": list(TOKEN_PROVENANCES)},
        "tool_call_ids": {"type": "array", "items": {"type": "string"}},
        "tool_call_id": {"type": ["string", "null"]},
        "bounded": {"type": "boolean"},
        "timestamp": _TIME,
        "provides": {"type": ["array", "null"], "items": {"type": "string"}, "description": "fact ids"},
        "needs": {"type": ["array", "null"], "items": {"type": "string"}, "description": "fact ids"},
        "json_bytes": {
            **_OPT_INT,
            "description": "UTF-8 bytes of content as a JSON string; kept when content is null",
        },
        "json2_bytes": {
            **_OPT_INT,
            "description": "the same, JSON-encoded twice; kept when content is null",
        },
        "fact_spans": {
            "type": ["array", "null"],
            "items": {"type": ["array", "null"], "items": _INT},
            "description": "per provided fact: [start, end) UTF-8 bytes of content (null: the whole event)",
        },
        "fact_kinds": {
            "type": ["array", "null"],
            "items": {"type": ["string", "null"], "enum": [*FACT_KINDS, None]},
            "description": "per provided fact: its kind",
        },
        "supersedes": {
            "type": ["array", "null"],
            "items": {"type": "string"},
            "description": "fact ids of earlier events this event updates (they become stale)",
        },
        "source_type": {
            "type": ["string", "null"],
            "description": "the source framework's type of the event (OpenHands V0: action:recall, ...)",
        },
        "url": {"type": ["string", "null"], "description": "a browser output's page address"},
        "run_index": {
            **_OPT_INT,
            "description": "version 2: the run of the conversation (0 or absent: the first)",
        },
    },
}

CALL_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["index", "event_index", "view_end", "input_tokens", "output_tokens", "residual_tokens"],
    "properties": {
        "index": _INT,
        "event_index": _INT,
        "view_end": _INT,
        "input_tokens": _OPT_INT,
        "output_tokens": _OPT_INT,
        "cache_read_tokens": _OPT_INT,
        "cache_write_tokens": _OPT_INT,
        "reasoning_tokens": _OPT_INT,
        "residual_tokens": {
            "type": "integer",
            "minimum": -MAX_COUNT,
            "maximum": MAX_COUNT,
            "description": "provider-residual; may be negative",
        },
        "usage_provenance": {"type": "string", "enum": list(USAGE_PROVENANCES)},
        "timestamp": _TIME,
        "recorded_cost_usd": {"type": ["number", "null"], "minimum": 0},
        "run_index": {**_OPT_INT, "description": "version 2: its event's run (absent: taken from it)"},
    },
}

TRACE_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": f"ctxsim canonical trace v{SCHEMA_VERSION}",
    "type": "object",
    "additionalProperties": False,
    "required": ["schema_version", "trace_id", "source_format", "events", "calls"],
    "properties": {
        "schema_version": {"type": "integer", "enum": list(SCHEMA_VERSIONS)},
        "trace_id": {"type": "string"},
        "source_format": {"type": "string"},
        "source_file": {"type": ["string", "null"]},
        "agent": {"type": ["string", "null"]},
        "model": {"type": ["string", "null"]},
        "context_window": _OPT_INT,
        "bytes_per_token": {"type": ["number", "null"], "minimum": MIN_BYTES_PER_TOKEN},
        "recorded_policy": {"type": "string", "description": "JSON object as a string"},
        "outcome": {"type": "string", "description": "JSON object as a string"},
        "events": {"type": "array", "items": EVENT_SCHEMA},
        "calls": {"type": "array", "items": CALL_SCHEMA},
        "children": {
            "type": "string",
            "description": "version 2: sub-agent runs, a JSON array as a string of {parent_call (the "
            "spawning call's index), tool_call_id (its tool call, or null), trace (a canonical record)}",
        },
    },
}

_PY_TYPES = {
    "object": dict,
    "array": list,
    "string": str,
    "integer": int,
    "number": (int, float),
    "boolean": bool,
    "null": type(None),
}


def _type_ok(value, name: str) -> bool:
    if isinstance(value, bool) and name in ("integer", "number"):
        return False  # JSON booleans are not numbers
    return isinstance(value, _PY_TYPES[name])


def problems(value, schema: dict, path: str = "") -> list[tuple[str, str]]:
    """All (field path, message) problems of ``value`` against ``schema``; empty when valid."""
    out: list[tuple[str, str]] = []
    types = schema.get("type")
    if types is not None:
        names = [types] if isinstance(types, str) else types
        if not any(_type_ok(value, t) for t in names):
            out.append((path or "<record>", f"expected {' or '.join(names)}, got {_describe(value)}"))
            return out
    if "enum" in schema and value not in schema["enum"]:
        out.append((path, f"expected one of {schema['enum']}, got {value!r}"))
    if isinstance(value, int | float) and not isinstance(value, bool):
        if isinstance(value, float) and not math.isfinite(value):
            out.append((path, f"expected a finite number, got {value}"))
        elif "minimum" in schema and value < schema["minimum"]:
            out.append((path, f"must be >= {_num(schema['minimum'])}, got {_num(value)}"))
        elif "maximum" in schema and value > schema["maximum"]:
            out.append((path, f"must be <= {_num(schema['maximum'])}, got {_num(value)}"))
    if isinstance(value, dict) and "properties" in schema:
        props = schema["properties"]
        for key in schema.get("required", []):
            if key not in value:
                out.append((_join(path, key), "missing required field"))
        if schema.get("additionalProperties") is False:
            for key in value:
                if key not in props:
                    out.append((_join(path, key), f"unknown field (known: {', '.join(props)})"))
        for key, sub in props.items():
            if key in value:
                out.extend(problems(value[key], sub, _join(path, key)))
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            out.extend(problems(item, schema["items"], f"{path}[{i}]"))
    return out


_EVENT_KEYS = frozenset(EVENT_SCHEMA["properties"])
_EVENT_REQUIRED = tuple(EVENT_SCHEMA["required"])
_CALL_KEYS = frozenset(CALL_SCHEMA["properties"])
_CALL_REQUIRED = tuple(CALL_SCHEMA["required"])
_TOP_KEYS = frozenset(TRACE_SCHEMA["properties"])
_KINDS = frozenset(EVENT_KINDS)
_TPROV = frozenset(TOKEN_PROVENANCES)
_UPROV = frozenset(USAGE_PROVENANCES)


def _nat(v) -> bool:
    return type(v) is int and 0 <= v <= MAX_COUNT


def _opt_nat(v) -> bool:
    return v is None or (type(v) is int and 0 <= v <= MAX_COUNT)


def _opt_time(v) -> bool:  # NaN fails both comparisons
    return v is None or (type(v) in (int, float) and TIME_MIN <= v <= TIME_MAX)


def _opt_ratio(v) -> bool:
    return v is None or (type(v) in (int, float) and MIN_BYTES_PER_TOKEN <= v < math.inf)


def _opt_cost(v) -> bool:
    return v is None or (type(v) in (int, float) and 0 <= v < math.inf)


def _str_list(v) -> bool:
    return v is None or (type(v) is list and all(type(x) is str for x in v))


_FACT_KINDS = frozenset(FACT_KINDS)


def _spans(v) -> bool:
    return v is None or (
        type(v) is list and all(x is None or (type(x) is list and all(_nat(b) for b in x)) for x in v)
    )


def _kinds(v) -> bool:
    return v is None or (
        type(v) is list and all(x is None or (type(x) is str and x in _FACT_KINDS) for x in v)
    )


def conforms(d) -> bool:
    """True when ``d`` certainly satisfies TRACE_SCHEMA: the same rules as ``problems``, written out for
    speed (a corpus has millions of events). False means: ask ``problems`` for the messages."""
    if type(d) is not dict or not _TOP_KEYS.issuperset(d) or type(d.get("schema_version")) is not int:
        return False
    if d["schema_version"] not in SCHEMA_VERSIONS:
        return False
    if type(d.get("trace_id")) is not str or type(d.get("source_format")) is not str:
        return False
    for k in ("source_file", "agent", "model"):
        if d.get(k) is not None and type(d[k]) is not str:
            return False
    if not _opt_nat(d.get("context_window")) or not _opt_ratio(d.get("bytes_per_token")):
        return False
    for k in ("recorded_policy", "outcome", "children"):
        if k in d and type(d[k]) is not str:
            return False
    events, calls = d.get("events"), d.get("calls")
    if type(events) is not list or type(calls) is not list:
        return False
    for e in events:
        if type(e) is not dict or not _EVENT_KEYS.issuperset(e) or any(k not in e for k in _EVENT_REQUIRED):
            return False
        if not (
            _nat(e["index"])
            and type(e["kind"]) is str
            and e["kind"] in _KINDS
            and (e["content"] is None or type(e["content"]) is str)
            and _nat(e["bytes"])
            and _nat(e["chars"])
            and _nat(e["lines"])
            and _nat(e["tokens"])
            and type(e["tokens_provenance"]) is str
            and e["tokens_provenance"] in _TPROV
            and ("tool_call_ids" not in e or _str_list(e["tool_call_ids"]) and e["tool_call_ids"] is not None)
            and (e.get("tool_call_id") is None or type(e["tool_call_id"]) is str)
            and ("bounded" not in e or type(e["bounded"]) is bool)
            and _opt_time(e.get("timestamp"))
            and _str_list(e.get("provides"))
            and _str_list(e.get("needs"))
            and _opt_nat(e.get("json_bytes"))
            and _opt_nat(e.get("json2_bytes"))
            and _spans(e.get("fact_spans"))
            and _kinds(e.get("fact_kinds"))
            and _str_list(e.get("supersedes"))
            and (e.get("source_type") is None or type(e["source_type"]) is str)
            and (e.get("url") is None or type(e["url"]) is str)
            and _opt_nat(e.get("run_index"))
        ):
            return False
    for c in calls:
        if type(c) is not dict or not _CALL_KEYS.issuperset(c) or any(k not in c for k in _CALL_REQUIRED):
            return False
        if not (
            _nat(c["index"])
            and _nat(c["event_index"])
            and _nat(c["view_end"])
            and _opt_nat(c["input_tokens"])
            and _opt_nat(c["output_tokens"])
            and _opt_nat(c.get("cache_read_tokens"))
            and _opt_nat(c.get("cache_write_tokens"))
            and _opt_nat(c.get("reasoning_tokens"))
            and type(c["residual_tokens"]) is int
            and -MAX_COUNT <= c["residual_tokens"] <= MAX_COUNT
            and type(c.get("usage_provenance", "provider")) is str
            and c.get("usage_provenance", "provider") in _UPROV
            and _opt_time(c.get("timestamp"))
            and _opt_cost(c.get("recorded_cost_usd"))
            and _opt_nat(c.get("run_index"))
        ):
            return False
    return True


def outputs_bound(calls, events, bytes_per_token) -> list[int]:
    """Per call: its output tokens, or for a call without them the mock model's estimate
    (``sim.engine.model``)."""
    return [
        o
        if (o := c["output_tokens"]) is not None
        else estimate_tokens(events[c["event_index"]]["bytes"], bytes_per_token)
        for c in calls
        if c["output_tokens"] is not None or c["event_index"] < len(events)
    ]


def bound_problems(d: dict) -> list[tuple[str, str]]:
    """The sum bound (``sim.util.limits.trace_token_bound``) of a record that passed the schema."""
    events, calls = d["events"], d["calls"]
    bound = trace_token_bound(
        sum(e["tokens"] for e in events),
        [c["residual_tokens"] for c in calls],
        outputs_bound(calls, events, d.get("bytes_per_token")),
        len(calls),
    )
    p = bound_problem(bound)
    return [] if p is None else [("<record>", p)]


def number_problems(t) -> list[tuple[str, str]]:
    """The schema's numeric rules and the sum bound, on a built ``sim.core.types.Trace`` (an importer's
    result): (field path, message) of each value out of range."""
    out: list[tuple[str, str]] = []
    for i, e in enumerate(t.events):
        for name in ("bytes", "chars", "lines", "tokens"):
            if (p := count_problem(getattr(e, name))) is not None:
                out.append((f"events[{i}].{name}", p))
        if e.timestamp is not None and (p := time_problem(e.timestamp)) is not None:
            out.append((f"events[{i}].timestamp", p))
    for j, c in enumerate(t.calls):
        for name in USAGE_COUNTS:
            v = getattr(c, name)
            if v is not None and (p := count_problem(v)) is not None:
                out.append((f"calls[{j}].{name}", p))
        if (p := count_problem(c.residual_tokens, allow_negative=True)) is not None:
            out.append((f"calls[{j}].residual_tokens", p))
        if c.timestamp is not None and (p := time_problem(c.timestamp)) is not None:
            out.append((f"calls[{j}].timestamp", p))
        if c.recorded_cost_usd is not None and (p := number_problem(c.recorded_cost_usd, 0.0)) is not None:
            out.append((f"calls[{j}].recorded_cost_usd", p))
    if t.context_window is not None and (p := count_problem(t.context_window)) is not None:
        out.append(("context_window", p))
    if t.bytes_per_token is not None and (p := ratio_problem(t.bytes_per_token)) is not None:
        out.append(("bytes_per_token", p))
    if not out:
        events = [{"bytes": e.bytes} for e in t.events]
        calls = [{"output_tokens": c.output_tokens, "event_index": c.event_index} for c in t.calls]
        bound = trace_token_bound(
            sum(e.tokens for e in t.events),
            [c.residual_tokens for c in t.calls],
            outputs_bound(calls, events, t.bytes_per_token),
            len(t.calls),
        )
        if (p := bound_problem(bound)) is not None:
            out.append(("<record>", p))
    return out


def _num(v) -> str:
    """A bound or value in a message: 2^53 - 1 as such, long integers shortened."""
    if isinstance(v, int) and abs(v) == MAX_COUNT:
        return "-(2^53 - 1)" if v < 0 else "2^53 - 1"
    text = repr(v)
    return text if len(text) <= 40 else f"{text[:20]}... ({len(text)} digits)"


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _describe(value) -> str:
    if value is None:
        return "null"
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    name = {dict: "object", list: "array", str: "string", bool: "boolean"}.get(
        type(value), type(value).__name__
    )
    return f"{name} {text[:40]}"


SCHEMA_FILE = REPO / "scenarios" / "trace.schema.json"


def schema_text() -> str:
    return json.dumps(TRACE_SCHEMA, indent=2) + "\n"


if __name__ == "__main__":  # regenerate the committed schema file
    SCHEMA_FILE.write_text(schema_text())
