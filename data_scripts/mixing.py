"""Mixed training: name prompts spread evenly through the pretraining epoch (opt-in, not in the reference).

Fully pretrained models here store most birthplaces (`chargpt/evaluation/probe_recall.py` recalls 405-434 of 449 dev
places) yet answer only about a third of the questions: what they lack is the way from a question to a stored fact.
Mixing question/answer pairs into pretraining (Allen-Zhu & Li, "Physics of Language Models: Part 3.1", 2023) is meant to
teach that way while the facts are stored; only training-set pairs are mixed in, so dev and test people's facts
still come from wiki.txt alone. Measured on rope at a 1-hour CPU budget, it did not help (docs/results.md).

The order is fixed and even, so a DataLoader without shuffling (the reference's) still sees both kinds in every
batch instead of all the questions at the end of each epoch. `mixed_order` repeats each prompt ``repeats`` times
per epoch (a higher QA share helped in Allen-Zhu & Li). Placing each question right before its person's document
(Jiang et al., ACL 2024) and QA-only first epochs measured no gain here (docs/results-cpu.md) and left the CLI.
"""

from __future__ import annotations

from collections.abc import Sequence, Sized
from typing import Any

from torch.utils.data import Dataset

__all__ = ["InterleavedDataset", "check_order", "even_interleaving", "mixed_order"]


def even_interleaving(n_first: int, n_second: int) -> list[tuple[int, int]]:
    """``(source, index)`` pairs taking every item of both sources once, each source's items in order and spread
    evenly over the whole: item k of a source of n sits near fraction (k + 0.5) / n (ties go to source 0)."""
    if n_first < 0 or n_second < 0:
        raise ValueError(f"dataset sizes must be >= 0, got {n_first} and {n_second}")
    order = [((k + 0.5) / n_first, 0, k) for k in range(n_first)]
    order += [((k + 0.5) / n_second, 1, k) for k in range(n_second)]
    order.sort()
    return [(source, k) for _, source, k in order]


def mixed_order(n_documents: int, n_prompts: int, repeats: int = 1, document_repeats: int = 1) -> list[tuple[int, int]]:
    """One pretraining epoch as ``(source, index)`` pairs: ``document_repeats`` passes over the documents (source 0)
    and ``repeats`` passes over the prompts (source 1), spread evenly (`even_interleaving` of
    ``document_repeats * n_documents`` and ``repeats * n_prompts`` items; both 1 is exactly it), so a prompt's copies
    are 1/repeats of an epoch apart and a document's 1/document_repeats."""
    if repeats < 1 or document_repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats} and {document_repeats}")
    return [(s, k % n_prompts if s else k % n_documents)
            for s, k in even_interleaving(document_repeats * n_documents, repeats * n_prompts)]


def check_order(order: Sequence[tuple[int, int]], first: Sized, second: Sized) -> list[tuple[int, int]]:
    """``order`` as a list, after checking that each ``(source, index)`` names an item of ``first`` or ``second``."""
    sizes = (len(first), len(second))
    order = list(order)
    if any(not (source in (0, 1) and 0 <= k < sizes[source]) for source, k in order):
        raise ValueError(f"order names an item outside the sources (of {sizes[0]} and {sizes[1]} items)")
    return order


class InterleavedDataset(Dataset):
    """Two map-style datasets with the same columns read as one, in `even_interleaving` order or in ``order``
    (``(source, index)`` pairs, e.g. `mixed_order`).

    Indexing goes through to the sources, so an on-access transform (the span corruption, re-drawn every epoch)
    still runs on every read.
    """

    def __init__(self, first: Sized, second: Sized, order: Sequence[tuple[int, int]] | None = None) -> None:
        self.sources = (first, second)
        self.order = even_interleaving(len(first), len(second)) if order is None else check_order(order, first, second)

    def __len__(self) -> int:
        return len(self.order)

    def __getitem__(self, i: int) -> dict[str, Any]:
        source, k = self.order[i]
        return self.sources[source][k]
