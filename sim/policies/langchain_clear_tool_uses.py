"""``langchain_clear_tool_uses``: LangChain ``ContextEditingMiddleware`` with ``ClearToolUsesEdit``
(langchain 1.5.2). Held call for call to the installed middleware in a real ``create_agent`` graph by
``make oracle-langchain``.

Knobs (the library's own names and defaults): ``ClearToolUsesEdit``'s ``trigger`` 100,000 tokens,
``clear_at_least`` 0, ``keep`` 3, ``clear_tool_inputs`` false, ``exclude_tools`` [] and ``placeholder``
``[cleared]``; ``ContextEditingMiddleware``'s ``token_count_method`` ``approximate`` | ``model``. The old
names ``trigger_tokens`` and ``token_count`` (``framework`` / ``provider``) are still taken, with a
deprecation warning.

- Trigger: before each model call the middleware counts the request's messages, which are never
  edited in the state, so the count is unedited. ``token_count_method`` ``approximate`` (default, a
  local count): the messages only, no system prompt, no tool specs (ctxsim's per-event sizes stand for
  the approximation). ``model`` (the chat model's count): system prompt, tools and messages, here the
  whole request with the call's residual. It fires when the count exceeds ``trigger`` and, since the
  history only grows, on every call after.
- Kept: the newest ``keep`` tool results (counted over all tool results); results of excluded tools;
  a result whose nearest earlier assistant message did not issue its call (LangChain looks for the call
  only there).
- Transform: older tool results, oldest first, become ``placeholder``; with ``clear_at_least`` > 0 the
  loop stops as soon as at least that many tokens are reclaimed (LangChain's reading of the knob, unlike
  Anthropic's all-or-nothing gate). ``clear_tool_inputs``: LangChain empties the call's arguments; the
  canonical assistant event does not separate text from arguments, so the whole issuing assistant
  event becomes ``[tool input cleared]`` (an over-estimate). Pairing kept (nothing DROPPED).
- ``exclude_tools``: canonical events carry no tool names; a name matches a result whose issuing
  assistant event's text starts with it (null or [] = nothing excluded).
- View per call: the edit is applied to a deep copy of the messages for that one request; the state
  keeps the originals. Every call over the trigger therefore re-clears the same items (a known
  cache-cost issue of the middleware). ctxsim models it by re-issuing the change of every cleared item
  on every such call, so each call's ``first_changed`` is the oldest cleared item: the cache is
  counted as rewritten from there on every call. A call whose count is not over the trigger (the
  model's count moves with the provider's residual, so it can fall back) sends every item as it is:
  what the previous copy cleared is restored.
- Recoverability: originals stay in the agent state but the model has no handle: lost from view.

Plan (``plan_many``, the engine's batch path): the count reads only recorded sizes, so every call's copy
of every run is known before the replay; a run with needs is declined (the loop replays it).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from sim.core.segments import concat, offsets, owners, positions
from sim.core.types import KIND_CODE, ItemState, Trace
from sim.information.state import has_needs, issuer_of
from sim.policies.anthropic_clear_tool_uses import (
    INPUT_PLACEHOLDER,
    MASKED,
    candidates,
    excluded,
    text_size,
    tool_results,
    unedited_tokens,
)
from sim.policies.base import Change, Plan, Plans, Policy, View, check_int, register
from sim.trace.column_links import tool_links
from sim.util.batchmemo import batch_derived
from sim.util.errors import ConfigError

_RESULT, _ASSISTANT = KIND_CODE["tool_result"], KIND_CODE["assistant"]
_INSTRUCTION = np.array([KIND_CODE["system"], KIND_CODE["tools"]], dtype=np.int8)
PLACEHOLDER = "[cleared]"  # LangChain's DEFAULT_TOOL_PLACEHOLDER
TOKEN_COUNT_METHODS = ("approximate", "model")
VERBATIM = ItemState.VERBATIM


@register
@dataclass(frozen=True)
class LangchainClearToolUses(Policy):
    """LangChain ClearToolUsesEdit: a per-call copy with old tool results cleared, re-done every call."""

    trigger: int = 100000
    clear_at_least: int = 0
    keep: int = 3
    clear_tool_inputs: bool = False
    exclude_tools: tuple[str, ...] = field(default_factory=tuple)  # the YAML's []
    placeholder: str = PLACEHOLDER
    token_count_method: str = "approximate"

    name = "langchain_clear_tool_uses"
    plans = True
    size_grid = {
        "trigger": (40000, 60000, 80000, 100000, 150000),
        "keep": (1, 3, 5),
    }  # ``ctxsim size --policy langchain_clear_tool_uses``'s default grid
    acts_before_call = True
    knob_aliases = {
        "trigger_tokens": ("trigger", {}),
        "token_count": ("token_count_method", {"framework": "approximate", "provider": "model"}),
    }
    conformance_settings = (
        {"trigger": 800, "keep": 2},
        {"trigger": 800, "keep": 1, "clear_at_least": 500, "clear_tool_inputs": True},
        {"trigger": 500, "keep": 0, "exclude_tools": ["cmd 1"], "placeholder": "[gone]"},
    )

    def __post_init__(self) -> None:
        name = self.name
        check_int(name, "trigger", self.trigger, 1)
        check_int(name, "keep", self.keep, 0)
        check_int(name, "clear_at_least", self.clear_at_least, 0)
        if not isinstance(self.clear_tool_inputs, bool):
            raise ConfigError(
                f"policy '{name}': clear_tool_inputs={self.clear_tool_inputs!r} is not true or false"
            )
        names = self.exclude_tools
        if names is None:  # the old default: nothing excluded
            names = ()
        if not (isinstance(names, list | tuple) and all(isinstance(x, str) and x for x in names)):
            raise ConfigError(
                f"policy '{name}': exclude_tools={names!r} is not null or a list of non-empty tool names"
            )
        object.__setattr__(self, "exclude_tools", tuple(names))  # frozen and hashable
        if not isinstance(self.placeholder, str):
            raise ConfigError(f"policy '{name}': placeholder={self.placeholder!r} is not a string")
        if self.token_count_method not in TOKEN_COUNT_METHODS:
            raise ConfigError(
                f"policy '{name}': token_count_method={self.token_count_method!r} is not one of "
                f"{', '.join(TOKEN_COUNT_METHODS)}"
            )

    def start(self, trace: Trace) -> dict[int, Change]:
        return {}  # the items the previous call's copy cleared

    def before_call(self, trace: Trace, state: dict[int, Change], view: View, call: int, status=None):
        """The copy of this request; ``plan_many`` restates it for whole runs."""
        changes = self._clears(trace, view, call)
        events = trace.events
        restored = (
            []
            if state.keys() <= changes.keys()  # (as a copy only grows: the list below is empty)
            else [  # cleared on the last copy, not on this one (a model count can fall under the trigger)
                Change(i, VERBATIM, events[i].tokens, events[i].bytes, "restore")
                for i in state
                if i not in changes
            ]
        )
        state.clear()
        state.update(changes)
        if not restored and self._plain():  # ``_clears`` made its dict in ascending index: sorted already
            return list(changes.values())
        return sorted([*changes.values(), *restored])

    def _plain(self) -> bool:
        """Nothing stops, pairs or skips a clear: ``_clears`` takes its per-trace tables."""
        return not (self.clear_at_least or self.clear_tool_inputs or self.exclude_tools)

    def _clears(self, trace: Trace, view: View, call: int) -> dict[int, Change]:
        """This call's copy: item -> its change."""
        counted = unedited_tokens(trace, view, call)
        if self.token_count_method == "approximate":  # the request's messages only
            counted -= instruction_tokens(trace, view.n) + int(trace.arrays.residual[call])
        if counted <= self.trigger:
            return {}
        ptok, pbytes = text_size(trace, self.placeholder)
        if self._plain():
            # the loop below with nothing to stop it, pair or skip: every answered candidate, oldest
            # first, read from per-trace tables (the same dict; a sizing replays it on every call of
            # every setting). Held to the loop by tests/test_policy_tables.py
            results, count, cleared = answered_tables(trace, ptok, pbytes)
            in_view = bisect_left(results, view.n)
            upto = count[in_view - self.keep] if self.keep < in_view else 0
            return dict(cleared[:upto])
        return self._cleared(trace, candidates(trace, view, self.keep), ptok, pbytes)

    def _cleared(
        self, trace: Trace, cands: Sequence[int], ptok: int, pbytes: int, after: list[int] | None = None
    ) -> dict[int, Change]:
        """The clears of candidates ``cands`` (oldest first), in the order made. ``after``, when given,
        gets how many clears the first j candidates made, j = 1, 2, .. until the loop stops: the plan
        reads a call's clears as a prefix of those of every candidate (``_plan_one``)."""
        itok, ibytes = text_size(trace, INPUT_PLACEHOLDER)
        issuers = trace.derived("issuers", issuer_of)
        answered = trace.derived("answered_results", answered_results)
        events = trace.events
        changes: dict[int, Change] = {}
        reclaimed = 0  # against the unedited copy, as the middleware counts
        # the rule; ``answered_tables`` above is its plain case read from tables (held to it by a test)
        for i in cands:
            if self.clear_at_least > 0 and reclaimed >= self.clear_at_least:
                break
            if i in answered and not excluded(trace, self.exclude_tools, i):
                changes[i] = Change(i, MASKED, ptok, pbytes, "clear")
                reclaimed += events[i].tokens - ptok
                a = issuers.get(i)
                if self.clear_tool_inputs and a is not None and a not in changes:
                    changes[a] = Change(a, MASKED, itok, ibytes, "clear-input")
                    reclaimed += events[a].tokens - itok
            if after is not None:
                after.append(len(changes))
        return changes

    # ------------------------------------------------------------------------------------- the plan
    def plan(self, trace: Trace) -> Plan:
        return self.plan_many([trace])[0]

    def plan_many(self, traces: Sequence[Trace]) -> Plans:
        """``before_call``'s decisions for whole runs (held to the loop by tests/test_plans_langchain.py).

        The count a call compares with ``trigger`` reads only recorded sizes (the copy is never kept),
        so it is per-trace: prefix sums at each call's view end. A call over the trigger clears the
        answered results older than the newest ``keep``: with ``_plain`` knobs the first
        ``count[in_view - keep]`` answered results (``answered_tables``), read here for every call of
        every run at once; a call under it after one over restores the last copy's clears. A run whose
        mock model may re-read (a trace with needs) is declined: its requests grow by what it re-reads."""
        if not self._plain():
            return Plans.of([self._plan_one(t) for t in traces])
        b = batch_derived(traces, "langchain_clear_tool_uses", _ClearCalls.of)
        counted = b.approximate if self.token_count_method == "approximate" else b.model
        fires = counted > self.trigger
        fires &= b.planned
        np.subtract(b.in_view, self.keep, out=(k := np.empty_like(b.in_view)))
        np.maximum(k, 0, out=k)
        size = np.where(fires, b.count[b.count_at + k], 0)  # the copy's clears after each call
        before = np.empty_like(size)  # ... and after the call before, in the same run
        before[1:] = size[:-1]
        before[b.first_calls] = 0
        per_call = np.where(fires, size, before)  # under the trigger: the last copy's clears restored
        at = np.repeat(b.answered_at, per_call) + positions(per_call)
        again = np.repeat(fires, per_call)
        ptok = np.array([text_size(t, self.placeholder)[0] for t in traces], dtype=np.int64)
        tokens = np.where(again, np.repeat(ptok[b.run], per_call), b.answered_tokens[at])
        state = np.where(again, int(MASKED), int(VERBATIM))
        runs = np.bincount(b.run, weights=per_call, minlength=len(traces)).astype(np.int64)
        plans = Plans.by_call(per_call, b.local_call, b.answered[at], tokens, state, runs)
        if again.all():
            plans.one_state = int(MASKED)
        if not b.planned.all():
            plans.declined = b.declined
        return plans

    def _plan_one(self, trace: Trace) -> Plan:
        """One run's plan for any knobs: ``_cleared`` of every tool result gives each call's clears as a
        prefix (a stop at ``clear_at_least`` stops them all at the same place, and the candidates only
        grow), so a call's copy is the first ``after[in_view - keep]`` of them."""
        if trace.derived("has_needs", has_needs):
            return Plan((), (), (), (), declined=True)
        ptok, pbytes = text_size(trace, self.placeholder)
        results = trace.derived("tool_results", tool_results)
        after = [0]
        made = list(self._cleared(trace, results, ptok, pbytes, after).values())
        b = _ClearCalls.of([trace])
        counted = (b.approximate if self.token_count_method == "approximate" else b.model).tolist()
        in_view, original = b.in_view.tolist(), trace.arrays.tokens
        call, index, tokens, state = [], [], [], []
        last = 0  # clears of the previous call's copy
        for c, n in enumerate(counted):
            size = after[min(max(in_view[c] - self.keep, 0), len(after) - 1)] if n > self.trigger else 0
            if not (size or last):
                continue
            entries = [(ch.index, ch.tokens, int(MASKED)) for ch in made[:size]]
            entries += [(ch.index, int(original[ch.index]), int(VERBATIM)) for ch in made[size:last]]
            entries.sort()
            call += [c] * len(entries)
            index += [e[0] for e in entries]
            tokens += [e[1] for e in entries]
            state += [e[2] for e in entries]
            last = size
        return Plan(call, index, tokens, state)


