"""The errors users hit first: one line naming the file (and line), a non-zero exit, no traceback, nothing
half-written. Plus the atomic-write helper that the "nothing half-written" rests on."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
import torch
from processes import run_concurrently, user_env

import evaluate_birthplace
import train_finetune
import train_pretrain
from chargpt.training import atomic_write_json, atomic_write_text, check_chargpt_folder, load_chargpt, run_cli
from data_scripts import DataFileError, write_synthetic_corpus
from modeling_chargpt import MASK_CHAR, PAD_CHAR, CharGPTConfig, CharGPTForCausalLM, CharTokenizer


def test_atomic_write_replaces_whole_files_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "sub" / "results.json"
    atomic_write_json(path, {"a": 1})  # creates the folder
    assert json.loads(path.read_text()) == {"a": 1} and path.read_text().endswith("\n")
    atomic_write_text(path, "second\n")
    assert path.read_text() == "second\n"
    assert os.listdir(path.parent) == ["results.json"]
    plain = tmp_path / "plain.txt"
    plain.write_text("x")  # an atomic write gives the file the permissions an ordinary write would (not 0600)
    assert path.stat().st_mode & 0o777 == plain.stat().st_mode & 0o777


def test_a_failed_atomic_write_keeps_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "predictions.txt"
    path.write_text("old\n")

    def crash(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="disk full"):
        atomic_write_text(path, "new\n" * 1000)
    assert path.read_text() == "old\n"
    assert os.listdir(tmp_path) == ["predictions.txt"]  # the temporary file is gone too
    with pytest.raises(TypeError):
        atomic_write_json(path, {"not json": object()})
    assert path.read_text() == "old\n" and os.listdir(tmp_path) == ["predictions.txt"]


# ---------------------------------------------------------------------------------------------------------------
# model folders: --model_name_or_path of train_finetune.py and evaluate_birthplace.py
# ---------------------------------------------------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[1]
ENV = user_env()
SAVED_BY = "expected a chargpt model folder saved by train_pretrain.py or train_finetune.py"
QUIET = ["--disable_tqdm", "True", "--report_to", "none"]


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("world")
    write_synthetic_corpus(out, n_people=40, n_train=20, n_dev=10, n_test=10, seed=0)
    with open(out / "wiki.txt", "a", encoding="utf-8") as f:
        f.write("Ann Ab of Paris was a famous poet .\n")  # the letters the questions below use
    return out


@pytest.fixture(scope="module")
def vocab(world) -> CharTokenizer:
    return CharTokenizer.from_corpus((world / "wiki.txt").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def good(tmp_path_factory, vocab) -> Path:
    """A complete tiny chargpt folder (untrained: only loading is under test)."""
    out = tmp_path_factory.mktemp("good")
    torch.manual_seed(0)
    config = CharGPTConfig(vocab_size=vocab.vocab_size, n_layer=1, n_head=2, n_embd=32, block_size=128)
    CharGPTForCausalLM(config).save_pretrained(out)
    vocab.save_pretrained(out)
    return out


def _copy(good: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "model"
    shutil.copytree(good, folder)
    return folder


def _edit_config(folder: Path, **changes) -> Path:
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **changes}, indent=2))
    return folder


def _truncate(folder: Path) -> Path:
    data = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(data[: len(data) // 2])  # as a copy cut short by a full disk
    return folder


def _other_shapes(folder: Path) -> Path:
    config = CharGPTConfig.from_pretrained(folder)
    config.n_embd = 64
    CharGPTForCausalLM(config).save_pretrained(folder / "wide")
    shutil.move(folder / "wide" / "model.safetensors", folder / "model.safetensors")
    return folder


FOLDER_CASES = {
    "missing": (lambda f: f.parent / "nowhere", lambda f: f"{f.parent / 'nowhere'}: no such folder; {SAVED_BY}"),
    "a file": (lambda f: f / "model.safetensors", lambda f: f"{f / 'model.safetensors'}: is a file; {SAVED_BY}"),
    "no config": (lambda f: (f / "config.json").unlink() or f,
                  lambda f: f"{f}: no config.json, so not a chargpt model folder saved by train_pretrain.py or "
                            "train_finetune.py"),
    "another model type": (lambda f: _edit_config(f, model_type="gpt2"),
                           lambda f: f"{f / 'config.json'}: model_type is 'gpt2', not 'chargpt': not a chargpt model"),
    "config not JSON": (lambda f: (f / "config.json").write_text('{\n  "model_type": "chargpt",\n  oops\n}') and f,
                        lambda f: f"{f / 'config.json'}:3: not valid JSON (Expecting property name enclosed in "
                                  "double quotes, column 3)"),
    "impossible config": (lambda f: _edit_config(f, n_head=3),
                          lambda f: f"{f / 'config.json'}: n_embd=32 must be divisible by n_head=3 (allowed: "
                                    "multiples of n_head)"),
    "no weights": (lambda f: (f / "model.safetensors").unlink() or f,
                   lambda f: f"{f}: no model.safetensors (the weights); was saving interrupted?"),
    "truncated weights": (_truncate,
                          lambda f: f"{f / 'model.safetensors'}: damaged or truncated weights file (Error while "
                                    "deserializing header: incomplete metadata, file not fully covered)"),
    "weights of another shape": (_other_shapes,
                                 lambda f: f"{f / 'model.safetensors'}: does not fit config.json: lm_head.weight is "
                                           "[VOCAB, 64], config.json needs [VOCAB, 32] (and 16 more)"),
    "no vocabulary": (lambda f: (f / "vocab.json").unlink() or f,
                      lambda f: f"{f}: no vocab.json (the tokenizer's vocabulary); was saving interrupted?"),
    "vocabulary of another size": (lambda f: _edit_config(f, vocab_size=999),
                                   lambda f: f"{f / 'vocab.json'}: has VOCAB characters but config.json says "
                                             "vocab_size=999"),
    "vocabulary with gaps": (lambda f: (f / "vocab.json").write_text(json.dumps({PAD_CHAR: 0, MASK_CHAR: 1, "a": 5}))
                             and f,
                             lambda f: f"{f / 'vocab.json'}: not a chargpt vocabulary (CharTokenizer vocabulary ids "
                                       "must be 0..N-1 without gaps)"),
}


@pytest.mark.parametrize("case", list(FOLDER_CASES))
def test_a_bad_model_folder_is_one_line_naming_the_file(case, good, vocab, tmp_path):
    make, message = FOLDER_CASES[case]
    folder = make(_copy(good, tmp_path))
    expected = message(tmp_path / "model").replace("VOCAB", str(vocab.vocab_size))
    with pytest.raises(DataFileError) as err:
        load_chargpt(folder)
    assert str(err.value) == expected
    with pytest.raises(DataFileError) as err:
        check_chargpt_folder(folder)
    assert str(err.value) == expected


def test_a_good_model_folder_loads_with_overrides(good, vocab):
    model, tokenizer = load_chargpt(good, attn_pdrop=0.3)
    assert model.config.attn_pdrop == 0.3 and not model.training
    assert tokenizer.get_vocab() == vocab.get_vocab()
    reference = CharGPTForCausalLM.from_pretrained(good)
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), reference.state_dict().values(),
                                                 strict=True))


# ---------------------------------------------------------------------------------------------------------------
# the scripts, as a user runs them: exit code, stderr, and nothing written
# ---------------------------------------------------------------------------------------------------------------


def _oov(vocab: CharTokenizer) -> str:
    """An ASCII character the world's wiki.txt never uses (non-ASCII ones are dropped from training prompts)."""
    return next(c for c in "~#@$%^&*QXYqxyj" if c not in vocab.get_vocab())


