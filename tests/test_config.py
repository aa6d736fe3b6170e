import dataclasses
import json

import pytest

from sim.config.compose import CONF_DIR, build_policy, compose, model_window, policy_names
from sim.policies.base import knobs, registered
from sim.trace import schema
from sim.util.errors import ConfigError


@pytest.mark.parametrize("name", sorted(registered()))
def test_every_policy_has_a_config_matching_its_defaults(name):
    cfg = compose(name, [])
    cls = registered()[name]
    pcfg = dict(cfg["policy"])
    assert pcfg.pop("_target_") == f"{cls.__module__}.{cls.__qualname__}"
    defaults = {
        f.name: (list(f.default_factory()) if f.default is dataclasses.MISSING else f.default)
        for f in knobs(cls)
        if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
    }
    assert pcfg == defaults
    assert build_policy(cfg).params() == cls(**defaults).params()


def test_overrides_compose():
    p = build_policy(compose("observation_masking", ["policy.n=3", "policy.polling=2"]))
    assert p.params() == {"n": 3, "polling": 2}


def test_target_outside_registry_is_refused():
    cfg = {"policy": {"_target_": "os.system", "command": "true"}}
    with pytest.raises(ConfigError, match="'os.system' is not a registered policy class"):
        build_policy(cfg)


def test_non_policy_override_refused():
    with pytest.raises(ConfigError, match="only policy.KEY=VALUE and model.KEY=VALUE overrides"):
        compose("raw", ["pricing.x=1"])
    with pytest.raises(ConfigError, match="model 'replay' has no key 'size'; keys: name, window"):
        compose("raw", ["model.size=1"])


def test_model_window_override_validated():
    assert model_window(compose("raw", [])) == "auto"
    assert model_window(compose("raw", ["model.window=32000"])) == 32000
    with pytest.raises(ConfigError, match=r"model.window='big' is not null"):
        model_window(compose("raw", ["model.window=big"]))


def test_presets_resolve_to_registered_policies():
    p = build_policy(compose("seed_engine_defaults", ["policy.context_token_limit=32000"]))
    assert p.name == "seed_engine"
    assert (p.max_turns, p.max_tool_calls, p.max_duration_s, p.context_token_limit) == (12, 24, 300, 32000)
    assert policy_names() == sorted([*registered(), "openhands_server_default", "seed_engine_defaults"])
    chain = build_policy(compose("openhands_server_default", []))
    assert [s["name"] for s in chain.steps] == [
        "openhands_conversation_window",
        "openhands_browser_output_masking",
        "openhands_llm_summarizing",
    ]


