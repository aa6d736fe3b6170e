"""The seed engine's differential oracle, Python side: feeds canonical traces to effect-agent's own code
(``driver.mjs``), compares its per-call decisions with ``seed_engine``'s and writes the goldens.

    python benchmarks/oracles/effect_agent/feed.py [--write] [--corpus mini,suite,cases,...] [--settings A,B]
    python benchmarks/oracles/frameworks.py effect_agent [--write] [--only SETTING]   # the same run

Prints, per setting, how often the two agree: triggers, prune sets (calls where either prunes), summarize
cuts (calls where either summarizes), estimates, requests, status lines, envelopes, finish reasons and
warnings; exits 1 when any run differs. ``--write`` rewrites ``tests/golden/seed_engine_oracle/`` from
the oracle's side (``make oracle-seed``); ``tests/test_seed_engine_oracle.py`` then holds ``seed_engine``
to it without Node.
Corpora, settings, the hand-made cases and ctxsim's side are in ``tests/seed_oracle.py``. ``replay_cases``
is the one path to the oracle, shared with ``backend.py`` (``frameworks.py effect_agent --traces ...``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent.parent
sys.path.insert(0, str(REPO / "tests"))

import seed_oracle as so  # noqa: E402

from sim.engine.common import per_call  # noqa: E402
from sim.engine.model import ReplayModel  # noqa: E402
from sim.policies.base import RunStatus, make_policy  # noqa: E402
from sim.policies.seed_messages import OUTPUT_CONTRACT_TOKENS as CONTRACT  # noqa: E402
from sim.policies.seed_messages import stand_in  # noqa: E402


def text_free(e) -> tuple[str, str]:
    """A text-free event's text as the oracle renders it, and the text its bound cuts. The latter is
    ``seed_engine``'s own stand-in (``stand_in``: ASCII, the JSON escapes as newlines), whose envelope
    ctxsim sizes. The former also has the event's recorded characters (multi-byte ones for bytes beyond
    them) and, when the trace carries the doubly stringified size (``json2_bytes``: the run's input), as
    many quotes as that size needs, so the estimates and the transcript's lengths are what ctxsim reads
    from the counts; the stand-in when the counts admit no such text."""
    k = e.json_bytes - e.bytes - 2 if e.json_bytes is not None else min(max(e.lines - 1, 0), e.bytes // 2)
    plain = stand_in(e.bytes, k)
    quotes = e.json2_bytes - e.json_bytes - 4 - k if e.json2_bytes is not None and e.json_bytes else 0
    extra = e.bytes - e.chars
    wide, two = max(extra, 0) // 2, max(extra, 0) % 2  # 3-byte characters add 2 bytes, 2-byte ones 1
    letters = e.chars - wide - two - k
    if extra < 0 or not 0 <= quotes <= k or letters < 0:
        return plain, plain
    special = ["漢"] * wide + ["é"] * two + ["\n"] * (k - quotes) + ['"'] * quotes
    text = list(("abcdefghijklmnopqrstuvwxyz" * (e.chars // 26 + 1))[: e.chars])
    for j, ch in enumerate(special):  # spread evenly, as the stand-in spreads its newlines
        text[j * e.chars // len(special)] = ch
    return "".join(text), plain


def oracle_trace(t) -> dict:
    """A trace as the oracle reads it: each event's text (a text-free event's stand-in: ``text_free``),
    ctxsim's token size, and per call what the mock model and the clock say."""
    events = []
    for e in t.events:
        text, bound = (e.content, None) if e.content is not None else text_free(e)
        events.append(
            {"kind": e.kind, "text": text, "bound": bound, "tokens": e.tokens, "bytes": e.bytes,
             "ids": list(e.tool_call_ids), "id": e.tool_call_id, "run": e.run_index}
        )  # fmt: skip
    outputs = ReplayModel(t).respond_all().tolist()
    _, elapsed = per_call(t)
    calls = [
        {"view_end": c.view_end, "residual": c.residual_tokens, "output": out, "elapsed": s,
         "ids": list(t.events[c.event_index].tool_call_ids), "run": c.run_index}
        for c, out, s in zip(t.calls, outputs, elapsed, strict=True)
    ]  # fmt: skip
    return {"id": t.trace_id, "bpt": t.bytes_per_token, "events": events, "calls": calls}


