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

Facts (``FACTS``): a run carries facts and needs like the shared real runs, so a policy that hides what
a later action needs shows it (a re-read under ``model.on_missing=refetch``, a failed or degraded answer
under ``fail`` / ``degrade``). Each observation provides one fact with the real runs' probability
(kind ``path`` or ``error`` in their shares); each action needs 1-3 facts with the real runs'
probabilities, each one a number of turns back drawn from the real runs' distances (deciles,
interpolated), taken from the nearest earlier observation that provides one. Measured on the 40 shared
mini-swe-agent runs by ``fact_profile``; a test recomputes it. The profile and the draws are in
``scenarios.facts``, shared with the embedded suite. Not modelled here: supersession (the embedded suite
draws it; these suites stay as ``benchmarks/published/complexity_trap.py`` measured them).

Every draw comes from ``numpy.random.default_rng([seed, index])`` (facts from a second stream of the
same key); the same rows give the same traces.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

# FactProfile, FACTS and _facts live in scenarios.facts (the embedded suite draws from them too); their
# names stay importable from here
from scenarios.facts import FACTS, FactProfile
from scenarios.facts import draw_facts as _facts
from scenarios.swe_like import START_EPOCH, _event, synthetic_call, synthetic_trace
from sim.core.types import Trace

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
    p = float(raw_mean_prompt)
    h = min(float(head), p)
    growth = 2 * (p - h) / (raw_turns - 1) if raw_turns > 1 else 0.0
    return TaskShape(str(task_id), int(turns), h + growth * (turns - 1) / 2, float(completion))


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
    facts: FactProfile | None = FACTS,
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
    provides, needs = _facts(shape.turns, np.random.default_rng([seed, index, 1]), facts)
    t = float(START_EPOCH + index * 86400)
    events = [_event(0, "system", system, 70.0, t), _event(1, "user", task, 70.0, t)]
    calls = []
    in_view = system + task
    for k in range(shape.turns):
        t += SECONDS_PER_TURN
        ei = len(events)
        cid = f"call-{k}"
        action = _event(ei, "assistant", int(asst[k]), 75.0, t, tool_call_ids=(cid,))
        events.append(replace(action, needs=tuple(f"obs@{2 * j + 3}" for j in needs[k])))
        calls.append(synthetic_call(k, ei, in_view, int(asst[k]), t))
        result = _event(ei + 1, "tool_result", int(obs[k]), float(cpl[k]), t + 1.0, tool_call_id=cid)
        if provides[k]:
            result = replace(result, provides=(f"obs@{ei + 1}",), fact_kinds=(provides[k],))
        events.append(result)
        in_view += int(asst[k]) + int(obs[k])
    return synthetic_trace(
        f"{trace_prefix}-{shape.task_id}", "ctxsim calibrated generator", events, calls, seed
    )


def calibrated_suite(
    shapes: Sequence[TaskShape],
    seed: int,
    fixed_tokens: int,
    observation_share: float | None = None,
    trace_prefix: str = "calibrated",
    facts: FactProfile | None = FACTS,
) -> list[Trace]:
    """One run per task with at least one turn, in the order given."""
    return [
        calibrated_run(s, i, seed, fixed_tokens, observation_share, trace_prefix, facts)
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


def fact_profile(traces: Sequence[Trace]) -> FactProfile:
    """``FACTS`` as measured on ``traces`` (rounded as committed): which observations provide facts and of
    what kind, how many observation facts each action needs, and how many turns back they were provided
    (0: the observation just before the action)."""
    observations = providing = errors = actions = 0
    counts = [0, 0, 0]
    distances: list[int] = []
    for t in traces:
        provided_at: dict[str, int] = {}
        turn = -1
        for e in t.events:
            if e.kind == "assistant":
                turn += 1
                actions += 1
                known = [f for f in e.needs if f in provided_at]
                if 1 <= len(known) <= 3:
                    counts[len(known) - 1] += 1
                distances += [turn - provided_at[f] for f in known]
            elif e.kind == "tool_result":
                observations += 1
                providing += bool(e.provides)
                errors += sum(k == "error" for k in e.fact_kinds)
                provided_at.update({f: turn + 1 for f in e.provides})
    facts = sum(1 for t in traces for e in t.events if e.kind == "tool_result" for _ in e.provides)
    deciles = np.percentile(np.array(distances, dtype=np.float64), np.arange(0, 101, 10))
    return FactProfile(
        provide_share=round(providing / observations, 4),
        error_share=round(errors / facts, 4),
        need_counts=tuple(round(c / actions, 4) for c in counts),
        distance_deciles=tuple(round(float(d), 1) for d in deciles),
    )
