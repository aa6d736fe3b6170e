"""How close ctxsim's numbers come to the providers' own: replay each recorded run under its recorded
policy and compare, call by call, the modelled input, cached, output tokens and cost with the recorded
ones. Cache parameters of a best-effort family are fitted on a declared training split (the trace ids
listed in ``conf/cache/<family>.yaml``, ``benchmarks/fit_calibration.py``) and scored on the rest; so is
the text-only token estimate (the shipped calibration, fitted on the same split) that stands in where a
trace has no usage. Every trace not in a ``fitted_on`` list is held back, whoever recorded it.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np

from sim.core.types import Trace
from sim.cost.cache import CACHE_DIR, cache_rules, fit_implicit
from sim.cost.models import resolve
from sim.cost.tokens import estimate_text_tokens, estimate_tokens
from sim.engine.common import cost_model
from sim.engine.dispatch import replay
from sim.policies.base import Policy, make_policy


def recorded_replay_policy(t: Trace) -> Policy:
    """The ctxsim policy that replays a trace as it was recorded: SWE-agent's ``last_n_observations``
    (``observation_masking`` with its n and polling) re-masks what the run masked; any other recorded
    policy left the trace's events as they were sent (cut results are imported cut), so it is ``raw``."""
    p = t.recorded_policy or {}
    if p.get("name") == "observation_masking":
        return make_policy("observation_masking", n=p["n"], polling=p.get("polling", 1))
    return make_policy("raw")


def _pct_errors(pred: Iterable[float], rec: Iterable[float]) -> list[float]:
    """|pred - rec| / rec in percent, over calls whose recorded value is positive."""
    return [abs(p - r) / r * 100 for p, r in zip(pred, rec, strict=True) if r and r > 0]


def _q(values: list[float], q: float) -> float | None:
    return round(float(np.percentile(values, q)), 3) if values else None


def has_usage(t: Trace) -> bool:
    return any(c.input_tokens is not None for c in t.calls)


def split_of(t: Trace, train_ids: set[str]) -> str:
    return "train" if t.trace_id in train_ids else "test"


def _text_estimates(t: Trace, per_event: list[int]) -> list[int]:
    """Each call's input predicted from its recorded view's text alone (no provider numbers)."""
    prefix = np.concatenate(([0], np.cumsum(per_event)))
    return [int(prefix[c.view_end]) for c in t.calls]


