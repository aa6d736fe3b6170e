"""The scripted mock model. Deterministic: no network, no weights.

Replay role (this module so far): emits the recorded assistant turn of each call with its recorded
output tokens. Missing-information behaviours, the summarizer and closed-loop agents come with the
information model; they plug in here.
"""

from __future__ import annotations

import numpy as np

from sim.errors import ConfigError, CtxsimError
from sim.tokens import estimate_tokens
from sim.types import Trace


class ModelScriptError(CtxsimError):
    """The mock model was asked for a turn its script does not have (a bug in a caller, loudly)."""


def _recorded_outputs(trace: Trace) -> tuple[np.ndarray, int]:
    """Output tokens per call as recorded; a call without them is estimated from its turn's text."""
    out = trace.arrays.output_tokens
    missing = np.flatnonzero(out < 0).tolist()
    if missing:
        out = out.copy()
        for k in missing:
            e = trace.events[trace.calls[k].event_index]
            out[k] = estimate_tokens(e.bytes, trace.bytes_per_token)
        out.setflags(write=False)
    return out, len(missing)


ON_MISSING = ("refetch", "fail", "degrade")


class ReplayModel:
    """Answers call k with the recorded turn k; output tokens as recorded (estimated when absent).

    When a fact the turn needs is not in the request, ``on_missing`` decides: ``refetch`` re-issues the
    tool call that provided it (an extra call, and its result re-enters the view), ``fail`` ends the run
    (``missing-information``), ``degrade`` goes on with the answer marked degraded. The summarizer keeps,
    within its output size at ``summary_fact_tokens`` a fact, the covered facts later actions still need,
    newest first; the rest of what it covers is lost.
    """

    name = "replay"

    def __init__(self, trace: Trace, on_missing: str = "refetch", summary_fact_tokens: int = 40) -> None:
        if on_missing not in ON_MISSING:
            raise ConfigError(f"model.on_missing={on_missing!r} is not one of {', '.join(ON_MISSING)}")
        if (
            isinstance(summary_fact_tokens, bool)
            or not isinstance(summary_fact_tokens, int)
            or summary_fact_tokens < 1
        ):
            raise ConfigError(f"model.summary_fact_tokens={summary_fact_tokens!r} is not an integer >= 1")
        self.on_missing, self.summary_fact_tokens = on_missing, summary_fact_tokens
        self.trace = trace
        self._column, self.estimated = trace.derived("replay_outputs", _recorded_outputs)
        self._output: list[int] | None = None

    def respond(self, call: int) -> int:
        """Output tokens of call ``call``."""
        if self._output is None:
            self._output = self._column.tolist()
        if not 0 <= call < len(self._output):
            raise ModelScriptError(
                f"replay model of trace {self.trace.trace_id}: asked for call {call}, "
                f"the recording has {len(self._output)}"
            )
        return self._output[call]

    def respond_all(self) -> np.ndarray:
        """Output tokens of every call at once, for replays whose calls cannot change the script."""
        return self._column

    def summarize(self, input_tokens: int, output_tokens: int) -> int:
        """Summarizer role: a summary of the size the policy's rule sets (metered like any call)."""
        if input_tokens < 0 or output_tokens < 0:
            raise ModelScriptError(f"summary call of negative size ({input_tokens} in, {output_tokens} out)")
        return output_tokens

    def grace(self, call: int) -> int:
        """Grace turn: the final answer from what the view holds, sized as the recording's final turn."""
        return self._column[-1].item() if len(self._column) else 0

    def summary_keeps(self, covered: list[str], still_needed: set[str], output_tokens: int) -> list[str]:
        """Facts a summary of ``output_tokens`` keeps: of the covered facts (newest first) those later
        actions still need, as many as fit at ``summary_fact_tokens`` each."""
        budget = output_tokens // self.summary_fact_tokens
        return [f for f in covered if f in still_needed][:budget]
