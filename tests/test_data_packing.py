"""Packing: pad-free rows whose every example keeps exactly its unpacked loss."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from data_scripts import (
    PackedCollator,
    load_pretrain_corpus,
    load_qa_tsv,
    name_prompt_dataset,
    pad_collate,
    pad_fraction,
    span_corruption_dataset,
)
from modeling_chargpt import CharGPTConfig, CharGPTForCausalLM, CharTokenizer, packed_causal_mask

BLOCK = 128


@pytest.fixture(scope="module")
def examples(data_dir):
    """24 span-corruption examples from wiki.txt and 24 name prompts from the training TSV."""
    text, docs = load_pretrain_corpus(data_dir / "wiki.txt")
    tok = CharTokenizer.from_corpus(text)
    corr, _ = span_corruption_dataset(docs, tok, BLOCK, seed=0)
    names = name_prompt_dataset(load_qa_tsv(data_dir / "birth_places_train.tsv"), tok, BLOCK)
    pick = [0, 5, 17, 100, 2937, 400, 401, 402, 999, 1500, 2000, 2500] + list(range(1000, 1012))
    return [corr[i] for i in pick], [names[i] for i in range(24)]


def _per_token_loss(model, batch):
    """CE of every target (labels shifted by one as in the model), 0 where ignored; shape of labels[:, 1:]."""
    kwargs = {k: v for k, v in batch.items() if k in ("input_ids", "position_ids", "attention_mask")}
    with torch.no_grad():
        logits = model(**kwargs).logits
    targets = batch["labels"][:, 1:]
    ce = F.cross_entropy(logits[:, :-1].flatten(0, 1), targets.flatten(), ignore_index=-100, reduction="none")
    return ce.view_as(targets), targets != -100


def _per_example_diff(model, exs, drop: str | None = None) -> float:
    """Max over examples of |packed - unpacked| per-example mean loss (and the batch loss); ``drop`` removes a
    key from the packed batch, as a negative control."""
    padded = pad_collate(exs)
    packed = PackedCollator(BLOCK, return_example_ids=True)(exs)
    owner = packed.pop("example_ids")[:, 1:]  # example of each target token
    if drop is not None:
        packed.pop(drop)
    assert packed["input_ids"].shape[0] < len(exs)  # fewer rows: the padding compute is gone
    ce_pad, valid_pad = _per_token_loss(model, padded)
    ce_pack, valid_pack = _per_token_loss(model, packed)
    assert int(valid_pack.sum()) == int(valid_pad.sum())  # the same targets, none across a boundary
    worst = 0.0
    for i in range(len(exs)):
        unpacked = ce_pad[i][valid_pad[i]]
        packed_i = ce_pack[valid_pack & (owner == i)]
        assert packed_i.numel() == unpacked.numel() > 0
        worst = max(worst, abs(float(packed_i.mean()) - float(unpacked.mean())))
        if drop is None:
            worst = max(worst, float((packed_i - unpacked).abs().max()))
    if drop is None:  # the model's own batch loss (mean over all targets) is unchanged too
        with torch.no_grad():
            worst = max(worst, abs(float(model(**padded).loss) - float(model(**packed).loss)))
    return worst


@pytest.mark.parametrize(
    "position_embedding_type, attention_type",
    [("learned", "causal"), ("rope", "causal"), ("sinusoidal", "causal"), ("learned", "synthesizer")],
)
def test_every_example_keeps_its_unpacked_loss(examples, position_embedding_type, attention_type):
    torch.manual_seed(0)
    cfg = CharGPTConfig(vocab_size=256, block_size=BLOCK, n_layer=2, n_head=4, n_embd=64,
                        embd_pdrop=0.0, resid_pdrop=0.0, attn_pdrop=0.0,
                        position_embedding_type=position_embedding_type, attention_type=attention_type)
    model = CharGPTForCausalLM(cfg).eval()
    # minGPT initialises learned positions to zero and the synthesizer near uniform; randomise them so that a
    # wrong position or mask would show
    with torch.no_grad():
        if model.transformer.pos_emb is not None:
            model.transformer.pos_emb.normal_(std=0.5)
        if attention_type == "synthesizer":
            for block in model.transformer.blocks:
                block.attn.w2.normal_(std=0.5)
                block.attn.b2.normal_(std=0.5)
    worst = max(_per_example_diff(model, exs) for exs in examples)
    assert worst < 1e-5, worst
    # negative controls: without the block-diagonal mask (or, for absolute positions, without restarting
    # position_ids) the per-example losses do change, so the comparison above can fail
    assert _per_example_diff(model, examples[0], drop="attention_mask") > 1e-3
    if position_embedding_type != "rope":  # rope is relative: shifting an example's positions changes nothing
        assert _per_example_diff(model, examples[0], drop="position_ids") > 1e-3


def test_packed_layout(examples):
    exs = examples[0] + examples[1]
    batch = PackedCollator(BLOCK, return_example_ids=True)(exs)
    ids, labels, pos, owner = batch["input_ids"], batch["labels"], batch["position_ids"], batch["example_ids"]
    R, W = ids.shape
    assert W <= BLOCK and labels.shape == pos.shape == owner.shape == (R, W)
    assert batch["attention_mask"].shape == (R, 1, W, W) and batch["attention_mask"].dtype == torch.bool
    assert torch.equal(batch["attention_mask"], packed_causal_mask(pos))
    # attention never crosses an example boundary, and is causal inside one
    mask = batch["attention_mask"][:, 0]
    same = owner[:, :, None] == owner[:, None, :]
    assert not bool((mask & ~same & (owner[:, :, None] >= 0)).any())
    assert not bool(mask.triu(1).any())
    for i, ex in enumerate(exs):
        n = len([t for t in ex["input_ids"] if t != 0])  # trailing PAD stripped (no PAD inside an example)
        where = (owner == i).nonzero()
        assert len(where) == n and len(set(where[:, 0].tolist())) == 1  # one contiguous run in one row
        r, cols = int(where[0, 0]), where[:, 1]
        assert torch.equal(cols, torch.arange(int(cols[0]), int(cols[0]) + n))
        assert ids[r, cols].tolist() == ex["input_ids"][:n]
        assert pos[r, cols].tolist() == list(range(n))  # positions restart at 0
        assert labels[r, cols[0]] == -100  # nothing predicted across the boundary
        assert labels[r, cols[1:]].tolist() == ex["labels"][1:n]
    tail = owner < 0
    assert bool((ids[tail] == 0).all()) and bool((labels[tail] == -100).all())
    assert "example_ids" not in PackedCollator(BLOCK)(exs)


def test_plan_is_first_fit_decreasing_and_complete():
    coll = PackedCollator(10)
    rows = coll.plan([6, 4, 5, 5, 3, 7, 1])
    assert sorted(i for row in rows for i in row) == list(range(7))
    assert all(sum([6, 4, 5, 5, 3, 7, 1][i] for i in row) <= 10 for row in rows)
    assert rows == [[5, 4], [0, 1], [2, 3], [6]]
    with pytest.raises(ValueError, match="more than block_size=10"):
        coll.plan([11])


def test_pad_collate_and_pad_fraction():
    exs = [{"input_ids": [5, 6, 0, 0], "labels": [5, 6, -100, -100]}, {"input_ids": [7, 0], "labels": [7, -100]}]
    batch = pad_collate(exs)
    assert batch["input_ids"].tolist() == [[5, 6, 0, 0], [7, 0, 0, 0]]
    assert batch["labels"].tolist() == [[5, 6, -100, -100], [7, -100, -100, -100]]
    assert set(batch) == {"input_ids", "labels"}
    assert pad_fraction(batch) == 5 / 8
    packed = PackedCollator(4)(exs)
    assert packed["input_ids"].tolist() == [[5, 6, 7]] and packed["position_ids"].tolist() == [[0, 1, 0]]
    assert packed["labels"].tolist() == [[-100, 6, -100]]
    assert pad_fraction(packed) == 0.0


def test_packing_removes_most_padding(examples):
    for exs in examples:
        assert pad_fraction(pad_collate(exs)) > 0.4
        assert pad_fraction(PackedCollator(BLOCK)(exs)) < 0.25
