"""Should the final finetuning see every training question, or only those pretraining mixed in? Chosen on held-out
training questions, never on dev.

    python -m chargpt.recipes.choose_final_questions --select_dir OUT/select/seed0 --data_dir ../shared/data

The recitation recipe (chargpt/recipes/recite.py) pretrains with the training questions outside a held-out split as
recitation rows, chooses the finetuning rate on the held-out ones (chargpt.recipes.select_finetune_lr), then finetunes
on all training questions ("all"). The held-out people, like dev's, were never paired with a question in pretraining;
the held-out model, finetuned on the mixed questions alone ("mixed"), may answer such people better than the final one.
To decide without dev, the held-out questions are cut in two halves: for each half the pretrained model is finetuned
as in the selection (same rate, seed and flags) on the mixed questions plus the other half, and answers this half.
The held-out model already answered the same questions (its records), so each question is answered once by either
option. Writes choice.json into --out_dir: per half and in all, each option's correct answers, the questions only
one option got right, and the choice: "mixed" only when it answers strictly more, else the reference "all".
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from chargpt.evaluation.record_files import check_records_match, read_records
from chargpt.recipes.reproduce import evaluate, finetune_command, run
from chargpt.recipes.select_finetune_lr import shuffled
from chargpt.training.cli import command_line
from chargpt.training.files import atomic_write_json
from data_scripts import DataFileError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--select_dir", required=True,
                        help="A finished chargpt.recipes.select_finetune_lr --out_dir (selection.json, split/, the "
                             "chosen rate's "
                        "held-out predictions and records).")
    parser.add_argument("--data_dir", required=True, help="Folder with wiki.txt.")
    parser.add_argument("--out_dir",
                        help="Where the halves' models and choice.json go (default SELECT_DIR/final_questions).")
    parser.add_argument("--half_seed", type=int, default=0, help="Seed of the cut of the held-out questions.")
    parser.add_argument("--resume", action="store_true",
                        help="Go on after a stopped run: each finetuning runs again over the model it left "
                        "(chargpt.recipes.recite --resume).")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    return parser


def load_selection(select_dir: Path) -> tuple[dict, Path]:
    """selection.json with a chosen rate, and the held-out records of that rate (checked against its predictions)."""
    path = select_dir / "selection.json"
    try:
        selection = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        sys.exit(f"error: {path}: cannot read it ({getattr(err, 'strerror', None) or err})")
    if "chosen_learning_rate" not in selection:
        sys.exit(f"error: {path}: no chosen_learning_rate (an unfinished chargpt.recipes.select_finetune_lr run?)")
    predictions = select_dir / f"lr{selection['chosen_learning_rate']:g}.holdout.predictions"
    return selection, predictions


def halves(n: int, seed: int) -> list[list[int]]:
    """Indices 0..n-1 in two halves of a seeded shuffle (chargpt.recipes.select_finetune_lr's), each in file order."""
    order = shuffled(n, seed)
    return [sorted(order[: n // 2]), sorted(order[n // 2:])]


def tally(right_mixed: list[bool], right_all: list[bool]) -> dict[str, int]:
    """The same questions answered by both options: each one's correct answers and the questions only it got right."""
    pairs = list(zip(right_mixed, right_all, strict=True))
    return {"questions": len(pairs), "mixed": sum(m for m, _ in pairs), "all": sum(a for _, a in pairs),
            "only_mixed_right": sum(m and not a for m, a in pairs),
            "only_all_right": sum(a and not m for m, a in pairs)}


def decide(mixed: int, everything: int) -> str:
    """The reference ("all") unless finetuning on the mixed questions alone answers strictly more."""
    return "mixed" if mixed > everything else "all"


def main(argv: Sequence[str] | None = None) -> None:
    opts = build_parser().parse_args(argv)
    select_dir, data = Path(opts.select_dir), Path(opts.data_dir)
    out = Path(opts.out_dir) if opts.out_dir else select_dir / "final_questions"
    wiki = data / "wiki.txt"
    if not wiki.is_file():
        sys.exit(f"error: --data_dir {data}: wiki.txt is missing")
    selection, held_predictions = load_selection(select_dir)
    rate = selection["chosen_learning_rate"]
    split = select_dir / "split"
    try:
        mixed_lines = (split / "train.tsv").read_text(encoding="utf-8").splitlines()
        held_lines = (split / "holdout.tsv").read_text(encoding="utf-8").splitlines()
        records = read_records(f"{held_predictions}.records.jsonl")
        check_records_match(f"{held_predictions}.records.jsonl", records, held_predictions)
    except OSError as err:
        sys.exit(f"error: {err.filename}: cannot read it ({err.strerror})")
    except DataFileError as err:
        sys.exit(f"error: {err}")
    if len(records) != len(held_lines) or len(held_lines) < 2:
        sys.exit(f"error: {held_predictions}: {len(records)} answers for the {len(held_lines)} questions of "
                 f"{split / 'holdout.tsv'}")
    extra, judged = shlex.split(selection.get("extra", "")), shlex.split(selection.get("eval_extra", ""))
    out.mkdir(parents=True, exist_ok=True)
    start, parts = time.perf_counter(), []
    cut = halves(len(held_lines), opts.half_seed)
    for k, half in enumerate(cut):
        other = cut[1 - k]
        tsv, questions = out / f"half{k}.finetune.tsv", out / f"half{k}.tsv"
        tsv.write_text("".join(line + "\n" for line in mixed_lines + [held_lines[i] for i in other]), encoding="utf-8")
        questions.write_text("".join(held_lines[i] + "\n" for i in half), encoding="utf-8")
        model = out / f"half{k}-finetune"
        seconds = run(finetune_command(wiki, tsv, Path(selection["model"]), model, selection["seed"],
                                       [*extra, "--learning_rate", repr(rate)], opts.threads, opts.resume),
                      out / f"half{k}-finetune.log")
        answered = evaluate(model, questions, out / f"half{k}.predictions", out / f"half{k}.log", wiki=wiki,
                            flags=judged)
        right_all = [r["correct"] for r in read_records(out / f"half{k}.predictions.records.jsonl")]
        parts.append({**tally([records[i]["correct"] for i in half], right_all),
                      "finetune_seconds": round(seconds, 1), "finetune_questions": len(mixed_lines) + len(other),
                      "predictions": answered["predictions"]})
        print(f"  half {k}: {len(half)} questions, mixed {parts[-1]['mixed']}, all {parts[-1]['all']}", flush=True)
    totals = {key: sum(p[key] for p in parts) for key in ("questions", "mixed", "all", "only_mixed_right",
                                                          "only_all_right")}
    summary = {"select_dir": str(select_dir), "model": selection["model"], "learning_rate": rate,
               "command": command_line("-m chargpt.recipes.choose_final_questions", argv), "halves": parts, **totals,
               "choice": decide(totals["mixed"], totals["all"]), "seconds": round(time.perf_counter() - start, 1)}
    atomic_write_json(out / "choice.json", summary)
    print(f"held-out {totals['questions']}: mixed only {totals['mixed']}, all {totals['all']} -> {summary['choice']} "
          f"({out / 'choice.json'})")


if __name__ == "__main__":
    main()
