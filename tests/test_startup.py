"""What a command pays before its first piece of work: the command line imports no numpy, pandas,
pyarrow, Hydra, datasets or matplotlib; a rerun of a finished sweep imports none of them either (it only
checks the receipt); and the versions ctxsim reads without importlib.metadata are the versions
importlib.metadata gives."""

from __future__ import annotations

import importlib.metadata as metadata
import json
import subprocess
import sys
from pathlib import Path

import pytest

from sim.util import versions
from sim.util.paths import EMBEDDED_SUITE, REPO

HEAVY = ("numpy", "pandas", "pyarrow", "hydra", "omegaconf", "datasets", "matplotlib", "yaml", "ray")


def _loaded(code: str, *args: str) -> dict:
    """Run ``code`` in a fresh interpreter; it prints a JSON object (with the heavy modules it loaded)."""
    heavy = f"[m for m in {HEAVY!r} if m in _s.modules]"
    tail = f"; import json as _j, sys as _s; print(_j.dumps({{'heavy': {heavy}}}))"
    proc = subprocess.run(
        [sys.executable, "-c", code + tail, *args], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_importing_the_command_line_loads_nothing_heavy():
    assert _loaded("import sim, sim.cli; sim.cli.build_parser()")["heavy"] == []


def test_the_public_names_still_come_from_sim():
    import sim
    from sim.core.types import Trace
    from sim.engine.dispatch import replay

    assert sim.replay is replay and sim.Trace is Trace
    assert sim.__version__ == metadata.version("ctxsim")
    assert set(sim.__all__) <= set(dir(sim))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        sim.nope  # noqa: B018


def test_a_finished_sweep_rerun_loads_nothing_heavy(tmp_path):
    words = [
        "sweep",
        "policy=observation_masking",
        "policy.n=1,3",
        f"scenario={EMBEDDED_SUITE / 'closed_loop.jsonl'}",
        f"results.path={tmp_path / 'r'}",
        "chunk_size=2",
    ]
    first = subprocess.run(
        [sys.executable, "-m", "sim.cli", *words], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert first.returncode == 0, first.stderr
    code = "import sys; from sim.cli import main; rc = main(sys.argv[1:]); assert rc == 0"
    again = _loaded(code, *words)
    assert again["heavy"] == []
    assert (tmp_path / "r" / "results.receipt.json").is_file()


# -------------------------------------------------------------------------------------------- versions
def test_every_installed_distribution_has_the_version_importlib_metadata_gives(monkeypatch):
    names = sorted({d.metadata["Name"] for d in metadata.distributions()}, key=str)
    assert "ctxsim" in names and "hydra-core" in names
    for cwd in (REPO, Path("/")):  # the repository holds ctxsim.egg-info, which the path's '' finds first
        monkeypatch.chdir(cwd)
        monkeypatch.setattr(versions, "_SEEN", {})
        for name in names:
            assert versions.installed_version(name) == metadata.version(name), name
    assert versions.installed_version("no-such-distribution-here") is None


def _fake_site(tmp_path: Path, monkeypatch, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    monkeypatch.setattr(sys, "path", [str(tmp_path / "a"), str(tmp_path / "b")])
    monkeypatch.setattr(versions, "_SEEN", {})


@pytest.mark.parametrize(
    "files",
    [
        {"a/demo_pkg-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: demo-pkg\nVersion: 1.0\n\nbody"},
        {"b/Demo.Pkg-2.0.dist-info/METADATA": "Name: Demo.Pkg\nversion:   2.0rc1  \n"},  # case, spaces
        # the first folder on the path wins, as importlib.metadata has it
        {
            "a/demo_pkg-3.dist-info/METADATA": "Version: 3\n",
            "b/demo_pkg-4.dist-info/METADATA": "Version: 4\n",
        },
        {"a/demo_pkg.egg-info/PKG-INFO": "Name: demo_pkg\nVersion: 5\n"},  # an editable install's
        {"a/demo_pkg-6.egg-info": "Name: demo_pkg\nVersion: 6\n"},  # an egg-info file
        {"a/demo_pkg-7.dist-info/METADATA": "", "a/demo_pkg-7.dist-info/PKG-INFO": "Version: 7\n"},
        # less plain cases importlib.metadata decides: two in one folder, a folded header, no Version
        {
            "a/demo_pkg-8.dist-info/METADATA": "Version: 8\n",
            "a/demo-pkg-9.dist-info/METADATA": "Version: 9\n",
        },
        {"a/demo_pkg-10.dist-info/METADATA": "Summary: x\n  folded\nVersion: 10\n"},
        {"a/demo_pkg-11.dist-info/METADATA": "Name: demo_pkg\n\nVersion: 11\n"},
    ],
)
def test_versions_agree_with_importlib_metadata_on_odd_installs(tmp_path, monkeypatch, files):
    _fake_site(tmp_path, monkeypatch, files)
    try:
        expected = metadata.version("demo-pkg")
    except metadata.PackageNotFoundError:
        expected = None
    assert versions.installed_version("demo-pkg") == expected
    assert versions.installed_version("demo_pkg") == expected


# ------------------------------------------------------------------------------------- plain key: value
PLAIN = [
    (REPO / "conf" / "sweep" / "default.yaml").read_text(encoding="utf-8"),
    "workers: 2\nchunk_size: 8 # small\n\n# a note \u00e9\ncsv: true\n",
    "a: 0\nb: false\nc: 9999999999999999",
]
NOT_PLAIN = [  # the YAML parser reads them (or refuses them)
    "a: 01",
    "a: 1\na: 2",
    "a:  1",
    " a: 1",
    "a: True",
    "a: -1",
    "a: 1#c",
    "a: 1\t# c",
    "a: 1\r\nb: 2",
    "# \x01\na: 1",
    "a: [1]",
    "",
    "# only a comment",
]


@pytest.mark.parametrize("text", PLAIN)
def test_plain_key_value_lines_read_as_yaml_reads_them(text):
    from sim.config.compose import plain_mapping
    from sim.util.safeyaml import load_yaml

    got = plain_mapping(text)
    assert got is not None
    assert json.dumps(got) == json.dumps(load_yaml(text, "x"))  # keys, order and types


@pytest.mark.parametrize("text", NOT_PLAIN)
def test_anything_else_is_left_to_the_yaml_parser(text):
    from sim.config.compose import plain_mapping

    assert plain_mapping(text) is None


# --------------------------------------------------------------------------------------------- policies
def test_a_policy_by_name_imports_its_own_module_and_is_the_registered_class():
    code = (
        "import sys; from sim.policies.base import policy_class, registered; from sim.config.compose import "
        "registered_name, compose, build_policy\n"
        "p = build_policy(compose('seed_engine', ['policy.context_token_limit=32000']))\n"
        "mods = sorted(m for m in sys.modules if m.startswith('sim.policies.'))\n"
        "names = ['raw', 'observation_masking', 'pipeline', 'nope', 'base', 'inspect_handler']\n"
        "lazy = {n: getattr(policy_class(n) if n not in ('nope', 'base', 'inspect_handler') else None, "
        "'__name__', None) for n in names}\n"
        "reg = registered()\n"
        "print(__import__('json').dumps({'mods': mods, 'name': p.name, 'lazy': lazy, "
        "'full': {n: getattr(reg.get(n), '__name__', None) for n in names}, "
        "'targets': all(registered_name(f'{c.__module__}.{c.__qualname__}') == n for n, c in reg.items())}))"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    # the seed engine's own modules (its messages, rules, state and transcript), no other policy's module
    own = ["sim.policies.seed_engine", "sim.policies.seed_messages", "sim.policies.seed_rules"]
    want = ["sim.policies.base", *own, "sim.policies.seed_state", "sim.policies.seed_transcript"]
    assert got["mods"] == want and got["name"] == "seed_engine"
    assert got["lazy"] == got["full"] and got["targets"]
