"""Regression gate: replay a suite under a candidate policy, compare with a baseline, fail on regressions.

A gate file (YAML, see ``docs/gate.md``) names the suite, the pricing, the baseline (a committed JSON
Lines file of per-run rows, or a policy to run), the candidate policy and per-metric thresholds. The
suite's runs are aggregated per metric (sums for counts, tokens and cost; the share of runs for
booleans; the count of ``context-overflow`` runs for ``context_overflow_runs``) and every threshold is
checked. ``ctxsim gate`` exits 0 when all hold, 1 on a regression, 2 on a usage or config error, 3 on
an internal error (``sim.util.exitcodes``), so CI can tell a broken gate from a regression.

A gate file never selects code to run: it is read with the bounded safe loader (``sim.util.safeyaml``), a YAML
tag is refused at its line, a policy is a plain name (never a path to a policy file), and a ``_target_``
of one's own needs its module allowed on the command line (``--allow-module``).

The Markdown summary and the JUnit XML depend only on the inputs: no timestamps, no absolute paths,
stable ordering, so two runs on the same inputs give byte-identical files.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sim.metrics.compute import LEDGER_FIELDS
from sim.util import interrupts
from sim.util.errors import ConfigError, CtxsimError
from sim.util.jsonl import json_lines

# ------------------------------------------------------------------------------------------- metrics
# How each metric aggregates over a suite: "sum" (counts, tokens, cost), "share" (booleans: the share of
# runs, thresholds in percentage points), "overflow" (runs that ended with context-overflow), "ratio"
# (Σ numerator ÷ Σ denominator), "mean" (mean of the non-empty per-run values).
SUM_METRICS = (
    "calls",
    "cumulative_input_tokens",
    "cumulative_output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "uncached_input_tokens",
    "cost_microusd",
    "compactions",
    "compactions_truncate",
    "compactions_prune",
    "compactions_summarize",
    "compactions_clear",
    "compactions_spill",
    "tokens_reclaimed",
    "summary_calls",
    "summary_tokens",
    "warnings",
    "unpaired_tool_messages",
    *LEDGER_FIELDS,
    "refetch_calls",
    "retrieve_calls",
)
SHARE_METRICS = ("answer_completed", "exhausted")
RATIO_METRICS = {  # name: (numerator, denominator, scale)
    "cache_hit_rate": ("cache_read_tokens", "cumulative_input_tokens", 1.0),
    "compaction_frequency": ("compactions", "calls", 100.0),
}
MEAN_METRICS = ("answer_fact_recall", "growth_exponent")
MAX_METRICS = ("peak_context_tokens",)
OVERFLOW = "context_overflow_runs"

METRIC_KIND: dict[str, str] = {
    **{m: "sum" for m in SUM_METRICS},
    **{m: "share" for m in SHARE_METRICS},
    **{m: "ratio" for m in RATIO_METRICS},
    **{m: "mean" for m in MEAN_METRICS},
    **{m: "max" for m in MAX_METRICS},
    OVERFLOW: "overflow",
}

# Threshold rules. Each names its direction; a metric may carry several (all must hold).
VALUE_RULES = ("max_increase", "max_increase_pct", "max_decrease", "max_decrease_pct")
SHARE_RULES = ("max_drop_points", "max_rise_points")

GATE_KEYS = ("name", "suite", "pricing", "model", "baseline", "candidate", "thresholds", "top_traces")
POLICY_KEYS = ("policy", "_target_", "params")
BASELINE_KEYS = ("results", *POLICY_KEYS)

EXIT_PASS, EXIT_REGRESSION, EXIT_ERROR = 0, 1, 2


class GateError(ConfigError):
    """A malformed gate file: names the file, the line and the key."""

    def __init__(self, file: str, line: int | None, key: str | None, message: str):
        where = file + (f": line {line}" if line is not None else "") + (f": key '{key}'" if key else "")
        super().__init__(f"{where}: {message}")
        self.file, self.line, self.key = file, line, key
        self.message = message

    def __reduce__(self):  # picklable with its fields (sim.util.errors.TraceError does the same)
        return (type(self), (self.file, self.line, self.key, self.message))


# ----------------------------------------------------------------------------------------- gate file
@dataclass(frozen=True)
class PolicySpec:
    name: str | None  # registered policy or preset
    target: str | None  # a _target_ of the user's (needs --allow-module)
    params: dict[str, Any]
    line: int  # where the spec starts, for errors raised when the policy is built
    key: str
    lines: dict[str, int] = field(default_factory=dict)  # "policy", "_target_", "params", "params.KNOB"

    def label(self) -> str:
        head = self.name or self.target or "?"
        return " ".join([head, *(f"{k}={_scalar(v)}" for k, v in self.params.items())])


@dataclass(frozen=True)
class Threshold:
    metric: str
    rule: str
    limit: float

    def text(self) -> str:
        return f"{self.rule} {_num(self.limit)}"


@dataclass
class Gate:
    path: Path
    display: str  # the gate file as named in messages and the summary
    name: str
    suite: str
    pricing: str
    model: dict[str, Any]
    baseline_results: Path | None
    baseline_results_text: str | None
    baseline_policy: PolicySpec | None
    candidate: PolicySpec
    thresholds: list[Threshold]
    top_traces: int = 5
    lines: dict[str, int] = field(default_factory=dict)


def _line(node) -> int:
    return node.start_mark.line + 1


def _scalar(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return str(v).lower()
    return str(v)


# The only tags a gate file may carry (what plain YAML resolves to): anything else, `!!python/object:…`,
# `!!binary`, `!!set` or a tag of one's own, is refused at its line before any value is built.
_PLAIN_TAGS = frozenset(
    f"tag:yaml.org,2002:{t}"
    for t in ("null", "bool", "int", "float", "str", "seq", "map", "timestamp", "merge")
)


def _check_tags(root, display: str) -> None:
    import yaml

    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:  # an alias: its node was checked already
            continue
        seen.add(id(node))
        if node.tag not in _PLAIN_TAGS:
            raise GateError(
                display, _line(node), None, f"YAML tag {node.tag!r} is not allowed (plain values only)"
            )
        if isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
        elif isinstance(node, yaml.MappingNode):
            stack.extend(x for kv in node.value for x in kv)


class _Reader:
    def __init__(self, display: str):
        self.display = display

    def fail(self, node, key: str | None, msg: str) -> GateError:
        return GateError(self.display, _line(node) if node is not None else None, key, msg)

    def py(self, node, key: str | None) -> Any:
        """The plain value of a node (its tags were checked): one line at the node, never a traceback."""
        import yaml

        try:
            return yaml.constructor.SafeConstructor().construct_document(node)
        except (yaml.YAMLError, ValueError, TypeError, OverflowError, RecursionError) as exc:
            problem = getattr(exc, "problem", None) or (str(exc).splitlines() or [type(exc).__name__])[0]
            raise self.fail(node, key, f"cannot read the value: {problem}") from None

    def mapping(self, node, key: str | None, allowed: tuple[str, ...]) -> dict[str, tuple[Any, Any]]:
        """{key: (key node, value node)} of a mapping node; unknown or repeated keys are refused."""
        import yaml

        if not isinstance(node, yaml.MappingNode):
            raise self.fail(node, key, f"expected a mapping, got {_kind(node)}")
        out: dict[str, tuple[Any, Any]] = {}
        for k, v in node.value:
            name = k.value if isinstance(k, yaml.ScalarNode) else None
            full = f"{key}.{name}" if key else str(name)
            if name is None:
                raise self.fail(k, key, "keys must be plain names")
            if allowed and name not in allowed:
                raise self.fail(k, full, f"unknown key; allowed: {', '.join(allowed)}")
            if name in out:
                raise self.fail(k, full, "given twice")
            out[name] = (k, v)
        return out

    def string(self, node, key: str) -> str:
        value = self.py(node, key)
        if not isinstance(value, str) or not value:
            raise self.fail(node, key, f"expected a non-empty string, got {_kind(node, value)}")
        return value

    def number(self, node, key: str) -> float:
        value = self.py(node, key)
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise self.fail(node, key, f"expected a number, got {_kind(node, value)}")
        if value < 0:
            raise self.fail(node, key, f"expected a number >= 0, got {value}")
        return float(value)


def _kind(node, value: Any = None) -> str:
    import yaml

    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    if value is None:
        return "null"
    return f"{type(value).__name__} {value!r}"


def _policy_spec(r: _Reader, node, key: str, fields: dict[str, tuple[Any, Any]]) -> PolicySpec:
    name = r.string(fields["policy"][1], f"{key}.policy") if "policy" in fields else None
    if name is not None:
        from sim.config.compose import check_policy_name

        try:
            check_policy_name(name)  # a plain name: a gate file cannot name a policy file by path
        except CtxsimError as exc:
            raise r.fail(fields["policy"][1], f"{key}.policy", str(exc)) from None
    target = r.string(fields["_target_"][1], f"{key}._target_") if "_target_" in fields else None
    if name and target:
        raise r.fail(fields["_target_"][0], f"{key}._target_", "give either 'policy' or '_target_', not both")
    if not (name or target):
        raise r.fail(node, key, "needs 'policy: NAME' (a registered policy or preset) or '_target_'")
    params: dict[str, Any] = {}
    lines = {k: _line(v) for k, (_kn, v) in fields.items()}
    if "params" in fields:
        pnode = fields["params"][1]
        if r.py(pnode, f"{key}.params") is not None:
            for pname, (knode, vnode) in r.mapping(pnode, f"{key}.params", ()).items():
                value = r.py(vnode, f"{key}.params.{pname}")
                if isinstance(value, dict | list):
                    raise r.fail(vnode, f"{key}.params.{pname}", "a knob's value must be a scalar")
                if pname == "_target_":
                    raise r.fail(knode, f"{key}.params._target_", f"put _target_ under '{key}', not params")
                params[pname] = value
                lines[f"params.{pname}"] = _line(knode)
    return PolicySpec(name, target, params, _line(node), key, lines)


def load_gate(path: str | Path) -> Gate:
    """Parse and check a gate file (no run): every error names the file, the line and the key."""
    from sim.config.compose import read_config_text
    from sim.util.safeyaml import compose_yaml

    path = Path(path)
    display = str(path)
    if not path.is_file():
        raise ConfigError(f"gate file {display}: no such file")
    # the bounded safe loader: a size cap, an alias-expansion budget, "FILE: line N: ..." on bad YAML
    root = compose_yaml(read_config_text(path, display), display)
    r = _Reader(display)
    if root is None:
        raise GateError(display, 1, None, "empty gate file")
    _check_tags(root, display)
    top = r.mapping(root, None, GATE_KEYS)
    for required in ("suite", "baseline", "candidate", "thresholds"):
        if required not in top:
            raise GateError(display, _line(root), required, "missing (required)")

    suite = r.string(top["suite"][1], "suite")
    pricing = r.string(top["pricing"][1], "pricing") if "pricing" in top else "auto"
    name = r.string(top["name"][1], "name") if "name" in top else path.stem
    model: dict[str, Any] = {}
    if "model" in top:
        for k, (_kn, vn) in r.mapping(top["model"][1], "model", ()).items():
            v = r.py(vn, f"model.{k}")
            if isinstance(v, dict | list):
                raise r.fail(vn, f"model.{k}", "must be a scalar")
            model[k] = v
    top_traces = 5
    if "top_traces" in top:
        v = r.py(top["top_traces"][1], "top_traces")
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise r.fail(top["top_traces"][1], "top_traces", f"expected an integer >= 0, got {v!r}")
        top_traces = v

    bnode = top["baseline"][1]
    bfields = r.mapping(bnode, "baseline", BASELINE_KEYS)
    results_text = r.string(bfields["results"][1], "baseline.results") if "results" in bfields else None
    bpolicy = None
    if "policy" in bfields or "_target_" in bfields:
        bpolicy = _policy_spec(r, bnode, "baseline", bfields)
    elif "params" in bfields:
        raise r.fail(bfields["params"][0], "baseline.params", "params without a 'policy'")
    if results_text is None and bpolicy is None:
        raise r.fail(bnode, "baseline", "needs 'results: PATH' or 'policy: NAME' (+ 'params')")
    results_path = None
    if results_text is not None:
        results_path = Path(results_text)
        if not results_path.is_absolute():
            results_path = path.parent / results_path
        if results_path.suffix.lower() != ".jsonl":
            raise r.fail(bfields["results"][1], "baseline.results", "the baseline file must be .jsonl")

    cnode = top["candidate"][1]
    candidate = _policy_spec(r, cnode, "candidate", r.mapping(cnode, "candidate", POLICY_KEYS))

    thresholds: list[Threshold] = []
    tnode = top["thresholds"][1]
    tfields = r.mapping(tnode, "thresholds", ())
    if not tfields:
        raise r.fail(tnode, "thresholds", "no metrics: a gate needs at least one threshold")
    for metric, (mk, mv) in tfields.items():
        kind = METRIC_KIND.get(metric)
        if kind is None:
            import difflib

            close = difflib.get_close_matches(metric, METRIC_KIND, n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            raise r.fail(
                mk, f"thresholds.{metric}", f"unknown metric{hint}; metrics: {', '.join(METRIC_KIND)}"
            )
        rules = SHARE_RULES if kind == "share" else VALUE_RULES
        rfields = r.mapping(mv, f"thresholds.{metric}", rules)
        if not rfields:
            raise r.fail(mv, f"thresholds.{metric}", f"no rule; rules: {', '.join(rules)}")
        for rule, (_rk, rv) in rfields.items():
            thresholds.append(Threshold(metric, rule, r.number(rv, f"thresholds.{metric}.{rule}")))
    return Gate(
        path=path,
        display=display,
        name=name,
        suite=suite,
        pricing=pricing,
        model=model,
        baseline_results=results_path,
        baseline_results_text=results_text,
        baseline_policy=bpolicy,
        candidate=candidate,
        thresholds=thresholds,
        top_traces=top_traces,
        lines={
            "suite": _line(top["suite"][1]),
            "model": _line(top["model"][0]) if "model" in top else 1,
            "pricing": _line(top["pricing"][1]) if "pricing" in top else 1,
        },
    )


# ---------------------------------------------------------------------------------------------- runs
def _resolve_suite(gate: Gate) -> str:
    """``embedded``, ``dataset:…``, or a path relative to the gate file, else to the repository."""
    s = gate.suite
    if s == "embedded" or s.startswith("dataset:") or Path(s).is_absolute():
        return s
    beside = gate.path.parent / s
    return str(beside) if beside.exists() else s


def _build(gate: Gate, spec: PolicySpec, allow_modules: tuple[str, ...]):
    """The policy and config of a spec; any refusal is reported at the spec's line and key."""
    from sim.config.compose import build_policy, compose, model_behaviour, model_window

    def at(sub: str) -> tuple[int, str]:
        return spec.lines.get(sub, spec.line), f"{spec.key}.{sub}"

    try:
        where = at("_target_" if spec.target is not None else "policy")
        if spec.target is not None:
            if not any(spec.target == m or spec.target.startswith(m + ".") for m in allow_modules):
                raise ConfigError(
                    f"_target_ {spec.target!r} names code outside ctxsim's registry: allow its module "
                    "with --allow-module MODULE"
                )
            cfg = compose("raw", [], allow_modules)
            cfg["policy"] = {"_target_": spec.target, **spec.params}
        else:
            cfg = compose(spec.name, [], allow_modules)
            where = (spec.lines.get("params", spec.line), f"{spec.key}.params" if spec.params else spec.key)
            knobs = [k for k in cfg["policy"] if k != "_target_"]
            for k, v in spec.params.items():
                if k not in knobs:
                    where = at(f"params.{k}")
                    raise ConfigError(
                        f"policy '{spec.name}' has no knob '{k}'; knobs: {', '.join(knobs) or 'none'}"
                    )
                cfg["policy"][k] = v
        where = (spec.lines.get("params", spec.line), f"{spec.key}.params" if spec.params else spec.key)
        model = cfg.get("model") or {}
        for k, v in gate.model.items():
            if k not in model:
                where = (gate.lines.get("model") or spec.line, f"model.{k}")
                raise ConfigError(f"model has no key '{k}'; keys: {', '.join(model) or 'none'}")
            model[k] = v
        cfg["model"] = model
        policy = build_policy(cfg, allow_modules)
        return policy, model_window(cfg), model_behaviour(cfg)
    except CtxsimError as exc:
        raise GateError(gate.display, where[0], where[1], str(exc)) from None