def answered_results(trace: Trace) -> frozenset[int]:
    """Tool results LangChain's edit may clear: the nearest assistant event before each issued its call
    (``ClearToolUsesEdit`` looks for the call in that one message and skips the result otherwise)."""
    issuers = issuer_of(trace)
    out, last = set(), None
    for e in trace.events:
        if e.kind == "assistant":
            last = e.index
        elif e.kind == "tool_result" and last is not None and issuers.get(e.index) == last:
            out.add(e.index)
    return frozenset(out)


def answered_tables(trace: Trace, ptok: int, pbytes: int) -> tuple[tuple[int, ...], list[int], list]:
    """Per trace, for ``_clears`` without ``clear_at_least``, ``clear_tool_inputs`` or ``exclude_tools``:
    the tool results ascending (``candidates``' table), how many of the first j of them are answered
    (``answered_results``), and each answered one's ``(index, clear change)`` at this placeholder size,
    ascending: the first ``count[j]`` pairs are the clears of candidates ``results[:j]``."""

    def build(t: Trace) -> tuple[tuple[int, ...], list[int], list]:
        results = t.derived("tool_results", tool_results)
        answered = t.derived("answered_results", answered_results)
        count, cleared = [0], []
        for i in results:
            if i in answered:
                cleared.append((i, Change(i, MASKED, ptok, pbytes, "clear")))
            count.append(len(cleared))
        return results, count, cleared

    return trace.derived(f"langchain_clears:{ptok}:{pbytes}", build)


