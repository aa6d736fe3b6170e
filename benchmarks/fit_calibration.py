"""Refit the shipped calibration on the training half of the 40 shared mini-swe-agent runs and validate
it on the other half (not a test: it replays every run, about ten seconds).

    .venv/bin/python benchmarks/fit_calibration.py [--write]

Fits, each on the declared training half (``sim.analysis.fidelity.default_split``: every other trace id in
sorted order): the Gemini cache's ``min_prefix_tokens`` and ``reuse_fraction``
(``sim.cost.cache.fit_implicit``), bytes per token (``sim.cost.tokens.fit_bytes_per_token``) and the
character-class coefficients (``sim.cost.tokens.fit_text_estimator``). Prints the cache figures of the shipped
parameters and of the refit on both halves (predicted / reported cached total, per-call absolute % error mean,
p50 and p95 over calls reporting a hit). ``--write`` rewrites ``conf/cache/gemini.yaml``,
``conf/calibration/bytes_per_token.yaml`` and ``conf/calibration/text_tokens.yaml``. Deterministic: the same
traces give the same files. Traces come from ``CTXSIM_TRACES`` (default ``../shared/traces``)."""

from __future__ import annotations

import argparse
import sys

from sim.analysis.fidelity import cache_samples, default_split, has_usage, write_fit, write_token_calibration
from sim.cost.cache import cache_rules, fit_implicit, implicit_errors
from sim.cost.tokens import fit_bytes_per_token, fit_text_estimator
from sim.importers import load_paths
from sim.util.paths import traces_dir


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", action="store_true", help="rewrite the conf files with the refit")
    args = ap.parse_args()
    root = traces_dir() / "mini-swe-agent-gemini3pro" / "trajs"
    if not root.is_dir():
        print(f"fit_calibration: {root} not found (set CTXSIM_TRACES)", file=sys.stderr)
        return 2
    traces = [t for t in load_paths([root]) if has_usage(t)]
    ids = sorted(t.trace_id for t in traces)
    train = default_split(ids)
    held = sorted(set(ids) - set(train))
    halves = (("train", train), ("held back", held))
    samples = {half: cache_samples(traces, "gemini", part) for half, part in halves}
    shipped = cache_rules("gemini")
    fitted = fit_implicit(samples["train"])
    print(f"{len(traces)} runs: {len(train)} fitted on, {len(held)} held back")
    print(f"{'gemini cache':<34} {'half':<10} {'pred/rep':>9} {'mean %':>8} {'p50 %':>8} {'p95 %':>8}")
    for label, (m, f) in (
        ("shipped", (shipped.min_prefix_tokens, shipped.reuse_fraction)),
        ("refit", fitted),
    ):
        for half, s in samples.items():
            total, mean, p50, p95 = implicit_errors(s, m, f)
            name = f"{label} (min {m}, reuse {f})"
            print(f"{name:<34} {half:<10} {total:>9.4f} {mean:>8.2f} {p50:>8.2f} {p95:>8.2f}")
    train_traces = [t for t in traces if t.trace_id in set(train)]
    bpt = fit_bytes_per_token(train_traces)
    coef = fit_text_estimator(train_traces)
    print(f"bytes per token (training half): {bpt}")
    print(f"character-class coefficients (training half): {coef}")
    if args.write:
        for path in (write_fit("gemini", *fitted, train), *write_token_calibration(bpt, coef)):
            print(f"wrote {path.relative_to(path.parents[2])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
