"""Shared test fixtures. The real data lives outside the repository, at ../shared/data from its root."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from data_scripts import write_synthetic_corpus

# Under `pytest -n N` (pytest-xdist) the N workers share the cores: each worker, and the processes its tests start,
# takes its share of the threads instead of all of them (on 2 cores, 2 workers of 2 threads each ran slower).
if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
    _threads = max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))
    os.environ["OMP_NUM_THREADS"] = str(_threads)
    torch.set_num_threads(_threads)

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


@pytest.fixture(scope="session")
def wiki(tmp_path_factory) -> Path:
    """wiki.txt of a 40-person synthetic world (its 20 training, 10 dev and 10 test questions beside it), for tiny
    training runs; read only (a module with its own `wiki` fixture overrides this one)."""
    out = tmp_path_factory.mktemp("world")
    write_synthetic_corpus(out, n_people=40, n_train=20, n_dev=10, n_test=10, seed=0)
    return out / "wiki.txt"


@pytest.fixture
def refuse_host_reads(monkeypatch):
    """Call it to make every read of a tensor value on the host (`.item()`, `int(t)`, `if t:`, ...) raise: on a GPU
    each such read waits for the device, so code that must not synchronise is run under it. `monkeypatch.undo()`
    lifts it."""

    def refuse(*args, **kwargs):
        raise AssertionError("a tensor value was read on the host")

    def install() -> None:
        for name in ("item", "tolist", "numpy", "__bool__", "__int__", "__float__", "__index__"):
            monkeypatch.setattr(torch.Tensor, name, refuse)

    return install


@pytest.fixture(autouse=True)
def _torch_threads_kept():
    """Each test ends with torch's threads as it found them: a script's main run in-process sets them for the whole
    process (the benchmarks' --threads), and a worker left with 2 threads on 2 shared cores ran every later
    in-process test slower (tiny ops wait on a thread the other worker's process holds: 37 s instead of 6 s for the
    recite recipe's run)."""
    threads = torch.get_num_threads()
    yield
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
