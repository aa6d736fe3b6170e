"""pipeline: policies chained in order, each seeing what the previous left."""

import json

import pytest
from builders import swe_trace

from sim.checks.conformance import check_policy
from sim.engine.dispatch import replay
from sim.policies.base import make_policy
from sim.util.errors import ConfigError, UnknownNameError


def inputs(t, p):
    return replay(t, p, window=None).calls["input_tokens"].tolist()


def test_single_step_equals_the_policy():
    t = swe_trace([("a\nb\nc", 100)] * 5)
    assert inputs(t, make_policy("pipeline", steps=[{"name": "observation_masking", "n": 2}])) == inputs(
        t, make_policy("observation_masking", n=2)
    )


def test_settle_and_pre_call_steps_compose():
    # head/tail cuts the 1,000-character result at settle time (1000 -> 59 tokens, tests/test_policies.py);
    # masking n=1 then replaces the older results with 15-token placeholders
    text = "é" * 600 + "x" * 400
    t = swe_trace([(text, 1000), ("short", 10), ("again", 10)])
    p = make_policy(
        "pipeline",
        steps=[
            {"name": "tool_result_head_tail", "max_chars": 100, "head_chars": 10, "tail_chars": 5},
            {"name": "observation_masking", "n": 1},
        ],
    )
    # call 0: 150; call 1: 150 + 10 + 59 = 219 (observations task, r0: boundary 0); call 2: r0 masked:
    # 219 - 59 + 15 + 10 + 10 = 195
    assert inputs(t, p) == [150, 219, 195]
    assert check_policy(p, [t]) == []
    assert json.loads(p.params()["steps"])[1] == {"n": 1, "name": "observation_masking"}


def test_bad_steps_refused():
    with pytest.raises(ConfigError, match="steps\\[0\\] is not a mapping"):
        make_policy("pipeline", steps=["raw"])
    with pytest.raises(UnknownNameError, match="unknown policy .mask."):
        make_policy("pipeline", steps=[{"name": "mask"}])


def test_readme_user_policy_example_conforms():
    """The README's ten-line policy runs and passes the conformance checker."""
    import re

    from sim.util.paths import REPO

    code = re.search(
        r"```python\n(from dataclasses import dataclass.*?)```", (REPO / "README.md").read_text(), re.S
    )
    namespace: dict = {}
    exec(code.group(1), namespace)  # noqa: S102 - the project's own README
    policy = namespace["DropOldResults"](keep=2)
    t = swe_trace([("a\nb\nc", 100)] * 5)
    assert check_policy(policy, [t]) == []
    # call 3 masks r0, call 4 masks r1: 100 -> 10 each
    assert inputs(t, policy) == [150, 260, 370, 390, 410]


def test_user_policy_through_an_entry_point(tmp_path, monkeypatch):
    """An installed package declares `ctxsim.policies` entry points; they register like built-ins."""
    from sim.policies.base import _REGISTRY, load_entry_points

    (tmp_path / "ctxsim_user_pkg.py").write_text(
        "from dataclasses import dataclass\n"
        "from sim.policies.base import Policy\n"
        "@dataclass(frozen=True)\n"
        "class Nothing(Policy):\n"
        "    name = 'user_nothing'\n"
    )
    dist = tmp_path / "ctxsim_user_pkg-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: ctxsim-user-pkg\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[ctxsim.policies]\nuser_nothing = ctxsim_user_pkg:Nothing\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        assert load_entry_points() == ["user_nothing"]
        p = make_policy("user_nothing")
        assert check_policy(p, [swe_trace([("a", 3)] * 2)]) == []
    finally:
        _REGISTRY.pop("user_nothing", None)
