"""Facts and needs for synthetic SWE-like runs, drawn as the shared real runs have them.

Why: a policy comparison on traces without facts shows every setting completing with nothing lost, so
the information cost a policy pays is invisible. Both generators (``scenarios.swe_like``'s embedded
suite and ``scenarios.calibrated``'s per-task suites) draw facts from the profiles measured here.

Turn ``j``'s observation answers action ``j``; action ``k`` sees the observations of turns ``< k``. In a
run laid out as event 0 system, event 1 task, then (assistant, tool_result) per turn, turn ``j``'s
observation is event ``2j + 3`` and provides the fact ``obs@{2j + 3}``.

- **Provided** (``FACTS``, measured by ``scenarios.calibrated.fact_profile``): each observation provides a
  fact with the real runs' probability, of kind ``error`` or ``path`` in their shares.
- **Needed**: each action needs 1-3 observation facts with the real runs' probabilities, each a number of
  turns back drawn from the real runs' distances (deciles, interpolated), taken from the nearest earlier
  observation that provides one.
- **Superseded** (``SUPERSESSION``, measured by ``supersession_profile``): a fact of kind K is made stale
  by a later observation with the real runs' share for K, at a distance drawn from K's deciles. In the
  real runs (``sim.information.facts``) an edit's result supersedes the reads of its file since the
  previous edit, and a command run again supersedes the error its earlier run reported: 57% of the path
  facts and 48% of the error facts end stale, 1-28 and 2-20 turns later. The distance is drawn within
  the rest of the run (the deciles below it); a fact of the last turns, with no room for its shortest
  distance, stays live, so a suite's realised shares sit a little below the real runs' own (the
  embedded suite: 53% and 47%). Needs and supersession are drawn independently: about a fifth of the
  embedded suite's observation needs fall on a fact already stale (the real runs: 14 of 165), which
  the information model does not count (``sim.information.state.live_needs``).
- **Where an error sits** (``ERROR_SPANS``, measured by ``error_span_profile``): a real error fact is
  the line that shows the failure (``sim.information.facts.error_span``), not its whole result, so a
  head/tail cut that keeps that line keeps the fact. Of the real runs' 149 error facts, 38% sit at the
  result's start (the ``<returncode>`` element, a one-line failure) and the rest near its end (a
  traceback's last line); line lengths and the bytes after the line are drawn from their deciles. A
  path fact (a file as printed) is its whole result, as in the real runs: any cut loses it.
- **Standing facts** (``standing``): as every real importer records them, the system prompt provides a
  ``constraint`` and the task a ``goal``, and the final answer needs both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sim.core.types import Trace


@dataclass(frozen=True)
class FactProfile:
    """How facts come and go in real runs (``scenarios.calibrated.fact_profile``)."""

    provide_share: float  # observations that provide a fact
    error_share: float  # of those facts, errors (the rest: paths)
    need_counts: tuple[float, ...]  # share of actions needing 1, 2, 3 facts provided by observations
    distance_deciles: tuple[float, ...]  # turns between the providing observation and the action


FACTS = FactProfile(
    provide_share=0.4122,
    error_share=0.2339,
    need_counts=(0.0775, 0.0139, 0.0013),
    distance_deciles=(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 2.0, 5.0, 11.2, 21.0, 140.0),
)


@dataclass(frozen=True)
class SupersessionProfile:
    """How observation facts go stale in real runs (``supersession_profile``), per kind."""

    path_share: float  # path facts a later observation supersedes
    error_share: float  # error facts a later observation supersedes
    path_deciles: tuple[float, ...]  # turns from the providing observation to the superseding one
    error_deciles: tuple[float, ...]


SUPERSESSION = SupersessionProfile(
    path_share=0.5717,
    error_share=0.4832,
    path_deciles=(1.0, 1.0, 1.0, 2.0, 2.0, 3.0, 4.0, 6.0, 8.0, 13.0, 28.0),
    error_deciles=(2.0, 2.0, 2.0, 2.0, 3.0, 4.0, 4.0, 6.0, 9.0, 13.0, 20.0),
)


@dataclass(frozen=True)
class ErrorSpanProfile:
    """Where error facts sit in their results in real runs (``error_span_profile``)."""

    at_start_share: float  # error lines that open their result
    length_deciles: tuple[float, ...]  # bytes of the error line
    tail_deciles: tuple[float, ...]  # bytes after it, of those not at the start


ERROR_SPANS = ErrorSpanProfile(
    at_start_share=0.3826,
    length_deciles=(17.0, 26.0, 26.0, 26.0, 26.0, 30.0, 41.8, 62.2, 68.0, 80.0, 184.0),
    tail_deciles=(10.0, 10.0, 10.0, 10.0, 10.0, 80.0, 91.0, 154.0, 202.0, 732.6, 6323.0),
)


@dataclass(frozen=True)
class RunFacts:
    """The profiles a generated run's facts follow (``scenarios.swe_like.generate_run``'s ``facts``):
    what is provided and needed, and, when given, what goes stale and where errors sit."""

    provided: FactProfile = FACTS
    supersession: SupersessionProfile | None = None
    error_spans: ErrorSpanProfile | None = None


REAL_RUNS = RunFacts(FACTS, SUPERSESSION, ERROR_SPANS)  # the embedded suite's: all as the real runs


def obs_fact(turn: int) -> str:
    """The fact turn ``turn``'s observation provides (its event index in the SWE-like layout)."""
    return f"obs@{2 * turn + 3}"


