import math

import numpy as np
from builders import swe_trace

from sim.core.records import CALL_COLUMNS, NO_COMPACTIONS, RunRecord
from sim.engine.dispatch import replay
from sim.information.ledger import LedgerTotals
from sim.metrics.compute import METRICS, compute_metrics, growth_exponent
from sim.policies.base import make_policy


def record(inputs):
    n = len(inputs)
    cols = {c: np.zeros(n, dtype=np.int64) for c in CALL_COLUMNS}
    cols["input_tokens"] = np.asarray(inputs, dtype=np.int64)
    cols["output_tokens"] = np.full(n, 5, dtype=np.int64)
    empty = NO_COMPACTIONS
    r = RunRecord("t", "h", "raw", {}, "replay", "completed", cols, np.zeros(0, dtype=np.int8), empty)
    object.__setattr__(r, "ledger", LedgerTotals(*[0] * len(LedgerTotals._fields)))
    return r


def test_basic_metrics_exact():
    m = compute_metrics(record([10, 30, 20]))
    assert m["calls"] == 3
    assert m["cumulative_input_tokens"] == 60
    assert m["cumulative_output_tokens"] == 15
    assert m["peak_context_tokens"] == 30
    assert m["growth_exponent"] is None  # too few calls for a slope over the second half


def test_growth_exponent_constant_view_is_one():
    assert growth_exponent(record([100] * 40)) == 1.0  # cumulative = 100 k exactly


def test_growth_exponent_matches_least_squares_definition():
    inputs = [1000 + 250 * k for k in range(60)]
    cum = np.cumsum(inputs)
    x, y = np.log(np.arange(31, 61)), np.log(cum[30:])
    expected = round(float(np.polyfit(x, y, 1)[0]), 6)
    assert growth_exponent(record(inputs)) == expected
    assert 1.5 < expected < 2.0  # a linearly growing view tends to 2


def test_masking_bounds_growth():
    t = swe_trace([("r\n" * 10, 300)] * 80)
    raw = compute_metrics(replay(t, make_policy("raw")))["growth_exponent"]
    masked = compute_metrics(replay(t, make_policy("observation_masking", n=5)))["growth_exponent"]
    # masked turns still add an action and a placeholder each (25 tokens), so growth stays above 1
    assert raw > 1.9 and 1.0 < masked < 1.5 and not math.isnan(masked)


def test_metric_names_are_the_documented_ones():
    assert list(METRICS) == [
        "calls",
        "cumulative_input_tokens",
        "cumulative_output_tokens",
        "peak_context_tokens",
        "growth_exponent",
        "cache_read_tokens",
        "cache_write_tokens",
        "uncached_input_tokens",
        "cache_hit_rate",
        "cost_microusd",
        "compactions",
        "compactions_truncate",
        "compactions_prune",
        "compactions_summarize",
        "compactions_clear",
        "compactions_spill",
        "compactions_paginate",
        "compaction_frequency",
        "tokens_reclaimed",
        "summary_calls",
        "summary_tokens",
        "exhausted",
        "warnings",
        "unpaired_tool_messages",
        "facts_seen",
        "facts_verbatim",
        "facts_derived",
        "facts_spilled",
        "facts_paginated",
        "facts_not_retrieved",
        "facts_stale",
        "facts_lost",
        "tokens_seen",
        "tokens_verbatim",
        "tokens_derived",
        "tokens_spilled",
        "tokens_paginated",
        "tokens_lost",
        *(f"facts_seen_{k}" for k in ("path", "identifier", "error", "value", "constraint", "goal")),
        *(f"facts_lost_{k}" for k in ("path", "identifier", "error", "value", "constraint", "goal")),
        "refetch_calls",
        "retrieve_calls",
        "page_calls",
        "answer_completed",
        "answer_outcome",
        "answer_fact_recall",
        "runs",
        "max_opening_prompt_tokens",
        "live_context_tokens",
        "child_calls",
        "child_input_tokens",
        "child_cost_microusd",
        "parent_input_tokens",
        "child_exhausted",
        "child_failed",
        "needed_facts_lost",
    ]
