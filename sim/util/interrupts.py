"""Ctrl-C that cannot be lost: SIGINT raises ``KeyboardInterrupt`` as Python's own handler does, and is
also remembered until the work checks for it.

Python raises a signal's exception in whatever code runs when the handler is called. When that is a
finalizer (a ``__del__``, such as pyarrow's ``ParquetWriter.__del__`` after each part is written, or a
weak-reference callback), Python prints "Exception ignored in ..." and carries on, so a long command
interrupted at that moment would run to its end and exit 0. A remembered interrupt is raised again at
the next check, a point where raising is safe: ``sim.util.exitcodes.run_command`` opens one block around
every command and checks before the command reports success; loops and writers of outputs call
``check()`` at their safe points (``sim.util.atomicfile.atomic_path`` before its rename).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator

# SIGINTs that arrived while the outermost block is open (main thread only; emptied when it closes)
_arrived: list[int] = []


class ReportedInterrupt(KeyboardInterrupt):
    """A ``KeyboardInterrupt`` whose command has already said what it leaves (the sweep names the runs
    it saved), so the command runner adds no line of its own."""


def _handler(signum: int, frame: object) -> None:
    _arrived.append(signum)
    raise KeyboardInterrupt


def check() -> None:
    """Raise ``KeyboardInterrupt`` if a SIGINT arrived within the open block (even if its first raise
    was swallowed); outside a block, where the block changed nothing, or on another thread than the
    main one (left alone, as signals leave it), it never raises."""
    if (
        _arrived
        and signal.getsignal(signal.SIGINT) is _handler
        and threading.current_thread() is threading.main_thread()
    ):
        raise KeyboardInterrupt


@contextlib.contextmanager
def sigint_held() -> Iterator[None]:
    """SIGINT held back from this thread meanwhile, delivered (and raised) when the block ends. Around
    ``Thread.start()``: a Ctrl-C inside ``start()`` would come before the caller's ``try`` that stops
    the thread, leaving it running; and the thread started keeps SIGINT held back for good, so the
    signal always reaches the main thread, which handles it. Where ``pthread_sigmask`` does not exist:
    nothing."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def _never() -> None:
    return None


@contextlib.contextmanager
def remembered_interrupts() -> Iterator[Callable[[], None]]:
    """Within the block, SIGINT raises ``KeyboardInterrupt`` and is remembered; the yielded ``check()``
    raises ``KeyboardInterrupt`` if one arrived (even if its first raise was swallowed). Python's handler
    is restored on leaving. A block inside another shares the outer one's memory (a sweep inside the
    command runner's block). Where SIGINT is not Python's default handler (ignored, replaced by the
    caller, or not the main thread) the block changes nothing and ``check()`` never raises."""
    if threading.current_thread() is not threading.main_thread():
        yield _never
        return
    current = signal.getsignal(signal.SIGINT)
    if current is _handler:  # nested: the outer block remembers and restores
        yield check
        return
    if current is not signal.default_int_handler:
        yield _never
        return
    _arrived.clear()
    signal.signal(signal.SIGINT, _handler)
    try:
        yield check
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        _arrived.clear()
