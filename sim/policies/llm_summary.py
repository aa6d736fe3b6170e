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
from dataclasses import dataclass

from sim.core.types import ItemState, Trace
from sim.cost.tokens import estimate_tokens
from sim.policies.base import Change, Decision, Policy, SummaryCall, View, check_int, register
from sim.policies.strands_sliding_window import Frame, frame
from sim.util.errors import ConfigError

SUMMARIZED = ItemState.SUMMARIZED
SUMMARIZER_INSTRUCTION = (
    "You are maintaining a context-aware state summary for an interactive agent. Update the previous "
    "summary with the events below: the user's task, progress so far, files and code touched, test "
    "results, and what remains to be done."
)


def turn_starts(trace: Trace) -> list[int]:
    return [e.index for e in trace.events if e.kind == "assistant"]


class SummaryState:
    """Per-run bookkeeping of an incremental summary in one fixed slot."""

    __slots__ = ("frame", "turns", "block_end", "covered_upto", "carrier", "summary_tokens")

    def __init__(self, trace: Trace) -> None:
        self.frame: Frame = frame(trace)
        self.turns: list[int] = trace.derived("turn_starts", turn_starts)
        self.block_end = self.turns[0] if self.turns else len(trace.events)
        self.covered_upto = self.block_end  # events [block_end, covered_upto) are summarized
        self.carrier = -1  # the slot holding the summary message
        self.summary_tokens = 0


def check_summary_knobs(p) -> None:
    r = p.summary_ratio
    if not (isinstance(r, int | float) and not isinstance(r, bool) and 0 < r <= 1):
        raise ConfigError(f"policy '{p.name}': summary_ratio={r!r} is not a number in (0, 1]")
    check_int(p.name, "summary_min_tokens", p.summary_min_tokens, 1)
    check_int(p.name, "summary_max_tokens", p.summary_max_tokens, p.summary_min_tokens)


def summarize_turns(p, trace: Trace, state: SummaryState, view: View, pending: dict[int, Change]):
    """When ``p.n + p.m`` unsummarized turns have completed, cover all but the last ``p.m``: returns
    (changes, SummaryCall) or None. ``pending``: changes already decided this call (their sizes count).
    ``summaries_in`` counts what this trigger fires in a run without replaying it; a change of the trigger
    changes it too (tests/test_complexity_trap.py holds the two together)."""
    turns = state.turns
    completed = bisect_left(turns, view.n)  # assistant events in view: their turns completed
    first = bisect_left(turns, state.covered_upto)
    if completed - first < p.n + p.m:
        return None
    cut = turns[completed - p.m]
    f = state.frame
    while cut > state.covered_upto and not f.valid(cut):
        cut -= 1
    start = state.covered_upto
    if cut <= start:
        return None

    def size(i: int) -> int:
        c = pending.get(i)
        return c.tokens if c is not None else view.tokens[i]

    span = sum(size(i) for i in range(start, cut))
    covered = state.summary_tokens + span
    bpt = trace.bytes_per_token
    instruction = estimate_tokens(len(SUMMARIZER_INSTRUCTION.encode()), bpt)
    out = min(max(round(p.summary_ratio * covered), p.summary_min_tokens), p.summary_max_tokens)
    carrier = state.carrier if state.carrier >= 0 else start
    nbytes = round(out * (bpt or 4.0))
    changes = [Change(carrier, SUMMARIZED, out, nbytes, "summary")]
    changes += [Change(i, SUMMARIZED, 0, 0, "summarized") for i in range(start, cut) if i != carrier]
    call = SummaryCall(instruction + state.summary_tokens + span, out)
    state.carrier, state.covered_upto, state.summary_tokens = carrier, cut, out
    return changes, call


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
    conformance_settings = ({"n": 2, "m": 1, "summary_min_tokens": 10}, {"n": 3, "m": 2})

    def __post_init__(self) -> None:
        check_int(self.name, "n", self.n, 1)
        check_int(self.name, "m", self.m, 0)
        check_summary_knobs(self)

    def start(self, trace: Trace) -> SummaryState:
        return SummaryState(trace)

    def before_call(self, trace: Trace, state: SummaryState, view: View, call: int, status=None):
        done = summarize_turns(self, trace, state, view, {})
        if done is None:
            return ()
        return Decision(done[0], done[1])
