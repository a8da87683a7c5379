"""convert_reference_checkpoint: a reference minGPT .params state_dict becomes an equivalent chargpt folder.

The reference forward is written out here by hand (separate key/query/value linears, explicit tril mask and
softmax, GELU MLP, the 2024 complex-number rope, the 2021/2022 skeleton's synthesizer with its block_size - 1 wide
tables), independently of the chargpt code.
"""

import datetime
import math
import os
import subprocess
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
import torch
import torch.nn.functional as F
from transformers import AutoModelForCausalLM, AutoTokenizer

from modeling_chargpt import CharGPTForCausalLM, CharTokenizer
from modeling_chargpt.convert_reference_checkpoint import ConversionError, convert, infer_config, main

DATA_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data"
REPO = Path(__file__).resolve().parents[1]
VOCAB, N_EMBD, N_LAYER, N_HEAD, BLOCK = 256, 64, 2, 4, 32


@pytest.fixture(scope="module")
def wiki_path() -> Path:
    path = DATA_DIR / "wiki.txt"
    if not path.is_file():
        pytest.fail(f"the real data is required: {path} is missing (expected ../shared/data next to the repo)")
    return path


def reference_rope_cache(block_size: int, head_dim: int) -> torch.Tensor:
    """The 2024 reference's precompute_rotary_emb: (block_size, head_dim/2, 2) of (cos t th_i, sin t th_i)."""
    theta = 1.0 / (10000.0 ** (torch.arange(0, head_dim, 2).float() / head_dim))
    angles = torch.outer(torch.arange(block_size).float(), theta)
    return torch.stack([angles.cos(), angles.sin()], dim=-1)


