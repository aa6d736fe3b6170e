"""What the recorded agent actually sent at each call, and so which needs count.

An action's need counts only if the fact was **present in the request the recorded agent sent at that
call**: an agent cannot have acted on a fact it did not see. Importers therefore drop, at import time,
every need whose providers were all absent from that call's recorded request; replaying a trace under
the policy it was recorded with then never finds a need missing (no refetch, no retrieval, the answer
complete), and every other policy is measured against what the agent really used.

The recorded request of call C (its assistant event at index i) holds the events before i, each as the
trace shows it, except those the recorded run elided from it. Each event carries ``hidden_from``: the
first call event index whose request no longer held it whole (None: every later request held it).
Per format, what the trace tells us:

- Append-only recordings (mini-swe-agent, tau-bench, OpenAI/Anthropic chat, Inspect, OpenHands with
  ``noop``, SWE-agent without a masking processor, Claude Code without compaction): every earlier event
  was sent, in the form the trace keeps (a result the run cut, such as mini-swe-agent's head and tail or
  OpenHands' ``max_message_chars``, is imported as the cut text the model saw): nothing is hidden.
- SWE-agent 1.x whose steps keep their processed messages (``trajectory[k].messages``: the history as
  sent at call k + 1): an observation is hidden from the first call whose recorded messages show it
  with other text than the original (``Old environment output: (N lines omitted)``).
- SWE-agent whose config records ``last_n_observations`` (n, polling) and whose steps keep no messages:
  SWE-agent's own rule, applied to the observations before each call (the instance template, then each
  tool result): with L of them, observations 1 .. (L // polling) * polling - n - 1 are masked; once
  masked an observation stays masked.
- Claude Code with a compaction (``compact_boundary`` / ``isCompactSummary``): every event before the
  boundary is hidden from the first call after it (that call saw the summary instead).

A need is kept when some provider of its fact before the call is not hidden at that call; provides,
spans, kinds and supersedes are left as they are (a fact the agent never used is still seen and can
still be lost).
"""

from __future__ import annotations

from collections.abc import Sequence


def present_needs(
    provides: Sequence[Sequence[str]], needs: Sequence[Sequence[str]], hidden_from: Sequence[int | None]
) -> list[list[str]]:
    """``needs`` with each event's needs whose fact no request-held provider gives removed (module doc)."""
    if not any(h is not None for h in hidden_from):
        return [list(n) for n in needs]
    where: dict[str, list[int]] = {}
    for i, facts in enumerate(provides):
        for f in facts:
            where.setdefault(f, []).append(i)
    out: list[list[str]] = []
    for i, wanted in enumerate(needs):
        out.append(
            [
                f
                for f in wanted
                if any(p < i and (hidden_from[p] is None or hidden_from[p] > i) for p in where.get(f, ()))
            ]
        )
    return out


def masked_from(kinds: Sequence[str], n: int, polling: int) -> list[int | None]:
    """``hidden_from`` under SWE-agent's ``last_n_observations`` (module doc) for events of these kinds:
    observations are the first ``user`` event and every ``tool_result``."""
    hidden: list[int | None] = [None] * len(kinds)
    obs: list[int] = []
    masked_upto = 1  # observations[1 : masked_upto] are masked
    for i, k in enumerate(kinds):
        if k == "assistant":
            end = (len(obs) // polling) * polling - n
            while masked_upto < end:
                hidden[obs[masked_upto]] = i
                masked_upto += 1
        elif k == "tool_result" or (k == "user" and not obs):
            obs.append(i)
    return hidden
