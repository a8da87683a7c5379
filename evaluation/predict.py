"""Checks before an evaluation decodes anything, and the exact-match metric (answering itself is
`modeling_chargpt.answering`)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from importlib.resources import as_file, files

import evaluate

from data_scripts import DataFileError
from modeling_chargpt import MASK_CHAR, PAD_CHAR, CharGPTConfig, CharTokenizer, UnknownCharacterError
from modeling_chargpt.answering import asked_person, recitation_limit

METRIC_SCRIPT = "birthplace_accuracy.py"  # an `evaluate` metric script shipped inside this package


def load_metric() -> evaluate.EvaluationModule:
    """The exact-match metric, loaded offline from this package's own files (a checkout or an installed wheel).

    Hub metrics cannot load offline; `evaluate` copies a local script into its modules cache, so the file only has
    to exist while it loads (`as_file` extracts it if the package is zipped)."""
    with as_file(files(__package__) / METRIC_SCRIPT) as script:
        return evaluate.load(str(script))


def check_questions(
    path: str | os.PathLike,
    questions: Sequence[str],
    tokenizer: CharTokenizer,
    config: CharGPTConfig,
    max_new_tokens: int,
) -> None:
    """Refuse, naming `path` and the line, a question the model cannot answer, before any decoding starts.
    A model finetuned with `--recite True` (`config.answer_format`) needs ``Where was NAME born?`` questions, and
    answers after a recitation of at most `recitation_limit` characters instead of after the question.

    `questions[i]` is line i + 1 of `path` (`load_qa_tsv` allows no blank lines). A question must use only the
    vocabulary's characters (the reference looks each one up and fails on the first unknown one), must not
    contain PAD or MASK (MASK ends the question), and, for learned positions or synthesizer attention, question
    + MASK + `max_new_tokens` generated characters must fit in `block_size`.
    """
    bounded = config.position_embedding_type == "learned" or config.attention_type == "synthesizer"
    recites = config.answer_format == "recite"
    for line, question in enumerate(questions, start=1):
        if recites and asked_person(question) is None:
            raise DataFileError(path, line, f"{question!r} is not 'Where was NAME born?': this model was finetuned "
                                "to recite what it read about NAME before it answers (answer_format='recite')")
        for special, name in ((PAD_CHAR, "PAD"), (MASK_CHAR, "MASK")):
            if special in question:
                raise DataFileError(path, line, f"the question contains the reserved {name} character {special!r}")
        try:
            tokenizer.encode_text(asked_person(question) if recites else question)  # the text the model is given
        except UnknownCharacterError as err:
            raise DataFileError(path, line, str(err)) from None
        context = recitation_limit(config.block_size) if recites else len(question)
        need = context + max_new_tokens  # context + MASK + answer, the last character never fed back
        if bounded and need > config.block_size:
            raise DataFileError(
                path, line,
                f"{'the recitation' if recites else 'question'} + MASK is {context + 1} characters; with "
                f"max_new_tokens={max_new_tokens} decoding "
                f"needs {need} positions, more than this model's block_size={config.block_size} "
                f"({config.position_embedding_type} positions, {config.attention_type} attention)",
            )
