"""Hand-built traces whose arithmetic a reader can check."""

from __future__ import annotations

from sim.core.types import Call, Event, Trace


def ev(index: int, kind: str, content: str, tokens: int, **kw) -> Event:
    return Event(
        index=index,
        kind=kind,
        content=content,
        bytes=len(content.encode()),
        chars=len(content),
        lines=len(content.splitlines()),
        tokens=tokens,
        tokens_provenance="synthetic",
        **kw,
    )


def swe_trace(
    obs: list[tuple[str, int]], assistant_tokens: int = 10, system: int = 100, task: int = 50, **trace_kw
) -> Trace:
    """system, user task, then (assistant, tool_result) per observation; one call per assistant event.

    Recorded input of each call = the sum of its view (residual 0), output 7 tokens per call.
    """
    events = [ev(0, "system", "sys", system), ev(1, "user", "task\nline2", task)]
    calls = []
    for k, (text, tok) in enumerate(obs):
        a = len(events)
        events.append(ev(a, "assistant", f"cmd {k}", assistant_tokens, tool_call_ids=(f"c{k}",)))
        calls.append(a)
        events.append(ev(a + 1, "tool_result", text, tok, tool_call_id=f"c{k}"))
    prefix = [0]
    for e in events:
        prefix.append(prefix[-1] + e.tokens)
    return Trace(
        trace_id=trace_kw.pop("trace_id", "hand"),
        source_format="ctxsim-scenario",
        events=tuple(events),
        calls=tuple(
            Call(
                index=j, event_index=a, view_end=a, input_tokens=prefix[a], output_tokens=7, residual_tokens=0
            )
            for j, a in enumerate(calls)
        ),
        bytes_per_token=trace_kw.pop("bytes_per_token", 4.0),
        **trace_kw,
    )


def calls_trace(trace_id: str, events: list[Event], call_events: list[int]) -> Trace:
    """A trace with a model call at each of ``call_events`` (its view: the events before it; its input
    the recorded sum of their tokens; 7 output tokens each)."""
    prefix = [0]
    for e in events:
        prefix.append(prefix[-1] + e.tokens)
    return Trace(
        trace_id, "ctxsim-scenario", tuple(events),
        tuple(Call(index=j, event_index=a, view_end=a, input_tokens=prefix[a], output_tokens=7)
              for j, a in enumerate(call_events)),
        bytes_per_token=4.0,
    )  # fmt: skip


def invocations(n: int) -> Trace:
    """system (100), then per user-initiated invocation (turn) j: user q_j (20), assistant with a call
    (10), its result (100), a final answer (10); a call on each assistant event."""
    events, calls = [ev(0, "system", "sys", 100)], []
    for j in range(n):
        b = len(events)
        events += [
            ev(b, "user", f"q{j}", 20),
            ev(b + 1, "assistant", f"call {j}", 10, tool_call_ids=(f"c{j}",)),
            ev(b + 2, "tool_result", "out", 100, tool_call_id=f"c{j}"),
            ev(b + 3, "assistant", f"answer {j}", 10),
        ]
        calls += [b + 1, b + 3]
    return calls_trace("invocations", events, calls)
