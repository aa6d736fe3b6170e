"""The scripted mock model. Deterministic: no network, no weights.

Replay role (this module so far): emits the recorded assistant turn of each call with its recorded
output tokens. Missing-information behaviours, the summarizer and closed-loop agents come with the
information model; they plug in here.
"""

from __future__ import annotations

from sim.errors import CtxsimError
from sim.tokens import estimate_tokens
from sim.types import Trace


class ModelScriptError(CtxsimError):
    """The mock model was asked for a turn its script does not have (a bug in a caller, loudly)."""


class ReplayModel:
    """Answers call k with the recorded turn k; output tokens as recorded (estimated when absent)."""

    name = "replay"

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        out = trace.arrays.output_tokens
        self._output = out.tolist()
        self.estimated = 0
        for k, v in enumerate(self._output):
            if v < 0:  # not recorded: estimate from the turn's own text
                self._output[k] = estimate_tokens(trace.events[trace.calls[k].event_index].bytes, trace.bytes_per_token)
                self.estimated += 1

    def respond(self, call: int) -> int:
        """Output tokens of call ``call``."""
        if not 0 <= call < len(self._output):
            raise ModelScriptError(
                f"replay model of trace {self.trace.trace_id}: asked for call {call}, "
                f"the recording has {len(self._output)}"
            )
        return self._output[call]
