"""``openhands_browser_output_masking``: OpenHands' ``BrowserOutputCondenser`` (openhands-ai 0.62.0, V0).

Trigger: every call. Kept set: every event that is not a browser output, and the newest
``attention_window`` browser outputs of OpenHands' view. Transform of the rest: placeholder ``Visited URL
{url}\\nContent omitted`` (an ``AgentCondensationObservation``), sized by the calibrated estimate of that
text. Browser outputs are found by type, as OpenHands does (``BrowserOutputObservation``: the canonical
event's ``source_type`` ``observation:browse``, its page address ``url``); a trace whose importer keeps no
types has none, and this policy changes nothing there. Around the condenser, ``ConversationMemory``: the
placeholder has no tool call, so it goes as a user message and the masked output's action is not sent
(MASKED at 0 tokens). View per call (originals stay in the history, no handle: lost from view); once
masked an output stays masked. Cache: each new browser output rewrites the prefix from the output it
pushes out of the window. Constructor default ``attention_window`` 1 (the config file's too).
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass

from sim.core.types import ItemState, Trace
from sim.policies.base import Plan, View, check_int, register
from sim.policies.openhands_memory import (
    EV,
    PH,
    Events,
    V0Condenser,
    V0State,
    events_of,
    mask_plan,
    placeholder_size,
)


def placeholder(url: str) -> str:
    return f"Visited URL {url}\nContent omitted"


@register
@dataclass(frozen=True)
class OpenHandsBrowserOutputMasking(V0Condenser):
    """All but the newest ``attention_window`` browser outputs become "Visited URL … Content omitted"."""

    attention_window: int = 1

    name = "openhands_browser_output_masking"
    size_grid = {
        "attention_window": (1, 2, 5)
    }  # ``ctxsim size --policy openhands_browser_output_masking``'s default grid
    size_trigger = False  # acts on every run, whatever its size
    plans = True
    conformance_settings = ({"attention_window": 0}, {"attention_window": 3})

    def __post_init__(self) -> None:
        check_int(self.name, "attention_window", self.attention_window, 0)

    def condense(self, t: Trace, info: Events, st: V0State, entries: list[tuple], request: bool):
        out, seen = list(entries), 0
        for p in range(len(entries) - 1, -1, -1):
            x = entries[p]
            if x[0] == EV and info.browser[x[1]]:
                if seen >= self.attention_window:
                    out[p] = (PH, x[1], *placeholder_size(placeholder(t.events[x[1]].url or ""), t))
                else:
                    seen += 1
        return out

    def plan(self, trace: Trace) -> Plan:
        info = events_of(trace)
        pages = [i for i in range(len(trace.events)) if info.browser[i]]
        return mask_plan(
            trace,
            pages,
            lambda end: max(bisect_left(pages, end) - self.attention_window, 0),
            lambda i: placeholder_size(placeholder(trace.events[i].url or ""), trace)[0],
        )

    def bound_violations(self, trace: Trace, view: View) -> list[str]:
        info = events_of(trace)
        shown = [i for i in range(view.n) if info.browser[i] and view.state[i] == ItemState.VERBATIM]
        if len(shown) > self.attention_window:
            return [f"{len(shown)} browser outputs verbatim, over attention_window {self.attention_window}"]
        return []
