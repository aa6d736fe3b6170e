"""The package's shape, read from its own imports (docs/architecture.md): data flows one way.

Every ``sim`` module belongs to a layer, lowest first (``LAYERS``); a module imports only from its own
layer or lower ones, the import graph has no cycle, and no module imports another's private name. Imports
inside functions count (they hide an arrow, they do not remove it); imports under ``if TYPE_CHECKING:``
do not (they never run). Also held here: at most 12 modules directly in ``sim/``, none over 800 lines,
no function over 120 lines.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SIM = Path(__file__).resolve().parent.parent / "sim"

# Lowest first: a module may import from its own layer and those before it, never after.
LAYERS = [
    "util",  # errors, paths, safe YAML, atomic files, interrupts: no ctxsim knowledge
    "core",  # the trace data model and the records a replay produces
    "cost",  # tokens, model names, prices, cache rules
    "information",  # facts, the information state and its ledger
    "trace",  # canonical trace files: schema, reading, writing, columns
    "importers",  # other tools' formats into traces
    "policies",  # context-management policies
    "engine",  # replay: the reference loop, the mock model, the fast paths, the dispatcher
    "metrics",  # figures of a replay
    "results",  # result rows, tables, the results store, sweep summaries
    "transforms",  # harness transforms of a trace
    "config",  # composing a run's configuration
    "checks",  # conformance: every fast path against the reference loop
    "analysis",  # sizing verdicts, fidelity, assumptions
    "sweep",  # sweeps: plans, chunks, executors
    "gate",  # the regression gate
    "report",  # the comparison report
    "commands",  # one module per command
    "",  # sim/ itself: the CLI, the public face and the documented aliases
]
RANK = {name: i for i, name in enumerate(LAYERS)}
ALIASES = {"sim.types", "sim.errors", "sim.conformance", "sim.pytest_gate"}


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(SIM.rglob("*.py")):
        parts = path.relative_to(SIM.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


MODULES = _modules()


def _layer(module: str) -> str:
    """The package under ``sim/`` a module sits in; "" for the modules directly in ``sim/``."""
    parts = module.split(".")
    return parts[1] if len(parts) >= 2 and (SIM / parts[1]).is_dir() else ""


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def _known(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str) -> list[tuple[str, str | None, int]]:
    """(imported module, imported name or None, line) for every sim import that runs."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(), str(path))
    skip = _type_checking_lines(tree)
    out = []
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in skip:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "sim" or alias.name.startswith("sim."):
                    out.append((_known(alias.name), None, node.lineno))
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
                package = package[: len(package) - (node.level - 1)]
                base = ".".join(package + ([base] if base else []))
            if base != "sim" and not base.startswith("sim."):
                continue
            for alias in node.names:
                full = f"{base}.{alias.name}"
                if full in MODULES:
                    out.append((full, None, node.lineno))
                else:
                    out.append((_known(base), alias.name, node.lineno))
    return [(target, name, line) for target, name, line in out if target and target != module]


GRAPH = {module: _imports(module) for module in MODULES}


def test_every_package_has_a_layer():
    packages = {p.parent.name for p in SIM.glob("*/__init__.py")}
    assert sorted(packages - set(RANK)) == []


def test_no_upward_import():
    upward = []
    for module, imports in GRAPH.items():
        for target, _, line in imports:
            if target == "sim" and module != "sim":
                upward.append(
                    f"{MODULES[module].relative_to(SIM.parent)}:{line} imports the package face 'sim'"
                )
            elif RANK[_layer(target)] > RANK[_layer(module)]:
                upward.append(
                    f"{MODULES[module].relative_to(SIM.parent)}:{line} ({_layer(module) or 'sim'}) imports "
                    f"{target} ({_layer(target) or 'sim'})"
                )
    assert upward == []


def test_aliases_are_for_outside_callers_only():
    inside = [
        f"{MODULES[module].relative_to(SIM.parent)}:{line} imports the alias {target}"
        for module, imports in GRAPH.items()
        for target, _, line in imports
        if target in ALIASES
    ]
    assert inside == []


