"""Provider facts per model: the context window. Tables in ``conf/model/providers/*.yaml``.

A trace's recorded model resolves by exact name, then by its last path segment (``google/x`` and ``x``
name the same model), case-insensitively. Unknown models have no known window: no over-window check.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import TypeVar

from sim.errors import ConfigError
from sim.limits import count_problem
from sim.paths import CONF_DIR

PROVIDERS_DIR = CONF_DIR / "model" / "providers"
T = TypeVar("T")


@lru_cache(maxsize=1)
def windows() -> dict[str, int]:
    out: dict[str, int] = {}
    for f in sorted(PROVIDERS_DIR.glob("*.yaml")):
        out.update(read_windows_file(f))
    return out


def read_windows_file(f) -> dict[str, int]:
    """One provider table (bounded YAML): model -> window, each a count >= 1, else ConfigError naming
    the file and key."""
    from sim.safeyaml import load_yaml_file

    source = f"conf/model/providers/{f.name}"
    data = load_yaml_file(f, source)
    data = {} if data is None else data
    models = (data.get("models") or {}) if isinstance(data, dict) else None
    if not isinstance(models, dict):
        raise ConfigError(f"{source}: models: expected a mapping of model names")
    out: dict[str, int] = {}
    for name, spec in models.items():
        window = spec.get("window") if isinstance(spec, dict) else None
        p = count_problem(window) or (None if window >= 1 else "expected a window of at least 1 token")
        if p is not None:
            raise ConfigError(f"{source}: models.{name}.window: {p}")
        out[str(name).lower()] = window
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
