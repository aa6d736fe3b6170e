"""Langfuse traces: observations as Langfuse's public API and the UI give them.

Files (``.json``): a trace with its observations (``GET /api/public/traces/{id}``, the UI's JSON of a
trace: ``{"id", "timestamp", ..., "observations": [...]}``), a list of such traces, a page of
observations (``GET /api/public/observations`` or ``/api/public/v2/observations``:
``{"data": [...], "meta": ...}``), or a plain list of observations. An observation: ``id``,
``traceId``, ``type`` (``GENERATION``, ``SPAN``, ``EVENT``, ``TOOL``, ``AGENT``, ...), ``name``,
``startTime``, ``parentObservationId``, ``input``, ``output``, ``model``, ``usageDetails``,
``costDetails``, ``totalCost`` (and the older ``usage``, ``promptTokens``, ``completionTokens``,
``calculatedTotalCost``).

Runs: one trace per Langfuse trace (``traceId``; in a trace document, its ``id``), in the order of
their first observation. Calls: the ``GENERATION`` observations in ``startTime`` order (ties by id).
A generation's ``input`` is the request: a list of chat messages (OpenAI, LangChain or Anthropic shapes,
``sim.importers.request_log``), an object with ``messages`` (and ``system``, ``tools``), or a prompt
string (one user message); its ``output`` the response (a message, a string, or a list whose first
message counts). The conversation is rebuilt from the requests as for every request log: messages a
request left out are hidden from that call on (the recorded-request rule), the residual carries the
difference. A generation without ``input`` takes the ``TOOL`` observations between it and the next
generation as the calls it issued and their ``output`` as the results (``input``: the arguments; call id
``metadata.tool_call_id``, else the observation id). The tool definitions: the first generation's
``modelParameters.tools`` or its input's ``tools``.

Usage: Langfuse keeps usage types whose names hold ``input`` as parts of the input (it sums them the
same way), so the call's input is the sum of those parts (``input``, ``input_cached_tokens``,
``cache_read_input_tokens``, ...); the cache reads are the parts naming a cache read
(``input_cached_tokens``, ``cache_read_input_tokens``, ``input_cache_read``), the cache writes those
naming a cache creation; the output the sum of the ``output`` types, reasoning ``output_reasoning_tokens``.
Without ``usageDetails``: ``usage.input``/``usage.output``, else ``promptTokens``/``completionTokens``.
Cost: ``costDetails.total``, else ``totalCost`` / ``calculatedTotalCost``. The model is the first
generation's ``model``; the agent the trace's ``name``. Recorded policy ``raw``.

Not modelled: scores, sessions (a session's traces stay separate runs), events, nested agents (every
generation of a trace is one call of its run), media references (kept as their text).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path

from sim.core.types import Trace
from sim.importers import Importer, register
from sim.importers.common import (
    Usage,
    iso_timestamp,
    read_json_file,
    usage_cost,
    usage_count,
)
from sim.importers.request_log import (
    LoggedCall,
    Msg,
    ToolRun,
    args_text,
    by_first_time,
    conversation_trace,
    converted,
    normalise,
    rebuild,
)
from sim.util.errors import TraceError

FORMAT = "langfuse"
MAX_OBSERVATIONS = 1_000_000
_SNIFF_BYTES = 1 << 18
_TYPE = re.compile(rb'"type"\s*:\s*"(GENERATION|SPAN|EVENT|TOOL|AGENT)"')


def _sniff(path: Path) -> bool:
    """Langfuse's camelCase observation keys and an observation type in the first 256 KiB."""
    with open(path, "rb") as f:
        head = f.read(_SNIFF_BYTES)
    return (
        head.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] in (b"{", b"[")
        and b'"traceId"' in head
        and b'"startTime"' in head
        and _TYPE.search(head) is not None
    )