def _tsv(tmp_path: Path, world: Path, name: str, bad_line: str, source: str = "birth_dev.tsv") -> Path:
    """Two good lines of the world's `source`, then `bad_line` as line 3."""
    good_lines = (world / source).read_text(encoding="utf-8").splitlines()[:2]
    path = tmp_path / name
    path.write_text("\n".join([*good_lines, bad_line]) + "\n", encoding="utf-8")
    return path


def _finetune(world: Path, out: Path, *extra: str) -> list[str]:
    return ["--pretrain_corpus_path", str(world / "wiki.txt"), "--finetune_corpus_path",
            str(world / "birth_places_train.tsv"), "--output_dir", str(out), *QUIET, "--max_steps", "1",
            "--per_device_train_batch_size", "4", *extra]


def _evaluate(tsv: Path, model: Path, tmp_path: Path, *extra: str) -> list[str]:
    return ["--eval_corpus_path", str(tsv), "--model_name_or_path", str(model), "--outputs_path",
            str(tmp_path / "preds" / "dev.predictions"), "--results_path", str(tmp_path / "preds" / "dev.json"),
            *extra]


def _error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1 and err.rstrip().endswith(lines[0]), err[-3000:]
    return lines[0]


def test_evaluation_rejects_a_question_outside_the_vocabulary_by_file_and_line(world, good, tmp_path, capsys):
    tsv = _tsv(tmp_path, world, "dev.tsv", "Where was Zoë Ωmega born?\tParis")
    assert run_cli(evaluate_birthplace.main, _evaluate(tsv, good, tmp_path)) == 1
    assert _error_line(capsys) == (
        f"error: {tsv}:3: character 'ë' (U+00EB) at position 12 is not in the vocabulary (built from the "
        "pretraining corpus); context: 'Where was Zoë Ωmega born?'")
    assert not (tmp_path / "preds").exists()


