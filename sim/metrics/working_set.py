"""The working set of each request by the eight categories of a context ledger.

Derived from a run's record and its trace (records are the truth): for every row of the calls table,
the tokens of the view in each category and what is left of the window. Categories, by stated rules:

- ``view_instructions_tokens``: ``system`` events.
- ``view_tool_definitions_tokens``: ``tools`` events.
- ``view_test_output_tokens``: tool results of a command that runs tests (``pytest``, ``py.test``,
  ``unittest``, ``nosetests``, ``tox``, ``nox``, ``runtests``, ``manage.py test``, ``npm|yarn|pnpm
  [run] test``, ``go test``, ``cargo test``, ``mvn test``, ``gradle test``, ``make test|check``,
  ``ctest``, ``rspec``, ``jest``, ``mocha``, ``vitest``, ``phpunit``).
- ``view_file_read_tokens``: tool results of a command that prints a file
(``sim.information.facts.classify``'s
  reads: ``cat``, ``nl``, ``head``, ``tail``, ``less``, ``more``, ``sed -n``, ``grep`` of one file) or
  of an editor's view (``str_replace_editor view``, ``open``, ``read_file``, ``view_file``, a ``Read``
  tool).
- ``view_repository_map_tokens``: tool results of a listing (``ls``, ``find``, ``tree``,
  ``git ls-files``, a ``list_files`` / ``list_dir`` / ``glob`` / ``LS`` tool).
- ``view_recent_conversation_tokens`` / ``view_older_conversation_tokens``: everything else (the task,
  the agent's turns, other tool results), split by age: recent when it entered the view after the
  request of call k - ``RECENT_TURNS`` (k: the row's recorded call), older otherwise.
- ``reserve_tokens``: the window less the request's input (free room, the output included); -1 when the
  run had no window.

The first matching rule wins, in the order test output, file read, repository map. A tool result's
command is its issuing turn's shell command (its last bash block) or, for tool-calling formats, the
turn's rendered calls. A text-free (``--redact``) trace has no commands: its tool results are
conversation. Content the agent re-read (refetch, retrieval, page) counts in its source's category
(conversation: recent while re-read within the last ``RECENT_TURNS`` calls). A summary call's row
holds no view (its input is the summarizer's). The seven view columns add up to ``view_tokens``.
"""

from __future__ import annotations

import re

import numpy as np

from sim.core.records import REREAD_KINDS, SUMMARY, RunRecord
from sim.core.types import Trace
from sim.information.facts import classify, command_of, command_words

CATEGORY_COLUMNS = (
    "view_instructions_tokens",
    "view_tool_definitions_tokens",
    "view_recent_conversation_tokens",
    "view_older_conversation_tokens",
    "view_repository_map_tokens",
    "view_file_read_tokens",
    "view_test_output_tokens",
    "reserve_tokens",
)
RECENT_TURNS = 5
# an event's class (conversation is split into recent and older per request)
INSTRUCTIONS, TOOLS, CONVERSATION, REPOSITORY_MAP, FILE_READ, TEST_OUTPUT = range(6)
CLASS_NAMES = (
    "instructions",
    "tool definitions",
    "conversation",
    "repository map",
    "file read",
    "test output",
)
_COLUMN_OF_CLASS = {INSTRUCTIONS: 0, TOOLS: 1, REPOSITORY_MAP: 4, FILE_READ: 5, TEST_OUTPUT: 6}

_TESTS = re.compile(
    r"\b(?:pytest|py\.test|unittest|nosetests|tox|nox|runtests(?:\.py)?|manage\.py\s+test"
    r"|(?:npm|yarn|pnpm)\s+(?:run\s+)?test|go\s+test|cargo\s+test|mvn\s+test|gradle\s+test"
    r"|make\s+(?:test|check)|ctest|rspec|jest|mocha|vitest|phpunit)\b"
)
_VIEWS = re.compile(
    r"\b(?:str_replace_editor|str_replace_based_edit_tool|file_editor)\b.*\bview\b"
    r"|(?:^|\n)\s*(?:open|read_file|view_file)\b|\b(?:Read|read_file|view_file|open_file)\("
)
_LISTING_TOOLS = re.compile(r"\b(?:list_files|list_dir|list_directory|glob|Glob|LS|find_file)\(")
_LISTERS = {"ls", "find", "tree"}


def classify_command(text: str) -> int:
    """The class of a tool result from the text of the turn that issued it (module docstring)."""
    cmd = command_of(text) or text
    if _TESTS.search(cmd):
        return TEST_OUTPUT
    if command_of(text) is not None:
        reads, _ = classify(cmd)
        if reads:
            return FILE_READ
    if _VIEWS.search(cmd):
        return FILE_READ
    if _LISTING_TOOLS.search(cmd):
        return REPOSITORY_MAP
    for toks in command_words(cmd):
        if toks[0] in _LISTERS or toks[:2] == ["git", "ls-files"]:
            return REPOSITORY_MAP
    return CONVERSATION


