"""Where ctxsim finds its own files and the shared real traces. Repo-relative: an editable install."""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent.parent  # sim/
REPO = PACKAGE_DIR.parent
CONF_DIR = REPO / "conf"
EMBEDDED_SUITE = REPO / "scenarios" / "suite"


def traces_dir() -> Path:
    """The shared real traces: CTXSIM_TRACES, default ../shared/traces beside the repository."""
    return Path(os.environ.get("CTXSIM_TRACES", REPO.parent / "shared" / "traces"))
