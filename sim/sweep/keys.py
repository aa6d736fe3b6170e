"""Run keys: the identity of one (setting, trace) run, a sha256 over canonical JSON of everything that
decides its numbers. The same key on every worker, rerun and machine, so a finished run is never redone."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def _key_blob(
    trace_hash: str, policy_name: str, params: dict[str, Any], model_cfg: dict, pricing, version: str
) -> str:
    """The canonical JSON a run key hashes (sorted keys, no whitespace)."""
    return json.dumps(
        {
            "trace_hash": trace_hash,
            "policy": policy_name,
            "params": params,
            "model": model_cfg,
            "pricing": pricing,
            "version": version,
        },
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
    )


def run_key(
    trace_hash: str,
    policy_name: str,
    params: dict[str, Any],
    model_cfg: dict[str, Any],
    pricing: str | None,
    version: str,
) -> str:
    """The identity of one run: sha256 over canonical JSON (sorted keys, no whitespace). Never Python's
    ``hash()``, which is salted per process: keys must agree across workers, reruns and machines."""
    blob = _key_blob(trace_hash, policy_name, params, model_cfg, pricing, version)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def run_keys(
    trace_hashes: list[str],
    policy_name: str,
    params: dict[str, Any],
    model_cfg: dict[str, Any],
    pricing: str | None,
    version: str,
    encoded: list[bytes] | None = None,
) -> list[str]:
    """``run_key`` of each trace hash under one setting, byte for byte the same blob, without encoding
    the setting again per trace: the canonical JSON is the same up to the trace hash, so its sha256 state
    before the hash is computed once and copied (200,000 keys: 3 s down to ~0.3 s). ``encoded``: the
    hashes as ``encoded_hashes`` gives them, when the caller keys many settings over the same traces."""
    template = _key_blob("", policy_name, params, model_cfg, pricing, version)
    # sorted keys: "trace_hash" is the last key but "version" (a plain string), so the last occurrence
    # of its empty value is the top-level one even if a knob's value holds the same text
    head, mark, tail = template.rpartition('"trace_hash":""')
    if not mark:  # json.dumps always writes the key; this would be a bug, not bad input
        raise RuntimeError(f"run_keys: no trace_hash in {template[:200]}")
    start = hashlib.sha256((head + '"trace_hash":').encode("utf-8"))
    end = tail.encode("utf-8")
    out = []
    for h in encoded_hashes(trace_hashes) if encoded is None else encoded:
        d = start.copy()
        d.update(h)
        d.update(end)
        out.append(d.hexdigest())
    return out


def encoded_hashes(trace_hashes: list[str]) -> list[bytes]:
    """Each trace hash as its run key's JSON holds it (the same for every setting)."""
    return [json.dumps(h, ensure_ascii=False).encode("utf-8") for h in trace_hashes]
