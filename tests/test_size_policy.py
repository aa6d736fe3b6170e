"""``ctxsim size --policy NAME``: any registered policy with numeric knobs sized on its own grid (declared
beside it, or ``--grid``), against the policy switched off (or raw), by the seed engine's verdict rules,
its JSON naming the policy's own knobs; every answer the per-call loop's."""

import itertools
import json

import numpy as np
import pytest

from sim.analysis.setting_results import SettingResult
from sim.analysis.size import DEFAULT_KEEPS, DEFAULT_LIMITS, evaluate_policy, policy_grid
from sim.analysis.verdict import recommendation_line, shipped, verdict
from sim.cli import main
from sim.policies.base import make_policy, registered

HASHES = tuple(f"sha256:{i:02d}" for i in range(8))


def knob_setting(knobs, costs, lost=None, overflow=0, harsher=()):
    """Another policy's setting (``knobs``: (name, value) pairs, all None: its baseline)."""
    n = len(costs)
    gentle = () if knobs[0][1] is None else tuple(-v if k in harsher else v for k, v in knobs)
    return SettingResult(
        None,
        None,
        HASHES[:n],
        np.array(costs, dtype=float),
        np.array(costs, dtype=float) * 10,
        np.full(n, 10.0),
        np.array(lost or [0] * n, dtype=float),
        np.zeros(n),
        ("complete",) * n,
        np.ones(n, dtype=bool),
        overflow,
        np.array([5000.0] * n),
        np.zeros(n),
        None,
        tuple(knobs),
        gentle,
    )


def test_every_policy_with_numeric_knobs_declares_a_grid_of_one_or_two_knobs_it_accepts():
    sized = {name: cls for name, cls in registered().items() if cls.size_grid}
    # the policies with no numeric knob to size: none, the container policies and a fixed window
    assert set(registered()) - set(sized) == {"raw", "pipeline", "openhands_conversation_window"}
    for name, cls in sized.items():
        assert 1 <= len(cls.size_grid) <= 2, name
        assert cls.size_harsher <= set(cls.size_grid), name
        for values in itertools.product(*cls.size_grid.values()):
            if name == "seed_engine" and values[1] >= values[0]:
                continue  # the seed engine's grid keeps keep_recent_tokens below the limit
            make_policy(name, **dict(zip(cls.size_grid, values, strict=True)))
        if cls.size_off is not None:
            make_policy(name, **cls.size_off)
    seed = registered()["seed_engine"]
    assert seed.size_grid == {"context_token_limit": DEFAULT_LIMITS, "keep_recent_tokens": DEFAULT_KEEPS}


def test_policy_grid_baseline_is_the_off_switch_or_raw_and_gentleness_follows_the_declaration():
    policies, keys = policy_grid("autogen_token_limited", {"token_limit": [16000, 32000]})
    assert policies[0] == make_policy("autogen_token_limited", token_limit=None)  # its off switch
    assert [k["knobs"] for k in keys] == [
        (("token_limit", None),),
        (("token_limit", 16000),),
        (("token_limit", 32000),),
    ]
    policies, keys = policy_grid("observation_masking", {"n": [1, 5], "polling": [1, 2]})
    assert policies[0].name == "raw"  # no off switch: raw stands in
    assert len(policies) == 5 and keys[1]["knobs"] == (("n", 1), ("polling", 1))
    _, keys = policy_grid("claude_code_auto_compact", {"buffer_tokens": [5000, 30000]})
    assert [k["gentle"] for k in keys[1:]] == [(-5000,), (-30000,)]  # a larger buffer compacts earlier


def test_a_setting_of_another_policy_is_named_by_its_own_knobs():
    base = knob_setting([("n", None)], [400_000] * 8)
    s = knob_setting([("n", 3), ("polling", 2)], [300_000] * 8)
    assert base.is_baseline and not s.is_baseline
    assert s.setting == {"n": 3, "polling": 2} and s.label == "3/2" and s.gentleness == (3, 2)
    rec = verdict([base, knob_setting([("n", 3)], [300_000] * 8), knob_setting([("n", 5)], [350_000] * 8)],
                  policy_name="observation_masking", target=0.95, trigger=False)  # fmt: skip
    assert rec["verdict"] == "compact" and rec["recommended"] == {"n": 3}
    assert rec["knobs"] == ["n"] and [g["n"] for g in rec["grid"]] == [3, 5]
    assert rec["advice"].startswith("Ship n=3: $0.3000 per run against $0.4000 without compaction")
    assert recommendation_line(rec) == "recommended: observation_masking n=3"


