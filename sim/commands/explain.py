"""``ctxsim explain``: what one agent call sent under a policy. Every item with its size and state, the
facts the call's action needs and where they are, the cache split and the policy's own reasons."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from sim.commands.common import add_allow_module, add_model_options, format_table, model_flags, split_args
from sim.util.errors import ConfigError

STATE_NAMES = ("verbatim", "bounded", "masked", "dropped", "summarized", "spilled", "paginated")


def add_parser(sub) -> None:
    """The ``explain`` subcommand on the CLI's subparsers."""
    e = sub.add_parser(
        "explain",
        help="show what one call sent under a policy: items, sizes, states, facts, cache split",
        description="Replay one trace under a policy and show agent call K: every item it sent with its "
        "size and state, the facts the call's action needs and where they are, and the cache split.",
    )
    e.add_argument("items", nargs="+", metavar="TRACE|policy.KEY=VALUE")
    e.add_argument("--policy", default="raw")
    e.add_argument("--call", type=int, required=True, help="recorded call index (0-based)")
    e.add_argument("--trace", help="trace_id, when the file holds several traces")
    e.add_argument(
        "--pricing",
        default="auto",
        metavar="MODEL",
        help="price every call as this model (conf/pricing/); default: the trace's recorded model",
    )
    add_model_options(e)
    add_allow_module(e)
    e.set_defaults(func=cmd_explain)


def chosen_trace(path: str, trace_id: str | None, call: int):
    """The one trace of ``path`` to explain (``--trace`` among several), with ``call`` in its range."""
    from sim.importers import load_path

    traces = list(load_path(Path(path)))
    if trace_id:
        traces = [t for t in traces if t.trace_id == trace_id]
    if len(traces) != 1:
        ids = ", ".join(t.trace_id for t in traces[:5])
        raise ConfigError(f"explain: {path} holds {len(traces)} traces; choose one with --trace ({ids} ...)")
    trace = traces[0]
    if not 0 <= call < len(trace.calls):
        last = len(trace.calls) - 1
        raise ConfigError(f"explain: --call {call} is not in [0, {last}] for {trace.trace_id}")
    return trace


class CallObserver:
    """The replay's observer: what the view held when the chosen call was sent (``seen``, empty if it
    never was) and the policy's explanation of it."""

    def __init__(self, trace, policy, call: int) -> None:
        self.trace, self.policy, self.call = trace, policy, call
        self.seen: dict[str, Any] = {}

    def __call__(self, k, view) -> None:
        if k != self.call:
            return
        from sim.information.state import needs_of

        needs = needs_of(self.trace, self.trace.calls[k].event_index)  # live needs only
        where = {f: view.facts.where(f, view.state, view.n) for f in needs} if view.facts else {}
        seen, n = self.seen, view.n
        seen.update(n=n, tokens=list(view.tokens[:n]), state=list(view.state[:n]), where=where)
        seen["columns"], seen["why"] = self.policy.explain(self.trace, view.policy_state, view, k)


