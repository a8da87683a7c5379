"""Where the best models miss: the dev questions split by the kind of their person's
wiki.txt line, and each model's misses split by what it answered.

    python experiments/miss_split.py --data_dir ../shared/data --predictions A.dev.predictions B.dev.predictions \
        [--name NAME] [--recitation_chars 112] [--block_size 160] [--out results/miss_split_cpu.json]

The kinds (`kinds_for`): the place is not in the person's line (nothing to recite it from); it is, and first ends within
the recitation limit (96 characters of a 128 block, or `--recitation_chars`), or past it (a recitation is cut before
it), or even past the block (128 characters, or `--block_size`: no pretraining row of plain documents or recitations
reaches it); and, across those, a name that occurs in other people's lines too. Every place of the real data is one
word. A miss is an empty answer, a wrong span of the person's line (it recited, then chose or copied wrongly), or words
that are not in the line. Several prediction files (seeds) are one column each, then their mean. Reads files only: no
model is loaded.
"""

from __future__ import annotations

import argparse
import datetime
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import records
from docs_tables import TABLES, Results

from data_scripts import DataFileError, load_qa_tsv
from modeling_chargpt.answering import asked_person, recitation_limit
from modeling_chargpt.grounding import WikiIndex, whole_word_spans

BLOCK_SIZE = 128  # the reference's, and the default's


@dataclass(frozen=True)
class Question:
    gold: str
    line: str  # the person's wiki.txt line ("" when the name is in none)
    lines_with_name: int
    name: str = ""  # the asked person's

    def place_at(self) -> tuple[int, int] | None:
        """Where the place first occurs in the line as whole words."""
        return next(whole_word_spans(self.line, self.gold), None)


def kinds_for(limit: int, block_size: int = BLOCK_SIZE) -> dict[str, Callable[[Question], bool]]:
    """The kinds of question for recitations cut at `limit` characters of a `block_size` block, by name."""
    def ends(q: Question) -> int:
        return (q.place_at() or (0, 0))[1]
    return {
        "place not in the person's line": lambda q: q.place_at() is None,
        "place in the line, within the recitation limit": lambda q: 0 < ends(q) <= limit,
        "place ends past the recitation limit": lambda q: ends(q) > limit,
        "place ends past the block": lambda q: ends(q) > block_size,
        "name in other people's lines too": lambda q: q.lines_with_name > 1,
    }


KINDS = kinds_for(recitation_limit(BLOCK_SIZE))
ANSWERS: dict[str, Callable[[Question, str], bool]] = {
    "nothing": lambda q, answer: not answer.strip(),
    "a wrong span of the line": lambda q, answer: bool(answer.strip()) and next(
        whole_word_spans(q.line, answer.strip()), None) is not None,
    "words not in the line": lambda q, answer: bool(answer.strip()) and next(
        whole_word_spans(q.line, answer.strip()), None) is None,
}


def read_questions(data_dir: Path, questions_file: str = "birth_dev.tsv") -> list[Question]:
    """birth_dev.tsv's questions (or `questions_file`'s) with their person's line (the first line holding the full
    name)."""
    wiki = WikiIndex((data_dir / "wiki.txt").read_text(encoding="utf-8"), data_dir / "wiki.txt")
    questions = []
    qa = load_qa_tsv(data_dir / questions_file)  # a malformed line is one DataFileError naming it
    for question, gold in zip(qa["question"], qa["answer"], strict=True):
        name = asked_person(question)
        lines = wiki.lines_with(name) if name else ()
        questions.append(Question(gold, wiki.lines[lines[0] - 1] if lines else "", len(lines), name or ""))
    return questions


def split(questions: list[Question], answers: list[str], limit: int | None = None,
          block_size: int = BLOCK_SIZE) -> dict:
    """One model: right answers and misses per kind of question (recitations cut at `limit` characters, by default
    the reference's, of a `block_size` block), and its misses by what it answered."""
    if len(answers) != len(questions):
        raise SystemExit(f"error: {len(answers)} predictions for {len(questions)} dev questions")
    right = [answer == q.gold for q, answer in zip(questions, answers, strict=True)]
    kinds = {}
    for kind, of_kind in [("all", lambda q: True),
                          *kinds_for(recitation_limit(block_size, limit), block_size).items()]:
        chosen = [i for i, q in enumerate(questions) if of_kind(q)]
        kinds[kind] = {"questions": len(chosen), "right": sum(right[i] for i in chosen)}
    missed = [i for i, ok in enumerate(right) if not ok]
    answered = {how: sum(is_it(questions[i], answers[i]) for i in missed) for how, is_it in ANSWERS.items()}
    return {"kinds": kinds, "misses_answered": answered}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data_dir", required=True, help="Folder with wiki.txt and birth_dev.tsv.")
    parser.add_argument("--predictions", nargs="+", required=True, help="Dev predictions, one file per model.")
    parser.add_argument("--labels", nargs="+", help="A short name per predictions file, in order (default: the "
                        "files' names).")
    parser.add_argument("--name", help="What the models are (stored in --out).")
    parser.add_argument("--recitation_chars", type=int, help="The models' recitation limit, where they were trained "
                        "with --recitation_chars (default: three quarters of the block, the reference's 96).")
    parser.add_argument("--block_size", type=int, default=BLOCK_SIZE, help="The models' block (default: the "
                        "reference's, 128 characters).")
    parser.add_argument("--out", help="Write the split here as JSON.")
    return parser


def main(argv: list[str] | None = None) -> None:
    opts = build_parser().parse_args(argv)
    data = Path(opts.data_dir)
    for needed in (data / "wiki.txt", data / "birth_dev.tsv", *map(Path, opts.predictions)):
        if not needed.is_file():
            raise SystemExit(f"error: {needed}: file not found")
    if opts.recitation_chars is not None and opts.recitation_chars < 1:
        raise SystemExit(f"error: --recitation_chars {opts.recitation_chars}: a positive number of characters")
    if opts.block_size < 1:
        raise SystemExit(f"error: --block_size {opts.block_size}: a positive number of characters")
    labels = opts.labels or [Path(path).name.removesuffix(".dev.predictions") for path in opts.predictions]
    if len(labels) != len(opts.predictions) or len(set(labels)) != len(labels):
        raise SystemExit(f"error: --labels: {len(opts.predictions)} distinct names, one per predictions file")
    try:
        questions = read_questions(data)
    except DataFileError as err:
        raise SystemExit(f"error: {err}") from None
    command = shlex.join(["python", "experiments/miss_split.py", *(sys.argv[1:] if argv is None else argv)])
    models = []
    for label, path in zip(labels, opts.predictions, strict=True):
        found = split(questions, Path(path).read_text(encoding="utf-8").splitlines(), opts.recitation_chars,
                      opts.block_size)
        scores = {kind: records.score(c["right"], c["questions"]) for kind, c in found["kinds"].items()}
        models.append(records.record(label, recipe=opts.name or "", scores=scores, command=command,
                                     date=datetime.date.today().isoformat(),
                                     facts={"predictions": path, "misses_answered": found["misses_answered"]}))
    study = {"what": opts.name or "dev misses by kind of question", "block_size": opts.block_size,
             "recitation_chars": recitation_limit(opts.block_size, opts.recitation_chars), "kinds": list(KINDS),
             "answers": list(ANSWERS), "records": records.check(models, "--predictions")}
    print(TABLES["miss-split"](Results(studies={"miss_split_cpu": study})))
    if opts.out:
        records.write(Path(opts.out), models, **{k: v for k, v in study.items() if k != "records"})


if __name__ == "__main__":
    main()