def test_not_needed_with_a_size_trigger_ships_the_gentlest_setting_that_never_fires():
    base = knob_setting([("max_size", None), ("keep_first", None)], [400_000] * 8)
    grid = [
        knob_setting([("max_size", 50), ("keep_first", 1)], [300_000, 500_000] * 4),  # CI spans zero
        knob_setting([("max_size", 200), ("keep_first", 1)], [400_000] * 8),  # never fires
        knob_setting([("max_size", 200), ("keep_first", 4)], [400_000] * 8),  # never fires, gentlest
    ]
    rec = verdict([base, *grid], policy_name="openhands_amortized_forgetting", target=0.95, trigger=True)
    assert rec["verdict"] == "compaction-not-needed" and rec["recommended"] is None
    assert rec["safety_net"] == {"max_size": 200, "keep_first": 4, "pair_fires_on_these_traces": False}
    assert shipped(rec) == {"max_size": 200, "keep_first": 4}
    assert recommendation_line(rec) == (
        "recommended: openhands_amortized_forgetting without compaction (compaction-not-needed); "
        "safety net: max_size=200 keep_first=4"
    )
    assert "Ship max_size=200 with keep_first=4 as a safety net (the grid's gentlest setting" in rec["advice"]


def test_not_needed_without_a_size_trigger_ships_the_gentlest_only_when_it_costs_and_loses_no_more():
    base = knob_setting([("n", None)], [400_000] * 8)
    # both CIs span zero; the gentlest (n=20) costs the same on average and loses nothing
    harmless = [
        knob_setting([("n", 1)], [300_000, 500_000] * 4),
        knob_setting([("n", 20)], [390_000, 410_000] * 4),
    ]
    rec = verdict([base, *harmless], policy_name="observation_masking", target=0.95, trigger=False)
    assert rec["verdict"] == "compaction-not-needed"
    assert rec["safety_net"] == {"n": 20, "pair_fires_on_these_traces": True}
    assert "(its gentlest setting: it acts on every run, at no more cost" in rec["advice"]
    dearer = [knob_setting([("n", 1)], [300_000, 500_000] * 4), knob_setting([("n", 20)], [410_000] * 8)]
    rec = verdict([base, *dearer], policy_name="observation_masking", target=0.95, trigger=False)
    assert rec["safety_net"] is None and shipped(rec) is None
    assert rec["safety_net_reason"].startswith("observation_masking acts on every run (no size trigger)")
    assert (
        recommendation_line(rec)
        == "recommended: observation_masking without compaction (compaction-not-needed)"
    )


def test_compaction_required_ranks_another_policys_settings_by_overflows_then_gentleness():
    base = knob_setting([("token_limit", None)], [400_000] * 8, overflow=3)
    grid = [
        knob_setting([("token_limit", 16000)], [500_000] * 8),
        knob_setting([("token_limit", 32000)], [500_000] * 8),  # the same figures, gentler: it wins
        knob_setting([("token_limit", 96000)], [450_000] * 8, overflow=1),
    ]
    rec = verdict([base, *grid], policy_name="autogen_token_limited", target=0.95, trigger=True)
    assert rec["verdict"] == "compaction-required" and rec["recommended"] == {"token_limit": 32000}
    assert rec["tied"] == [{"token_limit": 16000}]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    from scenarios.swe_like import generate_suite
    from sim.trace.io import write_traces

    path = tmp_path_factory.mktemp("swe") / "swe.jsonl"
    write_traces(generate_suite(7, 12), path)
    return path


