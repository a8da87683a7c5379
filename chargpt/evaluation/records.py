"""Per-question records of an evaluation: was the answer retrieved from wiki.txt or made up, and how sure was the model?

A prediction alone does not say whether the model read the place in the person's wiki.txt line or invented it (the
assignment's last written question). A record says more: the model's probability of its own answer, whether that
answer occurs in the person's wiki.txt line ("grounded"), anywhere in wiki.txt, and whether the person occurs there
at all. `evaluate_birthplace.py` writes one record per question as JSON Lines beside its predictions file
(``<predictions>.records.jsonl``, line i = question i: `chargpt.evaluation.record_files`);
`chargpt.evaluation.confidence` and `chargpt.evaluation.report_html` read them.

Record fields: ``line`` (of the question in the evaluated TSV), ``question``, ``gold`` (None for test inputs),
``answer`` (the model's greedy answer), ``prediction`` (the predictions file's line: the answer, or "" where the
evaluation abstained), ``abstained``, ``correct`` (answer == gold, abstention aside; None without gold),
``logprob`` (the answer's characters and its closing MASK, summed log-probabilities), ``min_char_prob`` (the least
likely of those characters), ``confidence`` (exp(logprob): the probability of exactly this answer), ``grounded``
(answer occurs in one of the person's wiki.txt lines), ``gold_grounded`` (the gold place does), ``place_in_wiki``
(answer occurs anywhere in wiki.txt), ``person_in_wiki`` and ``wiki_lines`` (the person's lines: ``{"line", "text"}``),
``recitation`` (what a `--recite True` model said about the person before answering; None for other models) and
``recitation_logprob`` (its part of ``logprob``: for such a model the scores cover its whole output, the recitation
after the name, the MASK that ended it, the answer and the closing MASK; None for other models). Scores are None
without a model (the London baseline), grounding fields None without wiki.txt or for a question that is not
``Where was NAME born?``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from data_scripts import read_text_file
from modeling_chargpt.answering import AnswerScore, asked_person
from modeling_chargpt.grounding import WikiIndex, whole_word_spans

__all__ = [
    "WikiIndex",
    "build_records",
    "find_wiki",
    "whole_word_spans",
]

def find_wiki(wiki_path: str | os.PathLike | None, eval_corpus_path: str | os.PathLike) -> WikiIndex | None:
    """`wiki_path`, or else wiki.txt beside the evaluated TSV (the data folder's layout); None where there is none,
    and then nothing is called grounded or not. A file that cannot be read is a one-line error naming it."""
    path = Path(wiki_path) if wiki_path else Path(eval_corpus_path).with_name("wiki.txt")
    return WikiIndex(read_text_file(path), path) if wiki_path or path.is_file() else None  # an error line comes alone


# ---------------------------------------------------------------------------------------------------------------
# the model's probability of its own answer
# ---------------------------------------------------------------------------------------------------------------


# ---------------------------------------------------------------------------------------------------------------
# records
# ---------------------------------------------------------------------------------------------------------------


def build_records(
    questions: Sequence[str],
    gold: Sequence[str],
    answers: Sequence[str],
    scores: Sequence[AnswerScore] | None = None,
    wiki: WikiIndex | None = None,
    abstain_below: float | None = None,
    abstain_ungrounded: bool = False,
    recitations: Sequence[str] | None = None,
    recitation_scores: Sequence[AnswerScore] | None = None,
    signals: Sequence[Mapping[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """One record per question (see the module docstring); gold "" means unknown (test inputs). With
    `recitation_scores`, a record's scores are the recitation's and the answer's together: `confidence` is the
    probability of the model's whole output.

    An answer is not given (its prediction is "") with `abstain_below`, where its confidence is below it, and with
    `abstain_ungrounded`, where it does not occur in the person's wiki.txt lines (one that cannot be checked, with
    no wiki or another kind of question, is given). `signals` (from the pipeline, per question: ``name_score``, the
    name's familiarity, and ``right_probability``, the calibrated probability that the answer is right, None for a
    model saved without a calibration) are kept in each record as they are; `abstain_below` then applies to the
    calibrated probability, as the pipeline's threshold does.
    """
    records = []
    for i, (question, gold_place, answer) in enumerate(zip(questions, gold, answers, strict=True)):
        score = scores[i] if scores is not None else None
        recited = recitation_scores[i] if recitation_scores is not None else None
        if score is not None:
            score = score.after(recited)
        confidence = score.confidence if score is not None else None
        grounding = _grounding(question, gold_place, answer, wiki)
        calibrated = signals[i].get("right_probability") if signals is not None else None
        sure = calibrated if calibrated is not None else confidence  # what the pipeline abstains on
        abstained = (abstain_below is not None and sure is not None and sure < abstain_below) or (
            abstain_ungrounded and grounding["grounded"] is False)
        record: dict[str, Any] = {
            "line": i + 1, "question": question, "gold": gold_place or None, "answer": answer,
            "prediction": "" if abstained else answer, "abstained": abstained,
            "correct": (answer == gold_place) if gold_place else None,
            "logprob": score.logprob if score else None, "min_char_prob": score.min_char_prob if score else None,
            "confidence": confidence, "recitation": recitations[i] if recitations is not None else None,
            "recitation_logprob": recited.logprob if recited is not None else None,
        }
        record.update(grounding)
        if signals is not None:
            record.update(signals[i])
        records.append(record)
    return records


def _grounding(question: str, gold: str, answer: str, wiki: WikiIndex | None) -> dict[str, Any]:
    person = asked_person(question)
    if wiki is None or person is None:
        return {"grounded": None, "gold_grounded": None, "place_in_wiki": None, "person_in_wiki": None,
                "wiki_lines": []}
    lines = wiki.lines_with(person)
    return {
        "grounded": wiki.occurs_in(answer, lines),
        "gold_grounded": wiki.occurs_in(gold, lines) if gold else None,
        "place_in_wiki": wiki.occurs(answer),
        "person_in_wiki": bool(lines),
        "wiki_lines": [{"line": n, "text": wiki.lines[n - 1]} for n in lines],
    }
