"""Files that appear whole or not at all, safe with several writers in one folder.

``atomic_path(path)`` yields a temporary name beside ``path``; when the block succeeds the file is fsynced,
renamed over ``path`` and the folder is fsynced, so after a crash ``path`` is either the old file or the
whole new one (never a name pointing at unwritten data), and the rename itself survives the crash.

Every temporary name carries its writer's id: ``.NAME.<kernel>~<pid namespace>~<pid>.<random>.tmp``.
A writer removes only its own temporaries (on failure, inside ``atomic_path``); another process's
temporary is removed only when it is provably stale (``is_stale``): written under this very kernel boot
(same ``/proc/sys/kernel/random/boot_id``) and the same pid namespace, by a process that no longer exists.
A temporary of a writer on another machine, in another container's pid namespace or from before a
reboot cannot be proven stale from here and is left alone.
"""

from __future__ import annotations

import errno
import os
import re
import time
from contextlib import contextmanager
from pathlib import Path

_TEMP = re.compile(
    r"^\.(?P<target>.+)\.(?P<kernel>[A-Za-z0-9-]+)~(?P<ns>[0-9]+)~(?P<pid>[0-9]+)\.[a-z0-9_]+\.tmp\Z"
)


def _kernel_id() -> str:
    """The running kernel instance: its boot id on Linux (shared by containers, new at each boot);
    elsewhere ``h-`` and the host name (no reboot detection there)."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            return f.read().strip().replace("-", "")[:32]
    except OSError:
        import socket

        return "h-" + re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname())[:40]


def _pid_namespace() -> int:
    """The pid namespace (its inode on Linux): two containers on one kernel may reuse each other's pids."""
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


_KERNEL = _kernel_id()
_PIDNS = _pid_namespace()


def writer_id() -> str:
    """``<kernel>~<pid namespace>~<pid>``: who writes a temporary file. Computed per call: a forked
    worker is a different writer from its parent."""
    return f"{_KERNEL}~{_PIDNS}~{os.getpid()}"


def is_stale(path: Path) -> bool:
    """True only when ``path`` is a temporary name of ``atomic_path`` whose writer is provably gone:
    same kernel boot, same pid namespace, and no process with its pid. A pid that is alive (even if reused
    by another program) or a name from another machine keeps the file: leaving a stale file costs disk
    space, removing a live writer's file breaks its write."""
    m = _TEMP.match(Path(path).name)
    if not m or m["kernel"] != _KERNEL or int(m["ns"]) != _PIDNS:
        return False
    pid = int(m["pid"])
    if pid == os.getpid():
        return False  # this process's own file: another thread may be writing it
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OverflowError):  # alive under another user / not a pid we can ask about
        return False
    return False


def remove_stale_temps(folder: Path, pattern: str = ".*.tmp") -> list[Path]:
    """Delete the provably stale temporaries (``is_stale``) in ``folder`` matching ``pattern``."""
    return _unlink_stale(Path(folder).glob(pattern))


def _unlink_stale(paths) -> list[Path]:
    """Delete those of ``paths`` that are provably stale, in name order; the ones deleted."""
    removed = []
    for tmp in sorted(paths):
        if not is_stale(tmp):
            continue
        try:
            tmp.unlink()
        except FileNotFoundError:  # another process cleaned it up first
            continue
        removed.append(tmp)
    return removed


