"""``openhands_browser_output_masking``: OpenHands' ``BrowserOutputCondenser`` (V0).

Trigger: every call. Kept set: every event that is not a browser output, and the newest
``attention_window`` browser outputs in view. Transform of the rest: placeholder
``Visited URL {url}\\nContent omitted`` (an ``AgentCondensationObservation``), sized by the calibrated
estimate of that text. View per call: OpenHands rebuilds it from the full history each call
(``get_view``), so originals stay in the event stream, but the view has no handle: lost from view.
The set of browser outputs only grows, so once masked an output stays masked. Cache: each new browser
output rewrites the prefix from the output it pushes out of the window.

Which events are browser outputs (the canonical trace has no observation type), ctxsim's rule: a
``tool_result`` whose first two lines contain an ``http://`` or ``https://`` URL — OpenHands'
``BrowserOutputObservation`` prints ``URL: ...`` at its top, and browsing tools' outputs start with the
page address. The placeholder names the first such URL. Text-free events (content None) are never
browser outputs, so on text-free traces this policy changes nothing.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import dataclass

from sim.policies.base import Change, Plan, Policy, View, check_int, register
from sim.tokens import estimate_tokens
from sim.types import ItemState, Trace

MASKED = ItemState.MASKED
URL = re.compile(r"https?://[^\s\"'<>]+")


def placeholder(url: str) -> str:
    return f"Visited URL {url}\nContent omitted"


def browser_url(content: str | None) -> str | None:
    """The URL of a browser output, or None when the content is not one (see the module docstring)."""
    if content is None:
        return None
    m = URL.search("\n".join(content.split("\n", 2)[:2]))
    return m.group(0) if m else None


def browser_outputs(trace: Trace) -> tuple[tuple[int, ...], tuple[tuple[int, int], ...]]:
    """Indices of the browser outputs, ascending, and the (tokens, bytes) of each one's placeholder."""
    idx, sizes = [], []
    for e in trace.events:
        url = browser_url(e.content) if e.kind == "tool_result" else None
        if url is not None:
            nbytes = len(placeholder(url).encode())
            idx.append(e.index)
            sizes.append((estimate_tokens(nbytes, trace.bytes_per_token), nbytes))
    return tuple(idx), tuple(sizes)


class _RunState:
    __slots__ = ("outputs", "sizes", "masked_upto")

    def __init__(self, outputs: tuple[int, ...], sizes: tuple[tuple[int, int], ...]) -> None:
        self.outputs, self.sizes = outputs, sizes
        self.masked_upto = 0  # outputs[:masked_upto] are masked


@register
@dataclass(frozen=True)
class OpenHandsBrowserOutputMasking(Policy):
    """All but the newest ``attention_window`` browser outputs become "Visited URL … Content omitted"."""

    attention_window: int = 1

    name = "openhands_browser_output_masking"
    acts_before_call = True
    plans = True
    conformance_settings = ({"attention_window": 0}, {"attention_window": 3})

    def __post_init__(self) -> None:
        check_int(self.name, "attention_window", self.attention_window, 0)

    def start(self, trace: Trace) -> _RunState:
        return _RunState(*trace.derived("openhands_browser_outputs", browser_outputs))

    def before_call(self, trace: Trace, state: _RunState, view: View, call: int, status=None) -> list[Change]:
        upto = bisect_left(state.outputs, view.n) - self.attention_window
        if upto <= state.masked_upto:
            return []
        changes = [
            Change(state.outputs[j], MASKED, *state.sizes[j], "mask") for j in range(state.masked_upto, upto)
        ]
        state.masked_upto = upto
        return changes

    def plan(self, trace: Trace) -> Plan:
        outputs, sizes = trace.derived("openhands_browser_outputs", browser_outputs)
        calls, index, tokens = [], [], []
        masked_upto = 0
        for k, end in enumerate(trace.arrays.view_end.tolist()):
            upto = bisect_left(outputs, end) - self.attention_window
            if upto > masked_upto:
                for j in range(masked_upto, upto):
                    calls.append(k)
                    index.append(outputs[j])
                    tokens.append(sizes[j][0])
                masked_upto = upto
        return Plan(calls, index, tokens, [MASKED] * len(index))

    def bound_violations(self, trace: Trace, view: View) -> list[str]:
        outputs, _ = trace.derived("openhands_browser_outputs", browser_outputs)
        shown = [i for i in outputs if i < view.n and view.state[i] == ItemState.VERBATIM]
        if len(shown) > self.attention_window:
            return [f"{len(shown)} browser outputs verbatim, over attention_window {self.attention_window}"]
        return []
