"""``langchain_summarization``: LangChain's ``SummarizationMiddleware`` (langchain 1.5.2, langchain-core
1.8.3). Held call for call to the installed middleware in a real ``create_agent`` graph by
``make oracle-langchain``.

Knobs (``SummarizationMiddleware``'s names and defaults): ``trigger`` null (off), a plain integer
(tokens), LangChain's pair ``[tokens|messages|fraction, value]``, a clause ``{kind: value, ..}`` (all
reached) or a list of pairs and clauses (any one); ``keep`` 20 messages, a plain integer (messages) or a
pair; ``trim_tokens_to_summarize`` 4,000 (null: no trim). ctxsim's own: ``token_count`` (whether the
model's responses carry usage the middleware reads, below; the library has no argument for it) and the
summary size rule: clamp(``summary_ratio`` x the tokens the summarizer is given, ``summary_min_tokens``,
``summary_max_tokens``). A fraction is of the model's maximum input (the trace's recorded window).
LangChain refuses a fraction at construction when the model has no profile; ctxsim meets the window only
at replay and keeps the library's run-time fallbacks instead: a fraction threshold is never reached and
a fraction ``keep`` falls back to 20 messages.

- State messages: the non-instruction events not yet replaced (``system`` / ``tools`` are the agent's
  system message), the summary message (a human message) first once there is one.
- Trigger, before each model node: the count of the state's messages (LangChain's token counter: the
  messages only, no system prompt, no tools) reaches a token threshold, their number a message one;
  with ``token_count`` ``provider`` a token threshold is also reached when the newest model response in
  the state reported a total (its request + its output) that reaches it (LangChain's reported-usage
  check, live when the response came from the summarization model's provider). ``framework``
  (default): the local count only.
- Cutoff: ``len - keep`` messages (tokens: the fewest newest messages within ``keep`` tokens); on a tool
  result it moves back to the model message that issued it.
- The summarizer is given ``trim_messages(strategy="last", allow_partial=True, start_on="human")`` of the
  replaced messages: the newest up to the budget, the crossing message cut to its last lines when they
  fit (a cut message weighs ``scale_tokens`` of the bytes kept), then everything before the oldest human
  message kept is dropped. That often leaves nothing (mini-swe-agent's only human message is the task,
  and later the summary): no summarizer call, the fixed text "Previous conversation was too long to
  summarize." stands for them and every fact they held is lost (the previous summary's too).
- Transform: a state rewrite (``RemoveMessage(REMOVE_ALL_MESSAGES)``, the summary message, the kept
  ones): persistent. The summary message sits in the slot of the first replaced message (SUMMARIZED,
  its size); the others the summarizer was given are SUMMARIZED at 0 tokens, those it never saw DROPPED.
- Summary call: input = the prompt + what the summarizer was given; output by the size rule.
- Cache: each summarization rewrites from the first replaced message on.

Plan (``plan``, the engine's batch path): the run's summaries walked call by call with prefix sums of its
messages; a run with needs is declined (the loop replays it), and with ``token_count`` ``provider`` a
run whose outputs are not all recorded.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from sim.core.types import KIND_CODE, ItemState, Trace
from sim.cost.tokens import scale_tokens
from sim.information.state import has_needs
from sim.policies.anthropic_clear_tool_uses import text_size
from sim.policies.autogen_token_limited import check_token_count
from sim.policies.base import Change, Decision, Plan, Policy, SummaryCall, View, check_int, register
from sim.policies.strands_sliding_window import NOT_MESSAGES, frame
from sim.util.errors import ConfigError

SUMMARIZED, DROPPED, VERBATIM = ItemState.SUMMARIZED, ItemState.DROPPED, ItemState.VERBATIM
_SUMMARIZED, _DROPPED = int(SUMMARIZED), int(DROPPED)
_RESULT, _ASSISTANT = KIND_CODE["tool_result"], KIND_CODE["assistant"]
_NOT_MESSAGE_CODES = tuple(KIND_CODE[k] for k in NOT_MESSAGES)  # the agent's system message
SUMMARY_PREFIX = "Here is a summary of the conversation to date:\n\n"
FALLBACK = "Previous conversation was too long to summarize."
SUMMARY_PROMPT = (
    "<role>Context Extraction Assistant</role> Extract the highest quality and most relevant context from "
    "the conversation history below, so the conversation can continue without the messages removed. "
    "Respond only with the extracted context."
)
KINDS = ("tokens", "messages", "fraction")
DEFAULT_KEEP = 20  # LangChain's messages to keep, also its fallback for an unresolvable token target


def size_spec(policy: str, knob: str, value: Any, plain: str) -> tuple[str, float]:
    """A knob as LangChain's (kind, value) pair; a plain integer counts ``plain``."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = (plain, value)
    if not (isinstance(value, list | tuple) and len(value) == 2 and value[0] in KINDS):
        raise ConfigError(
            f"policy '{policy}': {knob}={value!r} is not an integer or a pair "
            "[tokens|messages|fraction, value]"
        )
    kind, v = value
    if kind == "fraction":
        ok = isinstance(v, int | float) and not isinstance(v, bool) and 0 < v <= 1
    else:
        ok = isinstance(v, int) and not isinstance(v, bool) and v > 0
    if not ok:
        rng = "a number in (0, 1]" if kind == "fraction" else "an integer > 0"
        raise ConfigError(f"policy '{policy}': {knob}={list(value)!r}: {kind} must be {rng}")
    return kind, v


