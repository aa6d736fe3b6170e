"""The recommendation: ``verdict`` is the one function that says which ``context_token_limit`` and
``keep_recent_tokens`` to ship (or, for another policy, which of its own knobs: ``size --policy``);
``size``, ``demo`` and ``report`` all call it, so they cannot disagree.
It tells three regimes apart (docs/sizing.md):

- **compaction required** (``compaction-required``): without compaction some runs overflow the window.
  A setting that overflows fewer runs is shipped, ranked by overflows, then completion (the worst over
  the mock behaviours when they were all replayed), then facts lost (settings within the facts-lost
  tolerance tie on it), then cost; its cost is compared
  with the same runs replayed with no window (``reference``), since the overflowing runs of no
  compaction stopped early and look cheap. ``no-setting-qualifies`` when no setting overflows fewer.
- **compacting pays** (``compact``): the cheapest setting whose saving's interval lies above zero,
  within the completion target and the facts-lost tolerance, with no overflow.
- **not needed** (``compaction-not-needed``): no run overflows and compacting does not pay; a concrete
  safety-net pair is still named (``safety_net``).

Settings that behave identically on these traces (the same cost, facts lost and outcome on every trace)
are named as **tied** and share one row of the table. Also here: the verdict of a sweep's results, and
its sensitivity to the mock model's behaviour."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence, Set

import numpy as np

from sim.analysis.paired import bootstrap_ci, paired_many, percentile_rows, seeded_rng
from sim.analysis.setting_results import SettingResult, settings_from_frame
from sim.util.errors import ConfigError

DEFAULT_MAX_FACTS_LOST_INCREASE = 0.05  # share of the facts seen, over the baseline's
DEMO_TARGET = 0.95  # what `demo` and `report` size against (``size``'s defaults)
BEHAVIOUR_COLUMNS = (("on_missing", "model.on_missing"), ("summarizer", "summarizer"))
Pair = tuple  # a setting's knob values: (context_token_limit, keep_recent_tokens); all None: baseline


def _usd(v: float) -> str:
    return f"-${-v:.4f}" if v < 0 else f"${v:.4f}"


def _k(tokens: float) -> str:
    return f"{tokens / 1000:.0f}k" if tokens >= 1000 else f"{tokens:.0f}"


def _pair(s: SettingResult) -> dict:
    return s.setting


def _ship(s: SettingResult) -> str:
    """``context_token_limit=L with keep_recent_tokens=K``: a setting's knobs as the advice names them."""
    return " with ".join(f"{k}={v}" for k, v in s.setting.items())


def _knobs_text(p: Mapping) -> str:
    return " ".join(f"{k}={v}" for k, v in p.items())


def _slash(p: Mapping) -> str:
    """``L/K``: a setting's values as the tables name it."""
    return "/".join(str(v) for v in p.values())


def key_of(s: SettingResult) -> tuple:
    """A setting's knob values ((limit, keep) for the seed engine's): how the behaviours' replays of one
    grid are matched."""
    return tuple(s.setting.values())


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


def rank_key(
    s: SettingResult, worst: Mapping[Pair, float] | None = None, tolerated: Set[Pair] | None = None
) -> tuple:
    """The order of settings where compaction is required (and of a safety net that would fire): fewer
    runs overflowing, then higher completion (the worst over the mock behaviours when ``worst`` gives
    it), then fewer facts lost (share of facts seen), then cheaper; ties on all of them: the larger
    limit and keep (the gentler setting; another policy's: ``SettingResult.gentleness``). ``tolerated``:
    the settings whose facts lost stay within the stated tolerance; they tie on information, so the
    cheapest of them wins (without it, two facts fewer would outrank any price)."""
    completion = min(s.completion, (worst or {}).get(key_of(s), s.completion))
    info = 0.0 if tolerated is not None and key_of(s) in tolerated else s.facts_lost_share
    return (s.overflow_runs, -completion, info, s.mean_cost_usd, *(-g for g in s.gentleness))


def _pay_key(s: SettingResult) -> tuple:
    """The order of eligible settings where compacting pays: cheapest, then fewer facts lost, then the
    larger limit and keep."""
    return (s.mean_cost_usd, s.facts_lost_share, *(-g for g in s.gentleness))


