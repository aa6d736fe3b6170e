"""Reading ahead: the next item (an Arrow batch, a parsed block of JSON Lines) made on a second thread
while the caller replays the one before, when a core is free.

The thread is told to stop wherever the caller stops (``finally``), and a Ctrl-C while it starts is held
until ``Thread.start`` has returned (``sim.util.interrupts.sigint_held``), so no thread outlives a run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from sim.util.interrupts import sigint_held

READ_AHEAD: bool | None = None  # read the next batch on a second thread: None when a core is free


def _spare_core() -> bool:
    """Is a core free for reading ahead (the 1-minute load average below the cores this process may use)?
    With one free, the second thread saves wall time (the README gives the figures, measured on 2 cores
    at load ~1: 10k streamed runs, JSON Lines 1.8 s instead of 2.8 s, Parquet 0.62 s instead of 0.71 s);
    on a busy machine (measured at load ~5) it cost ~10% CPU (two threads' allocations and hand-offs)
    for no wall time."""
    import os

    try:
        cores = len(os.sched_getaffinity(0))
        load = os.getloadavg()[0]
    except (AttributeError, OSError):  # no affinity or load average on this platform
        return False
    return cores >= 2 and load < cores


def read_ahead(items: Iterator) -> Iterator:
    """``items`` in order, each made on a second thread while the caller uses the one before (one item
    ahead, no more) when ``READ_AHEAD`` says so (by default: when a core is free): Arrow decodes and
    parses without the interpreter lock, so the next batch is read on the second core while this one
    is replayed. The same items either way: an exception ``items`` raises is raised here, where the
    caller reaches it, as without the thread; the thread is stopped (``items`` closed on it) when the
    caller stops early."""
    if not reading_ahead():
        return items
    return on_thread(items)


def reading_ahead() -> bool:
    return READ_AHEAD if READ_AHEAD is not None else _spare_core()


def on_thread(items: Iterator) -> Iterator:
    import queue
    import threading

    asks: queue.SimpleQueue = queue.SimpleQueue()
    answers: queue.SimpleQueue = queue.SimpleQueue()

    def run() -> None:
        try:
            while asks.get():
                try:
                    answers.put((True, next(items)))
                except StopIteration:
                    answers.put((False, None))
                    return
                except BaseException as exc:  # noqa: BLE001 - raised again on the caller's thread
                    answers.put((False, exc))
                    return
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()

    worker = threading.Thread(target=run, name="ctxsim-read-ahead", daemon=True)
    asks.put(True)
    try:
        with sigint_held():  # a Ctrl-C during start() would leave the thread running, never told to stop
            worker.start()
        while True:
            more, item = answers.get()
            if not more:
                if item is not None:
                    raise item
                return
            asks.put(True)  # the next one, made while the caller uses this one
            yield item
    finally:
        asks.put(False)
        try:
            worker.join()
        except RuntimeError:  # never started: at most it makes the item asked for, then reads the stop
            pass


class Soon:
    """``make()`` begun on a thread of its own by ``start()`` (``now``: made there instead); ``result()``
    waits for it and gives its result or raises its exception; ``join()`` only waits. Made before the
    ``try`` whose ``finally`` joins it, started inside it: a Ctrl-C at any point leaves no thread behind."""

    def __init__(self, make: Callable[[], Any]) -> None:
        self._make_it = make
        self._got: tuple = ()
        self._thread: Any = None

    def start(self, now: bool = False) -> None:
        if now:  # its exception raised here, as the call's would be
            self._got = (True, self._make_it())
            return
        import threading

        self._thread = threading.Thread(
            target=self._make, args=(self._make_it,), name="ctxsim-digest", daemon=True
        )
        with sigint_held():  # a Ctrl-C during start() raises after it, in the caller's try
            self._thread.start()

    def _make(self, make: Callable[[], Any]) -> None:
        try:
            self._got = (True, make())
        except BaseException as exc:  # noqa: BLE001 - raised again where the result is asked for
            self._got = (False, exc)

    def join(self) -> None:
        if self._thread is not None and self._thread.ident is not None:  # started
            self._thread.join()

    def result(self) -> Any:
        self.join()
        ok, got = self._got
        if not ok:
            raise got
        return got
