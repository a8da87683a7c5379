"""Span corruption: the reference CharCorruptionDataset, re-drawn per epoch, seedable, on the real wiki.txt."""

from __future__ import annotations

import pickle
import random
from statistics import mean

import pytest
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

from data_scripts import (
    SCHEDULE_TOKENS,
    PlainDocuments,
    SpanCorruption,
    load_pretrain_corpus,
    pad_collate,
    span_corruption_dataset,
)
from data_scripts.objectives import OBJECTIVES
from modeling_chargpt import MASK_CHAR, PAD_CHAR, CharGPTConfig, CharGPTForCausalLM, CharTokenizer

BLOCK = 128
MAX_L = int(BLOCK * 7 / 8)  # 112
EPOCHS = 8  # 8 x 2938 draws


@pytest.fixture(scope="module")
def corpus(data_dir):
    text, docs = load_pretrain_corpus(data_dir / "wiki.txt")
    return text, docs, CharTokenizer.from_corpus(text)


@pytest.fixture(scope="module")
def draws(corpus):
    """Every document of wiki.txt, corrupted in EPOCHS epochs: (doc, masked_string, input_ids, labels)."""
    _, docs, tok = corpus
    ds, corruption = span_corruption_dataset(docs, tok, BLOCK, seed=0)
    texts = list(docs["text"])
    out = []
    for epoch in range(EPOCHS):
        corruption.set_epoch(epoch)
        batch = ds[:]  # the transform runs over the whole corpus
        for doc, ids, labels in zip(texts, batch["input_ids"], batch["labels"], strict=True):
            out.append((doc, "".join(tok.itos[i] for i in ids), ids, labels))
    return out


def _split(masked_string: str) -> tuple[str, str, str]:
    content = masked_string.rstrip(PAD_CHAR)
    prefix, suffix, masked = content.split(MASK_CHAR)
    return prefix, masked, suffix


def test_shape_two_masks_and_reconstruction(draws):
    assert len(draws) == EPOCHS * 2938
    for doc, s, ids, labels in draws:
        assert len(s) == len(ids) == len(labels) == BLOCK
        content = s.rstrip(PAD_CHAR)
        assert PAD_CHAR not in content  # padding only at the end
        assert content.count(MASK_CHAR) == 2  # exactly two MASKs before the padding
        prefix, masked, suffix = _split(s)
        L = len(content) - 2
        assert prefix + masked + suffix == doc[:L]  # the document's first L characters
        if doc:
            assert len(masked) >= 1
            assert L >= min(4, len(doc))
        assert L <= MAX_L


def test_every_truncation_length_is_reachable(draws):
    lengths = {len(s.rstrip(PAD_CHAR)) - 2 for doc, s, _, _ in draws if len(doc) >= MAX_L}
    assert lengths == set(range(4, MAX_L + 1))
    # capped by the document length: a short document is never extended
    for doc, s, _, _ in draws:
        assert len(s.rstrip(PAD_CHAR)) - 2 <= len(doc)


def test_masked_fraction_averages_a_quarter_with_spread(draws):
    fractions, lengths = [], []
    for doc, s, _, _ in draws:
        if doc:
            prefix, masked, suffix = _split(s)
            L = len(prefix) + len(masked) + len(suffix)
            fractions.append(len(masked) / L)
            lengths.append((L, len(masked)))
    assert abs(mean(fractions) - 0.25) < 0.01
    assert min(fractions) < 0.1 and max(fractions) > 0.4  # sometimes less, sometimes more
    long = [m for L, m in lengths if L == 100]
    assert abs(mean(long) - 25) < 2.0  # mean L/4 at a fixed (even) L


def test_labels_are_input_ids_with_ignore_exactly_at_pad(draws):
    for _, _, ids, labels in draws:
        assert labels == [-100 if t == 0 else t for t in ids]
        assert -100 not in labels[: ids.index(0)]


