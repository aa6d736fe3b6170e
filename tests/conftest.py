"""Shared fixtures. Real traces come from CTXSIM_TRACES (default ../shared/traces beside the repo)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from sim.util.paths import traces_dir  # noqa: E402

MINI = traces_dir() / "mini-swe-agent-gemini3pro" / "trajs"


@pytest.fixture(scope="session")
def mini_dir() -> Path:
    if not MINI.is_dir():
        pytest.skip(f"real traces not found at {MINI} (set CTXSIM_TRACES to the shared traces folder)")
    return MINI


@pytest.fixture(scope="session")
def mini_traces(mini_dir):
    from sim.importers import load_paths

    return list(load_paths([mini_dir]))
