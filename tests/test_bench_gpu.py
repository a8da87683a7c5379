"""experiments/benchmarks/bench_gpu.py on a CPU (tiny model, tiny corpus, a few steps) and experiments/gpu_session.py:
what a GPU session will run, and how it stops, is checked here, where there is no GPU."""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from processes import user_env
from test_readme_commands import load

import train_pretrain
from chargpt.training.cli import check_flags, run_cli
from data_scripts import PackedCollator, load_pretrain_corpus, span_corruption_dataset
from modeling_chargpt import IGNORE_INDEX, CharTokenizer

ROOT = Path(__file__).resolve().parents[1]
BLOCK, BATCH, STEPS, WARMUP = 64, 8, 6, 2
TINY = f"--n_layer 1 --n_head 2 --n_embd 32 --block_size {BLOCK} --per_device_train_batch_size {BATCH}"


@pytest.fixture(scope="module")
def bench():
    return load("experiments/benchmarks/bench_gpu.py")


@pytest.fixture
def tiny_data(tmp_path) -> Path:
    """A wiki.txt of 37 short documents of varied lengths (5 batches of 8 per epoch)."""
    letters = "abcdefghijklmnopqrstuvwxyz .,"
    docs = ["".join(letters[(5 * i + k) % len(letters)] for i in range(20 + 3 * k)) for k in range(36)]
    (tmp_path / "wiki.txt").write_text("\n".join(docs) + "\n", encoding="utf-8")
    return tmp_path


def datasets_path_useful_targets(wiki: Path, steps: range) -> list[int]:
    """Non-PAD targets of the given 1-based steps of the `datasets` path (seed 0, reference order), built here."""
    text, docs = load_pretrain_corpus(wiki)
    dataset, corruption = span_corruption_dataset(docs, CharTokenizer.from_corpus(text), BLOCK, seed=0)
    per_epoch = math.ceil(len(dataset) / BATCH)
    counts = []
    for step in steps:
        epoch, k = divmod(step - 1, per_epoch)
        corruption.set_epoch(epoch)
        batch = PackedCollator(BLOCK)([dataset[i] for i in range(k * BATCH, min((k + 1) * BATCH, len(dataset)))])
        counts.append(int((batch["labels"][:, 1:] != IGNORE_INDEX).sum()))
    return counts