def event_classes(trace: Trace) -> np.ndarray:
    """Each event's class (read-only)."""
    events = trace.events
    by_id: dict[str, int] = {}
    last_assistant = -1
    out = np.full(len(events), CONVERSATION, dtype=np.int64)
    for e in events:
        if e.kind == "system":
            out[e.index] = INSTRUCTIONS
        elif e.kind == "tools":
            out[e.index] = TOOLS
        elif e.kind == "assistant":
            last_assistant = e.index
            for cid in e.tool_call_ids:
                by_id[cid] = e.index
        elif e.kind == "tool_result":
            issuer = by_id.get(e.tool_call_id, last_assistant) if e.tool_call_id else last_assistant
            text = events[issuer].content if issuer >= 0 else None
            if text:
                out[e.index] = classify_command(text)
    out.setflags(write=False)
    return out


def working_set(trace: Trace, r: RunRecord) -> dict[str, np.ndarray]:
    """The eight category columns of every row of ``r``'s calls table."""
    cls = trace.derived("working_set_classes", event_classes)
    original = trace.arrays.tokens
    view_end = trace.arrays.view_end.tolist()
    calls = r.calls
    kinds, rec_call = calls["kind"].tolist(), calls["recorded_call"].tolist()
    items, inputs = calls["view_items"].tolist(), calls["input_tokens"].tolist()
    rows = len(kinds)
    out = np.zeros((len(CATEGORY_COLUMNS), rows), dtype=np.int64)
    n = len(original)
    # prefix sums of the original sizes per class
    prefix = np.zeros((6, n + 1), dtype=np.int64)
    for c in range(6):
        np.cumsum(np.where(cls == c, original, 0), out=prefix[c, 1:])
    ch = r.changes
    c_row, c_item = ch["row"].tolist(), ch["index"].tolist()
    c_delta = (-ch["tokens_reclaimed"]).tolist()
    by_class = [0] * 6  # net change so far of each class
    tree = [0] * (n + 1)  # a Fenwick tree of the net changes to conversation items so far

    def add(i: int, d: int) -> None:
        i += 1
        while i <= n:
            tree[i] += d
            i += i & -i

    def upto(i: int) -> int:  # conversation changes to items [0, i)
        s = 0
        while i > 0:
            s += tree[i]
            i -= i & -i
        return s

    rereads = [(k, kind, src, added) for k, kind, src, added in r.rereads]
    extras: list[tuple[int, int, int]] = []  # (re-read call, class, tokens) of content re-read so far
    j = q = 0
    for row in range(rows):
        while j < len(c_row) and c_row[j] <= row:
            i, d = c_item[j], c_delta[j]
            by_class[int(cls[i])] += d
            if cls[i] == CONVERSATION:
                add(i, d)
            j += 1
        kind, k, m = kinds[row], rec_call[row], items[row]
        if r.window is not None:
            out[7, row] = r.window - inputs[row]
        else:
            out[7, row] = -1
        if kind != SUMMARY:
            for c, col in _COLUMN_OF_CLASS.items():
                out[col, row] = int(prefix[c, m]) + by_class[c]
            start = view_end[k - RECENT_TURNS] if k >= RECENT_TURNS else 0
            start = min(start, m)
            total = int(prefix[CONVERSATION, m]) + by_class[CONVERSATION]
            recent = int(prefix[CONVERSATION, m] - prefix[CONVERSATION, start]) + upto(m) - upto(start)
            for k2, c, tok in extras:
                if c == CONVERSATION:
                    total += tok
                    if k2 > k - RECENT_TURNS:
                        recent += tok
                else:
                    out[_COLUMN_OF_CLASS[c], row] += tok
            out[2, row], out[3, row] = recent, total - recent
        if kind in REREAD_KINDS:  # its content is in every later request
            k2, _, src, added = rereads[q]
            extras.append((k2, int(cls[src]), added))
            q += 1
    return dict(zip(CATEGORY_COLUMNS, out, strict=True))


def calls_table(trace: Trace, r: RunRecord):
    """``r.calls_frame()`` with the eight category columns after the record's own, then the run of the
    conversation each row belongs to (``run_index``), the run's opening prompt on its first agent row
    (conversations of several runs; ``RunRecord.opening_prompts``) and its live context on its
    last agent step (``sim.metrics.compute.live_context_tokens``), empty elsewhere
    (``sim.metrics.conversation``)."""
    import pandas as pd

    from sim.metrics.conversation import per_run

    df = r.calls_frame()
    for name, col in working_set(trace, r).items():
        df[name] = col
    runs = per_run(trace, r)
    opening: list[int | None] = [None] * len(runs.row_run)
    live: list[int | None] = [None] * len(runs.row_run)
    for run, j in enumerate(runs.opening_row):
        if j is not None:
            opening[j] = runs.opening_prompt_tokens[run]
    for run, j in enumerate(runs.last_row):
        if j >= 0:
            live[j] = runs.live_context_tokens[run]
    df["run_index"] = runs.row_run
    df["opening_prompt_tokens"] = pd.array(opening, dtype="Int64")
    df["live_context_tokens"] = pd.array(live, dtype="Int64")
    return df
