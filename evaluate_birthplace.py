"""Score birthplace answers by exact match, like the reference's `run.py evaluate` (or the London baseline).

    python evaluate_birthplace.py --model_name_or_path out/rope-finetune \
        --eval_corpus_path DIR/birth_dev.tsv --outputs_path out/rope.dev.predictions
    python evaluate_birthplace.py --baseline london --eval_corpus_path DIR/birth_dev.tsv
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from transformers import HfArgumentParser

from data_scripts import load_qa_tsv
from evaluation import check_questions, load_metric, predict_birthplaces
from training import (
    UsageError,
    atomic_write_json,
    atomic_write_text,
    check_chargpt_folder,
    load_chargpt,
    parse_args,
    run_cli,
)


@dataclass
class EvalArguments:
    eval_corpus_path: str = field(metadata={"help": "TSV of questions, with gold places or without (test inputs)."})
    model_name_or_path: str | None = field(default=None, metadata={"help": "A finetuned chargpt folder."})
    baseline: str | None = field(
        default=None, metadata={"help": "Predict the same place for everyone instead of running a model.",
                                "choices": ["london"]}
    )
    outputs_path: str | None = field(default=None, metadata={"help": "Write one prediction per line here."})
    results_path: str | None = field(default=None, metadata={"help": "Write correct/total/accuracy as JSON here."})
    batch_size: int = field(default=128, metadata={"help": "Questions decoded together."})
    max_new_tokens: int = field(default=32, metadata={"help": "Characters generated per answer (reference 32)."})
    device: str = field(default="auto", metadata={"help": "'auto' (cuda if available), 'cpu' or 'cuda'."})


def build_parser() -> HfArgumentParser:
    return HfArgumentParser(EvalArguments, prog="evaluate_birthplace.py")


def main(argv: Sequence[str] | None = None) -> int:
    (args,) = parse_args(build_parser(), argv)
    if (args.model_name_or_path is None) == (args.baseline is None):
        raise UsageError("give exactly one of --model_name_or_path or --baseline london")
    qa = load_qa_tsv(args.eval_corpus_path, require_answer=False)
    questions, gold = qa["question"], qa["answer"]

    if args.baseline == "london":
        predictions = ["London"] * len(questions)
    else:
        device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
        config, tokenizer = check_chargpt_folder(args.model_name_or_path)
        check_questions(args.eval_corpus_path, questions, tokenizer, config, args.max_new_tokens)  # before loading
        model, tokenizer = load_chargpt(args.model_name_or_path)
        model = model.to(device)
        predictions = predict_birthplaces(model, tokenizer, questions, args.batch_size, args.max_new_tokens)

    if args.outputs_path:
        atomic_write_text(args.outputs_path, "".join(line + "\n" for line in predictions))
    if not any(gold):
        print(f"No gold birth places in {args.eval_corpus_path}; wrote {len(predictions)} predictions"
              + (f" to {args.outputs_path}" if args.outputs_path else ""))
        return 0
    scores = load_metric().compute(predictions=predictions, references=gold)
    print(f"Correct: {scores['correct']} out of {scores['total']}: {100 * scores['accuracy']:.1f}%")
    if args.results_path:
        atomic_write_json(args.results_path, {**scores, "eval_corpus_path": args.eval_corpus_path,
                                              "model": args.model_name_or_path or f"baseline:{args.baseline}"})
    return 0


def cli() -> int:
    """The installed `chargpt-evaluate` command: like running this file, bad input ends as one line."""
    return run_cli(main)


if __name__ == "__main__":
    sys.exit(cli())
