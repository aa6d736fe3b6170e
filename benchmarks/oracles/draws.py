"""Seeded draws of framework-policy settings across each knob's range, for the conformance runs of
``frameworks.py --draw N``: thresholds that fire early, mid-run and late on the traces at hand (token
knobs are drawn as a fraction of the traces' median peak request), counts and fractions across what the
library accepts. A draw uses its own ``random.Random(seed)``: same seed and traces, same settings.

A spec per knob: ``("tokens", lo, hi)`` a token count in [lo, hi] x the median peak request;
``("int", lo, hi)``; ``("float", lo, hi)`` (rounded to 2 places); ``("choice", values)``.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Sequence

from sim.core.types import Trace

SPECS: dict[str, dict[str, tuple]] = {
    "adk_events_compaction": {
        "compaction_interval": ("int", 1, 8),
        "overlap_size": ("int", 0, 3),
        "token_threshold": ("choice", [None, "tokens"]),
        "event_retention_size": ("int", 0, 12),
    },
    "letta_partial_evict": {
        "context_window": ("tokens", 0.3, 1.3),
        "sliding_window_percentage": ("float", 0.05, 0.9),
        "mode": ("choice", ["sliding_window", "sliding_window", "all"]),
    },
    "autogen_buffered": {"buffer_size": ("int", 1, 40)},
    "autogen_head_and_tail": {"head_size": ("int", 1, 6), "tail_size": ("int", 1, 30)},
    "autogen_token_limited": {
        "token_limit": ("tokens", 0.2, 1.2),
        "token_count": ("choice", ["framework", "provider"]),
    },
    "langchain_clear_tool_uses": {
        "trigger_tokens": ("tokens", 0.1, 1.2),
        "keep": ("int", 0, 8),
        "clear_at_least": ("choice", [0, 0, 500, 2000, 8000]),
        "token_count": ("choice", ["framework", "provider"]),
    },
    "langchain_summarization": {
        "trigger": ("tokens", 0.2, 1.2),
        "keep": ("int", 2, 30),
        "trim_tokens_to_summarize": ("choice", [1000, 4000, 4000, 16000]),
        "token_count": ("choice", ["framework", "provider"]),
    },
    "strands_sliding_window": {
        "window_size": ("int", 4, 60),
        "should_truncate_results": ("choice", [True, False]),
        "per_turn": ("choice", [False, True, 2, 5]),
    },
    "strands_summarizing": {
        "context_window": ("tokens", 0.3, 1.3),
        "summary_ratio": ("float", 0.1, 0.8),
        "preserve_recent_messages": ("int", 2, 20),
        "proactive_compression": (
            "choice",
            [None, {"compression_threshold": 0.7}, {"compression_threshold": 0.5}],
        ),
    },
    "inspect_compaction_edit": {
        "threshold": ("tokens", 0.2, 1.2),
        "keep_tool_uses": ("int", 0, 8),
        "keep_tool_inputs": ("choice", [True, False]),
    },
    "inspect_compaction_trim": {"threshold": ("tokens", 0.2, 1.2), "preserve": ("float", 0.1, 0.95)},
    "inspect_compaction_summary": {"threshold": ("tokens", 0.2, 1.2)},
    "inspect_compaction_auto": {"threshold": ("tokens", 0.2, 1.2)},
    "anthropic_clear_tool_uses": {"trigger_tokens": ("tokens", 0.2, 1.2), "keep": ("int", 0, 8)},
    # OpenHands: counts of OpenHands events (a view holds ~2 per call), so a range to a few hundred fires
    # early, mid-run and late on the shared runs (tens to hundreds of calls); ``window`` (the provider's,
    # the SDK agent LLM's input limit) drives the rolling condensers' requests and the SDK's token reason
    "openhands_observation_masking": {"attention_window": ("int", 0, 60)},
    "openhands_browser_output_masking": {"attention_window": ("int", 0, 6)},
    "openhands_recent_events": {"keep_first": ("int", 0, 4), "max_events": ("int", 5, 150)},
    "openhands_amortized_forgetting": {
        "keep_first": ("int", 0, 4),
        "max_size": ("int", 10, 300),
        "window": ("choice", [None, None, "tokens"]),
    },
    "openhands_llm_summarizing": {
        "variant": ("choice", ["v0", "sdk_v1"]),
        "keep_first": ("int", 0, 4),
        "max_size": ("int", 12, 300),  # the SDK needs max_size // 2 - keep_first - 1 > 0
        "window": ("choice", [None, None, "tokens"]),
    },
    "openhands_conversation_window": {"window": ("tokens", 0.2, 1.2)},
    "openhands_hard_context_reset": {"window": ("tokens", 0.2, 1.2)},
    "seed_engine": {
        "context_token_limit": ("tokens", 0.2, 1.2),
        "keep_recent_tokens": ("tokens", 0.02, 0.4),
    },
}


def peak(traces: Sequence[Trace]) -> int:
    """The median over traces of each trace's largest request with nothing managed (its recorded view
    plus the call's residual, in ctxsim's sizes)."""
    peaks = [int((t.arrays.recorded_view + t.arrays.residual).max()) if t.calls else 0 for t in traces]
    return max(int(statistics.median(peaks)), 1) if peaks else 1


def draw_one(spec: tuple, rng: random.Random, scale: int):
    kind = spec[0]
    if kind == "tokens":
        return max(1, round(scale * rng.uniform(spec[1], spec[2])))
    if kind == "int":
        return rng.randint(spec[1], spec[2])
    if kind == "float":
        return round(rng.uniform(spec[1], spec[2]), 2)
    value = rng.choice(spec[1])
    return draw_one(("tokens", 0.2, 1.2), rng, scale) if value == "tokens" else value


def draw(policy: str, n: int, seed: int, traces: Sequence[Trace]) -> list[dict]:
    """``n`` settings of ``policy`` (knob -> value), drawn with ``random.Random(f"{policy}:{seed}")``."""
    specs = SPECS.get(policy)
    if specs is None:
        raise KeyError(f"no draw ranges for {policy}; known: {', '.join(sorted(SPECS))}")
    rng = random.Random(f"{policy}:{seed}")
    scale = peak(traces)
    return [{k: draw_one(s, rng, scale) for k, s in specs.items()} for _ in range(n)]
