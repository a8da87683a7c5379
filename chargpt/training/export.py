"""What a run leaves for people and for `from_pretrained`: the final model folder (weights, tokenizer,
`train_results.json`, model card, loss curve) and per-epoch snapshots, each written whole or not at all.

A `--seeds` run (a `SeedStack`) leaves one such folder per member, OUTPUT_DIR/seed-S, as its separate run would
leave OUTPUT_DIR (its snapshots in OUTPUT_DIR/seed-S/epoch-N); checkpoints and logs stay in OUTPUT_DIR."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch
from accelerate import Accelerator
from transformers import PreTrainedModel, PreTrainedTokenizer

from modeling_chargpt import CharGPTConfig
from modeling_chargpt.pipeline_chargpt import save_pipeline_files

from .files import atomic_write_json, replace_folder
from .flops import flops_per_position
from .hub import note_answering, write_model_card
from .reporting import plot_loss_curve
from .state import TrainResult, TrainState, saved_seconds


def save_answering(folder: str | os.PathLike, answering: dict[str, Any]) -> None:
    """A saved model answers by `answering` from now on (a threshold, a calibration): its config, read with
    `from_pretrained` and made anew with that field, is written by `save_pretrained` into a temporary folder and
    renamed over config.json (whole or not at all), with the pipeline's code that applies it (a folder saved before
    carries code that would not); its card follows."""
    config = CharGPTConfig.from_dict({**CharGPTConfig.from_pretrained(folder).to_dict(), "answering": answering})
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        config.save_pretrained(tmp)
        save_pipeline_files(tmp)
        for code in sorted(Path(tmp).glob("*.py")):
            os.replace(code, Path(folder) / code.name)
        os.replace(Path(tmp) / "config.json", Path(folder) / "config.json")
    note_answering(folder)


def _folders(model: torch.nn.Module, output_dir: str) -> list[tuple[torch.nn.Module, Path, int | None]]:
    """(model, folder, member index) for each model to save: the model into `output_dir`, or each member of a
    `SeedStack` or `SeedEnsemble` into `output_dir`/seed-S."""
    if getattr(model, "seeds", None) is not None:  # a `--seeds` model: SeedStack or SeedEnsemble
        return [(member, Path(output_dir) / f"seed-{seed}", i) for i, (seed, member)
                in enumerate(zip(model.seeds, model.members, strict=True))]
    return [(model, Path(output_dir), None)]


def _write_pretrained(
    accelerator: Accelerator, model: PreTrainedModel, tokenizer: PreTrainedTokenizer, folder: Path, results: dict
) -> None:
    """A fresh `folder` with save_pretrained's model and tokenizer files and `train_results.json`."""
    shutil.rmtree(folder, ignore_errors=True)
    unwrapped = accelerator.unwrap_model(model)
    save_pipeline_files(folder)  # pipeline(model=folder, trust_remote_code=True) answers
    unwrapped.save_pretrained(folder)
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
    unwrapped = accelerator.unwrap_model(model)
    for member, out, i in _folders(unwrapped, output_dir):
        member_result = result if i is None else result.member(i)
        member_card = card if i is None else {**card, "seed": unwrapped.seeds[i]}
        out.mkdir(parents=True, exist_ok=True)
        tmp = out / ".tmp-final"
        summary = member_result.summary()
        _write_pretrained(accelerator, member, tokenizer, tmp, {**summary, "losses": member_result.losses})
        write_model_card(tmp / "README.md", {**member_card, **summary})
        if card.get("stage", "").startswith("finetuning"):  # a model that answers questions says how
            note_answering(tmp)
        plot_loss_curve(member_result.losses, tmp / "loss_curve.png", title=card.get("title", "training loss"))
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
        for member, out, i in _folders(accelerator.unwrap_model(model), output_dir):
            loss = state.last_loss if i is None or not isinstance(state.last_loss, list) else state.last_loss[i]
            positions = state.train_positions if i is None else state.train_positions[i]
            results = {"epoch": state.epoch, "global_step": state.global_step, "final_loss": loss,
                       "train_seconds": saved_seconds(train_seconds), "train_positions": positions,
                       "train_flops": float(f"{positions * flops_per_position(member):.4g}")}
            tmp = out / f".tmp-epoch-{state.epoch}"
            _write_pretrained(accelerator, member, tokenizer, tmp, results)
            replace_folder(tmp, out / f"epoch-{state.epoch}")
    accelerator.wait_for_everyone()