def run_policy(gate: Gate, spec: PolicySpec, traces: list[Any], allow_modules=()) -> list[dict[str, Any]]:
    """One result row per trace of the suite (``sim.results.tables.result_row``), in suite order."""
    from sim.engine.dispatch import replay_table
    from sim.engine.model import ReplayModel
    from sim.results.tables import table_rows
    from sim.util.versions import ctxsim_version

    policy, window, behaviour = _build(gate, spec, tuple(allow_modules))
    pricing = None if gate.pricing in ("none", "null") else gate.pricing
    models = [ReplayModel(t, **behaviour) for t in traces]
    return table_rows(replay_table(traces, policy, models, window=window, pricing=pricing), ctxsim_version())


def _load_traces(gate: Gate) -> list[Any]:
    from sim.sweep.execute import load_scenario

    try:
        if gate.pricing not in ("auto", "none", "null"):
            from sim.cost.pricing import price_named

            price_named(gate.pricing)
        traces = list(load_scenario(_resolve_suite(gate)))
    except CtxsimError as exc:
        key = "pricing" if "pric" in str(exc).lower() and gate.pricing != "auto" else "suite"
        raise GateError(gate.display, gate.lines.get(key), key, str(exc)) from None
    if not traces:
        raise GateError(gate.display, gate.lines.get("suite"), "suite", f"'{gate.suite}' holds no traces")
    ids = [t.trace_id for t in traces]
    if len(set(ids)) != len(ids):
        raise GateError(gate.display, gate.lines.get("suite"), "suite", "trace ids repeat in the suite")
    return traces


