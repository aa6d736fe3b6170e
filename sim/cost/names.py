"""How a recorded model name finds its entry in a per-model table (prices, windows, calibrations).

Why here, below every table: the same run names its model ``openrouter/google/gemini-3-pro-preview``,
``google/gemini-3-pro-preview`` or ``gemini-3-pro-preview`` depending on the agent and its router, and
every table must read it the same way. ``sim.cost.pricing`` and ``sim.cost.tokens`` look names up here;
``sim.cost.models`` gathers what all the tables say about one name. A name matches a table key exactly
(case-insensitive, ``@`` routing prefix dropped), else the key sharing the most trailing path segments
with it, at least the last (ties: the shortest key, then the first by name).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

T = TypeVar("T")


def name_key(model: str) -> str:
    """A model name as the tables key it: lower case, no ``@`` routing prefix, no surrounding space."""
    return model.strip().lower().lstrip("@")


def match_key(keys, model: str | None) -> str | None:
    """The table key a recorded name resolves to (see the module docstring), or None."""
    if not model:
        return None
    key = name_key(model)
    if key in keys:
        return key
    segments = key.split("/")
    best, best_rank = None, None
    for k in keys:
        ks = k.split("/")
        n = 0
        while n < min(len(ks), len(segments)) and ks[-1 - n] == segments[-1 - n]:
            n += 1
        rank = (-n, len(ks), k)  # most shared segments, then the shortest key, then by name
        if n and (best_rank is None or rank < best_rank):
            best, best_rank = k, rank
    return best


def lookup(table: Mapping[str, T], model: str | None) -> T | None:
    """A model's entry in a per-model table (lower-case keys), by ``match_key``."""
    k = match_key(table.keys(), model)
    return None if k is None else table[k]
