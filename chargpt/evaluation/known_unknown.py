"""Does the model know whom it read about? Score it on people it read (dev) against people it never read.

    python -m chargpt.evaluation.known_unknown --model_name_or_path out/demo/rope-causal-seed0-finetune \
        --known out/demo/data/birth_dev.tsv --unknown out/demo/unknown-eval.tsv --results_path R.json

Both sets are asked through the birthplace-qa pipeline at the model's saved setting (its calibration and threshold),
as `chargpt-ask` and `pipeline(...)` ask them (`chargpt.evaluation.predict.ask_all`). The record says, for the known
people: answered, right, precision, coverage, the right answers still given, the ECE of the confidence shown; for
the unknown ones: the share answered (anything but "I don't know"); and how well the confidence and the name's
familiarity each tell the two apart (AUROC known vs unknown: 0.5 is a coin, 1.0 never wrong).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import Any

__all__ = ["auroc", "known_unknown_summary"]


def auroc(positives: Sequence[float], negatives: Sequence[float]) -> float | None:
    """P(a random positive scores above a random negative), ties counting half (Mann-Whitney); None if a side is
    empty."""
    if not positives or not negatives:
        return None
    ranked = sorted([(v, 1) for v in positives] + [(v, 0) for v in negatives])
    rank_sum, i = 0.0, 0
    while i < len(ranked):
        j = i
        while j < len(ranked) and ranked[j][0] == ranked[i][0]:
            j += 1
        mid = (i + j + 1) / 2  # the mean rank of a run of ties (ranks from 1)
        rank_sum += mid * sum(label for _, label in ranked[i:j])
        i = j
    n_pos, n_neg = len(positives), len(negatives)
    return (rank_sum - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


def shown(result: dict) -> float:
    """The confidence a person is shown: the calibrated one, else the raw probability."""
    return result["confidence"] if result["confidence"] is not None else result["probability"]


def known_unknown_summary(known: Sequence[dict], gold: Sequence[str], unknown: Sequence[dict]) -> dict[str, Any]:
    """What the record holds (module docstring); `known` and `unknown` are `predict.ask_all` results, `gold` the known
    people's places."""
    from .confidence import ece

    right = [r["answer"] == g for r, g in zip(known, gold, strict=True)]
    answered = [not r["abstained"] for r in known]
    n_answered = sum(answered)
    n_right_answered = sum(a and c for a, c in zip(answered, right, strict=True))
    unknown_answered = sum(not r["abstained"] for r in unknown)
    name_known = [r["name_score"] for r in known if r["name_score"] is not None]
    name_unknown = [r["name_score"] for r in unknown if r["name_score"] is not None]
    return {
        "known": {"questions": len(known), "right": sum(right), "accuracy": sum(right) / len(known),
                  "answered": n_answered, "coverage": n_answered / len(known), "right_answered": n_right_answered,
                  "precision": n_right_answered / n_answered if n_answered else None,
                  "right_kept": n_right_answered / sum(right) if any(right) else None,
                  "ece_shown": ece([(shown(r), c) for r, c in zip(known, right, strict=True)]),
                  "calibrated": known[0]["confidence"] is not None if known else None},
        "unknown": {"questions": len(unknown), "answered": unknown_answered,
                    "answered_share": unknown_answered / len(unknown) if unknown else None,
                    "dont_know_share": 1 - unknown_answered / len(unknown) if unknown else None},
        "auroc_shown": auroc([shown(r) for r in known], [shown(r) for r in unknown]),
        "auroc_raw_probability": auroc([r["probability"] for r in known], [r["probability"] for r in unknown]),
        "auroc_name_score": auroc(name_known, name_unknown),
    }


