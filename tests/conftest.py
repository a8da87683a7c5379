"""Shared test fixtures. The real data lives outside the repository, at ../shared/data from its root."""

from __future__ import annotations

from pathlib import Path

import pytest

DATA_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The real CS224N data directory; a missing directory FAILS the test (never a skip)."""
    if not DATA_DIR.is_dir():
        pytest.fail(
            f"real data directory {DATA_DIR} not found: the tests need wiki.txt and the birth_*.tsv files "
            f"at ../shared/data relative to the repository root"
        )
    return DATA_DIR