def test_no_import_cycle():
    edges = {m: sorted({t for t, _, _ in imports}) for m, imports in GRAPH.items()}
    state: dict[str, int] = {}
    cycles = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in edges.get(node, []):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join(stack[stack.index(nxt) :] + [nxt]))
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = 2

    for module in sorted(edges):
        if module not in state:
            visit(module, [])
    assert cycles == []


def _private_attributes(module: str) -> list[tuple[str, str, int]]:
    """(module, private name, line) for every ``m._name`` where ``m`` is another sim module bound by an
    import (``import sim.x.y as m``, ``from sim.x import y``, or the dotted ``sim.x.y`` itself)."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(), str(path))
    bound: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in MODULES and alias.asname:
                    bound[alias.asname] = alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("sim"):
            for alias in node.names:
                if f"{node.module}.{alias.name}" in MODULES:
                    bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            owner = ast.unparse(node.value)
            target = bound.get(owner, owner if owner in MODULES else None)
            if target and target != module:
                out.append((target, node.attr, node.lineno))
    return out


def test_no_private_name_crosses_modules():
    crossing = [
        f"{MODULES[module].relative_to(SIM.parent)}:{line} imports {target}.{name}"
        for module, imports in GRAPH.items()
        for target, name, line in imports
        if name and name.startswith("_") and not name.startswith("__")
    ]
    crossing += [
        f"{MODULES[module].relative_to(SIM.parent)}:{line} reads {target}.{name}"
        for module in MODULES
        for target, name, line in _private_attributes(module)
    ]
    assert crossing == []


def test_at_most_twelve_modules_directly_in_sim():
    top = sorted(p.name for p in SIM.glob("*.py"))
    assert len(top) <= 12, top


@pytest.mark.parametrize("path", sorted(MODULES.values()), ids=lambda p: str(p.relative_to(SIM.parent)))
def test_module_and_function_sizes(path: Path):
    text = path.read_text()
    lines = text.count("\n")
    assert lines <= 800, f"{path.name}: {lines} lines"
    long = [
        f"{node.name}: {node.end_lineno - node.lineno + 1} lines"
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno - node.lineno + 1 > 120
    ]
    assert long == []


# ------------------------------------------------------------------------- the documented import paths
@pytest.mark.parametrize(
    ("alias", "home"),
    [
        ("sim.types", "sim.core.types"),
        ("sim.errors", "sim.util.errors"),
        ("sim.conformance", "sim.checks.conformance"),
        ("sim.pytest_gate", "sim.gate.pytest_plugin"),
    ],
)
def test_a_documented_alias_is_its_modules_very_object(alias, home):
    """The README and docs/gate.md give plugin authors these paths: each is the moved module itself, so a
    class imported either way is one class (isinstance and the registry agree)."""
    import importlib

    assert importlib.import_module(alias) is importlib.import_module(home)


def test_the_public_api_of_the_readme_works():
    import sim
    from sim.conformance import check_policy
    from sim.errors import ConfigError
    from sim.policies.base import Change, Policy
    from sim.pytest_gate import assert_gate
    from sim.types import ItemState, Trace

    public = ["replay", "load_path", "load_paths", "compute_metrics", "make_policy", "registered"]
    assert all(callable(getattr(sim, name)) for name in [*public, "write_traces"])
    assert sim.Trace is Trace and sim.RunRecord.__module__ == "sim.core.records"
    assert callable(check_policy) and callable(assert_gate) and issubclass(ConfigError, Exception)
    assert Change and Policy and ItemState and isinstance(sim.__version__, str)
    # sim.engine is a package now: the function sim.replay is not shadowed by it
    import sim.engine

    assert callable(sim.replay) and sim.replay is sim.engine.replay


def test_python_m_sim_gate_runs_the_gate_command():
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "sim.gate", "--help"], capture_output=True, text=True, timeout=60
    )
    assert (
        proc.returncode == 0 and proc.stdout.startswith("usage: ctxsim gate") and "GATE_FILE" in proc.stdout
    )
