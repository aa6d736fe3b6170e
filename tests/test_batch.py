"""The batched fast path (sim.engine.fast.batch via replay_many) against the per-call loop, and its pieces."""

import pickle

import numpy as np
import pytest
from builders import swe_trace
from test_conformance import settings_of
from test_information import four_turns, inputs, with_facts

from sim.checks.conformance import record_diff
from sim.core.growth import growth_exponents
from sim.core.records import CALL_COLUMNS, REFETCH, Columns, RunRecord
from sim.core.types import ItemState
from sim.cost.cache import CostModel, cache_rules, split_runs
from sim.cost.pricing import find_price
from sim.engine.dispatch import replay, replay_many
from sim.engine.model import ReplayModel
from sim.information.ledger import token_outcomes
from sim.metrics.compute import compute_metrics, compute_metrics_many, growth_exponent
from sim.policies.base import make_policy, registered


def loop(t, policy, on_missing="refetch"):
    """The per-call loop's record (an observer forces it)."""
    return replay(t, policy, ReplayModel(t, on_missing=on_missing), observer=lambda k, view: None)


@pytest.fixture(scope="module")
def embedded():
    from sim.importers import load_paths
    from sim.util.paths import EMBEDDED_SUITE

    return list(load_paths([EMBEDDED_SUITE]))[:12]


def assert_batch_is_loop(traces, name, on_missing):
    for params in settings_of(name):
        policy = make_policy(name, **params)
        models = [ReplayModel(t, on_missing=on_missing) for t in traces]
        batch = replay_many(traces, policy, models)
        assert [r.trace_id for r in batch] == [t.trace_id for t in traces]
        for t, r in zip(traces, batch, strict=True):
            assert record_diff(r, loop(t, policy, on_missing)) == [], (name, params, t.trace_id)


@pytest.mark.parametrize("on_missing", ["refetch", "degrade", "fail"])
@pytest.mark.parametrize("name", sorted(registered()))
def test_batch_equals_loop_on_embedded_suite(name, on_missing, embedded):
    assert_batch_is_loop(embedded, name, on_missing)


@pytest.mark.parametrize("on_missing", ["degrade", "fail"])
@pytest.mark.parametrize(
    "name", ["observation_masking", "openhands_observation_masking", "spill_large_results"]
)
def test_batch_equals_loop_on_real_runs(name, on_missing, mini_traces):
    # real runs need facts the masks hide: the fast path's reactions (refetch runs are covered by the
    # conformance tests) must match the loop's
    assert_batch_is_loop(mini_traces[:12], name, on_missing)


def test_masking_refetch_runs_on_the_fast_path_with_the_loops_numbers():
    # tests/test_information.py's four turns: masking n=1 hides f0 before the final answer needs it.
    # Stable prefixes: call 2 rewrites r0 (event 3): 100 + 50 + 10 = 160; the refetch row carries call
    # 3's seam, r1 (event 5): 270 reduced by r0's earlier change (15 - 100): 185; the answer reuses the
    # whole refetch request, 310.
    t = four_turns()
    policy = make_policy("observation_masking", n=1)
    r = replay(t, policy)
    assert inputs(r) == [150, 260, 285, 310, 420]
    assert r.calls["kind"].tolist()[3] == REFETCH
    assert r.calls["stable_prefix_tokens"].tolist() == [0, 150, 160, 185, 310]
    assert r.calls["first_changed"].tolist() == [-1, -1, 3, 5, -1]
    assert r.rereads == ((3, REFETCH, 3, 110),) and r.recovered == ("f0",)
    assert record_diff(r, loop(t, policy)) == []


def needs_at_several_calls():
    # r0 (event 3) provides f0, r1 (event 5) g0; call 3 needs f0, call 4 g0, the final answer both.
    # Masking n=1 hides r0 and r1 from call 3 on: re-reads at calls 3 and 4, then the answer has both.
    t = swe_trace([("x" * 384, 100)] * 6, trace_id="several")
    return with_facts(t, {3: ("f0",), 5: ("g0",)}, {8: ("f0",), 10: ("g0",), 12: ("f0", "g0")})


