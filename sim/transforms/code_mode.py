"""``code_mode``: consecutive tool round-trips brokered as one program pass (issue 25 item 3).

The seed engine's Code Mode "collapses many tool round-trips into one brokered program pass", as a
what-if: each run of ``n`` consecutive agent turns that only issue tool calls (``base.round_trips``: the
turn issues tool calls, only their results follow, the next call's view ends at its turn; the final
call, the answer, never counts) becomes one call. Its turn is the program: the ``n`` turns' sizes and
output tokens summed, needing what they needed from before the run. Its result is the ``n`` results
concatenated, cut to the first ``max_result_bytes`` bytes (default 50 KiB, effect-agent's
``toolResultBounds`` default) with tokens in proportion to the bytes kept: a fact whose span lies in the
kept bytes stays (its span moved by its result's offset); the others are declared lost (``Moved``) unless
another event outside the run provides them. A longer stretch is cut into runs of ``n`` from its start;
fewer than ``n`` left over stay as they were. Needs of facts produced inside the run disappear with it
(the program consumes them itself).
"""

from __future__ import annotations

import dataclasses
import math

from sim.core.types import Call, Event, Moved, Trace
from sim.engine.model import ReplayModel
from sim.transforms.base import (
    Transform,
    check_int,
    external_needs,
    kind_of,
    outside_providers,
    rebuild,
    register,
    round_trips,
    span_events,
    spans,
    synthetic_event,
)


@register
@dataclasses.dataclass(frozen=True)
class CodeMode(Transform):
    """Runs of ``n`` tool round-trips become one brokered call with a result of <= ``max_result_bytes``."""

    name = "code_mode"
    n: int = 3
    max_result_bytes: int = 51200

    def __post_init__(self) -> None:
        check_int(self.name, "n", self.n, 2, 10_000)
        check_int(self.name, "max_result_bytes", self.max_result_bytes, 1)

    def apply(self, trace: Trace, model: ReplayModel) -> Trace:
        events, calls = trace.events, trace.calls
        groups = spans(round_trips(trace), trace, lambda length: self.n)
        if not groups:
            return trace
        moved: list[Moved] = []

        def replace(j: int, first: int, end: int, at: int) -> tuple[list[Event], Call]:
            a, b = span_events(trace, first, end)
            pid = f"program-{j}"
            turns = [events[calls[k].event_index] for k in range(first, end)]
            results = [e for e in events[a:b] if e.kind == "tool_result"]
            total_bytes = sum(e.bytes for e in results)
            cut = min(total_bytes, self.max_result_bytes)
            kept, spans_, kinds, lost_all = [], [], [], []
            before = {f for e in events[:a] for f in e.provides}
            off = 0
            for e in results:
                fs = e.fact_spans or (None,) * len(e.provides)
                for f, span in zip(e.provides, fs, strict=True):
                    lo, hi = (0, e.bytes) if span is None else span
                    if off + hi <= cut and f not in kept:
                        kept.append(f)
                        spans_.append((off + lo, off + hi))
                        kinds.append(kind_of(trace, f))
                    elif f not in lost_all:
                        lost_all.append(f)
                off += e.bytes
            keep = set(kept)
            elsewhere = outside_providers(trace, a, b)
            lost = tuple(f for f in lost_all if f not in keep and f not in elsewhere)
            tokens = sum(e.tokens for e in results)
            if cut < total_bytes:
                tokens = math.ceil(tokens * cut / total_bytes)
            program = Event(
                index=at,
                kind="assistant",
                content=None,
                bytes=sum(e.bytes for e in turns),
                chars=sum(e.chars for e in turns),
                lines=sum(e.lines for e in turns),
                tokens=sum(e.tokens for e in turns),
                tokens_provenance="synthetic",
                tool_call_ids=(pid,),
                needs=external_needs(trace, a, b),
            )
            result = dataclasses.replace(
                synthetic_event(at + 1, "tool_result", tokens, trace.bytes_per_token),
                bytes=cut,
                chars=cut,
                lines=sum(e.lines for e in results),
                tool_call_id=pid,
                bounded=cut < total_bytes or any(e.bounded for e in results),
                provides=tuple(kept),
                fact_spans=tuple(spans_),
                fact_kinds=tuple(kinds),
                supersedes=tuple(dict.fromkeys(f for e in events[a:b] for f in e.supersedes if f in before)),
            )
            moved.append(
                Moved(
                    self.name, first, end, first, None, sum(e.tokens for e in events[a:b]),
                    program.tokens + result.tokens, tuple(kept), lost, tuple(kind_of(trace, f) for f in lost),
                )
            )  # fmt: skip
            outs = [calls[k].output_tokens for k in range(first, end)]
            call = Call(
                index=0,
                event_index=0,
                view_end=0,
                input_tokens=None,
                output_tokens=None if any(o is None for o in outs) else sum(outs),  # type: ignore[arg-type]
                residual_tokens=calls[first].residual_tokens,
                usage_provenance="synthetic",
                timestamp=calls[end - 1].timestamp,
            )
            return [program, result], call

        return rebuild(trace, groups, replace, moved)  # replace() fills moved as it goes
