"""The errors users hit first: one line naming the file (and line), a non-zero exit, no traceback, nothing
half-written. Plus the atomic-write helper that the "nothing half-written" rests on."""

from __future__ import annotations

import json
import os

import pytest

from training import atomic_write_json, atomic_write_text


def test_atomic_write_replaces_whole_files_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "sub" / "results.json"
    atomic_write_json(path, {"a": 1})  # creates the folder
    assert json.loads(path.read_text()) == {"a": 1} and path.read_text().endswith("\n")
    atomic_write_text(path, "second\n")
    assert path.read_text() == "second\n"
    assert os.listdir(path.parent) == ["results.json"]


def test_a_failed_atomic_write_keeps_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "predictions.txt"
    path.write_text("old\n")

    def crash(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="disk full"):
        atomic_write_text(path, "new\n" * 1000)
    assert path.read_text() == "old\n"
    assert os.listdir(tmp_path) == ["predictions.txt"]  # the temporary file is gone too
    with pytest.raises(TypeError):
        atomic_write_json(path, {"not json": object()})
    assert path.read_text() == "old\n" and os.listdir(tmp_path) == ["predictions.txt"]
