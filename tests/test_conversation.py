"""Conversations of several runs (issue 25 items 1, 4 and 5's conversation parts): schema version 2, the
seed engine's durable compaction record across runs, per-run metrics, the generator, Claude Code
sessions, the batch path declining, the conversation-growth figure."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from scenarios.closed_loop import scenario
from scenarios.conversation import conversation
from sim.cli import main
from sim.core.types import ItemState
from sim.engine.dispatch import replay, replay_many
from sim.metrics.compute import compute_metrics
from sim.metrics.conversation import per_run
from sim.metrics.working_set import calls_table
from sim.policies.base import make_policy, registered
from sim.trace.codec import trace_from_dict, trace_hash, trace_to_dict
from sim.trace.io import write_traces
from sim.util.errors import ConfigError, TraceError

REPO = Path(__file__).resolve().parent.parent
LIMIT, KEEP, SUMMARY_MAX = 16000, 4000, 2048
# the generator's 5-run conversation (seed 0): each run's opening prompt in tokens
RAW_OPENINGS = (1689, 20257, 37898, 54279, 70774)
PERSIST_OPENINGS = (1689, 11608, 16474, 15601, 14250)
NO_RECORD_OPENINGS = (1689, 22341, 41712, 59928, 79054)


def seed(persist: bool):
    return make_policy(
        "seed_engine", context_token_limit=LIMIT, keep_recent_tokens=KEEP, persist_compaction=persist
    )


@pytest.fixture(scope="module")
def conv():
    return conversation()


@pytest.fixture(scope="module")
def replays(conv):
    return {
        "raw": replay(conv, make_policy("raw"), pricing="claude-sonnet-4-5"),
        "persist": replay(conv, seed(True), pricing="claude-sonnet-4-5"),
        "no_record": replay(conv, seed(False), pricing="claude-sonnet-4-5"),
    }


# ------------------------------------------------------------------------------------------ the trace
def test_generator_makes_five_runs(conv):
    assert conv.runs == 5
    assert conv.run_starts == (0, 10, 19, 28, 36)
    assert [e.run_index for e in conv.events].count(0) == 21  # system, task, 9 steps, the final answer
    assert all(c.run_index == conv.events[c.event_index].run_index for c in conv.calls)
    assert conversation(runs=1).runs == 1
    with pytest.raises(ValueError, match="runs=0"):
        conversation(runs=0)


def test_single_run_traces_keep_version_1_bytes_and_hash():
    t = scenario("grep_and_read")
    d = trace_to_dict(t)
    assert d["schema_version"] == 1
    assert all("run_index" not in e for e in d["events"]) and all("run_index" not in c for c in d["calls"])
    baseline = [json.loads(line) for line in (REPO / "gates" / "ci_baseline.jsonl").open()]
    assert trace_hash(t) == next(r["trace_hash"] for r in baseline if r["trace_id"] == "grep_and_read")


def test_conversation_round_trips_as_version_2(conv, tmp_path):
    d = trace_to_dict(conv)
    assert d["schema_version"] == 2
    assert d["events"][21]["run_index"] == 1 and "run_index" not in d["events"][20]
    assert trace_from_dict(d) == conv
    from sim.trace.io import redact

    assert [e.run_index for e in redact(conv).events] == [e.run_index for e in conv.events]
    for name in ("c.jsonl", "c.parquet"):
        write_traces([conv], tmp_path / name)
        from sim.importers import load_path

        (back,) = list(load_path(tmp_path / name))
        assert dataclasses.replace(back, source_file=None) == conv


def _bad(d: dict, edit) -> TraceError:
    d = json.loads(json.dumps(d))
    edit(d)
    with pytest.raises(TraceError) as err:
        trace_from_dict(d, "t.jsonl", "line 1")
    return err.value


def test_bad_run_indices_name_file_record_and_field(conv):
    d = trace_to_dict(conv)

    def gap(x):
        for e in x["events"][21:]:
            e["run_index"] += 1

    err = _bad(d, gap)
    assert err.field == "events[21].run_index" and "expected 0 or 1" in str(err) and "t.jsonl" in str(err)
    err = _bad(d, lambda x: x.update(schema_version=1))
    assert err.field == "events[21].run_index" and "needs schema_version 2" in str(err)
    err = _bad(d, lambda x: x["calls"][10].update(run_index=0))
    assert err.field == "calls[10].run_index" and "belongs to run 1" in str(err)
    err = _bad(d, lambda x: x["events"][0].update(run_index=1))
    assert err.field == "events[0].run_index"

    def callless(x):  # the last run loses its calls: it has no opening prompt
        x["calls"] = x["calls"][:36]
        for e in x["events"][73:]:
            e["needs"] = []

    err = _bad(d, callless)
    assert err.field == "events[73].run_index" and "run 4 has no call" in str(err)
    err = _bad(d, lambda x: x["events"][5].update(run_index=-1))
    assert err.field == "events[5].run_index"


def test_validate_exits_2_on_a_bad_run_index(conv, tmp_path, capsys):
    d = trace_to_dict(conv)
    d["calls"][3]["run_index"] = 2
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(d) + "\n")
    assert main(["validate", str(path)]) == 2
    out = capsys.readouterr()
    text = out.out + out.err
    assert "bad.jsonl" in text and "calls[3].run_index" in text and "line 1" in text


# ------------------------------------------------------------------------------- replay across runs
def test_opening_prompts_with_and_without_the_durable_record(replays):
    assert replays["raw"].opening_prompts == RAW_OPENINGS
    assert replays["persist"].opening_prompts == PERSIST_OPENINGS
    assert replays["no_record"].opening_prompts == NO_RECORD_OPENINGS
    # on: every later run opens within the limit plus the summary (prior runs' records only as the
    # summary and cleared results), however many runs came before
    assert all(o <= LIMIT + SUMMARY_MAX for o in PERSIST_OPENINGS[1:])
    assert max(PERSIST_OPENINGS[1:]) < 2 * min(PERSIST_OPENINGS[1:])


def test_without_the_record_every_prior_runs_raw_output_replays(conv, replays):
    """Off: a run opens on every prior run's raw records (settle-time bounds kept; none here), plus what
    the agent re-read into the conversation before it: raw's opening prompt + those re-reads, exactly."""
    no_record = replays["no_record"]
    reread_before = [sum(t for k, _, _, t in no_record.rereads if k < start) for start in conv.run_starts]
    assert [r + x for r, x in zip(RAW_OPENINGS, reread_before, strict=True)] == list(NO_RECORD_OPENINGS)
    assert all(b > a for a, b in zip(NO_RECORD_OPENINGS, NO_RECORD_OPENINGS[1:], strict=False))


