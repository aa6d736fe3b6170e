"""The hostile inputs of issue 18 under ``ulimit -v 1500000`` (a cap on virtual address space, imports
included): ``ctxsim`` in a subprocess exits 0 or 2 on each, never a MemoryError (3) or a traceback.
Before the bounds, each of these exited 3 with a MemoryError under this limit (the bzip2 member peaked
at 4.9 GB and the YAML alias bomb at whatever memory there was, without it).

The subprocess keeps thread pools and allocator arenas small, as the issue asks of such a run:
``MALLOC_ARENA_MAX=2`` (glibc reserves up to 64 MiB of address space per arena, one per thread),
single-threaded OpenBLAS/OpenMP, and pyarrow's ``system`` memory pool: pyarrow's default pool
(mimalloc) reserves about 1 GiB of address space on its first allocation (VmPeak 1.35 GB to read a
small Parquet file, 1.42 GB for ``import datasets``; 0.30 / 0.37 GB with the system pool).
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hostile import (
    BZIP2,
    LZMA,
    alias_bomb,
    bzip2_zeros,
    inspect_eval_members,
    lzma_zeros,
    member,
    swe_agent_0x,
    zip_bytes,
)

pytestmark = pytest.mark.slow  # hostile inputs of hundreds of MB, each ctxsim run under a cap
LIMIT_KB = 1_500_000
if not sys.platform.startswith("linux"):
    pytest.skip("RLIMIT_AS and wait4's per-child peak RSS are Linux behaviour", allow_module_level=True)


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT_KB * 1024, LIMIT_KB * 1024))


def ctxsim_limited(*argv: str | Path) -> tuple[int, str, int]:
    """(exit status, standard output and error, peak RSS in KiB) of ``ctxsim ARGV`` under the cap."""
    exe = shutil.which("ctxsim") or str(Path(sys.executable).parent / "ctxsim")
    env = dict(os.environ)
    env.update(
        OPENBLAS_NUM_THREADS="1",
        OMP_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        MALLOC_ARENA_MAX="2",
        ARROW_DEFAULT_MEMORY_POOL="system",
        HF_DATASETS_OFFLINE="1",
        HF_HUB_OFFLINE="1",
    )
    p = subprocess.Popen(
        [exe, *map(str, argv)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        preexec_fn=_limited,
    )
    text = p.stdout.read().decode("utf-8", errors="replace")
    _, status, usage = os.wait4(p.pid, 0)  # the child's own peak RSS (getrusage would give the largest)
    p.returncode = os.waitstatus_to_exitcode(status)
    p.stdout.close()
    return p.returncode, text, usage.ru_maxrss


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("hostile")
    header, _ = inspect_eval_members()
    name = "samples/s_epoch_1.json"
    cases = {}
    cases["bzip2-eval"] = root / "bzip2.eval"  # 2.5 GB of zeros in a 2 KB member that declares 100 bytes
    cases["bzip2-eval"].write_bytes(
        zip_bytes([header, member(name, b"", BZIP2, payload=bzip2_zeros(55), size=100, crc=0)])
    )
    cases["lzma-eval"] = root / "lzma.eval"  # 1 GiB of zeros in a 150 KB member that declares 100 bytes
    cases["lzma-eval"].write_bytes(
        zip_bytes([header, member(name, b"", LZMA, payload=lzma_zeros(1 << 30), size=100, crc=0)])
    )
    traj = swe_agent_0x(root / "swe0")
    (traj.parent / "args.yaml").write_text(alias_bomb())
    cases["yaml-bomb"] = traj
    big = root / "unknown.json"  # 64 MB of tiny objects in no known format: 2.5 GB if parsed whole
    with open(big, "w") as f:
        f.write('{"rows": [' + ",".join(['{"a":[]}'] * (64_000_000 // 9)) + "]}")
    cases["unknown-json"] = big
    return cases


@pytest.mark.parametrize(
    "case, command",
    [
        ("bzip2-eval", "import"),
        ("lzma-eval", "import"),
        ("yaml-bomb", "import"),
        ("unknown-json", "import"),
        ("bzip2-eval", "validate"),
        ("unknown-json", "validate"),
    ],
)
def test_hostile_input_under_an_address_space_cap_exits_0_or_2(hostile, tmp_path, case, command):
    out = tmp_path / "out.jsonl"
    argv = ["import", hostile[case], "-o", out] if command == "import" else ["validate", hostile[case]]
    code, err, peak_kb = ctxsim_limited(*argv)
    assert code in (0, 2), err
    assert "Traceback" not in err and "internal error" not in err and "MemoryError" not in err, err
    assert peak_kb < 400_000, f"peak RSS {peak_kb:,} KiB"
    expected = {
        "bzip2-eval": "decompression bomb",
        "lzma-eval": "decompression bomb",
        "yaml-bomb": "expands to more than 200,000 nodes",
        "unknown-json": "unknown format",
    }[case]
    assert expected in err, err
    if case == "yaml-bomb":  # the trajectory itself is fine: imported without its config, with a warning
        assert code == 0 and "args.yaml" in err


def test_parquet_and_datasets_work_under_the_cap(tmp_path):
    """The readers that need pyarrow (and ``datasets``) run under the same cap with the system pool."""
    from builders import swe_trace

    from sim.trace.io import write_traces

    path = tmp_path / "suite.parquet"
    write_traces([swe_trace([("a\nb", 100)] * 3, trace_id="t1")], path)
    for argv in (["run", path], ["validate", path], ["run", "--dataset", path]):
        code, err, _ = ctxsim_limited(*argv)
        assert code == 0, err