def test_bench_gpu_times_each_variant_through_the_training_script(bench, tiny_data, tmp_path, monkeypatch):
    # A named variant whose flag train_pretrain.py does not take is skipped with its reason (new flags plug in).
    monkeypatch.setitem(bench.VARIANTS, "future", ("a flag not there yet", ["--no_such_flag", "1"]))
    out = tmp_path / "bench.json"
    argv = ["--data_dir", str(tiny_data), "--steps", str(STEPS), "--warmup_steps", str(WARMUP), "--extra", TINY,
            "--variants", "today,future,fast", "--variant", "sparse=--device_data True --sync_steps 4",
            "--variant", "seed1=--device_data True --seed 1", "--variant", "pair=--device_data True --seeds 0,1",
            "--variant", f"broken=--mixed_qa_corpus_path {tmp_path / 'missing.tsv'}",
            "--out", str(out), "--work_dir", str(tmp_path / "runs")]
    assert run_cli(bench.main, argv) == 1  # one variant failed; the others were measured all the same
    result = json.loads(out.read_text())
    load("experiments/records.py").check(result["records"], out)  # run records, as every study holds
    rows = {rec["facts"]["bench_variant"]: {**rec["facts"], "variant": rec["facts"]["bench_variant"],
                                            "seconds_timed": rec["seconds"]["timed"]}
            for rec in result["records"]}
    assert list(rows) == ["today", "fast", "sparse", "seed1", "pair"]
    [failed] = result["failed"]
    assert failed["variant"] == "broken" and "missing.tsv" in failed["error"]
    [skipped] = result["skipped"]
    assert skipped["variant"] == "future" and "--no_such_flag" in skipped["reason"]
    call = result["records"][0]
    assert call["facts"]["device_type"] == "cpu" and call["facts"]["torch"] == torch.__version__
    assert call["command"].startswith("python experiments/benchmarks/bench_gpu.py --data_dir")
    # 37 documents (36 lines and the reference's final empty one) in batches of 8: 5 steps per epoch, 650 epochs.
    assert (call["facts"]["documents"], call["facts"]["steps_per_epoch"],
            call["facts"]["full_pretraining_steps"]) == (37, 5, 3250)
    for row in rows.values():
        assert row["steps_per_s"] > 0 and row["seconds_timed"] > 0 and math.isfinite(row["loss_tail_mean"])
        assert row["gpu_utilization_percent"] is None and row["peak_memory_mib"] is None  # not measured on a CPU
        assert row["projected_full_pretraining_s"] > row["seconds_before_window"]
        assert 0 < row["useful_tokens_timed"] <= row["steps_timed"] * BATCH * (BLOCK - 1)
        # packed: fewer rows than examples, and enough rows for the useful targets
        assert row["useful_tokens_timed"] / (BLOCK - 1) <= row["steps_timed"] * row["rows_per_step_mean"]
        assert 0 < row["rows_per_step_mean"] <= BATCH * row["members"]
        saved = ["seed-0", "seed-1"] if row["variant"] == "pair" else ["."]
        assert all((tmp_path / "runs" / row["variant"] / d / "model.safetensors").is_file() for d in saved)
    # On a CPU every step is read back (its default and --sync_steps 1): timed from step 2 to 6. Read back every
    # 4th step (and at the last), the window is steps 4 to 6 and holds one read-back.
    assert rows["today"]["steps_timed"] == rows["fast"]["steps_timed"] == STEPS - WARMUP
    assert (rows["sparse"]["steps_timed"], rows["sparse"]["read_backs_timed"]) == (2, 1)
    # The useful targets counted in the loop are those of the batches the datasets path builds for steps 3..6.
    assert rows["today"]["useful_tokens_timed"] == sum(datasets_path_useful_targets(tiny_data / "wiki.txt",
                                                                                    range(WARMUP + 1, STEPS + 1)))
    # Two seeds in one process: every member's targets count (each member's batches are its separate run's), the
    # loss is the first member's, and the table compares model-steps per second.
    assert [rows[v].get("members") for v in ("fast", "seed1", "pair")] == [1, 1, 2]
    assert rows["pair"]["useful_tokens_timed"] == rows["fast"]["useful_tokens_timed"] + rows["seed1"][
        "useful_tokens_timed"] != 2 * rows["fast"]["useful_tokens_timed"]
    assert rows["pair"]["loss_tail_mean"] == pytest.approx(rows["fast"]["loss_tail_mean"], abs=1e-4)
    assert rows["pair"]["rows_per_step_mean"] == rows["fast"]["rows_per_step_mean"] + rows["seed1"][
        "rows_per_step_mean"]
    line = next(r for r in bench.table(list(rows.values())).splitlines() if r.startswith("| pair (2 models) |"))
    ratio = 2 * rows["pair"]["steps_per_s"] / rows["today"]["steps_per_s"]
    assert line.split(" | ")[3] == f"×{ratio:.2f}"


def test_bench_gpu_reports_bad_input_in_one_line(bench, tiny_data, capsys):
    base = ["--data_dir", str(tiny_data), "--steps", "4", "--warmup_steps", "1"]
    cases = {
        ("--variants", "today,tomorrow"): "--variants: unknown variant 'tomorrow'",
        ("--variant", "no-equals-sign"): "--variant 'no-equals-sign': expected NAME=FLAGS",
        ("--variant", "mine=--no_such_flag 1"): "variant mine: Some specified arguments are not used",
        ("--variants", "fast", "--variant", "fast=--sync_steps 2"): "each name once",
        ("--extra", "--n_layers 1"): "--extra: Some specified arguments are not used",
        ("--warmup_steps", "4"): "--steps (4) must exceed --warmup_steps (4)",
    }
    for args, message in cases.items():
        assert run_cli(bench.main, [*base, *args]) == 1, args
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: ") and message in err and "\n" not in err, (args, err)


def test_fp32_settings_a_variant_changes_are_put_back(bench):
    matmul = torch.backends.cuda.matmul
    before = matmul.fp32_precision
    with bench.restoring_fp32_settings():
        matmul.fp32_precision = "tf32"
    assert matmul.fp32_precision == before != "tf32"


