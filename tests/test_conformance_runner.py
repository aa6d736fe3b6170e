"""The conformance runner's own rules (``benchmarks/oracles/frameworks.py``, ``ctxsim conformance``), without
any framework installed: how settings are read and drawn, what the JSON holds, which inputs exit 2
before an oracle is built, and the knob aliases of ``Policy.knob_aliases``."""

from __future__ import annotations

import dataclasses
import json
import sys
import warnings
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks" / "oracles"))

import comparison  # noqa: E402
import draws  # noqa: E402
import frameworks  # noqa: E402

from sim.cli import main as ctxsim  # noqa: E402
from sim.commands import conformance as command  # noqa: E402
from sim.importers import load_paths  # noqa: E402
from sim.policies.base import Policy, renamed_knobs  # noqa: E402
from sim.util.errors import ConfigError  # noqa: E402
from sim.util.notices import KnobDeprecation  # noqa: E402

SUITE = REPO / "scenarios" / "suite"


@pytest.fixture(scope="module")
def suite():
    return list(load_paths([SUITE]))[:6]


def test_a_setting_is_json_values_or_bare_strings():
    got = frameworks.parse_setting(
        "trigger=8000 keep='[\"messages\", 10]' mode=all flag=true none=null r=0.5"
    )
    assert got == {
        "trigger": 8000,
        "keep": ["messages", 10],
        "mode": "all",
        "flag": True,
        "none": None,
        "r": 0.5,
    }
    assert frameworks.parse_setting("defaults") == {}
    assert frameworks.label({"a": 1, "b": [1, 2], "c": "x"}) == 'a=1 b=[1,2] c="x"'
    assert frameworks.label({}) == "defaults"
    with pytest.raises(frameworks.BadInput, match="'keep' is not KEY=VALUE"):
        frameworks.parse_setting("trigger=1 keep")


def test_draws_are_seeded_and_every_drawn_setting_is_one_the_library_takes(suite):
    scale = draws.peak(suite)
    assert scale > 0
    for framework in frameworks.FRAMEWORKS:
        for policy in frameworks.policies_of(framework):
            a = draws.draw(policy, 20, 0, suite)
            assert a == draws.draw(policy, 20, 0, suite)
            assert a != draws.draw(policy, 20, 1, suite)
            try:  # each builds the policy and maps to the library's configuration (window= where modelled)
                settings = frameworks.settings_for(framework, policy, [], 20, 0, suite)
            except frameworks.BadInput as exc:
                pytest.fail(f"{policy}: {exc}")
            assert len({s.name for s in settings}) == 20  # distinct: the knobs' ranges hold 20
    with pytest.raises(KeyError, match="no draw ranges for nope"):
        draws.draw("nope", 1, 0, suite)


def test_token_knobs_are_drawn_across_the_traces_own_range(suite):
    """Thresholds that fire early and late: drawn as 0.2-1.2 x the median peak request."""
    assert draws.SPECS["inspect_compaction_trim"]["threshold"] == ("tokens", 0.2, 1.2)
    values = [k["threshold"] for k in draws.draw("inspect_compaction_trim", 200, 0, suite)]
    scale = draws.peak(suite)
    assert min(values) < 0.3 * scale and max(values) > 1.1 * scale
    assert all(0.2 * scale - 1 <= v <= 1.2 * scale + 1 for v in values)


