"""The framework policies' differential oracles, ctxsim's side: the corpora and settings the goldens in
``tests/golden/frameworks/<framework>/`` hold, the traces as the oracles read them, and a policy's
per-call state vectors in the goldens' form.

``make oracle-adk`` / ``oracle-letta`` / ``oracle-inspect`` (``benchmarks/oracles/frameworks.py``) drive
the real library, each in its own virtual environment, over the same traces and write the goldens;
``tests/test_framework_oracles.py`` holds each policy to them exactly, with no framework installed.

Alignment (the same on both sides, so only decision rules can differ): every event weighs its ctxsim
size; the framework's token counters are replaced by sums of those sizes; a provider reports each
call's request as the sum of what was sent plus the call's recorded residual; the model answers with
ctxsim's mock-model output tokens; a scripted summarizer's output weighs clamp(ratio x the tokens of
what it was given, min, max); new text (a placeholder) weighs ``estimate_tokens`` of its bytes. The mock
model answers a missing fact with ``degrade`` (re-read calls are ctxsim's, not the framework's).

A call's state vector, one letter per event in its view: V sent verbatim, M sent as a placeholder or
edited, S not sent and covered by a summary, D dropped (not sent, nothing stands for it), N never sent
(no event of these frameworks has it); with the sizes of the summaries in the request and the
request's tokens.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from sim.core.types import ItemState, Trace
from sim.engine.dispatch import replay
from sim.engine.model import ReplayModel
from sim.importers import load_paths
from sim.policies.base import make_policy, policy_class, renamed_knobs
from sim.policies.inspect_handler import model_window
from sim.util.paths import traces_dir

REPO = Path(__file__).resolve().parent.parent
GOLDEN = REPO / "tests" / "golden" / "frameworks"
MINI_DIR = traces_dir() / "mini-swe-agent-gemini3pro" / "trajs"
TAU_FILE = traces_dir() / "tau-bench" / "historical_trajectories" / "gpt-4o-airline.json"

# the 6 mini-swe-agent runs the measurement used (django-16560: 145 calls)
MINI_IDS = (
    "django__django-16560",
    "django__django-14351",
    "django__django-11265",
    "django__django-11087",
    "sphinx-doc__sphinx-7985",
    "django__django-13512",
)
# tau-bench airline runs with many user turns: ADK's sliding window counts user-initiated invocations,
# and a single-task run has one
TAU_IDS = ("3-0", "0-0", "2-0", "5-0", "4-0", "7-0")
# the 10 tau-bench airline runs of issue 23's measurement (Strands, AutoGen, LangChain; 156 calls, one tool
# call per assistant turn as in every run here)
TAU10_IDS = ("43-2", "16-0", "46-2", "7-2", "21-0", "28-3", "25-2", "4-2", "9-0", "2-1")
SUMMARY_RULE = {"ratio": 0.1, "min": 256, "max": 2048}


# ------------------------------------------------------------------ ctxsim knobs -> library config
# The policies each oracle holds to its library (``anthropic_clear_tool_uses`` against Inspect's
# CompactionEdit, on the calls Inspect made: Anthropic's edit has no "insufficient" failure).
POLICIES: dict[str, tuple[str, ...]] = {
    "adk": ("adk_events_compaction",),
    "letta": ("letta_partial_evict",),
    "autogen": ("autogen_buffered", "autogen_head_and_tail", "autogen_token_limited"),
    "langchain": ("langchain_clear_tool_uses", "langchain_summarization"),
    "strands": ("strands_sliding_window", "strands_summarizing"),
    "inspect": ("inspect_compaction_edit", "inspect_compaction_trim", "inspect_compaction_summary",
                "inspect_compaction_auto", "anthropic_clear_tool_uses"),
}  # fmt: skip
PREFIX_ONLY = {"anthropic_clear_tool_uses"}  # compared on the calls the framework made
# knobs of ctxsim's scripted summarizer (not the library's): they set the oracle's summary rule
MOCK_RULE = {"summary_ratio": "ratio", "summary_min_tokens": "min", "summary_max_tokens": "max"}
STRANDS_RULE = {"summary_size_ratio": "ratio", "summary_min_tokens": "min", "summary_max_tokens": "max"}
WINDOWED = {"strands"}  # oracles that model the provider's context window (a request over it is refused)
_ADK = ("compaction_interval", "overlap_size", "token_threshold", "event_retention_size")
_AUTOGEN = {
    "autogen_buffered": ("Buffered", ("buffer_size",)),
    "autogen_head_and_tail": ("HeadAndTail", ("head_size", "tail_size")),
    "autogen_token_limited": ("TokenLimited", ("token_limit",)),
}
_CLEAR_EDIT = ("trigger", "clear_at_least", "keep", "clear_tool_inputs", "exclude_tools", "placeholder")
_INSPECT = {
    "inspect_compaction_edit": "CompactionEdit",
    "inspect_compaction_trim": "CompactionTrim",
    "inspect_compaction_summary": "CompactionSummary",
    "inspect_compaction_auto": "CompactionAuto",
}


class NotComparable(ValueError):
    """A setting the library cannot express (the oracle has nothing to hold ctxsim to)."""


def _given(policy: str, knobs: dict) -> dict:
    """The knobs as given, under the library's names (deprecated names translated)."""
    return renamed_knobs(policy_class(policy), knobs)