# Metrics a result row may leave empty (None): unpriced cost, growth below 4 calls, a 0/0 hit rate.
NULLABLE_METRICS = ("cost_microusd", "growth_exponent", "cache_hit_rate", "answer_fact_recall")
_COUNT_FIELDS = (*SUM_METRICS, *MAX_METRICS)  # never negative
_NUMBER_FIELDS = (*_COUNT_FIELDS, *MEAN_METRICS, *RATIO_METRICS)


def check_baseline_row(row: dict[str, Any], where: str) -> None:
    """A committed baseline row holds what ``ctxsim run --format json`` writes: numbers where the gate
    aggregates numbers (finite; counts >= 0; empty only where a metric may be undefined), true/false for
    the share metrics, strings for the ids. ConfigError naming ``where`` (file and line) and the field."""
    for key in ("trace_id", "trace_hash", "finish_reason", "pricing"):
        v = row.get(key)
        if (v is not None and not isinstance(v, str)) or (key == "trace_id" and not v):
            raise ConfigError(f"{where}: field {key}: expected a string, got {v!r}")
    for key in _NUMBER_FIELDS:
        if key not in row:
            continue
        v = row[key]
        if v is None and key in NULLABLE_METRICS:
            continue
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            raise ConfigError(f"{where}: field {key}: expected a number, got {v!r}")
        if key in _COUNT_FIELDS and v < 0:
            raise ConfigError(f"{where}: field {key}: expected a number >= 0, got {v!r}")
    for key in SHARE_METRICS:
        if key in row and not isinstance(row[key], bool):
            raise ConfigError(f"{where}: field {key}: expected true or false, got {row[key]!r}")