def reference_state_dict(rope: bool, seed: int = 0, synthesizer: bool = False) -> dict[str, torch.Tensor]:
    """Random tensors with the reference's names and shapes (buffers included), at scales that make every one count.
    `synthesizer`: the 2021/2022 skeleton's SynthesizerAttention (w1, w2 and b2 in place of key and query; w2 and b2
    are block_size - 1 wide), with learned positions."""
    g = torch.Generator().manual_seed(seed)

    def randn(*shape, std=1.0, mean=0.0):
        return torch.randn(*shape, generator=g) * std + mean

    C = N_EMBD
    sd = {"tok_emb.weight": randn(VOCAB, C)}
    if not rope:
        sd["pos_emb"] = randn(1, BLOCK, C, std=0.5)
    for i in range(N_LAYER):
        p = f"blocks.{i}."
        sd[p + "ln1.weight"], sd[p + "ln1.bias"] = randn(C, std=0.2, mean=1.0), randn(C, std=0.2)
        sd[p + "ln2.weight"], sd[p + "ln2.bias"] = randn(C, std=0.2, mean=1.0), randn(C, std=0.2)
        for name in ("w1", "value", "proj") if synthesizer else ("key", "query", "value", "proj"):
            sd[p + f"attn.{name}.weight"] = randn(C, C, std=1 / math.sqrt(C))
            sd[p + f"attn.{name}.bias"] = randn(C, std=0.2)
        if synthesizer:
            sd[p + "attn.w2"] = randn(C // N_HEAD, BLOCK - 1, std=1 / math.sqrt(C // N_HEAD))
            sd[p + "attn.b2"] = randn(BLOCK - 1, std=0.5)
        # the reference registers these buffers persistently, so they are in its state_dict
        sd[p + "attn.mask"] = torch.tril(torch.ones(BLOCK, BLOCK)).view(1, 1, BLOCK, BLOCK)
        if rope:
            sd[p + "attn.rope_cache"] = reference_rope_cache(BLOCK, C // N_HEAD)
        sd[p + "mlp.0.weight"], sd[p + "mlp.0.bias"] = randn(4 * C, C, std=1 / math.sqrt(C)), randn(4 * C, std=0.2)
        sd[p + "mlp.2.weight"], sd[p + "mlp.2.bias"] = randn(C, 4 * C, std=0.5 / math.sqrt(C)), randn(C, std=0.2)
    sd["ln_f.weight"], sd["ln_f.bias"] = randn(C, std=0.2, mean=1.0), randn(C, std=0.2)
    sd["head.weight"] = randn(VOCAB, C, std=1 / math.sqrt(C))
    return sd


def reference_apply_rope(x: torch.Tensor) -> torch.Tensor:
    """The 2024 reference's apply_rotary_emb: adjacent pairs as complex numbers times e^{i t th}."""
    T, hd = x.shape[-2], x.shape[-1]
    cache = reference_rope_cache(T, hd).double()
    rot = torch.view_as_complex(cache.contiguous())  # (T, hd/2)
    xc = torch.view_as_complex(x.double().reshape(*x.shape[:-1], hd // 2, 2).contiguous())
    return torch.view_as_real(xc * rot).flatten(-2)


def reference_forward(sd: dict[str, torch.Tensor], idx: torch.Tensor, n_head: int, rope: bool) -> torch.Tensor:
    """minGPT (CS224N): x = tok_emb + pos_emb; blocks of x + attn(ln1(x)), x + mlp(ln2(x)); ln_f; head. A block with
    `attn.w1` is the synthesizer: scores ReLU(h A + b1) B[:, :T] + b2[:T], unscaled, masked as causal attention."""
    sd = {k: v.double() for k, v in sd.items()}
    B, T = idx.shape
    C = sd["tok_emb.weight"].shape[1]
    hs = C // n_head
    x = sd["tok_emb.weight"][idx]
    if not rope:
        x = x + sd["pos_emb"][:, :T, :]
    n_layer = len({k.split(".")[1] for k in sd if k.startswith("blocks.")})
    for i in range(n_layer):
        p = f"blocks.{i}."
        h = F.layer_norm(x, (C,), sd[p + "ln1.weight"], sd[p + "ln1.bias"])
        v = F.linear(h, sd[p + "attn.value.weight"], sd[p + "attn.value.bias"]).view(B, T, n_head, hs).transpose(1, 2)
        if p + "attn.w1.weight" in sd:
            a = F.relu(F.linear(h, sd[p + "attn.w1.weight"], sd[p + "attn.w1.bias"]))
            att = a.view(B, T, n_head, hs).transpose(1, 2) @ sd[p + "attn.w2"][:, :T] + sd[p + "attn.b2"][:T]
        else:
            k = F.linear(h, sd[p + "attn.key.weight"], sd[p + "attn.key.bias"]).view(B, T, n_head, hs).transpose(1, 2)
            q = F.linear(h, sd[p + "attn.query.weight"], sd[p + "attn.query.bias"])
            q = q.view(B, T, n_head, hs).transpose(1, 2)
            if rope:
                q, k = reference_apply_rope(q), reference_apply_rope(k)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        mask = torch.tril(torch.ones(T, T)).view(1, 1, T, T)
        att = att.masked_fill(mask == 0, -1e10)
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + F.linear(y, sd[p + "attn.proj.weight"], sd[p + "attn.proj.bias"])
        h = F.layer_norm(x, (C,), sd[p + "ln2.weight"], sd[p + "ln2.bias"])
        h = F.gelu(F.linear(h, sd[p + "mlp.0.weight"], sd[p + "mlp.0.bias"]))
        x = x + F.linear(h, sd[p + "mlp.2.weight"], sd[p + "mlp.2.bias"])
    x = F.layer_norm(x, (C,), sd["ln_f.weight"], sd["ln_f.bias"])
    return F.linear(x, sd["head.weight"])


@pytest.mark.parametrize("variant", ["learned", "rope", "synthesizer"])
def test_converted_model_matches_the_reference_forward(tmp_path, wiki_path, variant):
    rope, synthesizer = variant == "rope", variant == "synthesizer"
    sd = reference_state_dict(rope, synthesizer=synthesizer)
    params = tmp_path / "model.params"
    torch.save(sd, params)
    out = tmp_path / "converted"
    argv = ["--params", str(params), "--pretrain_corpus_path", str(wiki_path), "--output_dir", str(out),
            "--n_head", str(N_HEAD)]
    assert main(argv) == 0
    assert {"config.json", "model.safetensors", "vocab.json", "tokenizer_config.json"} <= set(os.listdir(out))

    model = AutoModelForCausalLM.from_pretrained(out)
    tok = AutoTokenizer.from_pretrained(out)
    assert type(model) is CharGPTForCausalLM and type(tok) is CharTokenizer
    cfg = model.config
    block = BLOCK - 1 if synthesizer else BLOCK  # the skeleton's synthesizer tables reach block_size - 1 positions
    assert (cfg.vocab_size, cfg.n_embd, cfg.n_layer, cfg.n_head, cfg.block_size) == (VOCAB, N_EMBD, N_LAYER, N_HEAD,
                                                                                      block)
    assert cfg.position_embedding_type == ("rope" if rope else "learned")
    assert cfg.attention_type == ("synthesizer" if synthesizer else "causal")
    assert tok.get_vocab() == CharTokenizer.from_corpus(wiki_path.read_text(encoding="utf-8")).get_vocab()

    text = wiki_path.read_text(encoding="utf-8").splitlines()[3][:block]  # the longest input the reference runs
    idx = torch.tensor([tok.encode(text), tok.encode(text[::-1])])
    expected = reference_forward(sd, idx, N_HEAD, rope)
    assert expected.std() > 0.5  # a meaningful comparison
    with torch.no_grad():
        logits = model(idx).logits.double()
    assert (logits - expected).abs().max().item() < 1e-5
    # the comparison is sharp: swapping query and key (the synthesizer's b2 reversed) in the reference is caught
    swapped = dict(sd)
    for i in range(N_LAYER):
        if synthesizer:
            swapped[f"blocks.{i}.attn.b2"] = sd[f"blocks.{i}.attn.b2"].flip(0)
            continue
        for part in ("weight", "bias"):
            swapped[f"blocks.{i}.attn.query.{part}"] = sd[f"blocks.{i}.attn.key.{part}"]
            swapped[f"blocks.{i}.attn.key.{part}"] = sd[f"blocks.{i}.attn.query.{part}"]
    assert (logits - reference_forward(swapped, idx, N_HEAD, rope)).abs().max().item() > 1e-2


def test_a_synthesizer_checkpoint_converts_without_flags_and_greedy_answers_agree(tmp_path, wiki_path):
    """The head count comes from w2's rows (head_dim); greedy decoding with the KV cache picks the reference's
    argmax at every step up to the last position the tables cover."""
    sd = reference_state_dict(rope=False, synthesizer=True, seed=1)
    torch.save(sd, tmp_path / "synth.params")
    model, tok = convert(tmp_path / "synth.params", wiki_path)
    assert (model.config.n_head, model.config.block_size, model.config.attention_type) == (N_HEAD, BLOCK - 1,
                                                                                          "synthesizer")
    prompt = torch.tensor([tok.encode("Where was Ann born?")])
    new = model.config.block_size - prompt.shape[1]
    out = model.generate(prompt, max_new_tokens=new, do_sample=False, pad_token_id=0)
    reference = prompt
    for _ in range(new):
        step = reference_forward(sd, reference, N_HEAD, rope=False)[:, -1].argmax(-1, keepdim=True)
        reference = torch.cat([reference, step], dim=1)
    assert torch.equal(out, reference)


def test_rope_is_detected_and_head_count_read_from_the_rope_cache(tmp_path, wiki_path):
    sd = reference_state_dict(rope=True)
    torch.save(sd, tmp_path / "rope.params")
    model, tok = convert(tmp_path / "rope.params", wiki_path)  # no flags at all
    assert model.config.position_embedding_type == "rope"
    assert model.config.n_head == N_HEAD  # head_dim 16 = 2 * rope_cache.shape[1]
    assert model.transformer.pos_emb is None
    # learned, without a rope cache: the head count is the flag's default, 8
    cfg = infer_config(reference_state_dict(rope=False))
    assert (cfg.position_embedding_type, cfg.n_head, cfg.block_size) == ("learned", 8, BLOCK)
    # rope without buffers: block_size from the flag, 128 by default
    bare = {k: v for k, v in sd.items() if not k.endswith(("attn.mask", "attn.rope_cache"))}
    assert infer_config(bare).block_size == 128
    assert infer_config(bare, block_size=64).block_size == 64


def test_cli_as_a_module(tmp_path, wiki_path):
    torch.save(reference_state_dict(rope=False), tmp_path / "vanilla.params")
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "modeling_chargpt.convert_reference_checkpoint", "--params",
         str(tmp_path / "vanilla.params"), "--pretrain_corpus_path", str(wiki_path), "--output_dir", str(out),
         "--position_embedding_type", "learned", "--n_head", "4"],
        cwd=REPO, env={**os.environ, "HF_HUB_OFFLINE": "1"}, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "learned positions" in proc.stdout
    assert CharGPTForCausalLM.from_pretrained(out).config.n_head == 4
    # and a missing file is one line on stderr, exit status 1, no traceback
    proc = subprocess.run(
        [sys.executable, "-m", "modeling_chargpt.convert_reference_checkpoint", "--params",
         str(tmp_path / "missing.params"), "--pretrain_corpus_path", str(wiki_path), "--output_dir", str(out)],
        cwd=REPO, env={**os.environ, "HF_HUB_OFFLINE": "1"}, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "missing.params" in lines[0] and "does not exist" in lines[0], proc.stderr


def _error_of(argv, capsys) -> str:
    assert main(argv) == 1
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ")
    return lines[0]


def test_clear_one_line_errors(tmp_path, wiki_path, capsys):
    def args(params, corpus=wiki_path, *extra):
        return ["--params", str(params), "--pretrain_corpus_path", str(corpus), "--output_dir",
                str(tmp_path / "out"), *extra]

    sd = reference_state_dict(rope=False)
    good = tmp_path / "good.params"
    torch.save(sd, good)

    assert "does not exist" in _error_of(args(tmp_path / "nope.params"), capsys)
    assert "does not exist" in _error_of(args(good, tmp_path / "nope.txt"), capsys)

    garbage = tmp_path / "garbage.params"
    garbage.write_bytes(b"this is not a torch file")
    assert "torch.load(weights_only=True) failed" in _error_of(args(garbage), capsys)

    pickled = tmp_path / "pickled.params"  # arbitrary pickled objects are refused by weights_only=True
    torch.save({"obj": datetime.date(2024, 1, 1)}, pickled)
    assert "datetime.date" in _error_of(args(pickled), capsys)

    not_a_dict = tmp_path / "list.params"
    torch.save([torch.zeros(2)], not_a_dict)
    assert "state_dict" in _error_of(args(not_a_dict), capsys)

    missing_key = tmp_path / "missing_key.params"
    torch.save({k: v for k, v in sd.items() if k != "blocks.1.attn.value.weight"}, missing_key)
    assert "blocks.1.attn.value.weight" in _error_of(args(missing_key), capsys)

    extra_key = tmp_path / "extra_key.params"
    torch.save({**sd, "blocks.0.attn.extra": torch.zeros(1)}, extra_key)
    assert "blocks.0.attn.extra" in _error_of(args(extra_key), capsys)

    wrong_vocab = tmp_path / "wrong_vocab.params"
    torch.save({**sd, "tok_emb.weight": sd["tok_emb.weight"][:200], "head.weight": sd["head.weight"][:200]},
               wrong_vocab)
    assert "256" in _error_of(args(wrong_vocab), capsys)

    assert "pos_emb" in _error_of(args(good, wiki_path, "--position_embedding_type", "rope"), capsys)
    assert "n_head=5" in _error_of(args(good, wiki_path, "--n_head", "5"), capsys)

    rope = tmp_path / "rope.params"
    torch.save(reference_state_dict(rope=True), rope)
    assert "pos_emb" in _error_of(args(rope, wiki_path, "--position_embedding_type", "learned"), capsys)
    assert "rope_cache" in _error_of(args(rope, wiki_path, "--n_head", "8"), capsys)

    # synthesizer checkpoints whose shapes match no reference variant
    synth = reference_state_dict(rope=False, synthesizer=True)
    half = tmp_path / "half_synth.params"  # w1 in a causal checkpoint: no w2
    torch.save({**sd, "blocks.0.attn.w1.weight": torch.zeros(N_EMBD, N_EMBD)}, half)
    assert "'blocks.0.attn.w2' is missing" in _error_of(args(half), capsys)
    no_positions = tmp_path / "synth_no_pos.params"
    torch.save({k: v for k, v in synth.items() if k != "pos_emb"}, no_positions)
    assert "learned positions (pos_emb)" in _error_of(args(no_positions), capsys)
    odd_rows = tmp_path / "synth_rows.params"
    torch.save({**synth, "blocks.0.attn.w2": torch.zeros(7, BLOCK - 1)}, odd_rows)
    assert "blocks.0.attn.w2 has 7 rows" in _error_of(args(odd_rows), capsys)
    wide = tmp_path / "synth_wide.params"
    torch.save({**synth, "blocks.0.attn.w2": torch.zeros(N_EMBD // N_HEAD, BLOCK + 1)}, wide)
    assert "more than pos_emb's 32 positions" in _error_of(args(wide), capsys)
    uneven = tmp_path / "synth_uneven.params"  # layer 1 one column narrower than layer 0
    torch.save({**synth, "blocks.1.attn.b2": torch.zeros(BLOCK - 2)}, uneven)
    assert "'transformer.blocks.1.attn.b2' has shape (30,), expected (31,)" in _error_of(args(uneven), capsys)
    good_synth = tmp_path / "synth.params"
    torch.save(synth, good_synth)
    assert "has 16 rows (head_dim), which n_head=8" in _error_of(args(good_synth, wiki_path, "--n_head", "8"), capsys)

    with pytest.raises(ConversionError):
        convert(tmp_path / "nope.params", wiki_path)
    assert not (tmp_path / "out").exists()  # nothing written on failure
