"""The shared training loop in-process: schedule, optimizer groups, checkpoints, divergence, scripts' errors."""

from __future__ import annotations

import json
import math

import pytest
import torch

from chargpt.training import TokenCosineSchedule, TrainingArguments, build_optimizer
from modeling_chargpt import CharGPTConfig, CharGPTForCausalLM


def _tiny_model(**kw) -> CharGPTForCausalLM:
    cfg = dict(vocab_size=40, block_size=32, n_layer=2, n_head=4, n_embd=64)
    cfg.update(kw)
    return CharGPTForCausalLM(CharGPTConfig(**cfg))


def test_schedule_matches_reference_formula():
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    warm, final, base = 1000, 10_000, 6e-3
    sched = TokenCosineSchedule(opt, base, warm, final)
    assert sched.get_last_lr() == base  # reference quirk: the first step runs at the full rate
    assert sched.step(500) == pytest.approx(base * 0.5)
    assert sched.step(500) == pytest.approx(base * 0.5 * (1 + math.cos(0)))  # tokens == warmup -> cosine at 0
    sched.step(4500)  # 5500 tokens: halfway through the cosine
    assert sched.get_last_lr() == pytest.approx(base * 0.5)
    sched.step(100_000)
    assert sched.get_last_lr() == pytest.approx(base * 0.1)  # 10% floor
    state = sched.state_dict()
    other = TokenCosineSchedule(torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0), base, warm, final)
    other.load_state_dict(json.loads(json.dumps(state)))
    assert other.tokens == sched.tokens and other.get_last_lr() == sched.get_last_lr()


def test_schedule_without_decay_is_constant():
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    sched = TokenCosineSchedule(opt, 3e-4, 10, 100, decay=False)
    assert sched.step(5) == 3e-4 and sched.step(1000) == 3e-4


@pytest.mark.parametrize("scope", ["reference", "matmul"])
def test_optimizer_groups(tmp_path, scope):
    model = _tiny_model()
    args = TrainingArguments(output_dir=str(tmp_path), weight_decay_scope=scope)
    opt = build_optimizer(model, args, lr=1e-3)
    decayed = {id(p) for p in opt.param_groups[0]["params"]}
    names = {n for n, p in model.named_parameters() if id(p) in decayed}
    assert opt.param_groups[0]["weight_decay"] == 0.1 and opt.param_groups[1]["weight_decay"] == 0.0
    assert opt.defaults["betas"] == (0.9, 0.95)
    assert "lm_head.weight" in names and "transformer.blocks.0.attn.qkv.weight" in names
    assert not any("bias" in n for n in names)
    if scope == "reference":
        # The reference trainer's no-decay filter ("bias", "LayerNorm.weight") never matches minGPT's names,
        # so LayerNorm gains, embeddings and positions decay too.
        assert {"transformer.ln_f.weight", "transformer.tok_emb.weight", "transformer.pos_emb"} <= names
    else:
        assert not names & {"transformer.ln_f.weight", "transformer.tok_emb.weight", "transformer.pos_emb"}
    assert sum(len(g["params"]) for g in opt.param_groups) == len(list(model.parameters()))


def _nan_loss_at_call(monkeypatch: pytest.MonkeyPatch, n: int) -> dict:
    """Make the model's `n`-th forward return a NaN loss; returns the forward-call counter."""
    original, calls = CharGPTForCausalLM.forward, {"n": 0}

    def forward_that_diverges(self, *a, **kw):
        out = original(self, *a, **kw)
        calls["n"] += 1
        if calls["n"] == n:
            out.loss = out.loss * float("nan")
        return out

    monkeypatch.setattr(CharGPTForCausalLM, "forward", forward_that_diverges)
    return calls


def test_nan_loss_stops_with_a_clear_message_and_keeps_the_last_good_checkpoint(tmp_path, monkeypatch):
    from chargpt.training import TrainingDivergedError, find_latest_checkpoint, make_accelerator, train

    args = TrainingArguments(output_dir=str(tmp_path), num_train_epochs=50, per_device_train_batch_size=4,
                             learning_rate=1e-3, checkpointing_steps=2, report_to="none", disable_tqdm=True)
    accelerator = make_accelerator(args)
    model = _tiny_model()
    data = [{"input_ids": torch.randint(2, 40, (32,)), "labels": torch.randint(2, 40, (32,))} for _ in range(8)]
    _nan_loss_at_call(monkeypatch, 5)
    collate = torch.utils.data.default_collate
    with pytest.raises(TrainingDivergedError, match=r"loss became nan at step 5 .*step-00000004"):
        train(accelerator, model, None, data, collate, args, final_tokens=10_000, tokens_per_example=31)
    latest = find_latest_checkpoint(str(tmp_path))
    assert latest is not None and latest.name == "step-00000004"
    assert json.loads((latest / "trainer_state.json").read_text())["global_step"] == 4
    assert not (tmp_path / "model.safetensors").exists()


