"""Rules fixed against Inspect's installed code (inspect-ai 0.3.285) by the conformance runs of
``benchmarks/oracles/frameworks.py inspect --traces ...``. Trace: ``six()`` of test_policies_inspect
(system 100, task 50, then assistant ``cmd k`` 10 and its result 100; call k sees 150 + 110 k)."""

from test_policies_inspect import run

from sim.core.types import ItemState

V = ItemState.VERBATIM


def test_edit_keeping_more_uses_than_there_are_clears_nothing():
    # CompactionEdit clears only when len(tool uses) > keep_tool_uses. Call 3 (480 > 400) has 3 uses and
    # keeps 4: nothing to clear, the request stays over the threshold: "Compaction insufficient" there.
    # (ctxsim once sliced uses[:3 - 4], clearing all but the newest and carrying on.)
    r = run("inspect_compaction_edit", threshold=400, keep_tool_uses=4)
    assert r.finish_reason == "compaction-insufficient"
    assert r.calls["input_tokens"].tolist() == [150, 260, 370]
    assert r.item_state.tolist() == [V] * 8  # the events of the calls sent


def test_edit_excluded_tools_are_not_tool_uses():
    # exclude_tools: a name matches the calls of an assistant whose text starts with it (canonical events
    # name no tools; the oracle names those calls so). CompactionEdit leaves excluded uses out of the
    # count: at call 3 (480 > 450) the uses are r0 r1 (r2 is "cmd 2"'s), keep 1 clears r0 only: 390 (not
    # 300, as counting r2 would). Call 4 (500): r1 too: 410; call 5 (520): r3 too (r2, r4 stay): 430.
    r = run("inspect_compaction_edit", threshold=450, keep_tool_uses=1, exclude_tools=["cmd 2"])
    assert r.finish_reason == "completed"
    assert r.calls["input_tokens"].tolist() == [150, 260, 370, 390, 410, 430]
    M = ItemState.MASKED
    assert r.item_state.tolist() == [V, V, V, M, V, M, V, V, V, M, V, V]
