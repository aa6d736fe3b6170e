"""``llm_summary``: the Complexity Trap's LLM-Summary (OpenHands-style summarizing condenser; POLICIES.md §4).

- Turns: a turn is an assistant event and everything after it up to the next assistant event (its tool
  results, any user message). The block before the first assistant event (system prompt, tool specs,
  task) is always kept.
- Trigger: before a call, when the completed turns not yet summarized reach ``n + m`` (31 at the paper's
  N=21, M=10). Chosen reading of "the first summary fires at turn 31": once turn 31 has completed, i.e.
  before the 32nd call; every ``n`` turns after that (turns 52, 73, ...).
- Kept: the block, the summary, the last ``m`` turns verbatim.
- The rest: the unsummarized turns before the last ``m`` are covered by one summary (SUMMARIZED), made
  incrementally from the previous summary plus the newly covered turns (turn boundaries never split a
  call from its result). The summary message sits in the slot of the first covered event, its size the
  summarizer's output; the other covered items weigh 0.
- Summarizer call: one metered call whose input is the instruction + the previous summary + the covered
  turns as they stand in view; output clamp(``summary_ratio`` x covered tokens (previous summary
  included), ``summary_min_tokens``, ``summary_max_tokens``). The paper gives no summary size: ctxsim's
  rule with the seed engine's values (0.1, 256, 2,048) is a choice.
- A view rewrite (the durable store keeps everything, but the agent has no handle to the originals:
  not recoverable). Cache: each summary rewrites the prefix from the summary slot on.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from sim.core.segments import offsets
from sim.core.types import KIND_CODE, ItemState, Trace
from sim.cost.tokens import estimate_tokens
from sim.information.state import runs_have_needs
from sim.policies.base import Change, Decision, Plan, Plans, Policy, SummaryCall, View, check_int, register
from sim.policies.driven_plan import DECLINED
from sim.policies.sparse_plans import result_issuers
from sim.policies.strands_sliding_window import Frame, frame
from sim.util.errors import ConfigError

SUMMARIZED = ItemState.SUMMARIZED
SUMMARIZER_INSTRUCTION = (
    "You are maintaining a context-aware state summary for an interactive agent. Update the previous "
    "summary with the events below: the user's task, progress so far, files and code touched, test "
    "results, and what remains to be done."
)


def turn_starts(trace: Trace) -> list[int]:
    """The assistant events, ascending (read from the kind column: a trace read as columns builds no
    event objects for it)."""
    return np.flatnonzero(trace.arrays.kind == KIND_CODE["assistant"]).tolist()


def cut_valid(trace: Trace) -> list[bool]:
    """Per event: a cut may sit there (``Frame.valid``: no call/result pair crosses it), from
    ``result_issuers`` (no event objects)."""
    issuer = trace.derived("result_issuers", result_issuers)
    results = np.flatnonzero(issuer >= 0)
    diff = np.zeros(len(issuer) + 1, dtype=np.int64)
    np.add.at(diff, issuer[results] + 1, 1)  # a pair (a, r) crosses every cut in (a, r]
    np.add.at(diff, results + 1, -1)
    return (np.cumsum(diff[:-1]) == 0).tolist()


class SummaryState:
    """Per-run bookkeeping of an incremental summary in one fixed slot."""

    __slots__ = ("frame", "turns", "block_end", "covered_upto", "carrier", "summary_tokens")

    def __init__(self, trace: Trace) -> None:
        self.frame: Frame = frame(trace)
        self.turns: list[int] = trace.derived("turn_starts", turn_starts)
        self.block_end = self.turns[0] if self.turns else len(trace.arrays.kind)
        self.covered_upto = self.block_end  # events [block_end, covered_upto) are summarized
        self.carrier = -1  # the slot holding the summary message
        self.summary_tokens = 0


def check_summary_knobs(p) -> None:
    r = p.summary_ratio
    if not (isinstance(r, int | float) and not isinstance(r, bool) and 0 < r <= 1):
        raise ConfigError(f"policy '{p.name}': summary_ratio={r!r} is not a number in (0, 1]")
    check_int(p.name, "summary_min_tokens", p.summary_min_tokens, 1)
    check_int(p.name, "summary_max_tokens", p.summary_max_tokens, p.summary_min_tokens)


def summary_cut(
    p, turns: list[int], valid: Callable[[int], bool], covered_upto: int, completed: int
) -> int | None:
    """Where a summary made now ends (it covers events [covered_upto, cut)), or None when none is made:
    with ``completed`` turns done, fewer than ``p.n + p.m`` of them unsummarized, or no cut between
    ``covered_upto`` and the last ``p.m`` turns that keeps each call with its result."""
    first = bisect_left(turns, covered_upto)
    if completed - first < p.n + p.m:
        return None
    cut = turns[completed - p.m]
    while cut > covered_upto and not valid(cut):
        cut -= 1
    return cut if cut > covered_upto else None


def summary_tokens(p, covered: int) -> int:
    """The summary's size: clamp(``summary_ratio`` x covered tokens, ``summary_min_tokens``,
    ``summary_max_tokens``)."""
    return min(max(round(p.summary_ratio * covered), p.summary_min_tokens), p.summary_max_tokens)


def instruction_tokens(trace: Trace) -> int:
    return estimate_tokens(len(SUMMARIZER_INSTRUCTION.encode()), trace.bytes_per_token)


def summarize_turns(p, trace: Trace, state: SummaryState, view: View, pending: dict[int, Change]):
    """When ``p.n + p.m`` unsummarized turns have completed, cover all but the last ``p.m``: returns
    (changes, SummaryCall) or None. ``pending``: changes already decided this call (their sizes count).
    ``summaries_in`` counts what this trigger fires in a run without replaying it; a change of the trigger
    changes it too (tests/test_complexity_trap.py holds the two together). ``summary_events`` restates
    it for whole runs (the planners of llm_summary and hybrid)."""
    completed = bisect_left(state.turns, view.n)  # assistant events in view: their turns completed
    start = state.covered_upto
    cut = summary_cut(p, state.turns, state.frame.valid, start, completed)
    if cut is None:
        return None

    def size(i: int) -> int:
        c = pending.get(i)
        return c.tokens if c is not None else view.tokens[i]

    span = sum(size(i) for i in range(start, cut))
    out = summary_tokens(p, state.summary_tokens + span)
    carrier = state.carrier if state.carrier >= 0 else start
    nbytes = round(out * (trace.bytes_per_token or 4.0))
    changes = [Change(carrier, SUMMARIZED, out, nbytes, "summary")]
    changes += [Change(i, SUMMARIZED, 0, 0, "summarized") for i in range(start, cut) if i != carrier]
    call = SummaryCall(instruction_tokens(trace) + state.summary_tokens + span, out)
    state.carrier, state.covered_upto, state.summary_tokens = carrier, cut, out
    return changes, call


class SummaryEvent(NamedTuple):
    """One summary of a planned run: before call ``call`` it covers events [start, cut), its message in
    ``carrier`` weighing ``out`` tokens; ``input``: the summarizer call's input tokens."""

    call: int
    start: int
    cut: int
    carrier: int
    out: int
    input: int


