"""The recommendation: ``verdict`` is the one function that says which ``context_token_limit`` and
``keep_recent_tokens`` to ship, if any; ``size``, ``demo`` and ``report`` all call it, so they cannot
disagree. A compacting setting is recommended only when its saving's interval excludes zero and its
information cost stays within the stated tolerances; otherwise the verdict says compaction is not
needed (or that no setting qualifies) and why. Settings that behave identically on these traces (the
same cost, facts lost and outcome on every trace) are named as **tied**. Also here: the verdict of a
sweep's results, and its sensitivity to the mock model's behaviour."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from sim.analysis.paired import bootstrap_ci, paired_many, seeded_rng
from sim.analysis.setting_results import SettingResult, settings_from_frame
from sim.util.errors import ConfigError

DEFAULT_MAX_FACTS_LOST_INCREASE = 0.05  # share of the facts seen, over the baseline's
DEMO_TARGET = 0.95  # what `demo` and `report` size against (``size``'s defaults)
BEHAVIOUR_COLUMNS = (("on_missing", "model.on_missing"), ("summarizer", "summarizer"))


def _usd(v: float) -> str:
    return f"-${-v:.4f}" if v < 0 else f"${v:.4f}"


def _k(tokens: float) -> str:
    return f"{tokens / 1000:.0f}k" if tokens >= 1000 else f"{tokens:.0f}"


def safety_net(window: int | None, reserve: int, summary: int, largest_request: int) -> dict | None:
    """A limit that only stops a runaway: from three quarters of the window (or just above the largest
    request plus its output on these traces, if higher) to the highest limit the output reserve and the
    largest summary allow. None without a window."""
    if window is None:
        return None
    high = window - reserve - summary
    low = max(math.ceil(0.75 * window / 1000) * 1000, math.ceil((largest_request + 1) / 1000) * 1000)
    high = (high // 1000) * 1000
    return {
        "low": min(low, high),
        "high": high,
        "fires_on_these_traces": high <= largest_request,
    }


def verdict(
    results: Sequence[SettingResult],
    *,
    policy_name: str,
    target: float,
    max_facts_lost_increase: float = DEFAULT_MAX_FACTS_LOST_INCREASE,
    window: int | None = None,
    reserve: int = 0,
    summary: int = 0,
    largest_request: int | None = None,
    workers: int = 1,
) -> dict:
    """The recommendation: the cheapest *eligible* compacting setting (its saving's 95% paired interval
    above zero, completion at least ``target``, facts lost up by at most ``max_facts_lost_increase`` of
    the facts seen, no overflow), or null with the reason. ``results[0]`` must be the baseline.
    ``workers``: processes for the paired bootstraps (the same answer for any number)."""
    if not results or not results[0].is_baseline:
        raise ConfigError(f"size: the results of {policy_name} hold no no-compaction (limit unset) setting")
    base, cands = results[0], list(results[1:])
    if not cands:
        raise ConfigError(f"size: the results of {policy_name} hold no compacting setting")
    if largest_request is None:
        largest_request = int(base.peak.max()) + reserve
    net = safety_net(window, reserve, summary, largest_request)
    rows = [
        (s, pr, _why_not(s, pr, target, max_facts_lost_increase))
        for s, pr in zip(cands, paired_many(base, cands, workers), strict=True)
    ]
    eligible = [(s, pr) for s, pr, why in rows if not why]
    ranked = sorted(
        eligible,
        key=lambda x: (
            x[0].mean_cost_usd,
            x[0].facts_lost_share,
            -(x[0].context_token_limit or 0),
            -(x[0].keep_recent_tokens or 0),
        ),
    )
    peak_p99 = float(np.percentile(base.peak, 99))
    base_brief = _brief(base)
    base_brief["peak_context_tokens_p99"] = round(peak_p99)
    never_fire = [s for s in cands if s.same_as(base)]
    out = {
        "policy": policy_name,
        "baseline": base_brief,
        "target_completion": target,
        "max_facts_lost_increase": max_facts_lost_increase,
        "settings": len(results),
        "grid": [_brief(s, pr, why) for s, pr, why in rows],
        "eligible_settings": len(eligible),
        "traces": len(base.cost),
        "safety_net": net,
    }
    if ranked:
        advice = _recommend(out, base, ranked)
    else:
        changing = [x for x in rows if not x[0].same_as(base)] or rows  # a setting that changes some run
        cheapest = min(changing, key=lambda x: (x[0].mean_cost_usd, -(x[0].context_token_limit or 0)))
        alt = _cheapest_text(base, cheapest, len(cands))
        advice = _no_recommendation(out, base, alt, never_fire, peak_p99, window, net, largest_request)
    # the recommendation's (or, with none, the baseline's) own intervals, resampling traces
    shown = ranked[0][0] if ranked else base
    rng = seeded_rng(base.trace_hashes, "intervals " + shown.label)
    out["cost_ci"] = [round(v / 1e6, 6) for v in bootstrap_ci(shown.cost, rng)]
    out["completion_ci"] = [round(v, 4) for v in bootstrap_ci(shown.completed.astype(np.float64), rng)]
    out["never_fire"] = len(never_fire)
    out["advice"] = advice
    return out


def _why_not(s: SettingResult, pr: dict, target: float, max_facts_lost_increase: float) -> list[str]:
    """Why a compacting setting is not eligible (empty: it is)."""
    reasons = []
    if pr["saving_ci"][0] <= 0:
        reasons.append("saving CI includes zero")
    if s.completion < target:
        reasons.append(f"completion {s.completion:.0%} < {target:.0%}")
    if pr["facts_lost_change"]["share_of_facts_seen"] > max_facts_lost_increase:
        reasons.append(
            f"facts lost +{pr['facts_lost_change']['share_of_facts_seen']:.1%} of facts seen "
            f"> {max_facts_lost_increase:.0%}"
        )
    if s.overflow_runs:
        reasons.append(f"{s.overflow_runs} runs overflow the window")
    return reasons


def _brief(s: SettingResult, pr: dict | None = None, reasons: list[str] | None = None) -> dict:
    """A setting's figures as the verdict lists them; with its paired comparison, its eligibility."""
    d = {
        "context_token_limit": s.context_token_limit,
        "keep_recent_tokens": s.keep_recent_tokens,
        "mean_cost_usd": round(s.mean_cost_usd, 6),
        "completion": round(s.completion, 4),
        "facts_lost": int(s.facts_lost.sum()),
        "facts_seen": int(s.facts_seen.sum()),
        "refetch_calls": int(s.refetch.sum()),
        "overflow_runs": int(s.overflow_runs),
        "compactions": int(s.compactions.sum()),
    }
    if pr is not None:
        d["eligible"] = not reasons
        d["why_not"] = reasons
        d["saving_ci"] = pr["saving_ci"]
        d["facts_lost_change_share"] = pr["facts_lost_change"]["share_of_facts_seen"]
    return d


