"""The attention kernels chosen by `attn_implementation` compute the same attention; the choice is by name only."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
import torch
import torch.nn.functional as F
from transformers import AutoModelForCausalLM
from variants import VARIANT_IDS, VARIANTS

import modeling_chargpt.attention as attention
from modeling_chargpt import (
    ATTN_IMPLEMENTATIONS,
    DEFAULT_ATTN_IMPLEMENTATION,
    CharGPTConfig,
    CharGPTForCausalLM,
    packed_causal_mask,
)
from modeling_chargpt.attention import attention_with_dropout


def tiny_config(position_embedding_type="learned", attention_type="causal", attn_pdrop=0.0, **kwargs):
    return CharGPTConfig(vocab_size=20, block_size=16, n_layer=2, n_head=2, n_embd=16, embd_pdrop=0.0,
                         resid_pdrop=0.0, attn_pdrop=attn_pdrop, position_embedding_type=position_embedding_type,
                         attention_type=attention_type, initializer_range=0.3, **kwargs)


def tiny_model(*args, **kwargs) -> CharGPTForCausalLM:
    torch.manual_seed(0)
    model = CharGPTForCausalLM(tiny_config(*args, **kwargs))
    with torch.no_grad():  # minGPT starts these at zero / near zero: randomise them so they matter
        for module in model.modules():
            if hasattr(module, "b2"):
                module.w2.normal_(0.0, 0.3)
                module.b2.normal_(0.0, 0.3)
        if model.transformer.pos_emb is not None:
            model.transformer.pos_emb.normal_(0.0, 0.3)
    return model.eval()


@pytest.fixture(scope="module")
def saved_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("chargpt-attention")
    tiny_model().save_pretrained(folder)
    return folder


def sdpa_spy(monkeypatch) -> list[dict]:
    calls = []
    real = F.scaled_dot_product_attention

    def spy(*args, **kwargs):
        calls.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(F, "scaled_dot_product_attention", spy)
    return calls


# --- the batched-matmul kernel against SDPA -------------------------------------------------------------------------

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


# --- the kernels inside the model -----------------------------------------------------------------------------------

@pytest.mark.parametrize(("position_embedding_type", "attention_type"), VARIANTS, ids=VARIANT_IDS)
def test_every_kernel_gives_eagers_logits_and_gradients(position_embedding_type, attention_type):
    """Plain, left-padded and packed inputs; gradients too (dropout 0, so every kernel is deterministic)."""
    model = tiny_model(position_embedding_type, attention_type)
    ids = torch.randint(2, 20, (2, 12))
    padding = torch.ones_like(ids)
    padding[0, :3] = 0
    position_ids = torch.tensor([[0, 1, 2, 3, 4, 0, 1, 2, 0, 1, 2, 3]] * 2)
    inputs = {"plain": {}, "padded": {"attention_mask": padding},
              "packed": {"attention_mask": packed_causal_mask(position_ids), "position_ids": position_ids}}
    results = {}
    for name in ATTN_IMPLEMENTATIONS:
        model.set_attn_implementation(name)
        assert model.config._attn_implementation == name
        logits = {case: model(ids, **kw).logits for case, kw in inputs.items()}
        model.train()
        model(ids, labels=ids, **inputs["packed"]).loss.backward()
        model.eval()
        results[name] = (logits, [p.grad.clone() for p in model.parameters()])
        model.zero_grad(set_to_none=True)
    eager_logits, eager_grads = results["eager"]
    assert eager_logits["plain"].std() > 0.1  # a meaningful comparison
    for name, (logits, grads) in results.items():
        for case in inputs:
            torch.testing.assert_close(logits[case], eager_logits[case], rtol=0, atol=1e-5, msg=f"{name} {case}")
        for got, expected in zip(grads, eager_grads, strict=True):
            torch.testing.assert_close(got, expected, rtol=0, atol=1e-5, msg=name)


@pytest.mark.parametrize("attention_type", ["causal", "synthesizer"])
def test_eager_and_chargpt_draw_the_same_attention_dropout(attention_type):
    """Both use chargpt's CPU dropout on the probabilities: the same seed gives the same training loss."""
    model = tiny_model(attention_type=attention_type, attn_pdrop=0.3).train()
    ids = torch.randint(2, 20, (2, 16))
    losses = {}
    for name in ("eager", "chargpt", "sdpa"):
        model.set_attn_implementation(name)
        torch.manual_seed(1)
        losses[name] = model(ids, labels=ids).loss
    model.eval()
    deterministic = model(ids, labels=ids).loss
    torch.testing.assert_close(losses["chargpt"], losses["eager"], rtol=0, atol=1e-6)
    assert abs(losses["eager"].item() - deterministic.item()) > 1e-3  # dropout really was applied
    assert abs(losses["sdpa"].item() - deterministic.item()) > 1e-3  # SDPA drops too (with its own draws)


