"""A recipe that chooses its finetuning rate on held-out training questions, run in one command (`make recite`,
`make best`): `--recipe NAME` runs chargpt/recipes/NAME.yaml, every stage with `--preset NAME`, its `selection` section
giving the held-out questions and the rates to choose from. The recipes with one:
  recite-cpu (the default): the CPU frontier of docs/results-recitation.md (4 layers x 128 dims, 76 epochs of
    uncorrupted documents and recitation rows, fp32), whose three seeds answered about half of dev;
  best-fast (`make best`): the reference size in a 160-character block, 12 shuffled epochs with every document
    three times an epoch, answering from the best of 4 beam recitations with three decoding rules; its only rate is
    0, no finetuning: the pretrained model (which never saw the held-out questions) is the final model;
  best: the same answering after 50 epochs of best.yaml's pretraining, then a finetuning whose rate it chooses
    (`make best RECIPE=best`);
  faithful-recite: the assignment's pretraining unchanged (span corruption, 650 epochs: minutes on a GPU, hours on
    a CPU), then recite (docs/results.md, "On the fast path, then recite"): no questions in pretraining, so no
    split step.
`--pretrain_epochs`, `--n_embd`, `--learning_rates`, `--holdout` and `--mixed_precision` override the recipe's.

It runs the commands that measured those rows, with their flags (docs/reproduce.md, "Uncorrupted documents,
recitation rows in pretraining"):
  1. chargpt.recipes.select_finetune_lr --split_only (a recipe whose pretraining needs the questions): --holdout
     training questions set aside, never seen in pretraining;
  2. chargpt.recipes.reproduce: each seed pretrained by the recipe, on the other training questions where it mixes
     them in (and, as a comparison, finetuned the reference way: the "plain finetuning" column, unless the recipe's
     selection says `plain_finetuning: false`);
  3. chargpt.recipes.select_finetune_lr --final per seed: the `--recite True` rate chosen on the held-out
     questions, then the finetuning on all training questions, dev and test predictions. Rate 0 is no finetuning:
     the pretrained model with the recipe's answering saved, held-out model and final model alike (the held-out
     model's dev answers are then the final model's, copied).
  4. per seed, unless --no_confidence (docs/confidence.md): the held-out model at the chosen rate (kept by
     step 3's --keep_models; it never saw the held-out questions) answers dev, and chargpt.evaluation.abstention chooses
     the threshold for --target_precision on the held-out questions and applies it to dev; the same threshold is
     saved into the held-out model and the final model (their pipelines abstain below it) and applied to the final
     model's dev answers. Then the confidence the final model shows: chargpt.evaluation.calibrate fits it on the
     held-out model's answers to the held-out questions and to --unknown_people people no line of wiki.txt mentions
     (data_scripts.unknown_people, seed 0), with the recipe's `confidence` flags (best.yaml: the gated calibration,
     the threshold for 95% held-out precision), and saves it with its "I don't know" threshold into the final model;
     chargpt.evaluation.known_unknown measures it on dev against as many other unknown people (seed 1).
  5. per seed, with --choose_final_questions: chargpt.recipes.choose_final_questions decides on halves of the
     held-out questions whether the final model should be finetuned on all training questions (step 3's) or only
     on those pretraining mixed in (the held-out model); the held-out model answers dev and test, and the seed's
     dev and test answers are the chosen model's.
Then chargpt.evaluation.probe_recall's probe of each pretrained model (how many dev places it continues its own
wiki.txt line with: what it stored, beside what it answers). Writes OUT/results.json (every seed and the mean) and
prints a table; `--dry_run` prints the commands only (CHOSEN stands for the rate step 3 chooses).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shlex
import shutil
import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import evaluate_birthplace
from chargpt import recipes
from chargpt.evaluation import abstention, calibrate, known_unknown
from chargpt.evaluation.probe_recall import probe
from chargpt.evaluation.record_files import read_records
from chargpt.recipes import choose_final_questions, reproduce, select_finetune_lr
from chargpt.recipes.reproduce import StageInterrupted, check_stage_flags
from chargpt.training import ModelArguments
from chargpt.training.cli import run_in_process
from chargpt.training.files import atomic_write_json
from chargpt.training.outputs import UsageError, check_not_input
from chargpt.training.presets import resolve as preset_values
from data_scripts import unknown_people
from modeling_chargpt import POSITION_EMBEDDING_TYPES

CHOSEN = "CHOSEN"  # in a planned path: the tag (lr0.00015) of the rate that seed's selection chose
RECIPES = tuple(name for name in recipes.names() if recipes.load(name)["selection"])  # the ones that choose a rate


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data_dir", required=True, help="Folder with wiki.txt and the three TSVs.")
    parser.add_argument("--out_dir", default="out/recite")
    parser.add_argument("--variant", default="rope", choices=POSITION_EMBEDDING_TYPES,
                        help="The position encoding (modeling_chargpt/positions.py).")
    parser.add_argument("--seeds", default="0", help="Comma-separated seeds, e.g. 0,1,2.")
    parser.add_argument("--recipe", default="recite-cpu", choices=RECIPES,
                        help="chargpt/recipes/NAME.yaml: every stage runs with --preset NAME; the defaults of the "
                             "next five "
                        "flags are its values.")
    parser.add_argument("--pretrain_epochs", type=int, help="Pretraining epochs (default: the recipe's).")
    parser.add_argument("--n_embd", type=int, help="Model width (default: the recipe's).")
    parser.add_argument("--mixed_precision", help="Both stages' --mixed_precision (default: the recipe's).")
    parser.add_argument("--learning_rates", help="Finetuning rates to choose from, comma-separated (default: the "
                        "recipe's selection).")
    parser.add_argument("--holdout", type=int, help="Training questions held out to choose the rate (default: the "
                        "recipe's selection).")
    parser.add_argument("--extra", default="", help="More flags for both training scripts (quoted).")
    parser.add_argument("--pretrain_extra", default="", help="More flags for train_pretrain.py only (quoted).")
    parser.add_argument("--answer_from_recitation", action="store_true", default=None,
                        help="Every evaluation of the reciting models answers with a span of the recitation "
                        "(evaluate_birthplace.py --answer_from_recitation True): the rate is chosen that way too.")
    parser.add_argument("--continue_recitation", action="store_true", default=None,
                        help="With --answer_from_recitation: recitations cut at their limit are continued and the "
                        "continuation's spans compete too (evaluate_birthplace.py --continue_recitation True).")
    parser.add_argument("--no_confidence", dest="confidence", action="store_false",
                        help="Skip step 4 (the abstention threshold chosen on the held-out questions, on dev).")
    parser.add_argument("--target_precision", type=float, default=0.8, help="Step 4's precision on the held-out.")
    parser.add_argument("--unknown_people", type=int, default=400,
                        help="Step 4's people no line of wiki.txt mentions: this many to fit the calibration on, as "
                        "many others to measure it (default 400).")
    parser.add_argument("--choose_final_questions", action="store_true",
                        help="Step 5: the final model finetuned on all training questions or only on the mixed ones "
                        "(the held-out model), whichever answers more of halves of the held-out questions.")
    parser.add_argument("--resume", action="store_true",
                        help="Go on with a stopped run in the same --out_dir (chargpt.recipes.reproduce --resume): a "
                             "finished "
                        "pretraining is kept, a stopped one continues from its latest checkpoint, the later steps "
                        "(finetunings included) run again.")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--dry_run", action="store_true", help="Print the commands, run nothing.")
    return parser


def seed_list(text: str) -> list[int]:
    try:
        seeds = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        seeds = []
    if not seeds or len(set(seeds)) != len(seeds):
        sys.exit(f"error: --seeds {text!r}: expected distinct comma-separated integers, e.g. 0,1,2")
    return seeds


def pretraining(recipe: str, variant: str) -> dict:
    """What `train_pretrain.py --preset RECIPE --position_embedding_type VARIANT` sets (its own needs stood in for)."""
    return preset_values("pretrain", {"preset": recipe, "position_embedding_type": variant, "mixed_qa_corpus_path": ""})


def settled(opts: argparse.Namespace) -> argparse.Namespace:
    """The options with the recipe's values where a flag was left out (read from chargpt/recipes/NAME.yaml through the