def draw_facts(turns: int, rng: np.random.Generator, p: FactProfile | None) -> tuple[list, list]:
    """Per turn: the kind of the fact its observation provides (None: none), and the earlier turns whose
    observations its action needs."""
    if p is None:
        return [None] * turns, [()] * turns
    gives = rng.random(turns) < p.provide_share
    kinds = np.where(rng.random(turns) < p.error_share, "error", "path")
    provides = [str(k) if g else None for g, k in zip(gives, kinds, strict=True)]
    cum = np.cumsum(p.need_counts)
    draws, u = rng.random(turns), rng.random((turns, len(p.need_counts)))
    deciles = np.linspace(0.0, 1.0, len(p.distance_deciles))
    needs: list[tuple[int, ...]] = []
    for k in range(turns):
        count = int(np.searchsorted(cum, draws[k], side="right")) + 1 if draws[k] < cum[-1] else 0
        chosen = []
        for i in range(count):
            back = int(round(float(np.interp(u[k, i], deciles, p.distance_deciles))))
            j = k - 1 - back  # the observation of turn j answers action j; action k sees turns < k
            while j >= 0 and provides[j] is None:
                j -= 1
            if j >= 0 and j not in chosen:
                chosen.append(j)
        needs.append(tuple(sorted(chosen)))
    return provides, needs


def draw_supersession(
    provides: Sequence[str | None], rng: np.random.Generator, p: SupersessionProfile | None
) -> list[tuple[int, ...]]:
    """Per turn: the earlier turns whose facts its observation supersedes (module docstring). The last
    turn's observation (the submission's diff) supersedes nothing, as in the real runs."""
    turns = len(provides)
    out: list[list[int]] = [[] for _ in range(turns)]
    if p is None:
        return [()] * turns
    chance, u = rng.random(turns), rng.random(turns)
    for j, kind in enumerate(provides):
        if kind is None:
            continue
        share, dec = (p.error_share, p.error_deciles) if kind == "error" else (p.path_share, p.path_deciles)
        room = turns - 2 - j  # turns j+1 .. turns-2 may supersede it
        if chance[j] >= share or room < dec[0]:
            continue
        q = np.linspace(0.0, 1.0, len(dec))
        top = float(np.interp(room, dec, q)) if room < dec[-1] else 1.0  # the quantile of `room` turns
        d = max(1, min(room, int(round(float(np.interp(u[j] * top, q, dec))))))
        out[j + d].append(j)
    return [tuple(s) for s in out]


def draw_error_span(nbytes: int, u: Sequence[float], p: ErrorSpanProfile) -> tuple[int, int]:
    """The byte range ``[start, end)`` of an error line in a result of ``nbytes`` bytes, from three
    uniform draws ``u`` (module docstring)."""
    q = np.linspace(0.0, 1.0, len(p.length_deciles))
    length = min(nbytes, max(1, int(round(float(np.interp(u[1], q, p.length_deciles))))))
    if u[0] < p.at_start_share:
        return 0, length
    tail = int(round(float(np.interp(u[2], np.linspace(0.0, 1.0, len(p.tail_deciles)), p.tail_deciles))))
    end = max(length, nbytes - tail)
    return end - length, end


