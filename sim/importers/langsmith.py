"""LangSmith runs: as the SDK's ``Client.list_runs`` / ``read_run`` and the export give them.

Files: ``.jsonl`` (one run a line, as an export writes them) or ``.json`` (a list of runs, ``{"runs":
[...]}``, or one root run with its ``child_runs`` nested, as ``read_run(load_child_runs=True)`` gives
it). A run: ``id``, ``name``, ``run_type`` (``llm``, ``chat_model``, ``tool``, ``chain``, ...),
``start_time``, ``parent_run_id``, ``trace_id``, ``dotted_order``, ``inputs``, ``outputs``,
``extra.metadata``, and the token fields the server derives (``prompt_tokens``, ``completion_tokens``,
``prompt_token_details``, ``total_cost``).

Runs: one trace per LangSmith trace (``trace_id``, else the root reached through ``parent_run_id``), in
the order of their first run. Calls: the ``llm`` (and ``chat_model``) runs in ``start_time`` order
(ties by ``dotted_order``, then id). The request is ``inputs.messages`` (a list of messages, or LangChain's
list of message lists: the first), else ``inputs.prompts`` (the first prompt as one user message), with
``inputs.tools`` as the tool definitions; messages in OpenAI, LangChain (serialised or not) or Anthropic
shapes (``sim.importers.request_log``). The response is ``outputs.choices[0].message``, else
``outputs.generations[0][0].message`` (or its ``text``), else an ``outputs`` that is itself a message,
else ``outputs.output``. The conversation is rebuilt from the requests as for every request log (a
request that left messages out hides them from that call on). An ``llm`` run without a request takes the
``tool`` runs between it and the next call as its tool calls (arguments: ``inputs.input`` or the
``inputs``; call id ``extra.metadata.tool_call_id``, else the run id) and their ``outputs.output`` as
results.

Usage: ``usage_metadata`` (in ``outputs`` or ``extra.metadata``: LangChain's ``input_tokens`` is the sum
of every input token type, cached ones included; ``input_token_details.cache_read`` /
``cache_creation`` the cached parts), else the run's ``prompt_tokens``, ``completion_tokens`` and
``prompt_token_details``, else ``outputs.llm_output.token_usage`` or ``outputs.usage`` (OpenAI's
fields). Cost: ``total_cost``. The model: ``extra.metadata.ls_model_name``, ``outputs.model`` or
``inputs.model`` of the first call; the agent: the root run's ``name``. Recorded policy ``raw``.

Not modelled: feedback, attachments, errors of runs (an errored ``llm`` run without outputs is a call
without a response), retriever and prompt runs (not calls).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path

from sim.core.types import Trace
from sim.importers import Importer, register
from sim.importers.chat_messages import usage_of as chat_usage
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
    bounded_lines,
    by_first_time,
    conversation_trace,
    converted,
    normalise,
    rebuild,
)
from sim.util.errors import TraceError

FORMAT = "langsmith"
CALL_TYPES = frozenset({"llm", "chat_model"})
MAX_RUNS = 1_000_000
MAX_FILE_BYTES = 1 << 30
_SNIFF_BYTES = 1 << 18
_RUN_TYPE = re.compile(rb'"run_type"\s*:\s*"')


def _sniff(path: Path) -> bool:
    """LangSmith's run keys (``run_type``, ``start_time`` and one of ``trace_id``, ``parent_run_id``,
    ``dotted_order``, ``child_runs``) in the first 256 KiB."""
    with open(path, "rb") as f:
        head = f.read(_SNIFF_BYTES)
    return (
        head.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] in (b"{", b"[")
        and _RUN_TYPE.search(head) is not None
        and b'"start_time"' in head
        and any(k in head for k in (b'"trace_id"', b'"parent_run_id"', b'"dotted_order"', b'"child_runs"'))
    )


# ------------------------------------------------------------------------------------------------ reading
def read_runs(path: Path) -> list[tuple[dict, str]]:
    """(run, record label) of every run of the file, nested ``child_runs`` flattened."""
    file = path.name
    out: list[tuple[dict, str]] = []

    def take(r, rec: str, parent: str | None) -> None:
        stack = [(r, rec, parent)]
        while stack:
            r, rec, parent = stack.pop()
            if not isinstance(r, Mapping):
                raise TraceError(file, f"expected a run object, got {type(r).__name__}", record=rec)
            if r.get("parent_run_id") is None and parent is not None:
                r = {**r, "parent_run_id": parent}
            out.append((r, f"run {r.get('id')!r:.60}" if r.get("id") is not None else rec))
            if len(out) > MAX_RUNS:
                raise TraceError(file, f"more than {MAX_RUNS:,} runs")
            kids = r.get("child_runs")
            if kids is not None:
                if not isinstance(kids, list):
                    raise TraceError(file, "expected a list", record=out[-1][1], field="child_runs")
                rid = r.get("id") if isinstance(r.get("id"), str) else None
                stack += [
                    (k, f"{out[-1][1]} child_runs[{i}]", rid) for i, k in reversed(list(enumerate(kids)))
                ]

    if path.suffix.lower() == ".jsonl":
        try:
            if path.stat().st_size > MAX_FILE_BYTES:
                raise TraceError(file, f"larger than the {MAX_FILE_BYTES:,} bytes ctxsim reads as runs")
        except OSError as exc:
            raise TraceError(file, f"cannot read ({exc.strerror or exc})") from None
        for lineno, r, problem in bounded_lines(path):
            if problem is not None:
                raise TraceError(file, problem, record=f"line {lineno}")
            take(r, f"line {lineno}", None)
        return out
    data = read_json_file(path)
    if isinstance(data, Mapping) and isinstance(data.get("runs"), list):
        data = data["runs"]
    if isinstance(data, Mapping):
        take(data, "run", None)
    elif isinstance(data, list):
        for i, r in enumerate(data):
            take(r, f"[{i}]", None)
    else:
        raise TraceError(file, "expected a run, a list of runs or {'runs': [...]}")
    return out


def _request(inputs, file: str, rec: str) -> tuple[list[Msg] | None, object]:
    if not isinstance(inputs, Mapping):
        return None, None
    msgs = inputs.get("messages")
    if isinstance(msgs, list):
        if msgs and all(isinstance(m, list) for m in msgs):  # LangChain: one list per prompt
            msgs = msgs[0]
        out: list[Msg] = []
        if inputs.get("system") is not None:
            out += normalise({"role": "system", "content": inputs["system"]}, file, f"{rec} inputs.system")
        for i, m in enumerate(msgs):
            out += normalise(m, file, f"{rec} inputs.messages[{i}]")
        return out, inputs.get("tools")
    prompts = inputs.get("prompts")
    if isinstance(prompts, list) and prompts and isinstance(prompts[0], str):
        return [Msg("user", prompts[0])], None
    return None, None


def _response(outputs, file: str, rec: str) -> Msg | None:
    if not isinstance(outputs, Mapping):
        return None
    m = None
    choices = outputs.get("choices")
    gens = outputs.get("generations")
    if isinstance(choices, list) and choices and isinstance(choices[0], Mapping):
        m = choices[0].get("message")
    elif isinstance(gens, list) and gens:
        g = gens[0][0] if isinstance(gens[0], list) and gens[0] else gens[0]
        if isinstance(g, Mapping):
            m = g.get("message") or {"role": "assistant", "content": g.get("text")}
    elif "role" in outputs or "type" in outputs or "tool_calls" in outputs:
        m = outputs
    elif isinstance(outputs.get("output"), Mapping | str):
        m = outputs["output"]
    if m is None:
        return None
    if isinstance(m, str):
        return Msg("assistant", m)
    if isinstance(m, Mapping) and "role" not in m and "type" not in m and m.get("lc") is None:
        m = {**m, "role": "assistant"}
    got = normalise(m, file, f"{rec} outputs")
    return Msg("assistant", got[0].text, got[0].calls) if got else None


def usage_of(r: Mapping, file: str, rec: str) -> Usage | None:
    """A call run's usage (module doc)."""
    outputs = r.get("outputs") if isinstance(r.get("outputs"), Mapping) else {}
    extra = r.get("extra") if isinstance(r.get("extra"), Mapping) else {}
    meta = extra.get("metadata") if isinstance(extra.get("metadata"), Mapping) else {}
    um = outputs.get("usage_metadata") or meta.get("usage_metadata")
    u: Usage | None = None
    if isinstance(um, Mapping):
        det = um.get("input_token_details") if isinstance(um.get("input_token_details"), Mapping) else {}
        odet = um.get("output_token_details") if isinstance(um.get("output_token_details"), Mapping) else {}
        u = Usage(
            usage_count(um.get("input_tokens"), file, rec, "usage_metadata.input_tokens"),
            usage_count(um.get("output_tokens"), file, rec, "usage_metadata.output_tokens"),
            usage_count(det.get("cache_read"), file, rec, "usage_metadata.input_token_details.cache_read"),
            usage_count(
                det.get("cache_creation"), file, rec, "usage_metadata.input_token_details.cache_creation"
            ),
            usage_count(odet.get("reasoning"), file, rec, "usage_metadata.output_token_details.reasoning"),
        )
    elif r.get("prompt_tokens") is not None or r.get("completion_tokens") is not None:
        det = r.get("prompt_token_details") if isinstance(r.get("prompt_token_details"), Mapping) else {}
        u = Usage(
            usage_count(r.get("prompt_tokens"), file, rec, "prompt_tokens"),
            usage_count(r.get("completion_tokens"), file, rec, "completion_tokens"),
            usage_count(det.get("cache_read"), file, rec, "prompt_token_details.cache_read"),
            usage_count(det.get("cache_creation"), file, rec, "prompt_token_details.cache_creation"),
        )
    else:
        llm_output = outputs.get("llm_output") if isinstance(outputs.get("llm_output"), Mapping) else {}
        raw = llm_output.get("token_usage") or outputs.get("usage")
        if isinstance(raw, Mapping):
            u = chat_usage(raw, file, rec)
    if u is not None and r.get("total_cost") is not None:
        cost = r["total_cost"]
        if isinstance(cost, str):
            try:
                cost = float(cost)
            except ValueError:
                raise TraceError(
                    file, f"expected a number, got {cost!r:.40}", record=rec, field="total_cost"
                ) from None
        u.cost_usd = usage_cost(cost, file, rec, "total_cost")
    return u


