"""Pretraining objectives: what a wiki.txt document becomes, declared once for both data paths.

An `Objective` names its `datasets` transform (the reference path: any `DocumentRows`, an on-access transform
with ``set_epoch``), its rows built on the training device (`device_rows`, read by `device_batches.EncodedExamples`),
the shortest document it can train on, the smallest block it fits in (`check_block`), how many tokens an example
counts in the learning-rate schedule (`tokens_per_example`) and a line for `--help`. A new objective is those
halves and one entry in `OBJECTIVES`; `train_pretrain.py --objective` offers every entry and reads the rest from it.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import datasets
import torch

from modeling_chargpt import IGNORE_INDEX, PAD_CHAR

from .corruption import (
    CORRUPTION_SPECS,
    SCHEDULE_TOKENS,
    PlainDocuments,
    SpanCorruption,
    corrupt_documents,
    draw_corruptions,
    plain_rows,
    truncation_range,
)

__all__ = ["OBJECTIVES", "DocumentRows", "Objective", "objective_named", "span_corruption_dataset"]

Rows = tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # input_ids, labels (n, block_size), lengths (n,)


class EncodedDocuments(Protocol):
    """What `device_rows` reads of `device_batches.EncodedExamples`: the documents' ids concatenated on the device,
    each one's offset and length, and the special tokens."""

    doc_ids: torch.Tensor
    doc_offsets: torch.Tensor
    doc_lengths: torch.Tensor
    block_size: int
    pad_token_id: int
    mask_token_id: int


class DocumentRows(Protocol):
    """The datasets path of an objective: `Dataset.with_transform` calls it on each access (columns ``text``,
    ``idx``; it returns ``input_ids`` and ``labels`` rows of block_size), and ``set_epoch`` re-draws its rows."""

    def set_epoch(self, epoch: int) -> None: ...

    def __call__(self, batch: dict) -> dict: ...


def _fits_span_corruption(block_size: int) -> None:
    truncation_range(block_size)  # raises ValueError below 9


def _handout_tokens(block_size: int, spec: str) -> int:
    return SCHEDULE_TOKENS[spec](block_size)  # the handout's len(y): what its schedule counts per example


def _at_least(smallest: int) -> Callable[[int], None]:
    def check(block_size: int) -> None:
        if not isinstance(block_size, int) or block_size < smallest:
            raise ValueError(f"needs an integer block_size >= {smallest}, got {block_size!r}")
    return check


@dataclass(frozen=True)
class Objective:
    transform: Callable[..., DocumentRows]  # (tokenizer, block_size, seed, spec) -> the datasets path's transform
    device_rows: Callable[[EncodedDocuments, torch.Tensor, torch.Generator], Rows]  # documents `doc`, on the device
    help: str  # what a document trains, for --help
    check_block: Callable[[int], None] = _at_least(2)  # ValueError for a block_size it cannot train in
    tokens_per_example: Callable[[int, str], int] = lambda block_size, spec: block_size  # the schedule's count
    min_length: int = 0  # shorter documents are left out on both paths (nothing to predict)

    def documents(self, docs: datasets.Dataset) -> datasets.Dataset:
        """The documents this objective trains on: all, or those of at least `min_length` characters (wiki.txt ends
        with an empty line, and a batch of only such rows would have no target at all)."""
        if not self.min_length:
            return docs
        return docs.filter(lambda text: len(text) >= self.min_length, input_columns="text", keep_in_memory=True)


def _corrupted(encoded: EncodedDocuments, doc: torch.Tensor, generator: torch.Generator) -> Rows:
    L, masked, start = draw_corruptions(encoded.doc_lengths[doc], encoded.block_size, generator)
    ids, labels = corrupt_documents(encoded.doc_ids, encoded.doc_offsets[doc], L, masked, start, encoded.block_size,
                                    encoded.pad_token_id, encoded.mask_token_id)
    return ids, labels, L + 2


def _plain(encoded: EncodedDocuments, doc: torch.Tensor, generator: torch.Generator) -> Rows:
    return plain_rows(encoded.doc_ids, encoded.doc_offsets[doc], encoded.doc_lengths[doc], encoded.block_size,
                      encoded.pad_token_id)


class RandomWindows:
    """`random_window`'s datasets path: document ``idx`` in epoch ``e`` is its block_size characters from a start
    drawn uniformly from those that leave a whole window (0 for a document that fits), by a generator of (seed, e,
    idx), so resuming or sharding sees the draws of one uninterrupted run; PAD after a short document."""

    def __init__(self, tokenizer, block_size: int, seed: int = 0, spec: str | None = None) -> None:
        self.tokenizer, self.block_size, self.seed, self.epoch = tokenizer, block_size, seed, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def window(self, text: str, idx: int) -> str:
        start = random.Random(f"{self.seed}:{self.epoch}:{int(idx)}").randint(0, max(len(text) - self.block_size, 0))
        piece = text[start:start + self.block_size]
        return piece + PAD_CHAR * (self.block_size - len(piece))

    def __call__(self, batch: dict) -> dict:
        rows = [self.tokenizer.encode_text(self.window(text, idx)) for text, idx in zip(batch["text"], batch["idx"],
                                                                                        strict=True)]
        pad = self.tokenizer.pad_token_id
        return {"input_ids": rows, "labels": [[IGNORE_INDEX if t == pad else t for t in row] for row in rows]}


def _windows(encoded: EncodedDocuments, doc: torch.Tensor, generator: torch.Generator) -> Rows:
    lengths = encoded.doc_lengths[doc]
    room = (lengths - encoded.block_size).clamp(min=0)
    start = torch.randint(0, 1 << 62, lengths.shape, generator=generator, device=lengths.device) % (room + 1)
    return plain_rows(encoded.doc_ids, encoded.doc_offsets[doc] + start, lengths - start, encoded.block_size,
                      encoded.pad_token_id)


OBJECTIVES: dict[str, Objective] = {
    "span_corruption": Objective(  # the reference; its schedule counts the handout's len(y) per example
        SpanCorruption, _corrupted, "the reference: a span of the document moved to its end after a MASK",
        check_block=_fits_span_corruption, tokens_per_example=_handout_tokens),
    "language_modeling": Objective(  # uncorrupted: what reciting asks
        PlainDocuments, _plain, "not in the reference: its first block_size characters uncorrupted, each predicted "
        "from the ones before, which is what reciting a person's line from the name (--recite True) asks",
        check_block=_fits_span_corruption, tokens_per_example=_handout_tokens,
        min_length=2),
    "random_window": Objective(  # the whole of a long line trained, not its first block only
        RandomWindows, _windows, "not in the reference: a window of block_size characters at a place of the "
        "document drawn anew every epoch, uncorrupted, each predicted from the ones before, so a line longer than "
        "the block is trained to its end", min_length=2),
}


def objective_named(name: str) -> Objective:
    if name not in OBJECTIVES:
        raise ValueError(f"objective {name!r}: choose one of {', '.join(OBJECTIVES)}")
    return OBJECTIVES[name]


def span_corruption_dataset(
    docs: datasets.Dataset, tokenizer, block_size: int, seed: int = 0, objective: str = "span_corruption",
    spec: str = CORRUPTION_SPECS[0],
) -> tuple[datasets.Dataset, DocumentRows]:
    """``docs`` (from `load_pretrain_corpus`, those the objective trains on) with the objective's transform applied
    on access, and the transform itself (call its ``set_epoch`` every epoch)."""
    chosen = objective_named(objective)
    chosen.check_block(block_size)
    corruption = chosen.transform(tokenizer, block_size, seed, spec)
    return chosen.documents(docs).with_transform(corruption), corruption
