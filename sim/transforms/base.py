"""The transform interface, its registry, and the trace rewriting the transforms share.

A transform maps a trace to another trace, as data: it never runs code named by configuration or trace data
(its knobs are numbers; the names are those of this closed registry). It declares what it moved where in
``Trace.moved`` (``sim.core.types.Moved``), which the ledger reports and whose lost facts count as seen and
lost (``sim.information.ledger.moved_totals``). A transformed trace is composite: the fast paths decline it
and the per-call loop replays it (``Trace.composite``).

Transforms compose in the order given, each on the previous one's output, before the policy. The mock
model they take is the one the replay uses: a transform that summarises (a child's report) keeps facts by
its summarizer's rule (``ReplayModel.summary_keeps``), over the trace it receives.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from sim.core.types import Call, Child, Event, Moved, Trace
from sim.engine.model import ReplayModel
from sim.information.state import fact_info, providers
from sim.util.errors import ConfigError, UnknownNameError
from sim.util.limits import MAX_COUNT


@dataclasses.dataclass(frozen=True)
class Transform:
    """Base of every transform. Subclasses are frozen dataclasses whose fields are the knobs."""

    name: ClassVar[str] = ""

    def apply(self, trace: Trace, model: ReplayModel) -> Trace:
        """The transformed trace (``trace`` itself when nothing applies)."""
        raise NotImplementedError

    def params(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def label(self) -> str:
        """``name(knob=value,...)``: how results name the transform."""
        return f"{self.name}(" + ",".join(f"{k}={v}" for k, v in self.params().items()) + ")"


_REGISTRY: dict[str, type[Transform]] = {}


def register(cls: type[Transform]) -> type[Transform]:
    """Class decorator: registers a transform under its ``name``."""
    if not cls.name or cls.name in _REGISTRY:
        raise ValueError(f"transform name {cls.name!r} is empty or taken")
    _REGISTRY[cls.name] = cls
    return cls


_LOADED: list[bool] = []  # once every module of sim.transforms is imported (each registers its own)


def registered() -> dict[str, type[Transform]]:
    """The closed registry: the transforms of sim.transforms' modules (no entry points: a transform
    rewrites the trace every metric is computed from, so only ctxsim's own are trusted)."""
    if not _LOADED:
        from sim.util.plugins import import_modules

        import_modules("sim.transforms", skip="base")
        _LOADED.append(True)
    return dict(sorted(_REGISTRY.items()))


def make_transform(name: str, **params: Any) -> Transform:
    """A registered transform; an unknown name lists the registered ones and the closest match, an
    unknown knob lists the knobs, a bad value names knob, value and allowed range."""
    reg = registered()
    if not isinstance(name, str) or name not in reg:
        raise UnknownNameError("transform", str(name), reg)
    cls = reg[name]
    known = [f.name for f in dataclasses.fields(cls)]
    for key in params:
        if key not in known:
            raise ConfigError(f"transform '{name}' has no knob '{key}'; knobs: {', '.join(known) or 'none'}")
    return cls(**params)


def check_int(transform: str, knob: str, value: Any, lo: int, hi: int = MAX_COUNT) -> None:
    ok = isinstance(value, int) and not isinstance(value, bool) and lo <= value <= hi
    if not ok:
        raise ConfigError(f"transform '{transform}': {knob}={value!r} is not an integer in [{lo}, {hi}]")


def apply_all(trace: Trace, transforms: Sequence[Transform], model: ReplayModel) -> Trace:
    """``trace`` through each transform in turn (each sees the previous one's output and a model like
    ``model`` for it), children untouched (a transform rewrites the run it is given)."""
    for t in transforms:
        out = t.apply(trace, model if model.trace is trace else model.like(trace))
        trace = dataclasses.replace(out, applied=(*out.applied, t.label()))
    return trace


# ------------------------------------------------------------------------------------- shared rewriting
def synthetic_event(index: int, kind: str, tokens: int, bytes_per_token: float | None, **kw) -> Event:
    """A text-free event of ``tokens`` tokens (a report, a brokered program): its bytes are what that
    many tokens take at the trace's calibration (4 bytes a token without one), so policies that estimate
    from bytes see the size the tokens say."""
    nbytes = max(0, math.ceil(tokens * (bytes_per_token or 4.0)))
    return Event(
        index=index,
        kind=kind,
        content=None,
        bytes=nbytes,
        chars=nbytes,
        lines=1 if nbytes else 0,
        tokens=tokens,
        tokens_provenance="synthetic",
        **kw,
    )


def round_trips(trace: Trace) -> list[bool]:
    """Per call: a tool round-trip — its turn issues tool calls, only their results follow it before
    the next call, that call's view ends at its own turn (it holds them all), and it is not the final
    call (the answer)."""
    calls, events = trace.calls, trace.events
    out = []
    for k, c in enumerate(calls):
        if k + 1 >= len(calls) or not events[c.event_index].tool_call_ids:
            out.append(False)
            continue
        nxt = calls[k + 1]
        between = events[c.event_index + 1 : nxt.event_index]
        ids = set(events[c.event_index].tool_call_ids)
        out.append(
            nxt.view_end == nxt.event_index
            and bool(between)
            and all(e.kind == "tool_result" and e.tool_call_id in ids for e in between)
        )
    return out


