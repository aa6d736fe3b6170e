"""``autogen_token_limited``: AutoGen's ``TokenLimitedChatCompletionContext`` (POLICIES.md §4).

- Trigger: every call whose view (every event in it, system message and tool specs included, at their
  recorded sizes) exceeds ``token_limit``; ``token_limit`` null means AutoGen's default, the model's
  remaining tokens: the trace's recorded context window (no limit when that is unknown).
- Kept / removed: AutoGen pops the middle message (``len // 2`` of the messages, system / tools events
  excluded) until the count fits, then drops a first tool result whose call is gone. ctxsim pops the
  middle message together with its call/result partners (AutoGen pops one message and may orphan a tool
  result; ctxsim never splits a pair), and drops every leading result whose call is gone.
- The rest: removed from the request (DROPPED); the context's own list keeps everything, but the agent
  has no handle: lost. AutoGen rebuilds the view per call from the full history, so a message popped for
  one request could come back for a later one (the middle moves as the list grows); ctxsim's engine has
  no restore, so a popped message stays popped: each call pops from the messages still in view (chosen).
- Cache: the request changes from the popped span on, at the middle of the conversation, every call.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.policies.base import Change, Policy, View, check_int, register
from sim.policies.strands_sliding_window import Frame, frame
from sim.types import ItemState, Trace

DROPPED = ItemState.DROPPED


@register
@dataclass(frozen=True)
class AutogenTokenLimited(Policy):
    """Pop middle messages until the request fits token_limit (AutoGen TokenLimitedChatCompletionContext)."""

    token_limit: int | None = None

    name = "autogen_token_limited"
    acts_before_call = True
    conformance_settings = ({"token_limit": 1500}, {"token_limit": 4000})

    def __post_init__(self) -> None:
        if self.token_limit is not None:
            check_int(self.name, "token_limit", self.token_limit, 1)

    def start(self, trace: Trace) -> Frame:
        return frame(trace)

    def limit(self, trace: Trace) -> int | None:
        return self.token_limit if self.token_limit is not None else trace.context_window

    def before_call(self, trace: Trace, f: Frame, view: View, call: int, status=None) -> list[Change]:
        limit = self.limit(trace)
        total = view.total
        if limit is None or total <= limit:
            return []
        kept = [i for i in f.messages[: f.in_view(view.n)] if view.state[i] != DROPPED]
        popped: list[int] = []
        while total > limit and kept:
            middle = kept[len(kept) // 2]
            for i in f.group.get(middle, (middle,)):
                if i < view.n and view.state[i] != DROPPED:
                    kept.remove(i)
                    popped.append(i)
                    total -= view.tokens[i]
        while kept and kept[0] in f.issuer:  # a first tool result whose call is gone
            popped.append(kept.pop(0))
        return [Change(i, DROPPED, 0, 0, "pop-middle") for i in sorted(popped)]
