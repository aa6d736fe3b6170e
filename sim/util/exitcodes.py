"""The exit-code contract CI systems read (pytest's convention), in one place for every entry point."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

EXIT_OK = 0
EXIT_REGRESSION = 1  # `ctxsim gate` only: a threshold did not hold
EXIT_BAD_INPUT = 2  # bad input or config: a CtxsimError, one line naming the file, record and field
EXIT_INTERNAL = 3  # anything else: a bug of ctxsim's
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT), as a shell reports a process its SIGINT ended


def run_command(func: Callable[[Any], int], args: Any, debug: bool = False) -> int:
    """Run a command under the contract: a ``CtxsimError`` is one line and its exit code (2); any other
    exception is one line asking for a report and exit 3, with the traceback only when ``debug``; so a
    crash never looks like a regression (1) or like bad input (2). Ctrl-C is exit 130 and one line, even
    when a finalizer swallowed its ``KeyboardInterrupt`` (``sim.util.interrupts``): checked before success."""
    from sim.util.errors import CtxsimError
    from sim.util.interrupts import ReportedInterrupt, remembered_interrupts

    try:
        with remembered_interrupts() as check:
            code = func(args)
            check()
            return code
    except CtxsimError as exc:
        print(f"ctxsim: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:  # `ctxsim run ... | head`
        return EXIT_OK
    except ReportedInterrupt:  # the command said what it leaves (the sweep: the runs it saved)
        return EXIT_INTERRUPTED
    except KeyboardInterrupt:
        print("ctxsim: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - the contract: any unexpected exception is exit 3
        first = str(exc).splitlines()[0][:200] if str(exc) else ""
        print(
            f"ctxsim: internal error: {type(exc).__name__}"
            + (f": {first}" if first else "")
            + ", please report it"
            + ("" if debug else " (rerun with --debug for the traceback)"),
            file=sys.stderr,
        )
        if debug:
            import traceback

            traceback.print_exc()
        return EXIT_INTERNAL
