"""What-if transforms (issue 25 item 3): delegate_research and code_mode, exact on a hand-built run."""

from __future__ import annotations

import json

import pytest
from builders import ev

from sim.cli import main
from sim.config.transforms import compose_transforms, take_transforms
from sim.core.types import Call, Trace
from sim.engine.dispatch import replay
from sim.engine.model import ReplayModel
from sim.information.ledger import entries
from sim.metrics.compute import compute_metrics
from sim.policies.base import make_policy
from sim.trace.io import write_traces
from sim.transforms.base import apply_all, make_transform, registered
from sim.transforms.delegate_research import read_only_command
from sim.util.errors import ConfigError, UnknownNameError


def bash(cmd: str) -> str:
    return f"THOUGHT: next.\n```bash\n{cmd}\n```"


def research_run(stated: bool = False) -> Trace:
    """Three read-only round-trips (cat, grep, ls: facts fa, fb, fc), an edit needing fa, an answer
    needing fb. Each call's recorded input is its view (residual 0), output 7. ``stated``: each result
    holds 4 bytes a token and its fact is its first 40 bytes, so a report states each fact in
    summary_fact_tokens (40), the floor of what a fact costs (``ReplayModel.summary_keeps``); else a
    result is one letter and its fact the whole result (300, 200 and 100 tokens to state)."""
    span = {"fact_spans": ((0, 40),)} if stated else {}

    def body(letter: str, tokens: int) -> str:
        return letter * 4 * tokens if stated else letter

    events = [
        ev(0, "system", "sys", 100),
        ev(1, "user", "task", 50),
        ev(2, "assistant", bash("cat a.py"), 10, tool_call_ids=("c0",)),
        ev(3, "tool_result", body("A", 300), 300, tool_call_id="c0", provides=("fa",), **span),
        ev(4, "assistant", bash("cd src && grep -n foo b.py 2>/dev/null"), 10, tool_call_ids=("c1",)),
        ev(5, "tool_result", body("B", 200), 200, tool_call_id="c1", provides=("fb",), **span),
        ev(6, "assistant", bash("ls"), 10, tool_call_ids=("c2",)),
        ev(7, "tool_result", body("C", 100), 100, tool_call_id="c2", provides=("fc",), **span),
        ev(8, "assistant", bash("sed -i s/x/y/ a.py"), 10, tool_call_ids=("c3",), needs=("fa",)),
        ev(9, "tool_result", "ok", 5, tool_call_id="c3"),
        ev(10, "assistant", "done", 10, needs=("fb",)),
    ]
    prefix = [0]
    for e in events:
        prefix.append(prefix[-1] + e.tokens)
    calls = tuple(
        Call(index=j, event_index=a, view_end=a, input_tokens=prefix[a], output_tokens=7, residual_tokens=0)
        for j, a in enumerate((2, 4, 6, 8, 10))
    )
    return Trace(
        "research", "ctxsim-scenario", tuple(events), calls, model="claude-sonnet-4-5", bytes_per_token=4.0
    )


@pytest.mark.parametrize(
    ("command", "ok"),
    [
        ("cat a.py", True),
        ("head -n 5 a.py | grep x", True),
        ("sed -n 1,20p a.py", True),
        ("find . -name '*.py'", True),
        ("cd /testbed && rg foo 2>/dev/null", True),
        ("tree; ls -la", True),
        ("sed -i s/a/b/ f", False),
        ("sed -n -i 1p f", False),
        ("find . -delete", False),
        ("cat a.py > b.py", False),
        ("cat <<'EOF' > f.py\nx\nEOF", False),
        ("grep $(whoami) f", False),
        ("python a.py", False),
        ("cat a.py | wc -l", False),
    ],
)
def test_read_only_commands(command, ok):
    assert read_only_command(command) is ok


def test_registry_lists_the_transforms_and_the_closest_match():
    assert list(registered()) == ["code_mode", "delegate_research"]
    with pytest.raises(
        UnknownNameError, match="registered: code_mode, delegate_research; did you mean 'code_mode'"
    ):
        make_transform("code_mod")
    with pytest.raises(ConfigError, match="has no knob 'n'; knobs: min_span, report_tokens"):
        make_transform("delegate_research", n=3)
    with pytest.raises(ConfigError, match=r"min_span=0 is not an integer in \[1, "):
        make_transform("delegate_research", min_span=0)


