"""Mutation fuzzer of the input boundary (not a test): mutate small copies of the real traces of every
format and run each through the real command line; any outcome but exit 0 or 2 is a failure.

    .venv/bin/python benchmarks/fuzz.py --cases 10000 [--seed 0] [--out DIR] [--format table|json]
        [--formats LABEL,...] [--no-bombs] [--time-bound 20] [--max-memory-mb 1500] [--max-rss-mb 1000]
        [--list] [--only I,J,...] [--no-baseline]

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
``--list`` prints the cases without running them; ``--only`` runs the given case numbers.

Each case runs in a forked child (so one case cannot leak state into the next, and a hard time or memory
bound kills only it) through ``sim.cli.main``: ``validate``, ``run --format json`` under raw,
observation_masking, seed_engine (context_token_limit 4000) and tool_result_head_tail, then ``import -o
fuzz-out.jsonl``, ``validate`` of what it wrote and ``run`` of it. Failures: exit 3 or any code but 0/2,
an exception escaping ``main``, a case over the time bound ("slow"), a child killed by a signal, peak
memory over the bound, stdout JSON holding NaN/Infinity or a negative (or >= 2^53) count or cost, and an
import whose output ``validate`` refuses. A failure's signature is the exception type and the innermost
frame inside ``sim/`` (or the invariant violated); ``--out DIR`` keeps the smallest input of each with the
command line that fails. Exit status 0 when no case failed, 1 otherwise.

The fuzzer fuzzes trace files, not configuration: it composes each policy's config once and hands every
case a copy (Hydra composition costs ~80 ms a command and would dominate the run).
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


MUTATORS: dict[str, Callable[[Sample, random.Random, bool], Case]] = {
    "json": mutate_json_sample,
    "jsonl": mutate_jsonl_sample,
    "zip": mutate_zip_sample,
    "folder": mutate_folder_sample,
    "parquet": mutate_parquet_sample,
}


def make_case(samples_by_label: dict[str, list[Sample]], seed: str, i: int, bombs: bool) -> Case:
    rng = random.Random(f"{seed}:{i}")
    label = rng.choice(sorted(samples_by_label))
    sample = rng.choice(samples_by_label[label])
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
    if sig is None and rc == 3:
        sig = exc_signature("exit3", caught[-1]) if caught else "exit3 (no exception seen)"
    elif sig is None and rc not in (0, 2):
        sig = f"exit {rc!r} from {argv[0]}"
    stderr = err.getvalue()
    return {"argv": argv, "rc": rc, "sig": sig, "stdout": out.getvalue(), "stderr": stderr[-2000:]}


def case_commands(target: str) -> list[list[str]]:
    cmds = [["validate", target]]
    cmds += [["run", target, "--policy", p, *ov, "--format", "json"] for p, ov in POLICY_RUNS]
    return cmds


def run_case_in_child(target: str, parquet_rows: str | None, bound: float, rss_mb: int = 0) -> dict:
    """In the child, in the case folder: every command; the failures found (signature, command line)."""
    flagged: list[str] = []

    def cli(argv: list[str]) -> dict:
        r = run_cli(argv)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        if rss_mb and peak > rss_mb and not flagged:  # the first command to pass the bound is named
            flagged.append(argv[0])
            failures.append((f"memory: peak RSS over {rss_mb} MB in {argv[0]}", argv, f"{peak:.0f} MB"))
        return r

    def alarm(signum, frame):
        stack = traceback.extract_stack(frame)
        raise Slow(f"slow at {sim_frame(stack)}")

    signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, bound)
    results, failures = [], []
    current: list[str] = ["(parquet)"]
    try:
        if parquet_rows is not None:
            if not _write_parquet(parquet_rows, target):
                return {"skipped": True, "failures": []}
        cmds = case_commands(target)
        for argv in cmds + [["import", target, "-o", OUT_NAME]]:
            current = argv
            r = cli(argv)
            results.append(r)
            if r["sig"]:
                failures.append((r["sig"], argv, r["stderr"]))
            elif r["rc"] == 0 and argv[0] == "run":
                failures.extend((f"invariant: {p}", argv, "") for p in output_problems(r["stdout"]))
            if flagged or "MemoryError" in (r["sig"] or ""):
                return _child_result(results, failures)  # the other commands would only repeat it
        if results[-1]["rc"] == 0:  # the import wrote a canonical file: it must validate and run
            current = ["validate", OUT_NAME]
            v = cli(current)
            current = ["run", OUT_NAME, "--policy", "raw", "--format", "json"]
            r = cli(current)
            results += [v, r]
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
    except Slow as exc:
        failures.append((exc.where, current, f"over {bound:g} s"))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
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


def in_child(fn: Callable[[], Any], bound: float, memory_mb: int = 0, log: Path | None = None) -> dict:
    """Run ``fn`` in a forked child; its pickled result, or what ended it (signal, time). The child's
    file descriptors 1 and 2 (what C code writes past ``sys.stdout``) go to ``log``."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.close(r)
        code = 0
        try:
            sink = os.open(log or os.devnull, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(sink, 1)
            os.dup2(sink, 2)
            # a crash or a hang inside C code still leaves the Python stack in the log, for the signature
            faulthandler.enable(file=2)
            faulthandler.dump_traceback_later(bound + 1, file=2)
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
    os.close(w)
    chunks, deadline = [], time.monotonic() + bound + KILL_GRACE
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
    peak_mb = usage.ru_maxrss / 1024
    where = _dumped_frame(log)
    if killed:
        return {"killed": f"slow{where} (killed after {bound + KILL_GRACE:g} s)", "peak_mb": peak_mb}
    if os.WIFSIGNALED(status):
        name = signal.Signals(os.WTERMSIG(status)).name
        return {"killed": f"crash: signal {name}{where}", "peak_mb": peak_mb}
    try:
        res = pickle.loads(b"".join(chunks))
    except Exception:  # noqa: BLE001
        code = os.WEXITSTATUS(status)
        return {"killed": f"crash: child exit {code} with no result{where}", "peak_mb": peak_mb}
    if isinstance(res, dict):
        res["peak_mb"] = peak_mb
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

    def run_one(self, case: Case, case_id: str, tally: Counter) -> None:
        d = self.work / "case"
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
        write_case(case, d)
        bound = self.args.time_bound

        def child() -> dict:
            os.chdir(d)
            return run_case_in_child(case.target, case.parquet_rows, bound, self.args.max_rss_mb)

        log = self.work / "child-fd.log"
        res = in_child(child, bound, self.args.max_memory_mb, log)
        peak = res.get("peak_mb", 0.0)
        self.peak_mb = max(self.peak_mb, peak)
        failures: list[tuple[str, list[str], str]] = []
        if "killed" in res:
            said = log.read_text(errors="replace")[-2000:] if log.is_file() else ""
            failures.append((res["killed"], ["(all)", case.target], said))
        elif "harness_error" in res:
            failures.append((res["harness_error"], ["(harness)"], ""))
        elif res.get("skipped"):
            tally["skipped (Arrow cannot hold the mutated rows)"] += 1
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
        # memory blow-ups have no frame: the format tells the readers apart
        failures = [(f"{g} ({case.label})" if g.startswith("memory:") else g, a, e) for g, a, e in failures]
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
        elif any(rc == 2 for _, rc in res.get("rcs", [])):
            tally["rejected (exit 2)"] += 1
        else:
            tally["ok (exit 0)"] += 1

    def record(self, sig: str, case: Case, case_id: str, argv: list[str], stderr: str, d: Path) -> None:
        f = self.findings.setdefault(sig, Finding(sig))
        f.count += 1
        if len(f.cases) < 100:
            f.cases.append(case_id)
        f.formats[case.label] += 1
        f.commands[argv[0]] += 1
        size = sum(p.stat().st_size for p in d.rglob("*") if p.is_file() and p.name != OUT_NAME)
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
        slug = re.sub(r"[^a-z0-9]+", "-", f.signature.lower()).strip("-")[:70]
        slug += "-" + hashlib.sha1(f.signature.encode()).hexdigest()[:6]
        dest = Path(self.args.out) / slug
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir(parents=True)
        for p in sorted(d.iterdir()):
            if p.name == OUT_NAME:
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
        elif f.best_argv and f.best_argv[0].startswith("("):
            cmd = "; ".join("ctxsim " + " ".join(_shell(a) for a in c) for c in case_commands(case.target))
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
    p.add_argument("--time-bound", type=float, default=20.0, help="seconds per case before it counts as slow")
    p.add_argument("--max-memory-mb", type=int, default=1500, help="address-space cap of each case (0: none)")
    p.add_argument(
        "--max-rss-mb", type=int, default=1000, help="peak resident memory of a case that fails it"
    )
    p.add_argument("--list", action="store_true", help="print each case (format, sample, mutations) and stop")
    p.add_argument("--no-baseline", action="store_true", help="skip the run of the unmutated samples")
    p.add_argument("--only", help="run only these case numbers (comma-separated), e.g. to check a reproducer")
    args = p.parse_args()
    bombs = not args.no_bombs

    if args.max_memory_mb:
        # as docs/formats.md ("Bounded reading") says to run under an address-space limit: pyarrow's
        # default allocator reserves ~1 GiB of address space up front, which a capped child then lacks
        # for its threads
        os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
    work = Path(tempfile.mkdtemp(prefix="ctxsim-fuzz-"))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # `kill PID` still removes the work folder
    try:
        warm_imports()
        samples = load_samples(args, work)
        by_label: dict[str, list[Sample]] = {}
        for s in samples:
            by_label.setdefault(s.label, []).append(s)
        if args.list:
            for i in range(args.cases):
                c = make_case(by_label, args.seed, i, bombs)
                print(f"{i}\t{c.label}\t{c.sample}\t{c.digest()}\t{' | '.join(c.ops)}")
            return 0
        memoize_compose()
        warm_commands(chat_samples(), work)
        gc.freeze()  # the parent's objects stay shared with each child (no copy-on-write by the collector)
        fz = Fuzzer(args, work)
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
        t0 = time.perf_counter()
        numbers = [int(x) for x in args.only.split(",")] if args.only else range(args.cases)
        for i in numbers:
            try:
                case = make_case(by_label, args.seed, i, bombs)
            except Exception as exc:  # noqa: BLE001 - a bug of the fuzzer's own: say so, run the rest
                fz.outcomes["harness error (case not run)"] += 1
                print(f"fuzz: case {i}: {exc_signature('harness error', exc)}", file=sys.stderr)
                continue
            fz.run_one(case, str(i), fz.outcomes)
            if args.format == "table" and sys.stderr.isatty() and (i + 1) % 50 == 0:
                print(
                    f"\r{i + 1}/{args.cases} cases, {fz.outcomes['failed']} failed", end="", file=sys.stderr
                )
        seconds = time.perf_counter() - t0
        args.cases = len(numbers)
        if args.format == "table" and sys.stderr.isatty():
            print(file=sys.stderr)
        report(fz, args, samples, seconds)
        bad = fz.outcomes["failed"] or fz.baseline["failed"] or fz.outcomes["harness error (case not run)"]
        return 1 if bad else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


def report(fz: Fuzzer, args: argparse.Namespace, samples: list[Sample], seconds: float) -> None:
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
        }
        print(json.dumps(out, indent=2))
        return
    print(
        f"fuzzed {args.cases} cases (seed {args.seed}) over {len(samples)} samples of "
        f"{len({s.label for s in samples})} formats in {seconds:.0f} s: {rate:.1f} cases/s; "
        f"peak RSS of a case {fz.peak_mb:.0f} MB (address-space cap {args.max_memory_mb or 'none'} MB, "
        f"the parent maps {fz.parent_vm_mb:.0f} MB)"
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
            f"{f.best_size:,} bytes: {' | '.join(f.best_ops)[:160]}"
        )
        if f.reproducer:
            print(f"          reproducer: {f.reproducer}")


if __name__ == "__main__":
    sys.exit(main())
