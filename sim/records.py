"""What a replay produces. Records are the truth; tables and metrics are derived from them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

# Per-call columns, in order. One array each (never one object per call).
CALL_COLUMNS = (
    "call",  # index of the call in the run
    "input_tokens",  # what the request costs as input: view + residual
    "output_tokens",
    "view_tokens",  # sum of the sizes of the items in view
    "residual_tokens",  # the recorded call's provider residual, carried into any view
    "recorded_input_tokens",  # what the recorded run's provider reported (-1 unknown)
    "view_items",  # events in the store at this call
    "first_changed",  # first event index a pre-call transform changed (-1 none): the cache seam
    "items_changed",  # items the policy changed before this call
)


@dataclass(frozen=True)
class RunRecord:
    """One (trace, policy, model) replay."""

    trace_id: str
    trace_hash: str
    policy: str
    params: dict[str, Any]
    model: str
    finish_reason: str
    calls: dict[str, np.ndarray] = field(repr=False)
    item_state: np.ndarray = field(repr=False)  # final state of every item (ItemState codes)

    @property
    def n_calls(self) -> int:
        return len(self.calls["call"])

    def calls_frame(self):
        """Per-call table as a pandas DataFrame, with the run's identity columns in front."""
        import pandas as pd

        df = pd.DataFrame({c: self.calls[c] for c in CALL_COLUMNS})
        df.insert(0, "policy", self.policy)
        df.insert(0, "trace_id", self.trace_id)
        return df
