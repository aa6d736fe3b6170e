"""What ctxsim's numbers were checked against: published results and ctxsim's figures beside them, from
``conf/published/*.yaml`` (written by the benchmarks in ``benchmarks/published/``, held to a fresh run
by a test). ``size`` and ``report`` print one line per benchmark so that a reader knows how far the
tool's cost model has been tested against real bills, and where it fell short.
"""

from __future__ import annotations

from typing import Any

from sim.util.errors import ConfigError
from sim.util.paths import CONF_DIR

PUBLISHED_DIR = CONF_DIR / "published"
RESULT_KEYS = ("quantity", "strategy", "ctxsim", "published", "tolerance", "within")


def checked_against() -> list[dict[str, Any]]:
    """Every benchmark summary, in file-name order; a malformed one is a ConfigError naming it."""
    from sim.util.safeyaml import load_yaml_file

    out = []
    for f in sorted(PUBLISHED_DIR.glob("*.yaml")):
        source = f"conf/published/{f.name}"
        d = load_yaml_file(f, source)
        if not isinstance(d, dict):
            raise ConfigError(f"{source}: expected a mapping")
        for key in ("benchmark", "source", "date", "setting", "command", "results"):
            if key not in d:
                raise ConfigError(f"{source}: {key}: missing")
        if not isinstance(d["results"], list) or not d["results"]:
            raise ConfigError(f"{source}: results: expected a non-empty list")
        for i, r in enumerate(d["results"]):
            missing = [k for k in RESULT_KEYS if not isinstance(r, dict) or k not in r]
            if missing:
                raise ConfigError(f"{source}: results[{i}]: missing {', '.join(missing)}")
        out.append(d)
    return out


def checked_against_text(entries: list[dict[str, Any]]) -> list[str]:
    """One line per benchmark: what, when, and each figure as ctxsim's beside the published one."""
    lines = []
    for d in entries:
        figures = "; ".join(
            f"{r['quantity']}: ctxsim {r['ctxsim']:.2f}, published {r['published']:.2f}"
            + ("" if r["within"] else f" (outside ±{r['tolerance']:.0%})")
            for r in d["results"]
        )
        assumed = f"; assuming {d['assumptions']}" if d.get("assumptions") else ""
        head = f"{d['benchmark']} ({d['source']}, {d['date']}), {d['setting']}"
        lines.append(f"{head}: {figures} ({d['command']}{assumed})")
    return lines
