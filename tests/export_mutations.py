"""Quick seeded mutation cases over an export sample (the observability importers' tests share them).

Each case draws from ``random.Random(f"{seed}:{i}")`` one to three mutations of the parsed sample (a
value swapped for another type, a key dropped, a list cut, a huge or negative number, a string where an
object belongs) or cuts its bytes short, writes it under the sample's own name, and runs ``validate``
and ``run --policy raw`` through ``sim.cli.main``: every case must end 0 or 2 without a traceback.
``benchmarks/fuzz.py`` runs the longer hunt.
"""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path

SWAPS = [None, True, 0, -1, 2**64, 1.5, "", "x", "not json {", [], {}, [1, "a"], {"k": None}]


def _paths(d, prefix=()):
    yield prefix
    if isinstance(d, dict):
        for k, v in d.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(d, list):
        for i, v in enumerate(d):
            yield from _paths(v, (*prefix, i))


def _set(d, path, fn):
    if not path:
        return fn(d)
    parent = d
    for k in path[:-1]:
        parent = parent[k]
    parent[path[-1]] = fn(parent[path[-1]])
    return d


def _mutate(doc, rng: random.Random):
    paths = list(_paths(doc))
    path = rng.choice(paths)
    op = rng.randrange(4)
    if op == 0:
        return _set(doc, path, lambda _: copy.deepcopy(rng.choice(SWAPS)))
    if op == 1 and path:  # drop a key or element
        parent = doc
        for k in path[:-1]:
            parent = parent[k]
        del parent[path[-1]]
        return doc
    if op == 2:
        return _set(doc, path, lambda v: v[: rng.randrange(len(v) + 1)] if isinstance(v, list | str) else v)
    return _set(doc, path, lambda v: json.dumps(v) if not isinstance(v, str) else {"text": v})


def mutation_case(text: str, jsonl: bool, rng: random.Random) -> bytes:
    """One mutated copy of a sample's text (JSON, or JSON Lines when ``jsonl``)."""
    if rng.random() < 0.15:  # cut short anywhere
        raw = text.encode()
        return raw[: rng.randrange(len(raw))]
    docs = [json.loads(x) for x in text.splitlines() if x.strip()] if jsonl else [json.loads(text)]
    for _ in range(rng.randint(1, 3)):
        k = rng.randrange(len(docs))
        docs[k] = _mutate(docs[k], rng)
    if jsonl:
        return ("\n".join(json.dumps(d) for d in docs) + "\n").encode()
    return json.dumps(docs[0]).encode()


def run_cases(sample: Path, tmp: Path, cases: int, seed: str, capsys) -> list[str]:
    """Failures (case number, command, exit code, last line of stderr) of ``cases`` mutations."""
    from sim.cli import main

    text = sample.read_text()
    jsonl = sample.suffix == ".jsonl"
    failures = []
    for i in range(cases):
        rng = random.Random(f"{seed}:{i}")
        d = tmp / f"case{i}"
        d.mkdir()
        target = d / sample.name
        target.write_bytes(mutation_case(text, jsonl, rng))
        for argv in (["validate", str(target)], ["run", str(target), "--policy", "raw", "--format", "json"]):
            code = main(argv)
            _, err = capsys.readouterr()
            if code not in (0, 2) or "Traceback" in err:
                failures.append(f"case {i} {argv[0]}: exit {code}: {err.strip().splitlines()[-1:]}")
            if code != 0:
                break
    return failures
