"""``autogen_token_limited``: AutoGen's ``TokenLimitedChatCompletionContext`` (autogen-core 0.7.5).

Constructor: ``TokenLimitedChatCompletionContext(model_client, *, token_limit=None, tool_schema=None)``;
``token_limit`` must be > 0. Held call for call to the installed class by ``make oracle-autogen``.

- Messages: every event but ``system`` / ``tools`` ones (``AssistantAgent`` prepends its system message
  to what the context returns; tool schemas are given to the model, not to the context); one message per
  event, except that the consecutive results of one assistant turn are one message (AutoGen's
  ``FunctionExecutionResultMessage`` of a turn's parallel calls: popped whole, weighing their sum).
- Every call, ``get_messages`` starts again from the full history: while the count exceeds
  ``token_limit`` it pops the single message at ``len // 2`` (never its partner), then drops the first
  message when that is a tool result. A message popped for one request comes back in a later one when
  the middle has moved past it: ctxsim restores it (DROPPED -> VERBATIM at its original size).
- ``token_count``: what the count covers. ``framework`` (default: AutoGen's own scope): the model
  client's ``count_tokens`` over the context's messages only (ctxsim's per-event sizes: the client's
  count is a local function of the messages), no system message, no tool schema. ``provider``: the
  whole request as the provider reports it (system message and tool specs, the call's residual).
- ``token_limit`` null: AutoGen's ``remaining_tokens`` (the model's window minus the count): the trace's
  recorded context window (no limit when unknown).
- Split pairs: a popped call can leave its result in the request, or the reverse; such requests are
  counted in the ``unpaired_tool_messages`` metric (providers usually reject them; AutoGen sends them).
- Records: a restore is no compaction: the change table lists each pop (a message popped again after
  a restore is listed again); the final states, the ledger and the facts follow the view.
- Cache: the request changes from the first popped message on, mid-conversation, on most calls.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.core.types import ItemState, Trace
from sim.policies.base import Change, Policy, View, check_int, register
from sim.policies.strands_sliding_window import Frame, Turns, frame, turns
from sim.util.errors import ConfigError

DROPPED, VERBATIM = ItemState.DROPPED, ItemState.VERBATIM
TOKEN_COUNTS = ("framework", "provider")


def check_token_count(policy: str, value: object) -> None:
    if value not in TOKEN_COUNTS:
        raise ConfigError(f"policy '{policy}': token_count={value!r} is not one of {', '.join(TOKEN_COUNTS)}")


class _State:
    __slots__ = ("frame", "turns", "unpaired")

    def __init__(self, f: Frame, t: Turns) -> None:
        self.frame, self.turns = f, t
        self.unpaired = 0  # requests so far holding a call or result without its partner


@register
@dataclass(frozen=True)
class AutogenTokenLimited(Policy):
    """Pop the middle message until the count fits token_limit, from the full history every call
    (AutoGen TokenLimitedChatCompletionContext)."""

    token_limit: int | None = None
    token_count: str = "framework"

    name = "autogen_token_limited"
    size_grid = {
        "token_limit": (16000, 32000, 64000, 96000, 128000)
    }  # ``ctxsim size --policy autogen_token_limited``'s default grid
    size_off = {"token_limit": None}  # switched off: the sizing's baseline
    acts_before_call = True
    splits_pairs = True
    conformance_settings = ({"token_limit": 1500}, {"token_limit": 4000, "token_count": "provider"})

    def __post_init__(self) -> None:
        if self.token_limit is not None:
            check_int(self.name, "token_limit", self.token_limit, 1)
        check_token_count(self.name, self.token_count)

    def start(self, trace: Trace) -> _State:
        return _State(frame(trace), turns(trace))

    def limit(self, trace: Trace) -> int | None:
        return self.token_limit if self.token_limit is not None else trace.context_window

    def unpaired_requests(self, state: _State) -> int:
        return state.unpaired

    def before_call(self, trace: Trace, state: _State, view: View, call: int, status=None) -> list[Change]:
        f, t, events = state.frame, state.turns, trace.events
        n = t.in_view(view.n)
        heads = t.first[:n]
        kept = list(range(n))  # message positions
        limit = self.limit(trace)
        if limit is not None:
            if self.token_count == "provider":  # the request as sent: instruction events and residual
                count = int(trace.arrays.prefix[view.n]) + int(trace.arrays.residual[call])
            else:
                count = t.prefix[n]
            while count > limit and kept:
                count -= t.tokens[kept.pop(len(kept) // 2)]
        kept = [heads[k] for k in kept]
        if kept and events[kept[0]].kind == "tool_result":  # a first tool-result message
            kept.pop(0)
        keep = {i for m in kept for i in t.members[m]}
        changes = []
        for i in (i for m in heads for i in t.members[m]):
            gone = i not in keep
            if gone and view.state[i] != DROPPED:
                changes.append(Change(i, DROPPED, 0, 0, "pop-middle"))
            elif not gone and view.state[i] == DROPPED:  # the middle moved past it: sent again
                changes.append(Change(i, VERBATIM, events[i].tokens, events[i].bytes, "restore"))
        state.unpaired += any((r in keep) != (a in keep) for r, a in f.issuer.items() if r < view.n)
        return changes
