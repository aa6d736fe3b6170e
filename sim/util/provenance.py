"""Where a timing was measured: the commit, Python and the versions of the libraries in use, the machine
and its load at the start and at the end (issue 40: a figure without them cannot be trusted later, as
machines of one kind differ several-fold in speed from one session to the next).

For timing output only (``ctxsim bench``, ``benchmarks/``): never in results that must be byte-identical
from run to run. Standard library only, and ``sim`` is not imported, so a benchmark that measures another
checkout's ``sim`` can still load this file."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent.parent  # the checkout (or site-packages) holding sim/


def commit(repo: str | os.PathLike | None = None) -> str:
    """The commit checked out at ``repo`` (default: the checkout this file is in), with ``+dirty`` when a
    tracked file differs from it or an untracked, unignored file exists; ``unknown`` when ``repo`` is not
    the top of a git work tree (an installed ctxsim: site-packages may sit inside some other repository,
    whose commit says nothing of ctxsim's code)."""
    where = Path(repo or HERE).resolve()
    try:
        head = _git(where, 30, "rev-parse", "--show-toplevel", "HEAD")
        lines = head.stdout.split("\n")
        if head.returncode != 0 or len(lines) < 2 or Path(lines[0]).resolve() != where:
            return "unknown"
        # no optional locks: a benchmark's status never takes the index lock from the user's own git
        status = _git(where, 60, "--no-optional-locks", "status", "--porcelain")
    except (OSError, subprocess.SubprocessError):  # no git, or no such folder
        return "unknown"
    dirty = status.returncode != 0 or bool(status.stdout.strip())
    return lines[1].strip() + ("+dirty" if dirty else "")


def _git(where: Path, timeout: float, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=where, capture_output=True, text=True, timeout=timeout)


def cpu_model() -> str:
    """The CPU's model name (Linux: /proc/cpuinfo), else what ``platform`` knows, else ``unknown``."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, sep, value = line.partition(":")
                if sep and key.strip() in ("model name", "Hardware", "cpu model"):
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def load() -> tuple[float, float, float] | None:
    """The 1, 5 and 15-minute load averages, or None where the platform has none."""
    try:
        return tuple(round(v, 2) for v in os.getloadavg())  # type: ignore[return-value]
    except (AttributeError, OSError):
        return None


def library_versions(also: tuple[str, ...] = ()) -> dict[str, str]:
    """Version of each installed distribution one of whose top-level modules this process has imported
    (ctxsim itself left out: the commit says which), and of the distributions named in ``also`` (what
    the child processes a benchmark times import), sorted by name."""
    from importlib.metadata import packages_distributions, version

    dists: set[str] = set(also)
    for top, names in packages_distributions().items():
        if top in sys.modules and top != "_distutils_hack":  # setuptools' start-up shim, not a library in use
            dists.update(names)
    out = {}
    for name in sorted(dists, key=str.lower):
        if name.lower() == "ctxsim":
            continue
        try:
            out[name] = version(name)
        except Exception:  # noqa: BLE001 - a name in `also` that is not installed
            out[name] = "not installed"
    return out


def _ctxsim_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ctxsim")
    except PackageNotFoundError:
        return None


def cores() -> tuple[int, int]:
    """(cores on the machine, cores this process may run on)."""
    total = os.cpu_count() or 0
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = total
    return total, usable


class Provenance:
    """Taken at the start of a measurement (``start()``) and closed at its end (``finish()``): the load at
    both, and the libraries imported by the end (a benchmark imports some only when it runs them)."""

    def __init__(self, repo: str | os.PathLike | None = None, also: tuple[str, ...] = ()) -> None:
        self.repo, self.also = repo, also
        self.load_start = load()
        self.load_end: tuple[float, float, float] | None = None
        self.data: dict | None = None

    def finish(self) -> dict:
        """Everything, as a JSON-ready dict (the ``provenance`` key of a benchmark's JSON)."""
        if self.data is None:
            self.load_end = load()
            total, usable = cores()
            self.data = {
                "commit": commit(self.repo),
                "ctxsim": _ctxsim_version(),  # what an installed ctxsim (commit unknown) still says
                "python": f"{platform.python_implementation()} {platform.python_version()}",
                "libraries": library_versions(self.also),
                "platform": platform.platform(),
                "cpu": cpu_model(),
                "cores": total,
                "cores_usable": usable,
                "load_start": list(self.load_start) if self.load_start else None,
                "load_end": list(self.load_end) if self.load_end else None,
            }
        return self.data

    def text(self) -> str:
        """Two lines of text (``provenance: ...``, ``machine: ...``), printed after the timings."""
        d = self.finish()
        libs = ", ".join(f"{k} {v}" for k, v in d["libraries"].items()) or "none imported"

        def la(v: list | None) -> str:
            return "/".join(f"{x:.2f}" for x in v) if v else "unknown"

        return (
            f"provenance: commit {d['commit']} (ctxsim {d['ctxsim'] or 'not installed'}); "
            f"{d['python']}; {libs}\n"
            f"machine: {d['platform']}; {d['cpu']}; {d['cores']} cores ({d['cores_usable']} usable); "
            f"load average (1/5/15 min) {la(d['load_start'])} at start, {la(d['load_end'])} at end"
        )


def start(repo: str | os.PathLike | None = None, also: tuple[str, ...] = ()) -> Provenance:
    """A ``Provenance`` begun now: call before the first thing timed, print ``.text()`` after the last."""
    return Provenance(repo, also)


# what ``ctxsim`` imports in a child process a benchmark times (its base dependencies that matter for
# speed): named in ``also`` by the benchmarks whose timings are of child processes
CHILD_LIBRARIES = ("numpy", "pandas", "pyarrow", "hydra-core", "omegaconf", "PyYAML")
