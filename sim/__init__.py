"""ctxsim: replay recorded agent traces against context-management policies and measure cost and loss.

The public names below are imported on first use (PEP 562): ``import sim`` or ``from sim.cli import main``
loads no numpy, no engine and no importer, so every command starts by loading only what it runs."""

from __future__ import annotations

_PUBLIC = {
    "replay": "sim.engine.dispatch",
    "load_path": "sim.importers",
    "load_paths": "sim.importers",
    "compute_metrics": "sim.metrics.compute",
    "make_policy": "sim.policies.base",
    "registered": "sim.policies.base",
    "RunRecord": "sim.core.records",
    "write_traces": "sim.trace.io",
    "Trace": "sim.core.types",
}

__all__ = ["__version__", *_PUBLIC]


def _version() -> str:
    from sim.util.versions import ctxsim_version

    return ctxsim_version()


def __getattr__(name: str) -> object:
    if name == "__version__":
        value = _version()
    elif name in _PUBLIC:
        import importlib

        value = getattr(importlib.import_module(_PUBLIC[name]), name)
    else:
        raise AttributeError(f"module 'sim' has no attribute {name!r}")
    globals()[name] = value  # once: later look-ups find it without coming here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