def test_a_policy_without_a_default_gets_half_the_median_peak(suite):
    (s,) = frameworks.settings_for("autogen", "autogen_token_limited", [], 0, 0, suite)
    assert s.knobs == {"token_limit": draws.peak(suite) // 2}
    assert s.config == {"context": "TokenLimited", "token_limit": draws.peak(suite) // 2}


def test_summary_json_holds_the_named_keys():
    rows = [
        comparison.TraceResult("a", 10, 9, 1100, 1000, "call 3: ..."),
        comparison.TraceResult("b", 5, 5, 500, 500, None),
    ]
    r = frameworks.summarize("autogen_buffered", "buffer_size=5", rows)
    assert {k: r[k] for k in ("policy", "setting", "traces", "calls", "agreement", "token_difference")} == {
        "policy": "autogen_buffered",
        "setting": "buffer_size=5",
        "traces": 2,
        "calls": 15,
        "agreement": round(14 / 15, 6),
        "token_difference": round(100 / 1500, 6),
    }
    assert r["per_trace"][0]["first_difference"] == "call 3: ..."
    json.dumps(r)


def test_a_different_end_counts_against_the_last_compared_call():
    got = {"finish": "completed", "calls": [["1V", [], 5], ["2V", [], 7]]}
    want = {"finish": "compaction-insufficient", "calls": [["1V", [], 5], ["2V", [], 7]]}
    r = comparison.compare_vectors("t", got, want, prefix_only=False)
    assert (r.calls, r.same) == (2, 1)
    assert r.first_difference == "ctxsim ends completed after 2 calls, real compaction-insufficient after 2"
    r = comparison.compare_vectors("t", got, want, prefix_only=True)
    assert (r.calls, r.same, r.first_difference) == (2, 2, None)
    want = {"finish": "completed", "calls": [["1V", [], 5], ["1V1M", [], 6]]}
    r = comparison.compare_vectors("t", got, want, prefix_only=False)
    assert (r.calls, r.same, r.tokens_ctxsim, r.tokens_real) == (2, 1, 12, 11)
    assert r.first_difference == "call 1: ctxsim ['2V', [], 7], real ['1V1M', [], 6]"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["autogen", "--traces", "no/such/path"], "no/such/path"),
        (["autogen", "--traces", str(SUITE), "--setting", "buffer_size=5"], "--setting needs --policy"),
        (["autogen", "--traces", str(SUITE), "--policy", "letta_partial_evict"], "not letta_partial_evict"),
        (["autogen", "--traces", str(SUITE), "--policy", "autogen_buffered", "--setting", "buffer_size=0"],
         "buffer_size=0"),
        (["autogen", "--traces", str(SUITE), "--policy", "autogen_buffered", "--setting", "size=3"],
         "no knob 'size'"),
        (["autogen", "--traces", str(SUITE), "--policy", "autogen_buffered", "--setting", "window=9000"],
         "no provider window"),
        (["inspect", "--traces", str(SUITE), "--policy", "anthropic_clear_tool_uses", "--setting",
          "clear_at_least=500"], "no clear_at_least"),
        (["autogen", "--traces", str(SUITE), "--draw", "-1"], "--draw must be >= 0"),
    ],
)  # fmt: skip
def test_bad_input_exits_2_before_any_oracle_runs(argv, message, capsys, monkeypatch):
    monkeypatch.setattr(frameworks, "ensure_env", lambda f: pytest.fail("an oracle was built"))
    assert frameworks.main(argv) == 2
    assert message in capsys.readouterr().err


def test_ctxsim_conformance_names_the_same_frameworks_and_needs_a_checkout(capsys, monkeypatch, tmp_path):
    assert command.FRAMEWORKS == frameworks.FRAMEWORKS
    assert command.runner() == REPO / "benchmarks" / "oracles" / "frameworks.py"
    monkeypatch.setattr(command, "runner", lambda: tmp_path / "missing.py")
    assert ctxsim(["conformance", "autogen", str(SUITE)]) == 2
    assert "source checkout" in capsys.readouterr().err


def test_ctxsim_conformance_passes_its_exit_status_on(capsys):
    """Bad input in the runner is the command's exit 2 (nothing built: the knob is refused first)."""
    code = ctxsim(
        ["conformance", "autogen", str(SUITE), "--policy", "autogen_buffered", "--setting", "buffer_size=0"]
    )
    assert code == 2


@dataclasses.dataclass(frozen=True)
class _Renamed(Policy):
    new_name: int = 1
    method: str = "approximate"

    name = "renamed_for_test"
    knob_aliases = {
        "old_name": ("new_name", {}),
        "count": ("method", {"framework": "approximate", "provider": "model"}),
    }


def test_old_knob_names_translate_with_a_deprecation_warning():
    with pytest.warns(KnobDeprecation) as caught:
        got = renamed_knobs(_Renamed, {"old_name": 5, "count": "provider"})
    assert [str(w.message) for w in caught] == [
        "policy 'renamed_for_test': knob 'old_name' is deprecated, use 'new_name' (the library's own name)",
        "policy 'renamed_for_test': knob 'count' is deprecated, use method='model' (the library's own name)",
    ]
    assert got == {"new_name": 5, "method": "model"}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert renamed_knobs(_Renamed, {"new_name": 5}) == {"new_name": 5}
    with pytest.raises(ConfigError, match="'old_name' is the old name of 'new_name'; give only 'new_name'"):
        renamed_knobs(_Renamed, {"old_name": 5, "new_name": 6})


def test_an_old_knob_name_on_the_command_line_is_the_new_one_with_a_warning(capsys):
    """``policy.trigger_tokens=`` (LangChain's edit before its knobs took the library's names) still runs,
    with the deprecation line, and gives the rows the new names give."""
    suite = str(SUITE)
    old = ["run", suite, "--policy", "langchain_clear_tool_uses", "policy.trigger_tokens=3000",
           "policy.token_count=provider", "--format", "json"]  # fmt: skip
    assert ctxsim(old) == 0
    out_old, err = capsys.readouterr()
    assert "knob 'trigger_tokens' is deprecated, use 'trigger'" in err
    assert "knob 'token_count' is deprecated, use token_count_method='model'" in err
    new = ["run", suite, "--policy", "langchain_clear_tool_uses", "policy.trigger=3000",
           "policy.token_count_method=model", "--format", "json"]  # fmt: skip
    assert ctxsim(new) == 0
    out_new, err = capsys.readouterr()
    assert "deprecated" not in err
    assert out_old == out_new
    row = json.loads(out_new.splitlines()[0])
    assert (row["policy.trigger"], row["policy.token_count_method"]) == (3000, "model")