def summary_rule(policy: str, knobs: dict) -> dict:
    """The scripted summarizer's rule at these knobs: the oracle's summarizer answers by it."""
    p = make_policy(policy, **knobs).params()
    names = STRANDS_RULE if policy == "strands_summarizing" else MOCK_RULE
    rule = dict(SUMMARY_RULE)
    rule.update({key: p[k] for k, key in names.items() if k in p})
    return rule


def framework_config(framework: str, policy: str, knobs: dict, window: int | None = None) -> dict:
    """The library's configuration for ctxsim's ``policy`` at ``knobs`` (the one mapping every oracle
    run uses: the goldens' settings and ``frameworks.py --setting``). ``window``: the provider's context
    window, only where the oracle models it. Raises NotComparable for what the library cannot express."""
    if policy not in POLICIES.get(framework, ()):
        raise NotComparable(
            f"{framework} holds {', '.join(POLICIES.get(framework, ())) or 'nothing'}, not {policy}"
        )
    if window is not None and framework not in WINDOWED:
        raise NotComparable(
            f"the {framework} oracle has no provider window (window= is for strands, openhands and "
            "effect_agent)"
        )
    p = make_policy(policy, **knobs).params()
    given = _given(policy, knobs)
    own = {k: v for k, v in given.items() if k not in MOCK_RULE}
    if framework == "adk":
        return {k: p[k] for k in _ADK if p[k] is not None}
    if framework == "letta":
        return {k: p[k] for k in ("context_window", "mode", "sliding_window_percentage")}
    if framework == "autogen":
        context, args = _AUTOGEN[policy]
        config = {"context": context} | {k: p[k] for k in args}
        if p.get("token_count", "framework") != "framework":
            config["token_count"] = p["token_count"]
        return config
    if policy == "langchain_clear_tool_uses":  # ClearToolUsesEdit's arguments, then the middleware's
        edit = {k: list(p[k]) if k == "exclude_tools" else p[k] for k in _CLEAR_EDIT}
        return {"middleware": "ClearToolUses", "edit": edit, "token_count_method": p["token_count_method"]}
    if policy == "langchain_summarization":
        if "fraction" in json.dumps([p["trigger"], p["keep"]]):
            # LangChain needs the model's profile for a fraction; the export carries no context window
            raise NotComparable("a fraction needs the model's max_input_tokens: the oracle's model has none")
        config = {"middleware": "Summarization", **own}
        config["trigger"] = ["tokens", p["trigger"]] if isinstance(p["trigger"], int) else own["trigger"]
        if isinstance(own.get("keep"), int):
            config["keep"] = ["messages", own["keep"]]
        return config
    if policy == "strands_sliding_window":
        return {"manager": "SlidingWindow", "manager_args": dict(given), "window": window}
    if policy == "strands_summarizing":
        args = {k: v for k, v in given.items() if k not in STRANDS_RULE and k != "context_window"}
        limit = p["context_window"]
        return {"manager": "Summarizing", "manager_args": args, "window": limit if window is None else window,
                "context_window_limit": limit}  # fmt: skip
    if policy == "anthropic_clear_tool_uses":
        if p["clear_at_least"]:
            raise NotComparable("Inspect's CompactionEdit has no clear_at_least")
        if p["clear_tool_inputs"]:  # ctxsim: the whole assistant a placeholder; Inspect: the pair removed
            raise NotComparable("clear_tool_inputs is not CompactionEdit's keep_tool_inputs=False")
        config = {"strategy": "CompactionEdit", "threshold": p["trigger_tokens"], "keep_tool_uses": p["keep"]}
        if p["exclude_tools"]:
            config["exclude_tools"] = list(p["exclude_tools"])
        return config
    return {"strategy": _INSPECT[policy], **own}


