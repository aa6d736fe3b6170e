"""Numbers are sane or refused: the canonical schema's ranges, importers' usage, times and costs, the
calibration and conf tables, the cache split's clamps, and sums that cannot wrap int64."""

from __future__ import annotations

import copy
import dataclasses
import json
import random

import numpy as np
import pytest
from builders import swe_trace

from sim.checks.conformance import record_diff
from sim.cli import main
from sim.core.types import Trace
from sim.cost.cache import CostModel, cache_rules, read_cache_rules, split_runs
from sim.cost.models import read_windows_file
from sim.cost.pricing import find_price, read_price_file
from sim.engine.dispatch import replay, replay_many
from sim.importers import load_path
from sim.importers.common import anthropic_usage, iso_timestamp, openai_usage, unix_time, usage_count
from sim.policies.base import make_policy
from sim.trace.codec import trace_to_dict
from sim.trace.io import iter_jsonl, iter_parquet, write_traces
from sim.util.errors import ConfigError, TraceError
from sim.util.limits import MAX_COUNT

BASE = trace_to_dict(swe_trace([("a\nb", 30), ("c", 5)], trace_id="nums"))


def bad_record(path: tuple, value) -> dict:
    d = copy.deepcopy(BASE)
    cur = d
    for p in path[:-1]:
        cur = cur[p]
    cur[path[-1]] = value
    return d


def write_jsonl(tmp_path, d) -> object:
    f = tmp_path / "bad.jsonl"
    f.write_text(json.dumps(d) + "\n")
    return f


# ------------------------------------------------------------------------------------ canonical schema
@pytest.mark.parametrize(
    "path, value, message",
    [
        (("events", 1, "tokens"), 2**53, "must be <= 2^53 - 1, got 9007199254740992"),
        (("events", 1, "tokens"), -1, "must be >= 0, got -1"),
        (("calls", 0, "output_tokens"), 2**62, "must be <= 2^53 - 1, got 4611686018427387904"),
        (("calls", 0, "output_tokens"), 2**63, "must be <= 2^53 - 1, got 9223372036854775808"),
        (("calls", 0, "input_tokens"), 12.5, "expected integer or null, got float 12.5"),
        (("calls", 0, "cache_read_tokens"), True, "expected integer or null, got boolean true"),
        (("calls", 0, "residual_tokens"), -(2**53), "must be >= -(2^53 - 1), got -9007199254740992"),
        (("calls", 0, "timestamp"), 1e300, "must be <= 253402300799.0, got 1e+300"),
        (("events", 0, "timestamp"), -1e12, "must be >= -62135596800.0, got -1000000000000.0"),
        (("calls", 0, "recorded_cost_usd"), -0.5, "must be >= 0, got -0.5"),
        (("bytes_per_token",), -1.0, "must be >= 0.01, got -1.0"),
        (("bytes_per_token",), 0.0, "must be >= 0.01, got 0.0"),
        (("context_window",), 2**53, "must be <= 2^53 - 1"),
    ],
)
def test_schema_refuses_each_bad_number_naming_file_record_field(tmp_path, path, value, message):
    f = write_jsonl(tmp_path, bad_record(path, value))
    field = ".".join(str(p) for p in path).replace(".0.", "[0].").replace(".1.", "[1].")
    with pytest.raises(TraceError) as e:
        list(iter_jsonl(f))
    assert (e.value.file, e.value.record, e.value.field) == ("bad.jsonl", "line 1 (trace_id nums)", field)
    assert message in e.value.message


@pytest.mark.parametrize(
    "field, value",
    [
        ("bytes_per_token", float("nan")),
        ("bytes_per_token", float("inf")),
        ("events[0].timestamp", float("nan")),
        ("calls[1].timestamp", float("-inf")),
        ("calls[0].recorded_cost_usd", float("nan")),
    ],
)
def test_parquet_nan_and_infinity_are_refused(tmp_path, field, value):
    # JSON cannot carry NaN (sim.util.jsonl refuses it); Parquet can, so the schema must
    t = swe_trace([("a\nb", 30), ("c", 5)], trace_id="pq")
    if field == "bytes_per_token":
        t = dataclasses.replace(t, bytes_per_token=value)
    elif field.startswith("events"):
        t = dataclasses.replace(t, events=(dataclasses.replace(t.events[0], timestamp=value), *t.events[1:]))
    else:
        j = int(field[6])
        name = field.split(".")[1]
        calls = list(t.calls)
        calls[j] = dataclasses.replace(calls[j], **{name: value})
        t = dataclasses.replace(t, calls=tuple(calls))
    f = tmp_path / "nan.parquet"
    write_traces([t], f)
    with pytest.raises(TraceError) as e:
        list(iter_parquet(f))
    assert (e.value.file, e.value.record, e.value.field) == ("nan.parquet", "row 0 (trace_id pq)", field)
    assert "expected a finite number" in e.value.message


