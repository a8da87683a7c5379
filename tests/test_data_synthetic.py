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
GROUP_FILES = ["birth_dev_paraphrased.tsv", "birth_dev_single.tsv"]


def _read_all(d: Path) -> dict[str, bytes]:
    return {f: (d / f).read_bytes() for f in FILES if (d / f).exists()}


@pytest.fixture(scope="module")
def default_world(tmp_path_factory):
    out = tmp_path_factory.mktemp("synthetic")
    write_synthetic_corpus(out)
    return out


def test_layout_and_default_sizes(default_world):
    assert sorted(p.name for p in default_world.iterdir()) == sorted(FILES + GROUP_FILES)
    lines = {f: (default_world / f).read_text(encoding="utf-8").split("\n") for f in FILES + GROUP_FILES}
    # every file ends with a newline, as the real ones do
    assert all(content[-1] == "" for content in lines.values())
    counts = {f: len(content) - 1 for f, content in lines.items()}
    # 4 paraphrases for everyone but every third dev person (25 of 75), who is read in one sentence
    assert counts == {"wiki.txt": 4 * 225 + 25, "birth_places_train.tsv": 150, "birth_dev.tsv": 75,
                      "birth_test_inputs.tsv": 25, "birth_dev_paraphrased.tsv": 50, "birth_dev_single.tsv": 25}
    assert all("\t" not in q for q in lines["birth_test_inputs.tsv"][:-1])


def test_real_pipeline_loads_it(default_world):
    text, docs = load_pretrain_corpus(default_world / "wiki.txt")
    tok = CharTokenizer.from_corpus(text)
    tsvs = [load_qa_tsv(default_world / f, block_size=128) for f in FILES[1:3] + GROUP_FILES]
    test = load_qa_tsv(default_world / "birth_test_inputs.tsv", block_size=128, require_answer=False)
    assert len(docs) == 925 + 1  # the reference's split('\n') keeps the empty string after the last newline
    # only characters of its own wiki.txt: every prompt encodes with the wiki tokenizer
    for qa in (*tsvs, test):
        assert len(name_prompt_dataset(qa, tok, 128)) == len(qa)
    corr, _ = span_corruption_dataset(docs, tok, 128, seed=0)
    assert len(corr[:]["input_ids"]) == 926
    assert all(len(line) <= 100 for line in text.split("\n"))  # short lines: cheap to pretrain on


def test_people_paraphrases_and_questions(default_world):
    wiki = (default_world / "wiki.txt").read_text(encoding="utf-8").splitlines()
    rows = {f: [line.split("\t") for line in (default_world / f).read_text(encoding="utf-8").splitlines()]
            for f in FILES[1:] + GROUP_FILES}
    world = generate_synthetic_world()
    assert len({name for name, _, _ in world.people}) == 250  # distinct invented people
    people = rows["birth_places_train.tsv"] + rows["birth_dev.tsv"] + [[q[0], None] for q in rows[FILES[3]]]
    for (question, place), (name, true_place, bios) in zip(people, world.people, strict=True):
        assert question == f"Where was {name} born?"  # the files' order: train, dev, test (as in the real data)
        assert place in (None, true_place)
        mentions = [line for line in wiki if name in line]
        assert sorted(mentions) == sorted(bios)  # each paraphrase is one wiki.txt line, and nothing else names them
        assert all(true_place in line for line in bios)  # the birthplace appears in every paraphrase
        assert all(line.index(name) < line.index(true_place) for line in bios)  # the name first, then the place
        shapes = {line.replace(name, "N").split(true_place)[0] for line in bios}
        assert len(shapes) == len(bios)  # paraphrases, not copies: a different shape each
    # wiki.txt lists the first paraphrase of everyone first, in the files' order, then the second, ...
    assert [line for line in wiki[:250]] == [bios[0] for _, _, bios in world.people]
    # the two dev groups split dev: the single-sentence people are every third one
    dev = [q for q, _ in rows["birth_dev.tsv"]]
    single = [q for q, _ in rows["birth_dev_single.tsv"]]
    assert single == dev[2::3] and [q for q, _ in rows["birth_dev_paraphrased.tsv"]] == [
        q for i, q in enumerate(dev) if i % 3 != 2]
    assert all(len(bios) == 1 for name, _, bios in world.dev[2::3])
    assert all(len(bios) == 4 for i, (name, _, bios) in enumerate(world.dev) if i % 3 != 2)
    train_names = {q for q, _ in rows["birth_places_train.tsv"]}
    for row in rows["birth_dev.tsv"] + rows["birth_test_inputs.tsv"]:
        assert row[0] not in train_names  # dev/test people are only in wiki.txt, never in finetuning
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
    assert f"wrote {c / 'wiki.txt'} (925 lines)" in proc.stdout


def test_size_flags(tmp_path):
    write_synthetic_corpus(tmp_path, n_people=50, n_train=20, n_dev=10, n_test=5, n_places=8, seed=3,
                           bios_per_person=1, single_bio_every=0)
    counts = {f: len((tmp_path / f).read_text(encoding="utf-8").splitlines()) for f in FILES}
    assert counts == {"wiki.txt": 50, "birth_places_train.tsv": 20, "birth_dev.tsv": 10, "birth_test_inputs.tsv": 5}
    assert not (tmp_path / GROUP_FILES[0]).exists()  # one sentence for everyone: no groups to compare
    places = {line.split("\t")[1] for line in (tmp_path / "birth_places_train.tsv").read_text().splitlines()}
    assert len(places) <= 8
    world = generate_synthetic_world(n_people=1, n_train=1, n_dev=0, n_test=0)
    assert world.files()["birth_places_train.tsv"].startswith("Where was ")
    with pytest.raises(ValueError, match="more than n_people=10"):
        generate_synthetic_world(n_people=10, n_train=8, n_dev=2, n_test=1)
    with pytest.raises(ValueError, match="bios_per_person=7 must be between 1 and 6"):
        generate_synthetic_world(bios_per_person=7)
    two = generate_synthetic_world(n_people=20, n_train=10, n_dev=6, n_test=4, bios_per_person=2)
    assert [len(bios) for _, _, bios in two.dev] == [2, 2, 1, 2, 2, 1]
    every_second = generate_synthetic_world(n_people=20, n_train=10, n_dev=6, n_test=4, single_bio_every=2)
    assert [len(bios) for _, _, bios in every_second.dev] == [4, 1, 4, 1, 4, 1]
    with pytest.raises(ValueError, match="single_bio_every=-1 must be a non-negative integer"):
        generate_synthetic_world(single_bio_every=-1)


def test_cli_rejects_bad_sizes(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "data_scripts.synthetic", "--out_dir", str(tmp_path), "--n_people", "5"],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, check=False,
    )
    assert proc.returncode == 2
    assert "n_train + n_dev + n_test = 250 is more than n_people=5" in proc.stderr
    assert not (tmp_path / "wiki.txt").exists()
