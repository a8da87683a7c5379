"""`--seeds`: several pretraining or finetuning seeds in one process, each member bit-for-bit its separate `--seed S`
run on CPU (init, batches, dropout, clipping, optimizer), independent of the others, resumable, stopped by a NaN in
any one."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest
import torch
from accelerate import Accelerator
from safetensors.torch import load_file

import train_finetune
import train_pretrain
from chargpt.training import SeedStack, TrainingDivergedError, run_cli
from chargpt.training.stacking import SeedEnsemble
from data_scripts import device_batches as device_batches_module
from modeling_chargpt import CharGPTConfig, CharGPTForCausalLM

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--n_layer", "2", "--n_head", "4", "--n_embd", "32", "--block_size", "64", "--dropout", "0.1"]
QUIET = ["--disable_tqdm", "True", "--report_to", "none"]


@pytest.fixture
def one_thread():
    """Bit for bit needs deterministic kernels: with several CPU threads the learned position embedding's gradient (an
    accumulating index backward) can differ in the last bit between two separate runs of one seed."""
    torch.set_num_threads(1)  # conftest's _torch_threads_kept puts the worker's back after the test


def pretrain(wiki: Path, out: Path, *extra: str) -> None:
    """A tiny `--device_data` pretraining (dropout on, clipping on, a checkpoint every 3 steps) that must succeed."""
    extra = ("--num_train_epochs", "2", *extra)
    argv = ["--pretrain_corpus_path", str(wiki), "--output_dir", str(out), *TINY, *QUIET, "--device_data", "True",
            "--per_device_train_batch_size", "8", "--checkpointing_steps", "3", "--learning_rate", "3e-3",
            "--max_grad_norm", "0.5", *extra]
    assert run_cli(train_pretrain.main, argv) == 0


def saved(folder: Path) -> tuple[dict[str, torch.Tensor], list]:
    return load_file(folder / "model.safetensors"), json.loads((folder / "train_results.json").read_text())["losses"]


def test_each_member_is_its_separate_run_bit_for_bit_and_resumes_identically(wiki, tmp_path, capsys, one_thread):
    # the 20 training questions mixed into the documents: two kinds of rows per batch
    qa = ("--mixed_qa_corpus_path", str(wiki.parent / "birth_places_train.tsv"))
    for seed in (0, 1):
        pretrain(wiki, tmp_path / f"seed{seed}", *qa, "--seed", str(seed), "--max_steps", "6")
    pretrain(wiki, tmp_path / "together", *qa, "--seeds", "0,1", "--max_steps", "6", "--sync_steps", "2")
    pretrain(wiki, tmp_path / "resumed", *qa, "--seeds", "0,1", "--max_steps", "3")
    pretrain(wiki, tmp_path / "resumed", *qa, "--seeds", "0,1", "--max_steps", "6", "--resume_from_checkpoint",
             "latest")
    argv = ["--pretrain_corpus_path", str(wiki), "--output_dir", str(tmp_path / "resumed"), *TINY, *QUIET,
            "--device_data", "True", "--seeds", "1,0", "--resume_from_checkpoint", "latest"]
    assert run_cli(train_pretrain.main, argv) == 1  # the members would swap their weights
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(
        "step-00000006: written by a run --seeds 0,1, resumed --seeds 1,0")

    members = {}
    for seed in (0, 1):
        weights, losses = saved(tmp_path / f"seed{seed}")
        for run in ("together", "resumed"):
            member_weights, member_losses = saved(tmp_path / run / f"seed-{seed}")
            assert member_weights.keys() == weights.keys()
            assert all(torch.equal(member_weights[k], weights[k]) for k in weights), (run, seed)
            assert member_losses == losses and len(losses) == 6, (run, seed)
            # the compute it reports is its separate run's (its own batches' positions; resumed: counted across)
            computed = [json.loads((folder / "train_results.json").read_text())
                        for folder in (tmp_path / f"seed{seed}", tmp_path / run / f"seed-{seed}")]
            assert computed[0]["train_positions"] == computed[1]["train_positions"] > 0, (run, seed)
            assert computed[0]["train_flops"] == computed[1]["train_flops"] > 0, (run, seed)
        members[seed] = weights, losses
        folder = tmp_path / "together" / f"seed-{seed}"
        assert isinstance(CharGPTForCausalLM.from_pretrained(folder), CharGPTForCausalLM)
        card = (folder / "README.md").read_text()
        assert f"| seed | {seed} |" in card and "| trained_with_seeds | 0,1 |" in card
    (w0, l0), (w1, l1) = members[0], members[1]
    assert not any(torch.equal(w0[k], w1[k]) for k in w0 if k != "transformer.pos_emb")  # independent members
    assert all(a[1] != b[1] for a, b in zip(l0, l1, strict=True))
    assert not (tmp_path / "together" / "model.safetensors").exists()  # only the members' folders


def finetune(wiki: Path, out: Path, *extra: str) -> None:
    """A tiny `--device_data` finetuning (dropout from the model, clipping on) that must succeed."""
    argv = ["--pretrain_corpus_path", str(wiki), "--finetune_corpus_path", str(wiki.parent / "birth_places_train.tsv"),
            "--output_dir", str(out), *QUIET, "--device_data", "True", "--per_device_train_batch_size", "8",
            "--num_train_epochs", "2", "--learning_rate", "1e-3", "--max_grad_norm", "0.5", *extra]
    assert run_cli(train_finetune.main, argv) == 0


def test_finetuning_members_are_their_separate_runs_from_their_own_pretrained_models(wiki, tmp_path, one_thread):
    pretrained = tmp_path / "pre"
    pretrain(wiki, pretrained, "--seeds", "0,1", "--max_steps", "2")
    for seed in (0, 1):
        finetune(wiki, tmp_path / f"alone{seed}", "--seed", str(seed), "--model_name_or_path",
                 str(pretrained / f"seed-{seed}"))
    finetune(wiki, tmp_path / "together", "--seeds", "0,1", "--model_name_or_path", str(pretrained))
    for seed in (0, 1):
        weights, losses = saved(tmp_path / f"alone{seed}")
        member_weights, member_losses = saved(tmp_path / "together" / f"seed-{seed}")
        assert all(torch.equal(member_weights[k], weights[k]) for k in weights) and member_losses == losses, seed
        before = load_file(pretrained / f"seed-{seed}" / "model.safetensors")
        assert not torch.equal(weights["lm_head.weight"], before["lm_head.weight"])  # finetuned from its own model
        card = (tmp_path / "together" / f"seed-{seed}" / "README.md").read_text()
        assert f"| seed | {seed} |" in card and f"| initialised_from | {pretrained}/seed-S |" in card
    assert saved(tmp_path / "alone0")[1] != saved(tmp_path / "alone1")[1]


def test_compiled_members_train_as_their_separate_eager_runs(wiki, tmp_path, one_thread, monkeypatch):
    """`--torch_compile` with `--seeds` compiles each member, and `--torch_compile_batches` each member's packer; the
    'aot_eager' backend runs eager kernels, so each member (dropout on, reseeded between the members) must equal its
    separate uncompiled run bit for bit. A compiled step keeps the fixed packed rows, so the eager run here does too
    (on a CPU it would trim them, and dropout would draw its masks for fewer rows)."""
    monkeypatch.setattr(device_batches_module, "trim_rows", lambda batch: batch)
    torch._dynamo.reset()
    pretrain(wiki, tmp_path / "alone", "--seed", "1", "--max_steps", "4")
    pretrain(wiki, tmp_path / "together", "--seeds", "0,1", "--max_steps", "4", "--torch_compile_backend", "aot_eager",
             "--torch_compile_batches", "True")
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] >= 1  # the steps did go through dynamo
    weights, losses = saved(tmp_path / "alone")
    member_weights, member_losses = saved(tmp_path / "together" / "seed-1")
    assert all(torch.equal(member_weights[k], weights[k]) for k in weights) and member_losses == losses
    assert saved(tmp_path / "together" / "seed-0")[1] != losses


def test_finetuning_seeds_from_one_model_or_from_scratch_match_their_separate_runs(wiki, tmp_path, one_thread):
    pretrained = tmp_path / "pre"
    pretrain(wiki, pretrained, "--max_steps", "2")
    for start in (["--model_name_or_path", str(pretrained)], TINY):  # one model for every seed; no pretraining
        tag = "shared" if start != TINY else "scratch"
        finetune(wiki, tmp_path / f"{tag}-alone", *start, "--seed", "1", "--max_steps", "4")
        finetune(wiki, tmp_path / f"{tag}-together", *start, "--seeds", "0,1", "--max_steps", "4")
        weights, losses = saved(tmp_path / f"{tag}-alone")
        member_weights, member_losses = saved(tmp_path / f"{tag}-together" / "seed-1")
        assert all(torch.equal(member_weights[k], weights[k]) for k in weights) and member_losses == losses, tag
        assert saved(tmp_path / f"{tag}-together" / "seed-0")[1] != losses


def test_finetuning_seeds_missing_from_a_seeds_folder_is_one_line(wiki, tmp_path, capsys):
    pretrained = tmp_path / "pre"
    pretrain(wiki, pretrained, "--seeds", "0,1", "--max_steps", "1")
    argv = ["--pretrain_corpus_path", str(wiki), "--finetune_corpus_path", str(wiki.parent / "birth_places_train.tsv"),
            "--output_dir", str(tmp_path / "o"), *QUIET, "--device_data", "True", "--seeds", "0,2",
            "--model_name_or_path", str(pretrained)]
    assert run_cli(train_finetune.main, argv) == 1
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"error: --model_name_or_path {pretrained}: no seed-2 folder for --seeds 0,2 (it has seed-0, seed-1)")
    assert not (tmp_path / "o").exists()


def test_members_are_built_as_their_separate_runs_build_their_models():
    config = CharGPTConfig(vocab_size=12, block_size=16, n_layer=1, n_head=2, n_embd=16)
    stack = SeedStack.build(lambda _: CharGPTForCausalLM(config), [3, 5])
    for seed, member in zip((3, 5), stack.members, strict=True):
        torch.manual_seed(seed)
        alone = CharGPTForCausalLM(config)
        assert all(torch.equal(a, b) for a, b in zip(member.parameters(), alone.parameters(), strict=True))
    assert not torch.equal(stack.members[0].lm_head.weight, stack.members[1].lm_head.weight)


@pytest.mark.parametrize("stacked", [False, True])
def test_a_nan_in_one_member_stops_before_the_update_naming_its_seed_and_the_last_good_checkpoint(
        wiki, tmp_path, monkeypatch, stacked):
    owner = SeedEnsemble if stacked else CharGPTForCausalLM  # stacked: one forward for both members
    original, calls = owner.forward, {"n": 0}

    def forward_that_diverges(self, *a, **kw):
        out = original(self, *a, **kw)
        calls["n"] += 1
        if calls["n"] == (4 if stacked else 8):  # in turn the members alternate: call 8 is seed 1's of step 4
            if stacked:
                out.losses = out.losses * torch.tensor([1.0, float("nan")])
                out.loss = out.losses.sum()
            else:
                out.loss = out.loss * float("nan")
        return out

    monkeypatch.setattr(owner, "forward", forward_that_diverges)
    out = tmp_path / "nan"
    with pytest.raises(TrainingDivergedError,
                       match=r"loss became nan at step 4 \(epoch 1, seed 1\); stopped before updating the weights.*"
                             r"step-00000003"):
        train_pretrain.main(["--pretrain_corpus_path", str(wiki), "--output_dir", str(out), *TINY, *QUIET,
                             "--device_data", "True", "--per_device_train_batch_size", "8",
                             "--checkpointing_steps", "3", "--seeds", "0,1", "--max_steps", "6",
                             *(["--stack_seeds", "True"] if stacked else [])])
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["step-00000003"]
    assert not list(out.glob("seed-*"))


def test_several_processes_are_refused_in_one_line(wiki, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(Accelerator, "num_processes", property(lambda self: 2))  # as under accelerate launch
    argv = ["--pretrain_corpus_path", str(wiki), "--output_dir", str(tmp_path / "o"), *TINY, *QUIET,
            "--device_data", "True", "--seeds", "0,1", "--per_device_train_batch_size", "8"]
    assert run_cli(train_pretrain.main, argv) == 1
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "error: --seeds runs in one process; launch without --num_processes")


@pytest.mark.parametrize(("script", "extra", "expected"), [
    (train_pretrain, ["--seeds", "0,1"], "--seeds needs --device_data True"),
    (train_pretrain, ["--seeds", "1,1", "--device_data", "True"], "--seeds '1,1': each seed once"),
    (train_pretrain, ["--seeds", "a", "--device_data", "True"], "--seeds 'a': expected comma-separated integers"),
    (train_pretrain, ["--seeds", "0,1", "--device_data", "True", "--mixed_precision", "fp16"],
     "--seeds does not run with --mixed_precision fp16"),
    (train_finetune, ["--seeds", "0,1", "--finetune_corpus_path", "x.tsv"], "--seeds needs --device_data True"),
])
def test_bad_seeds_are_one_line_errors(script, extra, expected, wiki, tmp_path, capsys):
    argv = ["--pretrain_corpus_path", str(wiki), "--output_dir", str(tmp_path / "o"), *TINY, *QUIET, *extra]
    assert run_cli(script.main, argv) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {expected}"), err
    assert not (tmp_path / "o").exists()


def test_snapshots_go_to_each_members_folder_and_the_logs_name_each_seed(wiki, tmp_path, monkeypatch):
    logged: list = []
    monkeypatch.setattr(Accelerator, "init_trackers", lambda self, *a, **kw: None)
    monkeypatch.setattr(Accelerator, "end_training", lambda self: None)
    monkeypatch.setattr(Accelerator, "log", lambda self, values, step=None: logged.append(values))
    out = tmp_path / "snap"
    pretrain(wiki, out, "--seeds", "0,2", "--per_device_train_batch_size", "64", "--num_train_epochs", "2",
             "--save_epochs", "1", "--report_to", "tensorboard", "--logging_steps", "1")
    for seed in (0, 2):
        snapshot = out / f"seed-{seed}" / "epoch-1"
        losses = dict(json.loads((out / f"seed-{seed}" / "train_results.json").read_text())["losses"])
        results = json.loads((snapshot / "train_results.json").read_text())
        assert round(results["final_loss"], 5) == losses[results["global_step"]]  # its own loss, not the mean
        assert isinstance(CharGPTForCausalLM.from_pretrained(snapshot), CharGPTForCausalLM)
    last = logged[-1]
    assert last["train/loss"] == pytest.approx((last["train/loss_seed_0"] + last["train/loss_seed_2"]) / 2)


def test_run_experiments_trains_a_variants_seeds_in_one_process_on_a_gpu_only(tmp_path, monkeypatch, capsys):
    experiments = importlib.import_module("chargpt.recipes.reproduce")
    calls = []
    monkeypatch.setattr(experiments, "run", lambda cmd, log: calls.append((cmd, log)) or 12.0)
    wiki = tmp_path / "wiki.txt"

    def plan(seeds: str, cuda: bool, *more: str) -> tuple[list[str], dict, dict]:
        monkeypatch.setattr(experiments.torch.cuda, "is_available", lambda: cuda)
        opts = experiments.build_parser().parse_args(["--data_dir", str(tmp_path), "--out_dir", str(tmp_path),
                                                      "--recipe", "demo", "--seeds", seeds, *more])
        experiments.check_all_stage_flags(opts)  # train_pretrain.py takes the flags it will be given
        flags = experiments.pretrain_stage_flags(opts)
        seed_list = [int(s) for s in seeds.split(",")]
        together = experiments.pretrain_together(opts, wiki, tmp_path, "rope-causal-seeds", flags, seed_list)
        finetuned = experiments.finetune_together(opts, wiki, tmp_path / "train.tsv", tmp_path, "rope-causal-seeds",
                                                  together, ["--learning_rate", "1e-4"])
        return flags, together, finetuned

    flags, together, finetuned = plan("0,1", cuda=True)
    assert flags[:6] == ["--preset", "demo", "--device_data", "True", "--seeds", "0,1"]  # the recipe, then the path
    folder = tmp_path / "rope-causal-seeds-pretrain"
    assert together == {0: (folder / "seed-0", 6.0, {}), 1: (folder / "seed-1", 6.0, {})}  # the 12 s shared
    tuned = tmp_path / "rope-causal-seeds-finetune"
    assert finetuned == {0: (tuned / "seed-0", 6.0), 1: (tuned / "seed-1", 6.0)}
    (cmd, log), (tune_cmd, tune_log) = calls
    assert cmd[cmd.index("--output_dir") + 1] == str(folder) and "--seeds" in cmd and "--seed" not in cmd
    assert tune_cmd[tune_cmd.index("--model_name_or_path") + 1] == str(folder)  # each member from its seed-S
    assert tune_cmd[tune_cmd.index("--output_dir") + 1] == str(tuned) and "--seed" not in tune_cmd
    assert tune_cmd[tune_cmd.index("--seeds") + 1] == "0,1" and "--device_data" in tune_cmd
    assert tune_cmd[-2:] == ["--learning_rate", "1e-4"] and tune_log.name == "rope-causal-seeds-finetune.log"
    for seeds, cuda in (("0,1", False), ("0", True)):  # CPU, or one seed: one process per seed, as before
        flags, together, finetuned = plan(seeds, cuda)
        assert together == finetuned == {} and "--seeds" not in flags
        assert ("--device_data" in flags) == cuda  # the fast path's
    assert len(calls) == 2
    # --stack_seeds (make reproduce STACK=1): both processes train their members stacked; nothing without --seeds
    flags, _, _ = plan("0,1", True, "--stack_seeds")
    assert flags[2:8] == ["--device_data", "True", "--seeds", "0,1", "--stack_seeds", "True"]
    tune_cmd = calls[-1][0]
    assert tune_cmd[tune_cmd.index("--seeds"):tune_cmd.index("--seeds") + 4] == ["--seeds", "0,1", "--stack_seeds",
                                                                                 "True"]
    assert "--stack_seeds" not in plan("0,1", False, "--stack_seeds")[0] and len(calls) == 4
    # ... and the run says so (here it then stops at the missing data)
    monkeypatch.setattr(sys, "argv", ["chargpt.recipes.reproduce", "--data_dir", str(tmp_path / "none"), "--out_dir",
                                      str(tmp_path / "o"), "--seeds", "0,1", "--stack_seeds", "--recipe", "demo"])
    with pytest.raises(SystemExit, match="file not found"):
        experiments.main()
    assert "--stack_seeds changes nothing here" in capsys.readouterr().out
