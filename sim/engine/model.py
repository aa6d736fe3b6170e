"""The scripted mock model. Deterministic: no network, no weights.

Replay role: emits the recorded assistant turn of each call with its recorded output tokens. Its other
roles plug in here: what it does when a needed fact is missing (``on_missing``; a ranged read's margin
``reread_margin_tokens``), whether a retrieval through a spill handle finds a fact
(``retrieval_recall``), what a summary keeps (``summarizer``), and the agent's own step limit
(``max_turns``).

The summarizer must choose: a summary of ``output_tokens`` (the size the policy's rule gives it) keeps
covered facts while they fit, each at what it takes to state it: the tokens of its byte span in its
first provider, at that provider's bytes per token (``sim.information.state.fact_tokens``), and at least
``summary_fact_tokens``. It fills greedily in rank order: a fact that does not fit in what is left is
skipped, and a smaller one ranked later may still fit (as a writer who cannot quote a long file still
notes a short error). Where the summary cannot hold every covered fact the ranking decides what is
lost, so ``extractive``, which cannot see the future, loses needed facts ``oracle`` keeps. The ranks
(newest provider first within each):

- ``extractive`` (default; only what is known at summary time): 1. the task and the rules (kinds
  ``goal``, ``constraint``); 2. errors not yet resolved (kind ``error``, not superseded yet); 3. facts
  already acted on (an earlier action needed them) or repeated (provided by two or more events so far);
  4. the other covered facts; 5. last, stale ones (superseded by an event before the summary: an
  outdated value, a resolved error).
- ``oracle`` (an upper bound: it knows the future): 1. facts a later action needs; 2. the other covered
  facts; 3. stale ones.

What is left out is lost (unless a provider is still in view, spilled or paginated; a superseded fact is
stale, never lost). A fact a summary keeps keeps its kind (the one its first provider gave it): the
ledger counts it as derived of that kind, and the next summary ranks it by that kind again. Kinds decide
the extractive ranks above: ``goal`` and ``constraint`` first, ``error`` second; ``path``,
``identifier`` and ``value`` by use.
"""

from __future__ import annotations

import hashlib

import numpy as np

from sim.core.types import Trace
from sim.cost.tokens import estimate_tokens
from sim.information.state import fact_info, fact_tokens
from sim.trace.codec import trace_hash
from sim.util.errors import ConfigError, CtxsimError


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
SUMMARIZERS = ("extractive", "oracle")
UPPER_BOUND = "oracle"  # the summarizer that sees the future: its results are an upper bound


def check_mode(knob: str, value) -> None:
    """``model.on_missing`` or ``model.summarizer`` against its allowed values (the flags of run, size and
    sweep are checked here too)."""
    allowed = {"on_missing": ON_MISSING, "summarizer": SUMMARIZERS}[knob]
    if value not in allowed:
        raise ConfigError(f"model.{knob}={value!r} is not one of {', '.join(allowed)}")


REREAD_MARGIN_TOKENS = 50  # a ranged read's command and the line numbers around its slice


def check_behaviour(
    on_missing,
    summary_fact_tokens,
    summarizer="extractive",
    retrieval_recall=1.0,
    max_turns=None,
    reread_margin_tokens=REREAD_MARGIN_TOKENS,
) -> None:
    """The mock model's knobs, each against its allowed values (a ConfigError naming knob and range)."""
    check_mode("on_missing", on_missing)
    if (
        isinstance(summary_fact_tokens, bool)
        or not isinstance(summary_fact_tokens, int)
        or summary_fact_tokens < 1
    ):
        raise ConfigError(f"model.summary_fact_tokens={summary_fact_tokens!r} is not an integer >= 1")
    check_mode("summarizer", summarizer)
    r = retrieval_recall
    if isinstance(r, bool) or not isinstance(r, int | float) or not 0 <= r <= 1:
        raise ConfigError(f"model.retrieval_recall={r!r} is not a number in [0, 1]")
    if max_turns is not None and (
        isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1
    ):
        raise ConfigError(f"model.max_turns={max_turns!r} is not null (no limit) or an integer >= 1")
    m = reread_margin_tokens
    if isinstance(m, bool) or not isinstance(m, int) or m < 0:
        raise ConfigError(f"model.reread_margin_tokens={m!r} is not an integer >= 0")


