"""generate(): the KV cache changes nothing, left padding changes nothing, and block_size is enforced up front."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
import torch
from variants import UNBOUNDED, VARIANT_IDS, VARIANTS

from modeling_chargpt import CharGPTConfig, CharGPTForCausalLM


def tiny_model(position_embedding_type="learned", attention_type="causal", seed=0) -> CharGPTForCausalLM:
    torch.manual_seed(seed)
    cfg = CharGPTConfig(
        vocab_size=40, block_size=32, n_layer=2, n_head=4, n_embd=64,
        position_embedding_type=position_embedding_type, attention_type=attention_type,
        embd_pdrop=0.0, resid_pdrop=0.0, attn_pdrop=0.0,
        initializer_range=0.3,  # peaked, position-dependent predictions: no near-ties for greedy decoding
    )
    model = CharGPTForCausalLM(cfg).eval()
    if model.transformer.pos_emb is not None:
        with torch.no_grad():
            model.transformer.pos_emb.normal_(0.0, 0.3)
    return model


def greedy(model, ids, n, **kwargs):
    # min_new_tokens = max_new_tokens: EOS (MASK) cannot end a row early, so every row has n new tokens
    return model.generate(ids, max_new_tokens=n, min_new_tokens=n, do_sample=False, **kwargs)


@pytest.mark.parametrize(("position_embedding_type", "attention_type"), VARIANTS, ids=VARIANT_IDS)
def test_greedy_with_cache_equals_without_cache(position_embedding_type, attention_type):
    model = tiny_model(position_embedding_type, attention_type)
    ids = torch.randint(2, 40, (3, 7))
    cached = greedy(model, ids, 20, use_cache=True)
    uncached = greedy(model, ids, 20, use_cache=False)
    assert cached.shape == (3, 27)
    assert torch.equal(cached[:, :7], ids)
    assert torch.equal(cached, uncached)
    assert len(set(cached[0, 7:].tolist())) > 1  # not a degenerate constant continuation
    # greedy really is the argmax of the full forward at every step (MASK excluded by min_new_tokens)
    logits = model(cached[:, :-1], use_cache=False).logits
    logits[..., 1] = float("-inf")
    assert torch.equal(logits[:, 6:].argmax(-1), cached[:, 7:])


@pytest.mark.parametrize("cache_implementation", ["dynamic", "static"])
@pytest.mark.parametrize(("position_embedding_type", "attention_type"), VARIANTS, ids=VARIANT_IDS)
def test_left_padded_batch_gives_each_prompts_own_tokens(position_embedding_type, attention_type, cache_implementation):
    """Also with a preallocated (static) cache, whose unwritten slots and padded rows must stay masked."""
    model = tiny_model(position_embedding_type, attention_type)
    prompts = [torch.randint(2, 40, (n,)) for n in (9, 4, 6)]
    width = max(len(p) for p in prompts)
    input_ids = torch.zeros(len(prompts), width, dtype=torch.long)  # PAD = 0, on the left
    attention_mask = torch.zeros(len(prompts), width, dtype=torch.long)
    for row, p in enumerate(prompts):
        input_ids[row, width - len(p) :] = p
        attention_mask[row, width - len(p) :] = 1
    batch = greedy(model, input_ids, 12, attention_mask=attention_mask, cache_implementation=cache_implementation)
    for row, p in enumerate(prompts):
        alone = greedy(model, p[None], 12, use_cache=False)
        assert torch.equal(batch[row, width:], alone[0, len(p) :]), (row, batch[row, width:], alone[0, len(p) :])


@pytest.mark.parametrize("attention_type", ["causal", "synthesizer"])
def test_learned_or_synthesizer_past_block_size_raises_before_any_compute(attention_type):
    model = tiny_model("learned", attention_type)
    calls = []
    model.transformer.register_forward_pre_hook(lambda *args: calls.append(1))
    prompt = torch.randint(2, 40, (1, 25))
    with pytest.raises(ValueError, match="block_size=32") as excinfo:
        greedy(model, prompt, 9)  # the last step would need position 25 + 9 - 1 = 33 > 32 positions
    assert "max_new_tokens=9" in str(excinfo.value)
    with pytest.raises(ValueError, match="block_size=32"):
        model.generate(prompt, max_length=40, do_sample=False)
    with pytest.raises(ValueError, match="block_size=32"):
        model.generate(input_ids=prompt, max_new_tokens=30)
    assert calls == []  # refused before any forward
    # exactly at the limit works: positions 0..31 are all used
    out = greedy(model, prompt, 8)
    assert out.shape == (1, 33)
    assert calls


@pytest.mark.parametrize("position_embedding_type", UNBOUNDED)
def test_table_free_positions_may_run_past_block_size(position_embedding_type):
    model = tiny_model(position_embedding_type)
    prompt = torch.randint(2, 40, (2, 28))
    cached = greedy(model, prompt, 20)
    assert cached.shape == (2, 48)
    assert torch.equal(cached, greedy(model, prompt, 20, use_cache=False))


def test_generation_stops_at_mask():
    model = tiny_model("rope")
    assert model.generation_config.eos_token_id == 1 and model.generation_config.pad_token_id == 0
    with torch.no_grad():  # make MASK (id 1) the certain next token everywhere
        model.transformer.ln_f.bias[0] = 100.0
        model.lm_head.weight[:, 0] = 0.0
        model.lm_head.weight[1, 0] = 1.0
    ids = torch.randint(2, 40, (2, 5))
    out = model.generate(ids, max_new_tokens=6, do_sample=False)
    assert out.tolist() == torch.cat([ids, torch.ones(2, 1, dtype=torch.long)], 1).tolist()


@pytest.mark.parametrize(
    ("position_embedding_type", "attention_type"), [("rope", "causal"), ("learned", "synthesizer")]
)
def test_beam_search_with_cache_equals_without_cache(position_embedding_type, attention_type):
    """Beam search reorders the cache (the synthesizer's holds key positions instead of keys)."""
    model = tiny_model(position_embedding_type, attention_type)
    ids = torch.randint(2, 40, (2, 6))
    mask = torch.ones_like(ids)
    ids[0, :2], mask[0, :2] = 0, 0
    kwargs = {"attention_mask": mask, "num_beams": 3, "max_new_tokens": 8, "min_new_tokens": 8, "do_sample": False}
    assert torch.equal(model.generate(ids, **kwargs), model.generate(ids, use_cache=False, **kwargs))
