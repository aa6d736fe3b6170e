"""Result rows and table files: one flat row per run, written atomically in CSV, JSON Lines or Parquet.

No JSON or CSV ctxsim writes holds NaN or Infinity: an undefined value (a hit rate of 0/0, a growth
exponent of a run under 4 calls) is None at its source, written as JSON null and as an empty CSV cell.
JSON goes through ``json_line`` (``allow_nan=False``: a NaN that reaches a writer is a bug, and fails
loudly); CSV writes a non-finite float as an empty cell, as it writes None."""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections import deque
from collections.abc import Iterable
from itertools import repeat
from operator import setitem
from pathlib import Path
from typing import Any

from sim.core.records import RunRecord
from sim.metrics.compute import compute_metric_columns, compute_metrics, table_metric_columns
from sim.trace.codec import trace_hash
from sim.util.batchmemo import batch_derived
from sim.util.errors import ConfigError

TABLE_SUFFIXES = (".csv", ".jsonl", ".parquet")


def result_row(
    r: RunRecord, version: str, metrics: dict[str, Any] | Iterable[tuple[str, Any]] | None = None
) -> dict[str, Any]:
    """Identity, full policy parameters (``policy.<knob>``), version, then every metric: all flat.
    ``metrics``: the record's metrics (or their (name, value) pairs) when already computed
    (``result_rows`` does so for a batch)."""
    row: dict[str, Any] = {"trace_id": r.trace_id, "trace_hash": r.trace_hash, "policy": r.policy}
    for k, v in r.params.items():
        row[f"policy.{k}"] = v
    row["model"] = r.model
    row["summarizer"] = r.summarizer
    row["pricing"] = r.pricing
    row["ctxsim_version"] = version
    row["finish_reason"] = r.finish_reason
    row.update(compute_metrics(r) if metrics is None else metrics)
    row["transforms"] = ";".join(r.transforms)  # appended (issue 25): "" when none
    return row


def result_rows(records: list[RunRecord], version: str) -> list[dict[str, Any]]:
    """``result_row`` of each record, metrics computed for the batch at once."""
    columns = compute_metric_columns(records)
    names = list(columns)
    return [
        result_row(r, version, zip(names, values, strict=True))
        for r, values in zip(records, zip(*columns.values(), strict=True), strict=True)
    ]


def table_rows(table, version: str) -> list[dict[str, Any]]:
    """``result_rows`` of a ``sim.engine.dispatch.ReplayTable``'s runs, in order, the same rows to the byte,
    from its columns: no record is built for a run the batch path replayed."""
    columns = table_columns(table, version)
    n = len(table)
    if not n:
        return []
    if table.loop or len(table.groups) != 1:
        return [dict(zip(columns, row, strict=True)) for row in zip(*columns.values(), strict=True)]
    # one batch: each column's values are of one type, so a column whose values all equal its first is
    # that value in every row, written once in a template each row copies (copying keeps the key order)
    # and only the other columns set per row. A float 0.0 might stand for a -0.0: such a column is set.
    # (a column that varies mostly differs at its last or middle run: no count over it is needed)
    template, varying = {}, []
    last, middle = n - 1, n // 2
    for name, col in columns.items():
        first = col[0]
        template[name] = first
        if (
            col[last] != first
            or col[middle] != first
            or (first == 0.0 and type(first) is float)
            or col.count(first) != n
        ):
            varying.append((name, col))
    copy = template.copy
    rows = [copy() for _ in range(n)]
    consume = _CONSUME  # map's calls run in C: a Python loop per (row, column) costs twice as much
    for name, col in varying:
        consume(map(setitem, rows, repeat(name), col))
    return rows


_CONSUME = deque(maxlen=0).extend


def table_columns(table, version: str) -> dict[str, list]:
    """``table_rows`` as columns: result column -> one value per run, in the rows' key order."""
    metrics = table_metric_columns(table)
    params = {f"policy.{k}": v for k, v in table.policy.params().items()}
    n = len(table)
    pricing: list[str | None] = [None] * n
    finish: list[str] = ["completed"] * n
    for g in table.groups:
        priced = None if g.price is None else g.price.model
        if len(g.positions) == n:  # the whole table (its positions are distinct)
            pricing = [priced] * n
            continue
        for pos in g.positions:
            pricing[pos] = priced
    ids, hashes, applied = batch_derived(table.traces, "row_identity", _row_identity)
    hashes, applied = list(hashes), list(applied)  # (kept tuples: each table's columns its own lists)
    for pos, r in table.loop.items():
        pricing[pos], finish[pos] = r.pricing, r.finish_reason
        hashes[pos], applied[pos] = r.trace_hash, ";".join(r.transforms)
    out: dict[str, list] = {"trace_id": list(ids), "trace_hash": hashes, "policy": [table.policy.name] * n}
    out.update((k, [v] * n) for k, v in params.items())
    names, summarizers = batch_derived(table.models, "row_model", _row_model)
    out["model"] = list(names)
    out["summarizer"] = list(summarizers)
    out["pricing"] = pricing
    out["ctxsim_version"] = [version] * n
    out["finish_reason"] = finish
    out.update(metrics)
    out["transforms"] = applied  # appended (issue 25), as result_row writes it
    return out


def _row_identity(traces) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """Each trace's id, hash and transforms label (strings only: the batch memory holds no trace)."""
    return (
        tuple(t.trace_id for t in traces),
        tuple(t.derived("trace_hash", trace_hash) for t in traces),
        tuple(";".join(t.applied) for t in traces),
    )


