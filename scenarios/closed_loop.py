"""Scripted scenarios where a policy changes the run itself: the agent re-reads what its view lost.

Each scenario is a seeded, text-free canonical trace with declared facts. The scripted agent's next action
depends on what its request holds: when an action needs a fact the view lost, the mock model re-runs the
tool call that provided it (``model.on_missing=refetch``; a fact from the user cannot be re-run, and the
agent then goes on without it, its answer incomplete) or reads spilled content back through its handle.
So a policy that forgets too eagerly makes the run longer and dearer: the trajectory elongation the
Complexity Trap measured.

- ``grep_and_read``: the agent greps, reads the two files that hold the answer, explores 10-13 more files,
  then answers "which function sets the retry timeout, and what is its default?" from the two early reads
  (facts ``fn:retry_timeout_location`` and ``value:default_timeout``).
- ``working_set_16k``: the seed's 16,000-token working set (instructions 1,400, tool definitions 900,
  older conversation 1,800, repository map 900, file read 3,600, test output 1,600, recent conversation
  2,400, output reserve 3,400), then six test runs of growing pressure. The answer needs the file read,
  the failing test output and the repository map.
- ``needle``: a configuration read early (6,000 tokens) holds the release codename (``needle:codename``);
  40 steps follow, every fifth leaving a milestone the answer also needs, so the context passes 16,000
  tokens again and again and any compaction at that size decides the needle's fate. Nothing acts on the
  needle before the answer: a summarizer that sees only the past has no reason to keep it.
- ``spill``: the agent reads eight large files (2,500-5,000 tokens each, one fact each), explores ten
  small ones, then answers from all eight reads: under ``spill_large_results`` every answer fact comes
  back through a retrieval, so ``model.retrieval_recall`` decides how many need the tool re-run.

Each fact's kind follows its id's prefix (``_KINDS``); the facts have no byte spans (text-free traces:
a fact is its whole event).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from sim.core.types import Call, Event, Trace
from sim.cost.tokens import MESSAGE_OVERHEAD_BYTES

BYTES_PER_TOKEN = 4.0
_KINDS = {  # fact id prefix -> kind (sim.core.types.FACT_KINDS)
    "rule": "constraint",
    "task": "goal",
    "test": "error",
    "file": "path",
    "grep": "path",
    "repo_map": "path",
    "fn": "identifier",
}
START = 1_767_225_600.0  # 2026-01-01T00:00:00Z: timestamps are fixed, never the wall clock


class _Builder:
    """Appends events and calls; each call's recorded input is the sum of its view (residual 0)."""

    def __init__(self, trace_id: str, seed: int) -> None:
        self.trace_id, self.seed = trace_id, seed
        self.events: list[Event] = []
        self.calls: list[Call] = []
        self.t = START
        self.prefix = [0]

    def add(self, kind: str, tokens: int, provides=(), needs=(), call_id=None, answers=None) -> int:
        nbytes = max(0, int(tokens * BYTES_PER_TOKEN) - MESSAGE_OVERHEAD_BYTES)
        i = len(self.events)
        self.events.append(
            Event(
                index=i,
                kind=kind,
                content=None,
                bytes=nbytes,
                chars=nbytes,
                lines=nbytes // 60,
                tokens=tokens,
                tokens_provenance="synthetic",
                tool_call_ids=(call_id,) if call_id else (),
                tool_call_id=answers,
                timestamp=self.t,
                provides=tuple(provides),
                needs=tuple(needs),
                fact_kinds=tuple(_KINDS.get(f.split(":", 1)[0], "value") for f in provides),
            )
        )
        self.prefix.append(self.prefix[-1] + tokens)
        return i

    def turn(self, action_tokens: int, result_tokens: int, provides=(), needs=(), output=None) -> None:
        """One agent call (its action) and the tool result that answers it."""
        k = len(self.calls)
        cid = f"call-{k}"
        self.t += 4.0 + 0.0005 * self.prefix[-1]  # the model's latency grows with its input
        a = self.add("assistant", action_tokens, needs=needs, call_id=cid)
        self.calls.append(
            Call(
                index=k,
                event_index=a,
                view_end=a,
                input_tokens=self.prefix[a],
                output_tokens=output or action_tokens,
                residual_tokens=0,
                usage_provenance="synthetic",
                timestamp=self.t,
            )
        )
        self.t += 2.0  # the tool runs
        self.add("tool_result", result_tokens, provides=provides, answers=cid)

    def trace(self, answer: str) -> Trace:
        return Trace(
            trace_id=self.trace_id,
            source_format="ctxsim-scenario",
            events=tuple(self.events),
            calls=tuple(self.calls),
            agent="ctxsim closed-loop scenario",
            model="synthetic",
            bytes_per_token=BYTES_PER_TOKEN,
            recorded_policy={"name": "raw"},
            outcome={"answer": answer, "seed": self.seed},
        )


