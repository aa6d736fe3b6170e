"""``python -m sim.gate GATE_FILE ...``: the ``ctxsim gate`` command on its own (docs/gate.md)."""

import sys

from sim.gate.args import main

sys.exit(main())
