"""Prices per model, from the dated tables in ``conf/pricing/*.yaml``; costs in integer micro-USD.

Each table names a cache ``family`` (its rules are in ``conf/cache/``) and lists models with prices in
USD per million tokens: ``input``, ``output``, ``cache_read``, ``cache_write_5m`` / ``cache_write_1h``,
and an optional ``long_context`` tier (``above_tokens`` and the tier's prices, which then apply to the
whole request). A trace's recorded model resolves as in every table (``sim.cost.names``: exact name, then
the key sharing the most trailing path segments, case-insensitively). Users add tables by adding files.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from functools import lru_cache

from sim.cost.names import lookup
from sim.util.errors import ConfigError
from sim.util.limits import MAX_USD_PER_MTOK, count_problem, number_problem
from sim.util.paths import CONF_DIR

PRICING_DIR = CONF_DIR / "pricing"
PICO = 1_000_000  # pico-USD per micro-USD: prices are kept as integer pico-USD per token


def _pusd(usd_per_mtok) -> int:
    """USD per million tokens -> integer pico-USD per token ($1/MTok = 1 micro-USD per token)."""
    return round(float(usd_per_mtok) * PICO)


@dataclass(frozen=True)
class Rates:
    """Integer pico-USD per token."""

    input: int
    output: int
    cache_read: int
    cache_write: int

    @classmethod
    def parse(cls, d: dict, lifetime: str) -> Rates:
        inp = _pusd(d["input"])
        return cls(
            input=inp,
            output=_pusd(d["output"]),
            cache_read=_pusd(d["cache_read"]) if "cache_read" in d else inp,
            cache_write=_pusd(d[f"cache_write_{lifetime}"]) if f"cache_write_{lifetime}" in d else inp,
        )


RATE_KEYS = ("input", "output", "cache_read", "cache_write_5m", "cache_write_1h")


def _check_rates(d, where: str, required=("input", "output")) -> None:
    """Every price of a table entry: a finite number of USD per million tokens in [0, MAX_USD_PER_MTOK]."""
    if not isinstance(d, dict):
        raise ConfigError(f"{where}: expected a mapping of prices, got {type(d).__name__}")
    for key in required:
        if key not in d:
            raise ConfigError(f"{where}: missing price '{key}'")
    for key in RATE_KEYS:
        if key in d and (p := number_problem(d[key], 0.0, MAX_USD_PER_MTOK)) is not None:
            raise ConfigError(f"{where}.{key}: {p} (USD per million tokens)")


@dataclass(frozen=True)
class Price:
    model: str  # the table's name for it
    family: str  # cache family (conf/cache/<family>.yaml)
    as_of: str
    base: Rates
    tier_above: int | None = None
    tier: Rates | None = None

    def cost_microusd(self, uncached: int, read: int, write: int, output: int) -> int:
        """One call's cost, rounded half up to a whole micro-USD."""
        r = self.tier if self.tier is not None and uncached + read + write > self.tier_above else self.base
        pusd = uncached * r.input + read * r.cache_read + write * r.cache_write + output * r.output
        return (pusd + PICO // 2) // PICO

    def cost_all(self, uncached, read, write, output):
        """``cost_microusd`` over arrays of calls, exact in int64. The pico-USD of a call (tokens x rate)
        passes 2^63 from about 10^10 tokens at the dearest rate, so above that each rate is split into
        whole micro-USD and the pico-USD left over (and each count into millions and the rest): every
        partial product stays below 2^63 for counts below 2^52 (``sim.util.limits.run_sum_problem``)."""
        import numpy as np

        counts = (uncached, read, write, output)
        top = max((int(c.max()) for c in counts if len(c)), default=0)
        rates = (self.base,) if self.tier is None else (self.base, self.tier)
        dearest = max(max(r.input, r.output, r.cache_read, r.cache_write) for r in rates)
        if top * dearest < 1 << 60:

            def micro(r: Rates):
                pusd = uncached * r.input + read * r.cache_read + write * r.cache_write + output * r.output
                return (pusd + PICO // 2) // PICO

        else:
            split = [np.divmod(c, PICO) for c in counts]  # count = millions * PICO + rest

            def micro(r: Rates):
                whole = left = 0
                for c, (millions, rest), rate in zip(
                    counts, split, (r.input, r.cache_read, r.cache_write, r.output), strict=True
                ):
                    a, b = divmod(rate, PICO)  # rate = a * PICO + b
                    whole = whole + c * a + millions * b
                    left = left + rest * b
                return whole + (left + PICO // 2) // PICO

        total = micro(self.base)
        if self.tier is not None:  # (the tier's rates only where some call is above it)
            above = uncached + read + write > self.tier_above
            if above.any():
                total = np.where(above, micro(self.tier), total)
        return total


@lru_cache(maxsize=4)
def price_table(lifetime: str = "5m") -> dict[str, Price]:
    out: dict[str, Price] = {}
    for f in sorted(PRICING_DIR.glob("*.yaml")):
        out.update(read_price_file(f, lifetime))
    return out


def read_price_file(f, lifetime: str = "5m") -> dict[str, Price]:
    """One pricing table (bounded YAML), every number checked: ConfigError naming the file and key."""
    from sim.util.safeyaml import load_yaml_file

    source = f"conf/pricing/{f.name}"
    data = load_yaml_file(f, source)
    data = {} if data is None else data
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping, got {type(data).__name__}")
    family, as_of = data.get("family", "none"), str(data.get("as_of", ""))
    if not isinstance(family, str):
        raise ConfigError(f"{source}: family: expected a name, got {family!r}")
    models = data.get("models") or {}
    if not isinstance(models, dict):
        raise ConfigError(f"{source}: models: expected a mapping of model names, got {type(models).__name__}")
    out: dict[str, Price] = {}
    for name, d in models.items():
        where = f"{source}: models.{name}"
        _check_rates(d, where)
        lc = d.get("long_context")
        if lc is not None:
            _check_rates(lc, f"{where}.long_context")
            above = lc.get("above_tokens")
            if (p := count_problem(above)) is not None:
                raise ConfigError(f"{where}.long_context.above_tokens: {p}")
        out[str(name).lower()] = Price(
            model=str(name),
            family=family,
            as_of=as_of,
            base=Rates.parse(d, lifetime),
            tier_above=int(lc["above_tokens"]) if lc else None,
            tier=Rates.parse(lc, lifetime) if lc else None,
        )
    return out


def find_price(model: str | None) -> Price | None:
    return lookup(price_table(), model)


def closest_priced(model: str, n: int = 3) -> list[str]:
    names = [p.model for p in price_table().values()]
    return difflib.get_close_matches(model.rsplit("/", 1)[-1], names, n=n, cutoff=0.4)


def price_named(name: str) -> Price:
    """``--pricing NAME``: a model in the tables, or exit 2 naming the closest ones."""
    p = find_price(name)
    if p is None:
        close = closest_priced(name)
        hint = f"; closest: {', '.join(close)}" if close else ""
        raise ConfigError(f"--pricing {name}: no such model in conf/pricing/{hint}")
    return p
