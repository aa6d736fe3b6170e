"""The effect_agent conformance runner (``benchmarks/oracles/effect_agent/backend.py``) and the rules its
runs on the shared families fixed; no Node needed. The oracle's side of those runs is held by the goldens
of ``tests/seed_oracle.py``'s family corpora (``test_seed_engine_oracle.py``): among them the status line
of budgets ctxsim keeps off (``*__defaults``), runs of a conversation with and without the durable
compaction record (``*__no-persist``) and a grace turn on a later run's first call
(``*__grace-at-run-start``)."""

import dataclasses
import importlib.util
import json
from pathlib import Path

import pytest
import seed_oracle as so
from test_seed_engine import seed, six

from sim.engine.dispatch import replay
from sim.policies.seed_messages import stand_in
from sim.trace.io import redact

BACKEND = Path(__file__).resolve().parent.parent / "benchmarks" / "oracles" / "effect_agent" / "backend.py"


def backend():
    spec = importlib.util.spec_from_file_location("ctxsim_oracle_effect_agent_test", BACKEND)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(**kw) -> dict:
    base = {
        "estimates": [10, 20, 30],
        "requests": [100, 200, 300],
        "triggered": [1],
        "grace": None,
        "compactions": [{"at": 1, "before": 20, "prune": None, "summarize": None}],
        "status": None,
        "finish": "completed",
        "warnings": [[2, "tokens"]],
        "envelopes": [[3, 500, 300]],
    }
    return base | kw


def test_a_call_agrees_when_every_decision_the_goldens_hold_about_it_does():
    b = backend()
    calls = b.per_call(run(), [2, 4, 6])
    # the warning raised after turn 2 and the envelope of event 3 (admitted by call 1: views end 2, 4, 6)
    assert calls[1] == {
        "estimate": 20, "request": 200, "triggered": True, "grace": False,
        "compactions": [{"at": 1, "before": 20, "prune": None, "summarize": None}], "status": None,
        "warnings": ["tokens"], "envelopes": [[3, 500, 300]],
    }  # fmt: skip
    r = b.compare("t", run(), run(warnings=[[3, "tokens"]]), [2, 4, 6])
    assert (r.calls, r.same, r.tokens_ctxsim, r.tokens_real) == (3, 1, 600, 600)
    assert r.first_difference == "call 1: warnings ctxsim ['tokens'] real []"
    r = b.compare("t", run(), run(requests=[100, 200, 310]), [2, 4, 6])
    assert (r.same, r.tokens_ctxsim, r.tokens_real) == (2, 600, 610)
    assert r.first_difference == "call 2: request ctxsim 300 real 310"


def test_a_different_end_disagrees_at_the_last_compared_call():
    b = backend()
    r = b.compare("t", run(), run(finish="budget-exhausted:tokens"), [2, 4, 6])
    assert (r.calls, r.same) == (3, 2)
    assert r.first_difference == "ctxsim ends completed after 3 calls, real budget-exhausted:tokens after 3"
    # an overflow-ended call sends nothing: 0 tokens
    r = b.compare("t", run(requests=[100, 200, None]), run(requests=[100, 200, None]), [2, 4, 6])
    assert (r.same, r.tokens_ctxsim, r.first_difference) == (3, 300, None)


def test_config_is_seed_engines_parameters_and_refuses_a_cost_budget():
    b = backend()
    params = b.config("seed_engine", {"context_token_limit": 30000}, None)
    assert params["context_token_limit"] == 30000 and params["keep_recent_tokens"] == 20000
    assert params["persist_compaction"] is True  # every parameter, as the oracle reads them
    # framework_oracle.NotComparable (a ValueError): the oracle prices nothing
    with pytest.raises(ValueError, match="cost_budget_microusd has no counterpart"):
        b.config("seed_engine", {"cost_budget_microusd": 5}, None)


def test_decisions_of_a_run_whose_first_request_overflows():
    # six()'s first request is 150 tokens: over a window of 100 with no limit to retry under, nothing is sent
    d = so.decisions(six(), {"run_status": "off"}, 100)
    assert d["requests"] == [None] and d["finish"] == "context-overflow" and d["estimates"] is None


def test_the_summarizers_tokens_warning_stands_when_a_fail_stop_ends_its_turn():
    # six() summarizing (limit 700, keep 300): usage 157 + 267 + 377 = 801 over turns 1-3
    # (5 x 801 < 4 x 1200); turn 4's summarizer adds 235 + 20 = 1056 (5 x 1056 >= 4 x 1200): the engine
    # warns inside compactContext. Turn 4 is the last of max_turns=4 with on_exhaustion fail: the run
    # stops on the response, before the agent call's own checks, and the summarizer's warning still
    # stands (row 4: turn 4's request, after its summary row 3).
    knobs = dict(context_token_limit=700, keep_recent_tokens=300, mode="summarize", summary_min_tokens=20)
    r = replay(six(), seed(**knobs, max_turns=4, on_exhaustion="fail", token_budget=1200), window=None)
    assert r.calls["input_tokens"].tolist() == [150, 260, 370, 235, 409]
    assert r.finish_reason == "budget-exhausted:turns" and r.warnings == ((4, "tokens"),)
    # a budget the summarizer's usage does not bring to 80% (5 x 1056 < 4 x 1321): no warning
    r = replay(six(), seed(**knobs, max_turns=4, on_exhaustion="fail", token_budget=1321), window=None)
    assert r.finish_reason == "budget-exhausted:turns" and r.warnings == ()


def test_a_text_free_events_stand_in_has_its_recorded_counts():
    # the hand-made task (quotes, a newline, a tab, an escaped backslash) with multi-byte text, redacted:
    # the oracle renders a text of the same bytes, characters and JSON sizes (the input's, stringified
    # twice, too), and bounds results on seed_engine's own stand-in (the same JSON size)
    feed = backend().feed
    original = 'Fix "parse()":\n\tit fails on \\n and é漢😀 "quotes".'
    case = so._case("t", [["ok"]])
    e = dataclasses.replace(
        case.events[1], content=original, bytes=len(original.encode()), chars=len(original)
    )
    (e,) = redact(dataclasses.replace(case, events=(e,), calls=())).events
    text, bound = feed.text_free(e)
    assert (len(text.encode()), len(text)) == (len(original.encode()), len(original)) == (54, 48)
    assert len(json.dumps(text, ensure_ascii=False).encode()) == e.json_bytes == 63
    assert (
        len(json.dumps(json.dumps(text, ensure_ascii=False), ensure_ascii=False).encode())
        == e.json2_bytes
        == 79
    )
    assert (
        bound == stand_in(54, 7) and len(json.dumps(bound).encode()) == 63
    )  # 7 escapes: 4 quotes, \n, \t, \\
