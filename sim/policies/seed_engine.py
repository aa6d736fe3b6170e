"""``seed_engine``: the context policy of effect-agent's ``AgentPolicy`` (../shared/POLICIES.md §1).

Knobs keep the seed's meaning under snake_case names (contextTokenLimit -> context_token_limit, ...).
Rules, in the order a turn meets them:

- Tool-result bound, at settle time, once: a result over ``tool_result_max_bytes`` (floor 256) becomes
  the envelope ``{"truncatedToolResult":true,"originalBytes":N,"head":...,"tail":...}``; head and tail are
  an exact byte prefix and suffix splitting the budget left after the envelope's own overhead (compact
  JSON with empty head and tail) in half, the head taking the smaller half, each shortened to a UTF-8
  character boundary. Sizes are the envelope's (JSON escapes inside head/tail are not counted). The rest
  is gone for good. Not modelled: the exemption of provider-executed tool results (traces do not say).
- Trigger (before each turn, never for the grace turn): last provider-reported input + estimate of the
  items appended since + output reserve > ``context_token_limit``. Estimates are the seed's:
  ceil(bytes / 4) of the serialised message, taken here as its text bytes + 16 bytes of framing. On the
  first call nothing was reported yet, so the whole request is estimated.
- Prune (modes ``prune`` and ``prune-then-summarize``): tool results newest -> oldest; the newest is
  always protected, older ones while the running sum of their estimates fits ``keep_recent_tokens``;
  every older result becomes ``[tool result cleared by compaction]`` (pairing kept). The cleared boundary
  only moves forward. If the estimate is now within the limit, stop.
- Summarize (mode ``summarize``, or still over after a prune, or overflow recovery): the cut keeps a tail
  whose estimates sum to at least ``keep_recent_tokens``, moved back so a tool result stays with its call;
  the instruction/input block (every event before the first assistant turn) is preserved. The covered
  span, incremental over the previous summary, goes to one metered mock-model call whose input is the
  summarizer instruction + the previous summary + each covered message clipped at 2,000 characters, the
  whole capped at 80,000 characters (middle elision scales the messages down); its output is
  clamp(``summary_ratio`` x covered tokens, ``summary_min_tokens``, ``summary_max_tokens``). The summary
  enters the view as a user message starting "The prior conversation was compacted into this summary:"
  in the slot of the first covered event. At most one prune and one summary per turn (overflow recovery
  may force one more).
- Overflow: a request over the model's window is rejected; the policy summarizes (forced) for one retry;
  a second rejection, or no ``context_token_limit``, ends the run with ``context-overflow``.
- Budgets (off unless set when replaying; preset ``seed_engine_defaults`` sets the seed's 12 turns, 24
  tool calls, 300 s): a warning once per dimension at 80%; exhaustion of turns / tool calls / tokens with
  ``on_exhaustion: final-answer`` -> one grace call with tools forbidden; ``fail`` -> stop; duration
  and cost always fail. Finish reason ``budget-exhausted:<dimension>``. Cost is the modelled,
  cache-aware cost (sim.cache) at the priced model's rates; a cost budget on an unpriced model is an error.
- Run-status line (``run_status: appended``): ``<run-status>turn 3/12 · tool-calls 11/24 · tokens ... ·
  last-context ... · elapsed 74s/300s</run-status>`` appended to every request, not persisted; its tokens
  count in every call. ``tool_concurrency`` changes no token or cost figure of a replay.
Compaction changes only the view; the durable store is never rewritten.
"""

from __future__ import annotations

import json
from bisect import bisect_left
from dataclasses import dataclass

from sim.errors import ConfigError
from sim.policies.base import AfterCall, Change, Decision, Policy, RunStatus, SummaryCall, View, register
from sim.tokens import MESSAGE_OVERHEAD_BYTES, estimate_tokens, scale_tokens, seed_estimate
from sim.types import ItemState, Trace

