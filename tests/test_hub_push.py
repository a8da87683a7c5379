"""Sharing a model on the Hub, offline: a local folder stands in for the Hub (the upload calls are replaced, nothing
else). What was pushed loads in a fresh process without the package and answers; its card holds the evaluation."""

from __future__ import annotations

import fnmatch
import json
import shutil
from pathlib import Path

import pytest
from huggingface_hub import HfApi, ModelCard
from processes import ask_without_the_package
from transformers import pipeline

import evaluate_birthplace
import train_finetune
from chargpt.training import run_cli
from data_scripts import write_synthetic_corpus
from modeling_chargpt import TASK, BirthplaceQAPipeline

TINY = ["--n_layer", "1", "--n_head", "2", "--n_embd", "32", "--report_to", "none", "--disable_tqdm", "True"]


def finetune_argv(world: Path, out: Path, steps: int, *extra: str) -> list[str]:
    """train_finetune.py's flags for a tiny model of `world` trained `steps` steps into `out`."""
    return ["--pretrain_corpus_path", str(world / "wiki.txt"), "--finetune_corpus_path",
            str(world / "birth_places_train.tsv"), "--output_dir", str(out), *TINY, "--max_steps", str(steps),
            "--per_device_train_batch_size", "4", *extra]


@pytest.fixture
def hub(tmp_path, monkeypatch) -> tuple[Path, list]:
    """A local folder in place of the Hub: create_repo makes a folder, upload_folder copies the files it would send;
    and the calls made."""
    root = tmp_path / "hub"
    calls: list = []

    def create_repo(self, repo_id, *, private=None, exist_ok=False, repo_type=None, **kwargs):
        (root / repo_id).mkdir(parents=True, exist_ok=exist_ok)
        calls.append(("create", repo_id, private))
        return f"https://huggingface.co/{repo_id}"

    def upload_folder(self, *, repo_id, folder_path, ignore_patterns=None, **kwargs):
        for path in Path(folder_path).rglob("*"):
            rel = path.relative_to(folder_path).as_posix()
            if path.is_file() and not any(fnmatch.fnmatch(rel, p) for p in ignore_patterns or []):
                (root / repo_id / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, root / repo_id / rel)
        calls.append(("upload", repo_id, None))

    monkeypatch.setattr(HfApi, "create_repo", create_repo)
    monkeypatch.setattr(HfApi, "upload_folder", upload_folder)
    root.mkdir()
    return root, calls


def test_a_pushed_model_answers_where_chargpt_is_not_installed(hub, tmp_path, capsys):
    hub, calls = hub
    world = tmp_path / "world"
    write_synthetic_corpus(world, n_people=40, n_train=20, n_dev=10, n_test=10, seed=2)
    out = tmp_path / "tiny-recite"
    argv = finetune_argv(world, out, 4, "--recite", "True", "--checkpointing_steps", "2", "--push_to_hub", "True",
                         "--hub_model_id", "me/tiny-recite", "--hub_private_repo", "True")
    assert run_cli(train_finetune.main, argv) == 0
    assert "pushed to https://huggingface.co/me/tiny-recite" in capsys.readouterr().out
    pushed = hub / "me" / "tiny-recite"
    assert (pushed / "model.safetensors").is_file() and (pushed / "pipeline_chargpt.py").is_file()
    assert not (pushed / "checkpoints").exists() and not (pushed / "runs").exists()
    assert ("create", "me/tiny-recite", True) in calls

    # evaluate, record the result in the card, push again
    dev = world / "birth_dev.tsv"
    argv = ["--model_name_or_path", str(out), "--eval_corpus_path", str(dev), "--model_card", "True",
            "--push_to_hub", "True", "--hub_model_id", "me/tiny-recite", "--results_path", str(tmp_path / "dev.json")]
    assert run_cli(evaluate_birthplace.main, argv) == 0
    accuracy = json.loads((tmp_path / "dev.json").read_text())["accuracy"]
    card = ModelCard.load(pushed / "README.md")
    [result] = card.data.eval_results
    assert (result.metric_type, result.metric_value, result.dataset_name) == ("exact_match", accuracy,
                                                                              "birth_dev.tsv")
    assert "birthplace-qa" in card.data.tags
    assert f"- `birth_dev.tsv`: exact match {100 * accuracy:.1f}%, measured with `python evaluate_birthplace.py" \
        in card.text
    assert "trust_remote_code=True" in card.text
    # how it answers, as finetuned (a recitation, greedy, no threshold), once, before the evaluation it describes
    said = ("## How it answers\n\nIt recites the person's line, then names the place after its greedy recitation. It "
            "answers every question: no abstention threshold is saved.")
    assert card.text.count("## How it answers") == 1 and said in card.text
    assert card.text.index(said) < card.text.index("## Evaluation")

    # what a person without chargpt gets from the "Hub" copy is what the package gives locally
    questions = [line.split("\t")[0] for line in dev.read_text(encoding="utf-8").splitlines()[:3]]
    local = pipeline(TASK, model=str(out), pipeline_class=BirthplaceQAPipeline, device="cpu")(questions)
    fresh = ask_without_the_package(pushed, questions, tmp_path)
    assert fresh["package_imported"] is False
    assert [a["answer"] for a in fresh["answers"]] == [a["answer"] for a in local]
    assert [a["recitation"] for a in fresh["answers"]] == [a["recitation"] for a in local]


