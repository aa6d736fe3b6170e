"""Strands conformance cases the oracle runs over the shared families turned up (``frameworks.py strands
--traces ...``), on hand-built traces whose arithmetic is written out; the goldens on those families
(``tests/golden/frameworks/strands/*-ohv0.json``, ``*-claude.json``) hold the rest.

Trace ``swe_trace``: events 0 system (100 tokens), 1 task (50), then per turn an assistant call (10) and
its tool result; call k sees events [0, 2 + 2k). 4 bytes per token.
"""

from builders import swe_trace

from sim.core.types import ItemState
from sim.cost.tokens import scale_tokens
from sim.engine.dispatch import replay
from sim.policies.base import make_policy
from sim.policies.strands_sliding_window import truncated_text

V, D = ItemState.VERBATIM, ItemState.DROPPED


def test_a_truncation_that_keeps_the_size_is_no_loop():
    # A 448-character result cut by should_truncate_results comes back 447 characters long (200 + 200
    # around the notice for 48 removed): round(100 x 463 / 464) = 100 tokens, the request as large as
    # before. Strands' state still changed (the notice is in), so the next overflow trims instead of
    # cutting again: no endless loop (the oracle once took the equal size for the same state).
    text = truncated_text("x" * 448)
    assert len(text) == 447 and scale_tokens(100, 448, 447) == 100
    t = swe_trace([("x" * 448, 100)] * 6)
    r = replay(t, make_policy("strands_sliding_window"), window=600)
    # call 5: 700 > 600 refused; r0 cut (still 700) refused again; r0 is cut already, so the window is
    # trimmed from index 2 to the tool pair a1: task, a0, r0 deleted -> 540
    assert r.calls["input_tokens"].tolist() == [150, 260, 370, 480, 590, 540]
    assert r.rejections == 2 and r.finish_reason == "completed"
    assert [ItemState(s) for s in r.item_state.tolist()[:5]] == [V, D, D, D, V]
