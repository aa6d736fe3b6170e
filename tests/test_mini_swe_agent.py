"""The 40 real mini-swe-agent runs: raw replay reproduces the provider's input of every call exactly."""

import numpy as np

from sim.engine.dispatch import replay
from sim.metrics.compute import compute_metrics
from sim.policies.base import make_policy


def test_all_40_runs_import_and_validate(mini_traces):
    from sim.trace.codec import trace_to_dict
    from sim.trace.rules import trace_problems

    assert len(mini_traces) == 40
    assert len({t.trace_id for t in mini_traces}) == 40
    assert all(t.trace_id.count("__") == 1 for t in mini_traces)  # instance ids like django__django-11066
    for t in mini_traces:
        assert trace_problems(trace_to_dict(t)) == []
    assert sum(len(t.calls) for t in mini_traces) == 1469 + 40  # MANIFEST: 1,469 consecutive differences


def test_raw_replay_reproduces_every_recorded_call_exactly(mini_traces):
    raw = make_policy("raw")
    total_replayed = total_recorded = 0
    for t in mini_traces:
        r = replay(t, raw)
        recorded = np.array([c.input_tokens for c in t.calls])
        assert np.array_equal(r.calls["input_tokens"], recorded), t.trace_id
        assert np.array_equal(r.calls["output_tokens"], [c.output_tokens for c in t.calls])
        total_replayed += compute_metrics(r)["cumulative_input_tokens"]
        total_recorded += int(recorded.sum())
    assert total_replayed == total_recorded


def test_visible_events_explain_almost_all_recorded_input(mini_traces):
    resid = sum(abs(c.residual_tokens) for t in mini_traces for c in t.calls)
    total = sum(c.input_tokens for t in mini_traces for c in t.calls)
    assert resid / total < 0.001  # measured 0.041%: the provider's count dips 31 times (MANIFEST)
    # the dips exist and are kept as residuals, not hidden in negative sizes
    assert any(c.residual_tokens != 0 for t in mini_traces for c in t.calls)
    assert all(e.tokens >= 0 for t in mini_traces for e in t.events)


def test_recorded_cuts_are_marked_bounded(mini_traces):
    bounded = [e for t in mini_traces for e in t.events if e.bounded]
    assert len(bounded) == 41  # results holding mini-swe-agent's <warning> long-output template
    assert all(e.kind == "tool_result" and "<elided_chars>" in e.content for e in bounded)
    # head/tail replay never cuts them again: equal to raw on these runs
    h, raw = make_policy("tool_result_head_tail"), make_policy("raw")
    for t in mini_traces:
        assert np.array_equal(replay(t, h).calls["input_tokens"], replay(t, raw).calls["input_tokens"])


def test_masking_n10_reduces_cumulative_input(mini_traces):
    m, raw = make_policy("observation_masking", n=10), make_policy("raw")
    masked = sum(compute_metrics(replay(t, m))["cumulative_input_tokens"] for t in mini_traces)
    full = sum(compute_metrics(replay(t, raw))["cumulative_input_tokens"] for t in mini_traces)
    assert full == 25_495_216  # sum of prompt_tokens over the 40 runs' 1,509 calls
    ratio = masked / full
    assert 0.65 < ratio < 0.78, ratio  # measured 0.7193
    # runs too short for the window are untouched
    for t in mini_traces:
        n_results = sum(e.kind == "tool_result" for e in t.events[: t.calls[-1].view_end])
        if n_results <= 10:
            assert np.array_equal(replay(t, m).calls["input_tokens"], replay(t, raw).calls["input_tokens"])


def test_usage_normalised(mini_traces):
    t = mini_traces[0]
    c = t.calls[0]
    assert c.usage_provenance == "provider"
    assert c.cache_read_tokens is not None and c.cache_read_tokens <= c.input_tokens  # cached inside prompt
    assert t.model == "google/gemini-3-pro-preview"
    assert t.recorded_policy["name"] == "tool_result_head_tail"


def test_shipped_calibration_is_the_fit_over_the_training_half(mini_traces):
    from sim.analysis.fidelity import default_split
    from sim.cost.tokens import calibrated_bytes_per_token, fit_bytes_per_token

    train = set(default_split(t.trace_id for t in mini_traces))
    fit = fit_bytes_per_token([t for t in mini_traces if t.trace_id in train])
    assert fit == {"google/gemini-3-pro-preview": calibrated_bytes_per_token("google/gemini-3-pro-preview")}
    assert calibrated_bytes_per_token("no/such-model") == 4.0


def test_run_without_usage_uses_model_calibration(mini_dir, tmp_path):
    import json

    from sim.cost.tokens import calibrated_bytes_per_token, estimate_text_tokens, text_coefficients
    from sim.importers import load_path

    data = json.loads(sorted(mini_dir.iterdir())[0].read_text())
    for m in data["messages"]:
        if m["role"] == "assistant":
            del m["extra"]["response"]["usage"]
    p = tmp_path / "nousage.traj.json"
    p.write_text(json.dumps(data))
    (t,) = load_path(p)
    bpt = calibrated_bytes_per_token(t.model)
    assert t.bytes_per_token == bpt
    assert all(e.tokens_provenance == "estimate" for e in t.events)
    coef = text_coefficients(t.model)
    assert [e.tokens for e in t.events] == [estimate_text_tokens(e.content, coef) for e in t.events]
    assert all(c.usage_provenance == "none" and c.input_tokens is None for c in t.calls)