def evaluate(traces: list[Trace]) -> dict:
    """The fidelity report: ``overall`` (held-back part) and ``per_trace``.

    Held back: every trace not listed in the ``fitted_on`` of its cache family, so a trace ctxsim never
    saw is scored as held back. The text-only figures use only the shipped calibration
    (``sim.cost.models.resolve``), never the trace's own provider numbers: they say how well ctxsim sizes a
    trace that has none."""
    traces = [t for t in traces if has_usage(t)]
    per_trace, train = [], []
    held: dict[str, list[float]] = {"cached": [], "text": [], "bytes": [], "cost": [], "run_cost": []}
    totals = {"calls": 0, "exact": 0, "pred_cached": 0, "rec_cached": 0, "pred_cost": 0, "rec_cost": 0.0}
    zero = {"reported": 0, "predicted": 0}
    families = sorted({cost_model(t, "auto").rules.family for t in traces})
    train_ids = {i for f in families for i in cache_rules(f).fitted_on}
    fallbacks = sorted({m for t in traces for m in resolve(t.model).warnings()})
    for t in traces:
        facts = resolve(t.model)
        r = replay(t, recorded_replay_policy(t), window=None)
        agent = r.calls["kind"] == 0
        rec_in = np.array([c.input_tokens if c.input_tokens is not None else -1 for c in t.calls])
        rec_cached = [c.cache_read_tokens for c in t.calls]
        rec_cost = [None if c.recorded_cost_usd is None else c.recorded_cost_usd * 1e6 for c in t.calls]
        pred_in = r.calls["input_tokens"][agent]
        pred_cached = r.calls["cache_read_tokens"][agent].tolist()
        pred_cost = r.calls["cost_microusd"][agent].tolist()
        known = rec_in >= 0
        split = split_of(t, train_ids)
        cached_pairs = [(p, c) for p, c in zip(pred_cached, rec_cached, strict=True) if c is not None]
        cost_pairs = [(p, c) for p, c in zip(pred_cost, rec_cost, strict=True) if c is not None and p >= 0]
        cached_err = _pct_errors([p for p, _ in cached_pairs], [c for _, c in cached_pairs])
        cost_err = _pct_errors([p for p, _ in cost_pairs], [c for _, c in cost_pairs])
        out_err = _pct_errors(r.calls["output_tokens"][agent].tolist(), [c.output_tokens for c in t.calls])
        recorded = [c.input_tokens for c in t.calls]
        bytes_err = _pct_errors(
            _text_estimates(t, [estimate_tokens(e.bytes, facts.bytes_per_token) for e in t.events]), recorded
        )
        coef = facts.text_coefficients
        text_err = (
            _pct_errors(
                _text_estimates(t, [estimate_text_tokens(e.content or "", coef) for e in t.events]), recorded
            )
            if coef is not None and all(e.content is not None for e in t.events)
            else bytes_err
        )
        exact = int((pred_in[known] == rec_in[known]).sum())
        pc, rc = sum(p for p, _ in cached_pairs), sum(c for _, c in cached_pairs)
        zero_reported = sum(1 for _, c in cached_pairs if c == 0)
        zero_predicted = sum(1 for p, c in cached_pairs if c == 0 and p > 0)
        pcost, rcost = sum(p for p, _ in cost_pairs), sum(c for _, c in cost_pairs)
        per_trace.append(
            {
                "trace_id": t.trace_id,
                "split": split,
                "pricing": r.pricing,
                "cache_family": r.cache_family,
                "calls": int(known.sum()),
                "input_exact_share": round(exact / known.sum(), 4) if known.sum() else None,
                "cached_predicted_over_reported": round(pc / rc, 4) if rc else None,
                "cached_median_abs_pct_err": _q(cached_err, 50),
                "cached_p95_abs_pct_err": _q(cached_err, 95),
                "cached_zero_reported_calls": zero_reported,
                "output_median_abs_pct_err": _q(out_err, 50),
                "cost_predicted_over_recorded": round(pcost / rcost, 4) if rcost else None,
                "cost_median_abs_pct_err": _q(cost_err, 50),
                "cost_p95_abs_pct_err": _q(cost_err, 95),
                "text_estimate_median_abs_pct_err": _q(text_err, 50),
                "bytes_estimate_median_abs_pct_err": _q(bytes_err, 50),
            }
        )
        totals["calls"] += int(known.sum())
        totals["exact"] += exact
        if split == "test":
            totals["pred_cached"] += pc
            totals["rec_cached"] += rc
            totals["pred_cost"] += pcost
            totals["rec_cost"] += rcost
            zero["reported"] += zero_reported
            zero["predicted"] += zero_predicted
            held["cached"].extend(cached_err)
            held["text"].extend(text_err)
            held["bytes"].extend(bytes_err)
            held["cost"].extend(cost_err)
            held["run_cost"].extend(_pct_errors([pcost], [rcost]))
        else:
            train.append(t.trace_id)
    held_back = sorted(p["trace_id"] for p in per_trace if p["split"] == "test")
    overall = {
        "calls": totals["calls"],
        "input_exact_share": round(totals["exact"] / totals["calls"], 4) if totals["calls"] else None,
        "cached_predicted_over_reported": (
            round(totals["pred_cached"] / totals["rec_cached"], 4) if totals["rec_cached"] else None
        ),
        "cached_median_abs_pct_err": _q(held["cached"], 50),
        "cached_p95_abs_pct_err": _q(held["cached"], 95),
        "cached_zero_reported_calls": zero["reported"],
        "cached_zero_reported_predicted_calls": zero["predicted"],
        "cost_predicted_over_recorded": (
            round(totals["pred_cost"] / totals["rec_cost"], 4) if totals["rec_cost"] else None
        ),
        "cost_median_abs_pct_err": _q(held["cost"], 50),
        "cost_p95_abs_pct_err": _q(held["cost"], 95),
        "cost_run_median_abs_pct_err": _q(held["run_cost"], 50),
        "cost_run_p95_abs_pct_err": _q(held["run_cost"], 95),
        "text_estimate_median_abs_pct_err": _q(held["text"], 50),
        "bytes_estimate_median_abs_pct_err": _q(held["bytes"], 50),
        "held_back": held_back,
        "model_fallbacks": fallbacks,
        "split": f"{len(train)} traces fitted on (fitted_on in conf/cache/), {len(held_back)} held back "
        "(every trace not fitted on); cached, cost and text-estimate figures are over the held-back calls; "
        "text-only estimates use the shipped calibration only",
    }
    return {"overall": overall, "per_trace": per_trace}


