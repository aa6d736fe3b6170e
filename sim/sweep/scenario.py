"""A sweep's scenario: the traces it names, loaded once per process and checked against the bytes the
parent planned from, so every worker replays the traces whose hashes the run keys hold."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sim.util.errors import ConfigError
from sim.util.paths import EMBEDDED_SUITE, REPO, SOURCE_CHECKOUT


def load_scenario(scenario: str) -> Iterator[Any]:
    """The traces a scenario names, in a fixed order (the order indices in work units refer to)."""
    if scenario == "embedded":
        from sim.importers import load_paths

        return load_paths([EMBEDDED_SUITE])
    if scenario == "conversation":  # the generator's 5-run conversation, as `run --scenario conversation`
        from scenarios.conversation import conversation

        return iter([conversation()])
    if scenario.startswith("dataset:"):
        from sim.trace.io import load_dataset_traces

        return load_dataset_traces(scenario.removeprefix("dataset:"))
    path = Path(scenario)
    # a path relative to the checkout (a gate file run from elsewhere), never to an installed copy's
    # site-packages
    if SOURCE_CHECKOUT and not path.exists() and not path.is_absolute() and (REPO / path).exists():
        path = REPO / path
    if not path.exists():
        raise ConfigError(
            f"scenario '{scenario}': not 'embedded', 'conversation', 'dataset:NAME_OR_PATH' or an existing "
            "file or folder"
        )
    from sim.importers import load_paths

    return load_paths([path])


_TRACES: dict[str, tuple[str | None, list[Any]]] = {}


def scenario_traces(scenario: str, digest: str | None = None) -> list[Any]:
    """One load per process and scenario content: a forked worker inherits the parent's traces (and
    their hashes); any other process loads them itself. With ``digest`` (``sim.sweep.plandigest``: the bytes
    the parent read), the scenario's bytes must still be those after the load, else the scenario
    changed during the sweep (exit 2): then the parent's hashes are the hashes of these traces."""
    from sim.sweep.plandigest import scenario_digest

    held = _TRACES.get(scenario)
    if held is not None and (digest is None or held[0] == digest):
        return held[1]
    traces = list(load_scenario(scenario))
    if digest is not None and scenario_digest(scenario) != digest:
        raise ConfigError(f"scenario {scenario}: its files changed during the sweep; run the sweep again")
    _TRACES[scenario] = (digest, traces)
    return traces
