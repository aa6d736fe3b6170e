"""SWE-like runs calibrated task by task to a published table of per-task run shapes.

Why per task: a policy's saving grows with a run's length (raw input grows with the square of the turns,
masked input about linearly), so a suite that matches only the mean and median of the turn counts
misses the tail that dominates the totals: in The Complexity Trap's raw runs, the 4% that hit the
250-turn limit carry over a third of the cumulative input. One run per published task, with that
task's turns and mean prompt size, carries the tail exactly.

A task row gives its turns ``T``, its mean prompt tokens per call ``P`` and its mean completion tokens
per call ``C``. Its run: the fixed head (system prompt + task, ``fixed_tokens`` split 40/60, or ``P``
when ``P`` is smaller), then ``T`` turns of (assistant, tool_result) as in ``scenarios.swe_like``. The
history grows by ``g = 2 (P - head) / (T - 1)`` tokens a turn on average, so that the mean of the ``T``
requests is ``P`` (up to rounding); each assistant message is ``C`` tokens (the recorded completion is
what enters the history), capped at ``g``, unless ``observation_share`` is given, when it is
``(1 - share) g``. The rest of ``g`` is the turn's observation: lognormal around that mean (log-sd
``OBS_SIGMA``) times ``PROFILE`` at the turn's place in the run, rescaled so the run's mean request
stays ``P``.

``PROFILE``: mean observation tokens by tenth of a run over the 40 shared mini-swe-agent runs of 10+
turns (``observation_profile``; a test recomputes it). Agents read most early (the files, the failing
test) and run short commands later; a flat profile would put the early bulk into the last observations,
the ones masking keeps.

Every draw comes from ``numpy.random.default_rng([seed, index])``; the same rows give the same traces.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from scenarios.swe_like import BYTES_PER_TOKEN, START_EPOCH, _event
from sim.core.types import Call, Trace

OBS_SIGMA = 1.0  # spread of observation sizes within a run (the published rows give only means)
SYSTEM_SHARE = 0.4  # of the fixed head; the rest is the task (the first observation, never masked)
PROFILE = np.array([649, 501, 308, 211, 165, 230, 257, 319, 218, 307], dtype=np.float64)
PROFILE_MIN_TURNS = 10
SECONDS_PER_TURN = 6.0  # model + tool time: every request well inside a 5-minute cache lifetime


@dataclass(frozen=True)
class TaskShape:
    """One published task's run shape."""

    task_id: str
    turns: int
    mean_prompt_tokens: float
    mean_completion_tokens: float


def fixed_head(turns: Sequence[float], mean_prompts: Sequence[float]) -> int:
    """The history's fixed head (system prompt + task): the intercept of mean prompt tokens against turns
    over a model's raw runs with turns (a run's mean request sees half its turns), at least 1 token."""
    t = np.asarray(turns, dtype=np.float64)
    p = np.asarray(mean_prompts, dtype=np.float64)
    keep = t > 0
    _, intercept = np.polyfit(t[keep], p[keep], 1)
    return max(1, round(float(intercept)))


def shape_with_turns(task_id: str, raw_turns: int, raw_mean_prompt: float, completion: float, turns: int,
                     head: int) -> TaskShape:  # fmt: skip
    """A task's shape sized by its raw run (growth per turn from the raw run's mean prompt) with
    ``turns`` turns: the raw run's own, or those another strategy's run of the task took."""
    p = max(float(raw_mean_prompt), float(head))
    growth = 2 * (p - head) / (raw_turns - 1) if raw_turns > 1 else 0.0
    return TaskShape(str(task_id), int(turns), head + growth * (turns - 1) / 2, float(completion))


