"""Checks before an evaluation decodes anything, asking a file of questions through the pipeline, and the exact-match
metric (answering itself is `modeling_chargpt.answering`)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from importlib.resources import as_file, files
from typing import Any

import evaluate
from tqdm.auto import tqdm

from data_scripts import DataFileError
from modeling_chargpt import TASK, BirthplaceQAPipeline, CharGPTConfig, CharTokenizer
from modeling_chargpt.answering import AnsweringSettings, question_problem

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


def ask_all(model, tokenizer: CharTokenizer, questions: Sequence[str], batch_size: int = 128,
            settings: AnsweringSettings | None = None, show_progress: bool = False, **call: Any) -> list[dict]:
    """The birthplace-qa pipeline's answer to each question, with its scores (``details``), in the order given:
    answering with `settings` (default: the model's saved ones) and the pipeline's `call` arguments. Questions go in
    sorted by length, so each batch pads little."""
    ask = BirthplaceQAPipeline(model=model, tokenizer=tokenizer, task=TASK, device=model.device, settings=settings)
    questions = list(questions)  # a datasets column reads each item through an Arrow table: 0.3 ms each
    order = sorted(range(len(questions)), key=lambda i: len(questions[i]))
    outputs = ask((questions[i] for i in order), batch_size=batch_size, details=True, **call)
    results: list = [None] * len(questions)
    for i, out in zip(order, tqdm(outputs, total=len(questions), desc="answering", disable=not show_progress),
                      strict=True):
        results[i] = out
    return results
