"""How examples become batches, and what the loop trains from.

A batch source is all the loop knows of where batches come from and what that asks of the model (`BatchSource`).
`LoaderBatches` is the reference's: a DataLoader over a dataset, prepared by Accelerate. The fast path's batches
built on the device, several seeds in one process and their stacked model are another source
(chargpt/training/fast_path.py), which the loop never names. Also here: the `--packing` choice and the example count
the schedule needs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial
from typing import Protocol

from accelerate import Accelerator
from torch import nn
from torch.optim import Optimizer
from torch.utils.data import DataLoader, Dataset
from transformers import PreTrainedTokenizer

from data_scripts import PackedCollator, pad_collate

from .arguments import TrainingArguments


def collate_for(packing: bool, block_size: int, tokenizer: PreTrainedTokenizer) -> Callable[[list], dict]:
    """`--packing` (several examples per row, no PAD compute) or the reference's padded batches."""
    if packing:
        return PackedCollator(block_size, pad_token_id=tokenizer.pad_token_id)
    return partial(pad_collate, pad_token_id=tokenizer.pad_token_id)


class CountingCollate:
    """Adds `num_examples` to each batch (packing changes the rows, not the examples the schedule counts) and
    `num_positions`, the token positions the step computes (its FLOPs).

    A class rather than a closure so DataLoader workers can pickle it on every OS.
    """

    def __init__(self, collate_fn: Callable) -> None:
        self.collate_fn = collate_fn

    def __call__(self, examples: list) -> dict:
        batch = self.collate_fn(examples)
        return {**batch, "num_examples": len(examples), "num_positions": batch["input_ids"].numel()}


class BatchSource(Protocol):
    """What the loop trains from: it sets up the model and optimizer it trains (`setup`), compiles the steps
    (`compile`), clips the gradients (`clipper`), and yields each epoch's batches, each with its `num_examples` (the
    schedule's count) and `num_positions` (the token positions it computes)."""

    seeds: list[int] | None  # the seeds trained together (`--seeds`), in order; None for one model
    stacked: bool  # whether their parameters are stacked (`--stack_seeds`): the checkpoints say so

    def setup(self, accelerator: Accelerator, model: nn.Module, make_optimizer: Callable[[nn.Module], Optimizer],
              args: TrainingArguments) -> tuple[nn.Module, Optimizer]: ...

    def compile(self, model: nn.Module, compile: Callable[[nn.Module], nn.Module]) -> nn.Module: ...

    def clipper(self, accelerator: Accelerator, model: nn.Module, max_norm: float) -> Callable[[], None]: ...

    def __len__(self) -> int: ...

    def epoch(self, epoch: int, skip: int = 0) -> Iterable[dict]: ...

    def dropped(self) -> int: ...


def clip_whole(accelerator: Accelerator, model: nn.Module, max_norm: float) -> Callable[[], None]:
    """The reference's clipping: the norm of every gradient of `model` at once."""
    parameters = list(model.parameters())
    return lambda: accelerator.clip_grad_norm_(parameters, max_norm)


class LoaderBatches:
    """The reference's batch source: a DataLoader over `dataset`, prepared by Accelerate with the model and
    optimizer, read epoch by epoch; `on_epoch_start(epoch)` re-draws the span corruption, and a resumed epoch skips
    the batches already trained on."""

    seeds, stacked = None, False

    def __init__(self, dataset: Dataset, collate_fn: Callable,
                 on_epoch_start: Callable[[int], None] | None = None) -> None:
        self.dataset, self.collate_fn, self.on_epoch_start = dataset, collate_fn, on_epoch_start

    def setup(self, accelerator: Accelerator, model: nn.Module, make_optimizer: Callable[[nn.Module], Optimizer],
              args: TrainingArguments) -> tuple[nn.Module, Optimizer]:
        loader = DataLoader(self.dataset, batch_size=args.per_device_train_batch_size, shuffle=args.shuffle,
                            collate_fn=CountingCollate(self.collate_fn), num_workers=args.dataloader_num_workers)
        model, optimizer, self.loader = accelerator.prepare(model, make_optimizer(model), loader)
        self.accelerator = accelerator
        return model, optimizer

    def compile(self, model: nn.Module, compile: Callable[[nn.Module], nn.Module]) -> nn.Module:
        return compile(model)

    def clipper(self, accelerator: Accelerator, model: nn.Module, max_norm: float) -> Callable[[], None]:
        return clip_whole(accelerator, model, max_norm)

    def __len__(self) -> int:
        return len(self.loader)

    def epoch(self, epoch: int, skip: int = 0) -> Iterable[dict]:
        if self.on_epoch_start is not None:
            self.on_epoch_start(epoch)
        self.loader.set_epoch(epoch)
        return self.accelerator.skip_first_batches(self.loader, skip) if skip else self.loader

    def dropped(self) -> int:
        """Examples left out of the loss: none (the collator packs or pads every one)."""
        return 0


class WatchedBatches:
    """A batch source that shows every batch to `watch(epoch, batch)` as the loop takes it (benchmarks count rows
    and targets with it, tests record what was trained); everything else is the source's."""

    def __init__(self, batches, watch: Callable[[int, dict], None]) -> None:
        self.batches, self.watch = batches, watch

    def __getattr__(self, name: str):
        return getattr(self.batches, name)

    def __len__(self) -> int:
        return len(self.batches)

    def epoch(self, epoch: int, skip: int = 0) -> Iterable[dict]:
        for batch in self.batches.epoch(epoch, skip):
            self.watch(epoch, batch)
            yield batch
