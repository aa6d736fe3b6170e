"""Reading ctxsim's own files imports no other format (``sim.importers._canonical_first``), and finds the
importer ``detect`` finds with every format loaded."""

from __future__ import annotations

import subprocess
import sys

from scenarios.swe_like import generate_run
from sim.trace.io import write_traces

CHECK = """
import sys
from sim.importers import detect, load_paths, registered
from pathlib import Path
path = Path(sys.argv[1])
n = len(list(load_paths([str(path)])))
others = sorted(m for m in sys.modules if m.startswith("sim.importers.") and m != "sim.importers.canonical")
first = detect(path).name
registered()
print(n, others, first, detect(path).name, list(registered())[:2])
"""


def test_a_canonical_file_is_read_without_the_other_formats(tmp_path):
    path = tmp_path / "runs.jsonl"
    write_traces([generate_run(7, i) for i in range(2)], path)
    out = subprocess.run(
        [sys.executable, "-c", CHECK, str(path)], capture_output=True, text=True, check=True
    ).stdout.split(" ", 2)
    assert out[:2] == ["2", "[]"]
    assert out[2].strip() == (
        "ctxsim-canonical ctxsim-canonical ['ctxsim-canonical', 'ctxsim-canonical-parquet']"
    )


def test_a_jsonl_file_not_canonical_is_detected_among_every_format(tmp_path):
    from sim.importers import detect

    path = tmp_path / "chat.jsonl"
    path.write_text('{"type": "user", "message": {"role": "user", "content": "hi"}}\n')
    names = subprocess.run(
        [sys.executable, "-c", "import sys; from pathlib import Path; from sim.importers import detect;"
         "print(detect(Path(sys.argv[1])).name)", str(path)],
        capture_output=True, text=True,
    )  # fmt: skip
    try:
        want = detect(path).name
    except Exception as exc:  # noqa: BLE001 - the same error either way
        want = str(exc)
    assert (names.stdout.strip() or names.stderr.strip().splitlines()[-1].split(": ", 1)[-1]) == want