def _row_model(models) -> tuple[tuple, tuple]:
    """Each replay model's name and summarizer."""
    return tuple(m.name for m in models), tuple(m.summarizer for m in models)


def json_line(row: Any) -> str:
    """One JSON document on one line; NaN or infinity anywhere in it raises ValueError."""
    return json.dumps(row, ensure_ascii=False, allow_nan=False)


def csv_text(rows: list[dict[str, Any]]) -> str:
    """CSV with the union of columns in first-seen order; None as empty. Byte-stable."""
    seen: dict[str, None] = {}  # (a dict: first-seen order with a set's lookups; rows mostly share keys)
    for row in rows:
        if not row.keys() <= seen.keys():
            seen.update(dict.fromkeys(row))
    cols = list(seen)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(cols)
    for row in rows:
        w.writerow(["" if row.get(c) is None else _fmt(row.get(c)) for c in cols])
    return buf.getvalue()


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else ""
    return str(v)


def csv_columns_text(columns: dict[str, list], with_header: bool = True) -> str:
    """``csv_text`` of the rows ``columns`` hold (every row has every column, in this order; at least
    one row), the same bytes, built a column at a time: each column's cells formatted once (one value
    throughout: once), and the rows joined in one pass, by the csv writer only when a cell needs
    quoting."""
    names = list(columns)
    n = len(columns[names[0]])
    cells, texts, constant = [], [], []
    for values in columns.values():
        got, numbers, same = _csv_cells(values)
        cells.append(got)
        constant.append(same)
        if not numbers:  # a number's cell is digits, a sign, a point, an exponent: never quoted
            texts.append(got if not same else got[:1])
    head = ",".join(names) + "\n" if with_header else ""
    if len(names) > 1 and not any(_CSV_SPECIAL.search(t) for t in (*names, *map("".join, texts))):
        # no cell the writer would quote: its rows are the cells joined by commas, as it writes them,
        # the columns of one value written into a template once and the others filled in per row
        pairs = list(zip(cells, constant, strict=True))
        template = ",".join(c[0].replace("%", "%%") if same else "%s" for c, same in pairs)
        varying = [c for c, same in pairs if not same]
        if varying:
            rows = "\n".join(map(template.__mod__, zip(*varying, strict=True)))
        else:
            rows = "\n".join([template % ()] * n)
        return head + rows + "\n"
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    if with_header:
        w.writerow(names)
    w.writerows(zip(*cells, strict=True))
    return buf.getvalue()


# what the csv writer may quote or escape (delimiter, quote, line breaks; control characters to be safe)
_CSV_SPECIAL = re.compile(r'[,"\x00-\x1f\x7f]')
_NUMBERS = {int, float, bool, type(None)}


def _csv_cells(values: list) -> tuple[list[str], bool, bool]:
    """A column's CSV cells as ``csv_text`` writes them (None and non-finite floats empty, floats by
    ``repr``, the rest by ``str``), by the column's one type where it has one; whether the column holds
    numbers only (None, bool, int, float); and whether it holds one value throughout."""
    first, n = values[0], len(values)
    kinds = set(map(type, values))
    # one value throughout (of one type, compared equal; a float 0.0 may stand for a -0.0: not taken)
    if len(kinds) == 1 and type(first) is not float and values.count(first) == n:
        return [""] * n if first is None else [_fmt(first)] * n, kinds <= _NUMBERS, True
    if kinds == {str}:
        return values, False, False
    if kinds == {int}:
        return list(map(str, values)), True, False
    if kinds == {float} and all(map(math.isfinite, values)):
        return list(map(repr, values)), True, False
    return ["" if v is None else _fmt(v) for v in values], kinds <= _NUMBERS, False


def check_table_path(path: Path, what: str) -> None:
    if path.suffix.lower() not in TABLE_SUFFIXES:
        raise ConfigError(
            f"{what} {path.name}: unknown extension '{path.suffix}'; use {', '.join(TABLE_SUFFIXES)}"
        )


def write_frames(frames: Iterable, path: Path) -> int:
    """Concatenate DataFrames into one table file (format from the extension), atomically."""
    import pandas as pd

    from sim.util.atomicfile import atomic_path

    path = Path(path)
    check_table_path(path, "output")
    frames = list(frames)
    df = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    with atomic_path(path) as tmp:
        suffix = path.suffix.lower()
        if suffix == ".csv":
            _finite_floats(df).to_csv(tmp, index=False, lineterminator="\n")
        elif suffix == ".jsonl":
            df.to_json(tmp, orient="records", lines=True)
        else:
            df.to_parquet(tmp, index=False)
    return len(df)


def _finite_floats(df):
    """``df`` with infinite floats as missing: pandas writes NaN as an empty CSV cell, but infinity as
    "inf" (copied only when a float column holds one)."""
    import numpy as np

    floats = df.select_dtypes("floating")
    if floats.size and np.isinf(floats.to_numpy()).any():
        df = df.copy()
        df[floats.columns] = floats.where(np.isfinite(floats))
    return df


def write_rows(rows: list[dict[str, Any]], path: Path) -> None:
    """Result rows to a table file, atomically (CSV and JSON Lines byte-stable)."""
    from sim.util.atomicfile import atomic_path

    path = Path(path)
    check_table_path(path, "output")
    with atomic_path(path) as tmp:
        suffix = path.suffix.lower()
        if suffix == ".csv":
            tmp.write_text(csv_text(rows), encoding="utf-8")
        elif suffix == ".jsonl":
            tmp.write_text("".join(json_line(r) + "\n" for r in rows), encoding="utf-8")
        else:
            import pandas as pd

            pd.DataFrame(rows).to_parquet(tmp, index=False)
