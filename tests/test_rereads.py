"""Re-reads go through the policy: a refetched result passes the policy's bound again
(``Policy.reread_bound``), and a needed fact the bounded copy does not show is read by ranged reads of
its span (``sim.information.state.ranged_reads``), each its slice's tokens plus
``model.reread_margin_tokens``. Also: every result over ``tool_result_head_tail``'s bound is cut,
whatever the recorder did to it first, unless the recorder's own cut kept as much."""

import dataclasses

import numpy as np
import pytest
from builders import swe_trace

from sim.core.records import AGENT, REFETCH
from sim.core.types import ItemState
from sim.engine.dispatch import replay
from sim.engine.model import ReplayModel
from sim.information.state import ranged_reads
from sim.metrics.compute import compute_metrics
from sim.policies.base import make_policy
from sim.util.errors import ConfigError

ALPHABET = "".join(chr(97 + k % 26) for k in range(2000))  # ASCII: a byte is a character


def needing(span: tuple[int, int]):
    """r0 (event 3: 1,000 characters, 250 tokens; issued by a0, 10 tokens) provides fact f at ``span``;
    a2 (event 6, call 2) needs it."""
    t = swe_trace([(ALPHABET[:1000], 250), ("ok", 5), ("ok", 5)])
    ev = list(t.events)
    ev[3] = dataclasses.replace(ev[3], provides=("f",), fact_spans=(span,), fact_kinds=("value",))
    ev[6] = dataclasses.replace(ev[6], needs=("f",))
    return dataclasses.replace(t, events=tuple(ev))


HEAD_TAIL = {"name": "tool_result_head_tail", "max_chars": 100}  # 50 + 50: bytes [0, 50) and [950, 1000)


def rows(r):
    return r.calls["kind"].tolist(), r.calls["input_tokens"].tolist(), r.calls["output_tokens"].tolist()


def loop_record(t, p, **model):
    """The reference loop's record (an observer keeps the replay off the fast paths)."""
    return replay(t, p, ReplayModel(t, **model), observer=lambda k, view: None)


def test_the_bound_a_refetch_passes_is_the_settle_cut():
    t = needing((0, 8))
    p = make_policy(**HEAD_TAIL)
    # 1000 characters: head 50 + tail 50 + the 50-byte notice = 154 bytes, round(250 x 170 / 1016) = 42
    # tokens (scale_tokens counts 16 bytes of message overhead)
    assert p.reread_bound(t, 3) == p.settle(t, None, 3, None)
    assert p.reread_bound(t, 3) == (3, ItemState.BOUNDED, 42, 154, "head-tail", ((0, 50), (950, 1000)))
    assert p.reread_bound(t, 5) is None  # "ok" is under the bound: it comes back whole
    assert (
        make_policy("raw").reread_bound(t, 3) is None
        and make_policy("observation_masking").reread_bound(t, 3) is None
    )
    pipe = make_policy("pipeline", steps=(HEAD_TAIL, {"name": "observation_masking", "n": 1}))
    assert pipe.reread_bound(t, 3) == p.reread_bound(t, 3)  # the settling step's bound
    seed = make_policy("seed_engine", tool_result_max_bytes=300)
    bound = seed.reread_bound(t, 3)
    assert bound is not None and bound.reason == "envelope" and bound.kept == ((0, 113), (886, 1000))
    page = make_policy("paginate_large_results", page_tokens=100)
    assert page.reread_bound(t, 3) == page.settle(t, None, 3, None)


def test_a_bounded_refetch_brings_back_a_fact_in_the_head():
    # masking (n=1) hides r0 at call 2; the refetch re-runs a0's call and the head/tail cut applies again:
    # it adds a0's 10 tokens + the 42-token cut = 52, and f [0, 8) lies in the head: no ranged read
    t = needing((0, 8))
    p = make_policy("pipeline", steps=(HEAD_TAIL, {"name": "observation_masking", "n": 1}))
    r = replay(t, p)
    assert rows(r) == ([AGENT, AGENT, REFETCH, AGENT], [150, 202, 190, 242], [7, 7, 7, 7])
    assert r.rereads == ((2, REFETCH, 3, 52),) and r.recovered == ("f",)
    m = compute_metrics(r)
    assert (m["refetch_calls"], m["facts_lost"], m["answer_outcome"]) == (1, 0, "complete")


