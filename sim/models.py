"""Provider facts per model: the context window. Tables in ``conf/model/providers/*.yaml``.

A trace's recorded model resolves by exact name, then by its last path segment (``google/x`` and ``x``
name the same model), case-insensitively. Unknown models have no known window: no over-window check.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import TypeVar

from sim.paths import CONF_DIR

PROVIDERS_DIR = CONF_DIR / "model" / "providers"
T = TypeVar("T")


@lru_cache(maxsize=1)
def windows() -> dict[str, int]:
    import yaml  # PyYAML comes with Hydra/OmegaConf

    out: dict[str, int] = {}
    for f in sorted(PROVIDERS_DIR.glob("*.yaml")):
        for name, spec in (yaml.safe_load(f.read_text()) or {}).get("models", {}).items():
            out[name.lower()] = int(spec["window"])
    return out


def lookup(table: Mapping[str, T], model: str | None) -> T | None:
    """A model's entry in a per-model table (lower-case keys): by exact name, then by the last segment
    of its path (``google/x``, ``@google/x`` and ``x`` name one model)."""
    if not model:
        return None
    key = model.lower().lstrip("@")
    if key in table:
        return table[key]
    return table.get(key.rsplit("/", 1)[-1])


def resolve_window(model: str | None) -> int | None:
    return lookup(windows(), model)
