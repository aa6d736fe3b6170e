"""Issue 26 item 4: replaying a trace under the policy it was recorded with reproduces the recorded run.

A need counts only if the request the recorded agent sent at that call held its fact
(``sim.information.recorded_request``); SWE-agent's own tools, OpenHands' file editor and Claude Code's
Read/Edit have file rules (``sim.information.facts``, ``sim.information.tool_facts``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sim.analysis.fidelity import recorded_replay_policy
from sim.engine.dispatch import replay
from sim.importers import load_path, load_paths, registered
from sim.importers.common import Message
from sim.information.facts import OPEN_FILE, SweToolOp, swe_fact_table, swe_tool_op
from sim.information.recorded_request import masked_from, present_needs
from sim.information.tool_facts import tool_fact_table
from sim.metrics.compute import compute_metrics
from sim.policies.base import make_policy
from sim.util.paths import traces_dir

registered()
from sim.importers.claude_code import file_ops  # noqa: E402
from sim.importers.openhands_v0 import file_op  # noqa: E402

TRACES = traces_dir()
# every shared folder, one per format (MANIFEST.md); the OpenHands V0 folder holds two formats
SHARED = (
    "mini-swe-agent-gemini3pro/trajs",
    "swe-agent",
    "openhands-v0",
    "openhands-sdk-v1",
    "inspect-ai",
    "tau-bench",
    "claude-code-fixtures",
)


@pytest.fixture(scope="module", params=SHARED)
def shared(request):
    folder = TRACES / request.param
    if not folder.is_dir():
        pytest.skip(f"real traces not found at {folder} (set CTXSIM_TRACES to the shared traces folder)")
    return request.param, list(load_paths([folder]))


def test_every_shared_trace_replays_its_recorded_run(shared):
    name, traces = shared
    assert traces, name
    for t in traces:
        m = compute_metrics(replay(t, recorded_replay_policy(t)))
        got = (m["calls"], m["refetch_calls"], m["retrieve_calls"], m["answer_outcome"])
        assert got == (len(t.calls), 0, 0, "complete"), (name, t.trace_id, t.recorded_policy)


def test_the_masked_swe_agent_runs_replay_under_their_masking():
    folder = TRACES / "swe-agent"
    if not folder.is_dir():
        pytest.skip(f"real traces not found at {folder} (set CTXSIM_TRACES to the shared traces folder)")
    traces = list(load_paths([folder]))
    masked = {t.trace_id: t for t in traces if t.recorded_policy.get("name") == "observation_masking"}
    assert sorted(masked) == ["6e44b9__sweagenttestrepo-1c2844", "marshmallow-code__marshmallow-1867"]
    for t in masked.values():
        assert recorded_replay_policy(t).name == "observation_masking"
    # marshmallow's steps keep the messages sent: observations 3, 5 ... 15 were masked from call 6 on,
    # exactly as SWE-agent's rule says; its final answer needs the latest window of fields.py (in view)
    t = masked["marshmallow-code__marshmallow-1867"]
    assert t.events[26].needs == ("read:src/marshmallow/fields.py@21", "constraint@0", "goal@1")


# ------------------------------------------------------------------------------ the recorded request
def test_masked_from_is_swe_agents_last_n_observations():
    # system, template, then (action, observation) x 4, final action
    kinds = ["system", "user"] + ["assistant", "tool_result"] * 4 + ["assistant"]
    assert masked_from(kinds, n=2, polling=1) == [None, None, None, 8, None, 10, None, None, None, None, None]
    # polling 2: the boundary moves every second observation (4 in view at event 8: 1 and 2 masked)
    assert masked_from(kinds, n=1, polling=2) == [None, None, None, 8, None, 8, None, None, None, None, None]
    assert masked_from(kinds, n=5, polling=1) == [None] * 11


def test_present_needs_keeps_a_need_some_held_provider_gives():
    provides = [["a"], ["b"], ["a"], [], []]
    needs = [[], [], [], ["a", "b"], ["a", "b"]]
    # event 0 hidden from 3 on, event 1 from 4 on, event 2 never: "a" stays (event 2), "b" goes at 4
    assert present_needs(provides, needs, [3, 4, None, None, None]) == [[], [], [], ["a", "b"], ["a"]]
    assert present_needs(provides, needs, [None] * 5) == needs


def _swe_v1(actions: list[tuple[str, str]], processors: list, step_messages: bool = False) -> dict:
    """A SWE-agent 1.x trajectory: each (action, observation) a step; the last action submits."""
    history = [
        {"role": "system", "content": "You are a programmer.", "message_type": "system_prompt"},
        {"role": "user", "content": "Fix the bug in src/a.py.", "message_type": "observation"},
    ]
    trajectory = []
    for action, obs in actions:
        history.append({"role": "assistant", "content": action, "action": action, "message_type": "action"})
        history.append({"role": "user", "content": obs, "message_type": "observation"})
        trajectory.append(
            {"action": action, "observation": obs, "response": action, "state": {"working_dir": "/repo"}}
        )
    if step_messages:  # the history as sent at the next call: observations masked as SWE-agent does
        kinds = ["system", "user"] + ["assistant", "tool_result"] * len(actions)
        n = processors[0]["n"]
        for k, step in enumerate(trajectory):
            upto = 4 + 2 * k
            seen = kinds[:upto] + ["assistant"]
            hidden = masked_from(seen, n, 1)
            step["messages"] = [
                {**m, "content": "Old environment output: (1 lines omitted)"} if hidden[j] is not None else m
                for j, m in enumerate(history[:upto])
            ]
    return {
        "trajectory": trajectory,
        "history": history,
        "info": {"exit_status": "submitted", "model_stats": {"tokens_sent": 10, "api_calls": len(actions)}},
        "replay_config": {"agent": {"model": {"name": "gpt-4o"}, "history_processors": processors}},
    }


DIFF = "diff --git a/src/a.py b/src/a.py\n--- a/src/a.py\n+++ b/src/a.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"
GREP_THEN_EDIT = [
    ("grep -n x src/a.py", "1:x = 1"),
    ("sed -i 's/x = 1/x = 2/' src/a.py", ""),
    ("cat src/a.py", "x = 2"),
    ("python -c 'import a'", ""),
    ("ls", "src"),
    ("submit", DIFF),
]


@pytest.mark.parametrize("step_messages", [False, True])
def test_a_masked_read_is_not_a_need_of_the_masked_call(tmp_path, step_messages):
    """The issue's failure: the final answer "needed" a read the recorded agent had masked. Under
    last_n_observations n=2 the re-read (event 7) is masked from the final call (event 12) on: the
    answer's need of it is dropped, so the replay under the recorded masking adds no call."""
    p = tmp_path / "inst__x-1.traj"
    processors = [{"type": "last_n_observations", "n": 2}]
    p.write_text(json.dumps(_swe_v1(GREP_THEN_EDIT, processors, step_messages)))
    (t,) = load_path(p)
    assert t.recorded_policy == {"name": "observation_masking", "n": 2, "polling": 1}
    assert t.events[3].provides == ("read:src/a.py@3",)
    assert t.events[4].needs == ("read:src/a.py@3",)  # the edit: event 3 is in its request
    assert t.events[7].provides == ("read:src/a.py@7",)
    assert t.events[12].needs == ("constraint@0", "goal@1")  # read:src/a.py@7 masked from event 12 on
    m = compute_metrics(replay(t, recorded_replay_policy(t)))
    assert (m["calls"], m["refetch_calls"], m["answer_outcome"]) == (6, 0, "complete")
    # the same run recorded raw: the final answer needs the re-read
    raw = _swe_v1(GREP_THEN_EDIT, [])
    p.write_text(json.dumps(raw))
    (r,) = load_path(p)
    assert r.events[12].needs == ("read:src/a.py@7", "constraint@0", "goal@1")
    # ... which a masking of n=2 then loses: one refetch
    m = compute_metrics(replay(r, make_policy("observation_masking", n=2)))
    assert (m["calls"], m["refetch_calls"]) == (7, 1)


