"""One shape for every measured run: a results file is a study, a list of run records and the study's own notes.

    {"what": "...", "records": [RECORD, ...], ...}   # results/STUDY.json; other top-level keys are the study's notes

A record holds every key of FIELDS: who ran what (name, recipe, flags, variant, seeds, hardware, command, date)
and what it measured (scores per question set, seconds per stage, anything else under facts). Tables are queries
over records (experiments/tables.yaml), so a new study adds records, not table code.
"""

from __future__ import annotations

import json
from pathlib import Path

from chargpt.training.files import atomic_write_text

FIELDS = {  # key: (type, what it holds)
    "name": (str, "unique within the study"),
    "recipe": (str, "what was run, as a reader names it"),
    "flags": (str, "flags beyond the recipe ('' for none)"),
    "variant": (str, "positions/attention, or the baseline's name"),
    "seeds": (list, "the seeds of the run (several for a seed-stacked run)"),
    "hardware": (str, "the machine, as measured"),
    "scores": (dict, "question set -> {correct, total, accuracy, and any further counts over those questions}"),
    "seconds": (dict, "stage -> wall seconds"),
    "command": (str, "the command that made it ('' if several, see facts)"),
    "date": ((str, type(None)), "YYYY-MM-DD, null for runs recorded before records had dates"),
    "facts": (dict, "anything else measured or chosen: epochs, learning rate, probe recall, seed group, ..."),
}


def record(name: str, **values: object) -> dict:
    """A record with every field, the missing ones empty."""
    empty = {"recipe": "", "flags": "", "variant": "", "seeds": [], "hardware": "", "scores": {}, "seconds": {},
             "command": "", "date": None, "facts": {}}
    unknown = set(values) - set(empty)
    if unknown:
        raise ValueError(f"record {name!r}: unknown fields {sorted(unknown)}; known: {', '.join(FIELDS)}")
    return {"name": name, **empty, **values}


def score(correct: int, total: int) -> dict:
    """A record's score over `total` questions, as every study writes it (0.0 for none)."""
    return {"correct": correct, "total": total, "accuracy": round(100 * correct / total, 1) if total else 0.0}


def train_minutes(rec: dict) -> float:
    """Pretraining + finetuning wall minutes of a run record (0 for one that trained nothing, answering London)."""
    return rec["seconds"].get("train", 0.0) / 60


def check(records: list, source: Path | str) -> list[dict]:
    """`records` if each has exactly FIELDS with their types and a unique name; else one line naming the record."""
    names = set()
    for i, rec in enumerate(records):
        where = f"{source}: records[{i}]"
        if not isinstance(rec, dict) or set(rec) != set(FIELDS):
            keys = sorted(rec) if isinstance(rec, dict) else type(rec).__name__
            raise SystemExit(f"{where}: a record has exactly the keys {', '.join(FIELDS)}; found {keys}")
        bad = [key for key, (kind, _) in FIELDS.items() if not isinstance(rec[key], kind)]
        if bad:
            raise SystemExit(f"{where}: {bad[0]} should be {FIELDS[bad[0]][1]}, found {rec[bad[0]]!r}")
        if rec["name"] in names:
            raise SystemExit(f"{where}: a second record named {rec['name']!r}")
        names.add(rec["name"])
    return records


def read(path: Path) -> dict:
    """The study in `path`, its records checked."""
    try:
        study = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise SystemExit(f"{path}: cannot read it as JSON ({err})") from None
    if not isinstance(study, dict) or not isinstance(study.get("records"), list):
        raise SystemExit(f"{path}: not a study: expected a JSON object with a 'records' list")
    check(study["records"], path)
    return study


def write(path: Path, records: list[dict], **notes: object) -> None:
    """Write a study atomically, its records checked first (a bad record never reaches the file)."""
    check(records, path)
    atomic_write_text(path, json.dumps({**notes, "records": records}, indent=2, ensure_ascii=False) + "\n")