def trigger_clauses(policy: str, value: Any) -> list[dict[str, float]]:
    """``trigger`` as LangChain's clauses (``_normalize_trigger``): any clause met fires, a clause is met
    when all its thresholds are. A plain integer counts tokens; a pair ``[kind, value]`` (LangChain's
    tuple) is one threshold; a mapping ``{kind: value, ..}`` (a ``TriggerClause``) is one clause; a list
    of pairs and mappings is one clause each."""
    if value is None:
        return []
    if isinstance(value, dict):
        return [_clause(policy, value)]
    if isinstance(value, list | tuple) and value and all(isinstance(v, list | tuple | dict) for v in value):
        return [
            _clause(policy, v) if isinstance(v, dict) else dict([size_spec(policy, "trigger", v, "tokens")])
            for v in value
        ]
    return [dict([size_spec(policy, "trigger", value, "tokens")])]


def _clause(policy: str, clause: dict) -> dict[str, float]:
    if not clause:
        raise ConfigError(
            f"policy '{policy}': trigger={clause!r}: a clause needs tokens, messages or fraction"
        )
    return dict(size_spec(policy, "trigger", [kind, v], "tokens") for kind, v in clause.items())


class _State:
    __slots__ = ("frame", "carrier", "reported", "lines")

    def __init__(self, trace: Trace) -> None:
        self.frame = frame(trace)
        self.carrier = -1  # the slot of the summary message
        self.reported: dict[int, int] = {}  # call -> the total its provider reported (request + output)
        self.lines: dict[int, list[int]] = {}  # event -> bytes of its lines (LangChain's text splitter)


def line_bytes(text: str) -> list[int]:
    """Bytes of each piece of LangChain's default text splitter (split on newline, kept)."""
    parts = text.split("\n")
    return [len(p.encode()) + 1 for p in parts[:-1]] + [len(parts[-1].encode())]