def test_a_fact_in_the_cut_part_takes_one_ranged_read_of_its_slice_plus_the_margin():
    # f [500, 520) is cut away: the bounded refetch (52 tokens) does not show it, so the agent reads that
    # range: 20 bytes = round(250 x 36 / 1016) = 9 tokens + the 50-token margin = 59, with the refetch's
    # output (a0's recorded 7 tokens)
    t = needing((500, 520))
    p = make_policy(**HEAD_TAIL)
    r = replay(t, p)
    assert rows(r) == ([AGENT, AGENT, REFETCH, REFETCH, AGENT], [150, 202, 217, 269, 328], [7] * 5)
    assert r.rereads == ((2, REFETCH, 3, 52), (2, REFETCH, 3, 59))
    m = compute_metrics(r)
    assert (m["refetch_calls"], m["facts_lost"], m["answer_outcome"]) == (2, 0, "complete")
    # the margin is the model's knob: 0 leaves the slice alone
    r = replay(t, p, ReplayModel(t, reread_margin_tokens=0))
    assert r.rereads == ((2, REFETCH, 3, 52), (2, REFETCH, 3, 9))


def test_a_slice_longer_than_the_bound_takes_several_ranged_reads():
    # f [100, 900): 800 bytes outside the cut, which shows 100 bytes: 8 reads of 100 bytes, each
    # round(250 x 116 / 1016) = 29 tokens + 50; f is back once its span is covered
    t = needing((100, 900))
    r = replay(t, make_policy(**HEAD_TAIL))
    kinds, ins, _ = rows(r)
    assert kinds == [AGENT, AGENT] + [REFETCH] * 9 + [AGENT]
    assert ins == [150, 202, 217, 269] + [269 + 79 * j for j in range(1, 9)]
    assert r.rereads == ((2, REFETCH, 3, 52),) + ((2, REFETCH, 3, 79),) * 8 and r.recovered == ("f",)
    assert compute_metrics(r)["answer_outcome"] == "complete"
    # the slices: the span's part the copy does not show, cut to the bound's 100 bytes
    reads = ranged_reads(t, 3, [(40, 980)], ((0, 50), (950, 1000)), 50)
    assert [s for s, _ in reads] == [(50, 150), (150, 250), (250, 350), (350, 450), (450, 550)] + [
        (550, 650),
        (650, 750),
        (750, 850),
        (850, 950),
    ]
    assert ranged_reads(t, 3, [(0, 8)], ((0, 50),), 50) == []  # shown: nothing to read
    assert ranged_reads(t, 3, [(500, 520)], (), 50) == []  # a bound that shows nothing: no read helps


def test_a_bound_that_shows_nothing_degrades_the_answer():
    t = needing((500, 520))
    p = make_policy("tool_result_head_tail", max_chars=100, head_chars=0, tail_chars=0)
    r = replay(t, p)
    assert rows(r)[0] == [AGENT, AGENT, REFETCH, AGENT] and r.degraded and r.recovered == ()


def test_a_whole_refetch_is_unchanged_where_the_policy_has_no_bound():
    # observation masking bounds nothing: the refetch adds a0 + r0 whole (10 + 250), as before
    t = needing((500, 520))
    r = replay(t, make_policy("observation_masking", n=1))
    assert rows(r) == ([AGENT, AGENT, REFETCH, AGENT], [150, 410, 190, 450], [7, 7, 7, 7])
    assert r.rereads == ((2, REFETCH, 3, 260),)


