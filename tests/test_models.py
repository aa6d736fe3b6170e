"""One model-name resolver for pricing, window, cache family and token calibration (sim.cost.models)."""

import dataclasses
import json

from builders import swe_trace

from sim.cli import main
from sim.cost.models import resolve
from sim.cost.names import lookup, match_key
from sim.cost.pricing import find_price
from sim.cost.tokens import calibrated_bytes_per_token, text_coefficients
from sim.trace.io import write_traces

GEMINI_NAMES = [
    "gemini-3-pro-preview",
    "google/gemini-3-pro-preview",
    "@google/gemini-3-pro-preview",
    "openrouter/google/gemini-3-pro-preview",
    "OpenRouter/Google/Gemini-3-Pro-Preview",
]


def test_every_spelling_of_a_model_resolves_every_table_alike():
    exact = resolve("google/gemini-3-pro-preview")
    assert exact.price.model == "gemini-3-pro-preview" and exact.price.family == "gemini"
    assert exact.window == 1048576 and exact.cache_family == "gemini"
    assert exact.bytes_per_token == 3.5021  # conf/calibration/bytes_per_token.yaml
    assert exact.text_coefficients == (0.0051, 1.3855, 0.099, 1.3811, 0.3489, 1.2172, 0.7481)
    assert exact.fallbacks == ()
    for name in GEMINI_NAMES:
        r = resolve(name)
        assert (r.price, r.window, r.cache_family, r.bytes_per_token, r.text_coefficients, r.fallbacks) == (
            exact.price,
            exact.window,
            exact.cache_family,
            exact.bytes_per_token,
            exact.text_coefficients,
            (),
        ), name
        # the tables' own accessors resolve the same way (the provider-prefixed name used to miss the
        # calibration and fall back to 4.0 silently)
        assert find_price(name) == exact.price
        assert calibrated_bytes_per_token(name) == 3.5021
        assert text_coefficients(name) == exact.text_coefficients


def test_matching_prefers_the_most_shared_trailing_segments_then_the_shortest_key():
    table = {"a/x": 1, "b/x": 2, "x": 3, "z/b/x": 4, "y": 5}
    assert lookup(table, "b/x") == 2  # exact
    assert lookup(table, "c/x") == 3  # only the last segment shared: the bare name
    assert lookup(table, "q/z/b/x") == 4  # three segments shared
    assert lookup(table, "w/b/x") == 2  # two shared ("z/b/x" shares two as well, but is longer)
    assert match_key(table, "x/y/z") is None and lookup(table, None) is None and lookup(table, "") is None


def test_unknown_model_falls_back_with_one_warning_per_table_naming_the_fallback():
    r = resolve("acme/frobnicator-7")
    assert r.price is None and r.window is None and r.cache_family == "none"
    assert r.bytes_per_token == 4.0 and r.text_coefficients is None
    assert [f for f, _ in r.fallbacks] == [
        "pricing",
        "cache_family",
        "window",
        "bytes_per_token",
        "text_coefficients",
    ]
    assert r.warnings("cache_family", "bytes_per_token", "text_coefficients") == [
        "model 'acme/frobnicator-7': cache family 'none' guessed from its name (not priced)",
        "model 'acme/frobnicator-7' has no bytes-per-token calibration in "
        "conf/calibration/bytes_per_token.yaml: the default 4.0 bytes per token is used",
        "model 'acme/frobnicator-7' has no character-class calibration in conf/calibration/text_tokens.yaml: "
        "text-only estimates use 4.0 bytes per token",
    ]
    assert r.warnings("window") == [
        "model 'acme/frobnicator-7' has no context window in conf/model/providers/: no over-window check"
    ]
    assert resolve("acme/claude-frob").cache_family == "anthropic"  # guessed from the name


def test_run_warns_once_per_model_naming_the_calibration_fallback(capsys, tmp_path):
    t = swe_trace([("a", 3)] * 2, model="acme/frobnicator-7")
    no_usage = dataclasses.replace(
        t,
        trace_id="no-usage",
        events=tuple(dataclasses.replace(e, tokens_provenance="estimate") for e in t.events),
        calls=tuple(dataclasses.replace(c, input_tokens=None) for c in t.calls),
    )
    write_traces([t, no_usage, no_usage], tmp_path / "t.jsonl")
    assert main(["run", str(tmp_path / "t.jsonl"), "--format", "json", "--pricing", "gpt-4o"]) == 0
    out, err = capsys.readouterr()
    assert [json.loads(line)["trace_id"] for line in out.splitlines()] == ["hand", "no-usage", "no-usage"]
    # priced by --pricing: nothing about pricing; its window is looked up (none: said once); the sizes
    # of the runs without usage were estimated
    assert [line for line in err.splitlines() if "acme/frobnicator-7" in line] == [
        "ctxsim: warning: model 'acme/frobnicator-7' has no context window in conf/model/providers/: "
        "no over-window check",
        "ctxsim: warning: model 'acme/frobnicator-7' has no bytes-per-token calibration in "
        "conf/calibration/bytes_per_token.yaml: the default 4.0 bytes per token is used",
        "ctxsim: warning: model 'acme/frobnicator-7' has no character-class calibration in "
        "conf/calibration/text_tokens.yaml: text-only estimates use 4.0 bytes per token",
    ]
    assert main(["run", str(tmp_path / "t.jsonl"), "--format", "json"]) == 0
    err = capsys.readouterr().err
    assert "model 'acme/frobnicator-7' has no price in conf/pricing/" in err
    assert "model 'acme/frobnicator-7': cache family 'none' guessed from its name (not priced)" in err
