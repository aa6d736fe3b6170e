"""``openhands_llm_summarizing``: OpenHands' ``LLMSummarizingCondenser``, V0 and SDK v1 (``variant``).

Events are OpenHands' view: the non-system events in view not yet covered, plus the summary event once
there is one (the system prompt and tool definitions are always kept and not counted).

V0 (``variant: v0``). Trigger: before a call, more than ``max_size`` events. Kept set: the first
``keep_first`` events (head), the summary, and the newest ``max_size // 2 - keep_first - 1`` events.
Transform of the rest: one summarizer call covers the middle together with the previous summary (the
new summary replaces it). Summarizer input: a fixed instruction + the previous summary + each covered
event clipped at ``max_event_length`` characters (``truncate_content``); output:
clamp(``summary_ratio`` x covered tokens, ``summary_min_tokens``, ``summary_max_tokens``) (ctxsim's size
rule: OpenHands sets no summary length). The summary enters the view in the slot of the first covered
event (OpenHands: position ``keep_first``, the same place), its later versions in the same slot.

SDK v1 (``variant: sdk_v1``). Defaults ``max_size`` 240 and ``keep_first`` 2 (``null`` = the variant's
default). Triggers: more than ``max_size`` events, or, with ``max_tokens`` set, a view (``view.total``)
over ``max_tokens``; then the tail is the newest events whose tokens fit ``max_tokens // 2`` (with both
triggers, the smaller tail). ``minimum_progress``: a condensation that would cover less than that
fraction of the view's events (event trigger) or tokens (token trigger) is skipped — ctxsim's reading.

Both: state rewrite (the condensation is an event of the history: covered events stay covered and
later counts start from the condensed view); what the summary drops is lost (no handle). Tool pairs are
never split (SDK v1 cuts only at manipulation indices, and V0's ConversationMemory filters a result whose
call was forgotten): a tail that would start with a result whose call is covered is cut one event later,
and a covered result whose call is in the head stays. Cache: each condensation rewrites the prefix from
the summary's slot on; between condensations the prefix is stable.

Not modelled: SDK v1's condensation requests from the agent and its hard context reset; V0's exact
summarizer prompt (a paraphrase of its length is used).
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.errors import ConfigError
from sim.policies.base import Change, Decision, Policy, SummaryCall, View, check_int, register
from sim.policies.openhands_amortized_forgetting import SYSTEM_KINDS, admit, check_cut, issuers, split
from sim.tokens import estimate_tokens
from sim.types import ItemState, Trace

SUMMARIZED = ItemState.SUMMARIZED
VARIANTS = ("v0", "sdk_v1")
DEFAULTS = {"v0": (1, 100), "sdk_v1": (2, 240)}  # variant -> (keep_first, max_size)
INSTRUCTION = (
    "You are maintaining a context-aware state summary for an interactive agent. You will be given a list "
    "of events corresponding to actions taken by the agent, and the most recent previous summary if one "
    "exists. Track: USER_CONTEXT: (Preserve essential user requirements, goals, and clarifications in "
    "concise form) COMPLETED: (Tasks completed so far, with brief results) PENDING: (Tasks that still need "
    "to be done) CURRENT_STATE: (Current variables, data structures, or relevant state) For code-specific "
    "tasks, also include: CODE_STATE: {File paths, function signatures, data structures} TESTS: {Failing "
    "cases, error messages, outputs} CHANGES: {Code edits, variable updates} DEPS: {Dependencies, imports, "
    "external calls} VERSION_CONTROL_STATUS: {Repository state, current branch, PR status, commit history} "
    "PRIORITIZE: 1. Adapt tracking format to match the actual task type 2. Capture key user requirements "
    "and goals 3. Distinguish between completed and pending tasks 4. Keep all sections concise and "
    "relevant. SKIP: Tracking irrelevant details for the current task type."
)


class _RunState:
    __slots__ = ("issuer", "kept", "seen", "gone", "carrier", "summary_tokens")

    def __init__(self, issuer: dict[int, int]) -> None:
        self.issuer = issuer
        self.kept: list[int] = []  # OpenHands' view without the summary: non-system events not covered
        self.seen = 0
        self.gone: set[int] = set()  # unused here: covered calls' late results stay (never DROPPED)
        self.carrier = -1  # the slot holding the summary
        self.summary_tokens = 0


@register
@dataclass(frozen=True)
class OpenHandsLLMSummarizing(Policy):
    """Over ``max_size`` events (or ``max_tokens``): summarize the middle, keep head and newest half."""

    variant: str = "v0"
    keep_first: int | None = None
    max_size: int | None = None
    max_event_length: int = 10000
    max_tokens: int | None = None
    minimum_progress: float = 0.1
    summary_ratio: float = 0.1
    summary_min_tokens: int = 256
    summary_max_tokens: int = 2048

    name = "openhands_llm_summarizing"
    acts_before_call = True
    conformance_settings = (
        {"keep_first": 1, "max_size": 6},
        {"variant": "sdk_v1", "keep_first": 2, "max_size": 10},
        {"variant": "sdk_v1", "max_tokens": 1500},
    )

    def __post_init__(self) -> None:
        if self.variant not in VARIANTS:
            raise ConfigError(f"policy '{self.name}': variant={self.variant!r} is not one of v0, sdk_v1")
        check_cut(self.name, self.first, self.size)
        check_int(self.name, "max_event_length", self.max_event_length, 1)
        if self.max_tokens is not None:
            if self.variant != "sdk_v1":
                raise ConfigError(
                    f"policy '{self.name}': max_tokens={self.max_tokens!r} needs variant sdk_v1 (or null)"
                )
            check_int(self.name, "max_tokens", self.max_tokens, 2)
        p = self.minimum_progress
        if not (isinstance(p, int | float) and not isinstance(p, bool) and 0 <= p < 1):
            raise ConfigError(f"policy '{self.name}': minimum_progress={p!r} is not a number in [0, 1)")
        r = self.summary_ratio
        if not (isinstance(r, int | float) and not isinstance(r, bool) and 0 < r <= 1):
            raise ConfigError(f"policy '{self.name}': summary_ratio={r!r} is not a number in (0, 1]")
        check_int(self.name, "summary_min_tokens", self.summary_min_tokens, 1)
        check_int(self.name, "summary_max_tokens", self.summary_max_tokens, self.summary_min_tokens)

    @property
    def first(self) -> int:
        return DEFAULTS[self.variant][0] if self.keep_first is None else self.keep_first

    @property
    def size(self) -> int:
        return DEFAULTS[self.variant][1] if self.max_size is None else self.max_size

    def start(self, trace: Trace) -> _RunState:
        return _RunState(trace.derived("openhands_issuers", issuers))

    def before_call(self, trace: Trace, state: _RunState, view: View, call: int, status=None):
        admit(trace, state, view.n)
        kept, summary = state.kept, 1 if state.carrier >= 0 else 0
        by_events = len(kept) + summary > self.size
        by_tokens = self.max_tokens is not None and view.total > self.max_tokens
        if not (by_events or by_tokens):
            return ()
        from_tail = len(kept)
        if by_events:
            from_tail = self.size // 2 - self.first - 1
        if by_tokens:
            fit, budget = 0, self.max_tokens // 2  # type: ignore[operator]
            for i in reversed(kept[self.first :]):
                if budget < view.tokens[i]:
                    break
                budget -= view.tokens[i]
                fit += 1
            from_tail = min(from_tail, fit)
        new_kept, covered = split(kept, self.first, from_tail, state.issuer)
        if not covered:
            return ()
        if self.variant == "sdk_v1":
            if by_events and len(covered) < self.minimum_progress * (len(kept) + summary):
                return ()
            if not by_events and sum(view.tokens[i] for i in covered) < self.minimum_progress * view.total:
                return ()
        state.kept = new_kept
        return self._summarize(trace, state, view, covered)

    def _summarize(self, trace: Trace, state: _RunState, view: View, covered: list[int]) -> Decision:
        events, bpt = trace.events, trace.bytes_per_token
        covered_tokens, clipped = state.summary_tokens, 0.0
        for i in covered:
            tok = view.tokens[i]
            chars = events[i].chars if view.state[i] == ItemState.VERBATIM else view.nbytes[i]
            covered_tokens += tok
            clipped += tok * min(chars, self.max_event_length) / chars if chars else tok
        summary_in = estimate_tokens(len(INSTRUCTION.encode()), bpt) + state.summary_tokens + round(clipped)
        out = min(
            max(round(self.summary_ratio * covered_tokens), self.summary_min_tokens), self.summary_max_tokens
        )
        msg_tokens = out + estimate_tokens(0, bpt)  # the summary text + one message's framing
        msg_bytes = round(out * (bpt or 4.0))
        if state.carrier < 0:
            state.carrier = covered[0]
        changes = [Change(state.carrier, SUMMARIZED, msg_tokens, msg_bytes, "summary")]
        changes += [Change(i, SUMMARIZED, 0, 0, "summarized") for i in covered if i != state.carrier]
        changes.sort(key=lambda c: c.index)
        state.summary_tokens = msg_tokens
        return Decision(changes, SummaryCall(summary_in, out))

    def bound_violations(self, trace: Trace, view: View) -> list[str]:
        n = sum(
            1
            for i in range(view.n)
            if trace.events[i].kind not in SYSTEM_KINDS and view.state[i] == ItemState.VERBATIM
        )
        summary = any(view.state[i] == SUMMARIZED and view.tokens[i] > 0 for i in range(view.n))
        if self.max_tokens is None and n + summary > self.size:
            return [f"{n + summary} events in view before the call, over max_size {self.size}"]
        return []
