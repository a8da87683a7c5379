"""An evaluation's files: its predictions file (one line per question) and its records beside it
(``<predictions>.records.jsonl``; the fields: `chargpt.evaluation.records`), read and written.

Its own module, needing neither torch nor the model, so the tools that only read an evaluation's files
(`chargpt/evaluation/abstention.py`, the recipes' summaries) start in a second.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from chargpt.training.files import atomic_write_text
from data_scripts.textfiles import DataFileError, read_text_file

__all__ = ["REQUIRED", "as_line", "check_records_match", "file_lines", "read_predictions", "read_records",
           "records_path_for", "write_records"]

REQUIRED = ("line", "question", "gold", "answer", "prediction", "abstained", "correct", "confidence", "grounded")


def records_path_for(predictions_path: str | os.PathLike) -> Path:
    """Where an evaluation's records live by default: beside its predictions file."""
    path = Path(predictions_path)
    return path.with_name(path.name + ".records.jsonl")


def write_records(path: str | os.PathLike, records: Sequence[dict[str, Any]]) -> None:
    """JSON Lines, written atomically (a crash leaves the old file or none)."""
    atomic_write_text(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))


def file_lines(text: str) -> list[str]:
    """Lines of a newline-terminated file; not `splitlines()`, which also splits at U+2028 and the like (wiki.txt
    text inside a record may hold them)."""
    lines = text.split("\n")
    return lines[:-1] if lines[-1] == "" else lines


def as_line(prediction: str) -> str:
    """A prediction as its line of a predictions file: a line break the model generated (wiki.txt's vocabulary
    holds the newline) becomes a space, so the file keeps one line per question. Scores use the prediction itself."""
    return prediction.replace("\r", " ").replace("\n", " ")


def read_predictions(path: str | os.PathLike) -> list[str]:
    """A predictions file's lines; not read_text_file: a file of abstentions only is blank lines, and that is a
    valid predictions file."""
    try:
        return file_lines(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as err:
        raise DataFileError(path, None, f"cannot read it ({getattr(err, 'strerror', None) or err})") from None


def read_records(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The records of one evaluation; a line that is not a record is a `DataFileError` naming the file and line."""
    records = []
    for number, line in enumerate(file_lines(read_text_file(path)), start=1):
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise DataFileError(path, number, f"not a JSON record ({err.msg}, column {err.colno})") from None
        missing = [key for key in REQUIRED if not isinstance(record, dict) or key not in record]
        if missing:
            raise DataFileError(path, number, f"not an evaluation record (no {', '.join(missing)}); written by "
                                              "evaluate_birthplace.py?")
        records.append(record)
    return records


def check_records_match(
    records_path: str | os.PathLike, records: Sequence[dict[str, Any]], predictions_path: str | os.PathLike
) -> None:
    """Refuse records made for another predictions file: same number of lines, the same prediction on each."""
    predictions = read_predictions(predictions_path)
    hint = "records of another evaluation?"
    if len(records) != len(predictions):
        raise DataFileError(records_path, None, f"{len(records)} records but {predictions_path} has "
                                                f"{len(predictions)} predictions: {hint}")
    for number, (record, prediction) in enumerate(zip(records, predictions, strict=True), start=1):
        if as_line(record["prediction"]) != prediction:
            raise DataFileError(records_path, number, f"prediction {record['prediction']!r} but {predictions_path}:"
                                                      f"{number} is {prediction!r}: {hint}")