def _tool_run(r: Mapping, t: float | None, rec: str) -> ToolRun:
    extra = r.get("extra") if isinstance(r.get("extra"), Mapping) else {}
    meta = extra.get("metadata") if isinstance(extra.get("metadata"), Mapping) else {}
    cid = meta.get("tool_call_id")
    inputs = r.get("inputs")
    args = inputs.get("input", inputs) if isinstance(inputs, Mapping) else inputs
    outputs = r.get("outputs")
    res = outputs.get("output", outputs) if isinstance(outputs, Mapping) else outputs
    return ToolRun(
        t,
        cid if isinstance(cid, str) and cid else str(r.get("id") or rec),
        r["name"] if isinstance(r.get("name"), str) and r["name"] else "?",
        args_text(args),
        res if isinstance(res, str) or res is None else args_text(res),
    )


# ------------------------------------------------------------------------------------------------ runs
def _traces(runs: list[tuple[dict, str]], file: str) -> dict[str, list[tuple[dict, str, float | None]]]:
    """Runs grouped by trace: ``trace_id``, else the root reached through ``parent_run_id``."""
    parent = {str(r.get("id")): r.get("parent_run_id") for r, _ in runs if r.get("id") is not None}
    root_of: dict[str, str] = {}

    def root(rid: str) -> str:
        path = []
        seen = set()
        while (
            rid not in root_of
            and isinstance(parent.get(rid), str)
            and parent[rid] in parent
            and rid not in seen
        ):
            seen.add(rid)
            path.append(rid)
            rid = parent[rid]
        top = root_of.get(rid, rid)
        for p in path:
            root_of[p] = top
        root_of[rid] = top
        return top

    groups: dict[str, list[tuple[dict, str, float | None]]] = {}
    for r, rec in runs:
        tid = r.get("trace_id")
        if tid is not None and not isinstance(tid, str):
            raise TraceError(
                file, f"expected a string, got {type(tid).__name__}", record=rec, field="trace_id"
            )
        if tid is None:
            tid = root(str(r.get("id") or rec))
        t = iso_timestamp(r.get("start_time"), file, rec, "start_time")
        groups.setdefault(tid, []).append((r, rec, t))
    return groups