def test_nan_between_sync_points_stops_before_the_next_checkpoint(tmp_path, monkeypatch):
    from chargpt.training import TrainingDivergedError, find_latest_checkpoint, make_accelerator, train

    calls = _nan_loss_at_call(monkeypatch, 5)
    data = [{"input_ids": torch.randint(2, 40, (32,)), "labels": torch.randint(2, 40, (32,))} for _ in range(8)]
    # Sync points: 3 and 6 (checkpoints), 4, 8... The NaN of step 5 is read back before step 6's update and save.
    args = TrainingArguments(output_dir=str(tmp_path), num_train_epochs=50, per_device_train_batch_size=4,
                             learning_rate=1e-3, checkpointing_steps=3, sync_steps=4, report_to="none",
                             disable_tqdm=True)
    model = _tiny_model()
    with pytest.raises(TrainingDivergedError,
                       match=r"loss became nan at step 5 .*read back before step 6 .*step-00000003"):
        train(make_accelerator(args), model, None, data, torch.utils.data.default_collate, args,
              final_tokens=10_000, tokens_per_example=31)
    assert calls["n"] == 6  # step 5 was not read back on its own: no host sync there
    assert any(not torch.isfinite(p).all() for p in model.parameters())  # the bad update reached the weights...
    latest = find_latest_checkpoint(str(tmp_path))  # ...but no checkpoint after it
    assert latest is not None and latest.name == "step-00000003"
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["step-00000003"]
    assert not (tmp_path / "model.safetensors").exists()


def test_packing_keeps_examples_per_step_schedule_and_losses(tmp_path):
    from chargpt.training import make_accelerator, train
    from data_scripts import (
        PackedCollator,
        load_pretrain_corpus,
        pad_collate,
        span_corruption_dataset,
        write_synthetic_corpus,
    )
    from modeling_chargpt import CharTokenizer

    write_synthetic_corpus(tmp_path / "w", n_people=40, n_train=20, n_dev=10, n_test=10, seed=0)
    text, docs = load_pretrain_corpus(tmp_path / "w" / "wiki.txt")
    tok = CharTokenizer.from_corpus(text)
    runs = {}
    for packing in (False, True):
        args = TrainingArguments(output_dir=str(tmp_path / f"p{packing}"), num_train_epochs=1, max_steps=3,
                                 per_device_train_batch_size=8, learning_rate=1e-3, report_to="none",
                                 disable_tqdm=True, checkpointing_steps=3, packing=packing)
        accelerator = make_accelerator(args)
        model = CharGPTForCausalLM(CharGPTConfig(vocab_size=tok.vocab_size, block_size=64, n_layer=2, n_head=4,
                                                 n_embd=32, embd_pdrop=0.0, resid_pdrop=0.0, attn_pdrop=0.0))
        ds, corruption = span_corruption_dataset(docs, tok, 64, seed=0)
        collate = PackedCollator(64) if packing else pad_collate
        result = train(accelerator, model, tok, ds, collate, args, final_tokens=100_000, tokens_per_example=63,
                       on_epoch_start=corruption.set_epoch)
        state = json.loads((tmp_path / f"p{packing}" / "checkpoints" / "step-00000003" / "trainer_state.json")
                           .read_text())
        runs[packing] = (result, state["schedule"])
    (padded, s_pad), (packed, s_pack) = runs[False], runs[True]
    assert s_pad["tokens"] == s_pack["tokens"] == 3 * 8 * 63
    assert s_pad["lr"] == s_pack["lr"]
    for (step_a, loss_a), (step_b, loss_b) in zip(padded.losses, packed.losses, strict=True):
        assert step_a == step_b and abs(loss_a - loss_b) < 1e-3