same
    resolution as `--preset NAME`)."""
    recipe, pretrain = recipes.load(opts.recipe), pretraining(opts.recipe, opts.variant)
    answering = recipe["evaluate"]
    defaults = {"pretrain_epochs": pretrain["num_train_epochs"], "width": pretrain.get("n_embd", ModelArguments.n_embd),
                "holdout": recipe["selection"]["holdout"],
                "learning_rates": ",".join(f"{r:g}".replace("e-0", "e-")
                                           for r in recipe["selection"]["learning_rates"]),
                "answer_from_recitation": answering.get("answer_from_recitation", False),
                "continue_recitation": answering.get("continue_recitation", False),
                "mixes_questions": "mixed_qa_corpus_path" in recipe["needs"].get("pretrain", {}),
                "plain_finetuning": recipe["selection"].get("plain_finetuning", True),
                "mixed_precision": None, "n_embd": None}  # not given: the recipe's, through --preset
    given = {key: value for key, value in vars(opts).items() if value is not None}
    return argparse.Namespace(**{**defaults, **given})


def paths(opts: argparse.Namespace) -> dict[str, Path]:
    out = Path(opts.out_dir)
    return {"split": out / "split", "pretrain": out / "pretrain", "select": out / "select"}


def pretrained_model(opts: argparse.Namespace, seed: int) -> Path:
    """Seed `seed`'s model as chargpt.recipes.reproduce saves it: alone, or as a member of one --seeds run (GPU fast
    path)."""
    run = paths(opts)["pretrain"]
    together = run / f"{opts.variant}-causal-seeds-pretrain" / f"seed-{seed}"
    return together if together.is_dir() else run / f"{opts.variant}-causal-seed{seed}-pretrain"


def stage_flags(opts: argparse.Namespace) -> tuple[str, str]:
    """(flags of both training scripts, flags of pretraining alone), as the steps pass them."""
    opts = settled(opts)
    precision = f"--mixed_precision {opts.mixed_precision}" if opts.mixed_precision else ""
    both = " ".join(filter(None, [f"--preset {opts.recipe}", precision, opts.extra]))
    split = paths(opts)["split"] / "split" / "train.tsv"
    pretrain = [f"--n_embd {opts.n_embd}" if opts.n_embd else "",
                f"--mixed_qa_corpus_path {split}" if opts.mixes_questions else "", opts.pretrain_extra]
    return both, " ".join(filter(None, pretrain))


def check(opts: argparse.Namespace) -> None:
    """Every step's training flags checked before the first step runs: a typo fails in a second, not after hours."""
    opts = settled(opts)
    seed_list(opts.seeds)
    if not 0 < opts.target_precision <= 1:
        sys.exit(f"error: --target_precision {opts.target_precision}: must be in (0, 1]")
    if opts.continue_recitation and not opts.answer_from_recitation:
        sys.exit("error: --continue_recitation only changes --answer_from_recitation; give both")
    both, pretrain = stage_flags(opts)
    try:
        both_flags, pretrain_flags = shlex.split(both), shlex.split(pretrain)
    except ValueError as err:
        sys.exit(f"error: --extra / --pretrain_extra: {err}")
    check_stage_flags("pretrain", [*both_flags, *pretrain_flags], "--extra / --pretrain_extra")
    check_stage_flags("finetune", [*both_flags, "--recite", "True"], "--extra (it reaches both training scripts)")


