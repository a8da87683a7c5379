"""Load the pretraining corpus and the question/answer TSVs into `datasets.Dataset`s, validating on the way.

Every problem with a data file is a `DataFileError` whose message is ONE line, ``<path>:<line>: <problem>``
(``<path>: <problem>`` when no line applies), raised before `datasets` ever sees the file: missing or empty
file, undecodable UTF-8, a TSV row without exactly one tab, an empty question or answer, a row too long for the
block size. A UTF-8 byte-order mark is dropped and CRLF (or lone CR) line endings become LF, the same
"universal newlines" that Python's text mode and the `datasets` text loader apply.

The rows themselves are read by `datasets`' own packaged loaders (``text`` for wiki.txt, ``csv`` with a tab
delimiter for the TSVs), and the result is checked against the validated parse, so the two can never silently
disagree (e.g. about quoting).
"""

from __future__ import annotations

import contextlib
import csv
import os
from collections.abc import Iterator

import datasets

from modeling_chargpt import MASK_CHAR, PAD_CHAR

from .textfiles import DataFileError, read_text_file

__all__ = ["ascii_only", "load_pretrain_corpus", "load_qa_tsv"]


def ascii_only(text: str) -> str:
    """Drop every non-ASCII character, as the reference `NameDataset` does (``'José'`` -> ``'Jos'``)."""
    return text.encode("ascii", errors="ignore").decode("ascii")


@contextlib.contextmanager
def _no_progress_bar() -> Iterator[None]:
    """`datasets` draws a "Generating train split" bar for every new file: noise, and it would come before an error
    line (a bad row found later), which must be all a user sees."""
    enabled = datasets.utils.logging.is_progress_bar_enabled()
    datasets.utils.logging.disable_progress_bar()
    try:
        yield
    finally:
        if enabled:
            datasets.utils.logging.enable_progress_bar()


def _lines(text: str) -> list[str]:
    """Lines of a normalised file; a final newline terminates the last line rather than starting an empty one."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


# ---------------------------------------------------------------------------------------------------------------
# wiki.txt
# ---------------------------------------------------------------------------------------------------------------


def load_pretrain_corpus(path: str | os.PathLike) -> tuple[str, datasets.Dataset]:
    """Load the pretraining corpus: its full normalised text (for the tokenizer) and a Dataset of documents.

    Documents are exactly the reference's ``full_text.split('\\n')``: one per line, and, because wiki.txt ends
    with a newline, a final EMPTY document (2937 lines -> 2938 documents, as ``len(CharCorruptionDataset)``).
    Span corruption turns that empty document into ``MASK MASK PAD...``; it is kept so an epoch has the
    reference's length and content. Columns: ``text`` (str) and ``idx`` (int, the document's index, which
    seeds its corruption draws).
    """
    text = read_text_file(path)
    for special, name in ((PAD_CHAR, "PAD"), (MASK_CHAR, "MASK")):
        pos = text.find(special)
        if pos >= 0:
            line = text.count("\n", 0, pos) + 1
            raise DataFileError(
                path, line, f"contains the reserved {name} character {special!r} (U+{ord(special):04X})"
            )
    expected = text.split("\n")
    with _no_progress_bar():
        ds = datasets.load_dataset(
            "text", data_files=str(path), encoding="utf-8-sig", keep_linebreaks=False, split="train"
        )
    if len(expected) == len(ds) + 1 and expected[-1] == "":
        # `datasets` treats the final newline as a terminator; the reference's split('\n') yields one more "".
        ds = ds.add_item({"text": ""})
    _check_same(path, expected, ds["text"])
    ds = ds.add_column("idx", list(range(len(ds))))
    return text, ds


def _check_same(path: str | os.PathLike, expected: list, got: list) -> None:
    if len(expected) != len(got):
        raise DataFileError(
            path, None, f"datasets read {len(got)} rows but the file has {len(expected)}; unexpected line endings?"
        )
    for i, (a, b) in enumerate(zip(expected, got, strict=True)):
        if a != b:
            raise DataFileError(path, i + 1, f"datasets parsed this line as {b!r}, expected {a!r}")


# ---------------------------------------------------------------------------------------------------------------
# question<TAB>answer files
# ---------------------------------------------------------------------------------------------------------------


def prompt_length(question: str, answer: str) -> int:
    """Positions a name prompt needs: question + MASK + answer + MASK, after dropping non-ASCII characters."""
    return len(ascii_only(question)) + len(ascii_only(answer)) + 2


def load_qa_tsv(
    path: str | os.PathLike, block_size: int | None = None, require_answer: bool = True
) -> datasets.Dataset:
    """Load a ``question<TAB>answer`` file (birth_places_train.tsv, birth_dev.tsv) or, with
    ``require_answer=False``, a file of bare questions (birth_test_inputs.tsv) into a Dataset with columns
    ``question`` and ``answer`` (``""`` where a row has none).

    Every row must be ``question<TAB>answer`` with exactly one tab and neither part empty. With
    ``require_answer=False`` the rows may also all be bare questions, but not some of them: a dev file with one
    lost tab would otherwise score that row as a wrong answer. With ``block_size``, the name prompt built
    from the row (question + MASK + answer + MASK, non-ASCII characters dropped as the reference does) must fit
    in it. The first violation raises `DataFileError` naming the file and line.
    """
    text = read_text_file(path)
    questions: list[str] = []
    answers: list[str] = []
    for lineno, line in enumerate(_lines(text), start=1):
        if not line.strip():
            raise DataFileError(path, lineno, "empty line (expected question<TAB>answer)")
        n_tabs = line.count("\t")
        if n_tabs > 1:
            raise DataFileError(path, lineno, f"expected exactly one tab (question<TAB>answer), found {n_tabs}")
        if n_tabs == 0:
            if require_answer:
                raise DataFileError(path, lineno, "expected exactly one tab (question<TAB>answer), found none")
            question, answer = line, ""
        else:
            question, answer = line.split("\t")
            if require_answer and not answer.strip():
                raise DataFileError(path, lineno, "empty answer")
        if not question.strip():
            raise DataFileError(path, lineno, "empty question")
        answered = bool(answer.strip())
        if answers and bool(answers[0].strip()) != answered:
            raise DataFileError(path, lineno, f"{'an answer' if answered else 'no answer'}, but line 1 has "
                                f"{'none' if answered else 'one'}: every row is question<TAB>answer, or none is")
        if block_size is not None:
            need = prompt_length(question, answer)
            if need > block_size:
                raise DataFileError(
                    path,
                    lineno,
                    f"question + MASK + answer + MASK is {need} characters (non-ASCII dropped), "
                    f"more than block_size={block_size}",
                )
        questions.append(question)
        answers.append(answer)

    features = datasets.Features({"question": datasets.Value("string"), "answer": datasets.Value("string")})
    with _no_progress_bar():
        ds = datasets.load_dataset(
            "csv",
            data_files=str(path),
            delimiter="\t",
            column_names=["question", "answer"],
            quoting=csv.QUOTE_NONE,  # quotes are ordinary characters in these files
            keep_default_na=False,  # an answer "NA" or "null" stays a string
            na_filter=False,
            skip_blank_lines=False,
            encoding="utf-8-sig",
            features=features,
            split="train",
        )
    _check_same(path, questions, ds["question"])
    _check_same(path, answers, ds["answer"])
    return ds
