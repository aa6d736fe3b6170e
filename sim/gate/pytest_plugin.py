"""Run a ctxsim gate inside your own pytest suite.

    from sim.gate.pytest_plugin import assert_gate

    def test_context_policy_gate():
        assert_gate("gates/ci.yaml")

or, as a fixture (``pytest_plugins = ["sim.gate.pytest_plugin"]`` in your ``conftest.py``)::

    def test_gate(ctxsim_gate):
        ctxsim_gate("gates/ci.yaml")

A regression raises ``AssertionError`` whose message is the gate's Markdown summary plus one line per
failing metric; a malformed gate file raises ``sim.util.errors.ConfigError`` (the test errors, not fails).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

import pytest

from sim.gate.check import evaluate
from sim.gate.outcome import GateResult


def assert_gate(
    path: str | Path, allow_modules: Iterable[str] = (), summary: str | Path | None = None
) -> GateResult:
    """Evaluate the gate file ``path``; return its result when every threshold holds, otherwise raise
    AssertionError with the summary. ``summary``: also write the Markdown summary to this file."""
    res = evaluate(path, tuple(allow_modules))
    text = res.summary()
    if summary is not None:
        Path(summary).write_text(text, encoding="utf-8")
    if not res.passed:
        lines = "\n".join(f"- {m.message()}" for m in res.failures)
        raise AssertionError(
            f"ctxsim gate {path}: regression in {', '.join(res.failing_metrics())}\n{lines}\n\n{text}"
        )
    return res


@pytest.fixture
def ctxsim_gate() -> Callable[..., GateResult]:
    """``assert_gate`` as a fixture."""
    return assert_gate