def answered_flags(trace: Trace, results: np.ndarray) -> np.ndarray:
    """Whether each tool result (``results``, ascending) is in ``answered_results``, read from the kind
    column and the tool links (``sim.trace.column_links``: the columns reader keeps them, so the events
    need not be built) when only assistant events issue calls: then a result's issuer there is
    ``issuer_of``'s. Otherwise from ``answered_results`` itself. Held to it by
    tests/test_plans_langchain.py."""
    kind = trace.arrays.kind
    links = trace.derived("tool_links", tool_links)
    if links.ids_n[kind != _ASSISTANT].any():  # another event issues calls: the events' own rule
        ok = trace.derived("answered_results", answered_results)
        return np.fromiter((i in ok for i in results.tolist()), bool, len(results))
    latest = np.maximum.accumulate(np.where(kind == _ASSISTANT, np.arange(len(kind)), -1))
    issuer = links.issuer[results]
    return (issuer >= 0) & (issuer == latest[results])


def _instruction_prefix(trace: Trace) -> list[int]:
    out = [0]
    for e in trace.events:
        out.append(out[-1] + (e.tokens if e.kind in ("system", "tools") else 0))
    return out


def instruction_tokens(trace: Trace, n: int) -> int:
    """Tokens of the system prompt and tool specs among events [0, n): the agent's system message."""
    return trace.derived("instruction_prefix", _instruction_prefix)[n]


