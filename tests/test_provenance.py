"""Where a timing was measured (``sim.util.provenance``): the commit of the code that ran, dirty or not,
the libraries in use, the machine and its load; and ``ctxsim bench`` saying so beside its figures."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from sim.util import provenance

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def git(where, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=where, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip


@needs_git
def test_the_commit_is_the_checkouts_and_says_when_the_tree_differs(tmp_path):
    repo = tmp_path / "checkout"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / ".gitignore").write_text("ignored/\n")
    (repo / "a.py").write_text("x = 1\n")
    git(repo, "add", ".gitignore", "a.py")
    git(repo, "commit", "-q", "-m", "one")
    head = git(repo, "rev-parse", "HEAD")
    assert provenance.commit(repo) == head and len(head) == 40
    (repo / "ignored").mkdir()
    (repo / "ignored" / "out.txt").write_text("results\n")
    assert provenance.commit(repo) == head  # ignored files are not the code
    (repo / "b.py").write_text("y = 2\n")
    assert provenance.commit(repo) == head + "+dirty"  # an untracked file may be imported
    (repo / "b.py").unlink()
    (repo / "a.py").write_text("x = 2\n")
    assert provenance.commit(repo) == head + "+dirty"
    git(repo, "commit", "-q", "-am", "two")
    assert provenance.commit(repo) == git(repo, "rev-parse", "HEAD") != head


@needs_git
def test_no_commit_outside_the_top_of_a_work_tree(tmp_path):
    """A folder that is no repository, or one inside another repository (site-packages in someone's
    project), has no commit of ctxsim's code: ``unknown``, not the enclosing repository's."""
    assert provenance.commit(tmp_path / "absent") == "unknown"
    assert provenance.commit(tmp_path) == "unknown"
    git(tmp_path, "init", "-q")
    (tmp_path / "site-packages").mkdir()
    git(tmp_path, "commit", "-q", "--allow-empty", "-m", "theirs")
    assert provenance.commit(tmp_path / "site-packages") == "unknown"
    assert provenance.commit(tmp_path) == git(tmp_path, "rev-parse", "HEAD")


def test_no_commit_without_git(monkeypatch):
    monkeypatch.setenv("PATH", "")
    assert provenance.commit() == "unknown"


def test_the_libraries_are_those_imported_and_those_named():
    import numpy

    got = provenance.library_versions(also=("no-such-distribution-xyz",))
    assert got["numpy"] == numpy.__version__
    assert got["no-such-distribution-xyz"] == "not installed"
    assert "ctxsim" not in got and "setuptools" not in got  # the commit says which ctxsim
    from importlib.metadata import packages_distributions

    imported = {d for top, ds in packages_distributions().items() if top in sys.modules for d in ds}
    assert set(got) - {"no-such-distribution-xyz"} <= imported
    assert ("ruff" in got) == ("ruff" in sys.modules)  # installed, and imported by no test
    assert list(got) == sorted(got, key=str.lower)


def test_the_record_and_its_two_lines():
    p = provenance.start(also=("numpy",))
    d = p.finish()
    assert p.finish() is d  # taken once: the end is the end of the measurement
    assert set(d) == {
        "commit", "ctxsim", "python", "libraries", "platform", "cpu", "cores", "cores_usable",
        "load_start", "load_end",
    }  # fmt: skip
    assert d["commit"] == provenance.commit() and d["python"].endswith(sys.version.split()[0])
    assert d["cores"] >= d["cores_usable"] >= 1 and d["cpu"]
    for load in (d["load_start"], d["load_end"]):
        assert load is None or (len(load) == 3 and all(v >= 0 for v in load))
    json.dumps(d, allow_nan=False)
    first, second = p.text().split("\n")
    assert (
        first.startswith(f"provenance: commit {d['commit']} (ctxsim ")
        and f"numpy {d['libraries']['numpy']}" in first
    )
    assert second.startswith(f"machine: {d['platform']}; {d['cpu']}; {d['cores']} cores")
    assert "load average (1/5/15 min) " in second and second.endswith(" at end")


def test_bench_puts_it_beside_its_figures(capsys):
    from sim.cli import main

    argv = ["bench", "--policy", "raw", "--corpus", "embedded", "--repeats", "1"]
    assert main([*argv, "--format", "json"]) == 0
    (row,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert row["policy"] == "raw" and row["provenance"]["commit"] == provenance.commit()
    assert row["provenance"]["libraries"]["numpy"]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-2].startswith("provenance: commit ") and lines[-1].startswith("machine: ")
