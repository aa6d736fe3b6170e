"""The ``openhands_*`` policies held to OpenHands' own condensers (goldens written by ``make
oracle-openhands``; see ``tests/openhands_oracle.py``). No OpenHands needed: the goldens are the real
library's per-call state vectors on the shared runs.

Every setting is held exactly, call by call, with its finish reason; RESIDUAL would pin a setting's
agreeing calls with the cause of the rest (none today). Summarizer calls are compared per run too.
"""

import pytest
from openhands_oracle import SETTINGS, corpus, ctxsim_run, golden_path, load_golden, shared_traces

from sim.util.paths import traces_dir

# setting -> (agreeing calls, cause). Measured with the goldens of this commit.
RESIDUAL: dict[str, tuple[int, str]] = {}


@pytest.fixture(scope="module")
def shared():
    if not (traces_dir() / "mini-swe-agent-gemini3pro").exists():
        pytest.skip(
            f"real traces not found at {traces_dir()} (set CTXSIM_TRACES to the shared traces folder)"
        )
    return shared_traces()


def agreeing(setting: str, shared) -> tuple[int, int, list[str]]:
    gold = load_golden(setting)
    same = total = 0
    bad = []
    for t in corpus(SETTINGS[setting][3], shared):
        real, ctx = gold["traces"][t.trace_id], ctxsim_run(t, *SETTINGS[setting][1:3])
        n = max(len(real["calls"]), len(ctx["calls"]))
        total += n
        for k in range(n):
            a = real["calls"][k] if k < len(real["calls"]) else None
            b = ctx["calls"][k] if k < len(ctx["calls"]) else None
            if a == b:
                same += 1
            elif len(bad) < 3:
                bad.append(f"{t.trace_id} call {k}: real {a} ctxsim {b}"[:600])
        if real["finish"] != ctx["finish"]:
            bad.append(f"{t.trace_id}: finish real {real['finish']} ctxsim {ctx['finish']}")
    return same, total, bad


@pytest.mark.parametrize("setting", [s for s in SETTINGS if golden_path(s).exists()])
def test_policy_matches_openhands_call_by_call(setting, shared):
    same, total, bad = agreeing(setting, shared)
    if setting in RESIDUAL:
        assert same == RESIDUAL[setting][0], bad
    else:
        assert same == total and not bad, bad


def test_summarizer_calls_match_openhands(shared):
    differ = {}
    for setting in SETTINGS:
        gold = load_golden(setting)
        for t in corpus(SETTINGS[setting][3], shared):
            real, ctx = (
                gold["traces"][t.trace_id]["summaries"],
                ctxsim_run(t, *SETTINGS[setting][1:3])["summaries"],
            )
            if real != ctx:
                differ[(setting, t.trace_id)] = (real, ctx)
    assert differ == {}