def session_commands(*argv: str) -> list[list[str]]:
    """What `python experiments/gpu_session.py commands ARGV` prints (run in this process), as argument lists; `python
    -m chargpt.x.y ARGS` as `python chargpt/x/y.py ARGS`, so that each command names its file."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert load("experiments/gpu_session.py").main(["commands", *argv]) == 0
    return [[c[0], c[2].replace(".", "/") + ".py", *c[3:]] if c[1] == "-m" else c
            for c in map(shlex.split, printed.getvalue().splitlines())]


def test_gpu_session_commands_parse_with_their_scripts_parsers(bench, tmp_path):
    out, work = str(tmp_path / "out"), str(tmp_path / "work")
    commands = session_commands("--out", out, "--work", work, "--choose_from", str(tmp_path / "none.json"))
    assert [c[1] for c in commands] == ["experiments/benchmarks/bench_gpu.py", "chargpt/recipes/reproduce.py",
                                        *["chargpt/recipes/recite.py"] * 3]
    bench_cmd, reproduce_cmd, *best_cmds = commands
    opts = bench.build_parser().parse_args(bench_cmd[2:])
    # today's loop as the yardstick, and the rows choose_fast_flags.py decides by: one seed and three seeds compiled
    assert set(opts.variants.split(",")) >= {"today", "fast", "fast_compiled_all", "fast_compiled_all_stacked3"}
    assert all(name in bench.VARIANTS for name in opts.variants.split(","))
    assert opts.out == f"{out}/bench_gpu.json"
    # `reproduce`: make reproduce SEEDS=0,1,2 SYNTH=1 (rope first), every seed of a variant in one process, nothing
    # shortened
    experiments = load("chargpt/recipes/reproduce.py")
    opts = experiments.build_parser().parse_args(reproduce_cmd[2:])
    experiments.check_all_stage_flags(opts)
    assert (opts.recipe, opts.variants, opts.synthesizer, opts.seeds, opts.fast_path, opts.pretrain_epochs,
            opts.skip_baselines, opts.out_dir) == ("reference", "rope,learned", True, "0,1,2", "on", None, False,
                                                   f"{work}/reproduce")
    assert experiments.seeds_together(opts) and "--max_steps" not in opts.extra
    # --repro_pretrain reaches train_pretrain.py whole (compile flags have spaces), --repro_args the recipe
    flags = "--torch_compile True --torch_compile_mode reduce-overhead"
    [tuned] = session_commands("reproduce", "--repro_pretrain", flags, "--repro_args=--stack_seeds")
    opts = experiments.build_parser().parse_args(tuned[2:])
    experiments.check_all_stage_flags(opts)
    assert opts.pretrain_extra == flags and opts.stack_seeds
    assert experiments.pretrain_stage_flags(opts)[-4:] == shlex.split(flags)
    # `best`: make best for each seed, the recipe's own epochs, its pretraining compiled (flags train_pretrain.py
    # takes); the recipe's own check passes
    recipe = load("chargpt/recipes/recite.py")
    for seed, cmd in enumerate(best_cmds):
        opts = recipe.build_parser().parse_args(cmd[2:])
        recipe.check(opts)
        assert (opts.recipe, opts.variant, opts.seeds, opts.pretrain_epochs, opts.threads) == (
            "best", "rope", str(seed), None, 4)
        assert opts.out_dir == f"{work}/seed{seed}" and "--torch_compile True" in opts.pretrain_extra
    assert recipe.settled(opts).pretrain_epochs == 50
    check_flags(train_pretrain.build_parser(), ["--pretrain_corpus_path", "w", "--output_dir", "o",
                                                *shlex.split(opts.pretrain_extra)], "pretrain", "")
    # a variant, epochs, more recipe flags (split on spaces), and no speed flags
    [cmd] = session_commands("best", "--seeds", "4", "--variant", "learned", "--epochs", "3", "--speed", "",
                             "--recipe_extra", "--n_embd 32 --holdout 5")
    opts = recipe.build_parser().parse_args(cmd[2:])
    assert (opts.variant, opts.seeds, opts.pretrain_epochs, opts.n_embd, opts.holdout, opts.pretrain_extra) == (
        "learned", "4", 3, 32, 5, "")


def test_gpu_session_environment_check_loads_what_a_run_loads():
    """The GPU run's first check runs the script's Python snippet: it must load datasets, evaluate and accelerate
    (the packages import lazily, so importing them by name alone proves nothing) and print the versions."""
    check = load("experiments/gpu_session.py").ENV_CHECK + (
        "\nprint(sorted(m for m in ('datasets', 'evaluate', 'accelerate') if m in sys.modules))\n")
    proc = subprocess.run([sys.executable, "-c", check], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines()[-1] == "['accelerate', 'datasets', 'evaluate']"
    assert "| transformers " in proc.stdout and "NO CUDA DEVICE" in proc.stdout


def _gpu_best(wiki: Path, out: Path, work: Path, budget: int, **flags: str) -> list[str]:
    """experiments/gpu_session.py best with a tiny model and one seed whose pretraining runs on past any test (a test
    that lets it finish gives --epochs); `flags` replace those named."""
    given = {"data": str(wiki.parent), "out": str(out), "work": str(work), "seeds": "1", "epochs": "100000",
             "speed": "--checkpointing_steps 1000000", "threads": "1", "recipe_extra": "--n_embd 32 --holdout 5",
             "budget": str(budget), **flags}
    return [sys.executable, "experiments/gpu_session.py", "best", "--no_wheels",
            *(part for name, value in given.items() if value is not None for part in (f"--{name}", value))]


def test_gpu_best_sends_back_the_pretrained_model_and_what_the_recipe_wrote(wiki, tmp_path):
    """`best`, the `make best` call for a GPU, on a CPU with a tiny model and one seed (each seed runs the same way,
    in its own process): the seed's pretrained model comes back as one tar that make best RESUME=1 continues from, and
    the recipe's selection and predictions in one archive (no model in it)."""
    import tarfile

    out, work = tmp_path / "out", tmp_path / "work"
    cmd = _gpu_best(wiki, out, work, 600, epochs="1", speed="",
                    recipe_extra="--n_embd 32 --holdout 5 --learning_rates 1e-4 --no_confidence --extra=--max_steps=2")
    proc = subprocess.run(cmd, cwd=ROOT, env=user_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    with tarfile.open(out / "pretrained-seed1.tar") as tar:
        names = set(tar.getnames())
    folder = "rope-causal-seed1-pretrain"  # the default --variant
    assert {f"{folder}/model.safetensors", f"{folder}/train_results.json", f"{folder}/config.json"} <= names
    assert not any("/checkpoints" in name or "/runs" in name for name in names)
    with tarfile.open(out / "gpu_best_outputs.tar.gz") as tar:
        names = set(tar.getnames())
    assert {"./seed1/select/seed1/selection.json", "./seed1/select/seed1/final.dev.predictions",
            "./seed1/select/seed1/final.test.predictions", "./seed1.log"} <= names
    assert not any(name.endswith(".safetensors") or "-pretrain/" in name for name in names)
    assert "seed 1 pretrained: {'global_step': " in proc.stdout
    assert "done in" in (out / "session.log").read_text() and (out / "pretrain_first_seed.log").is_file()
    assert not list(out.glob(".*"))  # no tar left half written


def _runs_left(out: Path) -> list[int]:
    """The process groups of the runs that the session log names and that are still there, each killed (a test that
    fails leaves no pretraining of 100,000 epochs behind)."""
    log = out / "session.log"
    left = []
    for group in map(int, re.findall(r"seed \d+: process group (\d+)", log.read_text() if log.is_file() else "")):
        try:
            os.killpg(group, signal.SIGKILL)
            left.append(group)
        except ProcessLookupError:
            pass
    return left


def test_a_stop_during_the_pretraining_sends_its_checkpoint_in_parts(wiki, tmp_path):
    """A stop once the pretraining is running (SIGINT to the script's process group, as a terminal's Ctrl-C sends it;
    the runs are in groups of their own, which it does not reach): the script passes SIGINT on to the run, which saves
    a checkpoint, and the checkpoint comes back in parts that `cat` joins into one archive (no final model: none was
    saved); the session log goes on to the end."""
    out, work = tmp_path / "out", tmp_path / "work"
    cmd = _gpu_best(wiki, out, work, 600, speed="--checkpointing_steps 1000000 --logging_steps 1")
    proc = subprocess.Popen(cmd, cwd=ROOT, env=user_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    log = work / "seed1" / "pretrain" / "rope-causal-seed1-pretrain.log"
    deadline = time.monotonic() + 240
    try:  # the loop logs "step N/TOTAL ..." every 10 x --logging_steps steps (here 10): the pretraining is under way
        while not (log.is_file() and re.search(r"step \d+/\d+", log.read_text(errors="replace"))):
            assert proc.poll() is None and time.monotonic() < deadline, (
                (work / "seed1.log").read_text()[-3000:] if (work / "seed1.log").is_file() else "no run log")
            time.sleep(0.5)
        os.killpg(proc.pid, signal.SIGINT)
        printed, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        left = _runs_left(out)
    assert proc.returncode == 0, printed[-3000:]
    assert left == [], "a run was still there after the script ended"
    assert "stopped by a signal: SIGINT to every process group" in printed and "done in" in printed
    assert "done in" in (out / "session.log").read_text()
    # the recipe ran its pretraining step in its own process: that step's line, then the recipe's, end its log
    assert re.search(r"interrupted: the stage stopped with exit status 130 .*\ninterrupted: step 2 of \d+ "
                     r"\(-m chargpt.recipes.reproduce\) stopped with exit status 130\n$",
                     (work / "seed1.log").read_text())
    assert not list(out.glob("*pretrained-seed1.tar"))
    parts = sorted(out.glob("pretrain-checkpoint-seed1.tar.gz.part-*"))
    assert parts and parts[0].name.endswith(".part-aa") and not list(out.glob(".*"))
    joined = subprocess.run(f"cat {shlex.join(map(str, parts))} | tar xz -C {shlex.quote(str(tmp_path))}", shell=True,
                            capture_output=True, text=True)
    assert joined.returncode == 0, joined.stderr
    (step,) = [p.name for p in tmp_path.glob("step-*")]  # the interrupt's own checkpoint, no periodic one
    assert (tmp_path / step / "model.safetensors").is_file() and (tmp_path / step / "optimizer.bin").is_file()


def test_gpu_best_sends_the_latest_checkpoint_in_parts_as_split_names_them(tmp_path, monkeypatch):
    """The latest checkpoint by its step (step-12 after step-9), in parts named as `split -b` names them (aa, ..., az,
    ba), which `cat` joins."""
    import tarfile

    session = load("experiments/gpu_session.py")
    monkeypatch.setattr(session, "PART", 1000)
    for step in ("step-9", "step-12"):
        (tmp_path / "run" / "checkpoints" / step).mkdir(parents=True)
    ckpt = session.latest_checkpoint(tmp_path / "run")
    assert ckpt.name == "step-12" and session.latest_checkpoint(tmp_path / "none") is None
    (ckpt / "optimizer.bin").write_bytes(os.urandom(30_000))  # random bytes do not compress: 30 parts or more
    parts = session.send_in_parts(ckpt, tmp_path / "out.tar.gz")
    assert [p.name for p in parts[:2]] == ["out.tar.gz.part-aa", "out.tar.gz.part-ab"]
    assert [p.name[-2:] for p in parts[25:28]] == ["az", "ba", "bb"] and sorted(parts) == parts
    assert {p.name for p in tmp_path.iterdir()} == {"run", *(p.name for p in parts)}  # nothing else left
    joined = tmp_path / "joined.tar.gz"
    joined.write_bytes(b"".join(p.read_bytes() for p in parts))
    with tarfile.open(joined) as tar:
        assert tar.getnames() == ["step-12", "step-12/optimizer.bin"]


def test_gpu_best_at_its_budget_stops_every_run(wiki, tmp_path):
    """At --budget seconds (here reached during the check of the environment) every run's process group gets SIGINT
    and is gone before the script collects what there is and ends, also where the script started with SIGINT ignored:
    here it is a background command of a shell without job control, which has it so."""
    out, work = tmp_path / "out", tmp_path / "work"
    try:
        proc = subprocess.run(["bash", "-c", f"{shlex.join(_gpu_best(wiki, out, work, 1, epochs=None))} & wait $!"],
                              cwd=ROOT, env=user_env(), capture_output=True, text=True, timeout=300)
    finally:
        left = _runs_left(out)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "budget of 1s reached: SIGINT to every process group" in proc.stdout and "done in" in proc.stdout
    assert "seed 1: process group" in proc.stdout and left == [], "a run was still there after the script ended"
    # the run, named in the log: rope by default, for the recipe's own epochs (no --pretrain_epochs without --epochs)
    assert "--recipe best --variant rope --seeds 1 --threads 1 --n_embd 32" in proc.stdout
    # No model is asserted absent: the recipe's 50 epochs of this tiny model take seconds, and on a loaded machine a
    # pretraining once ended with its model in spite of the stop; left == [] says that every run was stopped.
    assert (out / "gpu_best_outputs.tar.gz").is_file()
