"""A long-lived conversation: several runs of one agent share one conversation (schema version 2).

The seed engine's page: "a compaction appends a durable record, so covered records render as the summary
on every later Attempt and Run; without it, every prior Run's raw tool output replays into every new
Run's opening prompt forever". This generator makes conversations to price that: ``ctxsim run --scenario
conversation`` replays ``conversation()``, 5 runs.

Each run is one task of a coding agent in the same repository: a user message (run 0 after the system
prompt), 6-9 tool steps whose raw outputs (greps, file reads, test runs) dominate the run's tokens, and a
final answer. Within a run every step needs the previous step's fact and the final answer needs the
run's first read (``file:run<r>``), so a policy that forgets inside a run pays re-reads; no run needs
another run's facts (each task stands alone, so what carries between runs is cost, not information).
Runs start an hour apart (a provider's prompt cache has expired). The instructions are sent once, at
the start of the conversation: a later run opens with the user's task alone (as a Claude Code
session's later prompts do), so under the seed engine they are history like the rest. Text-free,
seeded, every call's recorded input the sum of its view (recorded policy ``raw``).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from scenarios.closed_loop import _Builder
from sim.core.types import Trace

RUNS = 5
RUN_GAP_S = 3600.0  # between the end of a run and the next run's task


def conversation(seed: int = 0, runs: int = RUNS) -> Trace:
    """A conversation of ``runs`` runs (>= 1), seeded."""
    if not (isinstance(runs, int) and runs >= 1):
        raise ValueError(f"conversation: runs={runs!r} is not an integer >= 1")
    rng = np.random.default_rng([seed, 25])
    b = _Builder("conversation", seed)
    b.add("system", 1500, provides=["rule:instructions"])
    run_of_event: list[int] = [0]
    for r in range(runs):
        if r:
            b.t += RUN_GAP_S
        b.add("user", int(rng.integers(150, 400)), provides=[f"task:{r}"])
        first = f"file:run{r}"
        b.turn(80, int(rng.integers(1500, 3000)), provides=[first], needs=[f"task:{r}"])
        previous = first
        for k in range(int(rng.integers(5, 9))):
            fact = f"step:run{r}-{k}"
            b.turn(
                int(rng.integers(60, 200)), int(rng.integers(600, 3200)), provides=[fact], needs=[previous]
            )
            previous = fact
        _final(b, int(rng.integers(150, 300)), needs=[first, previous])
        run_of_event += [r] * (len(b.events) - len(run_of_event))
    t = b.trace(f"{runs} tasks answered in one conversation")
    events = tuple(dataclasses.replace(e, run_index=run_of_event[e.index]) for e in t.events)
    calls = tuple(dataclasses.replace(c, run_index=run_of_event[c.event_index]) for c in t.calls)
    return dataclasses.replace(t, events=events, calls=calls, agent="ctxsim conversation generator")


def _final(b: _Builder, tokens: int, needs: list[str]) -> None:
    """The run's final answer: an agent call that issues no tool call."""
    from sim.core.types import Call

    k = len(b.calls)
    b.t += 4.0 + 0.0005 * b.prefix[-1]
    a = b.add("assistant", tokens, needs=needs)
    b.calls.append(
        Call(
            index=k,
            event_index=a,
            view_end=a,
            input_tokens=b.prefix[a],
            output_tokens=tokens,
            residual_tokens=0,
            usage_provenance="synthetic",
            timestamp=b.t,
        )
    )


SCENARIOS = {"conversation": conversation}


if __name__ == "__main__":  # write the 5-run conversation as a canonical file (a sweep's scenario=PATH)
    import sys
    from pathlib import Path

    from sim.trace.io import write_traces

    if len(sys.argv) != 2:
        sys.exit("usage: python -m scenarios.conversation OUT.jsonl|OUT.parquet")
    write_traces([conversation()], Path(sys.argv[1]))