def item_rows(trace, seen: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per item the call sent: kind, working-set category, state, tokens, facts, the policy's
    columns."""
    from sim.metrics.working_set import CLASS_NAMES, event_classes

    classes = trace.derived("working_set_classes", event_classes)
    return [
        {
            "item": i,
            "kind": trace.events[i].kind,
            "category": CLASS_NAMES[int(classes[i])],
            "state": STATE_NAMES[s],
            "tokens": t,
            "original_tokens": trace.events[i].tokens,
            "facts": ",".join(trace.events[i].provides) or None,
            **{col: values[i] for col, values in seen["columns"].items()},
        }
        for i, (t, s) in enumerate(zip(seen["tokens"], seen["state"], strict=True))
    ]


def call_line(call: int, trace, policy, c: dict[str, Any]) -> str:
    """The call's input split and cache split and cost, in one paragraph."""
    return (
        f"\ncall {call} of {trace.trace_id} under {policy.name}: input {c['input_tokens']:,} = view "
        f"{c['view_tokens']:,} + residual {c['residual_tokens']:,} + status line {c['status_tokens']:,}; "
        f"cache read {c['cache_read_tokens']:,}, write {c['cache_write_tokens']:,}, uncached "
        f"{c['uncached_input_tokens']:,}; cost "
        f"{'$%.6f' % (c['cost_microusd'] / 1e6) if c['cost_microusd'] >= 0 else 'unpriced'}; "
        f"first changed item {c['first_changed']}"
    )


def conversation_line(call: int, trace, rec) -> str:
    """Of a conversation: which run the call is in, and what that run opened on."""
    run = trace.calls[call].run_index
    start = trace.run_starts[run]
    opening = rec.opening_prompts[run] if run < len(rec.opening_prompts) else None
    return (
        f"run {run + 1} of the conversation's {trace.runs} (its calls {start}-"
        f"{(trace.run_starts + (len(trace.calls),))[run + 1] - 1})"
        + (f"; it opened on {opening:,} tokens" if opening is not None else "")
        + (" (this call)" if call == start else "")
    )


def working_set_line(trace, rec, row: int) -> str:
    """The call's view by working-set category, and the reserve left in the window."""
    from sim.metrics.working_set import CATEGORY_COLUMNS, working_set

    ws = working_set(trace, rec)
    return (
        "working set: "
        + ", ".join(
            f"{name.removeprefix('view_').removesuffix('_tokens').replace('_', ' ')} {ws[name][row]:,}"
            for name in CATEGORY_COLUMNS[:7]
        )
        + (
            f"; reserve {ws['reserve_tokens'][row]:,} of the {rec.window:,}-token window"
            if rec.window
            else ""
        )
    )


def cmd_explain(args: argparse.Namespace) -> int:
    """What one agent call sent: its items, their sizes and states, the facts it needed, the cache split."""
    from sim.config.compose import build_policy, check_allow_modules, compose, model_behaviour, model_window
    from sim.core.records import AGENT
    from sim.engine.dispatch import replay
    from sim.engine.model import UPPER_BOUND, ReplayModel

    paths, overrides = split_args(args.items)
    if len(paths) != 1:
        raise ConfigError("explain: give exactly one trace file")
    allow = check_allow_modules(args.allow_module or ())
    cfg = compose(args.policy, overrides, allow)
    policy, window, behaviour = build_policy(cfg, allow), model_window(cfg), model_behaviour(cfg)
    window, pricing = model_flags(args, window, args.pricing)
    trace = chosen_trace(paths[0], args.trace, args.call)
    observe = CallObserver(trace, policy, args.call)
    rec = replay(
        trace, policy, ReplayModel(trace, **behaviour), observer=observe, window=window, pricing=pricing
    )
    seen = observe.seen
    if not seen:
        print(f"call {args.call} was never sent: the run ended with {rec.finish_reason}")
        return 0
    rows = item_rows(trace, seen)
    if rows:
        print(format_table(rows, list(rows[0])))
    else:  # a call with nothing before it (a conversation that opens on the assistant's message)
        print(f"call {args.call} sent no items: nothing came before it in the trace")
    calls = rec.calls
    (row,) = [
        j
        for j, (kind, k) in enumerate(zip(calls["kind"], calls["recorded_call"], strict=True))
        if kind == AGENT and k == args.call
    ]
    print(call_line(args.call, trace, policy, {col: calls[col][row].item() for col in calls}))
    if trace.runs > 1:  # a conversation: which run, and what that run opened on
        print(conversation_line(args.call, trace, rec))
    print(working_set_line(trace, rec, row))
    if seen["where"]:
        print("facts this action needs: " + ", ".join(f"{f} ({w})" for f, w in seen["where"].items()))
    if rec.summarizer == UPPER_BOUND and rec.summaries:
        print(f"summaries by the {UPPER_BOUND} summarizer: an upper bound (it keeps what later actions need)")
    for line in seen["why"]:
        print(line)
    return 0
