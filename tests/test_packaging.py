"""`pip install .` gives a self-sufficient package: the wheel holds the metric and the scripts, and its installed
commands score the London baseline and a saved model from another folder, with the repository out of reach.

The wheel is built once per run, offline, with this environment's setuptools, and installed without dependencies
into a bare folder; torch and the rest come from this environment's site-packages.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
import torch

from modeling_chargpt import CharGPTConfig, CharGPTForCausalLM, CharTokenizer
from modeling_chargpt.answering import predict_birthplaces

ROOT = Path(__file__).resolve().parents[1]
TOP_LEVEL = ("modeling_chargpt", "data_scripts", "chargpt",
             "train_pretrain", "train_finetune", "evaluate_birthplace")
COMMANDS = {"chargpt-pretrain": "train_pretrain:cli", "chargpt-finetune": "train_finetune:cli",
            "chargpt-evaluate": "evaluate_birthplace:cli"}
QUESTIONS = ["Where was Ada Lovelace born?", "Where was Bo Diddley born?", "Where was Cy Twombly born?",
             "Where was Di Stefano born?"]


def run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kwargs)
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, Path]:
    """(the wheel, the folder it is installed into)."""
    tmp = tmp_path_factory.mktemp("packaging")
    src = tmp / "src"  # a copy: the build writes build/ and *.egg-info next to the sources
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".git", ".venv", "out", "runs", "build", "dist", "*.egg-info", "__pycache__", ".*_cache"))
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input", "-q"]
    run([*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(tmp / "dist"), str(src)],
        cwd=tmp)
    (wheel,) = (tmp / "dist").glob("chargpt-*.whl")
    run([*pip, "install", "--no-deps", "--no-index", "--target", str(tmp / "site"), str(wheel)], cwd=tmp)
    return wheel, tmp / "site"


def test_the_wheel_ships_the_metric_the_scripts_and_their_commands(installed):
    wheel, site = installed
    with zipfile.ZipFile(wheel) as whl:
        names = set(whl.namelist())
        (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        commands = whl.read(entry_points).decode()
    # What the wheel puts at the top of site-packages: the design card's names and one `chargpt`, nothing generic
    # (a `training` or `evaluation` of another package would otherwise shadow or be shadowed by ours).
    top = {name.split("/")[0].removesuffix(".py") for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert top == set(TOP_LEVEL)
    assert {"chargpt/evaluation/birthplace_accuracy.py", "train_pretrain.py", "train_finetune.py",
            "evaluate_birthplace.py"} <= names
    # --preset reads them
    assert {f"chargpt/recipes/{path.name}" for path in (ROOT / "chargpt" / "recipes").glob("*.yaml")} <= names
    for command, target in COMMANDS.items():
        assert f"{command} = {target}" in commands
        assert (site / "bin" / command).is_file()


def test_the_installed_commands_evaluate_from_another_folder(installed, tmp_path):
    _, site = installed
    # A tiny random model; the gold answers are its own predictions for two questions, so its score is known.
    tokenizer = CharTokenizer.from_corpus(" ".join(QUESTIONS) + " London Paris")
    torch.manual_seed(0)
    config = CharGPTConfig(vocab_size=tokenizer.vocab_size, block_size=64, n_layer=1, n_head=2, n_embd=32,
                           position_embedding_type="rope", initializer_range=0.3)
    model_dir = tmp_path / "model"
    CharGPTForCausalLM(config).save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    model = CharGPTForCausalLM.from_pretrained(model_dir)
    predicted = predict_birthplaces(model, CharTokenizer.from_pretrained(model_dir), QUESTIONS, show_progress=False)
    assert all(predicted) and "London" not in predicted and "Paris" not in predicted
    gold = [predicted[0], predicted[1], "London", "Paris"]
    tsv = tmp_path / "tiny.tsv"
    tsv.write_text("".join(f"{q}\t{a}\n" for q, a in zip(QUESTIONS, gold, strict=True)), encoding="utf-8")

    # -S: no .pth files, hence no editable install of the checkout; PYTHONPATH: the install, then the dependencies.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    deps = dict.fromkeys(sysconfig.get_paths()[key] for key in ("purelib", "platlib"))
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": os.pathsep.join([str(site), *deps]),
           "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "HF_EVALUATE_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           "OMP_NUM_THREADS": "1"}
    where = run([sys.executable, "-S", "-c", "import importlib.util as u, json, sys; "
                 "print(json.dumps({n: u.find_spec(n).origin for n in sys.argv[1:]}))", *TOP_LEVEL],
                cwd=elsewhere, env=env)
    for name, origin in json.loads(where.stdout).items():
        assert Path(origin).is_relative_to(site), f"{name} imported from {origin}, not from the install"

    def evaluate(*args: str) -> dict:
        out = run([sys.executable, "-S", str(site / "bin" / "chargpt-evaluate"), "--eval_corpus_path", str(tsv),
                   "--results_path", "scores.json", *args], cwd=elsewhere, env=env)
        scores = json.loads((elsewhere / "scores.json").read_text())
        assert f"Correct: {scores['correct']} out of {scores['total']}" in out.stdout
        return scores

    assert evaluate("--baseline", "london")["correct"] == 1
    scores = evaluate("--model_name_or_path", str(model_dir), "--outputs_path", "predictions.txt", "--device", "cpu")
    assert (scores["correct"], scores["total"]) == (2, 4)
    assert (elsewhere / "predictions.txt").read_text(encoding="utf-8").splitlines() == predicted
