"""LangChain's policies against the rules of the installed library (langchain 1.5.2) that the oracle
runs found, and their knobs under the library's own argument names.

Trace ``six()``: 0 system (100 tokens), 1 task (50), then six turns of assistant ``cmd k`` (10 tokens)
+ tool result (100 tokens): assistants 2, 4, .. 12, results 3, 5, .. 13. Call k sees events [0, 2 + 2k):
raw input 150 + 110 k. Bytes per token 4.0: a new message of b bytes weighs ceil((b + 16) / 4).
"""

from __future__ import annotations

import dataclasses
import warnings

import framework_oracle as fo
import pytest
from builders import ev, swe_trace

from sim.core.records import SUMMARY
from sim.core.types import Call, ItemState, Trace
from sim.engine.dispatch import replay
from sim.policies.base import make_policy
from sim.util.errors import ConfigError
from sim.util.notices import KnobDeprecation

V, M = ItemState.VERBATIM, ItemState.MASKED
CLEAR = "langchain_clear_tool_uses"


def six(residuals=None) -> Trace:
    t = swe_trace([("x" * 384, 100)] * 6)
    if residuals is None:
        return t
    calls = tuple(
        dataclasses.replace(c, residual_tokens=r, input_tokens=c.input_tokens + r)
        for c, r in zip(t.calls, residuals, strict=True)
    )
    return dataclasses.replace(t, calls=calls)


def run(trace, **knobs):
    return replay(trace, make_policy(CLEAR, **knobs), window=None)


def col(r, c):
    return r.calls[c].tolist()


# ------------------------------------------------------------------ knob names are the library's
def test_clear_tool_uses_takes_the_library_names_and_defaults():
    p = make_policy(CLEAR)
    # ClearToolUsesEdit's fields and defaults, then ContextEditingMiddleware's token_count_method
    assert p.params() == {
        "trigger": 100000,
        "clear_at_least": 0,
        "keep": 3,
        "clear_tool_inputs": False,
        "exclude_tools": (),
        "placeholder": "[cleared]",
        "token_count_method": "approximate",
    }
    q = make_policy(
        CLEAR, trigger=8000, exclude_tools=["grep"], placeholder="[gone]", token_count_method="model"
    )
    assert (q.trigger, q.exclude_tools, q.placeholder, q.token_count_method) == (
        8000,
        ("grep",),
        "[gone]",
        "model",
    )
    with pytest.raises(ConfigError, match=r"token_count_method='provider' is not one of approximate, model"):
        make_policy(CLEAR, token_count_method="provider")
    with pytest.raises(ConfigError, match=r"placeholder=3 is not a string"):
        make_policy(CLEAR, placeholder=3)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ({"trigger_tokens": 8000}, {"trigger": 8000}),
        ({"token_count": "framework"}, {"token_count_method": "approximate"}),
        ({"token_count": "provider", "keep": 1}, {"token_count_method": "model", "keep": 1}),
    ],
)
def test_clear_tool_uses_old_names_warn_and_give_the_same_policy(old, new):
    with pytest.warns(KnobDeprecation, match=r"knob '(trigger_tokens|token_count)' is deprecated") as got:
        p = make_policy(CLEAR, **old)
    assert len(got) == len({k for k in old if k in ("trigger_tokens", "token_count")})
    with warnings.catch_warnings():
        warnings.simplefilter("error", KnobDeprecation)  # the new names never warn
        assert p == make_policy(CLEAR, **new)


def test_clear_tool_uses_refuses_both_names_at_once():
    with pytest.raises(ConfigError, match=r"knob 'trigger_tokens' is the old name of 'trigger'; give only"):
        make_policy(CLEAR, trigger_tokens=8000, trigger=9000)
    with pytest.raises(ConfigError, match=r"knob 'token_count' is the old name of 'token_count_method'"):
        make_policy(CLEAR, token_count="provider", token_count_method="model")


def test_framework_config_passes_every_knob_to_the_library():
    knobs = {"trigger_tokens": 800, "keep": 1, "clear_at_least": 50, "clear_tool_inputs": True,
             "exclude_tools": ["cmd 1"], "placeholder": "[gone]", "token_count": "provider"}  # fmt: skip
    with pytest.warns(KnobDeprecation):
        config = fo.framework_config("langchain", CLEAR, knobs)
    assert config == {
        "middleware": "ClearToolUses",
        "edit": {"trigger": 800, "clear_at_least": 50, "keep": 1, "clear_tool_inputs": True,
                 "exclude_tools": ["cmd 1"], "placeholder": "[gone]"},
        "token_count_method": "model",
    }  # fmt: skip


# ---------------------------------------------------------------------------------- the rules
def test_clear_tool_uses_restores_what_a_call_under_the_trigger_sends_whole():
    # The middleware edits a copy per call: a call whose count is not over the trigger sends every
    # result as it is. The model's count moves with the residual: trigger 600, keep 2; call 3 = 480 +
    # 200 = 680 -> clear 3 (saving 93: "[cleared]" weighs 7) -> 587; call 4 = 590 + 0: under, result 3
    # goes back whole -> 590; call 5 = 700: clear 3, 5, 7 -> 421.
    r = run(six([0, 0, 0, 200, 0, 0]), trigger=600, keep=2, token_count_method="model")
    assert col(r, "input_tokens") == [150, 260, 370, 587, 590, 421]
    assert col(r, "first_changed") == [-1, -1, -1, 3, 3, 3]
    assert [r.item_state[i] for i in (3, 5, 7, 9)] == [M, M, M, V]