@register
@dataclass(frozen=True)
class LangchainSummarization(Policy):
    """LangChain SummarizationMiddleware: over the trigger, all but the newest ``keep`` messages become a
    summary of what ``trim_messages`` leaves of them (or a fixed text when it leaves nothing)."""

    trigger: Any = None
    keep: Any = DEFAULT_KEEP
    trim_tokens_to_summarize: int | None = 4000
    token_count: str = "framework"
    summary_ratio: float = 0.1
    summary_min_tokens: int = 256
    summary_max_tokens: int = 2048

    name = "langchain_summarization"
    plans = True
    size_grid = {
        "trigger": (32000, 64000, 96000, 128000),
        "keep": (10, 20, 40),
    }  # ``ctxsim size --policy langchain_summarization``'s default grid
    size_off = {"trigger": None}  # switched off: the sizing's baseline
    acts_before_call = True
    conformance_settings = (
        {"trigger": 800, "keep": 4, "summary_min_tokens": 32},
        {"trigger": ["tokens", 1200], "keep": ["tokens", 300], "trim_tokens_to_summarize": 200,
         "summary_min_tokens": 32, "token_count": "provider"},
    )  # fmt: skip

    def __post_init__(self) -> None:
        from sim.policies.anthropic_server_compaction import check_summary_knobs

        object.__setattr__(self, "_clauses", trigger_clauses(self.name, self.trigger))  # read every call
        size_spec(self.name, "keep", self.keep, "messages")
        if self.trim_tokens_to_summarize is not None:
            check_int(self.name, "trim_tokens_to_summarize", self.trim_tokens_to_summarize, 1)
        check_token_count(self.name, self.token_count)
        check_summary_knobs(self)

    def start(self, trace: Trace) -> _State:
        return _State(trace)

    # ------------------------------------------------------------------------------------ helpers
    def _human(self, trace: Trace, state: _State, i: int) -> bool:
        return i == state.carrier or trace.events[i].kind == "user"

    def _lines(self, trace: Trace, state: _State, view: View, i: int) -> list[int]:
        if i == state.carrier:  # the summary message: the prefix's two lines, then its text
            pbytes = len(SUMMARY_PREFIX.encode())
            return [pbytes - 1, 1, view.nbytes[i] - pbytes]
        got = state.lines.get(i)
        if got is None:
            got = state.lines[i] = line_bytes(trace.events[i].content or "")
        return got

    def _full_bytes(self, trace: Trace, state: _State, view: View, i: int) -> int:
        return view.nbytes[i] if i == state.carrier else sum(self._lines(trace, state, view, i))

    def _met(self, trace: Trace, n_msgs: int, count: int, reported_of: Callable[[], int]) -> bool:
        """LangChain's ``_should_summarize``: any clause whose every threshold is reached, by the state's
        ``n_msgs`` messages of ``count`` tokens; ``reported_of()``: the newest response's reported total
        (``_reported``), asked at most once, when a token threshold is not reached by the count."""
        reported = None
        for clause in self._clauses:
            met = True
            for kind, value in clause.items():
                if kind == "messages":
                    met = n_msgs >= value
                else:
                    if kind == "fraction":
                        if trace.context_window is None:
                            met = False
                            break
                        value = max(int(trace.context_window * value), 1)
                    if count < value:
                        if reported is None:
                            reported = reported_of()
                        met = reported >= value
                if not met:
                    break
            if met:
                return True
        return False

    def _reported(self, trace: Trace, state: _State, msgs: list[int]) -> int:
        """The total the newest model response in the state reported (-1: none, or the check is off:
        ``token_count`` ``framework``)."""
        if self.token_count != "provider":
            return -1
        issuing = trace.derived("call_of_event", _call_of_event)
        newest = next((i for i in reversed(msgs) if trace.events[i].kind == "assistant"), None)
        return state.reported.get(issuing.get(newest, -1), -1) if newest is not None else -1

    def _safe_cutoff(self, trace: Trace, state: _State, msgs: list[int], c: int) -> int:
        f, events = state.frame, trace.events
        if c >= len(msgs) or events[msgs[c]].kind != "tool_result" or msgs[c] == state.carrier:
            return c
        issuers, j = set(), c
        while j < len(msgs) and events[msgs[j]].kind == "tool_result" and msgs[j] != state.carrier:
            if msgs[j] in f.issuer:
                issuers.add(f.issuer[msgs[j]])
            j += 1
        for i in range(c - 1, -1, -1):
            if msgs[i] in issuers:
                return i
        return j

    def _cutoff(self, trace: Trace, state: _State, view: View, msgs: list[int]) -> int:
        target, value = self._keep(trace)
        if target is not None:
            return self._token_cutoff(trace, state, view, msgs, target)
        if len(msgs) <= value:
            return 0
        return self._safe_cutoff(trace, state, msgs, len(msgs) - value)

    def _keep(self, trace: Trace) -> tuple[int | None, int]:
        """What ``keep`` asks of a trace: (tokens to keep, at least 1; None: keep messages) and the
        messages to keep (``DEFAULT_KEEP`` for a fraction of a window the trace does not record)."""
        kind, value = size_spec(self.name, "keep", self.keep, "messages")
        if kind == "messages":
            return None, value
        if kind == "tokens":
            return max(value, 1), value
        if trace.context_window is not None:
            return max(int(trace.context_window * value), 1), value
        return None, DEFAULT_KEEP

    def _token_cutoff(self, trace: Trace, state: _State, view: View, msgs: list[int], target: int) -> int:
        if not msgs:
            return 0
        suffix = [0] * (len(msgs) + 1)  # suffix[m] = tokens of msgs[m:]
        for m in range(len(msgs) - 1, -1, -1):
            suffix[m] = suffix[m + 1] + view.tokens[msgs[m]]
        if suffix[0] <= target:
            return 0
        left, right, candidate = 0, len(msgs), len(msgs)
        for _ in range(len(msgs).bit_length() + 1):  # LangChain's binary search, as written
            if left >= right:
                break
            mid = (left + right) // 2
            if suffix[mid] <= target:
                candidate, right = mid, mid
            else:
                left = mid + 1
        if candidate == len(msgs):
            candidate = left
        if candidate >= len(msgs):
            if len(msgs) == 1:
                return 0
            candidate = len(msgs) - 1
        return self._safe_cutoff(trace, state, msgs, candidate)

    def _trim(self, trace: Trace, state: _State, view: View, span: list[int]) -> list[tuple[int, int]]:
        """What the summarizer is given: (item, tokens) oldest first, the crossing one maybe cut."""
        sizes = [view.tokens[i] for i in span]
        if self.trim_tokens_to_summarize is None:
            return list(zip(span, sizes, strict=True))
        budget = self.trim_tokens_to_summarize
        taken: list[tuple[int, int]] = []  # newest first
        if sum(sizes) <= budget:
            taken = list(zip(reversed(span), reversed(sizes), strict=True))
        else:
            base = 0
            for i, s in zip(reversed(span), reversed(sizes), strict=True):
                if base + s > budget:
                    break
                taken.append((i, s))
                base += s
            if len(taken) < len(span):  # the crossing message, cut to its last lines that fit
                i = span[len(span) - 1 - len(taken)]
                lines = self._lines(trace, state, view, i)
                full = self._full_bytes(trace, state, view, i)
                if i == state.carrier or trace.events[i].content:  # LangChain cuts only a non-empty text
                    rev = lines[::-1]
                    left, right = 0, len(rev)
                    for _ in range(len(rev).bit_length()):
                        if left >= right:
                            break
                        mid = (left + right + 1) // 2
                        if base + scale_tokens(view.tokens[i], full, sum(rev[:mid])) <= budget:
                            left = mid
                        else:
                            right = mid - 1
                    if left > 0:
                        taken.append((i, scale_tokens(view.tokens[i], full, sum(rev[:left]))))
        while taken and not self._human(trace, state, taken[-1][0]):  # start_on="human"
            taken.pop()
        return taken[::-1]

    def _summary(self, trace: Trace, given: list[tuple[int, int]]) -> tuple[int, int, SummaryCall | None]:
        """The summary message's (tokens, bytes) and the summarizer call for what it was ``given``
        (``_trim``'s answer), or the fixed text and no call when it was given nothing."""
        if not given:
            return (*text_size(trace, SUMMARY_PREFIX + FALLBACK), None)
        basis = sum(t for _, t in given)
        out = min(max(round(self.summary_ratio * basis), self.summary_min_tokens), self.summary_max_tokens)
        ptok, pbytes = text_size(trace, SUMMARY_PREFIX)
        bpt = trace.bytes_per_token or 4.0
        return (
            ptok + out,
            pbytes + round(out * bpt),
            SummaryCall(text_size(trace, SUMMARY_PROMPT)[0] + basis, out),
        )

    # ---------------------------------------------------------------------------------- decision
    def before_call(self, trace: Trace, state: _State, view: View, call: int, status=None):
        """The middleware's ``before_model``; ``plan`` below restates it for whole runs (held to it by
        tests/test_plans_langchain.py)."""
        if call > 0 and status is not None and status.last_input is not None:
            state.reported[call - 1] = status.last_input + (status.last_output or 0)
        if self.trigger is None:
            return ()
        f = state.frame
        msgs = [i for i in f.messages[: f.in_view(view.n)] if view.state[i] == VERBATIM]
        if state.carrier >= 0:
            msgs.insert(0, state.carrier)
        count = sum(view.tokens[i] for i in msgs)
        if not self._met(trace, len(msgs), count, lambda: self._reported(trace, state, msgs)):
            return ()
        cutoff = self._cutoff(trace, state, view, msgs)
        if cutoff <= 0:
            return ()
        span = msgs[:cutoff]
        given = self._trim(trace, state, view, span)
        seen = {i for i, _ in given}
        slot = span[0]
        tokens, nbytes, summary = self._summary(trace, given)
        changes = [Change(slot, SUMMARIZED, tokens, nbytes, "summary")]
        for i in span[1:]:
            changes.append(
                Change(i, SUMMARIZED, 0, 0, "summarized")
                if i in seen
                else Change(i, DROPPED, 0, 0, "trimmed")
            )
        state.carrier = slot
        return Decision(changes, summary, forgets_summary=summary is None)

    # -------------------------------------------------------------------------------------- plan
    def plan(self, trace: Trace) -> Plan:
        """``before_call``'s decisions for the whole run (held to the loop by
        tests/test_plans_langchain.py). The state's messages are always the carrier, if any, then the
        message events from position ``lo`` to the view's end (a summary replaces a prefix of them), so
        their count and number are prefix sums; the trigger (``_met``), the summarizer's input
        (``_trim``) and the summary's size (``_summary``) are the policy's own; the cutoff is
        ``_cutoff`` on those sums (``_plan_cutoff``). With a local count the trigger is only reached by
        a view that grew: a binary search finds the next call that reaches it. Declined: a run with needs
        (the mock model's re-reads grow later requests), and with ``token_count`` ``provider`` a run
        whose outputs are not all recorded (the reported totals are the mock model's)."""
        a = trace.arrays
        provider = self.token_count == "provider"
        if self.trigger is None:
            return Plan((), (), (), ())
        if trace.derived("has_needs", has_needs) or provider and bool((a.output_tokens < 0).any()):
            return Plan((), (), (), (), declined=True)
        m = trace.derived("langchain_messages", _Messages)
        in_view, prefix, messages = m.in_view, m.prefix, m.messages
        ncalls = len(in_view)
        run = _PlanRun(trace, m)
        reported_of = (lambda: -1) if not provider else run.reported
        call: list[int] = []
        index: list[int] = []
        tokens: list[int] = []
        states: list[int] = []
        summaries: list[tuple[int, int, int]] = []
        c = 0
        while c < ncalls:
            if not provider and m.grows:  # the next call that reaches the trigger (none: done)
                if not self._met(trace, run.n_msgs(ncalls - 1), run.count(ncalls - 1), reported_of):
                    break
                low, high = c, ncalls - 1
                while low < high:
                    mid = (low + high) // 2
                    if self._met(trace, run.n_msgs(mid), run.count(mid), reported_of):
                        high = mid
                    else:
                        low = mid + 1
                c = low
            else:
                run.call = c
                if not self._met(trace, run.n_msgs(c), run.count(c), reported_of):
                    run.sent(c)
                    c += 1
                    continue
            run.call = c
            cutoff = self._plan_cutoff(trace, run, c)
            if cutoff > 0:
                lo, carried = run.lo, run.carrier >= 0
                span = ([run.carrier] if carried else []) + messages[lo : lo + cutoff - carried]
                run.state.carrier = run.carrier
                given = self._trim(trace, run.state, run.view, span)
                size, nbytes, summary = self._summary(trace, given)
                seen = {i for i, _ in given}
                call += [c] * len(span)
                index += span
                tokens += [size] + [0] * (len(span) - 1)
                states += [_SUMMARIZED] + [_SUMMARIZED if i in seen else _DROPPED for i in span[1:]]
                if summary is not None:
                    summaries.append((c, summary.input_tokens, summary.output_tokens))
                replaced = (run.carrier_tokens if carried else 0) + prefix[lo + cutoff - carried] - prefix[lo]
                run.delta += size - replaced
                run.lo = lo + cutoff - carried
                run.carrier, run.carrier_tokens = span[0], size
                run.view.tokens[span[0]], run.view.nbytes[span[0]] = size, nbytes
            if provider:
                run.sent(c)
            c += 1
        return Plan(call, index, tokens, states, tuple(summaries))

    def _plan_cutoff(self, trace: Trace, run: _PlanRun, c: int) -> int:
        """``_cutoff`` of call ``c``'s state messages, read from ``run``'s prefix sums (``_token_cutoff``'s
        binary search as written; ``_safe_cutoff``'s backward scan as the nearest issuer's position)."""
        target, value = self._keep(trace)
        n = run.n_msgs(c)
        if target is not None:
            return run.token_cutoff(c, n, target)
        if n <= value:
            return 0
        return run.safe_cutoff(c, n, n - value)


