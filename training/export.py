"""What a run leaves for people and for `from_pretrained`: the final model folder (weights, tokenizer,
`train_results.json`, model card, loss curve) and per-epoch snapshots, each written whole or not at all."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from accelerate import Accelerator
from transformers import PreTrainedModel, PreTrainedTokenizer

from .files import atomic_write_json, replace_folder
from .reporting import plot_loss_curve, write_model_card
from .state import TrainResult, TrainState


def _write_pretrained(
    accelerator: Accelerator, model: PreTrainedModel, tokenizer: PreTrainedTokenizer, folder: Path, results: dict
) -> None:
    """A fresh `folder` with save_pretrained's model and tokenizer files and `train_results.json`."""
    shutil.rmtree(folder, ignore_errors=True)
    accelerator.unwrap_model(model).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    atomic_write_json(folder / "train_results.json", results, indent=None)


def save_final(
    accelerator: Accelerator,
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizer,
    output_dir: str,
    result: TrainResult,
    card: dict,
) -> None:
    """save_pretrained into a temporary folder, then move the files into `output_dir`."""
    accelerator.wait_for_everyone()
    if not accelerator.is_main_process:
        return
    out = Path(output_dir)
    tmp = out / ".tmp-final"
    summary = result.summary()
    _write_pretrained(accelerator, model, tokenizer, tmp, {**summary, "losses": result.losses})
    write_model_card(tmp / "README.md", {**card, **summary})
    plot_loss_curve(result.losses, tmp / "loss_curve.png", title=card.get("title", "training loss"))
    for item in tmp.iterdir():
        os.replace(item, out / item.name)
    tmp.rmdir()


def save_snapshot(
    accelerator: Accelerator,
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizer,
    output_dir: str,
    state: TrainState,
    train_seconds: float,
) -> None:
    """save_pretrained the model as it is after `state.epoch` epochs into OUTPUT_DIR/epoch-N (atomically), with
    the seconds it took: snapshots of one run for an accuracy-vs-compute curve."""
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        results = {"epoch": state.epoch, "global_step": state.global_step, "final_loss": state.last_loss,
                   "train_seconds": round(train_seconds, 3)}
        final = Path(output_dir) / f"epoch-{state.epoch}"
        tmp = Path(output_dir) / f".tmp-epoch-{state.epoch}"
        _write_pretrained(accelerator, model, tokenizer, tmp, results)
        replace_folder(tmp, final)
    accelerator.wait_for_everyone()
