"""Children (issue 25 item 2): sub-agent runs in the canonical trace (schema version 2), validated with
file, record and field, and replayed with their spend accounted into the parent's totals."""

from __future__ import annotations

import dataclasses
import json

import pytest
from builders import swe_trace

import sim.engine.dispatch
from sim.cli import main
from sim.core.types import MAX_CHILD_DEPTH, SCHEMA_VERSION, Child
from sim.engine.dispatch import replay, replay_many
from sim.metrics.compute import compute_metrics
from sim.policies.base import make_policy
from sim.trace.codec import trace_from_dict, trace_hash, trace_to_dict
from sim.trace.io import iter_jsonl, iter_parquet, write_traces
from sim.util.errors import TraceError

# a child of 3 calls: inputs 150, 150+10+100 = 260, 260+10+200 = 470 (sum 880); a parent of 2 calls
# whose first spawned it: 150 and 150+10+10 = 170 (sum 320); every call outputs 7 tokens
KID = swe_trace([("a", 100), ("b", 200), ("c", 50)], trace_id="kid", model="claude-sonnet-4-5")
PARENT = swe_trace([("x", 10), ("report", 50)], trace_id="par", model="claude-sonnet-4-5")
WITH_CHILD = dataclasses.replace(PARENT, children=(Child(0, KID, "c0"),))


def test_schema_version_is_2_and_a_trace_without_children_stays_a_version_1_record():
    """The writer uses the lowest version that holds the record: without children, version 1 byte for
    byte (older readers load it, its hash is unchanged); with children, version 2."""
    assert SCHEMA_VERSION == 2
    d = trace_to_dict(PARENT)
    assert d["schema_version"] == 1 and "children" not in d
    assert trace_to_dict(WITH_CHILD)["schema_version"] == 2 and "children" in trace_to_dict(WITH_CHILD)
    assert trace_from_dict(d) == PARENT and trace_from_dict({**d, "schema_version": 2}) == PARENT
    with pytest.raises(TraceError) as e:
        trace_from_dict({**d, "schema_version": 3})
    assert e.value.field == "schema_version"
    assert trace_hash(WITH_CHILD) != trace_hash(PARENT)


def test_children_round_trip_through_jsonl_and_parquet(tmp_path):
    nested = dataclasses.replace(KID, children=(Child(2, PARENT, None),))  # a child with a child
    t = dataclasses.replace(PARENT, children=(Child(0, nested, "c0"), Child(1, KID, "c1")))
    for name in ("t.jsonl", "t.parquet"):
        write_traces([t, PARENT], tmp_path / name)
        read = iter_jsonl if name.endswith("jsonl") else iter_parquet
        back, plain = list(read(tmp_path / name))
        assert back.children == t.children and plain.children == ()
        assert trace_hash(back) == trace_hash(t) and trace_hash(plain) == trace_hash(PARENT)


def _bad(children) -> dict:
    return {**trace_to_dict(PARENT), "children": json.dumps(children)}


def _child(pc=0, tcid="c0", trace=None) -> dict:
    return {"parent_call": pc, "tool_call_id": tcid, "trace": trace_to_dict(trace or KID)}


@pytest.mark.parametrize(
    ("children", "field", "message"),
    [
        ([_child(pc=2)], "children[0].parent_call", "expected a call index in [0, 2), got 2"),
        ([_child(pc="0")], "children[0].parent_call", "got '0'"),
        ([_child(tcid="c1")], "children[0].tool_call_id", "'c1' is not a tool call of call 0"),
        ([{"parent_call": 0, "trace": 3}], "children[0].trace", "expected a canonical trace record"),
        ([_child(), {"parent_call": 0, "x": 1}], "children[1]", "expected an object with parent_call"),
        ({"parent_call": 0}, "children", "expected a JSON array of children"),
    ],
)
def test_bad_children_name_file_record_and_field(children, field, message):
    with pytest.raises(TraceError) as e:
        trace_from_dict(_bad(children), "t.jsonl", "line 3")
    assert (e.value.file, e.value.record, e.value.field) == ("t.jsonl", "line 3 (trace_id par)", field)
    assert message in e.value.message


