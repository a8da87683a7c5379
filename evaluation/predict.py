"""Checks before an evaluation decodes anything, and the exact-match metric (answering itself is
`modeling_chargpt.answering`)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from importlib.resources import as_file, files

import evaluate

from data_scripts import DataFileError
from modeling_chargpt import CharGPTConfig, CharTokenizer
from modeling_chargpt.answering import question_problem

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
    """Refuse, naming `path` and the line, a question the model cannot answer (`question_problem`), before any
    decoding starts. `questions[i]` is line i + 1 of `path` (`load_qa_tsv` allows no blank lines)."""
    for line, question in enumerate(questions, start=1):
        problem = question_problem(question, tokenizer, config, max_new_tokens)
        if problem is not None:
            raise DataFileError(path, line, problem)
