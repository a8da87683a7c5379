"""Every command README.md and docs/*.md print must still parse: docs/reproduce.md promises a command per number."""

from __future__ import annotations

import ast
import functools
import importlib.util
import re
import shlex
import sys
from pathlib import Path

import pytest

from chargpt.training.cli import UsageError, check_flags

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
DATA = "../shared/data"
# Values for the pages' shell variables (their loops run V over learned and rope, S over 0, 1, 2) and for the
# positional arguments of reproduce.md's `sel NAME MODEL SEED` helper; C a confidence folder, T a threshold, R a
# chargpt.recipes.reproduce folder, P a pretrained model, E its span-corruption epochs, K a number of beams, F a final
# model.
VARIABLES = {"D": DATA, "DIR": DATA, "V": "rope", "S": "0", "LR": "3e-4", "H": "out/held-out", "F": "out/final",
             "C": "out/conf", "T": "0.3", "R": "out/run", "P": "out/pretrained", "E": "290", "K": "4", "1": "name",
             "2": "out/model", "3": "0"}
PLACEHOLDERS = {"NAME": ["name"], "FLAGS": []}  # filled in from the prose next to the command
SHELL_OPERATORS = {"&", "&&", "|", ";", ">", ">>", "2>&1"}
HF_SCRIPTS = {"train_pretrain.py": "pretrain", "train_finetune.py": "finetune", "evaluate_birthplace.py": "evaluate"}


def readme_commands(pages: list[Path] = PAGES) -> list[str]:
    """Lines of the pages' bash blocks that run one of the repository's Python scripts, continuations joined."""
    commands = []
    for page in pages:
        for block in re.findall(r"```bash\n(.*?)```", page.read_text(), re.S):
            for line in block.replace("\\\n", " ").splitlines():
                code = line.split("  #")[0].strip()
                if code and not code.startswith("#") and re.search(r"\S+\.py\b|python -m chargpt\.", code):
                    commands.append(code)
    return commands


@functools.cache
def load(script: str):
    """A script or benchmark as a module named as when it runs, its sibling scripts loaded first the same way.

    Run as a script, its own folder is on sys.path, so `from run_experiments import ...` finds the sibling; here the
    sibling goes into sys.modules under that name instead, which needs no sys.path edit."""
    if script.startswith("chargpt/"):  # a module of the package: imported as the package has it
        return importlib.import_module(script.removesuffix(".py").replace("/", "."))
    path = ROOT / script
    loaded = sys.modules.get(path.stem)
    if loaded is not None and Path(getattr(loaded, "__file__", "")) == path:  # e.g. a root script a test imported
        return loaded
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module]
        else:
            continue
        for sibling in (path.parent / f"{name}.py" for name in names):
            if sibling.is_file():
                load(str(sibling.relative_to(ROOT)))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)  # dataclasses look themselves up
    spec.loader.exec_module(module)
    return module


def split_command(command: str) -> tuple[list[str], str, list[str]]:
    """(launcher tokens, script path, its arguments) with the README's variables and placeholders filled in; a
    module run with `python -m` gives its file's path."""
    for name, value in VARIABLES.items():
        command = re.sub(rf"\$\{{?{name}\b\}}?", value, command)
    assert "$" not in command, f"an undefined shell variable in: {command}"
    tokens = []
    for token in shlex.split(command):
        tokens += PLACEHOLDERS.get(token, [token])
    if "-m" in tokens:
        at = tokens.index("-m")
        module = tokens.pop(at + 1)
        tokens[at] = module.replace(".", "/") + ".py"
    at = next(i for i, token in enumerate(tokens) if token.endswith(".py"))
    args = tokens[at + 1:]
    cut = next((i for i, token in enumerate(args) if token in SHELL_OPERATORS), len(args))
    return tokens[:at], tokens[at], args[:cut]


def check_command(command: str) -> None:
    launcher, script, args = split_command(command)
    assert (ROOT / script).is_file(), f"{script} does not exist"
    if launcher[:2] == ["accelerate", "launch"]:
        config = launcher[launcher.index("--config_file") + 1]
        assert (ROOT / config).is_file(), f"--config_file {config} does not exist"
    else:
        assert launcher == ["python"], f"run how? {launcher}"
    for token in args:
        for path in re.findall(rf"{re.escape(DATA)}/[\w.]+", token):
            assert (ROOT / path).is_file(), f"{path} is not in the data folder"
    name = Path(script).name
    if name in HF_SCRIPTS:
        check_flags(load(script).build_parser(), args, HF_SCRIPTS[name], name)
        return
    opts = load(script).build_parser().parse_args(args)
    if script == "chargpt/recipes/reproduce.py":
        load(script).check_all_stage_flags(opts)
    elif script == "chargpt/recipes/select_finetune_lr.py":
        load(script).extra_flags(opts.extra)
    elif script == "chargpt/recipes/recite.py":
        load(script).check(opts)
    elif name == "bench_gpu.py":
        load(script).chosen_variants(opts)


def test_the_pages_print_commands_for_every_stage():
    """Guards the extraction: a reformat that hid the commands would make the test below vacuous."""
    commands = readme_commands()
    scripts = {split_command(c)[1] for c in commands if "..." not in c}
    assert len(commands) >= 50  # reproduce.md runs one command over V and S instead of repeating it
    assert {"train_pretrain.py", "train_finetune.py", "evaluate_birthplace.py", "chargpt/recipes/reproduce.py",
            "chargpt/recipes/select_finetune_lr.py", "experiments/collect_results.py",
            "chargpt/evaluation/probe_recall.py",
            "experiments/docs_tables.py", "experiments/plot_results.py",
            "experiments/benchmarks/bench_train.py"} <= scripts
    # The front page keeps the assignment's own commands: pretrain, finetune, evaluate.
    assert {"train_pretrain.py", "train_finetune.py", "evaluate_birthplace.py"} <= {
        split_command(c)[1] for c in readme_commands([ROOT / "README.md"])}


@pytest.mark.parametrize("command", [c for c in readme_commands() if "..." not in c])  # "..." = a launcher sketch
def test_a_readme_command_parses(command):
    try:
        check_command(command)
    except (SystemExit, UsageError) as err:
        pytest.fail(f"{err}\n  in: {command}", pytrace=False)


@pytest.mark.parametrize("broken", [
    "python evaluate_birthplace.py --eval_corpus_path ../shared/data/birth_dev.tsv --baseline londn",
    "accelerate launch --config_file accelerate_config.yaml train_pretrain.py --pretrain_corpus_path "
    "../shared/data/wiki.txt --output_dir o --presets cpu-fast",
    "python -m chargpt.recipes.reproduce --data_dir ../shared/data --out_dir o --skip_baselines --variants rope "
    "--extra '--mixed_qa_corpus_path ../shared/data/birth_places_train.tsv'",
    "python -m chargpt.recipes.select_finetune_lr --model_name_or_path m --data_dir ../shared/data --out_dir o "
    "--extra '--learning_rte 1e-4'",
    "python -m chargpt.evaluation.probe_recall",
    "python -m chargpt.recipes.recite --data_dir ../shared/data --pretrain_extra '--n_lyer 2'",
    "python experiments/benchmarks/bench_gpu.py --data_dir ../shared/data --variants today,fast_compield",
    "python evaluate_birthplace.py --eval_corpus_path ../shared/data/birth_dev.tssv --baseline london",
])
def test_the_check_rejects_a_broken_command(broken):
    with pytest.raises((SystemExit, UsageError, AssertionError)):
        check_command(broken)
