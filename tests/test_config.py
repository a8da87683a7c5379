"""CharGPTConfig: the assignment's defaults, the standard attribute names, validation, save/load."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
from transformers import AutoConfig, PretrainedConfig

from modeling_chargpt import ATTENTION_TYPES, POSITION_EMBEDDING_TYPES, CharGPTConfig


def test_defaults_are_the_assignments():
    cfg = CharGPTConfig(vocab_size=256)
    assert isinstance(cfg, PretrainedConfig)
    assert cfg.model_type == "chargpt"
    assert (cfg.vocab_size, cfg.block_size, cfg.n_layer, cfg.n_head, cfg.n_embd) == (256, 128, 4, 8, 256)
    assert (cfg.embd_pdrop, cfg.resid_pdrop, cfg.attn_pdrop) == (0.1, 0.1, 0.1)
    assert cfg.position_embedding_type == "learned"
    assert cfg.attention_type == "causal"
    assert cfg.rope_theta == 10000.0
    assert cfg.pad_token_id == 0
    assert cfg.eos_token_id == 1  # MASK ends an answer
    assert cfg.tie_word_embeddings is False
    assert cfg.head_dim == 32
    assert POSITION_EMBEDDING_TYPES == ("learned", "rope", "sinusoidal", "none")
    assert ATTENTION_TYPES == ("causal", "synthesizer")


def test_attribute_map_exposes_standard_names():
    cfg = CharGPTConfig(vocab_size=50, block_size=32, n_layer=2, n_head=4, n_embd=64)
    assert cfg.num_hidden_layers == 2
    assert cfg.hidden_size == 64
    assert cfg.num_attention_heads == 4
    assert cfg.max_position_embeddings == 32
    # the mapping also works for writing and for keyword construction
    cfg.num_hidden_layers = 3
    assert cfg.n_layer == 3
    assert CharGPTConfig(hidden_size=128, num_attention_heads=2).n_embd == 128


@pytest.mark.parametrize(
    ("kwargs", "field", "allowed"),
    [
        ({"position_embedding_type": "alibi"}, "position_embedding_type", ["learned", "rope", "sinusoidal", "none"]),
        ({"position_embedding_type": "Rope"}, "position_embedding_type", ["learned", "rope", "sinusoidal", "none"]),
        ({"attention_type": "linear"}, "attention_type", ["causal", "synthesizer"]),
        ({"n_embd": 100, "n_head": 8}, "n_embd", ["n_head"]),
        ({"n_embd": 12, "n_head": 4, "position_embedding_type": "rope"}, "position_embedding_type", ["even"]),
        ({"attention_type": "synthesizer", "block_size": None}, "block_size", ["synthesizer"]),
        ({"block_size": 0}, "block_size", ["positive"]),
        ({"n_head": 0}, "n_head", ["positive"]),
        ({"attn_pdrop": 1.5}, "attn_pdrop", ["[0, 1)"]),
    ],
)
def test_invalid_values_raise_value_error_naming_the_field(kwargs, field, allowed):
    with pytest.raises(ValueError) as excinfo:
        CharGPTConfig(**kwargs)
    message = str(excinfo.value)
    assert field in message
    for word in allowed:
        assert word in message


def test_rope_with_even_head_dim_and_synthesizer_with_block_size_are_fine():
    assert CharGPTConfig(n_embd=16, n_head=4, position_embedding_type="rope").head_dim == 4
    assert CharGPTConfig(attention_type="synthesizer", block_size=64).block_size == 64


def test_save_and_reload_roundtrip(tmp_path):
    cfg = CharGPTConfig(
        vocab_size=77, block_size=48, n_layer=3, n_head=2, n_embd=32, embd_pdrop=0.0, resid_pdrop=0.2,
        attn_pdrop=0.3, position_embedding_type="sinusoidal", attention_type="causal", rope_theta=500.0,
    )
    cfg.save_pretrained(tmp_path)
    for loaded in (CharGPTConfig.from_pretrained(tmp_path), AutoConfig.from_pretrained(tmp_path)):
        assert type(loaded) is CharGPTConfig
        for key in ("vocab_size", "block_size", "n_layer", "n_head", "n_embd", "embd_pdrop", "resid_pdrop",
                    "attn_pdrop", "position_embedding_type", "attention_type", "rope_theta", "pad_token_id",
                    "eos_token_id", "tie_word_embeddings"):
            assert getattr(loaded, key) == getattr(cfg, key), key


def test_auto_config_knows_the_model_type():
    cfg = AutoConfig.for_model("chargpt", n_layer=2)
    assert type(cfg) is CharGPTConfig
    assert cfg.n_layer == 2