def test_evaluation_rejects_a_question_too_long_for_the_block_size(world, good, tmp_path, capsys):
    tsv = _tsv(tmp_path, world, "dev.tsv", "Where was " + "Ab" * 41 + " born?\tParis")  # 98 characters
    assert run_cli(evaluate_birthplace.main, _evaluate(tsv, good, tmp_path)) == 1
    assert _error_line(capsys) == (
        f"error: {tsv}:3: question + MASK is 99 characters; with max_new_tokens=32 decoding needs 130 positions, "
        "more than this model's block_size=128 (learned positions, causal attention)")
    assert not (tmp_path / "preds").exists()
    assert run_cli(evaluate_birthplace.main, _evaluate(tsv, good, tmp_path, "--max_new_tokens", "8")) == 0
    assert len((tmp_path / "preds" / "dev.predictions").read_text().splitlines()) == 3


def test_evaluation_of_a_damaged_model_writes_nothing(world, good, tmp_path, capsys):
    model = _truncate(_copy(good, tmp_path))
    assert run_cli(evaluate_birthplace.main, _evaluate(world / "birth_dev.tsv", model, tmp_path)) == 1
    assert _error_line(capsys).startswith(f"error: {model / 'model.safetensors'}: damaged or truncated weights file")
    assert not (tmp_path / "preds").exists()


@pytest.mark.parametrize("script", ["finetune", "mixed pretraining"])
def test_a_training_tsv_character_outside_the_vocabulary_names_file_and_line(script, world, vocab, tmp_path, capsys):
    char = _oov(vocab)
    tsv = _tsv(tmp_path, world, "train.tsv", f"Where was Ann {char}ork born?\tParis", source="birth_places_train.tsv")
    out = tmp_path / "out"
    tiny = ["--n_layer", "1", "--n_head", "2", "--n_embd", "32", "--block_size", "64"]
    if script == "finetune":
        argv = [*_finetune(world, out, *tiny)]
        argv[argv.index("--finetune_corpus_path") + 1] = str(tsv)
        main = train_finetune.main
    else:
        argv = ["--pretrain_corpus_path", str(world / "wiki.txt"), "--mixed_qa_corpus_path", str(tsv),
                "--output_dir", str(out), *QUIET, "--max_steps", "1", *tiny]
        main = train_pretrain.main
    assert run_cli(main, argv) == 1
    line = _error_line(capsys)
    assert line.startswith(f"error: {tsv}:3: character {char!r} (U+{ord(char):04X}) at position 14 is not in the "
                           "vocabulary"), line
    assert not out.exists()