def test_durable_record_covers_every_prior_run(conv):
    """At run 5's opening the view holds runs 1-4 as the summary: their items are SUMMARIZED."""
    covered: set[int] = set()

    def observe(k, view):
        if k == conv.run_starts[4] - 1:
            covered.update(
                conv.events[i].run_index for i in range(view.n) if view.state[i] == ItemState.SUMMARIZED
            )

    replay(conv, seed(True), observer=observe)
    assert covered == {0, 1, 2, 3}


def test_result_row_metrics(replays):
    m = {k: compute_metrics(r) for k, r in replays.items()}
    assert [m[k]["runs"] for k in m] == [5, 5, 5]
    assert m["raw"]["max_opening_prompt_tokens"] == 70774
    assert m["persist"]["max_opening_prompt_tokens"] == 16474
    assert m["no_record"]["max_opening_prompt_tokens"] == 79054
    assert m["raw"]["live_context_tokens"] == 84794  # raw's last request: the whole conversation
    assert m["persist"]["live_context_tokens"] == 16896
    assert m["no_record"]["live_context_tokens"] == 16091
    assert m["persist"]["cumulative_input_tokens"] == 609104
    assert m["no_record"]["cumulative_input_tokens"] == 616372
    assert m["no_record"]["summary_calls"] > m["persist"]["summary_calls"]  # re-summarized every run


def test_single_run_metrics():
    r = replay(scenario("grep_and_read"), make_policy("raw"))
    m = compute_metrics(r)
    assert (m["runs"], m["max_opening_prompt_tokens"]) == (1, None)
    assert m["live_context_tokens"] == int(r.calls["input_tokens"][-1]) == m["peak_context_tokens"]
    assert r.opening_prompts == ()


