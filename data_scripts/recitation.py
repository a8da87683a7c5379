"""Recite, then answer (not in the reference): finetuning rows that teach a pretrained model to say what it read
about a person before it names the birthplace.

A pretrained model continues its own wiki.txt line far more often than it answers the question
(chargpt.evaluation.probe_recall), so the answer can come from the model's own recitation (Sun et al.,
"Recitation-Augmented Language Models", ICLR 2023). For a training question about NAME whose document starts with NAME,
the row is::

    document[:cut] + MASK + answer + MASK + PAD...

``cut`` ends the document right after the answer's first occurrence that is not inside a mention of the name
(wiki.txt lines repeat it: "Paris Hilton. Paris Hilton was born in New York City"), the whole document if there is
none, and never beyond ``recitation_limit(block_size)`` characters or where the answer would not fit.
``labels`` are -100 on the name (the prompt) and on PAD: the recitation, the MASK, the answer and the closing MASK
are targets. At evaluation the model gets NAME, recites up to its MASK, then answers after it
(`modeling_chargpt.answering.recite`). Only training questions ever become rows; a dev person's document is known to the
model through pretraining alone.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Sequence

import datasets

from modeling_chargpt import IGNORE_INDEX, UnknownCharacterError
from modeling_chargpt.answering import asked_person, recitation_text  # the question format's owner

from .textfiles import DataFileError

__all__ = ["question_documents", "recitation_dataset", "recitation_example"]


def question_documents(
    questions: Sequence[str], documents: Sequence[str], source: str | os.PathLike,
    needed_by: str = "--recite True",
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


def recitation_example(name: str, document: str, answer: str, tokenizer, block_size: int,
                       limit: int | None = None) -> dict[str, list[int]]:
    """``{"input_ids", "labels"}`` (each ``block_size`` long): targets after the name, PAD ignored; the recitation
    cut at ``limit`` characters (default: `recitation_limit`)."""
    ids = tokenizer.encode_text(recitation_text(name, document, answer, block_size, limit))
    pad = tokenizer.pad_token_id
    labels = [IGNORE_INDEX if (i < len(name) or t == pad) else t for i, t in enumerate(ids)]
    return {"input_ids": ids, "labels": labels}


def recitation_dataset(
    qa: datasets.Dataset, documents: list[str], tokenizer, block_size: int, source: str | os.PathLike,
    needed_by: str = "--recite True", limit: int | None = None,
) -> datasets.Dataset:
    """The recitation rows of a `load_qa_tsv` Dataset of ``Where was NAME born?`` questions, each matched to the
    document that starts with NAME (`question_documents`); a question without one, an answer that does not fit or a
    character outside the vocabulary is a `DataFileError` naming ``source`` and its line (and ``needed_by``, the
    option that asked for the rows, where the document is missing)."""
    which = question_documents(qa["question"], documents, source, needed_by=needed_by)
    rows: dict[str, list[list[int]]] = {"input_ids": [], "labels": []}
    for line, (question, answer, doc) in enumerate(zip(qa["question"], qa["answer"], which, strict=True), start=1):
        try:
            row = recitation_example(asked_person(question), documents[doc], answer, tokenizer, block_size, limit)
        except (ValueError, UnknownCharacterError) as err:
            raise DataFileError(source, line, str(err)) from None
        for key in rows:
            rows[key].append(row[key])
    features = datasets.Features({key: datasets.Sequence(datasets.Value("int64")) for key in rows})
    return datasets.Dataset.from_dict(rows, features=features)