def read_baseline(gate: Gate, traces: list[Any]) -> list[dict[str, Any]]:
    """The committed baseline rows, matched to the suite's traces by id and content hash."""
    from sim.trace.codec import trace_hash

    path = gate.baseline_results
    assert path is not None
    if not path.is_file():
        raise ConfigError(
            f"{gate.display}: baseline results {gate.baseline_results_text}: no such file; write it on "
            f"purpose with `ctxsim gate {gate.display} --update-baseline`"
        )
    by_id: dict[str, dict[str, Any]] = {}
    for lineno, row, problem in json_lines(path):
        if problem is not None:
            raise ConfigError(f"{path.name}: line {lineno}: {problem}")
        if not isinstance(row, dict) or "trace_id" not in row:
            raise ConfigError(f"{path.name}: line {lineno}: not a result row (no trace_id)")
        check_baseline_row(row, f"{path.name}: line {lineno}")
        by_id[row["trace_id"]] = row
    rows = []
    hint = f"; if the suite changed on purpose, run `ctxsim gate {gate.display} --update-baseline`"
    for t in traces:
        row = by_id.get(t.trace_id)
        if row is None:
            raise ConfigError(f"{path.name}: no row for trace '{t.trace_id}' of the suite{hint}")
        if row.get("trace_hash") != trace_hash(t):
            raise ConfigError(f"{path.name}: trace '{t.trace_id}' has changed since the baseline{hint}")
        if gate.pricing not in ("auto",) and row.get("pricing") != (
            None if gate.pricing in ("none", "null") else gate.pricing
        ):
            raise ConfigError(
                f"{path.name}: trace '{t.trace_id}' was priced as {row.get('pricing')!r}, the gate prices "
                f"as {gate.pricing!r}{hint}"
            )
        rows.append(row)
    return rows


