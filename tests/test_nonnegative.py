"""Property: no modelled count or cost is ever negative, and the cache never bills more than a call's
input, for every registered policy, on random traces and on mutated real ones (both replay paths).

Budget: ``NONNEG_EXAMPLES`` examples per property (CTXSIM_NONNEG_EXAMPLES raises it for a longer hunt).
"""

import dataclasses
import math
import os

import pytest
from builders import ev
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_conformance import settings_of

from sim.checks.conformance import record_diff
from sim.core.records import CALL_COLUMNS
from sim.core.types import Call, Trace
from sim.engine.dispatch import replay, replay_many
from sim.engine.model import ReplayModel
from sim.metrics.compute import ANSWER_OUTCOMES, compute_metrics
from sim.policies.base import make_policy, registered
from sim.trace.codec import trace_from_dict, trace_to_dict
from sim.trace.rules import trace_problems

NONNEG_EXAMPLES = int(os.environ.get("CTXSIM_NONNEG_EXAMPLES", "40"))
PROPERTY = settings(
    max_examples=NONNEG_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
POLICIES = sorted(registered())
# priced with explicit writes, priced with 128-token granularity, fitted implicit caching, unpriced
MODELS = ("claude-sonnet-4-5", "gpt-4o", "google/gemini-3-pro-preview", "acme/unknown", None)
# columns that may hold a "none" marker (-1) or a signed provider residual
MARKED = {"recorded_input_tokens": -1, "first_changed": -1}
SIGNED = {"residual_tokens"}
# a net difference, not a count: a summary larger than what it replaced reclaims a negative amount
SIGNED_METRICS = {"tokens_reclaimed"}


def assert_sane(r, priced: bool) -> None:
    """Every per-call count >= 0 (markers >= -1), cache read + write <= input, the uncached rest is what
    is left, cost >= 0 when priced and -1 (unpriced) otherwise; every run metric >= 0 and finite."""
    c = {name: r.calls[name].tolist() for name in CALL_COLUMNS}
    for name, values in c.items():
        if name in SIGNED or name == "cost_microusd":
            continue
        lo = MARKED.get(name, 0)
        assert all(v >= lo for v in values), (name, values)
    for inp, read, write, unc in zip(
        c["input_tokens"],
        c["cache_read_tokens"],
        c["cache_write_tokens"],
        c["uncached_input_tokens"],
        strict=True,
    ):
        assert read + write <= inp and unc == inp - read - write, (inp, read, write, unc)
    assert all(v >= 0 for v in c["cost_microusd"]) if priced else all(v == -1 for v in c["cost_microusd"])
    for name, v in compute_metrics(r).items():
        if isinstance(v, bool) or v is None:
            continue
        if isinstance(v, str):  # answer_outcome
            assert v in ANSWER_OUTCOMES, (name, v)
            continue
        assert math.isfinite(v) and (v >= 0 or name in SIGNED_METRICS), (name, v)
    assert all(x >= 0 for x in r.ledger), r.ledger


def check_every_policy(t: Trace, data, on_missing: str) -> None:
    for name in POLICIES:
        params = data.draw(st.sampled_from(settings_of(name)), label=name)
        policy = make_policy(name, **params)
        model = ReplayModel(t, on_missing=on_missing)
        batch = replay_many([t], policy, [model])[0]
        loop = replay(t, policy, model, observer=lambda k, view: None)
        assert record_diff(batch, loop) == [], (name, params)
        assert_sane(batch, priced=batch.pricing is not None)


@st.composite
def traces(draw) -> Trace:
    """system, task, then (assistant, tool_result) turns with random sizes, outputs, times and recorded
    inputs: equal to the view, above it, below it, or 0 (the view's whole size as a negative residual)."""
    n = draw(st.integers(1, 10))
    sizes = st.one_of(st.integers(0, 400), st.integers(400, 6000), st.integers(20_000, 90_000))
    events = [
        ev(0, "system", "sys", draw(st.integers(0, 3000))),
        ev(1, "user", "task", draw(st.integers(0, 900))),
    ]
    calls_at = []
    for k in range(n):
        a = len(events)
        events.append(ev(a, "assistant", f"cmd {k}", draw(st.integers(0, 300)), tool_call_ids=(f"c{k}",)))
        calls_at.append(a)
        text = draw(st.sampled_from(["", "ok", "line\n" * 30, "x" * 700]))
        events.append(ev(a + 1, "tool_result", text, draw(sizes), tool_call_id=f"c{k}"))
    if n > 1 and draw(st.booleans()):  # a fact the last action needs, provided by an earlier observation
        src = 3 + 2 * draw(st.integers(0, n - 2))
        events[src] = dataclasses.replace(events[src], provides=("f",))
        events[calls_at[-1]] = dataclasses.replace(events[calls_at[-1]], needs=("f",))
    prefix = [0]
    for e in events:
        prefix.append(prefix[-1] + e.tokens)
    t0, calls = 1_700_000_000.0, []
    for j, a in enumerate(calls_at):
        view = prefix[a]
        how = draw(st.sampled_from(["view", "above", "below", "zero", "unknown"]))
        inp = {
            "view": view,
            "above": view + draw(st.integers(1, 3000)),
            "below": draw(st.integers(0, view)),
            "zero": 0,
            "unknown": None,
        }[how]
        t0 += draw(st.sampled_from([0.0, 5.0, 120.0, 400.0, 4000.0]))
        calls.append(
            Call(
                index=j,
                event_index=a,
                view_end=a,
                input_tokens=inp,
                output_tokens=draw(st.one_of(st.none(), st.integers(0, 4000))),
                residual_tokens=0 if inp is None else inp - view,
                usage_provenance="none" if inp is None else "provider",
                timestamp=draw(st.sampled_from([None, t0])),
            )
        )
    t = Trace(
        trace_id="prop",
        source_format="ctxsim-scenario",
        events=tuple(events),
        calls=tuple(calls),
        model=draw(st.sampled_from(MODELS)),
        bytes_per_token=draw(st.sampled_from([None, 4.0, 0.5, 9.25])),
    )
    assert trace_problems(trace_to_dict(t)) == []
    return t


@PROPERTY
@given(traces(), st.data(), st.sampled_from(["refetch", "degrade", "fail"]))
def test_no_negative_count_or_cost_random_traces(t, data, on_missing):
    check_every_policy(t, data, on_missing)


@pytest.fixture(scope="module")
def real(mini_traces):
    return mini_traces[:6]


def mutated(t: Trace, data) -> Trace:
    """A real trace whose recorded inputs are moved, as a damaged or odd provider log would have them:
    some calls report 0 (``prompt_tokens: 0``), some less than their view, some more; residuals follow."""
    prefix = t.arrays.prefix.tolist()
    calls = list(t.calls)
    for _ in range(data.draw(st.integers(1, 6), label="edits")):
        j = data.draw(st.integers(0, len(calls) - 1), label="call")
        view = prefix[calls[j].view_end]
        inp = data.draw(st.sampled_from([0, view // 3, view + 5000]), label="input")
        calls[j] = dataclasses.replace(calls[j], input_tokens=inp, residual_tokens=inp - view)
    d = trace_to_dict(dataclasses.replace(t, calls=tuple(calls)))
    return trace_from_dict(d)  # the mutation is a valid trace: validation holds it to the schema


@settings(max_examples=max(3, NONNEG_EXAMPLES // 5), deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_no_negative_count_or_cost_mutated_real_traces(real, data):
    t = mutated(data.draw(st.sampled_from(real), label="trace"), data)
    check_every_policy(t, data, "refetch")