def test_nan_bytes_per_token_under_masking_is_exit_2(capsys, tmp_path):
    f = tmp_path / "nan.parquet"
    write_traces(
        [dataclasses.replace(swe_trace([("a", 30)] * 3, trace_id="m"), bytes_per_token=float("nan"))], f
    )
    code = main(["run", str(f), "--policy", "observation_masking", "policy.n=1"])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.strip() == (
        "ctxsim: error: nan.parquet: record row 0 (trace_id m): field bytes_per_token: "
        "expected a finite number, got nan"
    )


def test_a_trace_whose_sums_could_wrap_is_refused_at_load(tmp_path):
    # (calls + 1) x (events' tokens + largest |residual| + largest output) must stay below 2^40
    d = copy.deepcopy(BASE)
    d["events"][3]["tokens"] = 2**39  # the first observation: two calls, so 3 x 2^39 >= 2^40
    for c in d["calls"]:
        c["input_tokens"] = sum(e["tokens"] for e in d["events"][: c["view_end"]])
    f = write_jsonl(tmp_path, d)
    with pytest.raises(TraceError) as e:
        list(iter_jsonl(f))
    assert e.value.field == "<record>" and "reaches the limit of 2^40" in e.value.message
    d["events"][3]["tokens"] = 2**37  # 3 x (2^37 + ...) < 2^40: accepted
    for c in d["calls"]:
        c["input_tokens"] = sum(e["tokens"] for e in d["events"][: c["view_end"]])
    assert [t.trace_id for t in iter_jsonl(write_jsonl(tmp_path, d))] == ["nums"]


# ------------------------------------------------------------------------------------------ importers
def test_usage_counts_missing_versus_refused():
    assert openai_usage({"completion_tokens": 3}, "f.json", "messages[2]").input_tokens is None  # missing
    assert openai_usage({"prompt_tokens": 120.0, "completion_tokens": 3}).input_tokens == 120  # integral
    for bad, why in [
        (-5, "expected an integer in [0, 2^53), got -5"),
        (2**53, "expected an integer in [0, 2^53), got 9007199254740992"),
        (2**63, "expected an integer in [0, 2^53), got 9223372036854775808"),
        (float("nan"), "expected an integer, got float nan"),
        (float("inf"), "expected an integer, got float inf"),
        (12.5, "expected an integer, got float 12.5"),
        (True, "expected an integer, got boolean True"),
        ("120", "expected an integer, got string '120'"),
    ]:
        with pytest.raises(TraceError) as e:
            openai_usage({"prompt_tokens": bad}, "f.json", "messages[2]")
        assert (e.value.file, e.value.record, e.value.field, e.value.message) == (
            "f.json",
            "messages[2]",
            "usage.prompt_tokens",
            why,
        )
    with pytest.raises(
        TraceError, match=r"field usage.prompt_tokens_details.cached_tokens: expected an integer"
    ):
        openai_usage({"prompt_tokens": 9, "prompt_tokens_details": {"cached_tokens": -1}}, "f.json")
    with pytest.raises(TraceError, match=r"field usage.cache_read_input_tokens: expected an integer in"):
        anthropic_usage({"input_tokens": 1, "cache_read_input_tokens": -3}, "f.json")
    with pytest.raises(
        TraceError, match=r"field usage: input \+ cache read \+ cache write = .* not below 2\^53"
    ):
        anthropic_usage({"input_tokens": MAX_COUNT, "cache_read_input_tokens": 1}, "f.json")
    assert usage_count(None, "f", None, "x") is None


