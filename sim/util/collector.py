"""Python's cycle collector paused over work that allocates many short-lived containers while it keeps
large structures alive (``size``: the loaded traces, their tables, the grid's lanes)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cycle collection inside (the collector restored after; what is left then is its to find). A
    sizing allocates many short-lived containers (numpy's argument tuples, per-trace tables) while the
    loaded traces stay alive: every young collection walks the survivors again and they age into the
    older generations, which walk the whole heap (500 SWE-like runs on a 20 x 20 grid: ~140
    collections, ~0.07 s of a ~1.5 s sizing; a higher threshold, as ``run`` sets, still walked every
    survivor: ~0.04 s). What a sizing frees is freed by reference counting (its containers hold no
    cycles to speak of: the same peak memory), and a forked worker inherits the pause, so it writes
    no collector headers into pages it shares with its parent."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
