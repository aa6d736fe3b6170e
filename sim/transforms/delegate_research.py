"""``delegate_research``: research-shaped work moved into a scripted scout child (issue 25 item 3).

The seed engine's promise, as a what-if: "a scout child reads the files and returns a bounded report, so
the noise never enters the parent's context". A span of at least ``min_span`` consecutive read-only tool
round-trips (``base.round_trips``) becomes, in the parent, one delegating call (its turn sized as the
span's first turn, needing what the span needed from before it) answered by the child's report of
``report_tokens`` tokens; the span's events move into a child (``Trace.children``): a brief of the same
size (providing those needed facts), the span's turns and results, and a last call that writes the
report (``report_tokens`` output). The child's calls carry no residual: the parent's recorded overhead
belonged to requests holding the parent's history.

What the report keeps: the facts the span's results provide, newest first, ranked and cut by the mock
model's summarizer rule for a summary of ``report_tokens`` (``ReplayModel.summary_keeps``: extractive
knows only the past; oracle keeps what the parent later needs). The report provides them; the others no
longer reach the parent unless another of its events provides them: declared lost (``Moved``), and a
later parent turn that needs one goes without it (no tool in the parent can give it back; the mock model
degrades, or fails under ``model.on_missing=fail``). The report's turn in the child needs what it keeps.

Read-only (all of a turn's tool calls must be): a shell command whose every segment (``&&``, ``||``,
``;``, ``|``) is ``cat``, ``head``, ``tail``, ``sed -n`` (without ``-i``), ``grep``, ``rg``, ``ls``,
``find`` (without ``-exec``, ``-execdir``, ``-ok``, ``-delete``, ``-fprint*``) or ``tree`` (a ``cd``
segment is allowed; no output redirection but ``2>/dev/null``, no command substitution); and editor
views: Claude Code's ``Read``, ``Grep``, ``Glob``, ``LS``; ``str_replace_editor``/``file_editor``
``view`` (OpenHands, SWE-agent); SWE-agent's ``open``, ``goto``, ``scroll_up``, ``scroll_down``,
``search_file``, ``search_dir``, ``find_file``; an OpenHands ``action:read``. Commands are read from a
turn's last ```bash block (mini-swe-agent), its tool-call JSON lines (``{"name", "input"|"arguments"}``:
Claude Code, OpenHands), else its last line (SWE-agent).
"""

from __future__ import annotations

import dataclasses
import json

from sim.core.types import Call, Child, Event, Moved, Trace
from sim.engine.model import ReplayModel
from sim.information.facts import command_of, command_words
from sim.information.state import last_need
from sim.transforms.base import (
    Transform,
    check_int,
    external_needs,
    kind_of,
    outside_providers,
    rebuild,
    register,
    round_trips,
    span_events,
    spans,
    synthetic_event,
)

READERS = frozenset({"cat", "head", "tail", "grep", "rg", "ls", "find", "tree"})
_FIND_ACTIONS = ("-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls")
_VIEW_TOOLS = frozenset({"Read", "Grep", "Glob", "LS"})
_EDITORS = frozenset({"str_replace_editor", "file_editor"})
_SHELL_TOOLS = frozenset({"Bash", "bash", "execute_bash"})
_SWE_VIEWS = frozenset({"open", "goto", "scroll_up", "scroll_down", "search_file", "search_dir", "find_file"})
_HARMLESS = ("2>/dev/null", "2>&1")


def read_only_command(command: str) -> bool:
    """A shell command that only reads (module docstring)."""
    text = command
    for ok in _HARMLESS:
        text = text.replace(ok, " ")
    if ">" in text or "`" in text or "$(" in text:
        return False
    segments = command_words(text)
    if not segments:
        return False
    for words in segments:
        head, rest = words[0], words[1:]
        if head == "cd":
            continue
        if head == "sed":
            if "-n" not in rest or any(w.startswith("-i") or w.startswith("--in-place") for w in rest):
                return False
        elif head == "find":
            if any(w.startswith(_FIND_ACTIONS) for w in rest):
                return False
        elif head not in READERS:
            return False
    return True


