"""The on-device data path against the `datasets` path: the same draw distribution (statistically, over many draws
of a tiny corpus), the same example format, the same packed layout and loss, the DataLoader's epochs, and
batches that are a pure function of (seed, step)."""

from __future__ import annotations

import logging
import math
import random
from collections import Counter

import pytest
import torch
from torch.utils.data import DataLoader

import train_pretrain
from chargpt.training.arguments import TrainingArguments, check_training
from chargpt.training.cli import run_cli
from chargpt.training.errors import UsageError
from chargpt.training.fast_path import device_batches
from data_scripts import (
    OBJECTIVES,
    InterleavedDataset,
    Objective,
    PackedCollator,
    SpanCorruption,
    load_pretrain_corpus,
    load_qa_tsv,
    mixed_order,
    name_prompt_dataset,
    objective_named,
    pad_collate,
    span_corruption_dataset,
)
from data_scripts.device_batches import (
    DeviceBatches,
    EncodedExamples,
    _plan,
    compiled_packing,
    corrupt_documents,
    draw_corruptions,
    pack_examples,
    trim_rows,
)
from modeling_chargpt import IGNORE_INDEX, MASK_CHAR, PAD_CHAR, CharGPTConfig, CharGPTForCausalLM, CharTokenizer

BLOCK = 32  # truncation to 4..28 characters
HIGH = int(BLOCK * 7 / 8)
LENGTHS = [0, 1, 2, 3, 5, 9, 17, 40, 60]  # empty, shorter than every truncation, around it, longer than all
COPIES = 4  # each length several times (different idx, independent draws)
EPOCHS = 800  # 800 x 36 = 28,800 draws per path


def _doc(n: int, k: int) -> str:
    return "".join("abcdefghijklmnopqrstuvwxyz0123456789 .,"[(7 * i + 3 * k) % 39] for i in range(n))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """A tiny wiki.txt (one empty line among the documents) and a few name prompts, read by the `datasets` path."""
    folder = tmp_path_factory.mktemp("tiny")
    texts = [_doc(n, k) for k in range(COPIES) for n in LENGTHS if n]
    lines = texts[:5] + [""] + texts[5:]
    (folder / "wiki.txt").write_text("\n".join(lines), encoding="utf-8")
    text, docs = load_pretrain_corpus(folder / "wiki.txt")
    tok = CharTokenizer.from_corpus(text)
    qa = "".join(f"{_doc(8 + i % 7, i)}\t{_doc(2 + i % 5, i + 1)}\n" for i in range(10))
    (folder / "qa.tsv").write_text(qa, encoding="utf-8")
    prompts = name_prompt_dataset(load_qa_tsv(folder / "qa.tsv", BLOCK), tok, BLOCK)
    return docs, tok, prompts


def _parse(ids: list[int], tok: CharTokenizer) -> tuple[int, int, int]:
    """(L, masked_len, start) read back from a ``prefix MASK suffix MASK masked PAD...`` row."""
    s = "".join(tok.itos[i] for i in ids)
    content = s.rstrip(PAD_CHAR)
    assert PAD_CHAR not in content and content.count(MASK_CHAR) == 2, s
    prefix, suffix, masked = content.split(MASK_CHAR)
    return len(content) - 2, len(masked), len(prefix)


class _Replay(random.Random):
    """A generator whose `randint` returns given values: the reference transform for chosen draws."""

    def __init__(self, values: list[int]) -> None:
        super().__init__(0)
        self.values = list(values)

    def randint(self, a: int, b: int) -> int:
        value = self.values.pop(0)
        assert a <= value <= b, (a, value, b)
        return value


def _reference_row(sc: SpanCorruption, text: str, L: int, masked: int, start: int) -> str:
    trunc = L if L >= 4 else 4  # L < 4 only when the document is shorter: any draw >= 4 truncates it to itself
    return sc.corrupt(text, _Replay([trunc, masked, start] if L else [trunc]))[: sc.block_size]  # the row trained


