"""Regression gate: replay a suite under a candidate policy, compare with a baseline, fail on regressions.

A gate file (YAML, see ``docs/gate.md``; read by ``sim.gate.gatefile``) names the suite, the pricing, the
baseline (a committed JSON Lines file of per-run rows, ``sim.gate.baseline``, or a policy to run), the
candidate policy and per-metric thresholds. The suite's runs are aggregated per metric (sums for counts,
tokens and cost; the share of runs for booleans; the count of ``context-overflow`` runs for
``context_overflow_runs``) and every threshold is checked (``sim.gate.outcome``). ``ctxsim gate`` exits 0
when all hold, 1 on a regression, 2 on a usage or config error, 3 on an internal error
(``sim.util.exitcodes``), so CI can tell a broken gate from a regression.
"""

from __future__ import annotations

import sys
from pathlib import Path

from sim.gate.baseline import read_baseline, write_baseline
from sim.gate.gatefile import load_gate
from sim.gate.outcome import GateResult, aggregate, check
from sim.gate.runs import build_spec, load_suite, run_policy
from sim.util import interrupts
from sim.util.errors import ConfigError
from sim.util.exitcodes import EXIT_OK, EXIT_REGRESSION


def evaluate(
    path: str | Path,
    allow_modules: tuple[str, ...] | list[str] = (),
    update_baseline: bool = False,
    log=None,
    baseline_results: str | Path | None = None,
) -> GateResult:
    """Run the gate of ``path``: the baseline (read or run), the candidate, every threshold.

    ``update_baseline``: rewrite the baseline results file first, from the baseline policy when the
    gate names one, otherwise from the candidate. A gate whose baseline is a policy only has no file to
    update: that is an error. ``baseline_results``: the command line's ``--baseline-results`` instead
    of the file's ``baseline.results``."""
    gate = load_gate(path, baseline_results)
    allow = tuple(allow_modules)
    # a bad policy in the file is an error before any run (and before anything is written)
    for spec in (gate.baseline_policy, gate.candidate):
        if spec is not None:
            build_spec(gate, spec, allow)
    traces = load_suite(gate)
    candidate_rows = run_policy(gate, gate.candidate, traces, allow)
    if update_baseline:
        if gate.baseline_results is None:
            raise ConfigError(
                f"{gate.display}: --update-baseline: the baseline is a policy run every time; there is no "
                "'baseline.results' file to update"
            )
        src = gate.baseline_policy or gate.candidate
        rows = candidate_rows if src is gate.candidate else run_policy(gate, src, traces, allow)
        write_baseline(rows, gate.baseline_results)
        if log:
            log(f"wrote {len(rows)} baseline rows ({src.label()}) to {gate.baseline_results_text}")
    if gate.baseline_results is not None:
        baseline_rows = read_baseline(gate, traces)
        label = f"results `{gate.baseline_results_text}`"
    else:
        assert gate.baseline_policy is not None
        baseline_rows = run_policy(gate, gate.baseline_policy, traces, allow)
        label = f"policy `{gate.baseline_policy.label()}`"
    checks = [
        check(t, aggregate(baseline_rows, t.metric), aggregate(candidate_rows, t.metric))
        for t in gate.thresholds
    ]
    return GateResult(gate, checks, baseline_rows, candidate_rows, label)


def _write_text(path: Path, text: str) -> None:
    from sim.util.atomicfile import atomic_path

    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def cmd_gate(args) -> int:
    """``ctxsim gate GATE_FILE [--update-baseline] [--summary OUT.md] [--junit OUT.xml] [--allow-module M]``.
    Exit 0 pass, 1 regression, 2 usage or config error (raised as ConfigError for the CLI); any other
    exception is exit 3 (``sim.util.exitcodes.run_command``), never 1."""

    def note(msg: str) -> None:
        print(f"ctxsim: gate: {msg}", file=sys.stderr)

    from sim.config.compose import check_allow_modules

    allow = check_allow_modules(args.allow_module or ())
    res = evaluate(
        args.gate_file, allow, args.update_baseline, log=note, baseline_results=args.baseline_results
    )
    interrupts.check()  # before any output: an interrupted gate writes no summary (sim.util.interrupts)
    text = res.summary()
    if args.summary:
        _write_text(Path(args.summary), text)
    if args.junit:
        _write_text(Path(args.junit), res.junit())
    sys.stdout.write(text)
    sys.stdout.flush()
    for mr in res.failures:
        note(f"regression: {mr.message()}")
    return EXIT_OK if res.passed else EXIT_REGRESSION
