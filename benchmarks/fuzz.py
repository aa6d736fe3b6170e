"""Mutation fuzzer of the input boundary (not a test): mutate small copies of the real traces of every
format, add amplifying inputs, and run each case through the real command line in a fresh process under
CPU and memory caps; any outcome but exit 0 or 2 is a failure.

    .venv/bin/python benchmarks/fuzz.py --cases 10000 [--seed 0] [--workers 2] [--out DIR]
        [--format table|json] [--stats FILE] [--formats LABEL,...] [--no-bombs] [--amp-rate 0.05]
        [--no-amp] [--time-bound 20] [--max-memory-mb 1500] [--max-rss-mb 1000] [--list]
        [--only I,J,...] [--no-baseline]

Samples: the real traces in ``CTXSIM_TRACES`` (default ``../shared/traces``; never copied into the repo),
long lists and strings cut so a case stays fast; canonical ``.jsonl`` and ``.parquet`` made from them with
``ctxsim import`` at start; ``openai-chat`` and ``anthropic-messages`` transcripts built here (no shared
sample exists). Each unmutated sample is run once first (the baseline) to show it is accepted.

Case ``i`` draws everything from ``random.Random(f"{seed}:{i}")``: a format, one of its samples and 1-3
mutations (byte level: bit flips, byte changes, insertions, deletions, truncation, a BOM, CRLF line ends,
invalid UTF-8; JSON structure: a value at a random path replaced by another type, a huge integer, -1,
1e400, NaN, a lone surrogate or a 1,000-deep list, a key deleted, list items duplicated or dropped, a
list swapped for an object; JSON Lines one record at a time; archives: a member's JSON, name (``..``,
backslash, ``C:``), a duplicated member, a size the header lies about, another compression; folders: one
file mutated, dropped or duplicated; SWE-agent's ``args.yaml``: bytes, tags, nesting, odd values). Rare
resource cases unless ``--no-bombs``: a BZIP2/LZMA member inflating to 1.2 GB behind a small declared
size (made once per run, ~30 s), a YAML alias bomb, a 100 MB JSON document of no known format.

Amplification cases (issue 41's attack run): a share ``--amp-rate`` (default 5%; ``--no-amp`` for none,
and then every case is the one drawn before they existed) are drawn from ``f"{seed}:{i}:amp"`` instead:
Claude Code records sharing one ``message.id`` (16,000-22,000) or one-record sidechains with distinct
``agentId`` (8,500-10,000); OpenHands SDK action files sharing one ``llm_response_id`` (9,000-12,000);
Inspect model events whose ``input_refs`` span a pool of messages without ids, and hundreds of messages
pointing to one 2-8 MiB ``attachment://``; an ``.eval`` LZMA member declaring a 2-4 GiB dictionary, or a
member also spelled ``samples/./`` and ``samples//``; canonical Parquet whose string column is one
~1 MB dictionary value in thousands of rows (GiB decoded, ~13 KB on disk); identifiers of 1-16 MiB; the
sample 1,050-1,150 folders deep (``run --dataset`` too for canonical files); every number out of a
float's range (``10**400``, ``1e308``, ...); numeric knobs out of range (``--window``, each policy's
numbers, ``explain --call``); a gate whose baseline holds such a number; a conversation of only the
assistant's message under ``explain --call 0``. Each is sized so a linear, capped reader handles it in a
few seconds (a same-size input without the sharing runs in about a second a command). The four
importer attacks (shared ids, sidechains, input_refs) run only ``validate``, ``import`` and ``validate``
of what it wrote, so that a quadratic reader passes the CPU cap by far while a linear one stays far under
it; the others also run ``run`` under raw. At these sizes today's quadratic readers took 8-20 s over five
commands, too close to the cap to be told from a linear one.
``--list`` prints the cases without running them; ``--only`` runs the given case numbers.

Each case runs in a forked child (so one case cannot leak state into the next, and a cap ends only it)
through ``sim.cli.main``: ``validate``, ``run --format json`` under raw, observation_masking,
seed_engine (context_token_limit 4000) and tool_result_head_tail, then ``import -o fuzz-out.jsonl``,
``validate`` of what it wrote and ``run`` of it. Caps per case: ``--time-bound`` seconds of the child's
CPU (``ITIMER_PROF`` names the frame; ``RLIMIT_CPU`` 3 s later stops one stuck in C code; a case
waiting 10x as long, plus 60 s, in wall time is killed) and ``--max-memory-mb`` of address space
(``RLIMIT_AS``); each case's CPU seconds and peak RSS are recorded (summary in the report, every case
with ``--stats``).
``--workers N`` runs the cases in N processes (case ``i`` to worker ``i mod N``; the merged report is the
same for any N, up to cases near a cap). Failures: exit 3 or any code but 0/2 (a gate may exit 1), an
exception escaping ``main``, a case over a cap (``cap: CPU over 20 s at FRAME``, ``cap: memory
(MemoryError, exit 3) at FRAME``, ``cap: memory (exit 2 after running out of memory)``; an
amplification case over the CPU cap is named by its attack, ``cap: CPU over 20 s (amp: sidechains)``,
as the frame is only where the time ran out: it is in the reproducer), a child killed
by a signal, peak RSS over ``--max-rss-mb``, stdout JSON holding NaN/Infinity or a negative (or >= 2^53)
count or cost, a gate printing inf or nan, a stderr line over 10,000 characters (a value echoed whole),
an import whose output ``validate`` refuses, and ``validate``, ``run``, ``run --dataset`` and ``import``
disagreeing on whether an input is accepted. A failure's signature is the exception type and the
innermost frame inside ``sim/`` (or the cap or invariant); ``--out DIR`` keeps the smallest input of each
with the command line that fails. Exit status 0 when no case failed, 1 otherwise.

The fuzzer fuzzes trace files and, in the amplification cases only, a few knobs: it composes each
policy's config once and hands every case a copy (Hydra composition costs ~80 ms a command and would
dominate the run).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import faulthandler
import gc
import hashlib
import io
import json
import math
import os
import pickle
import random
import re
import resource
import select
import shutil
import signal
import struct
import sys
import tempfile
import time
import traceback
import warnings
import zipfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
SIM_DIR = str(REPO / "sim") + os.sep

POLICY_RUNS = (
    ("raw", ()),
    ("observation_masking", ()),
    ("seed_engine", ("policy.context_token_limit=4000", "policy.keep_recent_tokens=1000")),
    ("tool_result_head_tail", ()),
)
OUT_NAME = "fuzz-out.jsonl"
KILL_GRACE = 3  # seconds past the time bound before a case stuck in C code is killed
MAX_COUNT = 2**53
MAX_LIST, MAX_STR = 8, 600  # samples are cut to this before mutating: every case stays fast

# ------------------------------------------------------------------------------------------------ samples
# (label, path under CTXSIM_TRACES, top-level list cut): the real traces, one or more per format.
REAL_SAMPLES = (
    ("mini-swe-agent", "mini-swe-agent-gemini3pro/trajs/django__django-11066.traj.json", None),
    ("mini-swe-agent", "mini-swe-agent-gemini3pro/trajs/sympy__sympy-13480.traj.json", None),
    ("swe-agent-0.x", "swe-agent/v0_gpt4_test-repo-i1/swe-agent__test-repo-i1.traj", None),
    ("swe-agent-0.x", "swe-agent/v0_demo_enigma_ctf/katy.traj", None),
    (
        "swe-agent-1.x",
        "swe-agent/v1_gpt4o_lastn5_sweagenttestrepo-1c2844/6e44b9__sweagenttestrepo-1c2844.traj",
        None,
    ),
    (
        "swe-agent-1.x",
        "swe-agent/v1_demo_function_calling_replace_from_source/marshmallow-code__marshmallow-1867.traj",
        None,
    ),
    ("openhands-v0-output", "openhands-v0/multi_swe_bench_llama4maverick/output.jsonl", 2),
    ("openhands-v0-resolver", "openhands-v0/resolver_mock_output/output.jsonl", None),
    ("openhands-v0-events", "openhands-v0/runtime_test_trajs/basic.json", 16),
    ("openhands-v0-events", "openhands-v0/runtime_test_trajs/basic_interactions.json", 16),
    ("openhands-v0-events", "openhands-v0/runtime_test_trajs/wrong_initial_state.json", 16),
    (
        "openhands-sdk-v1",
        "openhands-sdk-v1/event_persistence_gpt-4o-mini/cd94562403b9487ebdd4018e3f531dfd/"
        "conversations/cd94562403b9487ebdd4018e3f531dfd",
        None,
    ),
    ("inspect-json", "inspect-ai/2025-05-12T20-27-36-04-00_browser.json", None),
    ("inspect-eval", "inspect-ai/log_message_deduplication.eval", None),
    ("tau-bench", "tau-bench/historical_trajectories/gpt-4o-airline.json", 3),
    ("claude-code", "claude-code-fixtures/edge_cases.jsonl", 24),
    ("claude-code", "claude-code-fixtures/representative_messages.jsonl", 24),
    ("claude-code", "claude-code-fixtures/session_b.jsonl", 24),
)
# canonical files made at start with `ctxsim import` from these (already cut) real samples
CANONICAL_FROM = (
    "mini-swe-agent/django__django-11066.traj.json",
    "openhands-v0-output/output.jsonl",
    "claude-code/session_b.jsonl",
)


@dataclass
class Sample:
    label: str  # the format, as --formats names it
    kind: str  # json | jsonl | zip | folder | parquet
    name: str  # the file (or folder) name the commands see
    doc: Any = None  # json: the document; jsonl: the records (a str for a line that is not JSON)
    side: dict[str, bytes] = field(default_factory=dict)  # json: files beside it (SWE-agent's args.yaml)
    members: list[tuple[str, bytes, int]] = field(default_factory=list)  # zip: (name, data, compression)
    files: dict[str, bytes] = field(default_factory=dict)  # folder: relative path -> content
    raw: bytes = b""  # parquet: the file
    rows: list[dict] = field(default_factory=list)  # parquet: its rows

    @property
    def key(self) -> str:
        return f"{self.label}/{self.name}"


@dataclass
class Case:
    label: str
    sample: str
    files: dict[str, bytes]  # relative path -> content, written into an empty case folder
    target: str  # the path the commands are given (a file, or a folder for folder formats)
    ops: list[str]  # what was mutated, in words
    parquet_rows: str | None = None  # JSON rows the child writes as the Parquet target before running
    commands: list[list[str]] | None = None  # instead of case_commands(target) (amplification cases)
    do_import: bool = True  # also import the target, then validate and run what the import wrote
    post_run: bool = True  # run what the import wrote (reader attacks only validate it)

    def size(self) -> int:
        return sum(len(b) for b in self.files.values()) + len(self.parquet_rows or "")

    def digest(self) -> str:
        h = hashlib.sha256(self.target.encode())
        for k in sorted(self.files):
            h.update(k.encode() + b"\0" + self.files[k])
        h.update((self.parquet_rows or "").encode())
        return h.hexdigest()[:16]


def cut(o: Any, max_list: int = MAX_LIST, max_str: int = MAX_STR) -> Any:
    """A small copy: every list at most ``max_list`` items, every string at most ``max_str`` characters."""
    if isinstance(o, dict):
        return {k: cut(v, max_list, max_str) for k, v in o.items()}
    if isinstance(o, list):
        return [cut(v, max_list, max_str) for v in o[:max_list]]
    if isinstance(o, str) and len(o) > max_str:
        return o[:max_str]
    return o


def real_samples(root: Path) -> list[Sample]:
    out = []
    for label, rel, top in REAL_SAMPLES:
        src = root / rel
        if src.is_dir():
            files = {
                str(f.relative_to(src)): _cut_json_bytes(f.read_bytes())
                if f.suffix == ".json"
                else f.read_bytes()
                for f in sorted(src.rglob("*"))
                if f.is_file()
            }
            out.append(Sample(label, "folder", src.name, files=files))
        elif src.suffix == ".eval":
            with zipfile.ZipFile(src) as zf:
                members = [(i.filename, _cut_json_bytes(zf.read(i)), i.compress_type) for i in zf.infolist()]
            out.append(Sample(label, "zip", src.name, members=members))
        elif src.suffix == ".jsonl":
            lines = [ln for ln in src.read_text(encoding="utf-8").splitlines() if ln.strip()][: top or None]
            records = []
            for ln in lines:
                try:
                    records.append(cut(json.loads(ln)))
                except json.JSONDecodeError:
                    records.append(Line(ln))
            out.append(Sample(label, "jsonl", src.name, doc=records))
        elif src.is_file():
            doc = json.loads(src.read_text(encoding="utf-8"))
            if top and isinstance(doc, list):
                doc = doc[:top]
            side = {}
            if (src.parent / "args.yaml").is_file():
                side["args.yaml"] = (src.parent / "args.yaml").read_bytes()
            out.append(Sample(label, "json", src.name, doc=cut(doc), side=side))
    return out


def _cut_json_bytes(b: bytes) -> bytes:
    try:
        return json.dumps(cut(json.loads(b))).encode()
    except (ValueError, RecursionError):
        return b


def chat_samples() -> list[Sample]:
    """The documented shapes of the two transcript formats (no shared sample exists)."""
    openai = [
        {"role": "system", "content": "You are a careful assistant."},
        {"role": "user", "content": "How many lines does setup.py have?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "bash", "arguments": '{"command": "wc -l setup.py"}'},
                }
            ],
            "usage": {
                "prompt_tokens": 210,
                "completion_tokens": 14,
                "prompt_tokens_details": {"cached_tokens": 0},
            },
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "42 setup.py"},
        {
            "role": "assistant",
            "content": "It has 42 lines.",
            "usage": {
                "prompt_tokens": 240,
                "completion_tokens": 7,
                "prompt_tokens_details": {"cached_tokens": 200},
            },
        },
    ]
    openai_body = {
        "model": "gpt-4o-mini",
        "tools": [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}],
        "messages": [
            {"role": "developer", "content": "Answer briefly."},
            {"role": "user", "content": "Run the tests."},
            {
                "role": "assistant",
                "content": None,
                "function_call": {"name": "bash", "arguments": "pytest -q"},
            },
            {"role": "function", "name": "bash", "content": "3 passed in 0.2s"},
            {
                "role": "assistant",
                "content": "All 3 pass.",
                "usage": {"prompt_tokens": 90, "completion_tokens": 5},
            },
        ],
    }
    anthropic = {
        "model": "claude-3-5-haiku-20241022",
        "system": [{"type": "text", "text": "You are a careful assistant."}],
        "tools": [{"name": "bash", "description": "run a command", "input_schema": {"type": "object"}}],
        "messages": [
            {"role": "user", "content": "What is in the folder?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "list it", "signature": "sig"},
                    {"type": "text", "text": "Let me look."},
                    {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"command": "ls"}},
                ],
                "usage": {
                    "input_tokens": 30,
                    "cache_creation_input_tokens": 400,
                    "cache_read_input_tokens": 0,
                    "output_tokens": 21,
                },
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_1",
                        "content": [{"type": "text", "text": "a.py"}],
                    },
                    {"type": "text", "text": "And now?"},
                ],
            },
            {
                "role": "assistant",
                "content": [{"type": "text", "text": "One file, a.py."}],
                "usage": {"input_tokens": 25, "cache_read_input_tokens": 400, "output_tokens": 6},
            },
        ],
    }
    anthropic_list = [
        {"role": "user", "content": [{"type": "text", "text": "Read notes.txt"}]},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "read", "input": {"path": "notes.txt"}}],
            "usage": {"input_tokens": 50, "output_tokens": 9},
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "buy milk"}]},
        {
            "role": "assistant",
            "content": "It says: buy milk.",
            "usage": {"input_tokens": 70, "output_tokens": 6},
        },
    ]
    return [
        Sample("openai-chat", "json", "chat_list.json", doc=openai),
        Sample("openai-chat", "json", "chat_body.json", doc=openai_body),
        Sample("anthropic-messages", "json", "messages_body.json", doc=anthropic),
        Sample("anthropic-messages", "json", "messages_list.json", doc=anthropic_list),
    ]


def canonical_samples(sources: list[Sample], work: Path, bound: float) -> list[Sample]:
    """Canonical JSON Lines and Parquet written by ``ctxsim import`` (in a child) from cut real samples."""
    picks = [s for s in sources if s.key in CANONICAL_FROM] or [s for s in sources if s.kind == "json"][:2]
    out = []
    for s in picks:
        d = work / "canon" / s.label
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
        case = pristine(s)
        write_case(case, d)
        stem = "canonical-" + Path(s.name).name.split(".")[0]
        for ext in (".jsonl", ".parquet"):
            res = in_child(
                lambda d=d, ext=ext, target=case.target, stem=stem: _import_to(d, target, stem + ext), bound
            )
            f = d / (stem + ext)
            if res.get("rc") != 0 or not f.is_file():
                print(f"fuzz: warning: could not make a canonical {ext} from {s.key}: {res}", file=sys.stderr)
                continue
            if ext == ".jsonl":
                records = [json.loads(ln) for ln in f.read_text(encoding="utf-8").splitlines() if ln.strip()]
                out.append(Sample("canonical-jsonl", "jsonl", f.name, doc=records))
            else:
                out.append(
                    Sample("canonical-parquet", "parquet", f.name, raw=f.read_bytes(), rows=res["rows"])
                )
    return out


def _import_to(d: Path, target: str, name: str) -> dict:
    os.chdir(d)
    rc = _quiet_main(["import", target, "-o", name])
    rows = None
    if rc == 0 and name.endswith(".parquet"):
        import pyarrow.parquet as pq

        rows = pq.read_table(name).to_pylist()
    return {"rc": rc, "rows": rows}


def _quiet_main(argv: list[str]) -> int:
    from sim.cli import main

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            return main(argv)
        except SystemExit as exc:
            return exc.code if isinstance(exc.code, int) else 2


# ----------------------------------------------------------------------------------------- JSON mutations
class Raw:
    """Literal JSON text spliced into a dumped document where ``json.dumps`` cannot write it."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def __call__(self, text: str) -> str:
        self.texts.append(text)
        return f"@@ctxsim-fuzz-raw-{len(self.texts) - 1}@@"

    def dumps(self, doc: Any, indent: int | None = None) -> str:
        s = json.dumps(doc, indent=indent)
        for k, text in enumerate(self.texts):
            s = s.replace(f'"@@ctxsim-fuzz-raw-{k}@@"', text)
        return s


