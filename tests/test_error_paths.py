"""Issue 41, item 3: one error path. Every input-derived failure is exit 2 with one line naming the file,
record and field (or the knob, value and range); exit 3 only for ctxsim's own bugs. Each signature of the
issue has a test here with a small input made in the test; and ``validate``, ``import``, ``run`` and
``run --dataset`` give the same verdict on a corpus of damaged canonical files."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from builders import ev, swe_trace

from sim.cli import main
from sim.core.types import Call, Trace
from sim.trace.io import write_traces
from sim.util.paths import EMBEDDED_SUITE, traces_dir


def _err_lines(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.strip()]


def _errors(capsys) -> list[str]:
    """The error lines (warnings about unpriced synthetic models left out)."""
    return [line for line in _err_lines(capsys) if "warning:" not in line]


def refused(capsys, argv: list[str], match: str) -> str:
    """``ctxsim ARGV`` exits 2 with one error line matching ``match``."""
    code = main(argv)
    err = _errors(capsys)
    assert code == 2, (code, err)
    assert len(err) == 1 and re.search(match, err[0]), err
    return err[0]


def three_traces() -> list[Trace]:
    return [swe_trace([(f"out {k}\n" * 20, 30) for k in range(5)], trace_id=f"t{i}") for i in range(3)]


@pytest.fixture
def good(tmp_path) -> Path:
    path = tmp_path / "good.jsonl"
    write_traces(three_traces(), path, record_hashes=False)
    return path


# ---------------------------------------------------------------------------------- explain --call 0
def test_explain_a_call_with_nothing_before_it(tmp_path, capsys):
    """A conversation whose only message is the assistant's: call 0 sends no items (was an IndexError
    in cli.py on the empty table)."""
    conv = tmp_path / "conv.json"
    conv.write_text(json.dumps([{"role": "assistant", "content": "hello there"}]))
    assert main(["explain", str(conv), "--policy", "observation_masking", "--call", "0"]) == 0
    out = capsys.readouterr().out
    assert "call 0 sent no items: nothing came before it in the trace" in out
    assert "input 0 = view 0 + residual 0" in out
    refused(capsys, ["explain", str(conv), "--policy", "raw", "--call", "1"], r"--call 1 is not in \[0, 0\]")


# ------------------------------------------------------------------------------------ number ranges
@pytest.mark.parametrize("command", ["run", "size", "sweep", "explain"])
def test_window_out_of_range_names_the_flag_and_range(good, capsys, command):
    """``--window 99999999999999999999`` was an OverflowError when the int64 window column was built."""
    argv = {
        "run": ["run", str(good), "--policy", "raw"],
        "size": ["size", str(good), "--model", "claude-sonnet-4-5"],
        "sweep": ["sweep", "policy=raw", f"scenario={good}"],
        "explain": ["explain", str(good), "--policy", "raw", "--call", "0", "--trace", "t0"],
    }[command]
    refused(
        capsys,
        [*argv, "--window", "99999999999999999999"],
        r"^ctxsim: error: --window 99999999999999999999 is out of range: "
        r"expected an integer in \[1, 2\^53\)$",
    )


def test_model_window_override_out_of_range(good, capsys):
    refused(
        capsys,
        ["run", str(good), "--policy", "raw", "model.window=99999999999999999999"],
        r"^ctxsim: error: model\.window=99999999999999999999 is not null .* an integer in \[1, 2\^53\)$",
    )


# ------------------------------------------------------------------------------------ gate baselines
GATE = """\
suite: {suite}
pricing: claude-sonnet-4-5
baseline:
  results: base.jsonl
candidate:
  policy: {policy}
  params: {params}
thresholds:
  cost_microusd: {{max_increase_pct: 5}}
  tokens_reclaimed: {{max_increase: 0}}
