"""Atomic writes: a reader (or a run stopped halfway) sees the old file or the new one, never half of one."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["atomic_write_bytes", "atomic_write_json", "atomic_write_text", "replace_folder"]


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write `data` to a temporary file next to `path`, flush it to disk, then rename it over `path`.

    The parent folder is created if needed; on any error the temporary file is removed and `path` is untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the file the mode a plain open() would
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """`atomic_write_bytes` of UTF-8 `text` (written as is: no newline translation)."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, data: Any, indent: int | None = 2) -> None:
    """`atomic_write_text` of `data` as JSON, newline-terminated."""
    atomic_write_text(path, json.dumps(data, indent=indent) + "\n")


def replace_folder(tmp: str | os.PathLike, final: str | os.PathLike) -> None:
    """Move the finished folder `tmp` to `final`, replacing an older `final`: write a folder's files into `tmp`
    first, so `final` is never a half-written folder."""
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