def describe(summary: dict[str, Any]) -> list[str]:
    known, unknown = summary["known"], summary["unknown"]
    pct = lambda v: "—" if v is None else f"{100 * v:.1f}%"  # noqa: E731
    return [
        f"known people: {known['right']}/{known['questions']} right ({pct(known['accuracy'])}); answered "
        f"{known['answered']} ({pct(known['coverage'])}) at precision {pct(known['precision'])}; right answers "
        f"still given {pct(known['right_kept'])}; ECE of the confidence shown {known['ece_shown']:.3f}",
        f"unknown people: {unknown['answered']}/{unknown['questions']} answered, \"I don't know\" to "
        f"{pct(unknown['dont_know_share'])}",
        "AUROC known vs unknown: " + ", ".join(
            f"{label} {'—' if summary[key] is None else format(summary[key], '.3f')}" for label, key in (
                ("confidence shown", "auroc_shown"), ("raw probability", "auroc_raw_probability"),
                ("name familiarity", "auroc_name_score"))),
    ]


def build_parser():
    import argparse

    parser = argparse.ArgumentParser(prog="python -m chargpt.evaluation.known_unknown",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--model_name_or_path", required=True, help="a finetuned chargpt model folder")
    parser.add_argument("--known", required=True, help="questions with gold places about people it read (dev)")
    parser.add_argument("--unknown", required=True, help="questions about people it never read "
                        "(python -m data_scripts.unknown_people)")
    parser.add_argument("--known_records", help="the records of an evaluation of this model on --known "
                        "(evaluate_birthplace.py's PREDICTIONS.records.jsonl, answering as the model's saved "
                        "setting does): read, not asked again; its saved calibration and threshold apply")
    parser.add_argument("--results_path", help="write the record (JSON) here")
    parser.add_argument("--label", default="", help="a name for the record")
    parser.add_argument("--reliability_plot", help="draw the reliability of the confidence shown on the known "
                        "people here (PNG)")
    parser.add_argument("--batch_size", type=int, default=128)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from transformers.utils import logging

    logging.set_verbosity_warning()  # the results, not every config loaded
    from chargpt.training import check_chargpt_folder, load_chargpt
    from chargpt.training.cli import command_line
    from chargpt.training.files import atomic_write_json
    from chargpt.training.hardware import hardware
    from chargpt.training.outputs import check_not_input
    from data_scripts import load_qa_tsv
    from modeling_chargpt.answering import AnsweringSettings

    from .predict import ask_all, asked_from_records

    check_not_input({"--results_path": args.results_path, "--reliability_plot": args.reliability_plot},
                    {"--model_name_or_path": args.model_name_or_path, "--known": args.known, "--unknown": args.unknown,
                     "--known_records": args.known_records})
    check_chargpt_folder(args.model_name_or_path)
    known = load_qa_tsv(args.known)
    unknown = load_qa_tsv(args.unknown, require_answer=False)
    model, tokenizer = load_chargpt(args.model_name_or_path)
    start = time.time()
    if args.known_records:
        settings = AnsweringSettings.of(model.config)
        asked_known = asked_from_records(args.known_records, list(known["question"]), settings)
    else:
        asked_known = ask_all(model, tokenizer, list(known["question"]), args.batch_size)
    asked_unknown = ask_all(model, tokenizer, list(unknown["question"]), args.batch_size)
    summary = known_unknown_summary(asked_known, list(known["answer"]), asked_unknown)
    print("\n".join(describe(summary)))
    if args.reliability_plot:
        from .confidence import plot_reliability

        right = [r["answer"] == g for r, g in zip(asked_known, known["answer"], strict=True)]
        plot_reliability([(shown(r), c) for r, c in zip(asked_known, right, strict=True)], args.reliability_plot,
                         label=args.label or "known people, the confidence shown")
    if args.results_path:
        atomic_write_json(args.results_path, {
            "label": args.label, "model": args.model_name_or_path, "known_questions": args.known,
            "unknown_questions": args.unknown, "command": command_line("-m chargpt.evaluation.known_unknown", argv),
            "hardware": hardware(), "seconds": round(time.time() - start, 1),
            "saved_setting": {"abstain_below": (model.config.answering or {}).get("abstain_below")}, **summary})
    return 0


def cli() -> int:
    from chargpt.training import run_cli

    return run_cli(main)


if __name__ == "__main__":
    sys.exit(cli())
