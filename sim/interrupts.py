"""Ctrl-C that cannot be lost: SIGINT raises ``KeyboardInterrupt`` as Python's own handler does, and is
also remembered until the work checks for it.

Python raises a signal's exception in whatever code runs when the handler is called. When that is a
finalizer (a ``__del__``, such as pyarrow's ``ParquetWriter.__del__`` after each part is written, or a
weak-reference callback), Python prints "Exception ignored in ..." and carries on, so a long sweep
interrupted at that moment would run to its end and exit 0. A remembered interrupt is raised again at
the next check, a point where raising is safe.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator


@contextlib.contextmanager
def remembered_interrupts() -> Iterator[Callable[[], None]]:
    """Within the block, SIGINT raises ``KeyboardInterrupt`` and is remembered; the yielded ``check()``
    raises ``KeyboardInterrupt`` if one arrived (even if its first raise was swallowed). Python's handler
    is restored on leaving. Where SIGINT is not Python's default handler (ignored, replaced by the caller,
    or not the main thread) the block changes nothing and ``check()`` never raises."""
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield lambda: None
        return
    arrived: list[int] = []

    def handler(signum: int, frame: object) -> None:
        arrived.append(signum)
        raise KeyboardInterrupt

    def check() -> None:
        if arrived:
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, handler)
    try:
        yield check
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
