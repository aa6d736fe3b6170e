"""Facts, the mock model's reaction to missing facts, and the information-loss ledger."""

import dataclasses
import json
from pathlib import Path

import pytest
from builders import swe_trace

from sim.engine import replay
from sim.facts import classify, is_error, swe_fact_table, swe_facts
from sim.ledger import entries
from sim.metrics import compute_metrics
from sim.model import ReplayModel
from sim.policies.base import make_policy
from sim.records import AGENT, REFETCH, RETRIEVE, SUMMARY

GOLDEN = Path(__file__).parent / "golden" / "facts"


def with_facts(t, provides: dict[int, tuple[str, ...]], needs: dict[int, tuple[str, ...]]):
    ev = tuple(
        dataclasses.replace(e, provides=provides.get(e.index, ()), needs=needs.get(e.index, ()))
        for e in t.events
    )
    return dataclasses.replace(t, events=ev)


def inputs(r):
    return r.calls["input_tokens"].tolist()


# -------------------------------------------------------------------------------------------- extractor
def test_classify_reads_and_edits():
    assert classify("nl -ba a/b.py | sed -n '1,5p'") == (["a/b.py"], [])
    assert classify("sed -i 's/x/y/' a/b.py && cat a/b.py") == (["a/b.py"], ["a/b.py"])
    assert classify("cat <<'EOF' > t.py\nprint(1)\nEOF\npython t.py") == ([], ["t.py"])
    assert classify("grep -rn foo src | head") == ([], [])
    assert classify("grep -n foo src/x.py") == (["src/x.py"], [])
    assert classify("echo hi >> notes.txt") == ([], ["notes.txt"])
    assert is_error("<returncode>1</returncode>") and is_error("Caught ValueError: bad")
    assert not is_error("<returncode>0</returncode>\n<output>\nOK\n</output>")


def test_swe_facts_rules():
    events = [
        ("system", "s"),
        ("user", "task"),
        ("assistant", "```bash\ncat a.py\n```"),
        ("tool_result", "<returncode>0</returncode>"),  # 3: read a.py
        ("assistant", "```bash\npython t.py\n```"),
        ("tool_result", "<returncode>1</returncode>"),  # 5: error
        ("assistant", "```bash\ncat a.py\n```"),
        ("tool_result", "<returncode>0</returncode>"),  # 7: re-read supersedes 3
        ("assistant", "```bash\nsed -i 's/a/b/' a.py\n```"),  # 8: edit needs the read at 7
        ("tool_result", "<returncode>0</returncode>"),
        ("assistant", "```bash\ngit diff\n```"),  # 10: the final answer
        ("tool_result", "diff --git a/a.py b/a.py\n"),
    ]
    provides, needs = swe_facts(events)
    assert provides[3] == ["read:a.py@3"] and provides[5] == ["error@5"] and provides[7] == ["read:a.py@7"]
    assert provides[0] == ["constraint@0"] and provides[1] == ["goal@1"]
    assert needs[8] == ["read:a.py@7"]
    # the edit made the read stale, so the answer needs the failure that motivated the change, and as
    # every final answer the rules and the task
    assert needs[10] == ["error@5", "constraint@0", "goal@1"]
    t = swe_fact_table(events)
    assert t.supersedes[7] == ["read:a.py@3"] and t.supersedes[9] == ["read:a.py@7"]  # re-read, edit
    assert [t.kinds[i] for i in (0, 1, 3, 5)] == [["constraint"], ["goal"], ["path"], ["error"]]
    # a read is its whole result (None); an error its line: `<returncode>1</returncode>` is bytes 0-26
    assert t.spans[3] == [None] and t.spans[5] == [(0, 26)]


def test_a_command_run_again_resolves_its_error():
    events = [
        ("assistant", "```bash\npython repro.py\n```"),
        ("tool_result", "Traceback (most recent call last):\n  x\nValueError: bad input"),
        ("assistant", "```bash\npython repro.py\n```"),
        ("tool_result", "<returncode>0</returncode>"),
    ]
    t = swe_fact_table(events)
    # the error's line is the exception line (the last line the pattern matches): bytes 39-60
    assert t.provides[1] == ["error@1"] and t.spans[1] == [(39, 60)]
    assert t.supersedes[3] == ["error@1"]


def test_golden_hand_labelled_run(mini_traces):
    gold = json.loads((GOLDEN / "django__django-16255.json").read_text())
    (t,) = [t for t in mini_traces if t.trace_id == gold["trace_id"]]
    assert {str(e.index): list(e.provides) for e in t.events if e.provides} == gold["provides"]
    assert {str(e.index): list(e.needs) for e in t.events if e.needs} == gold["needs"]
    assert {str(e.index): list(e.fact_kinds) for e in t.events if e.fact_kinds} == gold["kinds"]
    got_spans = {str(e.index): [list(s) for s in e.fact_spans if s] for e in t.events}
    assert {k: v for k, v in got_spans.items() if v} == gold["spans"]
    assert {str(e.index): list(e.supersedes) for e in t.events if e.supersedes} == gold["supersedes"]