def test_times_missing_versus_refused():
    assert unix_time(None, "f", None, "created") is None
    assert unix_time(1_700_000_000, "f", None, "created") == 1_700_000_000.0
    for bad in (10**400, float("nan"), float("inf"), 1.7e12, True, "1700000000"):
        with pytest.raises(TraceError) as e:
            unix_time(bad, "f", "r", "created")
        assert e.value.field == "created" and "unix time" in e.value.message
    assert iso_timestamp("2025-01-02T03:04:05Z") == 1735787045.0
    assert iso_timestamp("not a time") is None  # a probe without a file
    with pytest.raises(TraceError, match=r"f: record r: field ts: expected an ISO-8601 time"):
        iso_timestamp("not a time", "f", "r", "ts")
    with pytest.raises(TraceError, match=r"expected an ISO-8601 time between years 1 and 9999"):
        iso_timestamp("9999-12-31T23:59:59-05:00", "f", "r", "ts")  # past year 9999 in UTC


def _chat(tmp_path, usage: dict, **message_fields):
    msgs = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello", "usage": usage, **message_fields},
    ]
    f = tmp_path / "chat.json"
    f.write_text(json.dumps(msgs))
    return f


def test_chat_import_refuses_impossible_usage_cost_and_time(tmp_path):
    (t,) = load_path(_chat(tmp_path, {"prompt_tokens": 12, "completion_tokens": 3}, created=1_700_000_000))
    assert (t.calls[0].input_tokens, t.calls[0].timestamp) == (12, 1_700_000_000.0)
    cases = [
        ({"prompt_tokens": -1, "completion_tokens": 3}, {}, "usage.prompt_tokens"),
        ({"prompt_tokens": 12, "completion_tokens": 2**63}, {}, "usage.completion_tokens"),
        ({"prompt_tokens": 12, "cost": -0.25}, {}, "usage.cost"),
        ({"prompt_tokens": 12, "cost": "free"}, {}, "usage.cost"),
        ({"prompt_tokens": 12}, {"created": 10**400}, "created"),
        ({"prompt_tokens": 12}, {"timestamp": "tomorrow"}, "timestamp"),
    ]
    for usage, fields, field in cases:
        with pytest.raises(TraceError) as e:
            list(load_path(_chat(tmp_path, usage, **fields)))
        assert (e.value.file, e.value.record, e.value.field) == ("chat.json", "messages[1]", field)


def _mini(mini_dir, tmp_path, edit, call: int = 0):
    """A real run with ``edit`` applied to the provider response of one call."""
    d = json.loads((mini_dir / "django__django-13513.traj.json").read_text())
    msgs = [m for m in d["messages"] if ((m.get("extra") or {}).get("response") or {}).get("usage")]
    edit(msgs[call]["extra"]["response"])
    f = tmp_path / "run.traj.json"
    f.write_text(json.dumps(d))
    return f


@pytest.mark.parametrize(
    "edit, field, message",
    [
        (lambda r: r.update(created=10**400), "extra.response.created", "between years 1 and 9999"),
        (
            lambda r: r["usage"].update(completion_tokens=2**63),
            "extra.response.usage.completion_tokens",
            "2^53",
        ),
        (lambda r: r["usage"].update(prompt_tokens=-1), "extra.response.usage.prompt_tokens", "got -1"),
        (lambda r: r["usage"].update(cost=-1), "extra.response.usage.cost", "expected a number >= 0"),
    ],
)
def test_mini_swe_agent_refuses_impossible_numbers(mini_dir, tmp_path, edit, field, message):
    with pytest.raises(TraceError) as e:
        list(load_path(_mini(mini_dir, tmp_path, edit)))
    assert (e.value.file, e.value.record, e.value.field) == ("run.traj.json", "messages[2]", field)
    assert message in e.value.message


def test_mini_swe_agent_prompt_tokens_zero_imports_and_replays_without_negatives(mini_dir, tmp_path):
    # a provider log that says 0 for a call with a 9,000-token history whose cache is alive: imported as
    # recorded (a negative residual); before, the replay read 7,855 cached tokens for it, uncached -7,855
    # and cost -12,315 micro-USD. Now no modelled number goes below 0, in either replay path
    (t,) = load_path(_mini(mini_dir, tmp_path, lambda r: r["usage"].update(prompt_tokens=0), call=19))
    assert t.calls[19].input_tokens == 0 and t.calls[19].residual_tokens == -8977
    for name in ("raw", "observation_masking"):
        policy = make_policy(name)
        batch = replay_many([t], policy)[0]
        assert record_diff(batch, replay(t, policy, observer=lambda k, v: None)) == []
        for col in ("input_tokens", "cache_read_tokens", "uncached_input_tokens", "cost_microusd"):
            assert batch.calls[col].min() >= 0, (name, col)
        if name == "raw":  # the call reads and writes nothing; its cost is its 152 output tokens ($12/MTok)
            row = [
                int(batch.calls[c][19])
                for c in ("input_tokens", "cache_read_tokens", "uncached_input_tokens")
            ]
            assert row == [0, 0, 0] and int(batch.calls["cost_microusd"][19]) == 1824