def _recommend(out: dict, base: SettingResult, ranked: list[tuple[SettingResult, dict]]) -> str:
    """The verdict ``compact``: the first of ``ranked`` recommended, its runners-up and ties, into
    ``out``; returns the advice."""
    best, pr = ranked[0]
    tied = [s for s, _ in ranked[1:] if s.same_as(best)]
    runners = [_brief(s, p, []) for s, p in ranked[1:] if not s.same_as(best)][:3]
    fl = pr["facts_lost_change"]
    advice = (
        f"Ship context_token_limit={best.context_token_limit} with keep_recent_tokens="
        f"{best.keep_recent_tokens}: {_usd(best.mean_cost_usd)} per run against "
        f"{_usd(base.mean_cost_usd)} "
        f"without compaction, saving {_usd(pr['saving_usd'])} per run (paired 95% CI "
        f"{_usd(pr['saving_ci'][0])} to {_usd(pr['saving_ci'][1])}; {pr['runs_dearer']} of "
        f"{len(base.cost)} runs dearer); information cost: facts lost {fl['setting_share']:.1%} of "
        f"facts seen ({fl['share_of_facts_seen']:+.1%} vs no compaction), refetch calls "
        f"{pr['refetch_change']['per_run']:+.2f} per run, answers completed {best.completion:.0%} "
        f"(no compaction {base.completion:.0%})."
    )
    out.update(
        verdict="compact",
        recommended={
            "context_token_limit": int(best.context_token_limit),
            "keep_recent_tokens": int(best.keep_recent_tokens),
        },
        mean_cost_usd=round(best.mean_cost_usd, 6),
        completion=round(best.completion, 4),
        paired={
            k: pr[k]
            for k in (
                "saving_ci",
                "tokens_saving_ci",
                "facts_lost_change",
                "refetch_change",
                "outcome_change",
            )
        },
        runners_up=runners,
        tied=[
            {"context_token_limit": s.context_token_limit, "keep_recent_tokens": s.keep_recent_tokens}
            for s in tied
        ],
    )
    return advice


