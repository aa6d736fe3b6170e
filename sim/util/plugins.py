"""Plugin families (policies, importers) register themselves on import: one module per implementation."""

from __future__ import annotations

import importlib
import pkgutil


def import_modules(package: str, skip: str) -> None:
    """Import every module of ``package`` but ``skip`` (its shared base), in name order."""
    pkg = importlib.import_module(package)
    for m in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if m.name != skip:
            importlib.import_module(f"{package}.{m.name}")
