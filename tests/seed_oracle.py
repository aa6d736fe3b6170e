"""The seed engine's differential oracle, ctxsim's side: the corpora and settings the goldens in
``tests/golden/seed_engine_oracle/`` hold (the shared mini-swe-agent runs, the embedded suite, the
hand-made cases, the shared families at their own scale), and ``seed_engine``'s decisions in the
goldens' form.

``make oracle-seed`` (``benchmarks/oracles/effect_agent/feed.py``) replays the same traces through
effect-agent's own code and writes the goldens; ``tests/test_seed_engine_oracle.py`` holds
``seed_engine`` to them exactly, without Node. Each side keeps its own view (closed loop): the oracle's
provider counts the view it built at ctxsim's per-event token sizes, so only decision rules can differ.
The mock model answers a missing fact with ``degrade`` (no re-read calls: they are ctxsim's model, not
the engine's) and nothing is priced.
"""

from __future__ import annotations

from pathlib import Path

from sim.core.records import AGENT, GRACE
from sim.core.types import Call, Event, Trace
from sim.engine.dispatch import replay
from sim.engine.model import ReplayModel
from sim.importers import load_paths
from sim.policies.base import make_policy
from sim.util.paths import traces_dir

REPO = Path(__file__).resolve().parent.parent
GOLDEN = REPO / "tests" / "golden" / "seed_engine_oracle"
MINI = traces_dir() / "mini-swe-agent-gemini3pro" / "trajs"

SIZING = {"run_status": "off"}
# name -> (knobs, provider window)
SETTINGS: dict[str, tuple[dict, int | None]] = {
    "16000-4000": ({"context_token_limit": 16000, "keep_recent_tokens": 4000, **SIZING}, None),
    "24000-8000": ({"context_token_limit": 24000, "keep_recent_tokens": 8000, **SIZING}, None),
    "32000-8000": ({"context_token_limit": 32000, "keep_recent_tokens": 8000, **SIZING}, None),
    "48000-20000": ({"context_token_limit": 48000, "keep_recent_tokens": 20000, **SIZING}, None),
    "16000-4000-summarize": (
        {"context_token_limit": 16000, "keep_recent_tokens": 4000, "mode": "summarize", **SIZING},
        None,
    ),
    # budgets and the run-status line: tool-call rejections and token breaches with a grace turn
    "budgets": (
        {"context_token_limit": 24000, "keep_recent_tokens": 8000, "run_status": "appended",
         "max_turns": 40, "max_tool_calls": 30, "max_duration_s": 600, "token_budget": 400000},
        None,
    ),
    # ... and the hard stops: turns, tokens, duration
    "budgets-fail": (
        {"context_token_limit": 32000, "keep_recent_tokens": 8000, "run_status": "appended",
         "on_exhaustion": "fail", "max_turns": 25, "max_tool_calls": 30, "max_duration_s": 300,
         "token_budget": 300000},
        None,
    ),
}  # fmt: skip


def _budgets(**kw) -> dict:
    base = {"context_token_limit": 20000, "keep_recent_tokens": 4000, "run_status": "appended"}
    return base | {"max_turns": 60, "max_tool_calls": 80, "max_duration_s": 3600, "token_budget": 10**6} | kw