def test_a_childs_bad_field_is_named_from_the_top():
    kid = trace_to_dict(KID)
    kid["events"][2]["tokens"] = -1
    with pytest.raises(TraceError) as e:
        trace_from_dict(_bad([{"parent_call": 0, "tool_call_id": None, "trace": kid}]), "t.jsonl", "line 1")
    assert e.value.field == "children[0].trace.events[2].tokens"


def test_nesting_is_bounded():
    t = KID
    for _ in range(MAX_CHILD_DEPTH):  # MAX_CHILD_DEPTH levels below the top: accepted
        t = dataclasses.replace(PARENT, children=(Child(0, t, None),))
    assert trace_from_dict(trace_to_dict(t)).children[0].parent_call == 0
    deeper = dataclasses.replace(PARENT, children=(Child(0, t, None),))
    with pytest.raises(TraceError) as e:
        trace_from_dict(trace_to_dict(deeper), "t.jsonl", "line 1")
    assert e.value.field.endswith(".children") and f"deeper than {MAX_CHILD_DEPTH} levels" in e.value.message


def test_validate_exits_2_naming_the_field(tmp_path, capsys):
    p = tmp_path / "bad.jsonl"
    p.write_text(json.dumps(_bad([_child(pc=9)])) + "\n")
    assert main(["validate", str(p)]) == 2
    out = capsys.readouterr()
    assert "bad.jsonl" in out.out + out.err and "children[0].parent_call" in out.out + out.err


def test_the_childs_spend_joins_the_parents_totals():
    """Raw replay reproduces recorded inputs: parent 150 + 170, child 150 + 260 + 470."""
    m = compute_metrics(replay(WITH_CHILD, make_policy("raw")))
    assert (m["parent_input_tokens"], m["child_input_tokens"], m["cumulative_input_tokens"]) == (
        320,
        880,
        1200,
    )
    assert (m["calls"], m["child_calls"], m["cumulative_output_tokens"]) == (2, 3, 35)
    alone, own = (compute_metrics(replay(t, make_policy("raw"))) for t in (KID, PARENT))
    assert m["cost_microusd"] == alone["cost_microusd"] + own["cost_microusd"] and alone["cost_microusd"] > 0
    assert m["child_cost_microusd"] == alone["cost_microusd"]
    assert m["cache_read_tokens"] == alone["cache_read_tokens"] + own["cache_read_tokens"]
    # without children the new columns are zero and the totals the parent's own
    assert (own["child_calls"], own["child_input_tokens"], own["child_cost_microusd"]) == (0, 0, 0)
    assert own["parent_input_tokens"] == own["cumulative_input_tokens"] == 320
    unpriced = compute_metrics(replay(WITH_CHILD, make_policy("raw"), pricing=None))
    assert unpriced["cost_microusd"] is None and unpriced["child_cost_microusd"] is None


def test_a_childs_grace_answer_settles_as_success_with_exhausted_visible():
    """max_turns=2: the child's third call is its grace turn (tools forbidden) and the child settles
    budget-exhausted:turns; the parent's two calls fit, so the parent completes, and sees the exhausted
    child in child_exhausted (effect-agent: SubagentCompleted with finishReason budget-exhausted)."""
    r = replay(WITH_CHILD, make_policy("seed_engine", max_turns=2))
    (kid,) = r.children
    assert kid.finish_reason == "budget-exhausted:turns" and kid.calls["kind"].tolist() == [0, 0, 2]
    m = compute_metrics(r)
    assert (r.finish_reason, m["answer_completed"], m["exhausted"]) == ("completed", True, False)
    assert (m["child_exhausted"], m["child_calls"]) == (1, 3)


