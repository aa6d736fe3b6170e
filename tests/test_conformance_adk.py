"""Rules of ``adk_events_compaction`` found by the ADK conformance runs (``benchmarks/oracles/frameworks.py
adk --traces ...``) that the goldens' corpora do not hold.

Trace ``with_empty()``: system (100), then per user-initiated invocation j: user q_j (20), an empty user
message (no text, 0 tokens, as OpenHands V0 records one) in invocation 0 only, assistant with a call
(10), its result (100), a final answer (10); a call on each assistant event, each answering 7 tokens.
"""

from builders import calls_trace, ev

from sim.core.types import ItemState, Trace
from sim.engine.dispatch import replay
from sim.policies.adk_events_compaction import is_empty
from sim.policies.base import make_policy

V, S, D = ItemState.VERBATIM, ItemState.SUMMARIZED, ItemState.DROPPED


def with_empty(n: int) -> Trace:
    events, calls = [ev(0, "system", "sys", 100)], []
    for j in range(n):
        b = len(events)
        events.append(ev(b, "user", f"q{j}", 20))
        if j == 0:
            events.append(ev(b + 1, "user", "", 0))  # a new user event: invocation 1 starts here
            b += 1
        events += [
            ev(b + 1, "assistant", f"call {j}", 10, tool_call_ids=(f"c{j}",)),
            ev(b + 2, "tool_result", "out", 100, tool_call_id=f"c{j}"),
            ev(b + 3, "assistant", f"answer {j}", 10),
        ]
        calls += [b + 1, b + 3]
    return calls_trace("empty", events, calls)


def test_an_empty_event_is_never_sent():
    # ADK's _contains_empty_content: a content with no visible part is left out of the request. At the
    # defaults (interval 3) nothing is compacted: event 2 is DROPPED, every other event in view sent.
    r = replay(with_empty(2), make_policy("adk_events_compaction"), window=None)
    assert r.item_state.tolist() == [V, V, D] + [V] * 6
    assert r.calls["input_tokens"].tolist() == [120, 230, 260, 370]


def test_an_empty_event_inside_a_summary_is_summarized():
    # interval 1, overlap 0: when the empty user event arrives, invocation 0 (q0, 20 tokens) is compacted
    # (summary 10 at event 1; the summarizer reads 169 + 20): call 0 sends 100 + 10. When q1 arrives,
    # invocation 1 (events 2..5: 0 + 10 + 100 + 10 = 120 > the last summary's 10) is new: a second summary
    # (12, from 169 + 120) covers the empty event too; call 2 sends 100 + 10 + 12 + 20.
    r = replay(
        with_empty(2),
        make_policy("adk_events_compaction", compaction_interval=1, overlap_size=0, summary_min_tokens=10),
        window=None,
    )
    assert r.item_state.tolist() == [V] + [S] * 5 + [V] * 3
    assert r.item_tokens.tolist() == [100, 10, 0, 0, 0, 12, 20, 10, 100]
    assert r.calls["input_tokens"].tolist() == [189, 110, 220, 289, 142, 252]


def test_what_counts_as_empty():
    # a text-free trace's sized event stands for text; a call or a tool result is never empty
    assert is_empty(ev(0, "user", "", 0))
    assert is_empty(ev(0, "assistant", "", 0))
    assert not is_empty(ev(0, "user", "", 5))
    assert not is_empty(ev(0, "user", " ", 0))
    assert not is_empty(ev(0, "assistant", "", 0, tool_call_ids=("c",)))
    assert not is_empty(ev(0, "tool_result", "", 0, tool_call_id="c"))
    assert not is_empty(ev(0, "system", "", 0))