def commands(opts: argparse.Namespace) -> list[list[str]]:
    """Split (not for the faithful pretraining, which reads no questions), pretraining (every seed), each seed's rate
    choice and final finetuning, then each seed's abstention threshold, then each seed's choice of the final
    finetuning's questions, in order."""
    opts = settled(opts)
    where, seeds = paths(opts), seed_list(opts.seeds)
    both, pretrain = stage_flags(opts)
    py, again = "python", ["--resume"] if opts.resume else []

    def answer(chosen: Path, split: str, tsv: str) -> list[str]:
        """The held-out model at the chosen rate answers a split, as every evaluation of the recipe does."""
        return [py, "evaluate_birthplace.py", "--model_name_or_path", f"{chosen}-finetune", "--eval_corpus_path",
                str(Path(opts.data_dir) / tsv), "--outputs_path", f"{chosen}.{split}.predictions", *span_flags(opts)]

    split = [[py, "-m", "chargpt.recipes.select_finetune_lr", "--data_dir", opts.data_dir, "--out_dir",
              str(where["split"]),
              "--holdout", str(opts.holdout), "--split_only"]]
    cmds = [*(split if opts.mixes_questions else []),
            [py, "-m", "chargpt.recipes.reproduce", "--data_dir", opts.data_dir, "--out_dir", str(where["pretrain"]),
             "--recipe", "reference", "--variants", opts.variant, "--seeds", opts.seeds, "--pretrain_epochs",
             str(opts.pretrain_epochs), "--skip_baselines", "--threads", str(opts.threads), "--extra", both,
             "--pretrain_extra", pretrain, *again,
             # the "plain finetuning" column finetunes the reference way, whatever the recipe's finetuning does
             *(["--pretrain_only"] if not opts.plain_finetuning else ["--finetune_extra", "--recite False"]
               if recipes.load(opts.recipe)["finetune"].get("recite") else [])]]
    for seed in seeds:
        cmds.append([py, "-m", "chargpt.recipes.select_finetune_lr", "--model_name_or_path",
                     str(pretrained_model(opts, seed)),
                     "--data_dir", opts.data_dir, "--out_dir", str(where["select"] / f"seed{seed}"), "--seed",
                     str(seed), "--holdout", str(opts.holdout), "--learning_rates", opts.learning_rates,
                     "--threads", str(opts.threads), "--extra", " ".join([both, "--recite", "True", *span_flags(opts)]),
                     "--final", *again,
                     *(["--keep_models"] if opts.confidence or opts.choose_final_questions else []),
                     *span_flags(opts, "--eval_extra")])
    data = Path(opts.data_dir)
    unknown = {name: str(Path(opts.out_dir) / f"unknown-{name}.tsv") for name in ("fit", "eval")}
    if opts.confidence:  # people no line of wiki.txt mentions, from the training names: one set to fit, one to measure
        make = [py, "-m", "data_scripts.unknown_people", "--wiki", str(data / "wiki.txt"), "--train",
                str(data / "birth_places_train.tsv"), "--n", str(opts.unknown_people)]
        cmds += [[*make, "--seed", "0", "--out", unknown["fit"]],
                 [*make, "--seed", "1", "--avoid", unknown["fit"], "--out", unknown["eval"]]]
    for seed in seeds if opts.confidence else []:
        chosen = where["select"] / f"seed{seed}" / CHOSEN
        held = [py, "-m", "chargpt.evaluation.abstention", "--holdout", f"{chosen}.holdout.predictions",
                "--target_precision",
                str(opts.target_precision)]
        final = str(chosen.parent / "final-finetune")
        cmds += [answer(chosen, "dev", "birth_dev.tsv"),
                 [*held, "--dev", f"{chosen}.dev.predictions", "--out_dir", str(chosen.parent / "abstention"),
                  "--save_to", f"{chosen}-finetune"],
                 [*held, "--dev", str(chosen.parent / "final.dev.predictions"), "--out_dir",
                  str(chosen.parent / "abstention-final"), "--save_to", final],
                 # the confidence the final model shows and its "I don't know" (docs/confidence.md), then measured
                 [py, "-m", "chargpt.evaluation.calibrate", "--model_name_or_path", f"{chosen}-finetune", "--holdout",
                  str(chosen.parent / "split" / "holdout.tsv"), "--holdout_records",
                  f"{chosen}.holdout.predictions.records.jsonl", "--unknown", unknown["fit"], "--save_to", final,
                  "--results_path", str(chosen.parent / "calibration.json"), *confidence_flags(opts.recipe)],
                 [py, "-m", "chargpt.evaluation.known_unknown", "--model_name_or_path", final, "--known",
                  str(data / "birth_dev.tsv"), "--known_records",
                  str(chosen.parent / "final.dev.predictions.records.jsonl"), "--unknown", unknown["eval"],
                  "--results_path", str(chosen.parent / "known_unknown.json")]]
    for seed in seeds if opts.choose_final_questions else []:
        chosen = where["select"] / f"seed{seed}" / CHOSEN
        cmds.append([py, "-m", "chargpt.recipes.choose_final_questions", "--select_dir", str(chosen.parent),
                     "--data_dir",
                     opts.data_dir, "--threads", str(opts.threads), *again])
        answered = [("test", "birth_test_inputs.tsv")] if opts.confidence else [  # step 4 wrote dev's
            ("dev", "birth_dev.tsv"), ("test", "birth_test_inputs.tsv")]
        cmds += [answer(chosen, split, tsv) for split, tsv in answered]
    return cmds