def write_baseline(rows: list[dict[str, Any]], path: Path) -> None:
    from sim.results.tables import write_rows

    path.parent.mkdir(parents=True, exist_ok=True)
    write_rows(rows, path)


# ---------------------------------------------------------------------------------------- aggregates
def aggregate(rows: list[dict[str, Any]], metric: str) -> float | int | None:
    """One number for the suite: see METRIC_KIND. None when a needed value is missing (unpriced)."""
    kind = METRIC_KIND[metric]
    if kind == "overflow":
        return sum(1 for r in rows if r.get("finish_reason") == "context-overflow")
    if kind == "share":
        return sum(1 for r in rows if r.get(metric)) / len(rows) if rows else None
    if kind == "ratio":
        num, den, scale = RATIO_METRICS[metric]
        d = sum(r.get(den) or 0 for r in rows)
        return scale * sum(r.get(num) or 0 for r in rows) / d if d else None
    values = [r.get(metric) for r in rows]
    if kind == "mean":
        present = [v for v in values if v is not None]
        return sum(present) / len(present) if present else None
    if any(v is None for v in values):
        return None
    if kind == "max":
        return max(values) if values else None
    return sum(values)


@dataclass(frozen=True)
class Check:
    threshold: Threshold
    baseline: float | int | None
    candidate: float | int | None
    change: float | None  # in the rule's unit: absolute, percent or percentage points
    passed: bool
    note: str = ""


