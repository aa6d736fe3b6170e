"""Parameter sweeps: one policy over a grid of knob settings and a set of traces, resumable and parallel.

A sweep is many independent (setting, trace) runs. Each run is named by a ``run_key``: a sha256 over the
trace's content hash and everything that decides the run's numbers (policy, every knob, the mock model's
config, the pricing choice, ctxsim's version). Results are written in chunks, each chunk one Parquet file
under ``DIR/parts/`` that appears atomically (temporary name, then ``os.replace``), so after an
interruption at any moment, even SIGKILL, every part on disk is whole, and a rerun of the same command
skips every key it finds there and redoes only the unfinished chunks. ``DIR/results.parquet`` is merged
from the parts at the end and sorted by ``run_key``: its content does not depend on the worker count,
the chunk size or how often the sweep was interrupted. Several sweeps may share ``DIR`` at once, and a
damaged part is set aside and its runs redone (``sim.results.store``).

Chunks run in this process (``workers=1``), over a pool of forked processes (``workers=N``) or as Ray
tasks (``executor=ray``, ``sim.sweep.rayexec``). Whoever runs a chunk writes its part and hands back its run
keys with the table it wrote (``sim.results.store.Part``: Arrow IPC), so the merge of a first sweep reads no
part back; the traces' content hashes come from the parent (a forked worker inherits them, any other
worker loads the scenario, checks that its bytes are the parent's and takes the parent's hashes), and
the parent takes them from a canonical file's record of its hashes (``sim.trace.storedhashes``) when it has a
valid one, loading no trace to plan. A rerun of a finished sweep whose receipt still vouches for
results.parquet stops there (``sim.sweep.plandigest``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from sim.results.store import PARTS, RESULTS
from sim.sweep.plan import plan
from sim.sweep.progress import Progress, note
from sim.sweep.scenario import scenario_traces
from sim.sweep.spec import SweepSpec, check_executor, spec_from_args
from sim.sweep.unit_runner import run_and_save_unit
from sim.sweep.units import Chunk, lane_units
from sim.util.errors import ConfigError
from sim.util.forkmap import cap_workers
from sim.util.interrupts import ReportedInterrupt, remembered_interrupts

__all__ = ["SweepSpec", "merge_parts", "run_sweep", "spec_from_args"]  # what the command line imports here


def _init_worker(scenario: str, digest: str | None) -> None:
    """Worker start: load the scenario once (inherited for free under fork)."""
    scenario_traces(scenario, digest)


_MERGE_ROUNDS = 3  # a part found damaged only at the merge's full read: its runs are redone, then merged


def _finished(spec: SweepSpec, plan_id: str | None) -> Path | None:
    """results.parquet when its receipt vouches that it is this plan's finished merge (nothing to
    compose, load, hash, read or write); the plan's notes are said again, as a full rerun says them."""
    from sim.results import store as store

    if plan_id is None:
        return None
    receipt = store.receipt_vouches(spec.results_dir, plan_id)
    if receipt is None:
        return None
    for msg in receipt.get("notes", ()):
        note(str(msg))
    total, repeats = int(receipt.get("total", 0)), int(receipt.get("repeats", 0))
    if repeats:
        note(f"{repeats} runs repeat another run exactly (same trace content and config)")
    note(f"resuming: {total} of {total} runs already in {spec.results_dir / PARTS}")
    results = spec.results_dir / RESULTS
    if spec.csv:
        from sim.results.tables import write_rows

        write_rows(store.read_rows(results), spec.results_dir / "results.csv")
    return results


def run_sweep(spec: SweepSpec, workers: int = 1, progress: bool = True, merge: bool = True) -> Path:
    """Run every (setting, trace) pair of ``spec`` not already finished under ``spec.results_dir``;
    returns the path of the merged ``results.parquet``. Interrupt it at any moment and run it again
    with the same spec: finished chunks are kept, the rest is redone. Other sweeps may write the same
    folder at the same time; a rerun of a finished sweep whose results.parquet is current only checks."""
    with remembered_interrupts() as check:  # a Ctrl-C swallowed by a finalizer still stops the sweep
        return _run_sweep(spec, workers, progress, merge, check)


def _check_results_dir(out: Path, parts_dir: Path) -> None:
    """The results folder is a folder ctxsim can write its parts in, before any run: exit 2 naming
    ``results.path`` for a folder nothing can be created in (``/proc/self``), instead of an internal
    error at the first part (an existing file, ``/dev/null``, is refused before planning)."""
    from sim.util.atomicfile import make_dirs

    try:
        make_dirs(parts_dir)
    except OSError as exc:
        raise ConfigError(
            f"sweep: results.path={out}: cannot create the folder {parts_dir}: {exc.strerror or exc}"
        ) from None
    if not parts_dir.is_dir():
        raise ConfigError(f"sweep: results.path={out}: {parts_dir} is not a folder")