def tie_groups(results: Sequence[SettingResult]) -> list[int | None]:
    """Per setting, the index of the first setting of ``results`` identical to it on every trace
    (``SettingResult.same_as``), or None when it is the first of its kind."""
    first: dict[tuple, int] = {}
    out: list[int | None] = []
    for i, s in enumerate(results):
        k = (s.cost.tobytes(), s.tokens.tobytes(), s.facts_lost.tobytes(), s.refetch.tobytes(), s.outcome)
        j = first.setdefault(k, i)
        out.append(None if j == i else j)
    return out


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
    reference: SettingResult | None = None,
    worst_completion: Mapping[Pair, float] | None = None,
    trigger: bool | None = None,
) -> dict:
    """The recommendation over ``results`` (``results[0]``: the baseline, no compaction at ``window``),
    in the regime the baseline puts it in (the module's docstring). ``reference``: the baseline's runs
    replayed with no window, the cost reference where the baseline overflows (else unused; without it
    the baseline stands in). ``worst_completion``: per (limit, keep), its worst completion over the mock
    behaviours, which the ranking reads where compaction is required. ``trigger``: None for the seed
    engine's (limit, keep) grid; for another policy's grid (``size --policy``) whether it acts only past a
    size threshold (``Policy.size_trigger``), which says what its safety net is (``_net_setting``)."""
    if not results or not results[0].is_baseline:
        raise ConfigError(f"size: the results of {policy_name} hold no no-compaction (limit unset) setting")
    base, cands = results[0], list(results[1:])
    if not cands:
        raise ConfigError(f"size: the results of {policy_name} hold no compacting setting")
    if largest_request is None:
        largest_request = int(base.peak.max()) + reserve
    required = base.overflow_runs > 0
    ref = reference if required and reference is not None else base
    tol = (target, max_facts_lost_increase)
    rows = []
    for s, pr in zip(cands, paired_many(ref, cands), strict=True):
        if required:
            why = [] if s.overflow_runs < base.overflow_runs else [_overflow_text(s, base)]
            rows.append((s, pr, why, _shortfalls(s, pr, *tol)))
        else:
            rows.append((s, pr, _why_not(s, base, pr, *tol), []))
    ties = tie_groups(results)
    labels = [s.label for s in results]
    peak_p99 = float(percentile_rows(np.array(base.peak, dtype=np.float64)[None, :], (99,))[0, 0])
    base_brief = _brief(base)
    base_brief["peak_context_tokens_p99"] = round(peak_p99)
    never_fire = [s for s in cands if s.same_as(base)]
    out = {
        "policy": policy_name,
        "baseline": base_brief,
        "cost_reference": _brief(reference) if required and reference is not None else None,
        "target_completion": target,
        "max_facts_lost_increase": max_facts_lost_increase,
        "settings": len(results),
        "grid": [
            {**_brief(s, pr, why, short), "same_as": None if t is None else labels[t]}
            for (s, pr, why, short), t in zip(rows, ties[1:], strict=True)
        ],
        "eligible_settings": sum(not why for _, _, why, _ in rows),
        "traces": len(base.cost),
        "safety_net": safety_net(window, reserve, summary, largest_request) if trigger is None else None,
    }
    if trigger is not None:
        out["knobs"] = list(cands[0].setting)
    eligible = [(s, pr) for s, pr, why, _ in rows if not why]
    if required and eligible:
        tolerated = {
            key_of(x[0])
            for x in eligible
            if x[1]["facts_lost_change"]["share_of_facts_seen"] <= max_facts_lost_increase
        }
        ranked = sorted(eligible, key=lambda x: rank_key(x[0], worst_completion, tolerated))
        _recommend(out, ranked, "compaction-required")
        meeting = next((s for s, pr in ranked if not _shortfalls(s, pr, *tol)), None)
        advice = _required_text(base, ref, ranked[0], window, tol, worst_completion, meeting)
    elif eligible:
        ranked = sorted(eligible, key=lambda x: _pay_key(x[0]))
        _recommend(out, ranked, "compact")
        advice = _pays_text(base, ranked[0])
    else:
        ranked = []
        changing = [x for x in rows if not x[0].same_as(base)] or rows  # a setting that changes some run
        cheapest = min(changing, key=lambda x: (x[0].mean_cost_usd, -x[0].gentleness[0]))
        alt = _cheapest_text(base, cheapest, len(cands))
        ship = ""
        if not base.overflow_runs:
            ship = (
                _net_pair(out, base, cands, worst_completion)
                if trigger is None
                else _net_setting(out, base, cands, worst_completion, trigger, policy_name)
            )
        advice = _no_recommendation(out, base, alt, never_fire, peak_p99, window, largest_request, ship)
    # the recommendation's (or, with none, the baseline's) own intervals, resampling traces
    shown = ranked[0][0] if ranked else base
    rng = seeded_rng(base.trace_hashes, "intervals " + shown.label)
    out["cost_ci"] = [round(v / 1e6, 6) for v in bootstrap_ci(shown.cost, rng)]
    out["completion_ci"] = [round(v, 4) for v in bootstrap_ci(shown.completed.astype(np.float64), rng)]
    out["never_fire"] = len(never_fire)
    out["advice"] = advice
    return out