def check(t: Threshold, base: float | int | None, cand: float | int | None) -> Check:
    if base is None or cand is None:
        return Check(t, base, cand, None, False, "no value (unpriced or empty runs)")
    delta = cand - base
    if t.rule in ("max_drop_points", "max_rise_points"):
        points = 100.0 * delta
        change = -points if t.rule == "max_drop_points" else points
        return Check(t, base, cand, points, _le(change, t.limit))
    if t.rule.endswith("_pct"):
        if base == 0:
            pct = 0.0 if delta == 0 else math.copysign(math.inf, delta)
        else:
            pct = 100.0 * delta / abs(base)
        change = pct if t.rule == "max_increase_pct" else -pct
        return Check(t, base, cand, pct, _le(change, t.limit))
    change = delta if t.rule == "max_increase" else -delta
    return Check(t, base, cand, float(delta), _le(change, t.limit))


def _le(change: float, limit: float) -> bool:
    return change <= limit + 1e-9 * max(1.0, abs(limit))


# ------------------------------------------------------------------------------------------- reports
def _num(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, int) or (isinstance(v, float) and v.is_integer() and abs(v) < 1e15):
        return f"{int(v):,}"
    return f"{v:,.4f}".rstrip("0").rstrip(".")


def _value(metric: str, v: Any) -> str:
    if v is not None and METRIC_KIND[metric] == "share":
        return f"{100.0 * v:.1f}%"
    return _num(v)


def _signed(v: float, unit: str = "") -> str:
    if math.isinf(v):
        return ("+" if v > 0 else "-") + "∞" + unit
    text = _num(abs(v)) if not unit else f"{abs(v):,.2f}"
    if v == 0:
        return "±0" + unit
    sign = "+" if v > 0 else "-"
    return f"{sign}{text}{unit}"


def _metric_change(metric: str, base: Any, cand: Any) -> str:
    """Absolute change and percent (values), or percentage points (shares)."""
    if base is None or cand is None:
        return "–"
    delta = cand - base
    if METRIC_KIND[metric] == "share":
        return _signed(100.0 * delta, " pts")
    if delta == 0:
        return "±0"
    if base == 0:
        return _signed(delta)
    return f"{_signed(delta)} ({_signed(100.0 * delta / abs(base), '%')})"


@dataclass(frozen=True)
class MetricResult:
    """Every threshold of one metric: one table row, one JUnit testcase."""

    metric: str
    checks: tuple[Check, ...]

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    @property
    def baseline(self) -> Any:
        return self.checks[0].baseline

    @property
    def candidate(self) -> Any:
        return self.checks[0].candidate

    def threshold_text(self) -> str:
        return ", ".join(c.threshold.text() for c in self.checks)

    def change_text(self) -> str:
        return _metric_change(self.metric, self.baseline, self.candidate)

    def message(self) -> str:
        m = self.metric
        broken = ", ".join(c.threshold.text() for c in self.checks if not c.passed)
        notes = sorted({c.note for c in self.checks if c.note})
        return (
            f"{m}: baseline {_value(m, self.baseline)}, candidate {_value(m, self.candidate)}, change "
            f"{self.change_text()}; exceeds {broken}" + (f" ({'; '.join(notes)})" if notes else "")
        )