def cache_samples(traces: list[Trace], family: str, ids: Iterable[str]) -> list[tuple[int, bool, int]]:
    """(stable prefix, previous view alive?, reported cached) of every call with a reported cached count
    in the given traces, replayed under their recorded (raw) history: what a best-effort family is
    fitted on (training ids) and validated on (held-back ids)."""
    rules = cache_rules(family)
    raw = make_policy("raw")
    wanted = set(ids)
    samples = []
    for t in traces:
        if t.trace_id not in wanted or not has_usage(t):
            continue
        r = replay(t, raw, window=None, pricing=None)
        stamps = [c.timestamp for c in t.calls]
        for k, c in enumerate(t.calls):
            if c.cache_read_tokens is None:
                continue
            gap = 0.0 if k == 0 or stamps[k] is None or stamps[k - 1] is None else stamps[k] - stamps[k - 1]
            alive = k > 0 and gap <= rules.lifetime_s
            samples.append((int(r.calls["stable_prefix_tokens"][k]), alive, c.cache_read_tokens))
    return samples


def fit_family(traces: list[Trace], family: str, train_ids: list[str]) -> tuple[int, float]:
    """Fit a best-effort family's (min_prefix_tokens, reuse_fraction) on the training traces."""
    return fit_implicit(cache_samples(traces, family, train_ids))


FIT_COMMAND = "python benchmarks/fit_calibration.py --write"


def write_fit(family: str, min_prefix: int, fraction: float, train_ids: list[str]) -> Path:
    """Rewrite ``conf/cache/<family>.yaml`` with fitted parameters and the declared training split."""
    rules = cache_rules(family)
    path = CACHE_DIR / f"{family}.yaml"
    lines = [
        f"# {family}: best-effort implicit caching. min_prefix_tokens (every 128 tokens up to 8,192) and",
        "# reuse_fraction (matching the reported total) are fitted by"
        " sim.cost.cache.fit_implicit on the runs",
        "# listed in fitted_on (the training half of the 40 shared"
        " mini-swe-agent runs, sim.analysis.fidelity.",
        "# default_split) and validated on the other half; rewritten by",
        f"#   {FIT_COMMAND}",
        "# `ctxsim fidelity` scores every trace not listed here as held back. lifetime_s is assumed",
        "# (unpublished).",
        f"family: {family}",
        f"min_prefix_tokens: {min_prefix}",
        f"granularity: {rules.granularity}",
        f"lifetime_s: {rules.lifetime_s:g}",
        f"writes: {'true' if rules.writes else 'false'}",
        f"reuse_fraction: {fraction}",
        "fitted_on:",
        *[f"  - {i}" for i in sorted(train_ids)],
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def write_token_calibration(bytes_per_token: dict[str, float], coefficients: dict[str, tuple]) -> list[Path]:
    """Rewrite ``conf/calibration/bytes_per_token.yaml`` and ``text_tokens.yaml`` with fits made on the
    training half (so that the held-back figures of ``ctxsim fidelity`` are scored on unseen runs)."""
    from sim.cost.tokens import CALIBRATION_FILE, SEED_BYTES_PER_TOKEN, TEXT_CALIBRATION_FILE

    bpt = [
        "# Calibrated bytes per token per model: (UTF-8 bytes + 16 framing bytes per message) / tokens,",
        "# fitted from provider-reported input tokens (sim.cost.tokens.fit_bytes_per_token) on the training",
        "# half of the 40 shared mini-swe-agent runs"
        " (sim.analysis.fidelity.default_split: the runs listed in",
        "# conf/cache/gemini.yaml fitted_on; a test re-fits and compares); rewritten by",
        f"#   {FIT_COMMAND}",
        "# Used to estimate sizes where a trace has no provider numbers of its own (placeholders, events",
        "# no recorded call saw, traces without usage). Unknown models fall back to `default`, with a",
        "# warning.",
        f"default: {SEED_BYTES_PER_TOKEN}",
        "models:",
        *[f"  {m}: {v}" for m, v in sorted(bytes_per_token.items())],
    ]
    text = [
        "# Character-class token estimate per model"
        " (sim.cost.tokens.fit_text_estimator): tokens of a message",
        "# = sum of coefficient x count over (letters, digits, spaces, newlines, other characters, words,",
        "# 1 per message). Fitted on the training half of the 40 shared"
        " mini-swe-agent runs (sim.analysis.fidelity.",
        "# default_split; a test re-fits and compares); rewritten by",
        f"#   {FIT_COMMAND}",
        "# Used where a trace has text but no provider numbers, and for `ctxsim fidelity`'s text-only",
        "# figure.",
        "models:",
        *[f"  {m}: [{', '.join(f'{x:g}' for x in c)}]" for m, c in sorted(coefficients.items())],
    ]
    CALIBRATION_FILE.write_text("\n".join(bpt) + "\n")
    TEXT_CALIBRATION_FILE.write_text("\n".join(text) + "\n")
    return [CALIBRATION_FILE, TEXT_CALIBRATION_FILE]


def default_split(trace_ids: Iterable[str]) -> list[str]:
    """The declared training half: every other trace id in sorted order, starting with the first."""
    return sorted(trace_ids)[::2]
