"""experiments/miss_split.py: dev questions split by the kind of their person's line, misses by what was answered."""

from __future__ import annotations

import json

import pytest
from test_readme_commands import load

LONG = "x" * 90  # pushes a place past the recitation limit (96 characters of a 128 block)
WIKI = "\n".join([
    "Ann Lee. Ann Lee was born in Paris.",  # place in the line
    f"Bo Kim. Bo Kim, a painter {LONG}, was born in Rome.",  # place past the limit
    "Cy Doe. Cy Doe was a sailor.",  # place not in the line
    "Di Ray. Di Ray was born in New York City; she met Ann Lee.",  # Ann Lee in another line
])
DEV = "\n".join(["Where was Ann Lee born?\tParis", "Where was Bo Kim born?\tRome", "Where was Cy Doe born?\tLima",
                 "Where was Di Ray born?\tNew York City"])


def test_kinds_and_misses_are_counted_per_model(tmp_path, capsys):
    split = load("experiments/miss_split.py")
    (tmp_path / "wiki.txt").write_text(WIKI)
    (tmp_path / "birth_dev.tsv").write_text(DEV + "\n")
    first, second = tmp_path / "a.dev.predictions", tmp_path / "b.dev.predictions"
    first.write_text("Paris\nBo Kim\nMars\n\n")  # right; a span of the line; words not in it; nothing
    second.write_text("Paris\nRome\nLima\nNew York City\n")  # all right
    out = tmp_path / "split.json"
    split.main(["--data_dir", str(tmp_path), "--predictions", str(first), str(second), "--out", str(out),
                "--labels", "a", "b"])
    a, b = json.loads(out.read_text())["records"]  # a run record per model, a score per kind of question
    assert a["name"] == "a" and a["scores"]["all"] == {"correct": 1, "total": 4, "accuracy": 25.0}
    assert b["scores"]["all"] == {"correct": 4, "total": 4, "accuracy": 100.0}
    assert a["scores"]["place not in the person's line"] == {"correct": 0, "total": 1, "accuracy": 0.0}
    assert a["scores"]["place ends past the recitation limit"]["correct"] == 0
    assert a["scores"]["place in the line, within the recitation limit"] == {"correct": 1, "total": 2, "accuracy": 50.0}
    assert a["scores"]["place ends past the block"] == {"correct": 0, "total": 1, "accuracy": 0.0}  # Rome at 134
    assert a["scores"]["name in other people's lines too"]["correct"] == 1  # Ann Lee, in Di Ray's line
    assert a["facts"]["misses_answered"] == {"nothing": 1, "a wrong span of the line": 1, "words not in the line": 1}
    printed = capsys.readouterr().out
    assert "| all | 4 | 1 (25.0%) | 4 (100.0%) | 62.5% |" in printed and a["facts"]["predictions"] == str(first)
    split.main(["--data_dir", str(tmp_path), "--predictions", str(second), "--out", str(out),
                "--recitation_chars", "140"])  # models that recite 140 characters: Rome is within their limit
    study = json.loads(out.read_text())
    assert study["recitation_chars"] == 140
    assert study["records"][0]["scores"]["place in the line, within the recitation limit"]["total"] == 3
    assert study["records"][0]["scores"]["place ends past the recitation limit"]["total"] == 0
    assert study["records"][0]["scores"]["place ends past the block"]["total"] == 1  # Rome ends at 134 of 128
    split.main(["--data_dir", str(tmp_path), "--predictions", str(second), "--out", str(out), "--block_size", "160"])
    study = json.loads(out.read_text())  # a 160 block holds Rome (134), its default limit (120) does not
    assert (study["block_size"], study["recitation_chars"]) == (160, 120)
    assert study["records"][0]["scores"]["place ends past the block"]["total"] == 0
    assert study["records"][0]["scores"]["place ends past the recitation limit"]["total"] == 1
    with pytest.raises(SystemExit, match="--block_size 0: a positive number"):
        split.main(["--data_dir", str(tmp_path), "--predictions", str(second), "--block_size", "0"])
    with pytest.raises(SystemExit, match="--recitation_chars 0: a positive number"):
        split.main(["--data_dir", str(tmp_path), "--predictions", str(second), "--recitation_chars", "0"])
    with pytest.raises(SystemExit, match="--labels: 2 distinct names"):
        split.main(["--data_dir", str(tmp_path), "--predictions", str(first), str(second), "--labels", "a", "a"])
    with pytest.raises(SystemExit, match="3 predictions for 4 dev questions"):
        first.write_text("Paris\nRome\nLima")
        split.main(["--data_dir", str(tmp_path), "--predictions", str(first)])
    (tmp_path / "birth_dev.tsv").write_text("Where was Ann Lee born?\tParis\nno tab here\n")
    with pytest.raises(SystemExit, match=r"^error: .*birth_dev.tsv:2: "):
        split.main(["--data_dir", str(tmp_path), "--predictions", str(second)])


def test_pair_positions_counts_places_by_their_comma_pair_and_death_date(tmp_path, capsys):
    """experiments/pair_positions.py: what --first_of_pair, --birth_before_death and --after_born answer by, counted
    over a question file."""
    positions = load("experiments/pair_positions.py")
    (tmp_path / "wiki.txt").write_text("\n".join([
        "Ann Lee. Ann Lee was born in Perth, Scotland.", "Bo Kim. Bo Kim was born in Moulins, France.",
        "Cy Doe. Cy Doe was born in Oslo, 1950.", "Di Ray. Di Ray was a sailor.",
        "Ed Fox. Ed Fox (1898 Kiev - 25 April 1931 Paris).", "Gil Hu. Gil Hu (1898 Kiev - 25 April 1931 Paris).",
        "Hal Ng. Hal Ng (born 1975 in Rome) is an actor.", "Ida Wu. Ida Wu (born 1975 in Rome) is an actor."]))
    (tmp_path / "birth_places_train.tsv").write_text("Where was Ann Lee born?\tPerth\nWhere was Bo Kim born?\tFrance\n"
                                                     "Where was Cy Doe born?\tOslo\nWhere was Di Ray born?\tLima\n"
                                                     "Where was Ed Fox born?\tKiev\nWhere was Gil Hu born?\tParis\n"
                                                     "Where was Hal Ng born?\tRome\nWhere was Ida Wu born?\tItaly\n")
    positions.main(["--data_dir", str(tmp_path)])
    assert json.loads(capsys.readouterr().out) == {"questions": 8, "first": 1, "second": 1, "before_death": 1,
                                                   "after_death": 1, "after_born": 3, "not_after_born": 2}
    with pytest.raises(SystemExit, match="birth_dev.tsv"):
        positions.main(["--data_dir", str(tmp_path), "--questions", "birth_dev.tsv"])