def _exact_pmf(n: int) -> dict[tuple[int, int, int], float]:
    """The joint law of (L, masked_len, start) that `draw_lengths` defines for a document of n characters."""
    pmf: Counter = Counter()
    for trunc in range(4, HIGH + 1):
        L = min(trunc, n)
        if L == 0:
            pmf[0, 0, 0] += 1 / (HIGH - 3)
            continue
        top = max(1, (L - 1) // 2)
        for m in range(1, top + 1):
            for s in range(L - m + 1):
                pmf[L, m, s] += 1 / (HIGH - 3) / top / (L - m + 1)
    return pmf


def _marginals(draws: list[tuple[int, int, int]]) -> list[Counter]:
    return [Counter(d[i] for d in draws) for i in range(3)] + [Counter((d[0], d[1]) for d in draws)]


def test_every_draw_gives_the_reference_row_exactly(corpus):
    """Exhaustively over every possible (L, masked_len, start) of one document of each length (those longer than
    every truncation have the same draws): the tensor rows equal the `SpanCorruption` strings for the same
    draws, labels are -100 exactly at PAD."""
    docs, tok, _ = corpus
    sc = SpanCorruption(tok, BLOCK)
    ex = EncodedExamples(tok, BLOCK, documents=docs["text"])
    first = {min(len(text), HIGH + 1): d for d, text in reversed(list(enumerate(docs["text"])))}
    cases = [(d, L, m, s) for d in sorted(first.values()) for (L, m, s) in _exact_pmf(len(docs[d]["text"]))]
    d, L, m, s = (torch.tensor(c) for c in zip(*cases, strict=True))
    ids, labels = corrupt_documents(ex.doc_ids, ex.doc_offsets[d], L, m, s, BLOCK, tok.pad_token_id, 1)
    assert len(cases) > 2000
    for (doc, L_, m_, s_), row, lab in zip(cases, ids.tolist(), labels.tolist(), strict=True):
        assert "".join(tok.itos[i] for i in row) == _reference_row(sc, docs[doc]["text"], L_, m_, s_)
        assert lab == [IGNORE_INDEX if t == tok.pad_token_id else t for t in row]


def test_draw_distribution_matches_the_datasets_path(corpus):
    """Many draws of both paths: per document, the marginals of L, masked_len, start and (L, masked_len) agree
    with each other and with the exact law, within 5 standard errors (an off-by-one in any range moves a whole
    value's mass, 4% or more here, which is more than 10 standard errors)."""
    docs, tok, _ = corpus
    texts = docs["text"]
    ds, sc = span_corruption_dataset(docs, tok, BLOCK, seed=0)
    reference: dict[int, list] = {i: [] for i in range(len(texts))}
    for epoch in range(EPOCHS):
        sc.set_epoch(epoch)
        for i, ids in enumerate(ds[:]["input_ids"]):
            reference[i].append(_parse(ids, tok))

    ex = EncodedExamples(tok, BLOCK, documents=texts)
    keys = torch.arange(len(texts)).repeat(EPOCHS)
    ids, labels, lengths = ex.build(keys, torch.ones_like(keys, dtype=torch.bool),
                                    torch.Generator().manual_seed(0))
    fast: dict[int, list] = {i: [] for i in range(len(texts))}
    for key, row, length in zip(keys.tolist(), ids.tolist(), lengths.tolist(), strict=True):
        draw = _parse(row, tok)
        assert length == draw[0] + 2
        fast[key].append(draw)

    for i, text in enumerate(texts):
        pmf = _exact_pmf(len(text))
        probs: list[Counter] = [Counter() for _ in range(4)]
        for k, p in pmf.items():
            for j, value in enumerate((k[0], k[1], k[2], (k[0], k[1]))):
                probs[j][value] += p
        got_ref, got_fast = _marginals(reference[i]), _marginals(fast[i])
        for j in range(4):
            assert set(got_fast[j]) <= set(probs[j]) and set(got_ref[j]) <= set(probs[j]), (text, j)
            for value, p in probs[j].items():
                se = math.sqrt(max(0.0, p * (1 - p)) / EPOCHS)
                f, r = got_fast[j][value] / EPOCHS, got_ref[j][value] / EPOCHS
                assert abs(f - p) <= 5 * se + 1e-9, (len(text), j, value, f, p)
                assert abs(r - p) <= 5 * se + 1e-9, (len(text), j, value, r, p)
                assert abs(f - r) <= 5 * math.sqrt(2) * se + 1e-9, (len(text), j, value, f, r)


def test_an_off_by_one_would_fail_the_distribution_test():
    """Negative control: drawing start from 0..L-masked_len-1 (one value short) is far outside the tolerance."""
    n, draws = 5, 4000
    g = torch.Generator().manual_seed(0)
    L, m, s = draw_corruptions(torch.full((draws,), n), BLOCK, g)
    short = s % (L - m).clamp(min=1)  # the off-by-one
    p = sum(v for k, v in _exact_pmf(n).items() if k[2] == k[0] - k[1])  # P(start = L - masked_len)
    se = math.sqrt(p * (1 - p) / draws)
    assert abs(float((s == L - m).float().mean()) - p) <= 5 * se
    assert abs(float((short == L - m).float().mean()) - p) > 10 * se


def test_name_prompts_are_the_datasets_rows(corpus):
    docs, tok, prompts = corpus
    ex = EncodedExamples(tok, BLOCK, prompts=prompts)
    keys = torch.arange(len(prompts))
    ids, labels, lengths = ex.build(keys, torch.ones_like(keys, dtype=torch.bool), torch.Generator())
    assert ids.tolist() == prompts["input_ids"] and labels.tolist() == prompts["labels"]
    collator = PackedCollator(BLOCK)
    assert lengths.tolist() == [collator.strip(row) for row in prompts["input_ids"]]


def test_plain_documents_are_the_datasets_rows(corpus):
    """objective='language_modeling': the device rows are `PlainDocuments`' rows exactly (no draws), documents
    longer than the block cut at it; lengths as `PackedCollator` strips them; an unknown objective is refused."""
    docs, tok, _ = corpus
    ds, _ = span_corruption_dataset(docs, tok, BLOCK, objective="language_modeling")
    texts = [text for text in docs["text"] if len(text) >= 2]
    ex = EncodedExamples(tok, BLOCK, documents=texts, objective="language_modeling")
    keys = torch.arange(len(texts))
    ids, labels, lengths = ex.build(keys, torch.ones_like(keys, dtype=torch.bool), torch.Generator())
    assert ids.tolist() == ds[:]["input_ids"] and labels.tolist() == ds[:]["labels"]
    assert lengths.tolist() == [min(len(text), BLOCK) for text in texts] and max(map(len, texts)) > BLOCK
    assert lengths.tolist() == [PackedCollator(BLOCK).strip(row) for row in ds[:]["input_ids"]]
    with pytest.raises(ValueError, match="objective 'denoise': choose one of"):
        EncodedExamples(tok, BLOCK, documents=texts, objective="denoise")


def test_a_new_objective_is_one_entry_in_the_registry_and_serves_both_data_paths(corpus, monkeypatch):
    """An objective registered only in `OBJECTIVES` (a transform, its device rows, its shortest document) is what
    `span_corruption_dataset` and `EncodedExamples` build, and the documents both train on."""
    docs, tok, _ = corpus
    half = BLOCK // 2

    class FirstHalf:  # the datasets path, written against the protocol alone: each document's first half-block
        def __init__(self, tokenizer, block_size, seed, spec):
            self.tokenizer, self.block_size = tokenizer, block_size

        def set_epoch(self, epoch):
            pass

        def __call__(self, batch):
            rows = [self.tokenizer.encode_text(text[:half] + PAD_CHAR * (self.block_size - len(text[:half])))
                    for text in batch["text"]]
            pad = self.tokenizer.pad_token_id
            return {"input_ids": rows, "labels": [[IGNORE_INDEX if t == pad else t for t in row] for row in rows]}

    def first_half(encoded, doc, generator):  # the device path: the same rows, gathered
        lengths = encoded.doc_lengths[doc].clamp(max=half)
        j = torch.arange(encoded.block_size)[None, :]
        inside = j < lengths[:, None]
        ids = torch.where(inside, encoded.doc_ids[(encoded.doc_offsets[doc][:, None] + j).clamp(
            max=encoded.doc_ids.shape[0] - 1)], encoded.pad_token_id)
        return ids, torch.where(inside, ids, IGNORE_INDEX), lengths

    monkeypatch.setitem(OBJECTIVES, "first_half", Objective(FirstHalf, first_half, "each document's first half-block",
                                                            min_length=5))
    ds, transform = span_corruption_dataset(docs, tok, BLOCK, objective="first_half")
    texts = objective_named("first_half").documents(docs)["text"]
    assert isinstance(transform, FirstHalf) and len(ds) == len(texts) == sum(len(t) >= 5 for t in docs["text"])
    ex = EncodedExamples(tok, BLOCK, documents=texts, objective="first_half")
    keys = torch.arange(len(texts))
    ids, labels, lengths = ex.build(keys, torch.ones_like(keys, dtype=torch.bool), torch.Generator())
    assert ids.tolist() == ds[:]["input_ids"] and labels.tolist() == ds[:]["labels"]
    assert lengths.tolist() == [min(len(text), half) for text in texts]


@pytest.fixture(scope="module")
def mixed(corpus):
    docs, tok, prompts = corpus
    return DeviceBatches(EncodedExamples(tok, BLOCK, documents=docs["text"], prompts=prompts), 12, seed=3, rows=8)


def test_epochs_are_the_dataloader_epochs(corpus, mixed):
    """Without shuffling, step k holds the DataLoader's batch k of the same (interleaved) dataset; the last batch
    of an epoch holds the remainder; shuffled epochs hold every example once, in a fresh order."""
    docs, tok, prompts = corpus
    corrupted, _ = span_corruption_dataset(docs, tok, BLOCK)
    mixed_ds = InterleavedDataset(corrupted, prompts)
    loader = DataLoader(mixed_ds, batch_size=12, collate_fn=pad_collate)
    assert len(mixed) == mixed.steps_per_epoch == len(loader) == 4
    assert len(mixed.examples) == len(mixed_ds) == len(docs) + 10
    assert [mixed.num_examples(step) for step in range(8)] == [len(b["input_ids"]) for b in loader] * 2
    n_docs = len(docs)
    for step, batch in enumerate(loader):
        keys = mixed._keys(step)[0].tolist()
        ids, labels, lengths = mixed.example_rows(step)
        n = len(batch["input_ids"])
        for i in range(n):
            source, k = mixed_ds.order[step * 12 + i]
            assert keys[i] == (k if source == 0 else n_docs + k)
            if source == 1:  # a name prompt: the same row
                assert torch.equal(ids[i], batch["input_ids"][i]) and torch.equal(labels[i], batch["labels"][i])
            else:  # a document: the same document, drawn independently
                L, m, start = _parse(ids[i].tolist(), tok)
                content = "".join(tok.itos[t] for t in ids[i, : L + 2].tolist())
                prefix, suffix, masked = content.split(MASK_CHAR)
                assert prefix + masked + suffix == docs[k]["text"][:L]
        assert bool((ids[n:] == tok.pad_token_id).all() and (labels[n:] == IGNORE_INDEX).all())
        assert bool((lengths[n:] == 0).all() and (lengths[:n] > 0).all())
    order = mixed_order(n_docs, len(prompts), 2)  # --mixed_qa_repeats 2
    repeated = EncodedExamples(tok, BLOCK, documents=docs["text"], prompts=prompts, order=order)
    assert repeated.order.tolist() == [k if s == 0 else n_docs + k for s, k in order]
    with pytest.raises(ValueError, match="outside the sources"):
        EncodedExamples(tok, BLOCK, documents=docs["text"], prompts=prompts, order=[(1, len(prompts))])

    shuffled = DeviceBatches(mixed.examples, 12, seed=3, shuffle=True, rows=8)
    epochs = [torch.cat([shuffled._keys(e * 4 + k)[0][: shuffled.num_examples(k)] for k in range(4)])
              for e in range(2)]
    assert all(sorted(keys.tolist()) == list(range(len(mixed.examples))) for keys in epochs)
    assert not torch.equal(epochs[0], epochs[1])


def test_batches_are_a_pure_function_of_seed_and_step(mixed):
    def same(a: dict, b: dict) -> bool:
        return all(torch.equal(a[k], b[k]) for k in ("input_ids", "labels", "position_ids"))

    later = mixed(6)
    fresh = DeviceBatches(mixed.examples, 12, seed=3, rows=8)
    assert same(fresh(6), later) and same(mixed(6), later)  # however many batches were built before
    resumed = list(fresh.epoch(1, skip=2))  # epoch 1 from its third batch: steps 6 and 7
    assert len(resumed) == 2 and same(resumed[0], later) and same(resumed[1], mixed(7))
    assert not same(fresh(2), later)  # steps 2 and 6 hold the same examples, drawn again
    other = DeviceBatches(mixed.examples, 12, seed=4, rows=8)
    assert not same(other(6), later)
    assert later["input_ids"].shape == (8, BLOCK) and later["num_examples"] == 12


def test_a_batch_reads_nothing_back_from_the_device(mixed, monkeypatch, refuse_host_reads):
    """No value travels from the tensors to Python while a batch is built (on a GPU each would be a sync)."""
    mixed(1)  # warm: the shuffle permutation and anything lazy
    refuse_host_reads()
    for step in (2, 3, 5):
        mixed(step)
    monkeypatch.undo()
    with pytest.raises(AssertionError, match="read on the host"):  # the control: a read is caught
        refuse_host_reads()
        mixed.dropped()



def test_compiled_packing_gives_the_same_batches(mixed):
    """`--torch_compile_batches`: the packer goes through torch.compile as ONE graph (fullgraph: a graph break would
    raise) and the batches stay the eager ones. 'aot_eager' runs eager kernels after dynamo's capture, so the test
    is exact and fast; inductor's kernels gave the same batches on wiki.txt too, after a 17 s compilation on CPU."""
    torch._dynamo.reset()
    eager, compiled = (DeviceBatches(mixed.examples, 12, seed=3, rows=8) for _ in range(2))
    compiled.compile_packing("aot_eager")
    assert compiled.pack is compiled_packing("aot_eager") and eager.pack is pack_examples
    for step in (0, 3, 6):
        a, b = eager(step), compiled(step)
        assert all(torch.equal(a[k], b[k]) for k in ("input_ids", "labels", "position_ids", "attention_mask"))
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] >= 1  # the packing did go through dynamo
    assert compiled.dropped() == eager.dropped()  # the examples without room, counted alike

