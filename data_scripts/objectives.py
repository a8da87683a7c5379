"""Pretraining objectives: what a wiki.txt document becomes, declared once for both data paths.

An `Objective` names its `datasets` transform (the reference path: a `SpanCorruption`-like class with
``set_epoch``), its rows built on the training device (`device_rows`, read by `device_batches.EncodedExamples`), and
the shortest document it can train on. A new objective is those two halves (corruption.py holds today's) and one
entry in `OBJECTIVES`; `train_pretrain.py --objective` offers every entry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import datasets
import torch

from .corruption import (
    CORRUPTION_SPECS,
    PlainDocuments,
    SpanCorruption,
    corrupt_documents,
    draw_corruptions,
    plain_rows,
)

__all__ = ["OBJECTIVES", "Objective", "objective_named", "span_corruption_dataset"]

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


@dataclass(frozen=True)
class Objective:
    transform: type[SpanCorruption]  # the datasets path: an on-access transform, re-drawn per epoch
    device_rows: Callable[[EncodedDocuments, torch.Tensor, torch.Generator], Rows]  # documents `doc`, on the device
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


OBJECTIVES: dict[str, Objective] = {
    "span_corruption": Objective(SpanCorruption, _corrupted),  # the reference
    "language_modeling": Objective(PlainDocuments, _plain, min_length=2),  # uncorrupted: what reciting asks
}


def objective_named(name: str) -> Objective:
    if name not in OBJECTIVES:
        raise ValueError(f"objective {name!r}: choose one of {', '.join(OBJECTIVES)}")
    return OBJECTIVES[name]


def span_corruption_dataset(
    docs: datasets.Dataset, tokenizer, block_size: int, seed: int = 0, objective: str = "span_corruption",
    spec: str = CORRUPTION_SPECS[0],
) -> tuple[datasets.Dataset, SpanCorruption]:
    """``docs`` (from `load_pretrain_corpus`, those the objective trains on) with the objective's transform applied
    on access, and the transform itself (call its ``set_epoch`` every epoch)."""
    chosen = objective_named(objective)
    corruption = chosen.transform(tokenizer, block_size, seed, spec)
    return chosen.documents(docs).with_transform(corruption), corruption
