import pytest
from builders import swe_trace

from sim.checks.conformance import check_policy
from sim.core.types import ItemState
from sim.policies.base import Change, Policy, make_policy, registered

# a few settings per policy, defaults first
SETTINGS = {
    "raw": [{}],
    "tool_result_head_tail": [{}, {"max_chars": 50, "head_chars": 20, "tail_chars": 10}],
    "observation_masking": [{}, {"n": 1}, {"n": 3, "polling": 4}],
    "spill_large_results": [{}, {"threshold_tokens": 100, "preview_chars": 40}],
    "seed_engine": [
        {},
        {"context_token_limit": 6000, "keep_recent_tokens": 1500, "tool_result_max_bytes": 300},
        {"context_token_limit": 6000, "keep_recent_tokens": 1500, "mode": "prune", "run_status": "off"},
        {"context_token_limit": 9000, "keep_recent_tokens": 2000, "mode": "summarize", "max_turns": 20},
    ],
}


def settings_of(name):
    """The settings above, else the policy's defaults plus its own conformance_settings."""
    return SETTINGS.get(name) or [{}, *registered()[name].conformance_settings]


def test_every_registered_policy_is_checked():
    assert all(settings_of(name) for name in registered())


@pytest.mark.parametrize("name", sorted(registered()))
def test_conformance_on_hand_trace(name):
    t = swe_trace([("out\n" * 40, 300), ("x" * 120, 60), ("short", 5)] * 4)
    for params in settings_of(name):
        assert check_policy(make_policy(name, **params), [t]) == []


@pytest.mark.parametrize("name", sorted(registered()))
def test_conformance_on_real_runs(name, mini_traces):
    for params in settings_of(name):
        assert check_policy(make_policy(name, **params), mini_traces[:12]) == []


def test_checker_catches_a_policy_that_splits_pairs():
    class DropResults(Policy):
        name = "drop_results_for_test"
        acts_before_call = True

        def params(self):
            return {}

        def before_call(self, trace, state, view, call, status):
            return [
                Change(i, ItemState.DROPPED, 0, 0, "drop")
                for i in range(view.n)
                if trace.events[i].kind == "tool_result" and view.state[i] != 3
            ]

    found = check_policy(DropResults(), [swe_trace([("a", 5)] * 3)])
    assert any("split" in f for f in found)


@pytest.mark.parametrize("name", sorted(registered()))
def test_conformance_on_embedded_suite(name):
    from sim.importers import load_paths
    from sim.util.paths import EMBEDDED_SUITE

    traces = list(load_paths([EMBEDDED_SUITE]))[:10]
    for params in settings_of(name):
        assert check_policy(make_policy(name, **params), traces) == []
