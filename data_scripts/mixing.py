"""Mixed training: name prompts spread evenly through the pretraining epoch (opt-in, not in the reference).

Fully pretrained models here store most birthplaces (`scripts/probe_recall.py` recalls 405-434 of 449 dev places)
yet answer only about a third of the questions: what they lack is the way from a question to a stored fact. Mixing
question/answer pairs into pretraining (Allen-Zhu & Li, "Physics of Language Models: Part 3.1", 2023) is meant to
teach that way while the facts are stored; only training-set pairs are mixed in, so dev and test people's facts
still come from wiki.txt alone. Measured on rope at a 1-hour CPU budget, it did not help (docs/results.md). The
same interleaving serves finetuning's `--replay_pretraining`, with the roles of the two datasets swapped.

The order is fixed and even, so a DataLoader without shuffling (the reference's) still sees both kinds in every
batch instead of all the questions at the end of each epoch.
"""

from __future__ import annotations

from collections.abc import Sized
from typing import Any

from torch.utils.data import Dataset

__all__ = ["InterleavedDataset", "even_interleaving"]


def even_interleaving(n_first: int, n_second: int) -> list[tuple[int, int]]:
    """``(source, index)`` pairs taking every item of both sources once, each source's items in order and spread
    evenly over the whole: item k of a source of n sits near fraction (k + 0.5) / n (ties go to source 0)."""
    if n_first < 0 or n_second < 0:
        raise ValueError(f"dataset sizes must be >= 0, got {n_first} and {n_second}")
    order = [((k + 0.5) / n_first, 0, k) for k in range(n_first)]
    order += [((k + 0.5) / n_second, 1, k) for k in range(n_second)]
    order.sort()
    return [(source, k) for _, source, k in order]


class InterleavedDataset(Dataset):
    """Two map-style datasets with the same columns read as one, in `even_interleaving` order.

    Indexing goes through to the sources, so an on-access transform (the span corruption, re-drawn every epoch)
    still runs on every read.
    """

    def __init__(self, first: Sized, second: Sized) -> None:
        self.sources = (first, second)
        self.order = even_interleaving(len(first), len(second))

    def __len__(self) -> int:
        return len(self.order)

    def __getitem__(self, i: int) -> dict[str, Any]:
        source, k = self.order[i]
        return self.sources[source][k]
