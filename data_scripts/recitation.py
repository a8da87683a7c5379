"""Recite, then answer (not in the reference): finetuning rows that teach a pretrained model to say what it read
about a person before it names the birthplace.

A pretrained model continues its own wiki.txt line far more often than it answers the question (probe_recall.py),
so the answer can come from the model's own recitation (Sun et al., "Recitation-Augmented Language Models", ICLR
2023). For a training question about NAME whose document starts with NAME, the row is::

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

import os

import datasets

from modeling_chargpt import IGNORE_INDEX, UnknownCharacterError
from modeling_chargpt.answering import asked_person, recitation_text  # the question format's owner

from .mixing import question_documents
from .textfiles import DataFileError

__all__ = ["recitation_dataset", "recitation_example"]


def recitation_example(name: str, document: str, answer: str, tokenizer, block_size: int) -> dict[str, list[int]]:
    """``{"input_ids", "labels"}`` (each ``block_size`` long): targets after the name, PAD ignored."""
    ids = tokenizer.encode_text(recitation_text(name, document, answer, block_size))
    pad = tokenizer.pad_token_id
    labels = [IGNORE_INDEX if (i < len(name) or t == pad) else t for i, t in enumerate(ids)]
    return {"input_ids": ids, "labels": labels}


def recitation_dataset(
    qa: datasets.Dataset, documents: list[str], tokenizer, block_size: int, source: str | os.PathLike,
    needed_by: str = "--recite True",
) -> datasets.Dataset:
    """The recitation rows of a `load_qa_tsv` Dataset of ``Where was NAME born?`` questions, each matched to the
    document that starts with NAME (`question_documents`); a question without one, an answer that does not fit or a
    character outside the vocabulary is a `DataFileError` naming ``source`` and its line (and ``needed_by``, the
    option that asked for the rows, where the document is missing)."""
    which = question_documents(qa["question"], documents, source, needed_by=needed_by)
    rows: dict[str, list[list[int]]] = {"input_ids": [], "labels": []}
    for line, (question, answer, doc) in enumerate(zip(qa["question"], qa["answer"], which, strict=True), start=1):
        try:
            row = recitation_example(asked_person(question), documents[doc], answer, tokenizer, block_size)
        except (ValueError, UnknownCharacterError) as err:
            raise DataFileError(source, line, str(err)) from None
        for key in rows:
            rows[key].append(row[key])
    features = datasets.Features({key: datasets.Sequence(datasets.Value("int64")) for key in rows})
    return datasets.Dataset.from_dict(rows, features=features)
