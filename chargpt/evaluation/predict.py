"""Checks before an evaluation decodes anything, asking a file of questions through the pipeline, and the exact-match
metric (answering itself is `modeling_chargpt.answering`)."""

from __future__ import annotations

import math
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


def asked_from_records(path: str | os.PathLike, questions: Sequence[str], settings: AnsweringSettings) -> list[dict]:
    """What `ask_all` gives for `questions` at `settings`, read from the records of an evaluation
    (evaluate_birthplace.py's PREDICTIONS.records.jsonl) of the same model answering the same way instead of asked
    again: the answer, the name's familiarity, the whole output's log-probability (``output_logprob``) and raw
    probability, and the confidence and abstention `settings` give them (its calibration and threshold, which may be
    newer than the evaluation). Records of other questions, or unscored ones, are refused naming the file and line."""
    from modeling_chargpt.calibration import Calibration, signals

    from .record_files import read_records

    records = read_records(path)
    if len(records) != len(questions):
        raise DataFileError(path, len(records), f"{len(records)} records for {len(questions)} questions")
    calibration = Calibration.from_dict(settings.calibration) if settings.calibration else None
    results = []
    for line, (record, question) in enumerate(zip(records, questions, strict=True), start=1):
        if record["question"] != question or record.get("logprob") is None or "name_score" not in record:
            raise DataFileError(path, line, f"not a scored answer to {question!r}")
        found = signals(record["name_score"], record["logprob"])
        confidence = calibration.probability(**found) if calibration and found else None
        probability = math.exp(record["logprob"])
        sure = confidence if calibration else probability
        results.append({"question": question, "answer": record["answer"], "confidence": confidence,
                        "probability": probability, "name_score": record["name_score"],
                        "output_logprob": record["logprob"],
                        "abstained": settings.abstain_below is not None and sure is not None
                        and sure < settings.abstain_below})
    return results
