"""``sim.report.make``: a tiny seed_engine sweep (2 × 2 grid, 3 closed-loop traces) rendered as Markdown +
HTML."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sim.importers import load_paths
from sim.report.make import make_report
from sim.sweep.execute import SweepSpec, run_sweep
from sim.trace.io import write_traces
from sim.util.errors import ConfigError
from sim.util.paths import EMBEDDED_SUITE

FIGURES = (
    "cost_vs_completion.png",
    "grid_heatmaps.png",
    "cumulative_input_tokens.png",
    "view_composition.png",
    "working_set.png",
)


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory) -> tuple[Path, Path, Path]:
    tmp = tmp_path_factory.mktemp("report")
    scenario = tmp / "three.jsonl"
    traces = list(load_paths([EMBEDDED_SUITE / "closed_loop.jsonl"]))[:3]
    assert len(traces) == 3
    write_traces(traces, scenario)
    grid = run_sweep(
        SweepSpec(
            policy="seed_engine",
            grid=("policy.context_token_limit=16000,32000", "policy.keep_recent_tokens=4000,8000"),
            scenario=str(scenario),
            pricing="claude-sonnet-4-5",
            results=str(tmp / "sw"),
        ),
        workers=1,
        progress=False,
    )
    base = run_sweep(
        SweepSpec(
            policy="raw", scenario=str(scenario), pricing="claude-sonnet-4-5", results=str(tmp / "raw")
        ),
        workers=1,
        progress=False,
    )
    return grid, base, tmp


@pytest.fixture(scope="module")
def report(sweeps) -> tuple[Path, Path]:
    grid, _, tmp = sweeps
    return make_report([grid], tmp / "out")


def test_files_and_figures_exist(report):
    md, page = report
    assert md.is_file() and page.is_file()
    for name in FIGURES:
        png = md.parent / "figures" / name
        assert png.is_file() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"](figures/{name})" in md.read_text(encoding="utf-8")


def test_html_is_self_contained(report):
    _, page = report
    text = page.read_text(encoding="utf-8")
    assert text.count('src="data:image/png;base64,') == len(FIGURES)
    assert 'src="http' not in text and "file:" not in text
    assert not re.search(r'(src|href)="(?!data:)', text)
    assert "<table>" in text and "Pareto" in text


def test_markdown_table_lists_every_setting(report):
    md, _ = report
    text = md.read_text(encoding="utf-8")
    rows = [line for line in text.splitlines() if re.match(r"\| S\d+ \|", line)]
    assert len(rows) == 4
    for limit in (16000, 32000):
        for keep in (4000, 8000):
            label = f"seed_engine context_token_limit={limit} keep_recent_tokens={keep}"
            assert any(label in r for r in rows), label
    assert all(r.count("|") == 12 for r in rows)  # 11 columns
    assert "No sizing verdict" in text  # no no-compaction setting in this sweep
    assert "Baseline vs candidate" not in text  # one results file: no comparison


def test_markdown_and_figures_are_byte_stable(sweeps, report):
    grid, _, tmp = sweeps
    md1, _ = report
    md2, _ = make_report([grid], tmp / "again")
    assert md1.read_bytes() == md2.read_bytes()
    for name in FIGURES:
        assert (md1.parent / "figures" / name).read_bytes() == (md2.parent / "figures" / name).read_bytes()


def test_baseline_vs_candidate(sweeps):
    grid, base, tmp = sweeps
    md, page = make_report([base, grid], tmp / "cmp")
    text = md.read_text(encoding="utf-8")
    assert "## Baseline vs candidate" in text
    # raw has one setting: every candidate setting is compared with it, metric by metric
    assert text.count("vs S1 [1] raw (defaults)") == 4
    assert "| mean cost per run (USD) |" in text and "| answer completion (share of runs) |" in text
    assert re.search(r"\| mean cumulative input tokens \| [\d,]+ \| [\d,]+ \| -\d+\.\d% \|", text)
    assert "[2] seed_engine context_token_limit=16000 keep_recent_tokens=4000" in text
    assert "Baseline vs candidate" in page.read_text(encoding="utf-8")


def test_trace_choice_and_unknown_trace(sweeps):
    grid, _, tmp = sweeps
    md, _ = make_report([grid], tmp / "one", trace_id="grep_and_read")
    assert "Trace `grep_and_read`" in md.read_text(encoding="utf-8")
    with pytest.raises(ConfigError, match="no-such-trace"):
        make_report([grid], tmp / "bad", trace_id="no-such-trace")


def test_missing_results_file(tmp_path):
    with pytest.raises(ConfigError, match="no such file"):
        make_report([tmp_path / "nowhere"], tmp_path / "out")


def test_no_grid_note(sweeps):
    _, base, tmp = sweeps
    md, page = make_report([base], tmp / "rawonly")
    text = md.read_text(encoding="utf-8")
    assert "_Not drawn: the results hold no 2-D grid" in text
    assert page.read_text(encoding="utf-8").count("data:image/png;base64,") == 4


def test_mixed_versions_are_refused_unless_allowed(sweeps, tmp_path, capsys):
    import pandas as pd

    from sim.cli import main

    grid, base, _ = sweeps
    df = pd.read_parquet(base / "results.parquet" if base.is_dir() else base)
    df["ctxsim_version"] = "0.0.1"
    other = tmp_path / "old.parquet"
    df.to_parquet(other)
    assert main(["report", str(other), str(grid), "-o", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "report: the results mix ctxsim versions 0.0.1, " in err and "--allow-mixed" in err
    assert not (tmp_path / "r").exists()
    assert main(["report", str(other), str(grid), "-o", str(tmp_path / "r"), "--allow-mixed"]) == 0
    text = (tmp_path / "r" / "report.md").read_text(encoding="utf-8")
    assert "**Mixed (--allow-mixed): ctxsim versions 0.0.1, " in text


def test_the_verdict_section_when_compaction_is_required_under_two_behaviours(sweeps, capsys):
    """A window the runs overflow without compaction, swept under two mock behaviours: the report's
    verdict is compaction-required (ranked by each setting's worst completion over the behaviours), and
    it shows each behaviour's own verdict and each setting's completion under each."""
    import pandas as pd

    from sim.analysis.verdict import recommendation_line, verdict_from_frame
    from sim.cli import main

    _, _, tmp = sweeps
    path = run_sweep(
        SweepSpec(
            policy="seed_engine",
            grid=(
                "policy.context_token_limit=null,8000,16000",
                "policy.keep_recent_tokens=2000,4000",
                "model.on_missing=refetch,fail",
                "model.window=20000",
            ),
            scenario=str(tmp / "three.jsonl"),
            pricing="claude-sonnet-4-5",
            results=str(tmp / "tight"),
        ),
        workers=1,
        progress=False,
    )
    df = pd.read_parquet(path)
    rec = verdict_from_frame(df, str(path), "seed_engine")
    assert rec["baseline"]["overflow_runs"] > 0 and rec["cost_reference"] is None  # a sweep has none
    assert rec["verdict"] in ("compaction-required", "no-setting-qualifies")
    assert [(x["on_missing"], x["summarizer"]) for x in rec["sensitivity"]] == [
        ("refetch", "extractive"),
        ("fail", "extractive"),
    ]
    assert isinstance(rec["sensitivity_holds"], bool)
    assert len(rec["sensitivity"][0]["grid"]) == rec["settings"]
    out = tmp / "tight_report"
    assert main(["report", str(path), "-o", str(out)]) == 0
    printed = [x for x in capsys.readouterr().out.splitlines() if x.startswith("recommended: ")]
    assert printed == [recommendation_line(rec)]
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "| on_missing | summarizer | verdict | recommended | ships |" in md
    assert "| setting | refetch/extractive | fail/extractive | worst |" in md
    if rec["verdict"] == "compaction-required":
        assert f"Compaction required: without compaction {rec['baseline']['overflow_runs']} of 3 runs" in md


def test_cheapest_puts_settings_with_overflows_last():
    import pandas as pd

    from sim.report.settings import ReportSetting, cheapest

    def setting(sid: str, cost: float, finishes: list[str]) -> ReportSetting:
        frame = pd.DataFrame({"finish_reason": finishes})
        summary = {"mean_cost_usd": cost, "cumulative_input_tokens": 100, "runs": len(finishes)}
        return ReportSetting(sid, 0, "p", "", sid, summary, {}, frame)

    cut = setting("S1", 0.01, ["completed", "context-overflow"])  # cheap because a run stopped early
    full = [setting("S2", 0.05, ["completed"] * 2), setting("S3", 0.03, ["completed"] * 2)]
    assert [s.sid for s in cheapest([cut, *full], 2)] == ["S3", "S2"]
    assert [s.sid for s in cheapest([cut, *full], 3)] == ["S3", "S2", "S1"]
