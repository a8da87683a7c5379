"""The three scripts as a user runs them: real `accelerate launch` processes on a tiny synthetic world."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch
from accelerate import Accelerator
from processes import run_concurrently, user_env
from safetensors.torch import load_file

import chargpt.training.loop
import chargpt.training.stage
import evaluate_birthplace
import train_finetune
import train_pretrain
from chargpt.training import run_cli, train
from chargpt.training.batching import WatchedBatches
from chargpt.training.flops import flops_per_position
from data_scripts import DeviceBatches, load_pretrain_corpus, question_documents, write_synthetic_corpus
from modeling_chargpt import MASK_CHAR, PAD_CHAR, CharGPTForCausalLM, CharTokenizer

ROOT = Path(__file__).resolve().parents[1]
ACCELERATE = str(Path(sys.executable).parent / "accelerate")
TINY = ["--n_layer", "2", "--n_head", "4", "--n_embd", "32", "--block_size", "64", "--dropout", "0.1"]
QUIET = ["--disable_tqdm", "True", "--report_to", "none"]
ENV = user_env()


def launch(script: str, *args: str, num_processes: int = 1) -> list[str]:
    cmd = [ACCELERATE, "launch", "--config_file", str(ROOT / "accelerate_config.yaml"),
           "--num_cpu_threads_per_process", "1"]
    if num_processes > 1:
        cmd += ["--cpu", "--num_processes", str(num_processes)]
    return [*cmd, str(ROOT / script), *args]


def run_ok(cmd: list[str], timeout: float = 300) -> subprocess.CompletedProcess:
    (proc,) = run_ok_together([cmd], timeout)
    return proc


def run_ok_together(cmds: list[list[str]], timeout: float = 300) -> list[subprocess.CompletedProcess]:
    """Independent runs side by side; each must succeed."""
    procs = run_concurrently(cmds, cwd=ROOT, env=ENV, timeout=timeout)
    for cmd, proc in zip(cmds, procs, strict=True):
        assert proc.returncode == 0, (f"{' '.join(cmd)}\nSTDOUT:\n{proc.stdout[-3000:]}\n"
                                      f"STDERR:\n{proc.stderr[-3000:]}")
    return procs


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("world")
    write_synthetic_corpus(out, n_people=80, n_train=40, n_dev=20, n_test=20, seed=0)
    return out


def pretrain_args(world: Path, out: Path, *extra: str) -> list[str]:
    return ["--pretrain_corpus_path", str(world / "wiki.txt"), "--output_dir", str(out), *TINY, *QUIET,
            "--per_device_train_batch_size", "8", *extra]


def test_pretrain_finetune_evaluate_end_to_end(world, tmp_path):
    pre, fin = tmp_path / "pre", tmp_path / "fin"
    out = run_ok(launch("train_pretrain.py", *pretrain_args(world, pre, "--max_steps", "4",
                                                            "--position_embedding_type", "rope",
                                                            "--report_to", "tensorboard")))
    assert "pretraining done: 4 steps" in out.stdout
    for name in ("config.json", "model.safetensors", "vocab.json", "README.md", "loss_curve.png",
                 "train_results.json", "modeling_chargpt.py"):
        assert (pre / name).is_file(), name
    assert list((pre / "runs").rglob("events.out.tfevents.*")), "no TensorBoard events"
    # the compute it reports: the positions of 4 packed steps (fewer than 8 padded rows of the block each), at the
    # FLOPs per position of its shape
    done = json.loads((pre / "train_results.json").read_text())
    assert 4 * 64 < done["train_positions"] < 4 * 8 * 64
    assert done["train_flops"] == pytest.approx(done["train_positions"] * flops_per_position(
        CharGPTForCausalLM.from_pretrained(pre)), rel=1e-3)
    card = (pre / "README.md").read_text()
    assert "rope" in card and "final_loss" in card
    assert "## How it answers" not in card  # a pretrained model answers no questions
    summary = json.loads((pre / "train_results.json").read_text())
    assert summary["global_step"] == 4 and 0 < summary["epoch"] < 1  # 4 of an epoch's 11 batches

    run_ok(launch("train_finetune.py", "--pretrain_corpus_path", str(world / "wiki.txt"), "--finetune_corpus_path",
                  str(world / "birth_places_train.tsv"), "--model_name_or_path", str(pre), "--output_dir", str(fin),
                  *QUIET, "--max_steps", "3", "--per_device_train_batch_size", "8"))
    model = CharGPTForCausalLM.from_pretrained(fin)
    assert model.config.position_embedding_type == "rope" and model.config.n_embd == 32

    preds, test_preds = tmp_path / "dev.predictions", tmp_path / "test.predictions"
    ev, ev_test = run_ok_together(
        [[sys.executable, str(ROOT / "evaluate_birthplace.py"), "--model_name_or_path", str(fin),
          "--eval_corpus_path", str(world / tsv), "--outputs_path", str(out)]
         for tsv, out in (("birth_dev.tsv", preds), ("birth_test_inputs.tsv", test_preds))])
    assert "Correct: " in ev.stdout and " out of 20: " in ev.stdout
    assert len(preds.read_text().split("\n")) == 20 + 1  # one line per question, newline-terminated

    assert "No gold birth places" in ev_test.stdout
    assert len(test_preds.read_text().splitlines()) == 20


def spy_on_train(monkeypatch, script) -> dict:
    """Run `script`'s real training loop, recording the dataset and keyword arguments it was given (any script:
    both end in `train_stage`)."""
    seen = {}

    def spy(accelerator, model, tokenizer, dataset, collate, args, **kwargs):
        seen.update(dataset=dataset, **kwargs)
        return train(accelerator, model, tokenizer, dataset, collate, args, **kwargs)

    monkeypatch.setattr(chargpt.training.stage, "train", spy)  # what both scripts' shared end calls
    return seen


def decoded(dataset, model_dir: Path) -> list[str]:
    itos = CharTokenizer.from_pretrained(model_dir).itos
    return ["".join(itos[i] for i in dataset[k]["input_ids"]) for k in range(len(dataset))]


def test_mixed_training_adds_the_name_prompts_to_every_epoch_and_the_schedule(world, tmp_path, monkeypatch):
    seen = spy_on_train(monkeypatch, train_pretrain)
    out = tmp_path / "mixed"
    argv = pretrain_args(world, out, "--num_train_epochs", "2", "--checkpointing_steps", "0",
                         "--mixed_qa_corpus_path", str(world / "birth_places_train.tsv"))
    assert run_cli(train_pretrain.main, argv) == 0
    dataset, n = seen["dataset"], len(load_pretrain_corpus(world / "wiki.txt")[1]) + 40
    assert len(dataset) == n  # the world's documents (the reference's split keeps a last empty one), its 40 questions
    assert sum(t.startswith("Where was ") for t in decoded(dataset, out)) == 40
    assert seen["final_tokens"] == 2 * n * 64  # the cosine spans the mixed epochs
    summary = json.loads((out / "train_results.json").read_text())
    assert summary["global_step"] == 2 * -(-n // 8) and summary["epoch"] == 2  # batch 8
    card = (out / "README.md").read_text()
    assert "mixed with name prompts" in card and "| mixed_name_prompts | 40 |" in card


@pytest.mark.parametrize("spec,counted", [(None, 64), ("2021", 63)])
def test_the_schedule_counts_the_handouts_tokens_per_example(spec, counted, world, tmp_path, monkeypatch):
    """The 2024 handout's x and y hold block_size characters, the 2021 code's one fewer: the reference schedule
    counts len(y) tokens per example, PAD included (here block_size 64, 8 examples a step)."""
    seen = spy_on_train(monkeypatch, train_pretrain)
    out = tmp_path / "run"
    flags = ["--corruption_spec", spec] if spec else []
    argv = pretrain_args(world, out, "--max_steps", "1", "--checkpointing_steps", "1", *flags)
    assert run_cli(train_pretrain.main, argv) == 0
    assert seen["tokens_per_example"] == counted
    state = json.loads((out / "checkpoints" / "step-00000001" / "trainer_state.json").read_text())
    assert state["schedule"]["tokens"] == 8 * counted


def test_device_data_pretraining_learns_checkpoints_and_resumes_identically(world, tmp_path, monkeypatch):
    """--device_data True: batches built on the device, mixed with the name prompts; a run stopped at a
    checkpoint and resumed ends with the weights and losses of one that was not."""
    built, build = [], DeviceBatches.__call__
    monkeypatch.setattr(DeviceBatches, "__call__",
                        lambda self, step: built.append(step) or build(self, step))
    steps = ["--device_data", "True", "--mixed_qa_corpus_path", str(world / "birth_places_train.tsv"),
             "--checkpointing_steps", "10", "--sync_steps", "4", "--learning_rate", "3e-3"]
    straight, stopped = tmp_path / "straight", tmp_path / "stopped"
    assert run_cli(train_pretrain.main, pretrain_args(world, straight, *steps, "--max_steps", "20")) == 0
    assert run_cli(train_pretrain.main, pretrain_args(world, stopped, *steps, "--max_steps", "10")) == 0
    assert (stopped / "checkpoints" / "step-00000010").is_dir()
    argv = pretrain_args(world, stopped, *steps, "--max_steps", "20", "--resume_from_checkpoint", "latest")
    assert run_cli(train_pretrain.main, argv) == 0
    results = [json.loads((out / "train_results.json").read_text()) for out in (straight, stopped)]
    assert results[0]["losses"] == results[1]["losses"] and results[0]["global_step"] == 20
    losses = [loss for _, loss in results[0]["losses"]]
    assert sum(losses[-4:]) < sum(losses[:4])  # it learns
    reference, resumed = load_file(straight / "model.safetensors"), load_file(stopped / "model.safetensors")
    assert all(torch.equal(reference[k], resumed[k]) for k in reference)
    assert "| device_data | True |" in (straight / "README.md").read_text()
    assert built[-10:] == list(range(10, 20))  # the resumed run built steps 10..19 on the device


def finetune_args(world: Path, out: Path, *extra: str) -> list[str]:
    return ["--pretrain_corpus_path", str(world / "wiki.txt"), "--finetune_corpus_path",
            str(world / "birth_places_train.tsv"), "--output_dir", str(out), *TINY, *QUIET,
            "--per_device_train_batch_size", "8", "--checkpointing_steps", "0", *extra]


def test_device_data_finetuning_trains_as_the_dataloader_path(world, tmp_path, monkeypatch, capsys):
    """--device_data True in finetuning: unpacked, its batches are exactly the DataLoader's, so a run (dropout on)
    ends with the same losses and weights; packed, an epoch has the DataLoader's steps; in more than one process it
    is a one-line error."""
    common = ["--num_train_epochs", "2", "--learning_rate", "3e-3", "--packing", "False"]
    loader, device = tmp_path / "loader", tmp_path / "device"
    assert run_cli(train_finetune.main, finetune_args(world, loader, *common)) == 0
    assert run_cli(train_finetune.main, finetune_args(world, device, *common, "--device_data", "True")) == 0
    results = [json.loads((out / "train_results.json").read_text()) for out in (loader, device)]
    assert results[0]["losses"] == results[1]["losses"] and results[1]["global_step"] == 10  # 40 questions, batch 8
    reference, ours = load_file(loader / "model.safetensors"), load_file(device / "model.safetensors")
    assert all(torch.equal(reference[k], ours[k]) for k in reference)
    card = (device / "README.md").read_text()
    assert "| device_data | True |" in card and "| examples | 40 |" in card

    packed = tmp_path / "packed"
    assert run_cli(train_finetune.main, finetune_args(world, packed, "--max_steps", "3", "--device_data", "True")) == 0
    summary = json.loads((packed / "train_results.json").read_text())
    assert summary["global_step"] == 3 and summary["epoch"] == round(3 / 5, 3)  # 40 questions, batch 8

    capsys.readouterr()
    monkeypatch.setattr(Accelerator, "num_processes", property(lambda self: 2))
    assert run_cli(train_finetune.main, finetune_args(world, tmp_path / "two", "--device_data", "True")) == 1
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "error: --device_data True runs in one process; launch without --num_processes")


def trained_rows(monkeypatch) -> list[tuple[int, list[list[int]]]]:
    """``(epoch, input_ids rows)`` of every batch the training loop trains on, in order."""
    seen, prepare = [], chargpt.training.loop._prepare

    def spy(*args, **kwargs):
        model, optimizer, batches = prepare(*args, **kwargs)
        return model, optimizer, WatchedBatches(batches, lambda epoch, batch: seen.append(
            (epoch, batch["input_ids"].tolist())))

    monkeypatch.setattr(chargpt.training.loop, "_prepare", spy)
    return seen


@pytest.fixture(scope="module")
def small_world(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("small_world")
    write_synthetic_corpus(out, n_people=30, n_train=20, n_dev=5, n_test=5, bios_per_person=2, seed=0)
    return out


@pytest.mark.parametrize("device_data", [False, True])
def test_mixed_epochs_with_repeated_prompts(device_data, small_world, tmp_path, monkeypatch):
    """--mixed_qa_repeats 2 over 2 epochs: every document and each of the 20 name prompts twice per epoch, on either
    data path; the schedule spans all of it."""
    world = small_world
    seen, rows = spy_on_train(monkeypatch, train_pretrain), trained_rows(monkeypatch)
    out = tmp_path / "pit"
    argv = pretrain_args(world, out, "--num_train_epochs", "2", "--checkpointing_steps", "0", "--packing", "False",
                         "--per_device_train_batch_size", "16", "--mixed_qa_corpus_path",
                         str(world / "birth_places_train.tsv"), "--mixed_qa_repeats", "2",
                         "--device_data", str(device_data))
    assert run_cli(train_pretrain.main, argv) == 0
    itos, pad = CharTokenizer.from_pretrained(out).itos, CharTokenizer.from_pretrained(out).pad_token_id
    counts = {}
    for epoch, batch in rows:
        for row in batch:
            if any(t != pad for t in row):  # the device path's last batch of an epoch has empty slots
                kind = "".join(itos[t] for t in row).startswith("Where was ")
                counts.setdefault(epoch, [0, 0])[kind] += 1
    n_docs = len(load_pretrain_corpus(world / "wiki.txt")[1])
    assert counts == {0: [n_docs, 40], 1: [n_docs, 40]}  # [documents, name prompts] per epoch
    assert seen["final_tokens"] == 2 * (n_docs + 40) * 64
    summary = json.loads((out / "train_results.json").read_text())
    assert summary["global_step"] == 2 * -(-(n_docs + 40) // 16) and summary["epoch"] == 2
    assert "| mixed_qa_repeats | 2 |" in (out / "README.md").read_text()


def test_recitation_rows_in_mixed_pretraining(world, tmp_path, monkeypatch):
    """--mixed_qa_format recite: each training question joins the epoch as its recitation row (the person's line up
    to the answer, MASK, answer, MASK), its labels skip the name, and the saved model recites when evaluated."""
    seen = spy_on_train(monkeypatch, train_pretrain)
    out = tmp_path / "recite"
    tsv = world / "birth_places_train.tsv"
    argv = pretrain_args(world, out, "--max_steps", "1", "--mixed_qa_corpus_path", str(tsv),
                         "--mixed_qa_format", "recite")
    assert run_cli(train_pretrain.main, argv) == 0
    tok = CharTokenizer.from_pretrained(out)
    docs = load_pretrain_corpus(world / "wiki.txt")[1]["text"]
    qa = [line.split("\t") for line in tsv.read_text().splitlines()]
    recited = [seen["dataset"][i] for i, (source, _) in enumerate(seen["dataset"].order) if source == 1]
    assert len(recited) == len(qa) == 40
    ends_with_answer = 0
    for row, (question, answer) in zip(recited, qa, strict=True):
        name = question[len("Where was "):-len(" born?")]
        line, rest = "".join(tok.itos[t] for t in row["input_ids"]).rstrip(PAD_CHAR).split(MASK_CHAR, 1)
        assert rest == answer + MASK_CHAR and line.startswith(name) and any(doc.startswith(line) for doc in docs)
        assert line.endswith(answer) or len(line) == 48  # else cut at the recitation limit, 3/4 of the block
        ends_with_answer += line.endswith(answer)
        assert row["labels"][:len(name)] == [-100] * len(name) and row["labels"][len(name)] != -100
    assert ends_with_answer > 10
    assert json.loads((out / "config.json").read_text())["answer_format"] == "recite"
    assert "| mixed_qa_format | recite |" in (out / "README.md").read_text()


def test_skip_recited_documents(world, tmp_path, monkeypatch):
    """--skip_recited_documents True: a person whose question is a recitation row is not also a document of the
    epoch; every other document still is, once."""
    seen = spy_on_train(monkeypatch, train_pretrain)
    tsv = world / "birth_places_train.tsv"
    argv = pretrain_args(world, tmp_path / "skip", "--max_steps", "1", "--mixed_qa_corpus_path", str(tsv),
                         "--mixed_qa_format", "recite", "--objective", "language_modeling",
                         "--skip_recited_documents", "True")
    assert run_cli(train_pretrain.main, argv) == 0
    tok = CharTokenizer.from_pretrained(tmp_path / "skip")
    docs = [doc for doc in load_pretrain_corpus(world / "wiki.txt")[1]["text"] if doc]  # the empty last line too
    names = [line.split("\t")[0][len("Where was "):-len(" born?")] for line in tsv.read_text().splitlines()]
    trained = ["".join(tok.itos[t] for t in seen["dataset"][i]["input_ids"]).rstrip(PAD_CHAR)
               for i, (source, _) in enumerate(seen["dataset"].order) if source == 0]
    recited = set(question_documents([f"Where was {name} born?" for name in names], docs, tsv))
    width = max(map(len, trained))  # the documents cut to the block
    assert sorted(trained) == sorted(doc[:width] for i, doc in enumerate(docs) if i not in recited)
    assert len(trained) == len(docs) - len(names)
    assert "| skip_recited_documents | True |" in (tmp_path / "skip" / "README.md").read_text()


def test_mixed_document_repeats(world, tmp_path, monkeypatch):
    """--mixed_document_repeats 2: every document twice per epoch, each recitation row once, and the model card
    says so."""
    seen = spy_on_train(monkeypatch, train_pretrain)
    tsv = world / "birth_places_train.tsv"
    argv = pretrain_args(world, tmp_path / "twice", "--max_steps", "1", "--mixed_qa_corpus_path", str(tsv),
                         "--mixed_qa_format", "recite", "--mixed_document_repeats", "2")
    assert run_cli(train_pretrain.main, argv) == 0
    n_docs = len(load_pretrain_corpus(world / "wiki.txt")[1])
    order = seen["dataset"].order
    assert sorted(k for source, k in order if source == 0) == sorted(list(range(n_docs)) * 2)
    assert sorted(k for source, k in order if source == 1) == list(range(40))
    assert "| mixed_document_repeats | 2 |" in (tmp_path / "twice" / "README.md").read_text()


def test_mixed_document_repeats_needs_questions(world, tmp_path, capsys):
    assert run_cli(train_pretrain.main, pretrain_args(world, tmp_path / "bad", "--mixed_document_repeats", "2")) == 1
    assert "--mixed_document_repeats needs --mixed_qa_corpus_path" in capsys.readouterr().err
    argv = pretrain_args(world, tmp_path / "zero", "--mixed_qa_corpus_path", str(world / "birth_places_train.tsv"),
                         "--mixed_document_repeats", "0")
    assert run_cli(train_pretrain.main, argv) == 1
    assert "--mixed_document_repeats must be at least 1, got 0" in capsys.readouterr().err


def test_skip_recited_documents_needs_recitation_rows(world, tmp_path, capsys):
    argv = pretrain_args(world, tmp_path / "bad", "--mixed_qa_corpus_path", str(world / "birth_places_train.tsv"),
                         "--skip_recited_documents", "True")
    assert run_cli(train_pretrain.main, argv) == 1  # a usage error
    assert "--skip_recited_documents True: with --mixed_qa_format recite" in capsys.readouterr().err


def test_two_process_cpu_ddp(world, tmp_path):
    out = tmp_path / "ddp"
    proc = run_ok(launch("train_pretrain.py", *pretrain_args(world, out, "--max_steps", "3"), num_processes=2))
    assert "pretraining done: 3 steps" in proc.stdout
    assert proc.stdout.count("pretraining done") == 1  # only the main process reports
    model = CharGPTForCausalLM.from_pretrained(out)
    assert torch.isfinite(model(torch.tensor([[2, 3, 4]])).logits).all()


def _wait_for(path_glob: str, root: Path, proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if any((p / "trainer_state.json").is_file() for p in root.glob(path_glob)):
            return
        if proc.poll() is not None:
            raise AssertionError(f"process ended ({proc.returncode}) before a checkpoint appeared")
        time.sleep(0.02)
    raise AssertionError("no checkpoint appeared")


def test_sigkill_then_resume_gives_the_same_weights_as_an_uninterrupted_run(world, tmp_path):
    steps = ["--max_steps", "150", "--checkpointing_steps", "5", "--seed", "3", "--shuffle", "True"]
    straight, again, killed = tmp_path / "straight", tmp_path / "again", tmp_path / "killed"
    script = [sys.executable, str(ROOT / "train_pretrain.py")]  # `accelerate launch` adds nothing on one process
    proc = subprocess.Popen([*script, *pretrain_args(world, killed, *steps)], cwd=ROOT, env=ENV,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    with ThreadPoolExecutor(max_workers=1) as pool:  # the two uninterrupted runs go on while this one is killed
        uninterrupted = pool.submit(run_ok_together, [[*script, *pretrain_args(world, out, *steps)]
                                                      for out in (straight, again)])
        try:
            _wait_for("checkpoints/step-*", killed, proc)
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        assert not (killed / "model.safetensors").exists(), "the run finished before it was killed"
        run_ok([*script, *pretrain_args(world, killed, *steps, "--resume_from_checkpoint", "latest")])
        uninterrupted.result()
    reference = load_file(straight / "model.safetensors")
    same_seed = load_file(again / "model.safetensors")
    assert all(torch.equal(reference[k], same_seed[k]) for k in reference), "same seed, different weights"

    resumed = load_file(killed / "model.safetensors")
    assert json.loads((killed / "train_results.json").read_text())["global_step"] == 150
    for k in reference:
        assert torch.equal(reference[k], resumed[k]), f"{k} differs after resume"


def test_ctrl_c_saves_a_checkpoint_and_exits_cleanly(world, tmp_path):
    out = tmp_path / "sigint"
    cmd = [sys.executable, str(ROOT / "train_pretrain.py"),
           *pretrain_args(world, out, "--num_train_epochs", "100000", "--checkpointing_steps", "5")]  # never ends alone
    proc = subprocess.Popen(cmd, cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_for("checkpoints/step-*", out, proc)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr[-2000:]
    assert "Traceback" not in stderr
    assert "interrupted" in stderr
    states = [json.loads(p.read_text()) for p in out.glob("checkpoints/step-*/trainer_state.json")]
    assert states and max(s["global_step"] for s in states) >= 5


def test_a_time_limit_leaves_a_model_and_a_checkpoint_that_goes_on(world, tmp_path, caplog):
    """--max_time_seconds: the run stops at the first read-back past the limit, saves the model as it is (its card
    says so) and a checkpoint; resuming from it trains to the end. In this process: the time limit is the loop's, not
    a signal's (Ctrl-C and SIGTERM to a real process: test_ctrl_c_saves_a_checkpoint_and_exits_cleanly and
    tests/test_training_loop.py)."""
    out = tmp_path / "limited"
    limited = pretrain_args(world, out, "--max_steps", "30", "--max_time_seconds", "1e-9")
    assert run_cli(train_pretrain.main, limited) == 0
    assert "stopped at --max_time_seconds 1e-09 after step 1 of 30" in caplog.text
    assert (out / "model.safetensors").is_file()
    assert json.loads((out / "train_results.json").read_text())["stopped_at_time_limit"] is True
    assert "stopped_at_time_limit" in (out / "README.md").read_text()
    assert [p.name for p in out.glob("checkpoints/step-*")] == ["step-00000001"]
    assert run_cli(train_pretrain.main, pretrain_args(world, out, "--max_steps", "30", "--resume_from_checkpoint",
                                                      "latest")) == 0
    done = json.loads((out / "train_results.json").read_text())
    assert done["global_step"] == 30 and "stopped_at_time_limit" not in done


def _bad_tsv(tmp_path: Path) -> Path:
    bad = tmp_path / "bad.tsv"
    bad.write_text("Where was A born?\tParis\nWhere was B born?\tRome\textra\n", encoding="utf-8")
    return bad


def test_bad_inputs_are_one_line_errors_in_process(world, tmp_path, capsys):
    wiki = str(world / "wiki.txt")
    cases = [
        (train_pretrain.main, ["--pretrain_corpus_path", str(tmp_path / "missing.txt"), "--output_dir",
                               str(tmp_path / "o1")], "missing.txt: file not found"),
        (train_finetune.main, ["--pretrain_corpus_path", wiki, "--finetune_corpus_path", str(_bad_tsv(tmp_path)),
                               "--output_dir", str(tmp_path / "o2"), *TINY], "bad.tsv:2:"),
        (train_pretrain.main, ["--pretrain_corpus_path", wiki, "--output_dir", str(tmp_path / "o3"),
                               "--n_embd", "30", "--n_head", "4"], "n_embd=30"),
        (train_pretrain.main, ["--pretrain_corpus_path", wiki, "--output_dir", str(tmp_path / "o4"),
                               "--mixed_qa_corpus_path", str(_bad_tsv(tmp_path)), *TINY], "bad.tsv:2:"),
        (evaluate_birthplace.main, ["--baseline", "london", "--eval_corpus_path", str(tmp_path / "none.tsv")],
         "none.tsv: file not found"),
        (evaluate_birthplace.main, ["--eval_corpus_path", wiki], "exactly one of"),
    ]
    for main, argv, expected in cases:
        assert run_cli(main, argv) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert err and err[-1].startswith("error: ") and expected in err[-1], (argv, err)
        assert not any("Traceback" in line for line in err)


def test_bad_input_reaches_the_shell_as_one_line(world, tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "train_finetune.py"), "--pretrain_corpus_path",
                           str(world / "wiki.txt"), "--finetune_corpus_path", str(_bad_tsv(tmp_path)),
                           "--output_dir", str(tmp_path / "o")], cwd=ROOT, env=ENV, capture_output=True, text=True)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "bad.tsv:2:" in lines[0]


def test_london_baseline_on_real_dev(data_dir, capsys, tmp_path):
    preds = tmp_path / "london.predictions"
    assert run_cli(evaluate_birthplace.main, ["--baseline", "london", "--eval_corpus_path",
                                              str(data_dir / "birth_dev.tsv"), "--outputs_path", str(preds)]) == 0
    assert "Correct: 25 out of 500: 5.0%" in capsys.readouterr().out
    assert preds.read_text().splitlines() == ["London"] * 500


def test_args_from_a_json_file(world, tmp_path):
    from transformers import HfArgumentParser

    from chargpt.training import ModelArguments, TrainingArguments, parse_args

    path = tmp_path / "args.json"
    path.write_text(json.dumps({"pretrain_corpus_path": "w.txt", "output_dir": "o", "n_layer": 3, "packing": False}))
    parser = HfArgumentParser((train_pretrain.PretrainDataArguments, ModelArguments, TrainingArguments))
    data_args, model_args, args = parse_args(parser, [str(path)])
    assert data_args.pretrain_corpus_path == "w.txt" and model_args.n_layer == 3 and args.packing is False


@pytest.mark.parametrize("script", [train_pretrain, train_finetune, evaluate_birthplace])
def test_help_is_complete(script, capsys):
    with pytest.raises(SystemExit) as exit_info:
        script.main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "--eval_corpus_path" in out if script is evaluate_birthplace else "--output_dir" in out


@pytest.mark.parametrize("device_data", [False, True])
def test_language_modeling_objective_in_pretraining(device_data, tmp_path, monkeypatch):
    """--objective language_modeling, on either data path: every trained row is a document's first 64 characters
    (the block), no MASK, each document once per epoch; the card says so."""
    lines = [f"Ab {c}{c.lower()}n. a painter of the north and the sea, born in Place{c} in 18{i}0."
             for i, c in enumerate("ABCDEFGH")]
    (tmp_path / "wiki.txt").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    rows = trained_rows(monkeypatch)
    out = tmp_path / "out"
    argv = pretrain_args(tmp_path, out, "--num_train_epochs", "2", "--checkpointing_steps", "0", "--packing", "False",
                         "--objective", "language_modeling", "--device_data", str(device_data))
    assert run_cli(train_pretrain.main, argv) == 0
    tok = CharTokenizer.from_pretrained(out)
    seen = ["".join(tok.itos[t] for t in row).rstrip(PAD_CHAR) for _, batch in rows for row in batch]
    assert all(len(line) > 64 for line in lines)
    # not the empty last line (nothing to predict); the device path's last batch of an epoch has empty slots
    assert sorted(text for text in seen if text) == sorted([line[:64] for line in lines] * 2)
    card = (out / "README.md").read_text()
    assert "| objective | language_modeling |" in card and "pretraining (language modeling)" in card


@pytest.mark.parametrize("device_data", [False, True])
def test_random_window_objective_in_pretraining(device_data, tmp_path, monkeypatch):
    """--objective random_window, on either data path: every trained row is 64 consecutive characters of a line, and
    over the epochs windows other than a line's first are trained; the card says so."""
    lines = [f"Ab {c}{c.lower()}n. a painter of the north and the sea, born in Place{c} in 18{i}0, died in Far{c}."
             for i, c in enumerate("ABCDEFGH")]
    (tmp_path / "wiki.txt").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    rows = trained_rows(monkeypatch)
    out = tmp_path / "out"
    argv = pretrain_args(tmp_path, out, "--num_train_epochs", "4", "--checkpointing_steps", "0", "--packing", "False",
                         "--objective", "random_window", "--device_data", str(device_data))
    assert run_cli(train_pretrain.main, argv) == 0
    tok = CharTokenizer.from_pretrained(out)
    seen = [text for _, batch in rows for row in batch if (text := "".join(tok.itos[t] for t in row).rstrip(PAD_CHAR))]
    assert len(seen) == 4 * len(lines) and all(len(text) == 64 and any(text in line for line in lines) for text in seen)
    assert any(not line.startswith(text) for text in seen for line in lines if text in line)  # not only first blocks
    card = (out / "README.md").read_text()
    assert "| objective | random_window |" in card and "pretraining (random window)" in card
