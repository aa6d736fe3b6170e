"""``raw``: full history, nothing changed. Replaying a recorded append-only run under it reproduces the
recorded input of every call (the per-call residual carries what the visible events do not explain)."""

from __future__ import annotations

from dataclasses import dataclass

from sim.policies.base import Policy, register


@register
@dataclass(frozen=True)
class Raw(Policy):
    """Full history: every event verbatim in every call. Trigger: none. Cache: prefix never rewritten."""

    name = "raw"