def _nodes(root: dict, limit: int = 20000) -> list[tuple[Any, Any, tuple]]:
    """(container, key, path) of every value under ``root["$"]`` (breadth first, at most ``limit``)."""
    out, queue, i = [], [(root, "$", ())], 0
    while i < len(queue) and len(out) < limit:
        parent, key, path = queue[i]
        i += 1
        out.append((parent, key, path))
        v = parent[key]
        if isinstance(v, dict):
            queue.extend((v, k, (*path, k)) for k in v)
        elif isinstance(v, list):
            queue.extend((v, j, (*path, j)) for j in range(len(v)))
    return out


def path_text(path: tuple) -> str:
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def new_value(rng: random.Random, old: Any, raw: Raw) -> tuple[Any, str]:
    """A value to put where ``old`` was, and its description."""
    family = rng.choices(("type", "huge", "special", "near"), (3, 2, 4, 2))[0]
    if family == "type":
        v = rng.choice([None, True, False, 0, 1, 1.5, "", "x", "0", [], {}, [old], {"k": old}])
        return v, f"{type(v).__name__} {json.dumps(v)[:40]}"
    if family == "huge":
        exp = rng.choice((53, 62, 63, 64))
        if rng.random() < 0.25:
            return raw("1" + "0" * 400), "10^400"
        sign = -1 if rng.random() < 0.2 else 1
        return sign * 2**exp, f"{'-' if sign < 0 else ''}2^{exp}"
    if family == "special":
        k = rng.randrange(10)
        if k == 0:
            return -1, "-1"
        if k == 1:
            return raw(rng.choice(("1e400", "-1e400"))), "1e400"
        if k == 2:
            return float("nan"), "NaN"
        if k == 3:
            return rng.choice((float("inf"), float("-inf"))), "Infinity"
        if k in (4, 5):
            s = rng.choice(("\ud800", "a\udc00b", "\udfff\ud800"))
            if isinstance(old, str) and rng.random() < 0.5:
                s = old[: rng.randrange(len(old) + 1)] + s
            return s, "lone surrogate"
        if k in (6, 7):
            return raw("[" * 1000 + "]" * 1000), "1,000-deep list"
        if k == 8:
            return raw('{"a":' * 1000 + "1" + "}" * 1000), "1,000-deep object"
        return -0.5, "-0.5"
    if _is_number(old):
        v = rng.choice((-old if old else -7, old + 2**53, old * 10**12, old + 0.5, 0))
        return v, f"number {v!r}"
    if isinstance(old, str):
        v = rng.choice(("", old * 20, " " + old, old.upper(), "1e400", "NaN", "-5", "2" * 30))[:50000]
        return v, f"string {v[:30]!r}"
    return None, "null"


def mutate_json(doc: Any, rng: random.Random, raw: Raw, ops: list[str]) -> Any:
    """One structure-aware mutation of ``doc`` (in place where possible); returns the new document."""
    root = {"$": doc}
    nodes = _nodes(root)
    op = rng.choices(
        ("replace", "delete", "dup", "drop", "list_to_dict", "dict_to_list", "swap"), (55, 12, 9, 9, 6, 5, 4)
    )[0]
    if op == "replace":
        pool = [n for n in nodes if _is_number(n[0][n[1]])] if rng.random() < 0.4 else []
        parent, key, path = rng.choice(pool or nodes)
        value, what = new_value(rng, parent[key], raw)
        parent[key] = value
        ops.append(f"json: {path_text(path)} := {what}")
    elif op == "delete":
        pool = [n for n in nodes if n[0] is not root and isinstance(n[0], dict)]
        if not pool:
            return mutate_json(doc, rng, raw, ops)
        parent, key, path = rng.choice(pool)
        del parent[key]
        ops.append(f"json: delete {path_text(path)}")
    elif op in ("dup", "drop", "swap"):
        pool = [n for n in nodes if isinstance(n[0][n[1]], list) and n[0][n[1]]]
        if not pool:
            return mutate_json(doc, rng, raw, ops)
        parent, key, path = rng.choice(pool)
        items = parent[key]
        j = rng.randrange(len(items))
        if op == "dup":
            items.insert(j, copy.deepcopy(items[j]))
            ops.append(f"json: duplicate {path_text(path)}[{j}]")
        elif op == "drop":
            del items[j]
            ops.append(f"json: drop {path_text(path)}[{j}]")
        else:
            k = rng.randrange(len(items))
            items[j], items[k] = items[k], items[j]
            ops.append(f"json: swap {path_text(path)}[{j}] and [{k}]")
    else:
        want = list if op == "list_to_dict" else dict
        pool = [n for n in nodes if isinstance(n[0][n[1]], want)]
        if not pool:
            return mutate_json(doc, rng, raw, ops)
        parent, key, path = rng.choice(pool)
        v = parent[key]
        parent[key] = {str(i): x for i, x in enumerate(v)} if want is list else list(v.values())
        ops.append(f"json: {path_text(path)} {'list -> object' if want is list else 'object -> list'}")
    return root["$"]


# ----------------------------------------------------------------------------------------- byte mutations
BAD_UTF8 = (
    b"\xff",
    b"\xfe",
    b"\x80",
    b"\xc3\x28",
    b"\xe2\x28\xa1",
    b"\xed\xa0\x80",
    b"\xc0\xaf",
    b"\xf8\x88\x80\x80\x80",
)
INTERESTING = (
    b"\x00",
    b'"',
    b"{",
    b"[",
    b"]",
    b"}",
    b"\\",
    b",",
    b":",
    b"\n",
    b"-",
    b"9" * 20,
    b"\\u",
    b"\\ud800",
)


def mutate_bytes(b: bytes, rng: random.Random, ops: list[str], what: str = "bytes") -> bytes:
    op = rng.choices(
        ("flip", "set", "insert", "delete", "truncate", "bom", "crlf", "utf8", "utf16", "nul"),
        (14, 8, 10, 8, 8, 4, 4, 10, 1, 1),
    )[0]
    n = len(b)
    i = rng.randrange(n + 1) if n else 0
    if op == "flip" and n:
        i = min(i, n - 1)
        bit = rng.randrange(8)
        b = b[:i] + bytes([b[i] ^ (1 << bit)]) + b[i + 1 :]
        ops.append(f"{what}: flip bit {bit} of byte {i}")
    elif op == "set" and n:
        i = min(i, n - 1)
        v = rng.randrange(256)
        b = b[:i] + bytes([v]) + b[i + 1 :]
        ops.append(f"{what}: byte {i} := 0x{v:02x}")
    elif op == "insert":
        ins = (
            rng.choice(INTERESTING)
            if rng.random() < 0.6
            else bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        )
        b = b[:i] + ins + b[i:]
        ops.append(f"{what}: insert {ins[:12]!r} at {i}")
    elif op == "delete" and n:
        k = rng.randint(1, 64)
        b = b[:i] + b[i + k :]
        ops.append(f"{what}: delete {k} bytes at {i}")
    elif op == "truncate":
        b = b[:i]
        ops.append(f"{what}: truncate at {i} of {n}")
    elif op == "bom":
        b = b"\xef\xbb\xbf" + b
        ops.append(f"{what}: UTF-8 BOM prefix")
    elif op == "crlf":
        b = b.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
        ops.append(f"{what}: CRLF line ends")
    elif op == "utf8":
        quotes = [m.start() + 1 for m in re.finditer(rb'"', b[:200000])]
        if quotes and rng.random() < 0.6:
            i = rng.choice(quotes)
        bad = rng.choice(BAD_UTF8)
        b = b[:i] + bad + b[i:]
        ops.append(f"{what}: invalid UTF-8 {bad!r} at {i}")
    elif op == "utf16":
        try:
            b = b.decode("utf-8").encode("utf-16")
            ops.append(f"{what}: re-encoded as UTF-16")
        except UnicodeDecodeError:
            b = b"\xff\xfe" + b
            ops.append(f"{what}: UTF-16 BOM prefix")
    else:
        b = b + b"\x00" * rng.randint(1, 16)
        ops.append(f"{what}: NUL padding")
    return b


BLOAT_BYTES = 100 << 20


