"""Where ctxsim finds its own files and the shared real traces: in a source checkout (an editable install, or
the tree on ``sys.path``) and in an installed wheel alike.

The checkout keeps ``conf/`` at its top, where users and docs cite it; a wheel carries the same files inside
the package as ``sim/conf/`` (``setup.py`` maps them). The embedded suite sits in the ``scenarios`` package
beside ``sim`` in both. Only these two places are looked at: the checkout's ``conf/`` is used only when
``sim/`` has no ``conf/`` of its own and sits beside a ``pyproject.toml`` (the checkout's), so an
installed ctxsim never reads a ``conf/`` that some other project put in site-packages.
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent.parent  # sim/
# the checkout's root; in an installed wheel, the folder sim/ and scenarios/ were installed into
REPO = PACKAGE_DIR.parent
# True in a source checkout: conf/ (and benchmarks/, tests/) are the repository's, beside sim/
SOURCE_CHECKOUT = not (PACKAGE_DIR / "conf").is_dir() and (REPO / "pyproject.toml").is_file()
CONF_DIR = REPO / "conf" if SOURCE_CHECKOUT else PACKAGE_DIR / "conf"
EMBEDDED_SUITE = REPO / "scenarios" / "suite"


def traces_dir() -> Path:
    """The shared real traces: CTXSIM_TRACES, default ../shared/traces beside the repository. An installed
    ctxsim has no repository to stand beside: without CTXSIM_TRACES its path is the literal
    ``$CTXSIM_TRACES``, so a message naming a missing file says what to set instead of citing a folder
    next to site-packages."""
    default = REPO.parent / "shared" / "traces" if SOURCE_CHECKOUT else Path("$CTXSIM_TRACES")
    return Path(os.environ.get("CTXSIM_TRACES", default))


MAX_FOLDER_DEPTH = 256  # folders below a folder named on the command line that a walk enters


def too_deep(path: str, max_depth: int = MAX_FOLDER_DEPTH) -> str:
    """The one message for a folder past the depth limit (``files_under`` and the importers' walk)."""
    shown = path if len(path) <= 200 else f"...{path[-120:]}"
    return f"folders nested more than {max_depth} levels deep (at {shown})"


def files_under(root: Path, suffixes: tuple[str, ...], max_depth: int = MAX_FOLDER_DEPTH) -> list[Path]:
    """The files under ``root`` whose name ends with one of ``suffixes``, sorted by path: a walk with a
    stack of its own (``Path.rglob`` recursed once a level: 1,100 nested folders raised RecursionError)
    that enters no symbolic link to a folder (as ``rglob``) and no folder more than ``max_depth`` levels
    down: ValueError naming the first such folder, which a caller turns into its own one-line error."""
    found: list[Path] = []
    stack: list[tuple[Path, int]] = [(Path(root), 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = list(it)
        except OSError:  # unreadable: skipped, as rglob skips it
            continue
        for e in entries:
            try:
                is_dir = e.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if is_dir:
                if depth + 1 > max_depth:
                    raise ValueError(too_deep(e.path, max_depth))
                stack.append((Path(e.path), depth + 1))
            elif e.name.endswith(suffixes):
                found.append(Path(e.path))
    return sorted(found, key=str)


def outside(path: Path, roots: list[Path]) -> bool:
    """True when ``path`` (made absolute against the current folder, ``..`` and symbolic links resolved
    as far as they exist) lies inside none of ``roots`` (resolved the same way): a path a file (a gate or
    experiment file) names may not choose a place outside them to write in."""
    where = Path(os.path.abspath(path)).resolve()
    for root in roots:
        root = Path(os.path.abspath(root)).resolve()
        if where == root or root in where.parents:
            return False
    return True