"""


@pytest.fixture(scope="module")
def baseline_rows(tmp_path_factory) -> list[dict]:
    d = tmp_path_factory.mktemp("gatebase")
    (d / "gate.yaml").write_text(
        GATE.format(suite=EMBEDDED_SUITE / "closed_loop.jsonl", policy="raw", params="{}")
    )
    assert main(["gate", str(d / "gate.yaml"), "--update-baseline"]) == 0
    return [json.loads(line) for line in (d / "base.jsonl").read_text().splitlines()]


@pytest.mark.parametrize(
    ("literal", "shown"),
    [
        ("1" + "0" * 400, r"10000000000000000000\.\.\. \(401 digits\)"),  # was OverflowError
        ("1e308", r"1e\+308"),  # summed to inf, printed "inf ... (-nan%)"
        ("-1e308", None),  # a count: below 0 first
        ("9007199254740993", r"9007199254740993"),  # 2^53 + 1: past what a run writes
    ],
)
def test_gate_baseline_value_out_of_range(tmp_path, capsys, baseline_rows, literal, shown):
    rows = [dict(r) for r in baseline_rows]
    rows[1]["cost_microusd"] = "@@"
    (tmp_path / "base.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows).replace('"@@"', literal))
    gate = tmp_path / "gate.yaml"
    gate.write_text(GATE.format(suite=EMBEDDED_SUITE / "closed_loop.jsonl", policy="raw", params="{}"))
    if shown is None:
        match = r"base\.jsonl: line 2: field cost_microusd: expected a number >= 0, got -1e\+308$"
    else:
        match = rf"base\.jsonl: line 2: field cost_microusd: {shown} is out of range: expected a number in"
    refused(capsys, ["gate", str(gate)], match)


# ------------------------------------------------------------------ observation_masking tokens_reclaimed
def low_ratio_trace() -> Trace:
    """The shape of OpenHands' runtime test ``wrong_initial_state``: the first call's recorded input holds
    a system prompt the trace does not record (3,475 tokens on a 37-byte task), so the trace's fitted
    ratio is 0.2883 bytes per token while its tool results measure about 2 (127 bytes: 59 tokens)."""
    events = [ev(0, "user", "Please rename game_2048.py to 2048.py", 3475)]
    calls = []
    for k in range(3):
        a = len(events)
        events.append(ev(a, "assistant", f"step {k}\n" + "x" * 170, 80, tool_call_ids=(f"c{k}",)))
        calls.append(a)
        events.append(ev(a + 1, "tool_result", ("line of output\n" * 9)[:127], 59, tool_call_id=f"c{k}"))
    events.append(ev(len(events), "assistant", "done", 20))
    calls.append(len(events) - 1)
    prefix = [0]
    for e in events:
        prefix.append(prefix[-1] + e.tokens)
    return Trace(
        "low_ratio",
        "ctxsim-scenario",
        tuple(events),
        tuple(
            Call(index=j, event_index=a, view_end=a, input_tokens=prefix[a], output_tokens=7)
            for j, a in enumerate(calls)
        ),
        bytes_per_token=0.2883,
    )


def test_masking_placeholder_sized_at_the_observations_own_ratio():
    """A 41-byte placeholder at the trace's 0.2883 bytes/token weighed ceil(57 / 0.2883) = 198 tokens, more
    than the 59-token result it replaced: masking "reclaimed" negative tokens. At the result's own ratio
    it weighs ceil(59 x 57 / 143) = 24; the smaller of the two is taken."""
    from sim.engine.dispatch import replay
    from sim.metrics.compute import compute_metrics
    from sim.policies.base import make_policy
    from sim.policies.observation_masking import placeholder, placeholder_sizes

    t = low_ratio_trace()
    assert len(placeholder(t.events[2].lines).encode()) == 41 and t.events[2].bytes == 127
    assert placeholder_sizes(t)[2] == (24, 41)
    m = compute_metrics(replay(t, make_policy("observation_masking", n=1)))
    # n=1: results 1 and 2 (events 2 and 4) are masked by the last call, 59 - 24 = 35 tokens each
    assert (m["compactions"], m["tokens_reclaimed"]) == (2, 70)


def test_gate_accepts_its_own_baseline_on_masking(tmp_path, capsys):
    """The gate wrote a baseline it then refused (tokens_reclaimed < 0 read as a bad count); now the
    numbers are positive, and a net tokens_reclaimed below 0 is a value the baseline may hold anyway."""
    suite = tmp_path / "suite.jsonl"
    write_traces([low_ratio_trace()], suite, record_hashes=False)
    gate = tmp_path / "gate.yaml"
    gate.write_text(GATE.format(suite=suite, policy="observation_masking", params="{n: 1}"))
    assert main(["gate", str(gate), "--update-baseline"]) == 0
    row = json.loads((tmp_path / "base.jsonl").read_text())
    assert row["tokens_reclaimed"] == 70
    assert main(["gate", str(gate)]) == 0
    row["tokens_reclaimed"] = -244
    (tmp_path / "base.jsonl").write_text(json.dumps(row) + "\n")
    capsys.readouterr()
    assert main(["gate", str(gate)]) == 1  # read, then a regression: 314 more tokens reclaimed
    assert "tokens_reclaimed" in capsys.readouterr().err


REAL = traces_dir() / "openhands-v0" / "runtime_test_trajs" / "wrong_initial_state.json"


@pytest.mark.skipif(not REAL.is_file(), reason="shared real traces not present")
def test_the_issues_real_run_reclaims_positive_tokens(capsys):
    from sim.engine.dispatch import replay
    from sim.importers import load_path
    from sim.metrics.compute import compute_metrics
    from sim.policies.base import make_policy

    (t,) = load_path(REAL)
    assert t.bytes_per_token == 0.2883
    m = compute_metrics(replay(t, make_policy("observation_masking", n=1)))
    assert m["tokens_reclaimed"] == 103  # was -244


# -------------------------------------------------------------------------------------- deep folders
def _deep_folder(root: Path, depth: int) -> Path:
    """``root/d/d/.../d`` ``depth`` levels deep, made through directory handles (``os.makedirs`` itself
    recurses once a level)."""
    root.mkdir()
    fd = os.open(root, os.O_RDONLY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            nfd = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = nfd
    finally:
        os.close(fd)
    return root


def _remove_deep(root: Path, depth: int) -> None:
    """Remove what ``_deep_folder`` made, deepest first (pytest's own clean-up, ``shutil.rmtree``,
    recurses once a level too, and would fail on it in a later session)."""
    for k in range(depth, 0, -1):
        os.rmdir(root.joinpath(*["d"] * k))


def test_run_dataset_on_a_folder_1100_levels_deep(tmp_path, good, capsys):
    deep = _deep_folder(tmp_path / "deep", 1100)
    try:
        (deep / "a.jsonl").write_bytes(good.read_bytes())
        refused(
            capsys,
            ["run", "--dataset", str(deep), "--policy", "raw"],
            rf"^ctxsim: error: {re.escape(str(deep))}: folders nested more than 256 levels deep "
            r"\(at \.\.\./d/d/",
        )
    finally:
        _remove_deep(deep, 1100)
    shallow = _deep_folder(tmp_path / "shallow", 30)
    (shallow / "d" / "a.jsonl").write_bytes(good.read_bytes())
    assert main(["run", "--dataset", str(shallow), "--policy", "raw"]) == 0


def test_every_reader_refuses_a_folder_past_the_depth_limit(tmp_path, good, capsys):
    """validate, run and import walk folders with the depth limit run --dataset keeps (the fuzzer found
    them accepting what run --dataset refused): 257 levels are refused by all four, 256 accepted."""
    deep = _deep_folder(tmp_path / "deep", 257)
    edge = _deep_folder(tmp_path / "edge", 256)
    try:
        deep.joinpath(*["d"] * 257, "a.jsonl").write_bytes(good.read_bytes())
        edge.joinpath(*["d"] * 256, "a.jsonl").write_bytes(good.read_bytes())
        for argv in (["validate"], ["run", "--policy", "raw"], ["import", "-o", str(tmp_path / "o.jsonl")],
                     ["run", "--policy", "raw", "--dataset"]):  # fmt: skip
            refused(capsys, [*argv, str(deep)], r"folders nested more than 256 levels deep \(at \.\.\./d/d/")
            assert main([*argv, str(edge)]) == 0, argv
            capsys.readouterr()
    finally:
        for root, depth in ((deep, 257), (edge, 256)):
            root.joinpath(*["d"] * depth, "a.jsonl").unlink(missing_ok=True)
            _remove_deep(root, depth)


# ---------------------------------------------------------------------------------------- sweep places
@pytest.mark.parametrize("multirun", [False, True], ids=["sweep", "sweep -m"])
@pytest.mark.parametrize("where", ["file", "/dev/null", "/proc/self"])
def test_sweep_results_path_that_is_no_folder(tmp_path, good, capsys, where, multirun):
    if where == "file":
        where = str(tmp_path / "afile")
        Path(where).write_text("mine\n")
    elif not Path(where).exists():
        pytest.skip(f"{where} does not exist here")
    argv = ["sweep", *(["-m"] if multirun else []), "policy=raw", f"scenario={good}", f"results.path={where}"]
    cmd = "sweep -m" if multirun else "sweep"
    err = refused(capsys, argv, rf"^ctxsim: error: {cmd}: results\.path={re.escape(where)}: ")
    if where == "/proc/self":
        assert "cannot create" in err
    else:
        assert err.endswith("not a folder (a file of that name exists)")
    if where.endswith("afile"):
        assert Path(where).read_text() == "mine\n"


def test_sweep_multirun_joblib_sharedmem(tmp_path, good, capsys):
    refused(
        capsys,
        [
            "sweep", "-m", "policy=raw", f"scenario={good}", f"results.path={tmp_path / 'r'}",
            "hydra/launcher=joblib", "hydra.launcher.require=sharedmem",
        ],
        r"^ctxsim: error: sweep -m: hydra\.launcher \(.*require=sharedmem.*\): joblib refuses it: "
        r"prefer == 'processes' and require == 'sharedmem' are inconsistent",
    )  # fmt: skip
    assert not (tmp_path / "r").exists()


# ------------------------------------------------------------------- the same verdict from every reader
def _mutations(good: bytes) -> dict[str, bytes]:
    """Damaged copies of a three-record canonical file, each damaged in its third record."""
    lines = good.rstrip(b"\n").split(b"\n")
    d = json.loads(lines[2])

    def canonical(rec) -> bytes:  # as write_traces writes a line: the column reader's fast path takes it
        return json.dumps(rec, ensure_ascii=False, separators=(",", ":")).encode()

    def with_record(rec) -> bytes:
        return b"\n".join([*lines[:2], canonical(rec)]) + b"\n"

    def edited(fn) -> bytes:
        rec = json.loads(lines[2])
        fn(rec)
        return with_record(rec)

    def ff_in(fn) -> bytes:
        """A record whose field ``fn`` sets to "MARK..." holds 0xFF inside that string."""
        rec = json.loads(lines[2])
        fn(rec)
        raw = canonical(rec).replace(b"MARK", b"MA\xffRK", 1)
        return b"\n".join([*lines[:2], raw]) + b"\n"

    third = lines[2]
    at = [m.start() for m in re.finditer(rb'"content":"out', third)][-2] + 14  # inside a later event
    out = {
        "0xFF in a later event": b"\n".join([*lines[:2], third[:at] + b"\xff" + third[at:]]) + b"\n",
        "truncated UTF-8": b"\n".join([*lines[:2], third[:at] + b"\xc3" + third[at:]]) + b"\n",
        "surrogate as UTF-8": b"\n".join([*lines[:2], third[:at] + b"\xed\xa0\x80" + third[at:]]) + b"\n",
        # strings Arrow kept as bytes until the events were built, lazily: an internal UnicodeDecodeError
        "0xFF in source_type": ff_in(lambda r: r["events"][3].update(source_type="MARK:run")),
        "0xFF in url": ff_in(lambda r: r["events"][3].update(url="https://MARK.example")),
        "0xFF in tool_call_id": ff_in(lambda r: r["events"][3].update(tool_call_id="MARK")),
        "0xFF in provides": ff_in(lambda r: r["events"][3].update(provides=["MARK:a"])),
        "0xFF in agent": ff_in(lambda r: r.update(agent="MARK")),
        "0xFF in a key": b"\n".join([*lines[:2], third.replace(b'"tokens"', b'"tok\xffens"', 1)]) + b"\n",
        "cut mid-record": b"\n".join([*lines[:2], third[: len(third) // 2]]) + b"\n",
        "an array": b"\n".join([*lines[:2], b"[1, 2]"]) + b"\n",
        "tokens 10**30": edited(lambda r: r["events"][3].update(tokens=10**30)),
        "tokens 1e400": b"\n".join([*lines[:2], third.replace(b'"tokens":30', b'"tokens":1e400', 1)]) + b"\n",
        "tokens -1": edited(lambda r: r["events"][3].update(tokens=-1)),
        "tokens 2.5": edited(lambda r: r["events"][3].update(tokens=2.5)),
        "tokens as text": edited(lambda r: r["events"][3].update(tokens="30")),
        "tokens NaN": b"\n".join([*lines[:2], third.replace(b'"tokens":30', b'"tokens":NaN', 1)]) + b"\n",
        "bytes_per_token 0": edited(lambda r: r.update(bytes_per_token=0)),
        "timestamp 1e300": edited(lambda r: r["events"][2].update(timestamp=1e300)),
        "no events": edited(lambda r: r.pop("events")),
        "no trace_id": edited(lambda r: r.pop("trace_id")),
        "event without kind": edited(lambda r: r["events"][2].pop("kind")),
        "events an object": edited(lambda r: r.update(events={})),
        "kind a number": edited(lambda r: r["events"][2].update(kind=5)),
        "unknown kind": edited(lambda r: r["events"][2].update(kind="robot")),
        "an extra field": edited(lambda r: r.update(mine=1)),
        "call past the events": edited(lambda r: r["calls"][0].update(event_index=999)),
        "calls a string": with_record({**d, "calls": "none"}),
    }
    return out


def _verdicts(path: Path, tmp_path: Path) -> dict[str, int]:
    out = tmp_path / "imported.jsonl"
    return {
        "validate": main(["validate", str(path)]),
        "import": main(["import", str(path), "-o", str(out)]),
        "run": main(["run", str(path), "--policy", "raw"]),
        "run --dataset": main(["run", "--dataset", str(path), "--policy", "raw"]),
    }


def test_every_reader_gives_the_same_verdict(tmp_path, good, capsys):
    """The four commands accept and refuse exactly the same canonical files: the good one (exit 0 from
    each) and every damaged copy (exit 2 from each, never 3, and ``import`` writes nothing)."""
    assert _verdicts(good, tmp_path) == dict.fromkeys(("validate", "import", "run", "run --dataset"), 0)
    capsys.readouterr()
    disagree = {}
    for name, data in _mutations(good.read_bytes()).items():
        bad = tmp_path / "bad.jsonl"
        bad.write_bytes(data)
        (tmp_path / "imported.jsonl").unlink(missing_ok=True)
        got = _verdicts(bad, tmp_path)
        err = capsys.readouterr().err
        assert "internal error" not in err, (name, err)
        if set(got.values()) != {2} or (tmp_path / "imported.jsonl").exists():
            disagree[name] = got
    assert disagree == {}


# ------------------------------------------------------------------------ outputs in places that are not
NOT_FOLDERS = {
    "a file's folder": (
        ["import", "{good}", "-o", "{file}/x.jsonl"],
        r"cannot write .*afile/x\.jsonl: .*afile is not a folder$",
    ),
    "a folder": (["import", "{good}", "-o", "{folder}"], r"cannot write .*d\.jsonl: it is a folder$"),
    "/dev/null": (
        ["import", "{good}", "-o", "/dev/null/x.jsonl"],
        r"cannot write /dev/null/x\.jsonl: /dev/null is not a folder$",
    ),
    "--calls": (
        ["run", "{good}", "--policy", "raw", "--calls", "{file}/c.csv"],
        r"cannot write .*afile/c\.csv: .*afile is not a folder$",
    ),
    "/proc/self": (
        ["import", "{good}", "-o", "/proc/self/x.jsonl"],
        r"cannot write /proc/self/x\.jsonl: no file can be created in /proc/self",
    ),
}


@pytest.mark.parametrize(("argv", "match"), NOT_FOLDERS.values(), ids=NOT_FOLDERS.keys())
def test_outputs_in_places_that_are_not_folders(tmp_path, good, capsys, argv, match):
    """An output whose folder is a file (or ``/dev/null``, or a folder nothing can be created in) was an
    internal error (FileExistsError, FileNotFoundError); now exit 2 naming the output, nothing written."""
    if "/proc/self" in " ".join(argv) and not Path("/proc/self").is_dir():
        pytest.skip("no /proc here")
    (tmp_path / "afile").write_text("mine\n")
    (tmp_path / "d.jsonl").mkdir()
    argv = [a.format(good=good, file=tmp_path / "afile", folder=tmp_path / "d.jsonl") for a in argv]
    refused(capsys, argv, r"^ctxsim: error: " + match)
    assert (tmp_path / "afile").read_text() == "mine\n" and not any((tmp_path / "d.jsonl").iterdir())
    assert not list(tmp_path.glob(".*.tmp"))


def test_an_input_without_model_calls_is_refused_by_validate_run_and_import(tmp_path, capsys):
    """A Claude Code session of user messages only yields no trace: validate, run and import all exit 2
    (before, validate said ok and run printed nothing, while import refused)."""
    rec = {"type": "user", "sessionId": "s", "uuid": "u1", "parentUuid": None,
           "timestamp": "2026-01-01T00:00:00Z", "message": {"role": "user", "content": "hello"}}  # fmt: skip
    f = tmp_path / "session.jsonl"
    f.write_text(json.dumps(rec) + "\n")
    assert main(["validate", str(f)]) == 2
    assert capsys.readouterr().out.strip().endswith("session.jsonl: no traces (see the warnings above)")
    refused(capsys, ["run", str(f)], r"session\.jsonl: no traces to replay")
    refused(capsys, ["import", str(f), "-o", str(tmp_path / "o.jsonl")], r"no traces to import")
    assert not (tmp_path / "o.jsonl").exists()


def test_an_override_too_long_for_a_file_name_is_a_knob_out_of_range(tmp_path, capsys):
    """``policy.polling=<400 digits>`` is longer than a file name may be: checking whether it names a file
    raised OSError (exit 3); it is an override, refused by the knob's range check."""
    path = tmp_path / "t.jsonl"
    write_traces(three_traces(), path, record_hashes=False)
    refused(capsys, ["run", str(path), "--policy", "observation_masking", "policy.polling=" + "1" * 400],
            r"polling=1+ is out of range")  # fmt: skip
