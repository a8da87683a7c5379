"""Name prompts: the reference NameDataset (non-ASCII dropped, question targets ignored), on the real TSV."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader

from data_scripts import load_pretrain_corpus, load_qa_tsv, name_prompt_dataset, name_prompt_example, pad_collate
from modeling_chargpt import MASK_CHAR, PAD_CHAR, CharTokenizer

BLOCK = 128


@pytest.fixture(scope="module")
def tok(data_dir):
    text, _ = load_pretrain_corpus(data_dir / "wiki.txt")
    return CharTokenizer.from_corpus(text)


@pytest.fixture(scope="module")
def train(data_dir):
    return load_qa_tsv(data_dir / "birth_places_train.tsv", block_size=BLOCK)


def _decode(tok, ids):
    return "".join(tok.itos[i] for i in ids)


def test_hand_computed_khatchig_mouradian(tok, train):
    row = train[0]
    ex = name_prompt_example(row["question"], row["answer"], tok, BLOCK)
    prompt = "Where was Khatchig Mouradian born?\u2047Lebanon\u2047"
    assert len(prompt) == 43
    assert _decode(tok, ex["input_ids"]) == prompt + PAD_CHAR * (BLOCK - 43)
    labels = ex["labels"]
    assert labels[:34] == [-100] * 34  # "Where was Khatchig Mouradian born?" is 34 characters
    assert labels[34:43] == [tok.stoi[c] for c in "\u2047Lebanon\u2047"]
    assert labels[34] == tok.mask_token_id == 1  # the first target: the MASK after the question
    assert labels[43:] == [-100] * (BLOCK - 43)


def test_non_ascii_is_dropped_like_the_reference(tok, train):
    row = train[132]  # line 133: "Where was José Bénazéraf born?\tCasablanca"
    assert row["question"] == "Where was José Bénazéraf born?"
    ex = name_prompt_example(row["question"], row["answer"], tok, BLOCK)
    prompt = "Where was Jos Bnazraf born?\u2047Casablanca\u2047"
    assert _decode(tok, ex["input_ids"]).rstrip(PAD_CHAR) == prompt
    assert ex["labels"].index(1) == len("Where was Jos Bnazraf born?") == 27
    ex2 = name_prompt_example("Where was Árpád Soós born?", "Bűdapest", tok, BLOCK)
    assert _decode(tok, ex2["input_ids"]).rstrip(PAD_CHAR) == "Where was rpd Sos born?\u2047Bdapest\u2047"


def test_identical_to_reference_name_dataset(tok, data_dir):
    """The reference's x/y for every row of the training file equal input_ids[:-1] / shifted labels."""
    data = (data_dir / "birth_places_train.tsv").read_text(encoding="utf-8")
    lines = data.encode("ascii", errors="ignore").decode("ascii").split("\n")[:-1]  # len(data) - 1 items
    ds = name_prompt_dataset(load_qa_tsv(data_dir / "birth_places_train.tsv"), tok, BLOCK)
    assert len(ds) == len(lines) == 2000
    assert ds.column_names == ["input_ids", "labels"]
    for line, ex in zip(lines, ds, strict=True):
        inp, oup = line.split("\t")
        x = inp + MASK_CHAR + oup + MASK_CHAR
        x = x + PAD_CHAR * (BLOCK - len(x))
        y = PAD_CHAR * (len(inp) - 1) + x[len(inp) :]
        x = x[:-1]
        ref_x = [tok.stoi[c] for c in x]
        ref_y = [tok.stoi[c] for c in y]
        assert ex["input_ids"][:-1] == ref_x
        # the reference ignores PAD targets (ignore_index=0); ours ignores -100 and shifts in the model
        assert [0 if t == -100 else t for t in ex["labels"][1:]] == ref_y


def test_too_long_prompt_is_an_error(tok):
    with pytest.raises(ValueError, match="more than block_size=20"):
        name_prompt_example("Where was Somebody born?", "Paris", tok, 20)
    ex = name_prompt_example("Where was A born?", "Paris", tok, len("Where was A born?") + 7)
    assert 0 not in ex["input_ids"]  # exactly full, no PAD


def test_dataloader_batches(tok, train):
    ds = name_prompt_dataset(train, tok, BLOCK)
    batch = next(iter(DataLoader(ds, batch_size=8, collate_fn=pad_collate)))
    assert batch["input_ids"].shape == batch["labels"].shape == (8, BLOCK)
    assert batch["input_ids"].dtype == torch.long
    targets = (batch["labels"] != -100).sum(1).tolist()
    assert targets == [len(a) + 2 for a in train[:8]["answer"]]  # MASK + answer + MASK


def test_preview_cli(data_dir, capsys, tmp_path):
    from data_scripts.preview import main

    assert main(["namedata", "--data_dir", str(data_dir)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 8 and all(line.startswith(("x: ", "y: ")) for line in lines)
    x, y = lines[0][3:], lines[1][3:]
    assert x == "Where was Khatchig Mouradian born?\u2047Lebanon\u2047" + PAD_CHAR * (BLOCK - 1 - 43)
    assert y == PAD_CHAR * 33 + "\u2047Lebanon\u2047" + PAD_CHAR * (BLOCK - 1 - 42)  # the reference's y
    for spec, length in [([], BLOCK), (["--corruption_spec", "2021"], BLOCK - 1)]:  # the 2024 handout's x, y
        assert main(["charcorruption", "--data_dir", str(data_dir), "--num_examples", "3", *spec]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert [line[:3] for line in lines] == ["x: ", "y: "] * 3
        for x, y in zip(lines[::2], lines[1::2], strict=True):
            x, y = x[3:], y[3:]
            assert len(x) == len(y) == length and x[1:] == y[:-1]  # y is x shifted by one
            assert x.rstrip(PAD_CHAR).count(MASK_CHAR) == 2
    assert main(["namedata", "--data_dir", str(tmp_path)]) == 1
    assert capsys.readouterr().err.strip() == f"error: {tmp_path / 'wiki.txt'}: file not found"