def test_the_default_is_sdpa_in_inference_and_batched_matmuls_in_cpu_training_with_dropout(monkeypatch):
    assert DEFAULT_ATTN_IMPLEMENTATION == "chargpt" and ATTN_IMPLEMENTATIONS[0] == DEFAULT_ATTN_IMPLEMENTATION
    model = tiny_model(attn_pdrop=0.3)
    assert model.config._attn_implementation == "chargpt"
    ids = torch.randint(2, 20, (2, 16))
    sdpa_calls = sdpa_spy(monkeypatch)
    matmul_calls = []
    original = attention.attention_with_dropout
    monkeypatch.setattr(attention, "attention_with_dropout", lambda *a: matmul_calls.append(a[4]) or original(*a))
    model(ids)
    assert len(sdpa_calls) == 2 and sdpa_calls[0]["is_causal"] is True and sdpa_calls[0]["attn_mask"] is None
    assert matmul_calls == []
    sdpa_calls.clear()
    model.train()
    model(ids, labels=ids).loss.backward()
    assert sdpa_calls == [] and matmul_calls == [0.3, 0.3]
    matmul_calls.clear()
    model.set_attn_implementation("sdpa")  # the same training step, all in SDPA (its own dropout)
    model(ids, labels=ids).loss.backward()
    assert [c["dropout_p"] for c in sdpa_calls] == [0.3, 0.3] and matmul_calls == []
    sdpa_calls.clear()
    model.set_attn_implementation("eager")
    model(ids, labels=ids).loss.backward()
    model.eval()
    model(ids)
    assert sdpa_calls == [] and matmul_calls == []


def test_the_default_trains_with_sdpa_off_the_cpu(monkeypatch):
    """The batched-matmul path is for CPUs only; elsewhere (the meta device stands in for a GPU) "chargpt" is SDPA."""
    model = tiny_model("rope", attn_pdrop=0.3).to("meta").train()  # rope: no position bound to check on meta
    sdpa_calls = sdpa_spy(monkeypatch)
    ids = torch.randint(2, 20, (2, 16), device="meta")
    assert model(ids, labels=ids).loss.device.type == "meta"
    assert [c["dropout_p"] for c in sdpa_calls] == [0.3, 0.3]


def test_bf16_training_takes_the_matmul_path_and_matches_fp32(monkeypatch):
    """Under CPU autocast bf16 (`--mixed_precision fast` on an AMX CPU) training avoids SDPA's slow bf16 backward."""
    torch.manual_seed(0)
    cfg = CharGPTConfig(vocab_size=20, block_size=16, n_layer=2, n_head=2, n_embd=32, embd_pdrop=0.0,
                        resid_pdrop=0.0, attn_pdrop=0.0)
    model = CharGPTForCausalLM(cfg).train()
    x = torch.randint(2, 20, (3, 16))
    mask = packed_causal_mask(torch.tensor([[0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 0, 1, 2]] * 3))
    fp32_loss = model(input_ids=x, labels=x, attention_mask=mask).loss
    calls = []
    original = attention.attention_with_dropout
    monkeypatch.setattr(attention, "attention_with_dropout", lambda *a: calls.append(a[0].dtype) or original(*a))
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


