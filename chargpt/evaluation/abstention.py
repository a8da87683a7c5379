"""Choose an abstention threshold on held-out *training* questions for a target precision, then apply it to dev.

    python -m chargpt.evaluation.abstention --holdout H/lr0.0003.holdout.predictions --dev H/lr0.0003.dev.predictions \
        --target_precision 0.8 --out_dir H/abstention

Reads the records evaluate_birthplace.py wrote beside each predictions file (``PREDICTIONS.records.jsonl``; or
--holdout_records / --dev_records), checked against the predictions. Both must come from ONE model that was not
finetuned on the held-out questions: chargpt.recipes.select_finetune_lr --keep_models leaves such a model, finetuned on
the training questions minus --holdout, and its held-out predictions (docs/confidence.md). Dev never chooses anything:
the threshold is the held-out one. --dev may also be the dev answers of the final model (the same run finetuned on
every training question), to see what the threshold does there before --save_to gives it to that model.
Prints the held-out and dev summaries (accuracy, grounded split, AURC, ECE) and the dev precision and coverage at
the threshold; writes coverage_accuracy.png, reliability.png and abstention.json
into --out_dir. Without --holdout, only the dev analysis and plots. With --grounded_only the rule never answers an
answer that is not in the person's wiki.txt line (evaluate_birthplace.py --abstain_ungrounded) and the threshold is
chosen among the others; coverage still counts every question.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from chargpt.evaluation.confidence import (
    apply_threshold,
    choose_threshold,
    describe,
    plot_coverage_accuracy,
    plot_reliability,
    scored,
    scored_grounded,
    summarize,
)
from chargpt.evaluation.record_files import check_records_match, read_records, records_path_for
from chargpt.training import UsageError, atomic_write_json, run_cli
from chargpt.training.cli import command_line


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dev", required=True, help="Dev predictions file of the model (records beside it).")
    parser.add_argument("--holdout", help="Held-out training questions' predictions file of the same model.")
    parser.add_argument("--dev_records", help="Default: DEV.records.jsonl.")
    parser.add_argument("--holdout_records", help="Default: HOLDOUT.records.jsonl.")
    parser.add_argument("--target_precision", type=float, default=0.8,
                        help="Answer only where held-out precision reaches this, in (0, 1] (default 0.8).")
    parser.add_argument("--grounded_only", action="store_true",
                        help="Never answer an ungrounded answer; choose the threshold among the grounded ones.")
    parser.add_argument("--bins", type=int, default=10, help="Confidence bins of the reliability diagram and ECE.")
    parser.add_argument("--out_dir", required=True, help="Where the plots and abstention.json go.")
    parser.add_argument("--save_to", nargs="+", default=[], metavar="MODEL_DIR",
                        help="Finetuned model folders that should abstain below the held-out threshold: it is written "
                             "into their config (answering.abstain_below, with the precision and coverage it was "
                             "chosen for), so the birthplace-qa pipeline and chargpt-ask abstain by default.")
    return parser


def load(predictions: str, records_path: str | None, grounded_only: bool = False) -> tuple[Path, list[dict]]:
    """The records of one evaluation, refused if they were written for another predictions file, without scores,
    or (for --grounded_only) without grounding."""
    path = Path(records_path) if records_path else records_path_for(predictions)
    records = read_records(path)
    check_records_match(path, records, predictions)
    if not scored(records):
        raise UsageError(f"{path}: no record has both a gold place and a confidence (test inputs, or the London "
                         "baseline?): nothing to choose a threshold on")
    if grounded_only and all(r["grounded"] is None for r in records):
        raise UsageError(f"{path}: no record says whether its answer is grounded (evaluated without wiki.txt?): "
                         "--grounded_only needs it")
    return path, records


def rule_points(records: list[dict], grounded_only: bool) -> tuple[list[tuple[float, bool]], int | None]:
    """The points the abstention rule may answer, and the number of questions when that is not all of them."""
    return scored_grounded(records) if grounded_only else (scored(records), None)


def _percent(point: dict) -> str:
    return (f"precision {100 * point['precision']:.1f}% ({point['right']}/{point['answered']}), coverage "
            f"{100 * point['coverage']:.1f}% ({point['answered']}/{point['total']})")


def save_threshold(folder: str, threshold: float, abstention: dict) -> None:
    """Save `threshold` and where it came from with a model (`config.answering`, through `save_pretrained`), whole or
    not at all; its card says so too. Imported here: choosing a threshold from records needs no torch."""
    from chargpt.training.export import save_answering
    from modeling_chargpt import CharGPTConfig

    # a raw-probability threshold: a calibration saved before would read it as a calibrated one, so it goes
    kept = {k: v for k, v in (CharGPTConfig.from_pretrained(folder).answering or {}).items() if k != "calibration"}
    save_answering(folder, {**kept, "abstain_below": threshold, "abstention": abstention})


def main(argv: Sequence[str] | None = None) -> int:
    opts = build_parser().parse_args(argv)
    if not 0 < opts.target_precision <= 1:
        raise UsageError(f"--target_precision {opts.target_precision}: must be in (0, 1]")
    if opts.bins < 1:
        raise UsageError(f"--bins {opts.bins}: must be at least 1")
    if opts.save_to and (not opts.holdout or opts.grounded_only):
        raise UsageError("--save_to needs --holdout (the threshold is chosen there) and no --grounded_only (a model "
                         "abstains on its confidence alone)")
    if opts.save_to:
        from chargpt.training import check_chargpt_folder  # here: reading records needs neither torch nor the model

        for folder in opts.save_to:
            check_chargpt_folder(folder)  # before anything is computed
    out = Path(opts.out_dir)
    dev_path, dev = load(opts.dev, opts.dev_records, opts.grounded_only)
    result: dict = {"dev": {"predictions": opts.dev, "records": str(dev_path),
                            "summary": summarize(dev, opts.bins)}, "target_precision": opts.target_precision,
                    "grounded_only": opts.grounded_only}
    suffix = ", grounded answers only" if opts.grounded_only else ""
    curves, totals, threshold = {}, {}, None
    if opts.holdout:
        held_path, held = load(opts.holdout, opts.holdout_records, opts.grounded_only)
        result["holdout"] = {"predictions": opts.holdout, "records": str(held_path),
                             "summary": summarize(held, opts.bins)}
        print(f"held-out ({held_path}):")
        print("\n".join("  " + line for line in describe(result["holdout"]["summary"])))
        label = "held-out training questions" + suffix
        curves[label], totals[label] = rule_points(held, opts.grounded_only)
        chosen = choose_threshold(curves[label], opts.target_precision, totals[label])
        result["holdout"]["chosen"] = chosen.as_dict() if chosen else None
        if chosen is None:
            print(f"  no threshold reaches {100 * opts.target_precision:g}% precision on the held-out questions")
        else:
            threshold = chosen.threshold
            print(f"  threshold {threshold:.4g} (answer when the record's confidence >= it{suffix}): "
                  f"{_percent(chosen.as_dict())}")
    print(f"dev ({dev_path}):")
    print("\n".join("  " + line for line in describe(result["dev"]["summary"])))
    label = "dev" + suffix
    curves[label], totals[label] = rule_points(dev, opts.grounded_only)
    if threshold is not None:
        at = result["dev"]["at_threshold"] = apply_threshold(curves[label], threshold, totals[label]).as_dict()
        print(f"  at the held-out threshold {threshold:.4g}: {_percent(at)}")
        flags = " --abstain_ungrounded" if opts.grounded_only else ""
        print(f"  to answer this way: evaluate_birthplace.py ...{flags} --abstain_below {threshold!r}")
    if opts.save_to and threshold is None:  # not an error: a recipe that ends here keeps its hours of training
        print(f"  nothing saved into {', '.join(opts.save_to)}: no held-out threshold reaches precision "
              f"{opts.target_precision:g}, so the model answers every question")
    elif opts.save_to:
        chosen = result["holdout"]["chosen"]
        for folder in opts.save_to:
            save_threshold(folder, threshold, {"target_precision": opts.target_precision,
                                               "holdout_precision": chosen["precision"],
                                               "holdout_coverage": chosen["coverage"], "holdout": opts.holdout})
            print(f"  {folder} now abstains below {threshold:.4g}")
    plot_coverage_accuracy({k: v for k, v in curves.items() if v}, out / "coverage_accuracy.png", threshold,
                           totals={k: n for k, n in totals.items() if n is not None})
    plot_reliability(scored(dev), out / "reliability.png", opts.bins, "dev")
    command = command_line("-m chargpt.evaluation.abstention", argv)
    atomic_write_json(out / "abstention.json", {**result, "threshold": threshold, "command": command})
    print(f"wrote {out / 'coverage_accuracy.png'}, {out / 'reliability.png'}, {out / 'abstention.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
