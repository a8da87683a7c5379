"""The synthetic world: real-data layout, deterministic per seed, loadable by the same pipeline."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from data_scripts import (
    generate_synthetic_world,
    load_pretrain_corpus,
    load_qa_tsv,
    name_prompt_dataset,
    span_corruption_dataset,
    write_synthetic_corpus,
)
from modeling_chargpt import CharTokenizer

ROOT = Path(__file__).resolve().parents[1]
FILES = ["wiki.txt", "birth_places_train.tsv", "birth_dev.tsv", "birth_test_inputs.tsv"]


def _read_all(d: Path) -> dict[str, bytes]:
    return {f: (d / f).read_bytes() for f in FILES}


@pytest.fixture(scope="module")
def default_world(tmp_path_factory):
    out = tmp_path_factory.mktemp("synthetic")
    write_synthetic_corpus(out)
    return out


def test_layout_and_default_sizes(default_world):
    assert sorted(p.name for p in default_world.iterdir()) == sorted(FILES)
    wiki = (default_world / "wiki.txt").read_text(encoding="utf-8").split("\n")
    train = (default_world / "birth_places_train.tsv").read_text(encoding="utf-8").split("\n")
    dev = (default_world / "birth_dev.tsv").read_text(encoding="utf-8").split("\n")
    test = (default_world / "birth_test_inputs.tsv").read_text(encoding="utf-8").split("\n")
    # every file ends with a newline, as the real ones do
    assert [wiki[-1], train[-1], dev[-1], test[-1]] == ["", "", "", ""]
    assert (len(wiki) - 1, len(train) - 1, len(dev) - 1, len(test) - 1) == (300, 150, 75, 75)
    assert all("\t" not in q for q in test[:-1])


def test_real_pipeline_loads_it(default_world):
    text, docs = load_pretrain_corpus(default_world / "wiki.txt")
    tok = CharTokenizer.from_corpus(text)
    train = load_qa_tsv(default_world / "birth_places_train.tsv", block_size=128)
    dev = load_qa_tsv(default_world / "birth_dev.tsv", block_size=128)
    test = load_qa_tsv(default_world / "birth_test_inputs.tsv", block_size=128, require_answer=False)
    assert (len(docs), len(train), len(dev), len(test)) == (301, 150, 75, 75)
    # only characters of its own wiki.txt: every prompt encodes with the wiki tokenizer
    for qa in (train, dev, test):
        assert len(name_prompt_dataset(qa, tok, 128)) == len(qa)
    corr, _ = span_corruption_dataset(docs, tok, 128, seed=0)
    assert len(corr[:]["input_ids"]) == 301
    assert all(len(line) <= 120 for line in text.split("\n"))  # short lines: cheap to pretrain on


def test_people_places_and_questions(default_world):
    wiki = (default_world / "wiki.txt").read_text(encoding="utf-8").splitlines()
    rows = {}
    for f in FILES[1:]:
        rows[f] = [line.split("\t") for line in (default_world / f).read_text(encoding="utf-8").splitlines()]
    names = [line.split(". ", 1)[0] for line in wiki]
    assert len(set(names)) == 300  # distinct invented people
    people = rows["birth_places_train.tsv"] + rows["birth_dev.tsv"] + [[q[0], None] for q in rows[FILES[3]]]
    for i, (question, place) in enumerate(people):
        name = names[i]  # wiki.txt order: train, then dev, then test people (as in the real data)
        assert question == f"Where was {name} born?"
        sentence = wiki[i].split(". ", 1)[1]
        assert wiki[i].startswith(f"{name}. ")
        if place is not None:
            assert place in sentence  # the birthplace appears in the person's sentence
    train_names = {q for q, _ in rows["birth_places_train.tsv"]}
    for row in rows["birth_dev.tsv"] + rows["birth_test_inputs.tsv"]:
        assert row[0] not in train_names  # dev/test people are only in wiki.txt, never in finetuning
    templates = Counter(sentence.split(" ")[0] for sentence in (line.split(". ", 1)[1] for line in wiki))
    assert len(templates) >= 5  # varied sentence shapes
    # guessing the most common training place, or the reference's "London", is a weak baseline on dev
    counts = Counter(p for _, p in rows["birth_places_train.tsv"])
    top = counts.most_common(1)[0][0]
    assert sum(p == top for _, p in rows["birth_dev.tsv"]) / 75 <= 0.15
    assert sum(p == "London" for _, p in rows["birth_dev.tsv"]) / 75 <= 0.15
    assert counts["London"] >= 3 and len(counts) == 20


def test_deterministic_per_seed_across_processes(tmp_path, default_world):
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    write_synthetic_corpus(a, seed=0)
    assert _read_all(a) == _read_all(default_world)
    write_synthetic_corpus(b, seed=1)
    assert all(_read_all(a)[f] != _read_all(b)[f] for f in FILES)
    # the CLI in a fresh interpreter with another hash seed writes the same bytes
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "data_scripts.synthetic", "--out_dir", str(c), "--seed", "0"],
        cwd=ROOT, env=env, capture_output=True, text=True, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "RuntimeWarning" not in proc.stderr
    assert _read_all(c) == _read_all(a)
    assert f"wrote {c / 'wiki.txt'} (300 lines)" in proc.stdout


def test_size_flags(tmp_path):
    write_synthetic_corpus(tmp_path, n_people=50, n_train=20, n_dev=10, n_test=5, n_places=8, seed=3)
    counts = {f: len((tmp_path / f).read_text(encoding="utf-8").splitlines()) for f in FILES}
    assert counts == {"wiki.txt": 50, "birth_places_train.tsv": 20, "birth_dev.tsv": 10, "birth_test_inputs.tsv": 5}
    places = {line.split("\t")[1] for line in (tmp_path / "birth_places_train.tsv").read_text().splitlines()}
    assert len(places) <= 8
    world = generate_synthetic_world(n_people=1, n_train=1, n_dev=0, n_test=0)
    assert world.files()["birth_places_train.tsv"].startswith("Where was ")
    with pytest.raises(ValueError, match="more than n_people=10"):
        generate_synthetic_world(n_people=10, n_train=8, n_dev=2, n_test=1)


def test_cli_rejects_bad_sizes(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "data_scripts.synthetic", "--out_dir", str(tmp_path), "--n_people", "5"],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, check=False,
    )
    assert proc.returncode == 2
    assert "n_train + n_dev + n_test = 300 is more than n_people=5" in proc.stderr
    assert not (tmp_path / "wiki.txt").exists()