def _examples(ids: torch.Tensor, labels: torch.Tensor, n: int) -> list[dict]:
    return [{"input_ids": ids[i].tolist(), "labels": labels[i].tolist()} for i in range(n)]


def _assert_packed_like_the_collator(packed: dict, examples: list[dict]) -> None:
    """The packed rows hold the tokens and targets of `PackedCollator`'s rows for the same examples, placed
    elsewhere (plus empty filler)."""
    reference = PackedCollator(BLOCK)(examples)
    for key in ("input_ids", "labels"):
        assert sorted(packed[key].flatten().tolist()) == sorted(
            reference[key].flatten().tolist() + [0 if key == "input_ids" else IGNORE_INDEX]
            * (packed[key].numel() - reference[key].numel()))


@pytest.mark.parametrize("position_embedding_type", ["learned", "rope"])
def test_packed_batches_keep_the_padded_loss(mixed, position_embedding_type):
    """The packed rows hold the same targets as the reference's padded batch of the same examples, with
    `PackedCollator`'s layout, so the model's loss is the same."""
    torch.manual_seed(0)
    cfg = CharGPTConfig(vocab_size=64, block_size=BLOCK, n_layer=1, n_head=2, n_embd=16, embd_pdrop=0.0,
                        resid_pdrop=0.0, attn_pdrop=0.0, position_embedding_type=position_embedding_type)
    model = CharGPTForCausalLM(cfg).eval()
    with torch.no_grad():
        if model.transformer.pos_emb is not None:
            model.transformer.pos_emb.normal_(std=0.5)
    for step in range(4):
        ids, labels, lengths = mixed.example_rows(step)
        packed, dropped = pack_examples(ids, labels, lengths, mixed.rows)
        assert int(dropped) == 0
        examples = _examples(ids, labels, mixed.num_examples(step))
        _assert_packed_like_the_collator(packed, examples)
        with torch.no_grad():
            ours = model(**{k: v for k, v in packed.items()}).loss
            padded = model(**pad_collate(examples)).loss
        assert abs(float(ours) - float(padded)) < 1e-5


