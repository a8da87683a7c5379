"""Ecosystem: save/reload, Auto classes, remote code without the package, and the text-generation pipeline.

Everything is offline: HF_HUB_OFFLINE=1 and, for the subprocess, a private HF_HOME.
"""

import json
import os
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, pipeline
from variants import VARIANT_IDS, VARIANTS

from modeling_chargpt import MASK_CHAR, CharGPTConfig, CharGPTForCausalLM, CharTokenizer

DATA_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def data_file(name: str) -> Path:
    path = DATA_DIR / name
    if not path.is_file():
        pytest.fail(f"the real data is required: {path} is missing (expected ../shared/data next to the repo)")
    return path


@pytest.fixture(scope="module")
def tokenizer() -> CharTokenizer:
    return CharTokenizer.from_corpus(data_file("wiki.txt").read_text(encoding="utf-8"))


def tiny_model(position_embedding_type="learned", attention_type="causal", vocab_size=256, seed=0, **kwargs):
    torch.manual_seed(seed)
    kwargs = {"block_size": 32, "n_layer": 2, "n_head": 4, "n_embd": 64, **kwargs}
    cfg = CharGPTConfig(
        vocab_size=vocab_size, position_embedding_type=position_embedding_type, attention_type=attention_type, **kwargs
    )
    model = CharGPTForCausalLM(cfg)
    with torch.no_grad():  # non-trivial positions and synthesizer tables, so a reload that lost them would show
        if model.transformer.pos_emb is not None:
            model.transformer.pos_emb.normal_(0.0, 0.3)
        for name, p in model.named_parameters():
            if name.endswith(("attn.w2", "attn.b2")):
                p.normal_(0.0, 0.3)
    return model.eval()


@pytest.mark.parametrize(("position_embedding_type", "attention_type"), VARIANTS, ids=VARIANT_IDS)
def test_save_and_reload_gives_identical_logits(tmp_path, position_embedding_type, attention_type):
    model = tiny_model(position_embedding_type, attention_type, initializer_range=0.2)
    model.save_pretrained(tmp_path)
    files = set(os.listdir(tmp_path))
    assert "model.safetensors" in files
    assert not any(f.endswith(".bin") for f in files)
    reloaded = CharGPTForCausalLM.from_pretrained(tmp_path)
    assert not reloaded.training
    saved_config = {k: v for k, v in model.config.to_dict().items() if k != "_name_or_path"}
    assert {k: v for k, v in reloaded.config.to_dict().items() if k != "_name_or_path"} == saved_config
    # beyond block_size too, where the table-free variants must compute correct rope/sinusoidal values
    length = 32 if position_embedding_type == "learned" else 45
    ids = torch.randint(2, 256, (2, length))
    with torch.no_grad():
        expected = model(ids).logits
        assert torch.equal(reloaded(ids).logits, expected)
        auto = AutoModelForCausalLM.from_pretrained(tmp_path)
        assert type(auto) is CharGPTForCausalLM
        assert torch.equal(auto(ids).logits, expected)
    reloaded_state = reloaded.state_dict()
    assert set(reloaded_state) == set(model.state_dict())
    assert all(torch.equal(reloaded_state[k], v) for k, v in model.state_dict().items())