def test_facts_found_on_the_shared_runs(mini_traces):
    facts = sum(len(e.provides) for t in mini_traces for e in t.events)
    deps = sum(len(e.needs) for t in mini_traces for e in t.events)
    # 637 reads and errors, and each run's task and rules (2 x 40), which every final answer needs
    assert (facts, deps) == (717, 245)
    assert sum(1 for t in mini_traces if t.events[t.calls[-1].event_index].needs) == 40


# ---------------------------------------------------------------------------------- missing information
def four_turns():
    # r0 (event 3) provides f0; the last action a3 (event 8, the final answer) needs it
    return with_facts(swe_trace([("x" * 384, 100)] * 4), {3: ("f0",)}, {8: ("f0",)})


def test_refetch_reissues_the_call_and_the_result_stays():
    # masking n=1: r0 masked before call 2 (370 - 85), r1 before call 3 (480 - 170 = 310). Call 3 needs
    # f0: one refetch call on that view (310 in, a0's 7 out), then a0 + r0 (110) join the conversation.
    t = four_turns()
    r = replay(t, make_policy("observation_masking", n=1))
    assert r.calls["kind"].tolist() == [AGENT, AGENT, AGENT, REFETCH, AGENT]
    assert inputs(r) == [150, 260, 285, 310, 420]
    m = compute_metrics(r)
    assert (m["refetch_calls"], m["answer_completed"], m["answer_fact_recall"]) == (1, True, 1.0)
    assert (m["facts_seen"], m["facts_verbatim"], m["facts_lost"]) == (1, 1, 0)
    # tokens over the 8 admitted items (480): r0, r1 -> 15-token placeholders
    assert (m["tokens_seen"], m["tokens_verbatim"], m["tokens_derived"], m["tokens_lost"]) == (
        480,
        280,
        30,
        170,
    )


def test_fail_and_degrade():
    t = four_turns()
    policy = make_policy("observation_masking", n=1)
    r = replay(t, policy, ReplayModel(t, on_missing="fail"))
    assert inputs(r) == [150, 260, 285] and r.finish_reason == "missing-information"
    m = compute_metrics(r)
    assert (m["answer_completed"], m["answer_fact_recall"], m["facts_lost"]) == (False, 0.0, 1)
    r = replay(t, policy, ReplayModel(t, on_missing="degrade"))
    assert inputs(r) == [150, 260, 285, 310] and r.finish_reason == "completed" and r.degraded
    assert compute_metrics(r)["answer_completed"] is False


def test_summary_keeps_what_its_rule_ranks_first():
    # seed engine, summarize mode (the arithmetic of tests/test_seed_engine.py): the summary at call 3
    # covers a0 + r0, the one at call 4 covers a1 + r1 and the first summary. f0 (r0) is needed by the
    # final answer, f1 (r1) by nothing later; neither was acted on before. Summaries of 20 tokens.
    t = with_facts(swe_trace([("x" * 384, 100)] * 6), {3: ("f0",), 5: ("f1",)}, {12: ("f0",)})
    p = make_policy(
        "seed_engine",
        context_token_limit=700,
        keep_recent_tokens=300,
        mode="summarize",
        summary_min_tokens=20,
        run_status="off",
    )

    def run(**model):
        r = replay(t, p, ReplayModel(t, **model), window=None)
        m = compute_metrics(r)
        return r, (m["facts_seen"], m["facts_derived"], m["facts_lost"], m["refetch_calls"])

    # at 10 tokens a fact: room for 2, both kept by either summarizer
    r, got = run(summary_fact_tokens=10)
    assert r.calls["kind"].tolist() == [AGENT] * 3 + [SUMMARY, AGENT] * 3
    assert r.summaries == ((3, ("f0",)), (4, ("f0", "f1")), (5, ("f0", "f1"))) and got == (2, 2, 0, 0)
    # at 20 a fact: room for 1. Extractive, knowing only the past, keeps the newest (f1): the answer's
    # f0 is refetched. The oracle keeps f0, which a later action needs: no refetch.
    r, got = run(summary_fact_tokens=20)
    assert r.summaries == ((3, ("f0",)), (4, ("f1",)), (5, ("f1",))) and got == (2, 1, 0, 1)
    r, got = run(summary_fact_tokens=20, summarizer="oracle")
    assert r.summaries == ((3, ("f0",)), (4, ("f0",)), (5, ("f0",))) and got == (2, 1, 1, 0)
    assert r.summarizer == "oracle"
    # with 40 tokens a fact the 20-token summary keeps nothing: the answer's fact must be refetched
    _, got = run(summary_fact_tokens=40)
    assert got[3] == 1