def test_clear_tool_uses_placeholder_is_a_knob():
    # "[gone]" (6 bytes) weighs ceil(22 / 4) = 6: clearing result 3 at call 3 saves 94 (480 -> 386)
    r = run(six(), trigger=300, keep=2, placeholder="[gone]")
    assert col(r, "input_tokens")[3] == 386 and r.item_tokens[3] == 6


def test_clear_tool_uses_inputs_and_excluded_tools_as_ctxsim_reads_them():
    # Canonical events carry no tool names nor call arguments: a tool is excluded when its issuing turn's
    # text starts with the name ("cmd 1": result 5 stays), and a cleared input is the whole issuing turn
    # as "[tool input cleared]" (9 tokens: saves 1). The oracle maps both the same way. Default count:
    # the messages (the request - 100). Keep 1: call 3 clears 3 + 2 -> 480 - 94 = 386; call 4 also 7 + 6
    # -> 590 - 188 = 402; call 5 also 9 + 8 -> 700 - 282 = 418.
    r = run(six(), trigger=300, keep=1, clear_tool_inputs=True, exclude_tools=["cmd 1"])
    assert col(r, "input_tokens") == [150, 260, 370, 386, 402, 418]
    assert [r.item_state[i] for i in (2, 3, 4, 5, 6, 7)] == [M, M, V, V, M, M]


def test_clear_tool_uses_skips_a_result_its_nearest_assistant_did_not_issue():
    # ClearToolUsesEdit looks for a result's call only in the nearest assistant message before it.
    # Events: 2 issues c0, 3 user, 4 issues c1, 5 result of c0, 6 result of c1, 7 issues c2, 8 its
    # result, 9 the last answer: result 5 follows assistant 4, which did not issue c0: never cleared.
    events = (
        ev(0, "system", "sys", 100),
        ev(1, "user", "task", 50),
        ev(2, "assistant", "cmd 0", 10, tool_call_ids=("c0",)),
        ev(3, "user", "wait", 10),
        ev(4, "assistant", "cmd 1", 10, tool_call_ids=("c1",)),
        ev(5, "tool_result", "x" * 384, 100, tool_call_id="c0"),
        ev(6, "tool_result", "x" * 384, 100, tool_call_id="c1"),
        ev(7, "assistant", "cmd 2", 10, tool_call_ids=("c2",)),
        ev(8, "tool_result", "x" * 384, 100, tool_call_id="c2"),
        ev(9, "assistant", "done", 10),
    )
    ends = (2, 4, 7, 9)
    prefix = [sum(e.tokens for e in events[:n]) for n in ends]
    calls = tuple(
        Call(index=j, event_index=a, view_end=a, input_tokens=p, output_tokens=7)
        for j, (a, p) in enumerate(zip(ends, prefix, strict=True))
    )
    t = Trace(
        trace_id="hand", source_format="ctxsim-scenario", events=events, calls=calls, bytes_per_token=4.0
    )
    r = run(t, trigger=100, keep=0)
    # call 3 (view 9 = 490 tokens): results 5, 6, 8 are older than keep 0; 5 is skipped
    assert [r.item_state[i] for i in (5, 6, 8)] == [V, M, M]
    assert col(r, "input_tokens")[3] == 490 - 2 * 93


# --------------------------------------------------------------------- langchain_summarization
def test_summarization_trigger_takes_langchain_clauses():
    # The state's messages at call k: 1 + 2k of them, 50 + 110 k tokens (no system message). A clause
    # fires when all its thresholds are reached, a list when any item does (``_should_summarize``):
    # 7 messages alone at call 3; with 400 tokens too (AND) at call 4 (490); OR 1000 tokens at call 3.
    def first_summary(trigger):
        r = replay(six(), make_policy("langchain_summarization", trigger=trigger, keep=3), window=None)
        return col(r, "kind").index(SUMMARY)

    assert first_summary(["messages", 7]) == 3
    assert first_summary({"messages": 7}) == 3
    assert first_summary({"messages": 7, "tokens": 400}) == 4
    assert first_summary([["tokens", 1000], {"messages": 7}]) == 3
    assert first_summary([{"tokens": 1000, "messages": 1}, ["tokens", 400]]) == 4


@pytest.mark.parametrize(
    ("trigger", "problem"),
    [
        ({}, r"trigger=\{\}: a clause needs tokens, messages or fraction"),
        ({"messages": 1.5}, r"trigger=\['messages', 1.5\]: messages must be an integer > 0"),
        ([["tokens", 0]], r"trigger=\['tokens', 0\]: tokens must be an integer > 0"),
        ({"turns": 3}, r"trigger=\['turns', 3\] is not an integer or a pair"),
    ],
)
def test_summarization_trigger_refuses_what_langchain_refuses(trigger, problem):
    with pytest.raises(ConfigError, match=problem):
        make_policy("langchain_summarization", trigger=trigger)


def test_framework_config_passes_summarization_clauses_as_given():
    config = fo.framework_config(
        "langchain", "langchain_summarization", {"trigger": {"messages": 7}, "keep": 3}
    )
    assert config == {"middleware": "Summarization", "trigger": {"messages": 7}, "keep": ["messages", 3]}


def test_framework_config_refuses_a_fraction():
    # LangChain refuses a fraction without the model's profile; the oracle's model has none (the
    # exported trace carries no context window)
    for knobs in ({"trigger": ["fraction", 0.5]}, {"trigger": 8000, "keep": ["fraction", 0.2]}):
        with pytest.raises(fo.NotComparable, match=r"a fraction needs the model's max_input_tokens"):
            fo.framework_config("langchain", "langchain_summarization", knobs)
