"""constraints.txt (``make constraints``) pins every requirement pyproject.toml declares, so a dependency
added without a pin fails here rather than installing whatever version is newest on the day of setup."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
_REQ = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*(.*)$")


def normal(name: str) -> str:
    """PEP 503's normal form: pip matches a constraint to a requirement by it."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements() -> dict[str, list[tuple[str, str]]]:
    """pyproject's requirements by group (``base`` and each extra): (name, specifier) pairs."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    groups = {"base": project["dependencies"], **project.get("optional-dependencies", {})}
    out = {}
    for group, reqs in groups.items():
        pairs = []
        for req in reqs:
            m = _REQ.match(req.split(";")[0].strip())
            assert m, f"pyproject.toml: requirement {req!r} of {group} not understood"
            pairs.append((m.group(1), m.group(2).strip()))
        out[group] = pairs
    return out


def pins(text: str) -> dict[str, str]:
    """constraints.txt's pins by normal name; any line but a comment or ``name==version`` fails."""
    out = {}
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([0-9A-Za-z.+!-]+)", line)
        assert m, f"constraints.txt line {n}: {line!r} is not name==version"
        assert normal(m.group(1)) not in out, f"constraints.txt line {n}: {m.group(1)} pinned twice"
        out[normal(m.group(1))] = m.group(2)
    return out


def release(version: str) -> tuple[int, ...]:
    """The leading release numbers of a version (``2.4.6`` -> (2, 4, 6); ``2026.10.19.post1`` -> its
    first three): enough to compare with pyproject's ``>=`` lower bounds."""
    return tuple(int(p) for p in re.match(r"\d+(?:\.\d+)*", version).group(0).split("."))


def test_every_requirement_of_pyproject_is_pinned_exactly():
    have = pins((REPO / "constraints.txt").read_text(encoding="utf-8"))
    for group, reqs in requirements().items():
        for name, spec in reqs:
            assert normal(name) in have, (
                f"constraints.txt: no pin for {name} ({group}); run `make constraints`"
            )
            for clause in filter(None, (c.strip() for c in spec.split(","))):
                op, bound = re.fullmatch(r"(>=|==|<|<=|>|~=|!=)\s*(\S+)", clause).groups()
                assert op == ">=", f"pyproject.toml: {name}{spec}: only >= lower bounds are checked here"
                pinned = have[normal(name)]
                assert release(pinned) >= release(bound), f"constraints.txt: {name}=={pinned} is below {spec}"


def test_the_pins_are_read_as_pip_reads_them():
    got = pins("# a comment\n\nPyYAML==6.0.4\nhuggingface_hub==2.4.0\ncertifi==2026.10.19.post1\n")
    assert got == {"pyyaml": "6.0.4", "huggingface-hub": "2.4.0", "certifi": "2026.10.19.post1"}
    assert release("2026.10.19.post1") == (2026, 10, 19) and release("2.4.6") > release("2.4")
    for bad, why in [("numpy>=1.26", "is not name==version"), ("numpy==1\nNumPy==2", "pinned twice")]:
        with pytest.raises(AssertionError, match=why):
            pins(bad)


def test_the_install_steps_use_the_constraints():
    """Each ``pip install`` of the Makefile's own venv (setup and Ray) goes through constraints.txt."""
    lines = [ln.strip() for ln in (REPO / "Makefile").read_text(encoding="utf-8").splitlines()]
    installs = [ln for ln in lines if ln.startswith("$(BIN)/pip install")]
    assert len(installs) == 3, installs  # pip itself, the package with [test], the Ray extra
    assert all("-c constraints.txt" in ln for ln in installs), installs
