"""The command line: formats, determinism, and one clear line with exit 2 for every kind of bad input."""

import json
import os
import shutil
import subprocess
import sys

import pytest
from builders import swe_trace

from sim.cli import main
from sim.importers import load_path
from sim.trace.codec import trace_to_dict
from sim.trace.io import write_traces


@pytest.fixture
def suite(tmp_path):
    path = tmp_path / "suite.jsonl"
    write_traces(
        [swe_trace([("a\nb\nc", 100)] * 5, trace_id="t1"), swe_trace([("x", 40)] * 14, trace_id="t2")], path
    )
    return path


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_run_json_is_only_json_and_complete(capsys, suite):
    code, out, err = run(
        capsys, "run", suite, "--policy", "observation_masking", "policy.n=2", "--format", "json"
    )
    assert code == 0
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["trace_id"] for r in rows] == ["t1", "t2"]
    r = rows[0]
    assert r["policy"] == "observation_masking" and r["policy.n"] == 2 and r["policy.polling"] == 1
    assert r["trace_hash"].startswith("sha256:") and r["ctxsim_version"]
    assert r["calls"] == 5 and r["cumulative_input_tokens"] == 150 + 260 + 370 + 395 + 420
    assert r["peak_context_tokens"] == 420
    assert all(not isinstance(v, dict | list) for v in r.values())  # flat values only


def test_run_json_byte_identical_across_runs(capsys, suite):
    a = run(capsys, "run", suite, "--policy", "observation_masking", "--format", "json")[1]
    b = run(capsys, "run", suite, "--policy", "observation_masking", "--format", "json")[1]
    assert a == b and a


def test_run_csv_and_calls_table(capsys, suite, tmp_path):
    import pandas as pd

    code, out, _ = run(capsys, "run", suite, "--format", "csv", "--calls", tmp_path / "calls.parquet")
    assert code == 0
    assert out.splitlines()[0].startswith(
        "trace_id,trace_hash,policy,model,summarizer,pricing,ctxsim_version"
    )
    calls = pd.read_parquet(tmp_path / "calls.parquet")
    assert len(calls) == 5 + 14
    assert calls.loc[calls.trace_id == "t1", "input_tokens"].tolist() == [150, 260, 370, 480, 590]


def test_run_table(capsys, suite):
    code, out, _ = run(capsys, "run", suite)
    assert code == 0 and "cumulative_input_tokens" in out and "2 runs, 19 calls" in out


def one_error_line(err):
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def test_unknown_policy(capsys, suite):
    code, out, err = run(capsys, "run", suite, "--policy", "masking")
    assert code == 2 and out == ""
    line = one_error_line(err)
    assert line.startswith(
        "ctxsim: error: unknown policy 'masking'; "
        "registered: adk_events_compaction, anthropic_clear_tool_uses, "
    )
    assert ", observation_masking, " in line
    assert line.endswith("; did you mean 'observation_masking'?")


def test_unknown_override_key(capsys, suite):
    code, _, err = run(capsys, "run", suite, "--policy", "observation_masking", "policy.window=3")
    assert code == 2
    assert one_error_line(err) == (
        "ctxsim: error: override 'policy.window=3': policy 'observation_masking' has no knob 'window'; "
        "knobs: n, polling"
    )


def test_bad_override_value(capsys, suite):
    code, _, err = run(capsys, "run", suite, "--policy", "observation_masking", "policy.n=-1")
    assert code == 2 and "n=-1 is not an integer >= 1" in one_error_line(err)


def test_unknown_format(capsys, tmp_path):
    p = tmp_path / "notes.json"
    p.write_text('{"hello": "world"}')
    code, _, err = run(capsys, "run", p)
    assert code == 2 and one_error_line(err).startswith("ctxsim: error: notes.json: unknown format")