def test_reactions_of_many_needs_are_each_needs_reaction():
    from itertools import product

    from sim.information.state import DEGRADE, FAIL, RETRIEVE, reaction, reactions

    cases = list(product([False, True], [False, True], ["refetch", "degrade", "fail"]))
    spilled, tool, om = (np.array(c) for c in zip(*cases, strict=True))
    got = reactions(spilled, tool, om == "fail", om == "degrade").tolist()
    assert got == [reaction(*c) for c in cases]
    assert set(got) == {REFETCH, RETRIEVE, FAIL, DEGRADE}


@pytest.mark.parametrize("on_missing", ["refetch", "degrade", "fail"])
def test_needs_unmet_at_several_calls_are_walked_in_order(on_missing):
    # a re-read brings its facts back for later calls, so such runs are walked call by call; runs whose
    # unmet needs fall on one call (four turns) are answered together: one batch holds both kinds
    policy = make_policy("observation_masking", n=1)
    traces = [needs_at_several_calls(), four_turns(), needs_at_several_calls()]
    batch = replay_many(traces, policy, [ReplayModel(t, on_missing=on_missing) for t in traces])
    for t, r in zip(traces, batch, strict=True):
        assert record_diff(r, loop(t, policy, on_missing)) == []
    # the facts needed while lost (needed_facts_lost): f0 at call 3, g0 at call 4 (a fail stops at f0)
    want = ("f0",) if on_missing == "fail" else ("f0", "g0")
    assert [r.needed_lost for r in batch] == [want, ("f0",), want]
    r = batch[0]
    if on_missing == "refetch":
        assert r.calls["kind"].tolist() == [0, 0, 0, REFETCH, 0, REFETCH, 0, 0]
        assert [x[:3] for x in r.rereads] == [(3, REFETCH, 3), (4, REFETCH, 5)] and r.recovered == (
            "f0",
            "g0",
        )
        assert (r.answer_needs, r.answer_needs_met, r.degraded) == (2, 2, False)
    elif on_missing == "degrade":
        assert r.rereads == () and r.degraded and (r.answer_needs, r.answer_needs_met) == (2, 0)
    else:
        assert r.finish_reason == "missing-information"


def test_a_plugins_plan_many_may_give_one_plan_per_run(embedded):
    # the interface returned a list of plans before Plans; a policy written then still replays the same
    base = make_policy("observation_masking", n=2)

    class ListPlans(type(base)):
        def plan_many(self, traces):  # one Plan per run (as a list)
            return [super(ListPlans, self).plan_many([t])[0] for t in traces]

    legacy = ListPlans(n=2)
    traces = [four_turns(), *embedded[:4]]
    for a, b in zip(replay_many(traces, legacy), replay_many(traces, base), strict=True):
        assert record_diff(a, b) == []


def test_batches_of_mixed_runs_equal_single_replays(embedded):
    # a run's record does not depend on which runs share its batch (sizes, plans, re-reads, tables)
    policy = make_policy("observation_masking", n=2)
    hand = [four_turns(), swe_trace([]), swe_trace([("a\n" * 5, 40)] * 3, trace_id="short")]
    traces = hand + embedded[:5] + hand
    batch = replay_many(traces, policy)
    for t, r in zip(traces, batch, strict=True):
        assert record_diff(r, replay(t, policy)) == []
    assert batch[1].n_calls == 0 and batch[1].item_state.tolist() == []
    # the totals and counts the batch primes (compactions per kind among them) are the records' own
    assert compute_metrics_many(batch) == [compute_metrics(replay(t, policy)) for t in traces]


def test_window_overflow_in_a_batch_goes_to_the_loop():
    # the four turns' requests reach 480 tokens: a 300-token window refuses call 2 of the raw run
    t = four_turns()
    records = replay_many([t, swe_trace([("a", 5)])], make_policy("raw"), window=300)
    assert records[0].finish_reason == "context-overflow" and records[0].rejections == 1
    assert inputs(records[0]) == [150, 260]
    assert records[1].finish_reason == "completed"


def test_replay_many_checks_models_match_traces():
    with pytest.raises(ValueError, match="2 traces but 1 models"):
        replay_many([four_turns(), four_turns()], make_policy("raw"), [ReplayModel(four_turns())])


