"""The sizing section: the verdict ``ctxsim size`` and ``ctxsim demo`` give (``sim.analysis.verdict``) for
the first policy swept over context_token_limit × keep_recent_tokens with a no-compaction setting, its
paired differences, and how it holds under the other mock behaviours the results hold."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from sim.report.document import Doc
from sim.report.formats import fmt_int, fmt_pct, fmt_usd
from sim.report.settings import ReportSetting


def sizing(frames: list[Any], paths: list[Path]) -> tuple[int, str, dict] | None:
    """The sizing verdict (``sim.analysis.verdict.verdict``, as ``size`` and ``demo`` compute it) of the first
    policy swept over context_token_limit x keep_recent_tokens with a no-compaction setting (limit unset)."""
    from sim.analysis.verdict import verdict_from_frame

    keys = ("policy.context_token_limit", "policy.keep_recent_tokens")
    for i, df in enumerate(frames):
        if not set(keys) <= set(df.columns):
            continue
        for policy in sorted({str(v) for v in df["policy"]}):
            g = df[df["policy"] == policy]
            limit = g[keys[0]]
            if limit.isna().any() and limit.notna().any() and g["cost_microusd"].notna().all():
                return i, policy, verdict_from_frame(g, str(paths[i]), policy)
    return None


def sized_setting(settings: list[ReportSetting], source: int, policy: str, rec: dict) -> ReportSetting | None:
    """The table's setting the verdict names: the recommendation, or no compaction without one."""
    want = rec.get("recommended") or {"context_token_limit": None}
    for s in settings:
        if s.source != source or s.policy != policy:
            continue
        if all(_knob(s, f"policy.{k}") == v for k, v in want.items()):
            return s
    return None


def _knob(s: ReportSetting, key: str):
    v = s.summary.get(key)
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    return int(v)


def verdict_blocks(
    doc: Doc, sized: tuple[int, str, dict] | None, settings: list[ReportSetting], paths
) -> None:
    from sim.analysis.verdict import recommendation_line, tied_text

    doc.h(2, "Sizing verdict")
    if sized is None:
        doc.p(
            "_No sizing verdict: no results file holds a policy swept over `context_token_limit` × "
            "`keep_recent_tokens` with a no-compaction setting (`policy.context_token_limit=null`) to "
            "compare with._"
        )
        return
    i, policy, rec = sized
    doc.p(
        f"From `{paths[i]}`: `{policy}`'s {rec['settings'] - 1} compacting settings against no compaction, "
        f"paired on the same {rec['traces']} traces (target completion {rec['target_completion']:.0%}, "
        f"facts lost at most +{rec['max_facts_lost_increase']:.0%} of facts seen; the same verdict as "
        f"`ctxsim size` and `ctxsim demo`). **{recommendation_line(rec)}.** {rec['advice']}"
    )
    if line := tied_text(rec):
        doc.p(line[0].upper() + line[1:] + ".")
    base = rec["baseline"]
    if rec.get("recommended"):
        pr = rec["paired"]
        fl, rf = pr["facts_lost_change"], pr["refetch_change"]
        ci = pr["saving_ci"]
        tci = pr["tokens_saving_ci"]
        rows = [
            [
                "mean cost per run (USD)",
                fmt_usd(base["mean_cost_usd"]),
                fmt_usd(rec["mean_cost_usd"]),
                f"saving {fmt_usd(base['mean_cost_usd'] - rec['mean_cost_usd'])} (95% CI {fmt_usd(ci[0])} to "
                f"{fmt_usd(ci[1])})",
            ],
            [
                "cumulative input tokens per run",
                "",
                "",
                f"saving {fmt_int(tci[0])} to {fmt_int(tci[1])} (95% CI)",
            ],
            [
                "facts lost (total)",
                fmt_int(base["facts_lost"]),
                next(fmt_int(g["facts_lost"]) for g in rec["grid"] if _same(g, rec["recommended"])),
                f"{fl['per_run']:+.3f} per run (95% CI {fl['per_run_ci'][0]:+.3f} to "
                f"{fl['per_run_ci'][1]:+.3f}); {fl['share_of_facts_seen']:+.1%} of facts seen",
            ],
            [
                "refetch calls (total)",
                fmt_int(base["refetch_calls"]),
                next(fmt_int(g["refetch_calls"]) for g in rec["grid"] if _same(g, rec["recommended"])),
                f"{rf['per_run']:+.3f} per run (95% CI {rf['per_run_ci'][0]:+.3f} to "
                f"{rf['per_run_ci'][1]:+.3f})",
            ],
            ["answer completion", fmt_pct(base["completion"]), fmt_pct(rec["completion"]), ""],
            [
                "runs by answer_outcome (change)",
                "",
                "",
                ", ".join(f"{o} {n:+d}" for o, n in pr["outcome_change"].items()),
            ],
        ]
        doc.table(
            ["metric", "no compaction", "recommended", "paired difference"], rows, [False, True, True, False]
        )
    _sensitivity_blocks(doc, rec)


