"""``seed_engine``: effect-agent's ``AgentPolicy`` and its context management, rule by rule as the engine's
code implements them (``../shared/POLICIES.md`` §1; the code in ``../shared/reference/effect-agent`` is
the authority, and ``benchmarks/oracles/effect_agent`` holds this module to it call by call).

Knobs keep the engine's meaning under snake_case names (contextTokenLimit -> context_token_limit, ...).
Budgets (``max_turns``, ``max_tool_calls``, ``max_duration_s``) are required by the real engine; a replay
keeps every budget off unless set, because a recorded run already has its own length (the preset
``seed_engine_defaults`` sets the docs' example values 12 turns, 24 tool calls, 5 minutes).

The trace as effect-agent messages. Events become Effect ``Prompt`` messages: a system event a system
message; the first user event before the first assistant turn the run's input, one user text part
holding ``JSON.stringify(task)`` (so its text is escaped twice); later user events user messages; an
assistant event one text part (when it has text) and one ``tool-call`` part per call id; the tool
results of one assistant turn, admitted together, one ``tool`` message with a ``tool-result`` part each.
``tools`` events are the toolkit, sent beside the prompt: no message. The instruction/input block (every
message before the first assistant message) is protected.

Rules, in the order a turn meets them:

- Tool-result bound (settle time, once): the bound applies to the result's JSON text (a string result:
  ``JSON.stringify(text)``); over ``tool_result_max_bytes`` (floor 256) it becomes the envelope
  ``{"truncatedToolResult":true,"originalBytes":N,"head":...,"tail":...}`` where N is that text's bytes
  and head/tail are an exact prefix and suffix of it (cut at characters), split ~50/50 over the budget
  left after the envelope's own overhead and shrunk until the envelope, with the escapes of head and
  tail, fits. The item's ``nbytes`` is the envelope's JSON text bytes; its tokens scale with bytes.
- Estimate (``estimateMessageTokens``): ceil(UTF-8 bytes of the serialized message / 4), the whole
  message object: type ids, role, options, part framing, ids and names, JSON escapes.
- Trigger, before every turn including the grace turn, at most once a turn: ``estimate +
  output-contract tokens (85, a string output's contract message) > context_token_limit``, where the
  estimate (``nextContextEstimate``) is the last call's reported input + its output tokens + the
  estimate of the messages appended since; on the first call the whole view is estimated. No reserve.
- Prune (modes ``prune``, ``prune-then-summarize``; ``choosePruneBound``): candidates are every tool
  message outside the protected block, those inside a summarized span included; with one candidate or
  none nothing changes. Newest to oldest: the newest always spends the ``keep_recent_tokens`` budget, an
  older one is kept while the budget stays >= 0 and it is not cleared yet; the bound is the newest
  message not kept + 1 and never goes down. Cleared results render ``[tool result cleared by
  compaction]`` with ids and names kept. When the bound moved and the full view's estimate is now
  within the limit, stop; otherwise (or in mode ``summarize``) summarize.
  The rule: ``sim.policies.seed_rules.prune_bound``, beside its vectorised copies (the grid path's and
  the lanes'), which ``tests/test_seed_rules.py`` holds to it.
- Summarize (``chooseSummarizeCut``): walk all messages from the end summing their estimates as rendered
  (cleared at the placeholder's size) until >= ``keep_recent_tokens``; step back over tool messages so no
  result leaves its call; never below the previous cut (``sim.policies.seed_rules.summarize_cut``, beside its
  vectorised copies, held to it by ``tests/test_seed_rules.py``). Covered: the messages from the previous cut
  to this one, the protected block excluded; none -> no summary. The summarizer gets one user message: the
  instruction and a ``<transcript>`` of the covered messages as recorded (cleared results show their original
  content), each clipped at 2,000 characters (a result's JSON at 2,000 within that), the whole within 80,000
  characters with whole messages kept from both ends around an elision marker (``seed_transcript``; the
  facts the summary covers, and so can keep, are those whose bytes lie in what it shows of each event:
  ``summary_sees``). Its metered input is the
  calibrated size of that message's length (in characters, as its limits count them: the event counts give it
  exactly, text or not); its output follows ctxsim's size rule clamp(``summary_ratio`` x covered tokens,
  ``summary_min_tokens``, ``summary_max_tokens``), and the summary enters the view after the protected block
  as "The prior conversation was compacted into this summary:" + the text.
- Overflow: a request over the provider's window is rejected (nothing streamed yet): with a
  ``context_token_limit``, summarize (no prune) and retry once; a second rejection, or no limit, ends
  the run with ``context-overflow``.
- Budgets, strict ``>``: after a call that takes the tool calls over ``max_tool_calls``, or the tokens
  (every call's input + output, summaries included) over ``token_budget``, the batch it declared is
  rejected without running (each result becomes the engine's ``AgentPolicyError`` result, a failure)
  and the next turn is the grace turn (``on_exhaustion: final-answer``: tools forbidden, one call whose
  usage is charged, no further breach) -- or the run stops (``fail``). ``max_turns``: the turn after
  the last allowed one is the grace turn; its batch runs. A token breach by the final answer completes
  the run. Duration (the next turn starting at or after ``max_duration_s``) and cost (modelled,
  cache-aware, over ``cost_budget_microusd``) always stop it. Finish reason
  ``budget-exhausted:<turns|tool_calls|tokens|duration|cost>``. Warnings once per dimension when tokens,
  tool calls or turns reach 80% (integer-exact ``5 x used >= 4 x limit``).
- Run-status line (``run_status: appended``): ``<run-status>turn 3/12 · tool-calls 11/24 · tokens
  84210/200000 · last-context 23480 · elapsed 74s/300s</run-status>``, ``tokens N/unbounded`` without a
  token budget, `` · WARNING: approaching limits ...`` appended when any of turn, tool calls, tokens or
  elapsed is at 80% of its budget; a budget that is off shows no ``/limit``. ``last-context`` is the
  last metered input (the summarizer's, after a summary in this turn). Appended to every request, never
  persisted; its calibrated tokens count in each call.

Compaction changes only the view; the durable store is never rewritten.

Runs of one Conversation (a trace of several runs, ``run_index``). A new Run starts from
``initialCompactionState``: its own instruction/input block (the events from its first to its first
assistant turn, the input JSON-stringified twice) is the protected block, the blocks of earlier runs are
plain history, and its first trigger estimates the whole view (no anchor). What the history holds is the
durable compaction record's business (``persist_compaction``): on, the covered records stay rendered as
the summary and the cleared results stay cleared (the state carries on, its cut and bound included);
off, the history is every prior run's raw records as they settled (envelopes and rejected results
kept), re-estimated message by message, so the first turn over the limit compacts it again from the
start. Budgets, warnings and the run-status counters stay conversation-wide (the engine's are per Run:
not modelled).

What a replay cannot know, and how it is approximated:
- Tool names and call parameters: the canonical trace has neither; every tool-call part is named
  ``bash`` with params ``{}`` (the assistant's text carries what the recording said).
- Tool results' encoded form: taken to be the recorded text as a JSON string; whether a call failed is
  not recorded (every result a success), so ``repeated_failure_limit`` never stops a replay (the
  engine's own rejected batches do not count toward it either).
- Provider-executed tool results (exempt from the bound, kept in the assistant message): not
  distinguishable in a trace; every result is an application result.
- Reasoning parts and provider metadata in messages: not recorded; not estimated.
- Text-free events (redacted or synthetic traces): JSON sizes come from the event's ``json_bytes`` /
  ``json2_bytes`` when carried (exact estimates), else from a stand-in of the recorded sizes (ASCII, the
  newlines spread evenly); the transcript's length follows from the counts (exact but for characters
  outside the Basic Multilingual Plane, which UTF-16 counts twice); the envelope of a result over the
  bound is cut from the stand-in (exact for ASCII without escapes near the cuts).
- The output contract: its estimate (85 tokens, a string output) joins the trigger as in the engine;
  the request carries no contract message (a recorded run's residual holds its own framing).
- Time: a turn starts at its recorded call's time; the duration check looks at the next call's time.
- The summarizer's text (only its size matters: ASCII without escapes), a cost stop the summarizer's own
  usage would raise (checked after the next agent call), and the grace turn's own usage checks. Its
  tokens warning is raised with its usage and reported with the turn's verdict, so a turn with no
  verdict (the grace turn, a context-overflow end) does not report it.
``tool_concurrency`` changes no token or cost figure of a replay.
"""

