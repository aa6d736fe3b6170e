"""A Ctrl-C that lands in a finalizer is not lost (sim.interrupts)."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

import pytest

from sim.interrupts import remembered_interrupts


class _SignalsItselfWhenCollected:
    """Sends this process SIGINT from its finalizer and waits there, so the handler runs inside
    ``__del__``, where Python reports the exception as ignored and carries on."""

    def __del__(self) -> None:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)  # the handler runs before the sleep returns


def _ignored(monkeypatch) -> list[type]:
    """The exceptions Python reports as ignored (sys.unraisablehook) during the test."""
    seen: list[type] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: seen.append(u.exc_type))
    return seen


def test_python_alone_loses_an_interrupt_raised_in_a_finalizer(monkeypatch):
    ignored = _ignored(monkeypatch)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    obj = _SignalsItselfWhenCollected()
    del obj  # no KeyboardInterrupt reaches this frame: why remembered_interrupts exists
    assert ignored == [KeyboardInterrupt]


def test_a_swallowed_interrupt_is_raised_at_the_next_check(monkeypatch):
    ignored = _ignored(monkeypatch)
    with remembered_interrupts() as check:
        check()  # nothing arrived yet
        obj = _SignalsItselfWhenCollected()
        del obj
        assert ignored == [KeyboardInterrupt]  # the first raise was swallowed
        with pytest.raises(KeyboardInterrupt):
            check()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored


def test_an_interrupt_outside_finalizers_raises_at_once():
    with remembered_interrupts() as check:
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)
        with pytest.raises(KeyboardInterrupt):
            check()  # and stays remembered
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_callers_own_handler_is_left_alone():
    seen = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: seen.append(signum))
    try:
        with remembered_interrupts() as check:
            assert signal.getsignal(signal.SIGINT) is not signal.default_int_handler
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
            check()  # the caller's handler took it: nothing to raise here
        assert seen == [signal.SIGINT]
    finally:
        signal.signal(signal.SIGINT, previous)


def test_outside_the_main_thread_nothing_changes():
    result = []

    def body() -> None:
        with remembered_interrupts() as check:
            check()
            result.append(signal.getsignal(signal.SIGINT) is signal.default_int_handler)

    t = threading.Thread(target=body)
    t.start()
    t.join()
    assert result == [True]