@pytest.mark.parametrize("flags,expected", [
    (["--mixed_qa_repeats", "2"], "--mixed_qa_repeats needs --mixed_qa_corpus_path (the questions to train on)"),
    (["--mixed_qa_format", "recite"], "--mixed_qa_format needs --mixed_qa_corpus_path"),
    (["MIXED", "--mixed_qa_format", "recite"], "TSV:3: no document (wiki.txt line) left that starts with the name "
     "'Ab Ann': --mixed_qa_format recite needs the person's document"),
    (["MIXED", "--mixed_qa_repeats", "0"], "--mixed_qa_repeats must be at least 1, got 0"),
])
def test_mixed_training_options_are_checked_in_one_line(flags, expected, world, tmp_path, capsys):
    tsv = _tsv(tmp_path, world, "train.tsv", "Where was Ab Ann born?\tParis", source="birth_places_train.tsv")
    out = tmp_path / "out"
    flags = [f for flag in flags for f in (["--mixed_qa_corpus_path", str(tsv)] if flag == "MIXED" else [flag])]
    argv = ["--pretrain_corpus_path", str(world / "wiki.txt"), "--output_dir", str(out), *QUIET, "--max_steps", "1",
            "--n_layer", "1", "--n_head", "2", "--n_embd", "32", "--block_size", "64", *flags]
    assert run_cli(train_pretrain.main, argv) == 1
    line = _error_line(capsys)
    assert line.startswith("error: " + expected.replace("TSV", str(tsv))), line
    assert not out.exists()


def test_finetuning_from_a_bad_folder_writes_nothing(world, good, tmp_path, capsys):
    model = _edit_config(_copy(good, tmp_path), model_type="gpt2")
    out = tmp_path / "out"
    assert run_cli(train_finetune.main, _finetune(world, out, "--model_name_or_path", str(model))) == 1
    assert _error_line(capsys) == (
        f"error: {model / 'config.json'}: model_type is 'gpt2', not 'chargpt': not a chargpt model")
    assert not out.exists()


@pytest.mark.parametrize("spec", ["nowhere", "latest"])
def test_resuming_from_nothing_is_one_line(spec, world, tmp_path, capsys):
    out = tmp_path / "out"
    argv = _finetune(world, out, "--n_layer", "1", "--n_head", "2", "--n_embd", "32", "--resume_from_checkpoint",
                     str(tmp_path / spec) if spec != "latest" else spec)
    assert run_cli(train_finetune.main, argv) == 1
    if spec == "latest":
        expected = f"error: --resume_from_checkpoint latest: no checkpoint in {out / 'checkpoints'}"
    else:
        expected = (f"error: --resume_from_checkpoint {tmp_path / spec}: not a complete checkpoint "
                    "(no trainer_state.json)")
    assert _error_line(capsys) == expected
    assert not out.exists()


SHELL_CASES = ["missing model", "truncated weights", "question outside the vocabulary", "finetune from a missing model"]


def _shell_case(case: str, world: Path, good: Path, tmp_path: Path) -> tuple[list[str], str]:
    """(the script and its arguments, the one line the shell must see) for a case, its files under `tmp_path`."""
    if case == "finetune from a missing model":
        missing = tmp_path / "nowhere"
        cmd = ["train_finetune.py", *_finetune(world, tmp_path / "out", "--model_name_or_path", str(missing))]
        return cmd, f"error: {missing}: no such folder; {SAVED_BY}"
    model, tsv = good, world / "birth_dev.tsv"
    if case == "missing model":
        model = tmp_path / "nowhere"
        expected = f"error: {model}: no such folder; {SAVED_BY}"
    elif case == "truncated weights":
        model = _truncate(_copy(good, tmp_path))
        expected = (f"error: {model / 'model.safetensors'}: damaged or truncated weights file (Error while "
                    "deserializing header: incomplete metadata, file not fully covered)")
    else:
        tsv = _tsv(tmp_path, world, "dev.tsv", "Where was Zoë born?\tParis")
        expected = (f"error: {tsv}:3: character 'ë' (U+00EB) at position 12 is not in the vocabulary (built from "
                    "the pretraining corpus); context: 'Where was Zoë born?'")
    return ["evaluate_birthplace.py", *_evaluate(tsv, model, tmp_path)], expected