def test_other_policies_carry_their_state_across_runs(conv):
    """Frameworks keep compaction in the conversation: a multi-run trace replays exactly as the same
    events as one run (only the per-run figures differ)."""
    one = dataclasses.replace(
        conv,
        events=tuple(dataclasses.replace(e, run_index=0) for e in conv.events),
        calls=tuple(dataclasses.replace(c, run_index=0) for c in conv.calls),
    )
    for name, knobs in (("observation_masking", {"n": 3}), ("claude_code_auto_compact", {})):
        a, b = replay(conv, make_policy(name, **knobs)), replay(one, make_policy(name, **knobs))
        for col in a.calls:
            assert (a.calls[col] == b.calls[col]).all(), (name, col)
        assert a.runs == 5 and b.runs == 1 and len(a.opening_prompts) == 5
        if name == "observation_masking":
            assert compute_metrics(a)["compactions"] > 0  # it did act, in every run


def test_batch_path_declines_conversations(conv, monkeypatch):
    import sim.engine.dispatch as engine

    seen = []
    real = engine.prepare_many

    def spy(traces, *args):
        seen.extend(t.runs for t in traces)
        return real(traces, *args)

    monkeypatch.setattr(engine, "prepare_many", spy)
    policy = make_policy("observation_masking", n=3)
    single = scenario("grep_and_read")
    batch = replay_many([conv, single, conv], policy)
    assert seen and set(seen) == {1}  # only the one-run trace reached the batch path
    loop = replay(conv, policy, observer=lambda k, v: None)  # the per-call loop, the reference
    for col in loop.calls:
        assert (batch[0].calls[col] == loop.calls[col]).all() and (
            batch[2].calls[col] == loop.calls[col]
        ).all()
    assert batch[0].opening_prompts == loop.opening_prompts


def test_persist_compaction_knob_is_checked():
    with pytest.raises(ConfigError, match="persist_compaction='no' is not true or false"):
        make_policy("seed_engine", persist_compaction="no")
    assert make_policy("seed_engine").persists_compaction is True
    assert make_policy("raw").persists_compaction is True


# ---------------------------------------------------------------------------------- per-run output
def test_calls_table_per_run_columns(conv, replays):
    df = calls_table(conv, replays["persist"])
    assert list(df.columns[-3:]) == ["run_index", "opening_prompt_tokens", "live_context_tokens"]
    assert df["opening_prompt_tokens"].dropna().tolist() == list(PERSIST_OPENINGS)
    assert df["live_context_tokens"].dropna().tolist() == [11154, 16082, 15167, 13710, 16896]
    assert sorted(set(df["run_index"])) == [0, 1, 2, 3, 4]
    pr = per_run(conv, replays["persist"])
    assert pr.cumulative_input_tokens[-1] == 609104
    assert pr.cumulative_input_tokens == sorted(pr.cumulative_input_tokens)


def test_run_scenario_conversation_prints_one_row(tmp_path, capsys):
    calls = tmp_path / "calls.csv"
    argv = [
        "run",
        "--scenario",
        "conversation",
        "--policy",
        "seed_engine",
        f"policy.context_token_limit={LIMIT}",
    ]
    argv += [f"policy.keep_recent_tokens={KEEP}", "--format", "json", "--calls", str(calls)]
    assert main(argv) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == 1
    row = rows[0]
    assert (row["runs"], row["max_opening_prompt_tokens"], row["live_context_tokens"]) == (5, 16474, 16896)
    assert row["policy.persist_compaction"] is True
    keys = list(row)  # appended after the columns that were there, in this order
    i = keys.index("runs")
    assert keys[i : i + 3] == ["runs", "max_opening_prompt_tokens", "live_context_tokens"]
    assert i > keys.index("answer_fact_recall")
    import pandas as pd

    assert pd.read_csv(calls)["opening_prompt_tokens"].dropna().astype(int).tolist() == list(PERSIST_OPENINGS)
    assert (
        main(
            [
                "run",
                "--scenario",
                "conversation",
                "--policy",
                "seed_engine",
                "policy.persist_compaction=false",
            ]
        )
        == 0
    )
    table = capsys.readouterr().out
    assert "max_opening_prompt_tokens" in table and "runs" in table
    assert main(["run", "--scenario", "conversations"]) == 2