def _sensitivity_blocks(doc: Doc, rec: dict) -> None:
    """The verdict's mock behaviour, and the table of verdicts under every behaviour the results hold."""
    mock = ", ".join(f"{k}={v}" for k, v in rec.get("mock_model", {}).items())
    if "sensitivity" in rec:
        from sim.analysis.verdict import sensitivity_grid, sensitivity_text

        sens = rec["sensitivity"]
        doc.p(
            f"The verdict above assumes the mock model {mock}. The verdict each mock behaviour the results "
            "hold gives on its own (`model.on_missing` × `model.summarizer`; oracle is an upper bound):"
        )
        doc.table(
            ["on_missing", "summarizer", "verdict", "recommended", "ships"],
            [
                [
                    r["on_missing"],
                    r["summarizer"],
                    r["verdict"],
                    _pair_text(r["recommended"]),
                    _pair_text(r["ships"]),
                ]
                for r in sens
            ],
            [False] * 5,
        )
        doc.p(sensitivity_text(rec))
        grid = sensitivity_grid(sens)
        cols = list(grid[0])
        doc.p("Each setting's answer completion under each mock behaviour (worst: what the ranking reads):")
        doc.table(
            cols,
            [[g["setting"], *(fmt_pct(g[c]) for c in cols[1:])] for g in grid],
            [False] + [True] * (len(cols) - 1),
        )
    else:
        doc.p(
            f"The verdict assumes the mock model {mock or 'of the results'}; the results hold no other mock "
            "behaviour, so its sensitivity is not shown (sweep `model.on_missing=refetch,fail,degrade "
            "model.summarizer=extractive,oracle` too, or run `ctxsim size --sensitivity`)."
        )


def _pair_text(p: dict | None) -> str:
    return f"{p['context_token_limit']}/{p['keep_recent_tokens']}" if p else "—"


def _same(g: dict, want: dict) -> bool:
    return all(g.get(k) == v for k, v in want.items())


def trend_sentence(settings: list[ReportSetting], sized: tuple[int, str, dict] | None) -> str:
    """What the sized grid's table shows from its most to its least aggressive compacting setting, in
    its own numbers (never a fixed claim the table could contradict)."""
    if sized is None:
        return ""
    grid = sized[2]["grid"]
    most = min(grid, key=lambda g: (g["context_token_limit"], g["keep_recent_tokens"]))
    least = max(grid, key=lambda g: (g["context_token_limit"], g["keep_recent_tokens"]))
    if most is least:
        return ""
    base = sized[2]["baseline"]
    return (
        f" In `{sized[1]}`'s grid the most aggressive setting ({most['context_token_limit']}/"
        f"{most['keep_recent_tokens']}) costs {fmt_usd(most['mean_cost_usd'])} per run and loses "
        f"{most['facts_lost']:,} facts; the least ({least['context_token_limit']}/"
        f"{least['keep_recent_tokens']}) {fmt_usd(least['mean_cost_usd'])} and {least['facts_lost']:,}; "
        f"no compaction {fmt_usd(base['mean_cost_usd'])} and {base['facts_lost']:,}."
    )
