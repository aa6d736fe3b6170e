"""Rules of ``letta_partial_evict`` found by the Letta conformance runs (``benchmarks/oracles/frameworks.py
letta --traces ...``) that the goldens' corpora do not hold.

Trace: ``swe_trace`` with a 500-token system prompt, the task (50), then assistant ``cmd k`` (10) and its
tool result (100) per turn; call k sees events [0, 2 + 2k), each answering 7 tokens. ctxsim's summarizer
instruction weighs 61 tokens.
"""

from builders import swe_trace

from sim.core.records import AGENT, SUMMARY
from sim.engine.dispatch import replay
from sim.policies.base import make_policy

INSTRUCTION = 61


def test_a_system_prompt_over_the_window_ends_the_run():
    # window 450: trigger int(0.9 x 450) = 405; call 0 sends 550 (+7) and the compaction before call 1
    # runs over [system, task, a0, r0]. The sliding window never gets system + the rest under 0.7 x 450
    # (it raises) and summarize_all covers task a0 r0 (160 -> 16); the system prompt alone (500) is still
    # at or above the window: Letta raises SystemPromptTokenExceededError and letta_agent_v3 stops. The
    # summary was paid for; call 1 is never sent.
    r = replay(
        swe_trace([("x", 100)] * 4, system=500),
        make_policy("letta_partial_evict", context_window=450, summary_min_tokens=10),
        window=None,
    )
    assert r.finish_reason == "context-overflow"
    assert r.calls["kind"].tolist() == [AGENT, SUMMARY]
    assert r.calls["input_tokens"].tolist() == [550, INSTRUCTION + 160]
    assert r.calls["output_tokens"].tolist() == [7, 16]


def test_a_system_prompt_under_the_window_goes_on():
    # window 560 (trigger 504): the same compaction leaves the system prompt (500) and the summary; the
    # request stays over the trigger, which Letta only logs: the run goes on
    r = replay(
        swe_trace([("x", 100)] * 4, system=500),
        make_policy("letta_partial_evict", context_window=560, summary_min_tokens=10),
        window=None,
    )
    assert r.finish_reason == "completed"
    assert r.calls["kind"].tolist()[:3] == [AGENT, SUMMARY, AGENT]