# ------------------------------------------------------------------------------- Claude Code sessions
def _record(kind: str, uuid: str, content, **extra) -> dict:
    d = {"type": kind, "sessionId": "s1", "uuid": uuid, "timestamp": "2026-01-01T00:00:00Z", **extra}
    if kind == "assistant":
        d["message"] = {"id": f"m{uuid}", "model": "claude-sonnet-4-5", "content": content,
                        "usage": {"input_tokens": 100 + len(uuid), "output_tokens": 10}}  # fmt: skip
    else:
        d["message"] = {"role": "user", "content": content}
    return d


def test_claude_code_session_prompts_open_runs(tmp_path):
    """Each prompt the user typed after the model answered opens a run; a local command, its output, an
    interruption notice or a meta record does not; a last prompt never answered stays in the last run."""
    from sim.importers import load_path

    records = [
        _record("user", "u1", "Fix the failing test in app.py"),
        _record(
            "assistant",
            "a1",
            [{"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "app.py"}}],
        ),
        _record("user", "u2", [{"type": "tool_result", "tool_use_id": "t1", "content": "def f(): pass"}]),
        _record("assistant", "a2", [{"type": "text", "text": "Fixed."}]),
        _record("user", "u3", "<command-name>/cost</command-name>"),
        _record("user", "u4", "Caveat: local command output follows", isMeta=True),
        _record("user", "u5", "Now add a docstring"),
        _record("assistant", "a3", [{"type": "text", "text": "Done."}]),
        _record("user", "u6", "[Request interrupted by user]"),
        _record("user", "u7", "And a type hint"),
        _record("assistant", "a4", [{"type": "text", "text": "Added."}]),
        _record("user", "u8", "Thanks, one more thing"),  # never answered
    ]
    path = tmp_path / "session.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    (t,) = list(load_path(path))
    assert t.runs == 3
    assert [e.run_index for e in t.events] == [0, 0, 0, 0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert [c.run_index for c in t.calls] == [0, 0, 1, 2]
    out = tmp_path / "canonical.jsonl"
    write_traces([t], out)
    (back,) = list(load_path(out))
    assert back.runs == 3 and json.loads(out.read_text())["schema_version"] == 2


def test_shared_claude_code_fixture_has_three_runs():
    from sim.importers import load_path
    from sim.util.paths import traces_dir

    path = traces_dir() / "claude-code-fixtures" / "representative_messages.jsonl"
    if not path.is_file():
        pytest.skip(f"shared traces not found at {path.parent} (set CTXSIM_TRACES)")
    by_id = {t.trace_id: t for t in load_path(path)}
    t = by_id["test_session"]
    assert t.runs == 3 and t.run_starts == (0, 1, 3)
    assert compute_metrics(replay(t, make_policy("raw")))["runs"] == 3


@pytest.mark.parametrize(
    ("sub", "trace_id", "starts"),
    [
        ("openhands-sdk-v1", "cd945624-03b9-487e-bdd4-018e3f531dfd", (0, 2)),  # a message sent after it ran
        ("openhands-v0/runtime_test_trajs/basic_interactions.json", "basic_interactions", (0, 1, 2)),
    ],
)
def test_openhands_resumed_conversations_have_runs(sub, trace_id, starts):
    from sim.importers import load_paths
    from sim.util.paths import traces_dir

    path = traces_dir() / sub
    if not path.exists():
        pytest.skip(f"shared traces not found at {path} (set CTXSIM_TRACES)")
    (t,) = [t for t in load_paths([path]) if t.trace_id == trace_id]
    assert t.run_starts == starts and t.runs == len(starts)
    assert all(t.events[t.calls[k].view_end - 1].kind == "user" for k in starts[1:])  # a user's message


# ------------------------------------------------------------------------------------------- report
def test_report_draws_conversation_growth(conv, tmp_path):
    from sim.report.make import make_report
    from sim.sweep.execute import SweepSpec, run_sweep

    scenario_file = tmp_path / "conv.jsonl"
    write_traces([conv], scenario_file)
    results = run_sweep(
        SweepSpec(
            policy="seed_engine",
            grid=(f"policy.context_token_limit={LIMIT}", f"policy.keep_recent_tokens={KEEP}"),
            scenario=str(scenario_file),
            pricing="claude-sonnet-4-5",
            results=str(tmp_path / "sw"),
        ),
        workers=1,
        progress=False,
    )
    md, _ = make_report([results], tmp_path / "out")
    text = md.read_text(encoding="utf-8")
    assert "](figures/conversation_growth.png)" in text
    assert (md.parent / "figures" / "conversation_growth.png").read_bytes()[:4] == b"\x89PNG"
    assert "conversation` (5 runs)" in text and "16,896 tokens in run 5" in text and "609,104" in text


@pytest.mark.parametrize("name", sorted(registered()))
def test_every_policy_conforms_on_a_conversation(name):
    """Every registered policy on the 5-run conversation, with the conformance checker's settings (for
    seed_engine also without the durable record): deterministic, input untouched, pairs never split,
    sizes sane, its declared bound kept in every request of every run."""
    from test_conformance import settings_of

    from sim.checks.conformance import check_policy

    t = conversation()
    settings = settings_of(name)
    if name == "seed_engine":
        settings = settings + [{**s, "persist_compaction": False} for s in settings]
    for params in settings:
        assert check_policy(make_policy(name, **params), [t]) == [], params


def test_explain_names_the_run(conv, tmp_path, capsys):
    path = tmp_path / "conv.jsonl"
    write_traces([conv], path)
    argv = ["explain", str(path), "--policy", "seed_engine", f"policy.context_token_limit={LIMIT}"]
    assert main([*argv, f"policy.keep_recent_tokens={KEEP}", "--call", "28"]) == 0
    out = capsys.readouterr().out
    assert "run 4 of the conversation's 5 (its calls 28-35); it opened on 15,601 tokens (this call)" in out
    assert "the whole view (no call reported yet, a new run, or the view was just compacted)" in out


def test_an_importers_inconsistent_runs_are_refused():
    """A built trace (an importer's) whose calls disagree with their events' runs is a TraceError."""
    from sim.importers.common import checked

    t = conversation()
    bad = dataclasses.replace(t, calls=tuple(dataclasses.replace(c, run_index=0) for c in t.calls))
    with pytest.raises(TraceError, match="belongs to run 1") as err:
        checked(bad, "x.jsonl")
    assert err.value.field == "calls[10].run_index"
    assert checked(t, "x.jsonl") is t


def test_a_conversation_that_stops_early(conv):
    """A window of 30,000 tokens stops raw in run 2: the row keeps the trace's 5 runs, the per-run figures
    cover the runs reached."""
    r = replay(conv, make_policy("raw"), window=30000)
    m = compute_metrics(r)
    assert r.finish_reason == "context-overflow" and r.opening_prompts == (1689, 20257)
    assert (m["runs"], m["max_opening_prompt_tokens"], m["live_context_tokens"]) == (5, 20257, 29319)
    pr = per_run(conv, r)
    assert pr.live_context_tokens == [19771, 29319] and pr.cumulative_input_tokens == [104007, 226787]


def test_a_pipeline_hands_each_run_to_its_steps():
    """A pipeline of one seed_engine step opens every run as the seed engine alone does, with the
    durable record and without it (the run hooks reach the step)."""
    for persist, want in ((True, PERSIST_OPENINGS), (False, NO_RECORD_OPENINGS)):
        step = {"name": "seed_engine", "context_token_limit": LIMIT, "keep_recent_tokens": KEEP}
        step["persist_compaction"] = persist
        r = replay(conversation(), make_policy("pipeline", steps=[step]), pricing=None)
        assert r.opening_prompts == want


def test_a_transform_keeps_each_call_in_its_run():
    """code_mode merges round-trips inside one run: the merged calls and events keep their run, so the
    conversation still has its five runs, opening where they did."""
    from sim.engine.model import ReplayModel
    from sim.transforms.base import apply_all, make_transform

    conv = conversation()
    t = apply_all(conv, [make_transform("code_mode", n=2)], ReplayModel(conv))
    assert t.moved and t.runs == 5
    assert [e.run_index for e in t.events] == sorted(e.run_index for e in t.events)
    assert [c.run_index for c in t.calls] == [t.events[c.event_index].run_index for c in t.calls]
    opening = [t.events[t.calls[k].event_index - 1] for k in t.run_starts[1:]]
    assert [e.kind for e in opening] == ["user"] * 4  # each later run still opens with its task