class _ClearCalls(NamedTuple):
    """What every setting's plan reads of a batch of runs, laid end to end: per call, the two counts
    the trigger may read and the tool results in view; per run, its answered results (ascending), their
    recorded tokens and how many of its first j tool results are answered (``answered_tables``)."""

    approximate: np.ndarray  # per call: the messages' recorded tokens (``token_count_method`` approximate)
    model: np.ndarray  # ... the whole request's (model)
    in_view: np.ndarray  # ... tool results in view
    count_at: np.ndarray  # ... where its run's answered counts start in ``count``
    answered_at: np.ndarray  # ... where its run's answered results start in ``answered``
    run: np.ndarray  # ... its run
    local_call: np.ndarray  # ... its number within its run
    first_calls: np.ndarray  # each run's first call (runs with calls)
    planned: np.ndarray  # per call: its run is planned (no needs)
    declined: np.ndarray  # per run: has needs
    count: np.ndarray  # per run, laid end to end: answered among its first j tool results, j = 0 ..
    answered: np.ndarray  # per run: its answered tool results, ascending
    answered_tokens: np.ndarray  # ... their recorded tokens

    @classmethod
    def of(cls, traces: Sequence[Trace]) -> _ClearCalls:
        approximate, model, in_view, count, answered, declined, n_results = [], [], [], [], [], [], []
        for t in traces:
            a = t.arrays
            ends = a.view_end
            results = np.flatnonzero(a.kind == _RESULT)  # ``tool_results``, from the kind column
            instruction = np.zeros(len(a.tokens) + 1, dtype=np.int64)  # ``_instruction_prefix``
            np.cumsum(np.where(np.isin(a.kind, _INSTRUCTION), a.tokens, 0), out=instruction[1:])
            approximate.append(a.prefix[ends] - instruction[ends])
            model.append(a.prefix[ends] + a.residual)
            in_view.append(results.searchsorted(ends))  # bisect_left, as ``candidates``
            flags = answered_flags(t, results)
            count.append(np.concatenate(([0], np.cumsum(flags, dtype=np.int64))))
            answered.append(results[flags])
            n_results.append(len(results))
            declined.append(t.derived("has_needs", has_needs))
        n_calls = np.array([len(t.arrays.view_end) for t in traces], dtype=np.int64)
        n_answered = np.array([len(x) for x in answered], dtype=np.int64)
        run = owners(n_calls)
        answered_flat = concat(answered)
        tokens = concat([t.arrays.tokens for t in traces])
        n_events = np.array([len(t.arrays.tokens) for t in traces], dtype=np.int64)
        no_needs = ~np.array(declined, dtype=bool)
        starts = offsets(n_calls)
        return cls(
            concat(approximate),
            concat(model),
            concat(in_view),
            offsets(np.array(n_results, dtype=np.int64) + 1)[run],
            offsets(n_answered)[run],
            run,
            positions(n_calls),
            starts[n_calls > 0],
            no_needs[run],
            ~no_needs,
            concat(count),
            answered_flat,
            tokens[answered_flat + np.repeat(offsets(n_events), n_answered)],
        )
