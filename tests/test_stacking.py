"""`--stack_seeds`: the `--seeds` members as one stacked model (chargpt/training/stacking.py):
without dropout each member is
its separate run up to float rounding, with dropout the members draw independent masks; per-member clipping,
resume, compile, and the one-line errors (the NaN stop: tests/test_multiseed.py)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from torch.func import vmap

import modeling_chargpt.dropout
import train_finetune
import train_pretrain
from chargpt.training import SeedStack, run_cli
from chargpt.training.stacking import SeedEnsemble, clip_members_
from modeling_chargpt import CharGPTConfig, CharGPTForCausalLM
from modeling_chargpt.dropout import dropout

TINY = ["--n_layer", "2", "--n_head", "4", "--n_embd", "32", "--block_size", "64"]
QUIET = ["--disable_tqdm", "True", "--report_to", "none"]


def pretrain(wiki: Path, out: Path, *extra: str) -> None:
    """A tiny `--device_data` pretraining (clipping on, a checkpoint every 3 steps) that must succeed."""
    argv = ["--pretrain_corpus_path", str(wiki), "--output_dir", str(out), *TINY, *QUIET, "--device_data", "True",
            "--per_device_train_batch_size", "8", "--checkpointing_steps", "3", "--learning_rate", "3e-3",
            "--max_grad_norm", "0.5", "--num_train_epochs", "2", *extra]
    assert run_cli(train_pretrain.main, argv) == 0


def saved(folder: Path) -> tuple[dict[str, torch.Tensor], list]:
    return load_file(folder / "model.safetensors"), json.loads((folder / "train_results.json").read_text())["losses"]


@pytest.mark.parametrize("variant", [[], ["--position_embedding_type", "rope", "--attention_type", "synthesizer"]])
def test_without_dropout_each_member_is_its_separate_run_up_to_rounding(wiki, tmp_path, variant):
    for seed in (0, 1):
        pretrain(wiki, tmp_path / f"alone{seed}", *variant, "--dropout", "0", "--seed", str(seed), "--max_steps", "5")
    pretrain(wiki, tmp_path / "stacked", *variant, "--dropout", "0", "--seeds", "0,1", "--stack_seeds", "True",
             "--max_steps", "5")
    members = []
    for seed in (0, 1):
        weights, losses = saved(tmp_path / f"alone{seed}")
        member_weights, member_losses = saved(tmp_path / "stacked" / f"seed-{seed}")
        assert member_weights.keys() == weights.keys()
        for key in weights:  # batched kernels round differently; a wrong member would be off by the updates (~1e-3)
            torch.testing.assert_close(member_weights[key], weights[key], atol=2e-5, rtol=1e-4, msg=key)
        assert [s for s, _ in member_losses] == [s for s, _ in losses] == [1, 2, 3, 4, 5]
        assert [x for _, x in member_losses] == pytest.approx([x for _, x in losses], abs=2e-4)
        members.append(member_weights)
        folder = tmp_path / "stacked" / f"seed-{seed}"
        assert isinstance(CharGPTForCausalLM.from_pretrained(folder), CharGPTForCausalLM)
        assert "| trained_with_seeds | 0,1 (stacked) |" in (folder / "README.md").read_text()
    assert not torch.equal(members[0]["lm_head.weight"], members[1]["lm_head.weight"])


def test_with_dropout_the_members_train_and_resume_bit_for_bit(wiki, tmp_path, capsys):
    run = ("--dropout", "0.1", "--seeds", "0,1", "--stack_seeds", "True", "--per_device_train_batch_size", "64")
    pretrain(wiki, tmp_path / "whole", *run, "--max_steps", "6", "--save_epochs", "1")  # 3 steps an epoch
    pretrain(wiki, tmp_path / "resumed", *run, "--max_steps", "3")
    pretrain(wiki, tmp_path / "resumed", *run, "--max_steps", "6", "--resume_from_checkpoint", "latest")
    for seed in (0, 1):
        whole, resumed = saved(tmp_path / "whole" / f"seed-{seed}"), saved(tmp_path / "resumed" / f"seed-{seed}")
        assert all(torch.equal(whole[0][k], resumed[0][k]) for k in whole[0]) and whole[1] == resumed[1], seed
        # the epoch-1 snapshot holds that member's weights after its 3 steps, not the final ones
        snapshot = tmp_path / "whole" / f"seed-{seed}" / "epoch-1"
        assert json.loads((snapshot / "train_results.json").read_text())["global_step"] == 3
        assert not torch.equal(load_file(snapshot / "model.safetensors")["lm_head.weight"], whole[0]["lm_head.weight"])
    # a stacked checkpoint holds stacked tensors: resuming it unstacked is refused in one line
    argv = ["--pretrain_corpus_path", str(wiki), "--output_dir", str(tmp_path / "resumed"), *TINY, *QUIET,
            "--device_data", "True", "--seeds", "0,1", "--resume_from_checkpoint", "latest"]
    assert run_cli(train_pretrain.main, argv) == 1
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(
        "step-00000006: written by a run --seeds 0,1 --stack_seeds, resumed --seeds 0,1")


def test_members_draw_independent_dropout_masks_at_the_rate():
    x = torch.ones(3, 20_000)
    out = vmap(lambda row: dropout(row, 0.25, True), randomness="different")(x)
    kept = out != 0
    assert torch.all((out[kept] - 1 / 0.75).abs() < 1e-6)
    assert kept.float().mean(1).tolist() == pytest.approx([0.75] * 3, abs=0.015)
    assert not torch.equal(kept[0], kept[1]) and not torch.equal(kept[1], kept[2])
    # the one mask per member is what backward scales by: d(sum)/dx is the mask times 1/(1-p)
    x.requires_grad_(True)
    vmap(lambda row: dropout(row, 0.25, True), randomness="different")(x).sum().backward()
    scaled = (x.grad - 1 / 0.75).abs() < 1e-6
    assert torch.all((x.grad == 0) | scaled) and not torch.equal(scaled[0], scaled[1])
    # a member dimension that is not the first keeps its place (no copy), the masks still differ
    columns = vmap(lambda col: dropout(col, 0.25, True), in_dims=1, out_dims=1, randomness="different")(
        torch.ones(20_000, 3))
    assert columns.shape == (20_000, 3) and (columns != 0).float().mean(0).tolist() == pytest.approx([0.75] * 3,
                                                                                                    abs=0.015)
    assert not torch.equal(columns[:, 0] != 0, columns[:, 1] != 0)
    with pytest.raises(RuntimeError, match="randomness='different'"):
        vmap(lambda row: dropout(row, 0.25, True), randomness="same")(torch.ones(3, 8))


def test_each_members_gradient_is_clipped_on_its_own():
    torch.manual_seed(0)
    members = [[torch.nn.Parameter(torch.zeros(4, 3)), torch.nn.Parameter(torch.zeros(5))] for _ in range(3)]
    for i, params in enumerate(members):
        for p in params:
            p.grad = torch.randn_like(p) * (0.1 if i == 1 else 3.0)  # member 1 under the bound, the others over
    stacked = [torch.nn.Parameter(torch.zeros(3, 4, 3)), torch.nn.Parameter(torch.zeros(3, 5))]
    for j, p in enumerate(stacked):
        p.grad = torch.stack([params[j].grad for params in members])
    norms = clip_members_(stacked, 1.0)
    for i, params in enumerate(members):
        expected = torch.nn.utils.clip_grad_norm_(params, 1.0)
        assert norms[i].item() == pytest.approx(expected.item(), rel=1e-6)
        for j, p in enumerate(params):
            torch.testing.assert_close(stacked[j].grad[i], p.grad)
    assert torch.linalg.vector_norm(torch.cat([p.grad[1].flatten() for p in stacked])).item() < 1.0
    assert norms[0] > 1.0 and norms[1] < 1.0


def test_the_ensemble_keeps_the_members_init_and_writes_the_trained_slices_back():
    config = CharGPTConfig(vocab_size=12, block_size=16, n_layer=1, n_head=2, n_embd=16)
    stack = SeedStack.build(lambda _: CharGPTForCausalLM(config), [3, 5])
    before = [m.lm_head.weight.detach().clone() for m in stack.members]
    ensemble = SeedEnsemble(stack)
    assert ensemble.stacked.lm_head.weight.shape == (2, 12, 16)
    ensemble.to(torch.float64)  # as preparing it for a device moves it: forward's cached names still hold its tensors
    assert all(p is ensemble.stacked.get_parameter(n) and p.dtype == torch.float64
               for n, p in ensemble._named_parameters.items())
    ensemble.to(torch.float32)
    assert all(torch.equal(ensemble.stacked.lm_head.weight[i], before[i]) for i in range(2))
    with torch.no_grad():
        ensemble.stacked.lm_head.weight.add_(1.0)
    members = ensemble.members
    assert all(torch.equal(m.lm_head.weight, before[i] + 1.0) for i, m in enumerate(members))
    assert not members[0].base_model.caller_checks_positions  # the saved models check their own positions
    tied = CharGPTConfig(vocab_size=12, block_size=16, n_layer=1, n_head=2, n_embd=16, tie_word_embeddings=True)
    with pytest.raises(ValueError, match="untied"):
        SeedEnsemble(SeedStack.build(lambda _: CharGPTForCausalLM(tied), [0, 1]))


def test_a_position_beyond_the_learned_table_is_still_refused(wiki):
    config = CharGPTConfig(vocab_size=12, block_size=16, n_layer=1, n_head=2, n_embd=16)
    ensemble = SeedEnsemble(SeedStack.build(lambda _: CharGPTForCausalLM(config), [0, 1]))
    ids = torch.ones(2, 16, dtype=torch.long)
    batch = {"input_ids": ids, "labels": ids, "position_ids": torch.arange(16).expand(2, 16)}
    assert ensemble([batch, batch], step=0).losses.shape == (2,)
    with pytest.raises(RuntimeError, match="beyond block_size=16"):
        ensemble([batch, {**batch, "position_ids": batch["position_ids"] + 1}], step=0)


def test_compiled_stacked_members_train_as_eager_stacked_ones(wiki, tmp_path):
    torch._dynamo.reset()
    pretrain(wiki, tmp_path / "eager", "--dropout", "0", "--seeds", "0,1", "--stack_seeds", "True", "--max_steps", "3")
    pretrain(wiki, tmp_path / "compiled", "--dropout", "0", "--seeds", "0,1", "--stack_seeds", "True",
             "--max_steps", "3", "--torch_compile_backend", "aot_eager")
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] >= 1
    for seed in (0, 1):
        eager, compiled = saved(tmp_path / "eager" / f"seed-{seed}"), saved(tmp_path / "compiled" / f"seed-{seed}")
        for key in eager[0]:
            torch.testing.assert_close(compiled[0][key], eager[0][key], atol=1e-6, rtol=1e-5, msg=key)


def test_finetuning_stacked_members_from_their_pretrained_models(wiki, tmp_path):
    pretrain(wiki, tmp_path / "pre", "--seeds", "0,1", "--max_steps", "2")
    argv = ["--pretrain_corpus_path", str(wiki), "--finetune_corpus_path", str(wiki.parent / "birth_places_train.tsv"),
            "--output_dir", str(tmp_path / "fine"), *QUIET, "--device_data", "True", "--per_device_train_batch_size",
            "8", "--max_steps", "3", "--learning_rate", "1e-3", "--model_name_or_path", str(tmp_path / "pre"),
            "--seeds", "0,1", "--stack_seeds", "True"]
    assert run_cli(train_finetune.main, argv) == 0
    pretrained = [load_file(tmp_path / "pre" / f"seed-{seed}" / "model.safetensors") for seed in (0, 1)]
    for seed in (0, 1):
        after, losses = saved(tmp_path / "fine" / f"seed-{seed}")
        own, other = (w["transformer.tok_emb.weight"] for w in (pretrained[seed], pretrained[1 - seed]))
        assert not torch.equal(after["lm_head.weight"], pretrained[seed]["lm_head.weight"]) and len(losses) == 3
        # three small steps from its own pretrained model, far from the other seed's
        assert (after["transformer.tok_emb.weight"] - own).norm() < (after["transformer.tok_emb.weight"] - other).norm()


def test_stack_seeds_without_seeds_is_one_line(wiki, tmp_path, capsys):
    argv = ["--pretrain_corpus_path", str(wiki), "--output_dir", str(tmp_path / "o"), *TINY, *QUIET,
            "--device_data", "True", "--stack_seeds", "True"]
    assert run_cli(train_pretrain.main, argv) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: --stack_seeds stacks the models of --seeds: give --seeds too (e.g. --seeds 0,1,2)"]
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("seeds", [[], ["--seeds", "0,1", "--stack_seeds", "True"]], ids=["one model", "stacked"])
def test_with_torch_dropout_the_compiled_step_has_no_graph_break(wiki, tmp_path, monkeypatch, seeds):
    """On a GPU dropout is torch's (`F.dropout`; chargpt's CPU mask is for CPUs only), and there the compiled step
    must be whole graphs: a graph break splits the CUDA graphs of `reduce-overhead` and puts Python back between
    kernels, the host-bound cost the fast path removes. Checked here with the GPU's dropout and the fast path's
    compiled flags (packing compiled too); with chargpt's CPU dropout dynamo breaks on its random draw."""
    monkeypatch.setattr(modeling_chargpt.dropout, "_FastDropout", SimpleNamespace(
        apply=lambda x, p: (F.dropout(x, p, training=True), None)))
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    pretrain(wiki, tmp_path / "compiled", "--max_steps", "2", "--torch_compile", "True", "--torch_compile_backend",
             "aot_eager", "--torch_compile_batches", "True", "--optim", "adamw_torch_fused", *seeds)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] >= 1  # the step did go through dynamo
    assert not torch._dynamo.utils.counters["graph_break"], dict(torch._dynamo.utils.counters["graph_break"])
