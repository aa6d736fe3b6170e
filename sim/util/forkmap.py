"""``[fn(job) for job in jobs]`` over forked worker processes that inherit the caller's memory.

``size`` splits work whose inputs are already in memory (loaded traces, every setting's figures) and
whose answers are small (per-run sums, interval bounds): a forked child reads the inputs for free, so
only the answers cross a pipe. The calling process takes the first share itself (no idle parent), each
child one of the others; answers come back in job order, so the result is the same list whatever the
number of workers. Where ``os.fork`` does not exist, or with one worker or one job, the jobs run here.
"""

from __future__ import annotations

import os
import pickle
import signal
import traceback
from collections.abc import Callable, Sequence
from typing import TypeVar

J = TypeVar("J")
R = TypeVar("R")

MAX_WORKERS = 64  # a bound on the processes one command forks (every input has bounded cost)


def check_workers(workers: int, as_word: bool = False) -> int:
    """``--workers N`` (or the ``workers=N`` word, ``as_word``) is in [1, MAX_WORKERS], on every command
    that takes it (size, sweep, demo): exit 2 naming what was given and the range."""
    from sim.util.errors import ConfigError

    if not 1 <= workers <= MAX_WORKERS:
        given = f"workers={workers}" if as_word else f"--workers {workers}"
        raise ConfigError(f"{given} is not in [1, {MAX_WORKERS}]")
    return workers


def usable_cores() -> int:
    """The cores this process may run on (its affinity where the platform has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


_CAPPED: set[tuple[str, int]] = set()  # (knob, value) already warned about in this process


def cap_workers(workers: int, knob: str = "workers") -> int:
    """``workers`` capped at the usable cores, with one ``ctxsim: warning:`` line (once per process and
    value): more processes than cores replay no faster, and each holds its own copy of the inputs, so
    ``workers=60`` on 2 cores only multiplied the memory. The results are the same for any count."""
    cores = usable_cores()
    if workers <= cores:
        return workers
    if (knob, workers) not in _CAPPED:
        import sys

        _CAPPED.add((knob, workers))
        print(f"ctxsim: warning: {knob}={workers} capped at the {cores} usable cores", file=sys.stderr)
    return cores


def can_fork() -> bool:
    return hasattr(os, "fork")


def forked_map(fn: Callable[[J], R], jobs: Sequence[J], workers: int) -> list[R]:
    """``[fn(j) for j in jobs]``, the jobs dealt round-robin to ``min(workers, len(jobs))`` processes:
    this one and forked children. An exception in any share is raised here (a child's as its own type
    when it pickles, else as a RuntimeError carrying its traceback) after every child has been reaped."""
    W = min(cap_workers(workers), len(jobs), MAX_WORKERS)
    if W <= 1 or not can_fork():
        return [fn(j) for j in jobs]
    shares = [list(range(w, len(jobs), W)) for w in range(W)]
    children: list[tuple[int, int]] = []  # (pid, read end of its pipe)
    out: list = [None] * len(jobs)
    try:
        for w in range(1, W):
            r, wr = os.pipe()
            pid = os.fork()
            if pid == 0:  # the child: its share, its answers down the pipe, and out without cleanup
                os.close(r)
                code = 0
                try:
                    try:
                        payload = pickle.dumps((True, [fn(jobs[i]) for i in shares[w]]), protocol=5)
                    except BaseException as exc:  # noqa: BLE001 - sent to the parent, which raises it
                        code = 1
                        try:
                            payload = pickle.dumps((False, exc), protocol=5)
                        except Exception:  # noqa: BLE001 - an exception that does not pickle
                            payload = pickle.dumps((False, RuntimeError(traceback.format_exc())))
                    with os.fdopen(wr, "wb") as f:
                        f.write(payload)
                finally:
                    os._exit(code)
            os.close(wr)
            children.append((pid, r))
        for i in shares[0]:
            out[i] = fn(jobs[i])
        for w, (pid, r) in enumerate(children, start=1):
            with os.fdopen(r, "rb") as f:
                data = f.read()
            os.waitpid(pid, 0)
            children[w - 1] = (pid, -1)
            if not data:
                raise RuntimeError(f"size: worker {pid} ended without an answer")
            ok, value = pickle.loads(data)
            if not ok:
                raise value
            for i, v in zip(shares[w], value, strict=True):
                out[i] = v
    finally:
        for pid, r in children:  # on an error here: stop the children still running, then reap them
            if r < 0:
                continue
            try:
                os.close(r)
            except OSError:
                pass
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            os.waitpid(pid, 0)
    return out