def bloat(rng: random.Random, ops: list[str]) -> bytes:
    """A 100 MB JSON document of no known format whose parse takes ~14x its size (empty lists or
    objects): a reader that parses it whole just to say "unknown format" runs out of memory."""
    item = rng.choice((b"[],", b"{},"))
    ops.append(f"bloat: a {BLOAT_BYTES >> 20} MB JSON list of {item[:-1].decode()} (no known format)")
    return b"[" + item * (BLOAT_BYTES // len(item)) + item[:-1] + b"]"


def _repeat(rng: random.Random) -> int:
    return rng.choices((1, 2, 3), (60, 25, 15))[0]


# ------------------------------------------------------------------------------------------- per kind
def pristine(s: Sample) -> Case:
    if s.kind == "json":
        return Case(s.label, s.key, {s.name: json.dumps(s.doc).encode(), **s.side}, s.name, ["unmutated"])
    if s.kind == "jsonl":
        return Case(s.label, s.key, {s.name: _jsonl_bytes(s.doc, Raw())}, s.name, ["unmutated"])
    if s.kind == "zip":
        return Case(s.label, s.key, {s.name: build_zip(s.members)}, s.name, ["unmutated"])
    if s.kind == "folder":
        return Case(s.label, s.key, {f"{s.name}/{k}": v for k, v in s.files.items()}, s.name, ["unmutated"])
    return Case(s.label, s.key, {s.name: s.raw}, s.name, ["unmutated"])


class Line(str):
    """A line of a JSON Lines sample that is not JSON (kept as it is, mutated as bytes)."""


def _jsonl_bytes(records: list, raw: Raw) -> bytes:
    return b"".join(
        (r.encode("utf-8", "surrogateescape") if isinstance(r, Line) else raw.dumps(r).encode()) + b"\n"
        for r in records
    )


def mutate_json_sample(s: Sample, rng: random.Random, bombs: bool) -> Case:
    ops: list[str] = []
    side = dict(s.side)
    if bombs and rng.random() < 0.0015:
        return Case(s.label, s.key, {s.name: bloat(rng, ops), **side}, s.name, ops)
    if side and rng.random() < 0.3:
        side["args.yaml"] = mutate_yaml(side["args.yaml"], rng, ops, bombs)
        return Case(s.label, s.key, {s.name: json.dumps(s.doc).encode(), **side}, s.name, ops)
    raw = Raw()
    indent = rng.choice((None, None, 2))
    if rng.random() < 0.6:
        doc = copy.deepcopy(s.doc)
        for _ in range(_repeat(rng)):
            doc = mutate_json(doc, rng, raw, ops)
        data = raw.dumps(doc, indent).encode()
        if rng.random() < 0.1:
            data = mutate_bytes(data, rng, ops)
    else:
        data = json.dumps(s.doc, indent=indent).encode()
        for _ in range(_repeat(rng)):
            data = mutate_bytes(data, rng, ops)
    return Case(s.label, s.key, {s.name: data, **side}, s.name, ops)


def mutate_jsonl_sample(s: Sample, rng: random.Random, bombs: bool) -> Case:
    ops: list[str] = []
    raw = Raw()
    records = copy.deepcopy(s.doc)
    r = rng.random()
    if bombs and r < 0.0015:
        return Case(s.label, s.key, {s.name: bloat(rng, ops) + b"\n"}, s.name, ops)
    if r < 0.5 and records:
        for _ in range(_repeat(rng)):
            k = rng.randrange(len(records))
            if isinstance(records[k], Line):
                data = mutate_bytes(records[k].encode("utf-8", "surrogateescape"), rng, ops, f"line {k + 1}")
                records[k] = Line(data.decode("utf-8", "surrogateescape"))
            else:
                sub: list[str] = []
                records[k] = mutate_json(records[k], rng, raw, sub)
                ops.extend(f"line {k + 1} {o}" for o in sub)
        data = _jsonl_bytes(records, raw)
    elif r < 0.7 and records:
        lines = _jsonl_bytes(records, raw).split(b"\n")[:-1]
        k = rng.randrange(len(lines))
        op = rng.choice(("drop", "dup", "swap", "blank", "garbage", "line-bytes"))
        if op == "drop":
            del lines[k]
        elif op == "dup":
            lines.insert(k, lines[k])
        elif op == "swap":
            j = rng.randrange(len(lines))
            lines[j], lines[k] = lines[k], lines[j]
        elif op == "blank":
            lines.insert(k, rng.choice((b"", b"   ", b"\t", b"\r")))
        elif op == "garbage":
            lines.insert(k, rng.choice((b"[]", b"null", b"42", b'"x"', b"{", b"NaN", b"{}", b"[[[[")))
        else:
            lines[k] = mutate_bytes(lines[k], rng, ops, f"line {k + 1}")
        if op != "line-bytes":
            ops.append(f"jsonl: {op} line {k + 1}")
        data = b"\n".join(lines) + b"\n"
    else:
        data = _jsonl_bytes(records, raw)
        for _ in range(_repeat(rng)):
            data = mutate_bytes(data, rng, ops)
    return Case(s.label, s.key, {s.name: data}, s.name, ops)


def mutate_folder_sample(s: Sample, rng: random.Random, bombs: bool) -> Case:
    ops: list[str] = []
    files = dict(s.files)
    for _ in range(rng.choices((1, 2), (80, 20))[0]):
        names = sorted(files)
        if not names:
            break
        r = rng.random()
        name = rng.choice(names)
        if r < 0.7:
            data = files[name]
            doc = None
            if name.endswith(".json") and rng.random() < 0.6:
                try:
                    doc = json.loads(data)
                except (ValueError, RecursionError):  # not JSON, or made 1,000 deep by the first mutation
                    doc = None
            if doc is not None:
                raw, sub = Raw(), []
                data = raw.dumps(mutate_json(doc, rng, raw, sub)).encode()
                ops.extend(f"{name} {o}" for o in sub)
            else:
                data = mutate_bytes(data, rng, ops, name)
            files[name] = data
        elif r < 0.82:
            del files[name]
            ops.append(f"folder: drop {name}")
        else:
            events = [n for n in names if n.startswith("events/event-")] or names
            src = rng.choice(events)
            m = re.match(r"events/event-(\d+)-(.*)$", src)
            new = (
                f"events/event-{m.group(1)}-dup{m.group(2)}"
                if m and rng.random() < 0.5
                else (f"events/event-{rng.randrange(100000):05d}-dup.json")
            )
            files[new] = files[src]
            ops.append(f"folder: duplicate {src} as {new}")
    return Case(s.label, s.key, {f"{s.name}/{k}": v for k, v in files.items()}, s.name, ops)


def mutate_parquet_sample(s: Sample, rng: random.Random, bombs: bool) -> Case:
    ops: list[str] = []
    if rng.random() < 0.5 and s.rows:
        rows = copy.deepcopy(s.rows)
        k = rng.randrange(len(rows))
        sub: list[str] = []
        raw = Raw()
        rows[k] = mutate_json(rows[k], rng, raw, sub)
        ops.extend(f"row {k} {o}" for o in sub)
        return Case(s.label, s.key, {}, s.name, ops, parquet_rows=raw.dumps(rows))
    data = s.raw
    for _ in range(_repeat(rng)):
        data = mutate_bytes(data, rng, ops)
    return Case(s.label, s.key, {s.name: data}, s.name, ops)


# ---------------------------------------------------------------------------------------------- archives
def build_zip(members: list[tuple[str, bytes, int]]) -> bytes:
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # duplicate names are wanted here
        with zipfile.ZipFile(buf, "w") as zf:
            for name, data, ct in members:
                zi = zipfile.ZipInfo(name, date_time=(2025, 1, 1, 0, 0, 0))
                zi.compress_type = ct
                zf.writestr(zi, data)
    return buf.getvalue()


def _central_entries(b: bytes) -> list[int]:
    """Offsets of the central directory entries (read from the end record)."""
    eocd = b.rfind(b"PK\x05\x06")
    if eocd < 0:
        return []
    count, _, start = struct.unpack_from("<HII", b, eocd + 10)
    out, pos = [], start
    for _ in range(count):
        if b[pos : pos + 4] != b"PK\x01\x02":
            break
        out.append(pos)
        n, m, k = struct.unpack_from("<HHH", b, pos + 28)
        pos += 46 + n + m + k
    return out


def patch_member(b: bytes, index: int, **fields: int) -> bytes:
    """Rewrite header fields of member ``index`` in both its local header and its central entry:
    ``method``, ``crc``, ``csize``, ``usize``."""
    ba = bytearray(b)
    entries = _central_entries(b)
    if index >= len(entries):
        return b
    cd = entries[index]
    local = struct.unpack_from("<I", ba, cd + 42)[0]
    offsets = {
        "method": (8, 10, "<H"),
        "crc": (14, 16, "<I"),
        "csize": (18, 20, "<I"),
        "usize": (22, 24, "<I"),
    }
    for name, value in fields.items():
        lo, co, fmt = offsets[name]
        struct.pack_into(fmt, ba, cd + co, value)
        if ba[local : local + 4] == b"PK\x03\x04":
            struct.pack_into(fmt, ba, local + lo, value)
    return bytes(ba)


_BOMBS: dict[int, tuple[bytes, int, int]] = {}
BOMB_BYTES = 1200 << 20  # decompressed: past the 1 GiB archive cap and any 1.5 GB address-space limit


def bomb(method: int) -> tuple[bytes, int, int]:
    """(compressed member data, CRC, true size) of a JSON member that inflates to ``BOMB_BYTES``; made
    once per run (BZIP2 ~15 s, LZMA ~12 s) by streaming through zipfile, so it never sits in memory."""
    if method not in _BOMBS:
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as zf:
            zi = zipfile.ZipInfo("samples/bomb.json", date_time=(2025, 1, 1, 0, 0, 0))
            zi.compress_type = method
            with zf.open(zi, "w", force_zip64=True) as w:
                w.write(b'{"id": "')
                chunk = b" " * (16 << 20)
                for _ in range((BOMB_BYTES - 10) // len(chunk)):
                    w.write(chunk)
                w.write(b'"}')
        b = buf.getvalue()
        info = zipfile.ZipFile(io.BytesIO(b)).infolist()[0]
        n, m = struct.unpack_from("<HH", b, info.header_offset + 26)
        start = info.header_offset + 30 + n + m
        _BOMBS[method] = (b[start : start + info.compress_size], info.CRC, info.file_size)
    return _BOMBS[method]


def mutate_zip_sample(s: Sample, rng: random.Random, bombs: bool) -> Case:
    ops: list[str] = []
    members = list(s.members)
    json_idx = [i for i, (n, _, _) in enumerate(members) if n.endswith(".json")]
    op = rng.choices(
        ("json", "bytes", "name", "dup", "drop", "method", "size", "archive", "bomb"),
        (34, 12, 9, 7, 5, 10, 10, 9, 2 if bombs else 0),
    )[0]
    patch: dict[str, int] | None = None
    k = rng.choice(json_idx) if json_idx else 0
    name, data, ct = members[k]
    if op == "json":
        try:
            doc = json.loads(data)
            raw, sub = Raw(), []
            for _ in range(_repeat(rng)):
                doc = mutate_json(doc, rng, raw, sub)
            members[k] = (name, raw.dumps(doc).encode(), ct)
            ops.extend(f"member {name} {o}" for o in sub)
        except (ValueError, RecursionError):
            members[k] = (name, mutate_bytes(data, rng, ops, f"member {name}"), ct)
    elif op == "bytes":
        members[k] = (name, mutate_bytes(data, rng, ops, f"member {name}"), ct)
    elif op == "name":
        new = rng.choice(
            (
                "../" + name,
                "..\\" + name.replace("/", "\\"),
                name.replace("/", "\\"),
                "C:" + name,
                "C:/" + name,
                "/" + name,
                "samples/../../" + name,
                name + "/",
                "./" + name,
                "",
            )
        )
        members[k] = (new, data, ct)
        ops.append(f"archive: rename {name} to {new!r}")
    elif op == "dup":
        copy_data = mutate_bytes(data, rng, [], "") if rng.random() < 0.5 else data
        members.insert(rng.randrange(len(members) + 1), (name, copy_data, ct))
        ops.append(f"archive: duplicate member {name}" + (" (content changed)" if copy_data != data else ""))
    elif op == "drop":
        del members[k]
        ops.append(f"archive: drop member {name}")
    elif op == "method":
        ct2 = rng.choice((zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA, zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED))
        if rng.random() < 0.2:
            patch = {"method": rng.choice((1, 6, 9, 97, 99, 65535))}
            ops.append(f"archive: header says method {patch['method']} for {name}")
        elif rng.random() < 0.5:
            members = [(n, d, ct2) for n, d, _ in members]
            ops.append(f"archive: every member compressed with method {ct2}")
        else:
            members[k] = (name, data, ct2)
            ops.append(f"archive: {name} compressed with method {ct2}")
    elif op == "size":
        if rng.random() < 0.5:
            members[k] = (name, data, rng.choice((zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA, ct)))
        v = rng.choice((0, 1, len(data) // 2, len(data) * 2, 2**31, 2**32 - 1))
        patch = {rng.choice(("usize", "usize", "csize")): v}
        ops.append(f"archive: header of {name} (method {members[k][2]}) says {next(iter(patch))} {v}")
    elif op == "bomb":
        read = [i for i, (n, _, _) in enumerate(members) if n == "header.json" or n.startswith("samples/")]
        k = rng.choice(read or [k])  # a member the importer reads
        name, data, ct = members[k]
        method = rng.choice((zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA))
        payload, crc, size = bomb(method)
        declared = rng.choice((len(data), size))
        members[k] = (name, payload, zipfile.ZIP_STORED)
        patch = {"method": method, "crc": crc, "usize": declared}
        ops.append(
            f"archive: {name} is a {method=} member inflating to {size:,} bytes, header says {declared:,}"
        )
    blob = build_zip(members)
    if patch:
        blob = patch_member(blob, k, **patch)
    if op == "archive":
        for _ in range(_repeat(rng)):
            blob = mutate_bytes(blob, rng, ops, "archive")
    return Case(s.label, s.key, {s.name: blob}, s.name, ops)


# ------------------------------------------------------------------------------------------------- YAML
def mutate_yaml(data: bytes, rng: random.Random, ops: list[str], bombs: bool) -> bytes:
    """args.yaml beside a SWE-agent 0.x trajectory: bytes, tags, nesting, numbers, or an alias bomb."""
    op = rng.choices(("bytes", "tag", "deep", "value", "bomb"), (50, 10, 10, 25, 5 if bombs else 0))[0]
    if op == "bytes":
        for _ in range(_repeat(rng)):
            data = mutate_bytes(data, rng, ops, "args.yaml")
        return data
    if op == "tag":
        tag = rng.choice(
            ("!!python/object/apply:os.getcwd []", "!!python/name:os.system", "!custom x", "!!binary AAAA")
        )
        ops.append(f"args.yaml: a value tagged {tag.split()[0]}")
        return data.replace(b"agent:\n", f"agent:\n  tagged: {tag}\n".encode(), 1)
    if op == "deep":
        ops.append("args.yaml: a 1,000-deep flow list")
        return data.replace(b"agent:\n", b"agent:\n  deep: " + b"[" * 1000 + b"]" * 1000 + b"\n", 1)
    if op == "value":
        v = rng.choice(("1e400", ".nan", "-.inf", str(2**64), "-1", "[]", "{}", "null", '"\\ud800"'))
        key = rng.choice(
            (b"model_name:", b"history_processor:", b"per_instance_cost_limit:", b"temperature:")
        )
        i = data.find(key)
        if i < 0:
            return mutate_bytes(data, rng, ops, "args.yaml")
        j = data.find(b"\n", i)
        ops.append(f"args.yaml: {key.decode()} {v}")
        return data[: i + len(key)] + b" " + v.encode() + data[j:]
    levels = [f"a0: &a0 [{', '.join(['lol'] * 9)}]"]
    levels += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    ops.append("args.yaml: alias bomb (9^9 nodes) in the args of agent.config.history_processors[0]")
    text = "\n".join(levels) + (
        "\nagent:\n  model:\n    model_name: gpt4\n  config:\n    history_processors:\n"
        "    - {type: custom, args: *a8}\n"
    )
    return text.encode()


# ------------------------------------------------------------------------------------------ amplification
# Inputs of a few kilobytes to a few megabytes whose cost grows faster than their size in a reader that
# joins by scanning, expands references, or trusts a declared size (issue 41's attack run). Each is sized
# so that a linear, capped reader handles it in a few seconds (the unshared control of the same size
# runs in well under one), while a quadratic or uncapped one passes the CPU or memory cap.
AMP_RATE = 0.05
MB = 1 << 20
ID_KEYS = ("id", "sessionId", "trace_id", "tool_call_id", "uuid", "agentId", "llm_response_id", "instance_id")
HUGE_NUMBERS = (
    "1" + "0" * 400,
    "1e308",
    "-1e308",
    "1.7976931348623157e308",
    "1e400",
    str(2**64),
    "-" + "9" * 30,
)
KNOB_VALUES = ("99999999999999999999", "1" + "0" * 400, "-1", "1e400", "nan", "inf", "-0.5", "0")
AMP_COMMANDS = ("validate", "run-raw", "import")  # the reader is what is attacked: one replay suffices


def _amp_commands(target: str, dataset: bool = False) -> list[list[str]]:
    cmds = [["validate", target], ["run", target, "--policy", "raw", "--format", "json"]]
    if dataset:
        cmds.append(["run", "--dataset", target, "--policy", "raw", "--format", "json"])
    return cmds


READER_ONLY = {"post_run": False}  # validate, import, validate what it wrote: the reader's work alone


def _records(s: Sample) -> list[dict]:
    return [r for r in s.doc if isinstance(r, dict)] if s.kind == "jsonl" else []


def _jsonl_case(s: Sample, records: list, ops: list[str], readers_only: bool = False) -> Case:
    data = b"".join(json.dumps(r).encode() + b"\n" for r in records)
    if readers_only:
        return Case(
            s.label, s.key, {s.name: data}, s.name, ops, commands=[["validate", s.name]], **READER_ONLY
        )
    return Case(s.label, s.key, {s.name: data}, s.name, ops, commands=_amp_commands(s.name))


def amp_shared_message_id(s: Sample, rng: random.Random) -> Case | None:
    """Claude Code: thousands of assistant records of one ``message.id`` (one response's content blocks,
    merged into one message: a reader that rebuilds the merged text each time is quadratic)."""
    recs = _records(s)
    tpl = next((r for r in recs if r.get("type") == "assistant" and isinstance(r.get("message"), dict)), None)
    if tpl is None:
        return None
    n, width = rng.randint(16000, 22000), rng.choice((600, 900))
    with_tools = rng.random() < 0.5
    out = [r for r in recs if r.get("type") == "user"][:1]
    for j in range(n):
        block = {"type": "text", "text": f"block {j} " + "x" * width}
        if with_tools:
            block = {"type": "tool_use", "id": f"toolu_amp_{j}", "name": "bash", "input": {"c": "x" * width}}
        msg = {**tpl["message"], "id": "msg_amp_shared", "content": [block]}
        out.append({**tpl, "uuid": f"amp-{j}", "parentUuid": f"amp-{j - 1}" if j else None, "message": msg})
    ops = [f"claude-code: {n:,} assistant records share message.id ({'tool_use' if with_tools else 'text'})"]
    return _jsonl_case(s, out, ops, readers_only=True)


def amp_sidechains(s: Sample, rng: random.Random) -> Case | None:
    """Claude Code: thousands of one-record sidechains, each its own ``agentId`` (a reader that finds a
    record's sidechain by scanning the ones seen is quadratic)."""
    recs = _records(s)
    tpl = next((r for r in recs if r.get("type") == "assistant" and isinstance(r.get("message"), dict)), None)
    if tpl is None:
        return None
    # under the 10,000 children a trace may have; each record's parentUuid is held by no sidechain, so a
    # reader scanning the sidechains seen looks it up in every one (by agentId alone the scan costs
    # too little at this size to pass the cap)
    n = rng.randint(8500, 10000)
    linked = True
    out = list(recs)
    for j in range(n):
        msg = {**tpl["message"], "id": f"msg_side_{j}", "content": [{"type": "text", "text": f"side {j}"}]}
        out.append(
            {
                **tpl,
                "isSidechain": True,
                "agentId": f"agent-{j}",
                "uuid": f"side-{j}",
                "parentUuid": f"elsewhere-{j}" if linked else None,
                "message": msg,
            }
        )
    ops = [f"claude-code: {n:,} sidechains with distinct agentId" + (", each a parentUuid" if linked else "")]
    return _jsonl_case(s, out, ops, readers_only=True)


def amp_shared_response_id(s: Sample, rng: random.Random) -> Case | None:
    """OpenHands SDK: thousands of consecutive action events of one ``llm_response_id`` (parallel tool
    calls of one response, merged into one message)."""
    names = sorted(s.files)
    tpl_name = None
    for name in names:
        if name.startswith("events/") and name.endswith(".json"):
            try:
                e = json.loads(s.files[name])
            except ValueError:
                continue
            if isinstance(e, dict) and e.get("kind") == "ActionEvent":
                tpl_name, tpl = name, e
                break
    if tpl_name is None:
        return None
    files = dict(s.files)
    n = rng.randint(9000, 12000)
    first = 1 + max(
        (int(m.group(1)) for m in map(re.compile(r"events/event-(\d+)").match, names) if m), default=0
    )
    width = rng.choice((3000, 4000))  # each call's arguments: the merged message grows by this much
    for j in range(n):
        e = {
            **tpl,
            "id": f"amp-{j}",
            "tool_call_id": f"call_amp_{j}",
            "llm_response_id": "chatcmpl-amp-shared",
            "tool_call": {
                "id": f"call_amp_{j}",
                "name": "terminal",
                "arguments": json.dumps({"command": f"echo {j} " + "x" * width}),
            },
        }
        files[f"events/event-{first + j:05d}-amp{j}.json"] = json.dumps(e).encode()
    ops = [f"openhands-sdk: {n:,} action events share llm_response_id ({width:,}-byte commands)"]
    return Case(
        s.label,
        s.key,
        {f"{s.name}/{k}": v for k, v in files.items()},
        s.name,
        ops,
        commands=[["validate", s.name]],
        **READER_ONLY,
    )


def _inspect_samples(s: Sample) -> tuple[list, Callable[[list], dict[str, bytes]]] | None:
    """The sample objects of an Inspect log (each mutated in place) and how to write the log back."""
    if s.kind == "json" and isinstance(s.doc, dict) and isinstance(s.doc.get("samples"), list):
        doc = copy.deepcopy(s.doc)
        samples = [x for x in doc["samples"] if isinstance(x, dict)]
        return samples, lambda members: {s.name: json.dumps(doc).encode()}
    if s.kind == "zip":
        members = list(s.members)
        idx = [i for i, (n, _, _) in enumerate(members) if n.startswith("samples/") and n.endswith(".json")]
        docs = []
        for i in idx:
            try:
                docs.append((i, json.loads(members[i][1])))
            except ValueError:
                pass

        def write(extra: list) -> dict[str, bytes]:
            ms = list(members)
            for i, d in docs:
                ms[i] = (ms[i][0], json.dumps(d).encode(), zipfile.ZIP_DEFLATED)
            return {s.name: build_zip(ms + extra)}

        return [d for _, d in docs], write
    return None


def _model_event(sample: dict) -> dict:
    ev = next(
        (e for e in sample.get("events") or [] if isinstance(e, dict) and e.get("event") == "model"), None
    )
    return copy.deepcopy(ev) if ev else {"event": "model", "timestamp": "2025-01-01T00:00:00+00:00"}


def amp_input_refs(s: Sample, rng: random.Random) -> Case | None:
    """Inspect: model events whose ``input_refs`` each span a pool of messages without ids (no id: each
    is keyed by its whole content), optionally through ``attachment://`` references."""
    got = _inspect_samples(s)
    if not got or not got[0]:
        return None
    samples, write = got
    sample = samples[0]
    att = rng.random() < 0.5
    n, events = (rng.randint(600, 1000), rng.randint(250, 450)) if att else (rng.randint(1400, 1800), 1200)
    content = "attachment://ampshared" if att else None
    sample["message_pool"] = [
        {"role": ("user", "assistant")[j % 2], "content": content or f"pool message {j}", "source": f"s{j}"}
        for j in range(n)
    ]
    if att:
        sample["attachments"] = {"ampshared": "a" * rng.choice((4096, 16384))}
    tpl = {k: v for k, v in _model_event(sample).items() if k in ("event", "timestamp", "model", "span_id")}
    evs = []
    for j in range(events):
        ev = copy.deepcopy(tpl)
        ev["input"], ev["input_refs"] = [], [[0, n]]
        ev["output"] = {"choices": [{"message": {"role": "assistant", "content": f"answer {j}"}}]}
        evs.append(ev)
    sample["events"] = evs
    ops = [
        f"inspect: {events} model events, each input_refs [[0, {n}]] into a pool without ids"
        + (" (contents are one attachment)" if att else "")
    ]
    return Case(s.label, s.key, write([]), s.name, ops, commands=[["validate", s.name]], **READER_ONLY)


def amp_attachments(s: Sample, rng: random.Random) -> Case | None:
    """Inspect: hundreds of messages that all point to one multi-megabyte ``attachment://`` (stored
    once, compressed to kilobytes in an ``.eval``)."""
    got = _inspect_samples(s)
    if not got or not got[0]:
        return None
    samples, write = got
    sample = samples[0]
    n, size = rng.randint(200, 400), rng.choice((2, 4, 8)) * MB
    distinct = rng.random() < 0.7  # distinct messages (no dedup by content) or identical ones
    sample["attachments"] = {"ampbig": "b" * size}
    msgs = [
        {"role": "user", "content": "attachment://ampbig", **({"source": f"m{j}"} if distinct else {})}
        for j in range(n)
    ]
    if rng.random() < 0.5:
        sample["messages"] = msgs
        where = "messages"
    else:
        sample["message_pool"] = msgs
        ev = _model_event(sample)
        ev["input"], ev["input_refs"] = [], [[0, n]]
        ev["output"] = {"choices": [{"message": {"role": "assistant", "content": "ok"}}]}
        sample["events"] = [ev]
        where = "message_pool via input_refs"
    ops = [
        f"inspect: {n} {'distinct' if distinct else 'identical'} {where} point to one "
        f"{size // MB} MiB attachment://"
    ]
    return Case(s.label, s.key, write([]), s.name, ops, commands=_amp_commands(s.name))


def amp_lzma_dictionary(s: Sample, rng: random.Random) -> Case | None:
    """An LZMA member whose header declares a dictionary of gigabytes (the data decodes with any: only
    the allocation is attacked)."""
    if s.kind != "zip":
        return None
    members = list(s.members)
    idx = [i for i, (n, _, _) in enumerate(members) if n == "header.json" or n.startswith("samples/")]
    k = rng.choice(idx or [0])
    members[k] = (members[k][0], members[k][1], zipfile.ZIP_LZMA)
    blob = bytearray(build_zip(members))
    info = zipfile.ZipFile(io.BytesIO(bytes(blob))).infolist()[k]
    n, m = struct.unpack_from("<HH", blob, info.header_offset + 26)
    start = info.header_offset + 30 + n + m  # 2 bytes version, 2 bytes size of the properties, then them
    size = rng.choice((0xFFFFFFFF, 3 << 30, 2 << 30))
    struct.pack_into("<I", blob, start + 5, size)
    ops = [f"archive: LZMA member {members[k][0]} declares a {size / (1 << 30):.0f} GiB dictionary"]
    return Case(s.label, s.key, {s.name: bytes(blob)}, s.name, ops, commands=_amp_commands(s.name))


def amp_spelled_members(s: Sample, rng: random.Random) -> Case | None:
    """An ``.eval`` holding a sample member and the same member spelled ``samples/./`` and ``samples//``."""
    if s.kind != "zip":
        return None
    members = list(s.members)
    sm = [(n, d, c) for n, d, c in members if n.startswith("samples/")]
    if not sm:
        return None
    n, d, c = sm[0]
    base = n[len("samples/") :]
    extra = [(f"samples/./{base}", d, c), (f"samples//{base}", d, c)]
    ops = [f"archive: {n} also as samples/./{base} and samples//{base}"]
    return Case(s.label, s.key, {s.name: build_zip(members + extra)}, s.name, ops)


def _set_long_id(doc: Any, rng: random.Random, size: int) -> str | None:
    nodes = [n for n in _nodes({"$": doc}) if n[1] in ID_KEYS and isinstance(n[0][n[1]], str)]
    if not nodes:
        return None
    parent, key, path = rng.choice(nodes)
    parent[key] = parent[key][:20] + "i" * size
    return path_text(path)


def amp_long_id(s: Sample, rng: random.Random) -> Case | None:
    """An identifier (session, trace, call, record id) of megabytes: a message that echoes it whole
    writes megabytes to stderr."""
    size = rng.choice((1, 4, 16)) * MB
    ops: list[str] = []
    if s.kind == "jsonl":
        recs = copy.deepcopy(s.doc)
        ks = [k for k, r in enumerate(recs) if isinstance(r, dict)]
        if not ks:
            return None
        k = rng.choice(ks)
        if s.label == "claude-code" and rng.random() < 0.6:
            recs[k]["sessionId"] = "s" * size
            where = "sessionId"
        else:
            where = _set_long_id(recs[k], rng, size)
        if where is None:
            return None
        ops.append(f"line {k + 1}: {where} := an id of {size // MB} MiB")
        return Case(s.label, s.key, {s.name: _jsonl_bytes(recs, Raw())}, s.name, ops)
    if s.kind == "json":
        doc = copy.deepcopy(s.doc)
        where = _set_long_id(doc, rng, size)
        if where is None:
            return None
        ops.append(f"json: {where} := an id of {size // MB} MiB")
        return Case(s.label, s.key, {s.name: json.dumps(doc).encode(), **s.side}, s.name, ops)
    if s.kind == "folder":
        files = dict(s.files)
        name = rng.choice([n for n in sorted(files) if n.endswith(".json")] or [""])
        if not name:
            return None
        try:
            doc = json.loads(files[name])
        except ValueError:
            return None
        where = _set_long_id(doc, rng, size)
        if where is None:
            return None
        files[name] = json.dumps(doc).encode()
        ops.append(f"{name} {where} := an id of {size // MB} MiB")
        return Case(s.label, s.key, {f"{s.name}/{k}": v for k, v in files.items()}, s.name, ops)
    got = _inspect_samples(s)
    if got and got[0]:
        where = _set_long_id(got[0][0], rng, size)
        if where is not None:
            return Case(s.label, s.key, got[1]([]), s.name, [f"sample {where} := an id of {size // MB} MiB"])
    return None


_PARQUET_BOMBS: dict[tuple, bytes] = {}


def amp_parquet_dictionary(s: Sample, rng: random.Random) -> Case | None:
    """Canonical Parquet whose string column is one dictionary value of ~1 MB repeated by thousands of
    rows: kilobytes on disk, gigabytes once decoded (written without the Arrow schema, so a reader
    decodes the column to plain strings)."""
    if s.kind != "parquet" or not s.rows:
        return None
    cols = [k for k, v in s.rows[0].items() if isinstance(v, str)]
    col = rng.choice(sorted(cols)) if cols else None
    rows, width = rng.choice((2000, 4000, 8000)), rng.choice((512 << 10, 960 << 10))
    key = (s.key, col, rows, width)
    if key not in _PARQUET_BOMBS:
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.Table.from_pylist([s.rows[0]])
        arrays = []
        for name in table.column_names:
            if name == col:
                idx = pa.array([0] * rows, pa.int32())
                arrays.append(pa.DictionaryArray.from_arrays(idx, pa.array(["d" * width])))
            else:
                arrays.append(pa.repeat(table.column(name)[0], rows))
        buf = io.BytesIO()
        pq.write_table(
            pa.Table.from_arrays(arrays, names=table.column_names),
            buf,
            compression="zstd",
            store_schema=False,
            dictionary_pagesize_limit=4 * MB,
            row_group_size=rows,
        )
        _PARQUET_BOMBS[key] = buf.getvalue()
    data = _PARQUET_BOMBS[key]
    ops = [
        f"parquet: column {col} is one {width >> 10} KiB dictionary value in {rows:,} rows "
        f"({rows * width / (1 << 30):.1f} GiB decoded, {len(data):,} bytes on disk)"
    ]
    return Case(s.label, s.key, {s.name: data}, s.name, ops, commands=_amp_commands(s.name, dataset=True))


def amp_deep_folder(s: Sample, rng: random.Random) -> Case | None:
    """The sample at the bottom of a folder 1,100 levels deep (a reader that walks folders recursively
    overflows Python's stack)."""
    if s.kind == "folder":
        return None
    base = pristine(s)
    levels = rng.randint(1050, 1150)
    prefix = "deep/" + "d/" * levels
    files = {prefix + k: v for k, v in base.files.items()}
    ops = [f"folder: the sample {levels:,} folders deep"]
    return Case(
        s.label,
        s.key,
        files,
        "deep",
        ops,
        commands=_amp_commands("deep", dataset=s.label.startswith("canonical")),
    )


def amp_huge_numbers(s: Sample, rng: random.Random) -> Case | None:
    """Every number of the sample (or of one record) replaced by one out of every float's range."""
    if s.kind not in ("json", "jsonl"):
        return None
    value = rng.choice(HUGE_NUMBERS)
    raw = Raw()
    token = raw(value)

    def swap(o: Any) -> Any:
        if isinstance(o, dict):
            return {k: swap(v) for k, v in o.items()}
        if isinstance(o, list):
            return [swap(v) for v in o]
        return token if _is_number(o) else o

    if s.kind == "json":
        data = raw.dumps(swap(s.doc)).encode()
        return Case(s.label, s.key, {s.name: data, **s.side}, s.name, [f"json: every number := {value[:24]}"])
    recs = list(s.doc)
    k = rng.randrange(len(recs)) if recs else 0
    if recs and not isinstance(recs[k], Line):
        recs[k] = swap(recs[k])
    return Case(
        s.label,
        s.key,
        {s.name: _jsonl_bytes(recs, raw)},
        s.name,
        [f"line {k + 1}: every number := {value[:24]}"],
    )


def _numeric_knobs(policy: str) -> list[str]:
    import yaml

    try:
        conf = yaml.safe_load((REPO / "conf" / "policy" / f"{policy}.yaml").read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return []
    return sorted(k for k, v in (conf or {}).items() if _is_number(v) or (v is None and k != "_target_"))


def amp_knobs(s: Sample, rng: random.Random) -> Case | None:
    """The unmutated sample under numeric knobs out of range: ``--window``, a policy's numbers,
    ``explain --call``."""
    base = pristine(s)
    t = base.target
    cmds, ops = [], []
    for _ in range(rng.randint(1, 3)):
        v = rng.choice(KNOB_VALUES)
        kind = rng.choice(("window", "policy", "policy", "explain"))
        if kind == "window":
            cmds.append(["run", t, "--window", v, "--format", "json"])
        elif kind == "explain":
            v = rng.choice(("0", "1", "-1", v))
            cmds.append(["explain", t, "--call", v])
        else:
            policy = rng.choice([p for p, _ in POLICY_RUNS if _numeric_knobs(p)])
            knob = rng.choice(_numeric_knobs(policy))
            cmds.append(["run", t, "--policy", policy, f"policy.{knob}={v}", "--format", "json"])
        ops.append("knob: " + " ".join(cmds[-1][2:]))
    return Case(s.label, s.key, base.files, t, ops, commands=cmds, do_import=False)


def amp_assistant_only(s: Sample, rng: random.Random) -> Case | None:
    """A conversation whose only message is the assistant's, explained at call 0."""
    if s.label not in ("openai-chat", "anthropic-messages") or s.kind != "json":
        return None
    doc = copy.deepcopy(s.doc)
    msgs = doc if isinstance(doc, list) else doc.get("messages")
    if not isinstance(msgs, list):
        return None
    keep = [m for m in msgs if isinstance(m, dict) and m.get("role") == "assistant"][:1]
    msgs[:] = keep
    if isinstance(doc, dict):
        doc.pop("system", None)
    t = s.name
    cmds = [["validate", t], ["explain", t, "--call", "0"], ["run", t, "--format", "json"]]
    return Case(
        s.label,
        s.key,
        {t: json.dumps(doc).encode()},
        t,
        ["chat: only the assistant's message"],
        commands=cmds,
    )


GATE_FILE = """name: fuzz
suite: {suite}
baseline:
  results: baseline.jsonl
candidate:
  policy: raw
thresholds:
  cost_microusd: {{max_increase_pct: 5}}
  cumulative_input_tokens: {{max_increase_pct: 5}}
  calls: {{max_increase: 0}}
"""


def amp_gate_baseline(s: Sample, rng: random.Random) -> Case | None:
    """A gate whose committed baseline holds a number out of every float's range."""
    if not s.label.startswith("canonical"):
        return None
    base = pristine(s)
    fld = rng.choice(("cost_microusd", "cumulative_input_tokens", "calls"))
    value = rng.choice(HUGE_NUMBERS)
    files = {**base.files, "gate.yaml": GATE_FILE.format(suite=base.target).encode()}
    cmds = [
        ["gate", "gate.yaml", "--update-baseline"],
        ["(edit)", "baseline.jsonl", fld, value],
        ["gate", "gate.yaml"],
    ]
    return Case(
        s.label,
        s.key,
        files,
        "gate.yaml",
        [f"gate: baseline {fld} := {value[:24]}"],
        commands=cmds,
        do_import=False,
    )


INSPECT = ("inspect-eval", "inspect-json")
# (amplifier, the formats it attacks or None for any, weight): the importers' own attacks first; the
# amplifier is drawn before the format, so each gets its share whatever the number of formats
AMPLIFIERS: tuple[tuple[Callable[[Sample, random.Random], Case | None], tuple[str, ...] | None, int], ...] = (
    (amp_shared_message_id, ("claude-code",), 8),
    (amp_sidechains, ("claude-code",), 8),
    (amp_shared_response_id, ("openhands-sdk-v1",), 8),
    (amp_input_refs, INSPECT, 8),
    (amp_attachments, INSPECT, 8),
    (amp_lzma_dictionary, ("inspect-eval",), 5),
    (amp_spelled_members, ("inspect-eval",), 2),
    (amp_parquet_dictionary, ("canonical-parquet",), 6),
    (amp_long_id, None, 6),
    (amp_deep_folder, None, 5),
    (amp_huge_numbers, None, 5),
    (amp_knobs, None, 6),
    (amp_gate_baseline, ("canonical-jsonl", "canonical-parquet"), 3),
    (amp_assistant_only, ("openai-chat", "anthropic-messages"), 3),
)


def amplify(samples_by_label: dict[str, list[Sample]], rng: random.Random) -> Case | None:
    """One amplification case: an amplifier, then a sample of a format it attacks (None when no sample
    of the formats fuzzed suits any)."""
    pool = [x for x in AMPLIFIERS if x[1] is None or any(lb in samples_by_label for lb in x[1])]
    while pool:
        pick = rng.choices(pool, [w for _, _, w in pool])[0]
        fn, labels, _ = pick
        cands = [
            s
            for lb in sorted(samples_by_label)
            if labels is None or lb in labels
            for s in samples_by_label[lb]
        ]
        rng.shuffle(cands)
        for sample in cands[:8]:
            case = fn(sample, rng)
            if case is not None:
                case.ops.insert(0, f"amp: {fn.__name__[4:]}")
                return case
        pool.remove(pick)
    return None


MUTATORS: dict[str, Callable[[Sample, random.Random, bool], Case]] = {
    "json": mutate_json_sample,
    "jsonl": mutate_jsonl_sample,
    "zip": mutate_zip_sample,
    "folder": mutate_folder_sample,
    "parquet": mutate_parquet_sample,
}


def make_case(
    samples_by_label: dict[str, list[Sample]], seed: str, i: int, bombs: bool, amp_rate: float = 0.0
) -> Case:
    rng = random.Random(f"{seed}:{i}")
    label = rng.choice(sorted(samples_by_label))
    sample = rng.choice(samples_by_label[label])
    # its own stream: with --amp-rate 0 every case is the one the fuzzer drew before amplification existed
    amp = random.Random(f"{seed}:{i}:amp")
    if amp.random() < amp_rate:
        case = amplify(samples_by_label, amp)
        if case is not None:
            return case
    return MUTATORS[sample.kind](sample, rng, bombs)


# ------------------------------------------------------------------------------------------ running a case
class Slow(BaseException):
    """Raised in the child by the time bound (a BaseException: ``except Exception`` in ctxsim passes it)."""

    def __init__(self, where: str) -> None:
        super().__init__(where)
        self.where = where


def sim_frame(tb_or_frames) -> str:
    """``sim/FILE.py:function`` of the innermost frame inside ``sim/`` (else the innermost frame)."""
    frames = list(tb_or_frames)
    inside = [f for f in frames if f.filename.startswith(SIM_DIR)]
    f = (inside or frames or [None])[-1]
    if f is None:
        return "?"
    name = f.filename[len(str(REPO)) + 1 :] if f.filename.startswith(str(REPO)) else Path(f.filename).name
    return f"{name}:{f.name}"


def exc_signature(kind: str, exc: BaseException) -> str:
    return f"{kind} {type(exc).__name__} at {sim_frame(traceback.extract_tb(exc.__traceback__))}"


def _strict_json(line: str) -> Any:
    def refuse(name: str):
        raise ValueError(name)

    return json.loads(line, parse_constant=refuse)


# Result columns that may be negative by definition: a slope, and tokens reclaimed *net* of the summaries'
# own size (a minimum-size summary of a short span leaves the view larger: docs/metrics.md).
SIGNED = ("growth_exponent", "tokens_reclaimed")


def output_problems(stdout: str) -> list[str]:
    """Invariants of ``run --format json`` rows: JSON without NaN/Infinity; counts and costs not negative
    and below 2^53; rates in [0, 1]; cache reads and writes within the input."""
    out = []
    for line in stdout.splitlines():
        if not line.strip():
            continue
        try:
            row = _strict_json(line)
        except ValueError as exc:
            out.append(f"run output is not strict JSON ({str(exc)[:40]})")
            continue
        if not isinstance(row, dict):
            out.append("run output row is not an object")
            continue
        for k, v in row.items():
            if k.startswith("policy.") or not _is_number(v):
                continue
            if isinstance(v, float) and not math.isfinite(v):
                out.append(f"non-finite {k}")
            elif v < 0 and k not in SIGNED:
                out.append(f"negative {k}")
            elif isinstance(v, int) and v >= MAX_COUNT:
                out.append("a count or cost >= 2^53")  # one signature: the fields follow each other
        for k in ("cache_hit_rate", "answer_fact_recall"):
            v = row.get(k)
            if _is_number(v) and not 0 <= v <= 1:
                out.append(f"{k} outside [0, 1]")
        ci, cr, cw = (
            row.get(k) for k in ("cumulative_input_tokens", "cache_read_tokens", "cache_write_tokens")
        )
        if all(_is_number(v) for v in (ci, cr, cw)) and cr + cw > ci:
            out.append("cache reads + writes exceed the input")
    return sorted(set(out))


LONG_LINE = 10_000  # a stderr line longer than this echoes an input value whole (an id, a document)
# what an exit 2 says when it is really memory running out (the refusal should come before decoding)
OOM_TEXT = re.compile(r"MemoryError|bad_alloc|out of memory|Cannot allocate|realloc|malloc", re.I)
NON_FINITE = re.compile(r"(?<![\w.])-?(nan|inf|infinity)(?![\w])", re.I)


def run_cli(argv: list[str]) -> dict:
    """One command through ``sim.cli.main`` with output captured: exit code, signature if it failed."""
    from sim.cli import main

    caught: list[BaseException] = []
    traceback.print_exc = lambda *a, **k: caught.append(sys.exc_info()[1])  # run_command's --debug path
    out, err = io.StringIO(), io.StringIO()
    rc, sig = None, None
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(["--debug", *argv])
        except SystemExit as exc:  # argparse
            rc = exc.code if isinstance(exc.code, int) else 2
        except Slow:
            raise
        except BaseException as exc:  # noqa: BLE001 - anything escaping main is the finding
            sig = exc_signature("uncaught", exc)
    ok = (0, 1, 2) if argv[0] == "gate" else (0, 2)  # a gate exits 1 for a regression
    if sig is None and rc == 3:
        exc = caught[-1] if caught else None
        if isinstance(exc, MemoryError):
            sig = f"cap: memory (MemoryError, exit 3) at {sim_frame(traceback.extract_tb(exc.__traceback__))}"
        else:
            sig = exc_signature("exit3", exc) if exc else "exit3 (no exception seen)"
    elif sig is None and rc not in ok:
        sig = f"exit {rc!r} from {argv[0]}"
    stderr = err.getvalue()
    longest = max((len(ln) for ln in stderr.splitlines()), default=0)
    return {
        "argv": argv,
        "rc": rc,
        "sig": sig,
        "stdout": out.getvalue(),
        "stderr": stderr[-2000:],
        "longest": longest,
        "oom": bool(rc == 2 and OOM_TEXT.search(stderr[-20000:])),
    }


def case_commands(target: str) -> list[list[str]]:
    cmds = [["validate", target]]
    cmds += [["run", target, "--policy", p, *ov, "--format", "json"] for p, ov in POLICY_RUNS]
    return cmds


def _edit_jsonl(path: str, fld: str, text: str) -> None:
    """Set ``fld`` of the first row of a JSON Lines file to the literal JSON ``text`` (a tampered file)."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    if not lines:
        return
    row = json.loads(lines[0])
    row[fld] = "@@ctxsim-fuzz-edit@@"
    lines[0] = json.dumps(row).replace('"@@ctxsim-fuzz-edit@@"', text)
    Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")


def _verdicts(results: list[dict]) -> str | None:
    """``validate``, ``run --policy raw``, ``run --dataset`` and ``import`` of one input must accept or
    refuse it alike (issue 41): the disagreement, in words, or None."""
    seen: dict[str, int] = {}
    for r in results:
        a = r["argv"]
        if r["sig"] or r["rc"] not in (0, 2) or OUT_NAME in a[1:2]:
            continue
        if a[0] == "validate":
            seen.setdefault("validate", r["rc"])
        elif a[0] == "import":
            seen.setdefault("import", r["rc"])
        elif a[0] == "run" and "--dataset" in a:
            seen.setdefault("run --dataset", r["rc"])
        elif a[0] == "run" and "--window" not in a and ("raw" in a or "--policy" not in a):
            seen.setdefault("run", r["rc"])
    if len(set(seen.values())) > 1:
        acc = [k for k, v in seen.items() if v == 0]
        ref = [k for k, v in seen.items() if v == 2]
        return f"invariant: verdicts differ ({' and '.join(acc)} accept, {' and '.join(ref)} refuse)"
    return None


def run_case_in_child(
    target: str,
    parquet_rows: str | None,
    bound: float,
    rss_mb: int = 0,
    commands: list[list[str]] | None = None,
    do_import: bool = True,
    post_run: bool = True,
) -> dict:
    """In the child, in the case folder: every command; the failures found (signature, command line)."""
    flagged: list[str] = []

    def cli(argv: list[str]) -> dict:
        r = run_cli(argv)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        if rss_mb and peak > rss_mb and not flagged:  # the first command to pass the bound is named
            flagged.append(argv[0])
            failures.append((f"memory: peak RSS over {rss_mb} MB in {argv[0]}", argv, f"{peak:.0f} MB"))
        if r["longest"] > LONG_LINE:
            failures.append(
                (
                    f"invariant: a stderr line over {LONG_LINE:,} chars from {argv[0]}",
                    argv,
                    f"{r['longest']:,} chars",
                )
            )
        if r["oom"]:
            failures.append(
                (f"cap: memory (exit 2 after running out of memory) in {argv[0]}", argv, r["stderr"])
            )
        if argv[0] == "gate" and not r["sig"] and NON_FINITE.search(r["stdout"] + r["stderr"]):
            failures.append(("invariant: gate prints inf or nan", argv, r["stderr"]))
        return r

    def cpu_cap(signum, frame):
        stack = traceback.extract_stack(frame)
        raise Slow(f"cap: CPU over {bound:g} s at {sim_frame(stack)}")

    # CPU time of this process (all threads), not wall time: two workers on a loaded machine share it
    signal.signal(signal.SIGPROF, cpu_cap)
    signal.setitimer(signal.ITIMER_PROF, bound)
    results, failures = [], []
    current: list[str] = ["(parquet)"]
    try:
        if parquet_rows is not None:
            if not _write_parquet(parquet_rows, target):
                return {"skipped": True, "failures": []}
        cmds = list(commands or case_commands(target))
        if do_import:
            cmds.append(["import", target, "-o", OUT_NAME])
        for argv in cmds:
            current = argv
            if argv[0] == "(edit)":
                _edit_jsonl(*argv[1:])
                continue
            r = cli(argv)
            results.append(r)
            if r["sig"]:
                failures.append((r["sig"], argv, r["stderr"]))
            elif r["rc"] == 0 and argv[0] == "run":
                failures.extend((f"invariant: {p}", argv, "") for p in output_problems(r["stdout"]))
            if flagged or "MemoryError" in (r["sig"] or ""):
                return _child_result(results, failures)  # the other commands would only repeat it
        if do_import and results[-1]["rc"] == 0:  # the import wrote a canonical file: it must validate, run
            current = ["validate", OUT_NAME]
            v = cli(current)
            results.append(v)
            r = {"argv": [], "rc": None, "sig": None, "stdout": ""}
            if post_run:
                current = ["run", OUT_NAME, "--policy", "raw", "--format", "json"]
                r = cli(current)
                results.append(r)
            for x in (v, r):
                if x["sig"]:
                    failures.append((x["sig"], x["argv"], x["stderr"]))
            if not v["sig"] and v["rc"] != 0:
                empty = not Path(OUT_NAME).stat().st_size
                what = (
                    "import exit 0 wrote no traces, and validate refuses the empty file"
                    if empty
                    else f"import output fails validate ({_problem_kind(v['stdout'])})"
                )
                failures.append(
                    (f"invariant: {what}", ["import", target, "-o", OUT_NAME], v["stdout"][-1000:])
                )
            if r["rc"] == 0:
                failures.extend((f"invariant: {p}", r["argv"], "") for p in output_problems(r["stdout"]))
        differ = _verdicts(results)
        if differ:
            failures.append((differ, cmds[0], ""))
    except Slow as exc:
        failures.append((exc.where, current, f"over {bound:g} s CPU"))
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
    return _child_result(results, failures)


def _problem_kind(validate_out: str) -> str:
    """The first problem ``validate`` names, without file, record, positions and numbers: one
    signature per kind of problem."""
    first = validate_out.strip().splitlines()[0] if validate_out.strip() else ""
    first = first.split(": ", 1)[-1]  # the file name
    first = re.sub(r"^record [^:]+: ", "", first)
    return re.sub(r"[0-9]+", "N", first)[:90]


def _child_result(results: list[dict], failures: list) -> dict:
    return {"skipped": False, "rcs": [(r["argv"][0], r["rc"]) for r in results], "failures": failures}


def _write_parquet(rows_json: str, target: str) -> bool:
    """A mutated row set as Parquet; False when Arrow cannot hold it (then the case is skipped)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        rows = json.loads(rows_json)
        table = pa.Table.from_pylist(rows)
        pq.write_table(table, target)
        return True
    except Exception:  # noqa: BLE001 - a row Arrow cannot represent is not a case
        return False


# a case waiting (not computing) is killed after this many times the CPU bound: generous, as on a loaded
# machine (other jobs, the other worker) a case gets a fraction of a core
WALL_FACTOR = 10
_CASE_PID: list[int] = []  # the case child running now: ended with its parent or worker


def _end_case_child() -> None:
    for pid in _CASE_PID:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def in_child(fn: Callable[[], Any], bound: float, memory_mb: int = 0, log: Path | None = None) -> dict:
    """Run ``fn`` in a forked child under the caps: its pickled result, or what ended it (signal, time);
    with ``cpu_s`` and ``peak_mb``, what it used. The CPU bound is the child's own (``ITIMER_PROF`` in
    ``run_case_in_child`` names the frame; ``RLIMIT_CPU`` a little later stops one stuck in C code);
    memory is ``RLIMIT_AS``. The child's file descriptors 1 and 2 (what C code writes past
    ``sys.stdout``) go to ``log``."""
    r, w = os.pipe()
    wall = WALL_FACTOR * (
        math.ceil(bound) + 2 * KILL_GRACE
    )  # past RLIMIT_CPU's hard limit, on a busy machine
    pid = os.fork()
    if pid == 0:  # child
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.close(r)
        code = 0
        try:
            sink = os.open(log or os.devnull, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(sink, 1)
            os.dup2(sink, 2)
            # a crash, a hang or a CPU cap inside C code still leaves the Python stack in the log
            faulthandler.enable(file=2)
            faulthandler.dump_traceback_later(wall - 1, file=2)
            faulthandler.register(signal.SIGXCPU, file=2, chain=True)  # the stack, then the default: end
            soft = math.ceil(bound) + KILL_GRACE
            resource.setrlimit(resource.RLIMIT_CPU, (soft, soft + KILL_GRACE))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core file of a capped case
            if memory_mb:
                cap = memory_mb << 20
                resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
            try:
                payload = pickle.dumps(fn())
            except BaseException as exc:  # noqa: BLE001 - reported, never raised in the child
                payload = pickle.dumps({"harness_error": exc_signature("harness", exc)})
            view = memoryview(payload)
            while view:
                n = os.write(w, view)
                view = view[n:]
        except BaseException:  # noqa: BLE001
            code = 70
        finally:
            os._exit(code)
    _CASE_PID[:] = [pid]
    os.close(w)
    chunks, deadline = [], time.monotonic() + wall
    killed = False
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            os.kill(pid, signal.SIGKILL)
            killed = True
            break
        ready, _, _ = select.select([r], [], [], left)
        if ready:
            chunk = os.read(r, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    os.close(r)
    _, status, usage = os.wait4(pid, 0)
    _CASE_PID.clear()
    used = {"peak_mb": usage.ru_maxrss / 1024, "cpu_s": usage.ru_utime + usage.ru_stime}
    where = _dumped_frame(log)
    if os.WIFSIGNALED(status) and used["cpu_s"] >= bound and not killed:
        return {"killed": f"cap: CPU over {bound:g} s{where} (killed by RLIMIT_CPU)", **used}
    if killed:
        return {"killed": f"slow{where} (killed after {wall:g} s of wall time)", **used}
    if os.WIFSIGNALED(status):
        name = signal.Signals(os.WTERMSIG(status)).name
        return {"killed": f"crash: signal {name}{where}", **used}
    try:
        res = pickle.loads(b"".join(chunks))
    except Exception:  # noqa: BLE001
        code = os.WEXITSTATUS(status)
        return {"killed": f"crash: child exit {code} with no result{where}", **used}
    if isinstance(res, dict):
        res.update(used)
    return res


_DUMPED = re.compile(r'^\s*File "(.+)", line \d+ in (\S+)')


def _dumped_frame(log: Path | None) -> str:
    """`` at sim/FILE.py:function`` of the innermost ``sim/`` frame of the current thread in a
    faulthandler dump (it lists the most recent call first); else the last line the child wrote
    (e.g. glibc's reason for an abort), digits masked; or ""."""
    if log is None or not log.is_file():
        return ""
    text = log.read_text(errors="replace")
    if "most recent call first" not in text:
        last = next((ln.strip() for ln in reversed(text.splitlines()) if ln.strip()), "")
        return f" ({re.sub(r'[0-9]+', 'N', last)[:80]})" if last else ""
    for line in text.rpartition("(most recent call first):")[2].splitlines():
        m = _DUMPED.match(line)
        if m is None:
            if line.strip() and not line.startswith(" "):
                break  # the next thread's block
            continue
        if m.group(1).startswith(SIM_DIR):
            return f" at {m.group(1)[len(str(REPO)) + 1 :]}:{m.group(2)}"
    return ""


def write_case(case: Case, d: Path) -> None:
    for rel, data in case.files.items():
        p = d / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if p.is_dir():  # a member named like a folder: keep the first
            continue
        p.write_bytes(data)


# --------------------------------------------------------------------------------------------- the run
@dataclass
class Finding:
    signature: str
    count: int = 0
    formats: Counter = field(default_factory=Counter)
    commands: Counter = field(default_factory=Counter)
    best_size: int | None = None
    best_case: str = ""
    best_ops: list[str] = field(default_factory=list)
    best_argv: list[str] = field(default_factory=list)
    cases: list[str] = field(default_factory=list)  # the first 100
    best_stderr: str = ""
    reproducer: str | None = None


class Fuzzer:
    def __init__(self, args: argparse.Namespace, work: Path) -> None:
        self.args = args
        self.work = work
        self.findings: dict[str, Finding] = {}
        self.outcomes: Counter = Counter()
        self.commands: Counter = Counter()
        self.baseline: Counter = Counter()
        self.peak_mb = 0.0
        self.parent_vm_mb = 0.0
        # per case: (case, format, family, CPU seconds, peak RSS MB, outcome); family "amp" or "mutation"
        self.stats: list[tuple[str, str, str, float, float, str]] = []

    def state(self) -> dict:
        return {
            k: getattr(self, k) for k in ("findings", "outcomes", "commands", "baseline", "peak_mb", "stats")
        }

    def merge(self, other: dict) -> None:
        """Add a worker's tallies (the same cases split among workers give the same merged report)."""
        for k in ("outcomes", "commands", "baseline"):
            getattr(self, k).update(other[k])
        self.peak_mb = max(self.peak_mb, other["peak_mb"])
        self.stats += other["stats"]
        for sig, g in other["findings"].items():
            f = self.findings.get(sig)
            if f is None:
                self.findings[sig] = g
                continue
            f.count += g.count
            f.cases = sorted(f.cases + g.cases, key=_case_order)[:100]
            f.formats.update(g.formats)
            f.commands.update(g.commands)
            if (g.best_size, _case_order(g.best_case)) < (f.best_size, _case_order(f.best_case)):
                for k in ("best_size", "best_case", "best_ops", "best_argv", "best_stderr", "reproducer"):
                    setattr(f, k, getattr(g, k))

    def run_one(self, case: Case, case_id: str, tally: Counter) -> None:
        d = self.work / "case"
        with _deep_paths():  # a deep-folder case is 1,100 levels deep
            shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
        with _deep_paths():
            write_case(case, d)
        bound = self.args.time_bound

        def child() -> dict:
            os.chdir(d)
            return run_case_in_child(
                case.target,
                case.parquet_rows,
                bound,
                self.args.max_rss_mb,
                case.commands,
                case.do_import,
                case.post_run,
            )

        log = self.work / "child-fd.log"
        res = in_child(child, bound, self.args.max_memory_mb, log)
        peak, cpu = res.get("peak_mb", 0.0), res.get("cpu_s", 0.0)
        self.peak_mb = max(self.peak_mb, peak)
        family = "amp" if case.ops and case.ops[0].startswith("amp:") else "mutation"
        failures: list[tuple[str, list[str], str]] = []
        if "killed" in res:
            said = log.read_text(errors="replace")[-2000:] if log.is_file() else ""
            failures.append((res["killed"], ["(all)", case.target], said))
        elif "harness_error" in res:
            failures.append((res["harness_error"], ["(harness)"], ""))
        elif res.get("skipped"):
            tally["skipped (Arrow cannot hold the mutated rows)"] += 1
            self.stats.append((case_id, case.label, family, round(cpu, 2), round(peak), "skipped"))
            return
        else:
            failures.extend((s, list(a), e) for s, a, e in res["failures"])
            for cmd, rc in res["rcs"]:
                self.commands[f"{cmd} exit {rc}"] += 1
        if (
            self.args.max_rss_mb
            and peak > self.args.max_rss_mb
            and not any(f[0].startswith("memory") for f in failures)
        ):
            failures.append(
                (f"memory: peak RSS over {self.args.max_rss_mb} MB", ["(all)", case.target], f"{peak:.0f} MB")
            )
        if family == "amp":  # the CPU runs out wherever it does: the attack names the finding, the frame
            failures = [  # goes with the reproducer
                (f"cap: CPU over {bound:g} s ({case.ops[0]})", a, f"{g}\n{e}")
                if g.startswith(("cap: CPU", "slow"))
                else (g, a, e)
                for g, a, e in failures
            ]
        # memory blow-ups have no frame: the format tells the readers apart
        failures = [
            (f"{g} ({case.label})" if g.startswith(("memory:", "cap: memory (exit 2")) else g, a, e)
            for g, a, e in failures
        ]
        if failures:
            kinds = {f[0].split()[0].rstrip(":") for f in failures}
            tally["failed"] += 1
            for k in sorted(kinds):
                tally[f"failed: {k}"] += 1
            seen = set()
            for sig, argv, stderr in failures:
                if sig in seen:
                    continue
                seen.add(sig)
                self.record(sig, case, case_id, argv, stderr, d)
            verdict = "failed"
        elif any(rc == 2 for _, rc in res.get("rcs", [])):
            tally["rejected (exit 2)"] += 1
            verdict = "exit 2"
        else:
            tally["ok (exit 0)"] += 1
            verdict = "exit 0"
        self.stats.append((case_id, case.label, family, round(cpu, 2), round(peak), verdict))

    def record(self, sig: str, case: Case, case_id: str, argv: list[str], stderr: str, d: Path) -> None:
        f = self.findings.setdefault(sig, Finding(sig))
        f.count += 1
        if len(f.cases) < 100:
            f.cases.append(case_id)
        f.formats[case.label] += 1
        f.commands[argv[0]] += 1
        with _deep_paths():
            size = sum(
                p.stat().st_size for p in d.rglob("*") if p.is_file() and not p.name.startswith(OUT_NAME)
            )
        if f.best_size is not None and size >= f.best_size:
            return
        f.best_size, f.best_case, f.best_ops, f.best_argv, f.best_stderr = (
            size,
            case_id,
            case.ops,
            argv,
            stderr,
        )
        if self.args.out:
            self.save_reproducer(f, d, case)

    def save_reproducer(self, f: Finding, d: Path, case: Case) -> None:
        """Into this fuzzer's own folder (workers never write the same one); ``publish`` copies each
        signature's smallest to ``--out`` at the end."""
        dest = self.work / "repro" / _slug(f.signature)
        with _deep_paths():
            shutil.rmtree(dest, ignore_errors=True)
            dest.mkdir(parents=True)
            for p in sorted(d.iterdir()):
                if p.name.startswith(OUT_NAME):  # and its sidecar files
                    continue
                if p.is_dir():
                    shutil.copytree(p, dest / p.name)
                else:
                    shutil.copy2(p, dest / p.name)
        f.reproducer = str(dest)
        cmd = " ".join(_shell(a) for a in f.best_argv)
        made = f"ctxsim import {_shell(case.target)} -o {OUT_NAME} && "
        if f.signature.startswith("invariant: import"):
            cmd = f"{made}ctxsim validate {OUT_NAME}"
        elif f.best_argv and f.best_argv[0] in ("run", "validate") and OUT_NAME in f.best_argv:
            cmd = f"{made}ctxsim {cmd}"
        elif case.commands is not None or (f.best_argv and f.best_argv[0].startswith("(")):
            cmds = list(case.commands or case_commands(case.target))
            if case.do_import:
                cmds.append(["import", case.target, "-o", OUT_NAME])
            cmd = "; ".join(_command_line(c) for c in cmds)
        else:
            cmd = "ctxsim " + cmd
        (dest / "REPRODUCE.txt").write_text(
            f"signature: {f.signature}\nformat: {case.label} (sample {case.sample})\n"
            f"case: {f.best_case} (benchmarks/fuzz.py --seed {self.args.seed})\n"
            f"mutations:\n"
            + "".join(f"  - {o}\n" for o in case.ops)
            + f"command (in this folder; add --debug for the traceback):\n  {cmd}\n"
            f"stderr (end):\n" + "".join(f"  {ln}\n" for ln in f.best_stderr.strip().splitlines()[-12:]),
            encoding="utf-8",
        )

    def publish(self, out: str) -> None:
        """Each signature's smallest reproducer into ``out`` (from whichever worker found it)."""
        for f in self.findings.values():
            if not f.reproducer or not Path(f.reproducer).is_dir():
                continue
            dest = Path(out) / _slug(f.signature)
            with _deep_paths():
                shutil.rmtree(dest, ignore_errors=True)
                shutil.copytree(f.reproducer, dest)
            f.reproducer = str(dest)


def _slug(signature: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", signature.lower()).strip("-")[:70]
    return slug + "-" + hashlib.sha1(signature.encode()).hexdigest()[:6]


def _command_line(argv: list[str]) -> str:
    if argv[0] == "(edit)":
        return f"(set {argv[2]} of the first row of {argv[1]} to {argv[3][:30]})"
    if argv[0].startswith("("):  # (all): every command of the case; (harness): the fuzzer's own
        return " ".join(argv)
    return "ctxsim " + " ".join(_shell(a) for a in argv)


def _case_order(case_id: str) -> tuple:
    return (0, int(case_id), "") if case_id.isdigit() else (1, 0, case_id)


@contextlib.contextmanager
def _deep_paths():
    """Python's recursion limit raised in the parent only (shutil and pathlib walk folders recursively;
    a child keeps the default, so ctxsim meets the deep folder as a user's Python would)."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 20000))
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


def _shell(a: str) -> str:
    return a if re.fullmatch(r"[\w./=:,+-]+", a) else "'" + a.replace("'", "'\\''") + "'"


def memoize_compose() -> None:
    """Compose each policy's config once in the parent; every case gets a deep copy (see the docstring)."""
    import sim.config.compose as config

    real = config.compose
    memo: dict[str, Any] = {}

    def compose(policy, overrides, *a, **k):
        key = repr((policy, list(overrides), a, sorted(k.items())))
        if key not in memo:
            memo[key] = real(policy, overrides, *a, **k)
        return copy.deepcopy(memo[key])

    try:
        for policy, ov in POLICY_RUNS:
            compose(policy, list(ov))
    except Exception as exc:  # noqa: BLE001 - compose changed under us: run without the memo, slower
        print(f"fuzz: warning: configs not memoized ({type(exc).__name__}: {exc})", file=sys.stderr)
        return
    config.compose = compose


def warm_imports() -> None:
    """Import in the parent what the commands import lazily, so no child pays for it."""
    import numpy  # noqa: F401
    import pandas  # noqa: F401
    import pyarrow  # noqa: F401
    import pyarrow.parquet  # noqa: F401
    import yaml  # noqa: F401

    import sim.cli  # noqa: F401
    import sim.engine.dispatch  # noqa: F401
    import sim.information.ledger  # noqa: F401
    import sim.results.tables  # noqa: F401
    import sim.trace.io  # noqa: F401
    from sim.importers import registered

    registered()


def warm_commands(samples: list[Sample], work: Path) -> None:
    """Run every command once in the parent on an unmutated JSON sample (in a folder no case uses), so
    children inherit the lazily imported modules and built registries instead of each paying for them."""
    s = next((x for x in samples if x.kind == "json"), None)
    if s is None:
        return
    d = work / "warm"
    d.mkdir()
    case = pristine(s)
    write_case(case, d)
    cwd = os.getcwd()
    os.chdir(d)
    try:
        for argv in case_commands(case.target) + [
            ["import", case.target, "-o", OUT_NAME],
            ["validate", OUT_NAME],
        ]:
            _quiet_main(argv)
    finally:
        os.chdir(cwd)


def load_samples(args: argparse.Namespace, work: Path) -> list[Sample]:
    from sim.util.paths import traces_dir

    root = traces_dir()
    samples = chat_samples()
    if root.is_dir():
        real = real_samples(root)
        missing = [rel for _, rel, _ in REAL_SAMPLES if not (root / rel).exists()]
        if missing:
            print(
                f"fuzz: warning: {len(missing)} samples missing under {root}: {', '.join(missing)}",
                file=sys.stderr,
            )
        samples = real + samples
        samples += canonical_samples(real, work, args.time_bound)
    else:
        print(
            f"fuzz: real traces not found at {root} (set CTXSIM_TRACES): fuzzing only the built-in "
            "openai-chat and anthropic-messages samples and canonical files made from them",
            file=sys.stderr,
        )
        samples += canonical_samples(samples[:2], work, args.time_bound)
    if args.formats:
        want = set(args.formats.split(","))
        unknown = want - {s.label for s in samples}
        if unknown:
            raise SystemExit(
                f"fuzz: unknown formats {sorted(unknown)}; known: {sorted({s.label for s in samples})}"
            )
        samples = [s for s in samples if s.label in want]
    return samples


def _vm_mb() -> float:
    """This process's mapped address space (what RLIMIT_AS counts), in MB; 0 where /proc is absent."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmSize:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", type=int, default=1000)
    p.add_argument("--seed", default="0")
    p.add_argument("--out", help="write the smallest failing input of each signature here, with its command")
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.add_argument("--formats", help="only these sample formats (comma-separated labels)")
    p.add_argument(
        "--no-bombs", action="store_true", help="skip decompression and YAML alias bombs (slow cases)"
    )
    p.add_argument(
        "--time-bound",
        type=float,
        default=20.0,
        help="CPU seconds of a case before it counts as over the cap",
    )
    p.add_argument("--max-memory-mb", type=int, default=1500, help="address-space cap of each case (0: none)")
    p.add_argument(
        "--max-rss-mb", type=int, default=1000, help="peak resident memory of a case that fails it"
    )
    p.add_argument(
        "--amp-rate", type=float, default=AMP_RATE, help="share of cases that are amplification cases"
    )
    p.add_argument("--no-amp", action="store_true", help="no amplification cases (as --amp-rate 0)")
    p.add_argument("--workers", type=int, default=1, help="cases run by this many processes at once")
    p.add_argument("--stats", help="write each case's CPU seconds and peak RSS here (tab-separated)")
    p.add_argument("--list", action="store_true", help="print each case (format, sample, mutations) and stop")
    p.add_argument("--no-baseline", action="store_true", help="skip the run of the unmutated samples")
    p.add_argument("--only", help="run only these case numbers (comma-separated), e.g. to check a reproducer")
    args = p.parse_args()
    bombs = not args.no_bombs
    amp_rate = 0.0 if args.no_amp else args.amp_rate
    if not 0 <= amp_rate <= 1 or args.workers < 1 or args.time_bound <= 0:
        p.error("--amp-rate is a share in [0, 1]; --workers and --time-bound are positive")

    if args.max_memory_mb:
        # as docs/formats.md ("Bounded reading") says to run under an address-space limit: pyarrow's
        # default allocator reserves ~1 GiB of address space up front, which a capped child then lacks
        # for its threads
        os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
    work = Path(tempfile.mkdtemp(prefix="ctxsim-fuzz-"))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # `kill PID` still removes the work folder
    workers: list[int] = []
    try:
        warm_imports()
        samples = load_samples(args, work)
        by_label: dict[str, list[Sample]] = {}
        for s in samples:
            by_label.setdefault(s.label, []).append(s)
        numbers = [int(x) for x in args.only.split(",")] if args.only else list(range(args.cases))
        if args.list:
            for i in numbers:
                c = make_case(by_label, args.seed, i, bombs, amp_rate)
                print(f"{i}\t{c.label}\t{c.sample}\t{c.digest()}\t{' | '.join(c.ops)}")
            return 0
        memoize_compose()
        warm_commands(chat_samples(), work)
        if bombs and args.workers > 1 and any(s.kind == "zip" for s in samples) and len(numbers) >= 500:
            for method in (zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA):
                bomb(method)  # made once here, not once in each worker
        gc.freeze()  # the parent's objects stay shared with each child (no copy-on-write by the collector)
        fz = Fuzzer(args, work / "w0")
        fz.parent_vm_mb = _vm_mb()
        if args.max_memory_mb and fz.parent_vm_mb > 0.8 * args.max_memory_mb:
            print(
                f"fuzz: warning: the parent already maps {fz.parent_vm_mb:.0f} MB of the "
                f"{args.max_memory_mb} MB each case may use",
                file=sys.stderr,
            )
        if not args.no_baseline:
            for s in samples:
                fz.run_one(pristine(s), f"baseline {s.key}", fz.baseline)
        from sim.util import provenance

        prov = provenance.start()  # the cases run in forks of this process: its libraries are theirs
        t0 = time.perf_counter()
        n = min(args.workers, max(1, len(numbers)))
        if n == 1:
            run_cases(fz, by_label, numbers, bombs, amp_rate, progress=True)
        else:
            for k in range(n):
                pid = os.fork()
                if pid == 0:  # a worker: every n-th case, its tallies pickled for the parent
                    code = 0
                    try:
                        signal.signal(signal.SIGTERM, lambda *_: (_end_case_child(), os._exit(143)))
                        wz = Fuzzer(args, work / f"w{k + 1}")
                        run_cases(wz, by_label, numbers[k::n], bombs, amp_rate, progress=k == 0, scale=n)
                        (work / f"w{k + 1}.pickle").write_bytes(pickle.dumps(wz.state()))
                    except BaseException:  # noqa: BLE001 - the parent reports the missing worker
                        traceback.print_exc()
                        code = 70
                    finally:
                        os._exit(code)
                workers.append(pid)
            for k, pid in enumerate(workers):
                os.waitpid(pid, 0)
                f = work / f"w{k + 1}.pickle"
                if f.is_file():
                    fz.merge(pickle.loads(f.read_bytes()))
                else:
                    fz.outcomes["harness error (worker died)"] += 1
            workers.clear()
        seconds = time.perf_counter() - t0
        fz.stats.sort(key=lambda r: _case_order(r[0]))
        if args.out:
            fz.publish(args.out)
        args.cases = len(numbers)
        args.amp_rate = amp_rate
        if args.format == "table" and sys.stderr.isatty():
            print(file=sys.stderr)
        if args.stats:
            with open(args.stats, "w", encoding="utf-8") as out:
                out.write("case\tformat\tfamily\tcpu_s\tpeak_rss_mb\toutcome\n")
                out.writelines("\t".join(map(str, r)) + "\n" for r in fz.stats)
        report(fz, args, samples, seconds, prov)
        bad = (
            fz.outcomes["failed"]
            or fz.baseline["failed"]
            or fz.outcomes["harness error (case not run)"]
            or fz.outcomes["harness error (worker died)"]
        )
        return 1 if bad else 0
    finally:
        _end_case_child()
        for pid in workers:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGTERM)
                os.waitpid(pid, 0)
        with _deep_paths():
            shutil.rmtree(work, ignore_errors=True)


def run_cases(
    fz: Fuzzer,
    by_label: dict[str, list[Sample]],
    numbers: list[int],
    bombs: bool,
    amp_rate: float,
    progress: bool = False,
    scale: int = 1,
) -> None:
    for j, i in enumerate(numbers):
        try:
            case = make_case(by_label, fz.args.seed, i, bombs, amp_rate)
        except Exception as exc:  # noqa: BLE001 - a bug of the fuzzer's own: say so, run the rest
            fz.outcomes["harness error (case not run)"] += 1
            print(f"fuzz: case {i}: {exc_signature('harness error', exc)}", file=sys.stderr)
            continue
        try:
            fz.run_one(case, str(i), fz.outcomes)
        except Exception as exc:  # noqa: BLE001 - the fuzzer's own bug (e.g. writing the case): run the rest
            fz.outcomes["harness error (case not run)"] += 1
            print(f"fuzz: case {i}: {exc_signature('harness error', exc)}", file=sys.stderr)
            continue
        if progress and fz.args.format == "table" and sys.stderr.isatty() and (j + 1) % 50 == 0:
            print(
                f"\r~{(j + 1) * scale}/{fz.args.cases} cases, {fz.outcomes['failed']} failed (worker 1)",
                end="",
                file=sys.stderr,
            )


def _percentile(xs: list[float], q: float) -> float:
    if not xs:
        return 0.0
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def usage_summary(fz: Fuzzer) -> dict:
    """CPU seconds and peak RSS per case, over all cases and per family (amplification or mutation)."""
    out = {}
    for fam in ("all", "amp", "mutation"):
        rows = [r for r in fz.stats if r[0].isdigit() and (fam == "all" or r[2] == fam)]
        cpu = [r[3] for r in rows]
        rss = [r[4] for r in rows]
        out[fam] = {
            "cases": len(rows),
            "cpu_s_total": round(sum(cpu), 1),
            "cpu_s_median": _percentile(cpu, 0.5),
            "cpu_s_p99": _percentile(cpu, 0.99),
            "cpu_s_max": max(cpu, default=0.0),
            "peak_rss_mb_median": _percentile(rss, 0.5),
            "peak_rss_mb_max": max(rss, default=0),
        }
    return out


def report(fz: Fuzzer, args: argparse.Namespace, samples: list[Sample], seconds: float, prov) -> None:
    """The tallies, with where they were measured (``prov``: its ``seconds`` and cases/s are timings)."""
    findings = sorted(fz.findings.values(), key=lambda f: (-f.count, f.signature))
    rate = args.cases / seconds if seconds else 0.0
    if args.format == "json":
        out = {
            "cases": args.cases,
            "seed": args.seed,
            "seconds": round(seconds, 1),
            "cases_per_second": round(rate, 2),
            "formats": sorted({s.label for s in samples}),
            "samples": len(samples),
            "bombs": not args.no_bombs,
            "outcomes": dict(sorted(fz.outcomes.items())),
            "baseline": dict(sorted(fz.baseline.items())),
            "commands": dict(sorted(fz.commands.items())),
            "failed": fz.outcomes["failed"],
            "peak_rss_mb": round(fz.peak_mb),
            "parent_address_space_mb": round(fz.parent_vm_mb),
            "max_memory_mb": args.max_memory_mb,
            "cpu_bound_s": args.time_bound,
            "workers": args.workers,
            "amp_rate": args.amp_rate,
            "usage": usage_summary(fz),
            "signatures": [
                {
                    "signature": f.signature,
                    "count": f.count,
                    "formats": dict(sorted(f.formats.items())),
                    "commands": dict(sorted(f.commands.items())),
                    "smallest_case": f.best_case,
                    "smallest_bytes": f.best_size,
                    "mutations": f.best_ops,
                    "argv": f.best_argv,
                    "reproducer": f.reproducer,
                    "cases": f.cases,
                }
                for f in findings
            ],
            "provenance": prov.finish(),
        }
        print(json.dumps(out, indent=2))
        return
    print(
        f"fuzzed {args.cases} cases (seed {args.seed}) over {len(samples)} samples of "
        f"{len({s.label for s in samples})} formats in {seconds:.0f} s: {rate:.1f} cases/s; "
        f"peak RSS of a case {fz.peak_mb:.0f} MB (address-space cap {args.max_memory_mb or 'none'} MB, "
        f"the parent maps {fz.parent_vm_mb:.0f} MB)"
    )
    print(
        f"workers {args.workers}, amplification cases {args.amp_rate:.0%}, caps per case: "
        f"{args.time_bound:g} s CPU, {args.max_memory_mb or 'no'} MB address space"
    )
    for fam, u in usage_summary(fz).items():
        if u["cases"]:
            print(
                f"usage ({fam}, {u['cases']} cases): CPU s total {u['cpu_s_total']:.0f}, median "
                f"{u['cpu_s_median']:.2f}, p99 {u['cpu_s_p99']:.2f}, max {u['cpu_s_max']:.2f}; peak RSS MB "
                f"median {u['peak_rss_mb_median']}, max {u['peak_rss_mb_max']}"
            )
    print("outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(fz.outcomes.items())))
    if fz.baseline:
        print(
            "baseline (unmutated samples): " + ", ".join(f"{k} {v}" for k, v in sorted(fz.baseline.items()))
        )
    print("commands: " + ", ".join(f"{k} {v}" for k, v in sorted(fz.commands.items())))
    print(f"distinct failure signatures: {len(findings)}")
    for f in findings:
        fmts = ", ".join(f"{k} {v}" for k, v in f.formats.most_common(4))
        print(
            f"  {f.count:6d}  {f.signature}\n          formats: {fmts}; smallest: case {f.best_case}, "
            f"{f.best_size:,} bytes: {' | '.join(f.best_ops)[:160]}\n"
            f"          command: {_command_line(f.best_argv)[:200] if f.best_argv else '?'}"
        )
        if f.reproducer:
            print(f"          reproducer: {f.reproducer}")
    print(prov.text())


if __name__ == "__main__":
    sys.exit(main())
