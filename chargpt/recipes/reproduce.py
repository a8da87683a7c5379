"""Run the assignment's experiments end to end and tabulate them: the engine behind `make demo` and `make reproduce`.

For each position variant: pretrain -> finetune -> evaluate on dev (and write test predictions), plus finetuning
from scratch and the London baseline. Each training stage runs the user's script as its own process (one process
needs no launcher: `python SCRIPT` with the threads `accelerate launch --num_cpu_threads_per_process` would set),
so what this measures is what a user runs; evaluations run `evaluate_birthplace.main` in this process, each with its
own log (seconds of imports saved per evaluation). Every stage runs `--recipe NAME`'s file,
chargpt/recipes/NAME.yaml, as
`--preset NAME` (reference, light, demo, ...). Writes `results.json` and `results.md` into --out_dir.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import torch

import evaluate_birthplace
from chargpt import recipes
from chargpt.evaluation.record_files import file_lines
from chargpt.training.checkpoints import TRAINER_STATE, find_latest_checkpoint
from chargpt.training.cli import UsageError, check_flags, command_line, run_logged, run_to_end
from chargpt.training.files import atomic_write_json, atomic_write_text
from chargpt.training.outputs import check_not_input

# Dev questions split by how the people were read (the synthetic world writes these; the real data has none).
DEV_GROUPS = {"paraphrased": "birth_dev_paraphrased.tsv", "single": "birth_dev_single.tsv"}

# The GPU fast path: what each stage adds on a CUDA device (`--fast_path auto`, the default) or always
# (`on`). Pretraining builds its batches on the device; its losses are read back every --logging_steps there
# (--sync_steps' GPU default). Placed before the recipe's and the user's flags, which override it.
# Finetuning takes it only where a variant's seeds train together (`--seeds` needs --device_data).
FAST_PATH: dict[str, list[str]] = {"pretrain": ["--device_data", "True"], "finetune": ["--device_data", "True"]}


def cuda_available() -> bool:
    """Whether the stages will train on a GPU (Accelerate picks CUDA when there is one)."""
    return torch.cuda.is_available()


def fast_path_on(mode: str) -> bool:
    """`--fast_path`: 'on', 'off', or 'auto' = on where CUDA is available (CPU runs stay exactly as before)."""
    return mode == "on" or (mode == "auto" and cuda_available())


class StageInterrupted(SystemExit):
    """Ctrl-C stopped a stage (it saved a checkpoint first, if it trains): the driver ends with this line, and a
    driver that ran this one in its own process (chargpt.recipes.recite) tells it from a failure by its type."""

    def __init__(self, status: int, log_path: Path) -> None:
        super().__init__(f"interrupted: the stage stopped with exit status {status} (a training stage saves a "
                         f"checkpoint first); log: {log_path}")
        self.status = status


def run(cmd: list[str], log_path: Path, append: bool = False) -> float:
    """Run one stage, teeing nothing to the console but a line; its whole output goes to a log file (after what it
    holds where `append`: a resumed stage's log keeps its earlier processes)."""
    start = time.perf_counter()
    with open(log_path, "a" if append else "w") as log:
        status, interrupted = run_to_end(cmd, stdout=log, stderr=subprocess.STDOUT, env={**os.environ})
    seconds = time.perf_counter() - start
    if interrupted:
        raise StageInterrupted(status, log_path)
    check_stage(status, shlex.join(cmd), log_path)
    return seconds


def check_stage(status: int, what: str, log_path: Path) -> None:
    """A failed stage ends the run: the scripts report bad input as one `error: ...` line, passed on as it is (not
    the stage's traceback); anything else with the log's last lines."""
    if status == 0:
        return
    lines = log_path.read_text(errors="replace").splitlines()
    reported = [line for line in lines if line.startswith("error: ")]
    if reported:
        sys.exit(f"{reported[-1]} (log: {log_path})")
    sys.exit(f"stage failed ({status}): {what}\n  log: {log_path}\n" + "\n".join(lines[-15:]))


def launch(script: str, args: list[str], threads: int) -> list[str]:
    """One training process, started as a user would start it on one device, with `threads` CPU threads (the
    OMP_NUM_THREADS that `accelerate launch --num_cpu_threads_per_process` sets; a single process needs nothing else
    from the launcher, whose own start-up took 3 s a stage)."""
    return ["env", f"OMP_NUM_THREADS={threads}", sys.executable, script_path(script), *args]


def script_path(script: str) -> str:
    """Where the user's script `script` (train_pretrain.py, train_finetune.py) is: beside the package in a checkout,
    in site-packages once installed; an absolute path is that file."""
    if Path(script).is_absolute():
        return str(script)
    spec = importlib.util.find_spec(Path(script).stem)
    if spec is None or spec.origin is None:
        raise FileNotFoundError(f"{script}: not importable; is the package installed (pip install -e .)?")
    return spec.origin


def flops(pretrained: Path, finetuned: Path, stages: Sequence[str] = ("pretrain", "finetune")) -> dict[str, float]:
    """The training FLOPs each stage's train_results.json counts (chargpt/training/flops.py), where it counts them."""
    folders = {"pretrain": pretrained, "finetune": finetuned}
    found = {f"{stage}_flops": json.loads((folders[stage] / "train_results.json").read_text()).get("train_flops")
             for stage in stages}
    return {key: value for key, value in found.items() if value is not None}


def pretrain(opts: argparse.Namespace, args: list[str], folder: Path, log: Path,
             members: Sequence[int] = ()) -> tuple[float, dict]:
    """One pretraining process into `folder` (`members`: the seeds of a --seeds run, each saved in seed-S); its
    seconds, and for the rows what `--resume` did. With --resume, a pretraining that finished is kept and one stopped
    with a checkpoint (Ctrl-C, a crash, a session's end) continues from its latest; both report the seconds its
    train_results.json counts (every process's, start-ups left out)."""
    results = [folder / f"seed-{seed}" / "train_results.json" for seed in members] or [folder / "train_results.json"]
    kept = opts.resume and all(path.is_file() for path in results)
    latest = find_latest_checkpoint(str(folder)) if opts.resume and not kept else None
    if kept:
        print(f"[{opts.recipe}] {folder.name}: finished before, kept (--resume)", flush=True)
        note = {"pretrain_kept": True}
    elif latest is None:
        return run(launch("train_pretrain.py", args, opts.threads), log), {}
    else:
        step = json.loads((latest / TRAINER_STATE).read_text())["global_step"]
        print(f"[{opts.recipe}] {folder.name}: resumed from step {step:,}", flush=True)
        run(launch("train_pretrain.py", [*args, "--resume_from_checkpoint", "latest"], opts.threads), log, append=True)
        note = {"pretrain_resumed_from_step": step}
    return json.loads(results[0].read_text())["train_seconds"], note


def again(resume: bool) -> list[str]:
    """The flag a finetuning stage needs under a driver's --resume: it runs again over what a stopped run left in its
    --output_dir (train_finetune.py refuses a finished model there otherwise)."""
    return ["--overwrite_output_dir", "True"] if resume else []


def finetune_command(wiki: Path, tsv: Path, model_dir: Path, output_dir: Path, seed: int, flags: list[str],
                     threads: int, resume: bool = False) -> list[str]:
    """Finetune a pretrained model: shared by this script and chargpt.recipes.select_finetune_lr (`resume`: see
    `again`)."""
    return launch("train_finetune.py", [
        "--pretrain_corpus_path", str(wiki), "--finetune_corpus_path", str(tsv), "--model_name_or_path",
        str(model_dir), "--output_dir", str(output_dir), "--seed", str(seed), "--disable_tqdm", "True",
        *again(resume), *flags], threads)


def evaluate(model_dir: Path | None, tsv: Path, predictions: Path, log: Path, baseline: bool = False,
             wiki: Path | None = None, flags: Sequence[str] = ()) -> dict:
    """evaluate_birthplace.py, in this process; its scores come back through --results_path (JSON), not from its
    log. `wiki`: the wiki.txt its records are grounded in, where the TSV is not beside it (a held-out split);
    `flags`: more of its flags (e.g. --answer_from_recitation True)."""
    argv = ["--eval_corpus_path", str(tsv), "--outputs_path", str(predictions), *flags]
    argv += ["--wiki_path", str(wiki)] if wiki else []
    argv += ["--baseline", "london"] if baseline else ["--model_name_or_path", str(model_dir)]
    scores_path = predictions.with_name(predictions.name + ".json")
    scores_path.unlink(missing_ok=True)
    argv += ["--results_path", str(scores_path)]
    start = time.perf_counter()
    status = run_logged(evaluate_birthplace.main, argv, log)
    seconds = time.perf_counter() - start
    if cuda_available():
        torch.cuda.empty_cache()  # the model is gone; give its blocks back to the training processes that follow
    check_stage(status, shlex.join(["python", "evaluate_birthplace.py", *argv]), log)
    result = {"seconds": round(seconds, 1), "predictions": str(predictions)}
    if scores_path.exists():  # written only when the TSV has gold answers
        scores = json.loads(scores_path.read_text())
        result.update(correct=scores["correct"], total=scores["total"], accuracy=round(100 * scores["accuracy"], 1))
    return result


def group_scores(predictions: Path, dev: Path, groups: dict[str, Path]) -> dict[str, dict]:
    """Exact match of one dev predictions file within each group of dev questions (a TSV holding a subset of them):
    one model, several kinds of people (e.g. read in several paraphrases or in one sentence)."""
    questions = [line.split("\t")[0] for line in dev.read_text(encoding="utf-8").splitlines()]
    answer_of = dict(zip(questions, file_lines(predictions.read_text(encoding="utf-8")), strict=True))
    out = {}
    for name, tsv in groups.items():
        rows = [line.split("\t") for line in tsv.read_text(encoding="utf-8").splitlines()]
        correct = sum(answer_of[question] == gold for question, gold in rows)
        out[name] = {"correct": correct, "total": len(rows), "accuracy": round(100 * correct / len(rows), 1)}
    return out


def check_stage_flags(stage: str, flags: list[str], what: str) -> None:
    """Parse one stage's flags now, so a flag its script does not take fails in a second, not after the stage before."""
    script = f"train_{stage}.py"
    required = ["--pretrain_corpus_path", "wiki.txt", "--output_dir", "out"]  # placeholders: only flags are checked
    if stage == "finetune":
        required += ["--finetune_corpus_path", "train.tsv"]
    try:
        check_flags(importlib.import_module(f"train_{stage}").build_parser(), [*required, *flags], stage, script)
    except UsageError as err:
        sys.exit(f"error: {what}: {err}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data_dir", required=True, help="Folder with wiki.txt and the three TSVs.")
    parser.add_argument("--out_dir", required=True)
    parser.add_argument("--recipe", default="reference", choices=recipes.names(),
                        help="chargpt/recipes/NAME.yaml: every stage runs with --preset NAME (e.g. demo, light, "
                        "cpu-fast).")
    parser.add_argument("--variants", default="learned,rope", help="Comma-separated position types to pretrain.")
    parser.add_argument("--synthesizer", action="store_true", help="Also run learned positions + synthesizer.")
    parser.add_argument("--seeds", default="0", help="Comma-separated seeds for the pretrained variants (with the "
                        "fast path a variant's seeds pretrain in one train_pretrain.py --seeds process, then "
                        "finetune in one train_finetune.py --seeds process).")
    parser.add_argument("--stack_seeds", action="store_true",
                        help="Where a variant's seeds train in one process (the fast path), train them as one stacked "
                        "model (--stack_seeds True: one set of kernels for all seeds, for GPUs; "
                        "chargpt/training/stacking.py).")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--extra", default="", help="Extra flags for both training scripts (quoted).")
    parser.add_argument("--pretrain_extra", default="",
                        help="Extra flags for train_pretrain.py only (quoted), e.g. '--mixed_qa_corpus_path "
                        "DIR/birth_places_train.tsv --mixed_qa_repeats 4'.")
    parser.add_argument("--finetune_extra", default="",
                        help="Extra flags for train_finetune.py only, from a pretrained model (quoted).")
    parser.add_argument("--pretrain_epochs", type=int, default=None,
                        help="Override the recipe's pretraining epochs (the cosine schedule spans them).")
    parser.add_argument("--save_epochs", default="",
                        help="Comma-separated pretraining epochs to snapshot; each snapshot is also finetuned and "
                        "evaluated (one run gives several points of an accuracy-vs-compute curve).")
    parser.add_argument("--skip_baselines", action="store_true",
                        help="Only the pretrained variants (no London baseline, no finetuning from scratch).")
    parser.add_argument("--pretrain_only", action="store_true",
                        help="Pretrain each seed, then stop: no finetuning, no evaluation (a recipe whose pretrained "
                        "model is its answer, e.g. best-fast, measures it on held-out questions itself).")
    parser.add_argument("--resume", action="store_true",
                        help="Go on with a stopped run in the same --out_dir: each pretraining that finished is kept, "
                        "one stopped with a checkpoint (Ctrl-C, a crash, a session's end) continues from its latest "
                        "(every 500 steps by default), and the other stages run again.")
    parser.add_argument("--fast_path", default="auto", choices=["auto", "on", "off"],
                        help="The GPU fast path (pretraining " + " ".join(FAST_PATH["pretrain"]) + "; several "
                        "seeds pretrain, then finetune, in one --seeds process each): 'auto' = on a CUDA device "
                        "only, so CPU runs are unchanged; 'off' = today's loop everywhere.")
    return parser


def check_all_stage_flags(opts: argparse.Namespace) -> None:
    """Every stage's flags as main() will pass them (paths aside), checked before the first stage runs."""
    recipe, extra = ["--preset", opts.recipe], opts.extra.split()
    given = [*extra, *opts.pretrain_extra.split(), *opts.finetune_extra.split()]
    if opts.recipe != "reference" and "--preset" in given:
        sys.exit(f"error: --recipe {opts.recipe} is --preset {opts.recipe} in every stage: give one recipe, not a "
                 "--preset in --extra too")
    both = "--extra (it reaches both scripts; flags of train_pretrain.py alone go in --pretrain_extra)"
    if not opts.skip_baselines:
        check_stage_flags("finetune", [*recipe, *extra], both)
    if opts.variants or opts.synthesizer:
        check_stage_flags("pretrain", [*pretrain_stage_flags(opts), *extra],
                          "--extra / --pretrain_extra")
        finetune = [*recipe, *extra, *opts.finetune_extra.split()]
        where = both if not opts.finetune_extra else "--extra / --finetune_extra"
        check_stage_flags("finetune", finetune, where)
        if seeds_together(opts):
            check_stage_flags("finetune", [*FAST_PATH["finetune"], *seed_flags(opts), *finetune], where)


def seeds_together(opts: argparse.Namespace) -> bool:
    """With the fast path (on a GPU by default), a variant's seeds pretrain in one `--seeds` process
    (chargpt/training/seeds.py: each member is the model its separate `--seed S` run with the fast path trains);
    without it
    (CPU runs by default), one process per seed, as before."""
    return fast_path_on(opts.fast_path) and len(opts.seeds.split(",")) > 1


def seed_flags(opts: argparse.Namespace) -> list[str]:
    """How a variant's seeds train together (`--seeds`, stacked with `--stack_seeds`), or none: one run per seed."""
    if not seeds_together(opts):
        return []
    return ["--seeds", opts.seeds, *(["--stack_seeds", "True"] if opts.stack_seeds else [])]


def pretrain_stage_flags(opts: argparse.Namespace) -> list[str]:
    """train_pretrain.py's flags from the recipe and options (the fast path's first, so the others override it)."""
    fast = FAST_PATH["pretrain"] if fast_path_on(opts.fast_path) else []
    seeds = seed_flags(opts)
    flags = ["--preset", opts.recipe, *fast, *seeds]
    if opts.pretrain_epochs is not None:
        flags += ["--num_train_epochs", str(opts.pretrain_epochs)]
    if opts.save_epochs:
        flags += ["--save_epochs", opts.save_epochs]
    return flags + opts.pretrain_extra.split()


def pretrain_together(opts: argparse.Namespace, wiki: Path, out: Path, name: str, flags: list[str],
                      seeds: list[int]) -> dict[int, tuple[Path, float, dict]]:
    """Where `seeds_together`: one `--seeds` pretraining of variant `name` (its `flags`) into OUT/NAME-pretrain/seed-S;
    each seed's folder, an even share of the process's seconds and what `--resume` did. Elsewhere nothing: each seed
    pretrains alone."""
    if not seeds_together(opts):
        return {}
    print(f"[{opts.recipe}] {name}: pretrain seeds {opts.seeds} in one process", flush=True)
    folder = out / f"{name}-pretrain"
    seconds, resumed = pretrain(opts, ["--pretrain_corpus_path", str(wiki), "--output_dir", str(folder), *flags],
                                folder, out / f"{name}-pretrain.log", seeds)
    return {seed: (folder / f"seed-{seed}", seconds / len(seeds), resumed) for seed in seeds}


def finetune_together(opts: argparse.Namespace, wiki: Path, tsv: Path, out: Path, name: str,
                      pretrained: dict[int, tuple[Path, float, dict]],
                      flags: list[str]) -> dict[int, tuple[Path, float]]:
    """After `pretrain_together`: one `--seeds` finetuning of its members (each from its own seed-S folder) into
    OUT/NAME-finetune/seed-S; each seed's folder and an even share of the seconds. Elsewhere nothing."""
    if not pretrained:
        return {}
    seeds = list(pretrained)
    print(f"[{opts.recipe}] {name}: finetune seeds {opts.seeds} in one process", flush=True)
    folder = out / f"{name}-finetune"
    (source,) = {path.parent for path, *_ in pretrained.values()}
    seconds = run(launch("train_finetune.py", [
        "--pretrain_corpus_path", str(wiki), "--finetune_corpus_path", str(tsv), "--model_name_or_path", str(source),
        "--output_dir", str(folder), *seed_flags(opts), "--disable_tqdm", "True",
        *again(opts.resume), *FAST_PATH["finetune"], *flags], opts.threads), out / f"{name}-finetune.log")
    return {seed: (folder / f"seed-{seed}", seconds / len(seeds)) for seed in seeds}


def main(argv: Sequence[str] | None = None) -> None:
    opts = build_parser().parse_args(argv)
    command = command_line("-m chargpt.recipes.reproduce", argv)
    check_all_stage_flags(opts)
    try:  # an output over an input: one line, before anything runs
        check_not_input({"--out_dir": opts.out_dir}, {"--data_dir": opts.data_dir}, inside=False)
    except UsageError as err:
        sys.exit(f"error: {err}")
    data, out = Path(opts.data_dir), Path(opts.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    recipe = ["--preset", opts.recipe]  # every stage: chargpt/recipes/NAME.yaml
    extra = opts.extra.split()
    finetune_flags = [*recipe, *extra, *opts.finetune_extra.split()]  # from a pretrained model
    wiki, train_tsv = data / "wiki.txt", data / "birth_places_train.tsv"
    dev, test = data / "birth_dev.tsv", data / "birth_test_inputs.tsv"
    groups = {name: data / fname for name, fname in DEV_GROUPS.items() if (data / fname).exists()}
    rows: list[dict] = []
    total_start = time.perf_counter()

    def write_summary() -> dict:
        """Rewritten after every row (atomically), so a run stopped halfway still leaves its finished rows."""
        summary = {"recipe": opts.recipe, "pretrain_epochs": opts.pretrain_epochs, "extra": opts.extra,
                   "pretrain_extra": opts.pretrain_extra,
                   **({"finetune_extra": opts.finetune_extra} if opts.finetune_extra else {}),
                   "fast_path": fast_path_on(opts.fast_path),
                   "stack_seeds": opts.stack_seeds,
                   "command": command, "data_dir": str(data), "threads": opts.threads,
                   "total_seconds": round(time.perf_counter() - total_start, 1), "runs": rows}
        atomic_write_json(out / "results.json", summary)
        return summary

    def report(row: dict) -> None:
        if groups and "accuracy" in row.get("dev", {}):
            row["dev_groups"] = group_scores(Path(row["dev"]["predictions"]), dev, groups)
        rows.append(row)
        write_summary()
        acc = row.get("dev", {}).get("accuracy")
        parts = "".join(f"   {g} {v['accuracy']:>5}%" for g, v in row.get("dev_groups", {}).items())
        print(f"  {row['name']:<28} dev {acc if acc is not None else '-':>5}%{parts}   "
              f"train {row.get('train_seconds', 0):>6.0f}s", flush=True)

    pretrain_flags = pretrain_stage_flags(opts)
    if opts.stack_seeds and not seeds_together(opts):
        print(f"[{opts.recipe}] --stack_seeds changes nothing here: it stacks the seeds of one --seeds process, and "
              "each seed trains alone (one seed, or the fast path off, as on a CPU)", flush=True)
    if fast_path_on(opts.fast_path) and (opts.variants or opts.synthesizer):
        print(f"[{opts.recipe}] fast path (--fast_path {opts.fast_path}): pretraining with "
              f"{' '.join(FAST_PATH['pretrain'])}" + ("; each variant's seeds in one process" if
                                                    seeds_together(opts) else ""), flush=True)

    if not opts.skip_baselines:
        print(f"[{opts.recipe}] London baseline", flush=True)
        report({"name": "london baseline", "dev": evaluate(None, dev, out / "london.dev.predictions",
                                                            out / "london.dev.log", baseline=True)})

        scratch_dir = out / "scratch-finetune"
        print(f"[{opts.recipe}] no pretraining: finetune from scratch", flush=True)
        t = run(launch("train_finetune.py", ["--pretrain_corpus_path", str(wiki), "--finetune_corpus_path",
                                             str(train_tsv), "--output_dir", str(scratch_dir), "--disable_tqdm",
                                             "True", *again(opts.resume), *recipe, *extra],
                       opts.threads),
                out / "scratch-finetune.log")
        report({"name": "no pretraining (learned)", "train_seconds": round(t, 1),
                "dev": evaluate(scratch_dir, dev, out / "scratch.dev.predictions", out / "scratch.dev.log")})

    variants = [(v, "causal") for v in opts.variants.split(",") if v]
    if opts.synthesizer:
        variants.append(("learned", "synthesizer"))
    seeds = [int(s) for s in opts.seeds.split(",")]
    for position, attention in variants:
        variant = ["--position_embedding_type", position, "--attention_type", attention]
        # with the fast path every seed of the variant at once (each member's folder, its share of the seconds)
        together = pretrain_together(opts, wiki, out, f"{position}-{attention}-seeds",
                                     [*variant, "--disable_tqdm", "True", *pretrain_flags, *extra], seeds)
        finetuned = finetune_together(opts, wiki, train_tsv, out, f"{position}-{attention}-seeds",
                                      {} if opts.pretrain_only else together,
                                      finetune_flags)
        for seed in seeds:
            name = f"{position}-{attention}-seed{seed}"
            stages = ("evaluate" if seed in finetuned else "pretrain" if opts.pretrain_only else
                      "pretrain -> finetune -> evaluate")
            stages += "" if seed in finetuned else f" (progress: {out / name}-*.log)"
            print(f"[{opts.recipe}] {name}: {stages}", flush=True)
            shape = [*variant, "--seed", str(seed), "--disable_tqdm", "True"]
            pre_dir, t_pre, resumed = together.get(seed, (out / f"{name}-pretrain", None, {}))
            if t_pre is None:
                args = ["--pretrain_corpus_path", str(wiki), "--output_dir", str(pre_dir), *shape, *pretrain_flags,
                        *extra]
                t_pre, resumed = pretrain(opts, args, pre_dir, out / f"{name}-pretrain.log")

            def finetune(model_dir: Path, tag: str, seed: int = seed) -> tuple[Path, float]:
                fin_dir = out / f"{tag}-finetune"
                seconds = run(finetune_command(wiki, train_tsv, model_dir, fin_dir, seed, finetune_flags,
                                               opts.threads, opts.resume), out / f"{tag}-finetune.log")
                return fin_dir, seconds

            epochs = json.loads((pre_dir / "train_results.json").read_text())["epoch"]
            if opts.pretrain_only:
                report({"name": name, "position": position, "attention": attention, "seed": seed,
                        "pretrain_epochs": epochs, "pretrain_seconds": round(t_pre, 1),
                        "train_seconds": round(t_pre, 1),
                        **flops(pre_dir, pre_dir, ("pretrain",)), **resumed})
                continue
            fin_dir, t_fin = finetuned[seed] if seed in finetuned else finetune(pre_dir, name)
            row = {"name": name, "position": position, "attention": attention, "seed": seed,
                   "pretrain_epochs": epochs, "pretrain_seconds": round(t_pre, 1), "finetune_seconds": round(t_fin, 1),
                   "train_seconds": round(t_pre + t_fin, 1), **flops(pre_dir, fin_dir), **resumed,
                   **({"pretrained_with_seeds": opts.seeds} if together else {}),
                   **({"finetuned_with_seeds": opts.seeds} if seed in finetuned else {}),
                   "dev": evaluate(fin_dir, dev, out / f"{name}.dev.predictions", out / f"{name}.dev.log")}
            if test.exists():
                row["test"] = evaluate(fin_dir, test, out / f"{name}.test.predictions", out / f"{name}.test.log")
            report(row)
            for snap in sorted(pre_dir.glob("epoch-*"), key=lambda p: int(p.name.split("-")[1])):
                snap_state = json.loads((snap / "train_results.json").read_text())
                tag = f"{name}-{snap.name}"
                print(f"[{opts.recipe}] {tag}: finetune -> evaluate the snapshot", flush=True)
                snap_fin, t_snap = finetune(snap, tag)
                report({"name": tag, "position": position, "attention": attention, "seed": seed,
                        "pretrain_epochs": snap_state["epoch"], "snapshot_of_epochs": epochs,
                        "pretrain_seconds": snap_state["train_seconds"], "finetune_seconds": round(t_snap, 1),
                        "train_seconds": round(snap_state["train_seconds"] + t_snap, 1), **flops(snap, snap_fin),
                        "dev": evaluate(snap_fin, dev, out / f"{tag}.dev.predictions", out / f"{tag}.dev.log")})

    summary = write_summary()
    def cell(scores: dict) -> str:
        return f"{scores['accuracy']:.1f}% ({scores['correct']}/{scores['total']})" if "accuracy" in scores else "-"

    lines = ["| run | dev accuracy | " + "".join(f"dev: {g} | " for g in groups) + "train wall time (s) |",
             "| --- | --- | " + "--- | " * len(groups) + "--- |"]
    for row in rows:
        cells = [cell(row.get("dev", {}))] + [cell(row.get("dev_groups", {}).get(g, {})) for g in groups]
        lines.append(f"| {row['name']} | {' | '.join(cells)} | {row.get('train_seconds', 0):.0f} |")
    table = "\n".join(lines)
    atomic_write_text(out / "results.md", table + "\n")
    print(f"\n{table}\n\ntotal wall time {summary['total_seconds']:.0f}s; results in {out}/results.json")


if __name__ == "__main__":
    main()
