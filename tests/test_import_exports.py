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


# ------------------------------------------------------------------------------------------ linear time
def _windowed(n: int) -> list[tuple[list[dict], dict]]:
    """n calls of one run whose requests hold the task and the latest round trips only (a trimming
    agent): each request stays short while the conversation grows, so hiding must not rescan it."""
    msgs = [{"role": "user", "content": "task"}]
    out = []
    for i in range(n):
        sent = msgs[:1] + msgs[-4:] if len(msgs) > 5 else list(msgs)
        call = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"c{i}",
                    "type": "function",
                    "function": {"name": "read", "arguments": f'{{"p": "f{i}"}}'},
                }
            ],
        }
        out.append((sent, call))
        msgs = msgs + [call, {"role": "tool", "tool_call_id": f"c{i}", "content": f"id_{i} value {i * 7}"}]
    return out


def _otel(n: int, path: Path) -> None:
    import json

    spans = []
    for i, (sent, call) in enumerate(_windowed(n)):
        attrs = {
            "gen_ai.operation.name": {"stringValue": "chat"},
            "gen_ai.conversation.id": {"stringValue": "one-run"},
            "gen_ai.usage.input_tokens": {"intValue": str(100 + i)},
            "gen_ai.input.messages": {"stringValue": json.dumps(sent)},
            "gen_ai.output.messages": {"stringValue": json.dumps([call])},
        }
        spans.append(
            {
                "traceId": "ab" * 16,
                "spanId": f"{i + 1:016x}",
                "name": "chat",
                "startTimeUnixNano": str(1_700_000_000_000_000_000 + i * 10**6),
                "attributes": [{"key": k, "value": v} for k, v in attrs.items()],
            }
        )
    path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}))


def _langfuse(n: int, path: Path) -> None:
    import json

    obs = [
        {
            "id": f"o{i:06d}",
            "traceId": "t",
            "type": "GENERATION",
            "startTime": f"2025-01-01T00:{i // 60000 % 60:02d}:{i // 1000 % 60:02d}.{i % 1000:03d}Z",
            "input": sent,
            "output": call,
            "usageDetails": {"input": 100 + i, "output": 5},
        }
        for i, (sent, call) in enumerate(_windowed(n))
    ]
    path.write_text(json.dumps({"data": obs}))


def _langsmith(n: int, path: Path) -> None:
    import json

    lines = [
        json.dumps(
            {
                "id": f"r{i:06d}",
                "trace_id": "t",
                "run_type": "llm",
                "start_time": f"2025-01-01T00:{i // 60000 % 60:02d}:{i // 1000 % 60:02d}.{i % 1000:03d}Z",
                "inputs": {"messages": sent},
                "outputs": {"choices": [{"message": call}]},
                "prompt_tokens": 100 + i,
                "completion_tokens": 5,
            }
        )
        for i, (sent, call) in enumerate(_windowed(n))
    ]
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize(
    ("make", "name"),
    [(_otel, "o.jsonl"), (_langfuse, "lf.json"), (_langsmith, "ls.jsonl")],
    ids=["otel-genai", "langfuse", "langsmith"],
)
def test_import_time_grows_linearly_with_the_calls(tmp_path, make, name):
    import time

    def cpu(n: int) -> float:
        """Best of two, the cyclic collector paused (as tests/test_importer_scaling.py times): its passes
        over the live heap made single runs of a loaded machine jitter past the bound."""
        import gc

        p = tmp_path / f"{n}-{name}"
        make(n, p)
        best = float("inf")
        for _ in range(2):
            gc.collect()
            gc.disable()
            try:
                t0 = time.process_time()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", ImportNotice)
                    (t,) = load_paths([p])
                best = min(best, time.process_time() - t0)
            finally:
                gc.enable()
        assert len(t.calls) == n and [c.input_tokens for c in t.calls[:2]] == [100, 101]
        return best

    small, large = cpu(1000), cpu(4000)
    assert large < 8 * small  # 4x the calls: 4x the time if linear, 16x if quadratic


@pytest.mark.parametrize("name", ["otel_genai_spans.jsonl", "langsmith_runs.jsonl"])
def test_json_lines_are_bounded_by_what_they_hold_together(monkeypatch, name):
    """Each line is within one document's bounds; their sum is bounded too (these importers hold every
    record of a file before grouping them into runs)."""
    import sim.importers.request_log as rl
    from sim.util.errors import TraceError

    monkeypatch.setattr(rl, "MAX_PARSE_BYTES", 40_000)
    with pytest.raises(TraceError, match=rf"{name}: record line \d+: the records up to here would take"):
        list(load_paths([DATA / name]))