def test_trimmed_rows_give_the_same_loss_and_gradients_on_fewer_rows(corpus):
    """`trim_rows` (the CPU loop's batches): the fixed rows' first rows, down to the last one with a target; the
    rows it drops hold none, so the model's loss and gradients stay those of the whole batch."""
    docs, tok, _ = corpus
    examples = EncodedExamples(tok, BLOCK, documents=docs["text"])
    fixed, trimmed = DeviceBatches(examples, 12, seed=5), DeviceBatches(examples, 12, seed=5, trim=True)
    torch.manual_seed(0)
    cfg = CharGPTConfig(vocab_size=len(tok), block_size=BLOCK, n_layer=1, n_head=2, n_embd=16, embd_pdrop=0.0,
                        resid_pdrop=0.0, attn_pdrop=0.0, position_embedding_type="rope")
    model = CharGPTForCausalLM(cfg)
    fewer = 0
    for step in range(6):
        whole, short = fixed(step), trimmed(step)
        used = short["input_ids"].shape[0]
        fewer += fixed.rows - used
        for name in ("input_ids", "labels", "position_ids", "attention_mask"):
            assert torch.equal(short[name], whole[name][:used]), name
        assert bool(short["labels"][-1].ne(IGNORE_INDEX).any())  # the last row kept holds a target
        assert bool(whole["labels"][used:].eq(IGNORE_INDEX).all())  # and no row dropped does
        grads = []
        for batch in (whole, short):
            model.zero_grad()
            loss = model(**{k: v for k, v in batch.items() if not k.startswith("num_")}).loss
            loss.backward()
            grads.append((loss.item(), [p.grad.clone() for p in model.parameters()]))
        assert abs(grads[0][0] - grads[1][0]) < 1e-6
        assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(grads[0][1], grads[1][1], strict=True))
    assert fewer > 0, "the fixed rows always had room to spare: nothing was trimmed"
    # a batch without any target keeps one row
    empty = {name: value.clone() for name, value in fixed(0).items() if not name.startswith("num_")}
    empty["labels"].fill_(IGNORE_INDEX)
    assert trim_rows(empty)["input_ids"].shape[0] == 1


