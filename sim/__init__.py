"""ctxsim: replay recorded agent traces against context-management policies and measure cost and loss."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("ctxsim")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0+source"

from sim.engine import replay  # noqa: E402
from sim.importers import load_path, load_paths  # noqa: E402
from sim.metrics import compute_metrics  # noqa: E402
from sim.policies.base import make_policy, registered  # noqa: E402
from sim.records import RunRecord  # noqa: E402
from sim.traceio import write_traces  # noqa: E402
from sim.types import Trace  # noqa: E402

__all__ = [
    "__version__",
    "replay",
    "load_path",
    "load_paths",
    "compute_metrics",
    "make_policy",
    "registered",
    "RunRecord",
    "Trace",
    "write_traces",
]