class _SummaryView:
    """The sizes ``_trim`` reads while a plan is made: every item's recorded ones, the carrier's its
    summary's (the items it reads are verbatim messages and the carrier)."""

    __slots__ = ("tokens", "nbytes")

    def __init__(self, trace: Trace) -> None:
        self.tokens: list[int] = trace.arrays.tokens.tolist()
        self.nbytes: list[int] = trace.arrays.bytes.tolist()


class _Messages:
    """A trace's messages as a plan counts them, from its columns (no events): the message events
    (``Frame.messages``) and their prefix sums, how many are in each call's view, whether views only
    grow, and before each message position the newest assistant message's position (-1: none)."""

    __slots__ = ("messages", "before", "prefix", "in_view", "grows", "kinds", "newest_assistant")

    def __init__(self, trace: Trace) -> None:
        a = trace.arrays
        is_message = ~np.isin(a.kind, _NOT_MESSAGE_CODES)
        messages = np.flatnonzero(is_message)
        before = np.zeros(len(a.kind) + 1, dtype=np.int64)  # message events before each event
        np.cumsum(is_message, out=before[1:])
        prefix = np.zeros(len(messages) + 1, dtype=np.int64)
        np.cumsum(a.tokens[messages], out=prefix[1:])
        in_view = before[a.view_end]
        assistant = np.where(a.kind[messages] == _ASSISTANT, np.arange(len(messages)), -1)
        self.messages: list[int] = messages.tolist()
        self.before: list[int] = before.tolist()
        self.prefix: list[int] = prefix.tolist()
        self.in_view: list[int] = in_view.tolist()
        self.grows = bool((in_view[1:] >= in_view[:-1]).all())
        self.kinds: list[int] = a.kind.tolist()
        self.newest_assistant: list[int] = [-1, *np.maximum.accumulate(assistant).tolist()]