def _setting(framework: str, corpus: str, policy: str, window: int | None = None, **knobs) -> tuple:
    return corpus, policy, dict(knobs), framework_config(framework, policy, knobs, window)


def _autogen(corpus: str, context: str, **knobs) -> tuple[str, str, dict, dict]:
    policy = {"Buffered": "autogen_buffered", "HeadAndTail": "autogen_head_and_tail"}.get(
        context, "autogen_token_limited"
    )
    return _setting("autogen", corpus, policy, **knobs)


def _clear(corpus: str, trigger: int, **knobs) -> tuple[str, str, dict, dict]:
    return _setting("langchain", corpus, "langchain_clear_tool_uses", trigger=trigger, **knobs)


def _summary(corpus: str, trigger, **knobs) -> tuple[str, str, dict, dict]:
    """ctxsim takes plain integers (tokens / messages), LangChain only its pairs."""
    return _setting("langchain", corpus, "langchain_summarization", trigger=trigger, **knobs)


def _window(corpus: str, window: int | None = None, **knobs) -> tuple[str, str, dict, dict]:
    return _setting("strands", corpus, "strands_sliding_window", window, **knobs)


PROACTIVE = {"compression_threshold": 0.7}


def _summarizing(corpus: str, window: int, **knobs) -> tuple[str, str, dict, dict]:
    """Strands summarizing with the model's context_window_limit and the provider's window alike."""
    return _setting("strands", corpus, "strands_summarizing", context_window=window, **knobs)


def _letta(
    window: int, percentage: float = 0.3, mode: str = "sliding_window", corpus: str = "mini"
) -> tuple[str, str, dict, dict]:
    knobs = {"context_window": window}
    knobs |= {"sliding_window_percentage": percentage} if percentage != 0.3 else {}
    knobs |= {"mode": mode} if mode != "sliding_window" else {}
    return _setting("letta", corpus, "letta_partial_evict", **knobs)


def _adk(corpus: str, **knobs) -> tuple[str, str, dict, dict]:
    return _setting("adk", corpus, "adk_events_compaction", **knobs)


def _inspect(policy: str, corpus: str = "mini", **knobs) -> tuple[str, str, dict, dict]:
    return _setting("inspect", corpus, f"inspect_compaction_{policy}", **knobs)


