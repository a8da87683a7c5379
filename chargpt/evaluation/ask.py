"""Ask a trained model, as a person would: `chargpt-ask MODEL "Where was NAME born?"`.

    chargpt-ask out/best/seed0 "Where was Khatchig Mouradian born?" "Ann Lee"
    chargpt-ask out/best/seed0 --wiki ../shared/data/wiki.txt < questions.txt    # one question per line

Each answer comes through the birthplace-qa pipeline, so it is the answer the model was measured with: its saved
format, calibration and abstention threshold (`--abstain_below` sets another, `--abstain_below 0` answers
everything). It prints the answer and how sure the model is (the probability that the answer is right, where the
model saved a calibration, beside the raw probability of its output), "I don't know" where the model abstains, and
with `--wiki` the person's wiki.txt line and whether the answer is in it. A question may be typed in any case,
without its question mark, or as a bare name. A question the model cannot answer gets its own error line and the
others are still answered; the exit status is then 1.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from chargpt.training import UsageError, check_chargpt_folder, resolve_model_path, run_cli
from data_scripts import read_text_file


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="chargpt-ask", description=__doc__.split("\n")[0])
    parser.add_argument("model", help="a finetuned chargpt model folder, or owner/name of one on the Hugging Face Hub")
    parser.add_argument("questions", nargs="*", help="'Where was NAME born?' or a name; none: read standard input")
    parser.add_argument("--wiki", help="wiki.txt: show the person's line and whether the answer is in it")
    parser.add_argument("--abstain_below", type=float, default=None,
                        help="answer only above this probability (default: the model's saved threshold; 0: always)")
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--device", default="cpu")
    return parser


def _percent(probability: float) -> str:
    return f"{100 * probability:.0f}%" if probability >= 0.005 else "<1%"


def _exact(probability: float) -> str:
    """'12%', or '3.1e-09' where a percentage would hide the difference (a raw probability of a whole recitation is
    often far below 1%)."""
    return _percent(probability) if probability >= 0.005 else f"{probability:.2g}"


def describe(result: dict, threshold: float | None) -> list[str]:
    """What a person reads for one answer: the question and the answer (or "I don't know"), then its grounding.
    "87% sure" is the calibrated probability that the answer is right where the model saved a calibration, with the
    raw probability of its output beside it; without one, the raw probability alone."""
    calibrated = result.get("confidence") is not None
    shown = result["confidence"] if calibrated else result["probability"]
    raw = f"; raw probability {_exact(result['probability'])}" if calibrated else ""
    if result["abstained"]:
        lines = [f"{result['question']}  ->  I don't know (its best guess, {result['answer']!r}, has "
                 f"{_exact(shown)}; it answers from {_exact(threshold)}{raw})"]
    else:
        lines = [f"{result['question']}  ->  {result['answer']}  ({_percent(shown)} sure{raw})"]
    if result.get("recitation"):
        lines.append(f"    recited: {result['recitation']}")
    if "line" in result:
        if result["line"] is None:
            lines.append("    wiki.txt: no line about this person")
        else:
            found = "the answer is in it" if result["grounded"] else "the answer is not in it"
            lines.append(f"    wiki.txt ({found}): {result['line']}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.model = resolve_model_path(args.model)  # owner/name: the Hub's copy, from the local cache first
    check_chargpt_folder(args.model)  # one line for a folder that is not a model, before loading anything
    questions = list(args.questions) or [line.strip() for line in sys.stdin if line.strip()]
    if not questions:
        raise UsageError("no question: give one after the model folder, or one per line on standard input")
    from transformers import pipeline
    from transformers.utils import logging

    logging.set_verbosity_warning()  # a person reads the answers, not the loading
    logging.disable_progress_bar()

    from modeling_chargpt import TASK, BirthplaceQAPipeline
    from modeling_chargpt.answering import QuestionError

    ask = pipeline(TASK, model=args.model, pipeline_class=BirthplaceQAPipeline, device=args.device)
    options = {"documents": read_text_file(args.wiki)} if args.wiki else {}  # a missing file: one line
    if args.abstain_below is not None:
        options["abstain_below"] = args.abstain_below or None
    threshold = options.get("abstain_below", ask.settings.abstain_below)
    problems, good = {}, []  # a bad question gets its own error line; the others are answered
    for i, question in enumerate(questions):
        try:
            good.append(ask.asked(question, ask.settings))  # as the pipeline will ask it: checked once
        except QuestionError as err:
            problems[i] = str(err)
    try:
        answers = iter(ask(good, batch_size=args.batch_size, **options) if good else [])
    except QuestionError as err:
        raise UsageError(str(err)) from None
    for i in range(len(questions)):
        if i in problems:
            print(f"error: question {i + 1}: {problems[i]}", file=sys.stderr, flush=True)
        else:
            print("\n".join(describe(next(answers), threshold)), flush=True)
    return 1 if problems else 0


def cli() -> int:
    """The installed `chargpt-ask` command."""
    return run_cli(main)


if __name__ == "__main__":
    sys.exit(cli())
