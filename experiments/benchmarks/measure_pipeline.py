"""What a person gets from a trained model through `pipeline(...)`: dev answered the way the README shows.

    python experiments/benchmarks/measure_pipeline.py --model out/recite/select/seed0/final-finetune \
        --data_dir ../shared/data \
        --recipe_results out/recite/results.json --json results/pipeline_recite_cpu.json

Loads the folder with `pipeline(model=FOLDER, trust_remote_code=True)` (the code saved in the folder answers, with
the format and threshold saved there), asks every dev question, and records the exact match when it answers
everything, then the coverage and precision at the saved threshold ("I don't know" below it). With
--predictions (evaluate_birthplace.py's file for the same model) it also counts the answers that differ from the
evaluation's: the pipeline must answer as the model was measured. --recipe_results copies how the model was made
(chargpt/recipes/recite.py's results.json: command, recipe, pretraining time, chosen rate) into the record.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from datetime import date
from pathlib import Path

import torch

from chargpt.training import UsageError, atomic_write_json, check_chargpt_folder, run_cli
from chargpt.training.cli import command_line
from chargpt.training.hardware import cpu_name
from data_scripts import load_qa_tsv, read_text_file

WHAT = "dev answered through pipeline(model=FOLDER, trust_remote_code=True), the model's saved format and threshold"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="A finetuned model folder (its saved settings answer).")
    parser.add_argument("--data_dir", required=True, help="Folder with birth_dev.tsv.")
    parser.add_argument("--predictions", help="evaluate_birthplace.py's dev predictions of the same model.")
    parser.add_argument("--recipe_results", help="chargpt.recipes.recite's results.json that made the model.")
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--json", required=True, help="Where the record goes.")
    return parser


def score(outputs: list[dict], gold: list[str]) -> dict:
    """Exact match answering everything, and coverage / precision where the saved threshold abstains."""
    right = [out["answer"] == answer for out, answer in zip(outputs, gold, strict=True)]
    answered = [ok for out, ok in zip(outputs, right, strict=True) if not out["abstained"]]
    return {"total": len(gold), "correct": sum(right), "accuracy": round(100 * sum(right) / len(gold), 1),
            "answered": len(answered), "answered_correct": sum(answered),
            "coverage": round(100 * len(answered) / len(gold), 1),
            "precision": round(100 * sum(answered) / len(answered), 1) if answered else None}


def recipe_of(path: str) -> dict:
    """What chargpt.recipes.recite's results.json says made the model (command, recipe, shape, epochs, per-seed record;
    the recipe is chargpt/recipes/'s name, or the pretraining's where an older run wrote no recipe)."""
    try:
        made = json.loads(read_text_file(path))
    except json.JSONDecodeError as err:
        raise UsageError(f"{path}:{err.lineno}: not JSON ({err.msg})") from None
    keys = ("command", "pretraining", "variant", "n_embd", "pretrain_epochs", "answer_from_recitation",
            "continue_recitation", "seeds")
    return {key: made.get(key) for key in keys} | {"recipe": made.get("recipe") or made.get("pretraining") or ""}


def main(argv: Sequence[str] | None = None) -> int:
    opts = build_parser().parse_args(argv)
    config, _ = check_chargpt_folder(opts.model)  # every input checked before the model loads
    qa = load_qa_tsv(str(Path(opts.data_dir) / "birth_dev.tsv"))  # one line for a missing or damaged file
    questions, gold = list(qa["question"]), list(qa["answer"])
    measured = read_text_file(opts.predictions).splitlines() if opts.predictions else None
    if measured is not None and len(measured) != len(questions):
        raise UsageError(f"--predictions {opts.predictions}: {len(measured)} lines for {len(questions)} questions")
    made = recipe_of(opts.recipe_results) if opts.recipe_results else None
    from transformers import pipeline  # after the checks: a bad path costs no import time

    start = time.perf_counter()
    ask = pipeline(model=opts.model, trust_remote_code=True, device="cpu")
    loaded = time.perf_counter() - start
    outputs = ask(questions, batch_size=opts.batch_size)
    seconds = time.perf_counter() - start - loaded
    dev, answering = score(outputs, gold), getattr(config, "answering", None) or {}
    facts = {"model": opts.model, "threads": torch.get_num_threads(), "answering": answering,
             "coverage": dev["coverage"]}
    if measured is not None:
        facts["differ_from_evaluation"] = sum(a != out["answer"] for a, out in zip(measured, outputs, strict=True))
    if made is not None:
        facts |= {"made_by": made["command"], "pretraining": made["pretraining"], "n_embd": made["n_embd"],
                  "pretrain_epochs": made["pretrain_epochs"], "made": made["seeds"]}
    record = {  # experiments/records.py's shape, so docs_tables.py renders it as it is
        "name": opts.model, "recipe": (made or {}).get("recipe", ""), "flags": "",
        "variant": (made or {}).get("variant") or config.position_embedding_type,
        "seeds": [seed["seed"] for seed in (made or {}).get("seeds") or []], "hardware": f"{cpu_name()}, fp32",
        "scores": {"dev": {key: dev[key] for key in ("correct", "total", "accuracy")},
                   "dev, answered": {"correct": dev["answered_correct"], "total": dev["answered"],
                                     "accuracy": dev["precision"]}},
        "seconds": {"load": round(loaded, 1), "dev": round(seconds, 1)},
        "command": command_line("experiments/benchmarks/measure_pipeline.py", argv),
        "date": date.today().isoformat(), "facts": facts}
    atomic_write_json(opts.json, {"what": WHAT, "records": [record]})
    d, threshold = dev, answering.get("abstain_below")
    at = (f"at its saved threshold {threshold:.3g}: answers {d['coverage']}% of dev, {d['precision']}% of those "
          "right" if threshold is not None else "no saved threshold: it answers everything")
    print(f"dev {d['accuracy']}% ({d['correct']}/{d['total']}) answering everything; {at}; {seconds:.0f} s")
    print(f"wrote {opts.json}")
    return 0

if __name__ == "__main__":
    sys.exit(run_cli(main))
