"""Linear time on long commands and many folder traces (issue 18, item 5).

Each case here took from half a minute to many minutes before (``shlex.split`` builds a word by string
concatenation, the here-document regex searched from every ``<<`` to the end of the command, and
``expand_paths`` checked every file against every claimed folder); the bounds are generous because the
machine running the tests is shared. The facts derived must not change: ``shell_words`` is checked
against ``shlex.split`` itself, and the real traces' facts are checked in test_mini_swe_agent.py and
test_information.py.
"""

from __future__ import annotations

import json
import shlex
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.importers import expand_paths, load_path
from sim.information.facts import classify, drop_heredocs, shell_words, swe_facts

SECONDS = 20  # each case; before the fix the fastest of them took 30 s, the slowest never finished
MB2 = 2_000_000


@settings(max_examples=1500, deadline=None)
@given(st.text(alphabet=list("ab -\t\n\r'\"\\\x0b>é$"), max_size=16))
def test_shell_words_are_shlex_split(text):
    try:
        expected = shlex.split(text)
    except ValueError:
        with pytest.raises(ValueError):
            shell_words(text)
        return
    assert shell_words(text) == expected


@pytest.mark.parametrize(
    "command, expected",
    [
        ("cat <<'EOF' > f.py\nx = 1\nEOF\n", "cat <<EOF > f.py"),
        ('cat <<-"END" > f.py\n\tbody\nEND   \n\n\nsed -n 1p g.py', "cat <<END > f.py\nsed -n 1p g.py"),
        ("cat <<EOF > f.py\nno terminator", "cat <<EOF > f.py\nno terminator"),
        ("cat <<EOF\nEOF\n", "cat <<EOF\nEOF\n"),  # the body is at least one line, as before
        ("cat <<A <<B > f.py\nbody\nA\nB", "cat <<A <<B > f.py\nB"),
        ("echo <<EOFX\nEOF\nEOFX\n", "echo <<EOFX"),
    ],
)
def test_here_documents_are_set_aside(command, expected):
    assert drop_heredocs(command) == expected


def _timed(func, *args):
    t = time.perf_counter()
    result = func(*args)
    return result, time.perf_counter() - t