def _sizes(shape: TaskShape, head: int, rng: np.random.Generator, share: float | None) -> tuple:
    """(assistant tokens, observation tokens) per turn such that the T requests average P."""
    t = shape.turns
    p = max(float(shape.mean_prompt_tokens), float(head))
    growth = 2 * (p - head) / (t - 1) if t > 1 else 0.0
    if share is None:
        asst_mean = (
            min(float(shape.mean_completion_tokens), growth) if t > 1 else float(shape.mean_completion_tokens)
        )
    else:
        asst_mean = (1 - share) * growth
    asst = np.full(t, max(1, round(asst_mean)), dtype=np.int64)
    obs_mean = max(growth - asst_mean, 0.0)
    w = rng.lognormal(0.0, OBS_SIGMA, t) * PROFILE[(np.arange(t) * len(PROFILE)) // t]
    # request k sees turns 0..k-1: turn j is seen by T-1-j requests; scale so the mean request is P
    seen = np.arange(t - 1, -1, -1, dtype=np.float64)
    if t > 1 and obs_mean > 0:
        target = (p - head) * t - float((asst * seen).sum())
        scale = max(target, 0.0) / float((w * seen).sum())
        obs = np.maximum(np.rint(w * scale), 1).astype(np.int64)
    else:
        obs = np.ones(t, dtype=np.int64)
    return asst, obs


def calibrated_run(
    shape: TaskShape,
    index: int,
    seed: int,
    fixed_tokens: int,
    observation_share: float | None = None,
    trace_prefix: str = "calibrated",
) -> Trace:
    """One task's run (see the module docstring); ``index`` is its place in the suite."""
    if shape.turns < 1:
        raise ValueError(f"task {shape.task_id}: turns must be >= 1, got {shape.turns}")
    rng = np.random.default_rng([seed, index])
    head = int(min(fixed_tokens, max(round(shape.mean_prompt_tokens), 2)))
    system = max(1, round(head * SYSTEM_SHARE))
    task = max(1, head - system)
    asst, obs = _sizes(shape, system + task, rng, observation_share)
    cpl = np.clip(rng.lognormal(math.log(55.0), 0.3, shape.turns), 20, 160)
    t = float(START_EPOCH + index * 86400)
    events = [_event(0, "system", system, 70.0, t), _event(1, "user", task, 70.0, t)]
    calls = []
    in_view = system + task
    for k in range(shape.turns):
        t += SECONDS_PER_TURN
        ei = len(events)
        cid = f"call-{k}"
        events.append(_event(ei, "assistant", int(asst[k]), 75.0, t, tool_call_ids=(cid,)))
        calls.append(
            Call(
                index=k,
                event_index=ei,
                view_end=ei,
                input_tokens=in_view,
                output_tokens=int(asst[k]),
                reasoning_tokens=0,
                residual_tokens=0,
                usage_provenance="synthetic",
                timestamp=t,
            )
        )
        events.append(_event(ei + 1, "tool_result", int(obs[k]), float(cpl[k]), t + 1.0, tool_call_id=cid))
        in_view += int(asst[k]) + int(obs[k])
    return Trace(
        trace_id=f"{trace_prefix}-{shape.task_id}",
        source_format="ctxsim-scenario",
        events=tuple(events),
        calls=tuple(calls),
        agent="ctxsim calibrated generator",
        model="synthetic",
        context_window=None,
        bytes_per_token=BYTES_PER_TOKEN,
        recorded_policy={"name": "raw"},
        outcome={"exit_status": "Submitted", "seed": seed},
    )


def calibrated_suite(
    shapes: Sequence[TaskShape],
    seed: int,
    fixed_tokens: int,
    observation_share: float | None = None,
    trace_prefix: str = "calibrated",
) -> list[Trace]:
    """One run per task with at least one turn, in the order given."""
    return [
        calibrated_run(s, i, seed, fixed_tokens, observation_share, trace_prefix)
        for i, s in enumerate(shapes)
        if s.turns >= 1
    ]


def observation_profile(
    traces: Sequence[Trace], parts: int = 10, min_turns: int = PROFILE_MIN_TURNS
) -> np.ndarray:
    """Mean tool-result tokens by ``parts``-th of a run, over the runs with at least ``min_turns`` of them
    (rounded to whole tokens): the source of ``PROFILE``."""
    total, count = np.zeros(parts), np.zeros(parts)
    for t in traces:
        obs = [e.tokens for e in t.events if e.kind == "tool_result"]
        if len(obs) < min_turns:
            continue
        for i, o in enumerate(obs):
            total[i * parts // len(obs)] += o
            count[i * parts // len(obs)] += 1
    return np.round(total / np.maximum(count, 1))
