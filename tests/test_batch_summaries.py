"""The batch path replays plans that compact: metered summary calls (one or several before a request),
items changed again by a later call (a summary resized, an item back to verbatim), changes that change
nothing, declined runs and a policy that recovers from overflows. A toy summarizer states its rule twice,
call by call (``before_call``) and as a plan (``plan``); ``check_policy`` holds the batch path's records to
the per-call loop's, table for table."""

from dataclasses import dataclass

import numpy as np
import pytest
from builders import swe_trace

from sim.checks.conformance import check_policy, record_diff
from sim.core.types import ItemState
from sim.engine.dispatch import loop_one, replay_many, replay_table
from sim.engine.model import ReplayModel
from sim.policies.base import Change, Decision, Plan, Policy, SummaryCall

S, V = ItemState.SUMMARIZED, ItemState.VERBATIM
SUMMARY_TOKENS, RESIZED = 40, 30


@dataclass(frozen=True)
class ToySummarizer(Policy):
    """Every ``every`` calls: the verbatim tool results in view but the newest become one summary (the
    first of them carries it); the call after, the summary is resized and the last item it took comes
    back verbatim; the system prompt is re-issued as it is every such call (a change that changes
    nothing). ``decline``: runs of this many calls are declined by the plan (the loop replays them)."""

    every: int = 4
    decline: int = -1
    recovering: bool = False

    name = "toy_summarizer_for_test"
    acts_before_call = True
    plans = True

    @property
    def recovers(self) -> bool:  # type: ignore[override]
        return self.recovering

    def start(self, trace):
        return {"taken": []}

    def before_call(self, trace, state, view, call, status):
        out = self._decide(trace, state, view.n, call)
        if out is None:
            return ()
        changes, summaries = out
        changes = [Change(i, s, t, t * 4, "toy") for i, s, t in changes]
        if not summaries:
            return changes
        calls = [SummaryCall(i, o) for i, o in summaries]
        return Decision(changes, calls if len(calls) > 1 else calls[0])

    def on_overflow(self, trace, state, view, call, status):
        return None  # gives up: the run ends as a context overflow (only the loop sees it)

    def _decide(self, trace, state, n, call):
        """The rule both ways share: (changes as (index, state, tokens), summary calls as (in, out))."""
        ev = trace.events
        taken = state["taken"]
        if call > 1 and call % self.every == 1 and taken:
            last = taken[-1]
            changes = [(0, V, ev[0].tokens), (last[0], S, RESIZED)]
            if len(last) >= 3:
                changes.append((last[-1], V, ev[last[-1]].tokens))
                state["gone"] = state.get("gone", set()) - {last[-1]}
            return sorted(changes), []
        if call == 0 or call % self.every:
            return None
        gone = state.setdefault("gone", set())
        results = [i for i in range(n) if ev[i].kind == "tool_result"]
        cand = [i for i in results[:-1] if i not in gone]
        if len(cand) < 2:
            return None
        gone.update(cand)
        taken.append(cand)
        size = sum(ev[i].tokens for i in cand)
        changes = [(cand[0], S, SUMMARY_TOKENS)] + [(i, S, 0) for i in cand[1:]]
        summaries = [(size // 2, 10), (size, SUMMARY_TOKENS)] if len(cand) >= 4 else [(size, SUMMARY_TOKENS)]
        return changes, summaries

    def plan(self, trace):
        if len(trace.calls) == self.decline:
            return Plan([], [], [], [], (), True)
        state = self.start(trace)
        call, index, tokens, states, summaries = [], [], [], [], []
        for k, c in enumerate(trace.calls):
            out = self._decide(trace, state, c.view_end, k)
            if out is None:
                continue
            changes, made = out
            for i, s, t in changes:
                call.append(k), index.append(i), tokens.append(t), states.append(int(s))
            summaries += [(k, i, o) for i, o in made]
        return Plan(call, index, tokens, states, tuple(summaries))


def _traces():
    from scenarios.swe_like import generate_suite

    return [*generate_suite(7, 6), swe_trace([("a", 50)] * 9), swe_trace([("b", 300), ("c", 20)] * 6)]


@pytest.mark.parametrize("every", [2, 3, 4, 7])
def test_compacting_plans_give_the_loops_records(every):
    traces = _traces()
    assert check_policy(ToySummarizer(every), traces) == []
    table = replay_table(traces, ToySummarizer(every), window=None, pricing="claude-sonnet-4-5")
    assert not table.loop  # every run on the batch path
    summaries = [int((r.calls["kind"] == 1).sum()) for r in table.records()]
    assert sum(summaries) > len(traces)  # the plans did summarize (several calls at once too)


def test_runs_with_needs_whose_plan_summarizes_take_the_loop():
    from sim.importers import load_paths
    from sim.information.state import has_needs
    from sim.util.paths import EMBEDDED_SUITE

    traces = list(load_paths([EMBEDDED_SUITE]))[:10]
    assert check_policy(ToySummarizer(3), traces) == []
    table = replay_table(traces, ToySummarizer(3), window=None, pricing="claude-sonnet-4-5")
    assert table.loop  # a summary of a run with needs: what it keeps of their facts is the loop's
    records = table.records()
    assert all(
        (records[pos].calls["kind"] == 1).sum() == 0 or not has_needs(traces[pos])
        for pos in range(len(traces))
        if pos not in table.loop
    )


def test_declined_runs_take_the_loop_and_give_the_same_records():
    traces = _traces()
    n = len(traces[0].calls)
    policy = ToySummarizer(3, decline=n)
    assert check_policy(policy, traces) == []
    table = replay_table(traces, policy, window=None, pricing="claude-sonnet-4-5")
    assert sorted(table.loop) == [j for j, t in enumerate(traces) if len(t.calls) == n]


def test_a_recovering_planner_replays_on_the_batch_path_and_overflows_on_the_loop():
    traces = _traces()
    policy = ToySummarizer(3, recovering=True)
    free = replay_table(traces, policy, window=None, pricing="claude-sonnet-4-5")
    peaks = [int(r.calls["input_tokens"].max()) for r in free.records()]
    window = int(np.median(peaks))
    table = replay_table(traces, policy, window=window, pricing="claude-sonnet-4-5")
    assert sorted(table.loop) == [j for j, p in enumerate(peaks) if p > window]
    records = replay_many(traces, policy, window=window, pricing="claude-sonnet-4-5")
    assert [r.finish_reason == "context-overflow" for r in records] == [p > window for p in peaks]
    for t, r in zip(traces, records, strict=True):
        loop = loop_one(t, policy, ReplayModel(t), None, window, "claude-sonnet-4-5")
        assert record_diff(loop, r) == []


@pytest.mark.parametrize("dense_cells", [1 << 20, 40])  # the dense tables, and the tree for big runs
def test_the_sums_below_a_seam_equal_the_trees_for_every_kind_of_seam(monkeypatch, dense_cells):
    """``_changes_below``'s array answers (no earlier entry below the seam's first item; all of them
    below it) and its dense per-run tables agree with the tree alone on random plans of several runs
    (some calls change nothing: a run's calls are not all seams)."""
    import sim.engine.fast.batch_changes as bc

    monkeypatch.setattr(bc, "DENSE_CELLS", dense_cells)
    rng = np.random.default_rng(5)
    index, d, entry_call, starts, firsts, bases, earlier, seam_call, call_base = ([] for _ in range(9))
    base = k = 0
    for _ in range(40):
        items, total, first_call = int(rng.integers(5, 30)), 0, k
        for call in range(int(rng.integers(2, 12))):
            k += 1
            if call and rng.random() < 0.2:
                continue  # a call without changes
            lo = int(rng.integers(0, items))  # some seams move up, some go back below earlier entries
            chosen = sorted(set(rng.integers(lo, items, size=int(rng.integers(1, 5))).tolist()))
            if call:
                starts.append(len(index)), firsts.append(base + chosen[0]), bases.append(base)
                earlier.append(total), seam_call.append(k - 1), call_base.append(first_call)
            for i in chosen:
                index.append(base + i)
                entry_call.append(k - 1)
                d.append(int(rng.integers(-50, 50)))
                total += d[-1]
        base += items
    index, d = np.array(index), np.array(d)
    starts, firsts, bases = np.array(starts), np.array(firsts), np.array(bases)
    calls = (np.array(entry_call), np.array(seam_call), np.array(call_base))
    want = bc._tree_below(index, d, starts, firsts, bases, base).tolist()
    assert bc._changes_below(index, d, starts, firsts, bases, base, np.array(earlier)).tolist() == want
    assert bc._changes_below(index, d, starts, firsts, bases, base, np.array(earlier), calls).tolist() == want
    kinds = set()  # which of the three kinds of seam the plans made
    for s0, s, f in zip(np.sort(index).searchsorted(bases), starts, firsts, strict=True):
        if s > s0:
            below = index[s0:s] < f
            kinds.add("none" if not below.any() else "all" if below.all() else "some")
    assert kinds == {"none", "all", "some"}
