"""The framework policies held, call by call, to the real libraries.

The goldens in tests/golden/frameworks/<framework>/ are the real code's side: ``make oracle-adk``,
``oracle-letta``, ``oracle-inspect``, ``oracle-autogen``, ``oracle-langchain``, ``oracle-strands``
replayed each corpus at each setting through google-adk 2.13.0, letta 0.16.8, inspect-ai 0.3.285,
autogen-core 0.7.5, langchain 1.5.2 and strands-agents 1.62.0 (``benchmarks/oracles/``,
``tests/framework_oracle.py`` for the alignment). Here each policy replays the same traces and must
give, at every call, the same state of every event, the same summaries in the request and the same
request tokens, and must end where the framework did (Strands' ``compaction-loop``, Inspect's
"Compaction insufficient"). No framework needed.
"""

from __future__ import annotations

import re
from functools import cache

import framework_oracle as fo
import pytest

from sim.engine.dispatch import replay
from sim.engine.model import ReplayModel
from sim.information.state import issuer_of
from sim.policies.base import make_policy, registered

FRAMEWORK_POLICIES = {
    "adk": {"adk_events_compaction"},
    "letta": {"letta_partial_evict"},
    "autogen": {"autogen_buffered", "autogen_head_and_tail", "autogen_token_limited"},
    "langchain": {"langchain_clear_tool_uses", "langchain_summarization"},
    "strands": {"strands_sliding_window", "strands_summarizing"},
    "inspect": {
        "inspect_compaction_edit",
        "inspect_compaction_trim",
        "inspect_compaction_summary",
        "inspect_compaction_auto",
        "anthropic_clear_tool_uses",
    },
}
# OpenHands goldens have their own layout and test (tests/test_openhands_oracle.py).
FILES = sorted(p for f in FRAMEWORK_POLICIES for p in (fo.GOLDEN / f).glob("*.json"))


@cache
def corpus(name: str) -> dict:
    return {t.trace_id: t for t in fo.corpus(name)}


def first_difference(got: dict, want: dict) -> str:
    if got["finish"] != want["finish"] or len(got["calls"]) != len(want["calls"]):
        ours, theirs = (got["finish"], len(got["calls"])), (want["finish"], len(want["calls"]))
        return f"ctxsim ends {ours[0]} after {ours[1]} calls, the framework {theirs[0]} after {theirs[1]}"
    k = next(k for k, (a, b) in enumerate(zip(got["calls"], want["calls"], strict=True)) if a != b)
    return f"call {k}: ctxsim {got['calls'][k]}, the framework {want['calls'][k]}"


def test_goldens_cover_every_setting_and_policy():
    names = {(p.parent.name, p.stem) for p in FILES}
    for framework, settings in fo.SETTINGS.items():
        assert {(framework, s) for s in settings} <= names, "run make oracle-" + framework
        held = {policy for _, policy, _, _ in settings.values()}
        held |= {p for (f, _), (p, _) in fo.ALSO.items() if f == framework}
        assert held == FRAMEWORK_POLICIES[framework]
        for policy in held:  # at least two settings each, on at least 6 mini-swe-agent runs
            mini = [s for s, (c, p, _, _) in settings.items() if p == policy and c == "mini"]
            also = [s for (f, s), (p, _) in fo.ALSO.items() if f == framework and p == policy]
            assert len(mini) + len(also) >= 2, policy
    assert len(fo.MINI_IDS) >= 6 and len(fo.TAU10_IDS) >= 8
    assert all(p in registered() for ps in FRAMEWORK_POLICIES.values() for p in ps)


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}-{p.stem}")
def test_policy_decides_as_the_framework(path, request):
    request.getfixturevalue("mini_dir")  # skips without the shared traces
    g = fo.load(path)
    framework, setting = path.parent.name, path.stem
    corpus_name, policy, knobs, config = fo.SETTINGS[framework][setting]
    assert (g["corpus"], g["policy"], g["knobs"], g["config"], g["summary"]) == (
        corpus_name, policy, knobs, config, fo.summary_rule(policy, knobs),
    ), "goldens are stale: run make oracle-" + framework  # fmt: skip
    traces = corpus(corpus_name)
    assert sorted(traces) == sorted(g["runs"])
    for tid, want in g["runs"].items():
        got = fo.vectors(traces[tid], policy, knobs, window=config.get("window"))
        assert got == want, f"{policy} on {tid} at {setting}: {first_difference(got, want)}"
    if (also := fo.ALSO.get((framework, setting))) is not None:
        other, other_knobs = also
        for tid, want in g["runs"].items():  # compared on the calls the framework made
            got = fo.vectors(traces[tid], other, other_knobs)
            n = len(want["calls"])
            assert got["calls"][:n] == want["calls"], f"{other} on {tid} at {setting}"


IDLE = {("adk", "window-3-1-mini"), ("langchain", "clear-default"), ("strands", "window-defaults")}


def test_goldens_exercise_what_they_hold():
    """Each golden setting transforms something, except ADK's sliding window on single-task runs (one
    invocation: ADK never compacts mid-task), Strands' default sliding window on them (applied after an
    invocation only) and LangChain's default trigger (100,000 tokens of messages, never reached here),
    which they pin; Inspect's edit and trim end runs."""
    for path in FILES:
        g = fo.load(path)
        changed = sum(1 for r in g["runs"].values() for c in r["calls"] if any(x in c[0] for x in "MSD"))
        if (path.parent.name, path.stem) in IDLE:
            assert changed == 0
        else:
            assert changed > 0, path.stem
    ends = [r["finish"] for p in FILES if p.parent.name == "inspect" for r in fo.load(p)["runs"].values()]
    assert ends.count("compaction-insufficient") >= 10


def _unrle(s: str) -> str:
    return "".join(c * int(n) for n, c in re.findall(r"(\d+)(\D)", s))


@pytest.mark.parametrize("setting", ["token-8000", "token-4000-provider-tau"])
def test_unpaired_tool_messages_counts_the_framework_requests_that_split_a_pair(setting, request):
    """AutoGen pops single messages: the metric counts the golden requests holding a call without its
    result or the reverse."""
    request.getfixturevalue("mini_dir")
    g = fo.load(fo.golden_path("autogen", setting))
    corpus_name, policy, knobs, _ = fo.SETTINGS["autogen"][setting]
    total = 0
    for tid, t in corpus(corpus_name).items():
        issuer = issuer_of(t)
        want = 0
        for c in g["runs"][tid]["calls"]:
            st = _unrle(c[0])
            want += any(r < len(st) and (st[r] == "V") != (st[a] == "V") for r, a in issuer.items())
        record = replay(t, make_policy(policy, **knobs), ReplayModel(t, on_missing="degrade"), window=None)
        assert record.unpaired_tool_messages == want, tid
        total += want
    assert total > 0


def test_golden_runs_issue_one_tool_call_per_turn(request):
    """AutoGen, LangChain and Strands put one turn's tool results in one message, ctxsim counts one
    message per event: the same only where a turn issues one call, as in every run these goldens hold
    (a run with parallel calls would need the grouping modelled)."""
    request.getfixturevalue("mini_dir")
    for name in ("mini", "tau10"):
        for t in corpus(name).values():
            assert all(len(e.tool_call_ids) <= 1 for e in t.events), t.trace_id