def test_the_issues_run_grep_then_the_editor_replays_in_its_12_calls(tmp_path):
    """The issue's shape: ``grep -n`` reads the file, ``str_replace_editor`` views and edits it, then 8
    more steps and the submission, under last_n_observations n=5. Before, the editor's commands had no
    rules: the answer "needed" grep's read, masked by then, and the replay added a refetch (13 calls)."""
    cat = "Here's the result of running `cat -n` on /repo/src/a.py:\n     1\tx = 1\n"
    steps = [
        ("grep -n x src/a.py", "1:x = 1"),
        ("str_replace_editor view /repo/src/a.py", cat),
        ("str_replace_editor str_replace /repo/src/a.py --old_str 'x = 1' --new_str 'x = 2'", "edited"),
        *[(f"python check_{k}.py", "ok") for k in range(8)],
        ("submit", DIFF),
    ]
    p = tmp_path / "inst__x-1.traj"
    p.write_text(json.dumps(_swe_v1(steps, [{"type": "last_n_observations", "n": 5}])))
    (t,) = load_path(p)
    assert t.events[5].provides == ("read:src/a.py@5",)
    assert t.events[6].needs == ("read:src/a.py@5",)  # the edit needs the view, not grep's read
    assert t.events[7].supersedes == ("read:src/a.py@3", "read:src/a.py@5")  # the edit: grep's and the view
    assert t.events[24].needs == ("constraint@0", "goal@1")
    m = compute_metrics(replay(t, recorded_replay_policy(t)))
    assert (m["calls"], m["refetch_calls"], m["retrieve_calls"], m["answer_outcome"]) == (
        12,
        0,
        0,
        "complete",
    )


