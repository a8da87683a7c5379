"""The training scripts' own bad inputs, as a user meets them in a shell: an output folder that cannot take the
run, a run that diverges, a checkpoint of another run. The error is the last line printed, there is no traceback, and
nothing is written. One case of each kind runs as a real process (the shell's view, side by side); the others in this
process, where the same `run_cli` prints the same line without the 5 s start of an interpreter."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from processes import ROOT, run_concurrently, user_env

import evaluate_birthplace
import train_finetune
import train_pretrain
from chargpt.training import UsageError, run_cli
from modeling_chargpt import POSITION_EMBEDDING_TYPES

TINY = ["--n_layer", "1", "--n_head", "2", "--n_embd", "32", "--block_size", "64"]
QUICK = ["--report_to", "none", "--max_steps", "1", "--per_device_train_batch_size", "4"]


def pretrain(wiki: Path, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "train_pretrain.py", "--pretrain_corpus_path", str(wiki), "--output_dir", str(out),
            *TINY, *QUICK, *extra]


def last_line(proc) -> str:
    """The one error line the user sees last; asserts the exit status, no traceback, and nothing after it."""
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    lines = proc.stderr.rstrip().splitlines()
    assert lines and lines[-1].startswith("error: "), proc.stderr[-3000:]
    assert [line for line in lines if line.startswith("error: ")] == lines[-1:]
    return lines[-1]


def in_process(cmd: list[str], capsys) -> str:
    """The error line `last_line` checks, from the script of the command `python SCRIPT ...` run in this process."""
    main = {"train_pretrain.py": train_pretrain.main, "train_finetune.py": train_finetune.main}[cmd[1]]
    assert run_cli(main, cmd[2:]) == 1
    return error_line(capsys)


@pytest.fixture(scope="module")
def finished(wiki, tmp_path_factory) -> Path:
    """A finished tiny pretraining: its final model and a checkpoint (step 1)."""
    out = tmp_path_factory.mktemp("finished") / "run"
    proc, = run_concurrently([pretrain(wiki, out, "--checkpointing_steps", "1")], cwd=ROOT, env=user_env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (out / "model.safetensors").is_file() and (out / "checkpoints" / "step-00000001").is_dir()
    return out


def test_output_folders_that_cannot_take_the_run(wiki, finished, tmp_path, capsys):
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder\n")
    cases = {  # output_dir, extra flags, the line
        "a file": (a_file, [], f"error: --output_dir {a_file}: not a folder"),
        "under a file": (a_file / "run", [],
                         f"error: --output_dir {a_file / 'run'}: cannot be created ({a_file} is a file)"),
        "unwritable": (Path("/sys/chargpt-run"), [],
                       "error: --output_dir /sys/chargpt-run: cannot write in /sys (Permission denied)"),
        "another run's model": (finished, [], f"error: --output_dir {finished} holds another run's final model "
                                f"({finished / 'config.json'}): pass --overwrite_output_dir True to replace it, or "
                                "--resume_from_checkpoint latest to continue"),
    }
    before = sorted(p.name for p in finished.iterdir())
    (case, (out, extra, expected)), *others = cases.items()
    (proc,) = run_concurrently([pretrain(wiki, out, *extra)], cwd=ROOT, env=user_env())
    assert last_line(proc) == expected, case
    for case, (out, extra, expected) in others:
        assert in_process(pretrain(wiki, out, *extra), capsys) == expected, case
    assert a_file.read_text() == "not a folder\n" and sorted(p.name for p in finished.iterdir()) == before


def test_overwrite_output_dir_replaces_another_runs_model(wiki, finished, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    for item in finished.iterdir():  # a copy of the finished run's files, not the shared fixture
        if item.is_file():
            (out / item.name).write_bytes(item.read_bytes())
    old = (out / "model.safetensors").read_bytes()
    proc, = run_concurrently([pretrain(wiki, out, "--overwrite_output_dir", "True", "--seed", "7")], cwd=ROOT,
                             env=user_env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (out / "model.safetensors").read_bytes() != old


def test_a_loss_that_becomes_nan_is_the_last_line(wiki, tmp_path):
    """The progress bar is drawn (not --disable_tqdm): it must be closed before the error, not redrawn after it."""
    out = tmp_path / "run"
    proc, = run_concurrently([pretrain(wiki, out, "--learning_rate", "1e10", "--max_grad_norm", "0", "--max_steps",
                                       "6", "--sync_steps", "1")], cwd=ROOT, env=user_env())
    assert last_line(proc) == ("error: loss became nan at step 2 (epoch 1); stopped before updating the weights. "
                               "Last good checkpoint: none. Try a lower --learning_rate.")
    assert "pretrain:" in proc.stderr  # the bar was there
    assert not (out / "model.safetensors").exists()


def test_resuming_another_runs_checkpoint_names_each_difference(wiki, finished, tmp_path, capsys):
    checkpoint = finished / "checkpoints" / "step-00000001"
    other_wiki = tmp_path / "wiki.txt"
    other_wiki.write_text(wiki.read_text(encoding="utf-8") + "Zed Q. Xu. Born in Ω.\n", encoding="utf-8")
    resume = ["--resume_from_checkpoint", str(checkpoint)]
    cases = {
        "shape": (pretrain(wiki, tmp_path / "a", *resume, "--n_embd", "64"), "n_embd 32 there, 64 here"),
        "positions": (pretrain(wiki, tmp_path / "b", *resume, "--position_embedding_type", "rope"),
                      "position_embedding_type learned there, rope here"),
        "attention": (pretrain(wiki, tmp_path / "c", *resume, "--attention_type", "synthesizer"),
                      "attention_type causal there, synthesizer here"),
        "vocabulary": (pretrain(other_wiki, tmp_path / "d", *resume), None),
        "stage": ([sys.executable, "train_finetune.py", "--pretrain_corpus_path", str(wiki), "--finetune_corpus_path",
                   str(wiki.parent / "birth_places_train.tsv"), "--output_dir", str(tmp_path / "e"), *TINY, *QUICK,
                   *resume], "stage pretrain there, finetune here"),
    }
    (proc,) = run_concurrently([cases["shape"][0]], cwd=ROOT, env=user_env())
    for case, (cmd, expected) in cases.items():
        line = last_line(proc) if case == "shape" else in_process(cmd, capsys)
        assert line.startswith(f"error: --resume_from_checkpoint {checkpoint}: written by another run ("), case
        if case == "vocabulary":
            assert "vocab_size" in line and "vocabulary of " in line, line
        else:
            assert line.endswith(f"({expected})"), (case, line)
    assert not any((tmp_path / name).exists() for name in "abcde")


# ---------------------------------------------------------------------------------------------------------------
# the same class of input, found by trying each CLI with damaged, empty and mismatched files: in this process
# ---------------------------------------------------------------------------------------------------------------


def error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.rstrip().splitlines()
    assert lines and lines[-1].startswith("error: ") and sum(line.startswith("error: ") for line in lines) == 1, err
    return lines[-1]


@pytest.mark.parametrize("name,text,expected", [
    ("empty.yaml", "", "no value for the required flag(s) pretrain_corpus_path, output_dir"),
    ("unknown.json", '{"nope": 1}', "unknown flag 'nope' (see --help)"),
    ("type.json", '{"num_train_epochs": "abc"}', "num_train_epochs: 'abc' is not a valid int"),
    ("choice.yaml", "position_embedding_type: learnt",
     f"position_embedding_type: 'learnt' is not one of {list(POSITION_EMBEDDING_TYPES)}"),
    ("absent.json", None, "file not found"),
])
def test_an_argument_file_is_checked_as_the_command_line_is(name, text, expected, tmp_path, capsys):
    path = tmp_path / name
    if text is not None:
        path.write_text(text, encoding="utf-8")
    assert run_cli(train_pretrain.main, [str(path)]) == 1
    assert error_line(capsys) == f"error: {path}: {expected}"


def test_an_argument_file_s_values_are_converted_as_flags_are(wiki, tmp_path):
    out = tmp_path / "run"
    path = tmp_path / "args.yaml"
    path.write_text(f"pretrain_corpus_path: {wiki}\noutput_dir: {out}\nn_layer: '1'\nn_head: 2\nn_embd: 32\n"
                    "block_size: 64\nmax_steps: 1\nreport_to: none\ndisable_tqdm: 'true'\n", encoding="utf-8")
    assert run_cli(train_pretrain.main, [str(path)]) == 0
    assert json.loads((out / "config.json").read_text())["n_layer"] == 1


@pytest.mark.parametrize("flags,expected", [
    (["--learning_rate", "-1"], "--learning_rate must be a positive number, got -1.0"),
    (["--learning_rate", "nan"], "--learning_rate must be a positive number, got nan"),
    (["--learning_rate", "1e38", "--max_grad_norm", "0"], "--learning_rate 1e+38: AdamW's step overflows float32; "
     "give a smaller rate"),
    (["--adam_beta1", "1"], "--adam_beta1 must be in [0, 1), got 1.0"),
    (["--num_train_epochs", "0"], "--num_train_epochs must be at least 1, got 0"),
    (["--per_device_train_batch_size", "0"], "--per_device_train_batch_size must be at least 1, got 0"),
    (["--block_size", "8"], "--block_size 8: span corruption needs an integer block_size >= 9"),
])
def test_training_values_that_cannot_train_are_one_line(flags, expected, wiki, tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["--pretrain_corpus_path", str(wiki), "--output_dir", str(out), *TINY, "--report_to", "none",
            "--max_steps", "2", "--disable_tqdm", "True", *flags]
    assert run_cli(train_pretrain.main, argv) == 1
    assert error_line(capsys).startswith("error: " + expected)
    assert not (out / "model.safetensors").exists()


@pytest.mark.parametrize("damaged", ["trainer_state.json", "model.safetensors", "optimizer.bin"])
def test_resuming_from_a_damaged_checkpoint_is_one_line(damaged, wiki, finished, tmp_path, capsys):
    out = tmp_path / "run"
    shutil.copytree(finished, out)
    checkpoint = out / "checkpoints" / "step-00000001"
    (checkpoint / damaged).write_bytes((checkpoint / damaged).read_bytes()[:20])
    argv = ["--pretrain_corpus_path", str(wiki), "--output_dir", str(out), *TINY, *QUICK, "--max_steps", "2",
            "--disable_tqdm", "True", "--resume_from_checkpoint", "latest"]
    assert run_cli(train_pretrain.main, argv) == 1
    what = f"{damaged} is damaged or truncated" if damaged.endswith(".json") else "a file of it is damaged"
    assert error_line(capsys).startswith(f"error: --resume_from_checkpoint {checkpoint}: {what}")


def test_evaluation_output_paths_are_checked_before_decoding(wiki, finished, tmp_path, capsys, monkeypatch):
    """No output can be written: one line before any question is decoded (the model is never loaded)."""
    a_file = tmp_path / "a-file"
    a_file.write_text("x\n")
    monkeypatch.setattr(evaluate_birthplace, "load_chargpt", lambda *a, **k: pytest.fail("decoded anyway"))
    dev = str(wiki.parent / "birth_dev.tsv")
    cases = [
        (["--outputs_path", str(tmp_path)], f"--outputs_path {tmp_path}: a folder, expected a file name"),
        (["--outputs_path", str(a_file / "p")], f"--outputs_path {a_file / 'p'}: cannot be created ({a_file} is a "
         "file)"),
        (["--results_path", str(a_file / "r.json")], f"--results_path {a_file / 'r.json'}: cannot be created"),
        (["--outputs_path", "/sys/p"], "--outputs_path /sys/p: cannot write in /sys (Permission denied)"),
    ]
    for flags, expected in cases:
        argv = ["--model_name_or_path", str(finished), "--eval_corpus_path", dev, *flags]
        assert run_cli(evaluate_birthplace.main, argv) == 1
        assert error_line(capsys).startswith("error: " + expected)


def test_the_converter_refuses_an_output_it_cannot_write(tmp_path, capsys):
    from test_convert_reference_checkpoint import reference_state_dict

    from modeling_chargpt.convert_reference_checkpoint import main as convert_main

    params = tmp_path / "ref.params"
    torch.save(reference_state_dict(rope=False), params)
    a_file = tmp_path / "a-file"
    a_file.write_text("x\n")
    corpus = ROOT.parent / "shared" / "data" / "wiki.txt"
    for out, expected in [(a_file, f"--output_dir {a_file}: a file, not a folder"),
                          (a_file / "c", f"--output_dir {a_file / 'c'}: cannot write there (Not a directory)")]:
        argv = ["--params", str(params), "--pretrain_corpus_path", str(corpus), "--output_dir", str(out)]
        assert convert_main(argv) == 1
        assert error_line(capsys) == "error: " + expected
    assert a_file.read_text() == "x\n"


def test_ctrl_c_with_the_progress_bar_ends_on_its_saved_checkpoint_line(wiki, tmp_path):
    """Ctrl-C is an exit path too: the bar is closed before the line that says where the checkpoint went."""
    out = tmp_path / "run"
    cmd = pretrain(wiki, out, "--max_steps", "100000", "--checkpointing_steps", "3")
    proc = subprocess.Popen(cmd, cwd=ROOT, env=user_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not list(out.glob("checkpoints/step-*")) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "Traceback" not in stderr, stderr[-3000:]
    assert "pretrain:" in stderr  # the bar was drawn
    last = stderr.rstrip().splitlines()[-1]
    assert "interrupted: saved " in last and last.endswith("continue with --resume_from_checkpoint latest"), last


@pytest.mark.parametrize("script,flags,expected", [
    (train_pretrain, ["--seeds", "0,1"], "--seeds needs --device_data True"),
    (train_pretrain, ["--block_size", "4"], "--block_size 4: span corruption needs"),
    (train_pretrain, ["--packed_rows", "2"], "--packed_rows sets the fast path's fixed rows"),
    (train_pretrain, ["--recitation_chars", "40"], "--recitation_chars 40: a positive number of characters"),
    (train_finetune, ["--finetune_corpus_path", "q.tsv", "--recitation_chars", "40"], "with --recite True"),
    (train_finetune, ["--finetune_corpus_path", "q.tsv", "--learning_rate", "-1"], "--learning_rate must be"),
])
def test_each_scripts_flag_checks_run_in_one_place_when_its_flags_are_parsed(script, flags, expected):
    """A script's checks travel with its parser: parsing its flags (as a driver checks a stage's --extra before the
    hour of pretraining) refuses what the script would, with nothing read or trained."""
    from chargpt.training.cli import check_flags, parse_args

    argv = ["--pretrain_corpus_path", "wiki.txt", "--output_dir", "o", *flags]
    with pytest.raises(UsageError, match=expected):
        parse_args(script.build_parser(), argv, stage=script.__name__.removeprefix("train_"))
    with pytest.raises(UsageError, match=expected):
        check_flags(script.build_parser(), argv, script.__name__.removeprefix("train_"), script.__name__)


def test_help_offers_every_registered_encoding_and_objective(capsys):
    """The choices a user reads in --help come from the registries, so an entry added there is offered at once."""
    from data_scripts.objectives import OBJECTIVES
    from modeling_chargpt.positions import POSITION_ENCODINGS

    with pytest.raises(SystemExit):
        train_pretrain.main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert all(f"'{name}': {objective.help}" in text for name, objective in OBJECTIVES.items())
    assert "{" + ",".join(POSITION_ENCODINGS) + "}" in text.replace(", ", ",")