# framework -> setting -> (corpus, ctxsim policy, ctxsim knobs, the framework's own configuration)
SETTINGS: dict[str, dict[str, tuple[str, str, dict, dict]]] = {
    "adk": {
        "token-15000-6": _adk("mini", compaction_interval=None, overlap_size=None, token_threshold=15000,
                              event_retention_size=6),
        "token-30000-10": _adk("mini", compaction_interval=None, overlap_size=None, token_threshold=30000,
                               event_retention_size=10),
        "token-20000-0": _adk("mini", compaction_interval=None, overlap_size=None, token_threshold=20000,
                              event_retention_size=0),
        "window-3-1-mini": _adk("mini"),
        "window-3-1": _adk("tau"),
        "window-2-0": _adk("tau", compaction_interval=2, overlap_size=0),
        "window-2-1-token-2500-4": _adk("tau", compaction_interval=2, overlap_size=1, token_threshold=2500,
                                        event_retention_size=4),
        # the shared families (conformance runs): OpenHands V0 records an empty user message ADK never
        # sends (D), or summarizes with its invocation (S); its task, empty message and runtime info are
        # three user-initiated invocations
        "window-3-1-ohv0": _adk("ohv0"),
        "window-1-0-ohv0": _adk("ohv0", compaction_interval=1, overlap_size=0),
        "token-4000-3-ohv0": _adk("ohv0", compaction_interval=None, overlap_size=None, token_threshold=4000,
                                  event_retention_size=3),
        "token-3000-0-swe": _adk("swe", compaction_interval=None, overlap_size=None, token_threshold=3000,
                                 event_retention_size=0),
        "token-1500-2-tau10": _adk("tau10", compaction_interval=None, overlap_size=None, token_threshold=1500,
                                   event_retention_size=2),
        "window-1-1-token-2000-8-tau10": _adk("tau10", compaction_interval=1, overlap_size=1,
                                              token_threshold=2000, event_retention_size=8),
        # Claude Code sessions: user messages between the agent's calls, each an invocation
        "window-1-0-claude": _adk("claude", compaction_interval=1, overlap_size=0),
        "token-60-1-claude": _adk("claude", compaction_interval=None, overlap_size=None, token_threshold=60,
                                  event_retention_size=1),
    },
    "letta": {
        "sliding-16000": _letta(16000),
        "sliding-24000": _letta(24000),
        "sliding-16000-0.5": _letta(16000, 0.5),
        # a window kept above the trigger (0.95 > 0.9): the sliding window's summary is discarded for
        # summarize_all's
        "sliding-20000-0.05": _letta(20000, 0.05),
        "all-24000": _letta(24000, mode="all"),
        # the shared families. OpenHands' tool schemas (the tools events) are sent beside the messages:
        # counted in the request and the post-compaction check, not in the sliding window's count nor the
        # system-prompt check. A system prompt at or above the window ends the run context-overflow at
        # the first compaction (1 of OpenHands V0's 3 SWE runs at 1,700, whose requests stay over the
        # trigger: compacted at every step); the SDK run's prompt (2,636) with its tools (1,111) is over
        # 3,000, the prompt alone is not: the run goes on
        "sliding-1700-ohv0": _letta(1700, corpus="ohv0"),
        "sliding-6000-ohv0": _letta(6000, corpus="ohv0"),
        "sliding-3000-ohsdk": _letta(3000, corpus="ohsdk"),
        "sliding-3000-swe": _letta(3000, corpus="swe"),
        "sliding-2500-0.6-tau10": _letta(2500, 0.6, corpus="tau10"),
        "all-2000-tau10": _letta(2000, mode="all", corpus="tau10"),
        # Claude Code sessions (user messages mid-run: after the post-step compaction) and Inspect's
        # browser run (no system message, 1,083 tokens of tool schemas)
        "sliding-80-claude": _letta(80, corpus="claude"),
        "sliding-2000-inspect": _letta(2000, corpus="inspect"),
    },
    "autogen": {
        # buffer 1 in a tool loop: the last message is a tool result, which AutoGen drops: nothing is sent
        "buffered-1": _autogen("mini", "Buffered", buffer_size=1),
        "buffered-5": _autogen("mini", "Buffered", buffer_size=5),
        "buffered-20": _autogen("mini", "Buffered", buffer_size=20),
        "buffered-5-tau": _autogen("tau10", "Buffered", buffer_size=5),
        "head-tail-1-5": _autogen("mini", "HeadAndTail", head_size=1, tail_size=5),
        "head-tail-2-10": _autogen("mini", "HeadAndTail", head_size=2, tail_size=10),
        "head-tail-3-8-tau": _autogen("tau10", "HeadAndTail", head_size=3, tail_size=8),
        "token-8000": _autogen("mini", "TokenLimited", token_limit=8000),
        "token-16000": _autogen("mini", "TokenLimited", token_limit=16000),
        "token-8000-provider": _autogen("mini", "TokenLimited", token_limit=8000, token_count="provider"),
        "token-2500-tau": _autogen("tau10", "TokenLimited", token_limit=2500),
        "token-4000-provider-tau": _autogen("tau10", "TokenLimited", token_limit=4000,
                                            token_count="provider"),
        # the shared families: system and tool-spec events, user messages mid-run, no user before a call
        "buffered-7-ohv0": _autogen("ohv0", "Buffered", buffer_size=7),
        "head-tail-2-6-ohv0": _autogen("ohv0", "HeadAndTail", head_size=2, tail_size=6),
        "token-3000-ohv0": _autogen("ohv0", "TokenLimited", token_limit=3000),
        "token-6000-provider-ohv0": _autogen("ohv0", "TokenLimited", token_limit=6000,
                                             token_count="provider"),
        "buffered-2-claude": _autogen("claude", "Buffered", buffer_size=2),
    },
    "langchain": {
        "clear-default": _clear("mini", 100000),
        "clear-8000": _clear("mini", 8000),
        "clear-8000-model": _clear("mini", 8000, token_count_method="model"),
        "clear-8000-2000": _clear("mini", 8000, clear_at_least=2000),
        "clear-2500-tau": _clear("tau10", 2500),
        "clear-2500-300-model-tau": _clear("tau10", 2500, clear_at_least=300, token_count_method="model"),
        # every ClearToolUsesEdit argument: tool names and call arguments are ctxsim's readings (a tool is
        # named by its issuing turn's text; a cleared input weighs the whole turn as a placeholder)
        # the model's count falls back under the trigger (django-16560 call 30: 10,571 -> 10,484): the
        # copy is sent whole again
        "clear-10500-2-model": _clear("mini", 10500, keep=2, token_count_method="model"),
        "clear-8000-1-inputs": _clear("mini", 8000, keep=1, clear_tool_inputs=True, clear_at_least=3000),
        "clear-2000-0-exclude-tau": _clear("tau10", 2000, keep=0, exclude_tools=["get_reservation_details"],
                                           placeholder="[tool output cleared]"),
        # several user turns in a row, a run that ends on a tool result, a call before any user turn
        "clear-4000-2-model-ohv0": _clear("ohv0", 4000, keep=2, token_count_method="model"),
        "clear-2000-0-inputs-ohv0": _clear("ohv0", 2000, keep=0, clear_tool_inputs=True, clear_at_least=500),
        "clear-40-0-claude": _clear("claude", 40, keep=0, clear_tool_inputs=True),
        "clear-1000-0-ohsdk": _clear("ohsdk", 1000, keep=0, token_count_method="model"),
        "summary-8000-defaults": _summary("mini", 8000),
        "summary-8000-keep-10": _summary("mini", 8000, keep=10),
        "summary-16000-keep-10": _summary("mini", ["tokens", 16000], keep=["messages", 10]),
        "summary-8000-keep-10-provider": _summary("mini", 8000, keep=10, token_count="provider"),
        "summary-12000-keep-3000-tokens": _summary("mini", 12000, keep=["tokens", 3000]),
        "summary-2500-keep-10-tau": _summary("tau10", 2500, keep=10),
        "summary-4000-keep-6-provider-tau": _summary("tau10", 4000, keep=6, token_count="provider"),
        "summary-30-messages-tau": _summary("tau10", ["messages", 30], keep=8,
                                            trim_tokens_to_summarize=1000),
        # trigger as LangChain's clauses: AND (a dict), OR (a list of pairs and dicts)
        "summary-and-10-2000-tau": _summary("tau10", {"messages": 10, "tokens": 2000}, keep=["tokens", 500]),
        "summary-or-50-12000-mini": _summary("mini", [["messages", 50], {"tokens": 12000}], keep=10),
        "summary-6000-keep-8-provider-ohv0": _summary("ohv0", 6000, keep=8, token_count="provider"),
        "summary-60-keep-2-claude": _summary("claude", 60, keep=2),
    },
    "strands": {
        "window-defaults": _window("mini"),
        "window-10-per-turn": _window("mini", window_size=10, per_turn=True),
        "window-20-per-turn-3": _window("mini", window_size=20, per_turn=3),
        "window-40-overflow-16000": _window("mini", 16000),
        "window-40-overflow-16000-no-truncate": _window("mini", 16000, should_truncate_results=False),
        "window-defaults-tau": _window("tau10"),
        "window-10-tau": _window("tau10", window_size=10),
        "window-10-per-turn-tau": _window("tau10", window_size=10, per_turn=True),
        "window-40-overflow-3000-tau": _window("tau10", 3000),
        "summarizing-defaults-16000": _summarizing("mini", 16000),
        "summarizing-proactive-16000": _summarizing("mini", 16000, proactive_compression=PROACTIVE),
        "summarizing-proactive-ratio-0.9-16000": _summarizing(
            "mini", 16000, summary_ratio=0.9, proactive_compression=PROACTIVE
        ),
        "summarizing-defaults-10000": _summarizing("mini", 10000),
        "summarizing-defaults-3000-tau": _summarizing("tau10", 3000),
        "summarizing-proactive-3000-tau": _summarizing("tau10", 3000, proactive_compression=PROACTIVE),
        # the shared families: user messages grouped into one invocation (OpenHands' first three),
        # a user message after a tool result (the invocation ends there), no user before the first call
        "window-6-ohv0": _window("ohv0", window_size=6),
        "window-10-per-turn-ohv0": _window("ohv0", window_size=10, per_turn=True),
        "window-40-overflow-8000-ohv0": _window("ohv0", 8000),
        "summarizing-defaults-16000-ohv0": _summarizing("ohv0", 16000),
        "summarizing-proactive-16000-ohv0": _summarizing("ohv0", 16000, proactive_compression=PROACTIVE),
        "window-2-claude": _window("claude", window_size=2),
        "window-2-ohsdk": _window("ohsdk", window_size=2),
    },
    "inspect": {
        "edit-15000": _inspect("edit", threshold=15000),
        "edit-30000": _inspect("edit", threshold=30000),
        "edit-20000-1-noinputs": _inspect("edit", threshold=20000, keep_tool_uses=1, keep_tool_inputs=False),
        "trim-15000": _inspect("trim", threshold=15000),
        "trim-30000-0.5": _inspect("trim", threshold=30000, preserve=0.5),
        "summary-15000": _inspect("summary", threshold=15000),
        "summary-50000": _inspect("summary", threshold=50000),
        "auto-15000": _inspect("auto", threshold=15000),
        "auto-30000": _inspect("auto", threshold=30000),
        # keep_tool_uses above the uses there are: nothing cleared, "Compaction insufficient"
        "edit-14886-8": _inspect("edit", threshold=14886, keep_tool_uses=8),
        "edit-5144-7-noinputs-swe": _inspect("edit", "swe", threshold=5144, keep_tool_uses=7,
                                             keep_tool_inputs=False),
        "edit-8000-2-ohv0": _inspect("edit", "ohv0", threshold=8000, keep_tool_uses=2),
        # exclude_tools by name: tau-bench's assistant texts start with the tool's name
        "edit-3000-1-exclude-tau": _inspect("edit", "tau10", threshold=3000, keep_tool_uses=1,
                                            exclude_tools=["get_reservation_details"]),
        "edit-3500-2-noinputs-exclude-tau": _inspect("edit", "tau10", threshold=3500, keep_tool_uses=2,
                                                     keep_tool_inputs=False,
                                                     exclude_tools=["think", "get_user_details"]),
        "trim-3000-0.3-tau": _inspect("trim", "tau10", threshold=3000, preserve=0.3),
        "trim-6000-0.6-ohv0": _inspect("trim", "ohv0", threshold=6000, preserve=0.6),
        "summary-3000-tau": _inspect("summary", "tau10", threshold=3000),
        # the scripted summarizer's rule from the policy's summary_* knobs (the golden's "summary")
        "summary-3000-tau-rule": _inspect("summary", "tau10", threshold=3000, summary_ratio=0.3,
                                          summary_min_tokens=64, summary_max_tokens=600),
        "summary-5000-swe": _inspect("summary", "swe", threshold=5000),
        "auto-8000-ohv0": _inspect("auto", "ohv0", threshold=8000),
        # a fraction of the model's window (export's context_window, registered with set_model_info)
        "edit-0.015-mini": _inspect("edit", threshold=0.015, keep_tool_uses=2),
        "summary-0.05-swe": _inspect("summary", "swe", threshold=0.05),
    },
}  # fmt: skip

