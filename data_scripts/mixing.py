"""Mixed training: name prompts spread evenly through the pretraining epoch (opt-in, not in the reference).

Fully pretrained models here store most birthplaces (`experiments/probe_recall.py` recalls 405-434 of 449 dev places)
yet answer only about a third of the questions: what they lack is the way from a question to a stored fact. Mixing
question/answer pairs into pretraining (Allen-Zhu & Li, "Physics of Language Models: Part 3.1", 2023) is meant to
teach that way while the facts are stored; only training-set pairs are mixed in, so dev and test people's facts
still come from wiki.txt alone. Measured on rope at a 1-hour CPU budget, it did not help (docs/results.md). The
same interleaving serves finetuning's `--replay_pretraining`, with the roles of the two datasets swapped.

The order is fixed and even, so a DataLoader without shuffling (the reference's) still sees both kinds in every
batch instead of all the questions at the end of each epoch. `mixed_order` varies it for pretraining: each prompt
``repeats`` times per epoch (a higher QA share helped in Allen-Zhu & Li), and optionally each question right before
its person's document (pre-instruction-tuning, Jiang et al., ACL 2024: QA placed before its document beat after or
interleaved). A shuffling DataLoader permutes any of these orders, so placement only matters without shuffling.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Sequence, Sized
from typing import Any

from torch.utils.data import Dataset

from modeling_chargpt.answering import asked_person

from .textfiles import DataFileError

__all__ = ["PLACEMENTS", "InterleavedDataset", "check_order", "even_interleaving", "mixed_order", "question_documents"]

PLACEMENTS = ("even", "before_document")


def even_interleaving(n_first: int, n_second: int) -> list[tuple[int, int]]:
    """``(source, index)`` pairs taking every item of both sources once, each source's items in order and spread
    evenly over the whole: item k of a source of n sits near fraction (k + 0.5) / n (ties go to source 0)."""
    if n_first < 0 or n_second < 0:
        raise ValueError(f"dataset sizes must be >= 0, got {n_first} and {n_second}")
    order = [((k + 0.5) / n_first, 0, k) for k in range(n_first)]
    order += [((k + 0.5) / n_second, 1, k) for k in range(n_second)]
    order.sort()
    return [(source, k) for _, source, k in order]


def mixed_order(
    n_documents: int, n_prompts: int, repeats: int = 1, document_of: Sequence[int] | None = None
) -> list[tuple[int, int]]:
    """One pretraining epoch as ``(source, index)`` pairs, documents (source 0) once and prompts (source 1)
    ``repeats`` times each.

    'even' (no ``document_of``): the documents and ``repeats`` passes over the prompts, spread evenly
    (`even_interleaving` of ``n_documents`` and ``repeats * n_prompts`` items; ``repeats=1`` is exactly it), so a
    prompt's copies are 1/repeats of an epoch apart.
    'before_document' (``document_of[i]`` = the document of prompt i): the first copy of each prompt sits right
    before its document (prompts sharing a document in prompt order); copy j sits j/repeats of an epoch later
    (wrapping around), right after the document found there, so a person's questions are as evenly spaced as in
    'even' and extra copies add exposures at other steps instead of duplicates in one batch.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    if document_of is None:
        return [(s, k % n_prompts if s else k) for s, k in even_interleaving(n_documents, repeats * n_prompts)]
    if len(document_of) != n_prompts:
        raise ValueError(f"document_of has {len(document_of)} entries for {n_prompts} prompts")
    # positions in units of 1 / (2 * n_documents * repeats) of an epoch, exact: document d at its even_interleaving
    # place (d + 0.5) / n_documents; then rank 0 (first copies) < 1 (the document) < 2 (later copies)
    epoch = 2 * n_documents * repeats
    keyed = [((2 * d + 1) * repeats, 1, 0, d) for d in range(n_documents)]
    for prompt, doc in enumerate(document_of):
        if not 0 <= doc < n_documents:
            raise ValueError(f"prompt {prompt}: document {doc} is not among the {n_documents} documents")
        place = (2 * doc + 1) * repeats
        keyed += [((place + copy * 2 * n_documents) % epoch, 2 if copy else 0, 1, prompt) for copy in range(repeats)]
    keyed.sort()
    return [(source, k) for _, _, source, k in keyed]


def question_documents(
    questions: Sequence[str], documents: Sequence[str], source: str | os.PathLike,
    needed_by: str = "--mixed_qa_placement before_document",
) -> list[int]:
    """The document each ``Where was NAME born?`` question's person is read in: one that starts with NAME.

    Matched by name, not by line number: the real wiki.txt line i is ``NAME. ...`` for question i. A document
    starting with ``NAME.`` is preferred to one where NAME is followed by another non-alphanumeric character (the
    synthetic world's ``NAME was born ...``); among those, the first one not yet taken. Longer names choose first, so
    ``Robert E. Lee`` keeps his line from a question about ``Robert E``; questions sharing a name take that name's
    documents in order. A question that is not of that form, or whose person has no document left, is a
    `DataFileError` naming ``source`` (the TSV) and its line, and ``needed_by`` (the option that needs the match).
    """
    texts = sorted((text, i) for i, text in enumerate(documents))
    keys = [text for text, _ in texts]
    taken: set[int] = set()
    names = []
    for line, question in enumerate(questions, start=1):
        name = asked_person(question)
        if name is None:
            raise DataFileError(source, line, f"{question!r} is not 'Where was NAME born?': {needed_by} needs the "
                                "person's name")
        names.append(name)
    found = [-1] * len(questions)
    for q in sorted(range(len(names)), key=lambda q: -len(names[q])):
        name, candidates = names[q], []
        for j in range(bisect.bisect_left(keys, name), len(keys)):
            text, doc = texts[j]
            if not text.startswith(name):
                break
            after = text[len(name):len(name) + 1]
            if doc not in taken and not after.isalnum():
                candidates.append((after != ".", doc))
        if not candidates:
            raise DataFileError(source, q + 1, f"no document (wiki.txt line) left that starts with the name "
                                f"{name!r}: {needed_by} needs the person's document")
        found[q] = min(candidates)[1]
        taken.add(found[q])
    return found


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