def _ci_text(ci: Sequence[float]) -> str:
    return f"{ci[0]:.4f}..{ci[1]:.4f}"


def _why_not(
    s: SettingResult, base: SettingResult, pr: dict, target: float, max_facts_lost_increase: float
) -> list[str]:
    """Why a compacting setting is not eligible where compacting could pay (empty: it is)."""
    reasons = []
    lo, hi = pr["saving_ci"]
    if s.same_as(base):
        reasons.append("never compacts here (identical to no compaction)")
    elif hi < 0:
        reasons.append(f"costs more: CI {_ci_text(pr['saving_ci'])}")
    elif lo <= 0:
        reasons.append(f"CI spans zero: {_ci_text(pr['saving_ci'])}")
    reasons += _shortfalls(s, pr, target, max_facts_lost_increase)
    if s.overflow_runs:
        reasons.append(f"{s.overflow_runs} runs overflow the window")
    return reasons


def _shortfalls(s: SettingResult, pr: dict, target: float, max_facts_lost_increase: float) -> list[str]:
    """The completion target and the facts-lost tolerance a setting misses (where compaction is
    required these are reported, not blocking)."""
    out = []
    if s.completion < target:
        out.append(f"completion {s.completion:.0%} < {target:.0%}")
    share = pr["facts_lost_change"]["share_of_facts_seen"]
    if share > max_facts_lost_increase:
        out.append(f"facts lost +{share:.1%} of facts seen > {max_facts_lost_increase:.0%}")
    return out


def _overflow_text(s: SettingResult, base: SettingResult) -> str:
    return f"overflows {s.overflow_runs} runs, no fewer than no compaction ({base.overflow_runs})"