@pytest.mark.parametrize(
    "name",
    [
        "observation_masking",
        "tool_result_head_tail",
        "llm_summary",
        "openhands_amortized_forgetting",
        "openhands_hard_context_reset",
        # the policies made cheaper to size (tests/test_policy_tables.py): per-trace tables, same answer
        "openhands_recent_events",
        "openhands_llm_summarizing",
        "langchain_clear_tool_uses",
        "langchain_summarization",
        "autogen_buffered",
        "autogen_head_and_tail",
        "autogen_token_limited",
        # planned on the batch path (tests/test_plans_inspect.py)
        "inspect_compaction_auto",
        "inspect_compaction_edit",
        "inspect_compaction_summary",
        "inspect_compaction_trim",
        # planners of compacting policies (tests/test_plans_strands_adk.py)
        "adk_events_compaction",
        "strands_summarizing",
        "strands_sliding_window",
        # planners of summaries and token triggers (tests/test_plans_summary.py; llm_summary above)
        "hybrid",
        "anthropic_clear_tool_uses",
        "anthropic_server_compaction",
        "codex_auto_compact",
        "claude_code_auto_compact",
        # the rest of the sized policies: masking and settle-time plans, and letta on the per-call loop
        "letta_partial_evict",
        "openhands_browser_output_masking",
        "openhands_observation_masking",
        "paginate_large_results",
        "spill_large_results",
    ],
)
def test_every_setting_equals_the_per_call_loop(name, corpus):
    from sim.importers import load_paths

    traces = list(load_paths([str(corpus)]))
    grid = {k: list(v)[:3] for k, v in registered()[name].size_grid.items()}
    fast = evaluate_policy(traces, name, grid, 200000, "claude-sonnet-4-5")
    loop = evaluate_policy(traces, name, grid, 200000, "claude-sonnet-4-5", loop=True)
    assert len(fast) == len(loop) == 1 + int(np.prod([len(v) for v in grid.values()]))
    for a, b in zip(fast, loop, strict=True):
        assert a.setting == b.setting and a.outcome == b.outcome and a.overflow_runs == b.overflow_runs
        for f in ("cost", "tokens", "facts_seen", "facts_lost", "refetch", "peak", "compactions", "output"):
            assert np.array_equal(getattr(a, f), getattr(b, f)), (name, a.label, f)


def test_size_policy_json_names_the_policys_own_knobs(capsys, corpus):
    args = ["size", str(corpus), "--model", "claude-sonnet-4-5", "--policy", "observation_masking"]
    assert main([*args, "--grid", "n=1,5", "--format", "json", "--workers", "1"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["policy"] == "observation_masking" and rec["knobs"] == ["n"]
    assert [g["n"] for g in rec["grid"]] == [1, 5] and rec["baseline"]["n"] is None
    assert rec["recommended"] is None or set(rec["recommended"]) == {"n"}
    assert rec["budgets"] is None and rec["keep_check"] is None  # the seed engine's rules
    assert main([*args, "--grid", "n=1,5", "--workers", "2", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == rec  # the same answer for any number of workers
    assert main([*args, "--grid", "n=1,5"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:2] == ["n", "mean_cost_usd"]
    assert out.splitlines()[-1] == recommendation_line(rec)


def test_seed_engine_grid_is_the_limits_and_keeps_shorthand(capsys, corpus):
    args = ["size", str(corpus), "--model", "claude-sonnet-4-5", "--format", "json", "--workers", "1"]
    assert main([*args, "--limits", "32000,64000", "--keeps", "4000"]) == 0
    short = capsys.readouterr().out
    grid = ["--grid", "context_token_limit=32000,64000", "--grid", "keep_recent_tokens=4000"]
    assert main([*args, "--policy", "seed_engine", *grid]) == 0
    assert capsys.readouterr().out == short
    assert "knobs" not in json.loads(short)  # the seed engine's JSON as before


# policies whose sizing stays on the per-call loop, and why (the batch path declines them)
ON_THE_LOOP = {"letta_partial_evict": "checks its trigger after each call (after_call)"}


def test_every_sized_policy_replays_its_default_grid_on_the_batch_path():
    """The guard of issue 40's speed: each default-grid setting of every sized policy replays SWE-like
    runs (no needs, within the window) on the batch path, none on the per-call loop, but those listed."""
    from scenarios.swe_like import generate_suite
    from sim.engine.dispatch import replay_table

    traces = generate_suite(7, 6)
    on_loop = {}
    for name, cls in sorted(registered().items()):
        if not cls.size_grid or name == "seed_engine":
            continue
        for values in itertools.product(*cls.size_grid.values()):
            policy = make_policy(name, **dict(zip(cls.size_grid, values, strict=True)))
            table = replay_table(traces, policy, window=200000, pricing="claude-sonnet-4-5")
            on_loop[name] = on_loop.get(name, 0) + len(table.loop)
    assert {name for name, n in on_loop.items() if n} == set(ON_THE_LOOP)