def test_delegate_research_moves_the_span_into_a_child():
    """Calls 0-2 (cat, grep, ls) become one delegating call answered by an 80-token report; at 40
    tokens a fact (each is stated in 40: ``research_run(stated=True)``) the report keeps 2 of fc, fb,
    fa. Extractive (the past only: none of them acted on yet) keeps the newest two, fc and fb: fa, which
    the edit needs, is lost."""
    t = research_run(stated=True)
    out = apply_all(t, [make_transform("delegate_research", report_tokens=80)], ReplayModel(t))
    assert [(e.kind, e.tokens) for e in out.events] == [
        ("system", 100), ("user", 50), ("assistant", 10), ("tool_result", 80), ("assistant", 10),
        ("tool_result", 5), ("assistant", 10),
    ]  # fmt: skip
    assert out.events[3].provides == ("fc", "fb") and out.events[3].tool_call_id == "delegate-0"
    assert [(c.event_index, c.view_end, c.output_tokens) for c in out.calls] == [
        (2, 2, 7),
        (4, 4, 7),
        (6, 6, 7),
    ]
    (child,) = out.children
    assert (child.parent_call, child.tool_call_id) == (0, "delegate-0")
    kid = child.trace
    assert [e.tokens for e in kid.events] == [100, 10, 10, 300, 10, 200, 10, 100, 80]
    assert [c.output_tokens for c in kid.calls] == [7, 7, 7, 80] and kid.events[-1].needs == ("fc", "fb")
    (m,) = out.moved
    assert (m.first, m.end, m.call, m.child, m.tokens_moved, m.tokens_after) == (0, 3, 0, 0, 630, 90)
    assert (m.facts_kept, m.facts_lost) == (("fc", "fb"), ("fa",))
    assert out.applied == ("delegate_research(min_span=2,report_tokens=80)",) and out.composite

    r = replay(out, make_policy("raw"))
    got = compute_metrics(r)
    # parent: 150, 150+10+80 = 240, 240+10+5 = 255; child: 110, 110+10+300 = 420, 420+10+200 = 630,
    # 630+10+100 = 740 (the report's call)
    assert (got["parent_input_tokens"], got["child_input_tokens"], got["cumulative_input_tokens"]) == (
        645,
        1900,
        2545,
    )
    assert (got["calls"], got["child_calls"], got["cumulative_output_tokens"]) == (3, 4, 21 + 101)
    # fc, fb reach the parent; fa is declared lost; the edit goes ahead without it
    assert (got["facts_seen"], got["facts_lost"], got["answer_outcome"]) == (3, 1, "degraded")
    assert r.transforms == out.applied
    rows = [e for e in entries(out, r) if e["item"] == -1]
    assert [(e["operation"], e["facts"], e["facts_outcome"]) for e in rows] == [
        ("delegate_research:calls 0-2 to child 0", "fc;fb;fa", "derived;derived;lost")
    ]
    before = compute_metrics(replay(t, make_policy("raw")))  # 150 + 460 + 670 + 780 + 795
    assert (before["cumulative_input_tokens"], before["facts_lost"], before["answer_completed"]) == (
        2855,
        0,
        True,
    )


def test_the_oracle_report_keeps_what_the_parent_needs():
    t = research_run(stated=True)
    model = ReplayModel(t, summarizer="oracle")
    out = apply_all(t, [make_transform("delegate_research", report_tokens=80)], model)
    assert out.events[3].provides == ("fb", "fa") and out.moved[0].facts_lost == ("fc",)
    got = compute_metrics(replay(out, make_policy("raw"), model.like(out)))
    assert (got["facts_lost"], got["answer_completed"]) == (1, True)


def test_min_span_leaves_shorter_spans():
    t = research_run()
    out = apply_all(t, [make_transform("delegate_research", min_span=4)], ReplayModel(t))
    assert out.events == t.events and out.children == () and not out.composite
    assert out.applied == ("delegate_research(min_span=4,report_tokens=2000)",)


def test_code_mode_brokers_n_round_trips_as_one_call():
    """n=2 over four round-trips (the answer never counts): programs of calls 0-1 and 2-3. With a 1-byte
    bound each result keeps its first byte: fa (of A, B) and fc (of C, ok); fb is lost; tokens in
    proportion: ceil(500 * 1/2) = 250 and ceil(105 * 1/3) = 35."""
    t = research_run()
    out = apply_all(t, [make_transform("code_mode", n=2, max_result_bytes=1)], ReplayModel(t))
    assert [(e.kind, e.tokens) for e in out.events] == [
        ("system", 100), ("user", 50), ("assistant", 20), ("tool_result", 250), ("assistant", 20),
        ("tool_result", 35), ("assistant", 10),
    ]  # fmt: skip
    assert out.events[3].provides == ("fa",) and out.events[5].provides == ("fc",) and out.events[3].bounded
    assert out.events[4].needs == ("fa",)  # the second program's edit needs fa, from before it
    assert [(m.first, m.end, m.call, m.child, m.facts_lost) for m in out.moved] == [
        (0, 2, 0, None, ("fb",)),
        (2, 4, 1, None, ()),
    ]
    assert [c.output_tokens for c in out.calls] == [14, 14, 7] and out.children == ()
    got = compute_metrics(replay(out, make_policy("raw")))
    assert (got["cumulative_input_tokens"], got["calls"]) == (150 + 420 + 475, 3)
    assert (got["facts_seen"], got["facts_lost"], got["answer_outcome"]) == (3, 1, "degraded")
    whole = apply_all(t, [make_transform("code_mode", n=2)], ReplayModel(t))
    got = compute_metrics(replay(whole, make_policy("raw")))  # 150, 150+20+500 = 670, 670+20+105 = 795
    assert (got["cumulative_input_tokens"], got["facts_lost"], got["answer_completed"]) == (1615, 0, True)


