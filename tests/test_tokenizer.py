"""CharTokenizer: the reference vocabulary built from wiki.txt, no special tokens added, clear errors, round-trips."""

import json
import os
import re
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest
from transformers import AutoTokenizer, PreTrainedTokenizer

from modeling_chargpt import MASK_CHAR, PAD_CHAR, CharGPTConfig, CharTokenizer, UnknownCharacterError

DATA_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture(scope="module")
def wiki_text() -> str:
    path = DATA_DIR / "wiki.txt"
    if not path.is_file():
        pytest.fail(f"the real data is required: {path} is missing (expected ../shared/data next to the repo)")
    return path.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def tok(wiki_text) -> CharTokenizer:
    return CharTokenizer.from_corpus(wiki_text)


def test_wiki_vocabulary_is_the_references(tok, wiki_text):
    assert isinstance(tok, PreTrainedTokenizer)
    assert tok.vocab_size == 256
    assert len(tok) == 256
    # reference: itos = [PAD, MASK] + sorted(set(corpus))
    expected = [PAD_CHAR, MASK_CHAR, *sorted(set(wiki_text))]
    assert tok.convert_ids_to_tokens(list(range(256))) == expected
    assert tok.get_vocab() == {c: i for i, c in enumerate(expected)}
    assert PAD_CHAR == "\u25a1" and MASK_CHAR == "\u2047"


def test_special_tokens(tok):
    assert (tok.pad_token, tok.pad_token_id) == (PAD_CHAR, 0)
    assert (tok.eos_token, tok.eos_token_id) == (MASK_CHAR, 1)
    assert (tok.mask_token, tok.mask_token_id) == (MASK_CHAR, 1)
    assert tok.bos_token is None and tok.unk_token is None
    assert tok.padding_side == "left"


def test_no_special_tokens_are_added(tok):
    s = "Where was Khatchig Mouradian born?" + MASK_CHAR
    expected = [tok.get_vocab()[c] for c in s]
    assert tok(s)["input_ids"] == expected
    assert tok(s, add_special_tokens=True)["input_ids"] == expected
    assert tok.encode(s) == expected
    assert tok.encode_text(s) == expected
    assert tok(s)["attention_mask"] == [1] * len(s)
    assert set(tok(s)) == {"input_ids", "attention_mask"}
    # the special characters themselves are single ordinary ids inside the text
    assert tok("a" + PAD_CHAR + MASK_CHAR + "b")["input_ids"][1:3] == [0, 1]


def test_decode_joins_characters_without_spaces(tok, wiki_text):
    lines = wiki_text.splitlines()
    non_ascii = next(line for line in lines if any(ord(c) > 127 for c in line))
    for line in [lines[0], lines[1], non_ascii, lines[-1], "a b  c\n"]:
        assert tok.decode(tok.encode(line)) == line
    qa = "Where was X born?" + MASK_CHAR + "Paris" + MASK_CHAR + PAD_CHAR * 3
    assert tok.decode(tok.encode(qa)) == qa
    assert tok.decode(tok.encode(qa), skip_special_tokens=True) == "Where was X born?Paris"
    assert tok.batch_decode([tok.encode("ab"), tok.encode("c d")]) == ["ab", "c d"]


def test_whole_corpus_roundtrips(tok, wiki_text):
    ids = tok.encode_text(wiki_text)
    assert len(ids) == len(wiki_text)
    assert "".join(tok.convert_ids_to_tokens(ids)) == wiki_text
    assert min(ids) >= 2  # PAD and MASK never occur in the corpus


@pytest.mark.parametrize("call", ["__call__", "encode", "encode_text", "batch"])
def test_unknown_character_error_names_char_codepoint_and_position(tok, call):
    text = "Where was \u4e2d\u6587 born?"  # U+4E2D is not in wiki.txt
    assert "\u4e2d" not in tok.get_vocab()
    with pytest.raises(ValueError) as excinfo:
        if call == "__call__":
            tok(text)
        elif call == "encode":
            tok.encode(text)
        elif call == "encode_text":
            tok.encode_text(text)
        else:
            tok(["fine", text], padding=True)
    err = excinfo.value
    assert isinstance(err, UnknownCharacterError)
    assert not isinstance(err, KeyError)
    message = str(err)
    assert "\u4e2d" in message
    assert "U+4E2D" in message
    assert re.search(r"position 10\b", message), message


def test_unknown_token_id_conversion_is_a_value_error(tok):
    with pytest.raises(ValueError, match="\u20ac"):
        tok.convert_tokens_to_ids("\u20ac")


def test_left_padding_for_batches(tok):
    batch = tok(["ab", "abcd"], padding=True, return_tensors="pt")
    a, b = tok.get_vocab()["a"], tok.get_vocab()["b"]
    assert batch["input_ids"][0].tolist() == [0, 0, a, b]
    assert batch["attention_mask"].tolist() == [[0, 0, 1, 1], [1, 1, 1, 1]]


def test_from_corpus_rejects_reserved_characters():
    with pytest.raises(ValueError, match="U\\+2047"):
        CharTokenizer.from_corpus("abc" + MASK_CHAR)
    with pytest.raises(ValueError, match="U\\+25A1"):
        CharTokenizer.from_corpus(PAD_CHAR + "abc")


def test_constructor_validates_vocabulary():
    with pytest.raises(ValueError):
        CharTokenizer(chars=["a", "b", MASK_CHAR])  # PAD must be id 0
    with pytest.raises(ValueError):
        CharTokenizer()  # needs a vocabulary


def test_save_and_reload_roundtrip(tok, tmp_path):
    tok.save_pretrained(tmp_path)
    with open(tmp_path / "vocab.json", encoding="utf-8") as f:
        assert json.load(f) == tok.get_vocab()
    for loaded in (CharTokenizer.from_pretrained(tmp_path), AutoTokenizer.from_pretrained(tmp_path)):
        assert type(loaded) is CharTokenizer
        assert loaded.get_vocab() == tok.get_vocab()
        assert loaded.padding_side == "left"
        assert (loaded.pad_token_id, loaded.eos_token_id, loaded.mask_token_id) == (0, 1, 1)
        s = "Where was Khatchig Mouradian born?" + MASK_CHAR
        assert loaded(s)["input_ids"] == tok(s)["input_ids"]
        assert loaded.decode(loaded.encode(s)) == s
        with pytest.raises(UnknownCharacterError, match="U\\+4E2D"):
            loaded("\u4e2d")


def test_auto_tokenizer_maps_the_config(tok, tmp_path):
    # a folder holding only the model config and the vocabulary also resolves through the config mapping
    CharGPTConfig(vocab_size=256).save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    (tmp_path / "tokenizer_config.json").unlink()
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    assert type(loaded) is CharTokenizer
    assert loaded.get_vocab() == tok.get_vocab()