def test_split_runs_restarts_the_cache_at_each_run():
    # three runs laid end to end equal each run's requests stepped one by one (CostModel.step, the
    # loop's accounting), for every cache family
    rng = np.random.default_rng(7)
    lengths = [5, 1, 9]
    for family in ("anthropic", "gemini", "openai", "none"):
        rules = cache_rules(family)
        parts = []
        for n in lengths:
            view = np.cumsum(rng.integers(200, 3000, n)).astype(np.int64)
            stable = np.concatenate(([0], view[:-1])).astype(np.int64)
            stable[n // 2] //= 3  # one seam
            t = np.cumsum(rng.integers(1, 400, n)).astype(np.float64)
            parts.append((t, view + 7, view, stable, np.full(n, 50, dtype=np.int64)))
        price = find_price("claude-sonnet-4-5") if family == "anthropic" else None
        expected = []
        for t, inp, view, stable, out in parts:
            model = CostModel(rules, price)
            rows = [
                model.step(False, *row)
                for row in zip(
                    t.tolist(), inp.tolist(), view.tolist(), stable.tolist(), out.tolist(), strict=True
                )
            ]
            expected.append([np.array(c) for c in zip(*rows, strict=True)])
        cat = [np.concatenate([p[i] for p in parts]) for i in range(5)]
        starts = np.repeat(np.cumsum([0] + lengths[:-1]), lengths)
        got = split_runs(rules, price, *cat, starts)
        for i in range(4):
            assert got[i].tolist() == np.concatenate([e[i] for e in expected]).tolist(), (family, i)


def test_token_outcomes_per_run():
    s = ItemState
    # run 0: a bounded item (100 -> 30) and a spilled one (50 -> 5); run 1: nothing changed;
    # run 2: two summarized items (80 + 40 covered by a 30-token summary) and a masked one (60 -> 10)
    original = np.array([100, 50, 7, 9, 80, 40, 60], dtype=np.int64)
    final = np.array([30, 5, 7, 9, 30, 0, 10], dtype=np.int64)
    states = np.array([s.BOUNDED, s.SPILLED, 0, 0, s.SUMMARIZED, s.SUMMARIZED, s.MASKED], dtype=np.int8)
    got = token_outcomes(original, final, states, np.array([0, 2, 4, 7]))
    # (derived, spilled, paginated, lost): run 2 derives the masked item's 10 and the summary's 30 of 120
    assert got.tolist() == [[35, 45, 0, 70], [0, 0, 0, 0], [40, 0, 0, 140]]
    # a paginated item (100 -> 30): its later pages are paginated, not lost
    paged = token_outcomes(
        original[:2], final[:2], np.array([s.PAGINATED, 0], dtype=np.int8), np.array([0, 2])
    )
    assert paged.tolist() == [[30, 0, 70, 0]]


def test_metrics_of_a_batch_equal_metrics_one_by_one(embedded):
    records = replay_many(embedded, make_policy("observation_masking", n=3))
    fresh = replay_many(embedded, make_policy("observation_masking", n=3))
    assert compute_metrics_many(records) == [compute_metrics(r) for r in fresh]
    assert compute_metrics_many([]) == []


def test_growth_exponents_of_runs_laid_end_to_end():
    # a negative residual can make a request's input negative: a cumulative sum that is not positive
    # anywhere in the second half has no logarithm, so the run has no exponent (the others keep theirs)
    runs = [
        [100] * 40,
        [5, 6],
        [1000 + 250 * k for k in range(60)],
        [0, 0, 0, 0, 0],
        [10, 10, -15, -20, 5, 5],
    ]
    bounds = np.cumsum([0] + [len(r) for r in runs])
    got = growth_exponents(np.concatenate([np.array(r, dtype=np.int64) for r in runs]), bounds)
    assert got[0] == 1.0 and got[1] is None and got[3] is None  # too few calls; no input at all
    assert got[4] is None  # cumulative 5, -15, -10 over its second half
    # the same bounds again (what depends on them alone is kept), other inputs: their own slopes
    doubled = growth_exponents(2 * np.concatenate([np.array(r, dtype=np.int64) for r in runs]), bounds)
    assert doubled[0] == 1.0 and doubled[2] == got[2] and doubled[4] is None  # scale-free slopes
    steep = [[10 * k * k + 1 for k in range(40)], *runs[1:]]
    steep_got = growth_exponents(np.concatenate([np.array(r, dtype=np.int64) for r in steep]), bounds)
    x, y = np.log(np.arange(21, 41)), np.log(np.cumsum(steep[0])[20:])
    assert steep_got[0] == round(float(np.polyfit(x, y, 1)[0]), 6) > 2
    x, y = np.log(np.arange(31, 61)), np.log(np.cumsum(runs[2])[30:])
    assert got[2] == round(float(np.polyfit(x, y, 1)[0]), 6)


def test_columns_table_reads_like_a_dict_and_pickles():
    block = np.arange(6, dtype=np.int64).reshape(3, 2)
    c = Columns(("a", "b", "c"), block)
    assert list(c) == ["a", "b", "c"] and c["b"].tolist() == [2, 3] and dict(c)["c"].tolist() == [4, 5]
    back = pickle.loads(pickle.dumps(c))
    assert {k: v.tolist() for k, v in back.items()} == {"a": [0, 1], "b": [2, 3], "c": [4, 5]}


def test_batch_groups_a_runs_compactions_when_read(embedded):
    from sim.core.records import GroupedCompactions, compactions_of

    r = replay_many(embedded[:3], make_policy("observation_masking", n=2))[2]
    assert isinstance(r.compactions, GroupedCompactions)
    expected = compactions_of(r.changes)
    assert {k: v.tolist() for k, v in r.compactions.items()} == {k: v.tolist() for k, v in expected.items()}
    assert r.compaction_counts()[1] == len(expected["kind"]) > 0  # one prune per masking call
    back = pickle.loads(pickle.dumps(r.compactions))
    assert isinstance(back, Columns)
    assert back["tokens_reclaimed"].tolist() == expected["tokens_reclaimed"].tolist()


def test_record_of_fields_names_missing_and_unknown_fields():
    r = replay(four_turns(), make_policy("raw"))
    fields = {k: v for k, v in r.__dict__.items() if not k.startswith("_")}
    again = RunRecord.of_fields(dict(fields))
    assert (
        again.calls is r.calls
        and again.ledger == r.ledger
        and again.total("input_tokens") == r.total("input_tokens")
    )
    del fields["calls"]
    with pytest.raises(TypeError, match=r"differ by \['calls'\]"):
        RunRecord.of_fields(dict(fields))
    with pytest.raises(TypeError, match=r"differ by \['calls', 'extra'\]"):
        RunRecord.of_fields(dict(fields, extra=1))
    assert set(r.calls) == set(CALL_COLUMNS) and r.degraded is False and r.summaries == ()
    assert growth_exponent(r) == compute_metrics(r)["growth_exponent"]


def test_fact_outcome_counts_take_each_facts_best_holder():
    from test_information import with_facts

    from sim.information.ledger import batch_facts, fact_index, fact_outcome_counts

    s = ItemState
    # calls at events 2, 4, 6: a run holds items 0..5; r2 (event 7) is never admitted
    a = with_facts(swe_trace([("x", 9)] * 3), {3: ("f0", "f1"), 5: ("f1",), 7: ("f2",)}, {})
    b = with_facts(swe_trace([("x", 9)] * 3), {3: ("g0",), 5: ("g0",)}, {})
    states_a = np.array([0, 0, 0, s.MASKED, 0, s.BOUNDED], dtype=np.int8)  # f0 lost, f1 derived (r1)
    states_b = np.array([0, 0, 0, s.SPILLED, 0, s.SUMMARIZED], dtype=np.int8)
    facts = batch_facts([fact_index(a), fact_index(b)], np.array([6, 6]))
    states = np.concatenate([states_a, states_b])

    def counts(kept, reread=(), **kw):
        got = fact_outcome_counts(facts, states, kept, np.array(reread, dtype=np.int64), **kw).tolist()
        return [[row[0], row[1], row[5]] for row in got]  # (derived, spilled, lost)

    # g0's summary did not keep it, so its spilled holder is the best; r1's cut shows all its bytes
    # (no ranges given: every fact shown)
    assert counts([(), ()]) == [[1, 0, 1], [0, 1, 0]]
    # a summary that kept g0 makes it derived
    assert counts([(), ("g0",)]) == [[1, 0, 1], [1, 0, 0]]
    # re-reading item 3 brings back both its facts (f0, f1) verbatim; item 9 is run b's 3 (g0)
    assert counts([(), ()], [3]) == [[0, 0, 0], [0, 1, 0]]
    assert counts([(), ()], [3, 9]) == [[0, 0, 0], [0, 0, 0]]
    # r1 (item 5) cut to its first byte: f1 (the whole 1-byte event) still shows; cut to nothing, lost
    assert counts([(), ()], shown={5: ((0, 1),)}) == [[1, 0, 1], [0, 1, 0]]
    assert counts([(), ()], shown={5: ((0, 0),)}) == [[0, 0, 2], [0, 1, 0]]
    # a retrieval of g0 that missed: not_retrieved (column 3) instead of spilled
    got = fact_outcome_counts(facts, states, [(), ()], np.zeros(0, dtype=np.int64), missed=[(), ("g0",)])
    assert [row[1] for row in got.tolist()] == [0, 0] and [row[3] for row in got.tolist()] == [0, 1]


@pytest.mark.parametrize("params", [{}, {"n": 1}, {"n": 3, "polling": 4}, {"n": 40}])
def test_masking_plans_for_a_batch_equal_plans_run_by_run(params, embedded):
    # the batch form restarts its running boundary at each run, runs without calls included
    policy = make_policy("observation_masking", **params)
    traces = [swe_trace([]), *embedded[:6], four_turns(), swe_trace([("a", 5)])]
    for t, p in zip(traces, policy.plan_many(traces), strict=True):
        one = policy.plan(t)
        assert [np.asarray(c).tolist() for c in p] == [np.asarray(c).tolist() for c in one]
    # and the per-call decisions of the loop are the same masks (tests/test_conformance.py checks the
    # records; here the entries themselves)
    t = four_turns()
    assert [c.tolist() for c in make_policy("observation_masking", n=1).plan(t)[:2]] == [[2, 3], [3, 5]]


def test_batch_memory_forgets_a_batch_when_one_of_its_objects_goes():
    import gc

    from sim.util.batchmemo import KEEP, batch_derived, remembered

    class Run:  # any weakly referable per-run object
        pass

    runs = [Run(), Run()]
    before = remembered()
    built = []
    assert batch_derived(runs, "n", lambda rs: built.append(1) or len(rs)) == 2
    assert batch_derived(runs, "n", lambda rs: built.append(1) or -1) == 2 and built == [1]  # kept
    held = remembered()
    assert held == min(before + 1, KEEP)
    del runs[1]
    gc.collect()
    assert remembered() == held - 1  # its entry went with the object: a new object with that id misses


def test_batch_memory_does_not_keep_traces_alive_and_checks_identity():
    import gc
    import weakref

    from sim.util.batchmemo import KEEP, remembered

    traces = [four_turns(), swe_trace([("a", 5)] * 2, trace_id="two")]
    first = replay_many(traces, make_policy("raw"))
    dead = weakref.ref(traces[0])
    del traces, first
    gc.collect()
    assert dead() is None  # the remembered batch holds arrays, not traces
    # new traces (whatever their ids) get their own columns
    again = [swe_trace([("b", 9)] * 3, trace_id="three"), four_turns()]
    got = replay_many(again, make_policy("raw"))
    assert [inputs(r) for r in got] == [inputs(replay(t, make_policy("raw"))) for t in again]
    assert remembered() <= KEEP


@pytest.mark.parametrize(
    "name", ["raw", "observation_masking", "tool_result_head_tail", "spill_large_results"]
)
def test_batches_without_any_call(name):
    records = replay_many([swe_trace([]), swe_trace([])], make_policy(name))
    assert [r.n_calls for r in records] == [0, 0]
    assert [m["cumulative_input_tokens"] for m in compute_metrics_many(records)] == [0, 0]
    assert replay_many([], make_policy(name)) == []


HEAD_TAIL = {"name": "tool_result_head_tail", "max_chars": 50, "head_chars": 20, "tail_chars": 10}


def test_settle_time_changes_are_kept_per_batch_and_settling_step(monkeypatch):
    """Replays of one batch under pipelines that settle alike (the same head/tail step, masking knobs
    that differ) settle each run once, and each gives the loop's records; a different head/tail step
    settles again."""
    from sim.policies.tool_result_head_tail import ToolResultHeadTail

    calls = []
    real = ToolResultHeadTail.settle_all

    def counting(self, trace):
        calls.append(trace.trace_id)
        return real(self, trace)

    monkeypatch.setattr(ToolResultHeadTail, "settle_all", counting)
    traces = [swe_trace([("x" * 120, 60), ("short", 5)] * 3, trace_id=f"t{i}") for i in range(3)]
    for n in (1, 2, 3):
        policy = make_policy("pipeline", steps=[HEAD_TAIL, {"name": "observation_masking", "n": n}])
        got = replay_many(traces, policy, pricing=None)
        for t, r in zip(traces, got, strict=True):
            assert record_diff(r, loop(t, policy)) == []
    assert sorted(calls) == ["t0", "t1", "t2"]  # once per run for the three settings (the loop's own
    # replays settle per event, not through settle_all)
    other = dict(HEAD_TAIL, max_chars=60, head_chars=30)
    replay_many(traces, make_policy("pipeline", steps=[other, {"name": "observation_masking"}]), pricing=None)
    assert len(calls) == 6


def test_kept_settle_time_changes_do_not_keep_traces_alive():
    import gc
    import weakref

    traces = [swe_trace([("x" * 120, 60)] * 3, trace_id="a"), swe_trace([("y" * 99, 50)] * 2, trace_id="b")]
    policy = make_policy("pipeline", steps=[HEAD_TAIL, {"name": "observation_masking"}])
    first = replay_many(traces, policy, pricing=None)
    assert first[0].cuts  # settled cuts reached the record
    dead = weakref.ref(traces[0])
    del traces, first
    gc.collect()
    assert dead() is None


def test_plans_given_per_call_make_their_call_array_when_read():
    from sim.policies.base import Plans

    counts = np.array([0, 2, 1, 0, 1])  # two runs: calls 0-2, then 0-1
    local = np.array([0, 1, 2, 0, 1])
    index, ones = np.array([3, 4, 5, 2]), np.ones(4, dtype=np.int64)
    plans = Plans.by_call(counts, local, index, ones, ones, np.array([3, 1]))
    assert plans.call.tolist() == [1, 1, 2, 1]
    assert [p.call.tolist() for p in plans] == [[1, 1, 2], [1]]
    t = swe_trace([("x", 100)] * 6)
    masking = make_policy("observation_masking", n=2)
    whole = masking.plan_many([t, t])
    assert whole.call_counts is not None and int(whole.call_counts.sum()) == len(whole.index)
    assert [c.tolist() for c in whole[1][:4]] == [c.tolist() for c in masking.plan(t)[:4]]


def test_result_rows_of_one_batch_are_separate_dicts():
    from sim.engine.dispatch import replay_table
    from sim.results.tables import result_rows, table_rows

    traces = [swe_trace([("x", 100)] * k, trace_id=f"r{k}") for k in (2, 3, 5)]
    table = replay_table(traces, make_policy("observation_masking", n=1), pricing=None)
    rows = table_rows(table, "v")
    assert [list(r) for r in rows] == [list(r) for r in result_rows(table.records(), "v")]
    rows[0]["calls"] = -1
    assert [r["calls"] for r in rows] == [-1, 3, 5]


def test_a_keyed_batch_copied_or_unpickled_keys_its_own_objects():
    import copy

    from sim.util.batchmemo import Keyed

    runs = Keyed([swe_trace([("x", 5)]), swe_trace([("y", 6)])])
    for other in (pickle.loads(pickle.dumps(runs)), copy.deepcopy(runs)):
        assert isinstance(other, Keyed) and other.key.ids == tuple(map(id, other))
        assert other.key != runs.key  # new objects: another batch
    assert copy.copy(runs).key == runs.key  # the same objects: the same batch


def test_the_wrap_bound_covers_every_call_column_but_cost():
    # without re-read rows replay_batch bounds each column by kind (traces', zero, measured, or derived
    # from those): a column added to CALL_COLUMNS must join one of them, or its sums would go unchecked
    from sim.engine.fast import batch_rows

    derived = {"output_tokens", "input_tokens", "uncached_input_tokens"}
    kinds = (batch_rows.TRACE_COLUMNS, batch_rows.ZERO_COLUMNS, batch_rows.MEASURED_COLUMNS, derived)
    assert sorted(n for k in kinds for n in k) == sorted(CALL_COLUMNS[:-1])


def test_a_keyed_batch_takes_its_entrys_key_on_a_hit():
    from sim.util.batchmemo import Keyed, batch_derived

    objects = [swe_trace([("x", 5)]), swe_trace([("y", 6)])]
    first, second = Keyed(objects), Keyed(objects)
    assert first.key is not second.key and first.key == second.key
    assert batch_derived(first, "n", len) == 2
    assert batch_derived(second, "n", lambda rs: -1) == 2  # the same batch: kept
    assert second.key is first.key  # later asks find the entry by identity


def test_a_tables_default_models_are_each_traces_own_and_hold_no_trace():
    import gc
    import weakref

    from sim.engine.dispatch import replay_table

    traces = [swe_trace([("x", 100)] * k, trace_id=f"r{k}") for k in (2, 3)]
    for _ in range(2):  # made, then found in the batch's memory
        table = replay_table(traces, make_policy("observation_masking", n=1), pricing=None)
        own = [t.derived("replay_model", ReplayModel) for t in traces]
        assert all(m is o for m, o in zip(table.models, own, strict=True))
    dead = weakref.ref(traces[0])
    del traces, table, own
    gc.collect()
    assert dead() is None


def test_int_lists_repeat_a_row_of_one_value():
    from sim.information.ledger import int_lists

    block = np.array([[7, 7, 7], [1, 2, 3], [0, 0, 0], [3, 3, 4]], dtype=np.int64)
    got = int_lists(block)
    assert got == [[7, 7, 7], [1, 2, 3], [0, 0, 0], [3, 3, 4]]
    assert all(type(v) is int for row in got for v in row)
    assert int_lists(np.zeros((2, 0), dtype=np.int64)) == [[], []]


@pytest.mark.parametrize("params", [{}, {"n": 1}, {"n": 3, "polling": 4}])
def test_masking_plans_keep_what_they_promise(params, embedded):
    # the batch path skips its ascending and one-state checks on these promises: they must hold for
    # every run's entries and for the runs laid end to end as the batch lays them (by item offsets)
    traces = [swe_trace([]), *embedded[:6], four_turns(), swe_trace([("a", 5)])]
    plans = make_policy("observation_masking", **params).plan_many(traces)
    assert plans.ascending is True and plans.one_state == int(ItemState.MASKED)
    sizes = [len(t.arrays.tokens) for t in traces]
    off = np.repeat(np.cumsum([0, *sizes[:-1]]), plans.counts)
    index = plans.index + off
    assert len(index) > 20 and bool((index[1:] > index[:-1]).all())
    assert plans.state.tolist() == [int(ItemState.MASKED)] * len(index)
    assert all(0 <= i < s for p, s in zip(plans, sizes, strict=True) for i in p.index.tolist())


def test_plans_without_promises_are_checked(embedded):
    from sim.policies.base import Plans

    # a plugin's plans (one Plan per run) promise nothing: the batch path checks them, as before
    policy = make_policy("observation_masking", n=2)
    plans = Plans.of([policy.plan(t) for t in embedded[:4]])
    assert plans.ascending is False and plans.one_state is None
    from sim.engine.dispatch import replay_table

    class Unpromised(type(policy)):
        name = "observation_masking"

        def plan_many(self, traces):
            got = super().plan_many(traces)
            got.ascending, got.one_state = False, None
            return got

    other = Unpromised(n=2)
    want = replay_table(embedded[:4], policy, pricing=None).records()
    got = replay_table(embedded[:4], other, pricing=None).records()
    assert [record_diff(a, b) for a, b in zip(got, want, strict=True)] == [[]] * 4


def test_default_models_key_from_their_traces_key():
    from sim.engine.dispatch import replay_table
    from sim.util.batchmemo import BatchKey, Keyed

    traces = [swe_trace([("x", 100)] * k, trace_id=f"r{k}") for k in (2, 3)]
    table = replay_table(traces, make_policy("observation_masking", n=1), pricing=None)
    again = replay_table(traces, make_policy("observation_masking", n=1), pricing=None)
    assert isinstance(table.models, Keyed) and table.models.key.ids[0] == "replay_model"
    assert table.models.key == again.models.key and hash(table.models.key) == hash(again.models.key)
    # never equal to a key of ids, not even of the same models
    assert table.models.key != BatchKey(table.models) and table.models.key != table.traces.key
    # models given by the caller key by their ids, and replay to the same records
    given = replay_table(traces, make_policy("observation_masking", n=1), list(table.models), pricing=None)
    assert given.models.key.ids == tuple(map(id, table.models))
    assert [record_diff(a, b) for a, b in zip(given.records(), table.records(), strict=True)] == [[]] * 2