CASE_SETTINGS: dict[str, tuple[dict, int | None]] = {
    "cases-16000-2000": ({"context_token_limit": 16000, "keep_recent_tokens": 2000, **SIZING}, None),
    "cases-prune": (
        {"context_token_limit": 16000, "keep_recent_tokens": 2000, "mode": "prune", **SIZING},
        None,
    ),
    "cases-summarize": (_budgets(context_token_limit=9000, keep_recent_tokens=1500, mode="summarize"), None),
    "cases-overflow": ({"context_token_limit": 60000, "keep_recent_tokens": 2000, **SIZING}, 15000),
    "cases-overflow-tight": ({"context_token_limit": 60000, "keep_recent_tokens": 2000, **SIZING}, 9000),
    "cases-budgets": (_budgets(max_turns=9, max_tool_calls=7, max_duration_s=100, token_budget=160000), None),
    "cases-budgets-turns": (_budgets(max_turns=6), None),
    "cases-budgets-tokens": (_budgets(token_budget=40000), None),
    "cases-budgets-duration": (_budgets(max_duration_s=60), None),
    "cases-budgets-fail": (
        _budgets(on_exhaustion="fail", max_turns=9, max_tool_calls=7, max_duration_s=100),
        None,
    ),
    "cases-budgets-fail-turns": (_budgets(on_exhaustion="fail", max_turns=6), None),
    "cases-budgets-fail-tokens": (_budgets(on_exhaustion="fail", token_budget=40000), None),
}
# formatRunStatus inputs: (turns answered, tool calls, tokens, last input, elapsed s, knobs)
STATUS_VIEWS = [
    (
        2,
        11,
        84210,
        23480,
        74.9,
        {"max_turns": 12, "max_tool_calls": 24, "max_duration_s": 300, "token_budget": 200000},
    ),
    (2, 11, 84210, 23480, 74.0, {"max_turns": 12, "max_tool_calls": 24, "max_duration_s": 300}),
    (
        9,
        11,
        84210,
        23480,
        74.0,
        {"max_turns": 12, "max_tool_calls": 24, "max_duration_s": 300, "token_budget": 200000},
    ),
    (0, 19, 0, 0, 0.0, {"max_turns": 12, "max_tool_calls": 24, "max_duration_s": 300}),
    (
        3,
        1,
        160000,
        9,
        12.0,
        {"max_turns": 12, "max_tool_calls": 24, "max_duration_s": 300.7, "token_budget": 200000},
    ),
    (3, 1, 100, 9, 240.0, {"max_turns": 12, "max_tool_calls": 24, "max_duration_s": 300}),
]


# ------------------------------------------------------------------------------------------- corpora
def mini_traces() -> list[Trace]:
    return list(load_paths([str(MINI)]))


def suite_traces() -> list[Trace]:
    return list(load_paths([str(REPO / "scenarios" / "suite")]))