def test_the_training_loop_trims_rows_on_a_cpu_for_an_eager_unstacked_step_only(corpus):
    """A compiled step and stacked members need one shape per step, and a GPU step must not read the row count back:
    those keep the fixed rows."""
    docs, tok, _ = corpus
    examples = EncodedExamples(tok, BLOCK, documents=docs["text"])

    def trims(**flags) -> list[bool]:
        args = TrainingArguments(output_dir="x", per_device_train_batch_size=12, **flags)
        batches = device_batches(examples, args, [0, 1] if flags.get("stack_seeds") else None).source
        return [member.trim for member in getattr(batches, "members", [batches])]

    assert trims() == [True]
    assert trims(torch_compile=True) == [False]
    assert trims(stack_seeds=True) == [False, False]
    assert not DeviceBatches(examples, 12).trim  # built directly: the fixed rows, as on a GPU


def test_packed_rows_fix_the_rows_and_what_finds_no_room_is_counted_and_logged(corpus, wiki, tmp_path, caplog):
    """`--packed_rows N`: every member's batches get N rows; a bad N is one line; a run whose rows are too few for
    its batches trains on what fits and says how many examples were left out."""
    docs, tok, _ = corpus
    examples = EncodedExamples(tok, BLOCK, documents=docs["text"])

    def batches(rows: int, **flags):
        args = TrainingArguments(output_dir="x", per_device_train_batch_size=12, packed_rows=rows, **flags)
        return device_batches(examples, args, [0, 1] if flags.get("stack_seeds") else None).source

    assert batches(5).rows == 5 and [m.rows for m in batches(5, stack_seeds=True).members] == [5, 5]
    for rows, message in [(0, "--packed_rows 0: give between 1 and --per_device_train_batch_size \\(12\\)"),
                          (13, "--packed_rows 13: give between 1"), (5, "not packed \\(--packing False\\)")]:
        args = TrainingArguments(output_dir="x", per_device_train_batch_size=12, packed_rows=rows, packing=rows != 5)
        with pytest.raises(UsageError, match=message):  # checked with the flags, before any batch is built
            check_training(args, device_data=True)
    argv = ["--pretrain_corpus_path", str(wiki), "--output_dir", str(tmp_path / "out"), "--n_layer", "1",
            "--n_head", "2", "--n_embd", "16", "--device_data", "True", "--per_device_train_batch_size", "8",
            "--packed_rows", "1", "--max_steps", "2", "--checkpointing_steps", "0", "--report_to", "none",
            "--disable_tqdm", "True", "--logging_steps", "1"]
    with caplog.at_level(logging.WARNING, logger="chargpt.training.loop"):
        assert run_cli(train_pretrain.main, argv) == 0
    left_out = [r.getMessage() for r in caplog.records if "found no room in their packed rows" in r.getMessage()]
    assert len(left_out) == 1 and int(left_out[0].split()[0]) > 0


