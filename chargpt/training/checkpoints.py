"""Resumable checkpoints: Accelerate's state (model, optimizer, RNG) plus `trainer_state.json` (the loop's
counters, the schedule and the losses), written so a crash never leaves a broken latest checkpoint."""

from __future__ import annotations

import json
import pickle
import re
import shutil
from pathlib import Path
from typing import Any

from accelerate import Accelerator
from safetensors import SafetensorError

from .errors import UsageError
from .files import atomic_write_json, replace_folder
from .schedule import TokenCosineSchedule
from .state import TrainState, saved_seconds

CHECKPOINT_DIR = "checkpoints"
TRAINER_STATE = "trainer_state.json"
# What a checkpoint must share with the run that resumes it, besides the stage and the vocabulary (`run_identity`)
IDENTITY_FIELDS = ("vocab_size", "block_size", "n_layer", "n_head", "n_embd", "position_embedding_type",
                   "attention_type", "rope_theta", "answer_format")


def run_identity(model: Any, tokenizer: Any, stage: str) -> dict[str, Any]:
    """The stage, the model's shape and kind, and the vocabulary (its characters in id order) of a run: saved in
    every checkpoint, so resuming into another run is one line naming what differs, not a state_dict traceback. A
    `--seeds` run's members share all of it."""
    config = getattr(model, "members", [model])[0].config
    identity: dict[str, Any] = {"stage": stage, **{name: getattr(config, name, None) for name in IDENTITY_FIELDS}}
    if tokenizer is not None:
        vocab = tokenizer.get_vocab()
        identity["vocabulary"] = "".join(sorted(vocab, key=vocab.get))
    return identity


def _differences(saved: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """Each field where a checkpoint's identity and this run's differ, as 'NAME THERE there, HERE here'."""
    out = []
    for name in current:
        there, here = saved.get(name), current[name]
        if name not in saved or there == here:
            continue
        if name == "vocabulary":
            pairs = enumerate(zip(there, here, strict=False))
            first = next((i for i, (a, b) in pairs if a != b), min(len(there), len(here)))
            out.append(f"vocabulary of {len(there)} characters there, {len(here)} here (first difference at id "
                       f"{first})")
        else:
            out.append(f"{name} {there} there, {here} here")
    return out


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
    accelerator: Accelerator, output_dir: str, save_total_limit: int, state: TrainState, schedule: TokenCosineSchedule,
    identity: dict[str, Any] | None = None,
) -> Path:
    """Write into a temporary folder and rename it, so a crash mid-save never leaves a broken latest checkpoint;
    `identity` (`run_identity`) is kept with the counters."""
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
                         "train_seconds": saved_seconds(state.train_seconds),
                         "train_positions": state.train_positions,
                         **({"seeds": state.seeds} if state.seeds is not None else {}),
                         **({"stack_seeds": True} if state.stacked else {}),
                         **({"run": identity} if identity is not None else {})}
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
    stacked: bool = False, identity: dict[str, Any] | None = None,
) -> TrainState:
    """Restore Accelerate's state and the schedule from `path`; returns the loop's counters as they were saved.

    A checkpoint of a `--seeds` run resumes only with the same seeds (and a plain one only without): other
    members would not load, or would train on another seed's batches; stacked members (`--stack_seeds`) resume
    only stacked, their weights being saved as stacked tensors. A checkpoint of another stage, model or vocabulary
    than `identity` says (`run_identity`) is refused in one line naming each difference."""
    try:
        saved = json.loads((path / TRAINER_STATE).read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise UsageError(f"--resume_from_checkpoint {path}: {TRAINER_STATE} is damaged or truncated ({err}); "
                         "resume from an earlier checkpoint") from None
    written = (saved.get("seeds"), saved.get("stack_seeds", False))
    if written != (seeds, stacked):
        raise UsageError(f"--resume_from_checkpoint {path}: written by a run {_seeds_flag(*written)}, "
                         f"resumed {_seeds_flag(seeds, stacked)}")
    differences = _differences(saved.get("run", {}), identity or {})
    if differences:
        raise UsageError(f"--resume_from_checkpoint {path}: written by another run ({'; '.join(differences)})")
    try:
        accelerator.load_state(str(path))
    except (RuntimeError, SafetensorError, pickle.UnpicklingError, EOFError) as err:
        mismatch = re.search(r"(size mismatch for .*|Missing key\(s\).*|Unexpected key\(s\).*)", str(err))
        if mismatch is not None:  # an older checkpoint, saved without its run's identity
            raise UsageError(f"--resume_from_checkpoint {path}: written by another run ({mismatch.group(1)})") from None
        first_line = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise UsageError(f"--resume_from_checkpoint {path}: a file of it is damaged or truncated ({first_line}); "
                         "resume from an earlier checkpoint") from None
    schedule.load_state_dict(saved["schedule"])
    return TrainState(saved["global_step"], saved["epoch"], saved["step_in_epoch"],
                      [tuple(x) for x in saved["losses"]], seeds=seeds, stacked=stacked,
                      train_seconds=saved.get("train_seconds", 0.0),  # older checkpoints did not count them
                      train_positions=saved.get("train_positions", 0))
