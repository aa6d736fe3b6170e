"""``frameworks.py effect_agent``: ``seed_engine`` held to effect-agent's own code (``driver.mjs`` ->
``oracle.ts``, Node) on any traces ctxsim imports, at any settings. Both modes take one path,
``feed.replay_cases``: ``--traces`` here, the goldens' corpora through ``feed.main`` (``goldens``).

Per-call agreement. Each side's replay is taken in the goldens' form (``seed_oracle.golden_run``) and split
by call: call k agrees when everything the goldens hold about it is equal -- the pre-turn estimate, the
request's tokens, whether it triggered, whether it is the grace turn, the compactions at it (estimate
before; prune bound, cleared results, estimate after; summarize cut, covered span, transcript length,
elided messages, summarizer tokens, estimate after; an overflow retry's), its run-status line, the
warnings raised after it and the tool-result envelopes of the events it admitted. A run that ends
differently (finish reason or number of calls) disagrees at its last compared call. Warnings raised
during the grace turn (by its compaction's summarizer or its answer) are not compared: no verdict follows
the grace turn in ctxsim, and the goldens keep them apart too. Tokens: each call's request tokens on both
sides (an overflow-ended call, which sends nothing, 0).
"""

from __future__ import annotations

import importlib.util
import sys
from bisect import bisect_right
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent.parent.parent / "tests"))

import framework_oracle as fo  # noqa: E402
from comparison import Setting, TraceResult, agreement, unique_ids  # noqa: E402


def _feed():
    """feed.py under its own module name (openhands' oracle has a feed.py too)."""
    name = "ctxsim_oracle_effect_agent_feed"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, HERE / "feed.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


feed = _feed()
so = feed.so

POLICIES = ("seed_engine",)
FIELDS = ("estimate", "request", "triggered", "grace", "compactions", "status", "warnings", "envelopes")


def config(policy: str, knobs: dict, window: int | None) -> dict:
    """seed_engine's parameters, as the oracle reads them (``feed.oracle_params``)."""
    if policy not in POLICIES:
        raise fo.NotComparable(f"effect_agent holds {', '.join(POLICIES)}")
    if knobs.get("cost_budget_microusd") is not None:
        raise fo.NotComparable("the oracle prices nothing: cost_budget_microusd has no counterpart")
    return feed.oracle_params(knobs)


def per_call(run: dict, view_ends: list[int]) -> list[dict]:
    """A run in the goldens' form, split by call (the fields of ``FIELDS``)."""
    n = len(run["requests"])
    calls = [
        {"estimate": run["estimates"][k] if run["estimates"] is not None else None,
         "request": run["requests"][k], "triggered": False, "grace": run["grace"] == k, "compactions": [],
         "status": run["status"][k] if run["status"] is not None else None, "warnings": [], "envelopes": []}
        for k in range(n)
    ]  # fmt: skip
    for k in run["triggered"]:
        calls[k]["triggered"] = True
    for c in run["compactions"]:
        calls[c["at"]]["compactions"].append(c)
    for turn, dim in run["warnings"]:
        calls[min(turn - 1, n - 1)]["warnings"].append(dim)
    for env in run["envelopes"]:  # admitted by the first call whose view holds the event
        calls[min(bisect_right(view_ends, env[0]), n - 1)]["envelopes"].append(env)
    return calls


def compare(trace_id: str, got: dict, want: dict, view_ends: list[int]) -> TraceResult:
    a, b = per_call(got, view_ends), per_call(want, view_ends)
    vec = {
        "ctxsim": {"calls": [[c, None, c["request"] or 0] for c in a]},
        "real": {"calls": [[c, None, c["request"] or 0] for c in b]},
    }
    n, same, tc, tr = agreement(vec["ctxsim"], vec["real"])
    diff = None
    for k in range(n):
        if a[k] != b[k]:
            fields = [f for f in FIELDS if a[k][f] != b[k][f]]
            diff = f"call {k}: " + "; ".join(f"{f} ctxsim {a[k][f]} real {b[k][f]}" for f in fields)
            break
    if diff is None and (len(a) != len(b) or got["finish"] != want["finish"]):
        diff = f"ctxsim ends {got['finish']} after {len(a)} calls, real {want['finish']} after {len(b)}"
        same, n = max(n - 1, 0), max(n, 1)  # the last compared call disagrees
    return TraceResult(trace_id, n, same, tc, tr, diff)


def run(runner: str, traces: list, settings: list[Setting]) -> dict[str, list[TraceResult]]:
    """Every setting on every trace, in one Node run; ``{setting.name: [TraceResult per trace]}``."""
    cases = [(j, s.knobs, s.window) for s in settings for j in range(len(traces))]
    _, runs = feed.replay_cases(traces, cases, runner=runner)
    ids = unique_ids(traces)
    out: dict[str, list[TraceResult]] = {}
    for k, s in enumerate(settings):
        rows = out.setdefault(s.name, [])
        for j, t in enumerate(traces):
            real = {f: v for f, v in runs[k * len(traces) + j].items() if f != "grace_warnings"}
            mine = so.decisions(t, s.knobs, s.window)
            rows.append(compare(ids[j], mine, real, [c.view_end for c in t.calls]))
    return out


def goldens(write: bool, only: list[str] | None) -> int:
    """Goldens mode (``frameworks.py effect_agent [--write] [--only SETTING]``): feed.py's run over the
    goldens' corpora and settings (``tests/seed_oracle.py``), writing ``tests/golden/seed_engine_oracle/``."""
    argv = (["--write"] if write else []) + (["--settings", ",".join(only)] if only else [])
    return feed.main(argv)