MODES = ("prune", "summarize", "prune-then-summarize")
ON_EXHAUSTION = ("final-answer", "fail")
RUN_STATUS = ("appended", "off")
TOOL_RESULT_FLOOR_BYTES = 256
PRUNE_PLACEHOLDER = "[tool result cleared by compaction]"
SUMMARY_PREFIX = "The prior conversation was compacted into this summary:\n"
SUMMARY_SECTIONS = ("Goal", "Constraints", "Progress", "Decisions", "Next steps", "Critical context")
SUMMARIZER_INSTRUCTION = (
    "Summarize the conversation below for the agent that will continue it. Keep the previous summary's "
    "content. Use the sections " + ", ".join(SUMMARY_SECTIONS) + "."
)
CLIP_CHARS = 2000
CAP_CHARS = 80000
WARN_AT = 0.8


def est(nbytes: int) -> int:
    """The seed's estimate of one message: ceil(serialised bytes / 4)."""
    return seed_estimate(nbytes + MESSAGE_OVERHEAD_BYTES)


def envelope_overhead(original_bytes: int) -> int:
    empty = {"truncatedToolResult": True, "originalBytes": original_bytes, "head": "", "tail": ""}
    return len(json.dumps(empty, separators=(",", ":")))


def split_head_tail(raw: bytes, head_budget: int, tail_budget: int) -> tuple[int, int]:
    """Byte lengths of the head and tail: at most the budgets, never inside a UTF-8 character."""

    def boundary(p: int) -> bool:
        return p >= len(raw) or (raw[p] & 0xC0) != 0x80

    h = min(head_budget, len(raw))
    while h > 0 and not boundary(h):
        h -= 1
    start = max(len(raw) - tail_budget, 0)
    while start < len(raw) and not boundary(start):
        start += 1
    return h, len(raw) - start


class _State:
    __slots__ = (
        "results",
        "issuer",
        "block_end",
        "last_n",
        "cleared_upto",
        "covered_upto",
        "carrier",
        "summary_tokens",
        "summary_bytes",
        "tail_est",
        "warned",
    )

    def __init__(self, results: list[int], issuer: dict[int, int], block_end: int) -> None:
        self.results = results  # tool_result event indices, ascending
        self.issuer = issuer  # tool_result index -> the assistant event that issued its call
        self.block_end = block_end  # first assistant event: [0, block_end) is the instruction/input block
        self.last_n = 0  # view size at the previous call: items after it were appended since
        self.cleared_upto = 0  # tool results before this index are cleared (only moves forward)
        self.covered_upto = 0  # events [block_end, covered_upto) are covered by the summary
        self.carrier = -1  # the event slot holding the summary message
        self.summary_tokens = 0  # the summary message's size in view
        self.summary_bytes = 0
        self.tail_est = 0  # seed estimate of the items after the block and the summary, as in view
        self.warned: set[str] = set()


def _structure(trace: Trace) -> tuple[list[int], dict[int, int], int]:
    results, issuer, by_id = [], {}, {}
    block_end = len(trace.events)
    for e in trace.events:
        if e.kind == "assistant":
            block_end = min(block_end, e.index)
            for cid in e.tool_call_ids:
                by_id[cid] = e.index
        elif e.kind == "tool_result":
            results.append(e.index)
            if e.tool_call_id in by_id:
                issuer[e.index] = by_id[e.tool_call_id]
    return results, issuer, block_end


