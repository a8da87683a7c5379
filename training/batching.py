"""How examples become batches: the `--packing` choice, and the example count the schedule needs."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

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