@pytest.mark.parametrize(
    "command, reads, edits",
    [
        ('python -c "' + "x" * MB2 + '"', [], []),  # one 2 MB word: 200 s before
        ('echo "' + 'a\\"b ' * (MB2 // 5) + '" > out.txt', [], ["out.txt"]),
        ("echo " + "word " * (MB2 // 5) + "> out.txt", [], ["out.txt"]),
        (" && ".join(["cat a.py"] * (MB2 // 11)), ["a.py"] * (MB2 // 11), []),
        ("|".join(["grep x f.py"] * (MB2 // 12)), ["f.py"] * (MB2 // 12), []),
        ("cat <<'EOF' > f.py\n" + "line of text\n" * (MB2 // 13) + "EOF", [], ["f.py"]),
        ("cat <<EOF > f.py\nx\nEOF\n" * (MB2 // 20), [], ["f.py"] * (MB2 // 20)),
        ("cat " + "<<EOF x\n" * (MB2 // 8), [], []),  # markers with no terminator: minutes before
        ("cat " + "".join(f"<<E{i} x\n" for i in range(MB2 // 12)), [], []),
        ("echo 'unbalanced " + "y " * (MB2 // 2), [], []),
    ],
    ids=[
        "one-word",
        "quoted-escapes",
        "many-words",
        "many-and-segments",
        "many-pipes",
        "one-heredoc",
        "many-heredocs",
        "unterminated-markers",
        "distinct-markers",
        "unbalanced-quote",
    ],
)
def test_a_2mb_command_is_classified_in_seconds(command, reads, edits):
    assert len(command) >= MB2 * 0.9
    got, seconds = _timed(classify, command)
    assert got == (reads, edits)
    assert seconds < SECONDS
    events = [("assistant", f"```bash\n{command}\n```"), ("tool_result", "<returncode>0</returncode>")]
    (_, _), seconds = _timed(swe_facts, events)
    assert seconds < SECONDS


def test_a_diff_of_many_files_gives_the_final_answer_its_needs_in_seconds():
    n = 60_000
    names = [f"f{i}.py" for i in range(n)]
    diff = "".join(f"diff --git a/{f} b/{f}\n" for f in names)
    events = [
        ("assistant", "```bash\ncat " + " ".join(names) + "\n```"),
        ("tool_result", "contents"),
        ("assistant", "```bash\ngit diff\n```"),
        ("tool_result", diff),
    ]
    (provides, needs), seconds = _timed(swe_facts, events)
    assert needs[2] == [f"read:{f}@1" for f in names]
    assert len(provides[1]) == n
    assert seconds < SECONDS


# ------------------------------------------------------------------------------------ many folder traces
def _sdk_tree(root: Path, n: int) -> list[Path]:
    """``n`` minimal OpenHands SDK conversation folders (base_state.json + three events), nested as the
    SDK writes them, and beside them a log file no format claims."""
    user = {"id": "u1", "kind": "MessageEvent", "source": "user", "timestamp": "2026-01-01T00:00:00"}
    user["llm_message"] = {"role": "user", "content": [{"type": "text", "text": "List files."}]}
    action = {"id": "a1", "kind": "ActionEvent", "source": "agent", "timestamp": "2026-01-01T00:00:01"}
    action |= {"tool_call_id": "c1", "llm_response_id": "r1", "tool_name": "terminal"}
    action["tool_call"] = {"id": "c1", "name": "terminal", "arguments": '{"command": "ls"}'}
    obs = {"id": "o1", "kind": "ObservationEvent", "source": "environment", "tool_call_id": "c1"}
    obs["observation"] = {"kind": "TerminalObservation", "content": [{"type": "text", "text": "a.py"}]}
    usage = {"prompt_tokens": 50, "completion_tokens": 5, "response_id": "r1"}
    folders = []
    for i in range(n):
        conv = root / f"run-{i:05d}" / "conversations" / f"conv{i}"
        (conv / "events").mkdir(parents=True)
        state = {"id": f"c{i}", "agent": {"kind": "Agent", "llm": {"model": "openai/gpt-4o-mini"}}}
        state["stats"] = {"usage_to_metrics": {"agent": {"token_usages": [usage], "costs": []}}}
        (conv / "base_state.json").write_text(json.dumps(state))
        for k, e in enumerate((user, action, obs)):
            (conv / "events" / f"event-{k:05d}-{e['id']}.json").write_text(json.dumps(e))
        folders.append(conv)
    (root / "run-00000" / "sweep.log").write_text("not a trace")
    return folders


def test_2000_sdk_folders_are_found_in_seconds(tmp_path):
    folders = _sdk_tree(tmp_path, 2000)
    found, seconds = _timed(expand_paths, [tmp_path])
    assert found == folders  # sorted, each folder once, none of the files inside them
    assert seconds < SECONDS
    t = next(load_path(found[-1]))
    assert (t.trace_id, t.source_format) == ("c1999", "openhands-sdk-v1")
    assert [c.input_tokens for c in t.calls] == [50]


def test_many_runs_and_compactions_in_one_session_stay_linear():
    """A session of 40,000 prompts, each answered (and each a compaction boundary): numbering its runs
    and hiding what each compaction covered visit each message a bounded number of times (both scanned
    every call, or every earlier message, per boundary before: over an hour here)."""
    from sim.importers.claude_code import hide_before_compactions
    from sim.importers.common import Message, number_runs

    n = 40_000
    messages = [Message("user" if i % 2 == 0 else "assistant", "x") for i in range(2 * n)]
    starts = list(range(0, 2 * n, 2))
    t0 = time.perf_counter()
    assert number_runs(messages, starts) == n
    hide_before_compactions(messages, starts)
    assert time.perf_counter() - t0 < SECONDS
    assert [m.run_index for m in messages[:6]] == [0, 0, 1, 1, 2, 2]
    assert [m.hidden_from for m in messages[:6]] == [3, 3, 5, 5, 7, 7]
