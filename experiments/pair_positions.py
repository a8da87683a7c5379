"""Where the places of a question file sit in their person's line when they are one of a pair of capitalized words
joined by a comma ("Perth, Scotland", "Moulins, France"): the first of the pair or the second. What
`--first_of_pair` answers by (modeling_chargpt/answering.py:pair_first). Reads files only.

    python experiments/pair_positions.py --data_dir ../shared/data [--questions birth_places_train.tsv]
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from miss_split import Question, read_questions

from data_scripts import DataFileError
from modeling_chargpt.answering import pair_first

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


def count(questions: list[Question]) -> dict[str, int]:
    positions = [position(q) for q in questions]
    return {"questions": len(questions), "first": positions.count("first"), "second": positions.count("second")}


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