from __future__ import annotations

import json
import math
import re
from bisect import bisect_left
from dataclasses import dataclass

import numpy as np

from sim.core.types import ItemState, Trace
from sim.cost.tokens import estimate_tokens, scale_tokens
from sim.policies.base import AfterCall, Change, Decision, Policy, RunStatus, SummaryCall, View, register
from sim.policies.seed_messages import (
    CALL_PART,
    CLEARED_RESULT,
    CLEARED_RESULT_JSON,
    MESSAGE,
    NO_SUMMARY,
    OUTPUT_CONTRACT_TOKENS,
    RESULT_CLIP,
    SUMMARY_PREFIX,
    TEXT_PART,
    bound_result,
    estimate,
    parts_bytes,
    prompt_units,
    rejection_bytes,
    result_part,
    summary_message,
    units,
)
from sim.policies.seed_rules import prune_bound, rendered_estimate, summarize_cut
from sim.policies.seed_state import SeedEvents, SeedState
from sim.policies.seed_transcript import summary_sees, transcript_block
from sim.util.errors import ConfigError

MODES = ("prune", "summarize", "prune-then-summarize")
ON_EXHAUSTION = ("final-answer", "fail")
RUN_STATUS = ("appended", "off")
TOOL_RESULT_FLOOR_BYTES = 256
PRUNE_PLACEHOLDER = CLEARED_RESULT
RUN_STATUS_WARNING = " · WARNING: approaching limits — converge and deliver your final result now."
TOOL_CALL_LIMIT = "tool-calls"  # the engine's names of the two limits a rejected batch's result names
TOKEN_LIMIT = "tokens"