def _convert(trace_id: str, runs: list[tuple[dict, str, float | None]], file: str) -> Trace | None:
    def order(x: tuple[dict, str, float | None]) -> tuple:
        r, _, t = x
        return (t if t is not None else float("inf"), str(r.get("dotted_order") or ""), str(r.get("id")))

    runs = sorted(runs, key=order)
    llms = [x for x in runs if x[0].get("run_type") in CALL_TYPES]
    if not llms:
        return None
    calls = []
    model = None
    for r, rec, t in llms:
        inp, tools = _request(r.get("inputs"), file, rec)
        calls.append(
            LoggedCall(t, inp, _response(r.get("outputs"), file, rec), usage_of(r, file, rec), tools)
        )
        if model is None:
            meta = (r.get("extra") or {}).get("metadata") if isinstance(r.get("extra"), Mapping) else None
            for v in (
                meta.get("ls_model_name") if isinstance(meta, Mapping) else None,
                (r.get("outputs") or {}).get("model") if isinstance(r.get("outputs"), Mapping) else None,
                (r.get("inputs") or {}).get("model") if isinstance(r.get("inputs"), Mapping) else None,
            ):
                if isinstance(v, str) and v:
                    model = v
                    break
    tool_runs = [_tool_run(r, t, rec) for r, rec, t in runs if r.get("run_type") == "tool"]
    c = rebuild(file, trace_id, calls, tool_runs)
    roots = [r for r, _, _ in runs if not r.get("parent_run_id") and isinstance(r.get("name"), str)]
    return conversation_trace(c, trace_id, FORMAT, file, model, roots[0]["name"] if roots else None)


def load(path: Path) -> Iterator[Trace]:
    file = path.name
    groups = _traces(read_runs(path), file)
    order = ((tid, groups[tid]) for tid in by_first_time(groups))
    yield from converted(
        order, lambda tid, run: _convert(tid, run, file), file, "no llm runs (the model calls) in any trace"
    )


register(Importer(FORMAT, (".json", ".jsonl"), _sniff, load))