def _cheapest_text(base: SettingResult, cheapest: tuple, settings: int) -> str:
    """What the cheapest setting that changes some run would do, and why it is not recommended."""
    s, pr, why = cheapest
    fl = pr["facts_lost_change"]
    if s.same_as(base):
        return f"no setting of the grid changes any run: all {settings} are tied with no compaction."
    return (
        f"the cheapest setting, {s.label}, would save {_usd(pr['saving_usd'])} per run "
        "(paired 95% CI "
        f"{_usd(pr['saving_ci'][0])} to {_usd(pr['saving_ci'][1])}; {pr['runs_dearer']} of "
        f"{len(base.cost)} runs dearer) and lose {fl['setting_share']:.0%} of facts "
        f"({fl['share_of_facts_seen']:+.1%} vs no compaction), completing {s.completion:.0%} "
        f"({'; '.join(why)})."
    )


def _no_recommendation(
    out: dict,
    base: SettingResult,
    alt: str,
    never_fire: list[SettingResult],
    peak_p99: float,
    window: int | None,
    net: dict | None,
    largest_request: int,
) -> str:
    """The verdict without a recommendation (``compaction-not-needed`` or ``no-setting-qualifies``) into
    ``out``, the baseline's figures in the recommendation's place; returns the advice."""
    if base.overflow_runs == 0:
        head = f"Compaction not needed. Your runs peak at {_k(peak_p99)} tokens (p99)"
        if window is not None and net is not None and not net["fires_on_these_traces"]:
            head += (
                f"; with a {_k(window)} window compaction never needs to fire: set context_token_limit="
                f"{net['low']}–{net['high']} as a safety net (it never fires on these traces)"
            )
        elif window is not None and net is not None:
            head += (
                f" and no run overflows the {_k(window)} window without compaction, but with little "
                f"room: the largest request plus the largest output is {largest_request:,} tokens, so "
                "even the "
                f"highest safe limit, context_token_limit={net['high']} (window − output reserve − "
                f"largest summary), would fire on these traces"
            )
        advice = f"{head}; {alt}"
        out["verdict"] = "compaction-not-needed"
    else:
        advice = (
            f"No setting qualifies: without compaction {base.overflow_runs} of {len(base.cost)} runs "
            f"overflow the window, and no compacting setting meets the tolerances; {alt}"
        )
        out["verdict"] = "no-setting-qualifies"
    out.update(
        recommended=None,
        mean_cost_usd=round(base.mean_cost_usd, 6),
        completion=round(base.completion, 4),
        paired=None,
        runners_up=[],
        tied=[
            {"context_token_limit": x.context_token_limit, "keep_recent_tokens": x.keep_recent_tokens}
            for x in never_fire
        ],
    )
    return advice


def tied_text(rec: dict) -> str:
    """The tied settings as one line (empty when none)."""
    tied = rec.get("tied") or []
    if not tied:
        return ""
    what = "the recommendation" if rec.get("recommended") else "no compaction (they never compact here)"
    names = ", ".join(f"{t['context_token_limit']}/{t['keep_recent_tokens']}" for t in tied)
    return f"tied with {what}, identical on every trace ({len(tied)}): {names}"


