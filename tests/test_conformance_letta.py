"""Rules of ``letta_partial_evict`` found by the Letta conformance runs (``benchmarks/oracles/frameworks.py
letta --traces ...``) that the goldens' corpora do not hold.

The system-prompt tests: ``swe_trace`` with a 500-token system prompt, the task (50), then assistant
``cmd k`` (10) and its tool result (100) per turn; call k sees events [0, 2 + 2k), each answering 7
tokens. The tool-schema tests: ``with_tools``. ctxsim's summarizer instruction weighs 61 tokens.
"""

from builders import ev, invocations, swe_trace

from sim.core.records import AGENT, SUMMARY
from sim.core.types import Call, ItemState, Trace
from sim.engine.dispatch import replay
from sim.policies.base import make_policy

INSTRUCTION = 61
V, S = ItemState.VERBATIM, ItemState.SUMMARIZED


def with_tools(turns: int) -> Trace:
    """system (100), tool schemas (a ``tools`` event, 300), the task (50), then assistant ``cmd k`` (10)
    and its result (100) per turn; call k sees events [0, 3 + 2k), each answering 7 tokens."""
    events = [ev(0, "system", "sys", 100), ev(1, "tools", "[schemas]", 300), ev(2, "user", "task", 50)]
    calls = []
    for k in range(turns):
        a = len(events)
        events += [
            ev(a, "assistant", f"cmd {k}", 10, tool_call_ids=(f"c{k}",)),
            ev(a + 1, "tool_result", "out", 100, tool_call_id=f"c{k}"),
        ]
        calls.append(a)
    prefix = [0]
    for e in events:
        prefix.append(prefix[-1] + e.tokens)
    return Trace(
        "tools", "ctxsim-scenario", tuple(events),
        tuple(Call(index=j, event_index=a, view_end=a, input_tokens=prefix[a], output_tokens=7)
              for j, a in enumerate(calls)),
        bytes_per_token=4.0,
    )  # fmt: skip


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


def test_tool_schemas_are_sent_but_not_counted_by_the_sliding_window():
    # window 1000: trigger 900, goal 0.7 x 1000 = 700. Call 5 sends 1000 (+7): compaction before call 6
    # over [system, task, a0 r0 .. a5 r5] (14 messages). Letta's cut counts the system message and the
    # messages from the cut, not the tools: round(0.4 x 14) = 6 -> a2, 100 + 4 x 110 = 540 < 700. task a0
    # r0 a1 r1 (270) -> summary 27. The post-compaction count has the tools: 100 + 300 + 440 = 840 < 900,
    # no fallback. Call 6 sends system, tools, the summary and a2 .. r5: 867. (With the tools counted as
    # the system prompt the cut would have gone on to a4: 100 + 300 + 220 = 620.)
    r = replay(
        with_tools(8),
        make_policy("letta_partial_evict", context_window=1000, summary_min_tokens=10),
        window=None,
    )
    assert r.calls["kind"].tolist() == [AGENT] * 6 + [SUMMARY, AGENT, AGENT]
    assert r.calls["input_tokens"].tolist() == [450, 560, 670, 780, 890, 1000, INSTRUCTION + 270, 867, 977]
    assert r.item_state.tolist() == [V, V] + [S] * 5 + [V] * 10
    assert r.item_tokens.tolist()[:8] == [100, 300, 27, 0, 0, 0, 0, 10]


def test_tool_schemas_are_not_the_system_prompt():
    # window 350: the system message (100) is under it, system + tools (400) is not. Call 0 sends 450:
    # the compaction before call 1 summarizes everything (the sliding window cannot reach 0.7 x 350), the
    # request stays over the trigger (315) and Letta only logs it: the run goes on.
    r = replay(
        with_tools(3),
        make_policy("letta_partial_evict", context_window=350, summary_min_tokens=10),
        window=None,
    )
    assert r.finish_reason == "completed"


def test_the_next_turns_user_message_comes_after_the_post_step_compaction():
    # window 300: trigger 270. Call 3 (turn 1's answer) sends 370 (+7): letta_agent_v3 compacts at the end
    # of that step, over [system, q0 a0 r0 ans0 q1 a1 r1 ans1] (9); q2 is the next step()'s input. The
    # cut (goal 210) reaches ans1 at 0.9 (100 + 10), the last message: Letta raises and summarizes all
    # (280 -> 28). q2 comes after: call 4 sends 100 + 28 + 20 = 148. (With q2 in the compaction the cut
    # would stop at ans1 with 10 messages, keeping ans1 and q2: 157.)
    r = replay(
        invocations(3),
        make_policy("letta_partial_evict", context_window=300, summary_min_tokens=10),
        window=None,
    )
    assert r.calls["kind"].tolist() == [AGENT] * 4 + [SUMMARY, AGENT, AGENT]
    assert r.calls["input_tokens"].tolist() == [120, 230, 260, 370, INSTRUCTION + 280, 148, 258]
    assert r.item_state.tolist() == [V] + [S] * 8 + [V] * 3


def test_a_rejected_request_is_compacted_up_to_three_times():
    # letta_agent_v3 compacts and retries while the attempt is below max_summarizer_retries (3). Provider
    # window 300, context_window 400 (goal 280), summaries at least 100 tokens: call 2 (370) is rejected;
    # the cut at a1 (100 + 110 < 280) summarizes task a0 r0 (61 + 160 read, 100 written): 310, rejected;
    # twice more the cut keeps a1 r1 and summarizes the summary alone (61 + 100): still 310; the fourth
    # rejection ends the run.
    r = replay(
        swe_trace([("x" * 384, 100)] * 6),
        make_policy("letta_partial_evict", context_window=400, summary_min_tokens=100),
        window=300,
    )
    assert r.finish_reason == "context-overflow" and r.rejections == 4
    assert r.calls["kind"].tolist() == [AGENT, AGENT, SUMMARY, SUMMARY, SUMMARY]
    assert r.calls["input_tokens"].tolist() == [
        150,
        260,
        INSTRUCTION + 160,
        INSTRUCTION + 100,
        INSTRUCTION + 100,
    ]
