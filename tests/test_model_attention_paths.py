"""The CPU training path for attention with dropout must be the same attention as SDPA."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from modeling_chargpt import CharGPTConfig, CharGPTForCausalLM, packed_causal_mask
from modeling_chargpt.modeling_chargpt import attention_with_dropout


@pytest.mark.parametrize("case", ["causal", "packed", "cached"])
def test_matches_sdpa_without_dropout(case):
    torch.manual_seed(0)
    q, k, v = (torch.randn(3, 4, 10, 8) for _ in range(3))
    if case == "causal":
        expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        got = attention_with_dropout(q, k, v, None, 0.0)
    elif case == "packed":
        mask = packed_causal_mask(torch.tensor([[0, 1, 2, 3, 0, 1, 2, 0, 1, 2]] * 3))
        expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        got = attention_with_dropout(q, k, v, mask, 0.0)
    else:  # the last 2 queries against 10 cached keys
        causal = torch.ones(2, 10, dtype=torch.bool).tril(8)
        expected = F.scaled_dot_product_attention(q[:, :, -2:], k, v, attn_mask=causal)
        got = attention_with_dropout(q[:, :, -2:], k, v, None, 0.0)
    assert (expected - got).abs().max() < 1e-5


def test_dropout_is_applied_to_the_probabilities_and_is_unbiased():
    torch.manual_seed(0)
    q, k = torch.randn(64, 8, 16, 4), torch.randn(64, 8, 16, 4)
    v = torch.ones(64, 8, 16, 4)
    out = attention_with_dropout(q, k, v, None, 0.5)
    # rows of probabilities sum to 1; with inverted dropout each output is sum(kept p) / 0.5: varies, mean 1
    assert out.std() > 0.1
    assert abs(out.mean().item() - 1.0) < 0.02


def test_model_uses_it_in_training_on_cpu_and_matches_sdpa_loss_without_dropout(monkeypatch):
    cfg = CharGPTConfig(vocab_size=20, block_size=16, n_layer=2, n_head=2, n_embd=16, embd_pdrop=0.0,
                        resid_pdrop=0.0, attn_pdrop=0.3)
    model = CharGPTForCausalLM(cfg).train()
    x = torch.randint(2, 20, (2, 16))
    calls = []
    import modeling_chargpt.modeling_chargpt as mod

    original = mod.attention_with_dropout
    monkeypatch.setattr(mod, "attention_with_dropout", lambda *a: calls.append(a[-1]) or original(*a))
    model(input_ids=x, labels=x).loss.backward()
    assert calls == [0.3, 0.3]
    model.eval()
    calls.clear()
    eval_loss = model(input_ids=x, labels=x).loss
    assert calls == []
    for block in model.transformer.blocks:  # zero-dropout path through the CPU kernel equals SDPA's eval loss
        block.attn.attn_pdrop = 1e-12
    model.train()
    assert torch.allclose(model(input_ids=x, labels=x).loss, eval_loss, atol=1e-5)


def test_packed_mask_gradients_match_sdpa():
    torch.manual_seed(0)
    mask = packed_causal_mask(torch.tensor([[0, 1, 2, 3, 0, 1, 2, 0, 1, 2]] * 3))
    grads = []
    for kernel in ("sdpa", "cpu"):
        q, k, v = (torch.randn(3, 4, 10, 8, generator=torch.Generator().manual_seed(i)).requires_grad_()
                   for i in range(3))
        if kernel == "sdpa":
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        else:  # a dropout rate that keeps everything still takes the dropout path
            out = attention_with_dropout(q, k, v, mask, 1e-12)
        (out * torch.arange(out.numel()).view_as(out).sin()).sum().backward()
        grads.append([q.grad, k.grad, v.grad])
    for a, b in zip(*grads, strict=True):
        assert (a - b).abs().max() < 1e-5


def test_bf16_training_on_cpu_takes_the_matmul_path_and_matches_fp32(monkeypatch):
    """Under CPU autocast bf16 (`--mixed_precision fast` on an AMX CPU) training avoids SDPA's slow bf16 backward."""
    torch.manual_seed(0)
    cfg = CharGPTConfig(vocab_size=20, block_size=16, n_layer=2, n_head=2, n_embd=32, embd_pdrop=0.0,
                        resid_pdrop=0.0, attn_pdrop=0.0)
    model = CharGPTForCausalLM(cfg).train()
    x = torch.randint(2, 20, (3, 16))
    mask = packed_causal_mask(torch.tensor([[0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 0, 1, 2]] * 3))
    fp32_loss = model(input_ids=x, labels=x, attention_mask=mask).loss
    calls = []
    import modeling_chargpt.modeling_chargpt as mod

    original = mod.attention_with_dropout
    monkeypatch.setattr(mod, "attention_with_dropout", lambda *a: calls.append(a[0].dtype) or original(*a))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        bf16_loss = model(input_ids=x, labels=x, attention_mask=mask).loss
    bf16_loss.backward()
    assert calls == [torch.bfloat16, torch.bfloat16]
    assert abs(bf16_loss.item() - fp32_loss.item()) < 0.02 * fp32_loss.item()
    assert all(p.grad is not None and p.grad.dtype == torch.float32 for p in model.parameters() if p.requires_grad)
    calls.clear()
    model.eval()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        model(input_ids=x, attention_mask=mask)
    assert calls == []  # inference keeps SDPA