def _process_start() -> float:
    """When this process started (unix seconds, to ~10 ms): now, less the time since its start (uptime
    less its start in clock ticks after boot, ``/proc/self/stat``); elsewhere, the time this module was
    first imported."""
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime", encoding="ascii") as f:
            uptime = float(f.read().split()[0])
        return time.time() - (uptime - ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return _IMPORTED


_IMPORTED = time.time()
_STARTED: list[float] = []  # _process_start(), once a process (a forked worker: its own)
_STARTED_PID: list[int] = []


def started() -> float:
    if _STARTED_PID != [os.getpid()]:
        _STARTED[:], _STARTED_PID[:] = [_process_start()], [os.getpid()]
    return _STARTED[0]


# per (process, folder): the temporaries, by target, that were there, last written before this process
# started; what the first write into a folder lists, once (every such file existed by then)
_OLD_TEMPS: dict[tuple[int, str], dict[str, list[Path]]] = {}


def _old_temps(folder: Path) -> dict[str, list[Path]]:
    key = (os.getpid(), os.path.abspath(folder))
    found = _OLD_TEMPS.get(key)
    if found is None:
        found = {}
        before = started()
        try:
            with os.scandir(folder) as it:
                for e in it:
                    m = _TEMP.match(e.name) if e.name.endswith(".tmp") else None
                    if m is not None and e.stat(follow_symlinks=False).st_mtime < before:
                        found.setdefault(m["target"], []).append(Path(e.path))
        except OSError:  # unreadable: nothing to clean here
            pass
        _OLD_TEMPS[key] = found
    return found


def remove_stale_temps_of(path: Path) -> list[Path]:
    """Delete the temporaries of ``path`` (``atomic_path``'s names for this very target) that are
    provably stale (``is_stale``: their writer is gone) and older than this process (last written before
    it started): a SIGKILLed ``import -o o.jsonl`` leaves ``.o.jsonl.<writer>.<random>.tmp`` (10-28 MB
    in the issue), which the next write of ``o.jsonl`` removes. Another target's temporaries are left.
    The folder is listed once a process (``_old_temps``), not once a write: a sweep writes thousands of
    parts into one folder."""
    path = Path(path)
    return _unlink_stale(_old_temps(path.parent).pop(path.name, []))


def fsync_dir(folder: Path) -> None:
    """Make the entries of ``folder`` durable (a rename, a new file or subfolder in it). File systems
    that cannot fsync a directory (EINVAL, ENOTSUP) offer no more durability to ask for."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EPERM):
            return
        raise
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EBADF):
            raise
    finally:
        os.close(fd)


def fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_dirs(folder: Path) -> None:
    """``mkdir -p`` that fsyncs the parent of every folder it creates, so a new folder's entry is as
    durable as the files later renamed into it."""
    folder = Path(folder)
    missing = []
    while not folder.is_dir():
        missing.append(folder)
        if folder.parent == folder:
            break
        folder = folder.parent
    for d in reversed(missing):
        try:
            d.mkdir()
        except FileExistsError:
            if not d.is_dir():
                raise
            continue
        fsync_dir(d.parent)


def durable_replace(src: Path, dst: Path) -> None:
    """``os.replace`` then fsync of both folders (the one that gained the name and the one that lost it)."""
    os.replace(src, dst)
    fsync_dir(Path(dst).parent)
    if Path(src).parent != Path(dst).parent:
        fsync_dir(Path(src).parent)


def _place_problem(folder: Path, exc: OSError) -> str:
    """Why no file can be written in ``folder``, in a few words (the first part of it that is a file)."""
    for part in (folder, *folder.parents):
        if part.exists() and not part.is_dir():
            return f"{part} is not a folder"
    return f"no file can be created in {folder} ({exc.strerror or type(exc).__name__})"


@contextmanager
def atomic_path(path: Path):
    """Yield a temporary path beside ``path`` (named with this writer's id); it replaces ``path`` only if
    the block succeeds: the file is fsynced before the rename and its folder after it. A Ctrl-C that
    arrived meanwhile, even one a finalizer swallowed (``sim.util.interrupts``), leaves ``path`` as it was."""
    from sim.util.interrupts import check

    path = Path(path)
    import tempfile  # here: a reader of the store (a finished sweep's resume) writes nothing

    if path.is_dir():
        from sim.util.errors import ConfigError

        raise ConfigError(f"cannot write {path}: it is a folder")
    try:  # where to write is the user's choice: a folder that is a file, or cannot hold one, is exit 2
        make_dirs(path.parent)
        remove_stale_temps_of(path)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{writer_id()}.", suffix=".tmp", dir=path.parent)
    except (
        FileExistsError,
        NotADirectoryError,
        FileNotFoundError,
        PermissionError,
        IsADirectoryError,
    ) as exc:
        from sim.util.errors import ConfigError

        raise ConfigError(f"cannot write {path}: {_place_problem(path.parent, exc)}") from None
    os.close(fd)
    try:
        yield Path(tmp)
        check()
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes files owner-only; results are ordinary files
        fsync_file(tmp)
        durable_replace(Path(tmp), path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
