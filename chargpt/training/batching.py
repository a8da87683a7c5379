"""How examples become batches: the `--packing` choice, the example count the schedule needs, and a DataLoader as a
batch source with the on-device batches' interface (`epoch`, `len`, `dropped`), so the loop treats both alike."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial

from accelerate import Accelerator
from torch.utils.data import DataLoader
from transformers import PreTrainedTokenizer

from data_scripts import PackedCollator, pad_collate


def collate_for(packing: bool, block_size: int, tokenizer: PreTrainedTokenizer) -> Callable[[list], dict]:
    """`--packing` (several examples per row, no PAD compute) or the reference's padded batches."""
    if packing:
        return PackedCollator(block_size, pad_token_id=tokenizer.pad_token_id)
    return partial(pad_collate, pad_token_id=tokenizer.pad_token_id)


class CountingCollate:
    """Adds `num_examples` to each batch: packing changes the rows, not the examples the schedule counts.

    A class rather than a closure so DataLoader workers can pickle it on every OS.
    """

    def __init__(self, collate_fn: Callable) -> None:
        self.collate_fn = collate_fn

    def __call__(self, examples: list) -> dict:
        return {**self.collate_fn(examples), "num_examples": len(examples)}


class LoaderBatches:
    """A prepared DataLoader read epoch by epoch: `on_epoch_start(epoch)` re-draws the span corruption, and a resumed
    epoch skips the batches already trained on."""

    def __init__(self, accelerator: Accelerator, loader: DataLoader,
                 on_epoch_start: Callable[[int], None] | None = None) -> None:
        self.accelerator, self.loader, self.on_epoch_start = accelerator, loader, on_epoch_start

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