# ------------------------------------------------------------------------------- calibration and conf
@pytest.fixture
def calibration(tmp_path, monkeypatch):
    import sim.cost.tokens as tokens

    def use(text: str, name: str = "bytes_per_token.yaml"):
        f = tmp_path / name
        f.write_text(text)
        monkeypatch.setattr(
            tokens, "CALIBRATION_FILE" if name.startswith("bytes") else "TEXT_CALIBRATION_FILE", f
        )
        tokens.bytes_per_token_calibration.cache_clear()
        tokens.text_calibration.cache_clear()
        return tokens

    yield use
    tokens.bytes_per_token_calibration.cache_clear()
    tokens.text_calibration.cache_clear()


@pytest.mark.parametrize(
    "text, where",
    [
        ("default: -1\n", "default: expected a number >= 0.01, got -1"),
        ("default: .nan\n", "default: expected a finite number, got nan"),
        ("default: .inf\n", "default: expected a finite number, got inf"),
        ("models:\n  m: 0\n", "models.m: expected a number >= 0.01, got 0"),
        ("models:\n  m: four\n", "models.m: expected a number, got string 'four'"),
    ],
)
def test_bytes_per_token_calibration_refused_naming_file_and_key(calibration, text, where):
    tokens = calibration(text)
    with pytest.raises(ConfigError) as e:
        tokens.calibrated_bytes_per_token("m")
    assert str(e.value) == f"conf/calibration/bytes_per_token.yaml: {where}"


def test_text_calibration_refused_naming_file_and_key(calibration):
    tokens = calibration("models:\n  m: [1, 2, .nan, 4, 5, 6, 7]\n", "text_tokens.yaml")
    with pytest.raises(
        ConfigError, match=r"text_tokens.yaml: models.m\[2\] \(spaces\): expected a finite number"
    ):
        tokens.text_coefficients("m")
    tokens = calibration("models:\n  m: [1, 2]\n", "text_tokens.yaml")
    with pytest.raises(ConfigError, match=r"text_tokens.yaml: models.m: expected a list of 7 numbers"):
        tokens.text_coefficients("m")


def test_estimates_refuse_a_ratio_out_of_range():
    from sim.cost.tokens import estimate_tokens

    assert estimate_tokens(84, None) == 25  # the seed's 4 bytes per token, 16 bytes of framing
    for bad in (-1.0, 0.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="bytes_per_token"):
            estimate_tokens(84, bad)


def test_derived_ratio_below_the_floor_keeps_the_calibration():
    from sim.cost.tokens import derive_sizes

    # a provider count no text explains: 10^12 tokens for two short messages
    sizes, prov, _, bpt = derive_sizes([3, 4, 5], [2], [10**12], 4.0)
    assert bpt == 4.0 and prov == ["derived", "derived", "estimate"] and sizes[2] == 6


@pytest.mark.parametrize(
    "entry, where",
    [
        (
            "{input: .nan, output: 1}",
            "models.m.input: expected a finite number, got nan (USD per million tokens)",
        ),
        ("{input: -1, output: 1}", "models.m.input: expected a number >= 0, got -1 (USD per million tokens)"),
        (
            "{input: 1, output: 5000}",
            "models.m.output: expected a number <= 1000, got 5000 (USD per million tokens)",
        ),
        ("{input: 1}", "models.m: missing price 'output'"),
        (
            "{input: 1, output: 2, cache_read: true}",
            "models.m.cache_read: expected a number, got boolean True (USD per million tokens)",
        ),
        (
            "{input: 1, output: 2, long_context: {above_tokens: -5, input: 2, output: 3}}",
            "models.m.long_context.above_tokens: expected an integer in [0, 2^53), got -5",
        ),
    ],
)
def test_price_tables_checked_naming_file_and_key(tmp_path, entry, where):
    f = tmp_path / "acme.yaml"
    f.write_text(f"family: none\nmodels:\n  m: {entry}\n")
    with pytest.raises(ConfigError) as e:
        read_price_file(f)
    assert str(e.value) == f"conf/pricing/acme.yaml: {where}"