def test_packing_layout_and_overflow():
    """Each example lands whole in one row, positions restart, its first label is -100; the tail is one PAD
    segment; what does not fit is counted, never half-written."""
    g = torch.Generator().manual_seed(0)
    width, n = 16, 40
    lengths = torch.randint(0, width + 1, (n,), generator=g)
    ids = torch.randint(2, 50, (n, width), generator=g) * (torch.arange(width) < lengths[:, None])
    labels = torch.where(ids > 0, ids, IGNORE_INDEX)
    for rows in (n, 24, 10):
        batch, dropped = pack_examples(ids, labels, lengths, rows)
        plan = _plan(lengths, rows, width)
        pos = batch["position_ids"]
        found = 0
        for slot in range(n):
            i, size, r, off = (int(t[slot]) for t in (plan.order, plan.size, plan.row, plan.offset))
            if not bool(plan.placed[slot]) or size == 0:
                continue
            found += 1
            assert off + size <= width
            assert batch["input_ids"][r, off : off + size].tolist() == ids[i, :size].tolist()
            assert pos[r, off : off + size].tolist() == list(range(size))
            assert batch["labels"][r, off].item() == IGNORE_INDEX
            assert batch["labels"][r, off + 1 : off + size].tolist() == labels[i, 1:size].tolist()
        assert found + int(dropped) == int((lengths > 0).sum())
        assert int(batch["input_ids"].ne(0).sum()) == sum(
            int(ids[int(plan.order[s]), : int(plan.size[s])].ne(0).sum()) for s in range(n) if plan.placed[s])
        if rows == n:
            assert int(dropped) == 0  # one example per row always fits
        if rows == 10:
            assert int(dropped) > 0
        # positions: every row is a run of segments starting at 0, the last one the tail
        assert bool((pos[:, 0] == 0).all())
        step = pos[:, 1:] - pos[:, :-1]
        assert bool(((step == 1) | (pos[:, 1:] == 0)).all())


