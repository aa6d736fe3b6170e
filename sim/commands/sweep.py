"""``ctxsim sweep``: one policy over a grid of settings and a scenario, resumable (rerun the same
command), in this process, a pool of processes, Ray, or Hydra's multirun. The sweep reads KEY=VALUE
words (``sim.sweep.execute.spec_from_args``); the flags here are the same words, spelled as every other
command spells them (``sweep_flags``)."""

from __future__ import annotations

import argparse

from sim.commands.common import (
    add_allow_module,
    add_mock_model_options,
    add_transform_option,
    add_workers_option,
    mock_model_words,
    model_flags,
)
from sim.util.forkmap import check_workers


def add_parser(sub) -> None:
    """The ``sweep`` subcommand on the CLI's subparsers."""
    sw = sub.add_parser(
        "sweep",
        help="replay a scenario under every setting of a grid; resumable, parallel",
        description="Replay every trace of a scenario under every point of a grid of policy settings. "
        "Words: scenario=embedded|conversation|PATH|dataset:NAME, policy=NAME, policy.KEY=V1,V2,... "
        "(Hydra-style multirun values; several keys give the product), model.KEY=V, results.path=DIR, "
        "workers=N, chunk_size=N, pricing=MODEL|auto, experiment=NAME (conf/experiment/NAME.yaml), "
        "executor=pool|ray (ray: chunks as Ray tasks, pip install 'ctxsim[ray]'), "
        "ray.address=auto|HOST:PORT (default: a local Ray with `workers` CPUs), max_settings=N (the most "
        "runs, settings x traces, default 1,000,000). Finished chunks are kept "
        "in DIR/parts/: an interrupted sweep resumes when the same command is run again.",
        epilog="example: ctxsim sweep experiment=size_seed_engine workers=2",
    )
    sw.add_argument("items", nargs="*", metavar="KEY=VALUE")
    sw.add_argument("--csv", action="store_true", help="also write DIR/results.csv")
    sw.add_argument(
        "--skip-invalid",
        action="store_true",
        help="skip grid points the policy refuses (a note names each) instead of exit 2",
    )
    sw.add_argument("--policy", help="the policy (as policy=NAME)")
    sw.add_argument("--pricing", metavar="MODEL", help="price every call as this model (as pricing=MODEL)")
    sw.add_argument(
        "--model",
        metavar="NAME",
        help="price and window as this model (pricing=NAME model.window=its window)",
    )
    sw.add_argument("--window", type=int, help="provider context window in tokens (as model.window=N)")
    add_allow_module(sw, as_word="as allow_modules=")
    add_mock_model_options(sw, as_words=True)
    add_workers_option(
        sw,
        None,
        "processes replaying chunks (as workers=N; default 1; the same results for any N)",
    )
    add_transform_option(sw)
    sw.add_argument(
        "--max-settings",
        type=int,
        metavar="N",
        help="the most runs (settings x traces) the sweep may plan (as max_settings=N; default 1,000,000)",
    )
    sw.add_argument(
        "-m",
        "--multirun",
        action="store_true",
        help="run through Hydra's multirun: one job per grid point on any Hydra launcher "
        "(hydra/launcher=joblib hydra.launcher.n_jobs=2; ray and submitit with their plugins)",
    )
    sw.set_defaults(func=cmd_sweep)


def sweep_flags(args: argparse.Namespace) -> list[str]:
    """The flags every subcommand takes, as the sweep's KEY=VALUE words (given before the words, so a
    word on the line wins): --policy, --pricing, --model (pricing and window of that model), --window,
    --allow-module, --on-missing, --summarizer, --workers."""
    words = []
    if args.policy:
        words.append(f"policy={args.policy}")
    # as `run` reads them (``model_flags``): --model and a --pricing naming another model are refused
    window, pricing = model_flags(args, None, args.pricing or "auto")
    if pricing != "auto" or args.pricing:
        words.append(f"pricing={pricing}")
    if window is not None:
        words.append(f"model.window={window}")
    if args.allow_module:
        words.append("allow_modules=" + ",".join(args.allow_module))
    words += mock_model_words(args)
    if args.workers is not None:
        words.append(f"workers={check_workers(args.workers)}")
    if args.max_settings is not None:
        words.append(f"max_settings={args.max_settings}")
    return words


def cmd_sweep(args: argparse.Namespace) -> int:
    """One policy over a grid of settings and a scenario; resumable (rerun the same command)."""
    words = [w for name, ovs in getattr(args, "transforms", None) or () for w in (f"transform={name}", *ovs)]
    if args.multirun:  # through Hydra's multirun and whichever launcher the words choose
        from sim.sweep.hydra_app import main as hydra_main

        flags = sweep_flags(args) + (["skip_invalid=true"] if args.skip_invalid else [])
        return hydra_main(flags + list(args.items) + words + (["csv=true"] if args.csv else []))
    from sim.sweep.execute import run_sweep, spec_from_args

    args.items = sweep_flags(args) + list(args.items) + words
    spec, workers = spec_from_args(args.items, csv=args.csv, skip_invalid=args.skip_invalid)
    path = run_sweep(spec, workers=workers)
    print(f"results: {path}" + (f" (and {path.with_suffix('.csv').name})" if spec.csv else ""))
    print(f"summary: ctxsim results {path.parent}")
    return 0
