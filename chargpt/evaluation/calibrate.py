"""Fit the confidence a person reads, and when to say "I don't know", then save both with the models.

    python -m chargpt.evaluation.calibrate --model_name_or_path HELDOUT_MODEL --holdout HOLDOUT.tsv \
        --unknown UNKNOWN.tsv --save_to FINAL_MODEL [--keep_right 0.95 | --precision 0.95] [--gated] \
        [--results_path R.json]

HELDOUT_MODEL is finetuned without the held-out training questions (HOLDOUT.tsv), so it answers them as a final
model answers dev; UNKNOWN.tsv asks about people no corpus line mentions (`python -m data_scripts.unknown_people`).
Dev is never read. Each question's two signals (`modeling_chargpt.calibration`: the name's familiarity and the
probability of the whole output) and whether its answer was right (an unknown person's never is) fit the probability
that an answer is right: one logistic regression on both, or with `--gated` a gate on the name (held-out people
against unknown ones) times a regression on the output (the held-out answers). The threshold is the highest that still
gives `--keep_right` of the held-out right answers or, with `--precision P`, the lowest at which the held-out answers
it lets through are at least P right; either is raised where needed until `--refuse_unknown` of the unknown people
fall below it. Both go into each `--save_to` folder's config (``answering``: ``calibration``, ``abstain_below`` and
where they came from), through `save_pretrained`, so the pipeline, `chargpt-ask` and `evaluate_birthplace.py` use them
with no flag.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from pathlib import Path

from modeling_chargpt.calibration import FEATURES, Calibration

__all__ = ["choose_keep_threshold", "choose_precision_threshold", "fit_logistic", "fit_on", "refused_share",
           "refusing_threshold", "save_calibration"]


def output_logprob(result: dict) -> float:
    """The log-probability of the model's whole output (recitation, if any, and answer) from a `predict.ask_all`
    result."""
    if "output_logprob" in result:  # read from an evaluation's records (`predict.asked_from_records`)
        return result["output_logprob"]
    recited = result.get("recitation_score")
    return result["answer_score"].logprob + (recited.logprob if recited is not None else 0.0)


def fit_logistic(rows: Sequence[Sequence[float]], labels: Sequence[bool], features: Sequence[str] | None = None,
                 l2: float = 1e-2, steps: int = 100) -> Calibration:
    """Logistic regression by Newton's method on standardized features, with a small L2 penalty on the weights so
    that perfectly separated data (every unknown person below every known one) still gives finite weights."""
    import torch

    features = FEATURES if features is None else features
    x = torch.tensor([list(r) for r in rows], dtype=torch.float64)
    y = torch.tensor([float(v) for v in labels], dtype=torch.float64)
    if x.ndim != 2 or x.shape[0] < 2 or x.shape[1] != len(features):
        raise ValueError(f"need at least two rows of {len(features)} features to fit a calibration")
    if y.min() == y.max():
        raise ValueError("need both right and wrong answers to fit a calibration")
    mean, scale = x.mean(0), x.std(0).clamp_min(1e-6)
    z = torch.cat([torch.ones(len(x), 1, dtype=x.dtype), (x - mean) / scale], 1)
    w = torch.zeros(z.shape[1], dtype=x.dtype)
    penalty = torch.full_like(w, l2)
    penalty[0] = 0.0  # the bias is not shrunk
    for _ in range(steps):
        p = torch.sigmoid(z @ w)
        grad = z.T @ (p - y) + penalty * w
        hess = (z.T * (p * (1 - p))) @ z + torch.diag(penalty) + 1e-9 * torch.eye(len(w), dtype=x.dtype)
        step = torch.linalg.solve(hess, grad)
        w -= step
        if step.abs().max() < 1e-10:
            break
    return Calibration(tuple(w[1:].tolist()), float(w[0]), tuple(mean.tolist()), tuple(scale.tolist()),
                       tuple(features))


def fit_on(held: Sequence[dict], gold: Sequence[str], unknown: Sequence[dict], gated: bool = False) -> Calibration:
    """The calibration fitted on held-out answers (right or not) and unknown people's (never right): one regression on
    both signals over all of them, or `gated`, P(read about | name) from held-out against unknown people times
    P(right | output) from the held-out answers."""
    right = [r["answer"] == g for r, g in zip(held, gold, strict=True)]
    if not gated:
        rows = [(r["name_score"], output_logprob(r)) for r in (*held, *unknown)]
        return fit_logistic(rows, right + [False] * len(unknown))
    gate = fit_logistic([(r["name_score"],) for r in (*held, *unknown)], [True] * len(held) + [False] * len(unknown),
                        features=("name_logprob",))
    answers = fit_logistic([(output_logprob(r),) for r in held], right, features=("output_logprob",))
    return Calibration(answers.weights, answers.bias, answers.mean, answers.scale, answers.features,
                       gate=gate.to_dict())


def choose_keep_threshold(right_probabilities: Sequence[float], keep_right: float) -> float | None:
    """The highest threshold that still answers `keep_right` of the right answers (their calibrated probabilities);
    None if there are none."""
    ranked = sorted(right_probabilities, reverse=True)
    if not ranked:
        return None
    kept = max(1, math.ceil(keep_right * len(ranked)))
    return min(max(ranked[kept - 1], 1e-12), 1 - 1e-12)  # abstain_below lies strictly inside (0, 1)


def choose_precision_threshold(probabilities: Sequence[float], right: Sequence[bool], precision: float) -> float | None:
    """The lowest threshold at which the answers it lets through (probability at or above it) are at least `precision`
    right; where no threshold reaches it, the one whose answers are most often right (the most answers among equals).
    None if there are no answers."""
    ranked = sorted(zip(probabilities, right, strict=True), key=lambda pair: -pair[0])
    best, best_precision, reached, n_right = None, -1.0, None, 0
    for k, (p, is_right) in enumerate(ranked, start=1):
        n_right += is_right
        if k < len(ranked) and ranked[k][0] == p:
            continue  # a threshold lets through every answer of its probability
        if n_right / k >= precision:
            reached = p
        if n_right / k >= best_precision:
            best, best_precision = p, n_right / k
    chosen = reached if reached is not None else best
    return None if chosen is None else min(max(chosen, 1e-12), 1 - 1e-12)


def refused_share(unknown_probabilities: Sequence[float], threshold: float) -> float:
    """The share of unknown people a threshold says "I don't know" to."""
    return sum(p < threshold for p in unknown_probabilities) / len(unknown_probabilities) if unknown_probabilities \
        else 1.0


def refusing_threshold(unknown_probabilities: Sequence[float], share: float) -> float:
    """The lowest threshold that says "I don't know" to at least `share` of the unknown people."""
    ranked = sorted(unknown_probabilities)
    k = min(len(ranked) - 1, math.ceil(share * len(ranked)) - 1)  # the k+1 lowest must fall below it
    return min(max(math.nextafter(ranked[k], 1.0), 1e-12), 1 - 1e-12)


def save_calibration(folder: str | Path, calibration: dict, threshold: float | None, abstention: dict) -> None:
    """The folder's config with `calibration` and `threshold` in ``answering``, written whole (through
    `save_pretrained` into a temporary folder, then renamed over config.json) or not at all, with the pipeline's code
    that applies them (a folder saved before carries code that would not); its card follows."""
    from chargpt.training.export import save_answering
    from modeling_chargpt import CharGPTConfig

    saved = CharGPTConfig.from_pretrained(folder).answering or {}
    save_answering(folder, {**saved, "calibration": calibration, "abstain_below": threshold,
                            "abstention": abstention})


def build_parser():
    import argparse

    parser = argparse.ArgumentParser(prog="python -m chargpt.evaluation.calibrate", description=__doc__.split("\n")[0])
    parser.add_argument("--model_name_or_path", required=True,
                        help="a model finetuned WITHOUT the held-out questions (it answers them as dev)")
    parser.add_argument("--holdout", required=True, help="held-out training questions with their places")
    parser.add_argument("--unknown", required=True, help="questions about people the corpus never mentions")
    parser.add_argument("--save_to", nargs="*", default=[], metavar="MODEL_DIR",
                        help="finetuned model folders that answer with this calibration and threshold")
    parser.add_argument("--keep_right", type=float, default=0.95,
                        help="the threshold keeps this share of the held-out right answers (default 0.95)")
    parser.add_argument("--precision", type=float,
                        help="instead of --keep_right: the lowest threshold at which the held-out answers it lets "
                        "through are at least this share right (make best: 0.95)")
    parser.add_argument("--refuse_unknown", type=float, default=0.9,
                        help="the threshold rises where needed so that at least this share of the unknown people "
                        "get \"I don't know\" (default 0.9)")
    parser.add_argument("--gated", action="store_true",
                        help="a gate on the name's familiarity times a regression on the output's log-probability, "
                        "instead of one regression on both (docs/confidence.md measures both on make best's model)")
    parser.add_argument("--holdout_records", help="the records of an evaluation of this model on --holdout "
                        "(evaluate_birthplace.py's PREDICTIONS.records.jsonl): read, not asked again")
    parser.add_argument("--results_path", help="write what was fitted and measured here (JSON)")
    parser.add_argument("--batch_size", type=int, default=128)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from transformers.utils import logging

    logging.set_verbosity_warning()  # the results, not every config loaded
    from chargpt.training import UsageError, check_chargpt_folder, load_chargpt
    from chargpt.training.cli import command_line
    from chargpt.training.files import atomic_write_json
    from chargpt.training.outputs import check_not_input
    from data_scripts import load_qa_tsv
    from modeling_chargpt.answering import AnsweringSettings

    from .predict import ask_all, asked_from_records

    for flag, share in (("--keep_right", args.keep_right), ("--refuse_unknown", args.refuse_unknown),
                        ("--precision", args.precision)):
        if share is not None and (not 0 <= share <= 1 or (flag != "--refuse_unknown" and share == 0)):
            raise UsageError(f"{flag} {share}: a share in {'[0, 1]' if flag == '--refuse_unknown' else '(0, 1]'}")
    check_not_input({"--results_path": args.results_path},
                    {"--holdout": args.holdout, "--unknown": args.unknown,
                     "--holdout_records": args.holdout_records, **{
                        f"--model_name_or_path/--save_to {i}": f for i, f in
                        enumerate([args.model_name_or_path, *args.save_to])}})
    for folder in (args.model_name_or_path, *args.save_to):
        check_chargpt_folder(folder)  # before anything is computed
    held = load_qa_tsv(args.holdout)
    unknown = load_qa_tsv(args.unknown, require_answer=False)
    model, tokenizer = load_chargpt(args.model_name_or_path)
    raw = {"abstain_below": None}  # the model's own answers and scores, whatever it saved
    asked_held = (asked_from_records(args.holdout_records, list(held["question"]), AnsweringSettings())
                  if args.holdout_records else ask_all(model, tokenizer, list(held["question"]), args.batch_size,
                                                       **raw))
    asked_unknown = ask_all(model, tokenizer, list(unknown["question"]), args.batch_size, **raw)
    gold = list(held["answer"])
    try:
        fitted = fit_on(asked_held, gold, asked_unknown, gated=args.gated)
    except ValueError as err:  # not an error: a recipe that ends here keeps its hours of training
        print(f"nothing fitted or saved: {args.holdout}: {err} (the model shows its raw probability, as before)")
        if args.results_path:
            atomic_write_json(args.results_path, {"command": command_line("-m chargpt.evaluation.calibrate", argv),
                                                  "calibration": None, "why_not": str(err)})
        return 0

    def p(result: dict) -> float:
        return fitted.probability(name_logprob=result["name_score"], output_logprob=output_logprob(result))

    right = [r["answer"] == g for r, g in zip(asked_held, gold, strict=True)]
    if args.precision is None:
        threshold = choose_keep_threshold([p(r) for r, c in zip(asked_held, right, strict=True) if c], args.keep_right)
    else:
        threshold = choose_precision_threshold([p(r) for r in asked_held], right, args.precision)
    raised = threshold is not None and refused_share([p(r) for r in asked_unknown], threshold) < args.refuse_unknown
    if raised:  # the unknown people win: answering strangers is worse than missing some right answers
        threshold = refusing_threshold([p(r) for r in asked_unknown], args.refuse_unknown)
    answered = [p(r) >= threshold for r in asked_held] if threshold is not None else [True] * len(asked_held)
    n_answered = sum(answered)
    n_right = sum(a and c for a, c in zip(answered, right, strict=True))
    unknown_answered = sum(p(r) >= threshold for r in asked_unknown) if threshold is not None else len(asked_unknown)
    measured = {"holdout_questions": len(asked_held), "holdout_right": sum(right), "holdout_answered": n_answered,
                "holdout_precision": n_right / n_answered if n_answered else None,
                "holdout_right_kept": n_right / sum(right) if any(right) else None,
                "unknown_questions": len(asked_unknown), "unknown_answered": unknown_answered}
    calibration = Calibration(fitted.weights, fitted.bias, fitted.mean, fitted.scale, fitted.features, {
        "model": args.model_name_or_path, "holdout": args.holdout, "unknown": args.unknown, **measured},
        fitted.gate).to_dict()
    print(f"held-out: {sum(right)}/{len(right)} right; at the threshold {threshold:.3g} it answers {n_answered} "
          f"({n_right} right, {100 * measured['holdout_right_kept']:.1f}% of the right ones)"
          if threshold is not None else "held-out: no right answer, no threshold")
    print(f"unknown people: {unknown_answered}/{len(asked_unknown)} answered at that threshold")
    rule = {"rule": "keep_right", "keep_right": args.keep_right} if args.precision is None else {
        "rule": "precision", "precision": args.precision}
    abstention = {**rule, "refuse_unknown": args.refuse_unknown,
                  "raised_for_unknown": raised, **measured}
    for folder in args.save_to:
        save_calibration(folder, calibration, threshold, abstention)
        print(f"saved into {folder}/config.json")
    if args.results_path:
        atomic_write_json(args.results_path, {"command": command_line("-m chargpt.evaluation.calibrate", argv),
                                              "calibration": calibration, "abstain_below": threshold,
                                              "abstention": abstention, "saved_to": list(args.save_to)})
    return 0


def cli() -> int:
    from chargpt.training import run_cli

    return run_cli(main)


if __name__ == "__main__":
    sys.exit(cli())
