"""Reading a data file strictly, and the one-line error every data problem becomes.

Its own module, with nothing heavier than the standard library, so tools that only read files (records, results)
start without importing torch, transformers or datasets.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["DataFileError", "read_text_file"]

_BOM = "\ufeff"


class DataFileError(ValueError):
    """A data file that cannot be used; ``str(err)`` is one line ``<path>:<line>: <problem>``."""

    def __init__(self, path: str | os.PathLike, line: int | None, problem: str) -> None:
        self.path = str(path)
        self.line = line
        self.problem = problem
        where = self.path if line is None else f"{self.path}:{line}"
        super().__init__(f"{where}: {problem}")

    def __reduce__(self):  # picklable (e.g. raised inside a DataLoader worker)
        return (type(self), (self.path, self.line, self.problem))


def read_text_file(path: str | os.PathLike) -> str:
    """Read a UTF-8 file strictly and normalise it: no BOM, ``\\n`` line endings only.

    Raises `DataFileError` for a missing path, a directory, an empty file (nothing but a BOM / whitespace),
    or invalid UTF-8 (naming the line and the byte).
    """
    p = Path(path)
    if not p.exists():
        raise DataFileError(p, None, "file not found")
    if p.is_dir():
        raise DataFileError(p, None, "is a directory, expected a file")
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise DataFileError(p, None, f"cannot read file ({e.strerror or e})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        column = e.start - (raw.rfind(b"\n", 0, e.start) + 1) + 1
        bad = raw[e.start : e.end].hex(" ")
        problem = f"invalid UTF-8: byte(s) {bad} at byte {column} of the line ({e.reason})"
        raise DataFileError(p, line, problem) from None
    if text.startswith(_BOM):
        text = text[1:]
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if not text.strip():
        raise DataFileError(p, None, "file is empty")
    return text
