"""What delegating research costs on the 40 shared mini-swe-agent runs (issue 25's numbers): the seed
engine without delegation against ``delegate_research`` with ``report_tokens`` 500 and 2,000 (``min_span``
2; also 120, where reports start to drop facts on these runs) and ``code_mode`` n=3, every call priced as
claude-sonnet-4-5: the parent's cumulative input, the children's, the total cost including the children,
facts lost and answers completed. Each is measured twice: the seed engine's defaults (no
``context_token_limit``: it never compacts) and 16000/8000 (``ctxsim size``'s recommendation for these
runs).

    python benchmarks/delegation.py [--repeats N] [--summarizer extractive|oracle]

Needs ``CTXSIM_TRACES``. Markdown on standard output; CPU seconds (``time.process_time``) per setting,
median of ``--repeats`` (default 3) replays of the 40 runs, transform included.
"""

from __future__ import annotations

import argparse
import statistics
import time

from sim.engine.dispatch import replay_many
from sim.engine.model import ReplayModel
from sim.importers import load_paths
from sim.metrics.compute import compute_metrics_many
from sim.policies.base import make_policy
from sim.transforms.base import apply_all, make_transform
from sim.util import provenance
from sim.util.paths import traces_dir

MINI = "mini-swe-agent-gemini3pro/trajs"
PRICING = "claude-sonnet-4-5"
POLICIES = [("defaults", {}), ("16000/8000", {"context_token_limit": 16000, "keep_recent_tokens": 8000})]
# 500 and 2000: the issue's; 120 (3 facts at 40 tokens a fact): where the report starts to drop facts
# here; code_mode n=3 (its default) for comparison
DELEGATION: list[tuple[str, tuple[str, dict] | None]] = [
    ("none", None),
    ("report 120", ("delegate_research", {"min_span": 2, "report_tokens": 120})),
    ("report 500", ("delegate_research", {"min_span": 2, "report_tokens": 500})),
    ("report 2000", ("delegate_research", {"min_span": 2, "report_tokens": 2000})),
    ("code_mode n=3", ("code_mode", {"n": 3})),
]


def measure(
    traces, knobs: dict, transform: tuple[str, dict] | None, summarizer: str
) -> tuple[dict, int, float]:
    """(column sums and counts, spans moved, CPU seconds) of one setting over the traces."""
    t0 = time.process_time()
    models = [ReplayModel(t, summarizer=summarizer) for t in traces]
    if transform is not None:
        step = [make_transform(transform[0], **transform[1])]
        runs = [apply_all(t, step, m) for t, m in zip(traces, models, strict=True)]
        models = [m.like(t) for t, m in zip(runs, models, strict=True)]
    else:
        runs = list(traces)
    records = replay_many(runs, make_policy("seed_engine", **knobs), models, pricing=PRICING)
    ms = compute_metrics_many(records)
    cpu = time.process_time() - t0
    sums = {
        k: sum(m[k] for m in ms)
        for k in (
            "calls",
            "child_calls",
            "parent_input_tokens",
            "child_input_tokens",
            "cumulative_input_tokens",
            "cost_microusd",
            "child_cost_microusd",
            "facts_seen",
            "facts_lost",
        )
    }
    sums["answer_completed"] = sum(bool(m["answer_completed"]) for m in ms)
    sums["runs"] = len(ms)
    return sums, sum(len(t.moved) for t in runs), cpu


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--summarizer", default="extractive")
    args = ap.parse_args()
    prov = provenance.start()
    traces = list(load_paths([traces_dir() / MINI]))
    print(f"# delegate_research on {len(traces)} mini-swe-agent runs (seed_engine, priced as {PRICING})\n")
    print(f"summarizer {args.summarizer}; CPU: median of {args.repeats} repeats\n")
    head = (
        "| seed_engine | transform | spans moved | parent calls | child calls | parent input | child input | "
        "total input | vs none | total cost USD | child cost USD | vs none | facts lost | completed | CPU s |"
    )
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for label, knobs in POLICIES:
        base = None
        for name, transform in DELEGATION:
            cpus = []
            for _ in range(args.repeats):
                s, spans, cpu = measure(traces, knobs, transform, args.summarizer)
                cpus.append(cpu)
            base = base or s
            d_in = s["cumulative_input_tokens"] / base["cumulative_input_tokens"] - 1
            d_cost = s["cost_microusd"] / base["cost_microusd"] - 1
            cells = [
                label,
                name,
                str(spans),
                f"{s['calls']:,}",
                f"{s['child_calls']:,}",
                f"{s['parent_input_tokens']:,}",
                f"{s['child_input_tokens']:,}",
                f"{s['cumulative_input_tokens']:,}",
                f"{d_in:+.1%}",
                f"{s['cost_microusd'] / 1e6:.2f}",
                f"{s['child_cost_microusd'] / 1e6:.2f}",
                f"{d_cost:+.1%}",
                f"{s['facts_lost']} of {s['facts_seen']}",
                f"{s['answer_completed']}/{s['runs']}",
                f"{statistics.median(cpus):.2f}",
            ]
            print("| " + " | ".join(cells) + " |")
    print(f"\n{prov.text()}")


if __name__ == "__main__":
    main()