def test_the_shell_sees_exactly_one_line(world, good, tmp_path):
    """Real processes (side by side): exit code 1 and stderr is exactly the error line (no logs before it, no
    traceback), for each case."""
    folders = {case: tmp_path / f"case{i}" for i, case in enumerate(SHELL_CASES)}
    for folder in folders.values():
        folder.mkdir()
    cases = {case: _shell_case(case, world, good, folder) for case, folder in folders.items()}
    procs = run_concurrently([[sys.executable, *cmd] for cmd, _ in cases.values()], cwd=ROOT, env=ENV)
    for (case, (_, expected)), proc in zip(cases.items(), procs, strict=True):
        assert proc.returncode == 1, (case, proc.stderr[-3000:])
        assert proc.stderr.splitlines() == [expected], proc.stderr[-3000:]
        assert not (folders[case] / "preds").exists() and not (folders[case] / "out").exists()


def test_a_stage_run_in_this_process_writes_to_its_log_and_leaves_logging_as_it_was(tmp_path, capsys):
    """run_logged (chargpt.recipes.reproduce's evaluations): prints, progress bars, our log records and
    transformers' all land in the stage's log, not on the console; a user error is the log's `error:` line and
    status 1; the console's logging is the same afterwards, so the next stage's log gets only its own lines."""
    import logging as std_logging

    from tqdm.auto import tqdm
    from transformers.utils import logging as hf_logging

    from chargpt.training import UsageError, run_logged

    root = std_logging.getLogger()
    before = (list(root.handlers), root.level, hf_logging.get_verbosity())

    def stage(argv):
        print("printed", argv[0])
        std_logging.getLogger("chargpt.training.loop").info("our record")
        hf_logging.get_logger("transformers.modeling_utils").info("library record")
        for _ in tqdm(range(2), desc="progress"):
            pass
        raise UsageError(f"{argv[0]}:3: bad row")

    first, second = tmp_path / "first.log", tmp_path / "second.log"
    assert run_logged(stage, ["dev.tsv"], first) == 1
    log = first.read_text()
    for line in ("printed dev.tsv", "INFO chargpt.training.loop: our record",
                 "INFO transformers.modeling_utils: library record", "progress"):
        assert line in log, line
    assert log.splitlines()[-1] == "error: dev.tsv:3: bad row"
    assert capsys.readouterr() == ("", "")
    assert (list(root.handlers), root.level, hf_logging.get_verbosity()) == before
    assert run_logged(lambda argv: print("second stage"), [], second) == 0
    assert second.read_text() == "second stage\n" and first.read_text() == log


def test_a_step_run_in_this_process_prints_on_the_console_and_leaves_logging_as_it_was(monkeypatch, capsys):
    """run_in_process (chargpt.recipes.recite's steps): the step's prints, log records and one error line on the
    console, as its own process shows them; afterwards the driver's logging is as it was, so transformers' INFO records
    (every config a later model load reads) do not flood the driver's next lines."""
    import logging as std_logging

    from transformers.utils import logging as hf_logging

    from chargpt.training import UsageError
    from chargpt.training.cli import run_in_process

    root = std_logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])  # a driver's own process: no handler yet (pytest adds its own)
    monkeypatch.setattr(root, "level", std_logging.WARNING)
    hf_logging.set_verbosity_warning()
    during = []

    def step(argv):
        print("printed", argv[0])
        std_logging.getLogger("chargpt.training.loop").info("our record")
        during.append(hf_logging.get_verbosity())
        raise UsageError(f"{argv[0]}:3: bad row")

    assert run_in_process(step, ["dev.tsv"]) == 1
    out, err = capsys.readouterr()
    assert out == "printed dev.tsv\n" and err.splitlines() == ["INFO chargpt.training.loop: our record",
                                                              "error: dev.tsv:3: bad row"]
    assert during == [hf_logging.INFO]
    assert (root.handlers, root.level, hf_logging.get_verbosity()) == ([], std_logging.WARNING, hf_logging.WARNING)