def _brief(
    s: SettingResult, pr: dict | None = None, reasons: list[str] | None = None, short: list[str] | None = None
) -> dict:
    """A setting's figures as the verdict lists them; with its paired comparison, its eligibility (and,
    where compaction is required, the tolerances it misses: ``shortfalls``)."""
    d = {
        **s.setting,
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
        d["shortfalls"] = short or []
        d["saving_ci"] = pr["saving_ci"]
        d["facts_lost_change_share"] = pr["facts_lost_change"]["share_of_facts_seen"]
    return d


def _recommend(out: dict, ranked: list[tuple[SettingResult, dict]], what: str) -> None:
    """The verdict ``what`` (``compact`` or ``compaction-required``): the first of ``ranked``
    recommended, its runners-up and ties, into ``out``."""
    best, pr = ranked[0]
    tied = [s for s, _ in ranked[1:] if s.same_as(best)]
    runners = [_brief(s, p, []) for s, p in ranked[1:] if not s.same_as(best)][:3]
    out.update(
        verdict=what,
        recommended=best.setting
        if best.knobs
        else {
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
        tied=[_pair(s) for s in tied],
    )


def _pays_text(base: SettingResult, top: tuple[SettingResult, dict]) -> str:
    """The advice where compacting pays."""
    best, pr = top
    fl = pr["facts_lost_change"]
    return (
        f"Ship {_ship(best)}: {_usd(best.mean_cost_usd)} per run against "
        f"{_usd(base.mean_cost_usd)} "
        f"without compaction, saving {_usd(pr['saving_usd'])} per run (paired 95% CI "
        f"{_usd(pr['saving_ci'][0])} to {_usd(pr['saving_ci'][1])}; {pr['runs_dearer']} of "
        f"{len(base.cost)} runs dearer); information cost: facts lost {fl['setting_share']:.1%} of "
        f"facts seen ({fl['share_of_facts_seen']:+.1%} vs no compaction), refetch calls "
        f"{pr['refetch_change']['per_run']:+.2f} per run, answers completed {best.completion:.0%} "
        f"(no compaction {base.completion:.0%})."
    )


def _required_text(
    base: SettingResult,
    ref: SettingResult,
    top: tuple[SettingResult, dict],
    window: int | None,
    tol: tuple[float, float],
    worst: Mapping[Pair, float] | None,
    meeting: SettingResult | None,
) -> str:
    """The advice where compaction is required: how many runs overflow without it, the setting to ship,
    its information cost and its cost against the same runs with no window; whether it meets the
    completion target and the facts-lost tolerance, said plainly when it does not."""
    best, pr = top
    fl = pr["facts_lost_change"]
    n = len(base.cost)
    where = f"the {_k(window)} window" if window else "the window"
    worst_c = (worst or {}).get(key_of(best))
    worst_txt = "" if worst_c is None else f", {worst_c:.0%} under the worst mock behaviour"
    short = _shortfalls(best, pr, *tol)
    tolerances = f"the {tol[0]:.0%} completion target and the +{tol[1]:.0%} facts-lost tolerance"
    if not short:
        meets = f"it meets {tolerances}"
    elif meeting is None:
        meets = f"NO setting of the grid meets {tolerances}: this one misses them ({'; '.join(short)})"
    else:
        meets = f"it misses {tolerances} ({'; '.join(short)}); {meeting.label} meets them but ranks lower"
    ref_name = "the same runs with no window" if ref is not base else "no compaction"
    return (
        f"Compaction required: without compaction {base.overflow_runs} of {n} runs overflow {where} "
        f"(answers completed {base.completion:.0%}). Ship {_ship(best)}: "
        f"{best.overflow_runs} of {n} runs overflow, answers completed {best.completion:.0%}{worst_txt}; "
        f"information cost: facts lost {int(best.facts_lost.sum()):,} ({fl['setting_share']:.1%} of facts "
        f"seen, {fl['share_of_facts_seen']:+.1%} vs {ref_name}), refetch calls "
        f"{pr['refetch_change']['per_run']:+.2f} per run; cost {_usd(best.mean_cost_usd)} per run against "
        f"{_usd(ref.mean_cost_usd)} for {ref_name} (paired saving 95% CI {_usd(pr['saving_ci'][0])} to "
        f"{_usd(pr['saving_ci'][1])}; no compaction costs {_usd(base.mean_cost_usd)} because its "
        f"overflowing runs stop early). Ranked by runs overflowing, completion, facts lost (within the "
        "tolerance: a tie), then cost; "
        f"{meets}."
    )


def _cheapest_text(base: SettingResult, cheapest: tuple, settings: int) -> str:
    """What the cheapest setting that changes some run would do, and why it is not recommended."""
    s, pr, why, _ = cheapest
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
    largest_request: int,
    ship: str,
) -> str:
    """The verdict without a recommendation (``compaction-not-needed`` or ``no-setting-qualifies``) into
    ``out``, the baseline's figures in the recommendation's place; returns the advice (``ship``: the
    sentence naming the safety net's pair, where compaction is not needed)."""
    net = out["safety_net"]
    if net is not None and "high" not in net:  # another policy's: its own knobs, no limit range
        net = None
    if base.overflow_runs == 0:
        head = f"Compaction not needed. Your runs peak at {_k(peak_p99)} tokens (p99)"
        if window is not None and net is not None and not net["fires_on_these_traces"]:
            head += (
                f"; with a {_k(window)} window compaction never needs to fire: any context_token_limit "
                f"from {net['low']} to {net['high']} is a safety net that never fires on these traces"
            )
        elif window is not None and net is not None:
            head += (
                f" and no run overflows the {_k(window)} window without compaction, but with little "
                f"room: the largest request plus the largest output is {largest_request:,} tokens, so "
                "even the "
                f"highest safe limit, context_token_limit={net['high']} (window − output reserve − "
                f"largest summary), would fire on these traces"
            )
        advice = f"{head}. {ship}For comparison, {alt}"
        out["verdict"] = "compaction-not-needed"
    else:
        advice = (
            f"No setting qualifies: without compaction {base.overflow_runs} of {len(base.cost)} runs "
            f"overflow the window, and no compacting setting overflows fewer; {alt}"
        )
        out["verdict"] = "no-setting-qualifies"
    out.update(
        recommended=None,
        mean_cost_usd=round(base.mean_cost_usd, 6),
        completion=round(base.completion, 4),
        paired=None,
        runners_up=[],
        tied=[_pair(x) for x in never_fire],
    )
    return advice


def _net_pair(
    out: dict, base: SettingResult, cands: list[SettingResult], worst: Mapping[Pair, float] | None
) -> str:
    """The safety net's concrete pair, into ``out["safety_net"]`` (``context_token_limit``,
    ``keep_recent_tokens``, ``pair_fires_on_these_traces``); returns the sentence that names it. The
    rule: take the grid's highest limit at or below the highest safe limit (window − output reserve −
    largest summary, rounded down to 1000: ``size``'s grid holds that limit itself when the window cuts
    the grid, ``sim.analysis.size.grid_limits``; without a window, the grid's highest limit, so that a
    sweep's verdict names the pair ``size`` names on the same grid). Where no setting at it changes a
    run, ship it with the keep ``rank_key`` prefers among its settings; where it would fire on these
    traces, ship the grid's top-ranked setting by ``rank_key`` (overflows, completion, facts lost,
    cost)."""
    net = out["safety_net"]
    limits = sorted({int(s.context_token_limit or 0) for s in cands})
    high = ([v for v in limits if net is None or v <= net["high"]] or limits[:1])[-1]
    at = [s for s in cands if s.context_token_limit == high]
    at_fires = any(not s.same_as(base) for s in at)
    if net is None:  # no window: the grid's highest limit stands for the highest safe one
        net = out["safety_net"] = {"low": None, "high": high, "fires_on_these_traces": at_fires}
    pick = min(cands if at_fires else at, key=lambda s: rank_key(s, worst))
    fires = not pick.same_as(base)
    net.update(
        context_token_limit=pick.context_token_limit,
        keep_recent_tokens=pick.keep_recent_tokens,
        pair_fires_on_these_traces=fires,
    )
    if not fires:
        return (
            f"Ship context_token_limit={high} with keep_recent_tokens={pick.keep_recent_tokens} as a safety "
            "net (the grid's highest safe limit: it never fires on these traces, it only stops a runaway). "
        )
    n = len(base.cost)
    return (
        f"Ship context_token_limit={pick.context_token_limit} with keep_recent_tokens="
        f"{pick.keep_recent_tokens} as a safety net that fires on these traces (the grid's best by runs "
        f"overflowing, completion, facts lost, then cost): {pick.overflow_runs} of {n} runs overflow, "
        f"answers completed {pick.completion:.0%}, facts lost {int(pick.facts_lost.sum()):,} "
        f"({pick.facts_lost_share:.1%} of facts seen), {_usd(pick.mean_cost_usd)} per run against "
        f"{_usd(base.mean_cost_usd)} without compaction. "
    )


def _net_setting(
    out: dict,
    base: SettingResult,
    cands: list[SettingResult],
    worst: Mapping[Pair, float] | None,
    trigger: bool,
    policy_name: str,
) -> str:
    """Another policy's safety net (``size --policy``) into ``out["safety_net"]``: its knobs and
    ``pair_fires_on_these_traces``, or null and ``safety_net_reason``; returns the sentence naming it.
    With a size trigger the rule is the seed engine's without the window: the gentlest setting of the
    grid (``SettingResult.gentleness``, it acts least) where it changes no run, else the grid's
    top-ranked by ``rank_key``. Without one (it acts on every run: masking, head/tail) its gentlest
    setting is shipped only where it costs no more than the baseline and loses no more facts."""
    gentlest = max(cands, key=lambda s: s.gentleness)
    if trigger:
        pick = gentlest if gentlest.same_as(base) else min(cands, key=lambda s: rank_key(s, worst))
    elif (
        gentlest.mean_cost_usd <= base.mean_cost_usd
        and gentlest.facts_lost.sum() <= base.facts_lost.sum()
        and not gentlest.overflow_runs
    ):
        pick = gentlest
    else:
        out["safety_net"] = None
        out["safety_net_reason"] = (
            f"{policy_name} acts on every run (no size trigger) and its gentlest setting, {gentlest.label}, "
            f"costs more or loses more than no compaction: nothing to ship as a safety net"
        )
        return f"{policy_name} has no safety net here: {out['safety_net_reason'].split(': ')[0]}. "
    fires = not pick.same_as(base)
    out["safety_net"] = {**pick.setting, "pair_fires_on_these_traces": fires}
    if not fires:
        return (
            f"Ship {_ship(pick)} as a safety net (the grid's gentlest setting: it never fires on these "
            "traces). "
        )
    why = (
        "the grid's best by runs overflowing, completion, facts lost, then cost"
        if trigger
        else ("its gentlest setting: it acts on every run, at no more cost and no more facts lost than none")
    )
    n = len(base.cost)
    return (
        f"Ship {_ship(pick)} as a safety net that fires on these traces ({why}): {pick.overflow_runs} of "
        f"{n} runs overflow, answers completed {pick.completion:.0%}, facts lost "
        f"{int(pick.facts_lost.sum()):,} ({pick.facts_lost_share:.1%} of facts seen), "
        f"{_usd(pick.mean_cost_usd)} per run against {_usd(base.mean_cost_usd)} without compaction. "
    )


def tied_text(rec: dict) -> str:
    """The tied settings as one line (empty when none)."""
    tied = rec.get("tied") or []
    if not tied:
        return ""
    what = "the recommendation" if rec.get("recommended") else "no compaction (they never compact here)"
    names = ", ".join(_slash(t) for t in tied)
    return f"tied with {what}, identical on every trace ({len(tied)}): {names}"


def shipped(rec: dict) -> dict | None:
    """The pair a verdict says to ship: the recommendation, else the safety net's pair (None: neither)."""
    if rec.get("recommended"):
        return rec["recommended"]
    net = rec.get("safety_net") or {}
    if "knobs" in rec:  # another policy's: the safety net holds its own knobs, or is null
        if net and rec.get("verdict") == "compaction-not-needed":
            return {k: net[k] for k in rec["knobs"]}
        return None
    if net.get("context_token_limit") is not None and rec.get("verdict") == "compaction-not-needed":
        return {
            "context_token_limit": net["context_token_limit"],
            "keep_recent_tokens": net["keep_recent_tokens"],
        }
    return None


def recommendation_line(rec: dict) -> str:
    """The one-line recommendation every command prints the same way; it names a concrete pair whenever
    the verdict has one (the recommendation, or the safety net where compaction is not needed)."""
    r = rec.get("recommended")
    if r:
        return f"recommended: {rec['policy']} {_knobs_text(r)}"
    net = shipped(rec)
    if net is None:
        return f"recommended: {rec['policy']} without compaction ({rec['verdict']})"
    pair = _knobs_text(net)
    if rec["safety_net"].get("pair_fires_on_these_traces"):
        fires = f"({rec['verdict']}; it fires on these traces)"
        return f"recommended: {rec['policy']} {pair} as a safety net {fires}"
    return f"recommended: {rec['policy']} without compaction ({rec['verdict']}); safety net: {pair}"


def verdict_from_frame(df, where: str, policy_name: str) -> dict:
    """``verdict`` over one policy's rows of a sweep, with ``size``'s default tolerances (no window: a
    sweep's results do not say which window the user ships; no no-window cost reference either: the
    baseline stands in). A sweep over the mock behaviour (``model.on_missing``, ``model.summarizer``) is
    split by it: the verdict is the default behaviour's (refetch, extractive; else the first), ranked
    with each setting's worst completion over the behaviours, and ``sensitivity`` holds every
    behaviour's own verdict and grid, as ``size --sensitivity`` gives them."""
    cols = [c for _, c in BEHAVIOUR_COLUMNS if c in df.columns]
    if not cols:
        return verdict(settings_from_frame(df, where), policy_name=policy_name, target=DEMO_TARGET)
    keys = df[cols].astype(str)
    names = [n for n, c in BEHAVIOUR_COLUMNS if c in df.columns]
    order = [tuple(b[n] for n in names) for b in sensitivity_behaviours()]  # as ``size`` lists them
    combos = sorted(
        {tuple(r) for r in keys.itertuples(index=False)},
        key=lambda c: (order.index(c) if c in order else len(order), c),
    )
    per = [
        (
            dict(zip(names, combo, strict=True)),
            settings_from_frame(df[(keys == list(combo)).all(axis=1)], where),
        )
        for combo in combos
    ]
    d = next(
        (
            i
            for i, (b, _) in enumerate(per)
            if b.get("on_missing", "refetch") == "refetch"
            and b.get("summarizer", "extractive") == "extractive"
        ),
        0,
    )
    if len(per) == 1:
        out = verdict(per[0][1], policy_name=policy_name, target=DEMO_TARGET)
        out["mock_model"] = per[0][0]
        return out
    verdicts = [(b, verdict(r, policy_name=policy_name, target=DEMO_TARGET)) for b, r in per]
    out = verdict(
        per[d][1],
        policy_name=policy_name,
        target=DEMO_TARGET,
        worst_completion=worst_completions([r for _, r in per]),
    )
    out["mock_model"] = per[d][0]
    add_sensitivity(out, [(b, rec, r) for (b, r), (_, rec) in zip(per, verdicts, strict=True)])
    return out


def verdict_from_results(path, policy_name: str = "seed_engine") -> dict:
    """``verdict`` over a sweep's results.parquet (the sweep of ``demo``'s seed engine, for one)."""
    import pandas as pd

    df = pd.read_parquet(path)
    return verdict_from_frame(df[df["policy"] == policy_name], str(path), policy_name)


# ------------------------------------------------------------------------------------------ sensitivity
def sensitivity_behaviours() -> list[dict]:
    """Every ``model.on_missing`` x ``model.summarizer``: the mock behaviours a verdict is checked under."""
    from sim.engine.model import ON_MISSING, SUMMARIZERS

    return [{"on_missing": om, "summarizer": sm} for om in ON_MISSING for sm in SUMMARIZERS]


def worst_completions(per_behaviour: Sequence[Sequence[SettingResult]]) -> dict[Pair, float]:
    """Per (limit, keep), its lowest completion over the behaviours' replays of the grid."""
    worst: dict[Pair, float] = {}
    for results in per_behaviour:
        for s in results:
            k = key_of(s)
            worst[k] = min(worst.get(k, 1.0), s.completion)
    return worst


def add_sensitivity(rec: dict, per: Sequence[tuple[dict, dict, Sequence[SettingResult]]]) -> None:
    """``rec["sensitivity"]``: per mock behaviour (``per``: its behaviour, its own verdict and its
    results), the verdict, the pair it ships and every setting's completion, facts lost and cost; and
    ``rec["sensitivity_holds"]``: whether every behaviour's own verdict ships what ``rec`` ships."""
    rows = []
    for behaviour, v, results in per:
        rows.append(
            {
                **behaviour,
                "verdict": v["verdict"],
                "recommended": v.get("recommended"),
                "ships": shipped(v),
                "grid": [
                    {
                        **_pair(s),
                        "completion": round(s.completion, 4),
                        "facts_lost": int(s.facts_lost.sum()),
                        "mean_cost_usd": round(s.mean_cost_usd, 6),
                        "overflow_runs": int(s.overflow_runs),
                    }
                    for s in results
                ],
            }
        )
    want = (rec["verdict"], shipped(rec))
    rec["sensitivity"] = rows
    rec["sensitivity_holds"] = all((r["verdict"], r["ships"]) == want for r in rows)


_FIGURES = ("completion", "facts_lost", "mean_cost_usd", "overflow_runs")  # a sensitivity grid's, not knobs


def sensitivity_grid(sens: list[dict]) -> list[dict]:
    """One row per setting: its completion under each behaviour (``refetch/extractive``: ...), worst
    first named; for the tables of ``size`` and ``report``."""
    if not sens:
        return []
    rows = []
    for j, g in enumerate(sens[0]["grid"]):
        knobs = {k: v for k, v in g.items() if k not in _FIGURES}
        name = "none" if all(v is None for v in knobs.values()) else _slash(knobs)
        row: dict = {"setting": name}
        values = []
        for b in sens:
            c = b["grid"][j]["completion"]
            row[f"{b['on_missing']}/{b['summarizer']}"] = round(c, 3)
            values.append(c)
        row["worst"] = round(min(values), 3)
        rows.append(row)
    return rows


def sensitivity_text(rec: dict) -> str:
    """The sensitivity table's closing sentence: whether each behaviour's own verdict ships what the
    verdict ships."""
    sens = rec["sensitivity"]

    def ships(x: dict) -> str:
        p = x["ships"]
        return _slash(p) if p else "nothing"

    if rec["sensitivity_holds"]:
        return f"The verdict holds under all {len(sens)} mock behaviours: each alone ships {ships(sens[0])}."
    each = [f"{x['on_missing']}/{x['summarizer']}: {x['verdict']}, {ships(x)}" for x in sens]
    return f"The verdict does NOT hold under every mock behaviour ({'; '.join(each)})."
