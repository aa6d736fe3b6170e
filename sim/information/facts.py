"""Facts of SWE-style runs: which events provide them and which actions (and the final answer) need them.

An importer calls ``swe_facts`` with each assistant turn's shell command and each tool result's text.
The rules, documented here because ``needs`` decide what a policy may and may not forget:

- A command is split into segments at ``&&``, ``||``, ``;`` and ``|`` (after its here-document body is
  set aside). A segment that prints a file without writing it is a **read** of that file: ``cat F``,
  ``nl F``, ``head F``, ``tail F``, ``sed -n ... F``, ``grep ... F`` (a single named file, not ``-r``).
  The tool result that answers the command provides the fact ``read:F@E`` (E = that result's event index).
  Only an edit of F makes its earlier reads stale (the file changed); a re-read of F provides a new fact
  and leaves the older ones live (``sed -n 1,50p F`` then ``sed -n 200,250p F`` show different parts of
  the same unchanged file: the first is not outdated by the second).
- A segment that writes a file is an **edit**: ``sed -i ... F``, ``perl -pi ... F``, a redirection
  ``> F`` / ``>> F`` (``cat <<EOF > F``, ``echo ... > F``, ``printf ... > F``), ``cp SRC F``,
  ``patch F``. An edit needs the latest read of F, if the agent read F before.
- A tool result that reports a failure is an **error** fact ``error@E``: a non-zero ``<returncode>``, a
  ``Traceback (most recent call last)``, the word ``FAILED``, or an exception name followed by a colon
  and a space (``ValueError: ...``, as a reproduction script prints what it caught).
- The **final answer** (the last assistant turn, whose result is the submitted diff) needs, for every file
  the diff changes, the latest read of that file and the newest error seen before the agent first edited
  it (the failure that motivated the change).
- The **task** (the first ``user`` event) provides ``goal@E`` and each ``system`` event provides
  ``constraint@E`` (the rules the agent works under); the final answer needs both.
Commands the rules do not recognise (``python x.py``, ``ls``, ``find``) provide and need nothing.

SWE-agent's own tools (``swe_tool_op`` reads an action's first line; paths are made relative to the
run's working directory, ``root``):

- The windowed editor: the result of ``open``, ``goto``, ``scroll_up``, ``scroll_down``, ``create``,
  ``edit``, ``insert`` or ``append`` that shows a window of a file (its ``[File: F (N lines total)]``
  header) is a **read** of F, and F becomes the open file. ``edit``, ``insert`` and ``append`` are
  **edits** of the open file; ``create F`` an edit of F.
- ``str_replace_editor view F``: a read of F when its result is the file (``Here's the result of
  running `cat -n` on F``; a folder's listing is not). ``create``, ``str_replace``, ``insert`` and
  ``undo_edit`` of F are edits of F (their result shows a snippet, not the file: not a read).
- ``search_file TERM [F]``: a read of the file its result names (``Found N matches for "TERM" in F``),
  as ``grep TERM F``. ``find_file`` and ``search_dir`` read no file (as ``find`` and ``grep -r``);
  their result **lists** paths: a later ``open`` or ``str_replace_editor`` command naming a listed path
  P, before any read of P, needs ``found:P@E`` (kind ``path``, span: the line that names P), provided by
  the newest listing naming P.
- Edits need the latest read of their file and end it, as shell edits do; the final answer's needs
  are the same (the latest read of each changed file). ``submit`` and other tools provide nothing.

Where each fact sits (``swe_fact_table``; a cut keeps exactly the facts inside the bytes it shows): a
read is the whole result (the file as printed: a cut of it loses it), a task or constraint the whole
message, an error the line that shows it (the last line matching the error pattern, else the
``<returncode>`` element). Kinds: a read is ``path``, a failure ``error``, the task ``goal``, a system
message ``constraint``. What a later event makes stale (``supersedes``): the result of an edit of F
supersedes every read of F since its previous edit (a re-read supersedes nothing); the result of a
command run again with the same text supersedes the error its earlier run reported (the failure is
resolved, or replaced by the new one).
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Sequence
from typing import NamedTuple

_BASH_BLOCK = re.compile(r"```bash\s*\n(.*?)```", re.S)
_HEREDOC_MARK = re.compile(r"<<-?\s*(['\"]?)(\w+)\1")  # ``<<TAG``, ``<<-TAG``, ``<< 'TAG'``
_WORD = re.compile(r"\w+")
_SPACES = re.compile(r"\s*")
# A shell word under shlex's POSIX rules (whitespace split, no comments): unquoted runs, backslash
# escapes, '...' and "..." (the last unrolled, so an unterminated quote fails in linear time).
_SHELL_WORD = re.compile(r"""(?:[^ \t\r\n'"\\]+|\\.|'[^']*'|"[^"\\]*(?:\\.[^"\\]*)*")+""", re.S)
_WORD_PIECE = re.compile(r"""([^'"\\]+)|\\(.)|'([^']*)'|"([^"\\]*(?:\\.[^"\\]*)*)\"""", re.S)
_DQ_ESCAPE = re.compile(r"\\(.)", re.S)
_UNQUOTED = re.compile(r"[^ \t\r\n]+")
_SPLIT = re.compile(r"&&|\|\||;|\|")
_READERS = {"cat", "nl", "head", "tail", "less", "more"}
_FILE_COMMANDS = _READERS | {"sed", "perl", "cp", "mv", "patch", "grep"}
_DIFF_FILE = re.compile(r"^diff --git a/(\S+) b/", re.M)
_RETURNCODE = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>")
_ERROR_LINE = re.compile(r"Traceback \(most recent call last\)|\bFAILED\b|\b[A-Z]\w*(?:Error|Exception): ")


def command_of(assistant_text: str) -> str | None:
    """The shell command of a mini-swe-agent turn: its last ```bash block."""
    blocks = _BASH_BLOCK.findall(assistant_text or "")
    return blocks[-1].strip() if blocks else None


def _tokens(segment: str) -> list[str]:
    try:
        return shell_words(segment)
    except ValueError:  # unbalanced quotes: fall back to whitespace
        return segment.split()


def shell_words(text: str) -> list[str]:
    """``shlex.split(text)``'s words, in linear time: shlex builds each word one character at a time by
    string concatenation, quadratic in a word's length (one 2 MB quoted argument took minutes).
    Raises ValueError where shlex does (an unterminated quote, a trailing backslash)."""
    if "'" not in text and '"' not in text and "\\" not in text:
        return _UNQUOTED.findall(text)
    words: list[str] = []
    end = 0
    for m in _SHELL_WORD.finditer(text):
        if text[end : m.start()].strip(" \t\r\n"):  # a quote or backslash no word could take
            raise ValueError("no closing quotation or no escaped character")
        words.append(_unquote(m.group()))
        end = m.end()
    if text[end:].strip(" \t\r\n"):
        raise ValueError("no closing quotation or no escaped character")
    return words


def _unquote(word: str) -> str:
    if "'" not in word and '"' not in word and "\\" not in word:
        return word
    out = []
    for plain, escaped, single, double in _WORD_PIECE.findall(word):
        if double:  # inside "...", a backslash escapes only a backslash or a double quote (as shlex)
            out.append(_DQ_ESCAPE.sub(lambda m: m.group(1) if m.group(1) in '\\"' else m.group(0), double))
        else:
            out.append(plain or escaped or single)
    return "".join(out)


def drop_heredocs(command: str) -> str:
    """``command`` with each here-document's body and terminator line removed; ``<<TAG`` and the rest of
    its first line are kept. The body runs from the line after the marker's to the first later line that
    is the tag alone (trailing blanks allowed, the following blank lines removed with it); a marker with
    no such line is left as is. The lines that can end a body are indexed once by their word, so any
    number of unterminated markers costs linear time (a regex search from each marker did not)."""
    if "<<" not in command:
        return command
    ends: dict[str, list[int]] = {}  # tag -> starts of the lines that are that tag alone
    start = 0
    for line in command.split("\n"):
        word = line.rstrip()
        if start and word and _WORD.fullmatch(word):
            ends.setdefault(word, []).append(start)
        start += len(line) + 1
    out: list[str] = []
    done = 0  # command[:done] is written or dropped
    while True:
        for m in _HEREDOC_MARK.finditer(command, done):
            tag = m.group(2)
            lines = ends.get(tag)
            first_nl = command.find("\n", m.end()) if lines else -1
            if first_nl == -1:
                continue
            k = bisect_left(lines, first_nl + 2)  # the body holds at least the line after the marker's
            if k < len(lines):
                out += [command[done : m.start()], "<<", tag, command[m.end() : first_nl]]
                done = _end_of_terminator(command, lines[k] + len(tag))
                break
        else:
            out.append(command[done:])
            return "".join(out)


def _end_of_terminator(text: str, pos: int) -> int:
    """End of a terminator line whose tag ends at ``pos``: its trailing blanks and any blank lines after
    it, up to (not including) the last newline before the next text."""
    end = _SPACES.match(text, pos).end()
    return end if end == len(text) else text.rfind("\n", pos, end)


def _is_path(tok: str) -> bool:
    return bool(tok) and not tok.startswith("-") and ("/" in tok or "." in tok) and not tok.startswith("'")


def classify(command: str) -> tuple[list[str], list[str]]:
    """(files read, files edited) by a shell command."""
    body = drop_heredocs(command)
    reads, edits = [], []
    for seg in _SPLIT.split(body):
        toks = _tokens(seg.strip())
        if not toks:
            continue
        if ">" in seg:  # redirections write files whatever the command (no ">" in it: no token has one)
            for i, t in enumerate(toks):
                if t in (">", ">>") and i + 1 < len(toks):
                    edits.append(toks[i + 1])
                elif (t.startswith(">") and not t.startswith(">&")) and len(t) > 1:
                    edits.append(t.lstrip(">"))
            if any(t.startswith(">") for t in toks):
                continue
        cmd = toks[0]
        if cmd not in _FILE_COMMANDS:
            continue
        args = toks[1:]
        files = [a for a in args if _is_path(a)]
        if cmd == "sed":
            if any(a == "-i" or a.startswith("-i") for a in args):
                edits.extend(files[-1:])
            elif "-n" in args or any(a.startswith("-n") for a in args):
                reads.extend(files[-1:])
        elif cmd == "perl" and any(a.startswith("-pi") or a == "-i" for a in args):
            edits.extend(files[-1:])
        elif cmd in ("cp", "mv") and len(files) >= 2:
            edits.append(files[-1])
        elif cmd == "patch":
            edits.extend(files[-1:])
        elif cmd in _READERS:
            reads.extend(files)
        elif cmd == "grep" and not any(
            a in ("-r", "-R", "-rn", "-rl", "-Rn") or a.startswith("-r") for a in args
        ):
            if len(files) == 1:
                reads.extend(files)
    return reads, edits


def command_words(command: str) -> list[list[str]]:
    """The words of each segment of a shell command (split as ``classify`` splits it), empty ones left
    out."""
    return [toks for seg in _SPLIT.split(drop_heredocs(command)) if (toks := _tokens(seg.strip()))]


def is_error(result_text: str) -> bool:
    m = _RETURNCODE.search(result_text or "")
    if m and int(m.group(1)) != 0:
        return True
    return bool(_ERROR_LINE.search(result_text or ""))


def changed_files(diff_text: str) -> list[str]:
    return list(dict.fromkeys(_DIFF_FILE.findall(diff_text or "")))


def _norm(path: str, root: str | None = None) -> str:
    p = path.strip()
    if root and p.startswith(root.rstrip("/") + "/"):
        p = p[len(root.rstrip("/")) + 1 :]
    for prefix in ("/testbed/", "./"):
        if p.startswith(prefix):
            p = p[len(prefix) :]
    return p


_WINDOW = re.compile(r"^\[File: (.+?) \(\d+ lines total\)\]", re.M)
_CAT_N = re.compile(r"Here's the result of running `cat -n` on (\S+?):?\s*$", re.M)
_LISTED = re.compile(r"^(\S+?)(?: \(\d+ matches\))?\s*$")
_WINDOWED = frozenset({"open", "goto", "scroll_up", "scroll_down", "create", "edit", "insert", "append"})
_EDITOR_EDITS = frozenset({"create", "str_replace", "insert", "undo_edit"})
OPEN_FILE = "\0open"  # an edit of SWE-agent's open file, resolved when the command runs


class SweToolOp(NamedTuple):
    """What one SWE-agent tool command does to files (the module's rules)."""

    tool: str
    edits: tuple[str, ...] = ()  # files written (OPEN_FILE: the open file)
    view: str | None = None  # str_replace_editor view: the file, if its result shows it
    window: bool = False  # its result's [File: F ...] window is a read of F
    search: bool = False  # search_file: its result names the file searched
    listing: bool = False  # find_file / search_dir: its result lists paths
    names: tuple[str, ...] = ()  # the path it names (open, str_replace_editor): may need a listing


def swe_tool_op(action: str) -> SweToolOp | None:
    """The rule of a SWE-agent tool command (module doc); None for anything else (a shell command)."""
    first = (action or "").strip().split("\n", 1)[0]
    words = _tokens(first)
    if not words:
        return None
    tool = words[0]
    if tool == "str_replace_editor":
        if len(words) < 3:
            return SweToolOp(tool)
        command, path = words[1], words[2]
        if command == "view":
            return SweToolOp(tool, view=path, names=(path,))
        if command in _EDITOR_EDITS:
            return SweToolOp(tool, edits=(path,), names=(path,))
        return SweToolOp(tool)
    if tool in _WINDOWED:
        if tool == "create":
            return SweToolOp(tool, edits=tuple(words[1:2]), window=True)
        if tool in ("edit", "insert", "append"):
            return SweToolOp(tool, edits=(OPEN_FILE,), window=True)
        return SweToolOp(tool, window=True, names=tuple(words[1:2]) if tool == "open" else ())
    if tool == "search_file":
        return SweToolOp(tool, search=True)
    if tool in ("find_file", "search_dir"):
        return SweToolOp(tool, listing=True)
    return None


def _listed(body: str) -> dict[str, tuple[int, int]]:
    """Paths a find_file / search_dir result lists -> the character range of the line naming each."""
    out: dict[str, tuple[int, int]] = {}
    pos = 0
    for k, line in enumerate(body.split("\n")):
        start, pos = pos, pos + len(line) + 1
        text = line.rstrip("\r")
        if k == 0 or not text.strip() or text.startswith(("End of matches", "More than", "No matches")):
            continue
        m = _LISTED.match(text)
        if m and ("/" in m.group(1) or "." in m.group(1)):
            out.setdefault(m.group(1), (start, start + len(text)))
    return out


def _char_span(text: str, a: int, b: int) -> tuple[int, int]:
    if text.isascii():
        return a, b
    head = len(text[:a].encode())
    return head, head + len(text[a:b].encode())


class FactTable(NamedTuple):
    """Per event, in order: the facts it provides, their byte spans (None: the whole event) and kinds,
    the facts it needs, and the earlier facts it makes stale."""

    provides: list[list[str]]
    spans: list[list[tuple[int, int] | None]]
    kinds: list[list[str]]
    needs: list[list[str]]
    supersedes: list[list[str]]


def _tool_reads(op: SweToolOp, body: str, root: str | None) -> list[str]:
    """The file a SWE-agent tool's result shows (module doc), as a one-item list, else none."""
    m = None
    if op.window:
        m = _WINDOW.search(body)
    elif op.view is not None:
        m = _CAT_N.search(body)
    elif op.search:  # its first line: Found N matches for "TERM" in F:
        first = body.lstrip().split("\n", 1)[0].rstrip()
        if first.startswith("Found ") and first.endswith(":") and " in " in first:
            return [_norm(first[:-1].rsplit(" in ", 1)[1], root)]
    return [_norm(m.group(1), root)] if m else []


def swe_facts(events: list[tuple[str, str | None]]) -> tuple[list[list[str]], list[list[str]]]:
    """(provides, needs) per event for a SWE-style run given as (kind, text) pairs in order."""
    t = swe_fact_table(events)
    return t.provides, t.needs


def error_span(text: str) -> tuple[int, int] | None:
    """UTF-8 byte range of the line that shows a failure (``is_error``'s patterns): the last matching line,
    else the ``<returncode>`` element; None when neither is there."""
    last = None
    for m in _ERROR_LINE.finditer(text):
        last = m
    if last is not None:
        start = text.rfind("\n", 0, last.start()) + 1
        end = text.find("\n", last.end())
        end = len(text) if end == -1 else end
    else:
        m = _RETURNCODE.search(text)
        if m is None:
            return None
        start, end = m.start(), m.end()
    if text.isascii():
        return start, end
    head = len(text[:start].encode())
    return head, head + len(text[start:end].encode())


def swe_fact_table(
    events: list[tuple[str, str | None]],
    tools: Sequence[SweToolOp | None] | None = None,
    root: str | None = None,
) -> FactTable:
    """``swe_facts`` with where each fact sits, its kind and what each event makes stale (module doc).
    ``tools``: per event, the SWE-agent tool command of an assistant event (``swe_tool_op``), which
    replaces the shell rules for it; ``root``: the working directory SWE-agent's paths are relative to."""
    n = len(events)
    provides: list[list[str]] = [[] for _ in range(n)]
    spans: list[list[tuple[int, int] | None]] = [[] for _ in range(n)]
    kinds: list[list[str]] = [[] for _ in range(n)]
    needs: list[list[str]] = [[] for _ in range(n)]
    supersedes: list[list[str]] = [[] for _ in range(n)]

    def provide(i: int, fact: str, span: tuple[int, int] | None, kind: str) -> None:
        provides[i].append(fact)
        spans[i].append(span)
        kinds[i].append(kind)

    latest_read: dict[str, str] = {}
    live_reads: dict[str, list[str]] = {}  # file -> its reads since its last edit
    latest_error: str | None = None
    error_of_command: dict[str, str] = {}  # command text -> the error its latest run reported
    error_before_edit: dict[str, str | None] = {}
    pending: tuple[list[str], list[str], str, SweToolOp | None] | None = None  # awaiting its result
    open_file: str | None = None  # SWE-agent's open file: the latest window shown
    listed: dict[str, tuple[int, tuple[int, int]]] = {}  # path -> (newest listing naming it, line span)
    last_assistant = max((i for i, (k, _) in enumerate(events) if k == "assistant"), default=-1)
    standing: list[str] = []  # the task and the system messages' constraints: the answer needs them
    task_seen = False
    for i, (kind, text) in enumerate(events):
        if kind == "system":
            provide(i, f"constraint@{i}", None, "constraint")
            standing.append(f"constraint@{i}")
        elif kind == "user" and not task_seen:
            task_seen = True
            provide(i, f"goal@{i}", None, "goal")
            standing.append(f"goal@{i}")
        elif kind == "assistant":
            op = tools[i] if tools is not None else None
            if op is not None:
                cmd = text or ""
                reads = []
                edits = [open_file if e == OPEN_FILE else _norm(e, root) for e in op.edits]
                edits = [e for e in edits if e]
                for p in op.names:
                    p = _norm(p, root)
                    if p in listed and p not in latest_read:
                        src, span = listed.pop(p)
                        fact = f"found:{p}@{src}"
                        provide(src, fact, span, "path")
                        needs[i].append(fact)
            else:
                cmd = command_of(text or "")
                reads, edits = classify(cmd) if cmd else ([], [])
                reads, edits = [_norm(r) for r in reads], [_norm(e) for e in edits]
            for f in dict.fromkeys(edits):
                if f in latest_read:
                    needs[i].append(latest_read[f])
                error_before_edit.setdefault(f, latest_error)
            pending = (reads, edits, cmd or "", op)
        elif kind == "tool_result" and pending is not None:
            reads, edits, cmd, op = pending
            pending = None
            stale: dict[str, None] = {}
            if op is not None:
                reads = _tool_reads(op, text or "", root)
                if op.window and reads:
                    open_file = reads[0]
                if op.listing:
                    body = text or ""
                    for p, (a, b) in _listed(body).items():
                        listed[_norm(p, root)] = (i, _char_span(body, a, b))
            for f in edits:  # the file changed: none of its earlier reads describes it any more
                latest_read.pop(f, None)
                for old in live_reads.pop(f, ()):
                    stale[old] = None
            for f in dict.fromkeys(reads):
                fact = f"read:{f}@{i}"
                provide(i, fact, None, "path")
                latest_read[f] = fact
                live_reads.setdefault(f, []).append(fact)
            if cmd in error_of_command:  # run again: its earlier failure is resolved or replaced
                stale[error_of_command.pop(cmd)] = None
            body = text or ""
            if is_error(body):
                latest_error = f"error@{i}"
                provide(i, latest_error, error_span(body), "error")
                if cmd:
                    error_of_command[cmd] = latest_error
            supersedes[i] = list(stale)
            if i == n - 1 and last_assistant >= 0:  # the submission's output: the final answer's needs
                final = needs[last_assistant]
                seen = {*final, *provides[i]}  # a set: a diff of many files stays linear
                for f in changed_files(body):
                    for fact in (latest_read.get(f), error_before_edit.get(f)):
                        if fact is not None and fact not in seen:
                            final.append(fact)
                            seen.add(fact)
    if last_assistant >= 0:
        final = needs[last_assistant]
        final.extend(f for f in standing if f not in final and int(f.rsplit("@", 1)[1]) < last_assistant)
    return FactTable(provides, spans, kinds, needs, supersedes)