def retrieval_draw(trace_hash: str, fact: str) -> float:
    """A number in [0, 1) fixed by the trace's content hash and the fact id (sha256: the same on every
    machine, run and worker); a retrieval of the fact succeeds when it is below the recall."""
    digest = hashlib.sha256(f"{trace_hash}\x00{fact}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


class ReplayModel:
    """Answers call k with the recorded turn k; output tokens as recorded (estimated when absent).

    When a fact the turn needs is not in the request, ``on_missing`` decides: ``refetch`` re-issues the
    tool call that provided it (an extra call, and its result re-enters the view), ``fail`` ends the run
    (``missing-information``), ``degrade`` goes on with the answer marked degraded. A retrieval through
    a spill handle finds each (trace, fact) with probability ``retrieval_recall``, decided once by
    ``retrieval_draw``; a miss is ``not_retrieved`` and then treated as lost. The summarizer keeps what
    the module's rule for ``summarizer`` says, as many as fit at each one's own size (module docstring).
    ``max_turns`` (None: no limit) caps the agent's steps: its turns, re-reads and grace turn, not the
    harness's summary calls; a run that would take one more ends with ``agent-turn-limit``.
    A refetched result passes the policy's bound again (``Policy.reread_bound``); a needed fact the
    bounded copy does not show is read by ranged reads of its span, each sized as its slice plus
    ``reread_margin_tokens`` (the command and the line numbers around the slice).
    """

    name = "replay"

    def __init__(
        self,
        trace: Trace,
        on_missing: str = "refetch",
        summary_fact_tokens: int = 40,
        summarizer: str = "extractive",
        retrieval_recall: float = 1.0,
        max_turns: int | None = None,
        reread_margin_tokens: int = REREAD_MARGIN_TOKENS,
    ) -> None:
        check_behaviour(
            on_missing, summary_fact_tokens, summarizer, retrieval_recall, max_turns, reread_margin_tokens
        )
        self.on_missing, self.summary_fact_tokens = on_missing, summary_fact_tokens
        self.summarizer, self.retrieval_recall, self.max_turns = summarizer, retrieval_recall, max_turns
        self.reread_margin_tokens = reread_margin_tokens
        self.trace = trace
        self._column, self.estimated = trace.derived("replay_outputs", _recorded_outputs)
        self._output: list[int] | None = None
        self._draws: dict[str, bool] = {}

    def like(self, trace: Trace) -> ReplayModel:
        """The same behaviour for another trace (a child's run is answered as its parent's is)."""
        return ReplayModel(
            trace, self.on_missing, self.summary_fact_tokens, self.summarizer, self.retrieval_recall,
            self.max_turns, self.reread_margin_tokens,
        )  # fmt: skip

    @property
    def exact(self) -> bool:
        """Every retrieval succeeds and no step limit can end the run: what the batch path assumes."""
        return self.retrieval_recall >= 1 and self.max_turns is None

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

    def retrieves(self, fact: str) -> bool:
        """Does a retrieval through a spill handle find ``fact`` (the same answer every time)."""
        if self.retrieval_recall >= 1:
            return True
        hit = self._draws.get(fact)
        if hit is None:
            h = self.trace.derived("trace_hash", trace_hash)
            hit = self._draws[fact] = retrieval_draw(h, fact) < self.retrieval_recall
        return hit

    def summary_keeps(
        self, covered: list[str], still_needed: set[str], output_tokens: int, at: int | None = None
    ) -> list[str]:
        """Facts a summary of ``output_tokens`` keeps of ``covered`` (newest first), made before event
        ``at`` (the events in view): ranked by the ``summarizer``'s rule, kept greedily in rank order
        while they fit, each at its own size and at least ``summary_fact_tokens`` (module docstring).
        ``still_needed``: the covered facts later actions need (only the oracle reads it)."""
        floor = self.summary_fact_tokens
        if output_tokens < floor or not covered:
            return []
        info = self.trace.derived("fact_info", fact_info)
        n = len(self.trace.events) if at is None else at
        stale = [f for f in covered if info.stale_at.get(f, n) < n]
        fresh = [f for f in covered if info.stale_at.get(f, n) >= n]
        if self.summarizer == "oracle":
            ranks = [[f for f in fresh if f in still_needed], [f for f in fresh if f not in still_needed]]
        else:
            ranks = [[], [], [], []]
            for f in fresh:
                kind = info.kind.get(f)
                if kind in ("goal", "constraint"):
                    ranks[0].append(f)
                elif kind == "error":
                    ranks[1].append(f)
                elif info.first_need.get(f, n) < n or info.second_provider.get(f, n) < n:
                    ranks[2].append(f)
                else:
                    ranks[3].append(f)
        size = self.trace.derived("fact_tokens", fact_tokens)
        kept, room = [], output_tokens
        for rank in (*ranks, stale):
            for f in rank:
                cost = max(size.get(f, floor), floor)
                if cost <= room:
                    kept.append(f)
                    room -= cost
                    if room < floor:  # nothing more can fit
                        return kept
        return kept
