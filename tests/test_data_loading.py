"""Loading wiki.txt and the TSVs into `datasets.Dataset`s, with one-line errors for bad files."""

from __future__ import annotations

import pickle

import pytest

from data_scripts import DataFileError, load_pretrain_corpus, load_qa_tsv
from modeling_chargpt import CharTokenizer

# --------------------------------------------------------------------------------------------- real data


@pytest.fixture(scope="module")
def wiki(data_dir):
    return load_pretrain_corpus(data_dir / "wiki.txt")


def test_wiki_documents_are_the_reference_split_including_final_empty_document(wiki, data_dir):
    text, docs = wiki
    raw = (data_dir / "wiki.txt").read_text(encoding="utf-8")
    assert text == raw
    assert len(text) == 418_352
    reference = raw.split("\n")  # CharCorruptionDataset: data = full_text.split('\n')
    assert len(reference) == 2938
    assert docs.column_names == ["text", "idx"]
    assert len(docs) == len(reference) == 2938  # 2937 lines + the empty document after the final newline
    assert docs["text"] == reference
    assert docs[-1]["text"] == ""
    assert docs["idx"] == list(range(2938))
    assert docs[0]["text"].startswith("Khatchig Mouradian. Khatchig Mouradian is a journalist")


def test_wiki_text_gives_reference_vocabulary(wiki):
    text, _ = wiki
    tok = CharTokenizer.from_corpus(text)
    assert tok.vocab_size == 256
    assert tok.pad_token_id == 0 and tok.mask_token_id == 1
    assert tok.itos[2] == "\n"  # the smallest character of wiki.txt comes right after PAD and MASK


def test_real_tsvs_load(data_dir):
    train = load_qa_tsv(data_dir / "birth_places_train.tsv", block_size=128)
    dev = load_qa_tsv(data_dir / "birth_dev.tsv", block_size=128)
    test = load_qa_tsv(data_dir / "birth_test_inputs.tsv", block_size=128, require_answer=False)
    assert (len(train), len(dev), len(test)) == (2000, 500, 437)
    assert train.column_names == ["question", "answer"]
    assert train[0] == {"question": "Where was Khatchig Mouradian born?", "answer": "Lebanon"}
    assert train[15] == {"question": "Where was Naïma Azough born?", "answer": "Morocco"}  # raw text is kept
    assert dev[-1]["question"].startswith("Where was ") and dev[-1]["answer"]
    assert set(test["answer"]) == {""}
    assert test[0]["question"] == "Where was Adam Bright born?"
    questions = list(train["question"]) + list(test["question"])
    assert all(q.startswith("Where was ") and q.endswith(" born?") for q in questions)


def test_test_inputs_require_an_answer_by_default(data_dir):
    path = data_dir / "birth_test_inputs.tsv"
    with pytest.raises(DataFileError) as e:
        load_qa_tsv(path)
    assert str(e.value) == f"{path}:1: expected exactly one tab (question<TAB>answer), found none"


# --------------------------------------------------------------------------------------------- bad files


def _write(tmp_path, name, data: bytes):
    path = tmp_path / name
    path.write_bytes(data)
    return path


def _error(fn, *args, **kwargs) -> DataFileError:
    with pytest.raises(DataFileError) as e:
        fn(*args, **kwargs)
    assert isinstance(e.value, ValueError)
    assert "\n" not in str(e.value)
    return e.value


GOOD = b"Where was A B born?\tParis\n"


@pytest.mark.parametrize("loader", [load_qa_tsv, load_pretrain_corpus])
def test_missing_file(tmp_path, loader):
    path = tmp_path / "nope.tsv"
    err = _error(loader, path)
    assert str(err) == f"{path}: file not found"
    assert (err.path, err.line, err.problem) == (str(path), None, "file not found")
    assert str(pickle.loads(pickle.dumps(err))) == str(err)


@pytest.mark.parametrize("loader", [load_qa_tsv, load_pretrain_corpus])
@pytest.mark.parametrize("content", [b"", b"\xef\xbb\xbf", b"\n\n", b"\r\n"])
def test_empty_file(tmp_path, loader, content):
    path = _write(tmp_path, "empty.txt", content)
    assert str(_error(loader, path)) == f"{path}: file is empty"


def test_directory_is_not_a_file(tmp_path):
    assert str(_error(load_qa_tsv, tmp_path)) == f"{tmp_path}: is a directory, expected a file"


@pytest.mark.parametrize(
    "row, problem",
    [
        (b"Where was X born?\tLyon\tFrance", "expected exactly one tab (question<TAB>answer), found 2"),
        (b"Where was X born? Lyon", "expected exactly one tab (question<TAB>answer), found none"),
        (b"Where was X born?\t", "empty answer"),
        (b"Where was X born?\t  ", "empty answer"),
        (b"\tLyon", "empty question"),
        (b"", "empty line (expected question<TAB>answer)"),
    ],
)
def test_bad_row_names_file_line_and_problem(tmp_path, row, problem):
    path = _write(tmp_path, "bad.tsv", GOOD + GOOD + row + b"\n" + GOOD)
    assert str(_error(load_qa_tsv, path)) == f"{path}:3: {problem}"