def confidence_flags(recipe: str) -> list[str]:
    """The recipe's `confidence` section as chargpt.evaluation.calibrate's flags (a true value: the bare flag)."""
    flags = []
    for key, value in recipes.load(recipe)["confidence"].items():
        flags += [f"--{key}"] if value is True else [] if value is False else [f"--{key}", str(value)]
    return flags


def span_flags(opts: argparse.Namespace, wrap: str | None = None) -> list[str]:
    """The flags of --answer_from_recitation and --continue_recitation, and with the first the recipe's other
    answering settings (best: 4 beams and the two rules), which the evaluations and the finetuning (to save them with
    the model) take alike (as the value of `wrap`, a script's pass-through flag): the rate is chosen for the way the
    final model answers."""
    if not opts.answer_from_recitation:
        return []
    flags = ["--answer_from_recitation", "True"]
    if opts.continue_recitation:
        flags += ["--continue_recitation", "True"]
    for name, value in recipes.load(opts.recipe)["evaluate"].items():
        if name not in ("answer_from_recitation", "continue_recitation"):
            flags += [f"--{name}", str(value)]
    return [wrap, " ".join(flags)] if wrap else flags


def resolve(opts: argparse.Namespace, cmd: list[str]) -> list[str]:
    """A planned step with what exists only once the earlier steps ran: each seed's pretrained folder (alone or in
    a --seeds run) and the rate its selection chose."""
    cmd = list(cmd)
    if cmd[1:3] == ["-m", "chargpt.recipes.select_finetune_lr"] and "--model_name_or_path" in cmd:
        seed = int(cmd[cmd.index("--seed") + 1])
        cmd[cmd.index("--model_name_or_path") + 1] = str(pretrained_model(opts, seed))
    for i, arg in enumerate(cmd):
        if f"/{CHOSEN}" in arg:
            folder = Path(arg.split(f"/{CHOSEN}")[0])
            rate = json.loads((folder / "selection.json").read_text())["chosen_learning_rate"]
            cmd[i] = arg.replace(f"/{CHOSEN}", f"/lr{rate:g}")
    return cmd


