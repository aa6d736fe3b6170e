"""``tool_result_head_tail``: mini-swe-agent's bound on long command output, applied at settle time.

mini-swe-agent (``action_observation_template``): output of ``max_chars`` characters or more becomes its
first ``head_chars`` and last ``tail_chars`` characters around an elision notice. Applied once, when the
result enters history; the cut text is gone for good (no handle), and with it every fact whose bytes
are not wholly in the head or the tail. Results the recorded run already cut
(``bounded``) are never cut again. Cache: never rewrites anything already sent.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

import numpy as np

from sim.core.types import KIND_CODE, ItemState, Trace
from sim.cost.tokens import scale_tokens
from sim.policies.base import Change, Policy, View, check_int, register


def long_results(trace: Trace) -> tuple[list[int], list[int]]:
    """Tool results the recorded run did not cut, longest first: (minus their lengths, ascending; their
    indices), so the ones of at least N characters are a prefix found by bisection."""
    a = trace.arrays
    candidates = np.flatnonzero((a.kind == KIND_CODE["tool_result"]) & ~a.bounded)
    order = np.argsort(-a.chars[candidates], kind="stable")
    return (-a.chars[candidates][order]).tolist(), candidates[order].tolist()


def notice(elided: int) -> str:
    return f"\n<elided_chars>\n{elided} characters elided\n</elided_chars>\n"


@register
@dataclass(frozen=True)
class ToolResultHeadTail(Policy):
    """Tool results of max_chars+ characters keep a head and a tail (mini-swe-agent 10,000/5,000/5,000)."""

    max_chars: int = 10000
    head_chars: int = 5000
    tail_chars: int = 5000

    name = "tool_result_head_tail"
    settles = True

    def __post_init__(self) -> None:
        check_int(self.name, "max_chars", self.max_chars, 1)
        check_int(self.name, "head_chars", self.head_chars, 0)
        check_int(self.name, "tail_chars", self.tail_chars, 0)
        if self.head_chars + self.tail_chars > self.max_chars:
            from sim.util.errors import ConfigError

            raise ConfigError(
                f"policy '{self.name}': head_chars + tail_chars = {self.head_chars + self.tail_chars} "
                f"must not exceed max_chars = {self.max_chars}"
            )

    def cut_bytes(self, trace: Trace, index: int) -> int:
        """UTF-8 bytes of the cut text (exact with content; proportional for a text-free trace)."""
        e = trace.events[index]
        elided = e.chars - self.head_chars - self.tail_chars
        if e.content is not None:
            head = e.content[: self.head_chars]
            tail = e.content[e.chars - self.tail_chars :] if self.tail_chars else ""
            return len(head.encode()) + len(tail.encode()) + len(notice(elided).encode())
        kept = round((self.head_chars + self.tail_chars) * e.bytes / max(e.chars, 1))
        return kept + len(notice(elided).encode())

    def kept_bytes(self, trace: Trace, index: int) -> tuple[tuple[int, int], ...]:
        """Byte ranges of the result the cut shows: its head and its tail (exact with content;
        proportional for a text-free trace, as ``cut_bytes``)."""
        e = trace.events[index]
        if e.content is not None:
            head = len(e.content[: self.head_chars].encode())
            tail = len(e.content[e.chars - self.tail_chars :].encode()) if self.tail_chars else 0
        else:
            head = round(self.head_chars * e.bytes / max(e.chars, 1))
            tail = round(self.tail_chars * e.bytes / max(e.chars, 1))
        return tuple(r for r in ((0, head), (e.bytes - tail, e.bytes)) if r[1] > r[0])

    def settle(self, trace: Trace, state, index: int, view: View) -> Change | None:
        e = trace.events[index]
        if e.kind != "tool_result" or e.bounded or e.chars < self.max_chars:
            return None
        nbytes = self.cut_bytes(trace, index)
        tokens = scale_tokens(e.tokens, e.bytes, nbytes)
        return Change(index, ItemState.BOUNDED, tokens, nbytes, "head-tail", self.kept_bytes(trace, index))

    def settle_key(self) -> str:
        return repr(self)  # the knobs alone decide each cut (a frozen dataclass's fields, in order)

    def settle_all(self, trace: Trace) -> list[Change]:
        lengths, indices = trace.derived("long_results", long_results)
        cut = indices[: bisect_right(lengths, -self.max_chars)]  # results of max_chars or more
        return [self.settle(trace, None, i, None) for i in sorted(cut)]

    def bound_violations(self, trace: Trace, view: View) -> list[str]:
        return [
            f"tool result {i} has {trace.events[i].chars} characters in view, over max_chars={self.max_chars}"
            for i in range(view.n)
            if trace.events[i].kind == "tool_result"
            and view.state[i] == ItemState.VERBATIM
            and not trace.events[i].bounded
            and trace.events[i].chars >= self.max_chars
        ]
