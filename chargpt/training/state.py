"""Where a run is (`TrainState`, what a checkpoint stores) and how it ended (`TrainResult`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

Loss = float | list[float]  # a step's loss: one per seed in a `--seeds` run (chargpt/training/seeds.py), in seed order
Positions = int | list[int]  # token positions computed: one count per seed in a `--seeds` run, in seed order


def saved_seconds(seconds: float) -> float:
    """Seconds trained as every file of a run writes them (checkpoints, snapshots, train_results.json, the model
    card): to the millisecond, one rounding for all, so a resumed run never reports less than its checkpoint."""
    return round(seconds, 3)


@dataclass
class TrainState:
    """The loop's counters and loss history; `train` advances it, checkpoints save and restore it."""

    global_step: int = 0
    epoch: int = 0  # epochs completed
    step_in_epoch: int = 0  # batches of the current epoch already trained on
    losses: list[tuple[int, Loss]] = field(default_factory=list)
    last_loss: Loss = math.nan
    seeds: list[int] | None = None  # a `--seeds` run's, so that a checkpoint resumes only the run that wrote it
    stacked: bool = False  # whether they are stacked (`--stack_seeds`): its checkpoints hold stacked tensors
    train_seconds: float = 0.0  # seconds trained up to the last save, every process before this one's included
    train_positions: Positions = 0  # token positions computed (forward and backward), every process's

    def advance(self) -> None:
        """Count one optimizer step (its loss is recorded when it is read back from the device)."""
        self.global_step += 1
        self.step_in_epoch += 1

    def record(self, step: int, loss: Loss) -> None:
        """Keep the loss of optimizer step `step`, read back from the device at a sync point."""
        self.last_loss = loss
        self.losses.append((step, [round(x, 5) for x in loss] if isinstance(loss, list) else round(loss, 5)))

    def count(self, positions: Positions) -> None:
        """Add a step's token positions (a `--seeds` step's: each member's)."""
        if isinstance(positions, list):
            done = self.train_positions or [0] * len(positions)
            self.train_positions = [a + b for a, b in zip(done, positions, strict=True)]
        else:
            self.train_positions += positions

    def end_epoch(self) -> None:
        self.epoch, self.step_in_epoch = self.epoch + 1, 0


@dataclass
class TrainResult:
    global_step: int
    epoch: float  # epochs completed, fractional when max_steps stopped mid-epoch
    final_loss: Loss
    losses: list[tuple[int, Loss]] = field(default_factory=list)
    train_seconds: float = 0.0
    interrupted: bool = False
    stopped_at_time_limit: bool = False  # --max_time_seconds ended it before its last step
    train_positions: Positions = 0  # token positions computed, every process's
    flops_per_position: float = 0.0  # training FLOPs per position (chargpt/training/flops.py)

    def member(self, i: int) -> TrainResult:
        """Member `i`'s result in a `--seeds` run: its final loss and loss history, as its separate run reports."""
        final = self.final_loss[i] if isinstance(self.final_loss, list) else self.final_loss  # nan: no step read
        positions = self.train_positions[i] if isinstance(self.train_positions, list) else self.train_positions
        return replace(self, final_loss=final, losses=[(step, loss[i]) for step, loss in self.losses],
                       train_positions=positions)

    def summary(self) -> dict:
        """What `train_results.json` and the model card report (the losses go to the JSON only)."""
        positions = self.train_positions
        positions = sum(positions) if isinstance(positions, list) else positions
        summary = {"global_step": self.global_step, "epoch": self.epoch, "final_loss": self.final_loss,
                   "train_seconds": saved_seconds(self.train_seconds), "train_positions": positions,
                   "train_flops": float(f"{positions * self.flops_per_position:.4g}")}
        return {**summary, "stopped_at_time_limit": True} if self.stopped_at_time_limit else summary
