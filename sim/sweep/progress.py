"""What a sweep says while it runs: its notes and its progress line, on stderr."""

from __future__ import annotations

import sys
import time


class Progress:
    """``done/total``, rate and ETA on stderr: one line redrawn with ``\\r`` on a terminal, otherwise a
    line every ~10% so logs of long sweeps show progress without flooding."""

    def __init__(self, total: int, done: int, enabled: bool = True, stream=None) -> None:
        self.total, self.done, self.start_done = total, done, done
        self.stream = stream or sys.stderr
        self.enabled = enabled and total > 0
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.t0 = time.monotonic()
        self.next_mark = done + max(1, total // 10)

    def line(self) -> str:
        elapsed = time.monotonic() - self.t0
        ran = self.done - self.start_done
        rate = ran / elapsed if elapsed > 0 else 0.0
        eta = (self.total - self.done) / rate if rate > 0 else float("nan")
        eta_s = f"{eta:,.0f}s" if eta == eta else "?"
        return f"sweep: {self.done}/{self.total} runs, {rate:,.1f} runs/s, ETA {eta_s}"

    def update(self, n: int) -> None:
        self.done += n
        if not self.enabled:
            return
        if self.tty:
            end = "\n" if self.done >= self.total else ""
            print("\r" + self.line(), end=end, file=self.stream, flush=True)
        elif self.done >= self.next_mark or self.done >= self.total:
            print(self.line(), file=self.stream, flush=True)
            self.next_mark = self.done + max(1, self.total // 10)


def note(msg: str) -> None:
    print(f"ctxsim: sweep: {msg}", file=sys.stderr, flush=True)
