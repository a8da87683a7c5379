"""Where the places of a question file sit in their person's line: when they are one of a pair of capitalized words
joined by a comma ("Perth, Scotland", "Moulins, France"), the first of the pair or the second, what `--first_of_pair`
answers by (modeling_chargpt/answering.py:pair_first); when the line has a death date after a capitalized word
("1898 Kiev - 25 April 1931 Paris"), before that date or after it, what `--birth_before_death` answers by
(answering.py:death_mark); when the line has a birth mark ("born 1975 in Thessaloniki", "b. 8 August 1898, Algiers"),
right after it or elsewhere, what `--after_born` answers by (answering.py:birth_place_at). Reads files only.

    python experiments/pair_positions.py --data_dir ../shared/data [--questions birth_places_train.tsv]
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from miss_split import Question, read_questions

from data_scripts import DataFileError
from modeling_chargpt.answering import WORD, birth_place_at, death_mark, pair_first

_NEXT = re.compile(r", [A-Z]")


def position(question: Question) -> str | None:
    """'first' or 'second' where the place, at its first whole-word occurrence in the line, is one of such a pair;
    None elsewhere."""
    at = question.place_at()
    if at is None or not question.gold[:1].isupper():
        return None
    if _NEXT.match(question.line, at[1]):
        return "first"
    return "second" if pair_first(question.line, question.gold, at[1]) != (question.gold, at[1]) else None


def death_position(question: Question) -> str | None:
    """'before_death' or 'after_death' where the line has a death date (`death_mark`) and the place occurs in it, by
    where its first whole-word occurrence ends; None elsewhere."""
    at = question.place_at()
    mark = death_mark(question.line, len(question.name), set(WORD.findall(question.name)))
    if at is None or mark is None:
        return None
    return "before_death" if at[1] <= mark else "after_death"


def born_position(question: Question) -> str | None:
    """'after_born' where the line has a birth mark (`birth_place_at`) and the word right after it is the place,
    'not_after_born' where it has one and that word is not; None where it has none."""
    at = birth_place_at(question.line, len(question.name), set(WORD.findall(question.name)))
    if at is None:
        return None
    return "after_born" if WORD.match(question.line, at)[0] == question.gold else "not_after_born"


def count(questions: list[Question]) -> dict[str, int]:
    positions = [where(q) for where in (position, death_position, born_position) for q in questions]
    return {"questions": len(questions), **{where: positions.count(where) for where in (
        "first", "second", "before_death", "after_death", "after_born", "not_after_born")}}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data_dir", required=True, help="Folder with wiki.txt and the questions.")
    parser.add_argument("--questions", default="birth_places_train.tsv", help="A question file of --data_dir.")
    return parser


def main(argv: list[str] | None = None) -> None:
    opts = build_parser().parse_args(argv)
    try:
        questions = read_questions(Path(opts.data_dir), opts.questions)
    except (DataFileError, OSError) as err:
        raise SystemExit(f"error: {err}") from None
    print(json.dumps(count(questions)))


if __name__ == "__main__":
    main()