def test_window_and_cache_tables_checked_naming_file_and_key(tmp_path):
    f = tmp_path / "acme.yaml"
    for entry, msg in [
        ("{window: 0}", "expected a window of at least 1 token"),
        ("{window: 1500000.0}", "expected an integer, got float 1500000.0"),
        ("{}", "expected an integer, got null None"),
    ]:
        f.write_text(f"models:\n  m: {entry}\n")
        with pytest.raises(ConfigError) as e:
            read_windows_file(f)
        assert str(e.value) == f"conf/model/providers/acme.yaml: models.m.window: {msg}"
    good = "min_prefix_tokens: 1024\nlifetime_s: 300\n"
    for extra, msg in [
        ("reuse_fraction: 1.5\n", "reuse_fraction: expected a number <= 1, got 1.5"),
        ("reuse_fraction: .nan\n", "reuse_fraction: expected a finite number, got nan"),
        ("granularity: 0\n", "granularity: expected an integer >= 1, got 0"),
        ("writes: 1\n", "writes: expected true or false, got 1"),
    ]:
        f.write_text(good + extra)
        with pytest.raises(ConfigError) as e:
            read_cache_rules(f, "acme")
        assert str(e.value) == f"conf/cache/acme.yaml: {msg}"
    f.write_text("min_prefix_tokens: 1024\nlifetime_s: .inf\n")
    with pytest.raises(
        ConfigError, match=r"conf/cache/acme.yaml: lifetime_s: expected a finite number, got inf"
    ):
        read_cache_rules(f, "acme")


# ------------------------------------------------------------------------------------ the cache clamps
def negative_residual_trace() -> Trace:
    """Five calls on claude-sonnet-4-5 (writes, 1,024-token minimum); call 3 recorded an input of 0 for
    its 2,280-token view: a residual of -2,280."""
    t = swe_trace(
        [("x" * 40, 600), ("y", 700), ("z", 800), ("w", 900), ("v", 100)], model="claude-sonnet-4-5"
    )
    calls = [dataclasses.replace(c, timestamp=1_700_000_000.0 + c.index) for c in t.calls]
    calls[3] = dataclasses.replace(calls[3], input_tokens=0, residual_tokens=-calls[3].input_tokens)
    return dataclasses.replace(t, calls=tuple(calls))


@pytest.mark.parametrize(
    "name, params, call3, cost",
    [
        # call 2 wrote its 1,470 tokens; call 3 (input 0) may read or write nothing: 7 output tokens at
        # $15/MTok = 105 micro-USD (before: read 1,470, write 810, uncached -2,280, cost -3,256)
        ("raw", {}, (0, 2280, 0, 0, 0, 105), 12865),
        # masking shrinks call 3's view to 1,010: 1,010 - 2,280 would be an input of -1,270 (before)
        ("observation_masking", {"n": 1}, (0, 1010, 0, 0, 0, 105), 10166),
    ],
)
def test_a_negative_residual_gives_no_negative_input_cache_or_cost(name, params, call3, cost):
    t = negative_residual_trace()
    policy = make_policy(name, **params)
    batch = replay_many([t], policy)[0]
    assert record_diff(batch, replay(t, policy, observer=lambda k, v: None)) == []
    cols = ("input_tokens", "view_tokens", "cache_read_tokens", "cache_write_tokens", "uncached_input_tokens")
    assert tuple(int(batch.calls[c][3]) for c in (*cols, "cost_microusd")) == call3
    assert int(batch.calls["cost_microusd"].sum()) == cost


def test_cost_model_step_and_split_runs_clamp_alike():
    rules, price = cache_rules("anthropic"), find_price("claude-sonnet-4-5")
    m = CostModel(rules, price)
    assert m.step(False, 0.0, 2000, 2000, 0, 0) == (0, 2000, 0, 7500)  # the view is written
    assert m.step(False, 1.0, 500, 2500, 2000, 0) == (500, 0, 0, 150)  # read cut to the input
    assert m.step(False, 2.0, 2700, 3000, 2500, 0) == (2500, 200, 0, 1500)  # write cut to what is left
    t = np.array([0.0, 1.0, 2.0])
    inp, view, stable = np.array([2000, 500, 2700]), np.array([2000, 2500, 3000]), np.array([0, 2000, 2500])
    out = split_runs(
        rules, price, t, inp, view, stable, np.zeros(3, dtype=np.int64), np.zeros(3, dtype=np.int64)
    )
    assert [c.tolist() for c in out] == [[0, 500, 2500], [2000, 0, 200], [0, 0, 0], [7500, 150, 1500]]