# ---------------------------------------------------------------------------------- SWE-agent's tools
def test_swe_tool_ops():
    assert swe_tool_op('open "src/a.py" 120') == SweToolOp("open", window=True, names=("src/a.py",))
    assert swe_tool_op("goto 40") == SweToolOp("goto", window=True)
    assert swe_tool_op("scroll_down") == SweToolOp("scroll_down", window=True)
    assert swe_tool_op("scroll_up") == SweToolOp("scroll_up", window=True)
    assert swe_tool_op("create b.py") == SweToolOp("create", edits=("b.py",), window=True)
    assert swe_tool_op("edit 4:4\nx = 2\nend_of_edit") == SweToolOp("edit", edits=(OPEN_FILE,), window=True)
    assert swe_tool_op("edit 'x = 1' 'x = 2' False") == SweToolOp("edit", edits=(OPEN_FILE,), window=True)
    assert swe_tool_op("str_replace_editor view /repo/a.py --view_range 1 9") == SweToolOp(
        "str_replace_editor", view="/repo/a.py", names=("/repo/a.py",)
    )
    assert swe_tool_op("str_replace_editor str_replace /repo/a.py --old_str 'x\n' --new_str y") == SweToolOp(
        "str_replace_editor", edits=("/repo/a.py",), names=("/repo/a.py",)
    )
    assert swe_tool_op("search_file needle") == SweToolOp("search_file", search=True)
    assert swe_tool_op("search_dir needle src") == SweToolOp("search_dir", listing=True)
    assert swe_tool_op("find_file a.py") == SweToolOp("find_file", listing=True)
    assert swe_tool_op("submit") is None and swe_tool_op("ls -la") is None


def _table(steps: list[tuple[str, str]], root: str = "/repo"):
    events = [("system", "rules"), ("user", "task")]
    tools = [None, None]
    for action, result in steps:
        events += [("assistant", ""), ("tool_result", result)]
        tools += [swe_tool_op(action), None]
    return swe_fact_table(events, tools, root)


def test_windowed_editor_reads_and_edits_the_open_file():
    t = _table(
        [
            ("find_file a.py", 'Found 1 matches for "a.py" in /repo:\n/repo/src/a.py'),
            ("open src/a.py", "[File: /repo/src/a.py (3 lines total)]\n1:x = 1"),
            ("goto 2", "[File: /repo/src/a.py (3 lines total)]\n2:y = 1"),
            (
                "edit 2:2\ny = 2\nend_of_edit",
                "[File: /repo/src/a.py (3 lines total)]\n2:y = 2\nFile updated.",
            ),
            ("scroll_up", "[File: /repo/src/a.py (3 lines total)]\n1:x = 1"),
            ("create b.py", "[File: /repo/b.py (1 lines total)]\n1:"),
            ("submit", "diff --git a/src/a.py b/src/a.py\n"),
        ]
    )
    assert t.provides == [
        ["constraint@0"],
        ["goal@1"],
        [],
        ["found:src/a.py@3"],
        [],
        ["read:src/a.py@5"],
        [],
        ["read:src/a.py@7"],
        [],
        ["read:src/a.py@9"],
        [],
        ["read:src/a.py@11"],
        [],
        ["read:b.py@13"],
        [],
        [],
    ]
    assert t.spans[3] == [(37, 51)]  # the line naming /repo/src/a.py
    assert t.kinds[3] == ["path"] and t.kinds[5] == ["path"]
    assert t.needs[4] == ["found:src/a.py@3"]  # open needs the listing that named the file
    assert t.needs[8] == ["read:src/a.py@7"]  # edit of the open file needs its latest window
    # only an edit outdates a file's reads: another window of the unchanged file (goto, scroll_up) leaves
    # the earlier ones live; the edit's result outdates every window shown since the last edit
    assert t.supersedes[7] == []
    assert t.supersedes[9] == ["read:src/a.py@5", "read:src/a.py@7"]
    assert t.supersedes[11] == []
    assert t.needs[14] == ["read:src/a.py@11", "constraint@0", "goal@1"]


