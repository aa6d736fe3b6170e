"""What the information model tells apart on the real traces (issue 20's numbers, re-measured by issue
36): for raw, observation masking n=1, n=3 and n=10, tool_result_head_tail at 2000 characters,
llm_summary at its defaults and the seed engine at 16000/2000 and 48000/8000 on the 40 shared
mini-swe-agent runs, under ``model.on_missing`` refetch and fail: facts seen, lost and stale, needed
facts lost, refetch calls, and the runs by ``answer_outcome`` and by finish reason; then the tau-bench
airline runs' median facts_seen.

    python benchmarks/information_outcomes.py [--max-turns N] [--summarizer extractive|oracle]

``--max-turns`` sets the agent's own step limit (``model.max_turns``; e.g. 250, SWE-agent's);
``--summarizer`` the mock model's summarizer. Needs ``CTXSIM_TRACES``. Markdown on standard output.
"""

from __future__ import annotations

import argparse
import statistics
from collections import Counter

from sim.engine.dispatch import replay_many
from sim.engine.model import ReplayModel
from sim.importers import load_paths
from sim.metrics.compute import ANSWER_OUTCOMES, compute_metrics
from sim.policies.base import make_policy
from sim.util.paths import traces_dir

SETTINGS: list[tuple[str, dict]] = [
    ("raw", {}),
    ("observation_masking", {"n": 1}),
    ("observation_masking", {"n": 3}),
    ("observation_masking", {"n": 10}),
    ("tool_result_head_tail", {"max_chars": 2000}),
    ("llm_summary", {}),
    ("seed_engine", {"context_token_limit": 16000, "keep_recent_tokens": 2000}),
    ("seed_engine", {"context_token_limit": 48000, "keep_recent_tokens": 8000}),
]
MINI = "mini-swe-agent-gemini3pro/trajs"
TAU = "tau-bench/historical_trajectories/gpt-4o-airline.json"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--max-turns", type=int, default=None)
    ap.add_argument("--summarizer", default="extractive")
    args = ap.parse_args()
    traces = list(load_paths([traces_dir() / MINI]))
    print(f"{len(traces)} runs of {MINI}; summarizer {args.summarizer}; max_turns {args.max_turns}\n")
    head = [
        "setting",
        "on_missing",
        "facts seen",
        "facts lost",
        "facts stale",
        "needed facts lost",
        "refetch calls",
        *ANSWER_OUTCOMES,
    ]
    print("| " + " | ".join(head) + " | finish reasons |")
    print("|" + "---|" * (len(head) + 1))
    for name, knobs in SETTINGS:
        label = " ".join([name, *(f"{k}={v}" for k, v in knobs.items())])
        for on_missing in ("refetch", "fail"):
            models = [
                ReplayModel(t, on_missing=on_missing, summarizer=args.summarizer, max_turns=args.max_turns)
                for t in traces
            ]
            records = replay_many(traces, make_policy(name, **knobs), models)
            ms = [compute_metrics(r) for r in records]
            outcomes = Counter(m["answer_outcome"] for m in ms)
            finish = Counter(r.finish_reason for r in records)
            cells = [
                label,
                on_missing,
                sum(m["facts_seen"] for m in ms),
                sum(m["facts_lost"] for m in ms),
                sum(m["facts_stale"] for m in ms),
                sum(m["needed_facts_lost"] for m in ms),
                sum(m["refetch_calls"] for m in ms),
                *(outcomes.get(o, 0) for o in ANSWER_OUTCOMES),
                ", ".join(f"{k} {v}" for k, v in sorted(finish.items())),
            ]
            print("| " + " | ".join(str(c) for c in cells) + " |")
    tau = list(load_paths([traces_dir() / TAU]))
    seen = [compute_metrics(r)["facts_seen"] for r in replay_many(tau, make_policy("raw"))]
    print(f"\ntau-bench airline ({len(tau)} runs): median facts_seen {statistics.median(seen)}")


if __name__ == "__main__":
    main()
