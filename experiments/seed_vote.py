"""Several seeds as one answer: each question gets the answer most seeds gave.

    python experiments/seed_vote.py --data_dir ../shared/data --name NAME \
        --predictions BEST.dev.predictions NEXT.dev.predictions ... \
        [--test_predictions BEST.test.predictions ...] [--write_predictions PREFIX] [--out results/seed_vote_cpu.json]

List the seeds' files best held-out score first: where no answer has a majority, the first file's answer is kept,
so the only choice is made on held-out questions. Dev is scored once, with the members, the vote, how often the
seeds agree, and how many questions any seed answered right (the most a choice among their answers could reach).
The record replaces one of the same name in --out. Reads prediction files only: no model is loaded.
"""

from __future__ import annotations

import argparse
import datetime
import shlex
import sys
from collections import Counter
from pathlib import Path

import records

from chargpt.training.files import atomic_write_text
from data_scripts import DataFileError, load_qa_tsv

WHAT = ("several seeds as one answer: per dev question, the answer most of a recipe's seeds gave (their committed "
        "predictions; where no answer has a majority, the seed with the best held-out score answers)")


def vote(answers: list[list[str]]) -> list[str]:
    """Per question, the answer given most often; among tied answers, the one of the earliest file."""
    if len({len(a) for a in answers}) != 1:
        raise SystemExit(f"error: the predictions files differ in length: {[len(a) for a in answers]}")
    voted = []
    for given in zip(*answers, strict=True):
        counts = Counter(given)
        most = max(counts.values())
        voted.append(next(answer for answer in given if counts[answer] == most))
    return voted


def agreement(answers: list[list[str]], voted: list[str], gold: list[str]) -> list[dict]:
    """Questions (and right answers of the vote) by how many seeds gave the voted answer, most first."""
    found: dict[int, dict[str, int]] = {}
    for i, answer in enumerate(voted):
        backers = sum(a[i] == answer for a in answers)
        group = found.setdefault(backers, {"backers": backers, "questions": 0, "right": 0})
        group["questions"] += 1
        group["right"] += answer == gold[i]
    return [found[backers] for backers in sorted(found, reverse=True)]


def right(answers: list[str], gold: list[str]) -> dict:
    return records.score(sum(a == g for a, g in zip(answers, gold, strict=True)), len(gold))


def read(paths: list[str]) -> list[list[str]]:
    """Each file's answers, one per line; a missing or undecodable file ends the run in one line."""
    found = []
    for path in paths:
        try:
            found.append(Path(path).read_text(encoding="utf-8").splitlines())
        except FileNotFoundError:
            raise SystemExit(f"error: {path}: file not found") from None
        except (OSError, UnicodeDecodeError) as err:
            raise SystemExit(f"error: {path}: cannot read it as UTF-8 text ({err})") from None
    return found


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data_dir", required=True, help="Folder with birth_dev.tsv.")
    parser.add_argument("--predictions", nargs="+", required=True,
                        help="Dev predictions, one file per seed, the best held-out score first.")
    parser.add_argument("--test_predictions", nargs="+", help="The same seeds' test predictions, in the same order.")
    parser.add_argument("--name", required=True, help="The record's name (unique in --out).")
    parser.add_argument("--seeds", nargs="*", type=int, default=[], help="The members' seeds, for the record.")
    parser.add_argument("--hardware", default="", help="Where the members ran (the vote itself only reads files).")
    parser.add_argument("--write_predictions", help="Write the vote's answers to PREFIX.dev.predictions (and "
                        "PREFIX.test.predictions).")
    parser.add_argument("--out", help="Add the record to this study.")
    return parser


def main(argv: list[str] | None = None) -> None:
    opts = build_parser().parse_args(argv)
    if len(opts.predictions) < 2:
        raise SystemExit("error: --predictions: a vote needs at least two files")
    if opts.test_predictions and len(opts.test_predictions) != len(opts.predictions):
        raise SystemExit("error: --test_predictions: one file per --predictions file, in the same order")
    try:
        gold = load_qa_tsv(Path(opts.data_dir) / "birth_dev.tsv")["answer"]
    except DataFileError as err:
        raise SystemExit(f"error: {err}") from None
    answers = read(opts.predictions)
    if len(answers[0]) != len(gold):
        raise SystemExit(f"error: {opts.predictions[0]}: {len(answers[0])} predictions for {len(gold)} dev questions")
    voted = vote(answers)
    members = [{"predictions": path, **right(a, gold)} for path, a in zip(opts.predictions, answers, strict=True)]
    reached = sum(any(a[i] == g for a in answers) for i, g in enumerate(gold))
    facts: dict = {"members": members, "agreement": agreement(answers, voted, gold),
                   "any_seed_right": records.score(reached, len(gold))}
    if opts.write_predictions:
        written = {"dev": voted}
        if opts.test_predictions:
            written["test"] = vote(read(opts.test_predictions))
        for split, lines in written.items():
            path = Path(f"{opts.write_predictions}.{split}.predictions")
            atomic_write_text(path, "\n".join(lines) + "\n")
            facts[f"{split}_predictions"] = str(path)
    command = shlex.join(["python", "experiments/seed_vote.py", *(sys.argv[1:] if argv is None else argv)])
    rec = records.record(opts.name, recipe="several seeds as one answer (a vote)", seeds=opts.seeds,
                         hardware=opts.hardware, scores={"dev": right(voted, gold)}, command=command,
                         date=datetime.date.today().isoformat(), facts=facts)
    best = max(members, key=lambda s: s["correct"])
    print(f"{opts.name}: dev {rec['scores']['dev']['accuracy']:.1f}% by vote of {len(answers)}; best member "
          f"{best['accuracy']:.1f}%; some member right {facts['any_seed_right']['accuracy']:.1f}%")
    if opts.out:
        out = Path(opts.out)
        study = records.read(out) if out.is_file() else {"what": WHAT, "records": []}
        kept = [r for r in study.pop("records") if r["name"] != opts.name]
        records.write(out, [*kept, rec], **study)


if __name__ == "__main__":
    main()
