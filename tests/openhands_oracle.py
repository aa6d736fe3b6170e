"""The OpenHands differential oracle, ctxsim's side: the corpora and settings the goldens in
``tests/golden/frameworks/openhands/`` hold, and the ``openhands_*`` policies' per-call state vectors in the
goldens' form.

``make oracle-openhands`` (``benchmarks/oracles/openhands/feed.py``) replays the same traces through
OpenHands' own condensers (openhands-ai 0.62.0, openhands-sdk 1.58.2, in the oracle's own virtual
environment) and writes the goldens; ``tests/test_openhands_oracle.py`` holds the policies to them
exactly, without OpenHands installed. Per call and original event the state is V (sent; extra sends are
``copies``), P (replaced by a placeholder), S (covered by a summary), D (forgotten) or N (in OpenHands'
view but not sent: an action whose observation is masked or forgotten, an observation whose action is
forgotten, the recall action); ``inserted`` lists the placeholders and summaries sent, with their tokens.
Both sides weigh every event at ctxsim's size, so only the decision rules can differ.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from sim.core.records import AGENT
from sim.core.types import ItemState, Trace
from sim.engine.dispatch import replay
from sim.engine.model import ReplayModel
from sim.importers import load_paths
from sim.policies.base import make_policy
from sim.policies.openhands_memory import events_of
from sim.util.paths import traces_dir

REPO = Path(__file__).resolve().parent.parent
GOLDEN = REPO / "tests" / "golden" / "frameworks" / "openhands"
OH_OUTPUT = traces_dir() / "openhands-v0" / "multi_swe_bench_llama4maverick" / "output.jsonl"
MINI = traces_dir() / "mini-swe-agent-gemini3pro" / "trajs"
MINI_IDS = (
    "django__django-16560",
    "django__django-14351",
    "django__django-11265",
    "django__django-11087",
    "sphinx-doc__sphinx-7985",
    "django__django-13512",
)


def _step(name: str, **knobs) -> dict:
    return {"name": f"openhands_{name}", **knobs}


def _v0(name: str, window: int | None = None, corpus: str = "shared", **knobs) -> tuple:
    return ("v0", [_step(name, **knobs)], window, corpus)


def _sdk(name: str, window: int | None = None, corpus: str = "shared", **knobs) -> tuple:
    return ("sdk", [_step(name, **knobs)], window, corpus)


def _server(max_size: int, window: int | None) -> tuple:
    steps = [_step("conversation_window"), _step("browser_output_masking", attention_window=1)]
    return ("v0", [*steps, _step("llm_summarizing", keep_first=4, max_size=max_size)], window, "shared")


# setting name -> (framework, pipeline steps, provider window, corpus). The knobs are the policies' (the
# constructors' argument names); a one-step setting is that policy, a longer one a ``pipeline``
# (``openhands_server_default`` is the first of those).
SDK = {"variant": "sdk_v1"}
SETTINGS: dict[str, tuple[str, list[dict], int | None, str]] = {
    "observation_masking-3": _v0("observation_masking", attention_window=3),
    "observation_masking-5": _v0("observation_masking", attention_window=5),
    "browser_output_masking-1": _v0("browser_output_masking", corpus="browser", attention_window=1),
    "browser_output_masking-2": _v0("browser_output_masking", corpus="browser", attention_window=2),
    "recent_events-1-10": _v0("recent_events", keep_first=1, max_events=10),
    "recent_events-2-20": _v0("recent_events", keep_first=2, max_events=20),
    "amortized_forgetting-20-1": _v0("amortized_forgetting", max_size=20, keep_first=1),
    "amortized_forgetting-40-1": _v0("amortized_forgetting", max_size=40, keep_first=1),
    "amortized_forgetting-20-2": _v0("amortized_forgetting", max_size=20, keep_first=2),
    "amortized_forgetting-100-0": _v0("amortized_forgetting", max_size=100, keep_first=0),
    "amortized_forgetting-40-1-w12000": _v0("amortized_forgetting", 12000, max_size=40, keep_first=1),
    "llm_summarizing-20-1": _v0("llm_summarizing", max_size=20, keep_first=1),
    "llm_summarizing-40-1": _v0("llm_summarizing", max_size=40, keep_first=1),
    "llm_summarizing-20-4": _v0("llm_summarizing", max_size=20, keep_first=4),
    "llm_summarizing-40-1-w12000": _v0("llm_summarizing", 12000, max_size=40, keep_first=1),
    "conversation_window-w12000": _v0("conversation_window", 12000),
    "conversation_window-w20000": _v0("conversation_window", 20000),
    "server_default": _server(120, None),
    "server_default-40-w12000": _server(40, 12000),
    "sdk-20-2": _sdk("llm_summarizing", **SDK, max_size=20, keep_first=2),
    "sdk-40-2": _sdk("llm_summarizing", **SDK, max_size=40, keep_first=2),
    "sdk-20-4": _sdk("llm_summarizing", **SDK, max_size=20, keep_first=4),
    "sdk-240-2-t12000": _sdk("llm_summarizing", **SDK, max_size=240, keep_first=2, max_tokens=12000),
    "sdk-240-2-t30000": _sdk("llm_summarizing", **SDK, max_size=240, keep_first=2, max_tokens=30000),
    "sdk-80-4-w20000": _sdk("llm_summarizing", 20000, **SDK, max_size=80, keep_first=4),
    "hard_context_reset-w12000": _sdk("hard_context_reset", 12000),
    "hard_context_reset-w20000": _sdk("hard_context_reset", 20000),
    # the conformance runs' findings, on the other shared families (tests/framework_oracle.py FAMILIES):
    # SWE-agent's and tau-bench's reused tool call ids, tau-bench's user turns between tool steps,
    # Inspect's tools without a system prompt, Claude Code's traces without a system prompt or a user turn
    "observation_masking-3-swe": _v0("observation_masking", corpus="swe", attention_window=3),
    "observation_masking-2-claude": _v0("observation_masking", corpus="claude", attention_window=2),
    "recent_events-1-10-tau10": _v0("recent_events", corpus="tau10", keep_first=1, max_events=10),
    "amortized_forgetting-20-1-tau10": _v0("amortized_forgetting", corpus="tau10", max_size=20, keep_first=1),
    "sdk-240-2-swe": _sdk("llm_summarizing", corpus="swe", **SDK),
    "sdk-40-4-w4000-tau10": _sdk("llm_summarizing", 4000, "tau10", **SDK, max_size=40, keep_first=4),
    "sdk-83-1-w3719-inspect": _sdk("llm_summarizing", 3719, "inspect", **SDK, max_size=83, keep_first=1),
    "hard_context_reset-w4000-swe": _sdk("hard_context_reset", 4000, "swe"),
    # keep_first 0: the summary covers the system prompt, which ConversationMemory re-creates
    "llm_summarizing-12-0-swe": _v0("llm_summarizing", corpus="swe", max_size=12, keep_first=0),
    # a hard reset puts the summary behind the system prompt, keep_first 4 keeps it beside the next one
    "sdk-115-4-w2101-swe": _sdk("llm_summarizing", 2101, "swe", **SDK, max_size=115, keep_first=4),
}


def shared_traces() -> list[Trace]:
    """The 3 OpenHands V0 runs and 6 mini-swe-agent runs the goldens hold, in that order."""
    oh = list(load_paths([OH_OUTPUT]))
    mini = {t.trace_id: t for t in load_paths([MINI])}
    return oh + [mini[i] for i in MINI_IDS]


def browserized(t: Trace) -> Trace:
    """``t`` with every third tool result made a browser page (OpenHands' ``BrowserOutputObservation``,
    found by its type; page address https://example.org/pN); text and sizes unchanged."""
    n, events = 0, []
    for e in t.events:
        if e.kind == "tool_result":
            n += 1
            if n % 3 == 0:
                e = dataclasses.replace(e, source_type="observation:browse", url=f"https://example.org/p{n}")
        events.append(e)
    return dataclasses.replace(t, trace_id=f"{t.trace_id}+browser", events=tuple(events))


def corpus(name: str, shared: list[Trace]) -> list[Trace]:
    """``shared``, ``browser`` (the shared runs browserized) or a corpus of ``framework_oracle``'s (a
    shared family, ``tau10``)."""
    if name == "shared":
        return shared
    if name == "browser":
        return [browserized(t) for t in shared]
    if name not in _FAMILIES:  # loaded once per process (the goldens' test asks per setting)
        import framework_oracle

        _FAMILIES[name] = framework_oracle.corpus(name)
    return _FAMILIES[name]


_FAMILIES: dict[str, list[Trace]] = {}


def policy_of(steps: list[dict]):
    if len(steps) == 1:
        knobs = {k: v for k, v in steps[0].items() if k != "name"}
        return make_policy(steps[0]["name"], **knobs)
    return make_policy("pipeline", steps=tuple(steps))


def rle(s: str) -> str:
    """Run-length code of a state string: ``VVVVDN`` -> ``V4D1N1``."""
    out, i = [], 0
    while i < len(s):
        j = i
        while j < len(s) and s[j] == s[i]:
            j += 1
        out.append(f"{s[i]}{j - i}")
        i = j
    return "".join(out)


def grouped(inserted: list) -> list[list]:
    """Inserted items as ``[kind, tokens, how many]``, sorted."""
    counts: dict[tuple[str, int], int] = {}
    for kind, tokens in inserted:
        counts[(kind, tokens)] = counts.get((kind, tokens), 0) + 1
    return [[k, t, n] for (k, t), n in sorted(counts.items())]


def dumps(doc: dict) -> str:
    """A golden as JSON text: one line per call, so a diff shows the calls that changed."""
    head = {k: v for k, v in doc.items() if k != "traces"}
    lines = ["{", f'"meta": {json.dumps(head, sort_keys=True)},', '"traces": {']
    for n, (tid, run) in enumerate(sorted(doc["traces"].items())):
        rest = {k: v for k, v in run.items() if k != "calls"}
        lines.append(f'{json.dumps(tid)}: {{{json.dumps(rest, sort_keys=True)[1:-1]}, "calls": [')
        calls = [json.dumps(c, sort_keys=True, separators=(",", ":")) for c in run["calls"]]
        lines.append(",\n".join(calls))
        lines.append("]}" + ("," if n + 1 < len(doc["traces"]) else ""))
    lines += ["}", "}"]
    return "\n".join(lines) + "\n"


def ctxsim_run(t: Trace, steps: list[dict], window: int | None = None) -> dict:
    """The policy (pipeline ``steps``, provider ``window``)'s per-call states in the goldens' form (see
    the module docstring); the goldens pass a setting's ``SETTINGS[name][1:3]``."""
    policy = policy_of(steps)
    original = [e.tokens for e in t.events]
    mute = events_of(t).mute
    calls: list[dict] = []

    def observe(k: int, view) -> None:
        codes, inserted, copies = [], [], []
        for i in range(view.n):
            st, tok = view.state[i], view.tokens[i]
            if mute[i] and st == ItemState.VERBATIM:
                codes.append("N")  # in the view, never sent (the recall action)
            elif st in (ItemState.VERBATIM, ItemState.BOUNDED):
                codes.append("V")
                if original[i] and tok > original[i]:
                    copies.append([i, tok // original[i] - 1])
            elif st == ItemState.MASKED:
                codes.append("P" if tok > 0 else "N")
                if tok > 0:
                    inserted.append(["placeholder", tok])
            elif st == ItemState.SUMMARIZED:
                codes.append("S")
                if tok > 0:
                    inserted.append(["summary", tok])
            else:
                codes.append("D")
        calls.append(
            {
                "states": rle("".join(codes)),
                "inserted": grouped(inserted),
                "copies": copies,
                "view": view.total,
            }
        )

    rec = replay(
        t, policy, ReplayModel(t, on_missing="degrade"), observer=observe, window=window, pricing=None
    )
    agent = rec.calls["kind"] == AGENT
    return {
        "calls": calls,
        "finish": rec.finish_reason,
        "summaries": int((~agent).sum()),
        "input": [int(x) for x in rec.calls["input_tokens"][agent]],
    }


def golden_path(setting: str) -> Path:
    return GOLDEN / f"{setting}.json"


def load_golden(setting: str) -> dict:
    doc = json.loads(golden_path(setting).read_text())
    return {**doc["meta"], "traces": doc["traces"]}
