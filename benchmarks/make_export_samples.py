"""Make the small observability-export samples under tests/data/exports/ with the tools' own SDKs.

Not run by the tests or CI (it needs the SDKs, which ctxsim does not depend on): run it by hand in a
throwaway virtual environment outside the repository, then commit what it writes:

    python3 -m venv /tmp/otelvenv
    /tmp/otelvenv/bin/pip install opentelemetry-sdk opentelemetry-exporter-otlp-proto-common \
        opentelemetry-instrumentation-openai-v2 openai langfuse langsmith
    /tmp/otelvenv/bin/python benchmarks/make_export_samples.py [--out tests/data/exports] [--only otel]

No network: the model is scripted and reached through an ``httpx.MockTransport``; the spans are kept
in memory and written as OTLP JSON the way the collector's ``file`` exporter writes them (one
``ExportTraceServiceRequest`` a line, hex ids), encoded by the SDK's own OTLP encoder.

What each file is (the agent is the same scripted support agent in every format):

- ``otel_genai_spans.jsonl``: chat spans of ``opentelemetry-util-genai``'s ``TelemetryHandler.inference``
  (what GenAI instrumentations build on; the OpenAI instrumentation 2.3b0 here writes only the older
  events) on the latest GenAI conventions, content on spans (``gen_ai.input.messages`` /
  ``gen_ai.output.messages``, ``gen_ai.system_instructions``, ``gen_ai.tool.definitions``);
  ``invoke_agent`` and ``execute_tool`` spans from the same handler. Two runs: one with
  ``gen_ai.conversation.id`` whose agent trims its history before the last call, one without.
- ``otel_genai_events.jsonl``: the OpenAI instrumentation (``opentelemetry-instrumentation-openai-v2``
  2.3b0, with ``opentelemetry-util-genai`` 1.2b0 and ``wrapt<2``) on its default (v1.30) conventions with
  content capture on: messages as per-message log events (``resourceLogs``) beside the spans.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
from pathlib import Path

SYSTEM_1 = "You are a support agent. Use the tools; answer with the refund id."
USER_1 = "Alice says her last order never arrived. Find it and refund it."
SYSTEM_2 = "You are a devops helper. Read files with read_file."
USER_2 = "Which port does the service listen on?"
TOOLS = [
    {"type": "function", "function": {"name": "search_orders", "parameters": {"type": "object"}}},
    {"type": "function", "function": {"name": "refund", "parameters": {"type": "object"}}},
    {"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}},
]
RESULTS = {
    "search_orders": json.dumps([{"order_id": "ORD-7731", "total": 129.95, "status": "lost in transit"}]),
    "refund": json.dumps({"refund_id": "RF-55120", "order_id": "ORD-7731", "amount": 129.95}),
    "read_file:config.yaml": "Error: file not found: config.yaml",
    "read_file:conf/config.yaml": "service:\n  name: billing\n  port: 8080\n",
}


def scripted_reply(messages: list[dict]) -> dict:
    """The scripted model: the next step of its run, chosen by the system prompt and the tool results."""
    system = messages[0]["content"]
    results = [m for m in messages if m["role"] == "tool"]
    if system == SYSTEM_1:
        steps = [
            ("search_orders", {"customer": "alice", "latest": True}),
            ("refund", {"order_id": "ORD-7731", "amount": 129.95}),
            "Refunded 129.95 for order ORD-7731; the refund id is RF-55120.",
        ]
        step = steps[min(len(results), 2)] if "RF-55120" not in json.dumps(messages) else steps[2]
    else:
        steps = [
            ("read_file", {"path": "config.yaml"}),
            ("read_file", {"path": "conf/config.yaml"}),
            "The service listens on port 8080.",
        ]
        step = steps[min(len(results), 2)]
    if isinstance(step, str):
        return {"role": "assistant", "content": step}
    n = sum(1 for m in messages if m["role"] == "assistant")
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": f"call_{system[:3].lower()}{n}",
                "type": "function",
                "function": {"name": step[0], "arguments": json.dumps(step[1])},
            }
        ],
    }


def usage_for(messages: list[dict], reply: dict) -> dict:
    """Made-up but exact usage: what the export must carry through to the replay."""
    prompt = 60 + len(json.dumps(messages)) // 4
    cached = (prompt - 40) // 64 * 64 if len(messages) > 2 else 0
    completion = 6 + len(json.dumps(reply)) // 5
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
    }


def mock_client():
    import httpx
    from openai import OpenAI

    count = [0]

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        reply = scripted_reply(body["messages"])
        count[0] += 1
        return httpx.Response(
            200,
            json={
                "id": f"chatcmpl-{count[0]}",
                "object": "chat.completion",
                "created": 1764979200 + count[0],
                "model": "gpt-4o-mini-2024-07-18",
                "choices": [
                    {
                        "index": 0,
                        "message": reply,
                        "finish_reason": "tool_calls" if reply.get("tool_calls") else "stop",
                    }
                ],
                "usage": usage_for(body["messages"], reply),
            },
        )

    return OpenAI(
        api_key="offline",
        base_url="http://model.invalid/v1",
        http_client=httpx.Client(transport=httpx.MockTransport(handler)),
    )


def util_genai_chat(handler, client):
    """A chat call instrumented with ``opentelemetry-util-genai``'s ``TelemetryHandler.inference`` (the
    library GenAI instrumentations build on), on the latest conventions: messages, system instructions
    and tool definitions as span attributes, cached tokens as ``gen_ai.usage.cache_read.input_tokens``."""
    from opentelemetry.util.genai import types as T

    def parts(m: dict) -> list:
        out = [T.TextPart(content=m["content"])] if m.get("content") else []
        for tc in m.get("tool_calls") or []:
            args = json.loads(tc["function"]["arguments"])
            out.append(T.ToolCallRequestPart(arguments=args, name=tc["function"]["name"], id=tc["id"]))
        if m["role"] == "tool":
            out = [T.ToolCallResponsePart(response=m["content"], id=m["tool_call_id"])]
        return out

    def chat(model: str, messages: list[dict], tools: list[dict]):
        with handler.inference("openai", request_model=model) as inv:
            inv.system_instruction = [
                T.TextPart(content=m["content"]) for m in messages if m["role"] == "system"
            ]
            inv.input_messages = [
                T.InputMessage(role=m["role"], parts=parts(m)) for m in messages if m["role"] != "system"
            ]
            inv.tool_definitions = [
                T.FunctionToolDefinition(
                    name=t["function"]["name"], description=None, parameters=t["function"]["parameters"]
                )
                for t in tools
            ]
            resp = client.chat.completions.create(model=model, messages=messages, tools=tools)
            msg = resp.choices[0].message.model_dump(exclude_none=True)
            inv.output_messages = [
                T.OutputMessage(
                    role="assistant", parts=parts(msg), finish_reason=resp.choices[0].finish_reason
                )
            ]
            inv.response_model_name = resp.model
            inv.response_id = resp.id
            inv.input_tokens = resp.usage.prompt_tokens
            inv.output_tokens = resp.usage.completion_tokens
            inv.cache_read_input_tokens = resp.usage.prompt_tokens_details.cached_tokens
        return resp

    return chat


def run_agent(chat, handler, system: str, user: str, conversation_id: str | None, trim: bool) -> None:
    """The agent loop: call the model, run the tools it asks for, until it answers."""
    messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    with handler.invoke_local_agent(
        agent_name="support-bot", request_model="gpt-4o-mini", conversation_id=conversation_id
    ):
        for _ in range(5):
            sent = messages
            if trim and len(messages) > 4:  # the agent keeps the task and the latest round trip only
                sent = messages[:2] + messages[-2:]
            resp = chat(model="gpt-4o-mini", messages=sent, tools=TOOLS)
            msg = resp.choices[0].message
            messages.append(msg.model_dump(exclude_none=True))
            if not msg.tool_calls:
                return
            for tc in msg.tool_calls:
                args = json.loads(tc.function.arguments)
                key = tc.function.name if tc.function.name != "read_file" else f"read_file:{args['path']}"
                with handler.tool(tc.function.name) as inv:
                    inv.tool_call_id = tc.id
                    inv.arguments = args
                    inv.tool_result = RESULTS[key]
                messages.append({"role": "tool", "tool_call_id": tc.id, "content": RESULTS[key]})


def _hex_ids(d):
    """OTLP JSON writes trace and span ids as hex, where protobuf's JSON mapping writes base64."""
    if isinstance(d, dict):
        return {
            k: (
                base64.b64decode(v).hex()
                if k in ("traceId", "spanId", "parentSpanId") and isinstance(v, str)
                else _hex_ids(v)
            )
            for k, v in d.items()
        }
    if isinstance(d, list):
        return [_hex_ids(x) for x in d]
    return d


