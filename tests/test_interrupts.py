"""A Ctrl-C that lands in a finalizer is not lost (sim.util.interrupts)."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

import pytest

from sim.util.interrupts import remembered_interrupts
from sim.util.paths import REPO


class _SignalsItselfWhenCollected:
    """Sends this process SIGINT from its finalizer and waits there, so the handler runs inside
    ``__del__``, where Python reports the exception as ignored and carries on."""

    def __del__(self) -> None:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)  # the handler runs before the sleep returns


def _ignored(monkeypatch) -> list[type]:
    """The exceptions Python reports as ignored (sys.unraisablehook) during the test."""
    seen: list[type] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: seen.append(u.exc_type))
    return seen


def test_python_alone_loses_an_interrupt_raised_in_a_finalizer(monkeypatch):
    ignored = _ignored(monkeypatch)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    obj = _SignalsItselfWhenCollected()
    del obj  # no KeyboardInterrupt reaches this frame: why remembered_interrupts exists
    assert ignored == [KeyboardInterrupt]


def test_a_swallowed_interrupt_is_raised_at_the_next_check(monkeypatch):
    ignored = _ignored(monkeypatch)
    with remembered_interrupts() as check:
        check()  # nothing arrived yet
        obj = _SignalsItselfWhenCollected()
        del obj
        assert ignored == [KeyboardInterrupt]  # the first raise was swallowed
        with pytest.raises(KeyboardInterrupt):
            check()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored


def test_an_interrupt_outside_finalizers_raises_at_once():
    with remembered_interrupts() as check:
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)
        with pytest.raises(KeyboardInterrupt):
            check()  # and stays remembered
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_callers_own_handler_is_left_alone():
    seen = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: seen.append(signum))
    try:
        with remembered_interrupts() as check:
            assert signal.getsignal(signal.SIGINT) is not signal.default_int_handler
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
            check()  # the caller's handler took it: nothing to raise here
        assert seen == [signal.SIGINT]
    finally:
        signal.signal(signal.SIGINT, previous)


def test_outside_the_main_thread_nothing_changes():
    result = []

    def body() -> None:
        with remembered_interrupts() as check:
            check()
            result.append(signal.getsignal(signal.SIGINT) is signal.default_int_handler)

    t = threading.Thread(target=body)
    t.start()
    t.join()
    assert result == [True]


def test_a_block_inside_another_shares_its_memory_and_the_outer_one_restores(monkeypatch):
    from sim.util import interrupts

    _ignored(monkeypatch)
    with remembered_interrupts() as outer:
        with remembered_interrupts() as inner:  # a sweep inside the command runner's block
            obj = _SignalsItselfWhenCollected()
            del obj
            with pytest.raises(KeyboardInterrupt):
                inner()
        assert signal.getsignal(signal.SIGINT) is not signal.default_int_handler  # still the outer's
        with pytest.raises(KeyboardInterrupt):
            outer()
        with pytest.raises(KeyboardInterrupt):
            interrupts.check()  # the module's own check: the open block's memory
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    interrupts.check()  # no block open: nothing to raise, and the next block starts afresh
    with remembered_interrupts() as check:
        check()


def test_another_thread_never_raises_at_a_check(monkeypatch):
    from sim.util import interrupts

    _ignored(monkeypatch)
    raised = []

    def body() -> None:
        try:
            interrupts.check()
        except KeyboardInterrupt:
            raised.append(True)

    with remembered_interrupts() as check:
        obj = _SignalsItselfWhenCollected()
        del obj
        t = threading.Thread(target=body)
        t.start()
        t.join()
        with pytest.raises(KeyboardInterrupt):
            check()
    assert raised == []


def test_the_command_runner_leaves_a_callers_handler_alone():
    from sim.util.exitcodes import run_command

    seen, during = [], []

    def command(args) -> int:
        during.append(signal.getsignal(signal.SIGINT))
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)
        return 0

    def own(signum, frame):
        seen.append(signum)

    previous = signal.signal(signal.SIGINT, own)
    try:
        assert run_command(command, None) == 0  # the caller's handler took the signal: not an interrupt
        assert during == [own] and seen == [signal.SIGINT]
        assert signal.getsignal(signal.SIGINT) is own
    finally:
        signal.signal(signal.SIGINT, previous)


# ---------------------------------------------------------------------------- every command (the CLI)
SWE_LIKE = REPO / "scenarios" / "suite" / "swe_like.jsonl"  # 40 traces: two replay batches of 32 and 8


def _swallowed_once(monkeypatch, module, name: str) -> list[int]:
    """Replace ``module.name`` so that its first call drops an object whose finalizer sends this process
    SIGINT (swallowed there, as in pyarrow's ``ParquetWriter.__del__``), then carries on as before.
    Returns the calls made, counted."""
    real = getattr(module, name)
    calls: list[int] = []

    def wrapped(*args, **kwargs):
        calls.append(len(calls))
        if len(calls) == 1:
            obj = _SignalsItselfWhenCollected()
            del obj
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapped)
    return calls


@pytest.mark.parametrize("streaming", [False, True])
def test_run_interrupted_in_a_finalizer_exits_130_and_writes_nothing(
    capsys, monkeypatch, tmp_path, streaming
):
    import sim.engine.dispatch
    from sim.cli import main

    ignored = _ignored(monkeypatch)
    calls = _swallowed_once(monkeypatch, sim.engine.dispatch, "replay_table")
    out = tmp_path / "calls.csv"
    source = ["--dataset", str(SWE_LIKE), "--streaming"] if streaming else [str(SWE_LIKE)]
    assert main(["run", *source, "--format", "csv", "--calls", str(out)]) == 130
    assert ignored == [KeyboardInterrupt]  # Python swallowed it; the run stopped all the same
    assert calls == [0]  # at the check after the first batch: the second was never replayed
    assert not out.exists() and not list(tmp_path.iterdir())  # no file, no temporary
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines()[-1] == "ctxsim: interrupted"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # Python's handler again


def test_a_streamed_csv_run_stops_after_the_batch_it_was_interrupted_in(capsys, monkeypatch):
    import sim.engine.dispatch
    from sim.cli import main

    _ignored(monkeypatch)
    _swallowed_once(monkeypatch, sim.engine.dispatch, "replay_table")
    argv = ["run", "--dataset", str(SWE_LIKE), "--streaming", "--format", "csv"]
    assert main(argv) == 130
    assert capsys.readouterr().out == ""  # the first batch's rows are not written either
    monkeypatch.undo()
    assert main(argv) == 0
    assert capsys.readouterr().out.count("\n") == 41  # uninterrupted: header and 40 rows


@pytest.mark.parametrize("where", ["here", "in a forked worker"])
def test_size_interrupted_in_a_finalizer_exits_130_and_prints_no_verdict(
    capsys, monkeypatch, tmp_path, where
):
    """In a forked worker (``--workers 2``) the child's check raises and the parent raises the
    KeyboardInterrupt the child sent back. The suite's runs without their facts: the grid path replays
    them (it declines a trace with facts, which the per-call loop replays)."""
    import sim.analysis.size
    import sim.engine.fast.seed_lanes
    from sim.cli import main

    parent = os.getpid()
    monkeypatch.setattr(
        sim.analysis.size, "GRID_BATCH", 8
    )  # 5 batches: the parent's share 0, 2, 4, the child's 1, 3
    monkeypatch.setattr(sim.analysis.size, "FORK_LANES", 0)  # forked however small the grid
    ignored = _ignored(monkeypatch)
    real = sim.engine.fast.seed_lanes.grid_figures
    calls: list[int] = []

    def grid_figures(*args):
        calls.append(os.getpid())
        if len(calls) == 1 and (os.getpid() == parent) == (where == "here"):
            obj = _SignalsItselfWhenCollected()
            del obj
        return real(*args)

    monkeypatch.setattr(sim.engine.fast.seed_lanes, "grid_figures", grid_figures)
    from scenarios.make_suite import N_RUNS, SEED
    from scenarios.swe_like import generate_suite
    from sim.trace.io import write_traces

    bare = tmp_path / "swe_like_bare.jsonl"
    write_traces(generate_suite(SEED, N_RUNS), bare)
    argv = ["size", str(bare), "--model", "claude-sonnet-4-5", "--limits", "16000,32000"]
    workers = "1" if where == "here" else "2"
    assert main([*argv, "--keeps", "2000,4000", "--format", "json", "--workers", workers]) == 130
    if where == "here":
        assert ignored == [KeyboardInterrupt] and calls == [parent]  # no batch after the interrupted one
    else:
        assert ignored == [] and calls == [parent] * 3  # the parent's share whole; the child's stopped
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines()[-1] == "ctxsim: interrupted"


def test_report_interrupted_in_a_finalizer_leaves_no_report(capsys, monkeypatch, tmp_path):
    import sim.report.make
    from sim.cli import main
    from sim.sweep.execute import SweepSpec, run_sweep

    results = run_sweep(
        SweepSpec(
            policy="observation_masking",
            grid=("policy.n=1,3",),
            scenario=str(SWE_LIKE),
            pricing="claude-sonnet-4-5",
            results=str(tmp_path / "sweep"),
        ),
        progress=False,
    )
    ignored = _ignored(monkeypatch)
    _swallowed_once(monkeypatch, sim.report.make, "render_md")  # the last file's text, its rename to come
    assert main(["report", str(results), "-o", str(tmp_path / "rep")]) == 130
    assert ignored == [KeyboardInterrupt]
    assert not (tmp_path / "rep" / "report.md").exists()
    assert not list((tmp_path / "rep").glob(".*.tmp"))
    assert capsys.readouterr().err.splitlines()[-1] == "ctxsim: interrupted"


def test_an_interrupted_sweep_says_its_own_line_only(capsys, monkeypatch, tmp_path):
    import sim.sweep.unit_runner
    from sim.cli import main

    _ignored(monkeypatch)
    _swallowed_once(monkeypatch, sim.sweep.unit_runner, "run_chunk")  # its part's rename checks first
    out = tmp_path / "sweep"
    words = ["policy=observation_masking", "policy.n=1,3", f"scenario={SWE_LIKE}", f"results.path={out}"]
    assert main(["sweep", *words]) == 130
    err = capsys.readouterr().err.splitlines()
    assert "ctxsim: interrupted" not in err
    assert err[-1] == (
        f"ctxsim: sweep: interrupted: 0 of 80 runs saved in {out / 'parts'}; rerun the same command to resume"
    )
    assert not (out / "results.parquet").exists() and not list((out / "parts").glob("*.parquet"))


# The streamed run of the subprocess test: the thread reading ahead says so on stderr when it starts to
# parse, and parses until the Ctrl-C has arrived (so the signal lands while it parses, however loaded
# the machine); at exit the threads still alive are listed.
_READING_AHEAD = """
import atexit, importlib, sys, threading, time
import sim.trace.readahead as ra
from sim.util import interrupts
from sim.cli import main

module, name = sys.argv[1].rsplit(".", 1)
tc = importlib.import_module(module)
ra.READ_AHEAD = True
real = getattr(tc, name)

def parsing(*args):
    if threading.current_thread() is not threading.main_thread() and not parsing.said:
        parsing.said = True
        print("reading ahead", file=sys.stderr, flush=True)
        deadline = time.monotonic() + 60  # a bound for a broken test, not a timing
        while not interrupts._arrived and time.monotonic() < deadline:
            time.sleep(0.001)
    return real(*args)

parsing.said = False
setattr(tc, name, parsing)
atexit.register(lambda: print("threads at exit:", [t.name for t in threading.enumerate()], file=sys.stderr))
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.parametrize(
    ("suffix", "parse"),
    [(".jsonl", "sim.trace.read_jsonl._parsed"), (".parquet", "sim.trace.read_parquet._open_parquet")],
)
def test_ctrl_c_while_the_read_ahead_thread_parses_stops_the_streamed_run(tmp_path, suffix, parse):
    import subprocess

    from sim.importers import load_path
    from sim.trace.io import write_traces

    corpus = tmp_path / f"corpus{suffix}"
    write_traces(list(load_path(SWE_LIKE)), corpus)
    before = sorted(tmp_path.iterdir())
    argv = [
        "run",
        "--dataset",
        str(corpus),
        "--streaming",
        "--format",
        "csv",
        "--calls",
        str(tmp_path / "c.csv"),
    ]
    proc = subprocess.Popen(
        [sys.executable, "-c", _READING_AHEAD, parse, *argv],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr.readline() == "reading ahead\n"  # the marker: the thread is parsing now
        os.kill(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130
    assert out == ""
    assert err == "ctxsim: interrupted\nthreads at exit: ['MainThread']\n"  # no traceback, no thread left
    assert sorted(tmp_path.iterdir()) == before  # no --calls file, no temporary


def test_ctrl_c_while_the_read_ahead_thread_starts_still_stops_it(monkeypatch):
    """Under load the reader thread may run before ``Thread.start`` returns on the main thread; a Ctrl-C
    then is held back until start has returned, so it is raised where the thread is told to stop."""
    import sim.trace.readahead as tc

    monkeypatch.setattr(tc, "READ_AHEAD", True)
    real_start = threading.Thread.start

    def start(self) -> None:
        real_start(self)
        os.kill(os.getpid(), signal.SIGINT)  # unheld, Python's handler would raise in here
        time.sleep(0.05)

    monkeypatch.setattr(threading.Thread, "start", start)
    closed = []

    def items():
        try:
            yield from range(3)
        finally:
            closed.append(True)

    with pytest.raises(KeyboardInterrupt):
        list(tc.read_ahead(items()))
    assert closed == [True]  # the source closed on its thread, which has ended
    assert [t.name for t in threading.enumerate() if t.name == "ctxsim-read-ahead"] == []
