"""Provider facts per model: the context window. Tables in ``conf/model/providers/*.yaml``.

A trace's recorded model resolves by exact name, then by its last path segment (``google/x`` and ``x``
name the same model), case-insensitively. Unknown models have no known window: no over-window check.
"""

from __future__ import annotations

from functools import lru_cache

from sim.paths import CONF_DIR

PROVIDERS_DIR = CONF_DIR / "model" / "providers"


@lru_cache(maxsize=1)
def windows() -> dict[str, int]:
    import yaml  # PyYAML comes with Hydra/OmegaConf

    out: dict[str, int] = {}
    for f in sorted(PROVIDERS_DIR.glob("*.yaml")):
        for name, spec in (yaml.safe_load(f.read_text()) or {}).get("models", {}).items():
            out[name.lower()] = int(spec["window"])
    return out


def resolve_window(model: str | None) -> int | None:
    if not model:
        return None
    table = windows()
    key = model.lower().lstrip("@")
    if key in table:
        return table[key]
    return table.get(key.rsplit("/", 1)[-1])
