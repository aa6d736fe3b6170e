"""The three observability-export formats together: each sample is claimed by its own format only, no
shared real trace is claimed by them, and a folder of the samples imports every run."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import pytest

from sim.importers import get_importer, load_paths, registered, sniffs
from sim.importers.common import ImportNotice
from sim.util.paths import traces_dir

DATA = Path(__file__).parent / "data" / "exports"
OURS = ("otel-genai", "langfuse", "langsmith")
SAMPLES = {
    "otel_genai_spans.jsonl": "otel-genai",
    "otel_genai_events.jsonl": "otel-genai",
    "langfuse_observations.json": "langfuse",
    "langfuse_trace.json": "langfuse",
    "langsmith_runs.jsonl": "langsmith",
}


def test_each_sample_is_claimed_by_its_own_format_only():
    for name, fmt in SAMPLES.items():
        p = DATA / name
        claimed = [i.name for i in registered().values() if not i.folder and sniffs(i, p)]
        assert claimed == [fmt], name


def test_no_shared_real_trace_is_claimed():
    root = traces_dir()
    if not root.is_dir():
        pytest.skip(f"real traces not found at {root}")
    imps = [get_importer(n) for n in OURS]
    files = [p for ext in ("*.json", "*.jsonl") for p in root.rglob(ext) if p.is_file()]
    assert files
    assert [p for p in files if any(sniffs(i, p) for i in imps)] == []


def test_a_folder_of_samples_imports_every_run(tmp_path):
    for name in SAMPLES:
        shutil.copy(DATA / name, tmp_path / name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ImportNotice)
        traces = list(load_paths([tmp_path]))
    assert sorted({t.source_format for t in traces}) == sorted(OURS)
    assert len(traces) == 2 + 2 + 2 + 1 + 2
