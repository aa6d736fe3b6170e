"""Documented import path ``sim.conformance``: the module itself lives in ``sim.checks.conformance``
(docs/architecture.md).

The name is kept for plugin authors (``check_policy`` is how a new policy proves itself); ctxsim's own
code imports ``sim.checks.conformance``. The alias is the same module object, so every name, class
identity and private helper is the one defined there."""

import sys

from sim.checks import conformance as _module

sys.modules[__name__] = _module