def spans(flags: Sequence[bool], trace: Trace, length: Callable[[int], int | None]) -> list[tuple[int, int]]:
    """Runs of consecutive calls whose flag holds, each call's view ending at its own turn (nothing
    else in between), cut by ``length(run_length)`` (None: the whole run; else chunks of that size,
    the rest left): [(first, end)] in order."""
    calls = trace.calls
    out, k = [], 0
    while k < len(flags):
        if not flags[k] or calls[k].view_end != calls[k].event_index:
            k += 1
            continue
        j = k
        while j + 1 < len(flags) and flags[j + 1]:
            j += 1
        n = j + 1 - k
        size = length(n)
        if size is None:
            out.append((k, j + 1))
        else:
            out.extend((a, a + size) for a in range(k, k + n - size + 1, size))
        k = j + 1
    return out


def span_events(trace: Trace, first: int, end: int) -> tuple[int, int]:
    """Event range [a, b) of calls [first, end): from the first turn to the next call's turn."""
    return trace.calls[first].event_index, trace.calls[end].event_index


def outside_providers(trace: Trace, a: int, b: int) -> set[str]:
    """Facts some event outside [a, b) provides."""
    return {
        f for f, at in trace.derived("fact_providers", providers).items() if any(i < a or i >= b for i in at)
    }


def kind_of(trace: Trace, fact: str) -> str | None:
    return trace.derived("fact_info", fact_info).kind.get(fact)


def external_needs(trace: Trace, a: int, b: int) -> tuple[str, ...]:
    """Facts events [a, b) need that events before a provide (in first-need order)."""
    inside: set[str] = set()
    out: dict[str, None] = {}
    for e in trace.events[a:b]:
        out.update((f, None) for f in e.needs if f not in inside)
        inside.update(e.provides)
    return tuple(out)


def rebuild(
    trace: Trace,
    groups: Sequence[tuple[int, int]],
    replace: Callable[[int, int, int, int], tuple[list[Event], Call]],
    moved: Sequence[Moved] = (),
    children: Sequence[Child] = (),
) -> Trace:
    """The trace with each group of calls [first, end) replaced: ``replace(j, first, end, at)`` gives
    the events standing for the group's events (numbered from ``at``) and its one call (index and event
    filled in here). Other events and calls are renumbered; their recorded input no longer applies
    (``input_tokens`` None), their residuals stay. ``moved`` and ``children`` (the new ones, called by
    their group's first call) join the trace's own; every call they and the old ones name is renumbered
    (a call folded into a group: the group's call). Both are read after every group is replaced, so
    ``replace`` may fill them as it goes."""
    events, calls = trace.events, trace.calls
    new_events: list[Event] = []
    new_calls: list[Call] = []
    event_map: dict[int, int] = {}
    pos = 0  # next source event
    groups = list(groups)
    g = 0
    k = 0
    call_map: dict[int, int] = {}
    while k < len(calls):
        if g < len(groups) and groups[g][0] == k:
            first, end = groups[g]
            call_map.update((i, len(new_calls)) for i in range(first, end))
            a, b = span_events(trace, first, end)
            for e in events[pos:a]:
                event_map[e.index] = len(new_events)
                new_events.append(dataclasses.replace(e, index=len(new_events)))
            at = len(new_events)
            made, call = replace(g, first, end, at)
            # a group stays inside one run (a run opens with a user turn, never a round-trip's result):
            # what replaces it belongs to that run of the conversation
            run = calls[first].run_index
            new_events.extend(dataclasses.replace(e, run_index=run) for e in made)
            new_calls.append(
                dataclasses.replace(call, index=len(new_calls), event_index=at, view_end=at, run_index=run)
            )
            pos, k, g = b, end, g + 1
            continue
        c = calls[k]
        call_map[k] = len(new_calls)
        for e in events[pos : c.event_index + 1]:
            event_map[e.index] = len(new_events)
            new_events.append(dataclasses.replace(e, index=len(new_events)))
        pos = c.event_index + 1
        view_end = event_map[c.view_end]  # view_end <= event_index: already renumbered
        changed = g > 0
        new_calls.append(
            dataclasses.replace(
                c,
                index=len(new_calls),
                event_index=event_map[c.event_index],
                view_end=view_end,
                input_tokens=None if changed else c.input_tokens,
                usage_provenance="synthetic" if changed else c.usage_provenance,
            )
        )
        k += 1
    for e in events[pos:]:
        new_events.append(dataclasses.replace(e, index=len(new_events)))
    kids = (*trace.children, *children)
    return dataclasses.replace(
        trace,
        events=tuple(new_events),
        calls=tuple(new_calls),
        children=tuple(dataclasses.replace(c, parent_call=call_map[c.parent_call]) for c in kids),
        moved=tuple(dataclasses.replace(m, call=call_map[m.call]) for m in (*trace.moved, *moved)),
    )
