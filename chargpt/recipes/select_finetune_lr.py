"""Choose the finetuning learning rate of a pretrained model on held-out training questions, never on dev.

The training TSV is split once (a seeded shuffle): `--holdout` questions are set aside and the rest finetune the
model at each rate of `--learning_rates`; the rate with the best held-out exact match wins (ties: the earlier one
in the list). With `--final` the model is then finetuned on the whole training set at that rate and evaluated on
dev (and test predictions are written), so the dev score never chose anything. `--eval_extra` reaches every
evaluation alike (e.g. `--answer_from_recitation True`: the rate is then chosen for the way the model will
answer). Writes `selection.json` (after every point, atomically) into --out_dir; the finetuned models of the
sweep are deleted unless --keep_models. A kept model and its held-out records (`*.holdout.predictions.records.jsonl`)
are what chargpt/evaluation/abstention.py chooses an abstention threshold on (docs/confidence.md).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import random
import shlex
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import evaluate_birthplace
from chargpt.recipes.reproduce import check_stage_flags, evaluate, finetune_command, run
from chargpt.training.cli import command_line, parse_args
from chargpt.training.export import save_answering
from chargpt.training.files import atomic_write_json
from chargpt.training.outputs import UsageError, check_not_input
from data_scripts import DataFileError, load_qa_tsv
from modeling_chargpt import CharGPTConfig
from modeling_chargpt.answering import DECODING_CHOICES, AnsweringSettings, QuestionError


def shuffled(n: int, seed: int) -> list[int]:
    """0..n-1 in the seeded order every split of training questions takes its parts from."""
    order = list(range(n))
    random.Random(seed).shuffle(order)
    return order


def split_questions(train_tsv: Path, holdout: int, seed: int, out: Path) -> tuple[Path, Path]:
    """Write `train.tsv` (the rest) and `holdout.tsv` (`holdout` lines) under `out`; the same seed, the same split.

    The file is validated first, so a bad row is reported against it (path:line), not against a split part."""
    try:
        qa = load_qa_tsv(train_tsv)
    except DataFileError as err:
        sys.exit(f"error: {err}")
    lines = [f"{q}\t{a}" for q, a in zip(qa["question"], qa["answer"], strict=True)]
    if not 0 < holdout < len(lines):
        sys.exit(f"{train_tsv}: --holdout {holdout} must be between 1 and {len(lines) - 1} (the file has "
                 f"{len(lines)} questions)")
    held = set(shuffled(len(lines), seed)[:holdout])
    out.mkdir(parents=True, exist_ok=True)
    train_part, held_part = out / "train.tsv", out / "holdout.tsv"
    train_part.write_text("".join(lines[i] + "\n" for i in range(len(lines)) if i not in held), encoding="utf-8")
    held_part.write_text("".join(lines[i] + "\n" for i in sorted(held)), encoding="utf-8")
    return train_part, held_part


def parse_rates(text: str) -> list[float]:
    """The rates to try; 0 is "no finetuning" (a rate of 0 would leave every weight as it is, so no step runs)."""
    try:
        rates = [float(r) for r in text.split(",") if r.strip()]
    except ValueError:
        sys.exit(f"--learning_rates {text!r}: expected comma-separated numbers, e.g. 3e-5,7.5e-5,1.5e-4")
    if not rates or any(r < 0 for r in rates) or len(set(rates)) != len(rates):
        sys.exit(f"--learning_rates {text!r}: expected distinct numbers, positive or 0 (no finetuning)")
    return rates


def as_answering(model: Path, out_dir: Path, judged: list[str]) -> Path:
    """Rate 0: the pretrained model itself, copied to `out_dir` (its files, not its checkpoints) with the answering
    choices of `judged` (evaluate_birthplace.py flags) saved in its config and card, as a finetuning saves them, so
    that it answers through the pipeline as it was measured. Only a model pretrained on recitation rows can."""
    config = CharGPTConfig.from_pretrained(model)
    if config.answer_format != "recite":
        sys.exit(f"--learning_rates 0: {model} was not pretrained on recitation rows (answer_format "
                 f"{config.answer_format!r}), so it cannot answer without finetuning")
    _, decoding = parse_args(evaluate_birthplace.build_parser(), ["--eval_corpus_path", "-", *judged], stage="evaluate")
    chosen = {name: getattr(decoding, name) for name in DECODING_CHOICES}
    settings = AnsweringSettings.of(config).choosing(**chosen)
    try:
        settings.check()
    except QuestionError as err:
        sys.exit(f"--eval_extra: {err}")
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    for path in model.iterdir():
        if path.is_file():
            shutil.copy2(path, out_dir / path.name)
    save_answering(out_dir, settings.to_config())
    return out_dir


def best_rate(points: list[dict]) -> float:
    """The rate with the most held-out questions right; `max` keeps the first of equals, i.e. the earlier rate."""
    return max(points, key=lambda p: p["holdout"]["correct"])["learning_rate"]


def extra_flags(extra: str) -> list[str]:
    """--extra as the finetuning flags it adds, checked against train_finetune.py before any finetuning."""
    try:
        flags = shlex.split(extra)
    except ValueError as err:
        sys.exit(f"--extra {extra!r}: {err}")
    check_stage_flags("finetune", flags, "--extra")
    return flags


def eval_flags(text: str) -> list[str]:
    """--eval_extra as evaluate_birthplace.py flags, checked against its parser before any finetuning."""
    said = io.StringIO()
    try:
        flags = shlex.split(text)
        with contextlib.redirect_stderr(said):  # argparse prints usage lines before it exits: keep its last line
            _, unknown = evaluate_birthplace.build_parser().parse_known_args(["--eval_corpus_path", "-", *flags])
    except (ValueError, SystemExit) as err:
        why = said.getvalue().strip().splitlines()[-1:] or [str(err)]
        sys.exit(f"--eval_extra {text!r}: evaluate_birthplace.py cannot take it ({why[0]})")
    if unknown:
        sys.exit(f"--eval_extra {text!r}: evaluate_birthplace.py has no {' '.join(unknown)}")
    return flags


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model_name_or_path", help="A pretrained chargpt folder (not needed with --split_only).")
    parser.add_argument("--data_dir", required=True, help="Folder with wiki.txt and the TSVs.")
    parser.add_argument("--out_dir", required=True)
    parser.add_argument("--learning_rates", default="3e-5,7.5e-5,1.5e-4,3e-4,6e-4")
    parser.add_argument("--holdout", type=int, default=400, help="Training questions set aside to score the rates.")
    parser.add_argument("--split_seed", type=int, default=0, help="Seed of the split (the same for every model).")
    parser.add_argument("--seed", type=int, default=0, help="Finetuning seed.")
    parser.add_argument("--extra", default="", help="Extra flags for train_finetune.py (quoted), e.g. a --preset.")
    parser.add_argument("--eval_extra", default="",
                        help="Extra flags for every evaluate_birthplace.py run (quoted), e.g. "
                        "'--answer_from_recitation True'.")
    parser.add_argument("--final", action="store_true",
                        help="Finetune on the whole training set at the chosen rate; evaluate on dev and test.")
    parser.add_argument("--keep_models", action="store_true", help="Keep the sweep's finetuned models.")
    parser.add_argument("--split_only", action="store_true",
                        help="Only write OUT/split/train.tsv and holdout.tsv, then stop: pretrain with "
                        "--mixed_qa_corpus_path OUT/split/train.tsv and the held-out questions stay unseen until "
                        "this script scores the rates.")
    parser.add_argument("--resume", action="store_true",
                        help="Go on after a stopped run in the same --out_dir: each finetuning runs again over the "
                        "model it left (chargpt.recipes.recite --resume).")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    opts = build_parser().parse_args(argv)
    try:  # an output over an input: one line, before anything runs
        check_not_input({"--out_dir": opts.out_dir}, {"--data_dir": opts.data_dir}, inside=False)
        check_not_input({"--out_dir": opts.out_dir}, {"--model_name_or_path": opts.model_name_or_path})
    except UsageError as err:
        sys.exit(f"error: {err}")
    data, out = Path(opts.data_dir), Path(opts.out_dir)
    if opts.split_only:
        train_part, held_part = split_questions(data / "birth_places_train.tsv", opts.holdout, opts.split_seed,
                                                out / "split")
        print(f"wrote {train_part} and {held_part}")
        return
    if opts.model_name_or_path is None:
        sys.exit("--model_name_or_path is required (unless --split_only)")
    model = Path(opts.model_name_or_path)
    if not (model / "config.json").is_file():
        sys.exit(f"--model_name_or_path {model}: no config.json there (not a saved chargpt model)")
    wiki, train_tsv = data / "wiki.txt", data / "birth_places_train.tsv"
    dev, test = data / "birth_dev.tsv", data / "birth_test_inputs.tsv"
    for path in (wiki, train_tsv):
        if not path.is_file():
            sys.exit(f"--data_dir {data}: {path.name} is missing")
    rates = parse_rates(opts.learning_rates)
    extra, judged = extra_flags(opts.extra), eval_flags(opts.eval_extra)
    train_part, held_part = split_questions(train_tsv, opts.holdout, opts.split_seed, out / "split")
    start = time.perf_counter()
    summary: dict = {"model": str(model), "command": command_line("-m chargpt.recipes.select_finetune_lr", argv),
                     "extra": opts.extra, "eval_extra": opts.eval_extra,
                     "holdout": opts.holdout, "split_seed": opts.split_seed, "seed": opts.seed, "points": []}

    def save() -> None:
        atomic_write_json(out / "selection.json", summary)

    def finetune(tsv: Path, lr: float, tag: str) -> tuple[Path, float]:
        fin_dir = out / f"{tag}-finetune"
        if lr == 0:  # no finetuning: the pretrained model answers as it is (it never saw the held-out questions)
            return as_answering(model, fin_dir, judged), 0.0
        seconds = run(finetune_command(wiki, tsv, model, fin_dir, opts.seed, [*extra, "--learning_rate", repr(lr)],
                                       opts.threads, opts.resume), out / f"{tag}-finetune.log")
        return fin_dir, seconds

    for lr in rates:
        tag = f"lr{lr:g}"
        fin_dir, seconds = finetune(train_part, lr, tag)
        held = evaluate(fin_dir, held_part, out / f"{tag}.holdout.predictions", out / f"{tag}.holdout.log", wiki=wiki,
                        flags=judged)
        if "correct" not in held:
            sys.exit(f"{out / f'{tag}.holdout.log'}: the evaluation wrote no scores (--results_path JSON)")
        summary["points"].append({"learning_rate": lr, "finetune_seconds": round(seconds, 1), "holdout": held})
        print(f"  lr {lr:<8g} held-out {held['accuracy']:5.1f}% ({held['correct']}/{held['total']})  "
              f"finetune {seconds:.0f}s", flush=True)
        if not opts.keep_models:
            shutil.rmtree(fin_dir)
        save()

    chosen = summary["chosen_learning_rate"] = best_rate(summary["points"])
    print(f"chosen lr {chosen:g} (held-out, {opts.holdout} questions)", flush=True)
    if opts.final:
        fin_dir, seconds = finetune(train_tsv, chosen, "final")
        final = {"learning_rate": chosen, "finetune_seconds": round(seconds, 1), "model": str(fin_dir)}
        if dev.is_file():
            final["dev"] = evaluate(fin_dir, dev, out / "final.dev.predictions", out / "final.dev.log", flags=judged)
            print(f"final: dev {final['dev'].get('accuracy', '-')}%  finetune {seconds:.0f}s", flush=True)
        if test.is_file():
            final["test"] = evaluate(fin_dir, test, out / "final.test.predictions", out / "final.test.log",
                                     flags=judged)
        summary["final"] = final
    summary["total_seconds"] = round(time.perf_counter() - start, 1)
    save()


if __name__ == "__main__":
    main()