def grep_and_read(seed: int = 0) -> Trace:
    rng = np.random.default_rng([seed, 1])
    b = _Builder("grep_and_read", seed)
    b.add("system", 800)
    b.add("user", 120)
    b.turn(60, 400, provides=["grep:hits"])
    b.turn(60, 3000, provides=["fn:retry_timeout_location"], needs=["grep:hits"])
    b.turn(60, 2500, provides=["value:default_timeout"], needs=["grep:hits"])
    previous = "grep:hits"
    for k in range(10 + int(rng.integers(0, 4))):
        fact = f"file:explore-{k}"
        b.turn(60, int(rng.integers(1500, 4000)), provides=[fact], needs=[previous])
        previous = fact
    b.turn(150, 20, needs=["fn:retry_timeout_location", "value:default_timeout"], output=150)
    return b.trace("retry_timeout() in net/client.py; default 30 seconds")


def working_set_16k(seed: int = 0) -> Trace:
    rng = np.random.default_rng([seed, 2])
    b = _Builder("working_set_16k", seed)
    b.add("system", 1400, provides=["rule:instructions"])  # instructions
    b.add("tools", 900)  # tool definitions
    b.add("user", 100, provides=["task"])  # older conversation: 100 + 2 x 850 = 1,800
    b.turn(100, 750, provides=["older:1"])
    b.turn(100, 750, provides=["older:2"])
    b.turn(60, 840, provides=["repo_map"])  # repository map: 900
    b.turn(60, 3540, provides=["file:src/app.py"], needs=["repo_map"])  # file read: 3,600
    b.turn(60, 1540, provides=["test:failure"], needs=["file:src/app.py"])  # test output: 1,600
    b.turn(200, 1000, provides=["recent:1"], needs=["test:failure"])  # recent conversation: 2,400
    b.turn(200, 1000, provides=["recent:2"], needs=["recent:1"])
    previous = "recent:2"
    for k in range(6):  # growing pressure: test runs
        fact = f"test:run-{k}"
        b.turn(60, 1100 + int(rng.integers(0, 200)), provides=[fact], needs=[previous])
        previous = fact
    b.turn(120, 20, needs=["file:src/app.py", "test:failure", "repo_map"], output=120)
    return b.trace("the failing assertion in src/app.py, located through the repository map")


def needle(seed: int = 0) -> Trace:
    rng = np.random.default_rng([seed, 3])
    b = _Builder("needle", seed)
    b.add("system", 600)
    b.add("user", 150)
    b.turn(60, 6000, provides=["needle:codename"])
    milestones, previous = [], None
    for k in range(40):
        provides = [f"step:{k}"]
        if k % 5 == 4:
            provides.append(f"milestone:{k}")
            milestones.append(f"milestone:{k}")
        b.turn(80, 500 + int(rng.integers(0, 200)), provides=provides, needs=[previous] if previous else [])
        previous = f"step:{k}"
    b.turn(200, 20, needs=["needle:codename", *milestones, previous], output=200)
    return b.trace("the release codename from the configuration, with the eight milestones")


def spill(seed: int = 0) -> Trace:
    rng = np.random.default_rng([seed, 4])
    b = _Builder("spill", seed)
    b.add("system", 700)
    b.add("user", 150)
    b.turn(60, 400, provides=["grep:modules"])
    reads = []
    for k in range(8):
        fact = f"file:module-{k}"
        b.turn(60, int(rng.integers(2500, 5000)), provides=[fact], needs=["grep:modules"])
        reads.append(fact)
    previous = "grep:modules"
    for k in range(10):
        fact = f"file:small-{k}"
        b.turn(60, int(rng.integers(200, 800)), provides=[fact], needs=[previous])
        previous = fact
    b.turn(200, 20, needs=reads, output=200)
    return b.trace("the eight modules' entry points, one from each large read")


SCENARIOS: dict[str, Callable[[int], Trace]] = {
    "grep_and_read": grep_and_read,
    "working_set_16k": working_set_16k,
    "needle": needle,
    "spill": spill,
}


def scenario(name: str, seed: int = 0) -> Trace:
    from sim.util.errors import UnknownNameError

    if name not in SCENARIOS:
        raise UnknownNameError("scenario", name, SCENARIOS)
    return SCENARIOS[name](seed)
