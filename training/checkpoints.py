"""Resumable checkpoints: Accelerate's state (model, optimizer, RNG) plus `trainer_state.json` (the loop's
counters, the schedule and the losses), written so a crash never leaves a broken latest checkpoint."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from accelerate import Accelerator

from .errors import UsageError
from .files import atomic_write_json, replace_folder
from .schedule import TokenCosineSchedule
from .state import TrainState

CHECKPOINT_DIR = "checkpoints"
TRAINER_STATE = "trainer_state.json"


def find_latest_checkpoint(output_dir: str) -> Path | None:
    """The newest complete checkpoint under `output_dir` (one with its trainer state), or None."""
    root = Path(output_dir) / CHECKPOINT_DIR
    done = sorted(p for p in root.glob("step-*") if (p / TRAINER_STATE).is_file()) if root.is_dir() else []
    return done[-1] if done else None


def resolve_checkpoint(output_dir: str, spec: str) -> Path:
    """The folder `--resume_from_checkpoint` names: a checkpoint folder, or 'latest' in `output_dir`."""
    if spec == "latest":
        latest = find_latest_checkpoint(output_dir)
        if latest is None:
            root = Path(output_dir) / CHECKPOINT_DIR
            raise FileNotFoundError(f"--resume_from_checkpoint latest: no checkpoint in {root}")
        return latest
    path = Path(spec)
    if not (path / TRAINER_STATE).is_file():
        raise FileNotFoundError(f"--resume_from_checkpoint {spec}: not a complete checkpoint (no {TRAINER_STATE})")
    return path


def save_checkpoint(
    accelerator: Accelerator, output_dir: str, save_total_limit: int, state: TrainState, schedule: TokenCosineSchedule
) -> Path:
    """Write into a temporary folder and rename it, so a crash mid-save never leaves a broken latest checkpoint."""
    root = Path(output_dir) / CHECKPOINT_DIR
    final = root / f"step-{state.global_step:08d}"
    tmp = root / f".tmp-step-{state.global_step:08d}"
    if accelerator.is_main_process:
        shutil.rmtree(tmp, ignore_errors=True)
        root.mkdir(parents=True, exist_ok=True)
    accelerator.wait_for_everyone()
    accelerator.save_state(str(tmp), safe_serialization=True)
    if accelerator.is_main_process:
        trainer_state = {"global_step": state.global_step, "epoch": state.epoch, "step_in_epoch": state.step_in_epoch,
                         "schedule": schedule.state_dict(), "losses": state.losses,
                         "train_seconds": round(state.train_seconds, 3),
                         **({"seeds": state.seeds} if state.seeds is not None else {}),
                         **({"stack_seeds": True} if state.stacked else {})}
        atomic_write_json(tmp / TRAINER_STATE, trainer_state, indent=None)
        replace_folder(tmp, final)
        for old in sorted(root.glob("step-*"))[: -max(1, save_total_limit)]:
            shutil.rmtree(old, ignore_errors=True)
    accelerator.wait_for_everyone()
    return final


def _seeds_flag(seeds: list[int] | None, stacked: bool = False) -> str:
    flag = "without --seeds" if seeds is None else f"--seeds {','.join(map(str, seeds))}"
    return f"{flag} --stack_seeds" if stacked else flag


def load_checkpoint(
    accelerator: Accelerator, path: Path, schedule: TokenCosineSchedule, seeds: list[int] | None = None,
    stacked: bool = False,
) -> TrainState:
    """Restore Accelerate's state and the schedule from `path`; returns the loop's counters as they were saved.

    A checkpoint of a `--seeds` run resumes only with the same seeds (and a plain one only without): other
    members would not load, or would train on another seed's batches; stacked members (`--stack_seeds`) resume
    only stacked, their weights being saved as stacked tensors."""
    saved = json.loads((path / TRAINER_STATE).read_text())
    written = (saved.get("seeds"), saved.get("stack_seeds", False))
    if written != (seeds, stacked):
        raise UsageError(f"--resume_from_checkpoint {path}: written by a run {_seeds_flag(*written)}, "
                         f"resumed {_seeds_flag(seeds, stacked)}")
    accelerator.load_state(str(path))
    schedule.load_state_dict(saved["schedule"])
    return TrainState(saved["global_step"], saved["epoch"], saved["step_in_epoch"],
                      [tuple(x) for x in saved["losses"]], seeds=seeds, stacked=stacked,
                      train_seconds=saved.get("train_seconds", 0.0))  # older checkpoints did not count them
