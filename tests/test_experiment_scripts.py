"""run_experiments.py (snapshots included) and collect_results.py, as the README runs them, on a tiny world."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from data_scripts import write_synthetic_corpus

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
       "OMP_NUM_THREADS": "1"}


def run_ok(cmd: list[str]) -> str:
    proc = subprocess.run(cmd, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def test_snapshots_become_rows_and_a_plot(tmp_path):
    world = tmp_path / "world"
    write_synthetic_corpus(world, n_people=80, n_train=40, n_dev=20, n_test=20, seed=0)
    out = tmp_path / "exp"
    run_ok([sys.executable, "scripts/run_experiments.py", "--data_dir", str(world), "--out_dir", str(out),
            "--recipe", "demo", "--variants", "learned", "--pretrain_epochs", "2", "--save_epochs", "1",
            "--skip_baselines", "--threads", "1"])
    summary = json.loads((out / "results.json").read_text())
    rows = {row["name"]: row for row in summary["runs"]}
    assert set(rows) == {"learned-causal-seed0", "learned-causal-seed0-epoch-1"}
    final, snap = rows["learned-causal-seed0"], rows["learned-causal-seed0-epoch-1"]
    assert final["pretrain_epochs"] == 2.0 and snap["pretrain_epochs"] == 1 and snap["snapshot_of_epochs"] == 2.0
    assert 0 < snap["pretrain_seconds"] < final["pretrain_seconds"]
    for row in (final, snap):
        assert row["dev"]["total"] == 20 and 0 <= row["dev"]["correct"] <= 20
    assert (out / "learned-causal-seed0.test.predictions").read_text().count("\n") == 20
    assert summary["command"].startswith("python scripts/run_experiments.py")

    table = run_ok([sys.executable, "scripts/collect_results.py", str(out / "results.json"), "--label_from_dir",
                    "--json", str(tmp_path / "acc.json"), "--plot", str(tmp_path / "acc.png")])
    collected = json.loads((tmp_path / "acc.json").read_text())["runs"]
    assert [r["pretrain_epochs"] for r in collected] == [1, 2.0]
    assert (tmp_path / "acc.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "| exp | learned/causal | 0 | 1 |" in table
