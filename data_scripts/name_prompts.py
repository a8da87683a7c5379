"""Name prompts: the reference's `NameDataset` in the transformers label convention.

Reference: the TSV text loses every non-ASCII character, then for ``question<TAB>answer``
``x = question + MASK + answer + MASK`` padded with PAD to block_size,
``y = PAD * (len(question) - 1) + x[len(question):]``, trained as ``x[:-1] -> y`` with PAD targets ignored.

Here ``input_ids`` is the padded ``x`` and ``labels`` is aligned with it (the model shifts): -100 on the
question's characters and on PAD, the ids elsewhere. So the first target is the MASK right after the question
(predicted from the question's last character), then the answer, then the closing MASK: the reference's y term
for term. The vocabulary is the pretraining tokenizer's (built from wiki.txt).
"""

from __future__ import annotations

import hashlib
import json
import os

import datasets

from modeling_chargpt import IGNORE_INDEX, UnknownCharacterError
from modeling_chargpt.answering import name_prompt_text  # the question format's owner

from .loading import ascii_only
from .textfiles import DataFileError

__all__ = ["name_prompt_dataset", "name_prompt_example"]


def name_prompt_example(question: str, answer: str, tokenizer, block_size: int) -> dict[str, list[int]]:
    """``{"input_ids", "labels"}`` (each ``block_size`` long) for one ``question``/``answer`` pair."""
    ids = tokenizer.encode_text(name_prompt_text(ascii_only(question), ascii_only(answer), block_size))
    n_question = len(ascii_only(question))
    pad = tokenizer.pad_token_id
    labels = [IGNORE_INDEX if (i < n_question or t == pad) else t for i, t in enumerate(ids)]
    return {"input_ids": ids, "labels": labels}


def _fingerprint(qa: datasets.Dataset, tokenizer, block_size: int) -> str:
    vocab = json.dumps(tokenizer.get_vocab(), sort_keys=True, ensure_ascii=False)
    key = f"name_prompts:{qa._fingerprint}:{block_size}:{vocab}"
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]


def name_prompt_dataset(
    qa: datasets.Dataset, tokenizer, block_size: int, source: str | os.PathLike | None = None
) -> datasets.Dataset:
    """The name prompts of a `load_qa_tsv` Dataset: columns ``input_ids`` and ``labels`` (lists of ints,
    ``block_size`` long), ready for `pad_collate` or `PackedCollator`.

    ``source`` is the file `qa` was loaded from (row i is its line i + 1, as `load_qa_tsv` allows no blank
    lines): a character outside the vocabulary is then a `DataFileError` naming the file and line, not just the
    character. Built in memory (no cache file; the fingerprint is derived from the rows, vocabulary and block size).
    """

    def encode(batch: dict, indices: list[int]) -> dict:
        out = []
        for index, question, answer in zip(indices, batch["question"], batch["answer"], strict=True):
            try:
                out.append(name_prompt_example(question, answer, tokenizer, block_size))
            except UnknownCharacterError as err:
                if source is None:
                    raise
                raise DataFileError(source, index + 1, str(err)) from None
        return {"input_ids": [o["input_ids"] for o in out], "labels": [o["labels"] for o in out]}

    features = datasets.Features(
        {
            "input_ids": datasets.Sequence(datasets.Value("int64")),
            "labels": datasets.Sequence(datasets.Value("int64")),
        }
    )
    return qa.map(
        encode,
        batched=True,
        with_indices=True,
        remove_columns=qa.column_names,
        features=features,
        keep_in_memory=True,
        load_from_cache_file=False,
        new_fingerprint=_fingerprint(qa, tokenizer, block_size),
        desc=None,
    )
