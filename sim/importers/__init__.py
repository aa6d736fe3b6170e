"""Source formats. One module per format, registered by name; ``load_path`` auto-detects.

An importer maps a real format to canonical traces and never imports anything above ``sim.trace``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from sim.core.types import Trace
from sim.util.errors import TraceError, UnknownNameError
from sim.util.jsonl import json_lines
from sim.util.paths import MAX_FOLDER_DEPTH, too_deep


@dataclass(frozen=True)
class Importer:
    name: str
    extensions: tuple[str, ...]  # file name endings it may read ("" for folder formats)
    sniff: Callable[[Path], bool]  # cheap look at the file (or folder): is it ours?
    load: Callable[[Path], Iterator[Trace]]
    folder: bool = False  # the format is a directory (e.g. an OpenHands SDK v1 conversation)


_REGISTRY: dict[str, Importer] = {}
_JSON_CHECK_BYTES = 16 << 20  # an unrecognised .json up to this size is parsed to name its damage
_LOADED = False
CANONICAL_NAMES = ("ctxsim-canonical", "ctxsim-canonical-parquet")  # sim.importers.canonical's, in order


def register(imp: Importer) -> Importer:
    if imp.name in _REGISTRY:
        raise ValueError(f"importer '{imp.name}' registered twice")
    _REGISTRY[imp.name] = imp
    return imp


def registered() -> dict[str, Importer]:
    _load_builtins()
    return dict(_REGISTRY)


def get_importer(name: str) -> Importer:
    reg = registered()
    if name not in reg:
        raise UnknownNameError("format", name, reg)
    return reg[name]


def _load_builtins() -> None:
    """Import every module of this package once: each registers its format (one module per format)."""
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    from sim.util.plugins import import_modules

    import_modules("sim.importers", skip="common")


def detect(path: Path) -> Importer:
    """The importer for a file or a folder-format directory, or a TraceError naming it and what was tried."""
    if (imp := _canonical_first(path)) is not None:
        return imp
    reg = registered()
    if path.is_dir():
        for imp in reg.values():
            if imp.folder and sniffs(imp, path):
                return imp
        raise TraceError(str(path), "directory is not a trace in a folder format")
    suffix = "".join(path.suffixes[-2:]).lower() if path.suffixes else ""
    candidates = [i for i in reg.values() if any(suffix.endswith(ext) for ext in i.extensions)]
    for imp in candidates:
        if sniffs(imp, path):
            return imp
    if suffix.endswith((".json", ".jsonl")):
        _raise_if_not_json(path, jsonl=suffix.endswith(".jsonl"))
    raise TraceError(
        path.name,
        f"unknown format (tried: {', '.join(i.name for i in candidates) or 'none for this extension'}; "
        f"supported: {', '.join(sorted(reg))})",
    )


def _canonical_first(path: Path) -> Importer | None:
    """ctxsim's own format when it claims the file, found without importing every other format (a
    command that reads canonical files, such as ``size``, then never imports them): it is the first
    candidate for its extensions in the registry's order (its module is the first by name), so
    ``detect`` would choose it too. None: ask every format, as ``detect`` does."""
    suffix = "".join(path.suffixes[-2:]).lower() if path.suffixes else ""  # (as ``detect`` reads it)
    if _LOADED or not suffix.endswith((".jsonl", ".parquet")) or not path.is_file():
        return None
    import importlib

    importlib.import_module("sim.importers.canonical")  # registers ctxsim's own formats (as a plugin is)

    first = next(iter(_REGISTRY.values()))  # (a format registered before the built-in ones comes first)
    if first.name != CANONICAL_NAMES[0]:
        return None
    for imp in list(_REGISTRY.values())[:2]:
        if imp.name in CANONICAL_NAMES and suffix.endswith(imp.extensions) and sniffs(imp, path):
            return imp
    return None


def sniffs(imp: Importer, path: Path) -> bool:
    """``imp.sniff(path)``, where a sniff that meets input of a shape it did not expect (a list where a
    name belongs, unreadable bytes) means "not ours" rather than a crash of detection."""
    try:
        return bool(imp.sniff(path))
    except (OSError, ValueError, TypeError, KeyError, IndexError, AttributeError, RecursionError):
        return False


def _raise_if_not_json(path: Path, jsonl: bool) -> None:
    """A file no importer recognises is most often damaged JSON: say so, with the position. Bounded:
    the first record of JSON Lines; a whole ``.json`` only up to ``_JSON_CHECK_BYTES`` (a 500 MB file in
    no known format took 11.7 GB to parse just to say so), a larger one is named unknown unparsed."""
    if jsonl:
        for lineno, _, problem in json_lines(path, errors="replace"):  # the first record tells
            if problem is not None:
                raise TraceError(path.name, problem, record=f"line {lineno}")
            return
        return
    try:
        if path.stat().st_size > _JSON_CHECK_BYTES:
            return
    except OSError:
        return
    read_json(path)


def expand_paths(paths: Iterable[str | Path]) -> list[Path]:
    """Paths named on the command line. A directory that is a trace in a folder format stands for
    itself; any other directory for the trace files and folder-format traces inside it, sorted."""

    def is_folder_trace(d: Path) -> bool:
        return any(sniffs(imp, d) for imp in registered().values() if imp.folder)

    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():  # (every format is asked: a file is only listed here, ``detect`` reads it)
            reg = registered()
            exts = tuple(sorted({ext for imp in reg.values() for ext in imp.extensions if ext}))
            if is_folder_trace(p):
                out.append(p)
                continue
            found: list[Path] = []
            skipped: list[str] = []
            for f, is_dir in _walk(p, is_folder_trace):
                if is_dir:
                    found.append(f)
                elif f.name.lower().endswith(exts):
                    if _claimed(f, reg):
                        found.append(f)
                    else:  # a folder of runs holds configs and logs too: pass them over, say which
                        skipped.append(f.name)
            if skipped:
                from sim.importers.common import warn

                more = f" and {len(skipped) - 3} more" if len(skipped) > 3 else ""
                warn(
                    str(p),
                    f"skipped {len(skipped)} files no format recognises: {', '.join(skipped[:3])}{more}",
                )
            if not found:
                raise TraceError(str(p), "directory holds no trace files")
            out.extend(found)
        elif p.is_file():
            out.append(p)
        else:
            raise TraceError(str(p), "no such file or directory")
    return out


def _walk(root: Path, is_folder_trace: Callable[[Path], bool]) -> Iterator[tuple[Path, bool]]:
    """(path, True) for each folder-format trace under ``root`` and (path, False) for each other file,
    in sorted path order (a directory's entries by name, each directory's contents right after it).
    A folder trace is not entered, so its own files are never listed or sniffed; a symbolic link to a
    directory may be a folder trace but is not entered either. Each directory is listed once: linear in
    the size of the tree (checking every file against every claimed folder was quadratic)."""

    def entries(d: Path) -> Iterator[os.DirEntry]:
        try:
            with os.scandir(d) as it:
                found = list(it)
        except OSError:  # unreadable: skipped, as a glob would
            return iter(())
        return iter(sorted(found, key=lambda e: e.name))

    stack = [entries(root)]
    while stack:
        e = next(stack[-1], None)
        if e is None:
            stack.pop()
            continue
        path = Path(e.path)
        try:
            is_dir, is_file = e.is_dir(), e.is_file()
        except OSError:
            continue
        if is_dir:
            if is_folder_trace(path):
                yield path, True
            elif not e.is_symlink():
                if len(stack) > MAX_FOLDER_DEPTH:  # the limit run --dataset's walk keeps (files_under)
                    raise TraceError(str(root), too_deep(e.path))
                stack.append(entries(path))
        elif is_file:
            yield path, False


def _claimed(f: Path, reg: dict[str, Importer]) -> bool:
    suffix = "".join(f.suffixes[-2:]).lower()
    return any(sniffs(i, f) for i in reg.values() if any(suffix.endswith(e) for e in i.extensions if e))


def load_path(path: str | Path) -> Iterator[Trace]:
    """The traces of one file or folder. The boundary of untrusted data: an importer that meets a value of
    a shape it does not expect (a list where a name should be, a missing key) raises a TraceError naming
    the file, never a crash; importers give more precise errors where they validate."""
    path = Path(path)
    imp = detect(path)
    try:
        yield from imp.load(path)
    except (TraceError, UnknownNameError):
        raise
    except (TypeError, KeyError, AttributeError, ValueError, IndexError, RecursionError) as exc:
        detail = str(exc).splitlines()[0][:120] if str(exc) else ""
        raise TraceError(
            path.name, f"not a valid {imp.name} file: unexpected {type(exc).__name__} ({detail})"
        ) from None


def load_paths(paths: Iterable[str | Path]) -> Iterator[Trace]:
    for p in expand_paths(paths):
        yield from load_path(p)


def read_json(path: Path):
    """Whole-file JSON (UTF-8, ``sim.util.jsonl.parse_document``'s bounds, checked by size before reading)
    with a TraceError that names the file and the position on failure."""
    from sim.importers.common import MAX_DOCUMENT_BYTES, parse_text

    try:
        size = path.stat().st_size
        if size > MAX_DOCUMENT_BYTES:
            raise TraceError(
                path.name,
                f"{size:,} bytes, larger than the {MAX_DOCUMENT_BYTES:,} ctxsim parses as one JSON document",
            )
        raw = path.read_bytes()
    except OSError as exc:
        raise TraceError(path.name, f"cannot read ({exc.strerror or exc})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TraceError(path.name, f"not UTF-8 text (first bad byte at offset {exc.start})") from None
    return parse_text(text, path.name)
