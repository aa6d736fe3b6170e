"""``tool_result_head_tail``: mini-swe-agent's bound on long command output, applied at settle time.

mini-swe-agent (``action_observation_template``): output of ``max_chars`` characters or more becomes its
first ``head_chars`` and last ``tail_chars`` characters around an elision notice (each half of
``max_chars`` when not given). Applied once, when the result enters history; the cut text is gone for
good (no handle), and with it every fact whose bytes are not wholly in the head or the tail. A re-read
of a result (the agent re-runs its call) passes the same cut (``reread_bound``).

Every result of ``max_chars`` or more is cut, whatever the recorder did to it first, with one exception:
a result the recorded run already cut (``bounded``) stays as recorded unless this policy keeps fewer
characters than the recorder did. The recorder kept at least the recorded text less its own wrapper
(warning and tags, at most ``RECORDER_WRAPPER_CHARS``: mini-swe-agent's recorded cuts are 10,611-10,614
characters, its 5,000 + 5,000 plus 611-614 of wrapper), so a recorded cut is cut again when
``head_chars + tail_chars + RECORDER_WRAPPER_CHARS < chars``: at the default 5,000 + 5,000 the recorded
cuts stay; at ``max_chars=400`` they are cut to 200 + 200. Cache: never rewrites anything already sent.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

import numpy as np

from sim.core.types import KIND_CODE, ItemState, Trace
from sim.cost.tokens import scale_tokens
from sim.policies.base import Change, Policy, View, check_int, register

# The most characters a recorder's own cut adds around what it kept (mini-swe-agent: 611-614).
RECORDER_WRAPPER_CHARS = 1000


def long_results(trace: Trace) -> tuple[list[int], list[int], list[bool]]:
    """Tool results, longest first: (minus their lengths, ascending; their indices; whether the recorded
    run cut each), so the ones of at least N characters are a prefix found by bisection."""
    a = trace.arrays
    candidates = np.flatnonzero(a.kind == KIND_CODE["tool_result"])
    order = np.argsort(-a.chars[candidates], kind="stable")
    picked = candidates[order]
    return (-a.chars[picked]).tolist(), picked.tolist(), a.bounded[picked].tolist()


def notice(elided: int) -> str:
    return f"\n<elided_chars>\n{elided} characters elided\n</elided_chars>\n"


@register
@dataclass(frozen=True)
class ToolResultHeadTail(Policy):
    """Tool results of max_chars+ characters keep a head and a tail (mini-swe-agent 10,000/5,000/5,000;
    head_chars and tail_chars default to half of max_chars each)."""

    max_chars: int = 10000
    head_chars: int | None = None
    tail_chars: int | None = None

    name = "tool_result_head_tail"
    size_grid = {
        "max_chars": (2000, 5000, 10000, 20000, 40000)
    }  # ``ctxsim size --policy tool_result_head_tail``'s default grid
    size_trigger = False  # acts on every run, whatever its size
    settles = True

    def __post_init__(self) -> None:
        check_int(self.name, "max_chars", self.max_chars, 1)
        for knob in ("head_chars", "tail_chars"):  # not given: half the bound each (frozen: set once here)
            if getattr(self, knob) is None:
                object.__setattr__(self, knob, self.max_chars // 2)
        check_int(self.name, "head_chars", self.head_chars, 0)
        check_int(self.name, "tail_chars", self.tail_chars, 0)
        if self.head_chars + self.tail_chars > self.max_chars:
            from sim.util.errors import ConfigError

            raise ConfigError(
                f"policy '{self.name}': head_chars + tail_chars = {self.head_chars + self.tail_chars} "
                f"must not exceed max_chars = {self.max_chars}"
            )

    @property
    def keeps(self) -> int:
        """Characters of the original a cut keeps: its head and its tail."""
        return self.head_chars + self.tail_chars  # type: ignore[operator]

    def cuts(self, chars: int, bounded: bool) -> bool:
        """Is a tool result of ``chars`` characters cut (``bounded``: the recorded run cut it already)?"""
        if chars < self.max_chars:
            return False
        return not bounded or self.keeps + RECORDER_WRAPPER_CHARS < chars

    def cut_bytes(self, trace: Trace, index: int) -> int:
        """UTF-8 bytes of the cut text (exact with content; proportional for a text-free trace)."""
        e = trace.events[index]
        elided = e.chars - self.keeps
        if e.content is not None:
            head = e.content[: self.head_chars]
            tail = e.content[e.chars - self.tail_chars :] if self.tail_chars else ""
            return len(head.encode()) + len(tail.encode()) + len(notice(elided).encode())
        kept = round(self.keeps * e.bytes / max(e.chars, 1))
        return kept + len(notice(elided).encode())

    def kept_bytes(self, trace: Trace, index: int) -> tuple[tuple[int, int], ...]:
        """Byte ranges of the result the cut shows: its head and its tail (exact with content;
        proportional for a text-free trace, as ``cut_bytes``)."""
        e = trace.events[index]
        if e.content is not None:
            head = len(e.content[: self.head_chars].encode())
            tail = len(e.content[e.chars - self.tail_chars :].encode()) if self.tail_chars else 0
        else:
            head = round(self.head_chars * e.bytes / max(e.chars, 1))  # type: ignore[operator]
            tail = round(self.tail_chars * e.bytes / max(e.chars, 1))  # type: ignore[operator]
        return tuple(r for r in ((0, head), (e.bytes - tail, e.bytes)) if r[1] > r[0])

    def settle(self, trace: Trace, state, index: int, view: View | None) -> Change | None:
        e = trace.events[index]
        if e.kind != "tool_result" or not self.cuts(e.chars, e.bounded):
            return None
        nbytes = self.cut_bytes(trace, index)
        tokens = scale_tokens(e.tokens, e.bytes, nbytes)
        return Change(index, ItemState.BOUNDED, tokens, nbytes, "head-tail", self.kept_bytes(trace, index))

    def reread_bound(self, trace: Trace, index: int) -> Change | None:
        """A re-run of the call gives the same output: the same cut as at settle time."""
        return self.settle(trace, None, index, None)

    def settle_key(self) -> str:
        return repr(self)  # the knobs alone decide each cut (a frozen dataclass's fields, in order)

    def settle_all(self, trace: Trace) -> list[Change]:
        lengths, indices, bounded = trace.derived("long_results", long_results)
        end = bisect_right(lengths, -self.max_chars)  # results of max_chars or more
        long = zip(indices[:end], bounded[:end], lengths[:end], strict=True)
        cut = [i for i, b, n in long if self.cuts(-n, b)]
        return [self.settle(trace, None, i, None) for i in sorted(cut)]  # type: ignore[misc]

    def bound_violations(self, trace: Trace, view: View) -> list[str]:
        return [
            f"tool result {i} has {trace.events[i].chars} characters in view, over max_chars={self.max_chars}"
            for i in range(view.n)
            if trace.events[i].kind == "tool_result"
            and view.state[i] == ItemState.VERBATIM
            and self.cuts(trace.events[i].chars, trace.events[i].bounded)
        ]