def test_packing_is_nearly_first_fit_decreasing(corpus):
    """The anchor-plus-smallest rows stay within 10% of `PackedCollator`'s first-fit decreasing."""
    docs, tok, _ = corpus
    batches = DeviceBatches(EncodedExamples(tok, BLOCK, documents=list(docs["text"]) * 8), 128, rows=128)
    ours = ffd = 0
    for step in range(4):
        _, _, lengths = batches.example_rows(step)
        ours += int(_plan(lengths, 128, BLOCK).rows_used)
        ffd += len(PackedCollator(BLOCK).plan([n for n in lengths.tolist() if n]))
    assert ffd <= ours <= 1.1 * ffd


def test_estimated_rows_hold_the_sampled_batches(corpus):
    docs, tok, _ = corpus
    batches = DeviceBatches(EncodedExamples(tok, BLOCK, documents=docs["text"]), 16)
    assert batches.rows < 16
    for step in range(40):
        batches(step)
    assert batches.dropped() == 0
    with pytest.raises(ValueError, match="rows must be between 1 and batch_size=16"):
        DeviceBatches(batches.examples, 16, rows=17)


def test_finetuning_batches_are_the_dataloader_batches(corpus):
    """Finetuning (`train_finetune.py --device_data True`): the name prompts alone, no documents. Unshuffled, every
    step holds exactly the DataLoader's padded batch (the last one's missing rows empty); shuffled, each epoch holds
    every prompt once; packed, a step holds the tokens and targets of `PackedCollator`'s rows, dropping
    nothing."""
    _, tok, prompts = corpus
    encoded = EncodedExamples(tok, BLOCK, prompts=prompts)
    assert encoded.num_documents == 0 and len(encoded) == len(prompts) == 10
    batches = DeviceBatches(encoded, 4, seed=1, packing=False)
    loader = DataLoader(prompts.with_format("torch"), batch_size=4, collate_fn=pad_collate)
    assert len(batches) == len(loader) == 3
    for step, batch in enumerate(list(loader) * 2):  # two epochs
        ours, n = batches(step), len(batch["input_ids"])
        assert ours["num_examples"] == n
        assert torch.equal(ours["input_ids"][:n], batch["input_ids"]) and torch.equal(ours["labels"][:n],
                                                                                       batch["labels"])
        assert bool((ours["input_ids"][n:] == tok.pad_token_id).all() and (ours["labels"][n:] == IGNORE_INDEX).all())
    shuffled = DeviceBatches(encoded, 4, seed=1, shuffle=True, packing=False)
    rows = {tuple(r) for r in prompts["input_ids"]}
    for epoch in range(2):
        seen = [tuple(r) for k in range(3) for r in shuffled(epoch * 3 + k)["input_ids"][: shuffled.num_examples(k)]
                .tolist()]
        assert sorted(seen) == sorted(rows)
    packed = DeviceBatches(encoded, 4, seed=1)
    for step in range(3):
        padded = batches(step)
        _assert_packed_like_the_collator(packed(step), _examples(padded["input_ids"], padded["labels"],
                                                                  padded["num_examples"]))
    assert packed.dropped() == 0


