"""Documented import path ``sim.pytest_gate``: the module itself lives in ``sim.gate.pytest_plugin``
(docs/architecture.md).

The name is kept for pytest's ``pytest_plugins = ["sim.pytest_gate"]`` and ``assert_gate``; ctxsim's own
code imports ``sim.gate.pytest_plugin``. The alias is the same module object, so every name, class
identity and private helper is the one defined there."""

import sys

from sim.gate import pytest_plugin as _module

sys.modules[__name__] = _module
