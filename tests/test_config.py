"""CharGPTConfig: the assignment's defaults, the standard attribute names, validation, save/load."""

import ast
import inspect
import json
import os
import weakref
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
from transformers import AutoConfig, PretrainedConfig

from modeling_chargpt import ATTENTION_TYPES, POSITION_EMBEDDING_TYPES, CharGPTConfig
from modeling_chargpt.configuration_chargpt import PIPELINES
from modeling_chargpt.positions import POSITION_ENCODINGS

ROOT = Path(__file__).resolve().parents[1]


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
    assert POSITION_EMBEDDING_TYPES == tuple(POSITION_ENCODINGS) and {"learned", "rope"} <= set(POSITION_ENCODINGS)
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
        ({"position_embedding_type": "learnt"}, "position_embedding_type", list(POSITION_ENCODINGS)),
        ({"position_embedding_type": "Rope"}, "position_embedding_type", list(POSITION_ENCODINGS)),
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


# Where a product module may make a config: the config's own module. Everything else gives the fields when the config
# is made (`CharGPTConfig(...)`, `from_pretrained(FOLDER, field=value)`) and saves it with `save_pretrained`.
PRODUCT = [*(ROOT / p for p in ("train_pretrain.py", "train_finetune.py", "evaluate_birthplace.py")),
           *(path for package in ("modeling_chargpt", "data_scripts", "chargpt")
             for path in (ROOT / package).rglob("*.py"))]


def _sets_a_config(node: ast.AST) -> bool:
    """`config.x = ...`, `model.config.x = ...`, `config["x"] = ...` or `setattr(config, ...)`."""
    def is_config(target: ast.AST) -> bool:
        return (isinstance(target, ast.Name) and target.id == "config"
                or isinstance(target, ast.Attribute) and target.attr == "config")

    if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return any(isinstance(t, ast.Attribute | ast.Subscript) and is_config(t.value) for t in targets)
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr"
            and bool(node.args) and is_config(node.args[0]))


def test_no_product_code_sets_a_config_field_after_the_config_is_made():
    assert len(PRODUCT) > 40 and _sets_a_config(ast.parse("model.config.answering = {}").body[0])  # not vacuous
    found = [f"{path.relative_to(ROOT)}:{node.lineno}" for path in PRODUCT
             if path.name != "configuration_chargpt.py"
             for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) if _sets_a_config(node)]
    assert not found, found


DECLARED = set(inspect.signature(CharGPTConfig.__init__).parameters) - {"self", "kwargs"}


def test_training_and_saving_a_threshold_set_no_declared_field_on_a_made_config(tmp_path, monkeypatch):
    """A recitation pretraining, a reciting finetuning from it and a threshold saved into the result: every declared
    field the folders carry (answer_format, recitation_chars, answering, custom_pipelines, ...) is given to
    `CharGPTConfig.__init__`, none set on a config once made."""
    import train_finetune
    import train_pretrain
    from chargpt.evaluation.abstention import save_threshold
    from chargpt.training import run_cli
    from data_scripts import write_synthetic_corpus

    world = tmp_path / "world"
    write_synthetic_corpus(world, n_people=40, n_train=20, n_dev=10, n_test=10, seed=0)
    made, late = {}, []  # id -> a weak reference, so a new config at a freed config's address is not taken for it
    init, setattr_ = CharGPTConfig.__init__, CharGPTConfig.__setattr__

    def recording_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        made[id(self)] = weakref.ref(self)

    def recording_setattr(self, name, value):
        known = made.get(id(self))
        if known is not None and known() is self and name in DECLARED:
            late.append(name)
        setattr_(self, name, value)

    monkeypatch.setattr(CharGPTConfig, "__init__", recording_init)
    monkeypatch.setattr(CharGPTConfig, "__setattr__", recording_setattr)
    quick = ["--max_steps", "1", "--report_to", "none", "--disable_tqdm", "True", "--per_device_train_batch_size", "4"]
    tiny = ["--n_layer", "1", "--n_head", "2", "--n_embd", "16", "--block_size", "96", *quick]
    pre, fin = tmp_path / "pre", tmp_path / "fin"
    assert run_cli(train_pretrain.main, ["--pretrain_corpus_path", str(world / "wiki.txt"), "--output_dir", str(pre),
                                         "--mixed_qa_corpus_path", str(world / "birth_places_train.tsv"),
                                         "--mixed_qa_format", "recite", "--recitation_chars", "60", *tiny]) == 0
    assert run_cli(train_finetune.main, ["--pretrain_corpus_path", str(world / "wiki.txt"), "--finetune_corpus_path",
                                         str(world / "birth_places_train.tsv"), "--model_name_or_path", str(pre),
                                         "--output_dir", str(fin), "--recite", "True", *quick]) == 0
    save_threshold(str(fin), 0.25, {"target_precision": 0.9})
    saved = json.loads((fin / "config.json").read_text())
    assert (saved["answer_format"], saved["recitation_chars"]) == ("recite", 60)  # the pretrained model's cut
    assert saved["answering"]["abstain_below"] == 0.25 and saved["custom_pipelines"] == PIPELINES
    assert made and not late, f"set on a made config: {sorted(set(late))}"