@pytest.mark.parametrize("span", [(0, 8), (500, 520), (100, 900)])
def test_the_batch_path_gives_the_loops_record(span):
    # a run whose refetch the policy bounds leaves the batch path for the loop: the same record
    t = needing(span)
    for p in (
        make_policy(**HEAD_TAIL),
        make_policy("pipeline", steps=(HEAD_TAIL, {"name": "observation_masking", "n": 1})),
    ):
        a, b = replay(t, p), loop_record(t, p)
        assert a.rereads == b.rereads and a.recovered == b.recovered
        for col in b.calls:
            assert np.array_equal(a.calls[col], b.calls[col]), col


@pytest.mark.parametrize("bad", [-1, 1.5, True, "50", None])
def test_the_margin_knob_is_checked(bad):
    t = needing((0, 8))
    with pytest.raises(ConfigError, match=r"model.reread_margin_tokens=.* is not an integer >= 0"):
        ReplayModel(t, reread_margin_tokens=bad)
    assert ReplayModel(t).reread_margin_tokens == 50
    assert ReplayModel(t, reread_margin_tokens=7).like(t).reread_margin_tokens == 7


def test_the_margin_knob_composes_from_the_config():
    from sim.config.compose import compose, model_behaviour

    assert model_behaviour(compose("raw", []))["reread_margin_tokens"] == 50
    assert model_behaviour(compose("raw", ["model.reread_margin_tokens=0"]))["reread_margin_tokens"] == 0
    with pytest.raises(ConfigError, match="model.reread_margin_tokens=-3"):
        model_behaviour(compose("raw", ["model.reread_margin_tokens=-3"]))


# ------------------------------------------------------------------------- what the head/tail bound cuts
def bounded_result(chars: int):
    """A tool result the recorded run cut already (``bounded``) of ``chars`` characters."""
    t = swe_trace([("x" * chars, chars // 4)])
    ev = list(t.events)
    ev[3] = dataclasses.replace(ev[3], bounded=True)
    return dataclasses.replace(t, events=tuple(ev))


def test_head_and_tail_default_to_half_the_bound():
    p = make_policy("tool_result_head_tail", max_chars=400)
    assert (p.head_chars, p.tail_chars) == (200, 200)
    assert make_policy("tool_result_head_tail").params() == {
        "max_chars": 10000,
        "head_chars": 5000,
        "tail_chars": 5000,
    }
    with pytest.raises(ConfigError, match="head_chars \\+ tail_chars = 5200 must not exceed max_chars = 400"):
        make_policy("tool_result_head_tail", max_chars=400, head_chars=5000)


def test_a_recorded_cut_stays_unless_this_bound_keeps_fewer_characters():
    # mini-swe-agent's recorded cuts: 5,000 + 5,000 characters plus 611-614 of its wrapper
    default = make_policy("tool_result_head_tail")
    for chars in (10611, 10614):
        assert default.settle(bounded_result(chars), None, 3, None) is None
    # 11,001 characters cannot be a 10,000-character cut in a wrapper of at most 1,000: cut again
    assert default.settle(bounded_result(11001), None, 3, None) is not None
    assert default.settle(bounded_result(11000), None, 3, None) is None
    small = make_policy("tool_result_head_tail", max_chars=400)
    ch = small.settle(bounded_result(10614), None, 3, None)
    assert ch is not None and ch.kept == ((0, 200), (10414, 10614))
    assert [c.index for c in small.settle_all(bounded_result(10614))] == [3]


def test_max_chars_400_cuts_item_3_of_django_11087(mini_dir):
    from sim.importers import load_paths

    path = mini_dir / "django__django-11087.traj.json"
    if not path.is_file():
        pytest.skip(f"{path.name} not among the shared traces at {mini_dir}")
    t = next(iter(load_paths([path])))
    e = t.events[3]
    assert (e.kind, e.chars, e.tokens, e.bounded) == ("tool_result", 10614, 4033, True)
    p = make_policy("tool_result_head_tail", max_chars=400)
    ch = p.settle(t, None, 3, None)
    assert ch is not None and ch.state == ItemState.BOUNDED and ch.kept == ((0, 200), (10414, 10614))
    assert 3 in [c.index for c in p.settle_all(t)]
    assert make_policy("tool_result_head_tail").settle(t, None, 3, None) is None  # the recorder's cut stays
