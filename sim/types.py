"""Documented import path ``sim.types``: the module itself lives in ``sim.core.types``
(docs/architecture.md).

The name is kept for plugin authors (policies and importers build on its records); ctxsim's own code
imports ``sim.core.types``. The alias is the same module object, so every name, class identity and private
helper is the one defined there."""

import sys

from sim.core import types as _module

sys.modules[__name__] = _module