def otel(out: Path, name: str, latest: bool) -> None:
    """One OTLP JSON Lines file of two agent runs (module doc)."""
    os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "span_only" if latest else "true"
    if latest:
        os.environ["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"
    else:
        os.environ.pop("OTEL_SEMCONV_STABILITY_OPT_IN", None)
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.util.genai.handler import TelemetryHandler

    resource = Resource.create({"service.name": "support-bot"})
    spans = InMemorySpanExporter()
    tp = TracerProvider(resource=resource)
    tp.add_span_processor(SimpleSpanProcessor(spans))
    logs = InMemoryLogRecordExporter()
    lp = LoggerProvider(resource=resource)
    lp.add_log_record_processor(SimpleLogRecordProcessor(logs))
    handler = TelemetryHandler(tracer_provider=tp, logger_provider=lp)
    client = mock_client()
    if latest:
        chat = util_genai_chat(handler, client)
    else:
        inst = OpenAIInstrumentor()
        inst.instrument(tracer_provider=tp, logger_provider=lp)
        chat = client.chat.completions.create
    run_agent(chat, handler, SYSTEM_1, USER_1, "conv-support-1" if latest else None, trim=latest)
    run_agent(chat, handler, SYSTEM_2, USER_2, None, trim=False)
    if not latest:
        inst.uninstrument()
    lines = [json.dumps(_hex_ids(MessageToDict(encode_spans(spans.get_finished_spans()))))]
    finished_logs = logs.get_finished_logs()
    if finished_logs:
        lines.append(json.dumps(_hex_ids(MessageToDict(encode_logs(finished_logs)))))
    (out / name).write_text("\n".join(lines) + "\n")
    print(f"wrote {out / name}: {len(spans.get_finished_spans())} spans, {len(finished_logs)} log records")


def scripted_runs() -> list[dict]:
    """The two runs of the scripted agent without any tracing: per call the messages sent, the reply
    and its usage; per tool its name, arguments and result; each with made-up but increasing times."""
    import datetime as dt

    clock = [dt.datetime(2026, 12, 1, 9, 0, 0, tzinfo=dt.UTC)]

    def tick(ms: int = 700) -> dt.datetime:
        clock[0] += dt.timedelta(milliseconds=ms)
        return clock[0]

    runs = []
    for system, user, trim in ((SYSTEM_1, USER_1, True), (SYSTEM_2, USER_2, False)):
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        run = {"system": system, "user": user, "start": tick(), "steps": []}
        for _ in range(5):
            sent = messages[:2] + messages[-2:] if trim and len(messages) > 4 else list(messages)
            reply = scripted_reply(sent)
            start = tick()
            run["steps"].append(
                {
                    "kind": "llm",
                    "start": start,
                    "end": tick(900),
                    "input": sent,
                    "output": reply,
                    "usage": usage_for(sent, reply),
                }
            )
            messages.append(reply)
            if not reply.get("tool_calls"):
                break
            for tc in reply["tool_calls"]:
                args = json.loads(tc["function"]["arguments"])
                key = (
                    tc["function"]["name"]
                    if tc["function"]["name"] != "read_file"
                    else f"read_file:{args['path']}"
                )
                start = tick(50)
                run["steps"].append(
                    {
                        "kind": "tool",
                        "start": start,
                        "end": tick(120),
                        "id": tc["id"],
                        "name": tc["function"]["name"],
                        "args": args,
                        "result": RESULTS[key],
                    }
                )
                messages.append({"role": "tool", "tool_call_id": tc["id"], "content": RESULTS[key]})
        run["end"] = tick()
        run["answer"] = messages[-1]["content"]
        runs.append(run)
    return runs


def langfuse(out: Path) -> None:
    """Langfuse's public API shapes, built with the Langfuse SDK's own API data classes
    (``langfuse.api.ObservationV2``, ``ObservationsV2Response``): the SDK sends spans to a Langfuse
    server, which alone makes the API's records, so no export can be produced offline. Usage details
    as the server keeps OpenAI usage: ``input`` without the cached part, ``input_cached_tokens``."""
    from langfuse.api.commons.types.observation_v2 import ObservationV2
    from langfuse.api.observations.types.observations_v2meta import ObservationsV2Meta
    from langfuse.api.observations.types.observations_v2response import ObservationsV2Response

    observations = []
    traces = []
    for r, run in enumerate(scripted_runs()):
        trace_id = f"lf-trace-{r + 1}"
        root = f"lf-obs-{r + 1}-0"

        def obs(n: int, r: int = r, trace_id: str = trace_id, **kw) -> ObservationV2:
            return ObservationV2(id=f"lf-obs-{r + 1}-{n}", trace_id=trace_id, project_id="demo-project", **kw)

        items = [
            obs(
                0,
                start_time=run["start"],
                end_time=run["end"],
                type="AGENT",
                name="support-bot",
                input=run["user"],
                output=run["answer"],
                session_id="lf-session-1",
            )
        ]
        for n, st in enumerate(run["steps"], start=1):
            if st["kind"] == "llm":
                u = st["usage"]
                cached = u["prompt_tokens_details"]["cached_tokens"]
                details = {
                    "input": u["prompt_tokens"] - cached,
                    "output": u["completion_tokens"],
                    "total": u["total_tokens"],
                }
                if cached:
                    details["input_cached_tokens"] = cached
                cost = {
                    "input": round(details["input"] * 0.15e-6 + cached * 0.075e-6, 9),
                    "output": round(u["completion_tokens"] * 0.6e-6, 9),
                }
                cost["total"] = round(cost["input"] + cost["output"], 9)
                items.append(
                    obs(
                        n,
                        start_time=st["start"],
                        end_time=st["end"],
                        parent_observation_id=root,
                        type="GENERATION",
                        name="OpenAI-generation",
                        model="gpt-4o-mini-2024-07-18",
                        input=st["input"],
                        output=st["output"],
                        usage_details=details,
                        cost_details=cost,
                        total_cost=cost["total"],
                        model_parameters={"tools": TOOLS},
                    )
                )
            else:
                items.append(
                    obs(
                        n,
                        start_time=st["start"],
                        end_time=st["end"],
                        parent_observation_id=root,
                        type="TOOL",
                        name=st["name"],
                        input=st["args"],
                        output=st["result"],
                        metadata={"tool_call_id": st["id"]},
                    )
                )
        observations += items
        traces.append((trace_id, run, items))
    resp = ObservationsV2Response(data=observations, meta=ObservationsV2Meta(cursor=None))
    (out / "langfuse_observations.json").write_text(
        json.dumps(json.loads(resp.json(by_alias=True, exclude_none=True)), indent=1) + "\n"
    )
    trace_id, run, items = traces[0]
    doc = {  # GET /api/public/traces/{id} (TraceWithFullDetails) as the UI's JSON view shows it
        "id": trace_id,
        "timestamp": run["start"].isoformat().replace("+00:00", "Z"),
        "name": "support-bot",
        "input": run["user"],
        "output": run["answer"],
        "sessionId": "lf-session-1",
        "projectId": "demo-project",
        "observations": [json.loads(o.json(by_alias=True, exclude_none=True)) for o in items],
    }
    (out / "langfuse_trace.json").write_text(json.dumps(doc, indent=1) + "\n")
    print(
        f"wrote {out / 'langfuse_observations.json'} ({len(observations)} observations), "
        f"{out / 'langfuse_trace.json'}"
    )


def langsmith(out: Path) -> None:
    """LangSmith runs made by the LangSmith SDK itself: ``@traceable`` (a ``chain`` root, ``llm`` runs
    whose outputs carry ``usage_metadata``, ``tool`` runs) under ``tracing_context(enabled="local")``,
    which traces without sending; each finished run tree becomes the SDK's ``schemas.Run`` records as
    ``Client.list_runs`` returns them (one JSON line each: ids, ``parent_run_id``, ``trace_id``,
    ``dotted_order``, ``prompt_tokens``/``completion_tokens``/``prompt_token_details`` as the server
    derives them from ``usage_metadata``)."""
    import uuid

    from langsmith import schemas, traceable, tracing_context

    trees = []
    ns = uuid.UUID("6a6b9b1e-0000-4000-8000-000000000000")

    def llm(messages: list[dict], tools: list[dict], model: str = "gpt-4o-mini") -> dict:
        reply = scripted_reply(messages)
        u = usage_for(messages, reply)
        usage = {
            "input_tokens": u["prompt_tokens"],
            "output_tokens": u["completion_tokens"],
            "total_tokens": u["total_tokens"],
            "input_token_details": {"cache_read": u["prompt_tokens_details"]["cached_tokens"]},
        }
        return {
            "choices": [{"index": 0, "message": reply}],
            "model": "gpt-4o-mini-2024-07-18",
            "usage_metadata": usage,
        }

    def tool(name: str):
        def run(**args) -> str:  # traced with the tool's arguments as its inputs
            return RESULTS[name if name != "read_file" else f"read_file:{args['path']}"]

        return run

    def agent(system: str, user: str, trim: bool) -> str:
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        for _ in range(5):
            sent = messages[:2] + messages[-2:] if trim and len(messages) > 4 else list(messages)
            reply = traceable(run_type="llm", name="ChatOpenAI")(llm)(sent, TOOLS)["choices"][0]["message"]
            messages.append(reply)
            if not reply.get("tool_calls"):
                return reply["content"]
            for tc in reply["tool_calls"]:
                args = json.loads(tc["function"]["arguments"])
                name = tc["function"]["name"]
                result = traceable(run_type="tool", name=name, metadata={"tool_call_id": tc["id"]})(
                    tool(name)
                )(**args)
                messages.append({"role": "tool", "tool_call_id": tc["id"], "content": result})
        return ""

    with tracing_context(enabled="local"):
        for system, user, trim in ((SYSTEM_1, USER_1, True), (SYSTEM_2, USER_2, False)):
            traceable(run_type="chain", name="support-bot")(agent)(
                system, user, trim, langsmith_extra={"on_end": trees.append}
            )

    def flatten(rt, out: list) -> None:
        o = rt.outputs or {}
        um = o.get("usage_metadata") or {}
        rec = schemas.Run(
            id=rt.id,
            name=rt.name,
            run_type=rt.run_type,
            start_time=rt.start_time,
            end_time=rt.end_time,
            inputs=rt.inputs,
            outputs=rt.outputs,
            extra=rt.extra,
            error=rt.error,
            parent_run_id=rt.parent_run_id,
            trace_id=rt.trace_id,
            dotted_order=rt.dotted_order,
            tags=rt.tags,
            session_id=ns,
            status="success",
            prompt_tokens=um.get("input_tokens"),
            completion_tokens=um.get("output_tokens"),
            total_tokens=um.get("total_tokens"),
            prompt_token_details=um.get("input_token_details"),
            child_run_ids=[c.id for c in rt.child_runs] or None,
        )
        out.append(rec)
        for c in rt.child_runs:
            flatten(c, out)

    runs: list = []
    for rt in trees:
        flatten(rt, runs)
    lines = [json.dumps(json.loads(r.model_dump_json(exclude_none=True)), sort_keys=True) for r in runs]
    (out / "langsmith_runs.jsonl").write_text("\n".join(lines) + "\n")
    print(f"wrote {out / 'langsmith_runs.jsonl'} ({len(runs)} runs)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="tests/data/exports")
    ap.add_argument("--only", choices=["otel-latest", "otel-events", "langfuse", "langsmith"])
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.only in (None, "otel-latest"):
        otel(out, "otel_genai_spans.jsonl", latest=True)
    if args.only in (None, "otel-events"):
        otel(out, "otel_genai_events.jsonl", latest=False)
    if args.only in (None, "langfuse"):
        langfuse(out)
    if args.only in (None, "langsmith"):
        langsmith(out)


if __name__ == "__main__":
    main()