def _turns_completed(trace: Trace) -> list[int]:
    """Per call: the turns completed before it (assistant events in its view)."""
    turns = np.asarray(trace.derived("turn_starts", turn_starts), dtype=np.int64)
    return turns.searchsorted(trace.arrays.view_end).tolist()


def summary_events(p, trace: Trace, span: Callable[[int, int, int], int]) -> list[SummaryEvent]:
    """Every summary ``summarize_turns`` makes in a run, without the per-call loop: the trigger's call
    found by bisection over the turns completed per call (no step per call), the same ``summary_cut``
    and ``summary_tokens``. ``span(call, start, cut)``: the tokens events [start, cut) weigh in that
    call's view (the pending changes counted). Only for runs whose sizes are the recorded ones (no
    needs: the caller declines the others)."""
    turns = trace.derived("turn_starts", turn_starts)
    completed = trace.derived("turns_completed", _turns_completed)
    ncalls, need = len(completed), p.n + p.m
    covered = turns[0] if turns else len(trace.arrays.kind)
    carrier, summary, k = -1, 0, 0
    events: list[SummaryEvent] = []
    while True:
        k = bisect_left(completed, bisect_left(turns, covered) + need, k)
        if k >= ncalls:
            return events
        cut = summary_cut(p, turns, trace.derived("cut_valid", cut_valid).__getitem__, covered, completed[k])
        if cut is not None:
            tokens = span(k, covered, cut)
            out = summary_tokens(p, summary + tokens)
            carrier = carrier if carrier >= 0 else covered
            events.append(
                SummaryEvent(k, covered, cut, carrier, out, instruction_tokens(trace) + summary + tokens)
            )
            covered, summary = cut, out
        k += 1