# ------------------------------------------------------------------------------------------ no wrap
def test_batch_cost_is_exact_for_counts_past_the_pico_usd_range():
    rng = random.Random(7)
    price = find_price("claude-opus-4-1")  # $75/MTok output: 75e6 pico-USD a token
    for scale in (10**4, 2**40, 2**51):
        cols = [np.array([rng.randrange(scale) for _ in range(64)], dtype=np.int64) for _ in range(4)]
        want = [price.cost_microusd(*(int(c[i]) for c in cols)) for i in range(64)]
        assert price.cost_all(*cols).tolist() == want


def test_counts_of_2_62_are_refused_not_wrapped(tmp_path):
    # the case: 2^62 output tokens per call summed to a negative cumulative output. The loader
    # refuses them; a Trace built in Python (no loader) is refused by the replay, in both paths
    d = copy.deepcopy(BASE)
    for c in d["calls"]:
        c["output_tokens"] = 2**62
    with pytest.raises(TraceError, match=r"field calls\[0\].output_tokens: must be <= 2\^53 - 1"):
        list(iter_jsonl(write_jsonl(tmp_path, d)))
    t = swe_trace([("a", 30)] * 4, trace_id="huge")
    t = dataclasses.replace(t, calls=tuple(dataclasses.replace(c, output_tokens=2**50) for c in t.calls))
    policy = make_policy("raw")
    for attempt in (lambda: replay_many([t], policy), lambda: replay(t, policy, observer=lambda k, v: None)):
        with pytest.raises(TraceError) as e:
            attempt()
        assert e.value.record == "huge" and "refused rather than wrapped" in e.value.message
    ok = dataclasses.replace(t, calls=tuple(dataclasses.replace(c, output_tokens=2**46) for c in t.calls))
    assert replay(ok, policy).total("output_tokens") == 4 * 2**46


# --------------------------------------------------------------------------------- JSON and CSV output
def undefined_traces(tmp_path):
    """A priced run of 2 calls with no input at all (hit rate 0/0, no growth exponent) and one of 5."""
    zero = swe_trace([("a", 0)] * 2, trace_id="zero", system=0, task=0, assistant_tokens=0, model="gpt-4o")
    zero = dataclasses.replace(zero, calls=tuple(dataclasses.replace(c, output_tokens=0) for c in zero.calls))
    f = tmp_path / "undefined.jsonl"
    write_traces([zero, swe_trace([("b", 10)] * 5, trace_id="five", model="gpt-4o")], f)
    return f


def strict_json_lines(text: str) -> list:
    from sim.util.jsonl import parse_json

    lines = text.splitlines()
    assert lines
    return [parse_json(line) for line in lines]  # refuses NaN and Infinity


def assert_csv_finite(text: str) -> None:
    import csv
    import io

    for row in csv.reader(io.StringIO(text)):
        assert not {c.strip().lower() for c in row} & {"nan", "inf", "-inf", "infinity", "-infinity"}, row


def test_no_nan_or_infinity_in_run_outputs(capsys, tmp_path):
    f = undefined_traces(tmp_path)
    assert main(["run", str(f), "--format", "json"]) == 0
    rows = strict_json_lines(capsys.readouterr().out)
    zero = next(r for r in rows if r["trace_id"] == "zero")
    assert (zero["cache_hit_rate"], zero["growth_exponent"], zero["cost_microusd"]) == (None, None, 0)
    assert main(["run", str(f), "--format", "csv"]) == 0
    text = capsys.readouterr().out
    assert_csv_finite(text)
    head, first = text.splitlines()[:2]
    cells = dict(zip(head.split(","), first.split(","), strict=True))
    assert (cells["cache_hit_rate"], cells["growth_exponent"]) == ("", "")
    for out in ("calls.csv", "calls.jsonl", "ledger.csv", "ledger.jsonl"):
        kind = "--calls" if out.startswith("calls") else "--ledger"
        assert main(["run", str(f), kind, str(tmp_path / out)]) == 0
        text = (tmp_path / out).read_text()
        assert_csv_finite(text) if out.endswith(".csv") else strict_json_lines(text)
    capsys.readouterr()


