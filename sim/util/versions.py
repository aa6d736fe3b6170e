"""Versions of installed distributions (ctxsim's own, the config libraries'), as
``importlib.metadata.version`` gives them.

The plain case is read directly: the ``Version`` of the ``METADATA`` in the first ``NAME-*.dist-info``
folder on ``sys.path``, which is the distribution ``importlib.metadata.version`` answers with. Anything
less plain — another finder that lists distributions, a zip file on the path, an ``.egg-info``, two
candidates in one folder, no ``Version`` line, nothing found — is asked of ``importlib.metadata``
itself, so both always give the same answer (tests/test_versions.py)."""

from __future__ import annotations

import os
import re
import sys

_SEP = re.compile(r"[-_.]+")
_LINES = re.compile(r"\r\n|\r|\n")  # the line ends the email parser knows
_HEADER_NAME = re.compile(r"[\041-\071\073-\176]+")  # printable ASCII but ':' and space
_MAX_METADATA_BYTES = 16 << 20  # a long description included; a larger file is importlib.metadata's
_SEEN: dict[str, str | None] = {}


class _Unsure(Exception):
    """Not the plain case: importlib.metadata decides."""


def _normal(name: str) -> str:
    # as importlib.metadata's Prepared.normalize (PEP 503, then '-' as '_')
    return _SEP.sub("-", name).lower().replace("-", "_")


def _plain_version(name: str) -> str:
    from importlib.machinery import PathFinder

    for finder in sys.meta_path:
        if finder is not PathFinder and callable(getattr(finder, "find_distributions", None)):
            raise _Unsure
    want = _normal(name)
    for entry in sys.path:
        folder = entry or "."
        if folder.lower().endswith(".egg"):  # an egg lists its metadata otherwise
            raise _Unsure
        try:
            names = os.listdir(folder)
        except NotADirectoryError:  # a zip on the path may hold distributions
            raise _Unsure from None
        except OSError:
            continue
        found = [
            n
            for n in names
            if n.lower().endswith((".dist-info", ".egg-info"))
            and _normal(n.lower().rpartition(".")[0].partition("-")[0]) == want
        ]
        if not found:
            continue
        if len(found) != 1:
            raise _Unsure
        return _header_version(os.path.join(folder, found[0]))
    raise _Unsure


def _header_version(info: str) -> str:
    """The Version header of a distribution's metadata: ``METADATA``, else ``PKG-INFO``, else the
    ``.egg-info`` file itself, as importlib.metadata reads them."""
    for name in ("METADATA", "PKG-INFO", ""):
        try:
            with open(os.path.join(info, name) if name else info, "rb") as f:
                data = f.read(_MAX_METADATA_BYTES + 1)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError):
            continue
        except OSError:
            raise _Unsure from None
        if not data:
            continue
        if len(data) > _MAX_METADATA_BYTES:
            raise _Unsure
        try:
            lines = _LINES.split(data.decode("utf-8"))
        except UnicodeDecodeError:
            raise _Unsure from None
        for i, line in enumerate(lines):
            if not line:
                break  # the end of the headers
            key, sep, value = line.partition(":")
            if not (sep and _HEADER_NAME.fullmatch(key)):
                raise _Unsure  # folded, or not a header line: the email parser's business
            if key.lower() == "version":
                if i + 1 < len(lines) and lines[i + 1][:1] in (" ", "\t"):
                    raise _Unsure  # a folded header
                return value.lstrip(" \t")
        raise _Unsure
    raise _Unsure


def installed_version(name: str) -> str | None:
    """``importlib.metadata.version(name)``, or None when no such distribution is installed. Once per
    process and name."""
    # not importlib.metadata first: importing it costs 63-80 ms CPU, this 7-10 ms; a resume is ~0.3 s
    if name not in _SEEN:
        try:
            _SEEN[name] = _plain_version(name)
        except _Unsure:
            from importlib.metadata import PackageNotFoundError, version

            try:
                _SEEN[name] = version(name)
            except PackageNotFoundError:
                _SEEN[name] = None
    return _SEEN[name]


def ctxsim_version() -> str:
    """ctxsim's own version (``sim.__version__``): the installed distribution's, or ``0.0.0+source`` when
    running from a source tree without installation."""
    return installed_version("ctxsim") or "0.0.0+source"