def test_spill_and_retrieve():
    # r0: 1,584 characters, 400 tokens, over the threshold of 150: spilled behind a 40-character preview
    # (round(400 x 56 / 1600) = 14 tokens) and a 71-byte handle (ceil(87 / 4) = 22): 36 tokens in view.
    t = with_facts(swe_trace([("y" * 1584, 400), ("z", 5), ("w", 5)]), {3: ("f0",)}, {6: ("f0",)})
    p = make_policy("spill_large_results", threshold_tokens=150, preview_chars=40)
    r = replay(t, p)
    assert r.calls["kind"].tolist() == [AGENT, AGENT, RETRIEVE, AGENT]
    assert inputs(r) == [150, 150 + 10 + 36, 196 + 15, 211 + 410]
    m = compute_metrics(r)
    assert (m["retrieve_calls"], m["facts_verbatim"], m["tokens_spilled"], m["answer_completed"]) == (
        1,
        1,
        364,
        True,
    )
    ops = [(e["operation"], e["item"]) for e in entries(t, r) if e["operation"] != "add"]
    assert ops == [("spill", 3), ("retrieve", 3)]


def test_a_cut_loses_a_fact_without_a_span():
    # a fact with no recorded span is its whole event: a head/tail cut does not show it whole
    t = with_facts(swe_trace([("é" * 600 + "x" * 400, 1000), ("ok", 5)]), {3: ("f0",)}, {4: ("f0",)})
    r = replay(t, make_policy("tool_result_head_tail", max_chars=100, head_chars=10, tail_chars=5))
    m = compute_metrics(r)
    # 1000 -> 59 tokens (tests/test_policies.py): derived 59, lost 941; the agent re-runs the call (one
    # refetch on the 150 + 10 + 59 = 219-token view), and the result re-read stays: f0 ends verbatim
    assert r.calls["kind"].tolist() == [AGENT, REFETCH, AGENT] and inputs(r) == [150, 219, 1229]
    assert (m["facts_derived"], m["tokens_derived"], m["tokens_lost"], m["refetch_calls"]) == (0, 59, 941, 1)


# ------------------------------------------------------------------------------------ on the shared runs
POLICIES = [
    ("raw", {}),
    ("tool_result_head_tail", {}),
    ("observation_masking", {"n": 1}),
    ("observation_masking", {"n": 10}),
    ("seed_engine", {"context_token_limit": 16000, "keep_recent_tokens": 4000}),
    ("spill_large_results", {"threshold_tokens": 2000}),
]


FACT_STATES = ("verbatim", "derived", "spilled", "paginated", "not_retrieved", "stale", "lost")
TOKEN_STATES = ("verbatim", "derived", "spilled", "paginated", "lost")


def reconciles(m) -> bool:
    from sim.types import FACT_KINDS

    return (
        sum(m[f"facts_{s}"] for s in FACT_STATES) == m["facts_seen"]
        and sum(m[f"tokens_{s}"] for s in TOKEN_STATES) == m["tokens_seen"]
        and min(m[f"facts_{s}"] for s in FACT_STATES) >= 0
        and sum(m[f"facts_seen_{k}"] for k in FACT_KINDS) <= m["facts_seen"]
        and sum(m[f"facts_lost_{k}"] for k in FACT_KINDS) <= m["facts_lost"]
    )


@pytest.mark.parametrize("name,params", POLICIES)
def test_ledger_reconciles_on_every_run(mini_traces, name, params):
    for t in mini_traces:
        assert reconciles(compute_metrics(replay(t, make_policy(name, **params))))


def test_masking_n1_loses_more_than_n1000(mini_traces):
    def total(n, mode):
        ms = [
            compute_metrics(replay(t, make_policy("observation_masking", n=n), ReplayModel(t, mode)))
            for t in mini_traces
        ]
        return (
            sum(m["facts_lost"] + m["refetch_calls"] for m in ms),
            sum(m["answer_completed"] for m in ms),
            sum(m["refetch_calls"] for m in ms),
        )

    lost1, done1, refetch1 = total(1, "refetch")
    lost1000, done1000, _ = total(1000, "refetch")
    assert lost1 > lost1000 == 0 and refetch1 > 0
    # refetching brings back every needed fact but a resolved error: re-running the reproduction, once
    # the fix is in, no longer shows the failure the final answer needs (13 runs answer degraded)
    assert (done1, done1000) == (27, 40)
    _, failed_done1, _ = total(1, "fail")
    assert failed_done1 == 4