def test_table_writers_write_undefined_as_null_or_empty(tmp_path):
    import pandas as pd

    from sim.results.tables import csv_text, json_line, write_frames, write_rows

    row = {"a": 1, "b": float("nan"), "c": float("inf"), "d": None}
    assert csv_text([row]) == "a,b,c,d\n1,,,\n"
    with pytest.raises(ValueError):  # a NaN that reaches a JSON writer is a bug: it fails loudly
        json_line(row)
    assert json_line({**row, "b": None, "c": None}) == '{"a": 1, "b": null, "c": null, "d": null}'
    write_rows([row], tmp_path / "rows.csv")
    assert (tmp_path / "rows.csv").read_text() == "a,b,c,d\n1,,,\n"
    frame = pd.DataFrame({"x": [1.0, float("nan"), float("inf"), -float("inf")], "n": [1, 2, 3, 4]})
    write_frames([frame], tmp_path / "f.csv")
    assert (tmp_path / "f.csv").read_text() == "x,n\n1.0,1\n,2\n,3\n,4\n"
    write_frames([frame], tmp_path / "f.jsonl")
    assert [r["x"] for r in strict_json_lines((tmp_path / "f.jsonl").read_text())] == [1.0, None, None, None]


def test_no_nan_or_infinity_in_results_size_fidelity_bench_policies(capsys, tmp_path, mini_dir):
    from sim.results.tables import result_rows, write_rows

    f = undefined_traces(tmp_path)
    records = replay_many(list(iter_jsonl(f)), make_policy("raw"))
    write_rows(result_rows(records, "test"), tmp_path / "results.parquet")  # None floats: NaN in Parquet
    assert main(["results", str(tmp_path / "results.parquet"), "--format", "json"]) == 0
    strict_json_lines(capsys.readouterr().out)
    assert main(["size", str(f), "--format", "json", "--limits", "60,200", "--keeps", "20"]) == 0
    strict_json_lines(capsys.readouterr().out)
    assert main(["fidelity", str(mini_dir / "django__django-13513.traj.json"), "--format", "json"]) == 0
    strict_json_lines(capsys.readouterr().out)
    assert (
        main(["bench", "--policy", "raw", "--corpus", "embedded", "--repeats", "1", "--format", "json"]) == 0
    )
    strict_json_lines(capsys.readouterr().out)
    assert main(["policies", "--format", "json"]) == 0
    strict_json_lines(capsys.readouterr().out)


@pytest.mark.parametrize(
    "name, knob, value, why",
    [
        ("observation_masking", "n", 10**20, "integers must lie within ±(2^53 - 1)"),  # was OverflowError
        ("observation_masking", "n", 2**63, "integers must lie within ±(2^53 - 1)"),
        (
            "seed_engine",
            "max_duration_s",
            float("inf"),
            "numbers must be finite",
        ),  # crashed the JSON writer
        ("llm_summary", "summary_ratio", float("nan"), "numbers must be finite"),
    ],
)
def test_knob_numbers_out_of_range_are_refused(name, knob, value, why):
    with pytest.raises(ConfigError) as e:
        make_policy(name, **{knob: value})
    assert str(e.value) == f"policy '{name}': {knob}={value!r:.60} is out of range ({why})"


def test_sweep_summaries_sum_exactly_past_int64():
    import pandas as pd

    from sim.results.summary import exact_sum

    col = pd.Series([2**61] * 8 + [None], dtype="Int64")
    assert int(col.sum()) == 0  # pandas' int64 sum wraps silently
    assert exact_sum(col) == 2**64 and exact_sum(pd.Series([], dtype="Int64")) == 0


def test_openhands_response_created_of_10_400_is_refused(tmp_path):
    from sim.util.paths import traces_dir

    src = traces_dir() / "openhands-v0" / "runtime_test_trajs" / "basic.json"
    if not src.is_file():
        pytest.skip("real traces not found (set CTXSIM_TRACES)")
    events = json.loads(src.read_text())
    pos = next(i for i, e in enumerate(events) if (e.get("tool_call_metadata") or {}).get("model_response"))
    events[pos]["tool_call_metadata"]["model_response"]["created"] = 10**400  # OverflowError before
    f = tmp_path / "basic.json"
    f.write_text(json.dumps(events))
    with pytest.raises(TraceError) as e:
        list(load_path(f))
    assert e.value.field == "tool_call_metadata.model_response.created"
    assert "between years 1 and 9999" in e.value.message