def nearing(used: float, limit: float) -> bool:
    """The engine's 80% check, integer-exact: 5 x used >= 4 x limit."""
    return used * 5 >= limit * 4


# ------------------------------------------------------------------------------ the tool-result envelope
def _envelope(trace: Trace, info: SeedEvents, i: int, max_bytes: int) -> tuple[int, int, tuple]:
    """(bytes, length as the transcript shows it, the byte ranges of the result it shows) of result i's
    envelope: once per trace and bound."""
    memo = trace.derived(f"seed_engine_envelopes_{max_bytes}", lambda t: {})
    if i not in memo:
        memo[i] = envelope_of(info.encoded(trace, i), max_bytes)
    return memo[i]


def envelope_of(encoded: str, max_bytes: int) -> tuple[int, int, tuple]:
    """``_envelope`` of a result whose text is ``encoded`` (the grid path's tables read it for a text-free
    result's stand-in without building the trace's events)."""
    text = bound_result(json_text(encoded), max_bytes)
    assert text is not None  # the caller checked the result is over the bound
    return len(text.encode()), units(text[: RESULT_CLIP + 1]), _shown(encoded, text)


def _shown(content: str, envelope: str) -> tuple[tuple[int, int], ...]:
    """UTF-8 byte ranges of ``content`` whose characters the envelope's head and tail show whole (the
    head and tail are slices of the content's JSON text: a character cut inside its escape is not shown).
    For a text-free trace ``content`` is its stand-in, whose bytes and escapes match the recorded counts."""
    env = json.loads(envelope)
    head, tail = len(env["head"].encode()), len(env["tail"].encode())
    nbytes = len(content.encode())
    if content.isascii() and not _NEEDS_ESCAPE.search(content):  # the JSON text is the content in quotes
        h, t = max(head - 1, 0), max(tail - 1, 0)
    elif content.isascii():  # one byte a character: the characters whose escapes fit, from the sums
        # (every escape is a byte or more: the first ``head`` and last ``tail`` characters hold the answer)
        raw = np.frombuffer(content.encode(), dtype=np.uint8)
        spent = np.cumsum(_ASCII_ESCAPED[raw[:head]])
        h = int(np.searchsorted(spent, head - 1, side="right"))  # 1 + spent <= head
        spent = np.cumsum(_ASCII_ESCAPED[raw[::-1][:tail]])
        t = int(np.searchsorted(spent, tail - 1, side="right"))
    else:
        h = t = 0
        used = 1  # the opening quote
        for ch in content:
            used += len(json.dumps(ch, ensure_ascii=False).encode()) - 2
            if used > head:
                break
            h += len(ch.encode())
        used = 1  # the closing quote
        for ch in reversed(content):
            used += len(json.dumps(ch, ensure_ascii=False).encode()) - 2
            if used > tail:
                break
            t += len(ch.encode())
    return tuple(r for r in ((0, min(h, nbytes)), (max(nbytes - t, 0), nbytes)) if r[1] > r[0])


_NEEDS_ESCAPE = re.compile(r'["\\\x00-\x1f]')
# bytes of each ASCII character's JSON escape (what the character loop below adds per character)
_ASCII_ESCAPED = np.array([len(json.dumps(chr(c), ensure_ascii=False).encode()) - 2 for c in range(128)])