def test_random_windows_are_whole_windows_of_their_documents_drawn_alike_on_both_paths(corpus):
    """objective='random_window': on either path a row is block_size consecutive characters of its document (all of
    a short one, PAD after it), every one a target; the start is drawn anew each epoch, uniformly over the starts
    that leave a whole window, as a pure function of (seed, epoch, document) on the datasets path."""
    docs, tok, _ = corpus
    ds, windows = span_corruption_dataset(docs, tok, BLOCK, seed=1, objective="random_window")
    texts = objective_named("random_window").documents(docs)["text"]
    ex = EncodedExamples(tok, BLOCK, documents=texts, objective="random_window")
    keys, generator = torch.arange(len(texts)), torch.Generator().manual_seed(0)
    starts = {"datasets": Counter(), "device": Counter()}
    long_doc = max(range(len(texts)), key=lambda i: len(texts[i]))
    room = len(texts[long_doc]) - BLOCK
    assert room >= 20  # a document with many starts to draw from
    for epoch in range(300):
        windows.set_epoch(epoch)
        rows = {"datasets": ds[:]["input_ids"]}
        ids, labels, lengths = ex.build(keys, torch.ones_like(keys, dtype=torch.bool), generator)
        assert torch.equal(labels, torch.where(ids == tok.pad_token_id, IGNORE_INDEX, ids))
        rows["device"] = ids.tolist()
        for path, batch in rows.items():
            found = ["".join(tok.convert_ids_to_tokens(row)).rstrip(PAD_CHAR) for row in batch]
            assert all(len(w) == min(len(t), BLOCK) and w in t for w, t in zip(found, texts, strict=True))
            starts[path][texts[long_doc].index(found[long_doc])] += 1
    windows.set_epoch(7)
    again = span_corruption_dataset(docs, tok, BLOCK, seed=1, objective="random_window")[1]
    again.set_epoch(7)
    assert [windows.window(t, i) for i, t in enumerate(texts)] == [again.window(t, i) for i, t in enumerate(texts)]
    for counts in starts.values():  # 300 draws of room + 1 starts: both ends reached, the mean near the middle
        assert {0, room} <= set(counts) and abs(sum(s * n for s, n in counts.items()) / 300 - room / 2) < room / 8
