"""AutoGen conformance cases the oracle runs over the shared families turned up (``frameworks.py autogen
--traces ...``), on hand-built traces whose arithmetic is written out; the goldens on those families
(``tests/golden/frameworks/autogen/*-ohv0.json``, ``*-claude.json``) hold the rest.

Trace ``swe_trace``: events 0 system (100 tokens), 1 task (50), then per turn an assistant call (10) and
its tool result (100); call k sees events [0, 2 + 2k).
"""

from builders import swe_trace

from sim.engine.dispatch import replay
from sim.policies.base import make_policy


def inputs(r):
    return r.calls["input_tokens"].tolist()


def test_token_limited_without_a_limit_pops_against_the_models_window():
    # token_limit null: AutoGen asks the client's remaining_tokens (the model's window minus the count)
    # and pops while it is negative, i.e. while the count exceeds the window: the pops of token_limit =
    # the window. Window 400 (the context's messages, no system message): call 4 (490 of messages) pops
    # r1 -> 390, sent with the system message: 490; call 5 (600) pops a2, r2, r1 -> 390: 490.
    t = swe_trace([("x" * 384, 100)] * 6, context_window=400)
    unlimited = replay(t, make_policy("autogen_token_limited"), window=None)
    limited = replay(t, make_policy("autogen_token_limited", token_limit=400), window=None)
    assert inputs(unlimited) == inputs(limited)
    assert inputs(unlimited) == [150, 260, 370, 480, 490, 490]
    # no recorded window (every shared family but OpenHands SDK): nothing is popped
    bare = replay(swe_trace([("x" * 384, 100)] * 6), make_policy("autogen_token_limited"), window=None)
    assert inputs(bare) == [150, 260, 370, 480, 590, 700]
