"""Mixed training's interleaving: every item once, in order, spread evenly; corruption still re-drawn per epoch;
repeats (mixed_order), and questions matched to their documents (question_documents)."""

from __future__ import annotations

import pytest

from data_scripts import (
    DataFileError,
    InterleavedDataset,
    PackedCollator,
    even_interleaving,
    load_pretrain_corpus,
    load_qa_tsv,
    mixed_order,
    name_prompt_dataset,
    question_documents,
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


# ---------------------------------------------------------------------------------------------------------------
# mixed_order: --mixed_qa_repeats
# ---------------------------------------------------------------------------------------------------------------


def test_even_order_with_repeats_is_the_even_interleaving_of_repeated_passes():
    assert mixed_order(7, 3) == even_interleaving(7, 3)  # repeats 1 is today's order, unchanged
    order = mixed_order(4, 3, repeats=2)
    assert order == [(1, 0), (0, 0), (1, 1), (0, 1), (1, 2), (1, 0), (0, 2), (1, 1), (0, 3), (1, 2)]
    big = mixed_order(2938, 2000, repeats=3)
    assert [k for s, k in big if s == 0] == list(range(2938))
    assert [k for s, k in big if s == 1] == list(range(2000)) * 3  # three passes, each prompt in every one
    twice = mixed_order(3, 2, document_repeats=2)  # --mixed_document_repeats 2: the documents' two passes
    assert twice == [(s, k % 3 if s == 0 else k) for s, k in even_interleaving(6, 2)]
    assert [k for s, k in twice if s == 0] == [0, 1, 2, 0, 1, 2]


def test_bad_orders_are_refused():
    with pytest.raises(ValueError, match="repeats must be >= 1"):
        mixed_order(3, 2, 0)
    with pytest.raises(ValueError, match="repeats must be >= 1"):
        mixed_order(3, 2, document_repeats=0)
    with pytest.raises(ValueError, match="outside the sources"):
        InterleavedDataset([1, 2], [3], order=[(0, 0), (1, 1)])


def test_interleaved_dataset_reads_in_the_given_order():
    data = InterleavedDataset(["d0", "d1"], ["p0"], order=[(1, 0), (0, 1), (0, 0), (1, 0)])
    assert [data[i] for i in range(len(data))] == ["p0", "d1", "d0", "p0"]


# ---------------------------------------------------------------------------------------------------------------
# question_documents: matching a question's person to a document by name
# ---------------------------------------------------------------------------------------------------------------


def test_real_training_questions_match_their_own_wiki_lines(data_dir):
    _, docs = load_pretrain_corpus(data_dir / "wiki.txt")
    qa = load_qa_tsv(data_dir / "birth_places_train.tsv")
    # row i is wiki.txt line i (21 of the names have more than one line, two questions share one name)
    assert question_documents(qa["question"], docs["text"], "train.tsv") == list(range(2000))


def test_matching_prefers_the_name_layout_longer_names_and_takes_shared_names_in_order():
    documents = ["Ann Lee was born in Oslo .", "Ann. Ann is a poet .", "Ann Lee. A painter .", "Annabel. x",
                 "Bo Di (born 1900) .", "Ann Lee. Another Ann Lee ."]
    questions = ["Where was Ann born?", "Where was Ann Lee born?", "Where was Bo Di born?", "Where was Ann Lee born?"]
    # "Ann Lee." lines first (the real layout), in order; "Ann" never takes an "Ann Lee" line nor "Annabel"
    assert question_documents(questions, documents, "q.tsv") == [1, 2, 4, 5]
    # a third Ann Lee falls back to the line where the name is followed by a space
    assert question_documents(questions + ["Where was Ann Lee born?"], documents, "q.tsv")[-1] == 0


def test_a_question_without_a_document_or_a_name_is_a_one_line_error():
    with pytest.raises(DataFileError, match=r"^q\.tsv:2: no document .* 'Cy'"):
        question_documents(["Where was Bo born?", "Where was Cy born?"], ["Bo. x", "Cyril. y"], "q.tsv")
    with pytest.raises(DataFileError, match=r"^q\.tsv:1: 'Who is Bo\?' is not 'Where was NAME born\?'"):
        question_documents(["Who is Bo?"], ["Bo. x"], "q.tsv")