def test_same_loss_as_the_reference_x_y_convention(draws):
    """input_ids/labels with the model's internal shift = the reference's x=s[:-1], y=s[1:], ignore_index=0."""
    torch.manual_seed(0)
    cfg = CharGPTConfig(vocab_size=256, block_size=BLOCK, n_layer=2, n_head=4, n_embd=64,
                        embd_pdrop=0.0, resid_pdrop=0.0, attn_pdrop=0.0)
    model = CharGPTForCausalLM(cfg).eval()
    batch = pad_collate([{"input_ids": ids, "labels": labels} for _, _, ids, labels in draws[:16]])
    with torch.no_grad():
        ours = model(**batch).loss
        ids = batch["input_ids"]
        x, y = ids[:, :-1], ids[:, 1:]
        logits = model(input_ids=x).logits
        reference = F.cross_entropy(logits.reshape(-1, 256), y.reshape(-1), ignore_index=0)
    assert abs(float(ours) - float(reference)) < 1e-6


def test_empty_and_short_documents(corpus):
    _, _, tok = corpus
    sc = SpanCorruption(tok, BLOCK, seed=0)
    # wiki.txt's final empty document (the reference keeps it): MASK MASK then PAD, block_size + 1 in all (2024)
    assert sc.corrupt("", random.Random(0)) == MASK_CHAR * 2 + PAD_CHAR * (BLOCK - 1)
    ex = sc.example("", 2937)
    assert ex["input_ids"][:3] == [1, 1, 0] and ex["labels"][:3] == [1, 1, -100]
    for doc in ["A", "Ab", "Abc", "Abcd", "Abcde"]:
        for seed in range(50):
            prefix, masked, suffix = _split(sc.corrupt(doc, random.Random(seed)))
            assert prefix + masked + suffix == doc and len(masked) >= 1