def verdict_from_frame(df, where: str, policy_name: str) -> dict:
    """``verdict`` over one policy's rows of a sweep, with ``size``'s default tolerances (no window: a
    sweep's results do not say which window the user ships). A sweep over the mock behaviour
    (``model.on_missing``, ``model.summarizer``) is split by it: the verdict is the default behaviour's
    (refetch, extractive; else the first), and ``sensitivity`` holds every behaviour's."""
    cols = [c for _, c in BEHAVIOUR_COLUMNS if c in df.columns]
    if not cols:
        return verdict(settings_from_frame(df, where), policy_name=policy_name, target=DEMO_TARGET)
    keys = df[cols].astype(str)
    combos = sorted({tuple(r) for r in keys.itertuples(index=False)})
    verdicts = []
    for combo in combos:
        g = df[(keys == list(combo)).all(axis=1)]
        rec = verdict(settings_from_frame(g, where), policy_name=policy_name, target=DEMO_TARGET)
        names = [n for n, c in BEHAVIOUR_COLUMNS if c in df.columns]
        verdicts.append((dict(zip(names, combo, strict=True)), rec))
    default = next(
        (
            r
            for b, r in verdicts
            if b.get("on_missing", "refetch") == "refetch"
            and b.get("summarizer", "extractive") == "extractive"
        ),
        verdicts[0][1],
    )
    out = dict(default)
    out["mock_model"] = next(b for b, r in verdicts if r is default)
    if len(verdicts) > 1:
        out["sensitivity"] = sensitivity(verdicts)
    return out


def verdict_from_results(path, policy_name: str = "seed_engine") -> dict:
    """``verdict`` over a sweep's results.parquet (the sweep of ``demo``'s seed engine, for one)."""
    import pandas as pd

    df = pd.read_parquet(path)
    return verdict_from_frame(df[df["policy"] == policy_name], str(path), policy_name)


def recommendation_line(rec: dict) -> str:
    """The one-line recommendation every command prints the same way."""
    r = rec.get("recommended")
    if r:
        return (
            f"recommended: {rec['policy']} context_token_limit={r['context_token_limit']} "
            f"keep_recent_tokens={r['keep_recent_tokens']}"
        )
    return f"recommended: {rec['policy']} without compaction ({rec['verdict']})"


# ------------------------------------------------------------------------------------------ sensitivity
def sensitivity_behaviours() -> list[dict]:
    """Every ``model.on_missing`` x ``model.summarizer``: the mock behaviours a verdict is checked under."""
    from sim.engine.model import ON_MISSING, SUMMARIZERS

    return [{"on_missing": om, "summarizer": sm} for om in ON_MISSING for sm in SUMMARIZERS]


def sensitivity(verdicts: Sequence[tuple[dict, dict]]) -> dict:
    """One row per mock behaviour (its verdict, recommendation, cost, completion and saving CI) and
    whether the recommendation is the same under all of them."""
    rows = []
    for behaviour, rec in verdicts:
        r = rec.get("recommended")
        rows.append(
            {
                **behaviour,
                "verdict": rec["verdict"],
                "context_token_limit": r["context_token_limit"] if r else None,
                "keep_recent_tokens": r["keep_recent_tokens"] if r else None,
                "mean_cost_usd": rec["mean_cost_usd"],
                "completion": rec["completion"],
                "saving_ci": rec["paired"]["saving_ci"] if rec.get("paired") else None,
                "eligible_settings": rec["eligible_settings"],
            }
        )
    holds = len({(x["verdict"], x["context_token_limit"], x["keep_recent_tokens"]) for x in rows}) == 1
    return {"rows": rows, "holds": holds}


def sensitivity_text(sens: dict) -> str:
    """The sensitivity table's closing sentence."""
    if sens["holds"]:
        return f"The verdict holds under all {len(sens['rows'])} mock behaviours."
    each = [
        f"{x['on_missing']}/{x['summarizer']}: "
        + (
            f"{x['context_token_limit']}/{x['keep_recent_tokens']}"
            if x["context_token_limit"]
            else x["verdict"]
        )
        for x in sens["rows"]
    ]
    return f"The verdict does NOT hold under every mock behaviour ({'; '.join(each)})."
