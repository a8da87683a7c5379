"""Is an answer in the person's wiki.txt line? Grounding, reported beside an answer (never used to make one): by
`evaluate_birthplace.py`'s records and by the birthplace-qa pipeline given the documents. It lives with the model
code so that a model folder carries it (pipeline_chargpt.py imports it relatively)."""

from __future__ import annotations

import bisect
import os
from collections.abc import Iterator, Sequence
from functools import cache

__all__ = ["WikiIndex", "whole_word_spans"]


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

    def _lines_with(self, phrase: str) -> tuple[int, ...]:
        """1-based numbers of the lines where `phrase` occurs as whole words."""
        return tuple(sorted({bisect.bisect_right(self._starts, start)
                             for start, _ in whole_word_spans(self.text, phrase)}))

    def occurs(self, phrase: str) -> bool:
        return bool(self.lines_with(phrase))

    def occurs_in(self, phrase: str, line_numbers: Sequence[int]) -> bool:
        return any(next(whole_word_spans(self.lines[n - 1], phrase), None) for n in line_numbers)
