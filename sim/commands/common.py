"""What several commands share: the table people read, the warning line, KEY=VALUE words, progress on a
terminal, and the flags that mean the same thing on every command that takes them (``--model``,
``--window``, ``--allow-module``, ``--workers``, ``--on-missing``, ``--summarizer``, ``--transform``).

Imported when the parser is built: nothing heavy at module level (tests/test_startup.py)."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sim.util.errors import ConfigError
from sim.util.forkmap import MAX_WORKERS
from sim.util.limits import MAX_COUNT

OVERRIDE = re.compile(r"^[+~]?[A-Za-z_][\w.]*=")

# The mock model's choices (sim.engine.model.ON_MISSING and SUMMARIZERS), spelled here so that building
# the parser imports no numpy; tests/test_cli.py holds the two spellings equal.
ON_MISSING_CHOICES = ("refetch", "fail", "degrade")
SUMMARIZER_CHOICES = ("extractive", "oracle")


def warn(msg: str) -> None:
    """One ``ctxsim: warning:`` line on stderr."""
    print(f"ctxsim: warning: {msg}", file=sys.stderr)


def is_override(word: str) -> bool:
    """A ``KEY=VALUE`` word (``policy.n=10``, ``+model.x=1``), by its shape."""
    return bool(OVERRIDE.match(word))


def split_args(items: Sequence[str]) -> tuple[list[str], list[str]]:
    """Positional words are paths, except KEY=VALUE overrides (``policy.n=10``)."""
    paths, overrides = [], []
    for it in items:
        (overrides if is_override(it) and not _exists(it) else paths).append(it)
    return paths, overrides


def _exists(word: str) -> bool:
    """A file of that name exists; a name the system cannot hold (too long) names no file."""
    try:
        return Path(word).exists()
    except OSError:
        return False


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        return f"{v:,.3f}"
    return str(v)


def format_table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    """``rows`` as aligned text columns for people: numbers right-aligned with thousands separators,
    None as ``-``."""
    cells = [[_cell(r.get(c)) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    numeric = [all(isinstance(r.get(c), int | float) or r.get(c) is None for r in rows) for c in columns]

    def line(values: list[str]) -> str:
        return "  ".join(
            v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric, strict=True)
        )

    out = [line(columns), line(["-" * w for w in widths])]
    out.extend(line(row) for row in cells)
    return "\n".join(s.rstrip() for s in out)


def progress(i: int, total: int, label: str, show: bool | None = None) -> None:
    """``label i/total`` on stderr. ``show`` None: on a terminal and only for long jobs (20 steps or
    more); True: always (a command's ``--progress``, or its terminal), one rewritten line on a terminal,
    else a line every ~10% and at the end so a log is not flooded; False: never."""
    tty = sys.stderr.isatty()
    if show is None:
        show = tty and total >= 20
    if not show or total < 1:
        return
    if tty:
        end = "\n" if i == total else ""
        print(f"\r{label} {i}/{total}", end=end, file=sys.stderr, flush=True)
    elif i == total or i * 10 // total != (i - 1) * 10 // total:
        print(f"{label} {i}/{total}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------- shared flags
def add_model_options(p: argparse.ArgumentParser) -> None:
    """``--model NAME`` and ``--window N`` as ``run`` and ``explain`` take them (``model_flags``)."""
    p.add_argument(
        "--model", metavar="NAME", help="price and window as this model (as --pricing NAME model.window=...)"
    )
    p.add_argument(
        "--window",
        type=int,
        help="provider context window in tokens (as model.window=N; default: the model's)",
    )


def model_flags(args: argparse.Namespace, window: int | str, pricing: str) -> tuple[int | str, str]:
    """``--model NAME`` (price as NAME, and NAME's window unless ``--window`` is given) and ``--window N``
    on ``run`` and ``explain``, as ``size`` and ``sweep`` take them: (window, pricing)."""
    if args.model:
        from sim.cost.models import resolve_window
        from sim.cost.pricing import price_named

        price_named(args.model)  # an unknown name: exit 2 with the closest ones
        if pricing not in ("auto", args.model):
            raise ConfigError(f"--model {args.model} and --pricing {pricing} disagree: give one")
        pricing = args.model
        if args.window is None and (w := resolve_window(args.model)) is not None:
            window = w
    if args.window is not None:
        if args.window < 1:
            raise ConfigError(f"--window {args.window} is not an integer >= 1")
        if args.window > MAX_COUNT:  # a count the engine's int64 columns hold exactly (sim.util.limits)
            text = str(args.window)
            shown = text if len(text) <= 40 else f"{text[:20]}... ({len(text)} digits)"
            raise ConfigError(f"--window {shown} is out of range: expected an integer in [1, 2^53)")
        window = args.window
    return window, pricing


def add_allow_module(p: argparse.ArgumentParser, as_word: str = "") -> None:
    """``--allow-module MODULE`` (repeatable): the only way a policy config's ``_target_`` names code of
    the user's."""
    p.add_argument(
        "--allow-module",
        action="append",
        metavar="MODULE",
        help="let a policy config's _target_ name a Policy subclass from this module"
        + (f" ({as_word})" if as_word else " of yours (repeatable)"),
    )


def add_mock_model_options(p: argparse.ArgumentParser, as_words: bool = False) -> None:
    """``--on-missing`` and ``--summarizer``, the mock model's two behaviours a study varies, on every
    command that replays. ``as_words``: the command also takes ``model.KEY=V`` words, and the flags stand
    for them (unset: the config's value); else the flags carry the model's defaults (``size``)."""
    same = "as model.on_missing=X; " if as_words else ""
    p.add_argument(
        "--on-missing",
        choices=ON_MISSING_CHOICES,
        default=None if as_words else "refetch",
        help=f"what the agent does when a needed fact is gone ({same}default refetch: re-read, at a cost)",
    )
    same = "as model.summarizer=X; " if as_words else ""
    p.add_argument(
        "--summarizer",
        choices=SUMMARIZER_CHOICES,
        default=None if as_words else "extractive",
        help=f"the mock model's summarizer ({same}default extractive; oracle is an upper bound)",
    )


def mock_model_words(args: argparse.Namespace) -> list[str]:
    """``--on-missing X`` and ``--summarizer X`` as the ``model.KEY=X`` words they stand for."""
    words = []
    if args.on_missing is not None:
        words.append(f"model.on_missing={args.on_missing}")
    if args.summarizer is not None:
        words.append(f"model.summarizer={args.summarizer}")
    return words


def add_workers_option(p: argparse.ArgumentParser, default: int | None, text: str) -> None:
    """``--workers N`` with the command's own help ``text`` and the range ``check_workers`` holds it to
    when the command runs."""
    p.add_argument("--workers", type=int, default=default, metavar="N", help=f"{text}; in [1, {MAX_WORKERS}]")


class TakenBeforeParsing(argparse.Action):
    """A flag argparse lists in ``--help`` but never reads: ``sim.cli.main`` takes it off the line first.
    Reaching argparse means an abbreviation of it (``--transf``), refused rather than silently dropped."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        parser.error(f"argument {option_string}: spell it in full, as {self.option_strings[0]}")


def add_transform_option(p: argparse.ArgumentParser) -> None:
    """``--transform NAME [transform.KEY=VALUE ...]`` in the command's ``--help``. The words themselves
    are taken off the line before argparse reads it (``sim.config.transforms.take_transforms``, in
    ``sim.cli.main``), since their ``transform.KEY=VALUE`` words follow the flag."""
    p.add_argument(
        "--transform",
        dest="transforms",
        action=TakenBeforeParsing,
        metavar="NAME",
        help="rewrite each trace with this harness transform (conf/transform/NAME.yaml) before the replay; "
        "transform.KEY=VALUE words after it set its knobs (repeatable, applied in order)",
    )


def transforms_of(args: argparse.Namespace) -> list[Any]:
    """The command line's ``--transform NAME [transform.KEY=VALUE ...]``, composed (none: [])."""
    specs = getattr(args, "transforms", None)
    if not specs:
        return []
    from sim.config.transforms import compose_transforms

    return compose_transforms(specs)
