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
    # ADK takes each pair set together or both null, and knobs are drawn one by one: both pairs always
    # set. A threshold above a run's peak never fires (the sliding window alone), and a single-task run
    # has one invocation (the token threshold alone); thresholds from 0.1 x the peak fire early.
    "adk_events_compaction": {
        "compaction_interval": ("int", 1, 8),
        "overlap_size": ("int", 0, 3),
        "token_threshold": ("tokens", 0.1, 1.3),
        "event_retention_size": ("int", 0, 12),
        # the scripted summary's floor: below 256 a summary is more often smaller than what it replaces
        # (ADK's worth-compacting check and the rolling summary's growth)
        "summary_min_tokens": ("choice", [10, 64, 256, 256]),
    },
    "letta_partial_evict": {
        "context_window": ("tokens", 0.3, 1.3),
        "sliding_window_percentage": ("float", 0.05, 0.9),
        "mode": ("choice", ["sliding_window", "sliding_window", "all"]),
        "summary_min_tokens": ("choice", [10, 64, 256, 256]),  # the fallback check sees smaller summaries
    },
    "autogen_buffered": {"buffer_size": ("int", 1, 40)},
    "autogen_head_and_tail": {"head_size": ("int", 1, 6), "tail_size": ("int", 1, 30)},
    "autogen_token_limited": {
        "token_limit": ("tokens", 0.2, 1.2),
        "token_count": ("choice", ["framework", "provider"]),
    },
    # trigger from 0.02 x the peak: the default count leaves out the system prompt and tools, which are
    # most of the request on the short families (openhands-sdk, claude-code), so a higher floor never
    # fires there; keep weighted to small values (those runs hold 1-3 tool results). exclude_tools: names
    # the shared families' assistant turns start with (ctxsim matches a tool by its issuing turn's text),
    # so an excluded result is met on mini, tau, ohv0, inspect and claude alike
    "langchain_clear_tool_uses": {
        "trigger": ("tokens", 0.02, 1.2),
        "keep": ("choice", [0, 0, 1, 1, 2, 3, 5, 8]),
        "clear_at_least": ("choice", [0, 0, 500, 2000, 8000]),
        "clear_tool_inputs": ("choice", [False, False, True]),
        "exclude_tools": (
            "choice",
            [
                [],
                [],
                ["get_reservation_details", "THOUGHT: Now", "It seems", "Executing bash", '{"name": "Bash"'],
            ],
        ),
        "placeholder": ("choice", ["[cleared]", "[cleared]", "[tool output cleared to save context]"]),
        "token_count_method": ("choice", ["approximate", "model"]),
    },
    # trigger and keep in every form LangChain takes (a token count, a (kind, value) pair, an AND clause,
    # an OR list); the fixed message counts and token values fire on the short families and the long
    "langchain_summarization": {
        "trigger": (
            "choice",
            [
                "tokens",
                "tokens",
                "tokens",
                ["messages", 4],
                ["messages", 12],
                ["messages", 40],
                {"messages": 10, "tokens": 2000},
                [["messages", 50], {"tokens": 6000}],
                [{"messages": 3, "tokens": 60}, ["tokens", 100000]],
            ],
        ),
        "keep": ("choice", [1, 2, 4, 6, 10, 20, 30, ["messages", 8], ["tokens", 500], ["tokens", 3000]]),
        "trim_tokens_to_summarize": ("choice", [1000, 4000, 4000, 16000]),
        "token_count": ("choice", ["framework", "provider"]),
    },
    "strands_sliding_window": {
        "window_size": ("int", 4, 60),
        "should_truncate_results": ("choice", [True, False]),
        "per_turn": ("choice", [False, True, 2, 5]),
        # the provider's window (the oracle refuses a request over it): reduce_context's truncation and
        # trim run only on an overflow, which window_size alone never causes; above 1x the median peak
        # some traces never overflow
        "window": ("tokens", 0.3, 1.3),
    },
    "strands_summarizing": {
        "context_window": ("tokens", 0.3, 1.3),
        # Strands clamps the ratio to [0.1, 0.8]: draws on both sides of the clamp
        "summary_ratio": ("float", 0.05, 0.9),
        "preserve_recent_messages": ("int", 2, 20),
        "proactive_compression": (
            "choice",
            [None, True, {"compression_threshold": 0.5}, {"compression_threshold": 0.9}],
        ),
        # the provider's window apart from the model's context_window_limit (null: the same) in half
        # the draws: proactive compression reads the limit, the overflow the window
        "window": ("choice", [None, "tokens"]),
    },
    # Inspect: keep_tool_uses past the number of uses (nothing to clear: "Compaction insufficient");
    # exclude_tools names a tool where an assistant's text starts with it (ctxsim's rule; tau-bench's
    # texts start with the tool's name, mini-swe-agent's with "THOUGHT: ")
    "inspect_compaction_edit": {
        "threshold": ("tokens", 0.2, 1.2),
        "keep_tool_uses": ("int", 0, 12),
        "keep_tool_inputs": ("choice", [True, False]),
        "exclude_tools": (
            "choice",
            [None, None, ["get_reservation_details"], ["think", "get_user_details"], ["THOUGHT: Now"]],
        ),
    },
    # preserve: the whole range CompactionTrim takes (0 keeps no conversation, 1 all of it)
    "inspect_compaction_trim": {"threshold": ("tokens", 0.2, 1.2), "preserve": ("float", 0.0, 1.0)},
    # the summary size rule is the oracle's scripted summarizer's: drawn so summaries of every size are held
    "inspect_compaction_summary": {
        "threshold": ("tokens", 0.2, 1.2),
        "summary_ratio": ("float", 0.05, 0.6),
        "summary_min_tokens": ("choice", [10, 256]),
    },
    "inspect_compaction_auto": {
        "threshold": ("tokens", 0.2, 1.2),
        "summary_min_tokens": ("choice", [10, 256]),
    },
    # only what CompactionEdit can express (clear_at_least, clear_tool_inputs: NotComparable); exclude_tools
    # is left out: Anthropic's keep counts excluded tools' results, CompactionEdit's does not
    "anthropic_clear_tool_uses": {"trigger_tokens": ("tokens", 0.2, 1.2), "keep": ("int", 0, 12)},
    # OpenHands: counts of OpenHands events (a view holds ~2 per call), so a range to a few hundred fires
    # early, mid-run and late on the shared runs (tens to hundreds of calls); ``window`` (the provider's,
    # the SDK agent LLM's input limit) drives the rolling condensers' requests and the SDK's token reason
    "openhands_observation_masking": {"attention_window": ("int", 0, 60)},
    "openhands_browser_output_masking": {"attention_window": ("int", 0, 40)},
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
    # keep below the lowest limit (the engine refuses keepRecentTokens >= contextTokenLimit); results over
    # a bound from the floor (256 bytes) to the default; a provider window now and then (the overflow retry)
    "seed_engine": {
        "context_token_limit": ("tokens", 0.2, 1.2),
        "keep_recent_tokens": ("tokens", 0.02, 0.19),
        "mode": ("choice", ["prune-then-summarize", "prune-then-summarize", "prune", "summarize"]),
        "tool_result_max_bytes": ("choice", [51200, 51200, 256, 700, 2000, 6000]),
        "run_status": ("choice", ["appended", "off"]),
        "window": ("choice", [None, None, None, "tokens"]),
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
    """``n`` distinct settings of ``policy`` (knob -> value), drawn with ``random.Random(f"{policy}:{seed}")``
    (fewer only where the knobs' ranges hold fewer than ``n``)."""
    specs = SPECS.get(policy)
    if specs is None:
        raise KeyError(f"no draw ranges for {policy}; known: {', '.join(sorted(SPECS))}")
    rng = random.Random(f"{policy}:{seed}")
    scale = peak(traces)
    out: list[dict] = []
    for _ in range(50 * n):  # distinct settings while the knobs' space has them (bounded tries)
        knobs = {k: draw_one(s, rng, scale) for k, s in specs.items()}
        if knobs not in out:
            out.append(knobs)
            if len(out) == n:
                break
    return out
