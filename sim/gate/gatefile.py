"""A gate file (YAML, ``docs/gate.md``) read and checked without running anything: the suite, the
pricing, the baseline, the candidate policy and the per-metric thresholds, each error naming the file,
the line and the key.

A gate file never selects code to run: it is read with the bounded safe loader (``sim.util.safeyaml``), a
YAML tag is refused at its line, a policy is a plain name (never a path to a policy file), and a
``_target_`` of one's own needs its module allowed on the command line (``--allow-module``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sim.metrics.compute import LEDGER_FIELDS
from sim.util.errors import ConfigError, CtxsimError
from sim.util.paths import outside

# How each metric aggregates over a suite: "sum" (counts, tokens, cost), "share" (booleans: the share of
# runs, thresholds in percentage points), "overflow" (runs that ended with context-overflow), "ratio"
# (Σ numerator ÷ Σ denominator), "mean" (mean of the non-empty per-run values).
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


class GateError(ConfigError):
    """A malformed gate file: names the file, the line and the key."""

    def __init__(self, file: str, line: int | None, key: str | None, message: str):
        where = file + (f": line {line}" if line is not None else "") + (f": key '{key}'" if key else "")
        super().__init__(f"{where}: {message}")
        self.file, self.line, self.key = file, line, key
        self.message = message

    def __reduce__(self):  # picklable with its fields (sim.util.errors.TraceError does the same)
        return (type(self), (self.file, self.line, self.key, self.message))


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
        return f"{self.rule} {number_text(self.limit)}"


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


def number_text(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, int) or (isinstance(v, float) and v.is_integer() and abs(v) < 1e15):
        return f"{int(v):,}"
    return f"{v:,.4f}".rstrip("0").rstrip(".")


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


def load_gate(path: str | Path, baseline_results: str | Path | None = None) -> Gate:
    """Parse and check a gate file (no run): every error names the file, the line and the key.
    ``baseline_results``: the command line's ``--baseline-results PATH``, used instead of the file's
    ``baseline.results`` (and anywhere: the user named it)."""
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
    if baseline_results is not None:
        results_text = str(baseline_results)
    if results_text is None and bpolicy is None:
        raise r.fail(bnode, "baseline", "needs 'results: PATH' or 'policy: NAME' (+ 'params')")
    results_path = None
    if results_text is not None:
        results_path = Path(results_text)
        if not results_path.is_absolute():
            results_path = path.parent / results_path
        where = bfields["results"][1] if "results" in bfields else bnode
        if results_path.suffix.lower() != ".jsonl":
            raise r.fail(where, "baseline.results", "the baseline file must be .jsonl")
        # a gate file may come from anyone (a pull request): it does not choose where --update-baseline
        # writes, or which file outside the project is read, beyond its own folder and the current one
        if baseline_results is not None:
            results_path = Path(baseline_results)
        elif outside(results_path, [path.parent, Path.cwd()]):
            raise r.fail(
                where,
                "baseline.results",
                f"{results_text!r} is outside the gate file's folder and the current folder; a gate file "
                "chooses no place outside them (name it on the command line: --baseline-results PATH)",
            )

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
