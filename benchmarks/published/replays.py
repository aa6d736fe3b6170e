"""ctxsim's side of a published comparison: replay traces under raw and a policy, and total what a
bill and a solve rate need per run (agent calls and summary calls apart), priced at any assumed rates.

Why price here and not through ``conf/pricing``: the paper's bills are from mid-2025 list prices and a
local model's flat price, which are assumptions of this comparison, not prices a user's run should pick
up by its model name. The replay only chooses the cache rules (``cache_pricing``: a priced model whose
family's rules apply, or None for no cache); the token splits it returns are priced by ``Rates``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sim.core.records import SUMMARY
from sim.core.types import Trace
from sim.engine.dispatch import replay_many
from sim.engine.model import ReplayModel
from sim.metrics.compute import compute_metrics_many
from sim.policies.base import make_policy


@dataclass(frozen=True)
class Rates:
    """USD per million tokens."""

    input: float
    output: float
    cache_read: float
    source: str

    def text(self) -> str:
        rates = f"input ${self.input:g}, cache read ${self.cache_read:g}, output ${self.output:g}"
        return f"{rates} per 1M ({self.source})"


@dataclass(frozen=True)
class RunTotals:
    """One run's totals, arrays over runs in the traces' order."""

    trace_ids: tuple[str, ...]
    agent_calls: np.ndarray  # the agent's own steps (re-reads included)
    agent_input: np.ndarray  # input tokens of the agent's requests (the paper's cumulative input)
    agent_read: np.ndarray  # ... of which read from the cache
    agent_output: np.ndarray
    summary_calls: np.ndarray
    summary_input: np.ndarray
    summary_output: np.ndarray
    agent_sqrt_input: np.ndarray  # sum over the agent's calls of sqrt(input tokens): hidden output's scale
    summary_sqrt_input: np.ndarray
    completed: np.ndarray  # the answer was given in full (``answer_outcome == "complete"``)

    def cost(self, b: Bill) -> np.ndarray:
        """USD per run: agent calls (cached part at the read rate) plus summary calls."""
        r = b.rates
        read = self.agent_read * b.read_scale
        agent = (self.agent_input - read) * r.input + read * r.cache_read
        agent = agent + (self.agent_output + b.hidden_per_sqrt_input * self.agent_sqrt_input) * r.output
        return agent / 1e6 + self.summary_cost(b)

    def summary_cost(self, b: Bill) -> np.ndarray:
        """USD per run of the summary calls: the agent's own model, so they carry its hidden output too."""
        out = self.summary_output + b.hidden_per_sqrt_input * self.summary_sqrt_input
        return (self.summary_input * b.rates.input + out * b.rates.output) / 1e6

    def hidden_output(self, b: Bill) -> float:
        """Mean hidden output tokens per agent call under ``b``."""
        return float(b.hidden_per_sqrt_input * self.agent_sqrt_input.sum() / max(self.agent_calls.sum(), 1.0))


@dataclass(frozen=True)
class Bill:
    """How a replay's tokens become dollars: the rates, the share of the modelled cache reads kept
    (``read_scale``: the reads of a fitted reuse fraction over the configured one), and billed output
    that the history never sees (a thinking model's reasoning): ``hidden_per_sqrt_input`` x sqrt(the
    call's input tokens) per call. Why the square root: on the Complexity Trap's raw Gemini bills it fits
    each task's cost as well as a constant per call without thinking (median error 10.2% against 10.0%)
    and far better with it (11.7% against 28.1%; docs/published.md): short runs think less per call."""

    rates: Rates
    read_scale: float = 1.0
    hidden_per_sqrt_input: float = 0.0


def replay_totals(
    traces: Sequence[Trace],
    policy: str,
    knobs: dict,
    cache_pricing: str | None,
    on_missing: str = "refetch",
    max_turns: int | None = None,
) -> RunTotals:
    models = [ReplayModel(t, on_missing=on_missing, max_turns=max_turns) for t in traces]
    records = replay_many(traces, make_policy(policy, **knobs), models, pricing=cache_pricing)
    metrics = compute_metrics_many(records)
    cols: dict[str, list[float]] = {k: [] for k in ("calls", "ai", "ar", "ao", "sc", "si", "so", "aq", "sq")}
    for r in records:
        c = r.calls
        kind = np.asarray(c["kind"])
        agent = kind != SUMMARY
        summ = kind == SUMMARY
        cols["calls"].append(int(agent.sum()))
        cols["ai"].append(int(np.asarray(c["input_tokens"])[agent].sum()))
        cols["ar"].append(int(np.asarray(c["cache_read_tokens"])[agent].sum()))
        cols["ao"].append(int(np.asarray(c["output_tokens"])[agent].sum()))
        cols["sc"].append(int(summ.sum()))
        cols["si"].append(int(np.asarray(c["input_tokens"])[summ].sum()))
        cols["so"].append(int(np.asarray(c["output_tokens"])[summ].sum()))
        root = np.sqrt(np.asarray(c["input_tokens"], dtype=np.float64))
        cols["aq"].append(float(root[agent].sum()))
        cols["sq"].append(float(root[summ].sum()))
    arr = {k: np.array(v, dtype=np.float64) for k, v in cols.items()}
    return RunTotals(
        trace_ids=tuple(t.trace_id for t in traces),
        agent_calls=arr["calls"],
        agent_input=arr["ai"],
        agent_read=arr["ar"],
        agent_output=arr["ao"],
        summary_calls=arr["sc"],
        summary_input=arr["si"],
        summary_output=arr["so"],
        agent_sqrt_input=arr["aq"],
        summary_sqrt_input=arr["sq"],
        completed=np.array([m["answer_outcome"] == "complete" for m in metrics], dtype=bool),
    )