# Policies held to another policy's goldens: (framework, setting) -> (policy, knobs). Anthropic's
# clear_tool_uses is Inspect's CompactionEdit without the failure: compared on the calls Inspect made.
ALSO: dict[tuple[str, str], tuple[str, dict]] = {
    ("inspect", "edit-15000"): ("anthropic_clear_tool_uses", {"trigger_tokens": 15000, "keep": 3}),
    ("inspect", "edit-30000"): ("anthropic_clear_tool_uses", {"trigger_tokens": 30000, "keep": 3}),
    ("inspect", "edit-8000-2-ohv0"): ("anthropic_clear_tool_uses", {"trigger_tokens": 8000, "keep": 2}),
}

CODE = {
    ItemState.VERBATIM: "V",
    ItemState.BOUNDED: "V",
    ItemState.MASKED: "M",
    ItemState.SUMMARIZED: "S",
    ItemState.SPILLED: "S",
    ItemState.DROPPED: "D",
}


# ------------------------------------------------------------------------------------------- corpora
# the other shared trace families, whole (each is small): the conformance runs' corpora
FAMILIES = {
    "swe": ("swe-agent",),
    "ohv0": ("openhands-v0",),
    "ohsdk": ("openhands-sdk-v1",),
    "inspect": ("inspect-ai",),
    "claude": ("claude-code-fixtures",),
}


