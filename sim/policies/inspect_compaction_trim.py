"""``inspect_compaction_trim``: Inspect's ``CompactionTrim`` (inspect-ai 0.3.285, ``trim_messages``) under
its ``compaction()`` handler (trigger, passes, ``compaction-insufficient``: ``sim.policies.inspect_handler``).

Knobs (Inspect's names and defaults): ``threshold`` 0.9, ``preserve`` 0.8. ``memory`` is not modelled (it
acts only with the memory tool).

- Partition of the messages in the compacted input: system messages, the input messages (user events
  before the first assistant event: the sample's input), the conversation (the rest).
- Kept: system, input, and the conversation from ``int(len(conversation) x (1 - preserve))`` on; of
  those, a tool result only while the most recent kept assistant message issued its call (a user
  message in between ends that); an assistant message loses calls left without a result (MASKED, same
  size); a last message that is an assistant message goes too. Everything else is DROPPED.
- Each compaction trims the already trimmed input again (the cut is a share of what is left), and the
  handler's passes trim again while the request stays over ``threshold`` and each pass still shrinks it;
  still over -> ``compaction-insufficient``.
- A state rewrite; dropped messages are gone from view for good (not recoverable). Cache: each trim
  rewrites the prefix from the first dropped message on.
- Sizing: whole runs are planned for the engine's batch path by ``inspect_handler.plan_handler`` (the
  same ``compaction``; tests/test_plans_inspect.py holds it to ``before_call``).
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.core.types import Trace
from sim.policies.base import register
from sim.policies.inspect_handler import DROPPED, MASKED, HandlerState, InspectCompaction, Work, partition
from sim.util.errors import ConfigError


@register
@dataclass(frozen=True)
class InspectCompactionTrim(InspectCompaction):
    """Inspect CompactionTrim: over threshold, keep system, input and the newest preserve share of the
    conversation (pairs kept whole); too little left ends the run."""

    preserve: float = 0.8

    name = "inspect_compaction_trim"
    size_grid = {
        "threshold": (0.5, 0.7, 0.8, 0.9, 0.95),
        "preserve": (0.5, 0.8),
    }  # ``ctxsim size --policy inspect_compaction_trim``'s default grid
    conformance_settings = (
        {"threshold": 1500, "preserve": 0.5},
        {"threshold": 3000, "preserve": 0.8},
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        p = self.preserve
        if not (isinstance(p, int | float) and not isinstance(p, bool) and 0 <= p <= 1):
            raise ConfigError(f"policy '{self.name}': preserve={p!r} is not a number in [0, 1]")

    def compact(self, trace: Trace, st: HandlerState, work: Work, n: int):
        ev = trace.events
        _, _, conv = partition(trace, st, work, n)
        start = int(len(conv) * (1 - self.preserve))
        kept: list[int] = []
        active: set[str] = set()
        for i in conv[start:]:
            kind = ev[i].kind
            if kind == "assistant":
                active = set(ev[i].tool_call_ids)
                kept.append(i)
            elif kind == "tool_result" and ev[i].tool_call_id in active:
                kept.append(i)
            elif kind == "user":
                active = set()
                kept.append(i)
        answered = {ev[i].tool_call_id for i in kept if ev[i].kind == "tool_result"}
        for i in kept:
            if ev[i].kind == "assistant" and any(c not in answered for c in ev[i].tool_call_ids):
                work.set(i, MASKED, work.tokens(i), work.nbytes(i), "trim-calls")
        if kept and ev[kept[-1]].kind == "assistant":
            kept.pop()
        keep = set(kept)
        for i in conv:
            if i not in keep:
                work.set(i, DROPPED, 0, 0, "trim")
        return None
