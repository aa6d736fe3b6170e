"""``pipeline``: several policies applied in order, each seeing the view as the previous ones left it
(OpenHands' server default chains ConversationWindow -> BrowserOutput -> LLMSummarizing).

``steps`` is a list of ``{name: REGISTERED_POLICY, KNOB: VALUE, ...}``. Before each call every step's
decisions are applied, in order, to a shadow of the view the next step reads; the engine then applies all
of them. Settle-time transforms: the first step that transforms an arriving event decides it. Overflow
recovery: the first step that recovers. Budgets and the run-status line: every step's. If two steps
summarize before the same call, their summary calls are metered as one (inputs and outputs added).
Trigger, kept set, recoverability and cache effects are those of the steps.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from sim.core.types import Trace
from sim.policies.base import AfterCall, Change, Decision, Policy, RunStatus, SummaryCall, View, register
from sim.util.errors import ConfigError


class _Shadow(View):
    """A copy of the view with earlier steps' changes applied (the engine's view stays untouched)."""

    @classmethod
    def of(cls, view: View) -> _Shadow:
        s = cls()
        s.n, s.total, s.facts = view.n, view.total, view.facts
        s.tokens, s.nbytes, s.state = list(view.tokens), list(view.nbytes), list(view.state)
        return s

    def apply(self, ch: Change) -> None:
        i = ch.index
        self.total += ch.tokens - self.tokens[i]
        self.tokens[i], self.nbytes[i], self.state[i] = ch.tokens, ch.nbytes, ch.state


def _calls(summary) -> list[SummaryCall]:
    return list(summary) if isinstance(summary, list) else [summary]


def _split(result) -> tuple[list[Change], SummaryCall | None]:
    if isinstance(result, Decision):
        return list(result.changes), result.summary
    return list(result or ()), None


@register
@dataclass(frozen=True)
class Pipeline(Policy):
    """Policies chained in order (e.g. OpenHands' ConversationWindow -> BrowserOutput -> LLMSummarizing)."""

    steps: tuple = field(default_factory=tuple)

    name = "pipeline"

    def __post_init__(self) -> None:
        from sim.policies.base import make_policy

        built = []
        for k, step in enumerate(self.steps or ()):
            if not isinstance(step, dict) or not isinstance(step.get("name"), str):
                raise ConfigError(f"policy 'pipeline': steps[{k}] is not a mapping with a policy name")
            knobs = {key: v for key, v in step.items() if key != "name"}
            if step["name"] == "pipeline":
                raise ConfigError("policy 'pipeline': a step may not be a pipeline")
            built.append(make_policy(step["name"], **knobs))
        object.__setattr__(self, "_built", tuple(built))

    def params(self) -> dict[str, Any]:
        """Flat: the steps as one JSON string (result rows hold no nested values)."""
        return {"steps": json.dumps([dict(s) for s in self.steps or ()], sort_keys=True)}

    # the engine's switches are those of the steps
    @property
    def settles(self) -> bool:  # type: ignore[override]
        return any(p.settles for p in self._built)

    @property
    def acts_before_call(self) -> bool:  # type: ignore[override]
        return any(p.acts_before_call for p in self._built)

    @property
    def recovers(self) -> bool:  # type: ignore[override]
        return any(p.recovers for p in self._built)

    @property
    def overflow_retries(self) -> int:  # type: ignore[override]
        return max((p.overflow_retries for p in self._built if p.recovers), default=1)

    @property
    def checks_after_call(self) -> bool:  # type: ignore[override]
        return any(p.checks_after_call for p in self._built)

    @property
    def reports_status(self) -> bool:  # type: ignore[override]
        return any(p.reports_status for p in self._built)

    @property
    def spills(self) -> bool:  # type: ignore[override]
        return any(p.spills for p in self._built)

    # Settings the conformance checker replays: steps the batch path takes together (settle-time cuts or
    # spills, then one planned pre-call step), and two the loop keeps (a plan that reads item states
    # after a settle-time step; two pre-call steps).
    conformance_settings = (
        {
            "steps": (
                {"name": "tool_result_head_tail", "max_chars": 50, "head_chars": 20, "tail_chars": 10},
                {"name": "observation_masking", "n": 1},
            )
        },
        {
            "steps": (
                {"name": "spill_large_results", "threshold_tokens": 100},
                {"name": "observation_masking"},
            )
        },
        {"steps": ({"name": "paginate_large_results"}, {"name": "openhands_observation_masking"})},
        {"steps": ({"name": "observation_masking", "n": 3}, {"name": "openhands_observation_masking"})},
    )

    @property
    def plans(self) -> bool:  # type: ignore[override]
        """The batch path takes a pipeline whose pre-call decisions are one step's plan, and whose
        settle-time steps each look at the event alone (``settle_all``), when that plan holds whatever
        they changed first (``plans_after_settle``). Two pre-call steps go to the loop (the second reads
        the view the first left, which no plan made from the trace alone can know)."""
        acting = [p for p in self._built if p.acts_before_call]
        settling = [p for p in self._built if p.settles and p not in acting]
        return (
            len(acting) == 1
            and acting[0].plans
            and (not settling or acting[0].plans_after_settle)
            and all(type(p).settle_all is not Policy.settle_all for p in self._built if p.settles)
        )

    def plan(self, trace: Trace):
        return next(p for p in self._built if p.acts_before_call).plan(trace)

    def plan_many(self, traces):
        return next(p for p in self._built if p.acts_before_call).plan_many(traces)

    def settle_all(self, trace: Trace) -> list[Change] | None:
        """Every step's settle-time changes, the first step's where two change one event (as ``settle``
        decides), when each settling step gives them all at once; else None (asked per event)."""
        settling = [p for p in self._built if p.settles]
        if not settling or any(type(p).settle_all is Policy.settle_all for p in settling):
            return None
        if len(settling) == 1:
            return settling[0].settle_all(trace)
        first: dict[int, Change] = {}
        for p in settling:
            for ch in p.settle_all(trace) or ():
                first.setdefault(ch.index, ch)
        return [first[i] for i in sorted(first)]

    def settle_key(self) -> str | None:
        """The settling steps' keys, in order (None if one has none): the other steps settle nothing."""
        keys = [p.settle_key() for p in self._built if p.settles]
        return None if not keys or None in keys else "pipeline:" + "|".join(keys)  # type: ignore[arg-type]

    def start(self, trace: Trace) -> list:
        return [p.start(trace) for p in self._built]

    @property
    def persists_compaction(self) -> bool:
        """A conversation keeps the steps' compaction only if every step keeps its own."""
        return all(p.persists_compaction for p in self._built)

    def start_run(self, trace: Trace, state: list, run: int, view: View, persisted: bool) -> list:
        return [p.start_run(trace, s, run, view, persisted) for p, s in zip(self._built, state, strict=True)]

    def settle(self, trace: Trace, state: list, index: int, view: View) -> Change | None:
        for p, st in zip(self._built, state, strict=True):
            if p.settles and (ch := p.settle(trace, st, index, view)) is not None:
                return ch
        return None

    def reread_bound(self, trace: Trace, index: int) -> Change | None:
        """The first settling step's bound that applies (as ``settle``: the first step's change wins)."""
        for p in self._built:
            if p.settles and (ch := p.reread_bound(trace, index)) is not None:
                return ch
        return None

    def _chain(self, hook: str, trace: Trace, state: list, view: View, call: int, status: RunStatus):
        shadow, changes, summary, acted = None, [], None, False
        for p, st in zip(self._built, state, strict=True):
            if hook == "before_call" and not p.acts_before_call:
                continue
            if hook == "on_overflow" and not p.recovers:
                continue
            shadow = shadow or _Shadow.of(view)
            result = getattr(p, hook)(trace, st, shadow, call, status)
            if hook == "on_overflow" and result is None:
                continue
            acted = True
            if isinstance(result, Decision) and result.stop is not None:
                return Decision(changes, summary, result.stop)
            step_changes, step_summary = _split(result)
            for ch in step_changes:
                shadow.apply(ch)
            changes.extend(step_changes)
            if step_summary is not None:
                if summary is None:
                    summary = step_summary
                elif isinstance(summary, list) or isinstance(step_summary, list):  # passes stay calls
                    summary = [*_calls(summary), *_calls(step_summary)]
                else:
                    summary = SummaryCall(
                        summary.input_tokens + step_summary.input_tokens,
                        summary.output_tokens + step_summary.output_tokens,
                    )
            if hook == "on_overflow":
                break
        if hook == "on_overflow" and not acted:
            return None
        return Decision(changes, summary) if summary is not None else changes

    def before_call(self, trace: Trace, state: list, view: View, call: int, status: RunStatus):
        return self._chain("before_call", trace, state, view, call, status)

    def on_overflow(self, trace: Trace, state: list, view: View, call: int, status: RunStatus):
        return self._chain("on_overflow", trace, state, view, call, status)

    def status_tokens(self, trace: Trace, state: list, call: int, status: RunStatus) -> int:
        return sum(
            p.status_tokens(trace, st, call, status)
            for p, st in zip(self._built, state, strict=True)
            if p.reports_status
        )

    def after_call(
        self, trace: Trace, state: list, view: View, call: int, status: RunStatus
    ) -> AfterCall | None:
        for p, st in zip(self._built, state, strict=True):
            if p.checks_after_call and (verdict := p.after_call(trace, st, view, call, status)) is not None:
                if verdict.stop is not None or verdict.warnings:
                    return verdict
        return None

    def bound_violations(self, trace: Trace, view: View) -> list[str]:
        return []
