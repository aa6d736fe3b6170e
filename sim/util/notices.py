"""The warning category of input that is odd but usable: its own small module, so the command line can
route these warnings to standard error at start without importing any importer."""

from __future__ import annotations


class ImportNotice(UserWarning):
    """Something in a source file was odd but importable; the CLI prints it on standard error."""


class KnobDeprecation(FutureWarning):
    """A policy knob given by its old name (``Policy.knob_aliases``): still taken, to be dropped later."""
