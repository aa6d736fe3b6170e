"""``ctxsim gate``: pass / regression / config error exit codes, stable summaries, JUnit, baselines."""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from sim.gate.args import main
from sim.gate.gatefile import load_gate
from sim.gate.outcome import aggregate
from sim.gate.pytest_plugin import assert_gate
from sim.util.paths import REPO

SUITE = REPO / "scenarios" / "suite" / "closed_loop.jsonl"
CI_GATE = REPO / "gates" / "ci.yaml"

GATE = """\
name: test
suite: {suite}
pricing: claude-sonnet-4-5
baseline:
  results: baseline.jsonl
  policy: seed_engine
  params: {{context_token_limit: 16000, keep_recent_tokens: 4000}}
candidate:
  policy: seed_engine
  params:
    context_token_limit: 16000
    keep_recent_tokens: {keep}
thresholds:
  cost_microusd: {{max_increase_pct: 5}}
  answer_completed: {{max_drop_points: 0}}
  facts_lost: {{max_increase: 0}}
  context_overflow_runs: {{max_increase: 0}}
  compactions: {{max_increase_pct: 20}}
"""


def gate(cli):
    """Run ``ctxsim gate`` through the CLI when it has the subcommand, else ``sim.gate.args.main``."""

    def run(*argv: str) -> int:
        from sim import cli as cli_mod

        try:
            has = "gate" in cli_mod.build_parser()._subparsers._group_actions[0].choices  # type: ignore
        except Exception:
            has = False
        return cli_mod.main(["gate", *argv]) if has else main(list(argv))

    return run


@pytest.fixture
def run_gate():
    return gate(None)


@pytest.fixture(scope="module")
def baseline_file(tmp_path_factory) -> Path:
    """A baseline results file written once by --update-baseline (from the baseline policy)."""
    d = tmp_path_factory.mktemp("gate")
    g = d / "gate.yaml"
    g.write_text(GATE.format(suite=SUITE, keep=4000), encoding="utf-8")
    assert main([str(g), "--update-baseline"]) == 0
    return d / "baseline.jsonl"


def _gate(tmp_path: Path, baseline_file: Path, keep: int, text: str | None = None) -> Path:
    shutil.copy(baseline_file, tmp_path / "baseline.jsonl")
    g = tmp_path / "gate.yaml"
    g.write_text(text or GATE.format(suite=SUITE, keep=keep), encoding="utf-8")
    return g


def test_update_baseline_writes_rows(baseline_file):
    import json

    rows = [json.loads(line) for line in baseline_file.read_text(encoding="utf-8").splitlines()]
    assert [r["trace_id"] for r in rows] == ["grep_and_read", "working_set_16k", "needle", "spill"]
    assert {r["policy.keep_recent_tokens"] for r in rows} == {4000}
    assert {r["pricing"] for r in rows} == {"claude-sonnet-4-5"}


def test_update_baseline_from_candidate_when_no_baseline_policy(tmp_path, run_gate, capsys):
    text = GATE.format(suite=SUITE, keep=2000).replace(
        "  policy: seed_engine\n  params: {context_token_limit: 16000, keep_recent_tokens: 4000}\n", "", 1
    )
    g = tmp_path / "gate.yaml"
    g.write_text(text, encoding="utf-8")
    assert run_gate(str(g)) == 2  # no baseline file yet: never written implicitly
    assert "--update-baseline" in capsys.readouterr().err
    assert not (tmp_path / "baseline.jsonl").exists()
    assert run_gate(str(g), "--update-baseline") == 0
    assert '"policy.keep_recent_tokens": 2000' in (tmp_path / "baseline.jsonl").read_text(encoding="utf-8")


def test_unchanged_policy_passes(tmp_path, baseline_file, run_gate, capsys):
    g = _gate(tmp_path, baseline_file, 4000)
    assert run_gate(str(g)) == 0
    out = capsys.readouterr()
    assert "PASS" in out.out and "regression" not in out.err


def test_worse_policy_fails_naming_the_metric(tmp_path, baseline_file, run_gate, capsys):
    g = _gate(tmp_path, baseline_file, 2000)  # half the keep window: more facts lost
    junit = tmp_path / "out.xml"
    summary = tmp_path / "out.md"
    assert run_gate(str(g), "--junit", str(junit), "--summary", str(summary)) == 1
    out = capsys.readouterr()
    assert "regression: facts_lost" in out.err
    assert "cost_microusd" not in out.err  # cheaper, within its threshold
    assert summary.read_text(encoding="utf-8") == out.out
    assert "| facts_lost | 35 | 42 | +7 (+20.00%) | max_increase 0 | **FAIL** |" in out.out
    assert "## Traces that changed most by cost" in out.out

    root = ET.parse(junit).getroot()
    (suite,) = root.findall("testsuite")
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == [
        "cost_microusd",
        "answer_completed",
        "facts_lost",
        "context_overflow_runs",
        "compactions",
    ]
    failed = [c.get("name") for c in cases if c.find("failure") is not None]
    assert failed == ["facts_lost"]
    assert suite.get("tests") == "5" and suite.get("failures") == "1"