def status_views() -> list[tuple[dict, RunStatus, dict]]:
    out = []
    for turns, tools, tokens, last, elapsed, knobs in so.STATUS_VIEWS:
        st = RunStatus()
        st.turns, st.tool_calls, st.tokens, st.last_input, st.elapsed_s = turns, tools, tokens, last, elapsed
        view = {
            "turn": turns + 1,
            "maxTurns": knobs["max_turns"],
            "toolCallsUsed": tools,
            "maxToolCalls": knobs["max_tool_calls"],
            "tokensConsumed": tokens,
            "lastInputTokens": last,
            "elapsedSeconds": int(elapsed // 1),
            "maxDurationSeconds": int(knobs["max_duration_s"] // 1),
        }
        if knobs.get("token_budget") is not None:  # unset is undefined, never null, in the engine
            view["tokenBudget"] = knobs["token_budget"]
        out.append((view, st, knobs))
    return out


def run_oracle(payload: dict, runner: str = "node") -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "in.json", Path(tmp) / "out.json"
        src.write_text(json.dumps(payload))
        subprocess.run([runner, str(HERE / "driver.mjs"), str(src), str(dst)], check=True, cwd=HERE)
        return json.loads(dst.read_text())


def oracle_golden(r: dict, knobs: dict) -> dict:
    calls = r["calls"]
    return so.golden_run(
        calls,
        [c.get("request") for c in calls],
        knobs,
        r["finish"],
        r["warnings"],
        [[e["event"], e["original_bytes"], e["envelope_bytes"]] for e in r["envelopes"]],
    ) | ({"grace_warnings": r["grace_warnings"]} if r["grace_warnings"] else {})


class Agreement:
    """Per setting: calls and runs on which the two sides agree, per decision."""

    def __init__(self) -> None:
        self.n = Counter()

    def add(self, c: dict, o: dict) -> None:
        n = self.n
        n["runs"] += 1
        k = len(o["requests"])
        n["calls"] += k
        n["calls_ctxsim"] += len(c["requests"])
        n["trig_c"] += len(c["triggered"])
        n["trig_o"] += len(o["triggered"])
        tc, to = set(c["triggered"]), set(o["triggered"])
        n["trig_agree"] += sum((j in tc) == (j in to) for j in range(k))
        if c["estimates"] is not None:
            n["est_agree"] += sum(a == b for a, b in zip(c["estimates"], o["estimates"], strict=False))
            n["est_n"] += k
        n["req_agree"] += sum(a == b for a, b in zip(c["requests"], o["requests"], strict=False))
        cp = {x["at"]: x for x in c["compactions"] if not x.get("overflow")}
        op = {x["at"]: x for x in o["compactions"] if not x.get("overflow")}
        for key, field in (("prune", "prune"), ("cut", "summarize")):
            either = {a for a in cp if cp[a][field]} | {a for a in op if op[a][field]}
            n[f"{key}_n"] += len(either)
            n[f"{key}_agree"] += sum(a in cp and a in op and cp[a][field] == op[a][field] for a in either)
        n["compaction_same"] += c["compactions"] == o["compactions"]
        if o["status"] is not None:
            n["status_n"] += len(o["status"])
            n["status_agree"] += sum(a == b for a, b in zip(c["status"] or [], o["status"], strict=False))
        n["env_n"] += len(o["envelopes"])
        n["env_agree"] += sum(a == b for a, b in zip(c["envelopes"], o["envelopes"], strict=False))
        n["finish_agree"] += c["finish"] == o["finish"]
        n["warn_agree"] += c["warnings"] == o["warnings"]
        n["grace_warnings"] += len(o.get("grace_warnings", []))
        n["identical"] += all(c[f] == o[f] for f in c)

    def row(self, setting: str) -> str:
        n = self.n

        def frac(a: str, b: str) -> str:
            return f"{n[a]}/{n[b]}" if n[b] else "-"

        cells = [
            setting,
            n["runs"],
            n["calls"],
            f"{n['trig_c']}/{n['trig_o']}",
            frac("trig_agree", "calls"),
            frac("prune_agree", "prune_n"),
            frac("cut_agree", "cut_n"),
            frac("est_agree", "est_n"),
            frac("req_agree", "calls"),
            frac("status_agree", "status_n"),
            frac("env_agree", "env_n"),
            frac("finish_agree", "runs"),
            frac("warn_agree", "runs"),
            frac("identical", "runs"),
        ]
        return "| " + " | ".join(str(c) for c in cells) + " |"


HEADER = (
    "| setting | runs | calls | triggers ctxsim/real | trigger agree | prune sets agree | cuts agree | "
    "estimates equal | requests equal | status lines equal | envelopes equal | finish equal | "
    "warnings equal | runs identical |\n|" + "---|" * 14
)


def write_json(path: Path, head: dict, runs: dict) -> None:
    """One run per line, so a changed decision shows as a changed line."""
    lines = ["{"]
    for key, value in head.items():
        lines.append(f"{json.dumps(key)}: {json.dumps(value, sort_keys=True)},")
    lines.append('"runs": {')
    items = list(runs.items())
    for j, (tid, run) in enumerate(items):
        comma = "," if j + 1 < len(items) else ""
        lines.append(f"{json.dumps(tid)}: {json.dumps(run, sort_keys=True, separators=(',', ':'))}{comma}")
    lines.append("}}")
    path.write_text("\n".join(lines) + "\n")


def oracle_params(knobs: dict) -> dict:
    """The knobs as the oracle reads them: every parameter of ``seed_engine`` at these knobs."""
    return make_policy("seed_engine", **knobs).params()


def replay_cases(
    traces: list, cases: list[tuple[int, dict, int | None]], views=(), runner: str = "node"
) -> tuple[dict, list[dict]]:
    """The one path both modes take: each case ``(trace index, knobs, provider window)`` replayed by
    effect-agent's code (one Node run for all), and each result in the goldens' form. Returns the
    driver's output (commit, output contract, status lines of ``views``) and the runs, case by case."""
    payload = {
        "traces": [oracle_trace(t) for t in traces],
        "cases": [
            {"trace": j, "setting": str(n), "knobs": oracle_params(knobs), "window": window}
            for n, (j, knobs, window) in enumerate(cases)
        ],
        "status_views": list(views),
    }
    out = run_oracle(payload, runner)
    runs = [oracle_golden(r, knobs) for (_, knobs, _), r in zip(cases, out["results"], strict=True)]
    return out, runs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="rewrite the goldens from the oracle's side")
    ap.add_argument("--corpus", default=",".join(so.CORPORA))
    ap.add_argument("--settings", default=None, help="comma-separated setting names (default: all)")
    ap.add_argument("--runs", type=int, default=None, help="only the first N traces of each corpus")
    args = ap.parse_args(argv)
    corpora = args.corpus.split(",")
    if any(c in so.SHARED for c in corpora) and not so.MINI.is_dir():
        print(f"feed.py: {so.MINI} not found (set CTXSIM_TRACES)", file=sys.stderr)
        return 2
    traces, cases, index = [], [], []
    for corpus in corpora:
        load, settings = so.CORPORA[corpus]
        names = [s for s in settings if args.settings is None or s in args.settings.split(",")]
        ts = load()[: args.runs]
        first = len(traces)
        traces += ts
        for name in names:
            knobs, window = settings[name]
            for j, t in enumerate(ts):
                cases.append((first + j, knobs, window))
                index.append((corpus, name, t, knobs, window))
    views = status_views()
    out, runs = replay_cases(traces, cases, [v for v, _, _ in views])
    contract = out["output_contract_tokens"]
    print(f"effect-agent {out['source_commit']}; output contract {contract} tokens (ctxsim {CONTRACT})")
    status_ok = 0
    status_rows = []
    for (_, st, knobs), line in zip(views, out["status"], strict=True):
        mine = make_policy("seed_engine", **knobs).status_line(st)
        status_ok += mine == line
        status_rows.append(
            {
                "status": {
                    k: getattr(st, k) for k in ("turns", "tool_calls", "tokens", "last_input", "elapsed_s")
                },
                "knobs": knobs,
                "line": line,
            }
        )
    print(f"formatRunStatus on {len(views)} hand-made views: {status_ok} identical")
    agree: dict[str, Agreement] = {}
    goldens: dict[tuple[str, str], dict] = {}
    for (corpus, name, t, knobs, window), o in zip(index, runs, strict=True):
        c = so.decisions(t, knobs, window)
        agree.setdefault(name, Agreement()).add(c, o)
        goldens.setdefault((corpus, name), {})[t.trace_id] = o
    print(HEADER)
    for name, a in agree.items():
        print(a.row(name))
    if args.write:
        so.GOLDEN.mkdir(parents=True, exist_ok=True)
        for (corpus, name), runs in goldens.items():
            knobs, window = so.CORPORA[corpus][1][name]
            head = {
                "corpus": corpus,
                "setting": name,
                "knobs": knobs,
                "window": window,
                "effect_agent_commit": out["source_commit"],
                "output_contract_tokens": contract,
            }
            if corpus == "cases" and name == next(iter(so.CASE_SETTINGS)):
                head["status_lines"] = status_rows  # formatRunStatus on hand-made counters
            write_json(so.golden_path(corpus, name), head, runs)
        print(f"wrote {len(goldens)} golden files to {so.GOLDEN.relative_to(REPO)}")
    same = status_ok == len(views) and all(a.n["identical"] == a.n["runs"] for a in agree.values())
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