@dataclass
class GateResult:
    gate: Gate
    checks: list[Check]
    baseline_rows: list[dict[str, Any]]
    candidate_rows: list[dict[str, Any]]
    baseline_label: str

    @property
    def metrics(self) -> list[MetricResult]:
        """One entry per metric, in the gate file's order."""
        order: dict[str, list[Check]] = {}
        for c in self.checks:
            order.setdefault(c.threshold.metric, []).append(c)
        return [MetricResult(m, tuple(cs)) for m, cs in order.items()]

    @property
    def failures(self) -> list[MetricResult]:
        return [m for m in self.metrics if not m.passed]

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    def failing_metrics(self) -> list[str]:
        return [m.metric for m in self.failures]

    def summary(self) -> str:
        return summary_markdown(self)

    def junit(self) -> str:
        return junit_xml(self)


def _cost_key(rows: list[dict[str, Any]]) -> str:
    return (
        "cost_microusd"
        if all(r.get("cost_microusd") is not None for r in rows)
        else "cumulative_input_tokens"
    )


def _shown(path: Path) -> str:
    """The gate file as the summary names it: relative to the repository when inside it, else its name,
    so the summary does not depend on the working directory or the machine."""
    from sim.util.paths import REPO

    try:
        return path.resolve().relative_to(REPO).as_posix()
    except ValueError:
        return path.name


def summary_markdown(res: GateResult) -> str:
    g = res.gate
    fails = res.failing_metrics()
    verdict = "PASS" if res.passed else f"FAIL ({', '.join(fails)})"
    out = [
        f"# ctxsim gate `{g.name}`: {verdict}",
        "",
        f"- gate file: `{_shown(g.path)}`",
        f"- suite: `{g.suite}` ({len(res.candidate_rows)} traces); pricing: `{g.pricing}`",
        f"- baseline: {res.baseline_label}",
        f"- candidate: `{g.candidate.label()}`",
        "",
        "| metric | baseline | candidate | change | threshold | verdict |",
        "|---|---:|---:|---:|---|---|",
    ]
    for mr in res.metrics:
        m = mr.metric
        v = "pass" if mr.passed else "**FAIL**"
        notes = sorted({c.note for c in mr.checks if c.note})
        if notes:
            v += f" ({'; '.join(notes)})"
        out.append(
            f"| {m} | {_value(m, mr.baseline)} | {_value(m, mr.candidate)} | {mr.change_text()} | "
            f"{mr.threshold_text()} | {v} |"
        )
    key = _cost_key(res.baseline_rows + res.candidate_rows)
    diffs = []
    for b, c in zip(res.baseline_rows, res.candidate_rows, strict=True):
        d = (c.get(key) or 0) - (b.get(key) or 0)
        if d:
            diffs.append((-abs(d), b["trace_id"], b, c, d))
    diffs.sort(key=lambda x: (x[0], x[1]))
    what = "cost (micro-USD)" if key == "cost_microusd" else "cumulative input tokens (runs are unpriced)"
    out += ["", f"## Traces that changed most by {what}", ""]
    if not diffs:
        out.append("No trace changed.")
    elif g.top_traces == 0:
        out.append(f"{len(diffs)} traces changed.")
    else:
        out += [
            "| trace | baseline | candidate | change | finish reason (baseline → candidate) |",
            "|---|---:|---:|---:|---|",
        ]
        for _, tid, b, c, _d in diffs[: g.top_traces]:
            fr = b.get("finish_reason")
            fr_text = fr if fr == c.get("finish_reason") else f"{fr} → {c.get('finish_reason')}"
            out.append(
                f"| {tid} | {_num(b.get(key))} | {_num(c.get(key))} | "
                f"{_metric_change(key, b.get(key), c.get(key))} | {fr_text} |"
            )
        if len(diffs) > g.top_traces:
            out += ["", f"… and {len(diffs) - g.top_traces} more changed traces."]
    return "\n".join(out) + "\n"


