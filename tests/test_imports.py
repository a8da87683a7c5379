"""The project's modules import in one direction: no cycle, and none held together by imports inside functions."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

from chargpt.training import run_cli
from modeling_chargpt import UnknownCharacterError

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = sorted(".".join(p.parent.relative_to(ROOT).parts) for p in ROOT.glob("**/__init__.py")
                  if p.parts[len(ROOT.parts)] in {"modeling_chargpt", "data_scripts", "chargpt"})


def module_files() -> dict[str, Path]:
    """`package` and `package.module` names of the project's packages (nested ones included), with their files."""
    out = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package.replace(".", "/")).glob("*.py")):
            out[package if path.stem == "__init__" else f"{package}.{path.stem}"] = path
    return out


def imported(name: str, tree: ast.AST, known: set[str]) -> set[str]:
    """The project modules `name` imports anywhere in its file (`from .x import y` may name module `.x.y`)."""
    package = name if name in PACKAGES else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module if not node.level else ".".join(filter(None, [package, node.module]))
            candidates = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        else:
            continue
        out |= {c for c in candidates if c in known and c != name}
    return out


def test_module_names_are_found():
    """Guards the scan: an empty graph would make the cycle check vacuous."""
    modules = module_files()
    assert {"chargpt.training", "chargpt.training.errors", "chargpt.training.loop", "data_scripts",
            "modeling_chargpt"} <= set(modules)
    trees = {name: ast.parse(path.read_text(encoding="utf-8")) for name, path in modules.items()}
    assert {"chargpt.training.errors", "chargpt.training.presets"} <= imported(
        "chargpt.training.arguments", trees["chargpt.training.arguments"], set(modules))


def test_no_import_cycles():
    modules = module_files()
    graph = {name: imported(name, ast.parse(path.read_text(encoding="utf-8")), set(modules))
             for name, path in modules.items()}
    try:
        order = list(TopologicalSorter(graph).static_order())
    except CycleError as err:
        raise AssertionError(f"import cycle: {' -> '.join(err.args[1])}") from None
    assert (order.index("chargpt.training.errors") < order.index("chargpt.training.cli")
            < order.index("chargpt.training"))


def test_the_product_imports_nothing_from_the_lab():
    """experiments/ serves the research and the docs: the product (its packages and its three scripts) never imports
    a module of it, nor edits sys.path to reach one."""
    lab = {path.stem for path in (ROOT / "experiments").rglob("*.py")} | {"experiments", "benchmarks"}
    product = [*module_files().values(), *(ROOT / s for s in ("train_pretrain.py", "train_finetune.py",
                                                               "evaluate_birthplace.py"))]
    assert {"records", "docs_tables", "collect_results"} <= lab and len(product) >= 30  # the scan is not vacuous
    found = []
    for path in product:
        text = path.read_text(encoding="utf-8")
        found += [f"{path.name}: sys.path"] if "sys.path" in text else []
        for node in ast.walk(ast.parse(text)):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import) else
                     [node.module] if isinstance(node, ast.ImportFrom) and not node.level else [])
            found += [f"{path.name}:{node.lineno}: {name}" for name in names if name.split(".")[0] in lab]
    assert not found, found


# Deferred on purpose: matplotlib draws one figure at the end of a run, and importing it at the top cost every
# training process about half a second of start-up (tests and experiment scripts start many).
DEFERRED = {"matplotlib", "matplotlib.pyplot"}


def test_the_training_package_imports_at_module_level_only():
    """An import inside a function is how the old cycles were held together; none is left in chargpt/training/ but the
    deferred plotting library."""
    inside = []
    for path in sorted((ROOT / "chargpt" / "training").glob("*.py")):
        for function in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
                inside += [f"{path.name}:{node.lineno}" for node in ast.walk(function)
                           if isinstance(node, ast.ImportFrom)
                           or isinstance(node, ast.Import) and {a.name for a in node.names} - DEFERRED]
    assert not inside, f"imports inside functions: {inside}"


@pytest.mark.parametrize("package", ["data_scripts", "chargpt.training"])
def test_every_lazily_exported_name_resolves(package):
    """The packages import their names on first use (PEP 562); a name listed but not found fails here, not in a
    user's script."""
    module = importlib.import_module(package)
    assert set(module.__all__) <= set(dir(module))
    for name in module.__all__:
        assert getattr(module, name) is not None, name
    with pytest.raises(AttributeError, match="no_such_name"):
        module.no_such_name  # noqa: B018


# What the tools that read and write files but never a model import; torch, the model, datasets, accelerate and
# evaluate, which take seconds to import, must stay unloaded.
LIGHT = """
import runpy, sys
sys.path.insert(0, "experiments")  # as `python experiments/X.py` would
import data_scripts, chargpt.evaluation.confidence, chargpt.evaluation.record_files, chargpt.training
from data_scripts import DataFileError, read_text_file
from chargpt.training import UsageError, atomic_write_json, run_cli
import chargpt.evaluation.abstention
for script in ("collect_results", "docs_tables", "plot_results"):
    runpy.run_path(f"experiments/{script}.py", run_name="imported")
print(sorted(m for m in ("torch", "modeling_chargpt", "datasets", "accelerate", "evaluate") if m in sys.modules))
"""


def test_tools_that_only_read_files_start_without_torch_or_the_model():
    proc = subprocess.run([sys.executable, "-c", LIGHT], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "[]"


def test_a_character_outside_the_vocabulary_is_the_users_error_and_any_other_value_error_is_not(capsys):
    """`run_cli` finds the tokenizer's error without importing the model package itself (`expected_error`)."""

    def unknown(argv):
        raise UnknownCharacterError("character 'é' (U+00E9) at position 3 is not in the vocabulary")

    def ours(argv):
        raise ValueError("a bug of ours")

    assert run_cli(unknown, []) == 1
    assert capsys.readouterr().err.strip().endswith("error: character 'é' (U+00E9) at position 3 is not in the "
                                                    "vocabulary")
    with pytest.raises(ValueError, match="a bug of ours"):
        run_cli(ours, [])