def test_a_failed_push_is_one_line_and_keeps_the_model(tmp_path, monkeypatch, capsys):
    def refuse(self, *args, **kwargs):
        raise PermissionError("401 Client Error: no token")

    monkeypatch.setattr(HfApi, "create_repo", refuse)
    world = tmp_path / "world"
    write_synthetic_corpus(world, n_people=40, n_train=20, n_dev=10, n_test=10, seed=2)
    out = tmp_path / "run"
    argv = finetune_argv(world, out, 1, "--push_to_hub", "True")
    assert run_cli(train_finetune.main, argv) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (f"error: --push_to_hub run: PermissionError: 401 Client Error: no token (the model is saved "
                       f"in {out})")
    assert (out / "model.safetensors").is_file()


def test_the_card_says_how_the_model_answers():
    """describe_answering: the card's words for config.json's answering (format, decoding, rules, threshold), which
    a card keeps one of however often it is rewritten."""
    from chargpt.training.hub import ANSWERS, RULES, _with_section, describe_answering
    from modeling_chargpt.answering import DECODING_CHOICES

    # every span rule of answering.py has its words (the other choices are described apart)
    assert set(RULES) == set(DECODING_CHOICES) - {"answer_from_recitation", "continue_recitation", "recitation_beams"}

    assert describe_answering({"answer_format": "direct"}).startswith("It answers the question directly, greedy")
    best = {"answer_format": "recite", "answering": {
        "answer_from_recitation": True, "continue_recitation": True, "recitation_beams": 4, "skip_name_words": True,
        "first_of_pair": True, "birth_before_death": False, "abstain_below": 3.9e-15,
        "abstention": {"target_precision": 0.8, "holdout_precision": 0.89, "holdout_coverage": 1.0}}}
    assert describe_answering(best) == (
        "It recites the person's line, then answers with the most probable place span in the best of 4 beam "
        "recitations (a recitation cut at its limit is continued). Its rules: never a word of the asked name; of "
        '"Perth, Scotland", Perth. Below a confidence of 3.9e-15 it says "I don\'t know", a threshold chosen for 80% '
        "precision on held-out training questions (there it answered 100.0% of them, 89.0% right). The pipeline reads "
        "these settings from config.json; its arguments override them.")
    once = _with_section("# t\n\n## Evaluation\n\n- x\n", ANSWERS, "first")
    assert once == "# t\n\n## How it answers\n\nfirst\n\n## Evaluation\n\n- x\n"
    assert _with_section(once, ANSWERS, "second") == once.replace("first", "second")
    assert _with_section("# t", ANSWERS, "body") == "# t\n\n## How it answers\n\nbody\n"


def test_a_shared_model_loads_by_its_name_from_the_hub_cache_offline(hub, tmp_path):
    """owner/name on the scripts, chargpt-ask and pipeline(...) resolves as transformers does: through the local
    cache laid out as the Hub client writes it, with HF_HUB_OFFLINE=1; the pushed card names that repo."""
    import os
    import subprocess
    import sys

    from chargpt.training.hub import push_folder

    hub, _ = hub
    world = tmp_path / "world"
    write_synthetic_corpus(world, n_people=40, n_train=20, n_dev=10, n_test=10, seed=2)
    out = tmp_path / "tiny"
    argv = finetune_argv(world, out, 2)
    assert run_cli(train_finetune.main, argv) == 0
    push_folder(out, "me/tiny")
    card = ModelCard.load(hub / "me" / "tiny" / "README.md")
    assert card.data.pipeline_tag == "question-answering"
    assert 'pipeline(model="me/tiny", trust_remote_code=True)' in card.text and "THIS_FOLDER" not in card.text
    # the cache: models--OWNER--NAME/refs/main names a snapshot folder holding the repository's files
    commit = "0123456789abcdef0123456789abcdef01234567"
    cache = tmp_path / "cache"
    shutil.copytree(hub / "me" / "tiny", cache / "models--me--tiny" / "snapshots" / commit)
    (cache / "models--me--tiny" / "refs").mkdir()
    (cache / "models--me--tiny" / "refs" / "main").write_text(commit)
    question = (world / "birth_dev.tsv").read_text(encoding="utf-8").splitlines()[0].split("\t")[0]
    script = f"""
import json, sys
from chargpt.training import run_cli
import evaluate_birthplace
from chargpt.evaluation import ask
status = [run_cli(evaluate_birthplace.main, ["--model_name_or_path", "me/tiny", "--eval_corpus_path",
                                            {str(world / "birth_dev.tsv")!r},
                                            "--outputs_path", {str(tmp_path / "p")!r}]),
          run_cli(ask.main, ["me/tiny", {question!r}]), run_cli(ask.main, ["me/none", {question!r}])]
from transformers import pipeline
answer = pipeline(model="me/tiny", trust_remote_code=True)({question!r})["answer"]
print(json.dumps({{"status": status, "answer": answer}}))
"""
    env = {**os.environ, "HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", script], cwd=Path(__file__).resolve().parents[1], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    local = pipeline(TASK, model=str(out), pipeline_class=BirthplaceQAPipeline, device="cpu")(question)["answer"]
    assert found["status"] == [0, 0, 1] and found["answer"] == local
    assert (tmp_path / "p").read_text(encoding="utf-8").splitlines()[0] == local
    assert f"{question}  ->  " in done.stdout
    assert "error: me/none: no such folder, and not a Hub model that can be had here" in done.stderr
