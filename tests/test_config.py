import dataclasses
import json

import pytest

from sim import schema
from sim.config import CONF_DIR, build_policy, compose, model_window, policy_names
from sim.errors import ConfigError
from sim.policies.base import knobs, registered


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
    from sim.models import resolve_window

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