def copied_answers(cmd: list[str]) -> bool:
    """Where the chosen rate is 0 (no finetuning) the held-out model and the final model are one pretrained model
    with the same answering choices, so the held-out model's dev answers are the final model's, which step 3 wrote:
    they are copied, not computed again (minutes of a CPU). False (nothing done) for every other step."""
    if step_name(cmd) != "evaluate_birthplace.py":
        return False
    model, written = Path(cmd[cmd.index("--model_name_or_path") + 1]), cmd[cmd.index("--outputs_path") + 1]
    final = model.parent / "final.dev.predictions"
    if model.name != "lr0-finetune" or Path(written).name != "lr0.dev.predictions" or not final.is_file():
        return False
    for path in model.parent.glob(f"{final.name}*"):
        shutil.copy2(path, written + path.name[len(final.name):])
    print(f"  the final model is this model: its dev answers copied from {final}", flush=True)
    return True


def summarise(opts: argparse.Namespace, cmds: list[list[str]]) -> dict:
    """Every seed's pretraining time, stored places, chosen rate, held-out and dev scores (plain and reciting), and
    the mean."""
    opts = settled(opts)
    where = paths(opts)
    plain = {row["seed"]: row for row in json.loads((where["pretrain"] / "results.json").read_text())["runs"]}
    rows = []
    for seed in seed_list(opts.seeds):
        sel = json.loads((where["select"] / f"seed{seed}" / "selection.json").read_text())
        chosen = next(p for p in sel["points"] if p["learning_rate"] == sel["chosen_learning_rate"])
        final = sel["final"]
        _, found, recalled = probe(str(pretrained_model(opts, seed)), opts.data_dir)
        abstention = where["select"] / f"seed{seed}" / "abstention" / "abstention.json"
        confidence = json.loads(abstention.read_text()) if opts.confidence else None
        rows.append({"seed": seed, "pretrain_seconds": plain[seed]["pretrain_seconds"], "stored": recalled,
                     "stored_of": found,
                     "learning_rate": sel["chosen_learning_rate"], "holdout": chosen["holdout"]["accuracy"],
                     "dev_plain_finetuning": plain[seed].get("dev", {}).get("accuracy"),
                     "dev": final["dev"]["accuracy"], "pretrain_flops": plain[seed].get("pretrain_flops"),
                     "dev_correct": final["dev"]["correct"], "dev_total": final["dev"]["total"],
                     "selection_seconds": sel["total_seconds"],
                     "dev_predictions": final["dev"]["predictions"],
                     "test_predictions": final.get("test", {}).get("predictions"),
                     "abstention": confidence and {"threshold": confidence["threshold"],
                                                   "holdout": confidence["holdout"]["chosen"],
                                                   "dev": confidence["dev"].get("at_threshold"),
                                                   "file": str(abstention),
                                                   "final_dev": final_abstention(abstention)}})
        measured = where["select"] / f"seed{seed}" / "known_unknown.json"
        if opts.confidence and measured.is_file():  # absent from a run made before the calibration step
            record = json.loads(measured.read_text())
            rows[-1]["known_unknown"] = {key: record[key] for key in (
                "known", "unknown", "auroc_shown", "auroc_name_score", "saved_setting")} | {"file": str(measured)}
        if opts.choose_final_questions:
            rows[-1].update(final_questions(where["select"] / f"seed{seed}", sel["chosen_learning_rate"], rows[-1]))
    dev = [r["dev"] for r in rows]
    return {"what": f"chargpt/recipes/recite.py --recipe {opts.recipe} (chargpt/recipes/{opts.recipe}.yaml): "
                    f"{recipes.load(opts.recipe)['purpose']}", "command": shlex.join(["python", *sys.argv]),
            "steps": [shlex.join(c) for c in cmds], "recipe": opts.recipe, "variant": opts.variant,
            "n_embd": opts.n_embd or opts.width,
            "pretrain_epochs": opts.pretrain_epochs, "answer_from_recitation": opts.answer_from_recitation,
            "continue_recitation": opts.continue_recitation, "choose_final_questions": opts.choose_final_questions,
            "seeds": rows, "dev_mean": round(statistics.mean(dev), 1),
            "dev_std": round(statistics.stdev(dev), 1) if len(dev) > 1 else None}


