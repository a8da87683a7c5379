"""`--sync_steps`: losses read back from the device every N steps change no loss, log, weight or resume (the
NaN stop between sync points is in test_training_loop.py)."""

from __future__ import annotations

import json
import string

import pytest
import torch
from accelerate import Accelerator

from chargpt.training import TrainingArguments, make_accelerator, train
from modeling_chargpt import CharGPTConfig, CharGPTForCausalLM, CharTokenizer

DATA = [{"input_ids": torch.randint(2, 40, (32,), generator=torch.Generator().manual_seed(i)),
         "labels": torch.randint(2, 40, (32,), generator=torch.Generator().manual_seed(100 + i))} for i in range(8)]


def _run(tmp_path, name: str, **kw) -> tuple:
    """A tiny run (dropout on: 2 epochs of 4 steps) and what it logged to the trackers."""
    torch.manual_seed(0)
    model = CharGPTForCausalLM(CharGPTConfig(vocab_size=40, block_size=32, n_layer=2, n_head=4, n_embd=32))
    args = TrainingArguments(output_dir=str(tmp_path / name), num_train_epochs=2, per_device_train_batch_size=2,
                             learning_rate=3e-3, disable_tqdm=True, checkpointing_steps=5, logging_steps=2, **kw)
    tok = CharTokenizer.from_corpus(string.ascii_letters[:38])
    result = train(make_accelerator(args), model, tok, DATA, torch.utils.data.default_collate, args,
                   final_tokens=10_000, tokens_per_example=31)
    return result, {k: v.detach().clone() for k, v in model.state_dict().items()}


@pytest.fixture
def tracker_log(monkeypatch) -> list:
    """What the loop sends to TensorBoard, recorded instead of written."""
    logged: list = []
    monkeypatch.setattr(Accelerator, "init_trackers", lambda self, *a, **kw: None)
    monkeypatch.setattr(Accelerator, "end_training", lambda self: None)
    monkeypatch.setattr(Accelerator, "log", lambda self, values, step=None: logged.append((step, values)))
    return logged


def test_sync_steps_change_no_loss_log_weight_or_resume(tmp_path, tracker_log):
    every_step, every_step_log = _run(tmp_path, "n1", sync_steps=1), list(tracker_log)
    tracker_log.clear()
    every_third, every_third_log = _run(tmp_path, "n3", sync_steps=3), list(tracker_log)
    (r1, w1), (r3, w3) = every_step, every_third
    assert [s for s, _ in r1.losses] == list(range(1, 9)) and r1.losses == r3.losses
    assert r1.final_loss == r3.final_loss and r1.global_step == r3.global_step == 8
    assert [step for step, _ in every_step_log] == [2, 4, 6, 8] and every_step_log == every_third_log
    assert all(torch.equal(w1[k], w3[k]) for k in w1)
    # Stopped after step 5 (a checkpoint, between the sync points 3 and 6), then resumed to the end.
    _run(tmp_path, "resumed", sync_steps=3, max_steps=5)
    saved = json.loads((tmp_path / "resumed/checkpoints/step-00000005/trainer_state.json").read_text())
    assert [s for s, _ in saved["losses"]] == [1, 2, 3, 4, 5]
    resumed, w_resumed = _run(tmp_path, "resumed", sync_steps=3, resume_from_checkpoint="latest")
    assert resumed.losses == r3.losses
    assert all(torch.equal(w3[k], w_resumed[k]) for k in w3)
