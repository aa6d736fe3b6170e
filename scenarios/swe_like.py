"""SWE-like scenario runs: seeded, text-free canonical traces shaped like SWE-agent raw-history runs.

Why synthetic: a policy comparison needs long runs with heavy-tailed tool outputs, and recorded traces
are large, licensed and few. These runs carry sizes only (``content=None``), so a suite of dozens of
runs is a small file, and every number is a pure function of ``(seed, index)``.

Shape of a run (as mini-swe-agent / SWE-agent record it): event 0 system prompt, event 1 user task, then
T turns of (assistant, tool_result); the last assistant turn submits and its tool_result is the final
observation (the diff), which no later call sees. History is append-only: call k sees every earlier event.

Calibration (Complexity Trap per-task CSV, SWE-agent "Raw Agent" rows of five models; reproduce with
``python -m scenarios.make_suite --calibrate CSV``):

- turns per run: mean 50-59 and median 23-49 (Qwen3-32B thinking, median 14, excluded as an outlier);
  log-sd 0.5-1.1, 3-4% of runs at the 250-turn limit. Chosen: lognormal with median 30, clipped to
  [5, 250] (the agent's turn limit), its log-sd (1.08) solved so the clipped mean is 50.
- mean prompt tokens per call (mean over runs of each run's mean) 16.6k-22.8k. Its linear fit against
  turn count has intercept 1.8k-5.3k (the system prompt + task) and slope 215-360, i.e. each turn adds
  430-720 tokens to the history (620-720 for Gemini Flash and Qwen3-Coder, whose 20k-23k per call is
  the target). Chosen: system 1-2k, task 1-3k tokens; a turn of ~690 tokens on average (110 output +
  580 observation), which gives ~20k per call at a mean of 50 turns.
- output tokens per call: mean 41-149. Chosen: 110 (lognormal, log-sd 0.6).
- observation share of a turn: ~84% (the authors' simulation). The observation mean is derived from
  this share and the output mean; the body is lognormal (log-sd 1.3, median ~170 tokens) plus, with
  probability 0.6%, a huge output of 15k-50k tokens (a whole test log, a large file printed whole).

Facts (``facts=``, a ``scenarios.facts.RunFacts``; the embedded suite passes ``REAL_RUNS``): observations
provide facts, actions need them, later observations make them stale and an error fact is the line that
shows it, as in the shared real runs, and the system prompt's constraint and the task's goal are needed
by the final answer (``scenarios.facts``). They are drawn from streams of their own, so a run's sizes
are the same with or without them; without (the default) a run carries no facts.

Turn counts are drawn by quantile from a seed-rotated base-2 van der Corput sequence over the run index,
so any prefix of a suite covers the distribution evenly: a suite of 32 runs hits its targets without
leaning on a lucky seed. Every other size draw comes from ``numpy.random.default_rng([seed, index])``;
facts from ``[seed, index, 1]``, supersession from ``[seed, index, 2]``, error spans from
``[seed, index, 3]``.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import statistics
from collections.abc import Sequence

import numpy as np

from scenarios.facts import RunFacts, draw_error_span, draw_facts, draw_supersession, obs_fact, standing
from sim.core.types import Call, Event, Trace
from sim.cost.tokens import MESSAGE_OVERHEAD_BYTES

BYTES_PER_TOKEN = 3.3  # source code and shell output under a BPE tokenizer

TURNS_MEDIAN = 30
TURNS_MEAN = 50
TURNS_MIN, TURNS_MAX = 5, 250

SYSTEM_TOKENS = (1000, 2000)  # log-uniform range
TASK_TOKENS = (1000, 3000)

OUTPUT_MEAN = 110.0
OUTPUT_SIGMA = 0.6
OUTPUT_RANGE = (12, 1500)

OBS_SHARE = 0.84  # observation tokens / (assistant + observation) tokens, over all turns
OBS_SIGMA = 1.3
OBS_RANGE = (10, 15000)  # the lognormal body; huge outputs come from the branch below
OBS_RUN_SIGMA = 0.3  # per-run verbosity (some repositories print more); mean factor 1
HUGE_P = 0.006
HUGE_TOKENS = (15000, 50000)  # log-uniform range
DIFF_MEDIAN, DIFF_SIGMA = 400.0, 0.8  # the submission's final observation

START_EPOCH = 1_748_736_000  # 2025-06-01T00:00:00Z; runs start within the following 120 days
START_SPREAD_S = 120 * 86400

_ROTATION_ENTROPY = (0, 1)  # appended to the seed: a stream no run's [seed, index] can equal


def _lognormal_median(mean: float, sigma: float) -> float:
    return mean / math.exp(sigma * sigma / 2)


def _log_uniform_mean(lo: float, hi: float) -> float:
    return (hi - lo) / math.log(hi / lo)


def observation_body_median() -> float:
    """Median of the lognormal body, derived so the expected observation share is ``OBS_SHARE``."""
    obs_mean = OBS_SHARE / (1 - OBS_SHARE) * OUTPUT_MEAN
    body_mean = (obs_mean - HUGE_P * _log_uniform_mean(*HUGE_TOKENS)) / (1 - HUGE_P)
    return _lognormal_median(body_mean, OBS_SIGMA)


def _radical_inverse2(i: int) -> float:
    """Base-2 van der Corput point: any prefix 0, 1/2, 1/4, 3/4, ... spreads evenly over [0, 1)."""
    x, f = 0.0, 0.5
    while i:
        if i & 1:
            x += f
        i >>= 1
        f /= 2
    return x


def _clipped_lognormal_mean(median: float, sigma: float, lo: float, hi: float) -> float:
    """E[min(max(X, lo), hi)] for X lognormal with the given median and log-sd (closed form)."""
    phi = statistics.NormalDist().cdf
    mu = math.log(median)
    a, b = (math.log(lo) - mu) / sigma, (math.log(hi) - mu) / sigma
    inside = math.exp(mu + sigma * sigma / 2) * (phi(b - sigma) - phi(a - sigma))
    return lo * phi(a) + hi * (1 - phi(b)) + inside


@functools.cache
def turns_sigma() -> float:
    """Log-sd of the turn count such that the mean *after* clipping to the turn limit is TURNS_MEAN."""
    lo, hi = 0.01, 5.0
    for _ in range(100):  # the clipped mean rises with sigma over this range
        mid = (lo + hi) / 2
        if _clipped_lognormal_mean(TURNS_MEDIAN, mid, TURNS_MIN, TURNS_MAX) < TURNS_MEAN:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def turn_count(seed: int, index: int) -> int:
    """Turns of run ``index``: a lognormal quantile at a stratified, seed-rotated point."""
    rotation = float(np.random.default_rng([seed, *_ROTATION_ENTROPY]).random())
    u = (_radical_inverse2(index) + rotation) % 1.0
    u = min(max(u, 1e-9), 1 - 1e-9)
    sigma = turns_sigma()
    z = statistics.NormalDist().inv_cdf(u)
    return int(min(max(round(TURNS_MEDIAN * math.exp(sigma * z)), TURNS_MIN), TURNS_MAX))


def _log_uniform(rng: np.random.Generator, lo: float, hi: float, size: int | None = None):
    return np.exp(rng.uniform(math.log(lo), math.log(hi), size))


def _event(index: int, kind: str, tokens: int, chars_per_line: float, ts: float, **ids) -> Event:
    # bytes such that the engine's estimate ceil((bytes + overhead) / bpt) gives back ~tokens
    nbytes = max(0, round(tokens * BYTES_PER_TOKEN) - MESSAGE_OVERHEAD_BYTES)
    lines = max(1, round(nbytes / chars_per_line)) if nbytes else 0
    return Event(
        index=index,
        kind=kind,
        content=None,
        bytes=nbytes,
        chars=nbytes,  # ASCII code and shell output
        lines=lines,
        tokens=tokens,
        tokens_provenance="synthetic",
        timestamp=ts,
        **ids,
    )


def generate_run(seed: int, index: int, facts: RunFacts | None = None) -> Trace:
    """One SWE-like run; the same ``(seed, index)`` (and ``facts``) gives the same trace on any machine.
    ``facts``: draw facts, needs, supersession and error spans by these profiles (None: no facts)."""
    rng = np.random.default_rng([seed, index])
    turns = turn_count(seed, index)

    system_tokens = int(round(_log_uniform(rng, *SYSTEM_TOKENS)))
    task_tokens = int(round(_log_uniform(rng, *TASK_TOKENS)))
    outputs = np.clip(
        np.rint(rng.lognormal(math.log(_lognormal_median(OUTPUT_MEAN, OUTPUT_SIGMA)), OUTPUT_SIGMA, turns)),
        *OUTPUT_RANGE,
    ).astype(int)
    run_factor = rng.lognormal(-(OBS_RUN_SIGMA**2) / 2, OBS_RUN_SIGMA)
    body = rng.lognormal(math.log(observation_body_median()), OBS_SIGMA, turns) * run_factor
    body = np.clip(np.rint(body), *OBS_RANGE)
    huge = rng.random(turns) < HUGE_P
    huge_sizes = np.rint(_log_uniform(rng, *HUGE_TOKENS, size=turns))
    observations = np.where(huge, huge_sizes, body).astype(int)
    observations[-1] = max(OBS_RANGE[0], round(rng.lognormal(math.log(DIFF_MEDIAN), DIFF_SIGMA)))
    huge[-1] = False
    obs_cpl = np.clip(rng.lognormal(math.log(55.0), 0.3, turns), 20, 160)  # chars per line of output
    model_jitter = rng.lognormal(0.0, 0.25, turns)
    tool_seconds = np.clip(rng.lognormal(math.log(0.6), 1.2, turns), 0.02, 900.0)
    test_seconds = rng.uniform(20.0, 180.0, turns)  # a huge output is mostly a test run or a build

    t = float(START_EPOCH + int(rng.integers(0, START_SPREAD_S)))
    events = [
        _event(0, "system", system_tokens, 70.0, t),
        _event(1, "user", task_tokens, 70.0, t),
    ]
    calls: list[Call] = []
    in_view = system_tokens + task_tokens
    for k in range(turns):
        out, obs = int(outputs[k]), int(observations[k])
        # prefill grows with the view; decoding at ~70 tokens/s
        t += (1.5 + in_view / 20000 + out / 70) * float(model_jitter[k])
        ts = round(t, 3)
        ei = len(events)
        cid = f"call-{k}"
        events.append(_event(ei, "assistant", out, 75.0, ts, tool_call_ids=(cid,)))
        calls.append(synthetic_call(k, ei, in_view, out, ts))
        t += float(tool_seconds[k]) + (float(test_seconds[k]) if huge[k] else 0.0)
        events.append(_event(ei + 1, "tool_result", obs, float(obs_cpl[k]), round(t, 3), tool_call_id=cid))
        in_view += out + obs

    if facts is not None:
        events = with_facts(events, turns, facts, [seed, index])
    return synthetic_trace(f"swe-like-{index:04d}", "ctxsim swe_like generator", events, calls, seed)


def with_facts(events: list[Event], turns: int, facts: RunFacts, key: list[int]) -> list[Event]:
    """``events`` (system, task, then an (assistant, tool_result) pair per turn) with the facts of
    ``scenarios.facts`` drawn from the streams ``key + [1]``, ``key + [2]`` and ``key + [3]``."""
    provides, needs = draw_facts(turns, np.random.default_rng([*key, 1]), facts.provided)
    stale = draw_supersession(provides, np.random.default_rng([*key, 2]), facts.supersession)
    where = np.random.default_rng([*key, 3]).random((turns, 3))
    held = standing(0, 1)
    out = [
        dataclasses.replace(e, provides=(held[i][0],), fact_kinds=(held[i][1],))
        for i, e in enumerate(events[:2])
    ]
    for k in range(turns):
        action, result = events[2 + 2 * k], events[3 + 2 * k]
        need = tuple(obs_fact(j) for j in needs[k])
        if k == turns - 1:  # the final answer needs the task and the rules, as in the real runs
            need = (*need, held[0][0], held[1][0])
        out.append(dataclasses.replace(action, needs=need))
        if provides[k]:
            span = None  # a path fact is the file as printed: its whole result
            if provides[k] == "error" and facts.error_spans is not None and result.bytes:
                span = draw_error_span(result.bytes, where[k], facts.error_spans)
            result = dataclasses.replace(
                result,
                provides=(obs_fact(k),),
                fact_kinds=(provides[k],),
                fact_spans=(span,) if span is not None else (),
            )
        if stale[k]:
            result = dataclasses.replace(result, supersedes=tuple(obs_fact(j) for j in stale[k]))
        out.append(result)
    return out


def synthetic_call(k: int, event_index: int, input_tokens: int, output_tokens: int, ts: float) -> Call:
    """Call ``k`` of a synthetic full-history run: its input is the view before its assistant event."""
    return Call(
        index=k,
        event_index=event_index,
        view_end=event_index,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        reasoning_tokens=0,
        residual_tokens=0,
        usage_provenance="synthetic",
        timestamp=ts,
    )


def synthetic_trace(trace_id: str, agent: str, events: list[Event], calls: list[Call], seed: int) -> Trace:
    """A synthetic SWE-like run: text-free, full history (recorded policy raw), submitted."""
    return Trace(
        trace_id=trace_id,
        source_format="ctxsim-scenario",
        events=tuple(events),
        calls=tuple(calls),
        agent=agent,
        model="synthetic",
        context_window=None,
        bytes_per_token=BYTES_PER_TOKEN,
        recorded_policy={"name": "raw"},
        outcome={"exit_status": "Submitted", "seed": seed},
    )


def generate_suite(seed: int, n_runs: int, facts: RunFacts | None = None) -> list[Trace]:
    """Runs 0..n_runs-1 of one seed; a longer suite extends a shorter one run by run."""
    return [generate_run(seed, i, facts) for i in range(n_runs)]


def suite_stats(traces: Sequence[Trace]) -> dict:
    """The statistics the suite is calibrated to, with the Complexity Trap CSV's definitions.

    Per-call means are taken per run first and then averaged over runs (as the CSV's
    ``mean_prompt_tokens`` / ``mean_completion_tokens`` columns are). The observation share pools all
    turns: tool_result tokens / (assistant + tool_result) tokens.
    """
    turns = [len(t.calls) for t in traces]
    run_mean_in = [statistics.fmean(c.input_tokens for c in t.calls) for t in traces]
    run_mean_out = [statistics.fmean(c.output_tokens for c in t.calls) for t in traces]
    obs = [e.tokens for t in traces for e in t.events if e.kind == "tool_result"]
    asst = [e.tokens for t in traces for e in t.events if e.kind == "assistant"]
    peaks = [max(c.input_tokens for c in t.calls) for t in traces]
    return {
        "runs": len(traces),
        "turns_mean": statistics.fmean(turns),
        "turns_median": statistics.median(turns),
        "turns_max": max(turns),
        "input_per_call_mean": statistics.fmean(run_mean_in),
        "output_per_call_mean": statistics.fmean(run_mean_out),
        "cumulative_input_per_run_mean": statistics.fmean(
            sum(c.input_tokens for c in t.calls) for t in traces
        ),
        "peak_input_max": max(peaks),
        "runs_peak_over_100k": sum(p > 100_000 for p in peaks),
        "observation_share": sum(obs) / (sum(obs) + sum(asst)),
        "tool_result_max": max(obs),
        "tool_results_over_20k": sum(o >= 20_000 for o in obs),
        "tool_result_median": statistics.median(obs),
    }
