"""Documented import path ``sim.errors``: the module itself lives in ``sim.util.errors``
(docs/architecture.md).

The name is kept for callers that catch ctxsim's errors (``ConfigError``, ``TraceError``); ctxsim's own
code imports ``sim.util.errors``. The alias is the same module object, so every name, class identity and
private helper is the one defined there."""

import sys

from sim.util import errors as _module

sys.modules[__name__] = _module