def test_no_outputs_folder_created(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    compose("raw", [])
    assert list(tmp_path.iterdir()) == []


def test_committed_schema_file_is_current():
    assert schema.SCHEMA_FILE.read_text() == schema.schema_text()
    assert json.loads(schema.SCHEMA_FILE.read_text())["title"] == "ctxsim canonical trace v2"


def test_conf_dir_has_groups():
    assert (CONF_DIR / "policy").is_dir() and (CONF_DIR / "model" / "replay.yaml").is_file()


def test_models_of_the_shared_traces_have_windows():
    from sim.cost.models import resolve_window

    assert resolve_window("google/gemini-3-pro-preview") == 1048576
    assert resolve_window("@google/gemini-3-pro-preview") == 1048576
    assert resolve_window("litellm_proxy/anthropic/claude-3-5-haiku-20241022") == 200000
    assert resolve_window("openai/openrouter-llama-4-maverick") == 1048576
    assert resolve_window("gpt-4o-mini-2024-07-18") == 128000
    assert resolve_window("claude-3-5-sonnet-20241022") == 200000
    assert resolve_window("synthetic") is None and resolve_window(None) is None


def test_allow_listed_user_policy(tmp_path, monkeypatch):
    (tmp_path / "userpol.py").write_text(
        "from dataclasses import dataclass\n"
        "from sim.policies.base import Policy\n"
        "@dataclass(frozen=True)\n"
        "class Keep(Policy):\n"
        "    k: int = 1\n"
        "    name = 'user_keep'\n"
        "def not_a_policy(**kw):\n"
        "    return None\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    cfg = {"policy": {"_target_": "userpol.Keep", "k": 3}}
    with pytest.raises(ConfigError, match="'userpol.Keep' is not a registered policy class"):
        build_policy(cfg)
    assert build_policy(cfg, allow_modules=("userpol",)).params() == {"k": 3}
    # a config cannot allow-list its own module: only the command line's allow_modules count
    with pytest.raises(ConfigError, match="'userpol.Keep' is not a registered policy class"):
        build_policy({**cfg, "allow_modules": ["userpol"]})
    with pytest.raises(ConfigError, match="is not a sim.policies.base.Policy subclass"):
        build_policy({"policy": {"_target_": "userpol.not_a_policy"}}, allow_modules=("userpol",))


# ------------------------------------------------------------------------------- plain merge vs Hydra
def _same(a, b) -> bool:
    """Equal with the same key order and the same types (1, 1.0 and True differ)."""
    return json.dumps(a) == json.dumps(b)


@pytest.mark.parametrize("name", policy_names())
def test_the_plain_merge_is_hydras_compose_for_every_policy(name):
    from sim.config.compose import hydra_compose, plain_compose, prepare_policy

    prepare_policy(name)
    plain = plain_compose(name)
    assert plain is not None, f"{name}: conf/policy/{name}.yaml is no longer plain"
    assert _same(plain, hydra_compose(name, []))
    assert _same(compose(name, []), plain)


PLAIN_VALUES = [
    "3",
    "0",
    "-5",
    "0.5",
    "-0.25",
    "10.0",
    "true",
    "false",
    "null",
    "abc",
    "prune-then-summarize",
    "_x",
]
PLAIN_VALUES += ["info", "nan-x", "True1", "e5"]
HYDRA_VALUES = ["True", "NULL", "inf", "nan", "1e3", "007", "1_000", "+3", "3.", ".5", "'3'", '"x"', "[1,2]"]
HYDRA_VALUES += ["{a: 1}", "a b", "x.y", "-", ""]


@pytest.mark.parametrize("value", PLAIN_VALUES)
def test_plain_override_values_are_typed_as_hydra_types_them(value):
    from sim.config.compose import hydra_compose, plain_compose, plain_overrides

    ovs = [f"policy.mode={value}", f"model.window={value}", "policy.context_token_limit=32000"]
    plain = plain_overrides(plain_compose("seed_engine"), ovs)
    assert plain is not None
    assert _same(plain, hydra_compose("seed_engine", ovs))


@pytest.mark.parametrize("value", HYDRA_VALUES)
def test_other_override_values_are_left_to_hydra(value):
    from sim.config.compose import plain_compose, plain_overrides

    assert plain_overrides(plain_compose("seed_engine"), [f"policy.mode={value}"]) is None


def test_overrides_hydra_composes_still_compose_as_before():
    from sim.config.compose import hydra_compose

    for ovs in (["policy.mode='prune'"], ["policy.summary_ratio=1e-1"], ["policy.max_turns=1_000"]):
        assert _same(compose("seed_engine", ovs), hydra_compose("seed_engine", ovs))
    steps = ["policy.steps=[{name: raw}, {name: observation_masking, n: 3}]"]
    assert compose("pipeline", steps)["policy"]["steps"] == [
        {"name": "raw"},
        {"name": "observation_masking", "n": 3},
    ]
    assert plain_overrides_of("pipeline", steps) is None
    with pytest.raises(ConfigError, match="policy 'seed_engine' has no knob 'nope'"):
        compose("seed_engine", ["policy.nope=1"])


def plain_overrides_of(name, ovs):
    from sim.config.compose import plain_compose, plain_overrides

    return plain_overrides(plain_compose(name), ovs)


def test_a_file_outside_the_plain_subset_is_composed_by_hydra(tmp_path, monkeypatch):
    """A value OmegaConf reads as a number where PyYAML reads text, a timestamp, a file without _self_
    in its defaults: Hydra composes, and compose gives its answer."""
    import shutil

    from sim.config import compose as config

    conf = tmp_path / "conf"
    shutil.copytree(CONF_DIR, conf)
    monkeypatch.setattr(config, "CONF_DIR", conf)
    text = (conf / "policy" / "seed_engine.yaml").read_text(encoding="utf-8")
    for old, new in (
        ("summary_ratio: 0.1", "summary_ratio: 1e-1"),
        ("mode: prune-then-summarize", "mode: 2024-01-02"),
    ):
        (conf / "policy" / "seed_engine.yaml").write_text(text.replace(old, new), encoding="utf-8")
        assert config.plain_compose("seed_engine") is None
        cfg = compose("seed_engine", [])
        assert _same(cfg, config.hydra_compose("seed_engine", []))
    assert cfg["policy"]["mode"] == "2024-01-02"
    (conf / "policy" / "seed_engine.yaml").write_text(
        text.replace("summary_ratio: 0.1", "summary_ratio: 1e-1")
    )
    assert compose("seed_engine", [])["policy"]["summary_ratio"] == 0.1
    preset = conf / "policy" / "seed_engine_defaults.yaml"
    preset.write_text(preset.read_text(encoding="utf-8").replace("  - _self_\n", ""), encoding="utf-8")
    assert config.plain_compose("seed_engine_defaults") is None
    assert _same(compose("seed_engine_defaults", []), config.hydra_compose("seed_engine_defaults", []))
