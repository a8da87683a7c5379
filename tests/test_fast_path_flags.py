"""The GPU fast path's opt-in flags, on CPU: `--tf32`. Each leaves the reference fp32 training alone by default."""

from __future__ import annotations

import logging
import string

import pytest
import torch

import training.loop
from modeling_chargpt import CharGPTConfig, CharGPTForCausalLM, CharTokenizer
from training import TrainingArguments, make_accelerator, train
from training.precision import allow_tf32

DATA = [{"input_ids": torch.randint(2, 40, (32,), generator=torch.Generator().manual_seed(i)),
         "labels": torch.randint(2, 40, (32,), generator=torch.Generator().manual_seed(100 + i))} for i in range(8)]


def _tf32_settings() -> tuple[str, bool, bool]:
    return (torch.get_float32_matmul_precision(), torch.backends.cuda.matmul.allow_tf32,
            torch.backends.cudnn.allow_tf32)


@pytest.fixture
def fp32_settings():
    """The process's fp32 settings before the test; they are put back whatever the test does, so nothing leaks."""
    before = (torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32)
    yield _tf32_settings()
    torch.set_float32_matmul_precision(before[0])
    torch.backends.cudnn.allow_tf32 = before[1]


def _run(tmp_path, on_forward=None, **kw) -> tuple:
    """A tiny run (2 epochs of 4 steps, dropout on) and its model; `on_forward()` is called before each forward."""
    torch.manual_seed(0)
    model = CharGPTForCausalLM(CharGPTConfig(vocab_size=40, block_size=32, n_layer=2, n_head=4, n_embd=32))
    if on_forward is not None:
        model.register_forward_pre_hook(lambda *_: on_forward())
    args = TrainingArguments(output_dir=str(tmp_path), num_train_epochs=2, per_device_train_batch_size=2,
                             learning_rate=3e-3, disable_tqdm=True, report_to="none", **kw)
    tok = CharTokenizer.from_corpus(string.ascii_letters[:38])
    result = train(make_accelerator(args), model, tok, DATA, torch.utils.data.default_collate, args,
                   final_tokens=10_000, tokens_per_example=31)
    return result, model


def test_tf32_is_set_on_cuda_and_restored(fp32_settings):
    """On a CUDA device `--tf32 True` turns TF32 on for matmuls and cuDNN (read back through the getters inductor
    uses, which raise if the settings are inconsistent) until the restore; the default changes nothing."""
    assert fp32_settings[:2] == ("highest", False)  # the reference's fp32
    cuda = torch.device("cuda")
    allow_tf32(False, cuda)()
    assert _tf32_settings() == fp32_settings
    restore = allow_tf32(True, cuda)
    assert _tf32_settings() == ("high", True, True)
    restore()
    assert _tf32_settings() == fp32_settings


def test_tf32_is_a_logged_no_op_on_cpu(tmp_path, fp32_settings, caplog):
    """A CPU run with `--tf32 True` trains as without it (the same weights) and says why nothing changed."""
    with caplog.at_level(logging.INFO, logger="training.precision"):
        _, with_flag = _run(tmp_path / "tf32", tf32=True, max_steps=2)
    assert "--tf32 True has no effect on cpu" in caplog.text
    assert _tf32_settings() == fp32_settings
    _, without = _run(tmp_path / "fp32", max_steps=2)
    assert all(torch.equal(a, b) for a, b in zip(with_flag.state_dict().values(), without.state_dict().values(),
                                                 strict=True))


def test_the_loop_applies_tf32_for_the_run_only(tmp_path, fp32_settings, monkeypatch):
    """The loop turns TF32 on for its steps and restores fp32 after them (the device is taken for CUDA here)."""
    monkeypatch.setattr(training.loop, "allow_tf32", lambda enabled, device: allow_tf32(enabled, torch.device("cuda")))
    seen = []
    _run(tmp_path, on_forward=lambda: seen.append(_tf32_settings()), tf32=True, max_steps=2)
    assert seen == [("high", True, True)] * 2
    assert _tf32_settings() == fp32_settings