def test_question_over_block_size(tmp_path):
    question = "Where was " + "X" * 20 + " born?"  # 36 characters
    path = _write(tmp_path, "long.tsv", GOOD + f"{question}\tLyon\n".encode())
    need = len(question) + len("Lyon") + 2
    assert need == 42
    load_qa_tsv(path, block_size=42)  # exactly fits
    err = _error(load_qa_tsv, path, block_size=41)
    assert str(err) == (
        f"{path}:2: question + MASK + answer + MASK is 42 characters (non-ASCII dropped), more than block_size=41"
    )
    # non-ASCII characters are dropped before encoding, so they do not count
    path2 = _write(tmp_path, "accents.tsv", "Where was Åé born?\tÖslo\n".encode())
    assert len(load_qa_tsv(path2, block_size=len("Where was  born?") + len("slo") + 2)) == 1


def test_questions_file_is_all_answered_or_all_bare(tmp_path):
    # a dev file that lost one tab would score that row as a wrong answer; it is an error naming the line
    mixed = _write(tmp_path, "dev.tsv", GOOD + GOOD + b"Where was C born?\n")
    assert str(_error(load_qa_tsv, mixed, require_answer=False)) == (
        f"{mixed}:3: no answer, but line 1 has one: every row is question<TAB>answer, or none is"
    )
    bare_first = _write(tmp_path, "test.tsv", b"Where was C born?\n" + GOOD)
    assert str(_error(load_qa_tsv, bare_first, require_answer=False)) == (
        f"{bare_first}:2: an answer, but line 1 has none: every row is question<TAB>answer, or none is"
    )
    bare = _write(tmp_path, "bare.tsv", b"Where was C born?\nWhere was D born?\t\n")
    assert load_qa_tsv(bare, require_answer=False)["answer"] == ["", ""]


def test_invalid_utf8_names_line_and_byte(tmp_path):
    path = _write(tmp_path, "bin.tsv", GOOD + GOOD + b"Where was J\xffrg born?\tBern\n")
    err = _error(load_qa_tsv, path)
    assert str(err) == f"{path}:3: invalid UTF-8: byte(s) ff at byte 12 of the line (invalid start byte)"
    wiki = _write(tmp_path, "wiki.txt", b"Ann. Ann was born in Paris .\nBob. Bob \xc3( .\n")
    assert str(_error(load_pretrain_corpus, wiki)) == (
        f"{wiki}:2: invalid UTF-8: byte(s) c3 at byte 10 of the line (invalid continuation byte)"
    )


def test_crlf_and_bom_are_accepted_and_normalised(tmp_path):
    path = _write(tmp_path, "crlf.tsv", b"\xef\xbb\xbfWhere was A born?\tParis\r\nWhere was B born?\t\"NA\"\r\n")
    ds = load_qa_tsv(path, block_size=128)
    assert ds["question"] == ["Where was A born?", "Where was B born?"]
    assert ds["answer"] == ["Paris", '"NA"']  # no BOM, no CR; quotes and "NA" are plain text
    qs = _write(tmp_path, "q.tsv", b"\xef\xbb\xbfWhere was A born?\r\nWhere was B born?")  # no final newline
    ds = load_qa_tsv(qs, require_answer=False)
    assert ds.to_dict() == {"question": ["Where was A born?", "Where was B born?"], "answer": ["", ""]}

    wiki = _write(tmp_path, "wiki.txt", b"\xef\xbb\xbfAnn. Ann was a poet .\r\nBob. Bob \"NA\" .\r\n")
    text, docs = load_pretrain_corpus(wiki)
    assert text == 'Ann. Ann was a poet .\nBob. Bob "NA" .\n'
    assert docs["text"] == ["Ann. Ann was a poet .", 'Bob. Bob "NA" .', ""]


def test_wiki_without_final_newline_has_no_empty_document(tmp_path):
    wiki = _write(tmp_path, "wiki.txt", b"Ann. A.\n\nBob. B.")
    text, docs = load_pretrain_corpus(wiki)
    assert docs["text"] == text.split("\n") == ["Ann. A.", "", "Bob. B."]
    assert docs["idx"] == [0, 1, 2]


def test_wiki_with_reserved_character(tmp_path):
    wiki = _write(tmp_path, "wiki.txt", "Ann. A.\nBob. B \u2047 .\n".encode())
    assert str(_error(load_pretrain_corpus, wiki)) == (
        f"{wiki}:2: contains the reserved MASK character '\u2047' (U+2047)"
    )