def _run_sweep(spec: SweepSpec, workers: int, progress: bool, merge: bool, check: Callable[[], None]) -> Path:
    from sim.results import store as store
    from sim.sweep.plandigest import plan_digest, scenario_digest
    from sim.util.versions import ctxsim_version

    check_executor(spec.executor, spec.ray_address)
    if spec.ray_address is None:  # processes (or a local Ray) on this machine: no more than its cores
        workers = cap_workers(workers)
    out = spec.results_dir
    parts_dir = out / PARTS
    if out.exists() and not out.is_dir():
        raise ConfigError(f"sweep: results.path={out}: not a folder (a file of that name exists)")
    scenario = scenario_digest(spec.scenario)  # read once: the receipt and the plan both need it
    plan_id = plan_digest(spec, ctxsim_version(), scenario) if merge else None
    done = _finished(spec, plan_id)
    if done is not None:
        return done
    runs = plan(spec, digest=scenario)
    _check_results_dir(out, parts_dir)  # once the plan holds: a refused sweep creates no folder
    all_keys = runs.keys()
    wanted = set(all_keys)
    total = len(wanted)
    repeats = len(all_keys) - total
    if repeats:
        note(f"{repeats} runs repeat another run exactly (same trace content and config)")
    facts = {"total": total, "repeats": repeats, "notes": list(runs.notes)}
    parts, _ = store.scan(out, note)
    todo = runs.chunks(store.done_keys(parts))
    n_done = total - sum(len(c.runs) for c in todo)
    if n_done:
        note(f"resuming: {n_done} of {total} runs already in {parts_dir}")
    results = out / RESULTS
    labels = runs.labels()
    if merge and not todo:
        sources = store.holders(parts, wanted)
        sha = store.current_sha256(results, wanted, labels, sources)
        if sha is not None:
            if plan_id is not None:
                store.write_receipt(out, plan_id, sha, sources, facts)
            if spec.csv:
                from sim.results.tables import write_rows

                write_rows(store.read_rows(results), out / "results.csv")
            return results
    prog = Progress(total, n_done, progress)

    def save(chunk: Chunk, part) -> None:
        parts.append(part)
        prog.update(len(part.keys))
        check()

    for _ in range(_MERGE_ROUNDS):
        try:
            if todo and spec.executor == "ray":
                from sim.sweep.rayexec import run_chunks

                run_chunks(todo, parts_dir, workers, spec.ray_address, save)
            elif workers <= 1 or len(todo) <= 1:
                for unit in lane_units(todo):
                    for chunk, part in zip(unit, run_and_save_unit(unit, str(parts_dir)), strict=True):
                        save(chunk, part)
            else:
                _run_parallel(todo, workers, spec.scenario, runs.scenario_digest, parts_dir, save)
            check()
        except KeyboardInterrupt:
            if prog.tty:
                print(file=sys.stderr)
            note(
                f"interrupted: {prog.done} of {total} runs saved in {parts_dir}; "
                "rerun the same command to resume"
            )
            raise ReportedInterrupt from None
        if not merge:  # a Hydra job: the multirun's end merges every job's parts (merge_parts)
            return parts_dir
        pieces, missing = store.collect(parts, wanted, note)
        if not missing:
            break
        # parts that vanished or failed a full read since the scan: run their runs again
        parts = [p for p in parts if p.path.exists()]
        prog.done -= len(missing)
        todo = runs.chunks(wanted - missing)
    else:
        raise ConfigError(f"sweep: {len(missing)} runs have no result after the sweep")
    others = len(store.done_keys(parts) - wanted)
    if others:
        note(f"{parts_dir} also holds {others} runs of other settings; results.parquet leaves them out")
    merged = store.merged(pieces, labels)
    n = merged.num_rows
    unpriced = merged.column("cost_microusd").null_count if "cost_microusd" in merged.schema.names else n
    if unpriced:
        from sim.cost.pricing import price_table

        choices = ", ".join(sorted(p.model for p in price_table().values()))
        note(
            f"warning: {unpriced} of {n} runs are unpriced (their traces' recorded model has no "
            f"price): their cost is empty; price them with pricing=MODEL (or --pricing MODEL), one of "
            f"{choices}"
        )
    check()
    sha = store.write_table(merged, results)
    present = [p for p in parts if p.path.exists()]
    store.write_index(parts_dir, present)  # the next scan takes these parts' keys from it
    if plan_id is not None:
        store.write_receipt(out, plan_id, sha, store.holders(present, wanted), facts)
    if spec.csv:
        from sim.results.tables import write_rows

        write_rows(merged.to_pylist(), out / "results.csv")
    return results


def _run_parallel(
    todo: list[Chunk], workers: int, scenario: str, digest: str | None, parts_dir: Path, save
) -> None:
    """Chunks over a process pool; each worker writes its chunks' parts and sends them back (keys, stat,
    the table written)."""
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    if multiprocessing.get_start_method() == "fork":  # loaded once here, inherited by every worker
        scenario_traces(scenario, digest)
    pool = ProcessPoolExecutor(max_workers=workers, initializer=_init_worker, initargs=(scenario, digest))
    try:
        units = lane_units(todo, workers)
        pending = {pool.submit(run_and_save_unit, u, str(parts_dir)): u for u in units}
        while pending:
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in finished:
                unit = pending.pop(fut)
                for chunk, part in zip(unit, fut.result(), strict=True):
                    save(chunk, part)
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


def merge_parts(results_dir: Path, csv: bool = False) -> Path:
    """Every finished run under ``results_dir/parts`` into ``results.parquet`` (sorted by run key, one
    row per key): how a Hydra multirun, whose jobs each write their own parts, ends. Skipped when
    results.parquet is current."""
    from sim.results import store as store

    results, written = store.merge_all(Path(results_dir), note)
    if csv:
        from sim.results.tables import write_rows

        rows = written.to_pylist() if written is not None else store.read_rows(results)
        write_rows(rows, Path(results_dir) / "results.csv")
    return results
