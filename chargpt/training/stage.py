"""The end both training scripts share: train, push the model where asked, report where it went."""

from __future__ import annotations

from typing import Any

from accelerate import Accelerator

from .hub import push_if_asked
from .loop import train
from .reporting import report_done


def train_stage(accelerator: Accelerator, model: Any, tokenizer: Any, dataset: Any, collate_fn: Any, args: Any, *,
                stage: str, seeds: list[int] | None, **schedule: Any) -> int:
    """`train` (its `schedule` keywords: final_tokens, tokens_per_example, card, on_epoch_start), then the Hub
    upload `--push_to_hub` asks for, then the one line saying where the model (each `--seeds` member) was saved;
    the exit status."""
    result = train(accelerator, model, tokenizer, dataset, collate_fn, args, run_name=stage, **schedule)
    push_if_asked(accelerator, args, result, seeds)
    saved_to = args.output_dir if seeds is None else f"{args.output_dir}/seed-{{{','.join(map(str, seeds))}}}"
    return report_done(accelerator, result, stage.removesuffix("e") + "ing", saved_to)  # pretraining, finetuning