def json_text(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


@register
@dataclass(frozen=True)
class SeedEngine(Policy):
    """effect-agent's AgentPolicy: tool-result bounds, prune-then-summarize, budgets, grace turn. The knobs
    a grid of it varies while replayed as lanes: ``sim.policies.seed_knobs.GRID_KNOBS``."""

    context_token_limit: int | None = None
    keep_recent_tokens: int = 20000
    mode: str = "prune-then-summarize"
    tool_result_max_bytes: int = 51200
    run_status: str = "appended"
    on_exhaustion: str = "final-answer"
    max_turns: int | None = None
    max_tool_calls: int | None = None
    max_duration_s: float | None = None
    token_budget: int | None = None
    cost_budget_microusd: int | None = None
    repeated_failure_limit: int = 3
    tool_concurrency: int = 4
    summary_ratio: float = 0.1
    summary_min_tokens: int = 256
    summary_max_tokens: int = 2048
    persist_compaction: bool = True  # the durable compaction record (a conversation of several runs)

    name = "seed_engine"
    # ``ctxsim size``'s default grid (``--limits``/``--keeps`` are its shorthand; ``sim.analysis.size``)
    size_grid = {
        "context_token_limit": (16000, 24000, 32000, 48000, 64000, 96000, 128000, 200000),
        "keep_recent_tokens": (2000, 4000, 8000, 12000, 16000, 20000),
    }
    size_off = {"context_token_limit": None}  # switched off: the sizing's baseline
    settles = True
    acts_before_call = True
    recovers = True

    def __post_init__(self) -> None:
        if not isinstance(self.persist_compaction, bool):
            raise ConfigError(
                f"policy '{self.name}': persist_compaction={self.persist_compaction!r} is not true or false"
            )

        def bad(knob: str, allowed: str) -> ConfigError:
            return ConfigError(f"policy '{self.name}': {knob}={getattr(self, knob)!r} is not {allowed}")

        def integer(v) -> bool:
            return isinstance(v, int) and not isinstance(v, bool)

        limit = self.context_token_limit
        if limit is not None and not (integer(limit) and limit >= 1):
            raise bad("context_token_limit", "null or an integer >= 1")
        if not (integer(self.keep_recent_tokens) and self.keep_recent_tokens >= 1):
            raise bad("keep_recent_tokens", "an integer >= 1")
        if limit is not None and self.keep_recent_tokens >= limit:
            raise bad("keep_recent_tokens", f"below context_token_limit: an integer in [1, {limit - 1}]")
        for knob, choices in (("mode", MODES), ("on_exhaustion", ON_EXHAUSTION), ("run_status", RUN_STATUS)):
            if getattr(self, knob) not in choices:
                raise bad(knob, "one of " + ", ".join(choices))
        if not (
            integer(self.tool_result_max_bytes) and self.tool_result_max_bytes >= TOOL_RESULT_FLOOR_BYTES
        ):
            raise bad("tool_result_max_bytes", f"an integer >= {TOOL_RESULT_FLOOR_BYTES}")
        for knob in ("max_turns", "max_tool_calls", "token_budget"):
            v = getattr(self, knob)
            if v is not None and not (integer(v) and v >= 1):
                raise bad(knob, "null (off) or an integer >= 1")
        d = self.max_duration_s
        if d is not None and not (
            isinstance(d, int | float) and not isinstance(d, bool) and 0 < d < math.inf
        ):
            raise bad("max_duration_s", "null (off) or a finite number of seconds > 0")
        c = self.cost_budget_microusd
        if c is not None and not (integer(c) and c >= 0):
            raise bad("cost_budget_microusd", "null (off) or an integer >= 0")
        if not (integer(self.repeated_failure_limit) and self.repeated_failure_limit >= 0):
            raise bad("repeated_failure_limit", "an integer >= 0 (0: off)")
        if not (integer(self.tool_concurrency) and self.tool_concurrency >= 1):
            raise bad("tool_concurrency", "an integer >= 1")
        r = self.summary_ratio
        if not (isinstance(r, int | float) and not isinstance(r, bool) and 0 < r <= 1):
            raise bad("summary_ratio", "a number in (0, 1]")
        if not (integer(self.summary_min_tokens) and self.summary_min_tokens >= 1):
            raise bad("summary_min_tokens", "an integer >= 1")
        if not (integer(self.summary_max_tokens) and self.summary_max_tokens >= self.summary_min_tokens):
            raise bad("summary_max_tokens", f"an integer >= summary_min_tokens ({self.summary_min_tokens})")

    # -------------------------------------------------------------------------------------- switches
    @property
    def reports_status(self) -> bool:  # type: ignore[override]
        return self.run_status == "appended"

    @property
    def checks_after_call(self) -> bool:  # type: ignore[override]
        budgets = (self.max_turns, self.max_tool_calls, self.max_duration_s, self.token_budget)
        return any(v is not None for v in (*budgets, self.cost_budget_microusd))

    def start(self, trace: Trace) -> SeedState:
        return SeedState(trace.derived("seed_engine_events", SeedEvents))

    # ----------------------------------------------------------------------------- a new run
    @property
    def persists_compaction(self) -> bool:  # type: ignore[override]
        return self.persist_compaction

    def start_run(self, trace: Trace, state: SeedState, run: int, view: View, persisted: bool) -> SeedState:
        """A new Run of the conversation: the engine's compaction state is fresh (initialCompactionState);
        the history it is handed renders what the durable record covers as the summary and cleared results
        (``persisted``), or is every prior run's raw records (settle-time bounds kept) without it. The
        new run's instructions and input are its protected block; the first estimate is the whole view."""
        if persisted:
            state.last_msgs = -1
        else:
            fresh = SeedState(state.info)
            for name in ("envelopes", "rejected", "rejecting", "warned", "pending_warnings",
                         "token_exhausted", "exhausted", "grace_next", "log"):  # fmt: skip
                setattr(fresh, name, getattr(state, name))
            state = fresh
        state.block = state.info.blocks[run]
        state.protected_start = state.protected_end = len(state.role)
        return state

    # ----------------------------------------------------------------------------- tool-result bound
    def settle(self, trace: Trace, state: SeedState, index: int, view: View) -> Change | None:
        e = trace.events[index]
        if e.kind != "tool_result":
            return None
        rejecting = state.rejecting
        if rejecting is not None and e.tool_call_id in rejecting[2]:
            nbytes = rejection_bytes(rejecting[0], rejecting[1])
            state.rejected[index] = nbytes
            return Change(
                index, ItemState.MASKED, estimate_tokens(nbytes, trace.bytes_per_token), nbytes, "rejected"
            )
        ch = self._bound(trace, state.info, index)
        if ch is not None:
            shown = _envelope(trace, state.info, index, self.tool_result_max_bytes)[1]  # (memoised)
            state.envelopes[index] = (state.info.jb[index], ch.nbytes, shown)
        return ch

    def _bound(self, trace: Trace, info: SeedEvents, index: int) -> Change | None:
        """Tool result ``index`` in its envelope when its JSON text is over ``tool_result_max_bytes``."""
        if info.jb[index] <= self.tool_result_max_bytes:
            return None
        nbytes, _, kept = _envelope(trace, info, index, self.tool_result_max_bytes)
        tokens = scale_tokens(trace.events[index].tokens, trace.events[index].bytes, nbytes)
        return Change(index, ItemState.BOUNDED, tokens, nbytes, "envelope", kept)

    def reread_bound(self, trace: Trace, index: int) -> Change | None:
        """A re-run tool call's result passes the same envelope as at settle time."""
        if trace.events[index].kind != "tool_result":
            return None
        return self._bound(trace, trace.derived("seed_engine_events", SeedEvents), index)

    # ---------------------------------------------------------------------------------- the messages
    def admit(self, trace: Trace, state: SeedState, view: View) -> None:
        """Turn the events admitted since the last call into source messages (their estimates)."""
        info, events = state.info, trace.events
        chunk = state.built
        for i in range(chunk, view.n):
            e = events[i]
            kind = e.kind
            if kind == "tools":
                continue
            if kind == "tool_result":
                failed = i in state.rejected
                if failed:
                    result = state.rejected[i]
                elif i in state.envelopes:
                    result = state.envelopes[i][1]
                else:
                    result = info.jb[i]
                ids = info.id_json[i][0]
                part = result_part(ids, result, failed)
                cleared = result_part(ids, CLEARED_RESULT_JSON, failed)
                m = len(state.role) - 1
                joins = (
                    i > chunk
                    and m >= 0
                    and state.role[m] == "tool"
                    and state.end[m] == i
                    and i in info.issuer
                    and info.issuer.get(i - 1) == info.issuer[i]
                )
                if joins:  # one tool message per batch: the results of one assistant turn
                    old = state.est[m]
                    state.parts[m].append(part)
                    state.cleared_parts[m].append(cleared)
                    state.end[m] = i + 1
                    state.est[m] = estimate(MESSAGE["tool"] + parts_bytes(state.parts[m]))
                    state.est_cleared[m] = estimate(MESSAGE["tool"] + parts_bytes(state.cleared_parts[m]))
                    state.view_est += state.est[m] - old
                    state.appended_est += state.est[m] - old
                    continue
                tool = MESSAGE["tool"] + 2  # a content array of one part
                self._new_message(state, "tool", i, estimate(tool + part), estimate(tool + cleared))
                state.parts[-1], state.cleared_parts[-1] = [part], [cleared]
                continue
            if kind == "system":
                size = MESSAGE["system"] + info.jb[i]
                role = "system"
            elif kind == "user":
                text = info.inputs[i] if i in info.inputs else info.jb[i]
                size = MESSAGE["user"] + parts_bytes((TEXT_PART + text,))
                role = "user"
            else:  # assistant: its text (when it has one) and its tool calls
                parts = [TEXT_PART + info.jb[i]] if e.bytes > 0 else []
                parts += [CALL_PART + j for j in info.id_json[i]]
                if not parts:
                    continue  # a response of no parts adds no message
                size = MESSAGE["assistant"] + parts_bytes(parts)
                role = "assistant"
            est = estimate(size)
            self._new_message(state, role, i, est, est)
        state.built = view.n

    @staticmethod
    def _new_message(state: SeedState, role: str, i: int, est: int, est_cleared: int) -> None:
        m = len(state.role)
        state.role.append(role)
        state.first.append(i)
        state.end.append(i + 1)
        state.parts.append(None)
        state.cleared_parts.append(None)
        state.est.append(est)
        state.est_cleared.append(est_cleared)
        if state.block[0] <= i < state.block[1]:
            if state.protected_end <= state.protected_start:
                state.protected_start = m
            state.protected_end = m + 1
        elif role == "tool":
            state.tool_msgs.append(m)
        state.view_est += est
        state.appended_est += est

    def _rendered(self, state: SeedState, m: int) -> int:
        """Message m's estimate as the view renders it (``seed_rules.rendered_estimate``, the rendering
        ``summarize_cut`` walks)."""
        return rendered_estimate(state.role, state.est, state.est_cleared, state.cleared_through, m)

    # ------------------------------------------------------------------------------------ compaction
    def before_call(self, trace: Trace, state: SeedState, view: View, call: int, status: RunStatus):
        state.summary_input = None
        limit = self.context_token_limit
        if limit is None:  # never compacts: no messages to size
            state.log.append({"call": call, "grace": state.grace_next, "limit": None, "status": None})
            return ()
        self.admit(trace, state, view)
        turn = call + 1
        last_input, last_output = status.last_input or 0, status.last_output or 0
        anchored = last_input > 0 and state.last_msgs >= 0
        # nextContextEstimate: anchored on the last reported call while the view only grew
        estimate_now = last_input + last_output + state.appended_est if anchored else state.view_est
        rec: dict = {
            "call": call,
            "grace": state.grace_next,
            "anchored": anchored,
            "last_input": last_input,
            "last_output": last_output,
            "appended": state.appended_est if anchored else None,
            "estimate": estimate_now,
            "contract": OUTPUT_CONTRACT_TOKENS,
            "limit": limit,
            "triggered": False,
            "prune": None,
            "summarize": None,
            "overflow": None,
            "status": None,
        }
        state.log.append(rec)
        result: list[Change] | Decision = []
        if estimate_now + OUTPUT_CONTRACT_TOKENS > limit and state.last_compaction_turn != turn:
            rec["triggered"] = True
            state.last_compaction_turn = turn
            result = self._compact(trace, state, view, rec, force=False)
            self._summarizer_usage(state, status, rec)
        state.last_msgs, state.appended_est = len(state.role), 0  # compactedOutgoing
        return result

    def on_overflow(self, trace: Trace, state: SeedState, view: View, call: int, status: RunStatus):
        turn = call + 1
        if self.context_token_limit is None or state.overflow_retry_turn == turn:
            return None
        state.overflow_retry_turn = state.last_compaction_turn = turn
        rec = state.log[-1]
        rec["overflow"] = {"prune": None, "summarize": None}
        decision = self._compact(trace, state, view, rec["overflow"], force=True)
        self._summarizer_usage(state, status, rec["overflow"])
        return decision

    def _summarizer_usage(self, state: SeedState, status: RunStatus, rec: dict) -> None:
        """consumeUsage of the summarizer: its tokens warning fires with its usage, inside compactContext,
        so it stands whatever ends the turn later (a fail stop skips the agent call's own checks); it is
        reported with the turn's verdict. ``status.tokens`` is the usage before this summarizer call."""
        s = rec.get("summarize")
        budget = self.token_budget
        if s is None or budget is None or "tokens" in state.warned:
            return
        if nearing(status.tokens + s["input_tokens"] + s["output_tokens"], budget):
            state.warned.add("tokens")
            state.pending_warnings.append("tokens")

    def _compact(self, trace: Trace, state: SeedState, view: View, rec: dict, force: bool) -> Decision:
        """compactContext: prune (unless forced or mode summarize), then summarize if still over."""
        limit = self.context_token_limit
        assert limit is not None
        rec["before"] = state.view_est
        changes: list[Change] = []
        if not force and self.mode != "summarize":
            bound = self._prune_bound(state)
            if bound > state.cleared_through:
                changes = self._clear(trace, state, view, bound, rec)
                if state.view_est <= limit:
                    return Decision(changes)
        if self.mode == "prune" and not force:
            return Decision(changes)
        return self._summarize(trace, state, view, {c.index: c for c in changes}, changes, rec)

    def _prune_bound(self, state: SeedState) -> int:
        """choosePruneBound over the unprotected tool messages, newest first (``seed_rules.prune_bound``,
        the one rule the fast paths' copies are held to)."""
        return prune_bound(state.est, state.tool_msgs, state.cleared_through, self.keep_recent_tokens)

    def _clear(self, trace: Trace, state: SeedState, view: View, bound: int, rec: dict) -> list[Change]:
        tm = state.tool_msgs
        placeholder = len(PRUNE_PLACEHOLDER.encode())
        tokens = estimate_tokens(placeholder, trace.bytes_per_token)
        changes, cleared = [], []
        for m in tm[bisect_left(tm, state.cleared_through) : bisect_left(tm, bound)]:
            visible = m >= state.summarized_through
            if visible:
                state.view_est += state.est_cleared[m] - state.est[m]
            for i in range(state.first[m], state.end[m]):
                cleared.append(i)
                if visible and view.state[i] != ItemState.SUMMARIZED:
                    changes.append(Change(i, ItemState.MASKED, tokens, placeholder, "prune"))
        rec["prune"] = {
            "from": state.event_at(state.cleared_through, view.n),
            "to": state.event_at(bound, view.n),
            "cleared": cleared,
            "after": 0,
        }
        state.cleared_through = bound
        rec["prune"]["after"] = state.view_est
        return changes

    def _cut(self, state: SeedState) -> int:
        """chooseSummarizeCut: keep a tail of at least keep_recent_tokens, results with their calls
        (``seed_rules.summarize_cut``, the one rule the fast paths' copies are held to)."""
        return summarize_cut(
            state.role, state.est, state.est_cleared, state.cleared_through, state.summarized_through,
            self.keep_recent_tokens,
        )  # fmt: skip

    def _summarize(
        self, trace, state: SeedState, view: View, pending: dict[int, Change], changes, rec
    ) -> Decision:
        cut = self._cut(state)
        covered = [m for m in range(state.summarized_through, cut) if not _protected(state, m)]
        if not covered:
            return Decision(changes)
        bpt = trace.bytes_per_token
        covered_tokens = state.summary_tokens
        blocks = []
        for m in covered:
            for i in range(state.first[m], state.end[m]):
                c = pending.get(i)
                covered_tokens += c.tokens if c is not None else view.tokens[i]
            b = self.transcript_block(trace, state, m)
            if b is not None:
                blocks.append(b)
        chars, elided = prompt_units(blocks, state.summary)
        summary_in = estimate_tokens(chars, bpt)
        out = min(
            max(round(self.summary_ratio * covered_tokens), self.summary_min_tokens), self.summary_max_tokens
        )
        text = round(out * (bpt or 4.0)) or len(NO_SUMMARY)
        state.view_est -= sum(self._rendered(state, m) for m in covered) + state.summary_est
        state.summary, state.summary_est = text, estimate(summary_message(text))
        state.view_est += state.summary_est
        state.summarized_through = cut
        prefix = len(SUMMARY_PREFIX.encode())
        msg_tokens = out + estimate_tokens(prefix, bpt)
        first = state.first[covered[0]]
        carrier = state.carrier if state.carrier >= 0 else first
        more = [Change(carrier, ItemState.SUMMARIZED, msg_tokens, prefix + text, "summary")]
        more += [
            Change(i, ItemState.SUMMARIZED, 0, 0, "summarized")
            for m in covered
            for i in range(state.first[m], state.end[m])
            if i != carrier
        ]
        state.carrier, state.summary_tokens, state.summary_input = carrier, msg_tokens, summary_in
        rec["summarize"] = {
            "cut": state.event_at(cut, view.n),
            "covered": [first, state.end[covered[-1]]],
            "prompt_chars": chars,
            "elided": elided,
            "input_tokens": summary_in,
            "output_tokens": out,
            "after": state.view_est,
        }
        sees = summary_sees(trace, state, covered)
        return Decision(list(changes) + more, SummaryCall(summary_in, out, sees))

    def transcript_block(self, trace: Trace, state: SeedState, m: int):
        """The transcript block of source message m (``sim.policies.seed_transcript``)."""
        return transcript_block(trace, state, m)

    # --------------------------------------------------------------------------- status and budgets
    def status_text(self, status: RunStatus, last_context: int) -> str:
        turn, tools, tokens = status.turns + 1, status.tool_calls, status.tokens
        elapsed = max(0, math.floor(status.elapsed_s))
        max_turns, max_tools, budget = self.max_turns, self.max_tool_calls, self.token_budget
        limit_s = None if self.max_duration_s is None else math.floor(self.max_duration_s)
        warn = (
            (max_turns is not None and nearing(turn, max_turns))
            or (max_tools is not None and nearing(tools, max_tools))
            or (budget is not None and nearing(tokens, budget))
            or (limit_s is not None and nearing(elapsed, limit_s))
        )
        return (
            f"<run-status>turn {turn}{'' if max_turns is None else f'/{max_turns}'} · "
            f"tool-calls {tools}{'' if max_tools is None else f'/{max_tools}'} · "
            f"tokens {tokens}/{'unbounded' if budget is None else budget} · last-context {last_context} · "
            f"elapsed {elapsed}s{'' if limit_s is None else f'/{limit_s}s'}"
            f"{RUN_STATUS_WARNING if warn else ''}</run-status>"
        )

    def status_line(self, status: RunStatus) -> str:
        """formatRunStatus for these counters (``turn`` is ``status.turns + 1``)."""
        return self.status_text(status, status.last_input or 0)

    def status_tokens(self, trace: Trace, state: SeedState, call: int, status: RunStatus) -> int:
        last = state.summary_input if state.summary_input is not None else (status.last_input or 0)
        line = self.status_text(status, last)
        if state.log:
            state.log[-1]["status"] = line
        return estimate_tokens(len(line.encode()), trace.bytes_per_token)

    def after_call(
        self, trace: Trace, state: SeedState, view: View, call: int, status: RunStatus
    ) -> AfterCall:
        info = state.info
        turn = call + 1
        last = call + 1 >= len(trace.calls)  # the recorded final answer
        tools, tokens = status.tool_calls, status.tokens
        over_tools = self.max_tool_calls is not None and tools > self.max_tool_calls
        turns_out = self.max_turns is not None and turn >= self.max_turns  # the next turn is past them
        fail = self.on_exhaustion == "fail"
        warnings = state.pending_warnings  # the summarizer's, raised earlier in this turn
        state.pending_warnings = []
        if not last and fail:  # checked on the response, before its usage is accounted
            if over_tools:
                return AfterCall(tuple(warnings), "budget-exhausted:tool_calls")
            if turns_out:
                return AfterCall(tuple(warnings), "budget-exhausted:turns")
        breach = self.token_budget is not None and not state.token_exhausted and tokens > self.token_budget
        if breach and fail:
            return AfterCall(tuple(warnings), "budget-exhausted:tokens")
        if breach:
            state.token_exhausted = True
            state.exhausted = state.exhausted or "tokens"
        if self.cost_budget_microusd is not None and status.cost_microusd > self.cost_budget_microusd:
            return AfterCall(tuple(warnings), "budget-exhausted:cost")
        for dim, used, limit in (
            ("tokens", tokens, self.token_budget),
            ("tool_calls", tools, self.max_tool_calls),
            ("turns", turn, self.max_turns),
        ):
            if limit is not None and dim not in state.warned and nearing(used, limit):
                state.warned.add(dim)
                warnings.append(dim)
        if last:  # a breaching final answer completes the run, exhausted
            return AfterCall(tuple(warnings), "budget-exhausted:tokens" if breach else None)
        if self.max_duration_s is not None and info.elapsed[call + 1] >= self.max_duration_s:
            return AfterCall(tuple(warnings), "budget-exhausted:duration")
        if not (breach or over_tools or turns_out):
            return AfterCall(tuple(warnings))
        if breach or over_tools:  # the declared batch never runs: each result is the rejection
            limit_name, value = (
                (TOKEN_LIMIT, self.token_budget) if breach else (TOOL_CALL_LIMIT, self.max_tool_calls)
            )
            state.rejecting = (limit_name, value, info.ids[call])
        dim = state.exhausted or ("turns" if turns_out else "tool_calls" if over_tools else "tokens")
        state.exhausted, state.grace_next = dim, True
        return AfterCall(tuple(warnings), f"budget-exhausted:{dim}", True)

    # ------------------------------------------------------------------------------------------ explain
    def explain(
        self, trace: Trace, state: SeedState, view: View, call: int
    ) -> tuple[dict[str, list], list[str]]:
        """Each item's message estimate as sent (on the message's first item; "+" on the rest of a batch;
        "-" when covered by the summary, whose estimate sits on its slot), a bounded result's
        originalBytes, and the trigger's terms."""
        if self.context_token_limit is None:
            self.admit(trace, state, view)  # sized for the display only: without a limit nothing acts
        est: list = [None] * view.n
        of = {i: m for m in range(len(state.role)) for i in range(state.first[m], state.end[m])}
        for i in range(view.n):
            m = of.get(i)
            if m is None:
                continue
            covered = m < state.summarized_through and not _protected(state, m)
            if i == state.carrier and state.summary is not None:
                est[i] = state.summary_est
            elif covered:
                est[i] = "-"
            else:
                est[i] = self._rendered(state, m) if i == state.first[m] else "+"
        original = [state.envelopes[i][0] if i in state.envelopes else None for i in range(view.n)]
        rec = next((r for r in reversed(state.log) if r["call"] == call), None)
        return {"seed_estimate": est, "original_bytes": original}, [] if rec is None else _why(rec)

    def bound_violations(self, trace: Trace, view: View) -> list[str]:
        return [
            f"tool result {i} weighs {view.nbytes[i]} bytes in view, over tool_result_max_bytes"
            for i in range(view.n)
            if trace.events[i].kind == "tool_result"
            and view.state[i] in (ItemState.VERBATIM, ItemState.BOUNDED)
            and view.nbytes[i] > self.tool_result_max_bytes
        ]


def _protected(state: SeedState, m: int) -> bool:
    return state.protected_start <= m < state.protected_end


def _why(rec: dict) -> list[str]:
    """The trigger's terms and what compaction did, in words (explain)."""
    if rec["limit"] is None:
        lines = ["no context_token_limit: the seed engine never compacts"]
        return lines + ([f"run status: {rec['status']}"] if rec.get("status") else [])
    terms = (
        f"last input {rec['last_input']:,} + its output {rec['last_output']:,} + appended {rec['appended']:,}"
        if rec["anchored"]
        else "the whole view (no call reported yet, a new run, or the view was just compacted)"
    )
    lines = [f"seed estimate {rec['estimate']:,} = {terms}; + output contract {rec['contract']}"]
    limit = rec["limit"]
    total = rec["estimate"] + rec["contract"]
    if not rec["triggered"]:
        over = total > limit
        why = "already compacted this turn" if over else "within"
        lines.append(f"= {total:,} vs context_token_limit {limit:,}: {why}, no compaction")
    else:
        lines.append(
            f"= {total:,} > context_token_limit {limit:,}: compaction (view estimate {rec['before']:,})"
        )
    for label, r in (("", rec), ("overflow retry: ", rec.get("overflow") or {})):
        p, s = r.get("prune"), r.get("summarize")
        if p:
            lines.append(
                f"{label}prune: bound {p['from']} -> {p['to']}, {len(p['cleared'])} results cleared, "
                f"full view {p['after']:,}"
            )
        if s:
            lines.append(
                f"{label}summarize: cut at {s['cut']}, covers items {s['covered'][0]}-{s['covered'][1] - 1}; "
                f"transcript {s['prompt_chars']:,} characters ({s['elided']} messages elided), summarizer "
                f"{s['input_tokens']:,} in / {s['output_tokens']:,} out; full view {s['after']:,}"
            )
        if r is not rec and r and not s:
            lines.append(f"{label}nothing to summarize")
    if rec.get("status"):
        lines.append(f"run status: {rec['status']}")
    return lines