def junit_xml(res: GateResult) -> str:
    """JUnit XML: one testsuite, one testcase per metric, a <failure> for each regressed metric."""
    import xml.etree.ElementTree as ET

    g = res.gate
    metrics = res.metrics
    root = ET.Element("testsuites")
    suite = ET.SubElement(
        root,
        "testsuite",
        {
            "name": f"ctxsim gate {g.name}",
            "tests": str(len(metrics)),
            "failures": str(len(res.failures)),
            "errors": "0",
            "skipped": "0",
        },
    )
    for mr in metrics:
        case = ET.SubElement(suite, "testcase", {"classname": f"ctxsim.gate.{g.name}", "name": mr.metric})
        if not mr.passed:
            msg = mr.message()
            fail = ET.SubElement(case, "failure", {"message": msg, "type": "regression"})
            fail.text = msg
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


# ----------------------------------------------------------------------------------------------- run
def evaluate(
    path: str | Path,
    allow_modules: tuple[str, ...] | list[str] = (),
    update_baseline: bool = False,
    log=None,
) -> GateResult:
    """Run the gate of ``path``: the baseline (read or run), the candidate, every threshold.

    ``update_baseline``: rewrite the baseline results file first, from the baseline policy when the
    gate names one, otherwise from the candidate. A gate whose baseline is a policy only has no file to
    update: that is an error."""
    gate = load_gate(path)
    allow = tuple(allow_modules)
    # a bad policy in the file is an error before any run (and before anything is written)
    for spec in (gate.baseline_policy, gate.candidate):
        if spec is not None:
            _build(gate, spec, allow)
    traces = _load_traces(gate)
    candidate_rows = run_policy(gate, gate.candidate, traces, allow)
    if update_baseline:
        if gate.baseline_results is None:
            raise ConfigError(
                f"{gate.display}: --update-baseline: the baseline is a policy run every time; there is no "
                "'baseline.results' file to update"
            )
        src = gate.baseline_policy or gate.candidate
        rows = candidate_rows if src is gate.candidate else run_policy(gate, src, traces, allow)
        write_baseline(rows, gate.baseline_results)
        if log:
            log(f"wrote {len(rows)} baseline rows ({src.label()}) to {gate.baseline_results_text}")
    if gate.baseline_results is not None:
        baseline_rows = read_baseline(gate, traces)
        label = f"results `{gate.baseline_results_text}`"
    else:
        assert gate.baseline_policy is not None
        baseline_rows = run_policy(gate, gate.baseline_policy, traces, allow)
        label = f"policy `{gate.baseline_policy.label()}`"
    checks = [
        check(t, aggregate(baseline_rows, t.metric), aggregate(candidate_rows, t.metric))
        for t in gate.thresholds
    ]
    return GateResult(gate, checks, baseline_rows, candidate_rows, label)


def _write_text(path: Path, text: str) -> None:
    from sim.trace.io import atomic_path

    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def cmd_gate(args) -> int:
    """``ctxsim gate GATE_FILE [--update-baseline] [--summary OUT.md] [--junit OUT.xml] [--allow-module M]``.
    Exit 0 pass, 1 regression, 2 usage or config error (raised as ConfigError for the CLI); any other
    exception is exit 3 (``sim.util.exitcodes.run_command``), never 1."""

    def note(msg: str) -> None:
        print(f"ctxsim: gate: {msg}", file=sys.stderr)

    from sim.config.compose import check_allow_modules

    allow = check_allow_modules(args.allow_module or ())
    res = evaluate(args.gate_file, allow, args.update_baseline, log=note)
    interrupts.check()  # before any output: an interrupted gate writes no summary (sim.util.interrupts)
    text = res.summary()
    if args.summary:
        _write_text(Path(args.summary), text)
    if args.junit:
        _write_text(Path(args.junit), res.junit())
    sys.stdout.write(text)
    sys.stdout.flush()
    for mr in res.failures:
        note(f"regression: {mr.message()}")
    return EXIT_PASS if res.passed else EXIT_REGRESSION


def main(argv: list[str] | None = None) -> int:
    """``python -m sim.gate GATE_FILE ...``: the ``ctxsim gate`` command on its own (same exit codes)."""
    import argparse

    from sim.gate.args import add_parser

    parser = argparse.ArgumentParser(prog="ctxsim")
    add_parser(parser.add_subparsers(dest="command", required=True, metavar="COMMAND"))
    words = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(["gate", *(w for w in words if w != "--debug")])
    from sim.util.exitcodes import run_command

    return run_command(args.func, args, debug="--debug" in words)


if __name__ == "__main__":
    sys.exit(main())
