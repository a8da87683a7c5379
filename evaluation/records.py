"""Per-question records of an evaluation: was the answer retrieved from wiki.txt or made up, and how sure was the model?

A prediction alone does not say whether the model read the place in the person's wiki.txt line or invented it (the
assignment's last written question). A record says more: the model's probability of its own answer, whether that
answer occurs in the person's wiki.txt line ("grounded"), anywhere in wiki.txt, and whether the person occurs there
at all. `evaluate_birthplace.py` writes one record per question as JSON Lines beside its predictions file
(``<predictions>.records.jsonl``, line i = question i: `evaluation.record_files`); `evaluation.confidence` and
`evaluation.report_html` read them.

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

import bisect
import os
from collections.abc import Iterator, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from data_scripts import read_text_file
from modeling_chargpt.answering import AnswerScore, asked_person

__all__ = [
    "WikiIndex",
    "build_records",
    "find_wiki",
    "whole_word_spans",
]

def find_wiki(wiki_path: str | os.PathLike | None, eval_corpus_path: str | os.PathLike) -> WikiIndex | None:
    """`wiki_path`, or else wiki.txt beside the evaluated TSV (the data folder's layout); None where there is none,
    and then nothing is called grounded or not."""
    path = Path(wiki_path) if wiki_path else Path(eval_corpus_path).with_name("wiki.txt")
    return WikiIndex.from_file(path) if wiki_path or path.is_file() else None  # no log: an error line comes alone


# ---------------------------------------------------------------------------------------------------------------
# grounding: does a place occur in the person's wiki.txt line(s)?
# ---------------------------------------------------------------------------------------------------------------


def _word_char(text: str, i: int) -> bool:
    return 0 <= i < len(text) and (text[i].isalnum() or text[i] == "_")


def whole_word_spans(text: str, phrase: str) -> Iterator[tuple[int, int]]:
    """(start, end) of each occurrence of `phrase` in `text` that is not part of a longer word (no letter, digit or _
    right before or after it): how places and names are found in wiki.txt, and highlighted. A blank phrase occurs
    nowhere. A literal search: a regex with look-arounds took 30 ms per name over the real wiki.txt."""
    if not phrase.strip():
        return
    start = text.find(phrase)
    while start >= 0:
        end = start + len(phrase)
        if not _word_char(text, start - 1) and not _word_char(text, end):
            yield start, end
        start = text.find(phrase, start + 1)


class WikiIndex:
    """wiki.txt's lines, searched for whole-word occurrences (``York`` is in ``New York City``, ``Ely`` is not in
    ``Kelly``). A person's lines are the lines that contain the full name (real data: one line, ``Name. ...``)."""

    def __init__(self, text: str, path: str | os.PathLike | None = None) -> None:
        self.text, self.path = text, path
        self.lines = text.split("\n")
        self._starts = [0]
        for line in self.lines[:-1]:
            self._starts.append(self._starts[-1] + len(line) + 1)
        self.lines_with = cache(self._lines_with)

    @classmethod
    def from_file(cls, path: str | os.PathLike) -> WikiIndex:
        return cls(read_text_file(path), path)

    def _lines_with(self, phrase: str) -> tuple[int, ...]:
        """1-based numbers of the lines where `phrase` occurs as whole words."""
        return tuple(sorted({bisect.bisect_right(self._starts, start)
                             for start, _ in whole_word_spans(self.text, phrase)}))

    def occurs(self, phrase: str) -> bool:
        return bool(self.lines_with(phrase))

    def occurs_in(self, phrase: str, line_numbers: Sequence[int]) -> bool:
        return any(next(whole_word_spans(self.lines[n - 1], phrase), None) for n in line_numbers)


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
) -> list[dict[str, Any]]:
    """One record per question (see the module docstring); gold "" means unknown (test inputs). With
    `recitation_scores`, a record's scores are the recitation's and the answer's together: `confidence` is the
    probability of the model's whole output.

    An answer is not given (its prediction is "") with `abstain_below`, where its confidence is below it, and with
    `abstain_ungrounded`, where it does not occur in the person's wiki.txt lines (one that cannot be checked, with
    no wiki or another kind of question, is given).
    """
    records = []
    for i, (question, gold_place, answer) in enumerate(zip(questions, gold, answers, strict=True)):
        score = scores[i] if scores is not None else None
        recited = recitation_scores[i] if recitation_scores is not None else None
        if score is not None and recited is not None:
            score = AnswerScore(score.logprob + recited.logprob, min(score.min_char_prob, recited.min_char_prob))
        confidence = score.confidence if score is not None else None
        grounding = _grounding(question, gold_place, answer, wiki)
        abstained = (abstain_below is not None and confidence is not None and confidence < abstain_below) or (
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