def test_full_epochs_are_counted_and_the_final_checkpoint_resumes_to_nothing(tmp_path):
    import string

    from chargpt.training import make_accelerator, train
    from modeling_chargpt import CharTokenizer

    tok = CharTokenizer.from_corpus(string.ascii_letters[:38])  # 40 ids, the tiny model's vocabulary
    args = TrainingArguments(output_dir=str(tmp_path), num_train_epochs=2, per_device_train_batch_size=4,
                             learning_rate=1e-3, report_to="none", disable_tqdm=True, checkpointing_steps=100)
    data = [{"input_ids": torch.randint(2, 40, (32,)), "labels": torch.randint(2, 40, (32,))} for _ in range(10)]
    collate = torch.utils.data.default_collate
    result = train(make_accelerator(args), _tiny_model(), tok, data, collate, args, final_tokens=10_000,
                   tokens_per_example=31)
    assert (result.global_step, result.epoch) == (6, 2.0)  # 3 batches (4+4+2) per epoch
    assert json.loads((tmp_path / "train_results.json").read_text())["epoch"] == 2.0
    # the checkpoint keeps the seconds trained, so a run resumed in a later process reports its whole training
    state_file = tmp_path / "checkpoints" / "step-00000006" / "trainer_state.json"
    saved = json.loads(state_file.read_text())
    assert result.train_seconds - 1e-3 <= saved["train_seconds"] < result.train_seconds + 5
    state_file.write_text(json.dumps({**saved, "train_seconds": 1000.0}))  # as if it had trained for 1000 s
    args.resume_from_checkpoint = "latest"
    again = train(make_accelerator(args), _tiny_model(), tok, data, collate, args, final_tokens=10_000,
                  tokens_per_example=31)
    assert (again.global_step, again.epoch) == (6, 2.0) and len(again.losses) == 6
    assert 1000 <= again.train_seconds < 1060
    assert json.loads((tmp_path / "train_results.json").read_text())["train_seconds"] == round(again.train_seconds, 3)


def test_cpu_training_flushes_subnormals(tmp_path):
    """Subnormal floats made CPU steps 1.8x slower after a few epochs; the accelerator setup flushes them."""
    from chargpt.training import make_accelerator

    torch.set_flush_denormal(False)  # an earlier test in this process may have built an accelerator
    tiny = torch.tensor([1e-39])
    assert (tiny * 1.0).item() != 0.0
    try:
        make_accelerator(TrainingArguments(output_dir=str(tmp_path), report_to="none"))
        assert (tiny * 1.0).item() == 0.0
    finally:
        torch.set_flush_denormal(False)


def test_save_epochs_writes_loadable_snapshots_with_their_cost(tmp_path):
    import string

    from chargpt.training import make_accelerator, train
    from modeling_chargpt import CharTokenizer

    tok = CharTokenizer.from_corpus(string.ascii_letters[:38])
    args = TrainingArguments(output_dir=str(tmp_path), num_train_epochs=3, per_device_train_batch_size=4,
                             learning_rate=1e-3, report_to="none", disable_tqdm=True, checkpointing_steps=0,
                             save_epochs="1,2")
    data = [{"input_ids": torch.randint(2, 40, (32,)), "labels": torch.randint(2, 40, (32,))} for _ in range(10)]
    train(make_accelerator(args), _tiny_model(), tok, data, torch.utils.data.default_collate, args,
          final_tokens=10_000, tokens_per_example=31)
    states = {e: json.loads((tmp_path / f"epoch-{e}" / "train_results.json").read_text()) for e in (1, 2)}
    assert [states[e]["global_step"] for e in (1, 2)] == [3, 6]
    assert 0 < states[1]["train_seconds"] <= states[2]["train_seconds"]
    assert not (tmp_path / "epoch-3").exists()  # the last epoch is the final model itself
    snap = CharGPTForCausalLM.from_pretrained(tmp_path / "epoch-1")
    final = CharGPTForCausalLM.from_pretrained(tmp_path)
    diff = [(a - b).abs().max().item() for a, b in zip(snap.parameters(), final.parameters(), strict=True)]
    assert max(diff) > 0  # a snapshot, not the final weights


@pytest.mark.parametrize("signum", ["SIGINT", "SIGTERM"])
def test_the_first_ctrl_c_is_a_flag_the_second_raises_and_the_handler_is_restored(signum):
    """SIGTERM (what `timeout` and job schedulers send) is the same request as Ctrl-C: a training process saves a
    checkpoint on either (tests/test_training_scripts.py sends a real process SIGINT)."""
    import os
    import signal

    from accelerate import Accelerator

    from chargpt.training.stopping import StopRequest

    signum = getattr(signal, signum)
    before = signal.getsignal(signum)
    stop = StopRequest().install()
    try:
        assert not stop.anywhere(Accelerator(cpu=True))
        os.kill(os.getpid(), signum)  # delivered to this (main) thread before os.kill returns to Python code
        assert stop.requested and stop.anywhere(Accelerator(cpu=True))
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signum)
    finally:
        stop.restore()
    assert signal.getsignal(signum) is before
