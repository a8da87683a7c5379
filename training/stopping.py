"""Ctrl-C as a request the training loop reads between steps."""

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
        self._previous: object = None
        self._installed = False

    def install(self) -> StopRequest:
        if threading.current_thread() is threading.main_thread():  # only the main thread may set handlers
            self._previous, self._installed = signal.signal(signal.SIGINT, self._handle), True
        return self

    def restore(self) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, self._previous)
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