def test_canonical_record_without_its_schema_fields_names_them(capsys, tmp_path):
    """Before, a canonical record without ``schema_version`` (or with only a trace id) was a file of
    "unknown format": it opens as a canonical record does, so the error names the missing fields."""
    d = trace_to_dict(swe_trace([("out", 5)], trace_id="no-version"))
    del d["schema_version"]
    p = tmp_path / "hand.jsonl"
    p.write_text(json.dumps(d) + "\n")
    code, _, err = run(capsys, "run", p)
    assert code == 2
    assert one_error_line(err) == (
        "ctxsim: error: hand.jsonl: record line 1 (trace_id no-version): "
        "field schema_version: missing required field"
    )
    p.write_text('{"trace_id": "x"}\n')
    code, out, _ = run(capsys, "validate", p)
    assert code == 2
    assert [line.split(": field ")[1] for line in out.strip().splitlines()] == [
        f"{k}: missing required field" for k in ("schema_version", "source_format", "events", "calls")
    ]
    p.write_text('{"hello": "world"}\n')  # nothing of ours: still unknown
    code, _, err = run(capsys, "run", p)
    assert code == 2 and one_error_line(err).startswith("ctxsim: error: hand.jsonl: unknown format")


def test_truncated_source_file(capsys, tmp_path, mini_dir):
    src = sorted(mini_dir.iterdir())[0].read_text()
    p = tmp_path / "cut.traj.json"
    p.write_text(src[: len(src) // 3])
    code, _, err = run(capsys, "run", p)
    assert code == 2 and one_error_line(err).startswith("ctxsim: error: cut.traj.json: invalid JSON: ")


def test_wrong_type_in_source_file(capsys, tmp_path, mini_dir):
    data = json.loads(sorted(mini_dir.iterdir())[0].read_text())
    data["messages"][2]["extra"]["response"]["usage"]["prompt_tokens"] = "1650"
    p = tmp_path / "typed.traj.json"
    p.write_text(json.dumps(data))
    code, _, err = run(capsys, "run", p)
    assert code == 2
    assert one_error_line(err) == (
        "ctxsim: error: typed.traj.json: record messages[2]: field extra.response.usage.prompt_tokens: "
        "expected an integer, got string '1650'"
    )


def test_negative_size_in_canonical(capsys, tmp_path):
    d = trace_to_dict(swe_trace([("a", 3)], trace_id="neg"))
    d["events"][1]["tokens"] = -2
    p = tmp_path / "neg.jsonl"
    p.write_text(json.dumps(d) + "\n")
    code, _, err = run(capsys, "run", p)
    assert code == 2
    assert one_error_line(err).startswith(
        "ctxsim: error: neg.jsonl: record line 1 (trace_id neg): field events[1].tokens: must be >= 0, got -2"
    )


def test_no_partial_files_on_failure(capsys, suite, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"schema_version": 1, "trace_id": \n')
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    code, _, _ = run(capsys, "import", suite, bad, "-o", out_dir / "all.parquet")
    assert code == 2
    code, _, _ = run(capsys, "run", suite, bad, "--calls", out_dir / "calls.csv")
    assert code == 2
    assert list(out_dir.iterdir()) == []


def test_import_then_validate(capsys, mini_dir, tmp_path):
    files = sorted(mini_dir.iterdir())[:3]
    code, _, err = run(capsys, "import", *files, "-o", tmp_path / "three.jsonl")
    assert code == 0 and "wrote 3 traces" in err
    code, out, _ = run(capsys, "validate", tmp_path / "three.jsonl", files[0])
    assert code == 0
    assert out.splitlines() == [
        "three.jsonl: ok, format ctxsim-canonical",
        f"{files[0].name}: ok, format mini-swe-agent-1 (1 traces)",
    ]


def test_validate_lists_every_problem(capsys, tmp_path):
    d = trace_to_dict(swe_trace([("a", 3), ("b", 4)], trace_id="v"))
    d["events"][2]["tokens"] = -1
    d["calls"][0]["output_tokens"] = "x"
    p = tmp_path / "v.jsonl"
    p.write_text(json.dumps(d) + "\n" + "{broken\n")
    code, out, _ = run(capsys, "validate", p)
    assert code == 2
    assert out.splitlines() == [
        "v.jsonl: record line 1 (trace_id v): field events[2].tokens: must be >= 0, got -1",
        "v.jsonl: record line 1 (trace_id v): field calls[0].output_tokens: "
        "expected integer or null, got string 'x'",
        "v.jsonl: record line 2: invalid JSON: Expecting property name enclosed in double quotes (column 2)",
    ]


def test_policies_lists_knobs(capsys):
    code, out, _ = run(capsys, "policies", "--format", "json")
    rows = {json.loads(x)["policy"]: json.loads(x) for x in out.splitlines()}
    assert rows["observation_masking"]["knobs"] == {"n": 10, "polling": 1}
    # head_chars / tail_chars default to null: half of max_chars each (5,000 at the default 10,000)
    assert rows["tool_result_head_tail"]["knobs"] == {
        "max_chars": 10000,
        "head_chars": None,
        "tail_chars": None,
    }


def test_console_script_smoke(suite):
    exe = shutil.which("ctxsim") or str(__import__("pathlib").Path(sys.executable).parent / "ctxsim")
    p = subprocess.run(
        [exe, "run", str(suite), "--format", "json", "--pricing", "gpt-4o"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert p.returncode == 0 and len(p.stdout.splitlines()) == 2
    # priced by name, but the recorded model's window is still looked up: its absence is said, once
    assert p.stderr.splitlines() == [
        "ctxsim: warning: model (none recorded) has no context window in conf/model/providers/: "
        "no over-window check"
    ]


@pytest.mark.parametrize(
    "override,message",
    [
        ("policy.context_token_limit=-5", "context_token_limit=-5 is not null or an integer >= 1"),
        ("policy.mode=fast", "mode='fast' is not one of prune, summarize, prune-then-summarize"),
    ],
)
def test_bad_seed_engine_config_refused_before_any_run(capsys, suite, tmp_path, override, message):
    code, out, err = run(
        capsys, "run", suite, "--policy", "seed_engine", override, "--calls", tmp_path / "c.csv"
    )
    assert code == 2 and out == "" and not (tmp_path / "c.csv").exists()
    assert one_error_line(err) == f"ctxsim: error: policy 'seed_engine': {message}"


def test_keep_recent_at_or_over_limit_refused(capsys, suite):
    code, _, err = run(
        capsys,
        "run",
        suite,
        "--policy",
        "seed_engine",
        "policy.context_token_limit=8000",
        "policy.keep_recent_tokens=9000",
    )
    assert code == 2
    assert "keep_recent_tokens=9000 is not below context_token_limit: an integer in [1, 7999]" in err


def test_seed_engine_run_with_window_override(capsys, suite):
    code, out, _ = run(
        capsys, "run", suite, "--policy", "seed_engine", "model.window=300", "--format", "json"
    )
    rows = [json.loads(x) for x in out.splitlines()]
    assert code == 0 and {r["finish_reason"] for r in rows} == {"context-overflow"}
    assert rows[0]["policy.context_token_limit"] is None and rows[0]["policy.mode"] == "prune-then-summarize"


def fact_trace(path, trace_id):
    """Four turns; result r0 (event 3) provides f0, the last action (event 8) needs it."""
    import dataclasses

    t = swe_trace([("x" * 384, 100)] * 4, trace_id=trace_id)
    provides, needs = {3: ("f0",)}, {8: ("f0",)}
    ev = tuple(
        dataclasses.replace(e, provides=provides.get(e.index, ()), needs=needs.get(e.index, ()))
        for e in t.events
    )
    write_traces([dataclasses.replace(t, events=ev)], path)


def test_explain_shows_items_facts_and_cache(capsys, tmp_path):
    fact_trace(tmp_path / "ex.jsonl", "ex")
    code, out, _ = run(
        capsys,
        "explain",
        tmp_path / "ex.jsonl",
        "--policy",
        "observation_masking",
        "policy.n=1",
        "--call",
        "3",
    )
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["item", "kind", "category", "state", "tokens", "original_tokens", "facts"]
    assert lines[2 + 3].split() == ["3", "tool_result", "conversation", "masked", "15", "100", "f0"]
    assert "call 3 of ex under observation_masking: input 420 = view 420" in out
    # the builder's commands (`cmd 3`) are none the rules know: every result is conversation, all of it
    # recent (call 3 is within 5 calls of the start); no window, so no reserve
    assert (
        "working set: instructions 100, tool definitions 0, recent conversation 320, older conversation 0, "
        "repository map 0, file read 0, test output 0\n"
    ) in out
    assert "facts this action needs: f0 (recovered)" in out
    code, _, err = run(capsys, "explain", tmp_path / "ex.jsonl", "--call", "9")
    assert code == 2 and "--call 9 is not in [0, 3]" in err


def test_on_missing_override(capsys, tmp_path):
    fact_trace(tmp_path / "om.jsonl", "om")
    args = ["run", tmp_path / "om.jsonl", "--policy", "observation_masking", "policy.n=1", "--format", "json"]
    code, out, _ = run(capsys, *args, "model.on_missing=fail")
    row = json.loads(out)
    assert code == 0 and row["finish_reason"] == "missing-information" and row["answer_completed"] is False
    code, out, _ = run(capsys, *args)
    assert json.loads(out)["refetch_calls"] == 1
    code, _, err = run(capsys, *args, "model.on_missing=guess")
    assert code == 2 and "model.on_missing='guess' is not one of refetch, fail, degrade" in err


def test_demo_sizes_compares_and_reports(capsys, tmp_path):
    """The README's main job on a small scenario: sweeps, a recommendation, a report."""
    from sim.util.paths import EMBEDDED_SUITE

    out = tmp_path / "latest"
    code, text, _ = run(capsys, "demo", EMBEDDED_SUITE / "closed_loop.jsonl", "--out", out, "--workers", "1")
    assert code == 0
    assert "recommended: seed_engine " in text and "observation_masking n=1" in text
    assert (out / "report.html").is_file() and (out / "report.md").is_file()
    assert (out / "sweeps" / "seed_engine" / "results.parquet").is_file()
    # the best setting of each policy (tests/test_size.py holds the figures on the whole suite)
    import pandas as pd

    best = pd.read_csv(out / "best_of_policies.csv")
    assert best["policy"].tolist() == ["seed_engine", "observation_masking", "openhands_llm_summarizing"]
    assert "the best setting of each policy" in text


def test_the_oracle_summarizer_is_labelled_an_upper_bound(capsys, tmp_path):
    """results, report and explain say so wherever the oracle's summaries appear."""
    from sim.util.paths import EMBEDDED_SUITE

    suite = EMBEDDED_SUITE / "closed_loop.jsonl"
    words = ["sweep", f"scenario={suite}", "policy=seed_engine", "policy.context_token_limit=16000"]
    words += ["policy.keep_recent_tokens=4000", "model.summarizer=extractive,oracle"]
    assert run(capsys, *words, f"results.path={tmp_path / 's'}")[0] == 0
    code, out, _ = run(capsys, "run", suite, "--policy", "raw", "model.summarizer=oracle")
    assert code == 0 and "summarizer oracle: it keeps what later actions need; an upper bound" in out
    assert "upper bound" not in run(capsys, "run", suite, "--policy", "raw")[1]
    code, out, _ = run(capsys, "results", tmp_path / "s")
    assert code == 0 and "oracle (upper bound)" in out and "extractive " in out
    assert "oracle: the summarizer keeps what later actions need; an upper bound, not a harness" in out
    from sim.report.make import make_report

    md, _ = make_report([tmp_path / "s"], tmp_path / "r")
    assert "model.summarizer=oracle [oracle summarizer: upper bound]" in md.read_text(encoding="utf-8")
    args = ["explain", suite, "--trace", "needle", "--policy", "seed_engine", "policy.mode=summarize"]
    args += ["policy.context_token_limit=16000", "policy.keep_recent_tokens=4000", "--call", "41"]
    code, out, _ = run(capsys, *args, "model.summarizer=oracle")
    assert code == 0 and "summaries by the oracle summarizer: an upper bound" in out
    assert "upper bound" not in run(capsys, *args)[1]


def test_explain_shows_a_missed_retrieval(capsys):
    from sim.util.paths import EMBEDDED_SUITE

    args = ["explain", EMBEDDED_SUITE / "closed_loop.jsonl", "--trace", "spill", "--policy"]
    args += [
        "spill_large_results",
        "policy.threshold_tokens=2000",
        "model.on_missing=degrade",
        "--call",
        "19",
    ]
    code, out, _ = run(capsys, *args, "model.retrieval_recall=0.5")
    needs = [line for line in out.splitlines() if line.startswith("facts this action needs:")]
    assert code == 0 and needs == [
        "facts this action needs: "
        + ", ".join(
            f"file:module-{k} ({'not_retrieved' if k in (2, 3, 5, 6) else 'recovered'})" for k in range(8)
        )
    ]
    code, _, err = run(capsys, *args, "model.retrieval_recall=1.5")
    assert code == 2 and "model.retrieval_recall=1.5 is not a number in [0, 1]" in err


def test_version_did_you_mean_and_the_sweep_flags(capsys, tmp_path):
    import pandas as pd

    from sim import __version__
    from sim.util.paths import EMBEDDED_SUITE

    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out == f"ctxsim {__version__}\n"
    with pytest.raises(SystemExit) as e:
        main(["size", "scenarios/suite", "--target-complete", "0.9"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.startswith("usage: ctxsim size ")
    assert "'--target-complete' (did you mean --target-completion?)" in err
    # sweep takes the flags the other commands take, beside its KEY=VALUE words
    suite = EMBEDDED_SUITE / "closed_loop.jsonl"
    code, _, _ = run(
        capsys,
        "sweep",
        "--policy",
        "raw",
        "--model",
        "claude-sonnet-4-5",
        f"scenario={suite}",
        f"results.path={tmp_path / 's'}",
    )
    df = pd.read_parquet(tmp_path / "s" / "results.parquet")
    assert code == 0 and set(df["pricing"]) == {"claude-sonnet-4-5"} and set(df["model.window"]) == {200000}
    code, _, _ = run(
        capsys,
        "sweep",
        "--policy",
        "raw",
        "--pricing",
        "gpt-4o",
        "--window",
        "64000",
        f"scenario={suite}",
        f"results.path={tmp_path / 't'}",
    )
    df = pd.read_parquet(tmp_path / "t" / "results.parquet")
    assert code == 0 and set(df["pricing"]) == {"gpt-4o"} and set(df["model.window"]) == {64000}
    code, _, err = run(capsys, "sweep", "--policy", "raw", "--model", "gpt-9", f"scenario={suite}")
    assert code == 2 and "--pricing gpt-9: no such model" in err


def test_an_unpriced_calls_cost_is_empty_not_minus_one(capsys, tmp_path):
    import pandas as pd

    from sim.util.paths import EMBEDDED_SUITE

    suite = EMBEDDED_SUITE / "closed_loop.jsonl"  # synthetic: no price
    for ext in ("csv", "jsonl", "parquet"):
        assert run(capsys, "run", suite, "--calls", tmp_path / f"c.{ext}")[0] == 0
    assert pd.read_parquet(tmp_path / "c.parquet")["cost_microusd"].isna().all()
    assert all(json.loads(line)["cost_microusd"] is None for line in (tmp_path / "c.jsonl").open())
    assert pd.read_csv(tmp_path / "c.csv")["cost_microusd"].isna().all()
    assert run(capsys, "run", suite, "--calls", tmp_path / "p.parquet", "--pricing", "gpt-4o")[0] == 0
    priced = pd.read_parquet(tmp_path / "p.parquet")["cost_microusd"]
    assert priced.notna().all() and (priced >= 0).all() and priced.sum() > 0


def test_an_unpriced_sweep_warns_and_names_the_pricing_choices(capsys, tmp_path):
    from sim.util.paths import EMBEDDED_SUITE

    suite = EMBEDDED_SUITE / "closed_loop.jsonl"
    code, _, err = run(capsys, "sweep", "policy=raw", f"scenario={suite}", f"results.path={tmp_path / 'u'}")
    assert code == 0 and "warning: 4 of 4 runs are unpriced" in err and "claude-sonnet-4-5" in err
    code, _, err = run(
        capsys, "sweep", "policy=raw", f"scenario={suite}", f"results.path={tmp_path / 'p'}", "pricing=gpt-4o"
    )
    assert code == 0 and "unpriced" not in err


def test_run_and_explain_take_model_and_window(capsys):
    """--model and --window on run and explain, as size and sweep take them."""
    from sim.util.paths import EMBEDDED_SUITE

    suite = EMBEDDED_SUITE / "closed_loop.jsonl"
    code, out, _ = run(capsys, "run", suite, "--window", "5000", "--format", "json")
    rows = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and [(r["trace_id"], r["finish_reason"], r["calls"]) for r in rows] == [
        ("grep_and_read", "context-overflow", 3),
        ("working_set_16k", "context-overflow", 4),
        ("needle", "context-overflow", 1),
        ("spill", "context-overflow", 3),
    ]
    code, out, _ = run(capsys, "run", suite, "--model", "gpt-4o", "--format", "json")
    rows = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and {(r["pricing"], r["finish_reason"]) for r in rows} == {("gpt-4o", "completed")}
    code, out, _ = run(capsys, "explain", suite, "--trace", "needle", "--call", "0", "--model", "gpt-4o")
    assert code == 0 and "uncached 750; cost $0.002475;" in out  # priced at gpt-4o's rates, in USD
    code, out, _ = run(capsys, "explain", suite, "--trace", "needle", "--call", "0", "--window", "100")
    assert code == 0 and "call 0 was never sent: the run ended with context-overflow" in out
    for argv, message in (
        (["--model", "gpt-4o", "--pricing", "claude-sonnet-4-5"], "disagree: give one"),
        (["--window", "0"], "--window 0 is not an integer >= 1"),
        (["--model", "gpt-9"], "gpt-9"),
    ):
        code, _, err = run(capsys, "run", suite, *argv)
        assert code == 2 and message in err


def test_datasets_progress_bars_never_reach_ctxsim_output(tmp_path):
    """`datasets` draws "Generating train split: N examples" bars on standard error even without a
    terminal; ctxsim turns them off, so standard error holds only ctxsim's own lines."""
    pytest.importorskip("datasets")
    from sim.util.paths import EMBEDDED_SUITE

    exe = shutil.which("ctxsim") or str(__import__("pathlib").Path(sys.executable).parent / "ctxsim")
    data = tmp_path / "d.parquet"
    write_traces(list(load_path(EMBEDDED_SUITE / "closed_loop.jsonl")), data)
    env = {**os.environ, "HF_DATASETS_CACHE": str(tmp_path / "cache")}  # a fresh cache: the split is built
    p = subprocess.run(
        [exe, "run", "--dataset", str(data), "--format", "json", "--pricing", "gpt-4o"],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    assert p.returncode == 0 and len(p.stdout.splitlines()) == 4
    assert "examples" not in p.stderr and all(line.startswith("ctxsim: ") for line in p.stderr.splitlines())


# ------------------------------------------------------------------------- one flag style: run, size, sweep
SHARED_FLAGS = ("--on-missing", "--summarizer", "--transform")  # and --workers where work is split


def test_the_flags_choices_are_the_mock_models():
    """The parser spells the mock model's choices itself (no numpy at start): the same as the model's."""
    from sim.commands.common import ON_MISSING_CHOICES, SUMMARIZER_CHOICES
    from sim.engine.model import ON_MISSING, SUMMARIZERS

    assert ON_MISSING_CHOICES == ON_MISSING and SUMMARIZER_CHOICES == SUMMARIZERS


@pytest.mark.parametrize("command", ["run", "size", "sweep"])
def test_run_size_and_sweep_list_the_same_flags_in_their_help(command):
    from sim.cli import build_parser

    sub = build_parser()._subparsers._group_actions[0].choices[command]  # type: ignore[union-attr]
    text = " ".join(sub.format_help().split())
    assert all(flag in text for flag in SHARED_FLAGS)
    from sim.util.forkmap import MAX_WORKERS

    # run replays in one process: no --workers that would change nothing; elsewhere the range the help
    # states is the one --workers is checked against
    assert ("--workers" in text and f"in [1, {MAX_WORKERS}]" in text) == (command != "run")


@pytest.mark.parametrize("command", ["run", "size", "sweep"])
@pytest.mark.parametrize(
    "argv, message",
    [
        (["--on-missing", "guess"], "--on-missing: invalid choice: 'guess' (choose from 'refetch', 'fail', "),
        (["--summarizer", "best"], "--summarizer: invalid choice: 'best' (choose from 'extractive', "),
        (["--workers", "0"], "--workers 0 is not in [1, 64]"),  # run: unrecognized (it splits no work)
        (["--transf", "code_mode"], "argument --transform: spell it in full, as --transform"),
    ],
)
def test_a_bad_flag_value_is_exit_2_naming_the_flag(capsys, suite, tmp_path, command, argv, message):
    if command == "run" and argv[0] == "--workers":
        message = "unrecognized arguments: '--workers', '0'"
    out = tmp_path / "s"
    words = ["policy=raw", f"scenario={suite}", f"results.path={out}"] if command == "sweep" else [suite]
    try:
        code = main([command, *map(str, words), *argv])
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    assert code == 2 and message in capsys.readouterr().err and not out.exists()


def test_run_flags_give_what_the_model_words_give(capsys, tmp_path):
    fact_trace(tmp_path / "om.jsonl", "om")
    args = ["run", tmp_path / "om.jsonl", "--policy", "observation_masking", "policy.n=1", "--format", "json"]
    default = run(capsys, *args)[1]
    for flag, word in [
        (["--on-missing", "fail"], ["model.on_missing=fail"]),
        (["--summarizer", "oracle"], ["model.summarizer=oracle"]),
    ]:
        code, by_flag, _ = run(capsys, *args, *flag)
        assert code == 0 and by_flag == run(capsys, *args, *word)[1]
    assert run(capsys, *args, "--on-missing", "fail")[1] != default  # the flag does something
    # a word on the line wins over its flag, as on sweep
    assert run(capsys, *args, "--on-missing", "fail", "model.on_missing=refetch")[1] == default


def test_size_flags_give_what_the_words_give(capsys):
    from sim.util.paths import EMBEDDED_SUITE

    base = ["size", EMBEDDED_SUITE / "closed_loop.jsonl", "--model", "claude-sonnet-4-5", "--format", "json"]
    base += ["--limits", "16000,32000", "--keeps", "2000,4000"]
    code, by_flag, _ = run(capsys, *base, "--on-missing", "fail", "--summarizer", "oracle", "--workers", "1")
    assert code == 0
    assert json.loads(by_flag)["assumptions"]["mock_model"]["on_missing"] == "fail"
    words = ["model.on_missing=fail", "model.summarizer=oracle", "workers=1"]
    assert run(capsys, *base, *words) == (0, by_flag, run(capsys, *base, *words)[2])
    code, _, err = run(capsys, *base, "model.on_missing=guess")
    assert code == 2 and "model.on_missing='guess' is not one of refetch, fail, degrade" in err
    code, _, err = run(capsys, *base, "workers=0")
    assert code == 2 and "workers=0 is not in [1, 64]" in err
    code, _, err = run(capsys, *base, "model.window=1000")
    assert code == 2 and "is not one of model.on_missing=, model.summarizer=, workers=" in err


def test_sweep_flags_give_what_the_words_give(capsys, tmp_path):
    import pandas as pd

    from sim.cli import build_parser
    from sim.commands.sweep import sweep_flags

    flags = ["--on-missing", "fail", "--summarizer", "oracle", "--workers", "2"]
    words = ["model.on_missing=fail", "model.summarizer=oracle", "workers=2"]
    assert sweep_flags(build_parser().parse_args(["sweep", *flags])) == words
    fact_trace(tmp_path / "om.jsonl", "om")
    grid = ["policy=observation_masking", "policy.n=1,3", f"scenario={tmp_path / 'om.jsonl'}"]
    assert run(capsys, "sweep", *grid, f"results.path={tmp_path / 'f'}", *flags)[0] == 0
    # the flags stand for words given first (a word on the line wins)
    assert run(capsys, "sweep", *words, *grid, f"results.path={tmp_path / 'w'}")[0] == 0
    by_flag = pd.read_parquet(tmp_path / "f" / "results.parquet")
    assert by_flag.equals(pd.read_parquet(tmp_path / "w" / "results.parquet"))
    assert set(by_flag["model.on_missing"]) == {"fail"} and set(by_flag["summarizer"]) == {"oracle"}


def test_a_bad_demo_workers_leaves_the_last_study_in_place(capsys, tmp_path):
    kept = tmp_path / "sweeps" / "raw" / "results.parquet"
    kept.parent.mkdir(parents=True)
    kept.write_bytes(b"the last study")
    code, _, err = run(capsys, "demo", "--out", tmp_path, "--workers", "0")
    assert code == 2 and "--workers 0 is not in [1, 64]" in err and kept.read_bytes() == b"the last study"


def test_a_bad_demo_window_exits_2_naming_it(capsys, tmp_path):
    kept = tmp_path / "sweeps" / "raw" / "results.parquet"
    kept.parent.mkdir(parents=True)
    kept.write_bytes(b"the last study")
    code, _, err = run(capsys, "demo", "--out", tmp_path, "--window", "0")
    assert code == 2 and "demo: --window=0 is not an integer in [1, 2^53)" in err
    code, _, err = run(capsys, "demo", "--out", tmp_path, "--window", "2000")
    assert code == 2 and "demo: --window=2000 leaves no room for a context_token_limit" in err
    assert kept.read_bytes() == b"the last study"


def test_sweep_workers_word_and_flag_follow_one_rule(capsys, tmp_path):
    grid = ["policy=raw", f"results.path={tmp_path / 'r'}"]
    assert "workers=65 is not in [1, 64]" in run(capsys, "sweep", *grid, "workers=65")[2]
    assert "--workers 65 is not in [1, 64]" in run(capsys, "sweep", *grid, "--workers", "65")[2]
    assert not (tmp_path / "r").exists()