def _tool_calls(text: str) -> list[tuple[str, dict]] | None:
    """A turn's tool-call JSON lines as (name, arguments); None when it has none."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not (line.startswith("{") and '"name"' in line):
            continue
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if not isinstance(d, dict) or not isinstance(d.get("name"), str):
            continue
        args = d.get("input", d.get("arguments"))
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except ValueError:
                args = {}
        out.append((d["name"], args if isinstance(args, dict) else {}))
    return out or None


def read_only_turn(e: Event) -> bool:
    """Every tool call of the assistant event ``e`` only reads (module docstring)."""
    if e.source_type == "action:read":
        return True
    text = e.content or ""
    cmd = command_of(text)
    if cmd is not None:
        return read_only_command(cmd)
    calls = _tool_calls(text)
    if calls is not None:
        for name, args in calls:
            if name in _VIEW_TOOLS:
                continue
            if name in _EDITORS and args.get("command") == "view":
                continue
            if name in _SHELL_TOOLS and isinstance(args.get("command"), str):
                if read_only_command(args["command"]):
                    continue
            return False
        return True
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not lines:
        return False
    words = lines[-1].split()
    if words[0] in _SWE_VIEWS or (words[0] in _EDITORS and words[1:2] == ["view"]):
        return True
    return read_only_command(lines[-1])


@register
@dataclasses.dataclass(frozen=True)
class DelegateResearch(Transform):
    """Spans of >= ``min_span`` read-only round-trips move into a child returning ``report_tokens``."""

    name = "delegate_research"
    min_span: int = 2
    report_tokens: int = 2000

    def __post_init__(self) -> None:
        check_int(self.name, "min_span", self.min_span, 1)
        check_int(self.name, "report_tokens", self.report_tokens, 1, 10_000_000)

    def apply(self, trace: Trace, model: ReplayModel) -> Trace:
        events, calls = trace.events, trace.calls
        trips = round_trips(trace)
        flags = [t and read_only_turn(events[c.event_index]) for t, c in zip(trips, calls, strict=True)]
        groups = [(a, b) for a, b in spans(flags, trace, lambda n: None) if b - a >= self.min_span]
        if not groups:
            return trace
        needed_at = trace.derived("last_need", last_need)
        bpt = trace.bytes_per_token
        moved: list[Moved] = []
        children: list[Child] = []
        base = len(trace.children)

        def replace(j: int, first: int, end: int, at: int) -> tuple[list[Event], Call]:
            a, b = span_events(trace, first, end)
            tid = f"delegate-{base + j}"
            covered: list[str] = []
            for e in reversed(events[a:b]):  # newest provider first, as a summary covers them
                covered.extend(f for f in reversed(e.provides) if f not in covered)
            later = {f for f in covered if needed_at.get(f, -1) >= b}
            kept = model.summary_keeps(covered, later, self.report_tokens, b)
            keep = set(kept)
            elsewhere = outside_providers(trace, a, b)
            lost = tuple(f for f in covered if f not in keep and f not in elsewhere)
            needs = external_needs(trace, a, b)
            before = {f for e in events[:a] for f in e.provides}
            stale = tuple(dict.fromkeys(f for e in events[a:b] for f in e.supersedes if f in before))
            turn = events[a]
            ask = dataclasses.replace(
                turn, index=at, tool_call_ids=(tid,), provides=(), needs=needs, fact_spans=(), fact_kinds=(),
                supersedes=(),
            )  # fmt: skip
            report = synthetic_event(
                at + 1, "tool_result", self.report_tokens, bpt, tool_call_id=tid, provides=tuple(kept),
                fact_kinds=tuple(kind_of(trace, f) for f in kept), supersedes=stale,
            )  # fmt: skip
            children.append(
                Child(first, self._child(trace, base + j, (a, b), (first, end), needs, kept), tid)
            )
            moved.append(
                Moved(
                    self.name, first, end, first, base + j,
                    sum(e.tokens for e in events[a:b]), ask.tokens + report.tokens, tuple(kept), lost,
                    tuple(kind_of(trace, f) for f in lost),
                )
            )  # fmt: skip
            c = calls[first]
            call = Call(
                index=0, event_index=0, view_end=0, input_tokens=None, output_tokens=c.output_tokens,
                residual_tokens=c.residual_tokens, usage_provenance="synthetic", timestamp=c.timestamp,
            )  # fmt: skip
            return [ask, report], call

        return rebuild(trace, groups, replace, moved, children)  # replace() fills both as it goes

    def _child(
        self,
        trace: Trace,
        j: int,
        span: tuple[int, int],
        span_calls: tuple[int, int],
        needs: tuple[str, ...],
        kept: list[str],
    ) -> Trace:
        """The scout's run: the parent's system and tools events, the brief (sized as the span's first
        turn, providing what the span needs from before it), the span's events, the report's call."""
        (a, b), (first, end) = span, span_calls
        events, calls = trace.events, trace.calls
        head = [e for e in events[: calls[0].event_index] if e.kind in ("system", "tools")]
        out: list[Event] = [dataclasses.replace(e, index=i) for i, e in enumerate(head)]
        brief = synthetic_event(len(out), "user", events[a].tokens, trace.bytes_per_token)
        out.append(
            dataclasses.replace(brief, provides=needs, fact_kinds=tuple(kind_of(trace, f) for f in needs))
        )
        provided = {f for e in out for f in e.provides}
        shift = len(out) - a
        new_calls = []
        for k in range(first, end):
            c = calls[k]
            new_calls.append(
                Call(
                    index=k - first, event_index=c.event_index + shift, view_end=c.event_index + shift,
                    input_tokens=None, output_tokens=c.output_tokens, usage_provenance="synthetic",
                    timestamp=c.timestamp,
                )
            )  # fmt: skip
        for e in events[a:b]:  # a fact superseded here that the child never had stays the parent's
            stale = tuple(f for f in e.supersedes if f in provided)
            out.append(dataclasses.replace(e, index=e.index + shift, supersedes=stale, run_index=0))
            provided.update(e.provides)
        at = len(out)
        out.append(
            dataclasses.replace(
                synthetic_event(at, "assistant", self.report_tokens, trace.bytes_per_token), needs=tuple(kept)
            )
        )
        new_calls.append(
            Call(index=end - first, event_index=at, view_end=at, input_tokens=None,
                 output_tokens=self.report_tokens, usage_provenance="synthetic")
        )  # fmt: skip
        return Trace(
            trace_id=f"{trace.trace_id}/delegate-{j}",
            source_format=trace.source_format,
            events=tuple(out),
            calls=tuple(new_calls),
            agent=trace.agent,
            model=trace.model,
            context_window=trace.context_window,
            bytes_per_token=trace.bytes_per_token,
            recorded_policy={"name": "raw"},
            outcome={"delegated_from": trace.trace_id, "calls": [first, end]},
        )
