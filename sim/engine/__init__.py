"""Replay: the reference loop (``sim.engine.loop``), the mock model, the fast paths and the dispatcher
that chooses between them (``sim.engine.dispatch``).

The dispatcher's entry points are named here and imported on first use (PEP 562): a caller that needs
only the mock model (``sim.engine.model``) loads no numpy-heavy fast path by importing this package."""

from __future__ import annotations

_PUBLIC = {
    "replay": "sim.engine.dispatch",
    "replay_many": "sim.engine.dispatch",
    "replay_table": "sim.engine.dispatch",
    "replay_tables": "sim.engine.dispatch",
}

__all__ = list(_PUBLIC)


def __getattr__(name: str) -> object:
    if name not in _PUBLIC:
        raise AttributeError(f"module 'sim.engine' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(_PUBLIC[name]), name)
    globals()[name] = value  # once: later look-ups find it without coming here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
