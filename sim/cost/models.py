"""One resolver from a recorded model name to everything ctxsim keeps per model: its price (and so its
cache family), its context window and its token calibration. Tables: ``conf/pricing/``,
``conf/model/providers/`` and ``conf/calibration/``.

Why one resolver: the same run names its model ``openrouter/google/gemini-3-pro-preview``,
``google/gemini-3-pro-preview`` or ``gemini-3-pro-preview`` depending on the agent and its router, and
every table must read it the same way (a calibration matched only by its exact name silently fell back
to the default ratio while pricing matched): each table is read through ``sim.cost.names.lookup``. What
no table holds falls back, and ``fallbacks`` says so, naming the fallback, for the commands to print.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from sim.cost import pricing, tokens
from sim.cost.names import lookup
from sim.util.errors import ConfigError
from sim.util.limits import count_problem
from sim.util.paths import CONF_DIR

PROVIDERS_DIR = CONF_DIR / "model" / "providers"


@lru_cache(maxsize=1)
def windows() -> dict[str, int]:
    out: dict[str, int] = {}
    for f in sorted(PROVIDERS_DIR.glob("*.yaml")):
        out.update(read_windows_file(f))
    return out


def read_windows_file(f) -> dict[str, int]:
    """One provider table (bounded YAML): model -> window, each a count >= 1, else ConfigError naming
    the file and key."""
    from sim.util.safeyaml import load_yaml_file

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


def resolve_window(model: str | None) -> int | None:
    return lookup(windows(), model)


def guess_family(model: str | None) -> str:
    """Cache family of an unpriced model, from its name."""
    m = (model or "").lower()
    for key, family in (("claude", "anthropic"), ("gemini", "gemini"), ("gpt", "openai")):
        if key in m:
            return family
    return "none"


@dataclass(frozen=True)
class ModelFacts:
    """What the tables say about one recorded model name; ``fallbacks``: (facet, sentence) for each
    table that does not name it, the sentence saying what is used instead. Facets: ``pricing``,
    ``cache_family``, ``window``, ``bytes_per_token``, ``text_coefficients``."""

    model: str | None
    price: pricing.Price | None
    window: int | None
    cache_family: str
    bytes_per_token: float
    text_coefficients: tuple[float, ...] | None
    fallbacks: tuple[tuple[str, str], ...]

    def warnings(self, *facets: str) -> list[str]:
        """The fallback sentences of the given facets (all when none is given), in facet order."""
        return [m for f, m in self.fallbacks if not facets or f in facets]


@lru_cache(maxsize=256)
def resolve(model: str | None) -> ModelFacts:
    name = repr(model) if model else "(none recorded)"
    price = lookup(pricing.price_table(), model)
    window = resolve_window(model)
    default_bpt, bpt_table = tokens.bytes_per_token_calibration()
    bpt = lookup(bpt_table, model)
    coefficients = lookup(tokens.text_calibration(), model)
    family = price.family if price is not None else guess_family(model)
    fallbacks = []
    if price is None:
        close = ", ".join(pricing.closest_priced(model or "")) or "none"
        fallbacks.append(
            (
                "pricing",
                f"model {name} has no price in conf/pricing/: cost is empty for its runs "
                f"(closest priced: {close}; choose one with --pricing)",
            )
        )
        fallbacks.append(
            ("cache_family", f"model {name}: cache family '{family}' guessed from its name (not priced)")
        )
    if window is None:
        fallbacks.append(
            ("window", f"model {name} has no context window in conf/model/providers/: no over-window check")
        )
    if bpt is None:
        fallbacks.append(
            (
                "bytes_per_token",
                f"model {name} has no bytes-per-token calibration in conf/calibration/"
                f"{tokens.CALIBRATION_FILE.name}: the default {default_bpt} bytes per token is used",
            )
        )
    if coefficients is None:
        fallbacks.append(
            (
                "text_coefficients",
                f"model {name} has no character-class calibration in conf/calibration/"
                f"{tokens.TEXT_CALIBRATION_FILE.name}: text-only estimates use "
                f"{bpt or default_bpt} bytes per token",
            )
        )
    return ModelFacts(
        model=model,
        price=price,
        window=window,
        cache_family=family,
        bytes_per_token=default_bpt if bpt is None else bpt,
        text_coefficients=coefficients,
        fallbacks=tuple(fallbacks),
    )
