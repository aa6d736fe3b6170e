"""The seed engine's per-trace tables of a text-free trace from its counts (``sim.engine.fast.seed_admitted``)
equal the policy's own (``GridStatic(..., by_policy=True)``: start, settle, admit and transcript_block event
by event), field by field; and the tool links the column reader keeps equal those read from the events."""

import json

import numpy as np
import pytest

from scenarios.swe_like import generate_run
from sim.engine.fast.seed_admitted import takes_counts
from sim.engine.fast.seed_static import GridStatic, grid_statics
from sim.importers import load_paths
from sim.policies.base import make_policy
from sim.policies.seed_messages import stand_in
from sim.trace.codec import trace_to_dict
from sim.trace.column_links import tool_links
from sim.trace.io import write_traces
from sim.util.paths import EMBEDDED_SUITE


def same(x, y) -> bool:
    if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
        x, y = np.asarray(x), np.asarray(y)
        return x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y)
    if isinstance(x, list | tuple) and isinstance(y, list | tuple):
        return type(x) is type(y) and len(x) == len(y) and all(same(a, b) for a, b in zip(x, y, strict=True))
    return type(x) is type(y) and x == y


def assert_tables_equal(traces, proto) -> int:
    """Every trace ``from_counts`` takes: its tables, alone and read with the whole batch
    (``grid_statics``), equal the policy's; how many it took."""
    took = 0
    assert all(t._cache.get(f"grid_static_{proto.tool_result_max_bytes}") is None for t in traces)
    batch = dict(zip(map(id, traces), grid_statics(traces, proto), strict=True))
    for t in traces:
        if not takes_counts(t, proto):
            continue
        took += 1
        ref = GridStatic(t, proto, by_policy=True)
        for fast in (GridStatic(t, proto), batch[id(t)]):
            assert fast.__dict__.keys() == ref.__dict__.keys()
            for k, v in ref.__dict__.items():
                assert same(fast.__dict__[k], v), (t.trace_id, k)
    return took


