"""Closed-loop scenarios: a policy that forgets what the agent needs changes the run itself."""

import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from scenarios.closed_loop import SCENARIOS, grep_and_read, needle, scenario, working_set_16k
from sim.core.types import ItemState
from sim.engine.dispatch import replay
from sim.engine.model import ReplayModel
from sim.information.ledger import entries
from sim.metrics.compute import compute_metrics
from sim.policies.base import Change, Decision, Policy, SummaryCall, make_policy
from sim.trace.codec import trace_hash
from sim.util.errors import UnknownNameError

GOLDEN = Path(__file__).parent / "golden" / "working_set_16k"
PRICE = "claude-sonnet-4-5"


def metrics(trace, policy, **model):
    r = replay(trace, policy, ReplayModel(trace, **model), pricing=PRICE)
    return r, compute_metrics(r)


def test_seeded_and_deterministic():
    for name, build in SCENARIOS.items():
        assert trace_hash(build(0)) == trace_hash(build(0)), name
    assert trace_hash(grep_and_read(0)) != trace_hash(grep_and_read(1))
    assert trace_hash(needle(0)) != trace_hash(needle(1))
    with pytest.raises(UnknownNameError, match="did you mean 'needle'"):
        scenario("nedle")


def test_aggressive_masking_makes_the_agent_reread():
    t = grep_and_read(0)
    _, narrow = metrics(t, make_policy("observation_masking", n=2))
    _, wide = metrics(t, make_policy("observation_masking", n=1000))
    # n=2: grep hits and both answer files are masked before they are needed: three re-reads
    assert (narrow["calls"], narrow["refetch_calls"], narrow["cost_microusd"]) == (19, 3, 378024)
    assert (wide["calls"], wide["refetch_calls"], wide["cost_microusd"]) == (16, 0, 263435)
    assert narrow["cumulative_input_tokens"] < wide["cumulative_input_tokens"]  # fewer tokens, more money
    assert narrow["answer_completed"] and wide["answer_completed"]


def seed_at_16k(**knobs):
    return make_policy(
        "seed_engine", context_token_limit=16000, keep_recent_tokens=4000, mode="summarize", **knobs
    )


def test_needle_passes_16k_again_and_again():
    t = needle(0)
    assert max(c.input_tokens for c in t.calls) > 2 * 16000
    r, m = metrics(t, seed_at_16k(), on_missing="degrade")
    assert m["summary_calls"] == 2  # each summary takes the view back below 16k for a while


def _spans_at(trace, start: int, end: int):
    """The scenario with every fact given the byte span [start, end) of its result (it records none)."""
    return dataclasses.replace(
        trace,
        events=tuple(
            dataclasses.replace(e, fact_spans=tuple((start, min(end, e.bytes)) for _ in e.provides))
            if e.provides
            else e
            for e in trace.events
        ),
    )


def test_the_seed_summary_covers_what_its_transcript_shows_of_each_result():
    # effect-agent feeds its summarizer the covered messages as stored (a cleared result shows its
    # original text), each clipped at 2,000 characters: a fact is covered when its bytes lie in that
    # head. The scenario records no spans, so each fact is its whole result (2,384-23,984 bytes, beyond
    # the head): the summaries cover nothing and keep nothing, whatever their size, and the answer goes
    # without its summarized milestones and the needle (5 of its 10 facts; with 64-token summaries, which
    # fire at other calls, a step more).
    t = needle(0)
    for size, recall, lost in ((64, 0.4, 6), (2048, 0.5, 5)):
        p = seed_at_16k(summary_min_tokens=min(size, 256), summary_max_tokens=size)
        r, m = metrics(t, p, on_missing="degrade")
        assert [kept for _, kept in r.summaries] == [(), ()]
        assert (m["answer_fact_recall"], m["needed_facts_lost"]) == (recall, lost)
    # each fact in the first 100 bytes of its result: in the head, covered, and small enough (40 tokens
    # each) for a 2,048-token summary to keep all of them: the answer has every fact
    r, m = metrics(_spans_at(t, 0, 100), seed_at_16k(summary_max_tokens=2048), on_missing="degrade")
    assert [len(kept) for _, kept in r.summaries] == [10, 29]
    assert (m["answer_completed"], m["answer_fact_recall"], m["needed_facts_lost"]) == (True, 1.0, 0)
    # ... at bytes 2,100-2,200, past the head: never seen, never kept
    r, m = metrics(_spans_at(t, 2100, 2200), seed_at_16k(summary_max_tokens=2048), on_missing="degrade")
    assert [kept for _, kept in r.summaries] == [(), ()]


def test_extractive_summary_keeps_used_steps_the_oracle_the_answers_milestones():
    # llm_summary's summary (up to 2,048 tokens) covers the view's items as they show; each fact is its
    # whole result (512-6,000 tokens), so it holds three. Nothing acted on the milestones before the
    # summary: the extractive summarizer keeps the newest steps, and the answer goes without four
    # milestones and the needle (5 of 10). The oracle (an upper bound) keeps the milestones the answer
    # needs that fit (8 of 10); neither can state the 6,000-token needle.
    t = needle(0)
    p = make_policy("llm_summary")
    r, ext = metrics(t, p, on_missing="degrade")
    assert r.summarizer == "extractive" and r.summary_kept == ("step:17", "step:18", "step:19")
    assert (ext["answer_outcome"], ext["answer_fact_recall"], ext["needed_facts_lost"]) == (
        "degraded",
        0.5,
        5,
    )
    r, orc = metrics(t, p, on_missing="degrade", summarizer="oracle")
    assert r.summarizer == "oracle" and r.summary_kept == ("milestone:14", "milestone:19", "milestone:9")
    assert (orc["answer_outcome"], orc["answer_fact_recall"], orc["needed_facts_lost"]) == (
        "degraded",
        0.8,
        2,
    )
    assert r.needed_lost == ("milestone:4", "needle:codename")
    # under refetch each run re-reads what it lost: 5 refetch calls, 2 for the oracle, both complete
    _, again = metrics(t, p, on_missing="refetch")
    _, again_orc = metrics(t, p, on_missing="refetch", summarizer="oracle")
    assert (again["answer_outcome"], again["refetch_calls"], again_orc["refetch_calls"]) == ("complete", 5, 2)