@pytest.mark.parametrize("spec,padded_to", [("2024", BLOCK + 1), ("2021", BLOCK)])
def test_reference_algorithm_verbatim(corpus, spec, padded_to):
    """Same draws, same string as the reference __getitem__ written out with the same generator; the 2024 handout
    pads the masked string to block_size + 1 characters, the 2021 code to block_size."""
    _, docs, tok = corpus
    sc = SpanCorruption(tok, BLOCK, spec=spec)
    for i, doc in enumerate(list(docs["text"])[:500]):
        rng_ours, rng_ref = random.Random(i), random.Random(i)
        trunc_len = rng_ref.randint(4, int(BLOCK * 7 / 8))
        d = doc[:trunc_len]
        masked_len = rng_ref.randint(1, max(1, (len(d) - 1) // 2)) if d else 0
        start = rng_ref.randint(0, len(d) - masked_len) if d else 0
        prefix, masked, suffix = d[:start], d[start : start + masked_len], d[start + masked_len :]
        ref = prefix + MASK_CHAR + suffix + MASK_CHAR + masked
        ref += PAD_CHAR * (padded_to - len(ref))
        assert sc.corrupt(doc, rng_ours) == ref


def test_the_2024_pair_is_block_size_long_and_trains_the_same_rows(corpus):
    """x and y of the 2024 handout hold block_size characters (2021: one fewer); the masked string's last character
    is always PAD, so the rows trained (and every loss term) are the same for both years; only the schedule's count
    per example differs."""
    _, docs, tok = corpus
    new, old = SpanCorruption(tok, BLOCK, seed=3), SpanCorruption(tok, BLOCK, seed=3, spec="2021")
    assert (new.spec, SCHEDULE_TOKENS["2024"](BLOCK), SCHEDULE_TOKENS["2021"](BLOCK)) == ("2024", BLOCK, BLOCK - 1)
    for i, doc in enumerate(list(docs["text"])[:300]):
        x, y = new.reference_pair(doc, i)
        x_old, y_old = old.reference_pair(doc, i)
        assert (len(x), len(y), len(x_old), len(y_old)) == (BLOCK, BLOCK, BLOCK - 1, BLOCK - 1)
        assert x[1:] == y[:-1] and y[-1] == PAD_CHAR and x[:-1] == x_old and y[:-1] == y_old
        assert new.example(doc, i) == old.example(doc, i)
        assert len(new.example(doc, i)["input_ids"]) == BLOCK
    with pytest.raises(ValueError, match="spec '2022'"):
        SpanCorruption(tok, BLOCK, spec="2022")


def test_draws_are_a_pure_function_of_seed_epoch_and_index(corpus):
    _, docs, tok = corpus
    ds, sc = span_corruption_dataset(docs, tok, BLOCK, seed=7)
    assert ds.column_names == ["text", "idx"]  # a transform on access, not a materialised .map
    first = ds[:64]["input_ids"]
    assert ds[:64]["input_ids"] == first  # same epoch: same draws, however often accessed
    assert [ds[i]["input_ids"] for i in (5, 3, 40)] == [first[5], first[3], first[40]]  # order-independent
    assert ds[[40, 5]]["input_ids"] == [first[40], first[5]]
    sc.set_epoch(1)
    second = ds[:64]["input_ids"]
    assert sum(a != b for a, b in zip(first, second, strict=True)) >= 60  # a new epoch re-draws
    sc.set_epoch(0)
    assert ds[:64]["input_ids"] == first
    # same seed in a fresh object (another process, a resumed run): same draws; another seed: others
    ds2, _ = span_corruption_dataset(docs, tok, BLOCK, seed=7)
    assert ds2[:64]["input_ids"] == first
    ds3, _ = span_corruption_dataset(docs, tok, BLOCK, seed=8)
    assert sum(a != b for a, b in zip(first, ds3[:64]["input_ids"], strict=True)) >= 60
    # survives pickling (DataLoader workers started with spawn)
    clone = pickle.loads(pickle.dumps(sc))
    assert clone.example(docs[3]["text"], 3)["input_ids"] == first[3]


def test_resumed_dataloader_sees_the_same_batches(corpus):
    _, docs, tok = corpus
    docs = docs.select(range(256))

    def loader(seed_sampler: int, epoch: int, num_workers: int = 0):
        ds, sc = span_corruption_dataset(docs, tok, BLOCK, seed=3)
        sc.set_epoch(epoch)
        g = torch.Generator().manual_seed(seed_sampler + epoch)
        return DataLoader(ds, batch_size=32, shuffle=True, generator=g, collate_fn=pad_collate,
                          num_workers=num_workers)

    full = [b["input_ids"] for b in loader(0, epoch=2)]
    resumed = [b["input_ids"] for i, b in enumerate(loader(0, epoch=2)) if i >= 3]  # skip the first 3 batches
    assert all(torch.equal(a, b) for a, b in zip(full[3:], resumed, strict=True))
    workers = [b["input_ids"] for b in loader(0, epoch=2, num_workers=2)]
    assert all(torch.equal(a, b) for a, b in zip(full, workers, strict=True))
    other_epoch = [b["input_ids"] for b in loader(0, epoch=3)]
    assert not torch.equal(full[0], other_epoch[0])


def test_block_size_too_small_is_rejected(corpus):
    with pytest.raises(ValueError, match="block_size >= 9"):
        SpanCorruption(corpus[2], 8)
    SpanCorruption(corpus[2], 9).corrupt("x" * 50, random.Random(0))


def test_plain_documents_train_every_character_from_the_ones_before(corpus):
    """objective='language_modeling': a row is the document's first BLOCK characters, no MASK, every one a target
    (PAD none); the transform is the dataset's; an unknown objective is refused."""
    _, docs, tok = corpus
    ds, plain = span_corruption_dataset(docs, tok, BLOCK, seed=0, objective="language_modeling")
    assert isinstance(plain, PlainDocuments)
    texts = [text for text in docs["text"] if len(text) >= 2]
    assert len(ds) == len(texts) == len(docs) - 1  # wiki.txt's last, empty line has nothing to predict
    long_docs = 0
    for idx in range(0, len(texts), 7):
        row = ds[idx]
        text = "".join(tok.itos[t] for t in row["input_ids"])
        assert len(row["input_ids"]) == BLOCK and MASK_CHAR not in text
        assert text.rstrip(PAD_CHAR) == texts[idx][:BLOCK]
        kept = min(len(texts[idx]), BLOCK)
        assert row["labels"][:kept] == row["input_ids"][:kept]
        assert all(t == -100 for t in row["labels"][kept:])
        long_docs += len(texts[idx]) > BLOCK
    assert long_docs > 50  # the cut at BLOCK characters was exercised
    plain.set_epoch(3)
    first = ds[5]["input_ids"]
    plain.set_epoch(4)
    assert ds[5]["input_ids"] == first  # nothing is drawn: every epoch trains the same row
    with pytest.raises(ValueError, match=f"objective 'denoise': choose one of {', '.join(OBJECTIVES)}$"):
        span_corruption_dataset(docs, tok, BLOCK, objective="denoise")