def _call_of_event(trace: Trace) -> dict[int, int]:
    """assistant event -> the call that produced it."""
    return {c.event_index: c.index for c in trace.calls}


class _PlanRun:
    """One run's state while ``LangchainSummarization.plan`` walks its calls: the carrier and its size,
    the first verbatim message position ``lo``, the net change of the view so far (``delta``) and, with
    ``token_count`` ``provider``, each call's reported total. ``msgs`` below is ``before_call``'s list:
    the carrier, then the messages from ``lo`` to the view's end."""

    __slots__ = (
        "trace",
        "m",
        "lo",
        "carrier",
        "carrier_tokens",
        "delta",
        "call",
        "totals",
        "_view",
        "_state",
    )

    def __init__(self, trace: Trace, m: _Messages) -> None:
        self.trace, self.m = trace, m
        self.lo, self.carrier, self.carrier_tokens, self.delta, self.call = 0, -1, 0, 0, 0
        self.totals: list[int] = []  # per call so far: its request + output, as the provider reports it
        self._view: _SummaryView | None = None
        self._state: _State | None = None

    @property
    def view(self) -> _SummaryView:
        if self._view is None:
            self._view = _SummaryView(self.trace)
        return self._view

    @property
    def state(self) -> _State:
        if self._state is None:  # the events are built only for a run that summarizes
            self._state = _State(self.trace)
        return self._state

    def n_msgs(self, c: int) -> int:
        return (self.carrier >= 0) + self.m.in_view[c] - self.lo

    def count(self, c: int) -> int:
        prefix = self.m.prefix
        return (self.carrier_tokens if self.carrier >= 0 else 0) + prefix[self.m.in_view[c]] - prefix[self.lo]

    def at(self, p: int) -> int:
        """``msgs[p]``."""
        carried = self.carrier >= 0
        return self.carrier if carried and p == 0 else self.m.messages[self.lo + p - carried]

    def sent(self, c: int) -> None:
        """Call ``c`` is sent: its reported total, for ``reported`` at later calls."""
        a = self.trace.arrays
        request = max(int(a.prefix[a.view_end[c]]) + self.delta + int(a.residual[c]), 0)
        self.totals.append(request + int(a.output_tokens[c]))

    def reported(self) -> int:
        """``_reported`` at call ``self.call``: the total of the call that made the newest assistant
        message in the state (-1: none, or not yet sent)."""
        p = self.m.newest_assistant[self.m.in_view[self.call]]
        if p >= self.lo:
            newest = self.m.messages[p]
        elif self.carrier >= 0 and self.m.kinds[self.carrier] == _ASSISTANT:
            newest = self.carrier
        else:
            return -1
        k = self.trace.derived("call_of_event", _call_of_event).get(newest, -1)
        return self.totals[k] if 0 <= k < len(self.totals) else -1

    def safe_cutoff(self, c: int, n: int, cut: int) -> int:
        """``_safe_cutoff(msgs, cut)``: the backward scan's answer is the nearest position below ``cut``
        of an issuer of the results from ``cut`` on."""
        kinds, carrier = self.m.kinds, self.carrier
        if cut >= n or kinds[self.at(cut)] != _RESULT or self.at(cut) == carrier:
            return cut
        issuer = self.state.frame.issuer
        issuers, j = set(), cut
        while j < n and kinds[e := self.at(j)] == _RESULT and e != carrier:
            if e in issuer:
                issuers.add(issuer[e])
            j += 1
        best, carried, before = -1, carrier >= 0, self.m.before
        for a in issuers:
            if a == carrier:
                p = 0
            elif kinds[a] in _NOT_MESSAGE_CODES or not self.lo <= before[a] < self.m.in_view[c]:
                continue
            else:
                p = before[a] - self.lo + carried
            if best < p < cut:
                best = p
        return best if best >= 0 else j

    def token_cutoff(self, c: int, n: int, target: int) -> int:
        """``_token_cutoff(msgs, target)`` with the suffix sums read from the prefix sums."""
        if not n:
            return 0
        prefix, lo, count = self.m.prefix, self.lo, self.count(c)
        carried = self.carrier >= 0

        def suffix(k: int) -> int:  # tokens of msgs[k:]
            if carried:
                return count - (0 if k == 0 else self.carrier_tokens + prefix[lo + k - 1] - prefix[lo])
            return count - (prefix[lo + k] - prefix[lo])

        if suffix(0) <= target:
            return 0
        left, right, candidate = 0, n, n
        for _ in range(n.bit_length() + 1):
            if left >= right:
                break
            mid = (left + right) // 2
            if suffix(mid) <= target:
                candidate, right = mid, mid
            else:
                left = mid + 1
        if candidate == n:
            candidate = left
        if candidate >= n:
            if n == 1:
                return 0
            candidate = n - 1
        return self.safe_cutoff(c, n, candidate)
