"""chargpt.recipes.reproduce (snapshots included) and collect_results.py, as the README runs them, on a tiny world."""

from __future__ import annotations

import importlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from processes import run_concurrently, run_script, stages_in_process, user_env
from test_readme_commands import load as load_script

import train_finetune
import train_pretrain
from chargpt.training import run_cli
from data_scripts import write_synthetic_corpus

ROOT = Path(__file__).resolve().parents[1]
ENV = user_env()


def run_ok(cmd: list[str]) -> str:
    proc = subprocess.run(cmd, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def test_snapshots_become_rows_and_a_plot(tmp_path, monkeypatch):
    world = tmp_path / "world"
    write_synthetic_corpus(world, n_people=80, n_train=40, n_dev=20, n_test=20, seed=0)
    out = tmp_path / "exp"
    stages = stages_in_process(monkeypatch)  # the trainings: what they save matters here, not their processes
    assert run_script("chargpt/recipes/reproduce.py", [
        "--data_dir", str(world), "--out_dir", str(out), "--recipe", "demo", "--variants", "learned",
        "--pretrain_epochs", "2", "--save_epochs", "1", "--skip_baselines", "--threads", "1",
        "--pretrain_extra", f"--mixed_qa_corpus_path {world / 'birth_places_train.tsv'}",
        "--finetune_extra", "--max_steps 2"]) == 0  # each model's finetuning: 2 steps, not the demo's 60
    summary = json.loads((out / "results.json").read_text())
    # --pretrain_extra reaches pretraining only (train_finetune.py has no such flag and would have failed)
    assert "| mixed_name_prompts | 40 |" in (out / "learned-causal-seed0-pretrain" / "README.md").read_text()
    assert "mixed_qa_corpus_path" in summary["pretrain_extra"]
    rows = {row["name"]: row for row in summary["runs"]}
    assert set(rows) == {"learned-causal-seed0", "learned-causal-seed0-epoch-1"}
    final, snap = rows["learned-causal-seed0"], rows["learned-causal-seed0-epoch-1"]
    assert final["pretrain_epochs"] == 2.0 and snap["pretrain_epochs"] == 1 and snap["snapshot_of_epochs"] == 2.0
    assert 0 < snap["pretrain_seconds"] < final["pretrain_seconds"]
    assert 0 < snap["pretrain_flops"] < final["pretrain_flops"] and final["finetune_flops"] > 0  # the compute
    for row in (final, snap):
        assert row["dev"]["total"] == 20 and 0 <= row["dev"]["correct"] <= 20
        # the world's dev groups (read in paraphrases / in one sentence: every third of the 20) split the predictions
        groups = row["dev_groups"]
        assert (groups["paraphrased"]["total"], groups["single"]["total"]) == (14, 6)
        assert groups["paraphrased"]["correct"] + groups["single"]["correct"] == row["dev"]["correct"]
    assert (out / "learned-causal-seed0.test.predictions").read_text().count("\n") == 20
    assert summary["command"].startswith("python -m chargpt.recipes.reproduce")
    # one pretraining saving its epoch-1 snapshot, then one finetuning for each of the two models
    assert [Path(cmd[3]).name for cmd in stages] == ["train_pretrain.py", "train_finetune.py", "train_finetune.py"]

    table = run_ok([sys.executable, "experiments/collect_results.py", str(out / "results.json"), "--label_from_dir",
                    "--json", str(tmp_path / "acc.json"), "--plot", str(tmp_path / "acc.png")])
    collected = json.loads((tmp_path / "acc.json").read_text())["records"]
    assert [r["facts"]["pretrain_epochs"] for r in collected] == [1, 2.0]
    assert all(r["hardware"] and r["date"] and r["seconds"]["train"] > 0 for r in collected)
    assert (tmp_path / "acc.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "| exp | learned/causal | 0 | 1 |" in table


def _load_script(name: str):
    """experiments/NAME.py as it runs: its sibling scripts (records.py, ...) by their own names."""
    return load_script(f"experiments/{name}.py")


def _base_record(collect, name: str = "e220/rope-causal-seed0-epoch-160", seed: int = 0, accuracy: float = 16.6,
                 minutes: float = 31.0) -> dict:
    return collect.record(name, recipe="e220", variant="rope/causal", seeds=[seed], hardware="a CPU",
                          scores={"dev": {"correct": int(accuracy * 5), "total": 500, "accuracy": accuracy}},
                          seconds={"pretrain": 1800.0, "finetune": 60.0, "train": minutes * 60},
                          facts={"run_folder": name.split("/")[0], "position": "rope", "attention": "causal",
                                 "pretrain_epochs": 160, "snapshot_of_epochs": 220})


def test_finetune_sweep_points_are_priced_with_their_models_pretraining(tmp_path):
    collect = _load_script("collect_results")
    base = _base_record(collect)
    cmd = "accelerate launch train_finetune.py --model_name_or_path out/e220/rope-causal-seed0-pretrain/epoch-160 --x 1"
    sweep = tmp_path / "sweep.json"
    runs = [{"finetune_learning_rate": lr, "finetune_epochs": 10, "finetune_seconds": 90, "dev_accuracy": acc,
             "dev_correct": int(acc * 5), "dev_total": 500, "command": cmd}
            for lr, acc in ((7.5e-5, 21.6), (6e-4, 9.0))]
    sweep.write_text(json.dumps({"runs": runs}))
    rows = collect.sweep_rows(sweep, 7.5e-5, 10, {base["name"]: base})
    assert len(rows) == 1
    row = rows[0]
    assert row["seconds"]["train"] == 1800 + 90 and row["scores"]["dev"]["accuracy"] == 21.6
    assert row["facts"]["pretrain_epochs"] == 160 and row["facts"]["snapshot_of_epochs"] == 220
    assert row["command"] == cmd and row["name"] != base["name"] and base["scores"]["dev"]["accuracy"] == 16.6
    collect.records.check([base, row], "sweep")  # the record shape, names distinct
    with pytest.raises(SystemExit, match="no collected run"):
        collect.sweep_rows(sweep, 7.5e-5, 10, {})
    sweep.write_text(json.dumps({"runs": [{"finetune_learning_rate": 7.5e-5, "finetune_epochs": 10,
                                            "command": "train_finetune.py --output_dir x"}]}))
    with pytest.raises(SystemExit, match=r"sweep.json: runs\[0\]: needs .*--model_name_or_path"):
        collect.sweep_rows(sweep, 7.5e-5, 10, {base["name"]: base})
    sweep.write_text("{not json")
    with pytest.raises(SystemExit, match="sweep.json: not a finetuning sweep JSON"):
        collect.sweep_rows(sweep, 7.5e-5, 10, {})


def test_a_runs_note_travels_into_its_record():
    collect = _load_script("collect_results")
    run = {"name": "rope-causal-seed0", "position": "rope", "attention": "causal", "seed": 0, "pretrain_epochs": 160,
           "pretrain_seconds": 3576.6, "finetune_seconds": 106.6, "train_seconds": 3683.2,
           "dev": {"accuracy": 17.0, "correct": 85, "total": 500}}
    noted = dict(run, name="rope-causal-seed1", note="resumed from step 2,500")
    rows = collect.rows_from({"runs": [run, noted], "command": "python -m chargpt.recipes.reproduce"}, "e160")
    assert [r["facts"].get("note") for r in rows] == [None, "resumed from step 2,500"]
    assert rows[1]["seconds"]["train"] == 3683.2 and rows[1]["name"] == "e160/rope-causal-seed1"


def test_seed_groups_name_runs_of_distinct_seeds_and_reject_bad_groups(tmp_path):
    collect = _load_script("collect_results")
    runs = {f"r{seed}/rope-causal-seed{seed}": _base_record(collect, f"r{seed}/rope-causal-seed{seed}", seed, acc,
                                                            minutes)
            for seed, acc, minutes in ((0, 30.0, 60.0), (1, 26.0, 58.0), (2, 28.0, 59.0))}
    ids = ",".join(runs)
    assert collect.seed_groups([f"rope 290 ep={ids}"], runs) == {"rope 290 ep": list(runs)}
    group = collect.group_summary("rope 290 ep", list(runs.values()))
    assert group["seeds"] == [0, 1, 2] and group["n"] == 3
    assert group["dev_accuracy_mean"] == 28.0 and group["dev_accuracy_std"] == 2.0  # n - 1: sqrt((4 + 4 + 0) / 2)
    assert group["train_minutes_mean"] == 59.0 and group["train_minutes_std"] == 1.0
    collect.plot(list(runs.values()), tmp_path / "seeds.png", "t", [group])
    assert (tmp_path / "seeds.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # --seed_group marks the records; what they measured stays as it was, so no summary can go stale
    collect.records.write(tmp_path / "acc.json", list(runs.values()), what="a test")
    table = run_ok([sys.executable, "experiments/collect_results.py", "--json", str(tmp_path / "acc.json"),
                    "--plot", str(tmp_path / "acc.png"), "--seed_group", f"rope 290 ep={ids}"])
    assert "rope 290 ep: seeds [0, 1, 2]: dev 28.0 ± 2.0% (30.0, 26.0, 28.0), 59.0 ± 1.0 min" in table
    study = json.loads((tmp_path / "acc.json").read_text())
    assert study["what"] == "a test" and [r["facts"]["seed_group"] for r in study["records"]] == ["rope 290 ep"] * 3
    with pytest.raises(SystemExit, match="expected NAME=ID,ID"):
        collect.seed_groups(["r0/rope-causal-seed0,r1/rope-causal-seed1"], runs)
    with pytest.raises(SystemExit, match="at least two run ids"):
        collect.seed_groups(["one=r0/rope-causal-seed0"], runs)
    with pytest.raises(SystemExit, match="no collected run 'r9/x'"):
        collect.seed_groups(["g=r0/rope-causal-seed0,r9/x"], runs)
    with pytest.raises(SystemExit, match="share a seed"):
        collect.seed_groups(["g=r0/rope-causal-seed0,r0/rope-causal-seed0"], runs)


def test_collect_results_reports_bad_result_files_in_one_line(tmp_path):
    (tmp_path / "bad.json").write_text('{"runs": [\n  {"name": }\n]}')
    (tmp_path / "norecipe.json").write_text('{"runs": []}')
    expected = {"missing.json": "missing.json: cannot read",
                "bad.json": "bad.json: not a chargpt.recipes.reproduce results.json: line 2:",
                "norecipe.json": "norecipe.json: not a chargpt.recipes.reproduce results.json: missing 'recipe'"}
    procs = run_concurrently([[sys.executable, "experiments/collect_results.py", str(tmp_path / name), "--json",
                               str(tmp_path / f"{name}.acc.json"), "--plot", str(tmp_path / f"{name}.acc.png")]
                              for name in expected], cwd=ROOT, env=ENV, timeout=120)
    for (name, message), proc in zip(expected.items(), procs, strict=True):
        assert proc.returncode != 0 and "Traceback" not in proc.stderr, name
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert message in proc.stderr


@pytest.mark.parametrize("bench", ["bench_train", "bench_eval"])
def test_benchmarks_report_a_missing_data_dir_in_one_line(bench, tmp_path, capsys):
    assert run_script(f"experiments/benchmarks/{bench}.py", ["--data_dir", str(tmp_path / "nowhere")]) == 1
    missing = tmp_path / "nowhere" / "wiki.txt"
    assert capsys.readouterr().err.strip().splitlines()[-1] == f"error: {missing}: file not found"


def test_probe_recall_counts_places_found_in_lines_and_what_the_model_continues(tmp_path, monkeypatch):
    import types

    import torch

    from modeling_chargpt import CharTokenizer

    world = tmp_path / "world"
    write_synthetic_corpus(world, n_people=80, n_train=40, n_dev=20, n_test=20, seed=0)
    lines = (world / "wiki.txt").read_text(encoding="utf-8").splitlines()
    tok = CharTokenizer.from_corpus("\n".join(lines))
    model_dir = tmp_path / "model"
    tok.save_pretrained(model_dir)
    (model_dir / "config.json").write_text("{}")
    expected_found = 0
    for row in (world / "birth_dev.tsv").read_text(encoding="utf-8").splitlines():
        question, place = row.split("\t")
        name = question[len("Where was "):-len(" born?")]
        line = next(line for line in lines if line.startswith(name + " ") or line.startswith(name + ","))
        expected_found += 0 <= line.find(place) < 120
    assert expected_found > 0

    class Oracle:  # continues every prompt with the rest of the wiki.txt line it starts: perfect recall
        config = types.SimpleNamespace(block_size=128)

        def eval(self):
            return self

        def generate(self, ids, max_new_tokens, do_sample):
            prompt = tok.decode(ids[0].tolist())
            rest = next(line[len(prompt):] for line in lines if line.startswith(prompt))
            return torch.cat([ids, torch.tensor([tok.encode_text(rest[:max_new_tokens])])], dim=1)

    probe = importlib.import_module("chargpt.evaluation.probe_recall")
    monkeypatch.setattr(probe.CharGPTForCausalLM, "from_pretrained", lambda path: Oracle())
    assert probe.probe(str(model_dir), str(world)) == (20, expected_found, expected_found)
    golds, states = probe.probe_each(str(model_dir), str(world))
    # a finetuned model right on every question but the first: its right answers split by what the probe found
    predictions = ["Nowhere", *golds[1:]]
    split = probe.reached(golds, states, predictions, "dev.predictions")
    first = states[0]
    assert sum(n for _, n in split.values()) == 20 and split[probe.RECALLED][1] == expected_found
    assert all(right == n - (state == first) for state, (right, n) in split.items())
    with pytest.raises(probe.DataFileError, match="19 predictions but birth_dev.tsv has 20 questions"):
        probe.reached(golds, states, predictions[1:], "dev.predictions")
    Oracle.generate = lambda self, ids, max_new_tokens, do_sample: torch.cat([ids, ids[:, :1]], dim=1)
    total, found, recalled = probe.probe(str(model_dir), str(world))
    assert (total, found) == (20, expected_found) and recalled < found


def test_probe_recall_reports_a_bad_model_dir_or_predictions_file_in_one_line(tmp_path, capsys):
    for extra, says in [([], "not a saved chargpt model"),
                        (["--predictions", str(tmp_path / "gone.predictions")], "gone.predictions: cannot read it")]:
        argv = [str(tmp_path / "missing"), "--data_dir", str(tmp_path), *extra]
        assert run_script("chargpt/evaluation/probe_recall.py", argv) != 0
        err = capsys.readouterr().err
        assert err.strip().count("\n") == 0 and says in err, err


def test_finetune_lr_is_chosen_on_held_out_training_questions_not_dev(tmp_path, monkeypatch, capsys):
    world = tmp_path / "world"
    write_synthetic_corpus(world, n_people=80, n_train=40, n_dev=20, n_test=20, seed=0)
    pre = tmp_path / "exp" / "learned-causal-seed0-pretrain"
    assert run_cli(train_pretrain.main, [  # in process: only the model it saves matters here
        "--pretrain_corpus_path", str(world / "wiki.txt"), "--output_dir", str(pre), "--n_layer", "2",
        "--n_head", "4", "--n_embd", "32", "--block_size", "128", "--max_steps", "3", "--disable_tqdm", "True",
        "--report_to", "none"]) == 0
    out = tmp_path / "sel"
    script = "chargpt/recipes/select_finetune_lr.py"
    args = ["--model_name_or_path", str(pre), "--data_dir", str(world), "--out_dir", str(out), "--learning_rates",
            "1e-4,1e-3", "--holdout", "10", "--final", "--threads", "1", "--extra",
            "--num_train_epochs 1 --per_device_train_batch_size 4 --report_to none"]
    stages = stages_in_process(monkeypatch)  # the finetunings: their models matter here, not their processes
    assert run_script(script, [*args, "--eval_extra", "--max_new_tokens 3"]) == 0
    assert [Path(cmd[3]).name for cmd in stages] == ["train_finetune.py"] * 3  # two rates, then the final model
    printed = capsys.readouterr().out
    summary = json.loads((out / "selection.json").read_text())
    # --eval_extra reached every evaluation: the held-out, dev and test answers alike are at most 3 characters
    answered = [out / f"lr{lr:g}.holdout.predictions" for lr in (1e-4, 1e-3)] + [out / "final.dev.predictions",
                                                                                 out / "final.test.predictions"]
    assert all(len(line) <= 3 for path in answered for line in path.read_text().splitlines())
    assert summary["eval_extra"] == "--max_new_tokens 3"
    # a known flag with a bad value (argparse's usage lines are not shown), and a model folder without a config: one
    # line each (an unknown flag and an unquoted --extra, in this process below)
    assert run_script(script, [*args, "--eval_extra", "--max_new_tokens many"]) != 0
    value = capsys.readouterr().err
    assert value.strip().count("\n") == 0 and "invalid int value" in value
    assert run_script(script, [args[0], str(tmp_path / "nowhere"), *args[2:]]) != 0
    nowhere = capsys.readouterr().err
    assert nowhere.strip().count("\n") == 0 and "no config.json there" in nowhere
    points = summary["points"]
    assert [p["learning_rate"] for p in points] == [1e-4, 1e-3]
    assert all(p["holdout"]["total"] == 10 and p["finetune_seconds"] > 0 for p in points)
    best = max(p["holdout"]["correct"] for p in points)
    winners = [p["learning_rate"] for p in points if p["holdout"]["correct"] == best]
    assert summary["chosen_learning_rate"] == winners[0]
    assert f"chosen lr {summary['chosen_learning_rate']:g}" in printed
    final = summary["final"]
    assert final["learning_rate"] == summary["chosen_learning_rate"] and final["dev"]["total"] == 20
    assert (out / "final.test.predictions").read_text().count("\n") == 20
    assert not list(out.glob("lr*-finetune")), "the sweep's models are deleted without --keep_models"
    # The final model saw all 40 training questions (10 steps of 4); the sweep's saw the 30 left after the split.
    assert json.loads((out / "final-finetune" / "train_results.json").read_text())["global_step"] == 10
    # The split is a partition of the training questions, the same for the same seed, and dev never enters it.
    train_lines = (world / "birth_places_train.tsv").read_text().splitlines()
    part, held = ((out / "split" / n).read_text().splitlines() for n in ("train.tsv", "holdout.tsv"))
    assert len(held) == 10 and sorted(part + held) == sorted(train_lines)
    assert not set(held) & set((world / "birth_dev.tsv").read_text().splitlines())

    select = importlib.import_module("chargpt.recipes.select_finetune_lr")
    again = select.split_questions(world / "birth_places_train.tsv", 10, 0, tmp_path / "again")
    assert again[1].read_text().splitlines() == held
    other = select.split_questions(world / "birth_places_train.tsv", 10, 1, tmp_path / "other")
    assert other[1].read_text().splitlines() != held
    # --split_only writes that split alone (for mixed training that leaves the held-out questions out)
    capsys.readouterr()
    assert run_script(script, ["--data_dir", str(world), "--out_dir", str(tmp_path / "only"), "--holdout", "10",
                               "--split_only"]) == 0
    assert "wrote" in capsys.readouterr().out and sorted(p.name for p in (tmp_path / "only").iterdir()) == ["split"]
    assert (tmp_path / "only" / "split" / "holdout.tsv").read_text().splitlines() == held
    tie = [{"learning_rate": 3e-4, "holdout": {"correct": 5}}, {"learning_rate": 1e-4, "holdout": {"correct": 5}}]
    assert select.best_rate(tie) == 3e-4
    with pytest.raises(SystemExit, match="must be between 1 and 39"):
        select.split_questions(world / "birth_places_train.tsv", 40, 0, tmp_path / "bad")
    for bad in ("1e-4,x", "1e-4,1e-4", "-1"):
        with pytest.raises(SystemExit, match="--learning_rates"):
            select.parse_rates(bad)
    # collect_results.py prices the final model as pretraining + every point of the selection + the final finetuning.
    collect = _load_script("collect_results")
    base = collect.record("exp/learned-causal-seed0", recipe="exp", variant="learned/causal", seeds=[0],
                          scores={"dev": {"correct": 0, "total": 20, "accuracy": 0.0}},
                          seconds={"pretrain": 100.0, "finetune": 5.0, "train": 105.0},
                          facts={"run_folder": "exp", "position": "learned", "attention": "causal",
                                 "pretrain_epochs": 2})
    row = collect.selection_row(out / "selection.json", {base["name"]: base})
    spent = 100.0 + sum(p["finetune_seconds"] + p["holdout"]["seconds"] for p in points) + final["finetune_seconds"]
    assert row["seconds"]["train"] == pytest.approx(spent)
    assert row["scores"]["dev"] == {key: final["dev"][key] for key in ("correct", "total", "accuracy")}
    assert row["facts"]["finetune_learning_rate"] == summary["chosen_learning_rate"] and "10 held-out" in row["recipe"]
    assert row["name"] != base["name"] and row["command"].startswith("python -m chargpt.recipes.select_finetune_lr")
    assert [(q["learning_rate"], q["holdout_correct"]) for q in row["facts"]["selection_points"]] == [
        (p["learning_rate"], p["holdout"]["correct"]) for p in points]
    collect.records.check([base, row], "selection")
    with pytest.raises(SystemExit, match="no collected run 'exp/learned-causal-seed0'"):
        collect.selection_row(out / "selection.json", {})
    unfinished = tmp_path / "unfinished.json"
    unfinished.write_text(json.dumps({k: v for k, v in summary.items() if k != "final"}))
    with pytest.raises(SystemExit,
                       match="unfinished.json: not a finished chargpt.recipes.select_finetune_lr --final run"):
        collect.selection_row(unfinished, {base["name"]: base})
    # chargpt.recipes.choose_final_questions: the held-out questions cut in halves; each half answered by a model
    # finetuned like the selection's on the mixed questions plus the other half ("all"), and by the held-out model
    # ("mixed"), whose records it reads: three of them are marked right here (a 3-step model answers none), so the count
    # is not 0.
    chosen = out / f"lr{summary['chosen_learning_rate']:g}.holdout.predictions.records.jsonl"
    marked = [dict(r, correct=r["correct"] or i in (0, 3, 4)) for i, r in enumerate(map(json.loads,
                                                                                         chosen.read_text().splitlines()))]
    chosen.write_text("".join(json.dumps(r) + "\n" for r in marked))
    capsys.readouterr()
    assert run_script("chargpt/recipes/choose_final_questions.py", [  # its finetunings are processes
        "--select_dir", str(out), "--data_dir", str(world), "--threads", "1"]) == 0
    printed = capsys.readouterr().out
    where = out / "final_questions"
    choice = json.loads((where / "choice.json").read_text())
    halves = [(where / f"half{k}.tsv").read_text().splitlines() for k in (0, 1)]
    right = {held[i] for i, r in enumerate(marked) if r["correct"]}
    assert sorted(halves[0] + halves[1]) == sorted(held) and len(halves[0]) == 5
    for k in (0, 1):  # finetuned on the 30 mixed questions and the other half: 35 questions, 9 steps of 4
        seen = (where / f"half{k}.finetune.tsv").read_text().splitlines()
        assert sorted(seen) == sorted(part + halves[1 - k])
        assert json.loads((where / f"half{k}-finetune" / "train_results.json").read_text())["global_step"] == 9
        card = (where / f"half{k}-finetune" / "README.md").read_text()
        assert f"| learning_rate | {summary['chosen_learning_rate']:g} |" in card and "| seed | 0 |" in card
        answers = (where / f"half{k}.predictions").read_text().splitlines()
        assert len(answers) == 5 and all(len(a) <= 3 for a in answers)  # the selection's --eval_extra reached it
        assert choice["halves"][k]["mixed"] == len(right & set(halves[k]))
    gold = {line: line.split("\t")[1] for line in held}
    assert choice["mixed"] == sum(r["correct"] for r in marked) >= 3
    assert choice["all"] == sum(a == gold[q] for k in (0, 1) for q, a in zip(
        halves[k], (where / f"half{k}.predictions").read_text().splitlines(), strict=True))
    assert choice["mixed"] - choice["all"] == choice["only_mixed_right"] - choice["only_all_right"]
    assert choice["choice"] == ("mixed" if choice["mixed"] > choice["all"] else "all") and choice["choice"] in printed
    choose_final = importlib.import_module("chargpt.recipes.choose_final_questions")
    assert choose_final.tally([True, True, False], [False, True, True]) == {
        "questions": 3, "mixed": 2, "all": 2, "only_mixed_right": 1, "only_all_right": 1}
    assert choose_final.decide(5, 5) == "all" and choose_final.decide(6, 5) == "mixed"
    (tmp_path / "unfinished" / "selection.json").parent.mkdir()
    (tmp_path / "unfinished" / "selection.json").write_text(json.dumps({"model": str(pre)}))
    for select_dir, says in ((tmp_path, "selection.json: cannot read it"),
                             (tmp_path / "unfinished", "no chosen_learning_rate")):
        with pytest.raises(SystemExit) as stopped:  # one line, before any finetuning
            choose_final.load_selection(select_dir)
        assert says in str(stopped.value.code) and "\n" not in str(stopped.value.code)
    for flag, text, says in (("--eval_extra", "--max_new_tokns 3", "has no --max_new_tokns"),
                             ("--extra", "--learning_rate '1e-4", "quotation")):
        monkeypatch.setattr(sys, "argv", ["chargpt.recipes.select_finetune_lr", *args[:-2], flag, text])
        with pytest.raises(SystemExit) as stopped:  # before any finetuning
            select.main()
        assert says in str(stopped.value.code) and flag in str(stopped.value.code)
        assert "\n" not in str(stopped.value.code)


def test_bad_input_reaches_the_user_as_its_one_line(tmp_path, monkeypatch):
    select = importlib.import_module("chargpt.recipes.select_finetune_lr")
    experiments = importlib.import_module("chargpt.recipes.reproduce")
    bad = tmp_path / "birth_places_train.tsv"
    bad.write_text("Where was A born?\tParis\nWhere was B born? no tab\nWhere was C born?\tRome\n")
    # A bad row is named in the user's file, before any split part exists.
    with pytest.raises(SystemExit) as err:
        select.split_questions(bad, 1, 0, tmp_path / "split")
    assert str(err.value) == f"error: {bad}:2: expected exactly one tab (question<TAB>answer), found none"
    assert not (tmp_path / "split").exists()
    # A stage that reports `error: ...` is passed on as that line (plus its log), not the launcher's traceback.
    script = "import sys; print('noise'); print('error: x.tsv:3: empty answer'); sys.exit(1)"
    with pytest.raises(SystemExit) as err:
        experiments.run([sys.executable, "-c", script], tmp_path / "stage.log")
    assert str(err.value) == f"error: x.tsv:3: empty answer (log: {tmp_path / 'stage.log'})"
    with pytest.raises(SystemExit, match=r"stage failed \(2\)"):
        experiments.run([sys.executable, "-c", "import sys; sys.exit(2)"], tmp_path / "other.log")
    # A training stage starts without accelerate launch, with the threads --threads asks for (torch reads them).
    probe = tmp_path / "threads.py"
    probe.write_text("import torch; print('threads', torch.get_num_threads())\n")
    monkeypatch.setenv("OMP_NUM_THREADS", "2")  # the stage's own setting wins over the driver's environment
    experiments.run(experiments.launch(str(probe), [], 1), tmp_path / "threads.log")
    assert (tmp_path / "threads.log").read_text() == "threads 1\n"
    # So is an evaluation's, run in this process: the line, its log, and no predictions written.
    dev = tmp_path / "birth_dev.tsv"
    dev.write_text("Where was A born?\tParis\nWhere was B born?\tRome\tthird field\n")
    with pytest.raises(SystemExit) as err:
        experiments.evaluate(None, dev, tmp_path / "dev.predictions", tmp_path / "eval.log", baseline=True)
    assert str(err.value) == (f"error: {dev}:2: expected exactly one tab (question<TAB>answer), found 2 "
                              f"(log: {tmp_path / 'eval.log'})")
    assert not (tmp_path / "dev.predictions").exists()


def test_a_flag_a_later_stage_rejects_stops_the_run_before_the_first_stage(tmp_path):
    """--extra reaches finetuning too: a pretraining-only flag there used to fail only after the hour of pretraining."""
    world = tmp_path / "world"
    write_synthetic_corpus(world, n_people=20, n_train=10, n_dev=5, n_test=5, seed=0)
    proc = subprocess.run([sys.executable, "-m", "chargpt.recipes.reproduce", "--data_dir", str(world), "--out_dir",
                           str(tmp_path / "exp"), "--recipe", "demo", "--variants", "learned", "--skip_baselines",
                           "--extra", f"--mixed_qa_corpus_path {world / 'birth_places_train.tsv'}"],
                          cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "error: --extra (it reaches both scripts; flags of train_pretrain.py alone go in --pretrain_extra): "
        "train_finetune.py: Some specified arguments are not used by the HfArgumentParser: "
        f"['--mixed_qa_corpus_path', '{world / 'birth_places_train.tsv'}']"]
    assert not (tmp_path / "exp").exists()  # no stage ran, no folder made


def test_make_reproduce_takes_the_fast_path_on_a_gpu_only(tmp_path, monkeypatch):
    """The pretraining command chargpt.recipes.reproduce launches, on a CUDA device and on a CPU (the device check
    patched), for each --fast_path: the GPU fast path adds --device_data True; a CPU run is today's command."""
    experiments = importlib.import_module("chargpt.recipes.reproduce")

    class Launched(Exception):
        pass

    def first_launch(cuda: bool, mode: str) -> list[str]:
        launched = []

        def run(cmd: list[str], log: Path) -> float:
            launched.append(cmd)
            raise Launched  # no training: only the command is checked

        monkeypatch.setattr(experiments, "cuda_available", lambda: cuda)
        monkeypatch.setattr(experiments, "run", run)
        monkeypatch.setattr(sys, "argv", ["chargpt.recipes.reproduce", "--data_dir", str(tmp_path / "data"),
                                          "--out_dir", str(tmp_path / "out"), "--variants", "rope", "--skip_baselines",
                                          "--fast_path", mode, "--extra", "--sync_steps 0"])
        with pytest.raises(Launched):
            experiments.main()
        [cmd] = launched
        return cmd[cmd.index(str(ROOT / "train_pretrain.py")) + 1:]

    today = first_launch(cuda=False, mode="auto")
    assert "--device_data" not in today and today == first_launch(cuda=True, mode="off")
    fast = first_launch(cuda=True, mode="auto")
    at = fast.index("--device_data")
    assert fast[at:at + 2] == ["--device_data", "True"] and fast[:at] + fast[at + 2:] == today
    assert fast[-2:] == ["--sync_steps", "0"]  # the user's flags come last, so they override the fast path's
    assert first_launch(cuda=False, mode="on") == fast


def test_resume_keeps_a_finished_pretraining_and_continues_a_stopped_one(tmp_path, monkeypatch):
    """`chargpt.recipes.reproduce --resume` (`make reproduce RESUME=1`): a 650-epoch CPU pretraining takes hours, so a
    session's end or a crash must not cost the steps already checkpointed."""
    experiments = importlib.import_module("chargpt.recipes.reproduce")
    stages = stages_in_process(monkeypatch)  # a stage's own process stopped: the Ctrl-C test below, the SIGKILL one
    world = tmp_path / "world"
    write_synthetic_corpus(world, n_people=20, n_train=10, n_dev=5, n_test=5, seed=0)
    folder, log = tmp_path / "learned-causal-seed0-pretrain", tmp_path / "learned-causal-seed0-pretrain.log"
    args = ["--pretrain_corpus_path", str(world / "wiki.txt"), "--output_dir", str(folder), "--n_layer", "1",
            "--n_head", "2", "--n_embd", "16", "--block_size", "64", "--per_device_train_batch_size", "4",
            "--disable_tqdm", "True", "--report_to", "none", "--checkpointing_steps", "3"]
    opts = experiments.build_parser().parse_args(["--data_dir", str(world), "--out_dir", str(tmp_path), "--resume",
                                                  "--threads", "1"])
    # a run stopped at its step-3 checkpoint: what Ctrl-C or the end of a session leaves (the checkpoint, no model)
    experiments.run(experiments.launch("train_pretrain.py", [*args, "--max_steps", "3"], 1), log)
    for name in ("train_results.json", "model.safetensors", "config.json"):
        (folder / name).unlink()
    checkpoint = json.loads((folder / "checkpoints" / "step-00000003" / "trainer_state.json").read_text())
    first_log = log.read_text()
    seconds, resumed = experiments.pretrain(opts, [*args, "--max_steps", "6"], folder, log)
    assert resumed == {"pretrain_resumed_from_step": 3}
    finished = json.loads((folder / "train_results.json").read_text())
    assert finished["global_step"] == 6 and [step for step, _ in finished["losses"]] == list(range(1, 7))
    assert seconds == finished["train_seconds"] >= checkpoint["train_seconds"] > 0  # both runs' seconds
    assert stages[-1][-2:] == ["--resume_from_checkpoint", "latest"]
    text = log.read_text()
    assert text.startswith(first_log) and "resumed from" in text[len(first_log):]  # the log goes on after the first

    # a finetuning that finished before the stop runs again over its model under --resume (train_finetune.py refuses
    # a finished model otherwise, which stopped `make best RESUME=1` at its first finetuning)
    fin_dir, fin_log = tmp_path / "learned-causal-seed0-finetune", tmp_path / "learned-causal-seed0-finetune.log"
    tune = [str(world / "wiki.txt"), str(world / "birth_places_train.tsv"), folder, fin_dir, 0,
            ["--max_steps", "1", "--report_to", "none"], 1]
    experiments.run(experiments.finetune_command(*tune), fin_log)
    with pytest.raises(SystemExit, match="overwrite_output_dir"):
        experiments.run(experiments.finetune_command(*tune), fin_log)
    experiments.run(experiments.finetune_command(*tune, resume=True), fin_log)
    assert (fin_dir / "model.safetensors").is_file()

    def no_run(cmd: list[str], log: Path, append: bool = False) -> float:
        raise AssertionError(f"ran {cmd}")

    monkeypatch.setattr(experiments, "run", no_run)
    assert experiments.pretrain(opts, [*args, "--max_steps", "6"], folder, log) == (seconds, {"pretrain_kept": True})
    opts.resume = False  # without --resume a stage always runs, as before
    with pytest.raises(AssertionError, match="ran "):
        experiments.pretrain(opts, args, folder, log)
    assert "--resume" in run_ok(["make", "-n", "reproduce", "DATA=d", "RESUME=1"])
    assert "--resume" not in run_ok(["make", "-n", "reproduce", "DATA=d"])


def test_ctrl_c_lets_the_stage_save_its_checkpoint_before_the_run_stops(tmp_path):
    """Ctrl-C reaches the driver and its stage alike (one process group); the training stage finishes its step and
    saves a checkpoint, which takes seconds: the driver waits for it (subprocess.run killed it after 0.25 s) and
    then stops with one line."""
    stage = tmp_path / "stage.py"
    stage.write_text(textwrap.dedent(f"""\
        import pathlib, signal, sys, time
        out = pathlib.Path({str(tmp_path)!r})
        def save_and_stop(*_):
            time.sleep(1.5)  # the step in flight and the checkpoint
            (out / "saved").write_text("yes")
            sys.exit(130)
        signal.signal(signal.SIGINT, save_and_stop)
        (out / "ready").write_text("yes")
        time.sleep(60)
        """))
    driver = (f"import pathlib, sys; from chargpt.recipes import reproduce; "
              f"reproduce.run([sys.executable, {str(stage)!r}], pathlib.Path({str(tmp_path / 'stage.log')!r}))")
    env = {**ENV, "PYTHONPATH": str(ROOT)}
    # Its own process group, as a terminal's foreground job, with Ctrl-C's default action: a shell without job
    # control starts background commands (`.ci/run &`) with SIGINT ignored, and Python then never raises
    # KeyboardInterrupt.
    proc = subprocess.Popen([sys.executable, "-c", driver], cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.time() + 120
        while not (tmp_path / "ready").exists():
            assert proc.poll() is None and time.time() < deadline, "the stage never started"
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in the terminal does
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert (tmp_path / "saved").read_text() == "yes"
    assert proc.returncode == 1 and stderr.strip().splitlines() == [
        f"interrupted: the stage stopped with exit status 130 (a training stage saves a checkpoint first); "
        f"log: {tmp_path / 'stage.log'}"]


def test_make_recite_passes_the_model_width_only_when_given():
    """`make recite N_EMBD=256` is the reference-size row's command (docs/reproduce.md)."""
    def planned(*variables: str) -> str:
        return run_ok(["make", "-n", "recite", "DATA=d", *variables])

    assert "--n_embd 256" in planned("N_EMBD=256") and "--n_embd" not in planned()


def test_make_help_lists_every_target_with_what_it_does():
    targets = re.search(r"^\.PHONY: (.+)$", (ROOT / "Makefile").read_text(), re.M)[1].split()
    listed = dict(line.split(None, 1) for line in run_ok(["make", "help"]).splitlines())
    assert sorted(listed) == sorted(targets) and all(listed.values())
    assert "make best DATA=dir" in listed["best"]


def _stage_settings(recipe, opts) -> dict[str, list[dict]]:
    """Every value the recipe's two training stages resolve to (paths and the preset's name aside), as
    chargpt.recipes.recite passes its flags to them."""
    from chargpt.training import parse_args

    both, pretrain = (shlex.split(flags) for flags in recipe.stage_flags(opts))
    epochs = ["--num_train_epochs", str(recipe.settled(opts).pretrain_epochs)]
    required = {"pretrain": ["--pretrain_corpus_path", "w", "--output_dir", "x", "--mixed_qa_corpus_path", "q"],
                "finetune": ["--pretrain_corpus_path", "w", "--output_dir", "x", "--finetune_corpus_path", "t",
                             "--model_name_or_path", "m"]}
    position = ["--position_embedding_type", opts.variant]  # as chargpt.recipes.reproduce --variants passes it
    given = {"pretrain": [*both, *pretrain, *epochs, *position], "finetune": [*both, "--recite", "True"]}
    scripts = {"pretrain": train_pretrain, "finetune": train_finetune}
    return {stage: [{k: v for k, v in vars(p).items() if k not in ("preset", "mixed_qa_corpus_path")}
                    for p in parse_args(scripts[stage].build_parser(), [*required[stage], *given[stage]], stage=stage)]
            for stage in scripts}


def test_make_best_runs_recipes_best_which_is_the_recipe_of_the_measured_rows(monkeypatch):
    """`make best` = `chargpt.recipes.recite --recipe best-fast`, and with RECIPE=best `--recipe best`, into out/best
    unless told otherwise, the seeds and the variant passed through; every value RECIPE=best's stages resolve to is
    what the block-160 commands of
    results/recitation_chars_cpu.json resolved to, and its answers (the selection's and the final model's) are
    those their final models were measured with: from the recitation, continued, 4 beams, three rules."""
    recipe = importlib.import_module("chargpt.recipes.recite")
    parser = recipe.build_parser()

    def parsed(command: str):
        # the recipe as a module today, or as the measured runs recorded it (experiments/recite_recipe.py)
        measured_or_today = r"chargpt\.recipes\.recite |recite_recipe\.py "
        return parser.parse_args(shlex.split(re.split(measured_or_today, command, maxsplit=1)[1]))

    def planned(*variables: str) -> str:
        """The chargpt.recipes.recite command `make -n best DATA=d` prints, on one line."""
        lines = run_ok(["make", "-n", "best", "DATA=d", *variables]).replace("\\\n", " ").splitlines()
        return " ".join(next(line for line in lines if "chargpt.recipes.recite" in line).split())

    assert "--out_dir out/best --recipe best-fast --seeds 0 " in planned()  # make best: the third of the compute
    command = planned("SEEDS=0,1", "VARIANT=learned", "RECIPE=best")
    assert "-m chargpt.recipes.recite --data_dir d --out_dir out/best --recipe best --seeds 0,1 --variant learned" \
        in command
    best = _stage_settings(recipe, parsed(planned("SEEDS=0,1", "RECIPE=best")))  # rope
    measured = [run for run in json.loads((ROOT / "results" / "recitation_chars_cpu.json").read_text())["records"]
                if run["facts"]["part"] == "reference size, block 160"]
    assert len(measured) >= 2
    for run in measured:
        assert _stage_settings(recipe, parsed(run["command"])) == best, run["command"]
    # learned positions: what the 100-epoch rows ran with EPOCHS=100 is now the recipe's own
    made = [run for run in json.loads((ROOT / "results" / "best_cpu.json").read_text())["records"]
            if run["command"].startswith("make best ")]
    learned = [run["command"] for run in made if run["variant"] == "learned" and "EPOCHS=100" in run["command"]]
    assert len(learned) >= 2
    for run in learned:
        assert _stage_settings(recipe, parsed(planned(*shlex.split(run)[2:]))) == _stage_settings(
            recipe, parsed(command)), run
    assert recipe.settled(parsed(command)).pretrain_epochs == 100 and recipe.settled(
        parsed(planned("SEEDS=0,1", "RECIPE=best"))).pretrain_epochs == 50
    assert {run["facts"]["epochs"] for run in made} == {50, 100}
    for run in made:  # each recorded command still runs as many epochs as its row measured
        assert recipe.settled(parsed(planned(*shlex.split(run["command"])[2:]))).pretrain_epochs == \
            run["facts"]["epochs"], run["command"]
    answers = recipe.span_flags(recipe.settled(parsed(command)))
    assert " ".join(answers) == ("--answer_from_recitation True --continue_recitation True --recitation_beams 4 "
                                 "--skip_name_words True --first_of_pair True --birth_before_death True")
    steps = recipe.commands(parsed(command))
    selection = next(step for step in steps if step[1:3] == ["-m", "chargpt.recipes.select_finetune_lr"]
                     and "--final" in step)
    assert selection[selection.index("--eval_extra") + 1] == " ".join(answers)  # the rate chosen as it answers
    assert selection[selection.index("--extra") + 1].endswith(" ".join(answers))  # saved with the models
    # recite-cpu: 4 x 128, 76 epochs
    assert _stage_settings(recipe, parsed("chargpt.recipes.recite --data_dir d")) != best
    assert "--out_dir x " in planned("RECITE_OUT=x")
    # RESUME=1: the pretraining stage goes on from its latest checkpoint (chargpt.recipes.reproduce --resume)
    pretraining = [next(step for step in recipe.commands(parsed(planned(*resume)))
                        if step[1:3] == ["-m", "chargpt.recipes.reproduce"]) for resume in ([], ["RESUME=1"])]
    assert "--resume" not in pretraining[0] and "--resume" in pretraining[1]
    assert [arg for arg in pretraining[1] if arg != "--resume"] == pretraining[0]
    # and the rate selection's finetunings run again over what the stopped run left (chargpt.recipes.select_finetune_lr
    # --resume)
    selections = [[step for step in recipe.commands(parsed(planned(*resume))) if "--final" in step]
                  for resume in ([], ["RESUME=1"])]
    assert selections[1] and all("--resume" in step for step in selections[1])
    assert [[arg for arg in step if arg != "--resume"] for step in selections[1]] == selections[0]


def test_recite_recipe_after_the_faithful_pretraining_keeps_it_unchanged_and_needs_no_split(monkeypatch):
    """--recipe faithful-recite (make recite RECIPE=faithful-recite): the reference pretraining with no questions in
    it (no split step, no recitation rows), 650 epochs at the reference size unless told otherwise, then the same
    --recite selection per seed (the steps are the recitation recipe's, whose end-to-end run is tested below;
    results/span_recite_epochs_cpu.json's learned records are real runs of this plan)."""
    recipe = importlib.import_module("chargpt.recipes.recite")
    parse = recipe.build_parser().parse_args
    pretraining, *selections = recipe.commands(parse(["--data_dir", "d", "--recipe", "faithful-recite", "--seeds",
                                                      "0,1", "--no_confidence"]))
    assert pretraining[1:3] == ["-m", "chargpt.recipes.reproduce"] and [c[1:3] for c in selections] == [
        ["-m", "chargpt.recipes.select_finetune_lr"]] * 2

    def value(cmd: list[str], flag: str) -> str:
        return cmd[cmd.index(flag) + 1]

    assert value(pretraining, "--pretrain_epochs") == "650" and value(pretraining, "--pretrain_extra") == ""
    assert value(pretraining, "--extra") == "--preset faithful-recite"
    assert value(pretraining, "--finetune_extra") == "--recite False"  # the plain column finetunes as the reference
    assert value(selections[0], "--learning_rates") == "0.00015,0.0003,0.0006"
    assert value(selections[0], "--extra") == "--preset faithful-recite --recite True"
    given = recipe.commands(parse(["--data_dir", "d", "--recipe", "faithful-recite", "--pretrain_epochs", "5",
                                   "--mixed_precision", "bf16", "--learning_rates", "1e-4"]))
    assert "5" in given[0] and "--preset faithful-recite --mixed_precision bf16" in given[0] and "1e-4" in given[1]
    recitation = recipe.commands(parse(["--data_dir", "d"]))  # the default recipe, recite-cpu, keeps its own values
    assert recitation[0][-1] == "--split_only" and "76" in recitation[1] and "7.5e-5,0.00015,0.0003" in recitation[2]
    planned = " ".join(run_ok(["make", "-n", "recite", "DATA=d", "RECIPE=faithful-recite"]).replace("\\\n", " ")
                       .split())
    assert "--recipe faithful-recite" in planned and "--pretrain_epochs" not in planned
    recipe.check(parse(["--data_dir", "d", "--recipe", "faithful-recite"]))  # every stage takes these flags
    with pytest.raises(SystemExit, match="--preset"):  # and a bad one fails before the first step, as one line
        recipe.check(parse(["--data_dir", "d", "--recipe", "faithful-recite", "--extra", "--preset nope"]))


def test_recite_recipe_calibrates_with_the_recipes_confidence_flags():
    """A recipe's `confidence` section becomes chargpt.evaluation.calibrate's flags in step 4 (best.yaml: the gated
    calibration and the threshold for 95% held-out precision); a recipe without one keeps calibrate's defaults."""
    recipe = importlib.import_module("chargpt.recipes.recite")
    parse = recipe.build_parser().parse_args

    def calibration(name: str) -> list[str]:
        found = [c for c in recipe.commands(parse(["--data_dir", "d", "--recipe", name]))
                 if c[1:3] == ["-m", "chargpt.evaluation.calibrate"]]
        assert len(found) == 1
        return found[0][found[0].index("--results_path") + 2:]

    assert calibration("best") == ["--gated", "--precision", "0.95"]
    assert calibration("recite-cpu") == []
    from chargpt.evaluation import calibrate
    calibrate.build_parser().parse_args(["--model_name_or_path", "m", "--holdout", "h", "--unknown", "u",
                                         *calibration("best")])  # flags calibrate takes


def _record_processes(monkeypatch) -> list[list[str]]:
    """The argv of every process started from here on (they still run)."""
    launched: list[list[str]] = []

    class Recorded(subprocess.Popen):
        def __init__(self, args, *rest, **options):
            launched.append([str(arg) for arg in args])
            super().__init__(args, *rest, **options)

    monkeypatch.setattr(subprocess, "Popen", Recorded)
    return launched


def test_recite_recipe_reports_a_bad_training_question_from_its_split_step(tmp_path, monkeypatch, capsys):
    """The split, the recipe's first step, runs in the recipe's process: a bad row of the training questions ends
    the recipe there with the split's one line (file and line) and its exit status, before any process starts."""
    world = tmp_path / "world"
    write_synthetic_corpus(world, n_people=40, n_train=20, n_dev=10, n_test=10, seed=0)
    train = world / "birth_places_train.tsv"
    rows = train.read_text(encoding="utf-8").splitlines()
    rows[2] = rows[2].replace("\t", " ")  # line 3: no tab
    train.write_text("\n".join(rows) + "\n", encoding="utf-8")
    launched = _record_processes(monkeypatch)
    status = run_script("chargpt/recipes/recite.py", ["--data_dir", str(world), "--out_dir", str(tmp_path / "r"),
                                                         "--holdout", "5", "--threads", "1"])
    printed = capsys.readouterr()
    assert status == 1 and launched == []
    assert f"error: {train}:3:" in printed.err and "error: step 1 of 10 failed (exit status 1)" in printed.err
    assert not (tmp_path / "r" / "split" / "split" / "train.tsv").exists()


def _step(line: str) -> str:
    """The script of a planned step: "experiments/x.py", or "-m MODULE"."""
    words = shlex.split(line)
    return " ".join(words[1:3]) if words[1] == "-m" else words[1]


def test_recite_recipe_runs_the_documented_steps_and_summarises_every_seed(tmp_path, monkeypatch, capfd):
    world = tmp_path / "world"
    write_synthetic_corpus(world, n_people=80, n_train=40, n_dev=20, n_test=20, seed=0)
    out = tmp_path / "recite"
    # Seed 1 alone runs (a seed other than the split's 0: the split must not follow it); the plan for two seeds and
    # their summary are checked below without running them again (each seed is four trainings and five evaluations).
    cmd = [sys.executable, "chargpt/recipes/recite.py", "--data_dir", str(world), "--out_dir", str(out), "--seeds",
           "1", "--pretrain_epochs", "1", "--n_embd", "16", "--holdout", "10", "--learning_rates", "1e-3",
           "--threads", "1", "--extra", "--max_steps 2 --report_to none", "--pretrain_extra", "--n_layer 1 --n_head 2",
           "--unknown_people", "12"]
    assert run_script(cmd[1], [*cmd[2:], "--dry_run"]) == 0
    planned = capfd.readouterr().out.splitlines()
    assert [_step(line) for line in planned] == [
        "-m chargpt.recipes.select_finetune_lr", "-m chargpt.recipes.reproduce",
        "-m chargpt.recipes.select_finetune_lr",
        "-m data_scripts.unknown_people", "-m data_scripts.unknown_people", "evaluate_birthplace.py",
        "-m chargpt.evaluation.abstention", "-m chargpt.evaluation.abstention", "-m chargpt.evaluation.calibrate",
        "-m chargpt.evaluation.known_unknown"]
    assert "--keep_models" in planned[2]  # step 4 needs the held-out models
    assert not out.exists(), "--dry_run runs nothing"
    launched, processes = stages_in_process(monkeypatch), _record_processes(monkeypatch)
    assert run_script(cmd[1], cmd[2:]) == 0  # capfd: what its steps print too
    # Its steps run in its own process (no interpreter start for each): the only processes are the training ones
    # its drivers start, each as a user starts it, with the recipe's threads (here they run in this process; a
    # stage's own process is tested with chargpt.recipes.reproduce above).
    assert processes == [] and launched
    assert all(args[:3] == ["env", "OMP_NUM_THREADS=1", sys.executable] for args in launched)
    scripts = [Path(args[3]).name for args in launched]
    assert scripts[0] == "train_pretrain.py" and set(scripts) == {"train_pretrain.py", "train_finetune.py"}
    printed = capfd.readouterr().out
    summary = json.loads((out / "results.json").read_text())
    # as planned, with the rate the selection chose (the only one offered) in place of CHOSEN
    assert summary["steps"] == [line.replace("/CHOSEN", "/lr0.001") for line in planned]
    assert [r["seed"] for r in summary["seeds"]] == [1] and "dev, recite then answer" in printed
    # a long stage names the log that shows its progress
    assert f"(progress: {out / 'pretrain' / 'rope-causal-seed1'}-*.log)" in printed
    assert "pretraining done: 2 steps" in (out / "pretrain" / "rope-causal-seed1-pretrain.log").read_text()
    assert summary["dev_mean"] == summary["seeds"][0]["dev"] and summary["dev_std"] is None and " ± " not in printed
    # Pretraining saw the documents uncorrupted and the 30 training questions outside the 10 held out as recitation
    # rows; the rate was chosen on those same 10 (the split of seed 0, whatever the seed), then it answered dev and
    # test reciting.
    held = (out / "split" / "split" / "holdout.tsv").read_text()
    for row in summary["seeds"]:
        card = (out / "pretrain" / f"rope-causal-seed{row['seed']}-pretrain" / "README.md").read_text()
        assert "| mixed_name_prompts | 30 |" in card and "| objective | language_modeling |" in card
        assert "| mixed_qa_format | recite |" in card and f"| seed | {row['seed']} |" in card
        assert (out / "select" / f"seed{row['seed']}" / "split" / "holdout.tsv").read_text() == held
        assert row["dev_total"] == 20 and row["learning_rate"] == 1e-3
        assert 0 <= row["stored"] <= row["stored_of"] <= 20 and f"| {row['stored']} of {row['stored_of']} |" in printed
        records = Path(row["dev_predictions"] + ".records.jsonl").read_text().splitlines()
        records = [json.loads(line) for line in records]
        assert len(records) == 20 and all(r["recitation"] is not None for r in records)
        assert Path(row["test_predictions"]).read_text().count("\n") == 20
        # step 4: the held-out model (never finetuned on the 10) answered dev; the threshold was chosen on the 10
        found = json.loads(Path(row["abstention"]["file"]).read_text())
        assert found["holdout"]["predictions"].endswith(f"seed{row['seed']}/lr0.001.holdout.predictions")
        assert found["dev"]["predictions"].endswith(f"seed{row['seed']}/lr0.001.dev.predictions")
        assert found["dev"]["summary"]["with_gold"] == 20 and row["abstention"]["threshold"] == found["threshold"]
        assert (found["dev"].get("at_threshold") is None) == (found["threshold"] is None)
        at = found["dev"].get("at_threshold")
        cell = f"{100 * at['precision']:.1f}% / {100 * at['coverage']:.1f}%" if at else "no threshold reaches"
        assert f"({row['dev_correct']}/20) | {cell}" in printed
        # the threshold travels: saved into the held-out model and the final one, applied to the final one's dev
        final = json.loads(Path(row["abstention"]["file"]).parent.with_name("abstention-final").joinpath(
            "abstention.json").read_text())
        assert final["threshold"] == found["threshold"]
        assert final["dev"]["predictions"].endswith("final.dev.predictions")
        assert row["abstention"]["final_dev"] == final["dev"].get("at_threshold")
        # then the calibration fitted on the held-out model's answers replaces the final model's threshold where it
        # could be fitted (both right and wrong held-out answers), and the final model is scored on unknown people
        calibration = json.loads((out / "select" / f"seed{row['seed']}" / "calibration.json").read_text())
        measured = json.loads((out / "select" / f"seed{row['seed']}" / "known_unknown.json").read_text())
        assert measured["unknown"]["questions"] == 12 and measured["known"]["questions"] == 20
        assert row["known_unknown"]["unknown"] == measured["unknown"]
        for model in ("lr0.001-finetune", "final-finetune"):
            config = json.loads((out / "select" / f"seed{row['seed']}" / model / "config.json").read_text())
            saved = config["answering"]
            threshold = calibration.get("abstain_below", found["threshold"]) if model == "final-finetune" and \
                calibration["calibration"] else found["threshold"]
            assert saved["abstain_below"] == threshold and config["answer_format"] == "recite"
            assert (saved.get("calibration") is not None) == (model == "final-finetune" and bool(
                calibration["calibration"]))
            assert saved["answer_from_recitation"] is False  # this run's evaluations took no spans
            if found["threshold"] is not None:
                assert saved["abstention"]["holdout"].endswith("lr0.001.holdout.predictions")
    recipe = importlib.import_module("chargpt.recipes.recite")

    def plan(*flags: str) -> list[str]:
        """What --dry_run prints with these flags, from the recipe in this process (the CLI's own is checked above)."""
        return [shlex.join(c) for c in recipe.commands(recipe.build_parser().parse_args([*cmd[2:], *flags]))]

    assert plan() == planned
    # two seeds: one split and one pretraining run for both, then each seed's selection on its own model, then each
    # seed's dev answers and threshold; a table of two seeds gives their mean and spread
    two = plan("--seeds", "0,1")

    def as_seed(line: str, seed: int) -> str:
        return line.replace("seed1", f"seed{seed}").replace("--seed 1", f"--seed {seed}")

    assert two == [planned[0], planned[1].replace("--seeds 1", "--seeds 0,1"), as_seed(planned[2], 0), planned[2],
                   *planned[3:5], *(as_seed(line, 0) for line in planned[5:]), *planned[5:]]
    row = summary["seeds"][0]
    both = recipe.table({**summary, "seeds": [{**row, "seed": 0}, row], "dev_mean": 12.5, "dev_std": 3.5})
    assert both.count(f"({row['dev_correct']}/20)") == 2 and both.endswith("dev, recite then answer: 12.5% ± 3.5")
    dry = plan("--no_confidence")
    assert dry == [line.replace(" --keep_models", "") for line in planned[:3]]
    spans = plan("--answer_from_recitation")  # every reciting evaluation
    # split and pretraining (with its plain finetuning) as before; the selection passes the flag to every evaluation;
    # step 4's held-out model answers dev with it; chargpt.evaluation.abstention reads what it wrote
    flag = {2: " --eval_extra '--answer_from_recitation True'", 5: " --answer_from_recitation True"}
    # and every reciting model is finetuned to save that choice (its pipeline answers the same way)
    saving = "--recite True --answer_from_recitation True"
    assert spans == [line.replace("--recite True", saving) + flag.get(i, "") for i, line in enumerate(planned)]
    # --choose_final_questions (step 5): chargpt.recipes.choose_final_questions on the selection, then the held-out
    # model answers test (dev: step 4 did); without step 4 it answers dev too, and the selection still keeps its models
    chosen = plan("--choose_final_questions")
    assert chosen[:len(planned)] == planned
    select = out / "select" / "seed1"
    choose, test = chosen[len(planned):]
    # every step any plan holds has its script's main to run in the recipe's process
    assert {_step(line) for line in [*chosen, *spans]} == set(recipe.STEPS)
    assert choose.startswith(
        f"python -m chargpt.recipes.choose_final_questions --select_dir {select} --data_dir {world}")
    assert test.startswith(f"python evaluate_birthplace.py --model_name_or_path {select}/CHOSEN-finetune")
    assert f"--eval_corpus_path {world / 'birth_test_inputs.tsv'}" in test
    alone = plan("--choose_final_questions", "--no_confidence")
    assert alone[:3] == planned[:3] and len(alone) == 3 + 3  # with --keep_models, which the next steps need
    assert sum("birth_dev.tsv" in line and "CHOSEN-finetune" in line for line in alone) == 1
    # the summary takes the chosen model's dev and test answers: here the choice is made "mixed" by hand
    (select / "final_questions").mkdir()
    (select / "final_questions" / "choice.json").write_text(json.dumps(
        {"choice": "mixed", "mixed": 7, "all": 6, "questions": 10}))
    found = recipe.final_questions(select, 1e-3, row)
    held = [json.loads(line) for line in (select / "lr0.001.dev.predictions.records.jsonl").read_text().splitlines()]
    assert found["dev"] == found["dev_mixed_questions"] == round(100 * sum(r["correct"] for r in held) / 20, 1)
    assert found["dev_all_questions"] == row["dev"] and found["dev_total"] == 20
    assert found["dev_predictions"] == f"{select}/lr0.001.dev.predictions"
    assert found["test_predictions"] == f"{select}/lr0.001.test.predictions"
    assert found["final_questions"] == {"choice": "mixed", "mixed": 7, "all": 6, "questions": 10}
    assert "final model on the mixed questions only (held-out halves 7 vs 6)" in recipe.table(
        {**summary, "seeds": [{**row, **found}]})
    (select / "final_questions" / "choice.json").write_text(json.dumps(
        {"choice": "all", "mixed": 6, "all": 6, "questions": 10}))
    kept = recipe.final_questions(select, 1e-3, row)
    assert "dev_predictions" not in kept and kept["final_questions"]["choice"] == "all"
    more = plan("--answer_from_recitation", "--continue_recitation")
    assert more == [line.replace("--answer_from_recitation True", "--answer_from_recitation True --continue_recitation "
                                 "True") for line in spans]
    capfd.readouterr()
    assert run_script(cmd[1], [*cmd[2:], "--data_dir", str(tmp_path)]) == 1
    err = capfd.readouterr().err
    assert "Traceback" not in err and err.strip().count("\n") == 0 and "wiki.txt is missing" in err
    for bad, says in ((["--seeds", "0,x"], "--seeds '0,x'"), (["--target_precision", "1.5"], "--target_precision 1.5"),
                      (["--continue_recitation"], "--continue_recitation only changes --answer_from_recitation")):
        with pytest.raises(SystemExit) as stopped:  # checked before the first step runs, as one line
            recipe.check(recipe.build_parser().parse_args([*cmd[2:], *bad]))
        assert says in str(stopped.value.code) and "\n" not in str(stopped.value.code)



def test_best_fast_answers_with_the_pretrained_model_and_finetunes_nothing(tmp_path, monkeypatch, capfd):
    """best-fast (`make best`): its only rate is 0, no finetuning. The pretraining runs without the plain finetuning
    column; the held-out model and the final model are the pretrained model's weights with the recipe's answering
    choices saved; the held-out model's dev answers are the final model's, copied; the table says no rate was used."""
    world = tmp_path / "world"
    write_synthetic_corpus(world, n_people=60, n_train=30, n_dev=12, n_test=8, seed=0)
    out = tmp_path / "best"
    args = ["--data_dir", str(world), "--out_dir", str(out), "--recipe", "best-fast", "--pretrain_epochs", "1",
            "--n_embd", "16", "--holdout", "10", "--threads", "1", "--extra", "--max_steps 2 --report_to none",
            "--pretrain_extra", "--n_layer 1 --n_head 2", "--unknown_people", "6"]
    recipe = importlib.import_module("chargpt.recipes.recite")
    planned = [shlex.join(c) for c in recipe.commands(recipe.build_parser().parse_args(args))]
    assert planned[1].endswith("--pretrain_only") and "--learning_rates 0 " in planned[2]
    launched = stages_in_process(monkeypatch)
    assert run_script("chargpt/recipes/recite.py", args) == 0
    assert [Path(a[3]).name for a in launched] == ["train_pretrain.py"]  # no finetuning at all
    printed = capfd.readouterr().out
    summary = json.loads((out / "results.json").read_text())
    (row,) = summary["seeds"]
    assert row["learning_rate"] == 0 and row["dev_plain_finetuning"] is None and row["pretrain_flops"] > 0
    assert "| none (the pretrained model) |" in printed and "| — |" in printed
    select, pretrained = out / "select" / "seed0", out / "pretrain" / "rope-causal-seed0-pretrain"
    weights = (pretrained / "model.safetensors").read_bytes()
    for model in ("lr0-finetune", "final-finetune"):
        assert (select / model / "model.safetensors").read_bytes() == weights
        assert not (select / model / "checkpoints").exists()
        answering = json.loads((select / model / "config.json").read_text())["answering"]
        assert answering["answer_from_recitation"] is True and answering["recitation_beams"] == 4
    assert "its dev answers copied from" in printed
    assert (select / "lr0.dev.predictions").read_text() == (select / "final.dev.predictions").read_text()
    assert json.loads((select / "selection.json").read_text())["final"]["finetune_seconds"] == 0.0


def test_rate_zero_is_no_finetuning_and_needs_a_reciting_pretrained_model(tmp_path):
    select = importlib.import_module("chargpt.recipes.select_finetune_lr")
    assert select.parse_rates("0,1e-4") == [0.0, 1e-4]
    with pytest.raises(SystemExit, match="positive or 0"):
        select.parse_rates("-1e-4")
    from modeling_chargpt import CharGPTConfig
    plain = tmp_path / "plain"
    CharGPTConfig(vocab_size=8, block_size=16, n_layer=1, n_head=1, n_embd=8).save_pretrained(plain)
    with pytest.raises(SystemExit, match="not pretrained on recitation rows"):
        select.as_answering(plain, tmp_path / "out", ["--answer_from_recitation", "True"])
    assert not (tmp_path / "out").exists()
    reciting = tmp_path / "reciting"  # a preset's answering, as evaluate_birthplace.py --preset resolves it
    CharGPTConfig(vocab_size=8, block_size=16, n_layer=1, n_head=1, n_embd=8, answer_format="recite").save_pretrained(
        reciting)
    saved = select.as_answering(reciting, tmp_path / "out", ["--preset", "best-fast", "--recitation_beams", "2"])
    answering = json.loads((saved / "config.json").read_text())["answering"]
    assert answering["answer_from_recitation"] and answering["birth_before_death"] and answering[
        "recitation_beams"] == 2