def final_abstention(held_out: Path) -> dict | None:
    """The final model's dev precision and coverage at the held-out threshold saved into it (step 4's second
    call); None for a run made before that step existed."""
    found = held_out.parent.parent / "abstention-final" / "abstention.json"
    return json.loads(found.read_text())["dev"].get("at_threshold") if found.is_file() else None


def final_questions(select_dir: Path, rate: float, row: dict) -> dict:
    """Step 5's choice, and the seed's dev and test answers from the model it chose: the final model (all training
    questions) or the held-out one (the mixed questions only). The other model's dev score is kept beside it."""
    choice = json.loads((select_dir / "final_questions" / "choice.json").read_text())
    found = {"final_questions": {key: choice[key] for key in ("choice", "mixed", "all", "questions")},
             "dev_all_questions": row["dev"]}
    held = select_dir / f"lr{rate:g}"
    right = [r["correct"] for r in read_records(f"{held}.dev.predictions.records.jsonl")]
    found["dev_mixed_questions"] = round(100 * sum(right) / len(right), 1)
    if choice["choice"] == "mixed":
        found.update(dev=found["dev_mixed_questions"], dev_correct=sum(right), dev_total=len(right),
                     dev_predictions=f"{held}.dev.predictions", test_predictions=f"{held}.test.predictions")
    return found


def _abstaining(row: dict) -> str:
    """'81.7% / 52.6%': precision / coverage on dev at the held-out threshold; why not, where there is none."""
    found = row.get("abstention")
    if not found:
        return "—"
    if not found["dev"]:
        return "no threshold reaches the target on the held-out questions"
    return f"{100 * found['dev']['precision']:.1f}% / {100 * found['dev']['coverage']:.1f}%"


def _final_questions(row: dict) -> str:
    """', final model on the mixed questions (held-out halves 300 vs 291)', where step 5 ran."""
    found = row.get("final_questions")
    if not found:
        return ""
    which = "the mixed questions only" if found["choice"] == "mixed" else "all questions"
    return f", final model on {which} (held-out halves {found['mixed']} vs {found['all']})"


def _rate(rate: float) -> str:
    return f"{rate:g}" if rate else "none (the pretrained model)"


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}%"


