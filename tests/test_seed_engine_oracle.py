"""seed_engine held, decision for decision, to effect-agent's own code.

The goldens in tests/golden/seed_engine_oracle/ are the oracle's side: ``make oracle-seed`` replayed
each corpus (the 40 shared mini-swe-agent runs, the embedded suite, the hand-made cases of
``seed_oracle.hand_traces``, the shared families swe, ohv0, ohsdk, inspect, claude and tau10) at each
setting through effect-agent's real estimator, prune, cut, transcript, tool-result bound, initial
prompt, assistant message and run-status functions (Node,
``benchmarks/oracles/effect_agent``). Here ``seed_engine`` replays the same traces and must give the
same per-call estimates, requests, triggers, prune bounds and cleared results, summarize cuts, covered
spans and summarizer prompt sizes, overflow retries, grace turns, status lines, envelopes, finish
reasons and warnings. No Node needed.
"""

from __future__ import annotations

import json
from functools import cache

import pytest
import seed_oracle as so

from sim.importers import load_paths
from sim.policies.base import RunStatus, make_policy
from sim.policies.seed_messages import OUTPUT_CONTRACT_TOKENS

FILES = sorted(so.GOLDEN.glob("*.json"))


@cache
def corpus(name: str) -> dict:
    return {t.trace_id: t for t in so.CORPORA[name][0]()}


def load(path) -> dict:
    return json.loads(path.read_text())


def first_difference(got: dict, want: dict) -> str:
    for key in want:
        a, b = got.get(key), want[key]
        if a != b:
            if isinstance(a, list) and isinstance(b, list):
                pairs = enumerate(zip(a, b, strict=False))
                j = next((j for j, (x, y) in pairs if x != y), min(len(a), len(b)))
                return f"{key}[{j}]: seed_engine {a[j : j + 1]} effect-agent {b[j : j + 1]}"
            return f"{key}: seed_engine {a} effect-agent {b}"
    return f"keys: seed_engine {sorted(got)} effect-agent {sorted(want)}"


def test_goldens_cover_every_corpus_and_setting():
    names = {p.name for p in FILES}
    for c, (_, settings) in so.CORPORA.items():
        assert {so.golden_path(c, s).name for s in settings} <= names
    assert len(so.SETTINGS) >= 5
    assert any(k.get("run_status") == "appended" and k.get("max_turns") for k, _ in so.SETTINGS.values())
    assert all(load(p)["output_contract_tokens"] == OUTPUT_CONTRACT_TOKENS for p in FILES)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_seed_engine_decides_as_effect_agent(path, request):
    g = load(path)
    if g["corpus"] in so.SHARED:
        request.getfixturevalue("mini_dir")  # skips without the shared traces
    assert so.CORPORA[g["corpus"]][1][g["setting"]] == (g["knobs"], g["window"]), "goldens are stale"
    traces = corpus(g["corpus"])
    assert sorted(traces) == sorted(g["runs"])
    for tid, want in g["runs"].items():
        want = {k: v for k, v in want.items() if k != "grace_warnings"}  # the grace turn's own usage
        got = so.decisions(traces[tid], g["knobs"], g["window"])
        assert got == want, f"{tid} at {g['setting']}: {first_difference(got, want)}"


def test_status_lines_are_format_run_status():
    g = load(so.golden_path("cases", next(iter(so.CASE_SETTINGS))))
    assert len(g["status_lines"]) == len(so.STATUS_VIEWS)
    for row in g["status_lines"]:
        st = RunStatus()
        for key, value in row["status"].items():
            setattr(st, key, value)
        assert make_policy("seed_engine", **row["knobs"]).status_line(st) == row["line"]


def test_redacted_traces_give_the_same_decisions(mini_dir, tmp_path, capsys):
    from sim.cli import main

    assert main(["import", str(mini_dir), "-o", str(tmp_path / "r.jsonl"), "--redact"]) == 0
    capsys.readouterr()
    redacted = {t.trace_id: t for t in load_paths([str(tmp_path / "r.jsonl")])}
    assert all(e.content is None and e.json_bytes is not None for t in redacted.values() for e in t.events)
    full = corpus("mini")
    for knobs, window in so.SETTINGS.values():
        for tid, t in full.items():
            assert so.decisions(redacted[tid], knobs, window) == so.decisions(t, knobs, window), tid