def test_assert_gate_helper(tmp_path, baseline_file):
    assert assert_gate(_gate(tmp_path, baseline_file, 4000)).passed
    with pytest.raises(AssertionError, match="facts_lost") as info:
        assert_gate(_gate(tmp_path, baseline_file, 2000))
    assert "| metric | baseline |" in str(info.value)


def test_outputs_are_byte_identical(tmp_path, baseline_file, run_gate, capsys):
    g = _gate(tmp_path, baseline_file, 2000)
    outs = []
    for i in range(2):
        assert (
            run_gate(str(g), "--summary", str(tmp_path / f"s{i}.md"), "--junit", str(tmp_path / f"j{i}.xml"))
            == 1
        )
        outs.append(capsys.readouterr().out)
    assert outs[0] == outs[1]
    assert (tmp_path / "s0.md").read_bytes() == (tmp_path / "s1.md").read_bytes()
    assert (tmp_path / "j0.xml").read_bytes() == (tmp_path / "j1.xml").read_bytes()
    assert str(tmp_path) not in outs[0]  # no machine-specific paths


def test_baseline_policy_without_results_file(tmp_path, run_gate):
    text = GATE.format(suite=SUITE, keep=4000).replace("  results: baseline.jsonl\n", "")
    g = tmp_path / "gate.yaml"
    g.write_text(text, encoding="utf-8")
    assert run_gate(str(g)) == 0
    assert run_gate(str(g), "--update-baseline") == 2  # nothing to update


FACTS = "  facts_lost: {max_increase: 0}"
KEEP = "    keep_recent_tokens: 2000"


@pytest.mark.parametrize(
    ("old", "new", "line", "key"),
    [
        (FACTS, "  facts_lots: {max_increase: 0}", 16, "thresholds.facts_lots"),
        (FACTS, "  facts_lost: {max_increse: 0}", 16, "thresholds.facts_lost.max_increse"),
        (FACTS, "  facts_lost: {max_increase: lots}", 16, "thresholds.facts_lost.max_increase"),
        (FACTS, "  facts_lost: 0", 16, "thresholds.facts_lost"),
        (
            "  answer_completed: {max_drop_points: 0}",
            "  answer_completed: {max_increase: 0}",
            15,
            "thresholds.answer_completed.max_increase",
        ),
        ("pricing: claude-sonnet-4-5\n", "pricing: claude-sonnet-4-5\nsuit: x\n", 4, "suit"),
        ("suite: ", "suite: 3\n#", 2, "suite"),
        (KEEP, "    keep_recent: 2000", 12, "candidate.params.keep_recent"),
        ("candidate:\n  policy: seed_engine", "candidate:\n  policy: seed_engin", 9, "candidate.policy"),
        (KEEP, "    keep_recent_tokens: 20000", 11, "candidate.params"),
        (KEEP, "    keep_recent_tokens: [1, 2]", 12, "candidate.params.keep_recent_tokens"),
    ],
)
def test_malformed_gate_file_names_line_and_key(tmp_path, run_gate, capsys, old, new, line, key):
    text = GATE.format(suite=SUITE, keep=2000)
    assert old in text
    g = tmp_path / "bad.yaml"
    g.write_text(text.replace(old, new, 1), encoding="utf-8")
    assert run_gate(str(g)) == 2
    err = capsys.readouterr().err
    assert f"bad.yaml: line {line}: key '{key}'" in err, err


def test_invalid_yaml_names_line(tmp_path, run_gate, capsys):
    g = tmp_path / "bad.yaml"
    g.write_text("suite: x\nthresholds: {a: 1\nb: [\n", encoding="utf-8")
    assert run_gate(str(g)) == 2
    assert "bad.yaml: line" in capsys.readouterr().err


def test_target_needs_allow_module(tmp_path, run_gate, capsys):
    text = GATE.format(suite=SUITE, keep=4000).replace(
        "candidate:\n  policy: seed_engine", "candidate:\n  _target_: mypolicies.Mine", 1
    )
    g = tmp_path / "gate.yaml"
    g.write_text(text, encoding="utf-8")
    assert run_gate(str(g)) == 2
    assert "--allow-module" in capsys.readouterr().err


def test_aggregates():
    rows = [
        {"cost_microusd": 10, "answer_completed": True, "finish_reason": "completed"},
        {"cost_microusd": 5, "answer_completed": False, "finish_reason": "context-overflow"},
    ]
    assert aggregate(rows, "cost_microusd") == 15
    assert aggregate(rows, "answer_completed") == 0.5
    assert aggregate(rows, "context_overflow_runs") == 1
    assert aggregate([*rows, {"cost_microusd": None}], "cost_microusd") is None


def test_project_gate_passes_against_committed_baseline(run_gate, capsys):
    assert load_gate(CI_GATE).baseline_results == CI_GATE.parent / "ci_baseline.jsonl"
    assert run_gate(str(CI_GATE)) == 0, capsys.readouterr().err