# --- selecting a kernel ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ATTN_IMPLEMENTATIONS)
def test_from_pretrained_and_the_config_select_the_kernel(name, saved_folder, monkeypatch):
    ids = torch.randint(2, 20, (2, 10))
    default = CharGPTForCausalLM.from_pretrained(saved_folder)
    assert default.config._attn_implementation == DEFAULT_ATTN_IMPLEMENTATION
    expected = default(ids).logits
    loaded = {
        "from_pretrained": CharGPTForCausalLM.from_pretrained(saved_folder, attn_implementation=name),
        "auto": AutoModelForCausalLM.from_pretrained(saved_folder, attn_implementation=name),
        "config": CharGPTForCausalLM(tiny_config(attn_implementation=name)),
    }
    sdpa_calls = sdpa_spy(monkeypatch)
    for how, model in loaded.items():
        assert model.config._attn_implementation == name, how
        sdpa_calls.clear()
        logits = model.eval()(ids).logits
        assert len(sdpa_calls) == (0 if name == "eager" else 2), how
        if how != "config":
            torch.testing.assert_close(logits, expected, rtol=0, atol=1e-5)


@pytest.mark.parametrize("name", ["flash_attention_2", "flex_attention", "paged|eager", "chargpt_cpu"])
def test_an_unknown_or_unsupported_kernel_fails_with_the_names_that_work(name, saved_folder):
    message = r"attn_implementation='.*' is not one of chargpt's attention kernels \['chargpt', 'sdpa', 'eager'\]"
    with pytest.raises(ValueError, match=message):
        CharGPTForCausalLM.from_pretrained(saved_folder, attn_implementation=name)
    with pytest.raises(ValueError, match=message):
        CharGPTForCausalLM(tiny_config(attn_implementation=name))
    model = tiny_model()
    with pytest.raises(ValueError, match=message):
        model.set_attn_implementation(name)
    assert model.config._attn_implementation == DEFAULT_ATTN_IMPLEMENTATION


def test_the_kernel_is_not_saved_with_the_model(tmp_path):
    tiny_model(attn_implementation="eager").save_pretrained(tmp_path)
    assert "attn_implementation" not in (tmp_path / "config.json").read_text()
    assert CharGPTForCausalLM.from_pretrained(tmp_path).config._attn_implementation == DEFAULT_ATTN_IMPLEMENTATION


@pytest.mark.parametrize("attention_type", ["causal", "synthesizer"])
@pytest.mark.parametrize("name", ATTN_IMPLEMENTATIONS)
def test_generation_with_kv_cache_works_with_each_kernel(name, attention_type):
    """A left-padded batch, dynamic and static cache: greedy decoding equals argmax steps of full forwards."""
    model = tiny_model("rope" if attention_type == "causal" else "learned", attention_type, attn_implementation=name)
    input_ids = torch.randint(2, 20, (2, 6))
    attention_mask = torch.ones_like(input_ids)
    input_ids[1, :3], attention_mask[1, :3] = 0, 0  # a 3-token prompt, left-padded (PAD = 0)
    expected, mask = input_ids, attention_mask
    for _ in range(6):  # no cache; MASK (id 1, EOS) excluded as min_new_tokens does
        logits = model(expected, attention_mask=mask, use_cache=False).logits[:, -1]
        logits[:, 1] = float("-inf")
        expected = torch.cat([expected, logits.argmax(-1, keepdim=True)], 1)
        mask = torch.cat([mask, torch.ones_like(mask[:, :1])], 1)
    assert len(set(expected[0, 6:].tolist())) > 1  # not a degenerate constant continuation
    for cache in ("dynamic", "static"):
        out = model.generate(input_ids, attention_mask=attention_mask, max_new_tokens=6, min_new_tokens=6,
                             do_sample=False, cache_implementation=cache)
        assert torch.equal(out, expected), cache
