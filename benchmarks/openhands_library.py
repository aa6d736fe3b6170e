"""The OpenHands policies on the 40 shared mini-swe-agent runs: input ÷ raw, cost ÷ raw, compactions per
run and facts lost, per policy and setting (the policy library table, OpenHands rows).

    python benchmarks/openhands_library.py [--src CHECKOUT]

``--src`` measures another ctxsim checkout (e.g. main, for a before/after table): its ``sim`` is imported
instead of this one's, read-only (no bytecode written); a policy it does not have is left out. Needs
``CTXSIM_TRACES``. The mock model re-reads lost facts (``refetch``, the default), as in every table.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

# policy -> settings measured: the defaults, and the goldens' settings that act on these runs
ROWS: list[tuple[str, dict]] = [
    ("openhands_observation_masking", {}),
    ("openhands_observation_masking", {"attention_window": 3}),
    ("openhands_browser_output_masking", {}),
    ("openhands_recent_events", {}),
    ("openhands_recent_events", {"keep_first": 2, "max_events": 20}),
    ("openhands_amortized_forgetting", {}),
    ("openhands_amortized_forgetting", {"max_size": 20, "keep_first": 1}),
    ("openhands_llm_summarizing", {}),
    ("openhands_llm_summarizing", {"max_size": 20, "keep_first": 1}),
    ("openhands_llm_summarizing", {"variant": "sdk_v1"}),
    ("openhands_llm_summarizing", {"variant": "sdk_v1", "max_size": 80, "keep_first": 4}),
    ("openhands_llm_summarizing", {"variant": "sdk_v1", "max_tokens": 30000}),
    ("openhands_conversation_window", {}),
    ("openhands_hard_context_reset", {}),
]
# ... and with a 20,000-token provider window (the recorded model's is far larger): the overflow paths
WINDOWED = [
    ("openhands_conversation_window", {}),
    ("openhands_hard_context_reset", {}),
    ("openhands_amortized_forgetting", {"max_size": 40, "keep_first": 1}),
    ("openhands_llm_summarizing", {"variant": "sdk_v1", "max_size": 80, "keep_first": 4}),
]
WINDOW = 20000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", help="the ctxsim checkout to measure (default: this one)")
    args = ap.parse_args()
    if args.src:
        sys.dont_write_bytecode = True
        sys.path.insert(0, str(Path(args.src).resolve()))
    import sim
    from sim.policies.base import registered

    traces = list(sim.load_paths([Path(os.environ["CTXSIM_TRACES"]) / "mini-swe-agent-gemini3pro" / "trajs"]))
    have = registered()

    def measure(name: str, knobs: dict, window="auto") -> tuple[int, int, int, int, int]:
        recs = sim.engine.dispatch.replay_many(traces, sim.make_policy(name, **knobs), window=window)
        ms = [sim.compute_metrics(r) for r in recs]
        return (
            sum(int(m["cumulative_input_tokens"]) for m in ms),
            sum(int(m["cost_microusd"] or 0) for m in ms),
            sum(int(m["compactions"]) for m in ms),
            sum(int(m["facts_lost"]) for m in ms),
            sum(1 for r in recs if r.finish_reason != "completed"),
        )

    raw_in, raw_cost, *_ = measure("raw", {})
    cols = f"{'input/raw':>9} {'cost/raw':>9} {'compact/run':>11} {'facts lost':>10} {'not completed':>13}"
    print(f"{'policy':34} {'knobs':46} {cols}")
    rows = [(n, k, "auto") for n, k in ROWS] + [(n, k, WINDOW) for n, k in WINDOWED]
    for name, knobs, window in rows:
        label = str(knobs) + ("" if window == "auto" else f" window {window}")
        if name not in have:
            print(f"{name:34} {label:46} {'(absent)':>9}")
            continue
        inp, cost, comp, lost, stopped = measure(name, knobs, window)
        print(f"{name:34} {label:46} {inp / raw_in:9.3f} {cost / raw_cost:9.3f} "
              f"{comp / len(traces):11.2f} {lost:10d} {stopped:13d}")  # fmt: skip


if __name__ == "__main__":
    main()