def test_transforms_compose_and_renumber_earlier_declarations():
    """delegate_research then code_mode n=2: the delegating call and the edit are two round-trips,
    brokered as one program; the child now hangs from that program's call."""
    t = research_run()
    steps = [make_transform("delegate_research", report_tokens=80), make_transform("code_mode", n=2)]
    out = apply_all(t, steps, ReplayModel(t))
    assert len(out.calls) == 2 and out.children[0].parent_call == 0
    assert [(m.transform, m.call) for m in out.moved] == [("delegate_research", 0), ("code_mode", 0)]
    assert len(out.applied) == 2


def test_the_command_line_binds_each_override_to_its_transform(tmp_path, capsys):
    rest, specs = take_transforms(
        ["run", "x.jsonl", "--transform", "delegate_research", "transform.report_tokens=80"]
        + ["--transform=code_mode", "transform.n=2", "--format", "json"]
    )
    assert rest == ["run", "x.jsonl", "--format", "json"]
    assert specs == [("delegate_research", ["transform.report_tokens=80"]), ("code_mode", ["transform.n=2"])]
    built = compose_transforms(specs)
    assert [b.label() for b in built] == [
        "delegate_research(min_span=2,report_tokens=80)",
        "code_mode(n=2,max_result_bytes=51200)",
    ]
    p = tmp_path / "run.jsonl"
    write_traces([research_run()], p)
    argv = [
        "run",
        str(p),
        "--transform",
        "delegate_research",
        "transform.report_tokens=80",
        "--format",
        "json",
    ]
    assert main(argv) == 0
    row = json.loads(capsys.readouterr().out)
    assert (row["cumulative_input_tokens"], row["parent_input_tokens"], row["child_calls"]) == (2545, 645, 4)
    assert row["transforms"] == "delegate_research(min_span=2,report_tokens=80)"
    assert main(["run", str(p), "transform.n=2"]) == 2
    assert "follows the --transform NAME it sets" in capsys.readouterr().err
    assert main(["run", str(p), "--transform", "delegate_research", "transform.n=2"]) == 2
    assert "has no knob 'n'; knobs: min_span, report_tokens" in capsys.readouterr().err
    assert main(["run", str(p), "--transform", "delegate"]) == 2
    assert "did you mean 'delegate_research'" in capsys.readouterr().err


def test_sweep_takes_transforms_and_keys_runs_by_them(tmp_path, capsys):
    """`sweep ... transform=NAME transform.KEY=V` (and `--transform`): rows as `run` gives them, run keys
    that differ from the same sweep without the transform, the plain sweep's keys unchanged."""
    import pandas as pd

    p = tmp_path / "run.jsonl"
    write_traces([research_run()], p)
    base = ["sweep", "policy=raw", f"scenario={p}"]
    assert main([*base, f"results.path={tmp_path / 'plain'}"]) == 0
    assert main([*base, "transform=delegate_research", "transform.report_tokens=80",
                 f"results.path={tmp_path / 'words'}"]) == 0  # fmt: skip
    assert main([*base, "--transform", "delegate_research", "transform.report_tokens=80",
                 f"results.path={tmp_path / 'flag'}"]) == 0  # fmt: skip
    plain, words, flag = (
        pd.read_parquet(tmp_path / n / "results.parquet") for n in ("plain", "words", "flag")
    )
    assert words["run_key"].tolist() == flag["run_key"].tolist() != plain["run_key"].tolist()
    assert (words["cumulative_input_tokens"].tolist(), words["child_calls"].tolist()) == ([2545], [4])
    assert words["transforms"].tolist() == ["delegate_research(min_span=2,report_tokens=80)"]
    assert (plain["cumulative_input_tokens"].tolist(), plain["transforms"].tolist()) == ([2855], [""])
    capsys.readouterr()
    assert main([*base, "transform.n=2", f"results.path={tmp_path / 'bad'}"]) == 2
    assert "follows the transform=NAME it sets" in capsys.readouterr().err


def test_size_takes_transforms(tmp_path, capsys):
    """`size --transform`: the sizing runs on the transformed traces (here the 80-token report loses fa,
    which the edit needs: the baseline no longer completes)."""
    p = tmp_path / "run.jsonl"
    write_traces([research_run(stated=True)], p)
    argv = ["size", str(p), "--limits", "1000,2000", "--keeps", "200", "--format", "json"]
    assert main(argv) == 0
    plain = json.loads(capsys.readouterr().out)["baseline"]
    assert main([*argv, "--transform", "delegate_research", "transform.report_tokens=80"]) == 0
    moved = json.loads(capsys.readouterr().out)["baseline"]
    assert (plain["facts_lost"], plain["facts_seen"], plain["completion"]) == (0, 3, 1.0)
    assert (moved["facts_lost"], moved["facts_seen"], moved["completion"]) == (1, 3, 0.0)
