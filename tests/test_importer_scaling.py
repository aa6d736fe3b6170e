"""Every importer takes time linear in its input (issue 41, item 1).

Each case builds an amplifying input (``tests/amplifiers.py``: records sharing one id, one response,
one pool range; many sidechains; many results of one call) at two sizes, ``n`` and ``2n``, and holds
the CPU time of importing the larger to at most 2.5 times the smaller's: best of three runs each,
taken in turn, in this process, with the cyclic garbage collector paused while timing (its passes
over the live heap are amortised linear but made single runs jitter by 20%). A quadratic join gives 4x;
before the fixes the cases of shared ids gave 3x to 4x at these sizes, the Inspect pool case far more.
The sizes make the larger run last about a second, so the linear part dominates the fixed costs (the
OpenHands V0 cases at 4,000 read 2.2x from memory growth alone, at 8,000 2.0x). The facts imported
are checked too, so a case cannot pass by importing nothing; and the Inspect pool's index is checked
against the plain reading of the same messages (``test_pool_ranges_read_as_the_messages_they_spell``).
"""

from __future__ import annotations

import gc
import json
import random
import time
import warnings
import zipfile
from math import isqrt
from pathlib import Path

import amplifiers as amp
import pytest

from sim.importers import detect, load_path
from sim.trace.codec import trace_hash
from sim.trace.io import write_traces

RATIO = 2.5


def _cpu_once(path: Path) -> tuple[float, list]:
    gc.collect()  # the garbage of an earlier run is not this one's to collect
    gc.disable()  # CPython's collector walks the live heap: amortised linear, but noisy per run
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t = time.process_time()
            traces = list(load_path(path))
            return time.process_time() - t, traces
    finally:
        gc.enable()


def _cpu_pair(a: Path, b: Path) -> tuple[float, list, float, list]:
    """Best of three of each, the two sizes taken in turn (a, b, a, b, a, b): a slow spell of a loaded
    machine then falls on both, not on one size's every run (best of two, one after the other, once
    made a linear case read 3x on CI)."""
    ta = tb = float("inf")
    traces_a = traces_b = []
    for _ in range(3):
        t, traces_a = _cpu_once(a)
        ta = min(ta, t)
        t, traces_b = _cpu_once(b)
        tb = min(tb, t)
    return ta, traces_a, tb, traces_b


def _canonical(suffix: str):
    def build(folder: Path, n: int) -> Path:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            traces = list(load_path(amp.openhands_v0_shared_response(folder, n)))
        out = folder / f"canonical{suffix}"
        write_traces(traces * 4, out, record_hashes=False)
        return out

    return build


# (format the input must be detected as, builder, n, check of the traces at size n)
CASES = {
    "claude-code shared message.id": (
        "claude-code",
        amp.claude_code_shared_message_id,
        12000,
        lambda ts, n: len(ts[0].events[1].tool_call_ids) == n,
    ),
    "claude-code sidechains by agentId": (
        "claude-code",
        amp.claude_code_sidechains,
        4000,
        lambda ts, n: len(ts[0].children) == n and ts[0].children[0].tool_call_id == "task",
    ),
    "claude-code sidechains by parentUuid": (
        "claude-code",
        amp.claude_code_unlinked_sidechains,
        3000,
        lambda ts, n: len(ts[0].children) == n,
    ),
    "openhands-sdk shared llm_response_id": (
        "openhands-sdk-v1",
        amp.openhands_sdk_shared_response,
        3000,
        lambda ts, n: len(ts[0].calls) == 1 and len(ts[0].events[1].tool_call_ids) == n,
    ),
    "openhands-sdk user messages": (
        "openhands-sdk-v1",
        amp.openhands_sdk_user_messages,
        3000,
        lambda ts, n: len(ts[0].events) == n + 1 and len(ts[0].calls) == 1,
    ),
    "openhands-v0 events shared response": (
        "openhands-v0-events",
        amp.openhands_v0_shared_response,
        8000,
        lambda ts, n: len(ts[0].calls) == 1 and len(ts[0].events[1].tool_call_ids) == n,
    ),
    "openhands-v0 output shared response": (
        "openhands-v0-output",
        amp.openhands_v0_output,
        8000,
        lambda ts, n: len(ts[0].calls) == 1 and len(ts[0].events[1].tool_call_ids) == n,
    ),
    "inspect-eval input_refs": (
        "inspect-eval",
        amp.inspect_eval_refs,
        3000,
        lambda ts, n: len(ts[0].events) == 2 * n and len(ts[0].calls) == n,
    ),
    "inspect-json repeated inputs": (  # its size grows as the square of its calls
        "inspect-json",
        amp.inspect_json_no_ids,
        150**2,
        lambda ts, n: len(ts[0].events) == 2 * isqrt(n) and len(ts[0].calls) == isqrt(n),
    ),
    "openai-chat many results": (
        "openai-chat",
        amp.openai_chat_calls,
        8000,
        lambda ts, n: len(ts[0].events) == 2 * n + 3,
    ),
    "openai-chat JSON results of one call": (
        "openai-chat",
        amp.openai_chat_json_results,
        6000,
        lambda ts, n: len(ts[0].events) == n + 3,  # on main: 3.4x (each result scanned its call ids)
    ),
    "anthropic-messages many results": (
        "anthropic-messages",
        amp.anthropic_messages_calls,
        8000,
        lambda ts, n: len(ts[0].events) == n + 4,
    ),
    "mini-swe-agent many user messages": (
        "mini-swe-agent-1",
        amp.mini_swe_agent_users,
        4000,
        lambda ts, n: len(ts[0].calls) == n,
    ),
    "swe-agent steps": ("swe-agent", amp.swe_agent_steps, 4000, lambda ts, n: len(ts[0].calls) == n),
    "tau-bench turns": ("tau-bench", amp.tau_bench_turns, 4000, lambda ts, n: len(ts[0].calls) == n + 1),
    "otel-genai calls of one conversation": (
        "otel-genai",
        amp.otel_genai_calls,
        4000,
        lambda ts, n: len(ts) == 1 and len(ts[0].calls) == n,
    ),
    "langfuse calls of one trace": (
        "langfuse",
        amp.langfuse_calls,
        4000,
        lambda ts, n: len(ts) == 1 and len(ts[0].calls) == n,
    ),
    "langsmith calls of one chain": (
        "langsmith",
        amp.langsmith_calls,
        4000,
        lambda ts, n: len(ts) == 1 and len(ts[0].calls) == n,
    ),
    "ctxsim-canonical jsonl": ("ctxsim-canonical", _canonical(".jsonl"), 1500, lambda ts, n: len(ts) == 4),
    "ctxsim-canonical parquet": (
        "ctxsim-canonical-parquet",
        _canonical(".parquet"),
        1500,
        lambda ts, n: len(ts) == 4,
    ),
}