@register
@dataclass(frozen=True)
class SeedEngine(Policy):
    """effect-agent's AgentPolicy: tool-result bounds, prune-then-summarize, budgets, grace turn."""

    context_token_limit: int | None = None
    keep_recent_tokens: int = 20000
    mode: str = "prune-then-summarize"
    tool_result_max_bytes: int = 51200
    run_status: str = "appended"
    on_exhaustion: str = "final-answer"
    completion_reserve_tokens: int | None = None
    max_turns: int | None = None
    max_tool_calls: int | None = None
    max_duration_s: float | None = None
    token_budget: int | None = None
    cost_budget_microusd: int | None = None
    tool_concurrency: int = 4
    summary_ratio: float = 0.1
    summary_min_tokens: int = 256
    summary_max_tokens: int = 2048

    name = "seed_engine"
    settles = True
    acts_before_call = True
    recovers = True

    def __post_init__(self) -> None:
        def bad(knob: str, allowed: str) -> ConfigError:
            return ConfigError(f"policy '{self.name}': {knob}={getattr(self, knob)!r} is not {allowed}")

        def integer(v) -> bool:
            return isinstance(v, int) and not isinstance(v, bool)

        limit = self.context_token_limit
        if limit is not None and not (integer(limit) and limit >= 1):
            raise bad("context_token_limit", "null or an integer >= 1")
        if not (integer(self.keep_recent_tokens) and self.keep_recent_tokens >= 0):
            raise bad("keep_recent_tokens", "an integer >= 0")
        if limit is not None and self.keep_recent_tokens >= limit:
            raise bad("keep_recent_tokens", f"below context_token_limit: an integer in [0, {limit - 1}]")
        for knob, choices in (("mode", MODES), ("on_exhaustion", ON_EXHAUSTION), ("run_status", RUN_STATUS)):
            if getattr(self, knob) not in choices:
                raise bad(knob, "one of " + ", ".join(choices))
        if not (
            integer(self.tool_result_max_bytes) and self.tool_result_max_bytes >= TOOL_RESULT_FLOOR_BYTES
        ):
            raise bad("tool_result_max_bytes", f"an integer >= {TOOL_RESULT_FLOOR_BYTES}")
        for knob in ("max_turns", "max_tool_calls", "token_budget", "completion_reserve_tokens"):
            v = getattr(self, knob)
            lo = 0 if knob == "completion_reserve_tokens" else 1
            if v is not None and not (integer(v) and v >= lo):
                raise bad(knob, f"null (off) or an integer >= {lo}")
        d = self.max_duration_s
        if d is not None and not (isinstance(d, int | float) and not isinstance(d, bool) and d > 0):
            raise bad("max_duration_s", "null (off) or a number of seconds > 0")
        c = self.cost_budget_microusd
        if c is not None and not (integer(c) and c >= 1):
            raise bad("cost_budget_microusd", "null (off) or an integer >= 1")
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

    @property
    def output_reserve(self) -> int:
        """completionReserveTokens: min(4096, tokenBudget / 5) with a token budget, else 4096."""
        if self.completion_reserve_tokens is not None:
            return self.completion_reserve_tokens
        return min(4096, self.token_budget // 5) if self.token_budget is not None else 4096

    def start(self, trace: Trace) -> _State:
        return _State(*trace.derived("seed_engine_structure", _structure))

    # ----------------------------------------------------------------------------- tool-result bound
    def envelope_bytes(self, trace: Trace, index: int) -> int:
        e = trace.events[index]
        overhead = envelope_overhead(e.bytes)
        budget = max(self.tool_result_max_bytes - overhead, 0)
        head_budget = budget // 2
        if e.content is None:  # text-free: character boundaries unknown, the budget is used whole
            return overhead + budget
        h, t = split_head_tail(e.content.encode(), head_budget, budget - head_budget)
        return overhead + h + t

    def settle(self, trace: Trace, state: _State, index: int, view: View) -> Change | None:
        e = trace.events[index]
        if e.kind != "tool_result" or e.bytes <= self.tool_result_max_bytes:
            return None
        nbytes = self.envelope_bytes(trace, index)
        return Change(index, ItemState.BOUNDED, scale_tokens(e.tokens, e.bytes, nbytes), nbytes, "envelope")

    # ------------------------------------------------------------------------------------ compaction
    def before_call(self, trace: Trace, state: _State, view: View, call: int, status: RunStatus):
        nb = view.nbytes
        appended = sum(est(nb[i]) for i in range(state.last_n, view.n))
        state.tail_est += sum(est(nb[i]) for i in range(max(state.last_n, state.block_end), view.n))
        state.last_n = view.n
        limit = self.context_token_limit
        if limit is None:
            return ()
        # last provider-reported input + estimate of what was appended since + output reserve; on the
        # first call nothing was reported yet, so the whole request is estimated
        estimate = (
            appended if status.last_input is None else status.last_input + appended
        ) + self.output_reserve
        if estimate <= limit:
            return ()
        changes: list[Change] = []
        if self.mode != "summarize":
            changes, saved = self._prune(trace, state, view)
            estimate -= saved
            if self.mode == "prune" or estimate <= limit:
                return changes
        summary = self._summarize(trace, state, view, {c.index: c for c in changes})
        if summary is None:
            return changes
        more, call_usage = summary
        return Decision(changes + more, call_usage)

    def on_overflow(self, trace: Trace, state: _State, view: View, call: int, status: RunStatus):
        if self.context_token_limit is None:
            return None
        summary = self._summarize(trace, state, view, {})
        return None if summary is None else Decision(summary[0], summary[1])

    def _prune(self, trace: Trace, state: _State, view: View) -> tuple[list[Change], int]:
        """Clear every tool result older than the protected tail; returns the changes and estimate saved."""
        results, n, nb = state.results, view.n, view.nbytes
        top = bisect_left(results, n) - 1  # newest result in view
        lowest = max(state.covered_upto, state.block_end)
        if top < 0 or results[top] < lowest:
            return [], 0
        protected = est(nb[results[top]])  # the newest is always protected
        j = top - 1
        while j >= 0 and results[j] >= lowest:
            cost = est(nb[results[j]])
            if protected + cost > self.keep_recent_tokens:
                break
            protected += cost
            j -= 1
        boundary = results[j + 1]  # oldest protected result: everything before it is cleared
        if boundary <= state.cleared_upto:
            return [], 0
        placeholder_bytes = len(PRUNE_PLACEHOLDER.encode())
        tokens = estimate_tokens(placeholder_bytes, trace.bytes_per_token)
        changes, saved = [], 0
        for i in results[
            bisect_left(results, max(state.cleared_upto, lowest)) : bisect_left(results, boundary)
        ]:
            if view.state[i] in (ItemState.VERBATIM, ItemState.BOUNDED):
                changes.append(Change(i, ItemState.MASKED, tokens, placeholder_bytes, "prune"))
                saved += est(nb[i]) - est(placeholder_bytes)
        state.cleared_upto = boundary
        state.tail_est -= saved
        return changes, saved

    def _summarize(self, trace: Trace, state: _State, view: View, pending: dict[int, Change]):
        """Cover the span before the kept tail with an (incremental) summary: changes + the metered call."""

        def size(i: int) -> tuple[int, int]:  # (tokens, bytes) as the request would send item i
            c = pending.get(i)
            return (c.tokens, c.nbytes) if c is not None else (view.tokens[i], view.nbytes[i])

        n, start = view.n, max(state.covered_upto, state.block_end)
        if state.tail_est < self.keep_recent_tokens:  # everything after the block fits the tail
            return None
        kept, cut = 0, n
        while cut > start and kept < self.keep_recent_tokens:
            cut -= 1
            kept += est(size(cut)[1])
        if trace.events[cut].kind == "tool_result" and cut in state.issuer:
            moved = state.issuer[cut]  # never separate a result from its call
            kept += sum(est(size(i)[1]) for i in range(max(moved, start), cut))
            cut = moved
        if cut <= start:
            return None
        events = trace.events
        covered_tokens, message_tokens, chars = state.summary_tokens, 0.0, state.summary_bytes
        for i in range(start, cut):
            tok, nbytes = size(i)
            covered_tokens += tok
            c = events[i].chars if (i not in pending and view.state[i] == ItemState.VERBATIM) else nbytes
            clipped = min(c, CLIP_CHARS)
            message_tokens += tok * clipped / c if c else tok
            chars += clipped
        if chars > CAP_CHARS:  # middle elision keeps CAP_CHARS of the whole
            message_tokens *= CAP_CHARS / chars
        bpt = trace.bytes_per_token
        instruction = estimate_tokens(len(SUMMARIZER_INSTRUCTION.encode()), bpt)
        summary_in = instruction + state.summary_tokens + round(message_tokens)
        out = min(
            max(round(self.summary_ratio * covered_tokens), self.summary_min_tokens), self.summary_max_tokens
        )
        prefix_bytes = len(SUMMARY_PREFIX.encode())
        msg_tokens = out + estimate_tokens(prefix_bytes, bpt)
        msg_bytes = prefix_bytes + round(out * (bpt or 4.0))
        carrier = state.carrier if state.carrier >= 0 else start
        changes = [Change(carrier, ItemState.SUMMARIZED, msg_tokens, msg_bytes, "summary")]
        changes += [
            Change(i, ItemState.SUMMARIZED, 0, 0, "summarized") for i in range(start, cut) if i != carrier
        ]
        state.carrier, state.covered_upto, state.tail_est = carrier, cut, kept
        state.summary_tokens, state.summary_bytes = msg_tokens, msg_bytes
        return changes, SummaryCall(summary_in, out)

    # --------------------------------------------------------------------------- status and budgets
    def status_line(self, status: RunStatus) -> str:
        def part(label: str, value, limit, unit: str = "") -> str:
            return f"{label} {value}{unit}" + ("" if limit is None else f"/{limit}{unit}")

        limit_s = None if self.max_duration_s is None else f"{self.max_duration_s:g}"
        return (
            "<run-status>"
            + " · ".join(
                (
                    part("turn", status.turns + 1, self.max_turns),
                    part("tool-calls", status.tool_calls, self.max_tool_calls),
                    part("tokens", status.tokens, self.token_budget),
                    part("last-context", status.last_input or 0, None),
                    part("elapsed", int(status.elapsed_s), limit_s, "s"),
                )
            )
            + "</run-status>"
        )

    def status_tokens(self, trace: Trace, state: _State, call: int, status: RunStatus) -> int:
        return estimate_tokens(len(self.status_line(status).encode()), trace.bytes_per_token)

    def after_call(self, trace: Trace, state: _State, view: View, call: int, status: RunStatus) -> AfterCall:
        dims = (
            ("duration", status.elapsed_s, self.max_duration_s),
            ("turns", status.turns, self.max_turns),
            ("tool_calls", status.tool_calls, self.max_tool_calls),
            ("tokens", status.tokens, self.token_budget),
            ("cost", status.cost_microusd, self.cost_budget_microusd),
        )
        warned, stop = [], None
        for dim, value, budget in dims:
            if budget is None:
                continue
            if value >= WARN_AT * budget and dim not in state.warned:
                state.warned.add(dim)
                warned.append(dim)
            if stop is None and value >= budget:
                stop = dim
        if stop is None:
            return AfterCall(tuple(warned))
        grace = self.on_exhaustion == "final-answer" and stop not in ("duration", "cost")
        return AfterCall(tuple(warned), f"budget-exhausted:{stop}", grace)

    def bound_violations(self, trace: Trace, view: View) -> list[str]:
        return [
            f"tool result {i} weighs {view.nbytes[i]} bytes in view, over tool_result_max_bytes"
            for i in range(view.n)
            if trace.events[i].kind == "tool_result"
            and view.state[i] in (ItemState.VERBATIM, ItemState.BOUNDED)
            and view.nbytes[i] > self.tool_result_max_bytes
        ]