def test_str_replace_editor_view_is_a_read_and_its_edits_need_it():
    cat = "Here's the result of running `cat -n` on /repo/src/a.py:\n     1\tx = 1\n"
    t = _table(
        [
            (
                "str_replace_editor view /repo/src",
                "Here's the files and directories up to 2 levels deep in /repo/src",
            ),
            ("str_replace_editor view /repo/src/a.py", cat),
            ("str_replace_editor str_replace /repo/src/a.py --old_str 'x = 1' --new_str 'x = 2'", "edited"),
            ("str_replace_editor view /repo/src/a.py", cat.replace("1\tx = 1", "1\tx = 2")),
            ("str_replace_editor create /repo/t.py --file_text 'print(1)'", "File created"),
            ("submit", "diff --git a/src/a.py b/src/a.py\n"),
        ]
    )
    assert t.provides[3] == []  # a folder listing is not a read
    assert t.provides[5] == ["read:src/a.py@5"]
    assert t.needs[6] == ["read:src/a.py@5"]
    assert t.supersedes[7] == ["read:src/a.py@5"] and t.provides[7] == []  # the snippet is not a read
    assert t.provides[9] == ["read:src/a.py@9"]
    assert t.needs[10] == []  # creating a file never read needs nothing
    assert t.needs[12] == ["read:src/a.py@9", "constraint@0", "goal@1"]


def test_search_file_reads_the_file_it_searched_search_dir_lists():
    t = _table(
        [
            (
                "search_dir needle",
                'Found 3 matches for "needle" in /repo:\n/repo/src/a.py (2 matches)\n'
                '/repo/b.py (1 matches)\nEnd of matches for "needle" in /repo',
            ),
            ("search_file needle src/a.py", 'Found 2 matches for "needle" in /repo/src/a.py:\nLine 1:needle'),
            ("search_file nothing", 'No matches found for "nothing" in /repo/src/a.py'),
            ("open b.py", "[File: /repo/b.py (1 lines total)]\n1:needle"),
        ]
    )
    assert t.provides[3] == ["found:b.py@3"]  # only the listed path a later command opened
    assert t.spans[3] == [(66, 88)]
    assert t.provides[5] == ["read:src/a.py@5"]
    assert t.provides[7] == []
    assert t.needs[8] == ["found:b.py@3", "constraint@0", "goal@1"]  # the last turn: the answer
    assert t.provides[9] == ["read:b.py@9"]


# ------------------------------------------------------------------- OpenHands' editor, Claude Code's
def test_openhands_file_editor_calls():
    assert file_op("read", {"path": "/w/a.c"}, "t1") == (("t1", "read", "/w/a.c"),)
    assert file_op("edit", {"path": "/w/a.c", "command": "view"}, "t1") == (("t1", "read", "/w/a.c"),)
    for command in ("create", "str_replace", "insert", "undo_edit", None):
        assert file_op("edit", {"path": "/w/a.c", "command": command}, "t2") == (("t2", "edit", "/w/a.c"),)
    assert file_op("run", {"command": "cat /w/a.c"}, "t3") == ()
    assert file_op("read", {"path": "/w/a.c"}, None) == ()


def test_claude_code_read_and_edit_calls():
    content = [
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "r1", "name": "Read", "input": {"file_path": "/p/a.py"}},
        {
            "type": "tool_use",
            "id": "e1",
            "name": "Edit",
            "input": {"file_path": "/p/a.py", "old_string": "x"},
        },
        {"type": "tool_use", "id": "m1", "name": "MultiEdit", "input": {"file_path": "/p/b.py", "edits": []}},
        {"type": "tool_use", "id": "w1", "name": "Write", "input": {"file_path": "/p/c.py", "content": ""}},
        {"type": "tool_use", "id": "n1", "name": "NotebookEdit", "input": {"notebook_path": "/p/n.ipynb"}},
        {"type": "tool_use", "id": "b1", "name": "Bash", "input": {"command": "cat /p/a.py"}},
    ]
    assert file_ops(content) == (
        ("r1", "read", "/p/a.py"),
        ("e1", "edit", "/p/a.py"),
        ("m1", "edit", "/p/b.py"),
        ("w1", "edit", "/p/c.py"),
        ("n1", "edit", "/p/n.ipynb"),
    )


