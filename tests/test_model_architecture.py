"""CharGPTForCausalLM: the reference minGPT's structure, size and init, and the transformers forward contract."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from transformers import GenerationMixin, PreTrainedModel
from transformers.cache_utils import DynamicCache
from transformers.modeling_outputs import CausalLMOutputWithPast
from variants import VARIANT_IDS, VARIANTS

from modeling_chargpt import CharGPTConfig, CharGPTForCausalLM, CharGPTModel, packed_causal_mask
from modeling_chargpt.dropout import CharGPTDropout


def tiny_config(position_embedding_type="learned", attention_type="causal", dropout=0.0, **kwargs) -> CharGPTConfig:
    kwargs = {"vocab_size": 40, "block_size": 32, "n_layer": 2, "n_head": 4, "n_embd": 64, **kwargs}
    return CharGPTConfig(
        position_embedding_type=position_embedding_type, attention_type=attention_type,
        embd_pdrop=dropout, resid_pdrop=dropout, attn_pdrop=dropout, **kwargs,
    )


def tiny_model(*args, seed=0, **kwargs) -> CharGPTForCausalLM:
    torch.manual_seed(seed)
    return CharGPTForCausalLM(tiny_config(*args, **kwargs)).eval()


def n_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize(
    ("position_embedding_type", "attention_type", "expected"),
    [
        ("learned", "causal", 3_323_392),
        ("rope", "causal", 3_290_624),
        ("sinusoidal", "causal", 3_290_624),
        ("none", "causal", 3_290_624),
        # per layer: w1 (256*256+256) + w2 (32*128) + b2 (128) + value and proj, instead of q, k, v and proj
        ("learned", "synthesizer", 3_077_120),
    ],
)
def test_parameter_count_at_full_size(position_embedding_type, attention_type, expected):
    cfg = CharGPTConfig(vocab_size=256, position_embedding_type=position_embedding_type, attention_type=attention_type)
    model = CharGPTForCausalLM(cfg)
    assert n_params(model) == expected
    # learned positions are exactly the only difference between learned and the table-free variants
    if position_embedding_type == "learned" and attention_type == "causal":
        assert model.transformer.pos_emb.numel() == 128 * 256 == 3_323_392 - 3_290_624


def test_is_a_transformers_causal_lm():
    model = tiny_model()
    assert isinstance(model, PreTrainedModel)
    assert isinstance(model, GenerationMixin)
    assert isinstance(model.transformer, CharGPTModel)
    assert model.config_class is CharGPTConfig
    assert model.can_generate()


def test_structure_is_the_reference_mingpt():
    cfg = tiny_config(dropout=0.1)
    model = CharGPTForCausalLM(cfg)
    t = model.transformer
    assert isinstance(t.tok_emb, nn.Embedding) and tuple(t.tok_emb.weight.shape) == (40, 64)
    assert tuple(t.pos_emb.shape) == (1, 32, 64)
    assert isinstance(t.drop, nn.Dropout) and t.drop.p == 0.1
    assert len(t.blocks) == 2
    for block in t.blocks:
        assert isinstance(block.ln1, nn.LayerNorm) and isinstance(block.ln2, nn.LayerNorm)
        assert tuple(block.attn.qkv.weight.shape) == (3 * 64, 64)
        assert tuple(block.attn.proj.weight.shape) == (64, 64)
        assert block.attn.resid_drop.p == 0.1 and block.attn.attn_pdrop == 0.1
        mlp = list(block.mlp)
        assert [type(m) for m in mlp] == [nn.Linear, nn.GELU, nn.Linear, CharGPTDropout]
        assert isinstance(mlp[3], nn.Dropout)
        assert (mlp[0].in_features, mlp[0].out_features, mlp[2].in_features, mlp[2].out_features) == (64, 256, 256, 64)
        assert mlp[1].approximate == "none" and mlp[3].p == 0.1
    assert isinstance(t.ln_f, nn.LayerNorm)
    assert model.lm_head.bias is None and tuple(model.lm_head.weight.shape) == (40, 64)
    # untied
    assert model.lm_head.weight.data_ptr() != t.tok_emb.weight.data_ptr()
    assert not torch.equal(model.lm_head.weight, t.tok_emb.weight)
    for kind in ("rope", "sinusoidal", "none"):
        other = CharGPTForCausalLM(tiny_config(kind))
        assert other.transformer.pos_emb is None
        assert not any("pos" in name for name, _ in other.named_parameters())


def test_a_new_model_trains_and_ties_only_on_request(tmp_path):
    model = CharGPTForCausalLM(tiny_config())
    assert model.training  # a new model is in train mode, like nn.Module
    assert model.config.tie_word_embeddings is False
    tied = CharGPTForCausalLM(tiny_config(tie_word_embeddings=True))
    assert tied.lm_head.weight is tied.transformer.tok_emb.weight
    assert n_params(tied) == n_params(model) - 40 * 64
    tied.save_pretrained(tmp_path)
    reloaded = CharGPTForCausalLM.from_pretrained(tmp_path)
    assert reloaded.lm_head.weight is reloaded.transformer.tok_emb.weight
    assert torch.equal(reloaded.lm_head.weight, tied.lm_head.weight)


def test_init_statistics():
    torch.manual_seed(0)
    model = CharGPTForCausalLM(CharGPTConfig(vocab_size=256))
    for name, p in model.named_parameters():
        if name.endswith("pos_emb"):
            assert torch.count_nonzero(p) == 0, name
        elif ".ln" in name or name.startswith("transformer.ln_f"):
            expected = torch.ones_like(p) if name.endswith("weight") else torch.zeros_like(p)
            assert torch.equal(p, expected), name
        elif name.endswith("bias"):
            assert torch.count_nonzero(p) == 0, name
        else:
            assert p.dim() == 2, name
            assert abs(p.mean().item()) < 0.002, name
            assert abs(p.std().item() - 0.02) < 0.001, (name, p.std().item())


def test_synthesizer_init():
    torch.manual_seed(0)
    model = CharGPTForCausalLM(tiny_config(attention_type="synthesizer"))
    attn = model.transformer.blocks[0].attn
    assert tuple(attn.w2.shape) == (16, 32) and tuple(attn.b2.shape) == (32,)
    assert attn.w2.abs().max() <= 0.001 and attn.w2.abs().max() > 0
    assert torch.count_nonzero(attn.b2) == 0


@pytest.mark.parametrize(("position_embedding_type", "attention_type"), VARIANTS, ids=VARIANT_IDS)
def test_forward_returns_causal_lm_output_with_dynamic_cache(position_embedding_type, attention_type):
    model = tiny_model(position_embedding_type, attention_type)
    ids = torch.randint(2, 40, (3, 11))
    out = model(ids, use_cache=True)
    assert isinstance(out, CausalLMOutputWithPast)
    assert out.logits.shape == (3, 11, 40)
    assert isinstance(out.past_key_values, DynamicCache)
    assert out.past_key_values.get_seq_length() == 11
    assert out.loss is None
    assert model(ids, use_cache=False).past_key_values is None
    # extra keyword arguments (generate passes return_dict=True) are accepted
    extra = model(ids, return_dict=True, output_attentions=False, output_hidden_states=False, use_cache=False)
    torch.testing.assert_close(extra.logits, out.logits, rtol=0, atol=0)
    # the model is causal: a change at position 7 leaves the logits before it untouched
    changed = ids.clone()
    changed[:, 7] = (changed[:, 7] - 2 + 1) % 38 + 2
    logits2 = model(changed, use_cache=False).logits
    torch.testing.assert_close(logits2[:, :7], out.logits[:, :7], rtol=0, atol=1e-6)
    assert not torch.allclose(logits2[:, 7:], out.logits[:, 7:])


def test_loss_is_mean_cross_entropy_over_shifted_non_ignored_targets():
    model = tiny_model(initializer_range=0.2)
    ids = torch.randint(2, 40, (2, 9))
    labels = ids.clone()
    labels[0, :4] = -100
    labels[1, 6] = -100
    out = model(ids, labels=labels)
    log_probs = out.logits.double().log_softmax(-1)
    terms = []
    for b in range(2):
        for t in range(8):  # the logits at t predict the label at t + 1
            target = labels[b, t + 1].item()
            if target != -100:
                terms.append(-log_probs[b, t, target])
    expected = torch.stack(terms).mean()
    assert len(terms) == 2 * 8 - 3 - 1
    assert abs(out.loss.item() - expected.item()) < 1e-5
    # the first label is never used (nothing predicts it)
    labels2 = labels.clone()
    labels2[:, 0] = 5
    assert abs(model(ids, labels=labels2).loss.item() - out.loss.item()) < 1e-7


def test_logits_to_keep():
    model = tiny_model()
    ids = torch.randint(2, 40, (2, 10))
    full = model(ids).logits
    last = model(ids, logits_to_keep=1).logits
    assert last.shape == (2, 1, 40)
    torch.testing.assert_close(last, full[:, -1:], rtol=0, atol=1e-6)
    assert model(ids, logits_to_keep=3).logits.shape == (2, 3, 40)
    # with labels, the loss is still over every position, and the logits are still only the kept ones
    out = model(ids, labels=ids, logits_to_keep=1)
    assert out.logits.shape == (2, 1, 40)
    assert abs(out.loss.item() - model(ids, labels=ids).loss.item()) < 1e-6


@pytest.mark.parametrize(("position_embedding_type", "attention_type"), VARIANTS, ids=VARIANT_IDS)
def test_left_padded_forward_matches_unpadded_and_has_no_nan(position_embedding_type, attention_type):
    model = tiny_model(position_embedding_type, attention_type, initializer_range=0.2)
    short = torch.randint(2, 40, (1, 6))
    long = torch.randint(2, 40, (1, 10))
    batch = torch.cat([torch.cat([torch.zeros(1, 4, dtype=torch.long), short], 1), long])
    mask = torch.tensor([[0] * 4 + [1] * 6, [1] * 10])
    logits = model(batch, attention_mask=mask).logits
    assert not torch.isnan(logits).any()
    torch.testing.assert_close(logits[0, 4:], model(short).logits[0], rtol=0, atol=1e-5)
    torch.testing.assert_close(logits[1], model(long).logits[0], rtol=0, atol=1e-5)


def test_dropout_only_in_training_mode():
    model = tiny_model(dropout=0.3)
    ids = torch.randint(2, 40, (2, 8))
    torch.testing.assert_close(model(ids).logits, model(ids).logits, rtol=0, atol=0)
    model.train()
    assert not torch.allclose(model(ids).logits, model(ids).logits)


def test_inference_uses_sdpa_for_both_attention_types(monkeypatch):
    calls = []
    real = F.scaled_dot_product_attention

    def spy(*args, **kwargs):
        calls.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", spy)
    model = tiny_model()
    model(torch.randint(2, 40, (2, 8)))
    assert len(calls) == 2  # one per layer
    assert calls[0]["is_causal"] is True and calls[0]["attn_mask"] is None
    calls.clear()
    tiny_model(attention_type="synthesizer")(torch.randint(2, 40, (2, 8)))
    # the synthesizer's score is the unscaled dot product [a_t, 1] . [B[:, j], b2[j]], so it takes the same kernels
    assert len(calls) == 2 and calls[0]["scale"] == 1.0 and calls[0]["is_causal"] is True


@pytest.mark.parametrize("position_embedding_type", ["learned", "rope", "sinusoidal", "none"])
def test_packed_block_diagonal_mask(position_embedding_type):
    """Three examples packed in one row with a block-diagonal mask give each example's own logits."""
    model = tiny_model(position_embedding_type, initializer_range=0.2)
    parts = [torch.randint(2, 40, (1, n)) for n in (5, 8, 3)]
    packed = torch.cat(parts, 1)
    position_ids = torch.cat([torch.arange(p.shape[1]) for p in parts])[None]
    mask = packed_causal_mask(position_ids)
    assert mask.shape == (1, 1, 16, 16) and mask.dtype == torch.bool
    expected_mask = torch.block_diag(*[torch.ones(p.shape[1], p.shape[1]) for p in parts]).bool().tril()
    assert torch.equal(mask[0, 0], expected_mask)
    logits = model(packed, attention_mask=mask, position_ids=position_ids).logits
    start = 0
    for part in parts:
        n = part.shape[1]
        torch.testing.assert_close(logits[0, start : start + n], model(part).logits[0], rtol=0, atol=1e-5)
        start += n
    # without the mask the later examples see the earlier ones
    unmasked = model(packed, position_ids=position_ids).logits
    assert not torch.allclose(unmasked[0, 5:13], logits[0, 5:13], atol=1e-4)


def test_forward_refuses_positions_past_block_size_for_learned_and_synthesizer():
    for kind, attention in (("learned", "causal"), ("learned", "synthesizer")):
        model = tiny_model(kind, attention)
        with pytest.raises(ValueError, match="block_size=32"):
            model(torch.randint(2, 40, (1, 33)))
        assert model(torch.randint(2, 40, (1, 32))).logits.shape == (1, 32, 40)
    for kind in ("rope", "sinusoidal", "none"):
        assert tiny_model(kind)(torch.randint(2, 40, (1, 50))).logits.shape == (1, 50, 40)