def edge_record() -> dict:
    """A text-free record with what the SWE-like runs lack: several results of one assistant turn (a
    tool message of several parts), such a batch split by a call's admission, a result with no id, an
    assistant event with neither text nor calls (no message), an id issued twice (the later issuer
    wins), an id needing JSON escapes, a 'tools' event, a second user event, a call whose view ends
    before its event, and results over the bound."""
    d = trace_to_dict(generate_run(7, 3))
    ev, t0 = [], 1748866703.0

    def add(kind, nbytes, lines=1, ids=(), call_id=None):
        ev.append(
            {
                "index": len(ev),
                "kind": kind,
                "content": None,
                "bytes": nbytes,
                "chars": nbytes,
                "lines": lines,
                "tokens": max(nbytes // 3, 1),
                "tokens_provenance": "synthetic",
                "tool_call_ids": list(ids),
                "tool_call_id": call_id,
                "bounded": False,
                "timestamp": t0 + len(ev),
            }
        )
        return len(ev) - 1

    add("system", 3000, 40)
    add("tools", 900, 12)
    add("user", 5000, 60)
    calls = [add("assistant", 200, 2, ("a", "b", 'q"1'))]
    add("tool_result", 60000, 900, call_id="a")
    add("tool_result", 700, 9, call_id="b")
    calls.append(add("assistant", 0, 0, ()))  # neither text nor calls: no message
    add("tool_result", 800, 3, call_id='q"1')  # after an empty turn: joins nothing
    add("tool_result", 90000, 1, call_id=None)  # no id at all, over the bound
    calls.append(add("assistant", 0, 0, ("c", "a")))  # no text, two calls; re-issues "a"
    add("tool_result", 400, 5, call_id="c")
    split = add("tool_result", 500, 5, call_id="a")  # a call's admission ends between this ...
    add("tool_result", 120000, 2000, call_id="a")  # ... and this
    add("user", 50, 1)
    last = add("assistant", 80, 1, ("d",))
    final = add("assistant", 60, 1, ())
    views = [(at, at) for at in calls] + [(last, split + 1), (final, final)]
    d["events"] = ev
    d["calls"] = [
        {
            "index": j,
            "event_index": at,
            "view_end": end,
            "input_tokens": sum(e["tokens"] for e in ev[:end]),
            "output_tokens": 10,
            "cache_read_tokens": None,
            "cache_write_tokens": None,
            "reasoning_tokens": 0,
            "residual_tokens": 0,
            "usage_provenance": "synthetic",
            "timestamp": t0 + end,
            "recorded_cost_usd": None,
        }
        for j, (at, end) in enumerate(views)
    ]
    d["trace_id"] = "edges"
    return d


@pytest.fixture(scope="module")
def column_traces(tmp_path_factory):
    """SWE-like runs, the edge record and the embedded suite, read as columns from a canonical file."""
    path = tmp_path_factory.mktemp("counts") / "runs.jsonl"
    write_traces([generate_run(7, i) for i in range(40)], path)
    with path.open("a") as f:
        f.write(json.dumps(edge_record(), separators=(",", ":")) + "\n")
    return list(load_paths([str(path)])) + list(load_paths([EMBEDDED_SUITE]))


@pytest.mark.parametrize("bound", [None, 3000, 700])
def test_tables_from_counts_are_the_policys(column_traces, bound):
    proto = make_policy("seed_engine", **({} if bound is None else {"tool_result_max_bytes": bound}))
    assert assert_tables_equal(column_traces, proto) == len(column_traces)
    in_memory = [generate_run(7, i) for i in range(10)]  # not read as columns: text-free from the events
    assert assert_tables_equal(in_memory, proto) == 10


def test_the_edge_record_is_read_as_columns_and_exercises_the_rules(column_traces):
    t = next(t for t in column_traces if t.trace_id == "edges")
    assert t._cache.get("tool_links") is not None  # kept by the column reader, not read from events
    st = GridStatic(t, make_policy("seed_engine"))
    assert len(st.settled) == 3  # the three results over the default bound
    # tool messages: results 4-5 (one turn), 7 (after the empty turn), 8 (no id), 10-11 (the re-issued
    # "a" joins "c"), 12 (the same turn, but a call's admission starts there)
    assert [(st.first[m], st.end[m]) for m in st.tm] == [(4, 6), (7, 8), (8, 9), (10, 12), (12, 13)]
    assert 6 not in st.first and st.msgs_at == [2, 4, 6, 8, 11]  # the "tools" event makes none either


def test_the_column_readers_links_are_the_events(column_traces):
    for t in column_traces:
        kept = t._cache["tool_links"]
        want = tool_links(t)
        assert all(np.array_equal(a, b) for a, b in zip(kept, want, strict=True)), t.trace_id
    edge = next(t for t in column_traces if t.trace_id == "edges")
    links = edge._cache["tool_links"]
    assert links.issuer.tolist()[4:14] == [3, 3, -1, 3, -1, -1, 9, 9, 9, -1]  # "a" re-issued by 9
    assert links.ids_json[3] == 3 + 3 + 6  # "a", "b", "q\"1"


def test_a_trace_with_text_takes_the_policys_tables(mini_traces):
    proto = make_policy("seed_engine")
    assert not any(takes_counts(t, proto) for t in mini_traces)


def test_stand_in_is_the_letters_with_newlines_spread_evenly():
    def reference(nbytes: int, escapes: int) -> str:  # the rule as first written, character by character
        k = min(max(escapes, 0), nbytes // 2)
        chars = list(("abcdefghijklmnopqrstuvwxyz" * (nbytes // 26 + 1))[:nbytes])
        for j in range(k):
            chars[(j + 1) * nbytes // (k + 1)] = "\n"
        return "".join(chars)

    for n in range(0, 80):
        for e in range(-1, n + 2):
            assert stand_in(n, e) == reference(n, e), (n, e)
    assert stand_in(100_001, 50_000) == reference(100_001, 50_000)


def test_a_stand_ins_envelope_by_arithmetic_is_the_policys():
    from sim.engine.fast.seed_admitted import stand_in_envelope
    from sim.policies.seed_engine import envelope_of, json_text

    rng = np.random.Generator(np.random.PCG64(11))
    cases = [(60_000, 900, 51_200), (120_000, 0, 51_200), (5, 2, 1), (400, 200, 60), (3000, 1, 80)]
    for _ in range(600):
        n = int(rng.integers(1, 4000)) if rng.random() < 0.8 else int(rng.integers(1, 150_000))
        cases.append((n, int(rng.integers(-1, n // 2 + 2)), int(rng.choice([50, 80, 150, 700, 3000, n]))))
    checked = 0
    for n, escapes, bound in cases:
        text = stand_in(n, escapes)
        if len(json_text(text).encode()) <= bound:
            continue  # within the bound: no envelope
        assert stand_in_envelope(n, escapes, bound) == envelope_of(text, bound), (n, escapes, bound)
        checked += 1
    assert checked > 400
