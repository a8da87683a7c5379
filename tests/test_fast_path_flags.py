"""The GPU fast path's opt-in flags, on CPU: `--tf32`, `--torch_compile`, `--optim`. Each leaves the reference
fp32 training alone by default."""

from __future__ import annotations

import logging
import string

import pytest
import torch
from safetensors.torch import load_file

import chargpt.training.loop
from chargpt.training import TrainingArguments, UsageError, build_optimizer, load_chargpt, make_accelerator, train
from chargpt.training.arguments import check_training
from chargpt.training.precision import allow_tf32
from chargpt.training.syncing import LossWindow
from modeling_chargpt import CharGPTConfig, CharGPTForCausalLM, CharTokenizer

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
    with caplog.at_level(logging.INFO, logger="chargpt.training.precision"):
        _, with_flag = _run(tmp_path / "tf32", tf32=True, max_steps=2)
    assert "--tf32 True has no effect on cpu" in caplog.text
    assert _tf32_settings() == fp32_settings
    _, without = _run(tmp_path / "fp32", max_steps=2)
    assert all(torch.equal(a, b) for a, b in zip(with_flag.state_dict().values(), without.state_dict().values(),
                                                 strict=True))


def test_the_loop_applies_tf32_for_the_run_only(tmp_path, fp32_settings, monkeypatch):
    """The loop turns TF32 on for its steps and restores fp32 after them (the device is taken for CUDA here)."""
    monkeypatch.setattr(chargpt.training.loop, "allow_tf32",
                        lambda enabled, device: allow_tf32(enabled, torch.device("cuda")))
    seen = []
    _run(tmp_path, on_forward=lambda: seen.append(_tf32_settings()), tf32=True, max_steps=2)
    assert seen == [("high", True, True)] * 2
    assert _tf32_settings() == fp32_settings


def test_a_compiled_run_trains_like_eager_and_saves_the_plain_model(tmp_path):
    """`--torch_compile` runs the steps through torch.compile and saves the plain model: no `_orig_mod.` prefix in the
    safetensors of the model or of a checkpoint, and the saved weights load as the ones trained in memory.

    The test compiles with the 'aot_eager' backend (dynamo's graph capture and AOTAutograd's joint graph, run by
    eager kernels): inductor's C++ code generation takes 50-70 s on 2 busy cores, and its kernels round
    differently, so they could only be compared within a tolerance. aot_eager is exact: the same weights as eager.
    """
    torch._dynamo.reset()
    compiled, model = _run(tmp_path / "compiled", torch_compile_backend="aot_eager", checkpointing_steps=3)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] >= 1  # the steps did go through dynamo
    eager, eager_model = _run(tmp_path / "eager", checkpointing_steps=3)
    assert compiled.losses == eager.losses and compiled.global_step == 8
    trained = model.state_dict()
    assert all(torch.equal(trained[k], v) for k, v in eager_model.state_dict().items())
    for weights in (tmp_path / "compiled/model.safetensors", tmp_path / "compiled/checkpoints/step-00000006"
                    "/model.safetensors"):
        assert not any(key.startswith("_orig_mod") for key in load_file(weights)), weights
    loaded, _ = load_chargpt(str(tmp_path / "compiled"))
    assert all(torch.equal(trained[k], v) for k, v in loaded.state_dict().items())


def test_the_loss_window_keeps_a_copy_of_each_loss(tmp_path):
    """Under CUDA graphs (`--torch_compile_mode reduce-overhead`) a step's loss is an output buffer that the next
    replay overwrites in place, before the window reads it back: the window must hold its own copy."""
    window, loss = LossWindow(tmp_path, sync_steps=2), torch.tensor(2.5)
    window.add(1, 0, loss)
    loss.fill_(float("nan"))  # what the next replay does to the buffer
    window.read_back(next_update=2)
    assert window.take() == [(1, 0, 2.5)]


def test_compiled_batches_need_the_device_data_path(tmp_path):
    """`--torch_compile_batches` compiles the fast path's packer; on the datasets path there is none to compile."""
    args = TrainingArguments(output_dir=str(tmp_path), torch_compile_batches=True)
    with pytest.raises(UsageError, match="--torch_compile_batches .* needs --device_data True"):
        check_training(args, device_data=False)
    check_training(args, device_data=True)


def test_packed_rows_need_the_device_data_path(tmp_path):
    """`--packed_rows` fixes the fast path's rows per step; the datasets path packs as many as each batch needs."""
    args = TrainingArguments(output_dir=str(tmp_path), packed_rows=4, per_device_train_batch_size=8)
    with pytest.raises(UsageError, match="--packed_rows sets the fast path's fixed rows: it needs --device_data True"):
        check_training(args, device_data=False)
    check_training(args, device_data=True)


def test_an_unknown_compile_mode_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="--torch_compile_mode bogus .*Unrecognized mode=bogus"):
        _run(tmp_path, torch_compile_mode="bogus")


def test_fused_adamw_matches_the_default_within_fp32_rounding(tmp_path, caplog):
    """`--optim adamw_torch_fused` (one fused kernel, also on CPU) takes the default AdamW's steps: after 4 steps the
    weights agree to fp32 rounding, and the runs did move them. A capturable AdamW needs a CUDA device; on a CPU it
    is the default one, said in the log."""
    model = CharGPTForCausalLM(CharGPTConfig(vocab_size=40, block_size=32, n_layer=1, n_head=2, n_embd=16))
    fused = build_optimizer(model, TrainingArguments(output_dir=str(tmp_path), optim="adamw_torch_fused"), 1e-3)
    assert fused.defaults["fused"] and not build_optimizer(model, TrainingArguments(output_dir=str(tmp_path)),
                                                           1e-3).defaults["fused"]
    _, default = _run(tmp_path / "default", max_steps=4)
    _, with_fused = _run(tmp_path / "fused", optim="adamw_torch_fused", max_steps=4)
    torch.manual_seed(0)
    initial = CharGPTForCausalLM(CharGPTConfig(vocab_size=40, block_size=32, n_layer=2, n_head=4, n_embd=32))
    trained = default.state_dict()
    for name, value in with_fused.state_dict().items():
        torch.testing.assert_close(value, trained[name], rtol=1e-5, atol=1e-6, msg=name)
    assert not torch.equal(trained["lm_head.weight"], initial.state_dict()["lm_head.weight"])
    with caplog.at_level(logging.INFO, logger="chargpt.training.loop"):
        _, capturable = _run(tmp_path / "capturable", optim="adamw_torch_capturable", max_steps=4)
    assert "--optim adamw_torch_capturable has no effect on cpu" in caplog.text
    assert all(torch.equal(value, trained[name]) for name, value in capturable.state_dict().items())
