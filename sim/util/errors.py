"""Typed errors. Every user-facing failure is one of these; the CLI turns them into one line and exit 2."""

from __future__ import annotations

from collections.abc import Iterable


class CtxsimError(Exception):
    """Base of all errors a user can cause (bad input, bad config). Exit status 2."""

    exit_code = 2


class TraceError(CtxsimError):
    """A trace file or record is malformed. Names the file, the record and the field."""

    def __init__(self, file: str, message: str, record: str | None = None, field: str | None = None):
        self.file, self.record, self.field, self.message = file, record, field, message
        where = file
        if record is not None:
            where += f": record {record}"
        if field is not None:
            where += f": field {field}"
        super().__init__(clip(f"{where}: {message}"))  # an identifier from the input may be megabytes long

    def __reduce__(self):  # picklable with its fields: a worker process (pool, launcher) sends it back
        return (type(self), (self.file, self.message, self.record, self.field))


MAX_MESSAGE_CHARS = 2000  # an error or warning line: an identifier from the input may be megabytes long


def clip(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``text`` cut in the middle past ``limit`` characters (its start names the place, its end says
    what is wrong), saying how much was left out."""
    if len(text) <= limit:
        return text
    head, tail = limit * 2 // 3, limit // 3
    return f"{text[:head]}...({len(text) - head - tail:,} characters left out)...{text[-tail:]}"


class ConfigError(CtxsimError):
    """A knob, override or option has a bad value."""


class UnknownNameError(CtxsimError):
    """A name (policy, format, ...) is not registered; lists what is and the closest match."""

    def __init__(self, kind: str, name: str, choices: Iterable[str]):
        choices = sorted(choices)
        import difflib  # only when a name is wrong: every command imports this module

        close = difflib.get_close_matches(name, choices, n=1)
        if not close:  # a fragment of a longer name ("masking") is too short for difflib's ratio
            close = sorted((c for c in choices if name and name.lower() in c.lower()), key=len)[:1]
        hint = f"; did you mean '{close[0]}'?" if close else ""
        super().__init__(f"unknown {kind} '{name}'; registered: {', '.join(choices)}{hint}")
        self.kind, self.name, self.choices = kind, name, choices

    def __reduce__(self):
        return (type(self), (self.kind, self.name, self.choices))


def first_line(exc: BaseException) -> str:
    """An exception's message for one line of ours: its first line, at most 200 characters (a reader's
    message can hold a whole record), or its type's name when it says nothing."""
    text = str(exc).strip()
    return (text.splitlines()[0][:200] if text else "") or type(exc).__name__