def test_spilling_keeps_the_needle_recoverable():
    t = needle(0)
    _, spill = metrics(t, make_policy("spill_large_results", threshold_tokens=3000), on_missing="degrade")
    _, raw = metrics(t, make_policy("raw"))
    assert (spill["retrieve_calls"], spill["answer_completed"], spill["facts_spilled"]) == (1, True, 0)
    assert spill["calls"] == raw["calls"] + 1 and spill["cost_microusd"] < raw["cost_microusd"]


WORKING_SET_POLICIES = {
    "raw": {},
    "tool_result_head_tail": {},
    "observation_masking": {"n": 3},
    "seed_engine": {"context_token_limit": 16000, "keep_recent_tokens": 4000},
    "spill_large_results": {"threshold_tokens": 2000},
    # the policy library at settings that act within this 14-call, ~20k-token scenario
    "openhands_amortized_forgetting": {"max_size": 20},
    "openhands_llm_summarizing": {"max_size": 20},
    "anthropic_clear_tool_uses": {"trigger_tokens": 12000},
    "langchain_clear_tool_uses": {"trigger": 12000},
    "codex_auto_compact": {"context_window": 20000},
    "claude_code_auto_compact": {"context_window": 40000, "max_output_tokens": 4000, "buffer_tokens": 20000},
    "langchain_summarization": {"trigger": 12000, "keep": 6},
    "strands_sliding_window": {"window_size": 10, "per_turn": True},
    "strands_summarizing": {"context_window": 20000, "proactive_compression": {"compression_threshold": 0.7}},
    "autogen_token_limited": {"token_limit": 14000},
    "llm_summary": {"n": 4, "m": 3},
    "hybrid": {"n": 6, "m": 3, "mask_n": 3},
    # one task is one ADK invocation: its sliding window never fires mid-task, the token threshold does
    "adk_events_compaction": {
        "compaction_interval": None,
        "overlap_size": None,
        "token_threshold": 12000,
        "event_retention_size": 4,
    },
    "letta_partial_evict": {"context_window": 16000},
    "inspect_compaction_edit": {"threshold": 12000},
    "inspect_compaction_trim": {"threshold": 12000},
    "inspect_compaction_summary": {"threshold": 12000},
    "inspect_compaction_auto": {"threshold": 12000},
}


def working_set_ledger(name: str) -> dict:
    t = working_set_16k(0)
    r, m = metrics(t, make_policy(name, **WORKING_SET_POLICIES.get(name, {})))
    return {
        "policy": name,
        "params": WORKING_SET_POLICIES.get(name, {}),
        "calls": m["calls"],
        "finish_reason": r.finish_reason,
        "answer_completed": m["answer_completed"],
        "refetch_calls": m["refetch_calls"],
        "retrieve_calls": m["retrieve_calls"],
        "totals": {k: m[k] for k in m if k.startswith(("facts_", "tokens_")) and k != "tokens_reclaimed"},
        "final_states": r.item_state.tolist(),
        "operations": [
            {
                k: e[k]
                for k in (
                    "recorded_call",
                    "operation",
                    "item",
                    "tokens_before",
                    "tokens_after",
                    "facts",
                    "facts_outcome",
                )
            }
            for e in entries(t, r)
            if e["operation"] != "add"
        ],
    }


def _registered():
    from sim.policies.base import registered

    return sorted(registered())


@pytest.mark.parametrize("name", _registered())
def test_working_set_ledger_golden(name):
    got = working_set_ledger(name)
    path = GOLDEN / f"{name}.json"
    if os.environ.get("CTXSIM_UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(got, indent=1) + "\n")
    assert got == json.loads(path.read_text())


@dataclass(frozen=True)
class _SummarizeThenForget(Policy):
    """Summarizes the visible messages before call 3; before call 6, with ``forget``, replaces that
    summary by a text that holds nothing (LangChain's fallback)."""

    forget: bool = True
    name = "summarize_then_forget"
    acts_before_call = True

    def before_call(self, trace, state, view, call, status=None):
        if call == 3:
            covered = [i for i in range(1, view.n) if view.state[i] == ItemState.VERBATIM]
            changes = [Change(covered[0], ItemState.SUMMARIZED, 300, 1200, "summary")]
            changes += [Change(i, ItemState.SUMMARIZED, 0, 0, "summarized") for i in covered[1:]]
            return Decision(changes, SummaryCall(1000, 1200))  # room for a step (512-696 tokens)
        if call == 6:
            return Decision([], None, forgets_summary=self.forget)
        return ()


def test_a_summary_replaced_by_text_that_holds_nothing_forgets_its_facts():
    t = needle(0)
    kept = replay(t, _SummarizeThenForget(forget=False), ReplayModel(t, on_missing="degrade")).summary_kept
    assert kept  # the summary held facts
    assert replay(t, _SummarizeThenForget(), ReplayModel(t, on_missing="degrade")).summary_kept == ()
