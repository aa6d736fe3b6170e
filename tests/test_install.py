"""The wheel users install: built from this tree, installed (not editable) into a fresh virtual environment
outside the checkout, and run from another folder. Every other test imports ``sim`` from the checkout, so
only this one sees a file the wheel forgets (a subpackage, ``conf/``, the embedded suite): ``demo`` then
exits 2 for a user while the rest of the suite stays green.

Slow (about two minutes, most of it pip installing the dependencies): ``make test-all`` and CI run it.
It skips only when pip cannot reach the package index to build or install; any other failure fails.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent
# what a wheel is built from: a copy, so the build never writes build/ or *.egg-info into the checkout and
# never picks up a stale build/lib from an earlier one
SOURCES = ("pyproject.toml", "setup.py", "README.md", "sim", "scenarios", "conf")
# pip's words when the index is out of reach: the only failures that skip
OFFLINE = (
    "No matching distribution found",
    "Could not find a version that satisfies the requirement",
    "Failed to establish a new connection",
    "Temporary failure in name resolution",
    "Network is unreachable",
)
PRICED = ("--model", "claude-sonnet-4-5")  # the embedded suite's model ('synthetic') has no price


def _env() -> dict[str, str]:
    """The environment of a user's shell: nothing pointing into the checkout or its venv."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env.update(HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    return env


def _pip(args: list[str], what: str, timeout: int) -> None:
    """Run pip; skip when the index cannot be reached, fail on anything else."""
    proc = subprocess.run(args, capture_output=True, text=True, env=_env(), timeout=timeout)
    if proc.returncode == 0:
        return
    tail = (proc.stdout + proc.stderr)[-3000:]
    if any(words in tail for words in OFFLINE):
        pytest.skip(f"{what}: pip cannot reach the package index (offline?):\n{tail}")
    pytest.fail(f"{what} failed (exit {proc.returncode}):\n{tail}")


def _run(argv: list[str | Path], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(a) for a in argv], cwd=cwd, env=_env(), capture_output=True, text=True, timeout=600
    )


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh venv holding only the wheel and its dependencies: its bin/ folder."""
    root = tmp_path_factory.mktemp("install")
    src = root / "src"
    for name in SOURCES:
        from_, to = REPO / name, src / name
        if from_.is_dir():
            shutil.copytree(from_, to, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            to.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(from_, to)
    dist = root / "dist"
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", dist, src]
    _pip(build, "building the wheel", 600)
    (wheel,) = dist.glob("ctxsim-*.whl")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", venv], check=True, env=_env(), timeout=300)
    _pip([venv / "bin" / "python", "-m", "pip", "install", "-q", wheel], "installing the wheel", 1200)
    return venv / "bin"


@pytest.fixture
def elsewhere(tmp_path) -> Path:
    """A folder with nothing of the checkout in it: where the user runs ctxsim."""
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    return folder


def _paths(bin_dir: Path, cwd: Path) -> dict:
    code = (
        "import json, sim, sim.util.paths as p; print(json.dumps({'sim': sim.__file__, "
        "'conf': str(p.CONF_DIR), 'suite': str(p.EMBEDDED_SUITE), 'checkout': p.SOURCE_CHECKOUT}))"
    )
    proc = _run([bin_dir / "python", "-c", code], cwd)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_the_wheel_carries_its_code_conf_and_suite(installed, elsewhere):
    paths = _paths(installed, elsewhere)
    venv = installed.parent
    assert Path(paths["sim"]).is_relative_to(venv), paths  # the wheel's sim, not the checkout's
    assert not paths["checkout"]
    assert Path(paths["conf"]) == Path(paths["sim"]).parent / "conf", paths
    suite = sorted(p.name for p in Path(paths["suite"]).glob("*.jsonl"))
    assert suite == ["closed_loop.jsonl", "swe_like.jsonl"]
    assert _files(Path(paths["conf"])) == _files(REPO / "conf")


def _files(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def test_demo_from_the_wheel_prints_what_the_checkout_prints(installed, elsewhere, tmp_path):
    """``ctxsim demo`` from another folder: exit 0, the report under that folder's reports/latest (never
    in site-packages), and the same lines as the checkout's demo."""
    proc = _run([installed / "ctxsim", "demo"], elsewhere)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "recommended: seed_engine " in proc.stdout
    report = elsewhere / "reports" / "latest"
    assert (report / "report.md").is_file() and (report / "report.html").is_file()
    site = Path(_paths(installed, elsewhere)["sim"]).parent.parent
    assert not (site / "reports").exists() and not (site / "outputs").exists()
    here = tmp_path / "checkout_run"
    here.mkdir()
    ref = _run([sys.executable, "-m", "sim.cli", "demo"], here)
    assert ref.returncode == 0, ref.stderr[-3000:]
    assert proc.stdout == ref.stdout


def test_size_on_the_embedded_suite_gives_the_checkouts_json(installed, elsewhere):
    from sim.commands.demo import DEMO_WINDOW

    suite = _paths(installed, elsewhere)["suite"]  # the installed copy, named the same in both runs
    # at the demo's window, where some runs overflow without compaction: a setting is recommended
    words = [suite, *PRICED, "--window", str(DEMO_WINDOW), "--format", "json"]
    proc = _run([installed / "ctxsim", "size", *words], elsewhere)
    assert proc.returncode == 0, proc.stderr[-3000:]
    ref = _run([sys.executable, "-m", "sim.cli", "size", *words], elsewhere)
    assert ref.returncode == 0, ref.stderr[-3000:]
    assert json.loads(proc.stdout)["recommended"] and proc.stdout == ref.stdout


def test_a_hydra_sweep_from_the_wheel(installed, elsewhere):
    """``ctxsim sweep -m`` composes the wheel's conf/ (Hydra's config folder) and writes where it is told."""
    words = ["scenario=embedded", "policy=observation_masking", "policy.n=3,10", "pricing=claude-sonnet-4-5"]
    proc = _run([installed / "ctxsim", "sweep", "-m", *words, "results.path=sw"], elsewhere)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (elsewhere / "sw" / "results.parquet").is_file()
    rows = _run([installed / "ctxsim", "results", "sw", "--format", "json"], elsewhere)
    assert rows.returncode == 0, rows.stderr[-3000:]
    assert sorted(json.loads(line)["policy.n"] for line in rows.stdout.splitlines()) == [3, 10]
