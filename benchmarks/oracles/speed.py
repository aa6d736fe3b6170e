"""ctxsim's calls/s beside the real library's, on the same trace and setting, in one process.

    PYTHONPATH=. python benchmarks/oracles/speed.py FRAMEWORK SETTING TRACE_ID [REPEATS]

Needs one environment holding both ctxsim's dependencies and the framework (e.g. the framework's
pinned packages plus numpy, pandas, pyarrow, hydra-core, pyyaml); the oracles' own environments have
only the framework. Each repeat runs the framework's oracle replay (``<framework>/oracle.py``: the real
library driven over every call of the trace) and ctxsim's replay of the same trace with the policy and
knobs of ``tests/framework_oracle.py`` (one ``sim.replay`` with the per-call loop, as a result replay
runs it), interleaved; prints the median calls/s of each side and their ratio, and checks that the two
agree call for call on that trace.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent / "tests"))

import framework_oracle as fo  # noqa: E402

from sim.engine.dispatch import replay  # noqa: E402
from sim.engine.model import ReplayModel  # noqa: E402
from sim.policies.base import make_policy  # noqa: E402
from sim.util import provenance  # noqa: E402


def main(argv: list[str]) -> int:
    framework, setting, trace_id = argv[:3]
    repeats = int(argv[3]) if len(argv) > 3 else 11
    prov = provenance.start()
    corpus, policy, knobs, config = fo.SETTINGS[framework][setting]
    trace = next(t for t in fo.corpus(corpus) if t.trace_id == trace_id)
    spec = importlib.util.spec_from_file_location(f"{framework}_oracle", HERE / framework / "oracle.py")
    oracle = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = oracle  # pydantic models of the oracle resolve their annotations there
    spec.loader.exec_module(oracle)
    exported = fo.export(trace, full_text=True)
    calls = len(trace.calls)
    window = config.get("window")
    model = ReplayModel(trace, on_missing="degrade")
    ours, theirs = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        got = asyncio.run(oracle.replay(json.loads(json.dumps(exported)), config, fo.SUMMARY_RULE))
        theirs.append(calls / (time.perf_counter() - t0))
        t0 = time.perf_counter()
        replay(trace, make_policy(policy, **knobs), model, window=window, pricing=None)
        ours.append(calls / (time.perf_counter() - t0))
    same = got == fo.vectors(trace, policy, knobs, window=window)
    a, b = statistics.median(ours), statistics.median(theirs)
    print(f"{framework} {setting} {trace_id}: {calls} calls, {repeats} repeats interleaved")
    print(f"  ctxsim {policy}: {a:,.0f} calls/s (median)")
    print(f"  {framework} (real library): {b:,.0f} calls/s (median)")
    print(f"  ratio {a / b:,.1f}x; agree call for call: {same}")
    print(prov.text())  # the framework's own packages among the libraries: it ran in this process
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