def test_tool_file_rules():
    msgs = [
        Message("system", "rules"),
        Message("user", "fix /p/a.py"),
        Message("assistant", "reading", ("c1",), file_ops=(("c1", "read", "/p/a.py"),)),
        Message("tool_result", "     1\tx = 1", tool_call_id="c1"),
        Message("assistant", "missing", ("c2",), file_ops=(("c2", "read", "/p/zz.py"),)),
        Message("tool_result", "<tool_use_error>File does not exist.</tool_use_error>", tool_call_id="c2"),
        Message("assistant", "editing", ("c3",), file_ops=(("c3", "edit", "/p/a.py"),)),
        Message("tool_result", "The file /p/a.py has been updated.", tool_call_id="c3"),
        Message("assistant", "checking", ("c4",), file_ops=(("c4", "read", "/p/a.py"),)),
        Message("tool_result", "     1\tx = 2", tool_call_id="c4"),
        Message("assistant", "Done."),
    ]
    t = tool_fact_table(msgs, [m.tool_call_id for m in msgs])
    assert t.provides[3] == ["read:/p/a.py@3"] and t.kinds[3] == ["path"] and t.spans[3] == [None]
    assert t.provides[5] == []  # a failed read reads nothing
    assert t.needs[6] == ["read:/p/a.py@3"]
    assert t.supersedes[7] == ["read:/p/a.py@3"]
    assert t.provides[9] == ["read:/p/a.py@9"]
    assert t.needs[10] == ["read:/p/a.py@9", "constraint@0", "goal@1"]


def _claude_session(tmp_path: Path, compact: bool) -> Path:
    def rec(kind, content, n, **extra):
        msg = {"role": kind, "content": content}
        if kind == "assistant":
            msg |= {"id": f"msg{n}", "model": "claude-sonnet-4-5"}
        return {"type": kind, "uuid": f"u{n}", "sessionId": "s", "message": msg, **extra}

    read = {"type": "tool_use", "id": "r1", "name": "Read", "input": {"file_path": "/p/a.py"}}
    edit = {"type": "tool_use", "id": "e1", "name": "Edit", "input": {"file_path": "/p/a.py"}}
    lines = [
        rec("user", "Fix /p/a.py", 1),
        rec("assistant", [read], 2),
        rec("user", [{"type": "tool_result", "tool_use_id": "r1", "content": "1\tx = 1"}], 3),
    ]
    if compact:
        lines.append({"type": "system", "subtype": "compact_boundary", "uuid": "u4", "sessionId": "s"})
        lines.append(rec("user", "Summary: read a.py", 5, isCompactSummary=True))
    lines += [
        rec("assistant", [edit], 6),
        rec("user", [{"type": "tool_result", "tool_use_id": "e1", "content": "updated"}], 7),
        rec("assistant", "Done.", 8),
    ]
    p = tmp_path / "s.jsonl"
    p.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return p


def test_claude_code_edit_needs_its_read_unless_a_compaction_dropped_it(tmp_path):
    (t,) = load_path(_claude_session(tmp_path, compact=False))
    assert t.events[2].provides == ("read:/p/a.py@2",)
    assert t.events[3].needs == ("read:/p/a.py@2",)
    assert t.events[4].supersedes == ("read:/p/a.py@2",)
    (c,) = load_path(_claude_session(tmp_path, compact=True))
    assert c.recorded_policy == {"name": "claude_code_auto_compact"}
    assert c.events[2].provides == ("read:/p/a.py@2",)  # still seen
    assert c.events[4].needs == ()  # the call after the compaction saw the summary, not the read
    assert c.events[6].needs == ()  # nor the task: the final call saw the summary in its place
    m = compute_metrics(replay(c, recorded_replay_policy(c)))
    assert (m["calls"], m["refetch_calls"], m["answer_outcome"]) == (3, 0, "complete")
