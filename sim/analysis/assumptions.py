"""What a verdict assumed, for ``size`` to print and put in ``--format json`` (``assumptions``): the traces
and a hash of their contents, the priced model and its price table's date, the window, the cache rules,
the mock model's behaviour, the retrieval recall and ctxsim's version. A verdict is only as good as these;
printing them lets a reader see when one does not match their harness (a warning says when the traces'
recorded model is not the one priced).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from sim.core.types import Trace


def traces_hash(hashes: Sequence[str]) -> str:
    """sha256 over the traces' content hashes in sorted order: the same traces give the same hash, in
    any order and from any file names."""
    return "sha256:" + hashlib.sha256("\n".join(sorted(hashes)).encode()).hexdigest()


def _cache(family: str) -> dict[str, Any]:
    from sim.cost.cache import cache_rules
    from sim.util.errors import ConfigError

    try:
        r = cache_rules(family)
    except ConfigError:
        return {"family": family, "rules": None}
    return {
        "family": family,
        "file": f"conf/cache/{family}.yaml",
        "min_prefix_tokens": r.min_prefix_tokens,
        "granularity": r.granularity,
        "lifetime_s": r.lifetime_s,
        "writes": r.writes,
        "reuse_fraction": r.reuse_fraction,
    }


def assumptions(
    traces: Sequence[Trace],
    hashes: Sequence[str],
    sources: Sequence[str],
    pricing: str,
    window: int | str | None,
    behaviour: dict[str, Any],
) -> dict[str, Any]:
    """Every assumption of a sizing, as plain values (JSON-ready), with ``warnings``."""
    from sim.cost.models import resolve
    from sim.engine.model import ReplayModel
    from sim.util.versions import ctxsim_version

    recorded = sorted({t.model or "" for t in traces})
    warnings: list[str] = []
    if pricing == "auto":
        prices = {m: resolve(m or None).price for m in recorded}
        priced = {
            "model": "each trace's recorded model",
            "tables": {
                m or "(none recorded)": (f"{p.model} (as of {p.as_of})" if p else "unpriced")
                for m, p in prices.items()
            },
        }
        families = sorted({resolve(m or None).cache_family for m in recorded})
    else:
        p = resolve(pricing).price
        priced = {"model": p.model if p else pricing, "price_table_as_of": p.as_of if p else None}
        families = [p.family] if p else ["none"]
        for m in recorded:
            rp = resolve(m or None).price
            if rp is None or p is None or rp.model != p.model:
                warnings.append(
                    f"the traces record model {m or '(none)'!r} but are priced as {priced['model']!r}: "
                    "cost, cache and window follow the priced model; the agent's behaviour is the "
                    "recorded one"
                )
    if isinstance(window, int):
        shown_window: Any = window
    else:
        shown_window = {
            "from": "each trace's recorded model (conf/model/providers/)",
            "windows": {m or "(none recorded)": resolve(m or None).window for m in recorded},
        }
    import inspect

    names = ("on_missing", "summary_fact_tokens", "summarizer", "retrieval_recall", "max_turns")
    names += ("reread_margin_tokens",)
    params = inspect.signature(ReplayModel).parameters
    mock = {**{k: params[k].default for k in names}, **behaviour}
    from sim.analysis.published import checked_against

    return {
        "traces": {"count": len(traces), "sources": list(sources), "hash": traces_hash(hashes)},
        "recorded_models": recorded,
        "priced_model": priced,
        "window": shown_window,
        "cache_rules": [_cache(f) for f in families],
        "mock_model": {k: mock[k] for k in names},
        "retrieval_recall": mock["retrieval_recall"],
        "ctxsim_version": ctxsim_version(),
        "checked_against": checked_against(),
        "warnings": warnings,
    }


def assumptions_text(a: dict[str, Any]) -> str:
    """The assumptions as a few lines for people."""
    t = a["traces"]
    pm = a["priced_model"]
    priced = (
        f"{pm['model']} (price table as of {pm['price_table_as_of']})"
        if "price_table_as_of" in pm
        else "each trace's recorded model: " + ", ".join(f"{k} -> {v}" for k, v in pm["tables"].items())
    )
    w = a["window"]
    window = (
        f"{w:,} tokens"
        if isinstance(w, int)
        else "each trace's recorded model's: "
        + ", ".join(f"{k} {v:,}" if v else f"{k} none" for k, v in w["windows"].items())
    )
    caches = "; ".join(
        f"{c['family']} ({c['file']}: minimum prefix {c['min_prefix_tokens']:,} tokens, lifetime "
        f"{c['lifetime_s']:g} s, {'billed writes' if c['writes'] else 'no write premium'}, reuse "
        f"{c['reuse_fraction']:g})"
        if c.get("file")
        else f"{c['family']} (no rules)"
        for c in a["cache_rules"]
    )
    m = a["mock_model"]
    mock = ", ".join(f"{k}={v}" for k, v in m.items())
    lines = [
        "assumptions:",
        f"  traces: {t['count']} from {', '.join(t['sources'])} ({t['hash']})",
        f"  recorded model: {', '.join(x or '(none)' for x in a['recorded_models'])}",
        f"  priced as: {priced}",
        f"  window: {window}",
        f"  cache rules: {caches}",
        f"  mock model: {mock}",
        f"  ctxsim {a['ctxsim_version']}",
    ]
    from sim.analysis.published import checked_against_text

    lines += [f"  checked against: {line}" for line in checked_against_text(a.get("checked_against", []))]
    return "\n".join(lines)
