"""Mixed training's interleaving: every item once, in order, spread evenly; corruption still re-drawn per epoch."""

from __future__ import annotations

import pytest

from data_scripts import (
    InterleavedDataset,
    PackedCollator,
    even_interleaving,
    load_pretrain_corpus,
    load_qa_tsv,
    name_prompt_dataset,
    span_corruption_dataset,
)
from modeling_chargpt import CharTokenizer

BLOCK = 128


@pytest.mark.parametrize("n_first,n_second", [(2938, 2000), (10, 3), (3, 10), (5, 5), (7, 0), (0, 4), (0, 0)])
def test_every_item_once_in_order_and_evenly_spread(n_first, n_second):
    order = even_interleaving(n_first, n_second)
    assert len(order) == n_first + n_second
    for source, n in ((0, n_first), (1, n_second)):
        assert [k for s, k in order if s == source] == list(range(n))  # each source read once, in its own order
        where = [i for i, (s, _) in enumerate(order) if s == source]
        if n >= 2:
            # even spread: consecutive items of a source are (total / n) apart, give or take one slot
            gaps = {b - a for a, b in zip(where, where[1:], strict=False)}
            ideal = (n_first + n_second) / n
            assert max(gaps) <= ideal + 1 and min(gaps) >= ideal - 1, (source, sorted(gaps))


def test_negative_sizes_are_refused():
    with pytest.raises(ValueError, match=">= 0"):
        even_interleaving(-1, 3)


@pytest.fixture(scope="module")
def mixed(data_dir):
    text, docs = load_pretrain_corpus(data_dir / "wiki.txt")
    tok = CharTokenizer.from_corpus(text)
    corrupted, corruption = span_corruption_dataset(docs, tok, BLOCK, seed=0)
    prompts = name_prompt_dataset(load_qa_tsv(data_dir / "birth_places_train.tsv", block_size=BLOCK), tok, BLOCK)
    return InterleavedDataset(corrupted, prompts), corruption, corrupted, prompts


def test_real_data_reads_through_to_both_sources(mixed):
    data, corruption, corrupted, prompts = mixed
    assert len(data) == len(corrupted) + len(prompts) == 2938 + 2000
    corruption.set_epoch(0)
    for i, (source, k) in enumerate(data.order[:50]):
        assert data[i] == (corrupted if source == 0 else prompts)[k]
    # a batch of the reference size holds both kinds: about 19 documents and 13 name prompts per 32
    batch = [data.order[i][0] for i in range(32 * 40, 32 * 41)]
    assert 17 <= batch.count(0) <= 21
    packed = PackedCollator(BLOCK)([data[i] for i in range(32)])
    assert packed["input_ids"].shape[1] <= BLOCK


def test_corruption_is_still_redrawn_every_epoch(mixed):
    data, corruption, _, prompts = mixed
    first_doc = next(i for i, (s, _) in enumerate(data.order) if s == 0)
    first_prompt = next(i for i, (s, _) in enumerate(data.order) if s == 1)
    corruption.set_epoch(0)
    doc0, prompt0 = data[first_doc], data[first_prompt]
    corruption.set_epoch(1)
    assert data[first_doc] != doc0  # a new draw of the same document
    assert data[first_prompt] == prompt0 == prompts[0]  # name prompts are fixed
    corruption.set_epoch(0)
    assert data[first_doc] == doc0
