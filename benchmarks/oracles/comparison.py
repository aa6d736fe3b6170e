"""What a conformance run compares, shared by ``frameworks.py`` and the backends of the oracles with
their own drivers (``openhands/backend.py``, ``effect_agent/backend.py``): a setting, a trace's result,
and the comparison of two per-call vector lists. Runs in ctxsim's environment."""

from __future__ import annotations

from dataclasses import dataclass, field

from sim.core.types import Trace


@dataclass
class Setting:
    policy: str
    knobs: dict
    window: int | None = None
    name: str = ""
    config: dict = field(default_factory=dict)


@dataclass
class TraceResult:
    trace: str
    calls: int
    same: int
    tokens_ctxsim: int
    tokens_real: int
    first_difference: str | None


def first_difference(got: dict, want: dict, prefix_only: bool) -> str | None:
    n = min(len(got["calls"]), len(want["calls"]))
    for k in range(n):
        if got["calls"][k] != want["calls"][k]:
            return f"call {k}: ctxsim {got['calls'][k]}, real {want['calls'][k]}"
    if not prefix_only and (len(got["calls"]) != len(want["calls"]) or got["finish"] != want["finish"]):
        return (
            f"ctxsim ends {got['finish']} after {len(got['calls'])} calls, "
            f"real {want['finish']} after {len(want['calls'])}"
        )
    return None


def agreement(got: dict, want: dict) -> tuple[int, int, int, int]:
    """(calls compared, calls equal, ctxsim tokens, real tokens) over the calls both made; a call is
    ``[states, summaries, tokens]`` (its third entry the request's tokens)."""
    n = min(len(got["calls"]), len(want["calls"]))
    same = sum(1 for a, b in zip(got["calls"][:n], want["calls"][:n], strict=True) if a == b)
    return n, same, sum(c[2] for c in got["calls"][:n]), sum(c[2] for c in want["calls"][:n])


def compare_vectors(trace_id: str, got: dict, want: dict, prefix_only: bool) -> TraceResult:
    """One trace: the calls both made, those equal, and the first difference (or a different end,
    which counts against the last compared call unless ``prefix_only``)."""
    n, same, tc, tr = agreement(got, want)
    diff = first_difference(got, want, prefix_only)
    if diff is not None and same == n:  # same calls, different end: the last compared call disagrees
        same = max(n - 1, 0) if n else 0
        n = max(n, 1)
    return TraceResult(trace_id, n, same, tc, tr, diff)


def unique_ids(traces: list[Trace]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for t in traces:
        k = seen.get(t.trace_id, 0)
        seen[t.trace_id] = k + 1
        out.append(t.trace_id if k == 0 else f"{t.trace_id}#{k}")
    return out
