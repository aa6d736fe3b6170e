"""The OpenHands oracle in ``frameworks.py``'s conformance runs (``frameworks.py openhands --traces ...``):
any traces ctxsim imports, at any settings of the ``openhands_*`` policies, through OpenHands' own
condensers (``driver.py``, the same path ``feed.py``'s goldens take). Loaded by path by ``frameworks.py``
(``_load_backend``); runs in ctxsim's environment.

A call agrees when its whole state dict is equal (every original event's state, the placeholders and
summaries sent with their sizes, the copies, the view's tokens), as ``feed.compare``; a call only one
side made disagrees, and so does a different end (against the last call). Tokens: per call the view
plus the call's residual, summed.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from comparison import Setting, TraceResult, unique_ids

from sim.core.types import Trace
from sim.util.errors import ConfigError

HERE = Path(__file__).resolve().parent


def _feed():
    """``feed.py`` (loaded by path: this folder is no package, and its name is the library's own)."""
    if "ctxsim_openhands_feed" not in sys.modules:
        spec = importlib.util.spec_from_file_location("ctxsim_openhands_feed", HERE / "feed.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    return sys.modules["ctxsim_openhands_feed"]


POLICIES = (
    "openhands_observation_masking",
    "openhands_browser_output_masking",
    "openhands_recent_events",
    "openhands_amortized_forgetting",
    "openhands_llm_summarizing",
    "openhands_conversation_window",
    "openhands_hard_context_reset",
)
SUMMARY_KNOBS = ("summary_ratio", "summary_min_tokens", "summary_max_tokens")  # ctxsim's size rule
# the knobs each OpenHands constructor takes (the policies' names are the library's), per framework;
# the summary knobs size the scripted summaries on both sides
LIBRARY_KNOBS = {
    ("v0", "openhands_observation_masking"): ("attention_window",),
    ("v0", "openhands_browser_output_masking"): ("attention_window",),
    ("v0", "openhands_recent_events"): ("keep_first", "max_events"),
    ("v0", "openhands_amortized_forgetting"): ("keep_first", "max_size"),
    ("v0", "openhands_llm_summarizing"): ("keep_first", "max_size", "max_event_length", *SUMMARY_KNOBS),
    ("v0", "openhands_conversation_window"): (),
    ("sdk", "openhands_llm_summarizing"): (
        "keep_first", "max_size", "max_tokens", "minimum_progress", "hard_context_reset_max_retries",
        "hard_context_reset_context_scaling", *SUMMARY_KNOBS,
    ),
    ("sdk", "openhands_hard_context_reset"): (
        "hard_context_reset_max_retries", "hard_context_reset_context_scaling", *SUMMARY_KNOBS,
    ),
}  # fmt: skip


class NotExpressible(ConfigError):
    """A setting OpenHands' condensers cannot be configured to (``frameworks.py`` reports it, exit 2)."""


def config(policy: str, knobs: dict, window: int | None) -> dict:
    """The driver's setting: ``framework`` (v0: openhands-ai's condensers; sdk: openhands-sdk's),
    ``steps`` (one pipeline step: the policy's name and knobs, as ``tests/openhands_oracle.py``'s
    SETTINGS hold them) and the provider ``window``."""
    if policy not in POLICIES:
        raise NotExpressible(f"{policy} is not an OpenHands policy ({', '.join(POLICIES)})")
    framework = "sdk" if policy == "openhands_hard_context_reset" else "v0"
    if policy == "openhands_llm_summarizing" and knobs.get("variant", "v0") == "sdk_v1":
        framework = "sdk"
    allowed = LIBRARY_KNOBS[(framework, policy)]
    given = {k: v for k, v in knobs.items() if k != "variant" and v is not None}
    extra = sorted(set(given) - set(allowed))
    if extra:
        raise NotExpressible(
            f"{policy} ({framework}): OpenHands' condenser takes no {', '.join(extra)}"
            f" (it takes {', '.join(allowed) or 'no knob'})"
        )
    step = {"name": policy, **given}
    if policy == "openhands_llm_summarizing" and framework == "sdk":
        step["variant"] = "sdk_v1"  # ctxsim's side needs it; the driver drops it
    return {"framework": framework, "steps": [step], "window": window}


def result(key: str, trace: Trace, real: dict, ctx: dict) -> TraceResult:
    """One trace's comparison: the calls either side made, those whose state dicts are equal, the
    tokens (view + residual) and the first difference (or a different end)."""
    feed = _feed()
    residuals = [c.residual_tokens for c in trace.calls]
    same, n, tokens_real, tokens_ctx = feed.compare(real, ctx, residuals)
    diff = None
    for k in range(n):
        a = real["calls"][k] if k < len(real["calls"]) else None
        b = ctx["calls"][k] if k < len(ctx["calls"]) else None
        if a != b:
            diff = f"call {k}: ctxsim {b}, real {a}"
            break
    if diff is None and real["finish"] != ctx["finish"]:
        diff = f"ctxsim ends {ctx['finish']}, real {real['finish']}, after {n} calls"
        same, n = max(n - 1, 0), max(n, 1)  # same calls, different end: the last call disagrees
    return TraceResult(key, n, same, tokens_ctx, tokens_real, diff)


class InOrder(dict):
    """Results by setting name, each name's in the settings' order: without ``--policy`` every policy
    runs at "defaults", and ``frameworks.py`` looks each setting up by name, once, in order; each
    lookup takes the next result of that name (the last one stays)."""

    def __init__(self, pairs: list[tuple[str, list[TraceResult]]]) -> None:
        super().__init__(pairs)
        self.queue: dict[str, list] = {}
        for name, rows in pairs:
            self.queue.setdefault(name, []).append(rows)

    def __getitem__(self, name: str) -> list[TraceResult]:
        q = self.queue[name]
        return q.pop(0) if len(q) > 1 else q[0]


def run(python: str, traces: list[Trace], settings: list[Setting]) -> dict[str, list[TraceResult]]:
    """Every setting on every trace, in one driver run; ctxsim's side from ``openhands_oracle.ctxsim_run``."""
    feed = _feed()
    keys = unique_ids(traces)
    by_key = dict(zip(keys, traces, strict=True))
    runs = [  # keyed by the setting's position: settings of different policies share names ("defaults")
        {"key": [n, key], "trace": key, "framework": s.config["framework"],
         "setting": {"steps": s.config["steps"], "window": s.config["window"]}}
        for n, s in enumerate(settings) for key in keys
    ]  # fmt: skip
    real = feed.run_oracle(python, runs, by_key)
    out = []
    for n, s in enumerate(settings):
        rows = []
        for key in keys:
            ctx = feed.oo.ctxsim_run(by_key[key], s.config["steps"], s.config["window"])
            rows.append(result(key, by_key[key], real[(n, key)], ctx))
        out.append((s.name, rows))
    return InOrder(out)


def goldens(python: str, only: list[str] | None, write: bool) -> int:
    """``frameworks.py openhands`` without ``--traces``: ``feed.py``'s goldens run (``--write``: rewrite)."""
    return _feed().goldens(python, list(only or []), write)