# ------------------------------------------------------------------------------------------------ reading
def observations(data, file: str) -> list[tuple[str, dict, str]]:
    """(trace id, observation, record label) of every observation of the document."""
    out: list[tuple[str, dict, str]] = []

    def take(items, trace_id: str | None, where: str) -> None:
        if not isinstance(items, list):
            raise TraceError(
                file, f"expected a list of observations, got {type(items).__name__}", field=where
            )
        for i, o in enumerate(items):
            rec = f"{where}[{i}]"
            if not isinstance(o, Mapping):
                raise TraceError(file, f"expected an observation object, got {type(o).__name__}", record=rec)
            tid = o.get("traceId", trace_id)
            if not isinstance(tid, str) or not tid:
                raise TraceError(file, "missing or not a string", record=rec, field="traceId")
            out.append((tid, o, f"observation {o.get('id')!r:.60}" if o.get("id") is not None else rec))
            if len(out) > MAX_OBSERVATIONS:
                raise TraceError(file, f"more than {MAX_OBSERVATIONS:,} observations")

    def trace_doc(d: Mapping, where: str) -> None:
        tid = d.get("id")
        take(d.get("observations"), tid if isinstance(tid, str) else None, f"{where}observations")

    if isinstance(data, Mapping) and "observations" in data:
        trace_doc(data, "")
    elif isinstance(data, Mapping) and "data" in data:
        take(data["data"], None, "data")
    elif (
        isinstance(data, list) and data and all(isinstance(d, Mapping) and "observations" in d for d in data)
    ):
        for k, d in enumerate(data):
            trace_doc(d, f"[{k}].")
    elif isinstance(data, list):
        take(data, None, "observations")
    else:
        raise TraceError(
            file, "expected a Langfuse trace, a list of traces or of observations, or {'data': [...]}"
        )
    return out


def _time(o: Mapping, file: str, rec: str) -> float | None:
    return iso_timestamp(o.get("startTime"), file, rec, "startTime")


def _request(inp, file: str, rec: str) -> tuple[list[Msg] | None, object]:
    """(request messages or None, tool definitions) of a generation's ``input``."""
    if inp is None:
        return None, None
    if isinstance(inp, str):
        return [Msg("user", inp)], None
    tools = None
    if isinstance(inp, Mapping) and isinstance(inp.get("messages"), list):
        tools = inp.get("tools")
        msgs: list[Msg] = []
        if inp.get("system") is not None:
            msgs += normalise({"role": "system", "content": inp["system"]}, file, f"{rec} input.system")
        for i, m in enumerate(inp["messages"]):
            msgs += normalise(m, file, f"{rec} input.messages[{i}]")
        return msgs, tools
    if isinstance(inp, list):
        msgs = []
        for i, m in enumerate(inp):
            if isinstance(m, list):  # LangChain batches: a list of message lists; the first is the request
                msgs += [x for j, mm in enumerate(m) for x in normalise(mm, file, f"{rec} input[{i}][{j}]")]
                break
            msgs += normalise(m, file, f"{rec} input[{i}]")
        return msgs, None
    return [Msg("user", args_text(inp))], None


def _response(out, file: str, rec: str) -> Msg | None:
    if out is None:
        return None
    if isinstance(out, str):
        return Msg("assistant", out)
    if isinstance(out, list):
        if not out:
            return None
        out = out[0]
    if isinstance(out, Mapping):
        if isinstance(out.get("choices"), list) and out["choices"]:  # a raw completion
            c = out["choices"][0]
            out = c.get("message", c) if isinstance(c, Mapping) else c
        if isinstance(out, Mapping) and "role" not in out and "type" not in out:
            out = {**out, "role": "assistant"}
        got = normalise(out, file, f"{rec} output")
        return Msg("assistant", got[0].text, got[0].calls) if got else None
    return Msg("assistant", args_text(out))