def test_saved_folder_loads_through_the_auto_classes(tmp_path, tokenizer):
    model = tiny_model()
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["model_type"] == "chargpt"
    assert config["architectures"] == ["CharGPTForCausalLM"]
    assert config["auto_map"] == {
        "AutoConfig": "configuration_chargpt.CharGPTConfig",
        "AutoModelForCausalLM": "modeling_chargpt.CharGPTForCausalLM",
    }
    tok_config = json.loads((tmp_path / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert tok_config["auto_map"]["AutoTokenizer"][0] == "tokenization_chargpt.CharTokenizer"
    for code in ("configuration_chargpt.py", "modeling_chargpt.py", "tokenization_chargpt.py"):
        assert (tmp_path / code).is_file(), code
    assert type(AutoConfig.from_pretrained(tmp_path)) is CharGPTConfig
    assert type(AutoModelForCausalLM.from_pretrained(tmp_path)) is CharGPTForCausalLM
    loaded_tok = AutoTokenizer.from_pretrained(tmp_path)
    assert type(loaded_tok) is CharTokenizer
    assert loaded_tok.padding_side == "left"
    gen = json.loads((tmp_path / "generation_config.json").read_text())
    assert gen["eos_token_id"] == 1 and gen["pad_token_id"] == 0


def test_remote_code_loads_in_a_fresh_process_without_the_package(tmp_path, tokenizer):
    folder = tmp_path / "chargpt-tiny"
    model = tiny_model("rope", initializer_range=0.2)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    prompt = "Where was Khatchig Mouradian born?" + MASK_CHAR
    ids = tokenizer(prompt, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        expected_logits = model(ids).logits[0, -1]
    expected_tokens = model.generate(ids, max_new_tokens=5, min_new_tokens=5, do_sample=False)[0].tolist()

    # -I: no PYTHONPATH, no user site, no cwd/script dir on sys.path; -S: no site-packages and no .pth files,
    # hence no editable-install finder. Site-packages itself (torch, transformers) is added back by hand.
    script = textwrap.dedent(
        """
        import importlib.util, json, sys
        sys.path.append(sys.argv[1])
        assert importlib.util.find_spec("modeling_chargpt") is None, "the package must not be importable here"
        import torch
        from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
        folder = sys.argv[2]
        config = AutoConfig.from_pretrained(folder, trust_remote_code=True)
        model = AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True)
        tok = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
        ids = tok(sys.argv[3], return_tensors="pt")["input_ids"]
        with torch.no_grad():
            logits = model(ids).logits[0, -1]
        tokens = model.generate(ids, max_new_tokens=5, min_new_tokens=5, do_sample=False)[0].tolist()
        print(json.dumps({
            "config": type(config).__module__ + "." + type(config).__name__,
            "model": type(model).__module__ + "." + type(model).__name__,
            "tokenizer": type(tok).__module__ + "." + type(tok).__name__,
            "package_imported": any(m.split(".")[0] == "modeling_chargpt" for m in sys.modules),
            "ids": ids[0].tolist(), "logits": logits.tolist(), "tokens": tokens,
        }))
        """
    )
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_HOME": str(tmp_path / "hf"),
        "TOKENIZERS_PARALLELISM": "false",
    }
    site_packages = sysconfig.get_paths()["purelib"]
    proc = subprocess.run(
        [sys.executable, "-I", "-S", "-c", script, site_packages, str(folder), prompt],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["package_imported"] is False
    for kind in ("config", "model", "tokenizer"):
        assert result[kind].startswith("transformers_modules."), result[kind]
    assert result["model"].endswith(".modeling_chargpt.CharGPTForCausalLM")
    assert result["ids"] == ids[0].tolist()
    torch.testing.assert_close(torch.tensor(result["logits"]), expected_logits, rtol=0, atol=1e-5)
    assert result["tokens"] == expected_tokens
    assert (tmp_path / "hf" / "modules" / "transformers_modules").is_dir()


def test_package_is_importable_in_the_normal_environment():
    """Control for the test above: with site processing, the editable install does make the package importable."""
    proc = subprocess.run(
        [sys.executable, "-c", "import importlib.util; print(importlib.util.find_spec('modeling_chargpt') is None)"],
        cwd="/", capture_output=True, text=True, timeout=60,
    )
    assert proc.stdout.strip() == "False", proc.stderr


def _memorise(model: CharGPTForCausalLM, tokenizer: CharTokenizer, text: str, steps: int) -> float:
    ids = torch.tensor([tokenizer.encode(text)])
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(steps):
        loss = model(ids, labels=ids).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    return loss.item()


def test_pipeline_answers_a_memorised_question(tmp_path, tokenizer):
    line = data_file("birth_places_train.tsv").read_text(encoding="utf-8").splitlines()[0]
    question, answer = line.split("\t")
    prompt = question + MASK_CHAR
    assert prompt == "Where was Khatchig Mouradian born?" + MASK_CHAR
    model = tiny_model(block_size=64, embd_pdrop=0.0, resid_pdrop=0.0, attn_pdrop=0.0)
    final_loss = _memorise(model, tokenizer, prompt + answer + MASK_CHAR, steps=60)
    assert final_loss < 0.05
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)

    generator = pipeline("text-generation", model=str(tmp_path), device="cpu")
    assert type(generator.model) is CharGPTForCausalLM and type(generator.tokenizer) is CharTokenizer
    out = generator(prompt, max_new_tokens=len(answer) + 1, do_sample=False)
    text = out[0]["generated_text"]
    assert text.startswith(prompt)
    assert len(text) > len(prompt)
    assert text[len(prompt) :].split(MASK_CHAR)[0] == answer  # "Lebanon"
    # the raw tokens: the answer, then MASK ends it
    ids = tokenizer(prompt, return_tensors="pt")["input_ids"]
    generated = generator.model.generate(ids, max_new_tokens=len(answer) + 3, do_sample=False)[0, ids.shape[1] :]
    assert tokenizer.decode(generated) == answer + MASK_CHAR