def standing(system: int, task: int) -> dict[int, tuple[str, str]]:
    """Event index -> (fact, kind) of the standing facts: the system prompt's constraint and the task's
    goal (``sim.information.facts``: every real importer records them; the final answer needs both)."""
    return {system: (f"constraint@{system}", "constraint"), task: (f"goal@{task}", "goal")}


def fact_stats(traces: Sequence[Trace]) -> dict:
    """The fact statistics the embedded suite's README reports beside the real runs': observations
    providing a fact, the error share of those facts, actions needing an observation's fact, path and
    error facts superseded, the share of observation needs on a live (not yet superseded) fact, and of
    the error facts, those whose line opens the result."""
    from sim.information.state import live_needs

    observations = providing = errors = facts = actions = needing = needs = live = 0
    for t in traces:
        provided: set[str] = set()
        for e, alive in zip(t.events, live_needs(t), strict=True):
            if e.kind == "tool_result":
                observations += 1
                providing += bool(e.provides)
                facts += len(e.provides)
                errors += sum(k == "error" for k in e.fact_kinds)
                provided.update(e.provides)
            elif e.kind == "assistant":
                actions += 1
                mine = [f for f in e.needs if f in provided]
                needing += bool(mine)
                needs += len(mine)
                live += sum(f in provided for f in alive)
    sup = supersession_profile(traces)
    spans = error_span_profile(traces)
    return {
        "fact_provide_share": providing / max(observations, 1),
        "fact_error_share": errors / max(facts, 1),
        "actions_needing_share": needing / max(actions, 1),
        "path_superseded_share": sup.path_share,
        "error_superseded_share": sup.error_share,
        "live_need_share": live / max(needs, 1),
        "error_at_start_share": spans.at_start_share,
    }


def _deciles(d: Sequence[float]) -> tuple[float, ...]:
    if not len(d):
        return ()
    q = np.percentile(np.array(d, dtype=np.float64), np.arange(0, 101, 10))
    return tuple(round(float(x), 1) for x in q)


def error_span_profile(traces: Sequence[Trace]) -> ErrorSpanProfile:
    """``ERROR_SPANS`` as measured on ``traces`` (rounded as committed): of the error facts tool results
    provide with a span, the share whose span opens the result, the deciles of the spans' bytes, and of
    the others the deciles of the bytes after the span."""
    starts = lengths = 0
    length: list[int] = []
    tail: list[int] = []
    for t in traces:
        for e in t.events:
            if e.kind != "tool_result" or not e.fact_spans:
                continue
            for j, span in enumerate(e.fact_spans):
                if span is None or not e.fact_kinds or e.fact_kinds[j] != "error":
                    continue
                a, b = span
                lengths += 1
                length.append(b - a)
                if a == 0:
                    starts += 1
                else:
                    tail.append(e.bytes - b)
    return ErrorSpanProfile(round(starts / max(lengths, 1), 4), _deciles(length), _deciles(tail))


def supersession_profile(traces: Sequence[Trace]) -> SupersessionProfile:
    """``SUPERSESSION`` as measured on ``traces`` (rounded as committed): per kind, the share of the
    facts tool results provide that a later event supersedes, and the deciles of the turns between the
    providing observation and the first superseding one."""
    provided = {"path": 0, "error": 0}
    distances: dict[str, list[int]] = {"path": [], "error": []}
    for t in traces:
        at: dict[str, tuple[int, str]] = {}  # fact -> (turn of its observation, kind)
        stale: set[str] = set()
        turn = -1
        for e in t.events:
            if e.kind == "assistant":
                turn += 1
            elif e.kind == "tool_result":
                for j, f in enumerate(e.provides):
                    kind = e.fact_kinds[j] if e.fact_kinds else None
                    if kind in provided and f not in at:
                        at[f] = (turn, kind)
                        provided[kind] += 1
                for f in e.supersedes:
                    if f in at and f not in stale:
                        stale.add(f)
                        distances[at[f][1]].append(turn - at[f][0])

    return SupersessionProfile(
        path_share=round(len(distances["path"]) / max(provided["path"], 1), 4),
        error_share=round(len(distances["error"]) / max(provided["error"], 1), 4),
        path_deciles=_deciles(distances["path"]),
        error_deciles=_deciles(distances["error"]),
    )