def family(name: str) -> list[Trace]:
    """Every trace ctxsim imports from a shared family's folders, in load order (import notices muted:
    the families hold files no importer takes, on purpose)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return list(load_paths([str(traces_dir() / p) for p in FAMILIES[name]]))


def corpus(name: str) -> list[Trace]:
    if name in FAMILIES:
        return family(name)
    if name == "mini":
        by_id = {t.trace_id: t for t in load_paths([str(MINI_DIR)])}
        return [by_id[i] for i in MINI_IDS]
    if name in ("tau", "tau10"):
        by_id = {t.trace_id: t for t in load_paths([str(TAU_FILE)])}
        return [by_id[i] for i in (TAU_IDS if name == "tau" else TAU10_IDS)]
    raise KeyError(name)


def golden_path(framework: str, setting: str) -> Path:
    return GOLDEN / framework / f"{setting}.json"


def export(trace: Trace, full_text: bool = False) -> dict:
    """The trace as an oracle reads it: what the framework's objects need, ctxsim's sizes, and the mock
    model's outputs. Content is cut to its first 64 characters (only its presence matters there) unless
    ``full_text`` (LangChain's trim keeps a message's last lines)."""
    model = ReplayModel(trace, on_missing="degrade")
    return {
        "trace_id": trace.trace_id,
        "bytes_per_token": trace.bytes_per_token,
        "context_window": trace.context_window,  # recorded (AutoGen's token_limit null: no limit without)
        "model_window": model_window(trace),  # resolved as Inspect's fractional thresholds read it
        "events": [
            {
                "kind": e.kind,
                "tokens": e.tokens,
                "text": (e.content or "") if full_text else (e.content or "")[:64],
                "tool_call_ids": list(e.tool_call_ids),
                "tool_call_id": e.tool_call_id,
            }
            for e in trace.events
        ],
        "calls": [
            {"event_index": c.event_index, "view_end": c.view_end, "residual": c.residual_tokens}
            for c in trace.calls
        ],
        "outputs": model.respond_all().tolist(),
    }


# ------------------------------------------------------------------------------ state vectors
def rle(s: str) -> str:
    """Run-length form of a state string: ``VVVSS`` -> ``3V2S``."""
    return "".join(f"{len(m.group(0))}{m.group(0)[0]}" for m in re.finditer(r"(.)\1*", s))


def vectors(trace: Trace, policy: str, knobs: dict, window: int | None = None) -> dict:
    """A policy's per-call vectors in the goldens' form: finish reason and, per call, [run-length
    states, summary sizes in the request, request tokens]. ``window``: the provider's context window
    (a request above it is refused: the policy's overflow recovery runs)."""
    residual = trace.arrays.residual.tolist()
    calls = []

    def observe(k, view):
        st = "".join(CODE[ItemState(view.state[i])] for i in range(view.n))
        inserted = [
            view.tokens[i] for i in range(view.n) if view.state[i] == ItemState.SUMMARIZED and view.tokens[i]
        ]
        calls.append([rle(st), inserted, view.total + residual[k]])

    model = ReplayModel(trace, on_missing="degrade")
    record = replay(trace, make_policy(policy, **knobs), model, observer=observe, window=window, pricing=None)
    return {"finish": record.finish_reason, "calls": calls}


def load(path: Path) -> dict:
    return json.loads(path.read_text())
