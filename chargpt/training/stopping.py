"""Ctrl-C (and SIGTERM, what `timeout` and job schedulers send) as a request the training loop reads between
steps."""

from __future__ import annotations

import signal
import threading

import torch
from accelerate import Accelerator


class StopRequest:
    """Ctrl-C as a flag the loop reads between steps; a second Ctrl-C raises at once.

    A KeyboardInterrupt raised wherever SIGINT lands can be lost (inside a `__del__` Python only prints it) and the
    run would go on to its end; a flag cannot be lost.
    """

    def __init__(self) -> None:
        self.requested = False
        self._previous: list = []
        self._installed = False

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def install(self) -> StopRequest:
        if threading.current_thread() is threading.main_thread():  # only the main thread may set handlers
            self._previous = [signal.signal(signum, self._handle) for signum in self.SIGNALS]
            self._installed = True
        return self

    def restore(self) -> None:
        if self._installed:
            for signum, previous in zip(self.SIGNALS, self._previous, strict=True):
                signal.signal(signum, previous)
            self._installed = False

    def _handle(self, signum: int, frame: object) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True

    def anywhere(self, accelerator: Accelerator) -> bool:
        """Whether any process was asked: all stop at the same step, or the others would hang in the next reduce."""
        if accelerator.num_processes == 1:
            return self.requested
        flag = torch.tensor(float(self.requested), device=accelerator.device)
        return accelerator.reduce(flag, reduction="sum").item() > 0
