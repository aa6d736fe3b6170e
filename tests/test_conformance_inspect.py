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
