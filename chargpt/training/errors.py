"""The errors the training package raises for the user's input: the bottom of its imports (it imports nothing)."""

from __future__ import annotations


class UsageError(ValueError):
    """A bad flag combination or incompatible input, reported as one line without a traceback."""


class TrainingDivergedError(RuntimeError):
    """The loss became NaN or infinite; training stopped before the bad step touched the weights."""