def test_every_format_has_a_case():
    from sim.importers import registered

    assert {fmt for fmt, *_ in CASES.values()} == set(registered())


@pytest.mark.parametrize("case", sorted(CASES))
def test_doubling_the_input_at_most_doubles_the_time(tmp_path, case):
    fmt, build, n, check = CASES[case]
    small, large = tmp_path / "n", tmp_path / "2n"
    small.mkdir()
    large.mkdir()
    a, b = build(small, n), build(large, 2 * n)
    assert detect(a).name == fmt and detect(b).name == fmt
    seen = []
    for _ in range(3):  # a quadratic join reads 4x every time; a slow spell of a shared machine, once
        t1, traces, t2, traces2 = _cpu_pair(a, b)
        assert check(traces, n)
        assert check(traces2, 2 * n)
        seen.append(f"{t1:.3f} s at n={n}, {t2:.3f} s at 2n")
        if t2 <= RATIO * max(t1, 0.02):
            break
    else:
        raise AssertionError(f"{case}: " + "; ".join(seen))


# ---------------------------------------------------------------------------------- the pool's index
def _pool_sample(rng: random.Random) -> tuple[dict, dict]:
    """A sample whose model events take ``input_refs`` into a pool (random ranges, duplicates, messages
    with and without ids, outputs that are also in the pool), and the same sample with each event's
    ranges spelled out as its ``input``."""
    pool = []
    for j in range(rng.randint(0, 12)):
        m = {"role": rng.choice(["user", "assistant", "tool"]), "content": f"m{rng.randint(0, 5)}"}
        if rng.random() < 0.4:
            m["id"] = f"id{rng.randint(0, 6)}"
        if m["role"] == "tool":
            m["tool_call_id"] = f"c{j}"
        pool.append(m)
    referenced, spelled = [], []
    for k in range(rng.randint(1, 8)):
        refs = []
        for _ in range(rng.randint(1, 3)):
            a = rng.randint(0, len(pool))
            refs.append([a, rng.randint(a, len(pool))])
        if rng.random() < 0.5 and pool:  # often the conversation so far, extended
            refs = [[0, rng.randint(0, len(pool))]]
        out = {"role": "assistant", "content": f"out{rng.randint(0, 3)}"}
        if rng.random() < 0.3 and pool:
            out = dict(rng.choice(pool), role="assistant")
        event = {
            "event": "model",
            "timestamp": amp.TS,
            "output": {"choices": [{"message": out}], "usage": {"input_tokens": 50 + k, "output_tokens": 1}},
        }
        referenced.append({**event, "input": [], "input_refs": refs})
        spelled.append({**event, "input": [m for a, b in refs for m in pool[a:b]]})
    tail = [rng.choice(pool)] if pool and rng.random() < 0.5 else []
    sample = {"id": "s", "epoch": 1, "messages": tail}
    return {**sample, "events": referenced, "message_pool": pool}, {**sample, "events": spelled}


def _eval(path: Path, sample: dict) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("header.json", json.dumps(amp.INSPECT_HEADER))
        z.writestr("samples/s_epoch_1.json", json.dumps(sample))
    return path


def _read(path: Path) -> tuple[str, str | None]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            (t,) = load_path(path)
        except Exception as exc:  # noqa: BLE001 - the two readings must fail alike
            return type(exc).__name__, str(exc).split(": ", 1)[-1]
    return trace_hash(t), json.dumps(t.outcome, sort_keys=True)


def test_pool_ranges_read_as_the_messages_they_spell(tmp_path):
    """The index (a union-find over the pool, a Fenwick tree of neighbours in place) gives the trace the
    plain reading gives: the same messages in the same order, the same count of inputs that do not
    extend the conversation, the same refusals."""
    rng = random.Random(41)
    compared = extended = 0
    for case in range(300):
        referenced, spelled = _pool_sample(rng)
        a = _read(_eval(tmp_path / f"r{case}.eval", referenced))
        b = _read(_eval(tmp_path / f"s{case}.eval", spelled))
        assert a == b, (case, referenced)
        compared += 1
        extended += '"non_prefix_inputs": 0' in (a[1] or "")
    assert compared == 300 and 30 < extended < 270  # both kinds of input were met
