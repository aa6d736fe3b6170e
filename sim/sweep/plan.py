"""A sweep's plan: every (setting, trace) run with its run key, in grid order, and the chunks still to
run. Every check that can fail for the whole sweep fails while planning, before any run."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from sim.results.store import KeyLabels
from sim.sweep.keys import encoded_hashes, run_keys
from sim.sweep.progress import note
from sim.sweep.scenario import scenario_traces
from sim.sweep.settings import Setting, grid_settings
from sim.sweep.spec import SweepSpec, check_executor, check_grid_size
from sim.sweep.units import Chunk
from sim.util.errors import ConfigError, CtxsimError


@dataclass(frozen=True)
class SweepRuns:
    """Every run of a sweep in grid order: per valid setting, its (trace index, run key, trace hash)."""

    spec: SweepSpec
    settings: tuple[tuple[Setting, tuple[tuple[int, str, str], ...]], ...]
    scenario_digest: str | None = None  # the scenario's bytes the hashes are of (sim.sweep.plandigest)
    notes: tuple[str, ...] = ()  # what planning said (settings skipped), for a rerun to say again

    def keys(self) -> list[str]:
        """Every run key in grid order; a key repeats when trace content and config are identical."""
        return [key for _, runs in self.settings for _, key, _ in runs]

    def labels(self) -> KeyLabels:
        """(scenario, setting) of each key, from the first setting that names it: what this sweep writes
        into results.parquet, whichever writer's part the row's numbers come from
        (``sim.results.store.KeyLabels``: a key's label, or a whole column's at once)."""
        texts = [(self.spec.scenario, " ".join(s.overrides)) for s, _ in self.settings]
        which = [i for i, (_, runs) in enumerate(self.settings) for _ in runs]
        return KeyLabels(self.keys(), which, texts)

    def chunks(self, done: Iterable[str]) -> list[Chunk]:
        """The runs whose keys are not in ``done``, ``chunk_size`` at a time within a setting; a key that
        repeats is run once."""
        seen = set(done)
        todo: list[Chunk] = []
        for s, runs in self.settings:
            pending = []
            for run in runs:
                if run[1] not in seen:
                    seen.add(run[1])
                    pending.append(run)
            for j in range(0, len(pending), self.spec.chunk_size):
                todo.append(
                    Chunk(
                        self.spec.scenario,
                        self.spec.pricing,
                        s,
                        tuple(pending[j : j + self.spec.chunk_size]),
                        self.scenario_digest,
                    )
                )
        return todo


def plan(spec: SweepSpec, log: Callable[[str], None] = note, digest: str | None = None) -> SweepRuns:
    """The sweep's runs: settings composed (invalid ones skipped with a note), run keys computed. Every
    check that can fail for the whole sweep fails here, before any run. ``digest``: the scenario's
    ``scenario_digest`` when the caller took it already."""
    from sim.cost.pricing import price_named
    from sim.sweep.plandigest import scenario_digest
    from sim.trace.codec import trace_hash
    from sim.util.versions import ctxsim_version

    if spec.pricing not in ("auto", "none", "null"):
        price_named(spec.pricing)  # an unknown model name fails before any run
    if spec.chunk_size < 1:
        raise ConfigError("sweep: chunk_size must be >= 1")
    check_executor(spec.executor, spec.ray_address)
    notes: list[str] = []
    settings = grid_settings(spec, lambda msg: notes.append(msg) or log(msg))
    digest = digest or scenario_digest(spec.scenario)
    hashes = recorded_hashes(spec.scenario, digest)
    if hashes is None:  # memoised on each trace: forked workers inherit them instead of hashing again
        hashes = [t.derived("trace_hash", trace_hash) for t in scenario_traces(spec.scenario, digest)]
    if not hashes:
        raise ConfigError(f"scenario '{spec.scenario}' holds no traces")
    check_grid_size(len(settings), len(hashes), spec.max_settings)  # before a run key is made
    encoded = encoded_hashes(hashes)  # once, not once per setting
    out = []
    for s in settings:
        model = s.cfg.get("model") or {}
        # a setting with transforms keys its runs by them too (without, the keys are as they were)
        params = {**s.params, "transforms": s.cfg["transforms"]} if s.cfg.get("transforms") else s.params
        keys = run_keys(hashes, s.name, params, model, spec.pricing, ctxsim_version(), encoded)
        out.append((s, tuple(zip(range(len(hashes)), keys, hashes, strict=True))))
    return SweepRuns(spec, tuple(out), digest, tuple(notes))


def recorded_hashes(scenario: str, digest: str | None) -> list[str] | None:
    """The trace hashes of a scenario that is one canonical trace file with a valid record of its hashes
    (``sim.trace.storedhashes``), taken without loading a trace: planning needs only the hashes (loading 500
    traces for them cost ~1.5 s of a 4.4 s receipt-less rerun), and whoever runs a chunk loads the
    traces then. The record vouches only for the bytes it was written for, and ``digest`` (the
    scenario's ``sim.sweep.plandigest`` digest the plan is keyed by) must be of those very bytes too, read
    through the same handle. None otherwise (a folder, another format, no or a stale record): load."""
    from sim.sweep.plandigest import open_file_digest, scenario_path
    from sim.trace.io import iter_jsonl, iter_parquet
    from sim.trace.storedhashes import stored_hashes

    path = None if digest is None else scenario_path(scenario)
    if path is None or not path.is_file():
        return None
    from sim.importers import detect

    try:
        if detect(path).load not in (iter_jsonl, iter_parquet):  # the importer loading would take
            return None
        with open(path, "rb") as f:
            hashes = stored_hashes(path, f)
            if hashes is None or open_file_digest(path.name, f) != digest:
                return None
    except (OSError, CtxsimError):  # unreadable or no format: loading says so
        return None
    return hashes