def test_fast_paths_decline_traces_with_children(monkeypatch):
    """A batch mixing traces with and without children: the one with children never reaches the batch
    path (prepare_many), and every record equals the per-call loop's."""
    seen = []
    real = sim.engine.dispatch.prepare_many

    def spy(traces, *a, **k):
        seen.extend(t.trace_id for t in traces)
        return real(traces, *a, **k)

    monkeypatch.setattr(sim.engine.dispatch, "prepare_many", spy)
    policy = make_policy("observation_masking", n=1)
    batch = replay_many([PARENT, WITH_CHILD, KID], policy)
    assert "par" in seen and seen.count("par") == 1 and "kid" in seen
    looped = replay(WITH_CHILD, policy, observer=lambda k, v: None)
    assert compute_metrics(batch[1]) == compute_metrics(looped)
    assert compute_metrics(batch[0]) == compute_metrics(replay(PARENT, policy, observer=lambda k, v: None))


def test_a_sweep_over_traces_with_children_reports_parent_vs_child_spend(tmp_path):
    """Children ride through a sweep (their spend in the rows) and the report draws the parent vs child
    figure only then: the same sweep without children has no such section."""
    import pandas as pd

    from sim.report.make import make_report
    from sim.sweep.execute import SweepSpec, run_sweep

    out = {}
    for name, traces in (("kids", [WITH_CHILD, KID]), ("plain", [PARENT, KID])):
        scenario = tmp_path / f"{name}.jsonl"
        write_traces(traces, scenario)
        spec = SweepSpec(
            policy="raw", scenario=str(scenario), pricing="claude-sonnet-4-5", results=str(tmp_path / name)
        )
        path = run_sweep(spec, workers=1, progress=False)
        df = pd.read_parquet(path)
        out[name] = (df, make_report([path], tmp_path / f"{name}-report")[0])
    df, md = out["kids"]
    by = df.set_index("trace_id")  # rows come in run-key order
    assert (by.loc["par", "parent_input_tokens"], by.loc["par", "child_input_tokens"]) == (320, 880)
    assert (by.loc["par", "cumulative_input_tokens"], by.loc["kid", "cumulative_input_tokens"]) == (1200, 880)
    assert by.loc["kid", "child_input_tokens"] == 0
    text = md.read_text(encoding="utf-8")
    assert "## Parent vs child spend" in text and "](figures/parent_vs_child_spend.png)" in text
    assert (md.parent / "figures" / "parent_vs_child_spend.png").read_bytes()[:4] == b"\x89PNG"
    _, plain = out["plain"]
    assert "Parent vs child spend" not in plain.read_text(encoding="utf-8")
    assert not (plain.parent / "figures" / "parent_vs_child_spend.png").exists()


def test_a_child_that_fails_sends_no_report():
    """The child's last turn needs a fact of its first result, which observation masking (n=1) hides;
    under model.on_missing=fail the child ends with missing-information: no answer, so the parent's
    tool result for it (the report, providing 'rep', which the parent's answer needs) brings nothing
    and the parent fails too. With refetch the child re-reads, answers, and the parent completes."""
    from sim.engine.model import ReplayModel

    kid_events = list(KID.events)
    kid_events[3] = dataclasses.replace(kid_events[3], provides=("seen",))
    kid_events[6] = dataclasses.replace(kid_events[6], needs=("seen",))
    kid = dataclasses.replace(KID, events=tuple(kid_events))
    par_events = list(PARENT.events)
    par_events[3] = dataclasses.replace(par_events[3], provides=("rep",))
    par_events[4] = dataclasses.replace(par_events[4], needs=("rep",))
    parent = dataclasses.replace(PARENT, events=tuple(par_events), children=(Child(0, kid, "c0"),))
    policy = make_policy("observation_masking", n=1)
    for on_missing, child_finish, parent_finish, failed in (
        ("fail", "missing-information", "missing-information", 1),
        ("refetch", "completed", "completed", 0),
    ):
        r = replay(parent, policy, ReplayModel(parent, on_missing=on_missing))
        m = compute_metrics(r)
        assert (r.children[0].finish_reason, r.finish_reason, m["child_failed"]) == (
            child_finish,
            parent_finish,
            failed,
        )
        assert m["facts_lost"] == failed  # 'rep' never reached the parent
        assert r.trace_hash == trace_hash(parent)  # the same run, whatever its child did
