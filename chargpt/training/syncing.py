"""The step's losses kept on the device between sync points, so that a step needs no host synchronisation.

Reading a loss (`loss.item()`) waits for the device to finish the step; on a GPU that wait, every step, made
training bound by the host. The loop keeps each step's loss on the device and reads a whole window back in one
transfer every `--sync_steps` steps and before anything is saved: the finite-loss check, the logs and the Ctrl-C
flag happen there. A NaN therefore still stops training before any checkpoint holding it is written.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch
from accelerate import Accelerator

from .checkpoints import find_latest_checkpoint
from .errors import TrainingDivergedError
from .state import Loss


def resolve_sync_steps(sync_steps: int, logging_steps: int, accelerator: Accelerator) -> int:
    """`--sync_steps`, where 0 means: every step on a CPU (nothing to overlap there), every log step elsewhere."""
    if sync_steps > 0:
        return sync_steps
    return 1 if accelerator.device.type == "cpu" else max(1, logging_steps)


class LossWindow:
    """Losses of the steps since the last sync point, on the device; `read_back` moves them to the host at once.

    A step's loss is a scalar, or with `seeds` (a `--seeds` run) one loss per seed: read back as a list.
    """

    def __init__(self, output_dir: str | Path, sync_steps: int, seeds: list[int] | None = None) -> None:
        self.output_dir, self.sync_steps, self.seeds = output_dir, sync_steps, seeds
        self._pending: list[tuple[int, int, torch.Tensor]] = []  # (global step, epoch, loss on the device)
        self._ready: list[tuple[int, int, Loss]] = []  # read back, finite, not yet taken

    def add(self, step: int, epoch: int, loss: torch.Tensor) -> None:
        """Keep optimizer step `step`'s loss (of 0-based `epoch`; one per seed with `seeds`) without reading it.

        A copy on the device, not the tensor itself: under `--torch_compile_mode reduce-overhead` the loss lives in a
        CUDA graph's output buffer, which the next step's replay overwrites (torch then refuses to read it).
        """
        self._pending.append((step, epoch, loss.detach().clone()))

    def read_back(self, next_update: int) -> None:
        """One transfer for the whole window; a NaN or infinite loss raises, naming the last good checkpoint.

        `next_update` is the first step whose update has not been applied: the step being trained when the loop
        calls this between its forward and backward passes, else the one after the last step.
        """
        if not self._pending:
            return
        values = torch.stack([loss for _, _, loss in self._pending]).float().tolist()
        pending, self._pending = self._pending, []
        for (step, epoch, _), value in zip(pending, values, strict=True):
            for i, member in enumerate(value if isinstance(value, list) else [value]):
                if not math.isfinite(member):
                    seed = self.seeds[i] if self.seeds else None
                    raise TrainingDivergedError(self._diverged(step, epoch, member, next_update, seed))
            self._ready.append((step, epoch, value))

    def drop_after(self, step: int) -> None:
        """Forget losses of steps after `step` (a step interrupted before it was counted)."""
        self._pending = [entry for entry in self._pending if entry[0] <= step]

    def take(self) -> list[tuple[int, int, Loss]]:
        """The `(step, epoch, loss)` triples read back since the last call, oldest first."""
        ready, self._ready = self._ready, []
        return ready

    def _diverged(self, step: int, epoch: int, value: float, next_update: int, seed: int | None) -> str:
        latest = find_latest_checkpoint(str(self.output_dir))
        if step == next_update:
            where = "stopped before updating the weights"
        else:  # read back later: the weights took the bad updates, but no checkpoint after them was written
            where = (f"read back before step {next_update} (losses are read every --sync_steps {self.sync_steps} "
                     "steps); stopped without saving a checkpoint after it")
        member = "" if seed is None else f", seed {seed}"
        return (f"loss became {value} at step {step} (epoch {epoch + 1}{member}); {where}. Last good checkpoint: "
                f"{latest or 'none'}. Try a lower --learning_rate.")
