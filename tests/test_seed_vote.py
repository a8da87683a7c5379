"""experiments/seed_vote.py: several seeds' answers as one, by majority, ties to the first (best held-out) file."""

from __future__ import annotations

import json

import pytest
from test_readme_commands import load

DEV = "\n".join(["Where was Ann Lee born?\tParis", "Where was Bo Kim born?\tRome", "Where was Cy Doe born?\tLima",
                 "Where was Di Ray born?\tOslo"])


def test_the_majority_answers_and_a_tie_goes_to_the_first_file(tmp_path, capsys):
    vote = load("experiments/seed_vote.py")
    (tmp_path / "birth_dev.tsv").write_text(DEV + "\n")
    files = []
    for i, answers in enumerate(["Paris\nRome\nLima\nBergen", "Paris\nMilan\nLyon\nOslo", "Nice\nRome\nKiev\nOslo"]):
        files.append(tmp_path / f"s{i}.dev.predictions")
        files[-1].write_text(answers + "\n")
        (tmp_path / f"s{i}.test.predictions").write_text(answers.replace("Paris", "Bern") + "\n")
    out = tmp_path / "vote.json"
    argv = ["--data_dir", str(tmp_path), "--name", "three", "--seeds", "0", "1", "2", "--predictions", *map(str, files),
            "--test_predictions", *(str(f).replace(".dev.", ".test.") for f in files),
            "--write_predictions", str(tmp_path / "voted"), "--out", str(out), "--hardware", "2 cores"]
    vote.main(argv)
    # Paris (2 of 3), Rome (2 of 3), Lima (no majority: the first file's), Oslo (2 of 3): all four right
    assert (tmp_path / "voted.dev.predictions").read_text() == "Paris\nRome\nLima\nOslo\n"
    assert (tmp_path / "voted.test.predictions").read_text() == "Bern\nRome\nLima\nOslo\n"
    (rec,) = json.loads(out.read_text())["records"]
    assert rec["scores"]["dev"] == {"correct": 4, "total": 4, "accuracy": 100.0} and rec["seeds"] == [0, 1, 2]
    assert rec["hardware"] == "2 cores"
    assert [m["correct"] for m in rec["facts"]["members"]] == [3, 2, 2]
    assert rec["facts"]["agreement"] == [{"backers": 2, "questions": 3, "right": 3},
                                         {"backers": 1, "questions": 1, "right": 1}]
    assert rec["facts"]["any_seed_right"]["correct"] == 4
    assert "dev 100.0% by vote of 3; best member 75.0%" in capsys.readouterr().out
    files.insert(0, files.pop())  # the third file first: its answer wins the tie, and a rerun replaces the record
    vote.main(argv[:9] + [*map(str, files), "--out", str(out)])
    (rec,) = json.loads(out.read_text())["records"]
    assert rec["scores"]["dev"]["correct"] == 3  # Kiev for Cy Doe


def test_bad_input_is_one_line(tmp_path):
    vote = load("experiments/seed_vote.py")
    (tmp_path / "birth_dev.tsv").write_text(DEV + "\n")
    a, b = tmp_path / "a.dev.predictions", tmp_path / "b.dev.predictions"
    a.write_text("Paris\nRome\nLima\nOslo\n")
    b.write_text("Paris\nRome\n")
    base = ["--data_dir", str(tmp_path), "--name", "x", "--predictions"]
    with pytest.raises(SystemExit, match="differ in length"):
        vote.main([*base, str(a), str(b)])
    with pytest.raises(SystemExit, match="at least two files"):
        vote.main([*base, str(a)])
    with pytest.raises(SystemExit, match="missing.dev.predictions: file not found"):
        vote.main([*base, str(a), str(tmp_path / "missing.dev.predictions")])
    with pytest.raises(SystemExit, match="one file per --predictions file"):
        vote.main([*base, str(a), str(a), "--test_predictions", str(a)])
    (tmp_path / "latin1.dev.predictions").write_bytes("Zürich\n".encode("latin-1"))
    with pytest.raises(SystemExit, match=r"latin1.dev.predictions: cannot read it as UTF-8 text"):
        vote.main([*base, str(a), str(tmp_path / "latin1.dev.predictions")])
    (tmp_path / "birth_dev.tsv").write_text("Where was Ann Lee born?\tParis\nno tab here\n")
    with pytest.raises(SystemExit, match=r"^error: .*birth_dev.tsv:2: "):
        vote.main([*base, str(a), str(a)])