def table(summary: dict) -> str:
    lines = ["| seed | pretraining | dev places stored (probe) | chosen lr | held-out | dev, plain finetuning | "
             "dev, recite then answer | held-out model abstaining on dev: precision / coverage |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in summary["seeds"]:
        lines.append(f"| {r['seed']} | {r['pretrain_seconds'] / 60:.1f} min | {r['stored']} of {r['stored_of']} | "
                     f"{_rate(r['learning_rate'])} | {r['holdout']:.1f}% | {_percent(r['dev_plain_finetuning'])} | "
                     f"{r['dev']:.1f}% ({r['dev_correct']}/{r['dev_total']}){_final_questions(r)} | "
                     f"{_abstaining(r)} |")
    spread = f" ± {summary['dev_std']:.1f}" if summary["dev_std"] is not None else ""
    return "\n".join(lines) + f"\n\ndev, recite then answer: {summary['dev_mean']:.1f}%{spread}"


def step_name(cmd: list[str]) -> str:
    """What a step runs: "SCRIPT" of "python SCRIPT ARGS", "-m MODULE" of "python -m MODULE ARGS"."""
    return " ".join(cmd[1:3]) if cmd[1] == "-m" else cmd[1]


def run_step(cmd: list[str]) -> tuple[int, bool]:
    """One step's exit status, and whether Ctrl-C stopped it. Every step runs its script's `main` in this process
    (each would spend 7-10 s of a new interpreter importing torch and transformers), as its own process would: its
    prints on this console, its bad input as its one line; the drivers start the training processes themselves, and
    a Ctrl-C reaches those as it does from a terminal (they save a checkpoint, then the driver stops)."""
    script = 3 if cmd[1] == "-m" else 2
    try:
        status = STEPS[step_name(cmd)](cmd[script:])
    except StageInterrupted as stop:  # a training process saved its checkpoint and ended; its driver stopped
        print(stop.code, file=sys.stderr, flush=True)
        return stop.status, True
    except KeyboardInterrupt:  # between the training processes (an evaluation, the selection's bookkeeping)
        return 130, True
    except SystemExit as stop:  # its bad input or failed stage: the one line its own process would print, its status
        if isinstance(stop.code, str):
            print(stop.code, file=sys.stderr, flush=True)
            return 1, False
        return stop.code or 0, False
    status = int(status or 0)
    return status, status == 130  # run_in_process's Ctrl-C: "interrupted" printed, 130


STEPS: dict[str, Callable[[Sequence[str]], int | None]] = {
    "-m chargpt.recipes.select_finetune_lr": select_finetune_lr.main,
    "-m chargpt.recipes.reproduce": reproduce.main,
    "evaluate_birthplace.py": functools.partial(run_in_process, evaluate_birthplace.main),
    "-m chargpt.evaluation.abstention": functools.partial(run_in_process, abstention.main),
    "-m chargpt.recipes.choose_final_questions": choose_final_questions.main,
    "-m data_scripts.unknown_people": unknown_people.main,
    "-m chargpt.evaluation.calibrate": functools.partial(run_in_process, calibrate.main),
    "-m chargpt.evaluation.known_unknown": functools.partial(run_in_process, known_unknown.main),
}


def main() -> None:
    opts = build_parser().parse_args()
    check(opts)
    data = Path(opts.data_dir)
    for name in ("wiki.txt", "birth_places_train.tsv", "birth_dev.tsv"):
        if not (data / name).is_file() and not opts.dry_run:
            sys.exit(f"error: --data_dir {data}: {name} is missing")
    try:  # an output over an input: one line, before anything runs
        check_not_input({"--out_dir": opts.out_dir}, {"--data_dir": opts.data_dir}, inside=False)
    except UsageError as err:
        sys.exit(f"error: {err}")
    cmds = commands(opts)
    if opts.dry_run:
        print("\n".join(shlex.join(c) for c in cmds))
        return
    for i, cmd in enumerate(cmds):
        cmds[i] = cmd = resolve(opts, cmd)
        print(f"[recite {i + 1}/{len(cmds)}] {shlex.join(cmd)}", flush=True)
        status, interrupted = (0, False) if copied_answers(cmd) else run_step(cmd)
        if interrupted:
            sys.exit(f"interrupted: step {i + 1} of {len(cmds)} ({step_name(cmd)}) stopped with exit status {status}")
        if status != 0:
            sys.exit(f"error: step {i + 1} of {len(cmds)} failed (exit status {status}): {step_name(cmd)}")
    summary = summarise(opts, cmds)
    atomic_write_json(Path(opts.out_dir) / "results.json", summary)
    print(f"\n{table(summary)}\n\nresults in {opts.out_dir}/results.json")


if __name__ == "__main__":
    main()
