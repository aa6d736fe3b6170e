"""Benchmark (not a test): stream a generated corpus of about 1 GB (or of ``--runs`` runs) through
``ctxsim run --dataset --streaming`` and report the wall time, the CPU time (user + system) and the peak
resident memory of that process, and simulated calls per CPU second and per wall second.

    .venv/bin/python benchmarks/stream_corpus.py [--gb 1.0 | --runs 10000] [--format jsonl|parquet]
        [--keep DIR] [--repeats 1] [--no-record] [--compile-each-run]

The corpus is the embedded generator's SWE-like runs (text-free), written once as canonical JSON Lines or
Parquet; distinct runs are generated up to ``--distinct`` and then repeated under new trace ids, which
keeps generation quick without changing what the replay does per run. With ``--keep DIR`` the corpus is
written there once, with a note of the options it was written from, and reused by later runs given the
same options while the file is as it was left.

ctxsim's own modules run from compiled bytecode, as an installed program's do: compiled once, before the
measured runs, into a cache in the corpus folder (an environment that sets PYTHONDONTWRITEBYTECODE would
otherwise compile every module of ``sim`` again in each run, ~0.3 s CPU). ``--compile-each-run``
measures that way instead.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from scenarios.swe_like import generate_run  # noqa: E402
from sim.trace.codec import trace_to_dict  # noqa: E402
from sim.trace.io import write_traces  # noqa: E402
from sim.util import provenance  # noqa: E402


def corpus(
    target_bytes: int, distinct: int, out: Path, runs: int | None = None, record_hashes: bool = True
) -> tuple[int, int, int]:
    """Write runs until the file passes ``target_bytes`` (or ``runs`` of them); returns (runs, calls,
    bytes). ``record_hashes``: with the record of trace hashes ``import`` leaves beside a file."""
    base = [generate_run(7, i) for i in range(distinct)]
    sizes = [len(json.dumps(trace_to_dict(t), separators=(",", ":"))) + 1 for t in base]
    n = 0
    total = 0
    calls = 0
    picks = []
    while (total < target_bytes) if runs is None else (n < runs):
        k = n % distinct
        picks.append((n, k))
        total += sizes[k]
        calls += len(base[k].calls)
        n += 1

    def traces():
        for i, k in picks:
            yield dataclasses.replace(base[k], trace_id=f"stream-{i:07d}")

    write_traces(traces(), out, record_hashes=record_hashes)
    return n, calls, out.stat().st_size


def _description(path: Path) -> Path:
    return path.with_name(path.name + ".options.json")


def _describe(path: Path, options: dict, runs: int, calls: int) -> None:
    """Note beside a kept corpus what it was written from, so a later ``--keep`` run can reuse it."""
    st = path.stat()
    got = {"options": options, "runs": runs, "calls": calls, "bytes": st.st_size, "mtime_ns": st.st_mtime_ns}
    _description(path).write_text(json.dumps(got, sort_keys=True) + "\n")


def _kept(path: Path, options: dict) -> tuple[int, int, int] | None:
    """(runs, calls, bytes) of a corpus an earlier run wrote at ``path`` from the same options and left
    as it was (size and modification time as noted; its record of hashes there when asked for); else
    None: write it again."""
    from sim.trace.storedhashes import record_path

    try:
        got = json.loads(_description(path).read_text())
        st = path.stat()
    except (OSError, ValueError):
        return None
    if type(got) is not dict or got.get("options") != options:
        return None
    if (got.get("bytes"), got.get("mtime_ns")) != (st.st_size, st.st_mtime_ns):
        return None
    if options["record"] != record_path(path).exists():
        return None
    return got["runs"], got["calls"], got["bytes"]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gb", type=float, default=1.0)
    p.add_argument("--runs", type=int, help="this many runs instead of --gb")
    p.add_argument("--repeats", type=int, default=1, help="replays of the corpus (medians reported)")
    p.add_argument("--format", choices=("jsonl", "parquet"), default="jsonl")
    p.add_argument("--distinct", type=int, default=200)
    p.add_argument("--policy", default="observation_masking")
    p.add_argument(
        "--keep",
        type=Path,
        help="write the corpus here and keep it (a kept corpus of the same options is reused)",
    )
    p.add_argument(
        "--no-record",
        action="store_true",
        help="without the record of trace hashes beside the file (each trace's hash computed on load)",
    )
    p.add_argument(
        "--compile-each-run",
        action="store_true",
        help="no bytecode cache: each run compiles ctxsim's modules (as under PYTHONDONTWRITEBYTECODE)",
    )
    args = p.parse_args()
    prov = provenance.start(also=(*provenance.CHILD_LIBRARIES, "datasets"))  # the timed run is a child
    folder = args.keep or Path(tempfile.mkdtemp(prefix="ctxsim-stream-"))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"corpus.{args.format}"
    options = {"gb": None if args.runs else args.gb, "runs": args.runs, "distinct": args.distinct}
    options["record"] = not args.no_record
    t0 = time.perf_counter()
    kept = _kept(path, options)
    if kept is None:
        runs, calls, nbytes = corpus(int(args.gb * 2**30), args.distinct, path, args.runs, not args.no_record)
        _describe(path, options, runs, calls)
    else:
        runs, calls, nbytes = kept
    gen_s = time.perf_counter() - t0
    size = f"{nbytes / 2**30:.2f} GiB"
    record = "no record of hashes" if args.no_record else "with its record of hashes"
    how = f"{gen_s:.0f} s to write" if kept is None else "kept from an earlier run"
    print(f"corpus: {path.name}, {size}, {runs:,} runs, {calls:,} calls, {record} ({how})")
    env = dict(os.environ, HF_DATASETS_OFFLINE="1", HF_HUB_OFFLINE="1", HF_HOME=str(folder / "hf"))
    if not args.compile_each_run:  # bytecode compiled once, outside the measured runs, kept outside the repo
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(folder / "pycache")
        compile_cmd = [sys.executable, "-m", "compileall", "-q", "sim", "scenarios"]
        subprocess.run(compile_cmd, env=env, cwd=REPO, check=True, stdout=subprocess.DEVNULL)
    # this checkout's ctxsim, whatever is installed (``-c`` puts the working directory first on the path)
    cmd = [sys.executable, "-c", "import sys; from sim.cli import main; sys.exit(main())"]
    cmd += ["run", "--dataset", str(path), "--streaming", "--policy", args.policy, "--format", "csv"]
    walls, cpus, peaks = [], [], []
    for _ in range(args.repeats):
        code = (
            "import resource, subprocess, sys, os\n"
            "with open(os.devnull, 'w') as sink:\n"
            "    p = subprocess.run(sys.argv[1:], stdout=sink, stderr=subprocess.PIPE, text=True)\n"
            "u = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
            "print(p.returncode, u.ru_utime + u.ru_stime, u.ru_maxrss)\n"
            "sys.stderr.write(p.stderr)\n"
        )  # a fresh parent per repeat: its children's peak RSS is this repeat's alone
        t0 = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-c", code, *cmd], capture_output=True, text=True, env=env, cwd=REPO, check=False
        )
        walls.append(time.perf_counter() - t0)
        rc, cpu, peak_kib = proc.stdout.split()
        if int(rc) != 0:
            print(proc.stderr, file=sys.stderr)
            return int(rc)
        cpus.append(float(cpu))
        peaks.append(int(peak_kib) / 1024)  # Linux: KiB
    wall, cpu, peak_mib = statistics.median(walls), statistics.median(cpus), max(peaks)
    print(
        f"run --dataset --streaming --policy {args.policy}: {wall:.1f} s wall (loaded), {cpu:.2f} s CPU, "
        f"{calls / cpu:,.0f} calls per CPU second ({calls / wall:,.0f} per wall second, loaded), "
        f"peak RSS {peak_mib:,.0f} MiB "
        f"(median of {args.repeats}; CPU per repeat {', '.join(f'{c:.2f}' for c in cpus)} s; "
        f"{'compiling from source in each run' if args.compile_each_run else 'bytecode compiled beforehand'})"
    )
    print(prov.text())
    if not args.keep:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