def usage_of(o: Mapping, file: str, rec: str) -> Usage | None:
    """A generation's usage (module doc)."""
    d = o.get("usageDetails")
    if isinstance(d, Mapping) and d:
        parts = {
            k: usage_count(v, file, rec, f"usageDetails.{k}") for k, v in d.items() if isinstance(k, str)
        }

        def total(pred) -> int | None:
            got = [v for k, v in parts.items() if v is not None and pred(k)]
            return sum(got) if got else None

        inp = total(lambda k: "input" in k)
        out = total(lambda k: "output" in k)
        read = total(lambda k: "input" in k and ("cached" in k or "cache_read" in k))
        write = total(lambda k: "input" in k and ("cache_creation" in k or "cache_write" in k))
        reasoning = total(lambda k: "output" in k and "reasoning" in k)
        u = Usage(inp, out, read, write, reasoning)
    else:
        old = o.get("usage") if isinstance(o.get("usage"), Mapping) else {}
        inp = usage_count(old.get("input", o.get("promptTokens")), file, rec, "usage.input")
        out = usage_count(old.get("output", o.get("completionTokens")), file, rec, "usage.output")
        if inp is None and out is None:
            return None
        u = Usage(inp, out)
    cost = o.get("costDetails")
    if isinstance(cost, Mapping) and cost.get("total") is not None:
        u.cost_usd = usage_cost(cost["total"], file, rec, "costDetails.total")
    else:
        for key in ("totalCost", "calculatedTotalCost"):
            if o.get(key) is not None:
                u.cost_usd = usage_cost(o[key], file, rec, key)
                break
    return u


def _tool_run(o: Mapping, t: float | None, rec: str) -> ToolRun:
    meta = o.get("metadata") if isinstance(o.get("metadata"), Mapping) else {}
    cid = meta.get("tool_call_id")
    res = o.get("output")
    return ToolRun(
        t,
        cid if isinstance(cid, str) and cid else str(o.get("id") or rec),
        o["name"] if isinstance(o.get("name"), str) and o["name"] else "?",
        args_text(o.get("input")),
        res if isinstance(res, str) or res is None else args_text(res),
    )


# ------------------------------------------------------------------------------------------------ loading
def _convert(
    trace_id: str, obs: list[tuple[dict, str, float | None]], file: str, name: str | None
) -> Trace | None:
    def order(x: tuple[dict, str, float | None]) -> tuple:
        return (x[2] if x[2] is not None else float("inf"), str(x[0].get("id")))

    obs = sorted(obs, key=order)
    gens = [x for x in obs if x[0].get("type") == "GENERATION"]
    if not gens:
        return None
    calls = []
    model = None
    for k, (o, rec, t) in enumerate(gens):
        inp, tools = _request(o.get("input"), file, rec)
        if k == 0 and tools is None and isinstance(o.get("modelParameters"), Mapping):
            tools = o["modelParameters"].get("tools")
        calls.append(LoggedCall(t, inp, _response(o.get("output"), file, rec), usage_of(o, file, rec), tools))
        if model is None and isinstance(o.get("model"), str):
            model = o["model"]
    runs = [_tool_run(o, t, rec) for o, rec, t in obs if o.get("type") == "TOOL"]
    c = rebuild(file, trace_id, calls, runs)
    agent = name
    if agent is None:
        roots = [o for o, _, _ in obs if not o.get("parentObservationId") and isinstance(o.get("name"), str)]
        agent = roots[0]["name"] if roots else None
    return conversation_trace(c, trace_id, FORMAT, file, model, agent)


def load(path: Path) -> Iterator[Trace]:
    file = path.name
    data = read_json_file(path)
    groups: dict[str, list[tuple[dict, str, float | None]]] = {}
    for tid, o, rec in observations(data, file):
        groups.setdefault(tid, []).append((o, rec, _time(o, file, rec)))
    names = {}
    for d in data if isinstance(data, list) else [data]:
        if isinstance(d, Mapping) and isinstance(d.get("id"), str) and isinstance(d.get("name"), str):
            names[d["id"]] = d["name"]
    yield from converted(
        ((tid, groups[tid]) for tid in by_first_time(groups)),
        lambda tid, run: _convert(tid, run, file, names.get(tid)),
        file,
        "no GENERATION observations (the model calls) in any trace",
    )


register(Importer(FORMAT, (".json",), _sniff, load))
