"""Score birthplace answers by exact match, like the reference's `run.py evaluate` (or the London baseline).

    python evaluate_birthplace.py --model_name_or_path out/rope-finetune \
        --eval_corpus_path DIR/birth_dev.tsv --outputs_path out/rope.dev.predictions
    python evaluate_birthplace.py --baseline london --eval_corpus_path DIR/birth_dev.tsv

A model trained with `--preset best` answers as it was measured with `--preset best` here too (a span of its
recitation); chargpt/training/presets.py.

Beside the predictions it writes per-question records (``.records.jsonl``: the answer's probability, whether it
occurs in the person's wiki.txt line) and an error-analysis page (``.html``); docs/confidence.md.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch
from transformers import HfArgumentParser
from transformers.utils import logging

from chargpt.evaluation.confidence import describe, summarize
from chargpt.evaluation.predict import ask_all, check_questions, load_metric
from chargpt.evaluation.record_files import as_line, records_path_for, write_records
from chargpt.evaluation.records import build_records, find_wiki
from chargpt.evaluation.report_html import report_path_for, write_report
from chargpt.training import (
    UsageError,
    atomic_write_json,
    atomic_write_text,
    check_chargpt_folder,
    check_not_input,
    check_output_file,
    load_chargpt,
    parse_args,
    resolve_model_path,
    run_cli,
)
from chargpt.training.cli import command_line
from chargpt.training.hub import add_eval_result, push_folder
from chargpt.training.presets import EVALUATION, PRESETS, REFERENCE
from data_scripts import load_qa_tsv
from modeling_chargpt.answering import DECODING_CHOICES, AnsweringSettings, QuestionError, decoding_arguments

logger = logging.get_logger(__name__)


@dataclass
class EvalArguments:
    eval_corpus_path: str = field(metadata={"help": "TSV of questions, with gold places or without (test inputs)."})
    model_name_or_path: str | None = field(default=None, metadata={
        "help": "A finetuned chargpt folder, or owner/name of one on the Hugging Face Hub (the local cache first)."})
    baseline: str | None = field(
        default=None, metadata={"help": "Predict the same place for everyone instead of running a model.",
                                "choices": ["london"]}
    )
    outputs_path: str | None = field(default=None, metadata={"help": "Write one prediction per line here."})
    results_path: str | None = field(default=None, metadata={"help": "Write correct/total/accuracy as JSON here."})
    batch_size: int = field(default=128, metadata={"help": "Questions decoded together."})
    max_new_tokens: int = field(default=32, metadata={"help": "Characters generated per answer (reference 32)."})
    device: str = field(default="auto", metadata={"help": "'auto' (cuda if available), 'cpu' or 'cuda'."})
    records_path: str | None = field(default=None, metadata={
        "help": "Per-question records (JSON Lines); default: beside --outputs_path, PREDICTIONS.records.jsonl."})
    html_path: str | None = field(default=None, metadata={
        "help": "The error-analysis page; default: beside --outputs_path, PREDICTIONS.html."})
    wiki_path: str | None = field(default=None, metadata={
        "help": "wiki.txt, to tell grounded answers from made-up ones; default: wiki.txt beside --eval_corpus_path."})
    abstain_below: float | None = field(default=None, metadata={
        "help": "Answer nothing (an empty prediction) where the answer's probability (a reciting model's: of its "
                "recitation and answer together; a calibrated model's: that the answer is right) is below this, in "
                "(0, 1)."})
    abstain_ungrounded: bool = field(default=False, metadata={
        "help": "Answer nothing where the answer does not occur in the person's wiki.txt line (needs wiki.txt)."})
    model_card: bool = field(default=False, metadata={
        "help": "Record the exact match in the model folder's card (README.md model-index: the dataset and this "
                "command), replacing an earlier result on the same file."})
    push_to_hub: bool = field(default=False, metadata={
        "help": "After evaluating, upload the model folder (its card included) to the Hugging Face Hub."})
    hub_model_id: str | None = field(default=None, metadata={"help": "The repository (default: the folder's name)."})
    hub_private_repo: bool | None = field(default=None, metadata={"help": "Create the repository private."})
    preset: str = field(default=REFERENCE, metadata={
        "help": "Answer as the training preset's models were measured: " + "; ".join(
            f"'{name}' sets " + ", ".join(f"--{flag} {value}" for flag, value in EVALUATION[name].items())
            for name in EVALUATION) + "; the others answer as the assignment does.", "choices": list(PRESETS)})


DecodingArguments = decoding_arguments()  # how the model answers: answering.py's decoding choices


def build_parser() -> HfArgumentParser:
    return HfArgumentParser((EvalArguments, DecodingArguments), prog="evaluate_birthplace.py")


def main(argv: Sequence[str] | None = None) -> int:
    args, decoding = parse_args(build_parser(), argv, stage="evaluate")
    chosen = {name: value for name, value in vars(decoding).items() if value is not None}
    if (args.model_name_or_path is None) == (args.baseline is None):
        raise UsageError("give exactly one of --model_name_or_path or --baseline london")
    if args.abstain_below is not None and not 0 < args.abstain_below < 1:
        raise UsageError(f"--abstain_below {args.abstain_below}: must be a probability between 0 and 1 (exclusive)")
    if any(chosen.values()) and args.baseline:
        raise UsageError(f"--{next(n for n, v in chosen.items() if v)} needs a model; the London baseline has none")
    if (args.model_card or args.push_to_hub) and args.baseline:
        raise UsageError("--model_card and --push_to_hub need a model folder; the London baseline has none")
    if args.abstain_below is not None and args.baseline:
        raise UsageError("--abstain_below needs a model's confidence; the London baseline has none")
    given = args.model_name_or_path
    args.model_name_or_path = resolve_model_path(given)  # owner/name: the Hub's copy, from the local cache first
    if args.model_card and given != args.model_name_or_path:
        raise UsageError(f"--model_card: {given} was read from the Hub cache; record the result in a local folder "
                         "(its card travels with the next push)")
    records_path = args.records_path or (records_path_for(args.outputs_path) if args.outputs_path else None)
    html_path = args.html_path or (report_path_for(args.outputs_path) if args.outputs_path else None)
    outputs = {"--outputs_path": args.outputs_path, "--results_path": args.results_path,
               "--records_path": records_path, "--html_path": html_path}
    for flag, path in outputs.items():
        check_output_file(path, flag)  # before the decoding, not after it
    beside = str(Path(args.eval_corpus_path).with_name("wiki.txt"))  # the wiki.txt read when none is given
    check_not_input(outputs, {"--eval_corpus_path": args.eval_corpus_path, "--wiki_path": args.wiki_path or beside,
                              "--model_name_or_path": args.model_name_or_path})
    analyse = bool(records_path or html_path or args.abstain_below or args.abstain_ungrounded)
    qa = load_qa_tsv(args.eval_corpus_path, require_answer=False)
    questions, gold = qa["question"], qa["answer"]
    wiki = find_wiki(args.wiki_path, args.eval_corpus_path) if analyse else None  # read before decoding
    if args.abstain_ungrounded and wiki is None:
        raise UsageError(f"--abstain_ungrounded needs wiki.txt: none beside {args.eval_corpus_path}; give --wiki_path")

    answer_scores = recitations = recitation_scores = signals = None
    if args.baseline == "london":
        answers = ["London"] * len(questions)
    else:
        device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
        config, tokenizer = check_chargpt_folder(args.model_name_or_path)
        check_questions(args.eval_corpus_path, questions, tokenizer, config, args.max_new_tokens)  # before loading
        if decoding.answer_from_recitation and config.answer_format != "recite":
            raise UsageError(f"--answer_from_recitation: {args.model_name_or_path} does not recite (answer_format="
                             f"{config.answer_format!r}); it needs a model finetuned with --recite True")
        # how the model was measured, unless a flag says otherwise; the length and abstention are this command's
        saved = AnsweringSettings.of(config)
        settings = replace(saved.choosing(**chosen), max_new_tokens=args.max_new_tokens, abstain_below=None,
                           abstention=None)
        try:
            settings.check()
        except QuestionError as err:
            raise UsageError(str(err)) from None
        kept = AnsweringSettings.departures({name: getattr(settings, name) for name in DECODING_CHOICES
                                             if name not in chosen})
        if kept:
            logger.info("%s answers as it saved: %s", args.model_name_or_path,
                        ", ".join(f"{name}={value}" for name, value in kept.items()))
        model, tokenizer = load_chargpt(args.model_name_or_path)
        model = model.to(device)
        if config.answer_format == "recite":
            logger.info("%s answers after reciting what it read about the person (answer_format='recite')",
                        args.model_name_or_path)
        answers, recitations, answer_scores, recitation_scores, signals = ask_pipeline(
            model, tokenizer, questions, settings, args.batch_size, score=analyse)
    records = build_records(questions, gold, answers, answer_scores, wiki, args.abstain_below, args.abstain_ungrounded,
                            recitations, recitation_scores, signals)
    predictions = [r["prediction"] for r in records]

    if args.outputs_path:
        atomic_write_text(args.outputs_path, "".join(as_line(line) + "\n" for line in predictions))
        broken = sum(as_line(line) != line for line in predictions)
        if broken:
            logger.warning("%d predictions hold a line break; %s has a space there (the scores use the predictions "
                           "themselves)", broken, args.outputs_path)
    if records_path:
        write_records(records_path, records)
    if html_path:
        write_report(html_path, records, f"{args.model_name_or_path or 'baseline ' + args.baseline} on "
                     f"{args.eval_corpus_path}", {"predictions": args.outputs_path, "records": records_path,
                                                  "wiki.txt": wiki.path if wiki else "none (grounding unknown)",
                                                  "abstain below": args.abstain_below,
                                                  "abstain ungrounded": args.abstain_ungrounded or None})
    if not any(gold):
        print(f"No gold birth places in {args.eval_corpus_path}; wrote {len(predictions)} predictions"
              + (f" to {args.outputs_path}" if args.outputs_path else ""))
        return 0
    scores = load_metric().compute(predictions=predictions, references=gold)
    print(f"Correct: {scores['correct']} out of {scores['total']}: {100 * scores['accuracy']:.1f}%")
    summary = summarize(records) if analyse else None
    if summary:
        print("\n".join(describe(summary)))
    if args.model_card and args.model_name_or_path:
        add_eval_result(args.model_name_or_path, scores["accuracy"], args.eval_corpus_path,
                        command_line("evaluate_birthplace.py", argv))
    if args.push_to_hub and args.model_name_or_path:
        print(f"pushed to {push_folder(args.model_name_or_path, args.hub_model_id, args.hub_private_repo)}")
    if args.results_path:
        atomic_write_json(args.results_path, {**scores, "eval_corpus_path": args.eval_corpus_path,
                                              "model": args.model_name_or_path or f"baseline:{args.baseline}",
                                              **({"analysis": summary} if summary else {})})
    return 0


def ask_pipeline(model, tokenizer, questions: Sequence[str], settings: AnsweringSettings, batch_size: int, score: bool,
                 show_progress: bool = True) -> tuple:
    """Answers, recitations, their scores and each answer's signals (the name's familiarity and the calibrated
    probability that it is right), from the birthplace-qa pipeline answering with `settings` (`ask_all`; it abstains
    nothing: the records do), in file order."""
    results = ask_all(model, tokenizer, questions, batch_size, settings, show_progress, score=score, abstain_below=None)
    recites = settings.answer_format == "recite"
    return ([r["answer"] for r in results], [r["recitation"] for r in results] if recites else None,
            [r["answer_score"] for r in results] if score else None,
            [r["recitation_score"] for r in results] if score and recites else None,
            [{"name_score": r["name_score"], "right_probability": r["confidence"]} for r in results] if score else None)


def cli() -> int:
    """The installed `chargpt-evaluate` command: like running this file, bad input ends as one line."""
    return run_cli(main)


if __name__ == "__main__":
    sys.exit(cli())
