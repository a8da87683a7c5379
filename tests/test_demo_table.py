"""The README's demo table is generated from results/demo_cpu.json, and the JSON holds what the table claims."""

from __future__ import annotations

import json
from pathlib import Path

from scripts.demo_table import DEFAULT_JSON, demo_table

ROOT = Path(__file__).resolve().parents[1]


def test_readme_holds_the_generated_demo_table():
    table = demo_table(json.loads(DEFAULT_JSON.read_text()))
    assert table in (ROOT / "README.md").read_text(), "regenerate it: python scripts/demo_table.py"


def test_the_demo_results_are_complete_runs():
    results = json.loads(DEFAULT_JSON.read_text())
    assert sorted(results["worlds"]) == ["0", "1", "2"]
    for seed, world in results["worlds"].items():
        assert f"--seed {seed}" in world["synthetic_args"]
        rows = {row["name"]: row for row in world["runs"]}
        assert set(rows) == {"london baseline", "no pretraining (learned)", "rope-causal-seed0"}
        for row in rows.values():
            dev, groups = row["dev"], row["dev_groups"]
            assert dev["total"] == 75 and groups["paraphrased"]["total"] + groups["single"]["total"] == 75
            assert dev["correct"] == groups["paraphrased"]["correct"] + groups["single"]["correct"]
        assert world["demo_seconds"] >= world["total_seconds"]


def test_the_table_changes_with_the_numbers():
    results = json.loads(DEFAULT_JSON.read_text())
    results["worlds"]["0"]["runs"][0]["dev"]["accuracy"] = 99.9
    assert "99.9%" in demo_table(results)