def _event(index: int, kind: str, content: str, **kw) -> Event:
    nbytes = len(content.encode())
    return Event(
        index=index,
        kind=kind,
        content=content,
        bytes=nbytes,
        chars=len(content),
        lines=len(content.splitlines()),
        tokens=-(-(nbytes + 16) // 4),
        tokens_provenance="synthetic",
        **kw,
    )


def _case(trace_id: str, turns: list[list[str | None]]) -> Trace:
    """system, a task with quotes and newlines, then per turn an assistant with one call per result
    (None: a result of no call) and the results; a final answer. Inputs are the view's sum."""
    events = [
        _event(0, "system", 'You are a careful engineer.\nAnswer in "JSON" when asked.'),
        _event(1, "user", 'Fix the bug in "parse()":\n\tit fails on \\n escapes and on "quotes".'),
    ]
    calls = []
    for k, results in enumerate(turns):
        ids = tuple(f"call-{k}-{j}" for j, r in enumerate(results) if r is not None)
        a = len(events)
        events.append(
            _event(a, "assistant", f'Running step {k}: grep -n "def {k}" src/*.py', tool_call_ids=ids)
        )
        calls.append(a)
        j = 0
        for r in results:
            cid = None
            if r is not None:
                cid, j = ids[j], j + 1
            events.append(
                _event(len(events), "tool_result", r if r is not None else "stray output", tool_call_id=cid)
            )
    a = len(events)
    events.append(_event(a, "assistant", "Done: the parser now handles escapes."))
    calls.append(a)
    prefix = [0]
    for e in events:
        prefix.append(prefix[-1] + e.tokens)
    return Trace(
        trace_id=trace_id,
        source_format="ctxsim-scenario",
        events=tuple(events),
        calls=tuple(
            Call(
                index=j,
                event_index=a,
                view_end=a,
                input_tokens=prefix[a],
                output_tokens=40 + j,
                residual_tokens=0,
                timestamp=1000.0 + 11 * j,
            )
            for j, a in enumerate(calls)
        ),  # fmt: skip
        bytes_per_token=4.0,
    )


CODE_LINE = 'def f(x):\n    return "value\\t%s" % x  # comment\n'
MULTIBYTE = "é漢😀 "


def _cut(text: str, nbytes: int) -> str:
    return text.encode()[:nbytes].decode(errors="ignore")


def hand_traces() -> list[Trace]:
    """The hand-made cases: big results the bound cuts (ASCII, code with quotes and newlines,
    multi-byte text, a 51,000-byte code result whose JSON text is over 51,200 bytes), a batch of
    parallel calls with a stray result, and long runs of escapes, multi-byte text and clipped results."""
    code = (CODE_LINE * (204800 // len(CODE_LINE) + 1))[:204800]
    multi = (MULTIBYTE * 20000)[:70000]
    code51 = (CODE_LINE * (51000 // len(CODE_LINE) + 1))[:51000]
    small = ["ok", 'x = "1"\n' * 40, "é" * 300, "line\n" * 500]
    mixed = [small[k % 4] + ("漢😀" * (k * 97 % 1300)) + CODE_LINE * (k * 31 % 90) for k in range(24)]
    return [
        _case("envelope-ascii-200k", [["ok"], ["a" * 204800], ["done"], ["a" * 3000]]),
        _case("envelope-code-200k", [["ok"], [code], ["done"], [CODE_LINE * 50]]),
        _case("envelope-multibyte", [["ok"], [multi], ["done"], [multi[:3000]]]),
        _case("envelope-code-51000", [["ok"], [code51], [code51[:20000]], ["done"]]),
        _case("batch", [["ok"], ["a" * 9000, CODE_LINE * 100, None], [code51[:30000], "b"], ["done"]]),
        _case("mixed-24", [[m] for m in mixed]),
        _case(
            "clip-edges",
            [[_cut("😀" * 3000, 3996 + k)] for k in range(12)] + [[MULTIBYTE * 600] for _ in range(6)],
        ),
    ]


def shared_settings(peak: int, runs: bool = False) -> dict[str, tuple[dict, int | None]]:
    """The settings of a shared family (``frameworks.py effect_agent --traces``' corpora) at its median
    peak request ``peak``: the defaults (budgets off: the status line's mapping), limits that fire early,
    mid-run and late in each mode with results over small bounds, a provider window under the peak (the
    overflow retry), budgets that stop runs both ways; ``runs``: a conversation's runs without the
    durable compaction record too."""

    def tok(f: float) -> int:
        return max(round(peak * f), 1)

    out: dict[str, tuple[dict, int | None]] = {
        "defaults": ({}, None),
        "early-summarize": (
            {"context_token_limit": tok(0.25), "keep_recent_tokens": tok(0.05), "mode": "summarize",
             "tool_result_max_bytes": 700},
            None,
        ),
        "mid": ({"context_token_limit": tok(0.5), "keep_recent_tokens": tok(0.1), **SIZING}, None),
        "late-prune-window": (
            {"context_token_limit": tok(0.9), "keep_recent_tokens": tok(0.15), "mode": "prune",
             "tool_result_max_bytes": 256, **SIZING},
            tok(0.7),
        ),
        "budgets": (
            {"context_token_limit": tok(0.4), "keep_recent_tokens": tok(0.1), "max_turns": 8,
             "max_tool_calls": 6, "max_duration_s": 900, "token_budget": tok(6)},
            None,
        ),
        "budgets-fail-summarize": (
            {"context_token_limit": tok(0.3), "keep_recent_tokens": tok(0.1), "on_exhaustion": "fail",
             "max_turns": 5, "token_budget": tok(4), "summary_ratio": 0.5, "summary_min_tokens": 10},
            None,
        ),
        # summaries of a token or two: a request whose recorded residual is negative floors at 0
        "tiny-summaries": (
            {"context_token_limit": tok(0.41), "keep_recent_tokens": tok(0.025), "summary_min_tokens": 1,
             **SIZING},
            None,
        ),
    }  # fmt: skip
    if runs:
        out["no-persist"] = (
            {
                "context_token_limit": tok(0.3),
                "keep_recent_tokens": tok(0.05),
                "persist_compaction": False,
                **SIZING,
            },
            None,
        )
        # a breach whose grace turn falls on a later run's first recorded call: it stays in its own run
        out["grace-at-run-start"] = (
            {
                "context_token_limit": tok(0.02),
                "keep_recent_tokens": tok(0.01),
                "token_budget": tok(0.5),
                "summary_ratio": 0.5,
                "summary_min_tokens": 10,
                "summary_max_tokens": 100,
            },
            None,
        )
    return out


def shared(name: str):
    """A shared family's traces (``framework_oracle.corpus``: the families, ``tau10``)."""
    from framework_oracle import corpus

    return lambda: corpus(name)


def redacted(name: str):
    """A shared family made text-free (``ctxsim import --redact``): the oracle renders stand-ins of the
    recorded counts (``feed.text_free``), ctxsim reads the counts."""
    from framework_oracle import corpus

    from sim.trace.io import redact

    return lambda: [redact(t) for t in corpus(name)]


def text_free_settings(peak: int) -> dict[str, tuple[dict, int | None]]:
    """The sizing settings of ``shared_settings``: estimates, cuts, transcripts and envelopes."""
    return {
        k: v for k, v in shared_settings(peak).items() if k in ("early-summarize", "mid", "late-prune-window")
    }


CORPORA = {
    "mini": (mini_traces, SETTINGS),
    "suite": (suite_traces, SETTINGS),
    "cases": (hand_traces, CASE_SETTINGS),
    # the shared families at their own scale (median peak request, ctxsim's sizes)
    "swe": (shared("swe"), shared_settings(6887)),
    "ohv0": (shared("ohv0"), shared_settings(5707, runs=True)),
    "ohsdk": (shared("ohsdk"), shared_settings(3936, runs=True)),
    "inspect": (shared("inspect"), shared_settings(3225)),
    "claude": (shared("claude"), shared_settings(123, runs=True)),
    "tau10": (shared("tau10"), shared_settings(4186)),
    "swe-redacted": (redacted("swe"), text_free_settings(6887)),
    "ohv0-redacted": (redacted("ohv0"), text_free_settings(5707)),
    "tau10-redacted": (redacted("tau10"), text_free_settings(4186)),
}
SHARED = (
    "mini",
    "swe",
    "ohv0",
    "ohsdk",
    "inspect",
    "claude",
    "tau10",
    "swe-redacted",
    "ohv0-redacted",
    "tau10-redacted",
)  # corpora of the shared traces


# ------------------------------------------------------------------------------ seed_engine, golden form
def decisions(trace: Trace, knobs: dict, window: int | None) -> dict:
    """One replay's decisions as a golden holds them (the oracle writes the same form)."""
    holder: dict = {}
    policy = make_policy("seed_engine", **knobs)
    start = policy.start

    def keep(t: Trace):  # the state as the run starts: a run whose first request overflows sends none
        return holder.setdefault("state", start(t))

    object.__setattr__(policy, "start", keep)  # this instance only (the policy is a frozen dataclass)
    model = ReplayModel(trace, on_missing="degrade")
    # an observer takes the per-call loop, the reference, where the state is the policy's own
    rec = replay(trace, policy, model, observer=lambda k, view: None, window=window, pricing=None)
    log = holder["state"].log
    kinds, calls = rec.calls["kind"].tolist(), rec.calls["recorded_call"].tolist()
    inputs = rec.calls["input_tokens"].tolist()
    requests = [x for kind, x in zip(kinds, inputs, strict=True) if kind in (AGENT, GRACE)]
    requests += [None] * (len(log) - len(requests))
    warnings = [[calls[row] + 1, dim] for row, dim in rec.warnings]
    envelopes = [[i, o, b] for i, (o, b, _) in sorted(holder["state"].envelopes.items())]
    return golden_run(log, requests, knobs, rec.finish_reason, warnings, envelopes)


def golden_run(log: list[dict], requests: list, knobs: dict, finish: str, warnings, envelopes) -> dict:
    """The golden form of one run from per-turn records (ctxsim's log or the oracle's calls)."""
    limited = knobs.get("context_token_limit") is not None
    compactions = []
    for at, r in enumerate(log):
        if r.get("triggered"):
            compactions.append(
                {"at": at, "before": r["before"], "prune": r["prune"], "summarize": r["summarize"]}
            )
        if r.get("overflow"):
            o = r["overflow"]
            compactions.append(
                {"at": at, "overflow": True, "before": o["before"], "summarize": o["summarize"]}
            )
    statuses = [r.get("status") for r in log]
    return {
        "estimates": [r["estimate"] for r in log] if limited else None,
        "requests": requests,
        "triggered": [at for at, r in enumerate(log) if r.get("triggered")],
        "grace": next((at for at, r in enumerate(log) if r.get("grace")), None),
        "compactions": compactions,
        "status": statuses if knobs.get("run_status", "appended") == "appended" else None,
        "finish": finish,
        "warnings": warnings,
        "envelopes": envelopes,
    }


def golden_path(corpus: str, setting: str) -> Path:
    return GOLDEN / f"{corpus}__{setting}.json"
