"""``inspect_compaction_auto``: Inspect's ``CompactionAuto`` (inspect-ai 0.3.285): provider-native compaction
first, ``CompactionSummary`` when the provider has none.

Knobs: ``threshold`` 0.9 (Inspect's name and default) and the summary size rule of
``inspect_compaction_summary``. Not modelled: ``instructions`` (summarizer input text only), ``memory``
(acts only with the memory tool).

- Native compaction (the provider's own endpoint, e.g. OpenAI's ``responses.compact``) is opaque and
  provider-specific; ctxsim models the fallback Inspect takes on every provider without one (the oracle's
  mock provider included): exactly ``inspect_compaction_summary`` — same trigger, summary, passes and
  ``compaction-insufficient`` failure. For Anthropic's server-side compaction see
  ``anthropic_server_compaction``.
- Sizing: whole runs are planned for the engine's batch path by ``inspect_handler.plan_handler`` (the
  same ``compaction``; tests/test_plans_inspect.py holds it to ``before_call``).
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.policies.base import register
from sim.policies.inspect_compaction_summary import SummaryKnobs


@register
@dataclass(frozen=True)
class InspectCompactionAuto(SummaryKnobs):
    """Inspect CompactionAuto: native compaction where the provider has it (not modelled), else
    CompactionSummary."""

    name = "inspect_compaction_auto"
    size_grid = {
        "threshold": (0.5, 0.7, 0.8, 0.9, 0.95)
    }  # ``ctxsim size --policy inspect_compaction_auto``'s default grid
    conformance_settings = ({"threshold": 2500, "summary_min_tokens": 10},)