def summary_entries(events: list[SummaryEvent]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The plan entries of a run's summaries (call, index, tokens; every one SUMMARIZED), as
    ``summarize_turns`` returns them: the carrier first (the summary's size), then each other covered
    event (0 tokens), ascending."""
    if not events:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    call, start, cut, carrier, out, _ = (np.array(c, dtype=np.int64) for c in zip(*events, strict=True))
    extra = (carrier != start).astype(np.int64)  # a later summary: its carrier sits before its span
    lengths = cut - start + extra
    first = offsets(lengths)
    index = np.arange(int(lengths.sum()), dtype=np.int64) - np.repeat(first, lengths)
    index += np.repeat(start - extra, lengths)
    index[first[extra == 1]] = carrier[extra == 1]
    tokens = np.zeros(len(index), dtype=np.int64)
    tokens[first] = out
    return np.repeat(call, lengths), index, tokens


def summaries_in(turns: int, n: int, m: int) -> int:
    """How many summaries ``summarize_turns`` fires in a run of ``turns`` agent calls with one turn per
    call (the first before call n + m + 1, then every n calls). For fitting a trigger to published
    summary counts without a replay per candidate; tests/test_complexity_trap.py holds it to the replay."""
    first = n + m + 1
    return 0 if turns < first else (turns - first) // n + 1


@register
@dataclass(frozen=True)
class LlmSummary(Policy):
    """Every n turns, summarize all but the last m turns (Complexity Trap LLM-Summary, N=21, M=10)."""

    n: int = 21
    m: int = 10
    summary_ratio: float = 0.1
    summary_min_tokens: int = 256
    summary_max_tokens: int = 2048

    name = "llm_summary"
    size_grid = {"n": (11, 21, 41), "m": (5, 10, 20)}  # ``ctxsim size --policy llm_summary``'s default grid
    acts_before_call = True
    plans = True
    conformance_settings = ({"n": 2, "m": 1, "summary_min_tokens": 10}, {"n": 3, "m": 2})

    def __post_init__(self) -> None:
        check_int(self.name, "n", self.n, 1)
        check_int(self.name, "m", self.m, 0)
        check_summary_knobs(self)

    def start(self, trace: Trace) -> SummaryState:
        return SummaryState(trace)

    def before_call(self, trace: Trace, state: SummaryState, view: View, call: int, status=None):
        """``summarize_turns``; ``plan_many`` restates it for whole runs (tests/test_plans_summary.py)."""
        done = summarize_turns(self, trace, state, view, {})
        if done is None:
            return ()
        return Decision(done[0], done[1])

    def plan(self, trace: Trace) -> Plan:
        return self.plan_many([trace])[0]

    def plan_many(self, traces: Sequence[Trace]) -> Plans:
        """``before_call``'s decisions for whole runs (``summary_events``): the covered turns are never
        changed before they are summarized, so their size in view is the recorded one. A run with needs
        is declined (a re-read adds tokens the summary would cover)."""
        needs = runs_have_needs(traces)
        plans = []
        for t, declined in zip(traces, needs, strict=True):
            if declined:
                plans.append(DECLINED)
                continue
            prefix = t.arrays.prefix
            events = summary_events(
                self, t, lambda k, start, cut, prefix=prefix: int(prefix[cut] - prefix[start])
            )
            call, index, tokens = summary_entries(events)
            summaries = tuple((e.call, e.input, e.out) for e in events)
            plans.append(Plan(call, index, tokens, np.full(len(index), SUMMARIZED, np.int64), summaries))
        return Plans.of(plans)
